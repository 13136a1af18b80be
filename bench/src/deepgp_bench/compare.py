"""Time to quality: deepgp's learning curve against the peers' fits (NGBoost, a deep ensemble, an MDN, a
conditional spline flow), per data set and split: what a user gives up, or gains, by training deepgp
instead.

Two files are read:

* the peers' rows (``python -m deepgp_bench.peers.run``, one JSON line per fit): the exact test log
  density per point, the KDE over 2,000 draws, the fitting seconds (wall clock, ``fit_seconds``) and the
  process's CPU seconds meanwhile (``fit_cpu_seconds``). Only ``part: test`` rows of 2,000 draws at each
  peer's current settings (its ``DEFAULTS``) are compared. A row of ``peer: deepgp`` is a deepgp fit of
  the same run: its ``curve`` [{iterations, seconds, log_density, kde}, ...] is deepgp's curve on that
  split, in preference to one from the second file;
* deepgp's snapshots (``benchmarks/time_to_quality.py``, one JSON line per snapshot of one training run):
  the default user model, LV-GP-GP trained by IW under the fast recipe without overrides, on the split's
  first ``points`` test points (the peers' ``log_density_first_<points>`` where they have more), the
  mixture estimate as its log density (the peers' exact density's counterpart) and the KDE.

Per data set and split, the best peer is the one with the highest test log density on that split (an
oracle's pick, which can only favour the peers); deepgp's curve **first passes** it at the first snapshot
whose log density is ≥ the best peer's, at that snapshot's training seconds t; the **time ratio** is
t / the best peer's fit seconds (its wall clock; also against its CPU seconds, since a loaded machine
stretches the wall clock). Values are in the split's standardised units, higher is better.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from . import curves
from .curves import COUNT, INDEX, NUMBER, OBJECT, REPORT, SECONDS, TEXT, number
from .markdown import markdown_cell
from .peers import DATASETS, peer_classes

DEFAULT_ITERATIONS = 5000  # deepgp's user default (`iterations=5000`): the summary's second comparison
DRAWS = 2000  # the paper's KDE protocol: the draws of the rows compared
MODEL = dict(system="deepgp", model="LV-GP-GP", method="iw", recipe="fast", overrides={}, part="test")
DEEPGP = "deepgp"  # the ``peer`` of a deepgp fit in the peers' file
# the fields the report reads of a peer's row and of a point of a deepgp row's curve, with their domains: null
# where the writer writes a non-finite mean (or an unrecorded time) as null
_PEER_KEY = dict(dataset=TEXT, split=INDEX, peer=TEXT, settings=OBJECT, part=TEXT, draws=COUNT)
_PEER_FIELDS = dict(log_density=NUMBER.or_null(), kde=NUMBER.or_null(), fit_seconds=SECONDS,
                    fit_cpu_seconds=SECONDS.or_null())
_POINT_FIELDS = dict(iterations=COUNT, seconds=SECONDS, log_density=NUMBER, kde=NUMBER.or_null())
_FIRST = re.compile(r"(log_density|kde)_first_\d+")  # a peer's means over the first test points


@dataclass(frozen=True)
class Snapshot:
    """deepgp after ``iterations`` training iterations: ``seconds`` of training (wall clock, evaluation
    excluded), the test ``log_density`` (mixture estimate) and the ``kde`` (None where not recorded)."""

    iterations: int
    seconds: float
    log_density: float
    kde: float | None


@dataclass(frozen=True)
class Curve:
    """deepgp's snapshots of one training run on one split, by iterations. ``same_run``: fitted in the
    peers' run (a ``peer: deepgp`` row), on the peers' test points; else from time_to_quality.py, on
    the first ``points`` test points."""

    snapshots: tuple[Snapshot, ...]
    same_run: bool
    points: int | None = None

    def at(self, iterations: int) -> Snapshot | None:
        """The snapshot at ``iterations``, or None."""
        return next((s for s in self.snapshots if s.iterations == iterations), None)

    @property
    def last(self) -> Snapshot:
        return self.snapshots[-1]


@dataclass(frozen=True)
class PeerFit:
    """One peer's fit on one split: its exact test ``log_density``, ``kde``, the wall-clock
    ``fit_seconds`` and the ``fit_cpu_seconds`` of its process (None where not recorded)."""

    peer: str
    log_density: float
    kde: float | None
    fit_seconds: float
    fit_cpu_seconds: float | None


@dataclass(frozen=True)
class SplitComparison:
    """deepgp's ``curve`` against the ``peers`` ({name: fit}, on the curve's test points) on one split."""

    dataset: str
    split: int
    curve: Curve
    peers: dict[str, PeerFit]

    @property
    def best(self) -> PeerFit:
        """The peer with the highest test log density on this split (the first listed on a tie)."""
        return max(self.peers.values(), key=lambda p: p.log_density)

    @property
    def first_pass(self) -> Snapshot | None:
        """deepgp's first snapshot with a log density ≥ the best peer's; None if it never gets there."""
        return next((s for s in self.curve.snapshots if s.log_density >= self.best.log_density), None)

    @property
    def ratio(self) -> float | None:
        """The first pass's training seconds / the best peer's wall-clock fit seconds (None: no pass)."""
        return None if self.first_pass is None else self.first_pass.seconds / self.best.fit_seconds

    @property
    def cpu_ratio(self) -> float | None:
        """The first pass's training seconds / the best peer's CPU seconds (None: no pass or no CPU time)."""
        cpu = self.best.fit_cpu_seconds
        return None if self.first_pass is None or not cpu else self.first_pass.seconds / cpu


@dataclass
class PeerRows:
    """The peers' file read: ``fits[(dataset, split)][peer]`` (each row at ``points`` → the row),
    deepgp's same-run ``curves[(dataset, split)]``, and ``left_out``: rows not compared, and why."""

    fits: dict[tuple[str, int], dict[str, dict]] = field(default_factory=dict)
    curves: dict[tuple[str, int], Curve] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)
    rows: int = 0


