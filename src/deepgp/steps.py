"""One training iteration, behind one interface with two implementations.

Each iteration of :func:`deepgp.fit` is one fused step on one minibatch: one forward pass of the bound,
one backward pass that yields both Adam's gradients and, by the chain rule, the gradient in the
natural-gradient layers' expectation parameters; then Adam's step and the natural-gradient step.
:class:`Eager` takes it deciding on the host; :class:`Captured` replays it from a CUDA graph
(:mod:`deepgp.capture`; on the CPU, the same code on fixed buffers) and makes the host's decisions
after it: redo a step whose Cholesky factor failed, halve a refused natural-gradient step, stop on
a non-finite bound. Both give the same numbers.
"""

from __future__ import annotations

import logging
from typing import NamedTuple, Protocol

import numpy as np
import torch

from .capture import CapturedStep
from .linalg import Numerics
from .natgrad import NaturalGradient

log = logging.getLogger(__name__)


class StepResult(NamedTuple):
    """What one iteration reports to the loop."""

    bound: float  # the bound's minibatch estimate at the parameters before the step
    taken: float | None  # the final layer's natural-gradient step γ (0.0: skipped; None: no natural gradients)


class Step(Protocol):
    """One training iteration on the minibatch ``idx`` [B] at natural-gradient step ``gamma``."""

    def __call__(self, t: int, idx: torch.Tensor, gamma: float) -> StepResult: ...

    def report(self, iterations: int) -> None:
        """Log what the run of ``iterations`` steps should know about how they were taken."""


class Eager:
    """The iteration deciding on the host: a non-finite bound stops the run (FloatingPointError, naming
    the run's ``lr`` and ``gamma``) before any parameter moves; the natural-gradient step halves as it must.

    Args:
        model, X, Y: the DeepGP and its checked training data (on the model's device).
        objective: ``objective(model, xb, yb, numerics=numerics)`` → the bound (a scalar tensor).
        numerics: how the bound computes (:class:`~deepgp.linalg.Numerics`).
        adam: the optimiser of every parameter but the q(v) ``natural`` trains.
        natural: the natural-gradient optimiser (None: Adam trains every q(v)).
        lr, gamma: the run's settings, named in the divergence message.
    """

    def __init__(self, model, X: torch.Tensor, Y: torch.Tensor, objective, numerics: Numerics,
                 adam: torch.optim.Optimizer, natural: NaturalGradient | None, lr: float, gamma: float):
        self.model, self.X, self.Y, self.objective, self.numerics = model, X, Y, objective, numerics
        self.adam, self.natural, self.lr, self.gamma = adam, natural, lr, gamma

    def __call__(self, t: int, idx: torch.Tensor, gamma: float) -> StepResult:
        self.adam.zero_grad(set_to_none=True)
        if self.natural is not None:  # (outside Adam: cleared here)
            self.natural.zero_grad(set_to_none=True)
        # the batch is checked data already: not checked again
        bound = self.objective(self.model, self.X[idx], self.Y[idx], numerics=self.numerics)
        (-bound).backward()
        value = bound.item()
        if not np.isfinite(value):
            self.diverged(t, value)
        self.adam.step()
        # an inner layer's skipped step is not counted: the final layer's alone is reported
        return StepResult(value, None if self.natural is None else self.natural.step(gamma)[0])

    def diverged(self, t: int, value: float):
        """Stop the run: the bound became ``value`` (not finite) at iteration ``t``."""
        raise FloatingPointError(f"the bound became {value} at iteration {t}; "
                                 f"try a smaller learning rate (lr={self.lr}) or gamma ({self.gamma})")

    def report(self, iterations: int) -> None:
        pass


class Captured:
    """The iteration replayed (:class:`~deepgp.capture.CapturedStep`, recorded as a CUDA graph when
    ``graph``), its flags read after it. The first iteration of a fresh run is ``eager``'s (Adam's
    buffers, which the replay works on, exist once it has stepped); a step whose Cholesky factor
    needed more jitter is undone and redone eagerly; a refused natural-gradient step is halved on
    the host from γ/2; a non-finite bound puts the model back as it was before the step, then stops."""

    def __init__(self, eager: Eager, batch_size: int, graph: bool):
        self.eager, self.batch_size, self.graph = eager, batch_size, graph
        self.captured: CapturedStep | None = None
        self.redone = 0

    def __call__(self, t: int, idx: torch.Tensor, gamma: float) -> StepResult:
        eager = self.eager
        if self.captured is None:
            if not eager.adam.state:
                return eager(t, idx, gamma)
            self.captured = CapturedStep(eager.model, eager.X, eager.Y, eager.objective, eager.adam, eager.natural,
                                         self.batch_size, self.graph, eager.numerics)
        value, cholesky_failed, natgrad_failed = self.captured.run(idx, eager.adam.param_groups[0]["lr"], gamma)
        if cholesky_failed:  # a factor needed more jitter: undo, and redo where retries happen
            self.captured.restore()
            self.redone += 1
            return eager(t, idx, gamma)
        if not np.isfinite(value):
            self.captured.restore()  # as eagerly: the model as it was before the diverging step
            eager.diverged(t, value)
        if eager.natural is None:
            return StepResult(value, None)
        return StepResult(value, eager.natural.complete_deferred(natgrad_failed, self.captured.grads, gamma)[0])

    def report(self, iterations: int) -> None:
        if self.redone:
            log.info("%d of %d captured steps were redone eagerly (a Cholesky factor needed more jitter)",
                     self.redone, iterations)


def capture_mode(capture: bool | None, device: torch.device, by_default: bool) -> tuple[bool, bool]:
    """(captured steps, recorded as a CUDA graph) for fit's ``capture`` on ``device``: None is captured on a
    GPU where ``by_default`` (fit: unless ``DEEPGP_CAPTURE`` is off, :class:`deepgp.runtime.Environment`);
    True on the CPU runs the captured step without a graph."""
    if capture not in (None, True, False):
        raise ValueError(f"capture must be True, False or None (on a GPU), got {capture!r}")
    if capture is None:
        capture = device.type == "cuda" and by_default
    return bool(capture), bool(capture) and device.type == "cuda"

