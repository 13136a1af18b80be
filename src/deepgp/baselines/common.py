"""What the baselines' own training loops share: minibatches and the staircase-decayed Adam."""

from __future__ import annotations

import torch

from ..training import _Batches

# minibatches as the deep GPs get them (successive random permutations of the N points), so that a
# baseline and a deep GP trained under one seed see the same batches
Batches = _Batches


def staircase_adam(params, lr: float, decay: float, every: int):
    """Adam at ``lr``, multiplied by ``decay`` every ``every`` steps (the paper's schedule): (optimiser, scheduler)."""
    adam = torch.optim.Adam(list(params), lr=lr)
    return adam, torch.optim.lr_scheduler.StepLR(adam, step_size=every, gamma=decay)
