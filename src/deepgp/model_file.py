"""A DeepGP's file: what :meth:`DeepGP.save <deepgp.DeepGP.save>` writes, and what
:meth:`~deepgp.DeepGP.load` checks before it rebuilds the model.

The saved form is a tree (:func:`to_tree`): the architecture (the ModelConfig's fields), the data's
dimensions, N and the state dict, written in :mod:`deepgp.storage`'s format (safetensors, the tree as
JSON in its header, atomic writes). Loading checks the tree field by field, refuses a config whose
architecture is not the size of the parameters the file holds before building it, and refuses parameters
that are not finite or not of a sane size (:func:`from_tree`). A :class:`~deepgp.DeepGPRegressor`
file holds this tree as its ``model`` field.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn

from . import storage
from .config import ModelConfig
from .linalg import seeded
from .validation import check_device


def save(model, path) -> None:
    """Write ``model``'s architecture (``config``) and every parameter to ``path``.

    The file is safetensors with the config as JSON (:mod:`deepgp.storage`): opening it never
    runs code. The write is atomic: if it fails, a file already at ``path`` is left as it was.
    """
    storage.write(path, storage.MODEL, to_tree(model))


def load(cls, path, device=None, trust: bool = False):
    """The ``cls`` (a DeepGP class) saved in ``path`` by :func:`save` (:func:`from_tree`); a file that is
    not one is a ValueError naming it (``trust``: :func:`deepgp.storage.read`'s)."""
    device = check_device(device)
    tree = storage.read(path, storage.MODEL, trust=trust)
    with storage.written_by(path):
        return from_tree(cls, tree, path, device)


def to_tree(model) -> dict:
    """The saved form: {"config": the ModelConfig's fields, "input_dim": D, "output_dim": D_y,
    "num_data": N, "state": the state dict}."""
    if not isinstance(getattr(model, "config", None), ModelConfig):
        raise ValueError("only models built by DeepGP.from_spec or from_config can be saved with save(); save "
                         "the parameters with safetensors.torch.save_file(model.state_dict(), path) instead")
    return {"config": dataclasses.asdict(model.config), "input_dim": model.input_dim, "output_dim": model.output_dim,
            "num_data": model.num_data, "state": model.state_dict()}


def from_tree(cls, tree: dict, path="the file", device=None):
    """The model saved as :func:`to_tree`, checked field by field (``path`` names it in errors), built
    by ``cls.build``."""
    field = storage.field
    settings = dict(field(tree, "config", dict, path))
    unknown = sorted(set(tree) - {"config", "input_dim", "output_dim", "num_data", "state"})
    unknown += sorted(set(settings) - {f.name for f in dataclasses.fields(ModelConfig)})
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {unknown} (written by a newer deepgp?)")
    _check_integers({k: v for k, v in tree.items() if k != "state"}, path)
    for f in dataclasses.fields(ModelConfig):  # a file from before a setting existed: built with its legacy value
        if f.name not in settings and "legacy" in f.metadata:
            settings[f.name] = f.metadata["legacy"]
    try:
        config = ModelConfig(**settings)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path} is damaged: {err}") from None
    dims = [field(tree, k, int, path) for k in ("input_dim", "output_dim", "num_data")]
    state = field(tree, "state", dict, path)
    if not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path} is damaged: its state holds values that are not tensors")
    _check_sizes(cls, config, dims, state, path)
    try:
        with seeded(0):  # (the placeholder weights' draws leave the caller's random state alone)
            model = cls.build(config, *dims)
        wrong = _wrong_dtype(model, state)
        if wrong is None:
            model.load_state_dict(state)
    except (ValueError, TypeError, RuntimeError) as err:
        raise ValueError(f"{path} is damaged: its parameters do not fit its architecture "
                         f"({' '.join(str(err).split())[:300]})") from None
    if wrong is not None:
        raise ValueError(f"{path} is damaged: {wrong}")
    try:
        check_parameters(model)
    except ValueError as err:
        raise ValueError(f"{path} is damaged: {err}") from None
    return model.to(device) if device is not None else model


MAX_SIZE = 2**40  # no dimension, count or width of a model a computer holds is larger (8 TiB of float64s)


def _check_integers(tree, path, where: str = "") -> None:
    """Refuse an integer of the tree (a dimension, N, a setting) beyond :data:`MAX_SIZE`, before any is
    given to torch, which fails on one beyond int64 with a TypeError rather than a size."""
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, (list, tuple)) else ()
    for key, value in items:
        name = f"{where}/{key}" if where else str(key)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SIZE:
            raise ValueError(f"{path} is damaged: {name}={value} is beyond any model's size (at most {MAX_SIZE})")
        _check_integers(value, path, name)


def _check_sizes(cls, config: ModelConfig, dims: list[int], state: dict, path) -> None:
    """Refuse a file whose architecture is not the size of the parameters it holds, before anything is
    built: the count of ``cls.shapes`` (every parameter and buffer ``cls.build`` makes, from the config
    alone: :func:`deepgp.architectures.shapes`) against the state's, so a small damaged file cannot ask
    for a huge allocation."""
    input_dim, output_dim, num_data = dims
    if not (input_dim >= 1 and output_dim >= 1):
        raise ValueError(f"{path} is damaged: input_dim={input_dim}, output_dim={output_dim}")
    if num_data < 1:
        raise ValueError(f"{path} is damaged: num_data={num_data}")
    try:
        need = sum(math.prod(shape) for shape in cls.shapes(config, input_dim, output_dim, num_data).values())
    except (RuntimeError, TypeError, OverflowError):  # (more elements than a tensor can count)
        need = math.inf
    size = sum(t.numel() for t in state.values())
    if need != size:
        raise ValueError(f"{path} is damaged: its config describes {need} parameters but it holds {size}")


def _wrong_dtype(model: nn.Module, state: dict) -> str | None:
    """What is wrong where a stored tensor's dtype is not the one the architecture gives it (a bool or
    float16 where the model holds float64, which loading would cast silently, to other values); None if
    nothing is."""
    built = model.state_dict()
    for name, tensor in state.items():
        if name in built and tensor.dtype != built[name].dtype:
            return f"{name} is stored as {tensor.dtype}, where the model holds {built[name].dtype}"
    return None


def check_parameters(model: nn.Module) -> None:
    """A ValueError unless every parameter and buffer is finite and of a sane size (|value| < 1e30: 1e300
    is finite, but no trained model's), checked as loaded, i.e. after the cast to the model's dtype."""
    if not all(bool((t.abs() < 1e30).all()) for t in model.state_dict().values() if t.is_floating_point()):
        raise ValueError("it holds NaN, infinite or absurdly large parameters")