# -- reading ----------------------------------------------------------------------------------------------
def _json_lines(path, option: str, kind: str, valid) -> Iterator[tuple[int, dict]]:
    """(line number, record) of every non-blank line of ``path``, each checked by ``valid`` (record →
    the reason it is not one, or ""). A missing file, a file without one valid record (another kind:
    named ``kind``) or a damaged line is a one-line error naming ``option`` and the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{option} {path}: no such file") if not path.exists() else ValueError(
            f"{option} {path} is not a file")
    with open(path, "rb") as f:
        lines = [(n, line) for n, line in enumerate(f, 1) if line.strip()]
    checked = []
    for n, line in lines:
        rec = curves.json_line(line)
        checked.append((n, rec, valid(rec) if isinstance(rec, dict) else "not a JSON object"))
    if not any(not why for _, _, why in checked):
        raise ValueError(f"{option} {path} holds no {kind}: is it another file?")
    for n, rec, why in checked:
        if why:
            raise ValueError(f"{option} {path}, line {n} is damaged: {why}")
        yield n, rec


def _peer_row_problem(rec: dict) -> str:
    problem = curves.keyed_problem(rec, _PEER_KEY, {}, REPORT)
    if problem:
        return problem
    if rec["key"]["peer"] == DEEPGP:
        curve = rec.get("curve")
        if not isinstance(curve, list) or not curve:
            return "a deepgp row without its curve"
        for n, point in enumerate(curve):
            where = f"point {n + 1} of its curve: "
            if not isinstance(point, dict):
                return f"{where}not a JSON object"
            problem = curves.fields_problem(point, _POINT_FIELDS, REPORT, where)
            if problem:
                return problem
            # one training run: its iterations increase, and its training seconds never fall
            if n and point["iterations"] <= curve[n - 1]["iterations"]:
                return f"{where}iterations {point['iterations']} after {curve[n - 1]['iterations']}"
            if n and point["seconds"] < curve[n - 1]["seconds"]:
                return f"{where}seconds {point['seconds']} after {curve[n - 1]['seconds']}"
        return ""
    first = {name: NUMBER.or_null() for name in rec if _FIRST.fullmatch(name)}
    return curves.fields_problem(rec, {**_PEER_FIELDS, **first}, REPORT)


def _curve_problem(rec: dict) -> str:
    # (each record alone: a key's snapshots may come from different runs of the script, so their seconds
    # are not asked to rise; the report reads the estimates of the default model's records only)
    values = ("iterations", "seconds") + (("mixture", "kde") if _is_model(rec.get("key")) else ())
    return curves.record_problem(rec, REPORT, values, null=("kde",))


def _is_model(key) -> bool:
    return isinstance(key, dict) and all(key.get(k) == v for k, v in MODEL.items()) and set(key) == set(curves.KEY)


def read_peers(path, option: str = "--peers", draws: int = DRAWS) -> PeerRows:
    """The peers' rows of ``path`` (``python -m deepgp_bench.peers.run``'s file): those of the test part,
    ``draws`` draws and each peer's current settings (a later row of the same fit replaces an earlier
    one), and the deepgp curves of ``peer: deepgp`` rows (the last one of a data set and split)."""
    classes = peer_classes()
    out = PeerRows()
    for n, rec in _json_lines(path, option, "row of `python -m deepgp_bench.peers.run`", _peer_row_problem):
        out.rows += 1
        k = rec["key"]
        where = (k["dataset"], k["split"])
        if k["part"] != "test" or k["draws"] != draws:
            continue
        if k["peer"] == DEEPGP:
            snaps = {p["iterations"]: Snapshot(p["iterations"], float(p["seconds"]), float(p["log_density"]),
                                               None if p.get("kde") is None else float(p["kde"])) for p in rec["curve"]}
            out.curves[where] = Curve(tuple(snaps[i] for i in sorted(snaps)), same_run=True)
            continue
        cls = classes.get(k["peer"])
        if cls is not None and k["settings"] != json.loads(json.dumps(cls.DEFAULTS)):
            out.left_out.append(f"line {n}: {k['peer']} on {k['dataset']} split {k['split']} at other settings")
            continue
        out.fits.setdefault(where, {})[k["peer"]] = rec
    return out


def read_curves(path, option: str = "--curves", draws: int = DRAWS) -> dict[tuple[str, int], Curve]:
    """deepgp's curves in ``path`` (``benchmarks/time_to_quality.py``'s file): per (dataset, split), the
    snapshots of the default user model (:data:`MODEL`) at ``draws`` draws; where one split has runs on
    several numbers of points, the one whose snapshot comes last in the file; a later line of a snapshot
    replaces an earlier one."""
    runs: dict[tuple[str, int], dict[int, dict[int, Snapshot]]] = defaultdict(lambda: defaultdict(dict))
    latest: dict[tuple[str, int], int] = {}
    for _, rec in _json_lines(path, option, "record of `benchmarks/time_to_quality.py`", _curve_problem):
        k = rec["key"]
        if not _is_model(k) or k["draws"] != draws:
            continue
        where = (k["dataset"], k["split"])
        kde = None if rec.get("kde") is None else float(rec["kde"])
        runs[where][k["points"]][rec["iterations"]] = Snapshot(rec["iterations"], float(rec["seconds"]),
                                                                float(rec["mixture"]), kde)
        latest[where] = k["points"]
    return {where: Curve(tuple(snaps[i] for i in sorted(snaps)), same_run=False, points=latest[where])
            for where, by_points in runs.items() for snaps in [by_points[latest[where]]]}


def _fit_on(rec: dict, points: int | None) -> PeerFit | None:
    """A peer's row as a fit scored on deepgp's points: the means over the first ``points`` test points
    where the row has them (``*_first_<points>``), else over all its test points; None where its log
    density is not finite (written as null)."""
    suffix = f"_first_{points}" if points is not None and f"log_density_first_{points}" in rec else ""
    value = rec.get("log_density" + suffix)
    if value is None:
        return None
    kde = rec.get("kde" + suffix)
    cpu = rec.get("fit_cpu_seconds")
    return PeerFit(rec["key"]["peer"], float(value), float(kde) if number(kde) else None, float(rec["fit_seconds"]),
                   float(cpu) if number(cpu) and cpu > 0 else None)


def compare(peers: PeerRows, curves: dict[tuple[str, int], Curve] | None = None,
            datasets: list[str] | None = None) -> list[SplitComparison]:
    """Per data set and split with a deepgp curve (same-run rows first, else ``curves``) and a peer's
    fit: the :class:`SplitComparison`, in the order of ``datasets`` (default: the peers' run's order, then
    any other by name), splits ascending. A named data set without both is a ValueError. A peer's row
    whose log density is not finite is left out and named in ``peers.left_out``."""
    merged = {**(curves or {}), **peers.curves}  # (a same-run curve replaces another of its split)
    found = {d for d, _ in peers.fits}
    order = [d for d in DATASETS if d in found] + sorted(found - set(DATASETS)) if datasets is None else datasets
    out = []
    for d in order:
        for split in sorted(s for dd, s in merged if dd == d):
            curve = merged[(d, split)]
            fits = {}
            for name, rec in peers.fits.get((d, split), {}).items():
                fit = _fit_on(rec, curve.points)
                if fit is None:
                    peers.left_out.append(f"{name} on {d} split {split}: its log density is not finite")
                else:
                    fits[name] = fit
            if fits:
                out.append(SplitComparison(d, split, curve, fits))
    if datasets is not None:
        lacking = [d for d in datasets if not any(c.dataset == d for c in out)]
        if lacking:
            raise ValueError(f"--datasets: no split with both a deepgp curve and a peer's fit on {', '.join(lacking)}")
    if not out:
        raise ValueError("no data set and split has both a deepgp curve and a peer's fit")
    return out


# -- summaries --------------------------------------------------------------------------------------------
def by_dataset(comparisons: list[SplitComparison]) -> dict[str, list[SplitComparison]]:
    """The comparisons grouped by data set, in their order."""
    out: dict[str, list[SplitComparison]] = {}
    for c in comparisons:
        out.setdefault(c.dataset, []).append(c)
    return out


@dataclass(frozen=True)
class DatasetSummary:
    """One data set, means over its ``splits``: the best peer's level (each split's best), wall and CPU
    seconds; deepgp at ``iterations`` (None: no split has it) and at each split's last snapshot."""

    dataset: str
    splits: list[int]
    best_peers: list[str]  # per split
    best: float
    best_seconds: float
    best_cpu_seconds: float | None
    first_pass: list[float | None]  # per split: seconds, None = never
    ratios: list[float | None]
    cpu_ratios: list[float | None]
    at_default: tuple[float, float] | None  # (log density, seconds), over the splits that have it
    default_splits: list[int]
    last: tuple[float, float]
    last_iterations: list[int]


