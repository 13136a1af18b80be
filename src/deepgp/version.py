"""The version of deepgp, declared once in pyproject.toml (what files and results rows record)."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as distribution_version
from pathlib import Path


def source_version() -> str:
    """The version declared in the source tree's pyproject.toml ("0+unknown" without one): what a tree run
    without installing (``PYTHONPATH=src``, on a GPU machine say) records in its files and results rows."""
    try:
        text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, IndexError):  # (IndexError: a package at the file system's root)
        return "0+unknown"
    # the [project] table alone, up to the next table (tomllib is 3.11+; this package runs on 3.10)
    table = re.search(r"^\[project\][ \t]*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    name = table and re.search(r"""^name\s*=\s*["']deepgp["']""", table.group(1), re.M)
    found = table and name and re.search(r"""^version\s*=\s*["']([^"']+)["']""", table.group(1), re.M)
    return found.group(1) if found else "0+unknown"


def find_version() -> str:
    """The version, declared once in pyproject.toml: a source tree's own first (``PYTHONPATH=src``
    beside an installed deepgp of another version must record the code that ran), else the
    installed package's metadata."""
    found = source_version()
    if found == "0+unknown":
        try:
            found = distribution_version("deepgp")
        except PackageNotFoundError:
            pass
    return found


__version__ = find_version()
