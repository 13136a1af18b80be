"""What the baselines' own training loops share: the staircase-decayed Adam. (Their minibatches are
:class:`deepgp.training.Batches`, the deep GPs' own, so that a baseline and a deep GP trained under one
seed see the same batches.)"""

from __future__ import annotations

import torch


def staircase_adam(params, lr: float, decay: float, every: int):
    """Adam at ``lr``, multiplied by ``decay`` every ``every`` steps (the paper's schedule): (optimiser, scheduler)."""
    adam = torch.optim.Adam(list(params), lr=lr)
    return adam, torch.optim.lr_scheduler.StepLR(adam, step_size=every, gamma=decay)