def _mean(values) -> float:
    return float(np.mean(list(values)))


def summarise(splits: list[SplitComparison], iterations: int = DEFAULT_ITERATIONS) -> DatasetSummary:
    """:class:`DatasetSummary` of one data set's comparisons. deepgp at ``iterations`` is compared with
    the best peers of the splits that have that snapshot."""
    cpu = [c.best.fit_cpu_seconds for c in splits]
    at = [(c.split, c.curve.at(iterations)) for c in splits if c.curve.at(iterations) is not None]
    return DatasetSummary(
        splits[0].dataset, [c.split for c in splits], [c.best.peer for c in splits],
        _mean(c.best.log_density for c in splits), _mean(c.best.fit_seconds for c in splits),
        None if None in cpu else _mean(cpu),
        [None if c.first_pass is None else c.first_pass.seconds for c in splits],
        [c.ratio for c in splits], [c.cpu_ratio for c in splits],
        (_mean(s.log_density for _, s in at), _mean(s.seconds for _, s in at)) if at else None,
        [split for split, _ in at],
        (_mean(c.curve.last.log_density for c in splits), _mean(c.curve.last.seconds for c in splits)),
        [c.curve.last.iterations for c in splits])


def default_beats(summary: DatasetSummary, splits: list[SplitComparison]) -> bool | None:
    """Whether deepgp at the default iterations is ≥ the best peer, over the splits with that snapshot
    (None: none has it)."""
    if summary.at_default is None:
        return None
    best = _mean(c.best.log_density for c in splits if c.split in summary.default_splits)
    return summary.at_default[0] >= best


