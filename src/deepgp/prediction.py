"""Predictive samples and test log densities (docs/mathematics.md §10; docs/paper-vs-code.md §5).

At a test point w is drawn from the prior and each of the S samples is an independent draw
through the inner layers; the final layer gives a Gaussian N(μ_s, s_s² + σ²) per sample. Work is
done in blocks of (samples × test points) so that 10,000 points × 2,000 samples stays within a
few hundred MB. Within a block the draws are laid out as groups (sample index s) of test points:
the s-th draw of every test point in the block shares one draw of the inducing values, which
leaves each point's predictive distribution exact and costs O(L·M) per (point, sample) instead of
O(L·M²). Blocks hold at most 128 samples (512 on a GPU) so that each inducing draw (O(L·M²)) is shared by
hundreds of points.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .linalg import seeded, standard_normal
from .params import LOG_2PI
from .protocols import ConditionalDensityModel

ESTIMATORS = ("mixture", "kde")
# (sample, point) rows per block: 16 MB per [rows, M=128] float64 tensor, so a block's working
# tensors stay in the L3 cache (blocks of 2**16 rows, which do not, took 1.8× as long)
_ROWS_PER_CHUNK = 2**14
_SAMPLES_PER_CHUNK = 128
# on a GPU a block is launched, not cached: 32× the rows (512 MB per [rows, 128] float64 tensor)
# and 4× the samples, so that 10,000 points × 2,000 samples are 40 blocks, not 1,250
_ROWS_PER_CHUNK_CUDA = 2**19
_SAMPLES_PER_CHUNK_CUDA = 512


def block_shape(device=None) -> tuple[int, int]:
    """(the most (sample, point) rows, the most samples) of a block on ``device``."""
    if device is not None and torch.device(device).type == "cuda":
        return _ROWS_PER_CHUNK_CUDA, _SAMPLES_PER_CHUNK_CUDA
    return _ROWS_PER_CHUNK, _SAMPLES_PER_CHUNK


def chunks(n: int, num_samples: int, device=None) -> list[slice]:
    """Slices of test points: with blocks of ≤ 128 samples, each block holds at most ~2**14 (sample,
    point) rows (on a GPU ≤ 512 samples and 2**19 rows: :func:`block_shape`)."""
    rows, samples = block_shape(device)
    step = max(1, rows // min(num_samples, samples))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


@torch.no_grad()
def predictive_moments(model: ConditionalDensityModel, X: torch.Tensor, num_samples: int):
    """Final-layer moments for each predictive draw at X [n, D]: mean, var [S, n, D_y] (var excludes σ²).

    Use with a chunk of points from :func:`chunks`; the samples are drawn in blocks of at most 128
    (512 on a GPU).
    """
    means, variances = [], []
    block = block_shape(X.device)[1]
    for start in range(0, num_samples, block):
        mean, var = prior_moments(model, X, min(block, num_samples - start))
        means.append(mean)
        variances.append(var)
    return torch.cat(means), torch.cat(variances)


def prior_moments(model, X: torch.Tensor, num_samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The final layer's moments of K = ``num_samples`` draws at X [B, D] with w from the prior: mean,
    var [K, B, D_y] (:meth:`DeepGP.propagate_prior <deepgp.DeepGP.propagate_prior>`). A model without
    ``propagate_prior`` (the paper's baselines) gives them as the first two of its
    ``propagate(X, None, K, mode="predict")``."""
    if hasattr(model, "propagate_prior"):
        return model.propagate_prior(X, num_samples)
    mean, var, _, _ = model.propagate(X, None, num_samples, mode="predict")
    return mean, var


@torch.no_grad()
def _sample_predictive(model: ConditionalDensityModel, X: torch.Tensor, num_samples: int) -> np.ndarray:
    """y draws [S, N, D_y] (numpy) at checked inputs X [N, D]."""
    model.eval()
    out = [draw_y(model, *predictive_moments(model, X[sl], num_samples)).cpu().numpy()
           for sl in chunks(X.shape[0], num_samples, X.device)]
    return np.concatenate(out, axis=1)


