"""Test metrics: the log predictive density (KDE and mixture estimators, in deepgp.prediction), RMSE,
CRPS and the Shapiro–Wilk statistic of the predictive draws (docs/paper-vs-code.md §5.2–5.3).

:func:`split_metrics` is the paper's evaluation of one split, in standardised units. Its four
metrics come from ONE propagation of S predictive draws per test point: propagation is nearly all
of the evaluation cost (each draw solves against every layer's M × M factors, O(M²) flops per draw
and output, where the metrics take O(1) per draw, and O(log S) for Shapiro–Wilk's sort), so the KDE,
the mixture, the RMSE and Shapiro–Wilk share the same draws' final-layer moments.
:func:`regressor_metrics` is ``deepgp evaluate``'s, in the units of y (point by point:
:func:`regressor_pointwise`).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.stats
import torch

from .linalg import seeded
from .prediction import check_memory, chunks, draw_y, kde_log_density, mixture_log_density, predictive_moments
from .protocols import ConditionalDensityModel


def scaled_mean(a) -> float:
    """The mean of ``a`` [N] as m · mean(a / m), m = max |a|: no sum of values near float64's largest
    overflows (m = 0, inf or NaN is the mean's own)."""
    a = np.asarray(a, dtype=np.float64)
    m = float(np.max(np.abs(a))) if a.size else math.nan
    return m * float(np.mean(a / m)) if 0 < m < math.inf else (0.0 if m == 0 else float(np.mean(a)))


def root_mean_square(errors) -> float:
    """sqrt(mean(e²)) over every entry of ``errors`` as m · sqrt(mean((e / m)²)), m = max |e|: no square
    or sum of squares overflows (errors of 1e154 have an RMSE of 1e154, not inf) or underflows."""
    e = np.abs(np.asarray(errors, dtype=np.float64))
    m = float(e.max()) if e.size else math.nan
    return m * math.sqrt(float(np.mean(np.square(e / m)))) if 0 < m < math.inf else m


def crps_from_samples(draws: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Sample-based CRPS per point, E|Y − y| − ½ E|Y − Y'|: draws [S, N], y [N] → [N] (lower is better).

    E|Y − Y'| uses the sorted-sample identity Σ_i (2i − S − 1) y_(i) · 2 / S², O(S log S).
    """
    S = draws.shape[0]
    term1 = np.abs(draws - y).mean(0)
    ranks = 2 * np.arange(1, S + 1) - S - 1
    term2 = (np.sort(draws, 0) * ranks[:, None]).sum(0) * 2 / S**2
    return term1 - 0.5 * term2


def shapiro_median(samples: np.ndarray, max_points: int | None = None) -> float:
    """Median over test points of the Shapiro–Wilk W of each point's predictive samples.

    samples [S, N] or [S, N, 1]; the paper's Table S2 statistic (1 = perfectly Gaussian).
    """
    s = np.asarray(samples)
    if s.ndim == 3:
        s = s[..., 0]
    n = s.shape[1] if max_points is None else min(s.shape[1], max_points)
    stats = [scipy.stats.shapiro(s[:, i]).statistic for i in range(n)]
    return float(np.median(stats))


@torch.no_grad()
def draw_blocks(model: ConditionalDensityModel, X_test: np.ndarray, Y_test: np.ndarray, num_samples: int,
                seed: int = 0):
    """The S predictive draws of every test point, block by block (:func:`~deepgp.prediction.chunks`),
    under ``seed``: yields (slice of the points, y [n, D_y], the final layer's mean and variance
    [S, n, D_y], the draws of y [S, n, D_y]). Every metric of :func:`split_metrics` is computed from
    these; a per-point value computed from them belongs to the same draws."""
    check_memory(model, len(X_test), num_samples, "kde", setting="predict_samples")  # (the draws and their KDE)
    X = torch.as_tensor(X_test, dtype=model.dtype, device=model.device)
    Y = torch.as_tensor(Y_test, dtype=model.dtype, device=model.device)
    model.eval()
    with seeded(seed, model.device):
        for sl in chunks(X.shape[0], num_samples, X.device):
            mean, var = predictive_moments(model, X[sl], num_samples)
            yield sl, Y[sl], mean, var, draw_y(model, mean, var)


@torch.no_grad()
def split_metrics(
    model: ConditionalDensityModel, X_test: np.ndarray, Y_test: np.ndarray, num_samples: int = 2000,
    shapiro_points: int | None = 200, seed: int = 0,
) -> dict[str, float]:
    """Mean test log density (KDE and mixture estimators), RMSE and median Shapiro–Wilk W.

    X_test [N, D], Y_test [N, 1], standardised. ``test_loglik_kde`` is the paper's Table 1
    protocol (S draws of y, Gaussian KDE, Silverman's bandwidth); ``test_loglik_mixture`` the
    lower-variance estimator log (1/S) Σ_s N(y; μ_s, v_s + σ²) on the same draws' moments;
    ``test_rmse`` compares the mean of the S draws of y with y (as the paper's code logs it);
    ``shapiro_median`` the median over the first ``shapiro_points`` test points (a random subset:
    the split shuffled them; None = all) of the Shapiro–Wilk W of each point's S draws (Table S2).
    """
    kde, mixture, errors, shapiro_draws = [], [], [], []
    n = len(X_test)
    n_shapiro = n if shapiro_points is None else min(shapiro_points, n)
    for sl, y, mean, var, draws in draw_blocks(model, X_test, Y_test, num_samples, seed):
        kde.append(kde_log_density(y, draws))
        mixture.append(mixture_log_density(model, y, mean, var))
        errors.append((draws.mean(0) - y).cpu().numpy())  # [n, D_y]
        if sl.start < n_shapiro:
            shapiro_draws.append(draws[:, : n_shapiro - sl.start, 0].cpu().numpy())
    error = np.concatenate(errors)  # [N, D_y]
    return dict(
        test_loglik_kde=float(torch.cat(kde).mean()),
        test_loglik_mixture=float(torch.cat(mixture).mean()),
        # the mean over points of the squared error's sum over the D_y outputs: D_y × the entries' mean square
        test_rmse=root_mean_square(error) * math.sqrt(error.shape[-1]),
        shapiro_median=shapiro_median(np.concatenate(shapiro_draws, axis=1)),
    )


def regressor_pointwise(reg, X, y) -> dict[str, np.ndarray]:
    """A fitted DeepGPRegressor's log density (units of y), absolute error of its predictive mean and
    sample CRPS at each point of X [N, D], y [N]: {"log_density", "error", "crps"}, each [N]."""
    y = reg._shape_y(reg._targets(y, len(X)))  # (y checked against the fitted outputs, as score checks it)
    # the draws and their copy in y's units, all held for the CRPS: refused now rather than after the mean
    check_memory(reg.model_, len(X), reg.predict_samples, "draws", result=2 * reg.predict_samples * len(X),
                 setting="predict_samples")
    draws = reg.sample(X, reg.predict_samples)  # [S, N]
    return {
        "log_density": np.asarray(reg.log_density(X, y), dtype=np.float64),
        "error": np.abs(reg.predict(X) - y),  # (not squared: the RMSE squares it scaled, root_mean_square)
        "crps": crps_from_samples(draws, y),
    }


def regressor_metrics(reg, X, y, pointwise: dict | None = None) -> dict:
    """Mean log density (units of y), RMSE of the predictive mean and mean sample CRPS on X [N, D], y [N]
    (``deepgp evaluate``), from :func:`regressor_pointwise` (``pointwise`` where already computed)."""
    p = regressor_pointwise(reg, X, y) if pointwise is None else pointwise
    return {
        "n": int(len(y)),
        "log_density": scaled_mean(p["log_density"]),
        "rmse": root_mean_square(p["error"]),
        "crps": scaled_mean(p["crps"]),
    }
