"""Numbers in the files the package writes: each float as the shortest text that reads back as that
float (``repr``: 1000000.9092974268, not 1e+06), and JSON that is JSON (no NaN or Infinity, which
``json.dumps`` writes by default and JSON readers refuse)."""

from __future__ import annotations

import json
import math

import numpy as np


def number_text(value) -> str:
    """The shortest decimal text that reads back as the float ``value``: float(number_text(x)) == x. An
    integral value is written as an integer where ``repr`` writes one ("3", not "3.0"; "-0" for −0.0), which
    a reader of an integer column takes too."""
    text = repr(float(value))
    return text.removesuffix(".0")


def column_text(values) -> list[str]:
    """The shortest text that reads back as each value of a 1-D array [N] (read as float64): ``repr``
    of each, "3.0" for 3 (one C call per value: a prediction file may hold millions)."""
    return list(map(repr, np.asarray(values, dtype=np.float64).ravel().tolist()))


def non_finite(obj, where: str = "") -> list[str]:
    """Where ``obj`` (dicts, lists and tuples of numbers and text) holds a NaN or an infinity: the keys
    and indices leading to each, such as "['metrics']['rmse']"."""
    if isinstance(obj, dict):
        return [w for k, v in obj.items() for w in non_finite(v, f"{where}[{k!r}]")]
    if isinstance(obj, (list, tuple)):
        return [w for i, v in enumerate(obj) for w in non_finite(v, f"{where}[{i}]")]
    if isinstance(obj, (float, np.floating)) and not math.isfinite(obj):
        return [f"{where or 'the value'} = {float(obj)!r}"]
    return []


def json_text(obj, what: str, **kwargs) -> str:
    """``json.dumps(obj, **kwargs)`` refusing NaN and infinities (which JSON has no numbers for): a
    ValueError naming ``what`` and where the first such values are, instead of a file no JSON reader takes."""
    bad = non_finite(obj)
    if bad:
        raise ValueError(f"{what} would hold a value that is not a finite number ("
                         + ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
                         + "); nothing was written")
    return json.dumps(obj, allow_nan=False, **kwargs)
