"""The paper's figures: prior draws (Figs. 3, 6–9), posterior densities (Figs. 1, 4, 5) and
standardised predictive marginals (Fig. 10–11).

Every function takes either a fitted :class:`~deepgp.DeepGPRegressor` (inputs and outputs in the
data's original units) or a bare :class:`~deepgp.DeepGP` (its own units). Figures are drawn with
matplotlib's object interface (``matplotlib.figure.Figure``), so no display is needed and pyplot's
global state — the backend of a user's notebook — is never touched; ``save_figure`` writes PNG or
PDF by extension.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib
import numpy as np
import torch
from matplotlib.figure import Figure
from scipy.stats import gaussian_kde

from . import kinds, memory
from .estimator import DeepGPRegressor, Standardizer
from .layers import GPLayer, LatentVariableLayer
from .linalg import DEFAULT_JITTER, cholesky, seeded, standard_normal
from .model import DeepGP
from .prediction import block_bytes
from .storage import check_output, write_bytes

FORMATS = (".png", ".pdf")


def _unwrap(model) -> tuple[DeepGP, Standardizer, Standardizer]:
    """(DeepGP, x scaler, y scaler); identity scalers for a bare DeepGP."""
    if isinstance(model, DeepGPRegressor):
        if not hasattr(model, "model_"):
            raise ValueError("the DeepGPRegressor is not fitted; call fit(X, y) first")
        return model.model_, model.x_scaler_, model.y_scaler_
    if isinstance(model, DeepGP):
        return model, Standardizer(np.zeros(model.input_dim), np.ones(model.input_dim)), Standardizer(
            np.zeros(model.output_dim), np.ones(model.output_dim))
    raise ValueError(f"expected a DeepGP or a DeepGPRegressor, got {type(model).__name__}")


def check_figure_path(path, inputs=(), outputs=()) -> Path:
    """``path`` as a Path if it ends in .png or .pdf and a figure may be written there (its folder exists;
    none of the command's ``inputs`` or other ``outputs``, as :func:`deepgp.storage.check_output` takes
    them; a file there is a figure, or empty: any other file is never replaced); a ValueError otherwise
    (call before drawing)."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"figure file must end in one of {FORMATS}, got {path.name!r}")
    return check_output(path, "the figure", inputs, outputs, kind=kinds.FIGURE)


def save_figure(fig, path) -> Path:
    """Write ``fig`` to ``path`` (.png or .pdf) in a folder that exists (none is made: a mistyped folder is
    an error, as for every file deepgp writes); closes the figure."""
    path = check_figure_path(path)
    buf = io.BytesIO()  # drawn in memory, then written atomically: a failed plot leaves an old figure
    fmt = path.suffix.lower().lstrip(".")
    fig.savefig(buf, format=fmt, dpi=150 if fmt == "png" else None, bbox_inches="tight")
    write_bytes(path, buf.getvalue())
    return path


# -- posterior density (Figures 1, 4 and 5) ---------------------------------------------------
@torch.no_grad()
def log_density_grid(model, x_grid, y_grid, num_samples: int = 300, seed: int = 0) -> np.ndarray:
    """log p(y | x) on a grid for a 1-input, 1-output model: [len(y_grid), len(x_grid)].

    x_grid [G], y_grid [H], in the units of ``model`` (original units for a regressor). The
    density is the Gaussian mixture (1/S) Σ_s N(y; μ_s(x), s_s²(x) + σ²) over S predictive
    draws (w from the prior), as in the mixture test-log-density estimator.
    """
    dgp, xs, ys = _unwrap(model)
    if dgp.input_dim != 1 or dgp.output_dim != 1:
        raise ValueError("a density image needs a model with 1 input and 1 output, "
                         f"got {dgp.input_dim} and {dgp.output_dim}")
    check_grid_memory(model, len(x_grid), num_samples)
    dgp.eval()
    X = torch.as_tensor(xs.transform(np.asarray(x_grid, dtype=np.float64).reshape(-1, 1)), dtype=dgp.dtype)
    Y = torch.as_tensor(ys.transform(np.asarray(y_grid, dtype=np.float64).reshape(-1, 1)), dtype=dgp.dtype)
    with seeded(seed, dgp.device):
        mean, var = dgp.propagate_prior(X.to(dgp.device), num_samples)  # [S, G, 1]
    rows = []
    for yc in Y.to(dgp.device).split(64):  # [h, 1] → [h, 1, 1, 1] against [S, G, 1]: bounded memory
        logp = dgp.likelihood.log_predictive(yc[:, None, None, :], mean, var)  # [h, S, G]
        rows.append(torch.logsumexp(logp, 1) - math.log(num_samples))
    return torch.cat(rows).cpu().numpy() - ys.log_jacobian


