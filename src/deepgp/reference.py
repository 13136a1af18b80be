"""Reference definitions that the tests check the fast code against; training does not use them.

The natural-gradient step as its definition reads (docs/mathematics.md §9): θ ← θ + γ ∂F/∂η with ∂F/∂η
from autograd, the layer's q read as a function of expectation-parameter leaves
(:func:`expectation_parameters`, :func:`natgrad_step`). Training takes the same step from
∂F/∂(m, R) by the chain rule (:func:`deepgp.natgrad.natgrad_step_q`). The plain formulas beside
the fast paths are in :mod:`deepgp.linalg` and :mod:`deepgp.conditional` (``*_plain``).
"""

from __future__ import annotations

import contextlib

import torch

from .layers import GPLayer
from .linalg import CholeskyError
from .natgrad import _natural_update, _whitened_mean


@contextlib.contextmanager
def expectation_parameters(layer: GPLayer):
    """Within the block, the layer's q is a function of η₁ [M, L] and η₂ [L, M, M] (yielded).

    η and the map to (m, R) are float64 whatever the model's dtype (η₂ − mmᵀ cancels). The layer's
    ``q()`` is shadowed on this instance for the block (its parameters are not read, and are left
    as they are); the class's method is back after it.
    """
    dtype = layer.q_mu.dtype
    with torch.no_grad():
        m, R = (t.double() for t in layer.q())
        S = R @ R.mT
        eta1 = m.detach().clone().requires_grad_(True)
        eta2 = (S + torch.einsum("ml,nl->lmn", m, m)).detach().clone().requires_grad_(True)
    m_ = eta1
    S_ = 0.5 * (eta2 + eta2.mT) - torch.einsum("ml,nl->lmn", m_, m_)
    R_, info = torch.linalg.cholesky_ex(S_)
    if bool(info.any()):
        raise CholeskyError(f"q(v) covariance of {layer.name} is not positive definite")
    q = (m_.to(dtype), R_.to(dtype))
    layer.q = lambda: q  # an instance attribute: GPLayer.q, and every other layer, untouched
    try:
        yield eta1, eta2
    finally:
        del layer.q


@torch.no_grad()
def natgrad_step(layer: GPLayer, grad_eta1: torch.Tensor, grad_eta2: torch.Tensor, gamma: float,
                 max_halvings: int = 6) -> float:
    """θ ← θ + γ ∂F/∂η (ascent on F), written back to the layer's (q_mu, q_sqrt).

    ∂F/∂η₁ [M, L], ∂F/∂η₂ [L, M, M]. If the updated −2θ₂ is not positive definite the step is
    halved (at most ``max_halvings`` times); returns the γ actually used (0.0 when no step could
    be taken).
    """
    m, R = (t.double() for t in layer.q())
    g2 = grad_eta2.double()
    D = R.mT @ (0.5 * (g2 + g2.mT)) @ R
    Rt_g1 = R.mT @ grad_eta1.double().T.unsqueeze(-1)
    return _natural_update(layer, R, D, _whitened_mean(layer, m, R), Rt_g1, gamma, max_halvings)
