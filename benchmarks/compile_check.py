"""Does ``torch.compile`` of the bound pay on the CPU?

    python benchmarks/compile_check.py --model GP-GP-GP [--dtype float32] [--no-cholesky-check]
        [--rounds 3] [--threads 1]

Builds the step_time.py setting (kin8nm, B = 512, M = 128, 5 hidden GPs), compiles
``deepgp.objectives.elbo_vi`` / ``elbo_iw`` with the default inductor backend, and times full
training steps (``deepgp.fit``: bound, backward, Adam, natural gradient) with the eager and the
compiled bound alternating in blocks of 20 steps, in one process, so that the machine's drift hits
both alike. Prints the compile time, both medians and their ratio.

``--no-cholesky-check`` replaces the layers' jitter-retrying Cholesky (whose ``if info.any()`` is
a graph break) by a bare one, to see what a break-free graph would give. Measurement only: the
library keeps the checked Cholesky.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
import common  # noqa: E402

import deepgp  # noqa: E402
import deepgp.layers.gp as gp_module  # noqa: E402
import deepgp.objectives as objectives  # noqa: E402

MODELS = {"GP-GP-GP": ("vi", 1), "LV-GP-GP": ("iw", 5), "LV-GP-GP-GP": ("iw", 5)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="GP-GP-GP", choices=sorted(MODELS))
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--dataset", default="kin8nm")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-cholesky-check", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    method, K = MODELS[args.model]
    X, Y = common.load_dataset(args.dataset)
    model = deepgp.DeepGP.from_spec(args.model, X, Y, num_inducing=common.INDUCING, hidden_dim=common.HIDDEN,
                                    latent_dim=1, seed=0, dtype=getattr(torch, args.dtype))
    if args.no_cholesky_check:
        def bare_cholesky(A, jitter=deepgp.linalg.DEFAULT_JITTER, *rest, **kw):
            return torch.linalg.cholesky(A + jitter * torch.eye(A.shape[-1], dtype=A.dtype, device=A.device))
        gp_module.cholesky = bare_cholesky
    eager = (objectives.elbo_vi, objectives.elbo_iw)
    compiled = tuple(torch.compile(f) for f in eager)

    def use(c: bool) -> None:
        objectives.elbo_vi, objectives.elbo_iw = compiled if c else eager

    stamps: list[float] = []

    def tick(t, bound) -> bool:
        stamps.append(time.perf_counter())
        return False

    t0 = time.perf_counter()
    use(True)
    deepgp.fit(model, X, Y, method, K, iterations=3, batch_size=common.BATCH, progress=False)
    compile_s = time.perf_counter() - t0
    steps = {False: [], True: []}
    for _ in range(args.rounds):
        for c in (False, True):
            use(c)
            stamps.clear()
            deepgp.fit(model, X, Y, method, K, iterations=22, batch_size=common.BATCH, progress=False, callback=tick)
            steps[c] += list(np.diff(stamps)[1:])
    e, c = (1e3 * float(np.median(steps[k])) for k in (False, True))
    print(f"{args.model} {method} {args.dtype} threads={args.threads} cholesky_check={not args.no_cholesky_check}: "
          f"compile + 3 steps {compile_s:.0f} s; eager {e:.1f} ms, compiled {c:.1f} ms per step "
          f"(median of {len(steps[False])} each); compiled/eager {c / e:.2f}")


if __name__ == "__main__":
    main()
