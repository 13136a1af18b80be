"""``deepgp benchmark`` and ``deepgp report`` (to be written)."""

from __future__ import annotations


def register(sub) -> None:
    pass
