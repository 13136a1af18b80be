"""Does training still compute exactly what it did? A bitwise record of deepgp's training and prediction.

    .venv/bin/python tools/behaviour_check.py --out before.npz            # record
    .venv/bin/python tools/behaviour_check.py --compare before.npz        # record again and compare

Trains every model kind (GP, GP-GP, LV-GP-GP by IW and by VI; with and without natural gradients,
on the inner layers too; the captured step, which runs on the CPU without a graph; a run interrupted
and resumed from its checkpoint; float32 models and float64 products) for ``--iterations`` steps on a
small data set (synthetic, or a UCI set from ``--data-dir``/$DEEPGP_DATA with ``--dataset``), and
records every parameter tensor, the bounds of every iteration, the warnings fit gave, the bounds
evaluated afterwards (and their gradients, DReG's included), the checkpoint's contents, and the
predictions: the final layer's predictive moments, the log densities (mixture and KDE) and draws.

``--compare FILE`` records again and checks every array bit for bit against FILE, printing the first
differences of each array that differs (exit status 1). Bitwise equality is the right test here, and
only here: the same machine, torch build and thread count (``--threads``, recorded and checked) run
the same CPU kernels in the same order, so an unchanged computation gives the same bits; a record
from another host or thread count is not comparable this way.

Uses deepgp's public API only, so one copy of this script records any version of the library.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

import deepgp
from deepgp import storage
from deepgp.linalg import seeded

M = 10  # inducing points: small, so that the whole record takes a minute on one core


class Interrupted(Exception):
    """Stops a run from its callback, as a kill would (the checkpoint of before stays)."""


def synthetic(n: int = 120, seed: int = 0):
    """A bimodal toy problem: y = ±sin(x₀) + noise (the sign a coin flip per point), x [n, 2]."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2))
    y = np.sin(x[:, :1]) * np.sign(rng.standard_normal((n, 1))) + 0.1 * rng.standard_normal((n, 1))
    return x, y


def uci(name: str, data_dir, n: int):
    """The first ``n`` training points and 50 test points of split 0 of a UCI set."""
    from deepgp.datasets.uci import load_split

    data = load_split(name, 0, data_dir, test_limit=50)
    return (data.X_train[:n], data.Y_train[:n]), (data.X_test, data.Y_test)


# name → (model spec, model settings, fit settings, environment, how it runs)
CASES = {
    "GP-vi": ("GP", {}, dict(method="vi", num_samples=1), {}, "plain"),
    "GP-vi-adam": ("GP", {}, dict(method="vi", num_samples=1, natgrad=False), {}, "plain"),
    "GP-vi-paper": ("GP", {}, dict(method="vi", num_samples=1, recipe="paper"), {}, "plain"),
    "GP-vi-captured": ("GP", {}, dict(method="vi", num_samples=1), {}, "captured"),
    "GP-GP-vi": ("GP-GP", {}, dict(method="vi", num_samples=2), {}, "plain"),
    "GP-GP-vi-inner": ("GP-GP", {}, dict(method="vi", num_samples=2, natgrad_inner=True), {}, "plain"),
    "GP-GP-vi-inner-gamma1": ("GP-GP", {}, dict(method="vi", num_samples=2, natgrad_inner=True, gamma=1.0,
                                                 recipe="paper"), {}, "plain"),
    "GP-GP-vi-inner-gamma1-captured": ("GP-GP", {}, dict(method="vi", num_samples=2, natgrad_inner=True, gamma=1.0,
                                                          recipe="paper"), {}, "captured"),
    "GP-GP-vi-inner-captured": ("GP-GP", {}, dict(method="vi", num_samples=2, natgrad_inner=True), {}, "captured"),
    "GP-GP-vi-hidden": ("GP-GP", dict(inner_width="hidden"), dict(method="vi", num_samples=2), {}, "plain"),
    "GP-GP-iw": ("GP-GP", {}, dict(method="iw", num_samples=3), {}, "plain"),
    "LV-GP-GP-iw": ("LV-GP-GP", {}, dict(method="iw", num_samples=3), {}, "plain"),
    "LV-GP-GP-iw-joint": ("LV-GP-GP", {}, dict(method="iw", num_samples=3, inner_sampling="joint"), {}, "plain"),
    "LV-GP-GP-iw-batch": ("LV-GP-GP", {}, dict(method="iw", num_samples=3, inner_sampling="batch"), {}, "plain"),
    "LV-GP-GP-iw-dreg": ("LV-GP-GP", {}, dict(method="iw", num_samples=3, dreg=True), {}, "plain"),
    "LV-GP-GP-iw-adam": ("LV-GP-GP", {}, dict(method="iw", num_samples=3, natgrad=False), {}, "plain"),
    "LV-GP-GP-iw-float64-products": ("LV-GP-GP", {}, dict(method="iw", num_samples=3),
                                     {"DEEPGP_FLOAT32_PRODUCTS": "0"}, "plain"),
    "LV-GP-GP-iw-float32": ("LV-GP-GP", dict(dtype="float32"), dict(method="iw", num_samples=3), {}, "plain"),
    "LV-GP-GP-iw-captured": ("LV-GP-GP", {}, dict(method="iw", num_samples=3), {}, "captured"),
    "LV-GP-GP-iw-resumed": ("LV-GP-GP", {}, dict(method="iw", num_samples=3), {}, "resumed"),
    "LV-GP-GP-iw-captured-resumed": ("LV-GP-GP", {}, dict(method="iw", num_samples=3), {}, "captured-resumed"),
    "LV-GP-GP-vi": ("LV-GP-GP", {}, dict(method="vi", num_samples=2), {}, "plain"),
    "GP-LV-GP-vi": ("GP-LV-GP", {}, dict(method="vi", num_samples=2), {}, "plain"),
    "LV-GP-GP-vi-inner-captured": ("LV-GP-GP", {}, dict(method="vi", num_samples=2, natgrad_inner=True), {},
                                "captured"),
}