# -- text -------------------------------------------------------------------------------------------------
def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}".replace("-", "−")


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}" if value < 10 else f"{value:,.0f}"


def _ratio(value: float | None) -> str:
    if value is None:
        return "never"
    return f"{value:.2f}" if value < 1 else f"{value:.1f}" if value < 10 else f"{value:.0f}"


def _splits(splits: list[int]) -> str:
    return ", ".join(map(str, splits))


def _per_split(values: list, text, collapse: bool = False) -> str:
    """One text per split, "a / b" (``collapse``: one "a" where all are the same)."""
    texts = [text(v) for v in values]
    return texts[0] if collapse and len(set(texts)) == 1 else " / ".join(texts)


def summary_line(comparisons: list[SplitComparison], iterations: int = DEFAULT_ITERATIONS) -> str:
    """How many data sets deepgp is ≥ the best peer on (at its last snapshot, and at ``iterations``), its
    training seconds to ``iterations`` over the best peer's fit seconds (means over the splits, per data set:
    their range and median), and the median time ratio to first pass over the splits where it passes."""
    groups = by_dataset(comparisons)
    summaries = {d: summarise(s, iterations) for d, s in groups.items()}
    last = sum(s.last[0] >= s.best for s in summaries.values())
    at = [default_beats(s, groups[d]) for d, s in summaries.items()]
    ratios = [c.ratio for c in comparisons if c.ratio is not None]
    cpu = [c.cpu_ratio for c in comparisons if c.cpu_ratio is not None]
    median = (f"the median time ratio to first pass {_ratio(statistics.median(ratios))}× the best peer's wall "
              f"seconds ({_ratio(statistics.median(cpu)) if cpu else '–'}× its CPU seconds), over the "
              f"{len(ratios)} of {len(comparisons)} splits where deepgp passes it") if ratios else \
        f"deepgp passes the best peer on none of the {len(comparisons)} splits"
    # the time a user waits: deepgp's training to the default budget over the best peer's fit, per data set
    fits = [s.at_default[1] / s.best_seconds for s in summaries.values() if s.at_default is not None]
    waits = (f"its training to {iterations:,} iterations takes {_ratio(min(fits))}–{_ratio(max(fits))}× the best "
             f"peer's wall seconds (median {_ratio(statistics.median(fits))}× over the {len(fits)} data sets); "
             ) if fits else ""
    return (f"deepgp ≥ the best peer on {last} of {len(summaries)} data sets at its last snapshot and on "
            f"{sum(a is True for a in at)} of {sum(a is not None for a in at)} at {iterations:,} iterations (the "
            f"default); {waits}{median}.")


