"""Numerically guarded linear algebra shared by every layer, and its fast paths.

Each custom ``torch.autograd.Function`` here stands beside a ``*_plain`` function: the same formula
in ordinary torch operations, differentiated by autograd. The fast version is what the library
calls; the plain one is its definition, which the tests compare it against in float64 (values and
gradients). The GP conditional's own fast paths are in :mod:`deepgp.conditional`, beside its plain
form. Why each fast path exists, and what it was measured to gain: docs/paper-vs-code.md §6 and
benchmarks/README.md.
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch

DEFAULT_JITTER = 1e-6
MAX_JITTER = 1e-2


class CholeskyError(RuntimeError):
    """A Cholesky factorisation failed even after adding the largest allowed jitter."""


@dataclasses.dataclass(frozen=True)
class Numerics:
    """How the bound is computed while :func:`deepgp.fit` steps on it, passed down explicitly from the
    objective through the model and its layers to this module's functions (the default: as written).

    Args:
        products_dtype: the dtype of the marginal conditionals' products R_lᵀA and their backward
            (:func:`deepgp.conditional.marginal_moments`) for inputs of a wider dtype; None: the
            inputs' own. fit uses float32 (:func:`deepgp.runtime.training_numerics`).
        deferred: a bool tensor [] on the device, for a step that must not wait on it (a captured GPU
            step, :mod:`deepgp.capture`): :func:`cholesky` then makes one attempt at its first jitter
            and ORs any failure into this flag, never reading a result on the host; the caller reads
            the flag after the step and redoes the step eagerly, where the jitter retries happen. A
            failed factor holds NaNs; nothing computed from it is kept. None: decide on the host.
    """

    products_dtype: torch.dtype | None = None
    deferred: torch.Tensor | None = dataclasses.field(default=None, compare=False)

    def deferring(self, flag: torch.Tensor) -> Numerics:
        """These numerics with Cholesky failures flagged in ``flag`` (a bool tensor []) instead of retried."""
        return dataclasses.replace(self, deferred=flag)

    def products_for(self, dtype: torch.dtype) -> torch.dtype:
        """The dtype of the R_lᵀA products for inputs of ``dtype``: ``products_dtype`` if narrower, else ``dtype``."""
        return narrower(self.products_dtype, dtype)


def narrower(low: torch.dtype | None, dtype: torch.dtype) -> torch.dtype:
    """``low`` where it is narrower than ``dtype``, else ``dtype`` (None: ``dtype``)."""
    return dtype if low is None or dtype.itemsize <= low.itemsize else low


# how the library computes unless told otherwise: the inputs' dtype throughout, decided on the host
PLAIN = Numerics()


def cholesky(
    A: torch.Tensor,
    jitter: float = DEFAULT_JITTER,
    max_jitter: float = MAX_JITTER,
    where: str = "a covariance",
    deferred: torch.Tensor | None = None,
) -> torch.Tensor:
    """Lower Cholesky factor of ``A + jitter * I`` for a (batch of) symmetric matrices [..., n, n].

    ``jitter`` is added first; if any matrix of the batch is still not positive definite the
    jitter grows tenfold (up to ``max_jitter``) and only the failed matrices are retried, so
    one bad block does not perturb the others. Raises :class:`CholeskyError` naming ``where``
    when all fail. With a ``deferred`` flag (:attr:`Numerics.deferred`): one attempt, a failure
    ORed into the flag on the device.
    """
    if not jitter >= 0.0:
        raise ValueError(f"jitter must be >= 0, got {jitter}")
    n = A.shape[-1]
    eye = torch.eye(n, dtype=A.dtype, device=A.device)
    L, info = torch.linalg.cholesky_ex(A + jitter * eye)
    if deferred is not None:  # no host read: flag the failure, the caller redoes the step
        deferred.logical_or_(info.ne(0).any())
        return L
    if not bool(torch.any(info)):
        return L
    j = jitter
    while j < max_jitter:
        j = min(max(j * 10.0, DEFAULT_JITTER), max_jitter)  # from jitter = 0 the retries start at the default
        failed = info != 0
        L_retry, info_retry = torch.linalg.cholesky_ex(A + j * eye)
        # keep good factors, replace the failed ones (torch.where keeps autograd intact)
        L = torch.where(failed[..., None, None], L_retry, L)
        info = torch.where(failed, info_retry, info)
        if not bool(torch.any(info)):
            return L
    raise CholeskyError(
        f"Cholesky of {where} failed even with jitter {max_jitter:g}: the matrix is not positive "
        "definite (duplicated or collapsed inducing inputs, lengthscales too long, or NaN "
        "parameters after a diverging step). Try fewer inducing points, a smaller learning rate, "
        "or float64."
    )


def standard_normal(shape, like: torch.Tensor) -> torch.Tensor:
    """Standard normal draws of ``shape`` with ``like``'s dtype and device.

    Drawn in float32 and widened: torch's float64 normal sampler is slower on CPU, and the draws
    are a visible share of a step (docs/paper-vs-code.md §6.2). The widened draws are exactly
    N(0, 1) but for tails beyond ~5.8σ (probability < 1e-8), irrelevant for MC estimates.
    """
    return torch.randn(shape, dtype=torch.float32, device=like.device).to(like.dtype)


@contextlib.contextmanager
def seeded(seed: int | None, device=None):
    """Run a block under ``torch.manual_seed(seed)`` (None: unseeded) and restore the caller's RNG after.

    Forks the CPU generator and, for a CUDA ``device``, that device's generator too: the draws of a
    model on the GPU come from the CUDA stream, which must be seeded and restored alike (forking the
    CPU alone would leave the caller's CUDA stream reseeded, and repeat it in every seeded block).
    """
    device = torch.device(device) if device is not None else torch.device("cpu")
    devices = ([device.index if device.index is not None else torch.cuda.current_device()]
               if device.type == "cuda" else [])
    with torch.random.fork_rng(devices=devices):
        if seed is not None:
            torch.manual_seed(seed)
        yield


# -- fast paths, each beside its plain formula -----------------------------------------------------


class _InverseCholesky(torch.autograd.Function):
    # backward: with T = L⁻¹, dT = −Φ(T dA Tᵀ) T (Φ: lower triangle, halved diagonal), so
    # ∂f/∂A = −Tᵀ Φ(ḠTᵀ) T, symmetrised: three M×M GEMMs where autograd's chain through cholesky
    # and solve_triangular takes triangular solves and more passes (docs/paper-vs-code.md §6.3)
    @staticmethod
    def forward(ctx, A, jitter, where, deferred):
        L = cholesky(A, jitter, where=where, deferred=deferred)
        eye = torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)
        T = torch.linalg.solve_triangular(L, eye, upper=False)
        ctx.save_for_backward(T)
        return T

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        (T,) = ctx.saved_tensors
        phi = (grad @ T.mT).tril_()
        phi.diagonal(dim1=-2, dim2=-1).mul_(0.5)
        B = T.mT @ phi @ T
        return -0.5 * (B + B.mT), None, None, None


def inverse_cholesky(
    A: torch.Tensor, jitter: float = DEFAULT_JITTER, where: str = "a covariance", deferred: torch.Tensor | None = None
) -> torch.Tensor:
    """L⁻¹ [..., n, n] (lower-triangular) for L the Cholesky factor of ``A + jitter * I``.

    The factorisation retries with more jitter (or flags a failure in ``deferred``) exactly as
    :func:`cholesky`. Differentiable in A (a symmetric matrix: the gradient returned is symmetric),
    not twice. The same values as :func:`inverse_cholesky_plain`; a backward of three GEMMs instead of autograd's.
    """
    return _InverseCholesky.apply(A, jitter, where, deferred)


def inverse_cholesky_plain(
    A: torch.Tensor, jitter: float = DEFAULT_JITTER, where: str = "a covariance"
) -> torch.Tensor:
    """L⁻¹ as :func:`inverse_cholesky` computes it, differentiated by autograd through
    :func:`cholesky` and the triangular solve."""
    L = cholesky(A, jitter, where=where)
    return torch.linalg.solve_triangular(L, torch.eye(L.shape[-1], dtype=L.dtype, device=L.device), upper=False)


# The joint (IW) path multiplies, per group g of K points, [K, M] by [M, L] and [K, M] by [M, K]
# with K, L ≈ 5 and M ≈ 128, for hundreds of groups. autograd's backward of A @ Bᵀ multiplies a
# transposed thin operand, a slow batched-GEMM layout on CPU; these backward passes keep both
# operands M-contiguous (docs/paper-vs-code.md §6.4).


class _MatmulNT(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, Bt):
        ctx.save_for_backward(A, Bt)
        return A @ Bt.mT

    @staticmethod
    def backward(ctx, grad):
        A, Bt = ctx.saved_tensors
        gA = grad @ Bt if ctx.needs_input_grad[0] else None
        gBt = grad.mT @ A if ctx.needs_input_grad[1] else None
        return gA, gBt


class _Gram(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        return A @ A.mT

    @staticmethod
    def backward(ctx, grad):
        (A,) = ctx.saved_tensors
        return (grad + grad.mT) @ A


def matmul_nt(A: torch.Tensor, Bt: torch.Tensor) -> torch.Tensor:
    """A @ Btᵀ for batches: A [..., P, M], Bt [..., L, M] → [..., P, L] (both contiguous in M).

    The values of :func:`matmul_nt_plain`, with a backward in M-contiguous layouts."""
    return _MatmulNT.apply(A, Bt)


def matmul_nt_plain(A: torch.Tensor, Bt: torch.Tensor) -> torch.Tensor:
    """A @ Btᵀ, differentiated by autograd (the definition of :func:`matmul_nt`)."""
    return A @ Bt.mT


def gram(A: torch.Tensor) -> torch.Tensor:
    """A @ Aᵀ for batches: A [..., P, M] → [..., P, P], one product in the backward instead of two.

    The values of :func:`gram_plain`."""
    return _Gram.apply(A)


def gram_plain(A: torch.Tensor) -> torch.Tensor:
    """A @ Aᵀ, differentiated by autograd (the definition of :func:`gram`)."""
    return A @ A.mT
