"""Predictive samples and test log densities (docs/mathematics.md §10; docs/paper-vs-code.md §5).

At a test point w is drawn from the prior and each of the S samples is an independent draw
through the inner layers; the final layer gives a Gaussian N(μ_s, s_s² + σ²) per sample. Work is
done in blocks of (samples × test points) so that 10,000 points × 2,000 samples stays within a
few hundred MB. Within a block the draws are laid out as groups (sample index s) of test points:
the s-th draw of every test point in the block shares one draw of the inducing values, which
leaves each point's predictive distribution exact and costs O(L·M) per (point, sample) instead of
O(L·M²). Blocks hold at most 128 samples (512 on a GPU) so that each inducing draw (O(L·M²)) is shared by
hundreds of points.

Memory is checked before any work (:func:`check_memory`): a reduction over the samples (the mixture
density, the predictive moments) holds at most :data:`SAMPLES_AT_ONCE` samples' moments of a chunk of
points at once (:func:`sweeps`), so its memory does not grow with S; draws, quantiles and the KDE need
all S draws of a chunk of points, and a request whose estimate exceeds the memory available is refused
(:class:`deepgp.memory.MemoryBudgetError`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import memory
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


# samples whose moments a reduction holds at once for a chunk of points (a multiple of every block's
# samples, so that its sweeps draw exactly the blocks, in the order, of one pass over all S samples);
# fixed, so that a result never depends on the memory of the machine that computes it
SAMPLES_AT_ONCE = 2**14


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
    (512 on a GPU), each written into its rows of the result.
    """
    block = block_shape(X.device)[1]
    m, v = model.propagate_prior(X, min(block, num_samples))
    mean, var = m.new_empty((num_samples, *m.shape[1:])), v.new_empty((num_samples, *v.shape[1:]))
    mean[: m.shape[0]], var[: v.shape[0]] = m, v
    for start in range(block, num_samples, block):
        m, v = model.propagate_prior(X, min(block, num_samples - start))
        mean[start : start + m.shape[0]], var[start : start + v.shape[0]] = m, v
    return mean, var


def sweeps(model, X: torch.Tensor, num_samples: int):
    """The moments of :func:`predictive_moments` (model, X, S) in consecutive groups of at most
    :data:`SAMPLES_AT_ONCE` samples: yields mean, var [≤ SAMPLES_AT_ONCE, n, D_y]. The same draws in the same
    order as one call (the groups are whole blocks), concatenated they are that call's result to the bit."""
    for start in range(0, num_samples, SAMPLES_AT_ONCE):
        yield predictive_moments(model, X, min(SAMPLES_AT_ONCE, num_samples - start))


@torch.no_grad()
def draw_chunks(model, X: torch.Tensor, num_samples: int):
    """y draws at checked inputs X [N, D], a chunk of points at a time (:func:`chunks`): yields (the slice of
    the points, draws [S, n, D_y] on the model's device). The draws of :func:`sample_predictive`, in order."""
    model.eval()
    for sl in chunks(X.shape[0], num_samples, X.device):
        mean, var = predictive_moments(model, X[sl], num_samples)
        # draw_y's arithmetic, in place: mean + sqrt(var + σ²) ε without its temporaries (the same values)
        y = var.add_(model.likelihood.variance()).sqrt_().mul_(standard_normal(mean.shape, mean)).add_(mean)
        del mean, var  # (only the draws are held while the caller uses them)
        yield sl, y


@torch.no_grad()
def _sample_predictive(model: ConditionalDensityModel, X: torch.Tensor, num_samples: int) -> np.ndarray:
    """y draws [S, N, D_y] (numpy) at checked inputs X [N, D]."""
    dtype = torch.empty(0, dtype=getattr(model, "dtype", X.dtype)).numpy().dtype
    out = np.empty((num_samples, X.shape[0], _outputs(model)), dtype=dtype)
    for sl, y in draw_chunks(model, X, num_samples):
        out[:, sl] = y.cpu().numpy()
    return out


def sample_predictive(model: ConditionalDensityModel, X, num_samples: int, seed=None) -> np.ndarray:
    """y draws [S, N, D_y] (numpy) at X [N, D], w from the prior; reproducible under ``seed``."""
    check_memory(model, X.shape[0], num_samples, "draws", result=num_samples * X.shape[0])
    with seeded(seed, model.device):
        return _sample_predictive(model, X, num_samples)