@contextlib.contextmanager
def environment(values: dict):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def flatten(prefix: str, value, out: dict) -> None:
    """Every leaf of a checkpoint's tree as an array under a '/'-joined key."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(f"{prefix}/{k}", v, out)
    elif isinstance(value, (list, tuple)) and not all(isinstance(v, (int, float, bool)) for v in value):
        for i, v in enumerate(value):
            flatten(f"{prefix}/{i}", v, out)
    elif isinstance(value, torch.Tensor):
        out[prefix] = value.detach().cpu().numpy()
    elif value is None:
        out[prefix] = np.array("None")
    elif isinstance(value, str):
        out[prefix] = np.array(value)
    else:
        out[prefix] = np.array(value)


def train(name: str, data, iterations: int, folder: Path) -> dict:
    """One case's record: its arrays under '<name>/...'."""
    spec, model_settings, settings, env, how = CASES[name]
    (x, y), (xt, yt) = data
    out: dict = {}
    settings = dict(settings, iterations=iterations, batch_size=32, decay_every=7, seed=3, progress=False)
    captured = how.startswith("captured")
    ckpt = folder / f"{name}.ckpt"
    with environment(env), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = deepgp.DeepGP.from_spec(spec, x, y, num_inducing=M, seed=1, **model_settings)
        if how.endswith("resumed"):
            def stop(t, bound):
                if t == iterations // 2:
                    raise Interrupted

            with contextlib.suppress(Interrupted):
                deepgp.fit(model, x, y, checkpoint=ckpt, checkpoint_every=5, callback=stop, capture=captured,
                           **settings)
            model = deepgp.DeepGP.from_spec(spec, x, y, num_inducing=M, seed=1, **model_settings)
            history = deepgp.fit(model, x, y, checkpoint=ckpt, checkpoint_every=5, capture=False, **settings)
            flatten(f"{name}/checkpoint", storage.read(ckpt, storage.CHECKPOINT), out)
        else:
            history = deepgp.fit(model, x, y, capture=captured, **settings)
        out[f"{name}/history"] = np.asarray(history)
        out[f"{name}/warnings"] = np.array([str(w.message) for w in caught] or ["-"])
        for k, v in model.state_dict().items():
            out[f"{name}/state/{k}"] = v.detach().cpu().numpy()
        evaluate(name, model, x, y, xt, yt, out)
    return out


def evaluate(name: str, model, x, y, xt, yt, out: dict) -> None:
    """The bounds and their gradients outside fit, and the predictions, under fixed seeds."""
    X, Y = (torch.as_tensor(a, dtype=model.dtype) for a in (x[:40], y[:40]))
    bounds = {"vi": dict(method="vi", num_samples=2)}
    if model.has_latent:
        bounds.update({f"iw-{s}": dict(method="iw", num_samples=3, inner_sampling=s)
                       for s in ("independent", "joint", "batch")})
        bounds["iw-dreg"] = dict(method="iw", num_samples=3, dreg=True)
    for i, (what, kw) in enumerate(bounds.items()):
        model.zero_grad(set_to_none=True)
        with seeded(100 + i):
            bound = model.elbo(X, Y, **kw)
        bound.backward()
        out[f"{name}/elbo/{what}"] = bound.detach().numpy()
        for k, p in model.named_parameters():
            if p.grad is not None:
                out[f"{name}/grad/{what}/{k}"] = p.grad.numpy().copy()
    model.zero_grad(set_to_none=True)
    from deepgp import prediction

    with seeded(7):
        mean, var = prediction.predictive_moments(model, torch.as_tensor(xt, dtype=model.dtype), 20)
    out[f"{name}/predict/mean"], out[f"{name}/predict/var"] = mean.numpy(), var.numpy()
    out[f"{name}/predict/log_density"] = model.predictive_log_density(xt, yt, 50, seed=8)
    out[f"{name}/predict/log_density_kde"] = model.predictive_log_density(xt, yt, 50, "kde", seed=9)
    out[f"{name}/predict/draws"] = model.sample_predictive(xt, 20, seed=10)


