"""End-to-end check: GP (VI), GP-GP (VI), LV-GP-GP (IW) on UCI power, next to the paper.

    .venv/bin/python benchmarks/core_power.py [--iterations 5000] [--out benchmarks/results/core_power.jsonl]

90/10 split with seed 0, inputs and target standardised with training statistics, M = 128,
B = 512, K = 5 for IW; test log density per point in standardised units (mixture and the
paper's KDE protocol, 2,000 samples). One JSON line per finished model (resumable).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

import deepgp
from deepgp.datasets.uci import find_uci
from deepgp.storage import check_writable
from deepgp_bench.runner import unread_settings

PAPER = {"GP": -0.65, "GP-GP": -0.75, "LV-GP-GP": -0.28}
RUNS = [("GP", "vi", 1), ("GP-GP", "vi", 1), ("LV-GP-GP", "iw", 5)]


def split(path: Path, seed: int = 0):
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    idx = np.random.default_rng(seed).permutation(len(data))
    n_train = int(0.9 * len(data))
    tr, te = data[idx[:n_train]], data[idx[n_train:]]
    mu, sd = tr.mean(0), tr.std(0)
    sd[sd == 0] = 1.0
    tr, te = (tr - mu) / sd, (te - mu) / sd
    return tr[:, :-1], tr[:, -1:], te[:, :-1], te[:, -1:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=5000)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "core_power.jsonl"))
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    try:  # before the runs: a folder or a read-only file is said now, not after the first model
        check_writable(args.out, "--out")
    except ValueError as err:
        ap.error(str(err))
    torch.set_num_threads(args.threads)
    X, Y, Xt, Yt = split(find_uci("power"))  # $DEEPGP_DATA, else the user cache
    commit = os.popen("git rev-parse --short HEAD").read().strip()  # the code imported now, not at the end
    out = Path(args.out)
    # (model, inner width) of the lines there; a deep model's line from before the width was recorded ran "input"
    reads = {spec: "inner_width" not in unread_settings(spec, method) for spec, method, _ in RUNS}
    width = {spec: deepgp.ModelConfig(model=spec).resolved(len(X)).inner_width if reads[spec] else "-"
             for spec in reads}
    done = ({(r["model"], r.get("inner_width", "input" if reads.get(r["model"], True) else "-"))
             for r in map(json.loads, out.read_text().splitlines())} if out.exists() else set())
    for spec, method, K in RUNS:
        if (spec, width[spec]) in done:
            continue
        t0 = time.time()
        model = deepgp.DeepGP.from_spec(spec, X, Y, num_inducing=128, seed=0)
        hist = deepgp.fit(model, X, Y, method=method, num_samples=K, iterations=args.iterations, seed=0)
        secs = time.time() - t0
        row = dict(
            dataset="power", model=spec, method=method, iterations=args.iterations, seconds=round(secs, 1),
            bound_per_point=float(np.mean(hist[-100:]) / len(X)),
            test_loglik_mixture=float(model.predictive_log_density(Xt, Yt, 2000, seed=0).mean()),
            test_loglik_kde=float(model.predictive_log_density(Xt, Yt, 2000, estimator="kde", seed=0).mean()),
            paper=PAPER[spec], commit=commit, inner_width=width[spec],
        )
        print(json.dumps(row), flush=True)
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
