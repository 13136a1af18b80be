"""Amortisation network for q(w_n) = N(a_n, diag b_n²) of a latent-variable layer.

We follow the authors' released code (docs/paper-vs-code.md §3), which produced the paper's numbers:
three dense layers (D_x + D_y) → 20 → 20 → 2·d_w, tanh after the first two, a skip connection
wherever a layer keeps its width (h ← tanh(hW + b) + h), Glorot-normal weights, zero biases,
mean a = o₁ and std b = softplus(o₂ − 3) (≈ 0.05 at the start: q(w) starts narrow so the
latent variables cannot swamp the GPs early). The paper's text (10 units, exp with bias −5) is
available through ``hidden=(10, 10), std_offset=-5, std_map="exp"`` — in a model, the settings
``encoder_hidden=(10, 10), encoder_std="exp"`` (deepgp.config.ModelConfig).
"""

from __future__ import annotations

import torch
from torch import nn

# the offset o₂ − c that goes with each std map: softplus(o₂ − 3) as the code, exp(o₂ − 5) as the text
STD_OFFSETS = {"softplus": -3.0, "exp": -5.0}


class Encoder(nn.Module):
    """(x [B, D_x], y [B, D_y]) → (mean [B, d_w], std [B, d_w])."""

    def __init__(
        self,
        input_dim: int,
        latent_dim: int,
        hidden: tuple[int, ...] = (20, 20),
        std_offset: float = -3.0,
        std_map: str = "softplus",
        dtype=torch.float64,
    ):
        super().__init__()
        if std_map not in ("softplus", "exp"):
            raise ValueError(f"std_map must be 'softplus' or 'exp', got {std_map!r}")
        widths = (input_dim, *hidden, 2 * latent_dim)
        self.linears = nn.ModuleList(nn.Linear(a, b, dtype=dtype) for a, b in zip(widths[:-1], widths[1:]))
        for lin in self.linears:
            nn.init.xavier_normal_(lin.weight)
            nn.init.zeros_(lin.bias)
        self.latent_dim, self.std_offset, self.std_map = latent_dim, std_offset, std_map

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        h = torch.cat([x, y], dim=-1)
        for lin in self.linears[:-1]:
            out = torch.tanh(lin(h))
            h = out + h if out.shape == h.shape else out
        o = self.linears[-1](h)
        mean, raw = o[..., : self.latent_dim], o[..., self.latent_dim :] + self.std_offset
        std = torch.exp(raw) if self.std_map == "exp" else nn.functional.softplus(raw)
        return mean, std
