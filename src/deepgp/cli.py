"""Command line entry point: ``deepgp demo | fit | predict | evaluate | plot | convert``, and the commands
that other installed packages add.

The user commands live in :mod:`deepgp.commands`, their argument types in :mod:`deepgp.arguments`.
A package adds commands through the entry-point group ``deepgp.commands``: each entry point is named
after its command and loads a function that adds that command to the sub-parsers (the paper's
benchmark harness, ``deepgp-bench``, adds ``deepgp benchmark`` and ``deepgp report`` so). deepgp
imports no such package itself; one is loaded only when its command is run (``deepgp --help`` lists it
with a one-line help from :data:`PLUGIN_HELP`, or the name of its package, without loading it).

Errors reach the user through one handler, :func:`run`, as one line on standard error:

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
import functools
import logging
import os
import sys
import warnings
from collections.abc import Callable, Collection
from importlib.metadata import entry_points

from . import commands
from .arguments import Parser
from .linalg import CholeskyError
from .memory import MemoryBudgetError
from .natgrad import NaturalGradientError
from .version import __version__

DEBUG_ENV = "DEEPGP_DEBUG"
OFF = ("", "0", "false", "no", "off")
PLUGINS = "deepgp.commands"  # the entry-point group of the commands other packages add
# the commands that a package of this repository adds: their one-line help (listed without loading the
# package, which deepgp-bench's parser shows too) and how to install the package where it is missing
PLUGIN_HELP = {"benchmark": "run the UCI benchmark grid into a resumable results CSV",
               "report": "Markdown table of a results CSV beside the paper's Table 1, or of deepgp's time to quality "
               "beside the peers' (--peers)"}
PLUGIN_INSTALL = {name: "the paper's benchmark harness, deepgp-bench: pip install ./bench (in deepgp's repository)"
                  for name in PLUGIN_HELP}


def build_parser(load: Collection[str] = ()) -> argparse.ArgumentParser:
    """``deepgp``'s parser. Of the commands that installed packages add, those named in ``load`` are loaded
    (their package imported, their own options added); the others are listed by name and one-line help, and
    load their package only if one of them is parsed."""
    parser = Parser(
        prog="deepgp",
        description="Deep Gaussian processes with latent variables (importance-weighted VI).",
        epilog=f"Errors are one line; --debug (anywhere) or {DEBUG_ENV}=1 shows the traceback.",
    )
    parser.add_argument("--version", action="version", version=f"deepgp {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.register(sub)
    for plugin in plugins():
        if plugin.name in load:
            _register_plugin(sub, plugin)
        else:
            _register_lazily(sub, plugin)
    return parser


def plugins() -> list:
    """The installed entry points of the group ``deepgp.commands``, one per added command, by name."""
    return sorted(entry_points(group=PLUGINS), key=lambda ep: ep.name)


def _register_plugin(sub, plugin) -> None:
    """Add the command of the entry point ``plugin``; one that fails to load becomes a command that says why
    when it is run (and leaves the other commands working)."""
    try:
        plugin.load()(sub)
    except Exception as err:  # noqa: BLE001 — a broken add-on must not take `deepgp fit` down with it
        reason = " ".join(str(err).split()) or type(err).__name__

        def broken(args, reason=reason) -> int:
            raise ImportError(f"the package that adds `deepgp {plugin.name}` ({plugin.value}) did not load: {reason}")

        _add_without_options(sub, plugin.name, f"(not available: {reason})", broken)


def _register_lazily(sub, plugin) -> None:
    """List the command of the entry point ``plugin`` without loading it; parsing it loads it and parses its
    arguments again with its own options."""
    dist = getattr(plugin, "dist", None)
    help_ = PLUGIN_HELP.get(plugin.name) or f"a command of {dist.name if dist else plugin.value.split(':')[0]}"

    def deferred(args) -> int:
        again = build_parser(load={args.command}).parse_args([args.command, *args.rest])
        again.debug = args.debug
        return again.func(again)

    _add_without_options(sub, plugin.name, help_, deferred)


def _add_without_options(sub, name: str, help_: str, func) -> None:
    # (no options of its own, so that every argument reaches ``func``)
    p = sub.add_parser(name, help=help_, add_help=False, prefix_chars="\0")
    p.add_argument("rest", nargs="*")
    p.set_defaults(func=func)


def _command(argv: list[str]) -> str | None:
    """The command an argument list names (deepgp's own options take no value), or None."""
    end = argv.index("--") if "--" in argv else len(argv)
    return next((a for a in argv[:end] if not a.startswith("-")), None)


def _missing_plugin(command: str | None) -> str | None:
    """The one-line error for a command of :data:`PLUGIN_INSTALL` whose package is not installed, else None."""
    if command not in PLUGIN_INSTALL or any(p.name == command for p in plugins()):
        return None
    return f"deepgp: error: `deepgp {command}` comes with {PLUGIN_INSTALL[command]}"


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err, OSError) and err.filename:  # "No space left on device: model.safetensors"
        text = f"{err.strerror or text}: {err.filename}"
    return text


def _exit_status(err: BaseException) -> tuple[int, str]:
    """(exit status, the line to print) for an error raised by a command."""
    if isinstance(err, (FloatingPointError, CholeskyError, NaturalGradientError)):
        return 1, _one_line(err)  # a run that failed because of a setting: the message names it
    if isinstance(err, MemoryBudgetError):  # refused before allocating: the message names the option and the estimate
        return 1, err.message(option=True)
    if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError" or "can't allocate memory" in str(err):
        return 1, "ran out of memory: use fewer inducing points, a smaller --batch-size or fewer samples"
    if isinstance(err, (ValueError, OSError, EOFError, ImportError)):
        return 2, _one_line(err)  # bad input: an argument, a file, a missing optional package
    return 1, f"unexpected {type(err).__name__}: {_one_line(err)} (rerun with --debug for the traceback)"


def _warning_line(prog: str):
    """A ``warnings.showwarning`` that prints one ``PROG: warning: ...`` line."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"{prog}: warning: {' '.join(str(message).split())}", file=sys.stderr)

    return show


def main(argv=None) -> int:
    """``deepgp``: parse the command line and run its command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command(argv)
    missing = _missing_plugin(command)
    if missing is not None:
        print(missing, file=sys.stderr)
        return 2
    # only the command that is run loads the package that adds it: `deepgp fit` imports no harness
    return run(functools.partial(build_parser, load=(command,) if command else ()), argv)


def run(build: Callable[[], argparse.ArgumentParser], argv=None, prog: str = "deepgp") -> int:
    """Parse ``argv`` (default: the process's arguments) with the parser ``build()`` makes and run the chosen
    command's ``func(args)``, every error as one line and an exit status (the module docstring); ``prog``
    names the program in those lines. ``args.debug`` tells the command whether tracebacks are wanted.
    (``deepgp-bench`` runs its commands through this too.)"""
    argv = list(sys.argv[1:] if argv is None else argv)
    end = argv.index("--") if "--" in argv else len(argv)
    debug = "--debug" in argv[:end] or os.environ.get(DEBUG_ENV, "").strip().lower() not in OFF
    argv = [a for i, a in enumerate(argv) if not (a == "--debug" and i < end)]
    try:
        parser = build()  # (imports the commands' modules: Ctrl-C may come here)
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    args.debug = debug  # (for a command that prints tracebacks of its own: a failed benchmark configuration)
    return _run(args, f"{prog} {args.command}", debug)


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
            warnings.showwarning = _warning_line(name.split()[0])
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
