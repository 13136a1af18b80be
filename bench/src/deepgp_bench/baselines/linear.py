"""The paper's ``Linear`` baseline: a :class:`~deepgp_bench.baselines.cvae.CVAE` with no hidden layers.

With no hidden layer the decoder is affine, f(z, x) = A z + B x + c, so the model is the
linear-Gaussian one

    y | x ~ N(B x + c, A Aᵀ + σ² I)        (A [D_y, d_z], B [D_y, D], c [D_y]),

a linear regression with a full output covariance: its predictive marginals are exactly Gaussian
(Table S2's W = 1) and its log density is available in closed form (``estimator="exact"``). The
affine encoder can represent the exact posterior q(z | x, y) = p(z | x, y), for which both the VI
and the IW bounds equal log p(y | x) (the IW bound then for every sample of z).
"""

from __future__ import annotations

import numpy as np
import torch

from deepgp.params import LOG_2PI

from .cvae import CVAE, NOISE_INIT


class Linear(CVAE):
    """``CVAE(hidden=())``: the paper's Linear model (the settings of every CVAE: docs/paper-vs-code.md §5.5)."""

    def __init__(self, input_dim: int, output_dim: int, latent_dim: int = 1, num_data: int = 1,
                 noise_variance: float = NOISE_INIT):
        super().__init__(input_dim, output_dim, (), latent_dim, num_data, noise_variance)

    def affine(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(A [D_y, d_z], B [D_y, D], c [D_y]) of the decoder f(z, x) = A z + B x + c."""
        W, c = self.decoder[0].weight, self.decoder[0].bias
        return W[:, : self.latent_dim], W[:, self.latent_dim:], c

    def exact_log_density(self, X, Y) -> torch.Tensor:
        """log N(y_n; B x_n + c, A Aᵀ + σ² I) per point [N] for X [N, D], Y [N, D_y]."""
        X, Y = self._data(X, Y)
        A, B, c = self.affine()
        cov = A @ A.T + torch.diag(self.likelihood.variance())
        r = Y - X @ B.T - c
        L = torch.linalg.cholesky(cov)
        a = torch.linalg.solve_triangular(L, r.T, upper=False)  # [D_y, N]
        return (-0.5 * a.square().sum(0) - torch.log(torch.diagonal(L)).sum()
                - 0.5 * self.output_dim * LOG_2PI)

    def predictive_log_density(self, X, Y, num_samples: int = 2000, estimator: str = "exact",
                               seed: int | None = None) -> np.ndarray:
        """log p(y_n | x_n) per point, numpy [N]: ``exact`` (closed form, the default), ``mixture`` or ``kde``."""
        if estimator == "exact":
            with torch.no_grad():
                return self.exact_log_density(X, Y).cpu().numpy()
        return super().predictive_log_density(X, Y, num_samples, estimator, seed)
