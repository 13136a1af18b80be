"""The training loop: Adam on everything but the q(v) trained by natural gradients, natural gradients on them.

One fused step per iteration (:mod:`deepgp.steps`): one minibatch, one forward pass of the bound, one
backward pass that yields both the Adam gradients and, by the chain rule, the gradient in the
natural-gradient layers' expectation parameters. (The paper's code made two passes on two minibatches,
NG then Adam; the fused step costs half and is a legitimate simplification — both are stochastic ascent
on the same bound.)
"""

from __future__ import annotations

import dataclasses
import os
import time
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm.auto import tqdm

from . import memory, objectives, storage
from .capture import capturable_adam
from .checkpoint import Checkpoint, TrainingState, fingerprint
from .config import TrainConfig, gamma_at
from .early_stopping import EarlyStopping, split_rows
from .linalg import Numerics, seeded
from .natgrad import MAX_SKIPPED_IN_A_ROW, NaturalGradient
from .runtime import Environment, settle_heap
from .steps import Captured, Eager, Step, capture_mode
from .validation import as_xy, check_magnitude, check_positive_int

if TYPE_CHECKING:
    from .config import ResolvedTrainConfig

__all__ = ["Batches", "History", "MAX_SKIPPED_IN_A_ROW", "fit", "train_config"]


class History(np.ndarray):
    """What :func:`fit` returns: the bound at every iteration, numpy [T] (an ndarray; computations on it
    give plain arrays), with the run's record as attributes:

    * ``seconds``: the wall time of the ``fit`` call, from its start to the fitted model;
    * with early stopping (None without): ``evaluations`` [E, 2], each score of the held-out rows as
      (iterations done, mean log density); ``best_iteration``, the iterations done at the best score
      (the state returned; None if no score was finite); ``stopped_at``, the iterations done when
      training stopped early (None: it ran its budget, or was stopped by the callback).
    """

    seconds: float | None
    evaluations: np.ndarray | None
    best_iteration: int | None
    stopped_at: int | None

    def __new__(cls, bounds, seconds: float | None = None, stopping: EarlyStopping | None = None) -> "History":
        out = np.asarray(bounds, dtype=np.float64).view(cls)
        out.seconds = seconds
        out.evaluations = (None if stopping is None
                           else np.asarray(stopping.evaluations, dtype=np.float64).reshape(-1, 2))
        out.best_iteration = None if stopping is None else stopping.best_iteration
        out.stopped_at = None if stopping is None else stopping.stopped_at
        return out

    def __array_finalize__(self, obj) -> None:  # (a slice of a history keeps its record)
        for name in ("seconds", "evaluations", "best_iteration", "stopped_at"):
            setattr(self, name, getattr(obj, name, None))

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        out = np.asarray(obj)  # a mean, a difference...: a number or a plain array, not a history
        return out[()] if out.ndim == 0 else out


class Batches:
    """Minibatch indices from successive random permutations (batches straddle epochs), drawn on
    the data's device (no copy from the host per step on a GPU)."""

    def __init__(self, n: int, batch_size: int, device=None):
        self.n, self.batch_size, self.device = n, min(batch_size, n), device
        self.buffer = torch.empty(0, dtype=torch.long, device=device)

    def next(self) -> torch.Tensor:
        while self.buffer.numel() < self.batch_size:
            self.buffer = torch.cat([self.buffer, torch.randperm(self.n, device=self.device)])
        idx, self.buffer = self.buffer[: self.batch_size], self.buffer[self.batch_size :]
        return idx


def _adam(params, lr: float) -> torch.optim.Adam:
    """Adam, fused into one kernel per step where this torch supports it (CPU: torch ≥ 2.4):
    a quarter of the unfused update's time for the 18 tensors of LV-GP-GP-GP, the same update."""
    try:
        return torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(params, lr=lr)


