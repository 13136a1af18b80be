"""A conditional neural spline flow (Durkan et al., 2019) by zuko."""

from __future__ import annotations

import torch

from .base import NetworkPeer


class SplineFlow(NetworkPeer):
    """``zuko.flows.NSF(1, D)``: y = f(z; x) with z ~ N(0, 1) and f a stack of monotonic rational-quadratic
    splines on [-5, 5] whose knots are a network of x; p(y | x) = N(f⁻¹(y; x)) |∂f⁻¹/∂y|, exact.

    zuko's documented settings (its README's example): 3 transforms, hidden layers 128 × 3, 8 bins,
    Adam with lr 10⁻³; batches of 100 and early stopping on the held-out 10% of the training rows after
    20 epochs without a new best (lr and patience kept by a screen on validation parts, README.md).
    """

    name = "flow"
    draw_block = 100_000  # a draw goes through the network: 2,000 draws of 50 points hold ~100 MB of activations
    DEFAULTS = dict(transforms=3, hidden=(128, 128, 128), bins=8, lr=1e-3, batch_size=100, max_epochs=1000,
                    patience=20)

    def build(self, inputs: int) -> torch.nn.Module:
        import zuko

        s = self.settings
        return zuko.flows.NSF(1, inputs, bins=s["bins"], transforms=s["transforms"], hidden_features=list(s["hidden"]))

    def member_loss(self, flow, x, y):
        return -flow(x).log_prob(y[:, None]).mean()

    def distribution(self, X):
        return self.nets[0](X)  # event shape [1]
