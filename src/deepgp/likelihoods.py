"""Gaussian likelihood p(y | f) = N(y; f, σ²), one noise variance per output."""

from __future__ import annotations

import torch
from torch import nn

from .params import LOG_2PI, Positive


class GaussianLikelihood(nn.Module):
    def __init__(self, num_outputs: int = 1, variance: float = 0.01):
        super().__init__()
        self.variance = Positive(torch.full((num_outputs,), float(variance)))

    def variational_expectation(self, y: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        """E_{N(f; mean, var)} log N(y; f, σ²), summed over outputs: [..., D_y] → [...]."""
        s2 = self.variance()
        return (-0.5 * (LOG_2PI + torch.log(s2)) - 0.5 * ((y - mean).square() + var) / s2).sum(-1)

    def log_predictive(self, y: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        """log ∫ N(y; f, σ²) N(f; mean, var) df, summed over outputs: [..., D_y] → [...]."""
        v = var + self.variance()
        return (-0.5 * (LOG_2PI + torch.log(v)) - 0.5 * (y - mean).square() / v).sum(-1)
