"""The UCI benchmark runner: one results row per (dataset, model, method, split, seed).

Resumability: the results file is a CSV that only ever grows. A row is written when its
configuration has finished, as one ``os.write`` of the whole line on an ``O_APPEND`` descriptor,
so a row is either complete or absent; a run that is killed loses only the rows in flight. On
start, rows already in the file (matched on :data:`KEY`) are skipped, and a malformed line
(e.g. a truncated last line from a crash mid-write) is ignored and its configuration rerun. A file
written before the ``inner_sampling`` and ``dtype`` columns existed is rewritten once with them
(:data:`ADDED`: the values those runs used).

Executors: ``local`` runs configurations in this process (``jobs=1``) or in a pool of ``jobs``
processes with one torch thread each; ``dask`` submits the same function to a Dask distributed
scheduler (``pip install deepgp[distributed]``) and writes rows here as they complete.
"""

from __future__ import annotations

import csv
import io
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path

DATASETS = ("boston", "concrete", "energy", "forest", "kin8nm", "power", "winered", "yacht", "naval", "protein")
# the paper's Table 1 configurations we benchmark by default: (model, method)
CONFIGS = (
    ("GP", "vi"), ("GP-GP", "vi"), ("LV-GP", "iw"), ("LV-GP-GP", "vi"), ("LV-GP-GP", "iw"), ("LV-GP-GP-GP", "iw"),
)
KEY = ("dataset", "model", "method", "split", "seed", "protocol", "iterations", "num_inducing", "test_limit",
       "inner_sampling", "dtype")
# columns added after results files existed, with the value every older row had (inner_sampling
# only means something for "iw": a "vi" row records "-")
ADDED = {"inner_sampling": lambda row: "joint" if row.get("method") == "iw" else "-", "dtype": lambda row: "float64"}
METRICS = ("test_loglik_kde", "test_loglik_mixture", "test_rmse", "shapiro_median", "bound")
COLUMNS = KEY + METRICS + ("num_samples", "n_train", "n_test", "seconds", "deepgp", "torch", "numpy", "python")
_INTS = ("split", "seed", "iterations", "num_inducing", "test_limit", "num_samples", "n_train", "n_test")


# -- configurations ------------------------------------------------------------------------------
def parse_splits(text: str) -> list[int]:
    """"0-4" → [0, 1, 2, 3, 4]; "0,2" → [0, 2]; "3" → [3]."""
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = (int(v) for v in part.split("-", 1))
            out.extend(range(lo, hi + 1))
        elif part:
            out.append(int(part))
    if not out or min(out) < 0:
        raise ValueError(f"splits must be non-negative integers like '0-4' or '0,2', got {text!r}")
    return sorted(set(out))


def model_methods(models: Iterable[str], methods: Iterable[str]) -> list[tuple[str, str]]:
    """(model, method) pairs. A model given as ``MODEL:METHOD`` names its method itself;
    a bare model is crossed with ``methods``, except that ``iw`` is skipped for models without a
    latent-variable layer: with no latent variable IW only re-weights the inner layers' samples,
    which the paper does not report (and GP is deterministic given q, so IW = VI there)."""
    from ..model import parse_spec

    pairs: list[tuple[str, str]] = []
    for entry in models:
        model, _, method = entry.partition(":")
        model = "-".join(parse_spec(model))  # validates and normalises the spec
        wanted = [method] if method else list(methods)
        for m in wanted:
            if m not in ("vi", "iw"):
                raise ValueError(f"method must be 'vi' or 'iw', got {m!r} (in {entry!r})")
            if m == "iw" and not method and "LV" not in model.split("-"):
                continue
            if (model, m) not in pairs:
                pairs.append((model, m))
    return pairs


def make_configs(
    datasets: Iterable[str], pairs: Iterable[tuple[str, str]], splits: Iterable[int], iterations: int,
    protocol: str = "splits", num_inducing: int = 128, test_limit: int = 10_000, inner_sampling: str = "joint",
    dtype: str = "float64", **settings,
) -> list[dict]:
    """All configurations, split-major (every dataset's first split finishes before any second).

    ``protocol="splits"``: split s trained with seed s (real splits, training statistics).
    ``protocol="paper"``: the paper's code (REFERENCE.md §5.4): always split 0, standardised with
    all-data statistics, and the requested split numbers become seeds.
    ``inner_sampling`` (for "iw": "joint", the paper's text, or "independent", its code) and
    ``dtype`` ("float64" or the opt-in "float32") are part of each row's key.
    ``settings`` (num_samples, batch_size, predict_samples, shapiro_points, data_dir, device) travel with
    every configuration.
    """
    from ..model import _check_dtype  # (this module imports torch lazily)
    from ..objectives import check_inner_sampling

    if protocol not in ("splits", "paper"):
        raise ValueError(f"protocol must be 'splits' or 'paper', got {protocol!r}")
    check_inner_sampling(inner_sampling)
    _check_dtype(dtype)
    if settings.get("device") is not None:  # checked once here, not as one failed row per configuration
        from ..validation import check_device

        check_device(settings["device"])
    pairs = list(pairs)
    configs = []
    for s in splits:
        for d in datasets:
            for model, method in pairs:
                configs.append(dict(
                    dataset=d, model=model, method=method, split=0 if protocol == "paper" else s, seed=s,
                    protocol=protocol, iterations=iterations, num_inducing=num_inducing, test_limit=test_limit,
                    inner_sampling=inner_sampling if method == "iw" else "-", dtype=dtype, **settings,
                ))
    return configs


