"""The Linear baseline's ceiling: the least-squares fit, in closed form, on each split.

    python benchmarks/uci/linear_ols.py [--datasets yacht,boston,...] [--splits 0,1] [--paper PAPER_S1_CSV]

deepgp's ``Linear`` (the CVAE with no hidden layers) is the linear-Gaussian model y | x ~ N(b·x + c, s²)
(deepgp_bench.baselines.linear), whose maximum-likelihood fit is ordinary least squares with the residual
variance of the training set. This prints its test log density per point (standardised units, the
runner's splits) beside the paper's Table S1 ``Linear`` column. A Linear model trained to convergence
is this fit (its bound is tight at the optimum), so its test log density is this value, and a paper
value far above it needs other data or another protocol.
"""

from __future__ import annotations

import argparse

import numpy as np
import scipy.stats

from deepgp.datasets.uci import load_split
from deepgp_bench.report import read_paper


def ols_log_density(dataset: str, split: int, data_dir=None) -> float:
    """Mean test log N(y; least-squares fit, training residual variance) on one split."""
    data = load_split(dataset, split, data_dir, 10_000, stats="train")
    design = np.column_stack([data.X_train, np.ones(len(data.X_train))])
    coef, *_ = np.linalg.lstsq(design, data.Y_train[:, 0], rcond=None)
    sd = (data.Y_train[:, 0] - design @ coef).std()
    mean = np.column_stack([data.X_test, np.ones(len(data.X_test))]) @ coef
    return float(scipy.stats.norm.logpdf(data.Y_test[:, 0], mean, sd).mean())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="yacht,boston,energy,concrete,power,kin8nm")
    p.add_argument("--splits", default="0,1")
    p.add_argument("--data-dir", default=None, help="folder of NAME.csv.gz (else $DEEPGP_DATA)")
    p.add_argument("--paper", default=None, help="the paper's Table S1 CSV (table_s1_all_methods.csv)")
    args = p.parse_args()
    splits = [int(s) for s in args.splits.split(",")]
    paper = read_paper(args.paper) if args.paper else {}
    print("| dataset | " + " | ".join(f"least squares, split {s}" for s in splits) + " | paper's Linear |")
    print("| --- |" + " ---: |" * (len(splits) + 1))
    for d in args.datasets.split(","):
        values = [ols_log_density(d, s, args.data_dir) for s in splits]
        ref = paper.get((d, "Linear", "vi"))
        print(f"| {d} | " + " | ".join(f"{v:.2f}" for v in values) + f" | {f'{ref[0]:.2f}' if ref else '–'} |")


if __name__ == "__main__":
    main()
