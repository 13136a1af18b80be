"""deepgp 0.1's model files: pickles (``torch.save``), which can run code when opened. They are recognised
by their first bytes and refused (:func:`legacy_message`), except behind an explicit ``trust=True`` or
``deepgp convert --trust``, where :func:`read_legacy` unpickles one and lays it out as the current format."""

from __future__ import annotations

import importlib.util
import io
import pickle
import types

import numpy as np
import torch

from .kinds import CHECKPOINT, MODEL, REGRESSOR

_ZIP = b"PK\x03\x04"  # torch.save's zip container


def legacy_message(path, kind: str) -> str:
    head = f"{path} is in deepgp 0.1's pickle format, which can run code when opened, so it is not read."
    if kind == CHECKPOINT:
        return f"{head} Delete it to train from the start"
    return (f"{head} If you trust where it came from, convert it once with `deepgp convert {path} NEW --trust` "
            f"(or `load({str(path)!r}, trust=True)` then `save`)")


def is_legacy(path) -> bool:
    """Whether the file at ``path`` starts like torch.save's output (:func:`starts_like_torch_save`)."""
    with open(path, "rb") as f:
        return starts_like_torch_save(f.read(9))


def starts_like_torch_save(head: bytes) -> bool:
    """Whether a file's first 9 bytes are torch.save's zip container or a bare pickle (protocol 2-5:
    0x80 and the protocol). A safetensors file's first 8 bytes are its header's length and the 9th
    is the header's ``{``, so a length whose low byte is 0x80 is not mistaken for a pickle."""
    bare_pickle = head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05") and head[8:9] != b"{"
    return head.startswith(_ZIP) or bare_pickle


class _NumpyCompatibleUnpickler(pickle.Unpickler):
    """Unpickles numpy arrays pickled under numpy 2 (module ``numpy._core``) with numpy 1 (``numpy.core``)."""

    def find_class(self, module, name):
        if module.startswith("numpy._core") and importlib.util.find_spec("numpy._core") is None:
            module = "numpy.core" + module.removeprefix("numpy._core")
        return super().find_class(module, name)


_numpy_compatible_pickle = types.SimpleNamespace(
    __name__="pickle", Unpickler=_NumpyCompatibleUnpickler,
    load=lambda f, **kw: _NumpyCompatibleUnpickler(f, **kw).load())


def read_legacy(path) -> tuple[str, dict]:
    """(kind, tree) of a deepgp 0.1 file, the tree laid out as :func:`deepgp.storage.read` gives the current format.

    **This unpickles the file, which runs any code it contains**: only for a file whose origin is
    trusted, behind an explicit ``trust=True`` or ``deepgp convert --trust``.
    """
    def unpickle(source):
        try:
            return torch.load(source, map_location="cpu", weights_only=False, pickle_module=_numpy_compatible_pickle)
        except Exception as err:  # a damaged pickle raises a variety of errors
            raise ValueError(f"{path} could not be read as a deepgp 0.1 file ({type(err).__name__}: {err})") from None

    def model_tree(blob) -> dict:
        config = {"dtype": "float64", **blob["config"]}  # (files older than float32 mode lack it)
        config["model"] = config.pop("spec")
        dims = {k: config.pop(k) for k in ("input_dim", "output_dim")}
        return {"config": config, **dims, "num_data": blob["num_data"], "state": blob["state"]}

    blob = unpickle(path)
    found = blob.get("format") if isinstance(blob, dict) else None
    if found not in ("deepgp-model/1", "deepgp-regressor/1"):
        raise ValueError(f"{path} is not a model file of deepgp 0.1")
    try:
        if found == "deepgp-model/1":
            return MODEL, model_tree(blob)
        tree = {k: blob.get(k) for k in ("params", "y_ndim", "n_features_in", "columns")}
        tree.update(
            x_scaler={k: torch.as_tensor(v) for k, v in blob["x_scaler"].items()},
            y_scaler={k: torch.as_tensor(v) for k, v in blob["y_scaler"].items()},
            history=torch.as_tensor(np.asarray(blob["history"], dtype=np.float64)), feature_names_in=None,
            model=model_tree(unpickle(io.BytesIO(blob["model"]))),
        )
        return REGRESSOR, tree
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        raise ValueError(f"{path} is not a complete deepgp 0.1 model file ({type(err).__name__}: {err})") from None
