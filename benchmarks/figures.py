"""The paper's figures, re-drawn with deepgp: what `make figures` runs.

    python benchmarks/figures.py prior     [--out docs/figures]
    python benchmarks/figures.py letters   [--out docs/figures] [--iterations N] [--device cuda] [--jobs J]
    python benchmarks/figures.py marginals --data-dir DIR [--datasets power,keggdirected] [--iterations N] ...

* ``prior``: Fig. 3 (GP, GP-GP, LV-GP, LV-GP-GP) and Figs. 6–9 (the three-layer and other
  latent-variable placements): prior draws on a 1-D input, every layer 1-D with the RBF kernel at
  unit lengthscale as the paper states; LV models drawn for nine values of w. Seconds on a CPU.
* ``letters``: Figs. 1, 4 and 5 — the posterior density p(y | x) of each model fitted to the "DGP"
  letters at the paper's scale (73,419 points: 72,419 for training, 1,000 held out), GP and GP-GP
  by VI, the LV models by VI and by IW, and LV-GP-GP-GP (IW, the paper's first figure). Each
  panel's title gives the held-out log density. Minutes per model on a GPU.
* ``marginals``: Figs. 10–11 — standardised predictive marginals at 30 test points of split 0 of
  each data set (power: latent variables matter; keggdirected: depth and latent variables both do),
  for GP (VI), in place of the paper's two CVAE columns, and the LV models by IW
  (docs/paper-vs-code.md §8.3).

Fitted models are kept under ``--work`` (default ``.figures``, ignored by git) and reused, so a run
cut short resumes with the fits it has; ``--jobs J`` fits J models at once (J processes; on a GPU
they share it). The letters' and the marginals' PNGs land in ``--out`` beside a JSON of the settings (and
the letters' scores) that made them; ``marginals.json`` holds one entry per data set, and a run for
one keeps the others.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from pathlib import Path

import numpy as np

PRIOR_FIGURES = {
    "prior_fig3.png": ("GP", "GP-GP", "LV-GP", "LV-GP-GP"),
    "prior_fig6-9.png": ("GP-GP-GP", "GP-LV-GP", "LV-GP-GP-GP", "GP-LV-GP-GP", "GP-GP-LV-GP"),
}
LETTERS = (("GP", "vi"), ("GP-GP", "vi"), ("LV-GP", "vi"), ("LV-GP", "iw"), ("LV-GP-GP", "vi"), ("LV-GP-GP", "iw"),
           ("LV-GP-GP-GP", "iw"))
MARGINALS = (("GP", "vi"), ("LV-GP", "iw"), ("LV-GP-GP", "iw"), ("LV-GP-GP-GP", "iw"))
LETTERS_POINTS = 73_419  # the paper's count (§4.1)


def stage_prior(args) -> None:
    from deepgp.plotting import prior_figure, save_figure

    for name, specs in PRIOR_FIGURES.items():
        print("wrote", save_figure(prior_figure(specs, num_draws=4, seed=args.seed), args.out / name))


def _fit_one(job: dict) -> dict:
    """Fit one model (in a worker process) and save it; a saved one is loaded instead."""
    import torch

    from deepgp import DeepGPRegressor

    torch.set_num_threads(job["threads"])
    path = Path(job["path"])
    if path.exists():
        return {"path": str(path), "seconds": None}
    data = np.load(job["data"])
    reg = DeepGPRegressor(model=job["model"], method=job["method"], num_samples=5 if job["method"] == "iw" else 1,
                          num_inducing=job["num_inducing"], iterations=job["iterations"], device=job["device"],
                          predict_samples=job["predict_samples"], seed=0, progress=False)
    t0 = time.perf_counter()
    reg.fit(data["x"], data["y"][:, 0])
    seconds = time.perf_counter() - t0
    reg.save(path)
    return {"path": str(path), "seconds": seconds}


def _fit_all(jobs: list[dict], n_jobs: int) -> list[dict]:
    if n_jobs <= 1:
        return [_fit_one(job) for job in jobs]
    with mp.get_context("spawn").Pool(n_jobs) as pool:  # spawn: CUDA cannot be forked
        return pool.map(_fit_one, jobs, chunksize=1)


def _jobs(args, folder: Path, data_file: Path, models) -> list[dict]:
    return [dict(model=m, method=k, path=str(folder / f"{m}_{k}.safetensors"), data=str(data_file),
                 iterations=args.iterations, num_inducing=args.num_inducing, device=args.device,
                 predict_samples=args.predict_samples, threads=args.threads) for m, k in models]


def stage_letters(args) -> None:
    from deepgp import DeepGPRegressor
    from deepgp.datasets.letters import load_letters
    from deepgp.plotting import posterior_figure, save_figure

    n_test = 1000
    (x, y), (xt, yt) = load_letters(args.letters_points - n_test, n_test, seed=args.seed)
    folder = args.work / f"letters_{args.letters_points}_{args.iterations}"
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "data.npz", x=x, y=y)
    fits = _fit_all(_jobs(args, folder, folder / "data.npz", LETTERS), args.jobs)
    models, scores = {}, {}
    for (model, method), fit in zip(LETTERS, fits):
        reg = DeepGPRegressor.load(fit["path"], device=args.device)
        lpd = float(reg.score(xt, yt) + reg.y_scaler_.log_jacobian)  # standardised units
        models[f"{model} ({method.upper()}): {lpd:.2f}"] = reg
        scores[f"{model} {method}"] = {"test_log_density": lpd, "fit_seconds": fit["seconds"]}
    keep = np.random.default_rng(0).permutation(len(x))[:4000]  # the points drawn over each panel
    pad_x, pad_y = 0.05 * np.ptp(x), 0.15 * np.ptp(y)
    fig = posterior_figure(models, (x.min() - pad_x, x.max() + pad_x), (y.min() - pad_y, y.max() + pad_y),
                           data=(x[keep], y[keep]), ncols=4, resolution=200, num_samples=1000, seed=0)
    out = save_figure(fig, args.out / "letters.png")
    _record(args, "letters", {"points": args.letters_points, "test_points": n_test, "scores": scores})
    print("wrote", out)


def stage_marginals(args) -> None:
    from deepgp import DeepGPRegressor
    from deepgp.datasets.uci import load_split
    from deepgp.plotting import marginals_figure, save_figure

    for dataset in args.datasets.split(","):
        data = load_split(dataset, 0, args.data_dir)
        folder = args.work / f"{dataset}_0_{args.iterations}"
        folder.mkdir(parents=True, exist_ok=True)
        np.savez(folder / "data.npz", x=data.X_train, y=data.Y_train)
        fits = _fit_all(_jobs(args, folder, folder / "data.npz", MARGINALS), args.jobs)
        models, seconds = {}, {}
        for (model, method), fit in zip(MARGINALS, fits):
            reg = DeepGPRegressor.load(fit["path"], device=args.device)
            models[f"{dataset}: {model} ({method.upper()})"] = reg
            seconds[f"{model} {method}"] = {"fit_seconds": fit["seconds"]}
        out = save_figure(marginals_figure(models, data.X_test, num_points=30, num_samples=2000),
                          args.out / f"marginals_{dataset}.png")
        _record(args, "marginals", {"fits": seconds}, key=dataset)
        print("wrote", out)


def _record(args, stage: str, what: dict, key: str | None = None) -> None:
    """Write ``out/STAGE.json``: the deepgp version and settings that made the stage's figure, and
    ``what``. With ``key`` (the marginals' data set: one figure each), only that key's entry is
    replaced, so that a later run for one data set keeps the record of another's figure (runs one at
    a time: two at once may each miss the other's entry)."""
    import deepgp
    from deepgp.storage import write_bytes

    settings = {k: v for k, v in vars(args).items() if k in ("iterations", "num_inducing", "device", "seed", "jobs")}
    entry = {"deepgp": deepgp.__version__, **settings, **what}
    path = args.out / f"{stage}.json"
    if key is not None:
        kept = json.loads(path.read_text()) if path.exists() else {}
        # (entries only: a record of the older single-run layout, settings at the top, is replaced)
        entry = {**{k: v for k, v in kept.items() if isinstance(v, dict) and "deepgp" in v}, key: entry}
    write_bytes(path, (json.dumps(entry, indent=1) + "\n").encode())


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("stage", choices=("prior", "letters", "marginals"))
    p.add_argument("--out", type=Path, default=Path("docs/figures"))
    p.add_argument("--work", type=Path, default=Path(".figures"), help="fitted models, reused by a rerun")
    p.add_argument("--iterations", type=int, default=10_000, help="training iterations per model")
    p.add_argument("--num-inducing", type=int, default=128)
    p.add_argument("--predict-samples", type=int, default=1000)
    p.add_argument("--letters-points", type=int, default=LETTERS_POINTS)
    p.add_argument("--datasets", default="power,keggdirected", help="the marginals stage's data sets")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--jobs", type=int, default=1, help="models fitted at once")
    p.add_argument("--threads", type=int, default=1, help="torch threads per fit")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    {"prior": stage_prior, "letters": stage_letters, "marginals": stage_marginals}[args.stage](args)


if __name__ == "__main__":
    main()
