"""The training loop: Adam on everything but the final layer's q(v), natural gradients on it.

One fused step per iteration: one minibatch, one forward pass of the bound, one backward pass
that yields both the Adam gradients and, by the chain rule, the gradient in the final layer's
expectation parameters. (The paper's code made two passes on two minibatches, NG then Adam; the
fused step costs half and is a legitimate simplification — both are stochastic ascent on the same
bound.)
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from . import objectives, storage
from .capture import CapturedStep, capturable_adam
from .config import ModelConfig, TrainConfig, gamma_at
from .linalg import seeded
from .model import check_parameters
from .natgrad import NaturalGradientError, natgrad_step_q
from .runtime import opted_out, settle_heap, training_numerics
from .validation import as_xy, check_magnitude, check_positive_int

log = logging.getLogger(__name__)

# this many natural-gradient steps skipped in a row (no step size down to γ/64 kept q(v) valid) stop
# the run: the final layer has stopped learning, and a longer run would only hide it
MAX_SKIPPED_IN_A_ROW = 100


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


# how Adam computes, not what: a checkpoint resumes whichever implementation wrote it
_IMPLEMENTATION = ("foreach", "fused", "capturable", "differentiable")


def _adam(params, lr: float) -> torch.optim.Adam:
    """Adam, fused into one kernel per step where this torch supports it (CPU: torch ≥ 2.4):
    measured 0.7 vs 2.6 ms per step for the 18 tensors of LV-GP-GP-GP, same update."""
    try:
        return torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(params, lr=lr)


def fit(
    model,
    X,
    Y,
    method: str | None = None,
    num_samples: int | None = None,
    *,
    config: TrainConfig | None = None,
    progress: bool = True,
    callback=None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 1000,
    capture: bool | None = None,
    **settings,
) -> np.ndarray:
    """Maximise ``model.elbo`` on (X, Y); returns the bound at every iteration (numpy [T]).

    The training settings are :class:`~deepgp.config.TrainConfig`'s: ``config``, with any of its
    fields given as keywords (``iterations=``, ``lr=``, ``seed=`` ...) taking precedence; ``method``
    and ``num_samples`` (K) may also come first, positionally. The optimiser's settings left
    unset come from ``recipe`` ("fast", the default, or "paper": :data:`deepgp.config.RECIPE_VALUES`).
    Each iteration is one fused step: Adam on everything but the q(v) trained by natural gradients
    (the final layer's with ``natgrad``, the inner layers' too with ``natgrad_inner``), their
    natural-gradient step γ_t (:func:`deepgp.config.gamma_at`: an optional warm-up, then the
    learning rate's staircase decay).

    Args:
        callback: called as ``callback(iteration, bound)`` after every step; return True to stop.
        checkpoint: a file to save the full training state to every ``checkpoint_every``
            iterations and at the end; if it exists, training resumes from it.
        capture: replay each iteration from a CUDA graph (:mod:`deepgp.capture`). None (the
            default): on a GPU, unless the environment sets ``DEEPGP_CAPTURE=0``. On the CPU,
            True runs the same step on fixed buffers without a graph (never faster: for tests).
    Reproducible under ``seed``; the caller's global torch RNG state is left untouched.

    A checkpoint records a fingerprint of the training data and of every setting but
    ``iterations`` (which may grow between runs); resuming with other data or settings is a
    ValueError naming what differs. Natural-gradient steps that had to be skipped are reported: a
    warning with their count, or a :class:`~deepgp.natgrad.NaturalGradientError` after
    ``MAX_SKIPPED_IN_A_ROW`` in a row (the step ``gamma`` is too large).
    """
    settings.update({k: v for k, v in (("method", method), ("num_samples", num_samples)) if v is not None})
    cfg = train_config(config, settings).resolved()
    method, num_samples, inner_sampling, iterations, batch_size, seed = (
        cfg.method, cfg.num_samples, cfg.inner_sampling, cfg.iterations, cfg.batch_size, cfg.seed)
    lr, gamma, decay, decay_every, natgrad = (
        float(cfg.lr), float(cfg.gamma), float(cfg.decay), cfg.decay_every, cfg.natgrad)
    cfg = dataclasses.replace(cfg, lr=lr, gamma=gamma, decay=decay)
    checkpoint_every = check_positive_int("checkpoint_every", checkpoint_every)
    if checkpoint is not None:
        storage.check_writable(checkpoint, "the checkpoint")  # now, not after the first thousand iterations
    X, Y = as_xy(X, Y, model.dtype, model.device, model.input_dim, model.output_dim, min_rows=2)
    check_magnitude(X, Y, model.dtype)
    # every setting but the budget, as it acts: a batch of at least N is N, vi has no inner sampling
    effective = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "iterations"}
    effective.update(batch_size=min(batch_size, X.shape[0]), inner_sampling=inner_sampling if method == "iw" else "-")
    fingerprint = None if checkpoint is None else _fingerprint(model, X, Y, effective)
    model.num_data = X.shape[0]
    if cfg.dreg and method == "iw" and model.has_latent:
        objectives.check_dreg(inner_sampling)  # now, not at the first step
    objective = (partial(objectives.elbo_iw, num_samples=num_samples, inner_sampling=inner_sampling, dreg=cfg.dreg)
                 if method == "iw" else partial(objectives.elbo_vi, num_samples=num_samples))
    # deepgp.runtime: the marginal conditionals' R_lᵀA in float32 (float64 models); DEEPGP_FLOAT32_PRODUCTS=0 opts out
    numerics = training_numerics()
    final = model.final_layer
    # the GP layers whose q(v) takes natural-gradient steps instead of Adam's (the final one first)
    natural = ([final] + ([m for m in model.layers[:-1] if hasattr(m, "q_mu")] if cfg.natgrad_inner else [])
               if natgrad else [])
    q_natural = {id(p) for layer in natural for p in (layer.q_mu, layer.q_sqrt)}
    params = [p for p in model.parameters() if p.requires_grad and id(p) not in q_natural]
    if capture not in (None, True, False):
        raise ValueError(f"capture must be True, False or None (on a GPU), got {capture!r}")
    if capture is None:
        capture = model.device.type == "cuda" and not opted_out("DEEPGP_CAPTURE")
    graph = bool(capture) and model.device.type == "cuda"
    adam = capturable_adam(params, lr) if graph else _adam(params, lr)
    schedule = torch.optim.lr_scheduler.StepLR(adam, step_size=decay_every, gamma=decay)
    history: list[float] = []
    start = skipped = in_a_row = redone = 0
    with seeded(seed, model.device):
        batches = Batches(X.shape[0], batch_size, model.device)
        if checkpoint is not None and Path(checkpoint).exists():
            state = storage.read(checkpoint, storage.CHECKPOINT)
            with storage.written_by(checkpoint):
                _check_fingerprint(storage.field(state, "fingerprint", dict, checkpoint), fingerprint, checkpoint)
                try:
                    _check_state(state, adam, schedule, X.shape[0])
                    # on the CPU first: a checkpoint written on a GPU resumes on the CPU and vice versa
                    # (load_state_dict copies onto the model's and optimiser's own devices)
                    model.load_state_dict(state["model"])
                    check_parameters(model)
                    own = [{k: group[k] for k in _IMPLEMENTATION if k in group} for group in adam.param_groups]
                    adam.load_state_dict(state["adam"])
                    for group, implementation in zip(adam.param_groups, own):
                        group.update(implementation)  # this run's Adam, the checkpoint's numbers
                    schedule.load_state_dict(state["schedule"])
                    history, start = state["history"].tolist(), state["iteration"]
                    batches.buffer = state["batches"].to(model.device)
                    torch.set_rng_state(state["rng"])
                    if "rng_cuda" in state and model.device.type == "cuda":
                        torch.cuda.set_rng_state(state["rng_cuda"], model.device)
                except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as err:
                    said = " ".join(str(err).split())[:200]
                    raise ValueError(f"checkpoint {checkpoint} is damaged ({type(err).__name__}: {said}); "
                                     "delete it to train from the start") from None

        def cuda_rng() -> dict:
            # on a GPU the Monte-Carlo draws come from the device's generator: resume it too
            return {"rng_cuda": torch.cuda.get_rng_state(model.device)} if model.device.type == "cuda" else {}

        def save():
            if checkpoint is not None:  # atomic: an interrupted save never corrupts the last one
                storage.write(checkpoint, storage.CHECKPOINT, dict(
                    model=model.state_dict(), adam=adam.state_dict(), schedule=schedule.state_dict(),
                    history=torch.tensor(history, dtype=torch.float64), iteration=len(history),
                    batches=batches.buffer.cpu(), rng=torch.get_rng_state(), fingerprint=fingerprint, **cuda_rng()))

        def diverged(t: int, value: float):
            raise FloatingPointError(f"the bound became {value} at iteration {t}; "
                                     f"try a smaller learning rate (lr={lr}) or gamma ({gamma})")

        def eager_step(t: int, idx: torch.Tensor, step: float) -> tuple[float, float | None]:
            """One iteration, deciding on the host: the bound's value and the final layer's
            natural-gradient step taken (None without natgrad, 0.0 if none could be)."""
            xb, yb = X[idx], Y[idx]
            adam.zero_grad(set_to_none=True)
            for layer in natural:  # outside Adam: cleared here
                layer.q_mu.grad = layer.q_sqrt.grad = None
            bound = objective(model, xb, yb, numerics=numerics)  # (the batch is checked data: not checked again)
            (-bound).backward()
            value = bound.item()
            if not np.isfinite(value):
                diverged(t, value)
            adam.step()
            # from ∂F/∂(m, R) = −∂loss/∂(m, R); an inner layer's skipped step is not counted
            taken = [natgrad_step_q(layer, -layer.q_mu.grad, -layer.q_sqrt.grad, step) for layer in natural]
            return value, taken[0] if natural else None

        def captured_step(t: int, idx: torch.Tensor, step: float) -> tuple[float, float | None]:
            """The same iteration replayed (deepgp.capture), its flags read after it."""
            nonlocal redone
            value, cholesky_failed, natgrad_failed = captured.run(idx, adam.param_groups[0]["lr"], step)
            if cholesky_failed:  # a factor needed more jitter: undo, and redo where retries happen
                captured.restore()
                redone += 1
                return eager_step(t, idx, step)
            if not np.isfinite(value):
                captured.restore()  # as eagerly: the model as it was before the diverging step
                diverged(t, value)
            taken = [step] * len(natural)
            for i, (layer, (g_m, g_R)) in enumerate(zip(natural, captured.grads)):
                if natgrad_failed[i]:  # not positive definite at γ: halve from γ/2, as eagerly
                    taken[i] = natgrad_step_q(layer, -g_m, -g_R, 0.5 * step, max_halvings=5)
            return value, taken[0] if natural else None

        settle_heap(model.device)  # deepgp.runtime: fewer page faults per step; DEEPGP_SETTLE_HEAP=0 opts out
        bar = tqdm(total=iterations, initial=start, disable=not progress, desc=f"{model.spec} {method}", leave=False)
        model.train()
        captured = None
        for t in range(start, iterations):
            idx = batches.next()
            # γ decays on the same staircase as the learning rate
            step = gamma_at(cfg, t)
            if capture and captured is None and adam.state:  # Adam's buffers exist once it has stepped
                captured = CapturedStep(model, X, Y, objective, adam, natural, batches.batch_size, graph, numerics)
            value, taken = (captured_step if captured is not None else eager_step)(t, idx, step)
            schedule.step()
            if taken == 0.0:
                skipped, in_a_row = skipped + 1, in_a_row + 1
                if in_a_row >= MAX_SKIPPED_IN_A_ROW:
                    raise NaturalGradientError(
                        f"the natural-gradient step of {final.name} failed on {in_a_row} iterations in a row "
                        f"(up to iteration {t}; gamma={gamma}): q(v) no longer moves. Try a smaller gamma")
            else:
                in_a_row = 0
            history.append(value)
            bar.update(1)
            if t % 25 == 0:
                bar.set_postfix(bound=f"{value / model.num_data:.4f}/pt")
            if checkpoint is not None and (t + 1) % checkpoint_every == 0:
                save()
            if callback is not None and callback(t, value):
                break
        bar.close()
        save()
        if redone:
            log.info("%d of %d captured steps were redone eagerly (a Cholesky factor needed more jitter)",
                     redone, len(history) - start)
    model.eval()
    if skipped:
        warnings.warn(f"the natural-gradient step of {final.name} was skipped on {skipped} of {len(history) - start} "
                      f"iterations (gamma={gamma}: the new q(v) was not positive definite even at gamma/64); "
                      "a smaller gamma avoids that", RuntimeWarning, stacklevel=2)
    return np.asarray(history)


def train_config(config: TrainConfig | None, settings: dict) -> TrainConfig:
    """``config`` (default: TrainConfig()) with ``settings`` replacing its fields; an unknown name is a
    ValueError naming it (and every value is checked by TrainConfig)."""
    if config is not None and not isinstance(config, TrainConfig):
        raise ValueError(f"config must be a TrainConfig, got {type(config).__name__}")
    unknown = sorted(set(settings) - {f.name for f in dataclasses.fields(TrainConfig)})
    if unknown:
        raise ValueError(f"unknown training setting(s) {unknown}; the settings are TrainConfig's fields")
    return dataclasses.replace(config or TrainConfig(), **settings)


def _check_state(state: dict, adam, schedule, n: int) -> None:
    """A checkpoint's training state, refused (ValueError) unless it is what this run could have
    written: the optimiser's and the schedule's settings as this run's, every Adam buffer of its
    parameter's shape and dtype, a history as long as the iteration count, minibatch indices in
    range. (A fused Adam step trusts its buffers' shapes: a wrong one would write out of bounds.)"""
    def fail(what):
        raise ValueError(what)

    iteration = state["iteration"]
    if not isinstance(iteration, int) or isinstance(iteration, bool) or iteration < 0:
        fail(f"iteration {iteration!r}")
    history = state["history"]
    if not (isinstance(history, torch.Tensor) and history.dtype == torch.float64 and history.shape == (iteration,)
            and bool(torch.isfinite(history).all())):
        fail("its history is not one finite bound per iteration")
    batches = state["batches"]
    if not (isinstance(batches, torch.Tensor) and batches.dtype == torch.long and batches.dim() == 1
            and batches.numel() <= n and bool(((batches >= 0) & (batches < n)).all())):
        fail(f"its minibatch indices are not indices of {n} points")
    rng = state["rng"]
    if not (isinstance(rng, torch.Tensor) and rng.dtype == torch.uint8 and rng.shape == torch.get_rng_state().shape):
        fail("its random state is not a CPU generator's")
    fresh, saved = adam.state_dict(), state["adam"]
    groups = saved["param_groups"]
    if len(groups) != len(fresh["param_groups"]):
        fail("its optimiser has other parameter groups")
    for new, old in zip(fresh["param_groups"], groups):
        ignored = ("lr", *_IMPLEMENTATION)
        if {k: v for k, v in old.items() if k not in ignored} != {k: v for k, v in new.items() if k not in ignored}:
            fail("its optimiser's settings are not this run's")
        if not (isinstance(old["lr"], float) and 0 < old["lr"] <= new["initial_lr"]):
            fail(f"its learning rate {old['lr']!r}")
    params = [p for group in adam.param_groups for p in group["params"]]
    for index, buffers in saved["state"].items():
        if not (isinstance(index, int) and 0 <= index < len(params)):
            fail(f"the optimiser state of a parameter {index!r} this model does not have")
        p = params[index]
        step = buffers["step"]
        if set(buffers) != {"step", "exp_avg", "exp_avg_sq"} or not (
                isinstance(step, torch.Tensor) and step.numel() == 1 and 0 <= float(step) <= iteration):
            fail(f"the optimiser state of parameter {index}")
        for name in ("exp_avg", "exp_avg_sq"):
            t = buffers[name]
            if not (isinstance(t, torch.Tensor) and t.shape == p.shape and t.dtype == p.dtype
                    and bool(torch.isfinite(t).all())):
                fail(f"the optimiser buffer {name} of parameter {index} does not fit it")
    sched, own = state["schedule"], schedule.state_dict()
    if set(sched) != set(own) or any(sched[k] != own[k] for k in ("step_size", "gamma", "base_lrs")):
        fail("its learning-rate schedule is not this run's")
    if sched["last_epoch"] != iteration or sched["_last_lr"] != [g["lr"] for g in groups]:
        fail("its learning-rate schedule does not match its iteration")


def _fingerprint(model, X: torch.Tensor, Y: torch.Tensor, settings: dict) -> dict:
    """What a checkpoint must match to be resumed: the data (a hash), the architecture and the settings."""
    digest = hashlib.sha256()
    for A in (X, Y):
        a = (A.detach() + 0.0).cpu().numpy()  # + 0.0: −0.0 and 0.0 are the same data
        digest.update(repr((a.shape, str(a.dtype))).encode())
        digest.update(np.ascontiguousarray(a).tobytes())
    config = getattr(model, "config", None)
    architecture = (dict(dataclasses.asdict(config), input_dim=model.input_dim, output_dim=model.output_dim)
                    if config is not None else
                    {"spec": model.spec, "shapes": {k: list(v.shape) for k, v in model.state_dict().items()}})
    return {"data": digest.hexdigest(), "num_data": int(X.shape[0]), "model": architecture, "settings": settings}


def _check_fingerprint(saved: dict, current: dict, path) -> None:
    """A ValueError naming what differs between the checkpoint's run and this one."""
    again = "use the same data and settings, another checkpoint file, or delete it to train from the start"
    if saved.get("num_data") != current["num_data"] or saved.get("data") != current["data"]:
        size = (f"{saved.get('num_data')} points, not {current['num_data']}"
                if saved.get("num_data") != current["num_data"]
                else "the same number of points but other values")
        raise ValueError(f"checkpoint {path} was written for other training data ({size}); {again}")
    for part, what in (("model", "another model"), ("settings", "other settings")):
        old = saved.get(part) if isinstance(saved.get(part), dict) else {}
        if part == "settings":  # a checkpoint from before a setting existed was written with its legacy value
            old = {**{f.name: f.metadata["legacy"] for f in dataclasses.fields(TrainConfig)
                      if "legacy" in f.metadata}, **old}
        elif "spec" not in old:  # a model setting it lacks: its default, as a model file without it is read
            old = {**{f.name: f.metadata.get("legacy", f.default) for f in dataclasses.fields(ModelConfig)}, **old}
        new = current[part]
        diff = [f"{k}={old.get(k)!r} (now {new.get(k)!r})" for k in sorted(set(old) | set(new))
                if old.get(k) != new.get(k)]
        if diff:
            raise ValueError(f"checkpoint {path} was written for {what}: {', '.join(diff)}; {again}")
