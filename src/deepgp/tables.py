"""Data tables from CSV files: columns by name, with a clear one-line error for every unusable one.

A file is CSV or gzip-compressed CSV (``.csv.gz``) with a header row; a UTF-8 byte-order mark is
not part of the first name. Values that are empty or read as missing (:data:`MISSING`), infinite,
or not plain numbers are named with their column and their first line, all at once.
"""

from __future__ import annotations

import csv
import gzip
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MISSING = {"", "na", "nan", "-nan", "+nan", "n/a", "null", "none", "?"}


@dataclass
class Column:
    """One CSV column: values [N] (NaN where missing), the 1-based file lines of missing and of
    infinite values, the first value that is not a number as (line, text), or None for a
    numeric column, and the 1-based file line of each value [N] (where its record starts: a quoted value may
    span lines; blank lines are skipped)."""

    values: np.ndarray
    missing: list
    bad: tuple | None
    infinite: list
    lines: np.ndarray | None = None


def read_csv(path) -> dict[str, Column]:
    """Columns of a CSV / CSV.gz file with a header, by name, in file order."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if not path.is_file():  # a folder, a device (/dev/zero never ends), a pipe (blocks)
        raise ValueError(f"{path} is not a regular file")
    opener = gzip.open if path.suffix.lower() == ".gz" else open  # (DATA.CSV.GZ too)
    try:
        with opener(path, "rt", newline="", encoding="utf-8-sig") as f:  # -sig: a BOM is not part of a name
            reader, rows, starts, start = csv.reader(f), [], [], 1
            for r in reader:  # a quoted value may span lines: messages name each record's first physical line
                rows.append(r)
                starts.append(start)
                start = reader.line_num + 1
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, csv.Error) as err:  # EOFError: a cut .gz
        raise ValueError(f"could not read {path} as CSV: {err or type(err).__name__}") from None
    if not rows or not any(cell.strip() for cell in rows[0]):
        raise ValueError(f"{path} is empty; expected a header row of column names")
    header = [h.strip() for h in rows[0]]
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise ValueError(f"{path}: duplicate column names {dupes}")
    body = [(line, r) for line, r in zip(starts[1:], rows[1:]) if any(cell.strip() for cell in r)]  # (no blanks)
    if not body:
        raise ValueError(f"{path} has a header but no data rows")
    for line, r in body:
        if len(r) != len(header):
            raise ValueError(f"{path}, line {line}: {len(r)} fields, but the header has {len(header)}")
    columns = {}
    lines = np.array([line for line, _ in body])
    for j, name in enumerate(header):
        values = np.full(len(body), np.nan)
        missing, bad, infinite = [], None, []
        for i, (line, r) in enumerate(body):
            text = r[j].strip()
            if text.lower() in MISSING:
                missing.append(line)
                continue
            try:
                if "_" in text:  # Python reads "1_000" as 1000; a CSV cell that says so is not a plain number
                    raise ValueError(text)
                values[i] = float(text)
            except ValueError:
                bad = bad or (line, text)
            else:
                if not np.isfinite(values[i]):  # "inf", "1e999"
                    infinite.append(line)
        columns[name] = Column(values, missing, bad, infinite, lines)
    return columns


def _describe(names, columns, what) -> None:
    """Raise for unknown, non-numeric or incomplete columns among ``names`` (all listed at once)."""
    unknown = [n for n in names if n not in columns]
    if unknown:
        raise ValueError(f"{what}: no column(s) {unknown}; the file has {list(columns)}")
    bad = [f"{n!r} (e.g. {columns[n].bad[1]!r} on line {columns[n].bad[0]})" for n in names if columns[n].bad]
    if bad:
        raise ValueError(f"{what}: non-numeric column(s) " + ", ".join(bad))
    miss = [f"{n!r} ({len(columns[n].missing)} row(s), first on line {columns[n].missing[0]})"
            for n in names if columns[n].missing]
    if miss:
        raise ValueError(f"{what}: missing values in column(s) " + ", ".join(miss) + "; drop or fill them first")
    inf = [f"{n!r} ({len(columns[n].infinite)} row(s), first on line {columns[n].infinite[0]})"
           for n in names if columns[n].infinite]
    if inf:
        raise ValueError(f"{what}: infinite values in column(s) " + ", ".join(inf))


def select(columns: dict[str, Column], names) -> np.ndarray:
    """The named columns as a float array [N, len(names)]; a clear error for any unusable one."""
    _describe(names, columns, "cannot use the data")
    return np.stack([columns[n].values for n in names], axis=1)


def choose_inputs(columns: dict[str, Column], target: str, inputs: list[str] | None) -> list[str]:
    """``inputs`` if given; otherwise every other numeric column (announcing the ones left out)."""
    if target not in columns:
        raise ValueError(f"--target: no column {target!r}; the file has {list(columns)}")
    if inputs is not None:
        if not inputs:
            raise ValueError("--inputs names no columns; give comma-separated column names, or leave it out")
        if target in inputs:
            raise ValueError(f"--inputs includes the target column {target!r}")
        twice = sorted({n for n in inputs if inputs.count(n) > 1})
        if twice:
            raise ValueError(f"--inputs names column(s) {twice} more than once")
        return inputs
    others = [n for n in columns if n != target]
    skipped = [n for n in others if columns[n].bad]
    if skipped:
        warnings.warn(f"ignoring non-numeric column(s) {skipped} (name the inputs with --inputs)", stacklevel=2)
    chosen = [n for n in others if not columns[n].bad]
    if not chosen:
        raise ValueError(f"no numeric input columns besides the target {target!r}; the file has {list(columns)}")
    return chosen
