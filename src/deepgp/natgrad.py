"""Natural-gradient steps on a GP layer's whitened q(v) = N(m, S) (MATH.md §6).

Natural parameters θ₁ = S⁻¹m, θ₂ = −½S⁻¹; expectation parameters η₁ = m, η₂ = S + mmᵀ. The
natural gradient in θ is the ordinary gradient in η, so a step is θ ← θ + γ ∂F/∂η. The
gradient in η comes from the same backward pass as everything else: inside
:func:`expectation_parameters` the layer reads (m, R) as functions of η leaves.
"""

from __future__ import annotations

import contextlib

import torch

from .layers import GPLayer
from .linalg import CholeskyError


@contextlib.contextmanager
def expectation_parameters(layer: GPLayer):
    """Within the block, the layer's q is a function of η₁ [M, L] and η₂ [L, M, M] (yielded).

    η and the map to (m, R) are float64 whatever the model's dtype (η₂ − mmᵀ cancels).
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
    layer._q_override = (m_.to(dtype), R_.to(dtype))
    try:
        yield eta1, eta2
    finally:
        layer._q_override = None


@torch.no_grad()
def natgrad_step(layer: GPLayer, grad_eta1: torch.Tensor, grad_eta2: torch.Tensor, gamma: float, max_halvings: int = 6) -> float:
    """θ ← θ + γ ∂F/∂η (ascent on F), written back to the layer's (q_mu, q_sqrt).

    If the updated −2θ₂ is not positive definite the step is halved (at most ``max_halvings``
    times); returns the γ actually used (0.0 when no step could be taken).
    """
    m, R = (t.double() for t in layer.q())
    grad_eta1, grad_eta2 = grad_eta1.double(), grad_eta2.double()
    eye = torch.eye(R.shape[-1], dtype=R.dtype, device=R.device)
    R_inv = torch.linalg.solve_triangular(R, eye, upper=False)
    prec = R_inv.mT @ R_inv  # S⁻¹ [L, M, M]
    theta1 = (prec @ m.T.unsqueeze(-1)).squeeze(-1)  # [L, M]
    theta2 = -0.5 * prec
    g1 = grad_eta1.T
    g2 = 0.5 * (grad_eta2 + grad_eta2.mT)
    step = gamma
    for _ in range(max_halvings + 1):
        new_prec = -2.0 * (theta2 + step * g2)
        L_prec, info = torch.linalg.cholesky_ex(new_prec)
        if not bool(info.any()):
            S = torch.cholesky_inverse(L_prec)
            S = 0.5 * (S + S.mT)
            R_new, info = torch.linalg.cholesky_ex(S)
            if not bool(info.any()):
                m_new = (S @ (theta1 + step * g1).unsqueeze(-1)).squeeze(-1)
                layer.q_mu.copy_(m_new.T)
                layer.q_sqrt.copy_(R_new)
                return step
        step *= 0.5
    return 0.0
