"""Time to quality: the test (or validation) log density of ONE training run at 1K, 2K, 5K, 10K, 20K iterations.

    python benchmarks/time_to_quality.py --dataset kin8nm --model LV-GP-GP --method iw --split 0 \\
        [--recipe fast|paper] [--set lr=0.02 --set gamma_warmup=500 ...] [--part test|validation] \\
        [--snapshots 1000,2000,5000,10000,20000] [--points 2000] [--draws 2000] \\
        [--out benchmarks/results/time_to_quality.jsonl] [--checkpoints DIR] [--peers]
    python benchmarks/time_to_quality.py --table [--out FILE] [--metric mixture|kde] [--part test]

The data are the runner's own split (``deepgp.datasets.uci.load_split``: the same shuffle, 90/10,
training-set standardisation). ``--part test`` evaluates on the split's first ``--points`` test
points (the runner's test points, capped). ``--part validation`` never touches the test points:
the split's training rows are permuted under a fixed seed (:func:`validation_split`), the last
10% (at most ``--points``) are held out and evaluated on, the rest are trained on; this is the
part on which training recipes are chosen.

At each snapshot the run records the KDE test log density over ``--draws`` predictive draws (the
paper's protocol), the mixture estimate on the same draws, the RMSE, the training wall-clock so
far (evaluation excluded) and the bound per training point (mean of the last 50 iterations), as
one JSON line, with the dtype of fit's R_lᵀA products (``products``: float32 unless
``DEEPGP_FLOAT32_PRODUCTS=0``, which then also enters the run's key). Resumable: the training state
is checkpointed after every snapshot (``deepgp.fit``'s checkpoint), and a snapshot already in
``--out`` is not recomputed, so rerunning the same command after an interruption continues where
it stopped. The checkpoint is that ``--out``'s (:func:`checkpoint_path`): the same run recorded into
another file trains from the start. A line of ``--out`` that is not JSON (a write cut short) is
skipped with a warning; a line of JSON that is no complete record is refused by its number.

``--set NAME=VALUE`` overrides any field of ModelConfig or TrainConfig (an idea being screened);
the run's key holds the overrides. ``--peers`` trains GPflux instead (``benchmarks/peers/
gpflux_quality.py`` in the peers' virtualenv, ``--peers-python``), on exactly the same training
rows and evaluation points: this script writes them to a temporary file for it.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from deepgp_bench.curves import ABSENT, SCRIPT, dataset_name, json_line, number, record_problem

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "time_to_quality.jsonl"
SNAPSHOTS = (1000, 2000, 5000, 10000, 20000)
VALIDATION_FRACTION = 0.1


def validation_split(X: np.ndarray, Y: np.ndarray, split: int, limit: int):
    """(X_fit, Y_fit, X_val, Y_val): the split's training rows permuted by ``default_rng(1000 + split)``,
    the last round(0.1·N) of them (at most ``limit``) held out. Test points are never involved."""
    order = np.random.default_rng(1000 + split).permutation(len(X))
    n_val = min(limit, max(1, round(VALIDATION_FRACTION * len(X))))
    fit_rows, val_rows = order[:-n_val], order[-n_val:]
    return X[fit_rows], Y[fit_rows], X[val_rows], Y[val_rows]


def parse_value(text: str):
    """"0.02" → 0.02, "500" → 500, "true" → True, "none" → None, "10,10" → (10, 10), anything else stays text."""
    low = text.strip().lower()
    if "," in low:
        try:
            return tuple(int(part) for part in low.split(","))
        except ValueError:
            return text
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def run_key(args, overrides: dict) -> dict:
    return dict(system="gpflux" if args.peers else "deepgp", dataset=args.dataset, model=args.model,
                method=args.method, split=args.split, part=args.part, recipe=args.recipe,
                overrides=dict(sorted(overrides.items())), points=args.points, draws=args.draws)


def deepgp_key(args, overrides: dict, model_cfg, num_data: int) -> dict:
    """The key of a deepgp run: :func:`run_key` of its overrides less the defaults, plus
    ``"products": "float64"`` where ``DEEPGP_FLOAT32_PRODUCTS=0`` makes fit's R_lᵀA products float64 (a
    float64 model opted out): such a run never resumes from, or is skipped for, the default run."""
    import torch

    from deepgp.runtime import training_products_dtype

    key = run_key(args, without_defaults(overrides, num_data))
    products = training_products_dtype(getattr(torch, model_cfg.dtype))
    if products != training_products_dtype(torch.float32):
        key["products"] = products
    return key


def without_defaults(overrides: dict, num_data: int) -> dict:
    """``overrides`` less those that set a ModelConfig or TrainConfig field to its declared default: the
    default run's key is ``{}`` however it was asked for (where a default changes, the rows run at the old
    one name its value in their key). ``inner_width`` is compared as it resolves for the run's
    ``num_data`` training points (:meth:`ModelConfig.resolved`): the width "auto" gives them is the default."""
    from deepgp.config import ModelConfig, TrainConfig

    defaults = {f.name: f.default for c in (ModelConfig, TrainConfig) for f in dataclasses.fields(c)}
    defaults["inner_width"] = ModelConfig().resolved(num_data).inner_width
    if "inner_width" in overrides:
        overrides = {**overrides, "inner_width": ModelConfig(inner_width=overrides["inner_width"])
                     .resolved(num_data).inner_width}
    return {k: v for k, v in overrides.items() if k not in defaults or defaults[k] is None or v != defaults[k]}


def key_text(key: dict) -> str:
    return json.dumps(key, sort_keys=True)


def read_out(out: Path, option: str = "--out", warn: bool = True) -> list[dict]:
    """The records of ``out``, this script's file, in order (:func:`deepgp_bench.curves.record_problem`), read
    alike by the run and the table. A line that is not JSON, a write cut short by a kill (no prefix of a record
    is JSON), is skipped, and named in one warning line on stderr where ``warn``: its snapshot runs again. A
    UsageError, touching nothing, names a file no line of which holds a run's key (another file), or its
    first line of JSON that is no complete record (damaged: a NaN, negative seconds...), which no reader
    guesses at."""
    records, torn, damaged, keyed = [], [], [], False
    with open(out, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            rec = json_line(line)
            if rec is ABSENT:
                torn.append(n)
                continue
            problem = record_problem(rec, SCRIPT)
            keyed = keyed or not record_problem(rec, SCRIPT, values=())
            if problem:
                damaged.append(f"line {n} is damaged: {problem}")
            else:
                records.append(rec)
    if not keyed and (torn or damaged):  # (no line holds a run's key)
        raise no_record(out, option)
    if damaged:
        raise UsageError(f"{option} {out}, {damaged[0]}: mend or delete that line")
    if torn and warn:
        lines = ", ".join(map(str, torn[:10])) + (f" and {len(torn) - 10} more" if len(torn) > 10 else "")
        print(f"warning: {option} {out}: skipped line{'s' if len(torn) > 1 else ''} {lines}, not JSON (a write cut "
              f"short)", file=sys.stderr)
    return records


def done_snapshots(out: Path, key: dict) -> dict[int, dict]:
    """The snapshots of this run already in ``out`` (iterations → record; :func:`read_out`, whose lines cut
    short by a kill are left out: their snapshots run again)."""
    if not out.exists():
        return {}
    return {rec["iterations"]: rec for rec in read_out(out, warn=False) if key_text(rec["key"]) == key_text(key)}


def no_record(out: Path, option: str) -> UsageError:
    return UsageError(f"{option} {out} holds no record of this script (a JSON line with a run's key): it is another "
                      f"file; give another {option}")


def append(out: Path, record: dict) -> None:
    """``record`` as one more line of ``out``; after a line cut short by a kill (no newline at the end),
    on a line of its own, so that the cut line alone is skipped when read. A value JSON cannot hold
    (NaN, an infinity) is a ValueError, before anything is written."""
    line = json.dumps(record, allow_nan=False) + "\n"
    fd = os.open(out, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        cut = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        os.write(fd, (("\n" if cut else "") + line).encode())
    finally:
        os.close(fd)


def load_data(args):
    """(X_fit, Y_fit, X_eval, Y_eval) in the runner's standardised units; ``letters`` or ``letters:N``
    is the demo's "DGP" letters set (N training points, default the demo's; split s draws them under
    seed s), standardised by its training points."""
    name, _, size = args.dataset.partition(":")
    if name == "letters":
        from deepgp.datasets.letters import load_letters
        from deepgp.demo import DemoConfig
        from deepgp.preprocessing import Standardizer

        (x, y), (xt, yt) = load_letters(int(size or DemoConfig.num_train), args.points, seed=args.split)
        sx, sy = Standardizer.fit(x), Standardizer.fit(y)
        X, Y, Xt, Yt = sx.transform(x), sy.transform(y), sx.transform(xt), sy.transform(yt)
    else:
        from deepgp.datasets.uci import load_split

        data = load_split(args.dataset, args.split, args.data_dir, test_limit=args.points)
        X, Y, Xt, Yt = data.X_train, data.Y_train, data.X_test, data.Y_test
    if args.part == "validation":
        return validation_split(X, Y, args.split, args.points)
    return X, Y, Xt, Yt


def run_deepgp(args, overrides: dict, out: Path, data=None) -> None:
    """Train and evaluate the run at each snapshot not in ``out``; ``data``: :func:`load_data`'s (loaded here
    where not given)."""
    import torch

    from deepgp import DeepGP, fit
    from deepgp.metrics import split_metrics
    from deepgp.runtime import training_products_dtype

    torch.set_num_threads(args.threads)
    X, Y, Xe, Ye = load_data(args) if data is None else data
    model_cfg, train_cfg = run_configs(args, overrides)  # (main's run() has refused a bad --set value already)
    # the key holds the values as the settings checked them ("EXP" is "exp")
    overrides = {k: getattr(model_cfg if hasattr(model_cfg, k) else train_cfg, k) for k in overrides}
    key = deepgp_key(args, overrides, model_cfg, len(X))
    products = training_products_dtype(getattr(torch, model_cfg.dtype))
    done = done_snapshots(out, key)
    Path(args.checkpoints).mkdir(exist_ok=True)  # (in a folder that exists: check_run_arguments)
    checkpoint = checkpoint_path(args, key, out)
    seconds = 0.0
    for iterations in args.snapshots:
        if iterations in done:
            seconds = done[iterations]["seconds"]
            continue
        model = DeepGP.from_config(model_cfg, X, Y, seed=args.split)
        if not checkpoint.exists():  # training starts from iteration 0: the earlier snapshot's time is not part of it
            seconds = 0.0
        t0 = time.perf_counter()
        history = fit(model, X, Y, config=train_cfg, iterations=iterations, checkpoint=checkpoint,
                      checkpoint_every=1000, progress=False)
        seconds += time.perf_counter() - t0
        if len(history) != iterations:  # its checkpoint had been trained further (not by this script's snapshots)
            raise SystemExit(f"{checkpoint} holds this run at {len(history)} iterations, past the snapshot at "
                             f"{iterations}: delete it to train from the start")
        metrics = split_metrics(model, Xe, Ye, args.draws, shapiro_points=3, seed=args.split)
        failed = [name for name in ("test_loglik_kde", "test_loglik_mixture", "test_rmse") if not number(metrics[name])]
        if failed or not number(float(np.mean(history[-50:]))):
            raise SystemExit(f"the run at {iterations} iterations gave {', '.join(failed) or 'a bound'} = "
                             f"{metrics[failed[0]] if failed else 'nan'}: not recorded")
        record = dict(key=key, iterations=iterations, seconds=round(seconds, 1),
                      bound=float(np.mean(history[-50:]) / len(X)), kde=metrics["test_loglik_kde"],
                      mixture=metrics["test_loglik_mixture"], rmse=metrics["test_rmse"], n_train=len(X),
                      n_eval=len(Xe), resolved={k: v for k, v in vars(train_cfg.resolved()).items()
                                                if k in ("lr", "gamma", "gamma_warmup", "decay", "decay_every",
                                                         "natgrad_inner", "inner_sampling", "dreg")}
                      | {"inner_width": model.config.inner_width}, products=products)
        append(out, record)
        print(f"{args.dataset} {args.model} {args.method} s{args.split} {args.part} {args.recipe} {overrides or ''} "
              f"@{iterations}: mixture {record['mixture']:.3f} kde {record['kde']:.3f} rmse {record['rmse']:.3f} "
              f"({record['seconds']:.0f}s)", flush=True)


def run_peer(args, key: dict, out: Path, data=None) -> None:
    """GPflux on the same rows and points, in the peers' virtualenv (it has no deepgp)."""
    X, Y, Xe, Ye = load_data(args) if data is None else data
    done = done_snapshots(out, key)
    todo = [i for i in args.snapshots if i not in done]
    if not todo:
        return
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.npz"
        np.savez(data, X=X, Y=Y, X_eval=Xe, Y_eval=Ye)
        cmd = [args.peers_python, str(HERE / "peers" / "gpflux_quality.py"), "--data", str(data), "--model",
               args.model, "--snapshots", ",".join(map(str, args.snapshots)), "--draws", str(args.draws),
               "--seed", str(args.split), "--threads", str(args.threads)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            rec = json.loads(line)
            if rec["iterations"] in done:
                continue
            record = dict(key=key, **rec, n_train=len(X), n_eval=len(Xe))
            append(out, record)
            print(f"GPflux {args.dataset} {args.model} s{args.split} {args.part} @{rec['iterations']}: "
                  f"mixture {rec['mixture']:.3f} kde {rec['kde']:.3f} ({rec['seconds']:.0f}s)", flush=True)
        if proc.wait() != 0:
            raise SystemExit(f"the GPflux run failed (exit status {proc.returncode})")


def table(out: Path, metric: str, part: str, paper: Path | None = None, splits: set[int] | None = None) -> str:
    """Markdown: one line per (system, dataset, model, method, recipe, overrides), the mean over splits of
    ``metric`` at each snapshot (the number of splits in brackets where it differs from the most
    common count). With ``paper`` (its Table 1 file) a column with the paper's value leads, and a
    snapshot's mean within 0.1 of it, or above, is marked ✓. ``splits``: only these splits. Runs
    evaluated on other points or draws than most of the table's are never averaged with them: their
    settings name the evaluation."""
    from deepgp_bench.markdown import markdown_cell
    from deepgp_bench.report import read_paper

    reference = read_paper(paper) if paper else {}
    cells: dict = defaultdict(lambda: defaultdict(list))
    seconds: dict = defaultdict(lambda: defaultdict(list))
    snaps: set[int] = set()
    records = read_out(out)  # (every field of each a finite number within its domain)
    if not records:  # (an empty file: no table to show)
        raise no_record(out, "--out")
    records = [rec for rec in records
               if rec["key"]["part"] == part and (splits is None or rec["key"]["split"] in splits)]
    evaluations = [(r["key"]["points"], r["key"]["draws"]) for r in records]
    usual_evaluation = max(set(evaluations), key=evaluations.count) if evaluations else None
    for rec in records:
        k = rec["key"]
        settings = [f"{a}={b}" for a, b in k["overrides"].items()]
        if "products" in k:  # fit's products opted out of float32 (DEEPGP_FLOAT32_PRODUCTS=0)
            settings.append(f"products={k['products']}")
        if (k["points"], k["draws"]) != usual_evaluation:  # another evaluation: its own line
            settings.append(f"points={k['points']}, draws={k['draws']}")
        name = (k["dataset"], k["model"], k["method"].upper(), k["system"],
                k["recipe"] if k["system"] == "deepgp" else "-", ", ".join(settings) or "-")
        cells[name][rec["iterations"]].append(rec[metric])
        seconds[name][rec["iterations"]].append(rec["seconds"])
        snaps.add(rec["iterations"])
    cols = sorted(snaps)
    counts = [len(v) for runs in cells.values() for v in runs.values()]
    usual = max(set(counts), key=counts.count) if counts else 1
    head = ["data set", "model", "method", "system", "recipe", "settings"] + (["paper"] if paper else [])
    head += [f"{c / 1000:g}K" for c in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name in sorted(cells):
        row = list(name)
        target = reference.get((name[0], name[1], name[2].lower()), (None,))[0]
        if paper:
            row.append("" if target is None else f"{target:.2f}")
        for c in cols:
            v = cells[name].get(c)
            close = v and target is not None and metric in ("kde", "mixture") and np.mean(v) >= target - 0.1
            ok = " ✓" if close else ""
            row.append("" if not v else f"{np.mean(v):.3f}{ok}" + (f" ({len(v)})" if len(v) != usual else ""))
        lines.append("| " + " | ".join(map(markdown_cell, row)) + " |")
    return "\n".join(lines) + "\n"


def add_run_arguments(p: argparse.ArgumentParser, dataset: str = "kin8nm") -> None:
    """The arguments that name a run, its data and its checkpoint folder (shared with estimator_spread.py)."""
    p.add_argument("--dataset", default=dataset, help="a UCI name, or letters[:N] (the demo's letters, N points)")
    p.add_argument("--model", default="LV-GP-GP")
    p.add_argument("--method", default="iw", choices=("vi", "iw"))
    p.add_argument("--split", type=int, default=0)
    p.add_argument("--recipe", default="fast", choices=("fast", "paper"))
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a ModelConfig or TrainConfig field (repeatable)")
    p.add_argument("--points", type=int, default=2000, help="at most this many evaluation points")
    p.add_argument("--draws", type=int, default=2000, help="predictive draws per evaluation point")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--checkpoints", default=str(Path(tempfile.gettempdir()) / "deepgp-time-to-quality"))


class UsageError(SystemExit):
    """A bad argument: main() prints its message in one line and exits with status 2."""

    def __init__(self, message: str):
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def run_configs(args, overrides: dict):
    """(ModelConfig, TrainConfig) of the run: the recipe, seed = split, K = 5 for IW, and the ``--set``
    overrides; SystemExit naming any override that is a field of neither, or a value its field refuses."""
    from deepgp.config import ModelConfig, TrainConfig, settings_of

    model_settings, train_settings = settings_of(ModelConfig, overrides), settings_of(TrainConfig, overrides)
    unknown = sorted(set(overrides) - set(model_settings) - set(train_settings))
    if unknown:
        raise UsageError(f"unknown setting(s) {unknown}: --set takes fields of ModelConfig and TrainConfig")
    own = sorted({"model", "method", "recipe", "seed", "num_samples", "iterations"} & set(overrides))
    if own:  # (the run's key names them through their options; K is 5 for IW, 1 for VI; it trains to --snapshots)
        raise UsageError(f"--set {own}: given by the options --model, --method, --recipe, --split and --snapshots, "
                         f"not --set")
    try:
        return (ModelConfig(model=args.model, **model_settings),
                TrainConfig(method=args.method, recipe=args.recipe, seed=args.split,
                            num_samples=5 if args.method == "iw" else 1, **train_settings))
    except ValueError as err:
        raise UsageError(f"--set: {err}") from None


def checkpoint_path(args, key: dict, out: Path) -> Path:
    """The run's checkpoint file in ``--checkpoints``, named by a hash of its key and one of the resolved path
    of the ``--out`` it records into: a run resumes only from its own file's checkpoint, so the records of
    one file (their seconds, the snapshots already trained past) never depend on another file's run."""
    run, owner = (hashlib.sha1(text.encode()).hexdigest() for text in (key_text(key), str(Path(out).resolve())))
    return Path(args.checkpoints) / f"{run[:16]}-{owner[:8]}.pt"


def parse_overrides(items: list[str]) -> dict:
    """``--set NAME=VALUE`` items as {NAME: value}."""
    overrides = {}
    for item in items:
        name, _, value = item.partition("=")
        overrides[name.strip()] = parse_value(value)
    return overrides


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_run_arguments(p)
    p.add_argument("--part", default="test", choices=("test", "validation"))
    p.add_argument("--snapshots", default=",".join(map(str, SNAPSHOTS)))
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--peers", action="store_true", help="train GPflux instead (benchmarks/peers/gpflux_quality.py)")
    p.add_argument("--peers-python", default=os.environ.get("DEEPGP_PEERS_PYTHON", ".venv-peers/bin/python"))
    p.add_argument("--table", action="store_true", help="print the Markdown table of --out and exit")
    p.add_argument("--metric", default="mixture", choices=("mixture", "kde", "rmse", "bound", "seconds"))
    p.add_argument("--paper", default=None, help="with --table: the paper's Table 1 CSV, shown beside each line")
    p.add_argument("--splits", default=None, help="with --table: only these splits ('0-1' or '0,2')")
    args = p.parse_args()
    try:
        run(args)
    except UsageError as err:
        p.error(str(err))  # one line, exit status 2
    except (ValueError, OSError) as err:  # a damaged checkpoint, a full disk...: one line, exit status 1
        sys.exit(f"{p.prog}: {' '.join(str(err).split())}")


def run(args) -> None:
    out = Path(args.out)
    if args.table:
        from deepgp_bench.runner import parse_splits

        for name, path in (("--out", args.out), ("--paper", args.paper)):
            if path is not None and not Path(path).is_file():
                raise UsageError(f"{name} {path}: no such file")
        try:
            splits = set(parse_splits(args.splits)) if args.splits else None
        except ValueError as err:
            raise UsageError(f"--splits: {err}") from None
        if args.paper is not None:
            from deepgp_bench.report import read_paper

            try:
                read_paper(args.paper)  # (a file that is not the paper's table is a bad argument)
            except ValueError as err:
                raise UsageError(" ".join(str(err).split())) from None
        sys.stdout.write(table(out, args.metric, args.part, Path(args.paper) if args.paper else None, splits))
        return
    check_run_arguments(args)
    overrides = parse_overrides(args.set)
    if args.peers:
        if overrides or args.method != "vi":
            raise UsageError("--peers trains GPflux's own recipe by VI: no --set, --method vi")
        if not (os.path.isfile(args.peers_python) and os.access(args.peers_python, os.X_OK)):
            raise UsageError(f"--peers-python {args.peers_python}: no such program (the peers' virtualenv's python)")
        run_peer(args, run_key(args, {}), out, checked_data(args))
    else:
        model_cfg, _ = run_configs(args, overrides)  # a bad --set value stops here, before the data are loaded
        data = checked_data(args)
        check_draws(model_cfg, data, args.draws, args.split)
        run_deepgp(args, overrides, out, data)


def check_draws(model_cfg, data, draws: int, seed: int, kind: str = "kde") -> None:
    """A UsageError naming ``--draws`` where evaluating the run's model (built as training builds it, from
    ``data``: :func:`load_data`'s) on its evaluation points over ``draws`` draws needs more memory than is
    available (:func:`deepgp.prediction.check_memory` of ``kind``: split_metrics' KDE), before any training."""
    from deepgp import DeepGP
    from deepgp.memory import MemoryBudgetError
    from deepgp.prediction import check_memory

    X, Y, Xe, _ = data
    try:
        check_memory(DeepGP.from_config(model_cfg, X, Y, seed=seed), len(Xe), draws, kind, setting="draws")
    except MemoryBudgetError as err:
        raise UsageError(err.message(option=True)) from None


def checked_data(args):
    """:func:`load_data`, with data that cannot be had (a data set not found, ``letters:N`` with more points
    than the letters have) a UsageError: a bad argument, before any training."""
    try:
        return load_data(args)
    except (ValueError, FileNotFoundError) as err:
        raise UsageError(f"--dataset {args.dataset}: {' '.join(str(err).split())}") from None


def check_checkpoints(folder) -> None:
    """UsageError unless ``--checkpoints`` names a folder, or one to make in a folder that exists (the
    folder is made, never a tree of them for a mistyped name)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--checkpoints {folder} is a file, not a folder")
    if not folder.exists() and not folder.parent.is_dir():
        raise UsageError(f"--checkpoints {folder}: the folder {folder.parent} does not exist")


def check_run_arguments(args) -> None:
    """UsageError for a value no run can use, before any training (``args.snapshots`` becomes the
    sorted list of iteration counts); ``--out`` must take a line in a folder that exists, and
    ``--checkpoints`` be a folder or one to make in a folder that exists (no tree is made for a typo)."""
    from deepgp.storage import check_writable

    try:
        snapshots = sorted({int(s) for s in str(args.snapshots).split(",") if s.strip()})
    except ValueError:
        raise UsageError(f"--snapshots must be comma-separated iteration counts, got {args.snapshots!r}") from None
    if not snapshots or snapshots[0] < 1:
        raise UsageError(f"--snapshots must be iteration counts of at least 1, got {args.snapshots!r}")
    args.snapshots = snapshots
    from deepgp_bench.runner import MAX_SPLIT

    for name, least in (("threads", 1), ("points", 1), ("draws", 2)):  # (a KDE of one draw has no bandwidth)
        if getattr(args, name) < least:
            raise UsageError(f"--{name} must be at least {least}, got {getattr(args, name)}")
    if not 0 <= args.split <= MAX_SPLIT:  # (it seeds the split's RandomState)
        raise UsageError(f"--split must be in [0, {MAX_SPLIT}], got {args.split}")
    name, colon, _ = args.dataset.partition(":")
    if name == "letters" and colon and not dataset_name(args.dataset):
        raise UsageError(f"--dataset letters:N takes N training points, at least 2, got {args.dataset!r}")
    if not dataset_name(args.dataset):
        raise UsageError(f"--dataset must be a data set's name (letters, digits and _ . + -) or letters[:N], "
                         f"got {args.dataset!r}")
    if args.data_dir is not None and not Path(args.data_dir).is_dir():  # (not $DEEPGP_DATA in its place)
        raise UsageError(f"--data-dir {args.data_dir} is not a folder")
    check_checkpoints(args.checkpoints)
    try:  # (the name as given: "" is no file name, where Path("") would be the current folder)
        check_writable(args.out, "--out's records")
    except ValueError as err:
        raise UsageError(" ".join(str(err).split())) from None
    if Path(args.out).is_file():  # (its records as the run reads them: another file or a damaged line is refused now)
        read_out(Path(args.out))


if __name__ == "__main__":
    main()
