"""Numerically guarded linear algebra shared by every layer."""

from __future__ import annotations

import contextlib

import torch

DEFAULT_JITTER = 1e-6
MAX_JITTER = 1e-2


class CholeskyError(RuntimeError):
    """A Cholesky factorisation failed even after adding the largest allowed jitter."""


def cholesky(
    A: torch.Tensor,
    jitter: float = DEFAULT_JITTER,
    max_jitter: float = MAX_JITTER,
    where: str = "a covariance",
    relative: bool = False,
) -> torch.Tensor:
    """Lower Cholesky factor of ``A + jitter * I`` for a (batch of) symmetric matrices [..., n, n].

    ``jitter`` is added first; if any matrix of the batch is still not positive definite the
    jitter grows tenfold (up to ``max_jitter``) and only the failed matrices are retried, so
    one bad block does not perturb the others. ``relative=True`` scales the jitter by each
    matrix's mean diagonal. Raises :class:`CholeskyError` naming ``where`` when all fail.
    """
    if not jitter >= 0.0:
        raise ValueError(f"jitter must be >= 0, got {jitter}")
    n = A.shape[-1]
    eye = torch.eye(n, dtype=A.dtype, device=A.device)
    scale = A.diagonal(dim1=-2, dim2=-1).mean(-1)[..., None, None].clamp_min(1e-12) if relative else 1.0
    L, info = torch.linalg.cholesky_ex(A + (jitter * scale) * eye)
    if not bool(torch.any(info)):
        return L
    j = jitter
    while j < max_jitter:
        j = min(max(j * 10.0, DEFAULT_JITTER), max_jitter)  # from jitter = 0 the retries start at the default
        failed = info != 0
        L_retry, info_retry = torch.linalg.cholesky_ex(A + (j * scale) * eye)
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


class _InverseCholesky(torch.autograd.Function):
    # backward: with T = L⁻¹, dT = −Φ(T dA Tᵀ) T (Φ: lower triangle, halved diagonal), so
    # ∂f/∂A = −Tᵀ Φ(ḠTᵀ) T, symmetrised: three M×M GEMMs. Autograd's chain through cholesky and
    # solve_triangular does three triangular solves and more passes (measured in benchmarks/README.md).
    @staticmethod
    def forward(ctx, A, jitter, where):
        L = cholesky(A, jitter, where=where)
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
        return -0.5 * (B + B.mT), None, None


def inverse_cholesky(
    A: torch.Tensor, jitter: float = DEFAULT_JITTER, where: str = "a covariance"
) -> torch.Tensor:
    """L⁻¹ [..., n, n] (lower-triangular) for L the Cholesky factor of ``A + jitter * I``.

    The factorisation retries with more jitter exactly as :func:`cholesky`. Differentiable in A
    (a symmetric matrix: the gradient returned is symmetric), not twice.
    """
    return _InverseCholesky.apply(A, jitter, where)


def standard_normal(shape, like: torch.Tensor) -> torch.Tensor:
    """Standard normal draws of ``shape`` with ``like``'s dtype and device.

    Monte-Carlo noise is drawn in float32 and widened: torch's float64 normal sampler is ~4×
    slower on CPU and the draws are a visible share of a training step. The widened draws are
    exactly N(0, 1) but for tails beyond ~5.8σ (probability < 1e-8), irrelevant for MC estimates.
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
    devices = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        if seed is not None:
            torch.manual_seed(seed)
        yield


# -- products of many thin matrices ----------------------------------------------------------------
# The joint (IW) path multiplies, per group g of K points, [K, M] by [M, L] and [K, M] by [M, K]
# with K, L ≈ 5 and M ≈ 128, for hundreds of groups. torch's batched GEMM on CPU is 2–3× slower
# when the thin operand of such a product is a transposed view, and autograd's default backward of
# A @ Bᵀ forms exactly that (Aᵀ @ grad). These two functions compute the same products with
# backward passes written in the fast layouts (measured: 5.7 → 3.3 ms per product and gradient).


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
    """A @ Btᵀ for batches: A [..., P, M], Bt [..., L, M] → [..., P, L] (both contiguous in M)."""
    return _MatmulNT.apply(A, Bt)


def gram(A: torch.Tensor) -> torch.Tensor:
    """A @ Aᵀ for batches: A [..., P, M] → [..., P, P], one product in the backward instead of two."""
    return _Gram.apply(A)