def readme_table(comparisons: list[SplitComparison], iterations: int = DEFAULT_ITERATIONS) -> str:
    """The compact table: per data set the best peer, its log density and seconds (wall / CPU), deepgp at
    ``iterations`` and its seconds, and the seconds at which deepgp first passes the best peer (per
    split)."""
    lines = [f"| data set | splits | best peer | its log density | its seconds (wall / CPU) | deepgp at "
             f"{iterations // 1000}K | its seconds | first pass (s) |", "| --- | --- | --- |" + " ---: |" * 5]
    for d, splits in by_dataset(comparisons).items():
        s = summarise(splits, iterations)
        at = s.at_default
        lines.append(f"| {markdown_cell(d)} | {_splits(s.splits)} | {_per_split(s.best_peers, str, True)} | "
                     f"{_fmt(s.best)} | "
                     f"{_seconds(s.best_seconds)} / {_seconds(s.best_cpu_seconds)} | "
                     f"{_fmt(at[0]) if at else '–'} | {_seconds(at[1]) if at else '–'} | "
                     f"{_per_split(s.first_pass, lambda v: 'never' if v is None else _seconds(v))} |")
    return "\n".join(lines)


def full_table(comparisons: list[SplitComparison], iterations: int = DEFAULT_ITERATIONS) -> str:
    """Every column per data set: the compact table's, and deepgp at its last snapshot, the time ratios
    to the best peer's wall and CPU seconds (per split)."""
    lines = [f"| data set | splits | best peer | its log density | wall s | CPU s | deepgp at {iterations // 1000}K "
             f"| s | deepgp last (iterations) | s | first pass (s) | ÷ wall | ÷ CPU |",
             "| --- | --- | --- |" + " ---: |" * 10]
    for d, splits in by_dataset(comparisons).items():
        s = summarise(splits, iterations)
        at = s.at_default
        lines.append(
            f"| {markdown_cell(d)} | {_splits(s.splits)} | {_per_split(s.best_peers, str, True)} | {_fmt(s.best)} | "
            f"{_seconds(s.best_seconds)} | {_seconds(s.best_cpu_seconds)} | {_fmt(at[0]) if at else '–'} | "
            f"{_seconds(at[1]) if at else '–'} | {_fmt(s.last[0])} "
            f"({_per_split(s.last_iterations, '{:,}'.format, True)}) "
            f"| {_seconds(s.last[1])} | {_per_split(s.first_pass, lambda v: 'never' if v is None else _seconds(v))} "
            f"| {_per_split(s.ratios, _ratio)} | {_per_split(s.cpu_ratios, _ratio)} |")
    return "\n".join(lines)


