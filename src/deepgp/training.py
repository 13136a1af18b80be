"""The training loop: Adam on everything but the final layer's q(v), natural gradients on it.

One fused step per iteration: one minibatch, one forward pass of the bound, one backward pass
that yields both the Adam gradients and, by the chain rule, the gradient in the final layer's
expectation parameters. (The paper's code made two passes on two minibatches, NG then Adam; the
fused step costs half and is a legitimate simplification — both are stochastic ascent on the same
bound.)
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from . import storage
from .linalg import seeded
from .natgrad import NaturalGradientError, natgrad_step_q
from .objectives import check_inner_sampling
from .validation import as_xy, check_magnitude, check_positive_float, check_positive_int

# this many natural-gradient steps skipped in a row (no step size down to γ/64 kept q(v) valid) stop
# the run: the final layer has stopped learning, and a longer run would only hide it
MAX_SKIPPED_IN_A_ROW = 100


class _Batches:
    """Minibatch indices from successive random permutations (batches straddle epochs)."""

    def __init__(self, n: int, batch_size: int):
        self.n, self.batch_size = n, min(batch_size, n)
        self.buffer = torch.empty(0, dtype=torch.long)

    def next(self) -> torch.Tensor:
        while self.buffer.numel() < self.batch_size:
            self.buffer = torch.cat([self.buffer, torch.randperm(self.n)])
        idx, self.buffer = self.buffer[: self.batch_size], self.buffer[self.batch_size :]
        return idx


# glibc gives the top of its heap back to the OS whenever more than its trim threshold is free
# there, and each page of it used again page-faults on first touch. An IW step frees its whole
# graph at its end: 600-1,500 faults per LV-GP-GP-GP step, 2-7 ms of kernel time per ~170 ms
# step on the 2-core VM of benchmarks/README.md. glibc raises the trim threshold itself (to
# twice the block, at most 2 × 32 MiB) when it frees a large mmapped block; allocating and
# freeing one such block before the loop gets there at once: ~20 faults per step after it.
# No setting is changed (under any other allocator this is a plain allocation), and the block
# is never touched, so it costs nothing.
_GLIBC_MMAP_THRESHOLD_MAX = 32 << 20


def _settle_heap(device: torch.device) -> None:
    if device.type == "cpu":
        torch.empty(_GLIBC_MMAP_THRESHOLD_MAX - (1 << 20), dtype=torch.uint8)  # allocated and freed at once


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
    method: str = "vi",
    num_samples: int = 1,
    iterations: int = 5000,
    batch_size: int = 512,
    seed: int = 0,
    lr: float = 0.005,
    gamma: float = 0.01,
    decay: float = 0.98,
    decay_every: int = 1000,
    natgrad: bool = True,
    inner_sampling: str = "joint",
    progress: bool = True,
    callback=None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 1000,
) -> np.ndarray:
    """Maximise ``model.elbo`` on (X, Y); returns the bound at every iteration (numpy [T]).

    Args:
        method, num_samples, inner_sampling: as in :meth:`DeepGP.elbo` (K = num_samples).
        batch_size: B (the full data when N < B).
        lr, gamma: Adam learning rate and natural-gradient step; both multiplied by ``decay``
            every ``decay_every`` iterations (staircase, as the paper's code).
        natgrad: False trains the final q(v) by Adam too.
        callback: called as ``callback(iteration, bound)`` after every step; return True to stop.
        checkpoint: a file to save the full training state to every ``checkpoint_every``
            iterations and at the end; if it exists, training resumes from it.
    Reproducible under ``seed``; the caller's global torch RNG state is left untouched.

    A checkpoint records a fingerprint of the training data and of every setting above but
    ``iterations`` (which may grow between runs); resuming with other data or settings is a
    ValueError naming what differs. Natural-gradient steps that had to be skipped are reported: a
    warning with their count, or a :class:`~deepgp.natgrad.NaturalGradientError` after
    ``MAX_SKIPPED_IN_A_ROW`` in a row (the step ``gamma`` is too large).
    """
    if method not in ("vi", "iw"):
        raise ValueError(f"method must be 'vi' or 'iw', got {method!r}")
    check_inner_sampling(inner_sampling)  # here too: "vi" never reaches elbo_iw's check
    iterations = check_positive_int("iterations", iterations, minimum=0)
    batch_size = check_positive_int("batch_size", batch_size)
    num_samples = check_positive_int("num_samples", num_samples)
    seed = None if seed is None else check_positive_int("seed", seed, minimum=0)
    lr = check_positive_float("lr", lr)
    gamma = check_positive_float("gamma", gamma)
    if gamma > 1:
        raise ValueError(f"gamma must be in (0, 1] (1 is the full natural-gradient step), got {gamma!r}")
    decay = check_positive_float("decay", decay)
    if decay > 1:
        raise ValueError(f"decay must be in (0, 1] (the factor applied every decay_every iterations), got {decay!r}")
    decay_every = check_positive_int("decay_every", decay_every)
    checkpoint_every = check_positive_int("checkpoint_every", checkpoint_every)
    if checkpoint is not None:
        storage.check_writable(checkpoint, "the checkpoint")  # now, not after the first thousand iterations
    X, Y = as_xy(X, Y, model.dtype, model.device, model.input_dim, model.output_dim, min_rows=2)
    check_magnitude(X, Y, model.dtype)
    fingerprint = None if checkpoint is None else _fingerprint(model, X, Y, dict(
        method=method, num_samples=num_samples, batch_size=min(batch_size, X.shape[0]), seed=seed, lr=lr,
        gamma=gamma, decay=decay, decay_every=decay_every, natgrad=bool(natgrad),
        inner_sampling=inner_sampling if method == "iw" else "-"))
    model.num_data = X.shape[0]
    final = model.final_layer
    q_final = {id(final.q_mu), id(final.q_sqrt)} if natgrad else set()
    params = [p for p in model.parameters() if p.requires_grad and id(p) not in q_final]
    adam = _adam(params, lr)
    schedule = torch.optim.lr_scheduler.StepLR(adam, step_size=decay_every, gamma=decay)
    history: list[float] = []
    start = skipped = in_a_row = 0
    with seeded(seed, model.device):
        batches = _Batches(X.shape[0], batch_size)
        if checkpoint is not None and Path(checkpoint).exists():
            state = storage.read(checkpoint, storage.CHECKPOINT)
            _check_fingerprint(storage.field(state, "fingerprint", dict, checkpoint), fingerprint, checkpoint)
            try:
                # on the CPU first: a checkpoint written on a GPU resumes on the CPU and vice versa
                # (load_state_dict copies onto the model's and optimiser's own devices)
                model.load_state_dict(state["model"])
                adam.load_state_dict(state["adam"])
                schedule.load_state_dict(state["schedule"])
                history, start = state["history"].tolist(), int(state["iteration"])
                batches.buffer = state["batches"].long()
                torch.set_rng_state(state["rng"])
                if "rng_cuda" in state and model.device.type == "cuda":
                    torch.cuda.set_rng_state(state["rng_cuda"], model.device)
            except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as err:
                raise ValueError(f"checkpoint {checkpoint} is damaged ({type(err).__name__}: {err}); "
                                 "delete it to train from the start") from None

        def cuda_rng() -> dict:
            # on a GPU the Monte-Carlo draws come from the device's generator: resume it too
            return {"rng_cuda": torch.cuda.get_rng_state(model.device)} if model.device.type == "cuda" else {}

        def save():
            if checkpoint is not None:  # atomic: an interrupted save never corrupts the last one
                storage.write(checkpoint, storage.CHECKPOINT, dict(
                    model=model.state_dict(), adam=adam.state_dict(), schedule=schedule.state_dict(),
                    history=torch.tensor(history, dtype=torch.float64), iteration=len(history),
                    batches=batches.buffer, rng=torch.get_rng_state(), fingerprint=fingerprint, **cuda_rng()))

        _settle_heap(model.device)
        bar = tqdm(total=iterations, initial=start, disable=not progress, desc=f"{model.spec} {method}", leave=False)
        model.train()
        for t in range(start, iterations):
            idx = batches.next()
            xb, yb = X[idx], Y[idx]
            adam.zero_grad(set_to_none=True)
            final.q_mu.grad = final.q_sqrt.grad = None  # outside Adam when natgrad: cleared here
            bound = model.elbo(xb, yb, method, num_samples, inner_sampling)
            (-bound).backward()
            value = bound.item()
            if not np.isfinite(value):
                raise FloatingPointError(
                    f"the bound became {value} at iteration {t}; try a smaller learning rate (lr={lr}) or gamma ({gamma})"
                )
            adam.step()
            schedule.step()
            if natgrad:
                # from ∂F/∂(m, R) = −∂loss/∂(m, R); γ decays on the same staircase as the learning rate
                step = gamma * decay ** ((t + 1) // decay_every)
                if natgrad_step_q(final, -final.q_mu.grad, -final.q_sqrt.grad, step) == 0.0:
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
    model.eval()
    if skipped:
        warnings.warn(f"the natural-gradient step of {final.name} was skipped on {skipped} of {len(history) - start} "
                      f"iterations (gamma={gamma}: the new q(v) was not positive definite even at gamma/64); "
                      "a smaller gamma avoids that", RuntimeWarning, stacklevel=2)
    return np.asarray(history)


def _fingerprint(model, X: torch.Tensor, Y: torch.Tensor, settings: dict) -> dict:
    """What a checkpoint must match to be resumed: the data (a hash), the architecture and the settings."""
    digest = hashlib.sha256()
    for A in (X, Y):
        a = (A.detach() + 0.0).cpu().numpy()  # + 0.0: −0.0 and 0.0 are the same data
        digest.update(repr((a.shape, str(a.dtype))).encode())
        digest.update(np.ascontiguousarray(a).tobytes())
    architecture = getattr(model, "config", None) or {
        "spec": model.spec, "shapes": {k: list(v.shape) for k, v in model.state_dict().items()}}
    return {"data": digest.hexdigest(), "num_data": int(X.shape[0]), "model": architecture, "settings": settings}


def _check_fingerprint(saved: dict, current: dict, path) -> None:
    """A ValueError naming what differs between the checkpoint's run and this one."""
    again = "use the same data and settings, another checkpoint file, or delete it to train from the start"
    if saved.get("num_data") != current["num_data"] or saved.get("data") != current["data"]:
        size = (f"{saved.get('num_data')} points, not {current['num_data']}" if saved.get("num_data") != current["num_data"]
                else "the same number of points but other values")
        raise ValueError(f"checkpoint {path} was written for other training data ({size}); {again}")
    for part, what in (("model", "another model"), ("settings", "other settings")):
        old = saved.get(part) if isinstance(saved.get(part), dict) else {}
        new = current[part]
        diff = [f"{k}={old.get(k)!r} (now {new.get(k)!r})" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
        if diff:
            raise ValueError(f"checkpoint {path} was written for {what}: {', '.join(diff)}; {again}")
