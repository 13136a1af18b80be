"""Helpers shared by the speed benchmarks and the peer scripts (numpy + standard library only).

Every benchmark process imports this file by path (it sits beside the peer scripts, which run in
a separate virtualenv without deepgp), so it must not import deepgp, torch or tensorflow.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def data_file(name: str) -> Path:
    """``NAME.csv.gz`` in $DEEPGP_DATA, else in the user cache (deepgp.datasets.uci's own lookup, written
    here without deepgp: the peer scripts run where it is not installed)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deepgp" / "uci"
    folders = [Path(os.environ["DEEPGP_DATA"])] if os.environ.get("DEEPGP_DATA") else []
    for folder in [*folders, cache]:
        if (folder / f"{name}.csv.gz").is_file():
            return folder / f"{name}.csv.gz"
    raise SystemExit(f"dataset {name!r} not found in {[str(f) for f in [*folders, cache]]}; "
                     "set DEEPGP_DATA to the folder of NAME.csv.gz files")

# the benchmark setting: B=512, M=128, 5 hidden GPs, float64
BATCH, INDUCING, HIDDEN = 512, 128, 5


def load_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Standardised (X [N, D], Y [N, 1]) float64 from :func:`data_file` (last column = y)."""
    with gzip.open(data_file(name), "rt") as f:
        data = np.loadtxt(f, delimiter=",", skiprows=1, dtype=np.float64)
    X, Y = data[:, :-1], data[:, -1:]
    X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    Y = (Y - Y.mean(0)) / Y.std(0)
    return X, Y


def set_thread_env(threads: int) -> None:
    """Pin every BLAS/OpenMP pool to ``threads`` (call before importing torch or tensorflow)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, MB (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def step_stats(stamps: list[float], warmup: int) -> dict:
    """Median, quartiles and count of per-iteration seconds from successive perf_counter stamps."""
    steps = np.diff(np.asarray(stamps))[warmup:]
    if steps.size < 3:
        raise SystemExit(f"too few timed iterations ({steps.size}); raise --iterations")
    q1, med, q3 = np.percentile(steps, [25, 50, 75])
    return dict(median_s=float(med), q1_s=float(q1), q3_s=float(q3), timed_iterations=int(steps.size))


class StepClock:
    """A callback-style recorder: call ``tick()`` after every training step; with ``warmup``, a
    :class:`CpuWindow` is started after the warm-up steps (read it with ``other_cores_busy()``)."""

    def __init__(self, warmup: int | None = None):
        self.stamps = [time.perf_counter()]
        self.warmup, self.window = warmup, CpuWindow()
        if warmup == 0:
            self.window.start()

    def tick(self, *_args) -> bool:
        self.stamps.append(time.perf_counter())
        if self.warmup is not None and len(self.stamps) - 1 == self.warmup:
            self.window.start()
        return False

    def other_cores_busy(self) -> float:
        return self.window.stop()


class CpuWindow:
    """Cores kept busy by other processes between start() and stop() (from /proc/stat)."""

    @staticmethod
    def _snapshot():
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        busy = sum(fields) - fields[3] - fields[4]  # all but idle and iowait, in USER_HZ ticks
        t = os.times()
        return busy / os.sysconf("SC_CLK_TCK"), t.user + t.system, time.monotonic()

    def start(self):
        self.t0 = self._snapshot()

    def stop(self) -> float:
        busy1, own1, wall1 = self._snapshot()
        busy0, own0, wall0 = self.t0
        return max(0.0, ((busy1 - busy0) - (own1 - own0)) / (wall1 - wall0))


def emit(record: dict) -> None:
    """Print one JSON result line (the orchestrator reads the last line starting with '{')."""
    record.setdefault("peak_rss_mb", peak_rss_mb())
    record.setdefault("loadavg_1min", os.getloadavg()[0])
    print(json.dumps(record), flush=True)


def last_json(text: str) -> dict:
    lines = [ln for ln in text.splitlines() if ln.startswith("{")]
    if not lines:
        raise ValueError("no JSON result line in the output")
    return json.loads(lines[-1])


def median(xs) -> float:
    return float(statistics.median(xs))


def peer_args():
    """The command line every peer script takes."""
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default="kin8nm")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--iterations", type=int, default=100, help="timed iterations (after warm-up)")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"),
                   help="the peer's floating-point type (float64 is the benchmark setting)")
    return p.parse_args()


def argv_threads(default: int = 1) -> int:
    """The value of ``--threads N`` in sys.argv (read before heavy imports), else ``default``."""
    if "--threads" in sys.argv:
        return int(sys.argv[sys.argv.index("--threads") + 1])
    return default
