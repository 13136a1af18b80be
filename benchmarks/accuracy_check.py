"""Accuracy guard: a fixed-seed 2,000-iteration run on power (default LV-GP-GP by IW,
K = 5, M = 64), test log density.

Run it on two versions of the code and compare (they must agree within 0.02 nats):

    git worktree add /tmp/old COMMIT
    .venv/bin/python benchmarks/accuracy_check.py /tmp/old & .venv/bin/python benchmarks/accuracy_check.py .
    # the VI path: add  --spec GP-GP-GP --method vi

The first argument is the checkout whose ``src/deepgp`` is imported (ahead of the installed one).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(checkout: str, spec: str = "LV-GP-GP", method: str = "iw") -> None:
    sys.path.insert(0, str(Path(checkout).resolve() / "src"))
    sys.path.insert(0, str(HERE))
    torch = importlib.import_module("torch")
    deepgp = importlib.import_module("deepgp")
    split = importlib.import_module("core_power").split
    data_file = importlib.import_module("peers.common").data_file
    torch.set_num_threads(1)
    X, Y, Xt, Yt = split(data_file("power"))
    model = deepgp.DeepGP.from_spec(spec, X, Y, num_inducing=64, seed=0)
    start = time.time()
    deepgp.fit(model, X, Y, method=method, num_samples=5 if method == "iw" else 1, iterations=2000, seed=0,
               progress=False)
    seconds = time.time() - start
    logp = float(model.predictive_log_density(Xt, Yt, 2000, seed=0).mean())
    print(json.dumps(dict(code=checkout, file=deepgp.__file__, spec=spec, method=method, seconds=round(seconds, 1),
                          mixture=logp)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", nargs="?", default=".")
    parser.add_argument("--spec", default="LV-GP-GP")
    parser.add_argument("--method", choices=("vi", "iw"), default="iw")
    args = parser.parse_args()
    main(args.checkout, args.spec, args.method)
