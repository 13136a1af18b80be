"""What kind of deepgp file is at a path: a model file, a checkpoint, a predictions file, a metrics file, a
figure, the demo's scores. Every output is checked against its :class:`Kind`
(:func:`deepgp.storage.check_output`), so that a file of another kind given by mistake is never replaced."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from safetensors import safe_open

# the formats of the files deepgp saves (the ``format`` field of a safetensors header: :mod:`deepgp.storage`)
MODEL = "deepgp-model/2"
REGRESSOR = "deepgp-regressor/2"
CHECKPOINT = "deepgp-checkpoint/2"
WHAT = {MODEL: "a model saved by deepgp (DeepGP.save)",
        REGRESSOR: "a model saved by deepgp (DeepGPRegressor.save, deepgp fit)",
        CHECKPOINT: "a training checkpoint saved by deepgp"}
NOUN = {MODEL: "the model", REGRESSOR: "the model", CHECKPOINT: "the checkpoint"}


class Kind(NamedTuple):
    """What a command writes: ``noun`` ("a model file of deepgp") and ``test``, whether the file at a path
    (a regular file, not empty) is one. :func:`check_output` replaces only a file of its kind."""

    noun: str
    test: Callable[[Path], bool]


def format_of(path) -> str | None:
    """The ``format`` a deepgp file's header records (e.g. ``deepgp-model/2``); None for a file that is
    none (not safetensors, or no format). Reads the header only."""
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            found = (f.metadata() or {}).get("format")
    except Exception:  # (a file of any other kind: what it holds is no concern of this test)
        return None
    return found if isinstance(found, str) else None


def is_model_file(path) -> bool:
    """Whether ``path`` is a model saved by deepgp (``DeepGP.save``, ``DeepGPRegressor.save``, ``deepgp fit``),
    in this layout or another (a checkpoint is not one)."""
    return (format_of(path) or "").partition("/")[0] in ("deepgp-model", "deepgp-regressor")


def is_checkpoint_file(path) -> bool:
    """Whether ``path`` is a training checkpoint saved by deepgp (``fit(checkpoint=...)``), in any layout."""
    return (format_of(path) or "").partition("/")[0] == "deepgp-checkpoint"


def is_predictions_file(path) -> bool:
    """Whether ``path`` is a CSV as ``deepgp predict`` writes one: its header is ``mean``, ``std``, then
    columns ``q<level>`` and ``sample_<i>`` (:func:`deepgp.commands.level_name`)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 20).decode("utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError):
        return False
    header = first.split(",")
    return header[:2] == ["mean", "std"] and all(re.fullmatch(r"q[0-9.e+-]+|sample_[1-9][0-9]*", name)
                                                 for name in header[2:])


# the fields of ``deepgp evaluate --json``'s object (deepgp.commands._evaluate)
METRICS_FIELDS = frozenset({"model", "target", "n", "log_density", "rmse", "crps"})


def is_metrics_file(path) -> bool:
    """Whether ``path`` is a JSON file as ``deepgp evaluate --json`` writes one: an object of exactly
    :data:`METRICS_FIELDS` (a file over 1 MB is not one, and is not read)."""
    return _json_object_keys(path) == METRICS_FIELDS


def _json_object_keys(path) -> frozenset | None:
    """The keys of the JSON object in the file at ``path``; None for anything else or a file over 1 MB."""
    try:
        if os.path.getsize(path) > 1 << 20:
            return None
        with open(path, "rb") as f:
            found = json.loads(f.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return frozenset(found) if isinstance(found, dict) else None


def is_figure_file(path) -> bool:
    """Whether ``path`` is a figure as deepgp draws them: a PNG or PDF file, by its first bytes."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return head == b"\x89PNG\r\n\x1a\n" or head.startswith(b"%PDF-")


# the fields of ``deepgp demo``'s scores.json (deepgp.demo.run_demo)
DEMO_FIELDS = frozenset({"config", "scores", "exact"})


def is_demo_scores_file(path) -> bool:
    """Whether ``path`` is a JSON file as ``deepgp demo`` writes its scores: an object of exactly
    :data:`DEMO_FIELDS` (a file over 1 MB is not one, and is not read)."""
    return _json_object_keys(path) == DEMO_FIELDS


MODEL_FILE = Kind("a model file of deepgp", is_model_file)
CHECKPOINT_FILE = Kind("a training checkpoint of deepgp", is_checkpoint_file)
PREDICTIONS = Kind("a predictions file of deepgp predict", is_predictions_file)
METRICS = Kind("a metrics file of deepgp evaluate", is_metrics_file)
FIGURE = Kind("a figure (a PNG or PDF file)", is_figure_file)
DEMO_SCORES = Kind("the scores of deepgp demo", is_demo_scores_file)
