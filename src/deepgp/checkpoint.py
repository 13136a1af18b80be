"""A training run's checkpoint: the state that resumes it to the last bit, and the fingerprint that
says which run it belongs to.

The file (:data:`deepgp.storage.CHECKPOINT`, written atomically by :mod:`deepgp.storage`) holds the
model's and Adam's state, the learning-rate schedule, the bounds so far, the iteration, the minibatch
order still to come, the CPU generator's state (and the GPU's, for a model on one), early stopping's
state where it is on (:class:`deepgp.early_stopping.EarlyStopping`: its scores, best state and count) and the
fingerprint: a hash of the training data, the architecture and every training setting but the
budget. A checkpoint resumes only the run that wrote it, and only a state that run could have
written: anything else is a ValueError naming what differs or what is damaged, before anything is
loaded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from . import storage
from .config import ModelConfig, TrainConfig
from .early_stopping import EarlyStopping
from .model_file import check_parameters

if TYPE_CHECKING:  # (training imports this module)
    from .training import Batches

# how Adam computes, not what: a checkpoint resumes whichever implementation wrote it
IMPLEMENTATION = ("foreach", "fused", "capturable", "differentiable")
# what loading a damaged state raises, turned into one message naming the file
_DAMAGE = (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError)


@dataclasses.dataclass
class TrainingState:
    """Everything a training run changes as it goes (the random generators aside)."""

    model: torch.nn.Module
    adam: torch.optim.Optimizer
    schedule: torch.optim.lr_scheduler.StepLR
    batches: Batches  # its ``buffer`` of minibatch indices still to come
    history: list[float] = dataclasses.field(default_factory=list)
    early_stopping: EarlyStopping | None = None  # where the run stops early


def fingerprint(model, X: torch.Tensor, Y: torch.Tensor, settings: dict) -> dict:
    """What a checkpoint must match to be resumed: the data (a SHA-256 of X [N, D] and Y [N, D_y]),
    the architecture and ``settings`` (the training settings as they act)."""
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


class Checkpoint:
    """The checkpoint file ``path`` of the run whose :func:`fingerprint` is ``fingerprint``."""

    def __init__(self, path: str | os.PathLike, fingerprint: dict):
        self.path, self.fingerprint = path, fingerprint

    def exists(self) -> bool:
        return Path(self.path).exists()

    def save(self, run: TrainingState) -> None:
        """Write ``run``'s state and the generators' (atomic: an interrupted save never corrupts the last one)."""
        model = run.model
        # on a GPU the Monte-Carlo draws come from the device's generator: resume it too
        cuda = {"rng_cuda": torch.cuda.get_rng_state(model.device)} if model.device.type == "cuda" else {}
        stopping = {} if run.early_stopping is None else {"early_stopping": run.early_stopping.state_dict()}
        storage.write(self.path, storage.CHECKPOINT, dict(
            model=model.state_dict(), adam=run.adam.state_dict(), schedule=run.schedule.state_dict(),
            history=torch.tensor(run.history, dtype=torch.float64), iteration=len(run.history),
            batches=run.batches.buffer.cpu(), rng=torch.get_rng_state(), fingerprint=self.fingerprint, **cuda,
            **stopping))

    def resume(self, run: TrainingState) -> int:
        """Load the file into ``run`` and the generators after :meth:`validate`; the iteration to go on from."""
        state = storage.read(self.path, storage.CHECKPOINT)
        with storage.written_by(self.path):
            self.validate(state, run)
            try:
                _load(state, run)
            except _DAMAGE as err:
                raise self._damaged(err) from None
        return state["iteration"]

    def validate(self, state: dict, run: TrainingState) -> None:
        """A ValueError unless ``state`` (as read from the file) is this run's: its fingerprint equal to
        this one (the message names what differs) and a training state this run could have written
        (:func:`check_state`; the message says the file is damaged)."""
        check_fingerprint(storage.field(state, "fingerprint", dict, self.path), self.fingerprint, self.path)
        try:
            check_state(state, run.adam, run.schedule, run.batches.n, run.early_stopping)
        except _DAMAGE as err:
            raise self._damaged(err) from None

    def _damaged(self, err: Exception) -> ValueError:
        said = " ".join(str(err).split())[:200]
        return ValueError(f"checkpoint {self.path} is damaged ({type(err).__name__}: {said}); "
                          "delete it to train from the start")


def _load(state: dict, run: TrainingState) -> None:
    """A checked state into ``run`` and the generators. Loaded on the CPU first: a checkpoint written on a
    GPU resumes on the CPU and vice versa (load_state_dict copies onto the model's and optimiser's devices)."""
    model, adam = run.model, run.adam
    model.load_state_dict(state["model"])
    check_parameters(model)
    own = [{k: group[k] for k in IMPLEMENTATION if k in group} for group in adam.param_groups]
    adam.load_state_dict(state["adam"])
    for group, implementation in zip(adam.param_groups, own):
        group.update(implementation)  # this run's Adam, the checkpoint's numbers
    run.schedule.load_state_dict(state["schedule"])
    run.history = state["history"].tolist()
    run.batches.buffer = state["batches"].to(model.device)
    if run.early_stopping is not None:
        run.early_stopping.load_state_dict(state["early_stopping"])
    torch.set_rng_state(state["rng"])
    if "rng_cuda" in state and model.device.type == "cuda":
        torch.cuda.set_rng_state(state["rng_cuda"], model.device)


def check_state(state: dict, adam, schedule, n: int, early_stopping=None) -> None:
    """A checkpoint's training state, refused (ValueError) unless it is what this run could have
    written: the optimiser's and the schedule's settings as this run's, every Adam buffer of its
    parameter's shape and dtype, a history as long as the iteration count, minibatch indices in
    range of ``n`` points, and with ``early_stopping`` (the run's EarlyStopping) a state it could have
    saved. (A fused Adam step trusts its buffers' shapes: a wrong one would write out of bounds.)"""
    iteration = state["iteration"]
    if not isinstance(iteration, int) or isinstance(iteration, bool) or iteration < 0:
        raise ValueError(f"iteration {iteration!r}")
    history = state["history"]
    if not (isinstance(history, torch.Tensor) and history.dtype == torch.float64 and history.shape == (iteration,)
            and bool(torch.isfinite(history).all())):
        raise ValueError("its history is not one finite bound per iteration")
    batches = state["batches"]
    if not (isinstance(batches, torch.Tensor) and batches.dtype == torch.long and batches.dim() == 1
            and batches.numel() <= n and bool(((batches >= 0) & (batches < n)).all())):
        raise ValueError(f"its minibatch indices are not indices of {n} points")
    rng = state["rng"]
    if not (isinstance(rng, torch.Tensor) and rng.dtype == torch.uint8 and rng.shape == torch.get_rng_state().shape):
        raise ValueError("its random state is not a CPU generator's")
    _check_adam(state["adam"], adam, iteration)
    sched, own = state["schedule"], schedule.state_dict()
    if set(sched) != set(own) or any(sched[k] != own[k] for k in ("step_size", "gamma", "base_lrs")):
        raise ValueError("its learning-rate schedule is not this run's")
    if sched["last_epoch"] != iteration or sched["_last_lr"] != [g["lr"] for g in state["adam"]["param_groups"]]:
        raise ValueError("its learning-rate schedule does not match its iteration")
    if early_stopping is not None:
        early_stopping.check_state(state["early_stopping"], iteration)


def _check_adam(saved: dict, adam, iteration: int) -> None:
    """A saved Adam state refused unless this run's Adam could have written it after ``iteration`` steps."""
    fresh, groups = adam.state_dict(), saved["param_groups"]
    if len(groups) != len(fresh["param_groups"]):
        raise ValueError("its optimiser has other parameter groups")
    for new, old in zip(fresh["param_groups"], groups):
        ignored = ("lr", *IMPLEMENTATION)
        if {k: v for k, v in old.items() if k not in ignored} != {k: v for k, v in new.items() if k not in ignored}:
            raise ValueError("its optimiser's settings are not this run's")
        if not (isinstance(old["lr"], float) and 0 < old["lr"] <= new["initial_lr"]):
            raise ValueError(f"its learning rate {old['lr']!r}")
    params = [p for group in adam.param_groups for p in group["params"]]
    for index, buffers in saved["state"].items():
        if not (isinstance(index, int) and 0 <= index < len(params)):
            raise ValueError(f"the optimiser state of a parameter {index!r} this model does not have")
        p = params[index]
        step = buffers["step"]
        if set(buffers) != {"step", "exp_avg", "exp_avg_sq"} or not (
                isinstance(step, torch.Tensor) and step.numel() == 1 and 0 <= float(step) <= iteration):
            raise ValueError(f"the optimiser state of parameter {index}")
        for name in ("exp_avg", "exp_avg_sq"):
            t = buffers[name]
            if not (isinstance(t, torch.Tensor) and t.shape == p.shape and t.dtype == p.dtype
                    and bool(torch.isfinite(t).all())):
                raise ValueError(f"the optimiser buffer {name} of parameter {index} does not fit it")


def check_fingerprint(saved: dict, current: dict, path) -> None:
    """A ValueError naming what differs between the checkpoint's run (``saved``) and this one (``current``)."""
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
                      if "legacy" in f.metadata and f.name in current[part]}, **old}
        elif "spec" not in old:  # a model setting it lacks: its default, as a model file without it is read
            old = {**{f.name: f.metadata.get("legacy", f.default) for f in dataclasses.fields(ModelConfig)}, **old}
        new = current[part]
        diff = [f"{k}={old.get(k)!r} (now {new.get(k)!r})" for k in sorted(set(old) | set(new))
                if old.get(k) != new.get(k)]
        if diff:
            raise ValueError(f"checkpoint {path} was written for {what}: {', '.join(diff)}; {again}")
