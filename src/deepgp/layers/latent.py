"""Latent-variable layer: appends w_n ~ q(w_n) (training) or N(0, I) (prediction) to its input."""

from __future__ import annotations

import torch
from torch import nn

from ..encoders import Encoder
from ..linalg import standard_normal


class LatentVariableLayer(nn.Module):
    """Concatenates a latent w_n ∈ R^{d_w} (prior N(0, I)) to the layer input.

    q(w_n) = N(a_n, diag b_n²) comes from an amortisation network of the *data pair* (x_n, y_n),
    wherever the layer sits in the stack (as in the paper's code).
    """

    def __init__(self, data_dim: int, output_dim: int, latent_dim: int = 1, encoder: Encoder | None = None,
                 **encoder_kwargs):
        super().__init__()
        self.latent_dim = latent_dim
        self.encoder = encoder if encoder is not None else Encoder(data_dim + output_dim, latent_dim, **encoder_kwargs)

    def posterior(self, x: torch.Tensor, y: torch.Tensor):
        """Mean and std of q(w_n), each [B, d_w]."""
        return self.encoder(x, y)

    def sample_posterior(self, mean: torch.Tensor, std: torch.Tensor, num_samples: int, stop_q: bool = False):
        """w [B, K, d_w] ~ q, and log p(w) − log q(w) per sample [B, K] (reparameterised).

        ``stop_q``: log q(w) with q's mean and std held constant, so that the encoder's gradient reaches
        the ratio only through w (the same value; DReG's path, :func:`deepgp.objectives.elbo_iw`)."""
        eps = standard_normal((mean.shape[0], num_samples, self.latent_dim), mean)
        w = mean.unsqueeze(1) + std.unsqueeze(1) * eps
        if stop_q:
            mean, std = mean.detach(), std.detach()
            eps = (w - mean.unsqueeze(1)) / std.unsqueeze(1)  # (= eps in value, a function of w in its gradient)
        # log N(w; 0, 1) − log N(w; a, b²) = −½w² + ½ε² + log b  (the 2π terms cancel)
        log_ratio = (-0.5 * w.square() + 0.5 * eps.square() + torch.log(std).unsqueeze(1)).sum(-1)
        return w, log_ratio

    def sample_prior(self, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        """w [*shape, d_w] ~ N(0, I)."""
        return standard_normal((*shape, self.latent_dim), like)

    @staticmethod
    def kl(mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
        """Analytic KL(q(w_n) ‖ N(0, I)) per point [B]."""
        return 0.5 * (mean.square() + std.square() - 1.0).sum(-1) - torch.log(std).sum(-1)

    def forward(self, H: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """[H, w] with H [G, P or 1, D] broadcast against w [G, P, d_w]."""
        return torch.cat([H.expand(*w.shape[:-1], H.shape[-1]), w], dim=-1)
