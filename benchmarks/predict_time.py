"""Seconds and peak memory of ``predictive_log_density`` (mixture estimator) on LV-GP-GP-GP.

    .venv/bin/python benchmarks/predict_time.py [--points 10000] [--samples 2000] [--threads 1,2]
        [--dataset kin8nm] [--json benchmarks/results/FILE.json]

The model is built by ``DeepGP.from_spec("LV-GP-GP-GP", ...)`` on the standardised dataset
(untrained: prediction costs the same), M=128, 5 hidden GPs, float64; the test set is
``--points`` rows drawn with replacement from the dataset (kin8nm: D=8). Each thread count runs
in a fresh subprocess, so its peak RSS (ru_maxrss) is that of the prediction alone plus the
interpreter, torch and the model (``rss_before_mb``, reported too).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402
from step_time import machine_info, run  # noqa: E402

SPEC = "LV-GP-GP-GP"


def worker(args) -> None:
    common.set_thread_env(args.threads)
    import numpy as np
    import torch

    import deepgp

    torch.set_num_threads(args.threads)
    X, Y = common.load_dataset(args.dataset)
    model = deepgp.DeepGP.from_spec(SPEC, X, Y, num_inducing=common.INDUCING, hidden_dim=common.HIDDEN, seed=0,
                                    dtype=args.dtype)
    idx = np.random.default_rng(0).integers(0, X.shape[0], args.points)
    Xt, Yt = X[idx], Y[idx]
    rss_before = common.peak_rss_mb()
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    lpd = model.predictive_log_density(Xt, Yt, num_samples=args.samples, estimator="mixture", seed=0)
    sec = time.perf_counter() - t0
    if not np.all(np.isfinite(lpd)):
        raise SystemExit("non-finite log densities")
    common.emit(dict(name="deepgp", model=SPEC, threads=args.threads, points=args.points, samples=args.samples,
                     dataset=args.dataset, dtype=args.dtype, seconds=sec, median_s=sec, rss_before_mb=rss_before,
                     loadavg_start=load0,
                     mean_lpd=float(np.mean(lpd))))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--points", type=int, default=10_000)
    p.add_argument("--samples", type=int, default=2000)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--dataset", default="kin8nm")
    p.add_argument("--json")
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"), help="deepgp's dtype")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        args.threads = int(args.threads)
        return worker(args)
    if args.json:  # before the runs, not after them: a file that cannot be written, or a folder
        from deepgp.storage import check_writable

        try:
            check_writable(args.json, "--json")
        except ValueError as err:
            p.error(str(err))
    info = machine_info()
    results = []
    for t in [int(t) for t in args.threads.split(",")]:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--threads", str(t), "--points",
               str(args.points), "--samples", str(args.samples), "--dataset", args.dataset, "--dtype", args.dtype]
        results.append(run(cmd, f"predict {SPEC} threads={t}"))
    print(f"\ncommit {info['commit']}"
          f"{' + uncommitted src/ diff ' + info['src_diff_sha256'] if info['src_modified'] else ''}, "
          f"{info['date_utc']}, "
          f"{info['cpu']} ({info['cores']} cores), torch {info['torch']}, {args.dataset}-sized inputs, {args.dtype}\n")
    print("| model | points × samples | threads | seconds | peak RSS MB | RSS before predict MB | load 1-min |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        if r.get("failed"):
            print(f"| {SPEC} | {args.points} × {args.samples} | — | failed: {r['error'][:120]} | | | |")
            continue
        print(f"| {SPEC} | {r['points']} × {r['samples']} | {r['threads']} | {r['seconds']:.1f} "
              f"| {r['peak_rss_mb']:.0f} "
              f"| {r['rss_before_mb']:.0f} | {r['loadavg_before']:.2f} |")
    if args.json:
        from deepgp.storage import write_bytes

        write_bytes(args.json, json.dumps(dict(machine=info, args=vars(args), results=results), indent=1).encode())


if __name__ == "__main__":
    main()
