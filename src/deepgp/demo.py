"""``deepgp demo``: what latent variables add, on the paper's "DGP" letters (section 4.1).

Fits GP and GP-GP (VI) and LV-GP and LV-GP-GP (importance-weighted) to points inside the glyphs
of "DGP" (x horizontal, y vertical), prints each model's test log density and writes one figure
with the posterior density p(y | x) of every model over the data (the paper's Figures 1 and 5).
The noise-free models can only put one Gaussian at each x; the latent-variable models recover
the letters' multimodal, piecewise-constant slices.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from . import kinds
from .config import RECIPE_ITERATIONS, RECIPE_VALUES
from .datasets.letters import letters_log_density, load_letters
from .estimator import DeepGPRegressor
from .outputs import json_text
from .plotting import posterior_figure, save_figure
from .preprocessing import Standardizer
from .storage import check_output, check_writable, write_bytes

log = logging.getLogger(__name__)
MODELS = {"GP": "vi", "GP-GP": "vi", "LV-GP": "iw", "LV-GP-GP": "iw"}
OVERLAY_POINTS = 1000


@dataclass(frozen=True)
class DemoConfig:
    """The demo's data size, M, kernel and budget; the training itself is the library's default recipe.

    The default takes 2½–3 minutes on 2 CPU cores; ``QUICK`` under one. Its kernel is the Matérn-3/2, whose
    rougher functions of w jump between strokes more sharply than the RBF's: on a validation part of the letters
    LV-GP-GP scores −0.996 after 2,000 iterations with it and −1.143 with the RBF (benchmarks/notes/ideas.md), so
    2,000 iterations are its budget. ``LONG`` (the README's figure, about 23 minutes) trains with the paper's RBF
    kernel for 40,000 iterations, with the recipe's step-size annealing stretched over that budget:
    ``decay_every`` is a tenth of its iterations (4,000 instead of the recipe's 1,000), so that its 40,000
    iterations anneal as far as the recipe's 10,000; its image takes 1,000 draws per column, the default's 500.
    """

    num_train: int = 10000
    num_test: int = 1000
    num_inducing: int = 128
    iterations: int = 2000
    batch_size: int = 256
    num_samples: int = 5  # importance samples K for the LV models
    predict_samples: int = 500
    image_resolution: int = 200
    image_samples: int = 500
    seed: int = 0
    decay_every: int | None = None  # None: the recipe's; a longer budget anneals as far only if stretched
    kernel: str = "matern32"


QUICK = DemoConfig(num_train=1000, num_test=500, num_inducing=25, iterations=200, batch_size=128,
                   predict_samples=200, image_resolution=100, image_samples=200)
# the default recipe's decays over the budget it is meant for (10 over 10,000 iterations)
LONG_DECAYS = RECIPE_ITERATIONS["fast"] // RECIPE_VALUES["fast"]["decay_every"]


def long_config(iterations: int) -> DemoConfig:
    """The long budget at ``iterations``: the recipe's annealing stretched over them (``decay_every`` a tenth)."""
    return DemoConfig(iterations=iterations, decay_every=max(1, iterations // LONG_DECAYS), kernel="rbf",
                      image_samples=1000)


LONG = long_config(40_000)


def demo_device() -> str | None:
    """Where the demo trains: the first CUDA GPU where torch sees one, else the CPU (None)."""
    return "cuda" if torch.cuda.is_available() else None


def device_name(device: str | None) -> str:
    """The device in words, for the demo's report: 'the CPU' or 'cuda (NVIDIA H100 80GB HBM3)'."""
    return "the CPU" if device is None else f"{device} ({torch.cuda.get_device_name(device)})"


def run_demo(out="deepgp-demo", models=tuple(MODELS), config: DemoConfig = DemoConfig(), progress: bool = True) -> dict:
    """Fit ``models`` on the letters, write ``out/demo.png`` and ``out/scores.json`` (progress is logged
    to the ``deepgp`` logger, with the device trained on; ``deepgp demo`` prints the table), on a GPU
    where one is present (:func:`demo_device`).

    Returns {model: {"method", "test_log_density", "seconds"}}; the test log density is the
    mean per test point, in standardised units of y (so that a unit Gaussian scores −1.42).
    """
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise ValueError(f"unknown demo model(s) {unknown}; choose from {list(MODELS)}")
    if not models:
        raise ValueError("no models to fit")
    if len(set(models)) != len(models):
        raise ValueError(f"a demo model named twice in {list(models)}")
    torch.set_num_threads(min(torch.get_num_threads(), 2))  # small matrices: more threads only contend
    (x, y), (xt, yt) = load_letters(config.num_train, config.num_test, seed=config.seed)
    out = _check_folder(out)  # before the minutes of training, not after them
    device = demo_device()
    log.info(f"'DGP' letters: {len(x)} training and {len(xt)} test points; {config.iterations} iterations per model, "
             f"on {device_name(device)}")
    fitted, scores = {}, {}
    for name in models:
        method = MODELS[name]
        t = time.time()
        reg = DeepGPRegressor(
            model=name, method=method, num_samples=config.num_samples if method == "iw" else 1,
            kernel=config.kernel, device=device, num_inducing=config.num_inducing, iterations=config.iterations,
            batch_size=config.batch_size, decay_every=config.decay_every, predict_samples=config.predict_samples,
            seed=config.seed, progress=progress,
        )
        with warnings.catch_warnings():
            # the grid's repeated x values leave some k-means clusters empty at initialisation: harmless
            warnings.filterwarnings("ignore", message="One of the clusters is empty")
            reg.fit(x, y)
        # score is in the units of y; adding log std gives the standardised-units density
        lpd = reg.score(xt, yt) + reg.y_scaler_.log_jacobian
        fitted[f"{name} ({method.upper()})"] = reg
        scores[name] = {"method": method, "test_log_density": float(lpd), "seconds": round(time.time() - t, 1)}
        log.info(f"  {name:9s} {method.upper():3s} fitted in {scores[name]['seconds']:6.1f}s")
    made = not out.exists()
    out.mkdir(exist_ok=True)  # (made only now, with something to write: an interrupted run leaves none)
    try:
        path = write_figure(fitted, (x, y), out / "demo.png", config)
        record = {"config": asdict(config), "scores": scores, "exact": exact_score(y, xt, yt)}
        write_bytes(out / "scores.json", json_text(record, "the demo's scores", indent=2).encode())
    except BaseException:
        if made and not any(out.iterdir()):
            out.rmdir()
        raise
    log.info(f"wrote {path} and {out / 'scores.json'}")
    return scores


def _check_folder(out) -> Path:
    """``out`` as a Path, or a ValueError before any training: demo.png and scores.json must be writable
    in it, or, where it does not exist yet, it must be possible to make it in a folder that exists."""
    if not isinstance(out, (str, os.PathLike)) or not str(out):
        raise ValueError(f"out (--out) must name a folder for demo.png and scores.json, got {out!r}")
    out = Path(out)
    if not out.exists():
        check_writable(out, "the demo's folder")  # (its parent exists and takes a new entry)
        return out
    if not out.is_dir():
        raise ValueError(f"cannot write the demo to {out}: it is not a folder")
    for name, what, kind in (("demo.png", "the figure", kinds.FIGURE),
                             ("scores.json", "the scores", kinds.DEMO_SCORES)):
        check_output(out / name, what, kind=kind)  # (a file of another kind there is never replaced)
    return out


def exact_score(y_train, x_test, y_test) -> float:
    """The exact letters density's mean test log density, in the models' units (y standardised by
    ``y_train``): the best any model can score in expectation (Gibbs' inequality)."""
    return float(letters_log_density(x_test, y_test).mean() + Standardizer.fit(y_train).log_jacobian)


def score_table(scores: dict, exact: float | None = None) -> str:
    """The demo's table of test log densities, one line per model, and the exact density's below them."""
    lines = [f"{'model':10s} {'method':6s} {'test log density':>17s}"]
    lines += [f"{name:10s} {s['method'].upper():6s} {s['test_log_density']:17.3f}" for name, s in scores.items()]
    if exact is not None:
        lines.append(f"{'(the exact letters density)':27s} {exact:7.3f}")
    return "\n".join(lines)


def write_figure(fitted: dict, data, path, config: DemoConfig) -> Path:
    """The posterior density of every fitted model over the training data, one panel each."""
    x, y = data
    pad_x, pad_y = 0.05 * np.ptp(x), 0.15 * np.ptp(y)
    # at most 1,000 training points drawn over the density: the letters seen are the model's, not the data's
    shown = np.random.default_rng(config.seed).permutation(len(x))[:OVERLAY_POINTS]
    fig = posterior_figure(
        fitted, (x.min() - pad_x, x.max() + pad_x), (y.min() - pad_y, y.max() + pad_y), data=(x[shown], y[shown]),
        ncols=2 if len(fitted) == 4 else None, resolution=config.image_resolution,
        num_samples=config.image_samples, seed=config.seed,
    )
    return save_figure(fig, path)


def config_from_args(quick: bool = False, iterations: int | None = None, long: bool = False) -> DemoConfig:
    """The default, ``--quick`` or ``--long`` budget, with ``--iterations`` overriding any of them."""
    if quick and long:
        raise ValueError("choose --quick or --long, not both")
    config = QUICK if quick else LONG if long else DemoConfig()
    if iterations is None:
        return config
    if long:  # the long budget keeps its annealing stretched over whatever iterations it is given
        return long_config(iterations)
    return replace(config, iterations=iterations)