def sample_predictive(model: ConditionalDensityModel, X, num_samples: int, seed=None) -> np.ndarray:
    """y draws [S, N, D_y] (numpy) at X [N, D], w from the prior; reproducible under ``seed``."""
    with seeded(seed, model.device):
        return _sample_predictive(model, X, num_samples)


def silverman_bandwidth(samples: torch.Tensor, dim: int = 0, outputs: int = 1) -> torch.Tensor:
    """Silverman's rule for S samples along ``dim``, per coordinate: h = 1.06 σ̂ S^(−1/5) for one
    output (the paper's protocol), and his d-dimensional rule h_j = σ̂_j (4 / ((d + 2) S))^(1/(d + 4))
    for ``outputs`` = d > 1 (whose d = 1 case is the first with 1.06 = (4/3)^(1/5), rounded)."""
    S = samples.shape[dim]
    if outputs == 1:
        return 1.06 * samples.std(dim=dim) * S ** (-0.2)
    return samples.std(dim=dim) * (4.0 / ((outputs + 2) * S)) ** (1.0 / (outputs + 4))


def draw_y(model: ConditionalDensityModel, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
    """y draws [S, n, D_y] from the final-layer moments: μ_s + sqrt(s_s² + σ²) ε."""
    return mean + (var + model.likelihood.variance()).sqrt() * standard_normal(mean.shape, mean)


def mixture_log_density(model: ConditionalDensityModel, y: torch.Tensor, mean: torch.Tensor,
                        var: torch.Tensor) -> torch.Tensor:
    """log (1/S) Σ_s N(y; μ_s, s_s² + σ²): y [n, D_y], mean and var [S, n, D_y] → [n]."""
    return torch.logsumexp(model.likelihood.log_predictive(y.unsqueeze(0), mean, var), 0) - math.log(mean.shape[0])


def kde_log_density(y: torch.Tensor, draws: torch.Tensor) -> torch.Tensor:
    """The paper's protocol: log of a Gaussian KDE of the draws (Silverman bandwidth per point and
    output, product kernel; for D_y > 1 the D_y-dimensional rule) at y: y [n, D_y], draws [S, n, D_y] → [n]."""
    h = silverman_bandwidth(draws, 0, draws.shape[-1]).clamp_min(1e-12)  # [n, D_y]
    z = (y.unsqueeze(0) - draws) / h
    logp = (-0.5 * z.square() - torch.log(h) - 0.5 * LOG_2PI).sum(-1)  # [S, n]
    return torch.logsumexp(logp, 0) - math.log(draws.shape[0])


@torch.no_grad()
def _log_density(model: ConditionalDensityModel, X, Y, num_samples, estimator):
    model.eval()
    out = []
    for sl in chunks(X.shape[0], num_samples, X.device):
        mean, var = predictive_moments(model, X[sl], num_samples)  # [S, n, D_y]
        if estimator == "mixture":
            out.append(mixture_log_density(model, Y[sl], mean, var))
        else:
            out.append(kde_log_density(Y[sl], draw_y(model, mean, var)))
    return torch.cat(out).cpu().numpy()


def predictive_log_density(model: ConditionalDensityModel, X, Y, num_samples: int = 2000, estimator: str = "mixture",
                           seed=None) -> np.ndarray:
    """log p(y_n | x_n) per test point, numpy [N].

    ``estimator="mixture"``: log (1/S) Σ_s N(y; μ_s, s_s² + σ²), consistent and low-variance.
    ``estimator="kde"``: the paper's protocol — S draws of y, a Gaussian KDE with Silverman's
    bandwidth (per output dimension, product kernel), evaluated at y.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    if estimator == "kde" and num_samples < 2:  # Silverman's bandwidth needs a spread of draws
        raise ValueError(f"num_samples must be >= 2 for estimator='kde', got {num_samples}")
    with seeded(seed, model.device):
        return _log_density(model, X, Y, num_samples, estimator)