def config_key(row: dict) -> tuple[str, ...]:
    return tuple(str(row[k]) for k in KEY)


# -- one configuration ---------------------------------------------------------------------------
def run_config(config: dict) -> dict:
    """Train and evaluate one configuration; returns its complete results row (a dict of COLUMNS).

    Runs with one torch thread: parallelism comes from running several configurations at once.
    """
    import numpy as np
    import torch

    from .. import __version__
    from ..datasets.uci import load_split
    from ..model import DeepGP
    from ..training import fit
    from .metrics import evaluate

    torch.set_num_threads(1)
    start = time.perf_counter()
    data = load_split(
        config["dataset"], config["split"], config.get("data_dir"), config["test_limit"],
        stats="all" if config["protocol"] == "paper" else "train",
    )
    seed = int(config["seed"])
    model = DeepGP.from_spec(config["model"], data.X_train, data.Y_train, num_inducing=config["num_inducing"], seed=seed,
                             device=config.get("device"), dtype=config.get("dtype", "float64"))
    num_samples = int(config.get("num_samples", 5)) if config["method"] == "iw" else 1
    history = fit(
        model, data.X_train, data.Y_train, method=config["method"], num_samples=num_samples,
        iterations=config["iterations"], batch_size=config.get("batch_size", 512), seed=seed, progress=False,
        inner_sampling="joint" if config.get("inner_sampling", "-") == "-" else config["inner_sampling"],
    )
    metrics = evaluate(
        model, data.X_test, data.Y_test, config.get("predict_samples", 2000), config.get("shapiro_points", 200), seed,
    )
    bound = float(np.mean(history[-min(len(history), 50):])) if len(history) else float("nan")
    row = {k: config[k] for k in KEY}
    row.update(metrics, bound=bound, num_samples=num_samples, n_train=len(data.X_train), n_test=len(data.X_test),
               seconds=round(time.perf_counter() - start, 2), deepgp=__version__, torch=torch.__version__,
               numpy=np.__version__, python=platform.python_version())
    return row


# -- the results file ----------------------------------------------------------------------------
def format_row(row: dict) -> str:
    """One CSV line (with newline) of COLUMNS; floats to 6 significant digits."""
    buf = io.StringIO()
    values = [f"{row[c]:.6g}" if isinstance(row[c], float) else row[c] for c in COLUMNS]
    csv.writer(buf, lineterminator="\n").writerow(values)
    return buf.getvalue()


def _atomic_append(path: Path, text: str) -> None:
    # one write(2) on an O_APPEND descriptor: concurrent appenders never interleave within a line
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        data = text.encode()
        if os.write(fd, data) != len(data):
            raise OSError(f"short write to {path}")
    finally:
        os.close(fd)


def read_results(path) -> list[dict]:
    """Complete rows of a results file (typed); malformed lines are skipped."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return []
        for values in reader:
            if len(values) != len(header):
                continue
            row = dict(zip(header, values))
            for k, default in ADDED.items():
                row.setdefault(k, default(row))
            try:
                for k in _INTS:
                    if k in row:
                        row[k] = int(row[k])
                for k in METRICS + ("seconds",):
                    if k in row:
                        row[k] = float(row[k])
            except ValueError:
                continue
            rows.append(row)
    return rows


def prepare_results(path) -> set[tuple[str, ...]]:
    """Create the file with its header if needed; return the keys of the rows already done.

    A file whose last line lacks its newline (a crash mid-write) gets one, so the next row starts
    on a fresh line and the broken line stays isolated (and ignored).
    """
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_append(path, ",".join(COLUMNS) + "\n")
        return set()
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) != b"\n":
            _atomic_append(path, "\n")
    with open(path, newline="") as f:
        header = next(csv.reader(f), [])
    if tuple(header) != COLUMNS:
        if tuple(header) != tuple(c for c in COLUMNS if c not in ADDED):
            raise ValueError(f"{path} has columns {header}, expected {list(COLUMNS)}; use another --results file")
        _add_columns(path, header)
    return {config_key(r) for r in read_results(path)}


def _add_columns(path: Path, header: list[str]) -> None:
    """Rewrite a file of the previous format with the ADDED columns, atomically (values kept as text)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    with open(path, newline="") as f:
        reader = csv.reader(f)
        next(reader)
        for values in reader:
            if len(values) == len(header):  # malformed lines were ignored before and still are
                row = dict(zip(header, values))
                writer.writerow([row[c] if c in row else ADDED[c](row) for c in COLUMNS])
    tmp = path.with_name(path.name + ".migrating")
    tmp.write_text(out.getvalue())
    os.replace(tmp, path)