def dataset_table(splits: list[SplitComparison]) -> str:
    """One data set: every peer (log density, KDE, wall and CPU seconds) and deepgp at each snapshot
    (log density, KDE, training seconds), means over the splits, those a row lacks named; then the
    first pass per split."""
    names = list(dict.fromkeys(p for c in splits for p in c.peers))
    every = [c.split for c in splits]
    lines = [f"### {markdown_cell(splits[0].dataset)} (splits {_splits(every)})", "",
             "| method | log density | KDE | seconds (wall) | CPU seconds |", "| --- |" + " ---: |" * 4]

    def only(have: list[int]) -> str:
        return "" if have == every else f" (split{'s' if len(have) > 1 else ''} {_splits(have)})"

    for name in names:
        fits = [(c.split, c.peers[name]) for c in splits if name in c.peers]
        kde = [f.kde for _, f in fits]
        cpu = [f.fit_cpu_seconds for _, f in fits]
        lines.append(f"| {markdown_cell(name)}{only([s for s, _ in fits])} | "
                     f"{_fmt(_mean(f.log_density for _, f in fits))} | "
                     f"{_fmt(None if None in kde else _mean(kde))} | {_seconds(_mean(f.fit_seconds for _, f in fits))} "
                     f"| {_seconds(None if None in cpu else _mean(cpu))} |")
    for it in sorted({s.iterations for c in splits for s in c.curve.snapshots}):
        snaps = [(c.split, c.curve.at(it)) for c in splits if c.curve.at(it) is not None]
        kde = [s.kde for _, s in snaps]
        lines.append(f"| deepgp {it:,} iterations{only([sp for sp, _ in snaps])} | "
                     f"{_fmt(_mean(s.log_density for _, s in snaps))} | {_fmt(None if None in kde else _mean(kde))} | "
                     f"{_seconds(_mean(s.seconds for _, s in snaps))} | |")
    lines.append("")
    for c in splits:
        source = "the same run" if c.curve.same_run else f"time_to_quality.py, first {c.curve.points:,} test points"
        b = c.best
        passed = (f"first passes it at {c.first_pass.iterations:,} iterations, {_seconds(c.first_pass.seconds)} s "
                  f"({_ratio(c.ratio)}× its wall seconds, {_ratio(c.cpu_ratio)}× its CPU seconds)"
                  if c.first_pass else f"never passes it (best {_fmt(max(s.log_density for s in c.curve.snapshots))})")
        lines.append(f"- split {c.split}: best peer {b.peer} {_fmt(b.log_density)} ({_seconds(b.fit_seconds)} s wall, "
                     f"{_seconds(b.fit_cpu_seconds)} s CPU); deepgp ({source}) {passed}.")
    return "\n".join(lines)


def render(comparisons: list[SplitComparison], peers_path, curves_path=None, left_out: list[str] = (),
           iterations: int = DEFAULT_ITERATIONS) -> str:
    """The Markdown document: what was read, the summary line, the compact and the full tables, then a
    table per data set."""
    same = sum(c.curve.same_run for c in comparisons)
    sources = f"peers: `{Path(peers_path).name}`" + (f"; deepgp: `{Path(curves_path).name}`" if curves_path else "")
    lines = ["# Time to quality: deepgp against the peers", "",
             f"Read {sources}. deepgp: {MODEL['model']} trained by IW (recipe `{MODEL['recipe']}`, no overrides); "
             f"the curves of {same} of the {len(comparisons)} splits come from the peers' own run, the others "
             "from separate time_to_quality.py runs (on the split's first test points; the peers' means over the "
             "same points). Test log density per point, standardised units, higher is better: the peers' exact "
             "density, deepgp's mixture over 2,000 draws. Best peer: each split's best. First pass: the training "
             "seconds of deepgp's first snapshot at or above it. ÷ wall, ÷ CPU: that time over the best peer's "
             "wall-clock and CPU fit seconds (a loaded machine stretches the wall clock; deepgp's seconds are "
             "as its runs recorded them). Means over the splits named.", "",
             summary_line(comparisons, iterations), "", readme_table(comparisons, iterations), "",
             "## Every column", "", full_table(comparisons, iterations), "", "## Per data set", ""]
    for splits in by_dataset(comparisons).values():
        lines += [dataset_table(splits), ""]
    if left_out:
        lines += ["Rows not compared: " + "; ".join(left_out) + ".", ""]
    return "\n".join(lines)


