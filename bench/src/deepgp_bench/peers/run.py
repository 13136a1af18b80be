"""Fit the peers on the benchmark's splits and score them as the benchmark scores deepgp: one JSON line per fit.

    python -m deepgp_bench.peers.run [--datasets boston,concrete] [--splits 0-2] [--peers ngboost,flow]
        [--set ensemble.lr=0.01] [--part test|validation] [--draws 2000] [--threads 1]
        [--out benchmarks/results/peers_quality.jsonl]

The data are the runner's (``deepgp.datasets.load_split``: the paper's shuffle of split s, 90/10, at
most 10,000 test points, training-set standardisation) and every number is in its standardised units,
as in the benchmark's rows. Each peer is fitted on the training rows less the last 10% of a fixed
permutation (``base.early_stopping_split``), on which it stops early, seeded with the split number.
``deepgp`` (in the default list, last) is ``deepgp.DeepGPRegressor()`` with its defaults in the same run and
threads: trained on all the training rows (its default holds nothing out), seeded with the split, its
density the mixture over ``--draws`` draws; its row also holds its learning curve (``"curve"``: the scores of
the model after 250, 500, 1,000, 2,000, 3,000 and 5,000 iterations, each with the training seconds so far),
and its ``val_log_density`` is null (``n_val`` 0).

``--part test`` scores the split's test points (all of them, as the benchmark's rows): the exact log
density (mean over the points), the paper's KDE over ``--draws`` predictive draws per point
(``deepgp.prediction.kde_log_density``, the function deepgp's rows use), the sample CRPS of the same
draws (``deepgp.metrics.crps_from_samples``) and the RMSE of their mean; with more than 2,000 test points
also the same means over the first 2,000 (the points of benchmarks/time_to_quality.py). ``--part
validation`` never touches the test points: it scores the last 10% of the training rows (the same
permutation, so the validation part on which deepgp's recipe was chosen) and fits the peer on the
rest, which it splits again for early stopping. The peers' settings were chosen there.

A row also records the settings, the fitting seconds (wall clock from ``fit()`` to a fitted peer, less a
learning curve's own evaluations) and the process's CPU seconds in that time, the thread limits, the peak
resident memory of the fit and of fit + evaluation, and the host's 1-minute load average at the start and end
of the fit (the seconds are taken beside whatever else the machine runs). Rows are appended as each fit
finishes (one write on an O_APPEND descriptor); fits already in ``--out`` (same data set, split, peer,
settings, part and draws) are skipped, so a killed run loses only the fit in progress. A damaged line is
ignored (its fit runs again). No row holds NaN or infinity: a non-finite mean is written as null and named in
``non_finite`` (a curve's as ``curve[ITERATIONS].METRIC``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import sys
import time
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from deepgp.arguments import Parser, at_least, comma_items, positive_int
from deepgp.datasets.uci import TEST_LIMIT
from deepgp.memory import MemoryBudgetError, require
from deepgp.storage import check_writable

from . import DATASETS, PEERS

DEFAULT_OUT = Path("benchmarks/results/peers_quality.jsonl")
TTQ_POINTS = 2000  # benchmarks/time_to_quality.py's evaluation points: the first 2,000 test points
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class UsageError(Exception):
    """A bad argument: one line on stderr, exit status 2."""


# -- results file -----------------------------------------------------------------------------------------
def row_key(row: dict) -> str:
    """The identity of a fit: data set, split, peer, settings, part and draws (canonical JSON)."""
    k = row["key"]
    return json.dumps([k["dataset"], k["split"], k["peer"], k["settings"], k["part"], k["draws"]], sort_keys=True)


def read_rows(path: Path) -> tuple[list[dict], list[int]]:
    """The rows of ``path`` and the line numbers of damaged lines (not JSON, or without a key)."""
    rows, damaged = [], []
    if not path.exists():
        return rows, damaged
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:  # (a line that is not UTF-8 is a ValueError too: damaged, as a line cut short)
            row = json.loads(line)
            row_key(row)
        except (ValueError, KeyError, TypeError, RecursionError):
            damaged.append(number)
            continue
        rows.append(row)
    return rows, damaged


def append_row(path: Path, row: dict) -> None:
    """Append ``row`` as one line in one write (a line cut by a kill is completed by a newline first)."""
    text = json.dumps(row, allow_nan=False, sort_keys=False) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and _last_byte(path) != b"\n":
            text = "\n" + text
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1)


def finite_or_none(values: dict) -> tuple[dict, list[str]]:
    """``values`` with every non-finite float replaced by None, and the names replaced."""
    out, bad = {}, []
    for name, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            out[name] = None
            bad.append(name)
        else:
            out[name] = value
    return out, bad


# -- measurement ------------------------------------------------------------------------------------------
def _status_kib(field: str) -> int | None:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) if match else None


def reset_peak_memory() -> str:
    """Start a new peak-RSS window: Linux's VmHWM is reset by writing 5 to /proc/self/clear_refs; where
    that is refused, the process's lifetime peak (getrusage) is what the row gets, and says so."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return "VmHWM"
    except OSError:
        return "ru_maxrss"


