"""Conditional variational autoencoder (Sohn et al. 2015), the paper's ``CVAE`` baselines.

The model (one latent z_n per point, d_z = ``latent_dim``, 1 in the paper):

    z_n ~ N(0, I),   y_n | z_n, x_n ~ N(f(z_n, x_n), σ² I),

with the decoder f an MLP on [z, x] (tanh hidden units of the given widths, linear output) and
the encoder q(z_n | x_n, y_n) = N(μ_n, diag s_n²), an MLP on [x, y] of the same widths giving
(μ_n, log s_n²), the log-variance clipped to [log 1e-12, log 1e10]. Weights Glorot-normal,
biases zero, σ² = softplus(ψ) + 1e-6 starting at 0.05 (the paper's code).

Bounds of log p(y_n | x_n), summed over a minibatch of B points and scaled by N/B:

    VI: E_q[log N(y_n; f(z, x_n), σ²)] − KL(q(z | x_n, y_n) ‖ N(0, I))     (K samples of z averaged)
    IW: log (1/K) Σ_k N(y_n; f(z_k, x_n), σ²) p(z_k) / q(z_k | x_n, y_n)   (an IWAE, Burda et al. 2016)

Prediction draws z from the prior, so p(y | x) = E_z N(y; f(z, x), σ²), a mixture: the same
``propagate_prior(X, K)`` contract as :class:`~deepgp.DeepGP` (final moments f(z, x) with zero
variance), hence the same KDE and mixture estimators and metrics.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from deepgp import prediction
from deepgp.likelihoods import GaussianLikelihood
from deepgp.linalg import seeded, standard_normal
from deepgp.protocols import Predictive
from deepgp.training import Batches
from deepgp.validation import as_model_data, check_positive_int, check_seed

from .common import staircase_adam

LOGVAR_RANGE = (math.log(1e-12), math.log(1e10))
NOISE_INIT = 0.05  # the paper's code: the CVAE's noise variance starts at 0.05 (the GPs' at 0.01)


def mlp(widths: tuple[int, ...]) -> nn.Sequential:
    """Linear layers between ``widths`` (in, hidden..., out) with tanh between them, Glorot-normal
    weights and zero biases."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        linear = nn.Linear(a, b, dtype=torch.float64)
        nn.init.xavier_normal_(linear.weight)
        nn.init.zeros_(linear.bias)
        layers += [linear] + ([nn.Tanh()] if i < len(widths) - 2 else [])
    return nn.Sequential(*layers)


