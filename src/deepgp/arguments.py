"""The command line's argument types and option builders, shared by every group of commands.

A bad value is argparse's one-line error naming the option (:class:`Parser`: exit status 2).
:func:`add_settings` makes one ``--option`` per field of a settings dataclass (:mod:`deepgp.config`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math

from .validation import MAX_SEED


# -- argument types: a bad value is argparse's one-line error naming the option ------------------
def at_least(minimum: int):
    """An argparse type: an integer >= ``minimum``."""
    def integer(text: str) -> int:
        return _int_at_least(text, minimum)

    integer.__name__ = f"integer >= {minimum}"
    return integer


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _int_at_least(text, 1)


def count(text: str) -> int:
    """An integer >= 0."""
    return _int_at_least(text, 0)


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
    return value


def seed(text: str) -> int:
    """A seed: an integer in [0, 2**63 − 1]."""
    value = _int_at_least(text, 0)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be an integer <= {MAX_SEED}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def add_settings(parser: argparse.ArgumentParser, config_class, skip=(), defaults: dict | None = None,
                 helps: dict | None = None) -> None:
    """One ``--option`` per field of a settings dataclass (:mod:`deepgp.config`) but ``skip``: its help,
    choices and default from the field's declaration, its type from the annotation (integers and
    floats checked here, bools as ``--flag / --no-flag``, tuples comma-separated); every value is
    checked again, with the field's own rules, when the config is made. ``defaults`` overrides a
    field's default for this command, ``helps`` its help (the benchmark's budget is the recipe's). A field
    whose default is None (an optimiser setting that the recipe fills in) takes its type without the None."""
    for f in dataclasses.fields(config_class):
        if f.name in skip:
            continue
        kwargs = dict(default=(defaults or {}).get(f.name, f.default), dest=f.name,
                      help=(helps or {}).get(f.name, f.metadata["help"]))
        kind = f.type.removesuffix(" | None") if f.default is None else f.type
        if kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif "choices" in f.metadata:
            kwargs["choices"] = f.metadata["choices"]
        elif f.name == "seed":
            kwargs["type"] = seed
        elif kind == "int":
            kwargs["type"] = at_least(f.metadata.get("minimum", 1))
        elif kind == "float":
            kwargs["type"] = positive_float
        elif f.type.startswith("tuple"):
            kwargs.update(type=positive_ints, metavar="W1,W2,...")
            if kwargs["default"] is f.default:  # (as text: argparse converts a text default by its type)
                kwargs["default"] = ",".join(map(str, f.default))
        parser.add_argument("--" + f.name.replace("_", "-"), **kwargs)


def positive_ints(text: str, like: str = "") -> tuple[int, ...]:
    """Comma-separated integers >= 1 (an option's type), or argparse's error; ``like``: an example for it.
    An empty item ("8,,4", "8,") is an error, not an item dropped."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        example = f" like {like!r}" if like else ""
        raise argparse.ArgumentTypeError(f"must be comma-separated integers >= 1{example}, got {text!r}")
    return values


def comma_items(text: str, option: str) -> list[str]:
    """The comma-separated items of ``text``, each stripped: a ValueError naming ``option`` if it names
    nothing or one item is empty ("a,,b", "a,"), which is a slip to report, not an item to drop."""
    items = [item.strip() for item in str(text).split(",")]
    if not any(items):
        raise ValueError(f"{option} names nothing (got {text!r})")
    if not all(items):
        raise ValueError(f"{option} has an empty item (got {text!r})")
    return items


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that ends with each option's default, except where the default is None (a value resolved
    elsewhere, which the help names) or where the help already states it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is None or "default" in text:
            return text
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line (``deepgp fit: error: argument --lr: ...``) and exit 2
    instead of the usage block; sub-parsers inherit the class."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
