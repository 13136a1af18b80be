"""Stationary kernels with ARD lengthscales: k(a, b) = variance * r(|a - b| / lengthscale).

Each kernel is ``K(X, Z)`` for the cross-covariance and ``K_diag(X)`` for k(x, x). Inputs are
[..., N, D] and [..., M, D]; outputs [..., N, M] and [..., N].
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .params import Positive


class Stationary(nn.Module):
    """Base class: variance (scalar) and one lengthscale per input dimension, both positive.

    Lengthscales start at sqrt(input_dim), as in the paper; the variance at 1.
    """

    def __init__(self, input_dim: int, variance: float = 1.0, lengthscale=None, train_variance: bool = True):
        super().__init__()
        if lengthscale is None:
            lengthscale = math.sqrt(input_dim)
        self.input_dim = input_dim
        self.variance = Positive(variance, trainable=train_variance)
        self.lengthscale = Positive(torch.full((input_dim,), float(lengthscale)))

    def half_neg_sqdist(self, X: torch.Tensor, Z: torch.Tensor, offset=0.0) -> torch.Tensor:
        """offset − ½|x/ℓ − z/ℓ|² for all pairs, as ONE matrix product of augmented inputs:
        [x, −½|x|², 1] · [z, 1, offset − ½|z|²]ᵀ (lengthscales applied first).

        The [N, M] result is touched once, by the GEMM, instead of by five elementwise passes
        (add, add, scale, clamp, scale): the kernel is memory-bound. Rounding can
        make it exceed ``offset`` by ~1e-16·|x|²; harmless inside exp (the paper's code did not
        clamp either).

        The scaled inputs are clamped to ±:func:`far_input` (D inputs): every term of the product
        then stays finite, so an input far from the data (finite, or infinite in the model's dtype)
        gets a finite, huge distance from the inducing inputs and the kernel 0 (the prior), where
        |x|² would overflow to ∞ and ∞ − ∞ make NaN. Inputs within the bound are unchanged, bit for
        bit. (Two far points get a distance as rounded as their |x|² is: not NaN, but no distance.)
        """
        ls = self.lengthscale()
        Xs, Zs = X / ls, Z / ls
        far = far_input(Xs.dtype, Xs.shape[-1])
        with torch.no_grad():  # in place, outside autograd: its graph, so every gradient's sum order, is the same
            Xs.clamp_(-far, far)
            Zs.clamp_(-far, far)
        one_x = torch.ones_like(Xs[..., :1])
        one_z = torch.ones_like(Zs[..., :1])
        Xa = torch.cat([Xs, -0.5 * Xs.square().sum(-1, keepdim=True), one_x], -1)
        Za = torch.cat([Zs, one_z, offset - 0.5 * Zs.square().sum(-1, keepdim=True)], -1)
        return Xa @ Za.transpose(-1, -2)

    def scaled_sqdist(self, X: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
        """Squared distance of X/ℓ and Z/ℓ, clamped at 0."""
        return (-2.0 * self.half_neg_sqdist(X, Z)).clamp_min(0.0)

    def K(self, X: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
        return self.variance() * self.shape_fn(self.scaled_sqdist(X, Z))

    def K_diag(self, X: torch.Tensor) -> torch.Tensor:
        return self.variance().expand(X.shape[:-1])

    def shape_fn(self, r2: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


def far_input(dtype: torch.dtype, input_dim: int) -> float:
    """B = √(max / 16D), the largest |x/ℓ| a kernel reads (a farther input is read as ±B).

    With every |x_d/ℓ_d| ≤ B the squared distance of two points is at most 4DB² = max/4, so the
    matrix product of :meth:`Stationary.half_neg_sqdist` and a Matérn kernel's (5/3)r² stay finite,
    while exp(−r) underflows to 0 from r ≈ 750: B is 3.4e153/√D in float64 and 4.6e18/√D in float32.
    """
    return math.sqrt(torch.finfo(dtype).max / (16 * input_dim))


def _distance(r2: torch.Tensor) -> torch.Tensor:
    """r from r²; the 1e-36 keeps the gradient of sqrt finite at r = 0 (the diagonal of K(Z, Z))."""
    return torch.sqrt(r2 + 1e-36)


class RBF(Stationary):
    """Squared exponential: exp(−r²/2)."""

    def shape_fn(self, r2):
        return torch.exp(-0.5 * r2)

    def K(self, X, Z):
        # σ² exp(−r²/2) = exp(log σ² − r²/2): the variance rides inside the GEMM, leaving one exp
        return torch.exp(self.half_neg_sqdist(X, Z, torch.log(self.variance())))


class Matern52(Stationary):
    """Matérn-5/2: (1 + √5 r + 5r²/3) exp(−√5 r)."""

    def shape_fn(self, r2):
        r = _distance(r2)
        s5r = math.sqrt(5.0) * r
        return (1.0 + s5r + (5.0 / 3.0) * r2) * torch.exp(-s5r)


class Matern32(Stationary):
    """Matérn-3/2: (1 + √3 r) exp(−√3 r); once differentiable, rougher than Matérn-5/2."""

    def shape_fn(self, r2):
        r = _distance(r2)
        s3r = math.sqrt(3.0) * r
        return (1.0 + s3r) * torch.exp(-s3r)


KERNELS = {"rbf": RBF, "matern52": Matern52, "matern32": Matern32}


def make_kernel(name: str, input_dim: int, **kwargs) -> Stationary:
    try:
        cls = KERNELS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown kernel {name!r}; choose one of {sorted(KERNELS)}") from None
    return cls(input_dim, **kwargs)
