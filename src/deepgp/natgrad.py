"""Natural-gradient steps on a GP layer's whitened q(v) = N(m, S) (MATH.md §6).

Natural parameters θ₁ = S⁻¹m, θ₂ = −½S⁻¹; expectation parameters η₁ = m, η₂ = S + mmᵀ. The
natural gradient in θ is the ordinary gradient in η, so a step is θ ← θ + γ ∂F/∂η. The
gradient in η comes from the same backward pass as everything else: :func:`expectation_gradients`
maps the layer's ∂F/∂(m, R) to ∂F/∂η by the chain rule (training uses this), and inside
:func:`expectation_parameters` the layer reads (m, R) as functions of η leaves, so that autograd
gives ∂F/∂η directly (the definition, and the tests' check of the chain rule).
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
def expectation_gradients(layer: GPLayer, grad_m: torch.Tensor, grad_R: torch.Tensor):
    """∂F/∂η₁ [M, L] and ∂F/∂η₂ [L, M, M] (symmetric) from the gradients of F in the layer's own
    parameters, ∂F/∂m [M, L] and ∂F/∂R [L, M, M] (R = tril(q_sqrt)), by the chain rule.

    The same numbers as differentiating through :func:`expectation_parameters`, without its
    Cholesky in the forward pass: with S = η₂ − η₁η₁ᵀ and R its factor, dR = RΦ(R⁻¹dSR⁻ᵀ) (Φ: the
    lower triangle, diagonal halved), so ∂F/∂S = sym(R⁻ᵀΦ(Rᵀ ∂F/∂R)R⁻¹), ∂F/∂η₂ = ∂F/∂S and
    ∂F/∂η₁ = ∂F/∂m − 2 ∂F/∂S m. Computed in float64.
    """
    m, R = (t.double() for t in layer.q())
    eye = torch.eye(R.shape[-1], dtype=R.dtype, device=R.device)
    R_inv = torch.linalg.solve_triangular(R, eye, upper=False)
    if not bool(torch.isfinite(R_inv).all()):
        raise CholeskyError(f"q(v) covariance of {layer.name} is singular (a zero on the diagonal of q_sqrt)")
    phi = (R.mT @ grad_R.double()).tril_()
    phi.diagonal(dim1=-2, dim2=-1).mul_(0.5)
    B = R_inv.mT @ phi @ R_inv
    g2 = 0.5 * (B + B.mT)
    g1 = grad_m.double() - 2.0 * (g2 @ m.T.unsqueeze(-1)).squeeze(-1).T
    return g1, g2


@torch.no_grad()
def natgrad_step(layer: GPLayer, grad_eta1: torch.Tensor, grad_eta2: torch.Tensor, gamma: float, max_halvings: int = 6) -> float:
    """θ ← θ + γ ∂F/∂η (ascent on F), written back to the layer's (q_mu, q_sqrt).

    If the updated −2θ₂ is not positive definite the step is halved (at most ``max_halvings``
    times); returns the γ actually used (0.0 when no step could be taken).
    """
    m, R = (t.double() for t in layer.q())
    grad_eta1, grad_eta2 = grad_eta1.double(), grad_eta2.double()
    eye = torch.eye(R.shape[-1], dtype=R.dtype, device=R.device)
    prec = torch.cholesky_inverse(R)  # S⁻¹ [L, M, M] from S's factor (one LAPACK call)
    theta1 = (prec @ m.T.unsqueeze(-1)).squeeze(-1)  # [L, M]
    g1 = grad_eta1.T
    g2 = 0.5 * (grad_eta2 + grad_eta2.mT)
    step = gamma
    for _ in range(max_halvings + 1):
        new_prec = prec - (2.0 * step) * g2  # −2(θ₂ + γ ∂F/∂η₂)
        # The new R is the Cholesky factor of new_prec⁻¹, found without inverting: with J the
        # reversal permutation, chol(J P J) = L̃ gives P = (J L̃ J)(J L̃ J)ᵀ with J L̃ J upper-
        # triangular, so P⁻¹ = R Rᵀ for R = J L̃⁻ᵀ J, lower-triangular with a positive diagonal:
        # the Cholesky factor of S (unique). One factorisation and one triangular inverse in place
        # of factorise, invert and factorise again.
        L_rev, info = torch.linalg.cholesky_ex(new_prec.flip(-2, -1))
        if not bool(info.any()):
            R_new = torch.linalg.solve_triangular(L_rev, eye, upper=False).mT.flip(-2, -1)
            m_new = R_new @ (R_new.mT @ (theta1 + step * g1).unsqueeze(-1))  # S (θ₁ + γ ∂F/∂η₁)
            layer.q_mu.copy_(m_new.squeeze(-1).T)
            layer.q_sqrt.copy_(R_new)
            return step
        step *= 0.5
    return 0.0
