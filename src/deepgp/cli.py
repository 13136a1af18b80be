"""Command line: ``deepgp demo | fit | predict | evaluate | benchmark | report | plot``."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="deepgp", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="fit GP and LV-GP-GP on a built-in bimodal set and print test log densities")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        run_demo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
