"""A mixture density network (Bishop, 1994)."""

from __future__ import annotations

import torch

from .base import NetworkPeer, gaussian_mixture, mlp


class MixtureDensityNetwork(NetworkPeer):
    """One network x → (logits, μ, raw variances) of K components:
    p(y | x) = Σ_k π_k(x) N(y; μ_k(x), σ²_k(x)), π = softmax(logits), σ²_k = softplus(·) + 10⁻⁶,
    trained on the negative log likelihood.

    From the paper: tanh hidden units, the mixture's negative log likelihood. K = 5 components and two
    hidden layers of 50 units; Adam in batches of 100 with early stopping on the held-out 10% of the
    training rows (the paper used BFGS on a fixed data set); σ² by a softplus rather than the paper's
    exponential, as the deep ensemble (an exponential variance overflows early in training). lr 10⁻³ and
    a patience of 100 epochs were chosen on validation parts (README.md).
    """

    name = "mdn"
    DEFAULTS = dict(components=5, hidden=(50, 50), activation="tanh", lr=1e-3, batch_size=100, max_epochs=1000,
                    patience=100)

    def build(self, inputs: int) -> torch.nn.Module:
        return mlp(inputs, 3 * self.settings["components"], self.settings["hidden"], self.settings["activation"])

    def member_loss(self, net, x, y):
        return -self._mixture(net, x).log_prob(y).mean()

    def distribution(self, X):
        return self._mixture(self.nets[0], X)

    def _mixture(self, net, x):
        logits, mean, raw = net(x).chunk(3, dim=-1)  # each [n, K]
        return gaussian_mixture(logits, mean, raw)
