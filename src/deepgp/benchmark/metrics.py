"""Test metrics of a fitted model on one split, in standardised units (docs/paper-vs-code.md §5.2–5.3).

All four metrics come from ONE propagation of S predictive draws per test point: propagation is
nearly all of the evaluation cost (≈ 0.1 s per test point at S = 2000, M = 128 on one slow
core), so the KDE, the mixture, the RMSE and Shapiro–Wilk share the same draws' final-layer
moments instead of paying three separate passes through
:meth:`deepgp.DeepGP.predictive_log_density` / :meth:`~deepgp.DeepGP.sample_predictive`.
"""

from __future__ import annotations

import numpy as np
import torch

from ..linalg import seeded
from ..prediction import chunks, draw_y, kde_log_density, mixture_log_density, predictive_moments, shapiro_median

PREDICT_SAMPLES = 2000  # the paper's protocol: 2,000 predictive draws per test point
SHAPIRO_POINTS = 200  # Shapiro–Wilk on a fixed subset of test points: it is a median, 200 pin it well


@torch.no_grad()
def evaluate(
    model, X_test: np.ndarray, Y_test: np.ndarray, num_samples: int = PREDICT_SAMPLES,
    shapiro_points: int | None = SHAPIRO_POINTS, seed: int = 0,
) -> dict[str, float]:
    """Mean test log density (KDE and mixture estimators), RMSE and median Shapiro–Wilk W.

    X_test [N, D], Y_test [N, 1], standardised. ``test_loglik_kde`` is the paper's Table 1
    protocol (S draws of y, Gaussian KDE, Silverman's bandwidth); ``test_loglik_mixture`` the
    lower-variance estimator log (1/S) Σ_s N(y; μ_s, v_s + σ²) on the same draws' moments;
    ``test_rmse`` compares the mean of the S draws of y with y (as the paper's code logs it);
    ``shapiro_median`` the median over the first ``shapiro_points`` test points (a random subset:
    the split shuffled them; None = all) of the Shapiro–Wilk W of each point's S draws (Table S2).
    """
    X = torch.as_tensor(X_test, dtype=model.dtype, device=model.device)
    Y = torch.as_tensor(Y_test, dtype=model.dtype, device=model.device)
    model.eval()
    kde, mixture, sq_err, shapiro_draws = [], [], [], []
    n_shapiro = X.shape[0] if shapiro_points is None else min(shapiro_points, X.shape[0])
    with seeded(seed, model.device):
        for sl in chunks(X.shape[0], num_samples):
            i, y = sl.start, Y[sl]
            mean, var = predictive_moments(model, X[sl], num_samples)  # [S, n, 1]
            draws = draw_y(model, mean, var)
            kde.append(kde_log_density(y, draws))
            mixture.append(mixture_log_density(model, y, mean, var))
            sq_err.append((draws.mean(0) - y).square().sum(-1))
            if i < n_shapiro:
                shapiro_draws.append(draws[:, : n_shapiro - i, 0].cpu().numpy())
    return dict(
        test_loglik_kde=float(torch.cat(kde).mean()),
        test_loglik_mixture=float(torch.cat(mixture).mean()),
        test_rmse=float(torch.cat(sq_err).mean().sqrt()),
        shapiro_median=shapiro_median(np.concatenate(shapiro_draws, axis=1)),
    )
