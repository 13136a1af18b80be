"""Natural-gradient steps on a GP layer's whitened q(v) = N(m, S) (docs/mathematics.md §9).

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


def _candidate(R, D, w, Rt_g1, step):
    """(m_new [M, L], R_new [L, M, M], info [L]) of the step θ ← θ + γ ∂F/∂η with γ = ``step`` (a
    float or a tensor []), in the frame of q's factor R (float64 throughout); ``info`` is nonzero
    for a GP whose C = I − 2γD is not positive definite (then its m_new, R_new are not a step).

    With D = Rᵀ(∂F/∂η₂)R [L, M, M] (symmetric), w = R⁻¹m and Rᵀ∂F/∂η₁ [L, M, 1]: the new precision is
    S⁻¹ − 2γ∂F/∂η₂ = R⁻ᵀCR⁻¹ with C = I − 2γD, so S_new = R C⁻¹ Rᵀ. With J the reversal
    permutation, chol(JCJ) = L̃ gives C⁻¹ = UUᵀ for U = JL̃⁻ᵀJ, lower-triangular with a positive
    diagonal; hence R_new = RU (the Cholesky factor of S_new) and
    m_new = S_new(S⁻¹m + γ∂F/∂η₁) = R_new Uᵀ(R⁻¹m + γRᵀ∂F/∂η₁).
    Neither S⁻¹ nor R⁻¹ is formed: C is the relative change of the precision, well conditioned
    however ill-conditioned S is.
    """
    eye = torch.eye(R.shape[-1], dtype=R.dtype, device=R.device)
    L_rev, info = torch.linalg.cholesky_ex((eye - (2.0 * step) * D).flip(-2, -1))
    U = torch.linalg.solve_triangular(L_rev, eye, upper=False).mT.flip(-2, -1)
    R_new = R @ U
    m_new = R_new @ (U.mT @ (w + step * Rt_g1))
    return m_new.squeeze(-1).T, R_new, info


def _natural_update(layer: GPLayer, R, D, w, Rt_g1, gamma: float, max_halvings: int) -> float:
    """The step of :func:`_candidate` written to the layer, halved while C is not positive
    definite (at most ``max_halvings`` times); returns the γ used, 0.0 if none was taken."""
    step = gamma
    for _ in range(max_halvings + 1):
        m_new, R_new, info = _candidate(R, D, w, Rt_g1, step)
        if not bool(info.any()):
            layer.q_mu.copy_(m_new)
            layer.q_sqrt.copy_(R_new)
            return step
        step *= 0.5
    return 0.0


def _whitened_mean(layer: GPLayer, m: torch.Tensor, R: torch.Tensor, check: bool = True) -> torch.Tensor:
    """R⁻¹m [L, M, 1] for m [M, L], R [L, M, M]; with ``check``, a singular R is a clear error (without:
    no host read, and the caller handles the non-finite result)."""
    w = torch.linalg.solve_triangular(R, m.T.unsqueeze(-1), upper=False)
    if check and not bool(torch.isfinite(w).all()):
        raise CholeskyError(f"q(v) covariance of {layer.name} is singular (a zero on the diagonal of q_sqrt)")
    return w


def _frame(layer: GPLayer, grad_m: torch.Tensor, grad_R: torch.Tensor, check: bool = True):
    """R, D = Rᵀ(∂F/∂η₂)R, w = R⁻¹m and Rᵀ∂F/∂η₁ (float64) from ∂F/∂m [M, L] and ∂F/∂R [L, M, M].

    The chain rule, in R's frame: S = η₂ − η₁η₁ᵀ and dR = RΦ(R⁻¹dSR⁻ᵀ) (Φ: the lower triangle,
    diagonal halved) give Rᵀ(∂F/∂η₂)R = ½(P + Pᵀ) with P = Φ(Rᵀ∂F/∂R), and
    Rᵀ∂F/∂η₁ = Rᵀ∂F/∂m − (P + Pᵀ)R⁻¹m. ``check``: as :func:`_whitened_mean`'s.
    """
    m, R = (t.double() for t in layer.q())
    P = (R.mT @ grad_R.double()).tril_()
    P.diagonal(dim1=-2, dim2=-1).mul_(0.5)
    D = 0.5 * (P + P.mT)
    w = _whitened_mean(layer, m, R, check)
    Rt_g1 = R.mT @ grad_m.double().T.unsqueeze(-1) - 2.0 * (D @ w)
    return R, D, w, Rt_g1


@torch.no_grad()
def natgrad_step_q(layer: GPLayer, grad_m: torch.Tensor, grad_R: torch.Tensor, gamma: float,
                   max_halvings: int = 6) -> float:
    """θ ← θ + γ ∂F/∂η (ascent on F), written back to the layer's (q_mu, q_sqrt), from the
    gradients of F in the layer's own parameters, ∂F/∂m [M, L] and ∂F/∂R [L, M, M]
    (R = tril(q_sqrt)), as one backward pass gives them (training uses this).

    If the updated −2θ₂ is not positive definite the step is halved (at most ``max_halvings``
    times); returns the γ actually used (0.0 when no step could be taken). The chain rule is
    :func:`_frame`'s; the tests check the step against :func:`deepgp.reference.natgrad_step`, the
    step from ∂F/∂η by autograd.
    """
    R, D, w, Rt_g1 = _frame(layer, grad_m, grad_R)
    return _natural_update(layer, R, D, w, Rt_g1, gamma, max_halvings)


@torch.no_grad()
def natgrad_step_q_deferred(layer: GPLayer, grad_m: torch.Tensor, grad_R: torch.Tensor,
                            gamma: torch.Tensor) -> torch.Tensor:
    """:func:`natgrad_step_q` at the step ``gamma`` (a tensor [] on the layer's device) alone, with
    no host read: the layer is updated where the step is valid, left as it was where it is not,
    and the returned bool tensor [] is True for a step not taken. For a captured GPU step
    (deepgp.capture), whose caller then halves eagerly from γ/2 — :func:`natgrad_step_q`'s
    sequence of steps, decided on the device for the first."""
    R, D, w, Rt_g1 = _frame(layer, grad_m, grad_R, check=False)  # (a singular R: failed, below)
    m_new, R_new, info = _candidate(R, D, w, Rt_g1, gamma)
    failed = info.ne(0).any() | ~torch.isfinite(w).all()
    # torch.where, not a branch: a failed candidate (NaNs) is never written
    layer.q_mu.copy_(torch.where(failed, layer.q_mu, m_new))
    layer.q_sqrt.copy_(torch.where(failed, layer.q_sqrt, R_new))
    return failed