def record(args) -> dict:
    torch.set_num_threads(args.threads)
    if args.dataset == "synthetic":
        x, y = synthetic(120, 0)
        data = ((x, y), synthetic(30, 1))
    else:
        data = uci(args.dataset, args.data_dir, args.points)
    names = [n for n in CASES if not args.cases or any(c in n for c in args.cases)]
    out = {"meta/threads": np.array(args.threads), "meta/dataset": np.array(args.dataset),
           "meta/iterations": np.array(args.iterations), "meta/torch": np.array(torch.__version__)}
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            print(f"  {name}", file=sys.stderr, flush=True)
            out.update(train(name, data, args.iterations, Path(folder)))
    return out


def first_differences(key: str, a: np.ndarray, b: np.ndarray, show: int) -> str:
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{key}: {a.dtype}{list(a.shape)} recorded, now {b.dtype}{list(b.shape)}"
    if a.dtype.kind in "fc":  # bit for bit: −0.0 against 0.0 and NaN payloads count
        differs = np.atleast_1d(a).view(f"u{a.itemsize}") != np.atleast_1d(b).view(f"u{b.itemsize}")
    else:
        differs = a != b
    if not np.any(differs):
        return ""
    where = np.argwhere(np.atleast_1d(differs))[:show]
    flat_a, flat_b = np.atleast_1d(a), np.atleast_1d(b)
    lines = [f"{key}: {int(np.sum(differs))} of {a.size} differ"]
    if a.dtype.kind in "fc":
        lines[0] += f", largest |difference| {np.nanmax(np.abs(flat_a.astype(float) - flat_b.astype(float))):.3g}"
    for index in where:
        i = tuple(int(j) for j in index)
        lines.append(f"    at {list(i)}: {flat_a[i].item()!r} recorded, now {flat_b[i].item()!r}")
    return "\n".join(lines)


def compare(recorded: dict, now: dict, show: int) -> int:
    if recorded.get("meta/threads") is not None and int(recorded["meta/threads"]) != int(now["meta/threads"]):
        print(f"the record used {int(recorded['meta/threads'])} threads, this run {int(now['meta/threads'])}: "
              "not comparable bit for bit", file=sys.stderr)
        return 2
    cases = {k.split("/")[0] for k in now if not k.startswith("meta/")}
    keys = sorted(k for k in recorded if k.split("/")[0] in cases)
    missing = [k for k in keys if k not in now]
    extra = sorted(k for k in now if k not in recorded and not k.startswith("meta/"))
    reports = [r for k in keys if k in now and not k.startswith("meta/")
               for r in [first_differences(k, recorded[k], now[k], show)] if r]
    for k in missing:
        print(f"{k}: recorded, not produced now")
    for k in extra:
        print(f"{k}: produced now, not recorded")
    for r in reports:
        print(r)
    same = len(keys) - len(missing) - len(reports)
    print(f"{same} of {len(keys)} recorded arrays identical bit for bit ({len(cases)} cases); "
          f"{len(reports)} differ, {len(missing)} missing, {len(extra)} new")
    return 1 if reports or missing or extra else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="write the record to this .npz file")
    p.add_argument("--compare", type=Path, help="compare against this record bit for bit")
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dataset", default="synthetic", help="synthetic, or a UCI set's name (e.g. boston)")
    p.add_argument("--data-dir", default=os.environ.get("DEEPGP_DATA"), help="folder of NAME.csv.gz")
    p.add_argument("--points", type=int, default=200, help="training points taken from a UCI set")
    p.add_argument("--cases", nargs="*", help="only the cases whose names contain one of these")
    p.add_argument("--show", type=int, default=3, help="differing elements shown per array")
    args = p.parse_args(argv)
    if args.out is None and args.compare is None:
        p.error("give --out, --compare or both")
    if args.iterations < 2:
        p.error(f"--iterations must be >= 2, got {args.iterations}")
    if args.compare is not None and not args.compare.is_file():
        p.error(f"--compare: no record at {args.compare}")
    now = record(args)
    if args.out is not None:
        np.savez_compressed(args.out, **now)
        print(f"recorded {len(now)} arrays to {args.out}", file=sys.stderr)
    if args.compare is None:
        return 0
    with np.load(args.compare, allow_pickle=False) as f:
        recorded = {k: f[k] for k in f.files}
    return compare(recorded, now, args.show)


if __name__ == "__main__":
    sys.exit(main())
