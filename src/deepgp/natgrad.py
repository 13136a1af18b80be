"""Natural-gradient steps on a GP layer's whitened q(v) = N(m, S) (docs/mathematics.md §9).

Natural parameters θ₁ = S⁻¹m, θ₂ = −½S⁻¹; expectation parameters η₁ = m, η₂ = S + mmᵀ. The
natural gradient in θ is the ordinary gradient in η, so a step is θ ← θ + γ ∂F/∂η. The
gradient in η comes from the same backward pass as everything else: :func:`natgrad_step_q` takes
the layer's ∂F/∂(m, R) and applies the chain rule inside the step. The definition it is checked
against, autograd through η, is :func:`deepgp.reference.natgrad_step`. :class:`NaturalGradient` is the
optimiser training uses: the step on each of its layers, its halving, and its deferred form for a
captured step.
"""

from __future__ import annotations

import warnings

import torch

from .layers import GPLayer
from .linalg import CholeskyError

# the eager step tries γ, γ/2, ..., γ/2⁶ = γ/64 before it gives up on an iteration
MAX_HALVINGS = 6
# this many natural-gradient steps skipped in a row (no step size down to γ/64 kept q(v) valid) stop
# the run: the final layer has stopped learning, and a longer run would only hide it
MAX_SKIPPED_IN_A_ROW = 100


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
                   max_halvings: int = MAX_HALVINGS) -> float:
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




class NaturalGradient(torch.optim.Optimizer):
    """Natural-gradient ascent on the whitened q(v) of GP layers: θ ← θ + γ ∂F/∂η with F = −loss, for
    each layer from the loss's gradients in its (q_mu, q_sqrt), as one backward pass leaves them.

    The optimiser owns the step's halving: where the new precision is not positive definite at γ
    the step is retried at γ/2, ..., γ/2^:data:`MAX_HALVINGS`; a step refused at all of them is
    skipped. The first layer's skipped steps are counted (:meth:`count`), the inner layers' not. The
    step has an eager form (:meth:`step`, deciding on the host) and a deferred one for a captured GPU
    step: :meth:`step_deferred` on the device at γ alone, then :meth:`complete_deferred` on the host,
    halving from γ/2 where γ was refused, which is the eager step's sequence of step sizes.

    Args:
        layers: the GP layers whose q(v) it trains (the final one first); one parameter group each.
        gamma: the run's γ, named in its messages (each step is given its own γ_t, :func:`deepgp.config.gamma_at`).
    """

    def __init__(self, layers, gamma: float):
        self.layers = list(layers)
        super().__init__([{"params": [layer.q_mu, layer.q_sqrt]} for layer in self.layers], dict(gamma=gamma))
        self.skipped = self.in_a_row = 0

    def gradients(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each layer's ∂loss/∂(q_mu, q_sqrt), as the last backward pass left them."""
        return [(layer.q_mu.grad, layer.q_sqrt.grad) for layer in self.layers]

    @torch.no_grad()
    def step(self, gamma: float | None = None) -> list[float]:  # type: ignore[override]
        """Every layer's step at ``gamma`` (default: the run's), halved as needed; the γ each took (0.0: skipped)."""
        gamma = self.defaults["gamma"] if gamma is None else gamma
        return [natgrad_step_q(layer, -g_m, -g_R, gamma, MAX_HALVINGS) for layer, (g_m, g_R) in
                zip(self.layers, self.gradients())]

    @torch.no_grad()
    def step_deferred(self, grads: list[tuple[torch.Tensor, torch.Tensor]], gamma: torch.Tensor) -> list[torch.Tensor]:
        """Every layer's step at ``gamma`` (a tensor [] on the device) alone, from the loss's gradients
        ``grads`` (:meth:`gradients`), with no host read; a bool tensor [] per layer, True where the step
        was refused and the layer left as it was (:func:`natgrad_step_q_deferred`)."""
        return [natgrad_step_q_deferred(layer, -g_m, -g_R, gamma) for layer, (g_m, g_R) in zip(self.layers, grads)]

    @torch.no_grad()
    def complete_deferred(self, refused: list[bool], grads: list[tuple[torch.Tensor, torch.Tensor]],
                          gamma: float) -> list[float]:
        """After :meth:`step_deferred`: the halving the device could not do, from γ/2 on the same
        gradients where γ was ``refused``; the γ each layer took (0.0: skipped), as :meth:`step` returns it."""
        taken = [gamma] * len(self.layers)
        for i, (layer, (g_m, g_R)) in enumerate(zip(self.layers, grads)):
            if refused[i]:
                taken[i] = natgrad_step_q(layer, -g_m, -g_R, 0.5 * gamma, MAX_HALVINGS - 1)
        return taken

    def count(self, taken: float, iteration: int) -> None:
        """Count the first layer's step ``taken`` at ``iteration`` (0.0: skipped); a
        :class:`NaturalGradientError` after :data:`MAX_SKIPPED_IN_A_ROW` skipped in a row."""
        if taken != 0.0:
            self.in_a_row = 0
            return
        self.skipped, self.in_a_row = self.skipped + 1, self.in_a_row + 1
        if self.in_a_row >= MAX_SKIPPED_IN_A_ROW:
            raise NaturalGradientError(
                f"the natural-gradient step of {self.layers[0].name} failed on {self.in_a_row} iterations in a "
                f"row (up to iteration {iteration}; gamma={self.defaults['gamma']}): q(v) no longer moves. "
                "Try a smaller gamma")

    def warn_skipped(self, iterations: int, stacklevel: int = 2) -> None:
        """A RuntimeWarning with the count of skipped steps of the first layer in ``iterations``, if any."""
        if self.skipped:
            warnings.warn(f"the natural-gradient step of {self.layers[0].name} was skipped on {self.skipped} of "
                          f"{iterations} iterations (gamma={self.defaults['gamma']}: the new q(v) was not positive "
                          "definite even at gamma/64); a smaller gamma avoids that", RuntimeWarning,
                          stacklevel=stacklevel + 1)