# -- figure -----------------------------------------------------------------------------------------------
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_STYLES = ("-", "--", ":", "-.")


def _seconds_axis(ax) -> None:
    """A log-scale seconds axis labelled in plain numbers (20, 50, 100): at 1, 2 and 5 times each power of ten
    where the data span less than two decades (where a decade's one tick would leave it unlabelled), else at the
    powers of ten; minor ticks unlabelled (matplotlib labels them on a short axis, where they overlap)."""
    ax.set_xscale("log")
    low, high = ax.get_xlim()
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if high < 100 * low else (1.0,)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def figure(comparisons: list[SplitComparison], columns: int = 3) -> Figure:
    """Per data set a panel: test log density against wall seconds (log scale); deepgp's curves as
    lines (one per split, one colour, a line style per split), each peer as a point per split (a marker
    per peer) at its wall-clock fit seconds with a thin bar back to its CPU seconds, and each split's best
    peer level as a thin grey line in that split's style."""
    groups = by_dataset(comparisons)
    names = list(dict.fromkeys(p for c in comparisons for p in c.peers))
    colours = {p: f"C{i + 1}" for i, p in enumerate(names)}
    splits = sorted({c.split for c in comparisons})
    style = {s: _STYLES[i % len(_STYLES)] for i, s in enumerate(splits)}
    cols = min(columns, len(groups))
    rows = math.ceil(len(groups) / cols)
    fig = Figure(figsize=(3.6 * cols, 2.9 * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, (d, cs) in zip(axes.flat, groups.items()):
        for c in cs:
            ax.axhline(c.best.log_density, color="0.6", lw=0.7, ls=style[c.split], zorder=1)
            snaps = c.curve.snapshots
            ax.plot([s.seconds for s in snaps], [s.log_density for s in snaps], color="C0", ls=style[c.split],
                    marker=".", ms=4, lw=1.4, zorder=3)
            for name, fit in c.peers.items():
                marker = _MARKERS[names.index(name) % len(_MARKERS)]
                if fit.fit_cpu_seconds is not None:
                    ax.plot([fit.fit_cpu_seconds, fit.fit_seconds], [fit.log_density] * 2, color=colours[name],
                            lw=0.6, alpha=0.5, zorder=2)
                ax.plot(fit.fit_seconds, fit.log_density, marker, color=colours[name], ms=5, mec="white", mew=0.4,
                        zorder=4)
        _seconds_axis(ax)
        ax.set_title(f"{d} (splits {_splits([c.split for c in cs])})", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="major", lw=0.3, alpha=0.5)
    for i, ax in enumerate(axes.flat[:len(groups)]):
        if i + cols >= len(groups):  # (the lowest panel of its column)
            ax.set_xlabel("wall seconds (log scale)", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("test log density", fontsize=8)
    for ax in list(axes.flat)[len(groups):]:
        ax.set_visible(False)
    handles = [Line2D([], [], color="C0", marker=".", label=f"deepgp {MODEL['model']} (IW)")]
    handles += [Line2D([], [], ls="", marker=_MARKERS[i % len(_MARKERS)], color=colours[n], label=n)
                for i, n in enumerate(names)]
    handles += [Line2D([], [], color="0.6", lw=0.7, label="best peer's level")]
    handles += [Line2D([], [], color="0.3", ls=style[s], label=f"split {s}") for s in splits]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5), fontsize=7, frameon=False)
    fig.suptitle("Test log density against training time: deepgp's curve, the peers' fits (a bar back to "
                 "their CPU seconds)", fontsize=9)
    return fig
