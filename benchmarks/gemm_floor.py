"""How much of a training step is matrix products: the step's GEMMs replayed alone.

    .venv/bin/python benchmarks/gemm_floor.py [--models GP-GP-GP,LV-GP-GP-GP] [--threads 1,2]
        [--dataset kin8nm] [--steps 60] [--replays 30] [--by-layout N] [--blas torch,numpy]

Records every matrix product (mm, bmm, addmm, addmm_, baddbmm) that one ``deepgp.fit`` iteration
dispatches, forward and backward, with its shapes, strides and dtype (a ``TorchDispatchMode``),
then runs the same products on random tensors of the same layout back to back (``--by-layout N``
also times each alone and lists the N costliest groups; ᵀ marks a transposed operand). Beside it, the
median step time of ``fit`` in the same process. The difference is what is not a matrix product:
dispatch, elementwise passes, small factorisations, the optimiser; and the replay runs with warm
caches, so it is a lower bound for the products themselves. Setting as step_time.py (B = 512,
M = 128, 5 hidden GPs, float64; VI with one sample, IW with K = 5). Each (model, threads) runs in
a fresh subprocess.

``--blas numpy`` replays the same products (same shapes and strides) through NumPy's BLAS
instead of torch's (the pip wheels: OpenBLAS for NumPy, MKL for torch), in its own subprocess,
to tell how much of the products' time is the BLAS library rather than the shapes. The numpy
replay times the product alone (for addmm the added term is left out, a [m, n] pass).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
import common  # noqa: E402
from step_time import MODELS  # noqa: E402  (model -> (method, K), the same settings as step_time.py)


def factors(func, args) -> tuple:
    """The two factors among a recorded product's arguments: mm and bmm take (a, b); addmm,
    addmm_ and baddbmm take (c, a, b), the added term c first."""
    return tuple(args[:2]) if func.__name__.split(".")[0] in ("mm", "bmm") else tuple(args[1:3])


def numpy_replay(replay: list, replays: int):
    """The recorded products through NumPy: (median ms of one pass over all, per-product callables)."""
    import numpy as np

    def product(func, args):
        a, b = (t.numpy() for t in factors(func, args))
        out = np.empty(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
        return lambda: np.matmul(a, b, out=out)

    calls = [product(func, args) for func, args, _ in replay]
    times = []
    for _ in range(replays):
        t0 = time.perf_counter()
        for call in calls:
            call()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), calls


def worker(model_name: str, threads: int, dataset: str, steps: int, replays: int, blas: str = "torch") -> None:
    common.set_thread_env(threads)
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    import deepgp

    torch.set_num_threads(threads)
    aten = torch.ops.aten
    products = {aten.mm.default, aten.bmm.default, aten.addmm.default, aten.addmm_.default, aten.baddbmm.default}
    X, Y = common.load_dataset(dataset)
    method, K = MODELS[model_name]
    model = deepgp.DeepGP.from_spec(model_name, X, Y, num_inducing=common.INDUCING, hidden_dim=common.HIDDEN,
                                    latent_dim=1, seed=0)
    clock = common.StepClock(10)
    deepgp.fit(model, X, Y, method, K, iterations=10 + steps, batch_size=common.BATCH, progress=False,
               callback=clock.tick)
    step_ms = common.step_stats(clock.stamps, 10)["median_s"] * 1e3

    calls = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in products:
                calls.append((func,
                              [(a.shape, a.stride(), a.dtype) if isinstance(a, torch.Tensor) else a for a in args],
                              kwargs or {}))
            return func(*args, **(kwargs or {}))

    with Record():
        deepgp.fit(model, X, Y, method, K, iterations=1, batch_size=common.BATCH, progress=False)

    def like(layout):
        shape, stride, dtype = layout
        extent = 1 + sum((s - 1) * st for s, st in zip(shape, stride))
        return torch.randn(extent, dtype=dtype).as_strided(shape, stride)

    replay, flops = [], 0.0
    for func, args, kwargs in calls:
        args = [like(a) if isinstance(a, tuple) else a for a in args]
        a, b = factors(func, args)
        flops += 2.0 * (a.shape[0] if a.dim() == 3 else 1) * a.shape[-2] * a.shape[-1] * b.shape[-1]
        replay.append((func, args, kwargs))
    if blas == "numpy":
        gemm_ms, alone = numpy_replay(replay, replays)
    else:
        times = []
        for _ in range(replays):
            t0 = time.perf_counter()
            for func, args, kwargs in replay:
                func(*args, **kwargs)
            times.append((time.perf_counter() - t0) * 1e3)
        gemm_ms = statistics.median(times)
        alone = [lambda f=func, a=args, k=kwargs: f(*a, **k) for func, args, kwargs in replay]
    # each product alone (medians of `replays`), summed per (op, layout)
    by_layout: dict[str, list] = {}
    for call, (func, layouts, _) in zip(alone, calls):
        ts = []
        for _ in range(replays):
            t0 = time.perf_counter()
            call()
            ts.append((time.perf_counter() - t0) * 1e3)
        key = f"{func.__name__.split('.')[0]} " + " · ".join(
            f"{list(a[0])}{'ᵀ' if len(a[1]) >= 2 and a[1][-1] != 1 else ''}" for a in factors(func, layouts))
        entry = by_layout.setdefault(key, [0, 0.0])
        entry[0] += 1
        entry[1] += statistics.median(ts)
    top = sorted(by_layout.items(), key=lambda kv: -kv[1][1])
    common.emit(dict(model=model_name, method=method, threads=threads, dataset=dataset, blas=blas, products=len(calls),
                     gemm_gflop=flops / 1e9, step_ms=step_ms, gemm_ms=gemm_ms,
                     by_layout=[dict(product=k, calls=c, ms=ms) for k, (c, ms) in top]))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="GP-GP-GP,LV-GP-GP-GP")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--dataset", default="kin8nm")
    p.add_argument("--steps", type=int, default=60, help="timed fit iterations (after 10 warm-up)")
    p.add_argument("--replays", type=int, default=30, help="replays of the recorded products")
    p.add_argument("--by-layout", type=int, default=0, metavar="N",
                   help="also list the N costliest (product, layout) groups, each product timed alone")
    p.add_argument("--blas", default="torch", help="comma list of torch (MKL), numpy (OpenBLAS): whose BLAS replays")
    p.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args.worker[0], int(args.worker[1]), args.dataset, args.steps, args.replays, args.worker[2])
    models = [m.strip() for m in args.models.split(",")]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {unknown}; choose from {list(MODELS)}")
    blases = [b.strip() for b in args.blas.split(",")]
    if set(blases) - {"torch", "numpy"}:
        p.error(f"--blas: choose from torch, numpy (got {args.blas})")
    print("| model | method | threads | BLAS | products per step | GEMM GFLOP | step ms (fit, median) "
          "| products alone ms | products / step | rest ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in (int(x) for x in args.threads.split(",")):
        for m, b in ((m, b) for m in models for b in blases):
            cmd = [sys.executable, __file__, "--worker", m, str(t), b, "--dataset", args.dataset,
                   "--steps", str(args.steps),
                   "--replays", str(args.replays)]
            out = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
            if out.returncode != 0:
                print(f"| {m} | | {t} | {b} | "
                      f"failed: {out.stderr.strip().splitlines()[-1] if out.stderr else out.returncode} |")
                continue
            r = common.last_json(out.stdout)
            print(f"| {m} | {r['method'].upper()} | {t} | {b} | {r['products']} | {r['gemm_gflop']:.3f} "
                  f"| {r['step_ms']:.1f} | {r['gemm_ms']:.1f} | {r['gemm_ms'] / r['step_ms']:.2f} "
                  f"| {r['step_ms'] - r['gemm_ms']:.1f} |", flush=True)
            for g in r["by_layout"][: args.by_layout]:
                print(f"|   {g['product']} | | | | {g['calls']} | | | {g['ms']:.2f} | | |")


if __name__ == "__main__":
    main()
