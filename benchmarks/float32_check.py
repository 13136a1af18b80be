"""The opt-in float32 mode against float64: same fixed-seed training, same bound?

    .venv/bin/python benchmarks/float32_check.py [--dataset power] [--iterations 2000] [--dtype float32]

Trains LV-GP-GP by IW (K=5, M=64, B=512, seed 0) on a UCI set (90/10 split 0, training-set
standardisation) in the given dtype, then evaluates, in float64 for both (the trained parameters
cast up), the full-data IW bound averaged over 20 draws and the test log density (mixture, 2,000
draws, seed 0). Prints one JSON line; run it once per dtype (in parallel, one thread each) and
compare the two bounds against their Monte-Carlo standard errors.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

import deepgp
from deepgp.datasets.uci import load_split
from deepgp.linalg import seeded


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="power")
    p.add_argument("--data-dir", default=None, help="folder of NAME.csv.gz (default: $DEEPGP_DATA, else the cache)")
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = load_split(args.dataset, 0, args.data_dir, test_limit=1000)
    model = deepgp.DeepGP.from_spec("LV-GP-GP", data.X_train, data.Y_train, num_inducing=64, seed=0, dtype=args.dtype)
    start = time.perf_counter()
    history = deepgp.fit(model, data.X_train, data.Y_train, "iw", 5, iterations=args.iterations, seed=0,
                         progress=False)
    seconds = time.perf_counter() - start
    model = model.to(torch.float64)
    with torch.no_grad(), seeded(1):
        bounds = [float(model.elbo(data.X_train, data.Y_train, "iw", 5)) for _ in range(20)]
    logp = float(model.predictive_log_density(data.X_test, data.Y_test, 2000, seed=0).mean())
    print(json.dumps(dict(dtype=args.dtype, dataset=args.dataset, iterations=args.iterations,
                          train_seconds=round(seconds, 1),
                          ms_per_iteration=round(1e3 * seconds / args.iterations, 1),
                          training_bound_last50=float(np.mean(history[-50:])),
                          bound_float64_mean=float(np.mean(bounds)),
                          bound_float64_se=float(np.std(bounds) / np.sqrt(len(bounds))), test_loglik_mixture=logp)),
          flush=True)


if __name__ == "__main__":
    main()
