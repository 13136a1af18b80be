"""The one place where parameters are constrained.

Every positive quantity of the library (kernel variances and lengthscales, the likelihood
variance) is stored unconstrained as ``psi`` and read through ``softplus(psi) + FLOOR``:
a shift, not a clip, so gradients never vanish at the floor (as GPflow 1, which the paper used).
"""

from __future__ import annotations

import math

import torch
from torch import nn

FLOOR = 1e-6


def positive(psi: torch.Tensor) -> torch.Tensor:
    """Map an unconstrained tensor to (FLOOR, inf)."""
    return nn.functional.softplus(psi) + FLOOR


def inverse_positive(value: torch.Tensor | float) -> torch.Tensor:
    """The inverse of :func:`positive`: ``log(expm1(value - FLOOR))``, stable for large values."""
    v = torch.as_tensor(value, dtype=torch.float64) - FLOOR
    if v.device.type != "meta" and torch.any(v <= 0):  # (a meta tensor has a shape, no values: DeepGP.shapes)
        raise ValueError(f"a positive parameter must exceed {FLOOR}, got {value}")
    # log(expm1(v)) = v + log(1 - exp(-v)); the second form does not overflow for large v.
    return v + torch.log(-torch.expm1(-v))


class Positive(nn.Module):
    """A positive parameter (any shape): ``value = softplus(psi) + 1e-6``.

    ``trainable=False`` keeps it as a buffer (e.g. the inner layers' kernel variance, fixed at 1
    as in the paper's code).
    """

    def __init__(self, value, trainable: bool = True, dtype=torch.float64):
        super().__init__()
        psi = inverse_positive(torch.as_tensor(value, dtype=torch.float64)).to(dtype)
        if trainable:
            self.psi = nn.Parameter(psi)
        else:
            self.register_buffer("psi", psi)

    def forward(self) -> torch.Tensor:
        return positive(self.psi)

    @torch.no_grad()
    def assign(self, value) -> None:
        """Set the constrained value in place."""
        self.psi.copy_(inverse_positive(torch.as_tensor(value, dtype=torch.float64)))

    def extra_repr(self) -> str:
        v = self().detach()
        return f"value={v.tolist() if v.numel() <= 8 else tuple(v.shape)}"


LOG_2PI = math.log(2.0 * math.pi)
