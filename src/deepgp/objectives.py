"""The paper's two variational bounds, as unbiased minibatch estimates scaled to N points.

Both take a DeepGP, a checked batch X [B, D], Y [B, D_y] and return a scalar tensor.
"""

from __future__ import annotations

import math

import torch

from .config import INNER_SAMPLING


def elbo_vi(model, X: torch.Tensor, Y: torch.Tensor, num_samples: int = 1) -> torch.Tensor:
    """The VI bound (paper eqs. 3–4; docs/math.md §7):

        (N/B) Σ_n [ mean_s E_q(f) log p(y_n | f(h_n^s)) − KL(q(w_n) ‖ p(w_n)) ] − Σ_layers KL(q(v) ‖ p(v)),

    with S = num_samples independent draws through every layer but the last.
    """
    mean, var, _, kl_w = model.propagate(X, Y, num_samples, mode="independent")
    ell = model.likelihood.variational_expectation(Y.unsqueeze(1), mean, var)  # [B, S]
    data = (ell.mean(1) - kl_w).sum()
    return (model.num_data / X.shape[0]) * data - model.kl()


def check_inner_sampling(inner_sampling: str) -> str:
    """The IW inner-layer sampling, refused with a clear message unless one of INNER_SAMPLING."""
    if inner_sampling not in INNER_SAMPLING:
        raise ValueError(f"inner_sampling must be one of {INNER_SAMPLING}, got {inner_sampling!r}")
    return inner_sampling


def elbo_iw(model, X: torch.Tensor, Y: torch.Tensor, num_samples: int = 5,
            inner_sampling: str = "joint") -> torch.Tensor:
    """The importance-weighted bound (paper eq. 11; docs/math.md §8):

        (N/B) Σ_n [ logsumexp_k ℓ_n^k − log K ] − Σ_layers KL(q(v) ‖ p(v)),
        ℓ_n^k = E_q(f) log p(y_n | f(h_n^k)) + Σ_LV [log p(w_n^k) − log q(w_n^k)].

    ``inner_sampling="joint"`` draws one function per point shared by its K samples (the paper);
    ``"independent"`` draws per (point, sample) as the released code did (docs/paper-vs-code.md §2.4).
    A model without LV layers has no importance weights: this is then the doubly stochastic
    bound, computed as ``elbo_vi`` averaging the K samples (same expectation, lower variance).
    """
    check_inner_sampling(inner_sampling)
    if not model.has_latent:
        return elbo_vi(model, X, Y, num_samples)
    mean, var, log_ratio, _ = model.propagate(X, Y, num_samples, mode=inner_sampling)
    ell = model.likelihood.variational_expectation(Y.unsqueeze(1), mean, var) + log_ratio  # [B, K]
    data = (torch.logsumexp(ell, dim=1) - math.log(num_samples)).sum()
    return (model.num_data / X.shape[0]) * data - model.kl()