def fit(model, X, Y, method: str | None = None, num_samples: int | None = None, *, config: TrainConfig | None = None,
        progress: bool = True, callback=None, checkpoint: str | os.PathLike | None = None, checkpoint_every: int = 1000,
        capture: bool | None = None, **settings) -> History:
    """Maximise ``model.elbo`` on (X, Y); returns the bound at every iteration (numpy [T], a :class:`History`
    that also holds the wall time and early stopping's record).

    The training settings are :class:`~deepgp.config.TrainConfig`'s: ``config``, with any of its
    fields given as keywords (``iterations=``, ``lr=``, ``seed=`` ...) taking precedence; ``method``
    and ``num_samples`` (K) may also come first, positionally. The optimiser's settings left
    unset come from ``recipe`` ("fast", the default, or "paper": :data:`deepgp.config.RECIPE_VALUES`).
    Each iteration is one fused step (:mod:`deepgp.steps`): Adam on everything but the q(v) trained by
    natural gradients (the final layer's with ``natgrad``, the inner layers' too with ``natgrad_inner``),
    their natural-gradient step γ_t (:func:`deepgp.config.gamma_at`: an optional warm-up, then the
    learning rate's staircase decay).

    With ``early_stopping`` (:mod:`deepgp.early_stopping`) the last round(``validation_fraction``·N) rows of
    a permutation drawn under ``seed`` are held out and never trained on (N, and the bound's scaling, are
    the rows trained on); their mean predictive log density is scored every ``validation_every``
    iterations, training stops after ``patience`` scores without a new best, and the model is left in
    the best state scored (also when the budget or the callback ends the run first).

    Args:
        callback: called as ``callback(iteration, bound)`` after every step; return True to stop.
        checkpoint: a file to save the full training state to every ``checkpoint_every``
            iterations and at the end; if it exists, training resumes from it.
        capture: replay each iteration from a CUDA graph (:mod:`deepgp.capture`). None (the
            default): on a GPU, unless the environment sets ``DEEPGP_CAPTURE=0``. On the CPU,
            True runs the same step on fixed buffers without a graph (never faster: for tests).
    Reproducible under ``seed`` (the caller's torch RNG state untouched); the environment's switches are read once.

    A checkpoint (:class:`deepgp.checkpoint.Checkpoint`) records a fingerprint of the training data and
    of every setting but ``iterations`` (which may grow between runs); resuming with other data or
    settings is a ValueError naming what differs. Natural-gradient steps that had to be skipped are
    reported: a warning with their count, or a :class:`~deepgp.natgrad.NaturalGradientError` after
    ``MAX_SKIPPED_IN_A_ROW`` in a row (the step ``gamma`` is too large).
    """
    started = time.perf_counter()
    env = Environment.read()  # the opt-outs, passed down from here (numerics: R_lᵀA in float32 unless opted out)
    settings.update({k: v for k, v in (("method", method), ("num_samples", num_samples)) if v is not None})
    cfg = _resolved(train_config(config, settings))
    X, Y, stopping, saved = _prepared(model, X, Y, cfg, checkpoint, checkpoint_every, env.numerics)
    objective, natural = _objective(cfg, model), _natural_gradient(cfg, model)
    captured, graph = capture_mode(capture, model.device, env.capture)
    adam = _optimiser(model, natural, cfg.lr, graph)
    schedule = torch.optim.lr_scheduler.StepLR(adam, step_size=cfg.decay_every, gamma=cfg.decay)
    with seeded(cfg.seed, model.device):
        run = TrainingState(model, adam, schedule, Batches(X.shape[0], cfg.batch_size, model.device),
                            early_stopping=stopping)
        start = saved.resume(run) if saved is not None and saved.exists() else 0
        end = start if stopping is not None and stopping.stopped_at is not None else cfg.iterations  # (it had stopped)
        step = _step(run, X, Y, objective, env.numerics, natural, cfg, captured, graph)
        if env.settle_heap:  # DEEPGP_SETTLE_HEAP=0 opts out
            settle_heap(model.device)  # deepgp.runtime: fewer page faults per step
        bar = tqdm(total=cfg.iterations, initial=start, disable=not progress, desc=f"{model.spec} {cfg.method}",
                   leave=False)
        model.train()
        for t in range(start, end):
            result = step(t, run.batches.next(), gamma_at(cfg, t))  # γ decays on the learning rate's staircase
            schedule.step()
            if natural is not None and result.taken is not None:  # (taken is None exactly when natural is)
                natural.count(result.taken, t)
            run.history.append(result.bound)
            bar.update(1)
            if t % 25 == 0:
                bar.set_postfix(bound=f"{result.bound / model.num_data:.4f}/pt")
            stop = stopping is not None and stopping.due(t + 1) and stopping.evaluate(t + 1)
            if saved is not None and (t + 1) % checkpoint_every == 0:
                saved.save(run)
            if (callback is not None and callback(t, result.bound)) or stop:
                break
        bar.close()
        if saved is not None:
            saved.save(run)  # the state to go on from; early stopping's best state is saved beside it
        step.report(len(run.history) - start)
        if stopping is not None:
            stopping.restore()
    model.eval()
    if natural is not None:
        natural.warn_skipped(len(run.history) - start)  # (a warning at fit's caller)
    return History(run.history, time.perf_counter() - started, stopping)


