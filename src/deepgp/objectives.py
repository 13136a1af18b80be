"""The paper's two variational bounds, as unbiased minibatch estimates scaled to N points (the IW
bound of the paper's eq. 11 with ``inner_sampling="joint"``; the default per-sample inner draws are
the released code's estimate, docs/mathematics.md §8.2).

Both take a DeepGP, a checked batch X [B, D], Y [B, D_y] and return a scalar tensor; ``numerics``
(:class:`~deepgp.linalg.Numerics`) says how the model's linear algebra computes (fit passes its own).
"""

from __future__ import annotations

import math

import torch

from .config import INNER_SAMPLING
from .linalg import PLAIN, Numerics


def elbo_vi(model, X: torch.Tensor, Y: torch.Tensor, num_samples: int = 1, *,
            numerics: Numerics = PLAIN) -> torch.Tensor:
    """The VI bound (paper eqs. 3–4; docs/mathematics.md §7):

        (N/B) Σ_n [ mean_s E_q(f) log p(y_n | f(h_n^s)) − KL(q(w_n) ‖ p(w_n)) ] − Σ_layers KL(q(v) ‖ p(v)),

    with S = num_samples independent draws through every layer but the last.
    """
    out = model.propagate_posterior(X, Y, num_samples, "independent", numerics=numerics)
    ell = model.likelihood.variational_expectation(Y.unsqueeze(1), out.mean, out.var)  # [B, S]
    data = (ell.mean(1) - out.kl_w).sum()
    return (model.num_data / X.shape[0]) * data - model.kl()


def check_inner_sampling(inner_sampling: str) -> str:
    """The IW inner-layer sampling, refused with a clear message unless one of INNER_SAMPLING."""
    if inner_sampling not in INNER_SAMPLING:
        raise ValueError(f"inner_sampling must be one of {INNER_SAMPLING}, got {inner_sampling!r}")
    return inner_sampling


def check_dreg(inner_sampling: str) -> None:
    """DReG (``elbo_iw(dreg=True)``) is refused where a point's K samples share an inner draw."""
    if inner_sampling == "joint":
        raise ValueError("dreg needs inner_sampling='independent' or 'batch': with one draw shared by a point's "
                         "K samples, each sample's weight depends on the other samples' latents too")


def elbo_iw(model, X: torch.Tensor, Y: torch.Tensor, num_samples: int = 5,
            inner_sampling: str = "independent", dreg: bool = False, *, numerics: Numerics = PLAIN) -> torch.Tensor:
    """The importance-weighted bound (paper eq. 11; docs/mathematics.md §8):

        (N/B) Σ_n [ logsumexp_k ℓ_n^k − log K ] − Σ_layers KL(q(v) ‖ p(v)),
        ℓ_n^k = E_q(f) log p(y_n | f(h_n^k)) + Σ_LV [log p(w_n^k) − log q(w_n^k)].

    ``inner_sampling="independent"`` (the default) draws per (point, sample), as the released code did:
    the inner draws become part of each sample's proposal, and the estimate is a bound for small K but
    not for every K (docs/paper-vs-code.md §2.4); ``"joint"`` draws one function per point shared by its
    K samples, the paper's eq. (11), a bound for every K; ``"batch"`` makes one inducing draw per layer
    for each sample index k, shared by the batch's points, with per-point residuals: each point's K
    samples are distributed as with ``"independent"`` (so the estimate has the same expectation), the
    points are correlated through the shared draws (docs/mathematics.md §3.5).
    A model without LV layers has no importance weights: this is then the doubly stochastic
    bound, computed as ``elbo_vi`` averaging the K samples (same expectation, lower variance).

    ``dreg`` (with ``"independent"`` or ``"batch"`` sampling) changes the encoders' gradient, not the value:
    the doubly reparameterised estimator of Tucker et al. (2018; docs/mathematics.md §8.5),

        ∇_φ ≈ Σ_k w̃_k² ∂ℓ^k/∂w^k ∂w^k/∂φ,   w̃_k = softmax_k ℓ^k,

    where ∂ℓ^k/∂w^k holds q's parameters constant in log q(w^k). It drops the score term whose
    noise grows with K. Every other parameter gets the usual gradient Σ_k w̃_k ∇ℓ^k. With joint
    sampling ℓ^j depends on w^k for j ≠ k through the shared draw, and the estimator does not apply.
    """
    check_inner_sampling(inner_sampling)
    if not model.has_latent:
        return elbo_vi(model, X, Y, num_samples, numerics=numerics)
    if dreg:
        check_dreg(inner_sampling)
    out = model.propagate_posterior(X, Y, num_samples, inner_sampling, numerics=numerics, stop_q=dreg)
    ell = model.likelihood.variational_expectation(Y.unsqueeze(1), out.mean, out.var) + out.log_ratio  # [B, K]
    if dreg:
        # the gradient reaching w^k from logsumexp is w̃_k ∂ℓ^k/∂w^k: one more factor w̃_k makes it DReG's
        weights = torch.softmax(ell.detach(), dim=1).unsqueeze(-1)  # [B, K, 1]
        for w in out.latents:
            if w.requires_grad:
                w.register_hook(lambda grad: grad * weights)
    data = (torch.logsumexp(ell, dim=1) - math.log(num_samples)).sum()
    return (model.num_data / X.shape[0]) * data - model.kl()
