"""How much do the test log density estimates move with the predictive draws alone?

    python benchmarks/estimator_spread.py --dataset power --model LV-GP-GP --method iw --split 1 \\
        --iterations 10000 [--recipe fast|paper] [--set NAME=VALUE ...] [--seeds 5] [--draws 2000] \\
        [--checkpoints DIR] [--curves benchmarks/results/time_to_quality.jsonl] \\
        [--out benchmarks/results/estimator_spread.jsonl]
    python benchmarks/estimator_spread.py --table [--out FILE]

One trained model, evaluated ``--seeds`` times on the same test points, each time under another
seed of ``--draws`` predictive draws: the KDE (the paper's protocol) and the Gaussian mixture
(docs/mathematics.md §10.2–10.3). Their spread is the Monte Carlo noise of each estimate, the yardstick
for a difference between two systems or recipes. The run is ``time_to_quality.py``'s (the same data,
key and checkpoint file under ``--checkpoints``: that of its ``--out``, given here as ``--curves``), loaded
from the checkpoint it left at ``--iterations`` (train it with that script first), and the first seed
is the one it evaluated with, so the first value repeats its row. Under that seed it also splits the
gap between the two means by test point: how much of it the worst one and three points carry, and
how far (z, in standard deviations of the draws) those points lie from their predictive mean. One
JSON line per run in ``--out``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from deepgp_bench.curves import SCRIPT, json_line, number, record_problem

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import time_to_quality as ttq  # noqa: E402  (the run's data, key and checkpoint)

DEFAULT_OUT = HERE / "results" / "estimator_spread.jsonl"


def evaluate(args, overrides: dict) -> dict:
    import torch

    from deepgp import DeepGP, fit
    from deepgp.metrics import split_metrics

    torch.set_num_threads(args.threads)
    model_cfg, train_cfg = ttq.run_configs(args, overrides)
    X, Y, Xe, Ye = ttq.load_data(args)
    key = ttq.deepgp_key(args, overrides, model_cfg, len(X))
    model = DeepGP.from_config(model_cfg, X, Y, seed=args.split)
    checkpoint = ttq.checkpoint_path(args, key, Path(args.curves))
    if not checkpoint.exists():  # (training here would move time_to_quality's checkpoint past its snapshots)
        raise SystemExit(f"no checkpoint of this run for --curves {args.curves} in {args.checkpoints}: train it first "
                         f"with time_to_quality.py (the same arguments, --out {args.curves}, --snapshots ending at "
                         f"{args.iterations})")
    # with the run at --iterations this trains nothing: it loads the checkpoint
    history = fit(model, X, Y, config=train_cfg, iterations=args.iterations, checkpoint=checkpoint,
                  checkpoint_every=1000, progress=False)
    if len(history) != args.iterations:
        raise SystemExit(f"{checkpoint} holds the run at {len(history)} iterations, not {args.iterations}")
    seeds = [args.split] + [1000 + i for i in range(args.seeds - 1)]
    kde, mixture, z = per_point(model, Xe, Ye, args.draws, seeds[0])  # the first seed, point by point
    others = [split_metrics(model, Xe, Ye, args.draws, shapiro_points=3, seed=s) for s in seeds[1:]]
    gap = mixture - kde
    worst = np.argsort(-gap)[:3]
    return dict(key=key, iterations=args.iterations, seeds=seeds, n_train=len(X), n_eval=len(Xe),
                inner_width=model.config.inner_width,
                kde=[float(kde.mean())] + [v["test_loglik_kde"] for v in others],
                mixture=[float(mixture.mean())] + [v["test_loglik_mixture"] for v in others],
                gap=float(gap.mean()), gap_worst=[float(g) for g in np.cumsum(gap[worst]) / len(gap)],
                worst=[dict(z=round(float(z[i]), 2), kde=float(kde[i]), mixture=float(mixture[i])) for i in worst])


def per_point(model, X, Y, draws: int, seed: int):
    """The KDE and mixture log density of each point and its z = (y − mean of draws) / their sd (of the
    first output), from the draws ``split_metrics`` makes under ``seed`` (``deepgp.metrics.draw_blocks``)."""
    import torch

    from deepgp.metrics import draw_blocks
    from deepgp.prediction import kde_log_density, mixture_log_density

    kde, mixture, z = [], [], []
    with torch.no_grad():  # (the mixture reads σ², a trained parameter)
        for _, y, mean, var, y_draws in draw_blocks(model, X, Y, draws, seed):
            kde.append(kde_log_density(y, y_draws))
            mixture.append(mixture_log_density(model, y, mean, var))
            z.append(((y - y_draws.mean(0)) / y_draws.std(0))[:, 0])
    return tuple(torch.cat(v).cpu().numpy() for v in (kde, mixture, z))


def summary(values: list[float]) -> str:
    v = np.asarray(values)
    return f"{v.mean():.3f} ({v.min():.3f} to {v.max():.3f}; sd {v.std(ddof=1):.3f})"


def keyed(line: bytes | str) -> dict | None:
    """The JSON object on one line of ``--out`` with a run's key (time_to_quality.py's), a count of iterations
    and a finite ``gap``, or None where the line holds none."""
    rec = json_line(line)
    return None if record_problem(rec, SCRIPT, ("iterations",)) or not number(rec.get("gap")) else rec


def read_spread(line: bytes | str) -> dict | None:
    """The record on one line of ``--out`` (a run's key and its estimates under two seeds or more), or None
    where the line is not one (:func:`keyed`)."""
    r = keyed(line)
    lists = ("kde", "mixture", "gap_worst", "seeds")
    if r is None or not all(isinstance(r.get(k), list) and r[k] and all(map(number, r[k])) for k in lists):
        return None
    worst = r.get("worst")
    if len(r["kde"]) < 2 or len(r["mixture"]) < 2 or not isinstance(worst, list) or not all(
            isinstance(w, dict) and number(w.get("z")) for w in worst):
        return None
    return r


def check_out(out: Path) -> None:
    """A UsageError, touching nothing, for an ``--out`` that holds more than blank lines and yet none that
    :func:`keyed` takes: another file given by mistake, to which no record is appended."""
    lines = [line for line in out.read_bytes().split(b"\n") if line.strip()] if out.is_file() else []
    if lines and not any(map(keyed, lines)):
        raise ttq.no_record(out, "--out")


def table(out: Path) -> str:
    """Markdown: one line per record of ``out``; a line that is not one (:func:`read_spread`) is left out."""
    lines = ["| data set | model | method | recipe | settings | split | iterations | draws | seeds "
             "| KDE mean (range; sd) | mixture mean (range; sd) | mixture − KDE, first seed "
             "| of it, its worst 1 / 3 points | their z |", "|" + " --- |" * 14]
    with open(out, "rb") as f:
        records = [r for r in map(read_spread, f) if r is not None]
    for r in records:
        k = r["key"]
        zs = ", ".join(f"{w['z']:.1f}" for w in r["worst"])
        settings = ", ".join(f"{a}={b}" for a, b in k["overrides"].items()) or "-"
        lines.append(f"| {k['dataset']} | {k['model']} | {k['method'].upper()} | {k['recipe']} | {settings} "
                     f"| {k['split']} | {r['iterations']} | {k['draws']} | {len(r['seeds'])} | {summary(r['kde'])} "
                     f"| {summary(r['mixture'])} | {r['gap']:.3f} | {r['gap_worst'][0]:.3f} / {r['gap_worst'][-1]:.3f} "
                f"| {zs} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ttq.add_run_arguments(p, dataset="power")
    p.add_argument("--iterations", type=int, default=10000)
    p.add_argument("--seeds", type=int, default=5, help="evaluations, each under its own seed (at least 2)")
    p.add_argument("--curves", default=str(ttq.DEFAULT_OUT),
                   help="the --out of the time_to_quality.py run evaluated (its checkpoint is that file's)")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--table", action="store_true", help="print the Markdown table of --out and exit")
    args = p.parse_args()
    try:
        run(args)
    except ttq.UsageError as err:
        p.error(str(err))  # one line, exit status 2
    except (ValueError, OSError) as err:  # a damaged checkpoint, a full disk...: one line, exit status 1
        sys.exit(f"{p.prog}: {' '.join(str(err).split())}")


def run(args) -> None:
    from deepgp.storage import check_writable

    out = Path(args.out)
    if args.table:
        if not out.is_file():
            raise ttq.UsageError(f"--out {out}: no such file")
        sys.stdout.write(table(out))
        return
    for name, least in (("seeds", 2), ("draws", 2), ("points", 1), ("threads", 1), ("iterations", 1)):
        if getattr(args, name) < least:
            raise ttq.UsageError(f"--{name} must be at least {least}, got {getattr(args, name)}")
    try:  # before the evaluation: --out must take a line, and be a file of these records if it is there
        check_writable(out, "--out's records")
    except ValueError as err:
        raise ttq.UsageError(" ".join(str(err).split())) from None
    check_out(out)
    args.part, args.peers = "test", False  # (the fields of time_to_quality's key)
    record = evaluate(args, ttq.parse_overrides(args.set))
    ttq.append(out, record)
    print(f"{args.dataset} {args.model} {args.method} s{args.split} @{args.iterations}: "
          f"KDE {summary(record['kde'])}, mixture {summary(record['mixture'])}", flush=True)


if __name__ == "__main__":
    main()
