"""User sub-commands of the ``deepgp`` CLI (demo, fit, predict, evaluate, plot)."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("demo", help="fit GP and LV-GP on a built-in bimodal set and print test log densities")
    p.set_defaults(func=_demo)


def _demo(args) -> int:
    from .demo import run_demo

    run_demo()
    return 0