def check_grid_memory(model, resolution: int, num_samples: int, setting: str = "num_samples") -> None:
    """A :class:`~deepgp.memory.MemoryBudgetError` naming ``setting`` if :func:`log_density_grid` at
    ``resolution`` x values and S = ``num_samples`` needs more memory than is available: one propagation
    of S draws at every x (:func:`deepgp.prediction.block_bytes`), their moments and 64 y rows of terms."""
    dgp = _unwrap(model)[0]
    needed = block_bytes(dgp, num_samples, resolution) + (2 + 3 * 64) * num_samples * resolution * 8
    memory.require(needed, setting, num_samples, f"a density image of {resolution} columns", dgp.device)


def plot_posterior_density(
    ax, model, x_range: tuple[float, float], y_range: tuple[float, float], data=None, resolution: int = 200,
    num_samples: int = 300, seed: int = 0, title: str | None = None, gamma: float = 0.5,
):
    """Draw p(y | x) as an image on ``ax`` with optional data points (the style of Figures 1, 4, 5).

    x_range, y_range: (low, high). data: (x [N], y [N]) or None. ``gamma`` < 1 brightens low
    densities (power-law colour scale) so that thin modes stay visible.
    """
    xg = np.linspace(*x_range, resolution)
    yg = np.linspace(*y_range, resolution)
    density = np.exp(log_density_grid(model, xg, yg, num_samples, seed))
    ax.imshow(density, origin="lower", aspect="auto", extent=(*x_range, *y_range), cmap="viridis",
              norm=matplotlib.colors.PowerNorm(gamma, vmin=0.0, vmax=float(np.quantile(density, 0.995))))
    if data is not None:
        x, y = (np.asarray(a).ravel() for a in data)
        ax.scatter(x, y, s=0.3, c="white", alpha=0.35, linewidths=0)
    ax.set_xlim(*x_range)
    ax.set_ylim(*y_range)
    if title:
        ax.set_title(title)
    return ax