# -- running -------------------------------------------------------------------------------------
def variant(row: dict) -> str:
    """The row's non-default settings in words ("" for the defaults): what tells two rows of one
    (dataset, model, method) apart in the report."""
    parts = ["independent inner draws"] if row.get("inner_sampling") == "independent" else []
    if row.get("dtype", "float64") != "float64":
        parts.append(row["dtype"])
    return ", ".join(parts)


def _describe(row: dict) -> str:
    extra = variant(row)
    return (f"{row['dataset']} {row['model']} {row['method']} split {row['split']} seed {row['seed']}"
            + (f" ({extra})" if extra else ""))


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


def run_benchmark(
    configs: list[dict], results, jobs: int = 1, executor: str = "local", scheduler: str | None = None,
    log: Callable[[str], None] | None = None, run: Callable[[dict], dict] = run_config,
) -> int:
    """Run every configuration not yet in ``results``; returns the number of failed ones.

    Prints one progress line per finished row. A failing configuration is reported (with its
    traceback) and left out of the file, so a later run retries it.
    """
    log = log or (lambda msg: print(msg, flush=True))
    results = Path(results)
    done = prepare_results(results)
    todo = [c for c in configs if config_key(c) not in done]
    log(f"{len(configs)} configurations, {len(configs) - len(todo)} already in {results}, {len(todo)} to run")
    failed = 0
    t0 = time.perf_counter()
    finished = 0

    def record(config: dict, row: dict | None, err: BaseException | None) -> None:
        nonlocal failed, finished
        finished += 1
        prefix = f"[{finished}/{len(todo)} {time.perf_counter() - t0:7.0f}s]"
        if err is not None:
            failed += 1
            log(f"{prefix} FAILED {_describe(config)}: {type(err).__name__}: {err}")
            traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
            return
        _atomic_append(results, format_row(row))
        log(f"{prefix} {_describe(row)}: kde {row['test_loglik_kde']:.3f} mixture {row['test_loglik_mixture']:.3f} "
            f"rmse {row['test_rmse']:.3f} W {row['shapiro_median']:.3f} bound {row['bound']:.4g} "
            f"({row['seconds']:.0f}s)")

    if not todo:
        return 0
    if executor == "dask":
        _run_dask(todo, scheduler, record, run)
    elif executor != "local":
        raise ValueError(f"executor must be 'local' or 'dask', got {executor!r}")
    elif jobs <= 1:
        _init_worker()
        for config in todo:
            try:
                row = run(config)
            except Exception as err:  # noqa: BLE001 — one bad configuration must not stop the grid
                record(config, None, err)
            else:
                record(config, row, None)
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        # fork (where available) saves each worker re-importing torch (~10 s on a loaded core). With a
        # CPU build it is safe because the parent is put on one thread first and never runs a parallel
        # region, so there is no OpenMP pool to inherit in a broken state (the known fork + torch hang).
        _init_worker()
        # A CUDA build of torch cannot fork once autograd has run in the parent (its engine keeps
        # device threads: "Unable to handle autograd's threading in combination with fork"), and CUDA
        # itself never survives a fork: with a CUDA build, workers spawn and import torch afresh.
        import torch

        method = "fork" if "fork" in mp.get_all_start_methods() and torch.version.cuda is None else "spawn"
        with ProcessPoolExecutor(jobs, mp_context=mp.get_context(method), initializer=_init_worker) as pool:
            futures = {pool.submit(run, c): c for c in todo}
            for fut in as_completed(futures):
                err = fut.exception()
                record(futures[fut], None if err else fut.result(), err)
    return failed


def _run_dask(todo: list[dict], scheduler: str | None, record, run) -> None:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError as err:  # pragma: no cover - depends on the optional extra
        raise ImportError("--executor dask needs dask.distributed: pip install 'deepgp[distributed]'") from err
    cluster = None
    if not scheduler or scheduler == "local":
        # a convenience for trying the path on one machine; real use passes a scheduler address
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False)
        scheduler = cluster.scheduler_address
    try:
        with Client(scheduler) as client:
            futures = client.map(run, todo, pure=False)
            config_of = {f.key: c for f, c in zip(futures, todo)}
            for fut in as_completed(futures):
                err = fut.exception()
                record(config_of[fut.key], None if err else fut.result(), err)
    finally:
        if cluster is not None:
            cluster.close()
