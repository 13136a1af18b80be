"""The training loop: Adam on everything but the final layer's q(v), natural gradients on it.

One fused step per iteration: one minibatch, one forward pass of the bound, one backward pass
that yields both the Adam gradients and, by the chain rule, the gradient in the final layer's
expectation parameters. (The paper's code made two passes on two minibatches, NG then Adam; the
fused step costs half and is a legitimate simplification — both are stochastic ascent on the same
bound.)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from .linalg import seeded
from .natgrad import natgrad_step_q
from .objectives import check_inner_sampling
from .validation import as_xy, check_positive_int


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
    """
    if method not in ("vi", "iw"):
        raise ValueError(f"method must be 'vi' or 'iw', got {method!r}")
    check_inner_sampling(inner_sampling)  # here too: "vi" never reaches elbo_iw's check
    iterations = check_positive_int("iterations", iterations, minimum=0)
    batch_size = check_positive_int("batch_size", batch_size)
    num_samples = check_positive_int("num_samples", num_samples)
    X, Y = as_xy(X, Y, model.dtype, model.device, model.input_dim, model.output_dim, min_rows=2)
    model.num_data = X.shape[0]
    final = model.final_layer
    q_final = {id(final.q_mu), id(final.q_sqrt)} if natgrad else set()
    params = [p for p in model.parameters() if p.requires_grad and id(p) not in q_final]
    adam = _adam(params, lr)
    schedule = torch.optim.lr_scheduler.StepLR(adam, step_size=decay_every, gamma=decay)
    history: list[float] = []
    start = 0
    with seeded(seed, model.device):
        batches = _Batches(X.shape[0], batch_size)
        if checkpoint is not None and Path(checkpoint).exists():
            # on the CPU first: a checkpoint written on a GPU resumes on the CPU and vice versa
            # (load_state_dict copies onto the model's and optimiser's own devices)
            state = torch.load(checkpoint, map_location="cpu", weights_only=False)
            model.load_state_dict(state["model"])
            adam.load_state_dict(state["adam"])
            schedule.load_state_dict(state["schedule"])
            history, start = list(state["history"]), state["iteration"]
            batches.buffer = state["batches"]
            torch.set_rng_state(state["rng"])
            if "rng_cuda" in state and model.device.type == "cuda":
                torch.cuda.set_rng_state(state["rng_cuda"], model.device)

        def cuda_rng() -> dict:
            # on a GPU the Monte-Carlo draws come from the device's generator: resume it too
            return {"rng_cuda": torch.cuda.get_rng_state(model.device)} if model.device.type == "cuda" else {}

        def save():
            if checkpoint is not None:
                tmp = Path(str(checkpoint) + ".tmp")
                torch.save(
                    dict(model=model.state_dict(), adam=adam.state_dict(), schedule=schedule.state_dict(),
                         history=history, iteration=len(history), batches=batches.buffer, rng=torch.get_rng_state(),
                         **cuda_rng()),
                    tmp,
                )
                os.replace(tmp, checkpoint)  # atomic: an interrupted save never corrupts the last one

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
                natgrad_step_q(final, -final.q_mu.grad, -final.q_sqrt.grad, gamma * decay ** ((t + 1) // decay_every))
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
    return np.asarray(history)
