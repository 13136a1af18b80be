"""Measures the library takes for speed, each with an opt-out.

:func:`settle_heap` (called by :func:`deepgp.fit` before its loop): glibc gives the top of its
heap back to the operating system whenever more than its trim threshold is free there, and every
page of it used again faults on first touch; a training step frees its whole graph at its end, so
the next step faults again. glibc raises the trim threshold itself (to twice the block, at most
2 × 32 MiB) when it frees a large mmapped block; allocating and freeing one such block gets there
at once (docs/paper-vs-code.md §4.5). No allocator setting is changed, the block is
never touched, and under another allocator it is a plain allocation; the arithmetic, so every
result, is the same either way.

Opt-out: set the environment variable ``DEEPGP_SETTLE_HEAP=0`` (or ``false``, ``no``, ``off``);
``fit`` reads it when it starts (:class:`Environment`).

:func:`training_numerics` (made by :func:`deepgp.fit` when it starts, and passed down to the bound
it steps on): in float64 models, the products R_lᵀA of the marginal conditionals, the largest GEMMs
of a step, run in float32 (:attr:`deepgp.linalg.Numerics.products_dtype`). Each variance is then off
by about 10⁻⁶ of itself, far below the Monte Carlo noise of the bound being stepped on; an
LV-GP-GP step takes about 0.75× the time on the CPU (benchmarks/README.md, step_time.py).
Predictions, and bounds evaluated outside ``fit``, are float64 throughout. Opt-out:
``DEEPGP_FLOAT32_PRODUCTS=0`` (read when ``fit`` starts).

:class:`Environment`: the three opt-outs ``fit`` obeys (these two and ``DEEPGP_CAPTURE``), read once when
it starts and passed down to what they switch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from .linalg import Numerics

# glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: the largest block it serves by mmap of its own accord
GLIBC_MMAP_THRESHOLD_MAX = 32 << 20
SETTLE_HEAP_ENV = "DEEPGP_SETTLE_HEAP"
FLOAT32_PRODUCTS_ENV = "DEEPGP_FLOAT32_PRODUCTS"
CAPTURE_ENV = "DEEPGP_CAPTURE"
OFF = ("0", "false", "no", "off")  # values of an opt-out variable that switch it off


@dataclass(frozen=True)
class Environment:
    """The opt-outs :func:`deepgp.fit` obeys, each True unless its variable is ``0``/``false``/``no``/``off``:
    ``capture``, capture the steps on a GPU where fit's ``capture`` is None (``DEEPGP_CAPTURE``);
    ``float32_products``, the R_lᵀA products in float32 (``DEEPGP_FLOAT32_PRODUCTS``); ``settle_heap``,
    :func:`settle_heap` before the first step (``DEEPGP_SETTLE_HEAP``)."""

    capture: bool = True
    float32_products: bool = True
    settle_heap: bool = True

    @classmethod
    def read(cls) -> Environment:
        """The three variables as the process's environment sets them now (each read once)."""
        return cls(capture=not opted_out(CAPTURE_ENV), float32_products=not opted_out(FLOAT32_PRODUCTS_ENV),
                   settle_heap=not opted_out(SETTLE_HEAP_ENV))

    @property
    def numerics(self) -> Numerics:
        """The numerics fit steps with: the R_lᵀA products in float32 (for float64 models; float32 ones
        compute in float32 throughout) where ``float32_products``, else in the model's dtype."""
        return Numerics(products_dtype=torch.float32 if self.float32_products else None)


def settle_heap(device: torch.device | str) -> bool:
    """Allocate and free one untouched block of just under 32 MiB on the CPU, so that glibc keeps
    the memory a training step frees instead of returning it to the operating system.

    Does nothing for other devices (fit calls it only where ``DEEPGP_SETTLE_HEAP`` is not off).
    Returns whether the block was allocated.
    """
    if torch.device(device).type != "cpu":
        return False
    torch.empty(GLIBC_MMAP_THRESHOLD_MAX - (1 << 20), dtype=torch.uint8)  # allocated and freed at once
    return True


def training_numerics() -> Numerics:
    """The numerics :func:`deepgp.fit` steps with where the environment is as now: the R_lᵀA products in float32
    unless ``DEEPGP_FLOAT32_PRODUCTS`` is off (read at this call; :attr:`Environment.numerics`)."""
    return Environment(float32_products=float32_products_enabled()).numerics


def float32_products_enabled() -> bool:
    """Whether :func:`training_numerics` has the float32 products (``DEEPGP_FLOAT32_PRODUCTS`` not off)."""
    return not opted_out(FLOAT32_PRODUCTS_ENV)


def training_products_dtype(dtype: torch.dtype) -> str:
    """The dtype, as text, in which :func:`deepgp.fit` computes the R_lᵀA products of a model of ``dtype``
    in this process: "float32" for float32 models and, unless opted out, for float64 ones (what a results
    row records beside the versions it was computed with)."""
    return str(training_numerics().products_for(dtype)).removeprefix("torch.")


def opted_out(variable: str) -> bool:
    """Whether the environment variable ``variable`` is one of :data:`OFF` (any case, spaces around)."""
    return os.environ.get(variable, "1").strip().lower() in OFF
