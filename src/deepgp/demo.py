"""``deepgp demo``: what latent variables add, on a built-in bimodal set (placeholder until the letters demo)."""

from __future__ import annotations

import time

import numpy as np

from .model import DeepGP
from .training import fit


def bimodal(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, 1))
    return x, rng.choice([-1.0, 1.0], (n, 1)) * np.sin(3 * x) + 0.05 * rng.standard_normal((n, 1))


def run_demo(iterations: int = 2000) -> dict:
    (x, y), (xt, yt) = bimodal(500, 0), bimodal(500, 1)
    scores = {}
    for spec, method in [("GP", "vi"), ("LV-GP", "iw")]:
        t = time.time()
        model = DeepGP.from_spec(spec, x, y, num_inducing=32)
        fit(model, x, y, method=method, num_samples=5, iterations=iterations)
        scores[spec] = float(model.predictive_log_density(xt, yt, 1000, seed=0).mean())
        print(f"{spec:8s} ({method}) test log density {scores[spec]:7.3f}   [{time.time() - t:.0f}s]")
    return scores
