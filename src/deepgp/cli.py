"""Command line entry point: ``deepgp demo | fit | predict | evaluate | plot | convert | benchmark | report``.

Each group of sub-commands lives beside the code it drives and registers itself here:
user commands in :mod:`deepgp.commands`, the benchmark runner and report in
:mod:`deepgp.benchmark.cli`.

Errors reach the user through one handler, :func:`main`, as one line on standard error:

* exit status 2: bad input — an argument, a file, a missing optional package
  (``ValueError``, ``OSError``, ``EOFError``, ``ImportError`` and argparse's own errors);
* exit status 1: a run that failed because of a setting (``FloatingPointError``,
  ``CholeskyError``, ``NaturalGradientError``: their messages name the setting and what to try; a
  ``MemoryBudgetError``, a request refused before it allocated more memory than there is, names the
  option and its estimate), or an unexpected error;
* exit status 130: interrupted (Ctrl-C).

The traceback is shown only with ``--debug`` (anywhere on the command line) or ``DEEPGP_DEBUG=1``.
Warnings are printed as one ``deepgp: warning: ...`` line each.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import warnings

from . import __version__

DEBUG_ENV = "DEEPGP_DEBUG"
OFF = ("", "0", "false", "no", "off")


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
    from .validation import MAX_SEED

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
    import dataclasses

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
            kwargs.update(type=_widths, metavar="W1,W2,...")
            if kwargs["default"] is f.default:  # (as text: argparse converts a text default by its type)
                kwargs["default"] = ",".join(map(str, f.default))
        parser.add_argument("--" + f.name.replace("_", "-"), **kwargs)


def _widths(text: str) -> tuple[int, ...]:
    """Comma-separated integers >= 1."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers >= 1, got {text!r}")
    return values


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


def build_parser() -> argparse.ArgumentParser:
    from . import commands
    from .benchmark import cli as benchmark_cli

    parser = Parser(
        prog="deepgp",
        description="Deep Gaussian processes with latent variables (importance-weighted VI).",
        epilog=f"Errors are one line; --debug (anywhere) or {DEBUG_ENV}=1 shows the traceback.",
    )
    parser.add_argument("--version", action="version", version=f"deepgp {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.register(sub)
    benchmark_cli.register(sub)
    return parser


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err, OSError) and err.filename:  # "No space left on device: model.safetensors"
        text = f"{err.strerror or text}: {err.filename}"
    return text


def _exit_status(err: BaseException) -> tuple[int, str]:
    """(exit status, the line to print) for an error raised by a command."""
    from .linalg import CholeskyError
    from .memory import MemoryBudgetError
    from .natgrad import NaturalGradientError

    if isinstance(err, (FloatingPointError, CholeskyError, NaturalGradientError)):
        return 1, _one_line(err)  # a run that failed because of a setting: the message names it
    if isinstance(err, MemoryBudgetError):  # refused before allocating: the message names the option and the estimate
        return 1, err.message(option=True)
    if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError" or "can't allocate memory" in str(err):
        return 1, "ran out of memory: use fewer inducing points, a smaller --batch-size or fewer samples"
    if isinstance(err, (ValueError, OSError, EOFError, ImportError)):
        return 2, _one_line(err)  # bad input: an argument, a file, a missing optional package
    return 1, f"unexpected {type(err).__name__}: {_one_line(err)} (rerun with --debug for the traceback)"


def debugging() -> bool:
    """Whether tracebacks are wanted: ``--debug`` (which sets it) or ``DEEPGP_DEBUG`` set to anything
    but 0/false/no/off."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in OFF


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"deepgp: warning: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    end = argv.index("--") if "--" in argv else len(argv)
    debug = "--debug" in argv[:end] or os.environ.get(DEBUG_ENV, "").strip().lower() not in OFF
    argv = [a for i, a in enumerate(argv) if not (a == "--debug" and i < end)]
    try:
        parser = build_parser()  # (imports the commands' modules: Ctrl-C may come here)
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        if debug:
            raise
        print("deepgp: interrupted", file=sys.stderr)
        return 130
    name = f"deepgp {args.command}"
    saved_env = os.environ.get(DEBUG_ENV)
    if debug:  # for the code that prints tracebacks of its own (a failed benchmark configuration)
        os.environ[DEBUG_ENV] = "1"
    try:
        return _run(args, name, debug)
    finally:
        if saved_env is None:
            os.environ.pop(DEBUG_ENV, None)
        else:
            os.environ[DEBUG_ENV] = saved_env


def _run(args, name: str, debug: bool) -> int:
    # the library logs its progress to the "deepgp" logger; a command shows it as plain lines
    logger, handler = logging.getLogger("deepgp"), logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        return _run_logged(args, name, debug)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _run_logged(args, name: str, debug: bool) -> int:
    with warnings.catch_warnings():
        if not debug:
            warnings.showwarning = _show_warning
        try:
            return int(args.func(args) or 0)
        except KeyboardInterrupt:
            if debug:
                raise
            print(f"{name}: interrupted", file=sys.stderr)
            return 130
        except Exception as err:  # noqa: BLE001 — the one place where errors become exit statuses
            if debug:
                raise
            status, line = _exit_status(err)
            print(f"{name}: error: {line}", file=sys.stderr)
            return status


if __name__ == "__main__":
    sys.exit(main())
