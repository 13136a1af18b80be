"""Test log density against training iterations: how much of the gap to the paper is budget?

    python benchmarks/uci/learning_curve.py --dataset kin8nm [--model LV-GP-GP --method iw --split 0]
        [--checkpoints 500,1000,2000,4000,8000,16000] [--stats train|all] [--batch-size 512]
        [--inner-sampling joint|independent] [--inner-width auto|input|hidden] [--device cuda]
        [--out benchmarks/uci/results/learning_curve.jsonl]

Trains ONE model (M=128, B=512, K=5, the paper's settings) and evaluates it by the benchmark's
metrics (deepgp.metrics.split_metrics: 2,000 predictive draws, KDE and mixture) at every
checkpoint, appending one JSON line per checkpoint to --out as it goes. The training state is
checkpointed beside --out, so a killed run resumes where it stopped and keeps every line written.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

import deepgp
from deepgp.config import INNER_WIDTHS, ModelConfig
from deepgp.datasets.uci import load_split
from deepgp.metrics import split_metrics
from deepgp.objectives import INNER_SAMPLING
from deepgp.storage import check_writable
from deepgp_bench.runner import unread_settings

# options added after the first lines were written: their defaults, which those lines used
OLD_DEFAULTS = {"stats": "train", "batch_size": 512, "inner_sampling": "joint", "inner_width": "input"}
_TAG_PREFIX = {"batch_size": "b"}  # a non-default option's mark in the state file's name, e.g. _b128


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--model", default="LV-GP-GP")
    p.add_argument("--method", default="iw")
    p.add_argument("--split", type=int, default=0)
    p.add_argument("--checkpoints", default="500,1000,2000,4000,8000,16000")
    p.add_argument("--num-inducing", type=int, default=128)
    p.add_argument("--test-limit", type=int, default=2000)
    p.add_argument("--stats", default="train", choices=["train", "all"],
                   help="standardise with training statistics (ours) or all-data ones (the paper's code)")
    p.add_argument("--batch-size", type=int, default=512, help="minibatch size (the paper: 512)")
    p.add_argument("--inner-sampling", default="joint", choices=INNER_SAMPLING,
                   help="IW inner layers: one function draw per point shared by its K samples (the paper's "
                        "text) or an independent draw per sample (its released code)")
    p.add_argument("--inner-width", default=ModelConfig.inner_width, choices=INNER_WIDTHS,
                   help="the inner layers' width (deepgp.ModelConfig); recorded as it resolves for the data")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "learning_curve.jsonl"),
                   help="JSON lines, appended (default: benchmarks/uci/results/learning_curve.jsonl)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    checkpoints = sorted(int(c) for c in args.checkpoints.split(","))
    try:  # before any training: --out must take a line, in a folder that exists (none is made)
        check_writable(args.out, "--out")
    except ValueError as err:
        p.error(" ".join(str(err).split()))
    out = Path(args.out)
    data = load_split(args.dataset, args.split, args.data_dir, test_limit=args.test_limit, stats=args.stats)
    width = ModelConfig(model=args.model, inner_width=args.inner_width).resolved(len(data.X_train)).inner_width
    key = dict(dataset=args.dataset, model=args.model, method=args.method, split=args.split,
               num_inducing=args.num_inducing, test_limit=args.test_limit, stats=args.stats,
               batch_size=args.batch_size, inner_sampling=args.inner_sampling)
    if "inner_width" not in unread_settings(args.model, args.method):  # (GP, LV-GP: no inner layer reads it)
        key["inner_width"] = width
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            rec = json.loads(line)
            # lines written before --stats, --batch-size, --inner-sampling and --inner-width existed: their values
            if all(rec.get(k, OLD_DEFAULTS.get(k)) == v for k, v in key.items()):
                done.add(rec["iteration"])
    todo = [c for c in checkpoints if c not in done]
    if not todo:
        return
    model = deepgp.DeepGP.from_spec(args.model, data.X_train, data.Y_train, num_inducing=args.num_inducing,
                                    inner_width=width, seed=args.split, device=args.device)
    K = 5 if args.method == "iw" else 1
    tag = "".join(f"_{_TAG_PREFIX.get(k, '')}{key[k]}" for k, v in OLD_DEFAULTS.items() if key.get(k, v) != v)
    state = out.with_name(f"{out.stem}_{args.dataset}_{args.model}_{args.method}_{args.split}{tag}.safetensors")
    start = time.perf_counter()
    history: list[float] = []

    def callback(t: int, bound: float) -> bool:
        history.append(bound)
        it = t + 1
        if it in todo:
            metrics = split_metrics(model, data.X_test, data.Y_test, 2000, 100, seed=args.split)
            model.train()
            rec = dict(key, iteration=it, train_seconds_this_run=round(time.perf_counter() - start, 1),
                       bound=float(np.mean(history[-50:])), noise_variance=float(model.likelihood.variance().detach()),
                       device=str(model.device), torch=torch.__version__, **metrics)
            with open(out, "a") as f:
                f.write(json.dumps(rec) + "\n")
            print(json.dumps(rec), flush=True)
        return False

    deepgp.fit(model, data.X_train, data.Y_train, args.method, K, iterations=max(todo), seed=args.split,
               batch_size=args.batch_size, inner_sampling=args.inner_sampling, progress=False, callback=callback,
               checkpoint=state, checkpoint_every=500)


if __name__ == "__main__":
    main()