def peak_memory_mb(how: str) -> float:
    if how == "VmHWM":
        kib = _status_kib("VmHWM")
        if kib is not None:
            return round(kib / 1024, 1)
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


# float64 arrays of the draws' size a fit's scores hold at once: the draws, the sorted copy and the CRPS's
# weighted copy, and the KDE's blocks (at most a draws-sized block of 2,000,000 values)
DRAW_COPIES = 4


def check_draws(num_rows: int, draws: int) -> None:
    """A MemoryBudgetError naming ``draws`` if scoring the points of a data set of ``num_rows`` rows (its test
    part: 10%, at most deepgp's TEST_LIMIT; the validation part is smaller) with ``draws`` draws per point
    (:func:`scores`) would need more memory than is available."""
    points = min(TEST_LIMIT, math.ceil(0.1 * num_rows))
    require(DRAW_COPIES * 8 * draws * points, "draws", draws, f"the predictive draws of {points} points")


def scores(peer, X: np.ndarray, y: np.ndarray, draws: int, seed: int) -> tuple[dict, dict]:
    """({metric: mean over the points}, {metric: per-point values}) of ``peer`` at X [N, D], y [N]: the
    exact log density, the KDE over ``draws`` draws per point, the sample CRPS and the squared error of the
    draws' mean."""
    import torch

    from deepgp.metrics import crps_from_samples
    from deepgp.prediction import kde_log_density

    exact = peer.log_density(X, y)
    samples = peer.sample(X, draws, seed=seed)  # [S, N]
    # the KDE in blocks of points: its [S, n] kernel matrix for 10,000 points would be 160 MB
    step = max(1, 2_000_000 // draws)
    kde = np.concatenate([
        kde_log_density(torch.as_tensor(y[i:i + step, None]), torch.as_tensor(samples[:, i:i + step, None])).numpy()
        for i in range(0, len(y), step)])
    per_point = {"log_density": exact, "kde": kde, "crps": crps_from_samples(samples, y),
                 "squared_error": (samples.mean(0) - y) ** 2}
    means = {name: float(np.mean(v)) for name, v in per_point.items() if name != "squared_error"}
    means["rmse"] = float(np.sqrt(np.mean(per_point["squared_error"])))
    return means, per_point


def thread_limits(threads: int) -> dict:
    """Limit torch and every BLAS/OpenMP pool of this process to ``threads``; returns what they report."""
    import torch
    from threadpoolctl import threadpool_info, threadpool_limits

    for var in _THREAD_VARS:
        os.environ[var] = str(threads)  # (for anything started from here)
    torch.set_num_threads(threads)
    threadpool_limits(threads)
    pools = sorted({(p["internal_api"], p["num_threads"]) for p in threadpool_info()})
    return {"torch": torch.get_num_threads(), "pools": [f"{api}:{n}" for api, n in pools]}


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for package in ("deepgp", "torch", "numpy", "scikit-learn", "ngboost", "zuko"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = None
    import deepgp

    out["deepgp"] = deepgp.__version__  # (a source tree's own version, as the benchmark's rows record it)
    return out


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# -- one fit ----------------------------------------------------------------------------------------------
def run_fit(dataset: str, split: int, name: str, settings: dict, data, part: str, draws: int, threads: dict) -> dict:
    """Fit peer ``name`` on split ``split`` of ``dataset`` (``data``: its ``load_split``) and score it."""
    from . import make_peer
    from .base import early_stopping_split

    X_train, y_train = data.X_train, data.Y_train[:, 0]
    if part == "test":
        X_eval, y_eval = data.X_test, data.Y_test[:, 0]
    else:  # scored on a held-out part of the training rows, trained (and stopped) on the rest
        X_train, y_train, X_eval, y_eval = early_stopping_split(X_train, y_train, split)
    peer = make_peer(name, **settings)
    if peer.holds_out:
        X_fit, y_fit, X_val, y_val = early_stopping_split(X_train, y_train, split)
    else:  # (deepgp's default trains on every training row for its whole budget)
        X_fit, y_fit, X_val, y_val = X_train, y_train, None, None
    peer.watch(lambda: scores(peer, X_eval, y_eval, draws, seed=split)[0], draws)
    how = reset_peak_memory()
    rss_before = peak_memory_mb(how)
    load_start = os.getloadavg()[0]
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cpu, wall = time.process_time(), time.perf_counter()
    peer.fit(X_fit, y_fit, X_val, y_val, seed=split)
    fit_seconds, fit_cpu = time.perf_counter() - wall, time.process_time() - cpu
    # a learning curve's evaluations are no part of the fit a user waits for
    fit_seconds -= peer.fit_info.get("curve_seconds", 0.0)
    fit_cpu -= peer.fit_info.get("curve_cpu_seconds", 0.0)
    load_end = os.getloadavg()[0]
    peak_fit = peak_memory_mb(how)
    wall = time.perf_counter()
    val_log_density = None if X_val is None else float(np.mean(peer.log_density(X_val, y_val)))
    means, per_point = scores(peer, X_eval, y_eval, draws, seed=split)
    metrics = {**means, "val_log_density": val_log_density}
    if part == "test" and len(y_eval) > TTQ_POINTS:
        first = {k: float(np.mean(v[:TTQ_POINTS])) for k, v in per_point.items() if k != "squared_error"}
        metrics |= {f"{k}_first_{TTQ_POINTS}": v for k, v in first.items()}
    metrics, non_finite = finite_or_none(metrics)
    curve = None
    if peer.curve is not None:
        curve = []
        for point in peer.curve:
            values, bad = finite_or_none(point)
            curve.append(values)
            non_finite += [f"curve[{point['iterations']}].{m}" for m in bad]
    row = {
        "key": {"dataset": dataset, "split": split, "peer": name, "settings": _jsonable(peer.settings), "part": part,
                "draws": draws},
        **metrics,
        "non_finite": non_finite,
        "non_finite_points": int(sum(int(np.sum(~np.isfinite(v))) for v in per_point.values())),
        "fit_seconds": fit_seconds,
        "fit_cpu_seconds": fit_cpu,
        "eval_seconds": time.perf_counter() - wall,
        "fit_info": peer.fit_info,
        "n_train": len(y_train), "n_fit": len(y_fit), "n_val": 0 if y_val is None else len(y_val),
        "n_eval": len(y_eval),
        "threads": threads,
        "peak_rss_mb": {"before_fit": rss_before, "fit": peak_fit, "fit_and_eval": peak_memory_mb(how), "how": how},
        "host_load": {"start": load_start, "end": load_end, "cores": os.cpu_count()},
        "started": started,
        "cpu": _cpu(),
        "versions": _versions(),
    }
    if curve is not None:
        row["curve"] = curve
    return row


def _jsonable(settings: dict) -> dict:
    return json.loads(json.dumps(settings))  # (tuples as lists: the key compares equal after a reload)


# -- tables ---------------------------------------------------------------------------------------------
def _variant(row: dict, defaults: dict) -> str:
    """A row's settings that differ from ``defaults`` (its peer's current ones), as "name=value, ..."."""
    settings = row["key"]["settings"]
    return ", ".join(f"{k}={_text(v)}" for k, v in settings.items() if _jsonable({k: defaults.get(k)})[k] != v)


def _text(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def test_table(rows: list[dict], metric: str = "log_density", draws: int = 2000) -> str:
    """Markdown: per data set, each peer's ``metric``, fitting seconds (wall clock) and the CPU seconds of its
    process meanwhile, as means over the splits (naming the splits when they are not 0-2), and the best peer
    by that mean. Only rows of ``--part
    test`` with the peers' current settings (their DEFAULTS) and ``draws``."""
    from . import peer_classes

    classes = peer_classes()
    cells: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        k = row["key"]
        if k["part"] == "test" and k["draws"] == draws and k["peer"] in classes and not _variant(
                row, classes[k["peer"]].DEFAULTS):
            cells.setdefault((k["dataset"], k["peer"]), []).append(row)
    datasets = [d for d in DATASETS if any(d == key[0] for key in cells)]
    datasets += sorted({key[0] for key in cells} - set(datasets))
    lines = [f"| data set | {' | '.join(PEERS)} | best peer |", "|---" * (len(PEERS) + 2) + "|"]
    for d in datasets:
        out, best = [], None
        for q in PEERS:
            found = cells.get((d, q), [])
            values = [r[metric] for r in found if r[metric] is not None]
            if not values:
                out.append("")
                continue
            mean, seconds = float(np.mean(values)), float(np.mean([r["fit_seconds"] for r in found]))
            cpu = float(np.mean([r["fit_cpu_seconds"] for r in found]))
            splits = sorted(r["key"]["split"] for r in found)
            which = "" if splits == [0, 1, 2] else f", splits {splits}"
            out.append(f"{mean:.2f} ({seconds:.0f} s, CPU {cpu:.0f} s{which})")
            if best is None or mean > best[0]:
                best = (mean, seconds, cpu, q)
        label = f"{best[3]} {best[0]:.2f} ({best[1]:.0f} s, CPU {best[2]:.0f} s)" if best else ""
        lines.append(f"| {d} | {' | '.join(out)} | {label} |")
    return "\n".join(lines)


def screen_table(rows: list[dict], metric: str = "log_density") -> str:
    """Markdown: the ``--part validation`` rows, per peer and settings variant, ``metric`` on each data set
    and the variant's mean rank among its peer's variants over the data sets every variant has (1 = best;
    a variant's rank is that of its value, ties sharing their mean rank)."""
    import scipy.stats

    from . import peer_classes

    classes = peer_classes()
    table: dict[str, dict[str, dict[str, float]]] = {}
    for row in rows:
        k = row["key"]
        if k["part"] == "validation" and k["peer"] in classes and row[metric] is not None:
            variant = _variant(row, classes[k["peer"]].DEFAULTS) or "(defaults)"
            table.setdefault(k["peer"], {}).setdefault(variant, {})[k["dataset"]] = row[metric]
    datasets = [d for d in DATASETS if any(d in v for t in table.values() for v in t.values())]
    lines = [f"| peer | settings | {' | '.join(datasets)} | mean rank |", "|---" * (len(datasets) + 3) + "|"]
    for q in [q for q in PEERS if q in table]:
        variants = table[q]
        common = [d for d in datasets if all(d in v for v in variants.values())]
        ranks = {v: 0.0 for v in variants}
        for d in common:  # (tied values share their mean rank)
            for v, r in zip(variants, scipy.stats.rankdata([-variants[v][d] for v in variants])):
                ranks[v] += float(r) / len(common)
        for v, values in variants.items():
            shown = " | ".join(f"{values[d]:.3f}" if d in values else "" for d in datasets)
            lines.append(f"| {q} | {v} | {shown} | {ranks[v]:.2f} |")
    return "\n".join(lines)


# -- command line -----------------------------------------------------------------------------------------
def parse_value(text: str):
    """A JSON value ("0.01", "100", "true", "[50, 50]" → a tuple), or the text itself."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return tuple(value) if isinstance(value, list) else value


def parse_splits(text: str) -> list[int]:
    """"0-2" → [0, 1, 2], "0,2" → [0, 2] (the runner's splits, without an empty item); a UsageError otherwise."""
    from ..runner import parse_splits as splits

    try:
        comma_items(text, "--splits")
    except ValueError as err:
        raise UsageError(str(err)) from None
    try:
        return splits(text)
    except ValueError as err:
        raise UsageError(f"--splits: {err}") from None


def parse_args(argv=None) -> argparse.Namespace:
    """The command line, every value checked before any fit: a bad one is a UsageError naming its option."""
    p = Parser(prog="python -m deepgp_bench.peers.run", description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated UCI names (run smallest first)")
    p.add_argument("--splits", default="0-2")
    p.add_argument("--peers", default=",".join(PEERS))
    p.add_argument("--set", action="append", default=[], metavar="PEER.NAME=VALUE",
                   help="a setting over the peer's default")
    p.add_argument("--part", choices=("test", "validation"), default="test")
    p.add_argument("--draws", type=at_least(2), default=2000,
                   help="predictive draws per point for the KDE and the CRPS")
    p.add_argument("--threads", type=positive_int, default=1, help="at most the machine's cores")
    p.add_argument("--data-dir", default=None, help="folder of NAME.csv.gz (default: $DEEPGP_DATA, then the cache)")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--table", action="store_true",
                   help="print the table of --out's rows of --part (test: means over the splits; validation: the "
                        "settings screen) instead of fitting")
    p.add_argument("--metric", choices=("log_density", "kde", "crps", "val_log_density"), default="log_density")
    args = p.parse_args(argv)
    from . import make_peer, peer_classes

    try:
        args.dataset_list = list(dict.fromkeys(comma_items(args.datasets, "--datasets")))
        args.peer_list = list(dict.fromkeys(comma_items(args.peers, "--peers")))
    except ValueError as err:
        raise UsageError(str(err)) from None
    args.split_list = parse_splits(args.splits)
    unknown = sorted(set(args.peer_list) - set(peer_classes()))
    if unknown:
        raise UsageError(f"--peers: unknown {unknown}; the peers are {', '.join(PEERS)}")
    cores = os.cpu_count() or 1
    if args.threads > cores:  # (far more threads than cores crashes OpenMP, and never speeds a fit)
        raise UsageError(f"--threads must be at most the {cores} cores of this machine, got {args.threads}")
    args.settings = {q: {} for q in args.peer_list}
    for item in args.set:
        match = re.fullmatch(r"(\w+)\.(\w+)=(.+)", item)
        if not match or match[1] not in args.settings:
            raise UsageError(f"--set must be PEER.NAME=VALUE for a peer of --peers, got {item!r}")
        args.settings[match[1]][match[2]] = parse_value(match[3])
    for q, settings in args.settings.items():
        try:
            make_peer(q, **settings)
        except ValueError as err:
            raise UsageError(f"--set: {err}") from None
    if args.table:  # (a table only reads --out)
        if not Path(args.out).is_file():
            raise UsageError(f"--out {args.out}: no such file" if not Path(args.out).exists() else
                             f"--out {args.out} is not a file")
        return args
    if args.data_dir is not None and not Path(args.data_dir).is_dir():  # (not $DEEPGP_DATA in its place)
        raise UsageError(f"--data-dir {args.data_dir!r} is not a folder")
    from deepgp.datasets.uci import find_uci

    for d in args.dataset_list:
        try:
            find_uci(d, args.data_dir)
        except (ValueError, FileNotFoundError) as err:
            raise UsageError(f"--datasets: {str(err).splitlines()[0]}") from None
    try:
        check_writable(args.out, "--out")
    except ValueError as err:
        raise UsageError(str(err)) from None
    return args


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if args.table:
        rows, _ = read_rows(out)
        print(test_table(rows, args.metric, args.draws) if args.part == "test" else screen_table(rows, args.metric))
        return 0
    from deepgp.datasets import load_split, load_uci
    from deepgp.datasets.uci import find_uci

    threads = thread_limits(args.threads)
    rows, damaged = read_rows(out)
    if damaged:
        print(f"{out}: ignoring damaged line(s) {damaged[:10]} (their fits run again)", flush=True)
    done = {row_key(r) for r in rows}
    sizes = {}
    for d in args.dataset_list:
        try:
            with warnings.catch_warnings():  # (numpy's warning of an empty file: the error below says it)
                warnings.simplefilter("ignore", UserWarning)
                sizes[d] = len(load_uci(d, args.data_dir)[0])
            if sizes[d] < 10:  # (too few rows for a 90/10 split with a test point)
                raise ValueError(f"{sizes[d]} rows")
        except (ValueError, OSError) as err:  # (a damaged NAME.csv.gz: once, before any fit, not in each fit)
            print(f"error: --datasets: cannot read {find_uci(d, args.data_dir)}: {' '.join(str(err).split())}",
                  file=sys.stderr)
            return 2
    order = sorted(args.dataset_list, key=lambda d: sizes[d])  # smallest first
    try:  # before any fit: the draws of the largest part scored
        check_draws(max(sizes.values()), args.draws)
    except MemoryBudgetError as err:
        print(f"error: {err.message(option=True)}", file=sys.stderr)
        return 2
    todo = [(d, s, q) for d in order for s in args.split_list for q in args.peer_list]
    print(f"{len(todo)} fits ({', '.join(order)}; splits {args.split_list}; {', '.join(args.peer_list)}), "
          f"threads {threads}", flush=True)
    failed, t0 = 0, time.perf_counter()
    for i, (d, s, q) in enumerate(todo, 1):
        from . import make_peer

        key = {"dataset": d, "split": s, "peer": q, "settings": _jsonable(make_peer(q, **args.settings[q]).settings),
               "part": args.part, "draws": args.draws}
        prefix = f"[{i}/{len(todo)} {time.perf_counter() - t0:6.0f}s] {d} split {s} {q}"
        if row_key({"key": key}) in done:
            print(f"{prefix}: already in {out}", flush=True)
            continue
        try:
            data = load_split(d, s, args.data_dir)
            row = run_fit(d, s, q, args.settings[q], data, args.part, args.draws, threads)
        except Exception as err:  # noqa: BLE001 — one failed fit must not stop the others
            failed += 1
            print(f"{prefix}: FAILED {type(err).__name__}: {' '.join(str(err).split())}", flush=True)
            continue
        append_row(out, row)
        done.add(row_key(row))
        shown = " ".join(f"{m} {row[m]:.3f}" if row[m] is not None else f"{m} -"
                         for m in ("log_density", "kde", "crps", "val_log_density"))
        print(f"{prefix}: {shown} ({row['fit_seconds']:.1f}s fit, {row['eval_seconds']:.1f}s eval, "
              f"load {row['host_load']['start']:.1f}-{row['host_load']['end']:.1f}, {row['fit_info']})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