def mixture_moments(model, X: torch.Tensor, num_samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and variance [n, D_y] of the predictive mixture (1/S) Σ_s N(μ_s, s_s² + σ²) at a chunk of
    points X [n, D]: E[μ] and E[s² + σ²] + Var[μ], from the moments in groups (:func:`sweeps`). One group is
    the formula as it reads; more are combined exactly (Chan et al.'s pooled mean and squared deviations)."""
    parts = [(mu.shape[0], mu.mean(0), mu.var(0, unbiased=False), (s2 + model.likelihood.variance()).mean(0))
             for mu, s2 in sweeps(model, X, num_samples)]
    if len(parts) == 1:
        _, mean, spread, noise = parts[0]
        return mean, noise + spread
    mean = sum(c * m for c, m, _, _ in parts) / num_samples
    spread = sum(c * (v + (m - mean).square()) for c, m, v, _ in parts) / num_samples
    return mean, sum(c * e for c, _, _, e in parts) / num_samples + spread


# bytes held per (sample, point, output) of a chunk of points, beyond a block's working tensors: a
# reduction's moments (mean, var) and its terms; draws' moments, ε (float32, then widened) and the draws;
# the KDE's standardised distances and terms; quantiles' draws in the units of y and np.quantile's copy
_HELD = {"reduction": lambda s: 6 * s, "draws": lambda s: 3 * s + 4, "kde": lambda s: 6 * s + 4,
         "quantiles": lambda s: max(3 * s + 4, s + 16)}


def memory_needed(model, num_points: int, num_samples: int, kind: str = "reduction", result: int = 0) -> int:
    """Bytes predicting at ``num_points`` points with S = ``num_samples`` draws takes at its peak.

    ``kind``: "reduction" (the mixture density, the predictive moments: at most :data:`SAMPLES_AT_ONCE`
    samples of a chunk of points held at once), "draws", "kde" or "quantiles" (all S draws of a chunk of
    points); ``result``: values of the model's dtype returned for every (sample, point), e.g. S·N draws.
    A block's working tensors are, for each GP layer, R·(M·(8 + 2L) + 5·D_in + 4L)·s bytes for its R
    sample-point rows, M inducing points, L GPs and D_in inputs where it computes marginals (the final
    layer, and every layer at one point a chunk), R·(6M + 5·D_in + 4L)·s where an inner layer draws for
    the points of a group from one inducing draw; at most one layer's at a time (nothing is kept for a
    backward pass); s bytes a value. Measured peaks (CPU) were 0.8 to 1 of the estimate.
    """
    s, outputs = _value_bytes(model), _outputs(model)
    n = chunks(num_points, num_samples, model.device)[0].stop if num_points else 0
    working = block_bytes(model, min(num_samples, block_shape(model.device)[1]), n)
    held = num_samples if kind != "reduction" else min(num_samples, SAMPLES_AT_ONCE)
    return working + held * n * outputs * _HELD[kind](s) + result * outputs * s


def _value_bytes(model) -> int:
    """Bytes of one of ``model``'s values (a model of the prediction contract alone: float64)."""
    return memory.itemsize(getattr(model, "dtype", torch.float64))


def _outputs(model) -> int:
    """D_y: ``model.output_dim``, else its likelihood's number of noise variances."""
    return getattr(model, "output_dim", None) or int(model.likelihood.variance().numel())


def block_bytes(model, num_samples: int, num_points: int) -> int:
    """Bytes of the working tensors of one ``propagate_prior(X [num_points, D], num_samples)``
    (:func:`memory_needed`)."""
    s, rows, layers = _value_bytes(model), num_samples * num_points, memory.gp_layers(model)
    return max([rows * s * (layer.num_inducing * (8 + 2 * layer.num_gps if layer is layers[-1] or num_points == 1
                                                  else 6) + 5 * layer.input_dim + 4 * layer.num_gps)
                for layer in layers], default=0)


def check_memory(model, num_points: int, num_samples: int, kind: str = "reduction", result: int = 0,
                 setting: str = "num_samples") -> None:
    """A :class:`~deepgp.memory.MemoryBudgetError` naming ``setting`` (S = ``num_samples``) if prediction
    needs more memory than is available (:func:`memory_needed`)."""
    needed = memory_needed(model, num_points, num_samples, kind, result)
    what = {"reduction": "prediction", "draws": "the predictive draws", "kde": "the KDE of the predictive draws",
            "quantiles": "the predictive quantiles"}[kind]
    memory.require(needed, setting, num_samples, f"{what} at {num_points:,} points", model.device)


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
        if estimator == "mixture":
            out.append(mixture_sweeps(model, Y[sl], sweeps(model, X[sl], num_samples), num_samples))
        else:
            mean, var = predictive_moments(model, X[sl], num_samples)  # [S, n, D_y]
            out.append(kde_log_density(Y[sl], draw_y(model, mean, var)))
    return torch.cat(out).cpu().numpy()


def mixture_sweeps(model, y: torch.Tensor, moments, num_samples: int) -> torch.Tensor:
    """:func:`mixture_log_density` of S draws from their moments in groups (:func:`sweeps`): y [n, D_y] → [n].
    One group is that function itself; more are log Σ_g exp(log Σ_{s ∈ g} N(y; μ_s, s_s² + σ²)) − log S."""
    parts = [torch.logsumexp(model.likelihood.log_predictive(y.unsqueeze(0), mean, var), 0) for mean, var in moments]
    total = parts[0] if len(parts) == 1 else torch.logsumexp(torch.stack(parts), 0)
    return total - math.log(num_samples)


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
    check_memory(model, X.shape[0], num_samples, "kde" if estimator == "kde" else "reduction")
    with seeded(seed, model.device):
        return _log_density(model, X, Y, num_samples, estimator)


