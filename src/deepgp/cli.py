"""Command line entry point: ``deepgp demo | fit | predict | evaluate | plot | benchmark | report``.

Each group of sub-commands lives beside the code it drives and registers itself here:
user commands in :mod:`deepgp.commands`, the benchmark runner and report in
:mod:`deepgp.benchmark.cli`.
"""

from __future__ import annotations

import argparse
import sys

from . import __version__


def build_parser() -> argparse.ArgumentParser:
    from . import commands
    from .benchmark import cli as benchmark_cli

    parser = argparse.ArgumentParser(
        prog="deepgp",
        description="Deep Gaussian processes with latent variables (importance-weighted VI).",
    )
    parser.add_argument("--version", action="version", version=f"deepgp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.register(sub)
    benchmark_cli.register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as err:
        # user errors (bad CSV, unknown column, missing file): one clear line, no traceback
        print(f"deepgp {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
