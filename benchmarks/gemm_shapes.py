"""GEMM rates (GFLOP/s, float64) for the products that dominate training and prediction.

    .venv/bin/python benchmarks/gemm_shapes.py [--threads 1] [--repeats 21]

M = 128 inducing points. Rows: 512 / 2,560 (a training batch, VI / IW with K = 5) and 16,384 (one
prediction block). Each shape in the orientation the library uses and its transpose, plus a
stacked product split into 128-row blocks written into one output. Medians of --repeats calls;
numpy's own BLAS (OpenBLAS in the numpy wheels) on the same shape, for comparison with torch's MKL.
"""

from __future__ import annotations

import argparse
import time

import torch

M = 128


def median_seconds(fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def blocked_into(P: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    out = torch.empty(P.shape[0], B.shape[1], dtype=P.dtype)
    for i, block in enumerate(P.split(M)):
        torch.mm(block, B, out=out[i * M:(i + 1) * M])
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=21)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    rng = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, dtype=torch.float64, generator=rng)

    print("| product | torch (MKL) GFLOP/s | numpy (its BLAS) GFLOP/s |\n|---|---:|---:|")
    for rows_out, inner, cols in ((768, M, 512), (768, M, 2560), (M, M, 16384), (16384, M, M), (2 * M, M, 16384)):
        a, b = rand(rows_out, inner), rand(inner, cols)
        flops = 2 * rows_out * inner * cols
        t = median_seconds(lambda a=a, b=b: a @ b, args.repeats)
        an, bn = a.numpy(), b.numpy()
        tn = median_seconds(lambda an=an, bn=bn: an @ bn, args.repeats)
        print(f"| [{rows_out},{inner}]·[{inner},{cols}] | {flops / t / 1e9:.1f} | {flops / tn / 1e9:.1f} |")
        if rows_out > M and rows_out % M == 0 and cols > rows_out:
            tb = median_seconds(lambda a=a, b=b: blocked_into(a, b), args.repeats)
            print(f"| the same in {rows_out // M} blocks of {M} rows into one output | {flops / tb / 1e9:.1f} | |")


if __name__ == "__main__":
    main()
