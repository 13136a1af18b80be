"""Early stopping measured on validation parts: where it stops, and the validation density it returns.

    .venv/bin/python benchmarks/early_stopping.py --dataset boston --model LV-GP-GP --method iw \\
        [--split 0] [--num-samples K] [--iterations 10000] [--every 100] [--draws 1000] [--all-rows] \\
        [--out benchmarks/results/early_stopping_validation.jsonl]
    .venv/bin/python benchmarks/early_stopping.py --table [--out FILE] [--every 100,200] [--patience 5,10]

The data are ``time_to_quality.py --part validation``'s: the split's training rows less their last 10%
(the validation part), which is scored here and never trained on nor held out by early stopping.
K is 5 for IW and 1 for VI unless ``--num-samples`` says otherwise; the default recipe, seed = split.

A run (the default) trains with ``early_stopping=True`` and a patience no run reaches, to
``--iterations``; at every score (each ``--every`` iterations) it writes one JSON line: the held-out
score fit keeps (the mixture over :data:`deepgp.early_stopping.DRAWS` draws), the training bound's data
term on the same held-out rows (:func:`deepgp.early_stopping.held_out_bound`), the seconds each took,
the validation part's mixture log density over ``--draws`` draws, and the seconds of training so far
(fit's own scores included, this script's evaluations not). The scores draw their own random numbers,
so training does not depend on them or on the patience: where early stopping with any patience and
any multiple of ``--every`` would stop, and the state it would return, are read from this one run
(``--table``, which also checks a run stopped by fit itself against its reading when one is recorded).
``--all-rows`` trains without early stopping on every row (what a user without it gets) and records
the validation density every ``--every`` iterations. ``--stop-now`` runs fit's own early stopping with
``--patience`` (a check of the table's reading).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import time_to_quality as ttq  # noqa: E402

from deepgp.storage import check_writable  # noqa: E402

DEFAULT_OUT = HERE / "results" / "early_stopping_validation.jsonl"
NEVER = 10**9  # a patience no run reaches


def run_key(args, mode: str) -> dict:
    return dict(dataset=args.dataset, model=args.model, method=args.method, num_samples=args.num_samples,
                split=args.split, mode=mode, iterations=args.iterations, every=args.every, draws=args.draws,
                patience=args.patience if mode == "stopped" else None)


def train(args, out: Path) -> None:
    import torch

    from deepgp import DeepGP, TrainConfig, fit, storage
    from deepgp.early_stopping import held_out_bound, held_out_density, split_rows
    from deepgp.runtime import training_numerics
    from deepgp.training import _objective, _resolved

    torch.set_num_threads(args.threads)
    args.part, args.points = "validation", 2000
    X, Y, Xv, Yv = ttq.load_data(args)  # (the validation part: Xv, Yv)
    mode = "all-rows" if args.all_rows else "stopped" if args.stop_now else "held-out"
    key = run_key(args, mode)
    runs, finals = read(out) if out.exists() else ({}, {})
    name = json.dumps(key, sort_keys=True)
    if name in finals:
        print(f"{key}: recorded already", flush=True)
        return
    recorded = runs.get(name, {})
    # an interrupted run resumes from its checkpoint (training resumes bit for bit) and records what it lacks
    Path(args.checkpoints).mkdir(exist_ok=True)  # (in a folder that exists: main checked)
    checkpoint = Path(args.checkpoints) / (hashlib.sha1(name.encode()).hexdigest()[:16] + ".ckpt")
    resumed = storage.read(checkpoint, storage.CHECKPOINT)["iteration"] if checkpoint.exists() else 0
    if resumed and resumed not in recorded:
        checkpoint.unlink()  # (its records were lost: start again)
        resumed = 0
    cfg = TrainConfig(method=args.method, num_samples=args.num_samples, seed=args.split, iterations=args.iterations,
                      early_stopping=not args.all_rows, validation_every=args.every,
                      patience=args.patience if args.stop_now else NEVER)
    fit_rows = np.arange(len(X))
    if cfg.early_stopping:
        fit_rows, held = split_rows(len(X), cfg.validation_fraction, cfg.seed)
        Xh, Yh = (torch.as_tensor(a[held]) for a in (X, Y))
    model = DeepGP.from_config(_model_config(args), X[fit_rows], Y[fit_rows], seed=args.split)
    objective, numerics = _objective(_resolved(cfg), model), training_numerics()
    # spent: this script's own evaluations, less the seconds of training before the checkpoint resumed from
    start, spent = time.perf_counter(), [-recorded[resumed]["seconds"] if resumed else 0.0]

    def record(t: int, bound: float) -> None:
        if (t + 1) % args.every or t + 1 in recorded:
            return
        t0 = time.perf_counter()
        rec = dict(key=key, iteration=t + 1, seconds=round(t0 - start - spent[0], 2))
        if cfg.early_stopping:
            t1 = time.perf_counter()
            rec["density"] = held_out_density(model, Xh, Yh)
            t2 = time.perf_counter()
            rec["bound"] = held_out_bound(model, objective, Xh, Yh, numerics)
            t3 = time.perf_counter()
            rec.update(density_s=round(t2 - t1, 4), bound_s=round(t3 - t2, 4))
        rec["validation"] = float(np.mean(model.predictive_log_density(Xv, Yv, args.draws, seed=args.split)))
        model.train()
        ttq.append(out, rec)
        spent[0] += time.perf_counter() - t0

    history = fit(model, X[fit_rows] if not cfg.early_stopping else X, Y[fit_rows] if not cfg.early_stopping else Y,
                  config=cfg, progress=False, callback=record, checkpoint=checkpoint, checkpoint_every=5 * args.every)
    final = dict(key=key, done=True, iterations_run=len(history), seconds=round(history.seconds - spent[0], 2),
                 resumed_from=resumed,
                 best_iteration=history.best_iteration, stopped_at=history.stopped_at,
                 validation_returned=float(np.mean(model.predictive_log_density(Xv, Yv, args.draws, seed=args.split))),
                 n_train=int(len(fit_rows)), n_validation=len(Xv), threads=args.threads)
    if history.evaluations is not None:
        final["fit_scores"] = history.evaluations[:, 1].tolist()
    ttq.append(out, final)
    print(json.dumps({k: v for k, v in final.items() if k != "fit_scores"}), flush=True)


def _model_config(args):
    from deepgp import ModelConfig

    return ModelConfig(model=args.model)


# -- reading the runs ----------------------------------------------------------------------------
def simulate(scores: list[float], every: int, base: int, patience: int) -> tuple[int | None, int | None]:
    """(the scored iteration returned, the iteration stopped at or None) of fit's early stopping scoring every
    ``every`` iterations, from ``scores`` taken every ``base`` iterations (``every`` a multiple of it)."""
    step = every // base
    best, best_at, waited = -np.inf, None, 0
    for i in range(step - 1, len(scores), step):
        if np.isfinite(scores[i]) and scores[i] > best:
            best, best_at, waited = scores[i], (i + 1) * base, 0
        else:
            waited += 1
        if waited >= patience:
            return best_at, (i + 1) * base
    return best_at, None


def _spearman(a, b) -> float:
    ra, rb = (np.argsort(np.argsort(x)) for x in (a, b))
    return float(np.corrcoef(ra, rb)[0, 1])


def read(out: Path):
    runs: dict = defaultdict(dict)
    finals = {}
    for line in out.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        name = json.dumps(rec["key"], sort_keys=True)
        if rec.get("done"):
            finals[name] = rec
        else:
            runs[name][rec["iteration"]] = rec
    return runs, finals


def table(out: Path, everies: list[int], patiences: list[int], scores: tuple[str, ...] = ("density",)) -> str:
    runs, finals = read(out)
    held = {n: r for n, r in runs.items() if json.loads(n)["mode"] == "held-out" and n in finals}
    lines = ["| data set | model | method | K | N trained | score | every | patience | stops at | returns | "
             "validation returned | at its last | all rows at its last | returned − its last | "
             "returned − all rows |", "|" + " --- |" * 15]
    tracking = ["| data set | model | method | scores | Spearman: density | Spearman: bound | "
                "density s/score | bound s/score | step s (this run) |", "|" + " --- |" * 9]
    for name in sorted(held, key=lambda n: (json.loads(n)["model"], json.loads(n)["dataset"])):
        k, recs = json.loads(name), held[name]
        its = sorted(recs)
        base = k["every"]
        val = {i: recs[i]["validation"] for i in its}
        rows_key = json.dumps({**k, "mode": "all-rows"}, sort_keys=True)
        all_rows = runs.get(rows_key, {})
        last = its[-1]
        full = all_rows.get(last, {}).get("validation")
        for score, every, patience in ((s, e, p) for s in scores for e in everies for p in patiences):
                best_at, stopped = simulate([recs[i][score] for i in its], every, base, patience)
                got = val[best_at] if best_at else float("nan")
                lines.append("| " + " | ".join([
                    k["dataset"], k["model"], k["method"].upper(), str(k["num_samples"]),
                    str(finals[name]["n_train"]), score, str(every), str(patience),
                    f"{stopped:,}" if stopped else f"({last:,})", f"{best_at:,}" if best_at else "-",
                    f"{got:.3f}", f"{val[last]:.3f}", "" if full is None else f"{full:.3f}",
                    f"{got - val[last]:+.3f}", "" if full is None else f"{got - full:+.3f}"]) + " |")
        seconds = [recs[i]["seconds"] for i in its]
        step = (seconds[-1] - seconds[0]) / (its[-1] - its[0])
        tracking.append("| " + " | ".join([
            k["dataset"], k["model"], k["method"].upper(), str(len(its)),
            f"{_spearman([recs[i]['density'] for i in its], list(val.values())):.2f}",
            f"{_spearman([recs[i]['bound'] for i in its], list(val.values())):.2f}",
            f"{np.median([recs[i]['density_s'] for i in its]):.3f}",
            f"{np.median([recs[i]['bound_s'] for i in its]):.3f}", f"{step:.3f}"]) + " |")
    return "\n".join(lines) + "\n\n" + "\n".join(tracking) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="boston")
    p.add_argument("--model", default="LV-GP-GP")
    p.add_argument("--method", default="iw", choices=("vi", "iw"))
    p.add_argument("--num-samples", type=int, default=None, help="K (default: 5 for iw, 1 for vi)")
    p.add_argument("--split", type=int, default=0)
    p.add_argument("--iterations", type=int, default=10_000)
    p.add_argument("--every", default="100", help="iterations between two scores (and records); with --table, a list")
    p.add_argument("--draws", type=int, default=1000, help="draws per validation point")
    p.add_argument("--all-rows", action="store_true", help="no early stopping: train on every row")
    p.add_argument("--stop-now", action="store_true", help="fit's own early stopping with --patience")
    p.add_argument("--patience", default="10", help="with --stop-now, a number; with --table, a list")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--checkpoints", default=str(Path(tempfile.gettempdir()) / "deepgp-early-stopping"),
                   help="a folder for the runs' checkpoints (an interrupted run resumes from its own)")
    p.add_argument("--table", action="store_true")
    p.add_argument("--score", default="density", help="with --table: the held-out scores to stop by (density,bound)")
    args = p.parse_args()
    out = Path(args.out)
    if args.table:
        sys.stdout.write(table(out, [int(e) for e in str(args.every).split(",")],
                               [int(e) for e in args.patience.split(",")], tuple(args.score.split(","))))
        return
    if args.num_samples is None:
        args.num_samples = 5 if args.method == "iw" else 1
    args.patience, args.every = int(args.patience), int(args.every)
    try:  # before any training: --out must take a line, in a folder that exists (none is made)
        check_writable(args.out, "--out's records")
        ttq.check_checkpoints(args.checkpoints)
    except (ValueError, ttq.UsageError) as err:
        p.error(" ".join(str(err).split()))
    train(args, out)


if __name__ == "__main__":
    main()