class CVAE(nn.Module):
    """A CVAE with hidden widths ``hidden`` (``()``: :class:`~deepgp_bench.baselines.linear.Linear`).

    Args:
        input_dim: D; output_dim: D_y; num_data: N (scales minibatch bounds).
        hidden: hidden widths of both the encoder and the decoder, e.g. (50,) or (100, 100).
        latent_dim: d_z.
    """

    def __init__(self, input_dim: int, output_dim: int, hidden=(50,), latent_dim: int = 1, num_data: int = 1,
                 noise_variance: float = NOISE_INIT):
        super().__init__()
        self.input_dim, self.output_dim = check_positive_int("input_dim", input_dim), check_positive_int(
            "output_dim", output_dim)
        self.latent_dim = check_positive_int("latent_dim", latent_dim)
        self.hidden = tuple(check_positive_int("hidden width", w) for w in hidden)
        self.num_data = check_positive_int("num_data", num_data)
        self.encoder = mlp((input_dim + output_dim, *self.hidden, 2 * latent_dim))
        self.decoder = mlp((latent_dim + input_dim, *self.hidden, output_dim))
        self.likelihood = GaussianLikelihood(output_dim, noise_variance)
        self.spec = "Linear" if not self.hidden else "CVAE-" + "-".join(map(str, self.hidden))

    @property
    def dtype(self):
        return self.decoder[0].weight.dtype

    @property
    def device(self):
        return self.decoder[0].weight.device

    has_latent = True

    def _data(self, X, Y=None):
        """X [N, D] (and Y [N, D_y]) checked, as tensors of the model's dtype and device."""
        return as_model_data(self, X, Y)

    # -- the two networks ---------------------------------------------------------------------
    def posterior(self, X: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """q(z | x, y): mean and standard deviation [B, d_z] for X [B, D], Y [B, D_y]."""
        out = self.encoder(torch.cat([X, Y], -1))
        mean, logvar = out.split(self.latent_dim, -1)
        return mean, (0.5 * logvar.clamp(*LOGVAR_RANGE)).exp()

    def decode(self, z: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """f(z, x) [..., B, D_y] for z [..., B, d_z] and X [B, D] (broadcast over the leading dimensions)."""
        return self.decoder(torch.cat([z, X.expand(*z.shape[:-1], X.shape[-1])], -1))

    # -- bounds --------------------------------------------------------------------------------
    def elbo(self, X, Y, method: str = "vi", num_samples: int = 1) -> torch.Tensor:
        """The VI or IW bound on log p(Y | X) for a minibatch X [B, D], Y [B, D_y], scaled to N (scalar)."""
        X, Y = self._data(X, Y)
        K = check_positive_int("num_samples", num_samples)
        if method not in ("vi", "iw"):
            raise ValueError(f"method must be 'vi' or 'iw', got {method!r}")
        mean, std = self.posterior(X, Y)  # [B, d_z]
        z = mean + std * standard_normal((K, *mean.shape), mean)  # [K, B, d_z]
        ell = self.likelihood.log_predictive(Y, self.decode(z, X), torch.zeros_like(Y))  # [K, B]
        if method == "vi":
            kl = 0.5 * (mean.square() + std.square() - 1 - 2 * std.log()).sum(-1)  # [B]
            per_point = ell.mean(0) - kl
        else:
            eps = (z - mean) / std
            log_ratio = (-0.5 * z.square() + 0.5 * eps.square() + std.log()).sum(-1)  # log p(z) − log q(z)
            per_point = torch.logsumexp(ell + log_ratio, 0) - math.log(K)
        return per_point.sum() * (self.num_data / X.shape[0])

    def forward(self, X, Y, method: str = "vi", num_samples: int = 1) -> torch.Tensor:
        return self.elbo(X, Y, method, num_samples)

    # -- prediction (DeepGP's contract) ----------------------------------------------------------
    def propagate_prior(self, X: torch.Tensor, num_samples: int) -> Predictive:
        """K = ``num_samples`` draws z ~ N(0, I) at X [B, D]: mean f(z, x) [K, B, D_y] and variance zeros
        [K, B, D_y] (the noise σ² is the likelihood's), as DeepGP's."""
        z = standard_normal((num_samples, X.shape[0], self.latent_dim), X)
        mean = self.decode(z, X)
        return Predictive(mean, torch.zeros_like(mean))

    def sample_predictive(self, X, num_samples: int = 1000, seed: int | None = None) -> np.ndarray:
        """Draws of y at X [N, D] (z from the prior): numpy [S, N, D_y]."""
        X, _ = self._data(X)
        return prediction.sample_predictive(self, X, check_positive_int("num_samples", num_samples), check_seed(seed))

    def predictive_log_density(self, X, Y, num_samples: int = 2000, estimator: str = "mixture",
                               seed: int | None = None) -> np.ndarray:
        """log p(y_n | x_n) per point, numpy [N]: ``mixture`` log (1/S) Σ_s N(y; f(z_s, x), σ²) or ``kde``."""
        X, Y = self._data(X, Y)
        return prediction.predictive_log_density(
            self, X, Y, check_positive_int("num_samples", num_samples), estimator, check_seed(seed))

    def extra_repr(self) -> str:
        return f"{self.spec}: D={self.input_dim}, D_y={self.output_dim}, d_z={self.latent_dim}"


def fit_cvae(model: CVAE, X, Y, method: str = "vi", num_samples: int = 1, iterations: int = 5000,
             batch_size: int = 512, lr: float = 0.005, decay: float = 0.98, decay_every: int = 1000,
             seed: int | None = 0) -> list[float]:
    """Adam on −bound, lr × decay every ``decay_every`` iterations (a staircase), minibatches of
    ``batch_size``; returns the bound per iteration (scaled to N)."""
    X, Y = model._data(X, Y)
    adam, schedule = staircase_adam(model.parameters(), lr, decay, decay_every)
    history = []
    with seeded(seed, X.device):  # (the caller's random state is left as it was)
        batches = Batches(X.shape[0], batch_size, X.device)
        for _ in range(iterations):
            idx = batches.next()
            adam.zero_grad(set_to_none=True)
            bound = model.elbo(X[idx], Y[idx], method, num_samples)
            (-bound).backward()
            adam.step()
            schedule.step()
            history.append(float(bound.detach()))
    return history