def posterior_figure(models: dict, x_range, y_range, data=None, ncols: int | None = None, **kwargs):
    """One density panel per model: ``models`` maps a title to a fitted model. Returns the figure."""
    n = len(models)
    ncols = ncols or n
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(3.6 * ncols, 2.6 * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    for ax, (name, model) in zip(axes.flat, models.items()):
        plot_posterior_density(ax, model, x_range, y_range, data=data, title=name, **kwargs)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    return fig


# -- prior draws (Figures 3, 6–9) ------------------------------------------------------------
MAX_PANELS = 100  # rows or columns of panels in a figure (each costs memory; no page shows more)


@torch.no_grad()
def prior_draw(model: DeepGP, x: np.ndarray, w_values: np.ndarray, seed: int = 0) -> np.ndarray:
    """One joint draw of the prior function of a 1-input model on x [G] for each w in w_values [W].

    Each GP layer is sampled jointly over all G·W inputs from its kernel (zero-mean GP plus the
    layer's fixed linear mean function), ignoring q(u); each LV layer appends the w value of its
    column (the same w in every LV layer, on every latent coordinate). Returns the noise-free
    outputs [W, G] (first output dimension); models without LV layers give W identical rows.
    """
    if model.input_dim != 1:
        raise ValueError(f"prior draws are drawn on a 1-D input; the model has {model.input_dim} inputs")
    G, W = len(x), len(w_values)
    H = torch.as_tensor(np.tile(np.asarray(x, dtype=np.float64), W)[:, None], dtype=model.dtype)  # [W·G, 1]
    w = torch.as_tensor(np.repeat(np.asarray(w_values, dtype=np.float64), G)[:, None], dtype=model.dtype)
    with seeded(seed, model.device):
        for layer in model.layers:
            if isinstance(layer, LatentVariableLayer):
                H = torch.cat([H, w.expand(-1, layer.latent_dim)], dim=-1)
                continue
            assert isinstance(layer, GPLayer)
            L = cholesky(layer.kernel.K(H, H), DEFAULT_JITTER, where=f"the prior covariance of {layer.name}")
            g = L @ standard_normal((H.shape[0], layer.num_gps), H)
            H = layer.project(H, g)
    return H[:, 0].reshape(W, G).cpu().numpy()


def prior_figure(specs, num_draws: int = 4, x_range: tuple[float, float] = (-3.0, 3.0), resolution: int = 200,
                 w_values=None, seed: int = 0, hidden_dim: int = 1, lengthscale: float | None = 1.0,
                 **model_kwargs):
    """A grid of prior draws: one row per model spec, one column per independent draw.

    For LV models each draw is shown for every w in ``w_values`` (default 9 values in
    [−2, 2]), coloured by w: the fan of curves is the model's aleatoric spread at each x.
    ``hidden_dim`` defaults to 1, the 1-D hidden layers of the paper's illustrations, and every
    kernel's ``lengthscale`` to 1, as the paper states for them (None keeps a model's initial
    √D_in, which the paper uses for training); further ``model_kwargs`` go to
    :meth:`DeepGP.from_spec` (e.g. ``kernel``).
    """
    specs = [specs] if isinstance(specs, str) else list(specs)
    for name, count in (("num_draws", num_draws), ("specs", len(specs))):  # (a panel each: no figure holds more)
        if count > MAX_PANELS:
            raise ValueError(f"{name} must be at most {MAX_PANELS} (a row or column of panels each), got {count}")
    w_values = np.linspace(-2, 2, 9) if w_values is None else np.asarray(w_values, dtype=np.float64)
    x = np.linspace(*x_range, resolution)
    cmap = matplotlib.colormaps["coolwarm"]
    fig = Figure(figsize=(2.6 * num_draws, 2.2 * len(specs)))
    axes = fig.subplots(len(specs), num_draws, squeeze=False)
    for r, spec in enumerate(specs):
        # from_spec only needs data to place inducing inputs; prior draws do not use them
        model = DeepGP.from_spec(spec, x[:, None], np.zeros((len(x), 1)), num_inducing=8, hidden_dim=hidden_dim,
                                 seed=seed, **model_kwargs)
        if lengthscale is not None:
            for layer in model.layers:
                if isinstance(layer, GPLayer):
                    layer.kernel.lengthscale.assign(torch.full((layer.input_dim,), float(lengthscale)))
        for c in range(num_draws):
            ax = axes[r, c]
            f = prior_draw(model, x, w_values if model.has_latent else w_values[:1], seed=seed + 1000 * r + c)
            for i, row in enumerate(f):
                color = cmap(i / max(len(f) - 1, 1)) if model.has_latent else "k"
                ax.plot(x, row, color=color, lw=1.0)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(model.spec)
    fig.tight_layout()
    return fig


# -- standardised marginals (Figures 10–11) --------------------------------------------------
def marginals_figure(models: dict, X, num_points: int = 30, num_samples: int = 2000, seed: int = 0):
    """Standardised predictive marginals at test points, one panel per model.

    At each of ``num_points`` rows of X (evenly spaced through X), S draws of y (first output)
    are rescaled to zero mean and unit variance and shown as a kernel density curve, coloured by
    the inputs' first principal component; the standard normal is dotted. A Gaussian predictive
    lies on the dotted curve; skewed or multimodal marginals do not.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D [num_points, num_dims], got shape {X.shape}")
    idx = np.unique(np.linspace(0, len(X) - 1, min(num_points, len(X))).round().astype(int))
    Xp = X[idx]
    centred = Xp - Xp.mean(0)
    pc = centred @ np.linalg.svd(centred, full_matrices=False)[2][0] if len(Xp) > 1 else np.zeros(1)
    colour = (pc - pc.min()) / max(np.ptp(pc), 1e-12)
    grid = np.linspace(-4, 4, 200)
    cmap = matplotlib.colormaps["viridis"]
    fig = Figure(figsize=(3.0 * len(models), 2.6))
    axes = fig.subplots(1, len(models), squeeze=False, sharey=True)
    for ax, (name, model) in zip(axes[0], models.items()):
        dgp, xs, _ = _unwrap(model)
        draws = dgp.sample_predictive(xs.transform(Xp), num_samples, seed=seed)[..., 0]  # [S, n]
        z = (draws - draws.mean(0)) / np.maximum(draws.std(0), 1e-12)
        for j in range(z.shape[1]):
            ax.plot(grid, gaussian_kde(z[:, j])(grid), color=cmap(colour[j]), lw=0.8, alpha=0.8)
        ax.plot(grid, np.exp(-0.5 * grid**2) / math.sqrt(2 * math.pi), "k:", lw=1.5)
        ax.set_title(name)
        ax.set_xlim(-4, 4)
        ax.set_yticks([])
    fig.tight_layout()
    return fig
