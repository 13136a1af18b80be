"""Process-level measures the library takes for speed, each with an opt-out.

:func:`settle_heap` (called by :func:`deepgp.fit` before its loop): glibc gives the top of its
heap back to the operating system whenever more than its trim threshold is free there, and every
page of it used again faults on first touch; a training step frees its whole graph at its end, so
the next step faults again. glibc raises the trim threshold itself (to twice the block, at most
2 × 32 MiB) when it frees a large mmapped block; allocating and freeing one such block gets there
at once (docs/paper-vs-code.md §4.5, commit 341d947). No allocator setting is changed, the block is
never touched, and under another allocator it is a plain allocation; the arithmetic, so every
result, is the same either way.

Opt-out: set the environment variable ``DEEPGP_SETTLE_HEAP=0`` (or ``false``, ``no``, ``off``);
it is read at each call.
"""

from __future__ import annotations

import os

import torch

# glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: the largest block it serves by mmap of its own accord
GLIBC_MMAP_THRESHOLD_MAX = 32 << 20
SETTLE_HEAP_ENV = "DEEPGP_SETTLE_HEAP"


def settle_heap(device: torch.device | str) -> bool:
    """Allocate and free one untouched block of just under 32 MiB on the CPU, so that glibc keeps
    the memory a training step frees instead of returning it to the operating system.

    Does nothing for other devices or when ``DEEPGP_SETTLE_HEAP`` is ``0``/``false``/``no``/``off``.
    Returns whether the block was allocated.
    """
    if torch.device(device).type != "cpu":
        return False
    if os.environ.get(SETTLE_HEAP_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    torch.empty(GLIBC_MMAP_THRESHOLD_MAX - (1 << 20), dtype=torch.uint8)  # allocated and freed at once
    return True