def _prepared(model, X, Y, cfg: ResolvedTrainConfig, checkpoint, checkpoint_every, numerics: Numerics) -> tuple:
    """Everything fit checks and sets up before its first step (stepping with ``numerics``): (X, Y) as tensors
    of the rows trained on, early stopping on the rows held out (None without it), the :class:`Checkpoint`
    (None without one). ``model.num_data`` becomes the number of rows trained on."""
    check_positive_int("checkpoint_every", checkpoint_every)
    if checkpoint is not None:
        storage.check_writable(checkpoint, "the checkpoint")  # now, not after the first thousand iterations
    X, Y = as_xy(X, Y, model.dtype, model.device, model.input_dim, model.output_dim, min_rows=2)
    check_magnitude(X, Y, model.dtype)
    memory.check_fit(model, X.shape[0], cfg, numerics=numerics)  # refused now, not by the operating system mid-step
    stopping, rows = None, None
    if cfg.early_stopping:
        rows = split_rows(len(X), cfg.validation_fraction, cfg.seed)
    trained = len(X) if rows is None else len(rows[0])
    saved = None if checkpoint is None else Checkpoint(checkpoint, fingerprint(model, X, Y, _acting(cfg, trained)))
    if rows is not None:
        fitted, held = (torch.as_tensor(r, device=model.device) for r in rows)
        stopping = EarlyStopping(model, X[held], Y[held], cfg.validation_every, cfg.patience)
        X, Y = X[fitted], Y[fitted]  # the held-out rows are in no step
    model.num_data = X.shape[0]
    return X, Y, stopping, saved


def train_config(config: TrainConfig | None, settings: dict) -> TrainConfig:
    """``config`` (default: TrainConfig()) with ``settings`` replacing its fields; an unknown name is a
    ValueError naming it (and every value is checked by TrainConfig)."""
    if config is not None and not isinstance(config, TrainConfig):
        raise ValueError(f"config must be a TrainConfig, got {type(config).__name__}")
    unknown = sorted(set(settings) - {f.name for f in dataclasses.fields(TrainConfig)})
    if unknown:
        raise ValueError(f"unknown training setting(s) {unknown}; the settings are TrainConfig's fields")
    return dataclasses.replace(config or TrainConfig(), **settings)


def _resolved(cfg: TrainConfig) -> ResolvedTrainConfig:
    """``cfg`` with its recipe's values filled in and the optimiser's numbers as floats."""
    resolved = cfg.resolved()
    return dataclasses.replace(resolved, lr=float(resolved.lr), gamma=float(resolved.gamma),
                               decay=float(resolved.decay))


EARLY_STOPPING = ("early_stopping", "validation_fraction", "validation_every", "patience")


def _acting(cfg: ResolvedTrainConfig, n: int) -> dict:
    """Every setting but the budget, as it acts on ``n`` points trained on: a batch of at least N is N, vi
    has no inner sampling, early stopping's settings only where it is on (what a checkpoint's
    fingerprint records)."""
    acting = {k: v for k, v in dataclasses.asdict(cfg).items()
              if k != "iterations" and (cfg.early_stopping or k not in EARLY_STOPPING)}
    acting.update(batch_size=min(cfg.batch_size, n), inner_sampling=cfg.inner_sampling if cfg.method == "iw" else "-")
    return acting


def _objective(cfg: ResolvedTrainConfig, model):
    """The bound fit steps on, ``objective(model, X, Y, numerics=...)``; a DReG setting it refuses, refused now."""
    if cfg.dreg and cfg.method == "iw" and model.has_latent:
        objectives.check_dreg(cfg.inner_sampling)  # now, not at the first step
    if cfg.method == "iw":
        return partial(objectives.elbo_iw, num_samples=cfg.num_samples, inner_sampling=cfg.inner_sampling,
                       dreg=cfg.dreg)
    return partial(objectives.elbo_vi, num_samples=cfg.num_samples)


def _natural_gradient(cfg: ResolvedTrainConfig, model) -> NaturalGradient | None:
    """The natural-gradient optimiser of the final layer's q(v) and, with ``natgrad_inner``, the inner GP
    layers' (the final one first); None without ``natgrad``."""
    if not cfg.natgrad:
        return None
    inner = [m for m in model.layers[:-1] if hasattr(m, "q_mu")] if cfg.natgrad_inner else []
    return NaturalGradient([model.final_layer, *inner], cfg.gamma)


def _step(run: TrainingState, X, Y, objective, numerics: Numerics, natural: NaturalGradient | None,
          cfg: ResolvedTrainConfig, captured: bool, graph: bool) -> Step:
    """fit's iteration: eager, or captured (and replayed from a CUDA graph when ``graph``)."""
    step = Eager(run.model, X, Y, objective, numerics, run.adam, natural, cfg.lr, cfg.gamma)
    return Captured(step, run.batches.batch_size, graph) if captured else step


def _optimiser(model, natural: NaturalGradient | None, lr: float, graph: bool) -> torch.optim.Adam:
    """Adam on every trainable parameter but the q(v) ``natural`` trains; made as a CUDA graph needs it
    when ``graph`` (:func:`~deepgp.capture.capturable_adam`)."""
    q_natural = set() if natural is None else {id(p) for group in natural.param_groups for p in group["params"]}
    params = [p for p in model.parameters() if p.requires_grad and id(p) not in q_natural]
    return capturable_adam(params, lr) if graph else _adam(params, lr)
