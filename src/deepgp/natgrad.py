"""Natural-gradient steps on a GP layer's whitened q(v) = N(m, S) (docs/math.md §9).

Natural parameters θ₁ = S⁻¹m, θ₂ = −½S⁻¹; expectation parameters η₁ = m, η₂ = S + mmᵀ. The
natural gradient in θ is the ordinary gradient in η, so a step is θ ← θ + γ ∂F/∂η. The
gradient in η comes from the same backward pass as everything else: :func:`natgrad_step_q` takes
the layer's ∂F/∂(m, R) and applies the chain rule inside the step (training uses this). The
definition it is checked against, autograd through η, is :func:`deepgp.reference.natgrad_step`.
"""

from __future__ import annotations

import torch

from .layers import GPLayer
from .linalg import CholeskyError


class NaturalGradientError(RuntimeError):
    """The natural-gradient step could not be taken for many iterations in a row (the step γ is
    too large for the proposed precision to stay positive definite)."""


def _whitened_mean(layer: GPLayer, m: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """R⁻¹m [L, M, 1] for m [M, L], R [L, M, M]; a singular R is a clear error."""
    w = torch.linalg.solve_triangular(R, m.T.unsqueeze(-1), upper=False)
    if not bool(torch.isfinite(w).all()):
        raise CholeskyError(f"q(v) covariance of {layer.name} is singular (a zero on the diagonal of q_sqrt)")
    return w


def _natural_update(layer: GPLayer, R, D, w, Rt_g1, gamma: float, max_halvings: int) -> float:
    """The step θ ← θ + γ ∂F/∂η in the frame of q's factor R (float64 throughout).

    With D = Rᵀ(∂F/∂η₂)R [L, M, M] (symmetric), w = R⁻¹m and Rᵀ∂F/∂η₁ [L, M, 1]: the new precision is
    S⁻¹ − 2γ∂F/∂η₂ = R⁻ᵀCR⁻¹ with C = I − 2γD, so S_new = R C⁻¹ Rᵀ. With J the reversal
    permutation, chol(JCJ) = L̃ gives C⁻¹ = UUᵀ for U = JL̃⁻ᵀJ, lower-triangular with a positive
    diagonal; hence R_new = RU (the Cholesky factor of S_new) and
    m_new = S_new(S⁻¹m + γ∂F/∂η₁) = R_new Uᵀ(R⁻¹m + γRᵀ∂F/∂η₁).
    Neither S⁻¹ nor R⁻¹ is formed: C is the relative change of the precision, well conditioned
    however ill-conditioned S is. If C is not positive definite the step is halved.
    """
    eye = torch.eye(R.shape[-1], dtype=R.dtype, device=R.device)
    step = gamma
    for _ in range(max_halvings + 1):
        L_rev, info = torch.linalg.cholesky_ex((eye - (2.0 * step) * D).flip(-2, -1))
        if not bool(info.any()):
            U = torch.linalg.solve_triangular(L_rev, eye, upper=False).mT.flip(-2, -1)
            R_new = R @ U
            m_new = R_new @ (U.mT @ (w + step * Rt_g1))
            layer.q_mu.copy_(m_new.squeeze(-1).T)
            layer.q_sqrt.copy_(R_new)
            return step
        step *= 0.5
    return 0.0


@torch.no_grad()
def natgrad_step_q(layer: GPLayer, grad_m: torch.Tensor, grad_R: torch.Tensor, gamma: float,
                   max_halvings: int = 6) -> float:
    """θ ← θ + γ ∂F/∂η (ascent on F), written back to the layer's (q_mu, q_sqrt), from the
    gradients of F in the layer's own parameters, ∂F/∂m [M, L] and ∂F/∂R [L, M, M]
    (R = tril(q_sqrt)), as one backward pass gives them (training uses this).

    If the updated −2θ₂ is not positive definite the step is halved (at most ``max_halvings``
    times); returns the γ actually used (0.0 when no step could be taken).

    The chain rule, in R's frame: S = η₂ − η₁η₁ᵀ and dR = RΦ(R⁻¹dSR⁻ᵀ) (Φ: the lower triangle,
    diagonal halved) give Rᵀ(∂F/∂η₂)R = ½(P + Pᵀ) with P = Φ(Rᵀ∂F/∂R), and
    Rᵀ∂F/∂η₁ = Rᵀ∂F/∂m − (P + Pᵀ)R⁻¹m. The tests check it against
    :func:`deepgp.reference.natgrad_step`, the step from ∂F/∂η by autograd.
    """
    m, R = (t.double() for t in layer.q())
    P = (R.mT @ grad_R.double()).tril_()
    P.diagonal(dim1=-2, dim2=-1).mul_(0.5)
    D = 0.5 * (P + P.mT)
    w = _whitened_mean(layer, m, R)
    Rt_g1 = R.mT @ grad_m.double().T.unsqueeze(-1) - 2.0 * (D @ w)
    return _natural_update(layer, R, D, w, Rt_g1, gamma, max_halvings)
