"""The paper's five conclusions judged by the criteria of conclusions.md, on `deepgp benchmark` results.

    python benchmarks/uci/conclusions.py RESULTS.csv [RESULTS.csv ...] [--paper PAPER_TABLE1_CSV]
        [--s1 PAPER_S1_CSV] [--s2 PAPER_S2_CSV] [--recipe paper|fast] [--inner-width input ...]
        [--data-dir DIR] [--out FILE] [--update benchmarks/uci/conclusions.md]

Writes the "## Evidence and verdicts" section of conclusions.md: for each criterion, the evidence
table, the counts (comparisons or data sets available against those the criterion ranges over),
the runs and iterations behind the numbers, and a verdict: reproduced, partly, not reproduced, or
"no verdict" naming what is missing. ``--update FILE`` replaces that section of FILE (from its
heading to the end) and keeps the hand-written criteria above it.

ours(d, c) is the test KDE log-likelihood of column c on data set d, at the cell's longest budget,
averaged over the runs (splits) that every Table 1 column of data set d has, so that a criterion
compares its columns on the same splits (:func:`deepgp_bench.report.summarise`): a split that
only some of them have is left out until the others have it too, and a cell with none of those
runs (a baseline run on other splits) counts as missing. Where one cell (dataset,
model, method) has rows at several settings, the rows of ``--recipe`` (default: the recipe of most
rows) are kept, then the setting of most rows; settings are named against those given as ``deepgp
report`` takes them (``--inner-width input``: the paper's inner layers on every data set; default: the
defaults). The output lists the settings used. With the
paper's tables, each criterion is also applied to the paper's own means, as a yardstick.

Readings of the criteria where their words leave a choice: a bare model name (LV-GP, LV-GP-GP-GP in
conclusions 3 and 4) is the better of its VI and IW columns; "the LV models' marginals are
non-Gaussian" (4) holds when every LV column's W is below 0.99; a median (conclusion 2) is positive
only above the page's equality band of 0.05 nats, level within it, and "partly" is a positive median
at two depths or more; "below" (5) is likewise more than 0.05 below; CVAE is CVAE-50 trained by VI,
and "does not beat" (5) is LV-GP-GP-GP (IW) equal or better.

Where the results also hold IW rows at another ``inner_sampling`` than the cells' own (set aside),
conclusion 2 is recomputed with them on the data sets that have them, and the page states that
dependence beside the verdict. A sub-claim without its own thresholds is reproduced when it holds
on every data set measured and partly on at least half (as conclusion 3); "most" is more than half.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from deepgp.datasets.uci import list_uci
from deepgp.storage import check_writable
from deepgp_bench.cli import add_reference_settings, reference_of
from deepgp_bench.report import NON_GAUSSIAN_W, average_ranks, label, read_paper, read_paper_sizes, summarise
from deepgp_bench.runner import CONFIGS, _text, load_results, variant

HEADING = "## Evidence and verdicts"
METRIC = "test_loglik_kde"
EQUAL = 0.05  # "equal or better": at least the other value minus this
CONSIDERABLY = 0.2  # "considerably better": more than this above
SHARE_EQUAL, SHARE_CONSIDERABLY, SHARE_PARTLY = 0.8, 0.25, 0.6  # conclusion 1's thresholds
VERY_POOR = 0.5  # conclusion 2's sub-claim: VI at least this far below IW
BEATS = 0.1  # conclusion 3: "beats ... by at least"
SMALL = 1000  # conclusion 5's sub-claims: N below this is a small set
TOL = 1e-9  # a margin met exactly (the paper's means have two decimals) counts as met, despite float rounding

REPRODUCED, PARTLY, NOT, NONE = "reproduced", "partly", "not reproduced", "no verdict"

GP, GP2, GP3 = ("GP", "vi"), ("GP-GP", "vi"), ("GP-GP-GP", "vi")
LV_MODELS = ("LV-GP", "LV-GP-GP", "LV-GP-GP-GP")
LV = [c for c in CONFIGS if c[0] in LV_MODELS]  # the six latent-variable columns
DEEP = [GP2, GP3]  # the deep noise-free columns
PAIRS = [("LV-GP", GP), ("LV-GP-GP", GP2), ("LV-GP-GP-GP", GP3)]  # conclusion 1: with and without LV
LINEAR, CVAE = ("Linear", "vi"), ("CVAE-50", "vi")
LV3_IW = ("LV-GP-GP-GP", "iw")
USED = {*CONFIGS, LINEAR, CVAE}  # the columns any criterion reads
MARGINALS, MAPPINGS = ("forest", "power", "keggundirected"), ("sml", "kin8nm")  # conclusion 3
BOTH = ("bike", "keggdirected")  # conclusion 4
VI_POOR = ("keggundirected", "autompg")  # conclusion 2's sub-claim (the paper also names servo)


def at_least(a: float, b: float) -> bool:
    """a ≥ b, a tie within rounding included."""
    return a >= b - TOL


def above(a: float, b: float) -> bool:
    """a > b, beyond rounding."""
    return a > b + TOL


def name(config) -> str:
    return label(*config)


@dataclass
class Evidence:
    """What the criteria read. ``runs[(dataset, model, method)]``: the test log-likelihood per run,
    {(split, seed): value}; ``w``: the median Shapiro-Wilk W per cell (mean over its runs); ``n``:
    each data set's size N; ``budget``: per cell, (its splits, its iterations) (none for the paper)."""

    runs: dict = field(default_factory=dict)
    w: dict = field(default_factory=dict)
    n: dict = field(default_factory=dict)
    budget: dict = field(default_factory=dict)

    def mean(self, d: str, config) -> float | None:
        """ours(d, c): the mean over the cell's runs; None where the cell has none."""
        values = self.runs.get((d, *config))
        if not values:
            return None
        m = float(np.mean(list(values.values())))
        return None if math.isnan(m) else m

    def shapiro(self, d: str, config) -> float | None:
        v = self.w.get((d, *config))
        return None if v is None or math.isnan(v) else v

    def datasets(self) -> set[str]:
        return {d for d, *_ in self.runs}


@dataclass
class Verdict:
    """One criterion's outcome: the verdict, what it lacks (for "no verdict"), the evidence as Markdown
    lines, the counts in words, and the cells and data sets behind the numbers."""

    title: str
    verdict: str
    missing: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    counts: str = ""
    cells: set = field(default_factory=set)
    datasets: list[str] = field(default_factory=list)
    needed: int = 0  # the data sets the criterion ranges over
    named: bool = False  # the criterion names its data sets (else it ranges over all of them)
    depends: str = ""  # what the verdict depends on, in one sentence (beside it in the summary)
    depends_lines: list[str] = field(default_factory=list)  # and its evidence, beside the section's verdict

    def text(self) -> str:
        if self.verdict == NONE:
            return f"**no verdict** (missing: {'; '.join(self.missing)})"
        return f"**{self.verdict}**"


def _lacking(ev: Evidence, d: str, universe, means=(), shapiro=()) -> list[str]:
    """What data set d lacks of the columns ``means`` and the W of ``shapiro``: [] if nothing."""
    if d not in universe:
        return [f"{d} (not among the data sets)"]
    if d not in ev.datasets():
        return [f"{d} (no results)"]
    lacks = [name(c) for c in means if ev.mean(d, c) is None]
    if means and len(lacks) == len(means):
        return [f"{d} (none of the {len(means)} columns needed)"]
    lacks += [f"W of {name(c)}" for c in shapiro if ev.shapiro(d, c) is None]
    return [f"{d}: {', '.join(lacks)}"] if lacks else []


def _share_verdict(hits: int, total: int) -> str:
    """All → reproduced; at least half → partly; else not reproduced (the document's convention)."""
    return REPRODUCED if hits == total else PARTLY if 2 * hits >= total else NOT


def _row(*cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _rule(n: int) -> str:
    return "| --- |" + " ---: |" * (n - 1)


def _diff(x: float | None) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:+.2f}"


def _sets(k: int) -> str:
    return f"{k} data set{'s' * (k != 1)}"


def _yes(ok: bool) -> str:
    return "yes" if ok else "no"


# -- the criteria ----------------------------------------------------------------------------------
def criterion1(ev: Evidence, universe: list[str]) -> Verdict:
    """Latent variables improve performance: over every data set, LV-GP against GP, LV-GP-GP against
    GP-GP, LV-GP-GP-GP against GP-GP-GP, the LV model by VI and by IW. Equal or better: ours(LV) ≥
    ours(no LV) − 0.05; considerably better: ours(LV) − ours(no LV) > 0.2. Reproduced: ≥ 80% equal or
    better and ≥ 25% considerably better; partly: ≥ 60% equal or better."""
    v = Verdict("1. Latent variables improve performance", NONE, needed=len(universe))
    header = ["data set", *(f"{name((lv, m))} − {name(base)}" for lv, base in PAIRS for m in ("vi", "iw"))]
    v.lines = [_row(*header), _rule(len(header))]
    equal = considerable = total = 0
    for d in universe:
        cells, marks = [], 0
        for lv, base in PAIRS:
            for m in ("vi", "iw"):
                a, b = ev.mean(d, (lv, m)), ev.mean(d, base)
                if a is None or b is None:
                    cells.append("–")
                    continue
                ok, big = at_least(a, b - EQUAL), above(a - b, CONSIDERABLY)
                equal, considerable, total, marks = equal + ok, considerable + big, total + 1, marks + 1
                cells.append(f"{a - b:+.2f} {'✓✓' if big else '✓' if ok else '✗'}")
                v.cells |= {(d, lv, m), (d, *base)}
        if marks:
            v.datasets.append(d)
            v.lines.append(_row(d, *cells))
    v.lines += ["", "✓ equal or better (at least the other minus 0.05), ✓✓ considerably better (more than 0.2 "
                "above), ✗ worse."]
    needed = 2 * len(PAIRS) * len(universe)
    if not total:
        v.missing = ["any data set with an LV column and its column without LV"]
        v.counts = f"0 of the {needed} comparisons."
        return v
    share, big = equal / total, considerable / total
    v.counts = (f"{total} of the {needed} comparisons ({len(v.datasets)} of {len(universe)} data sets): equal or "
                f"better in {equal} ({share:.0%}), considerably better in {considerable} ({big:.0%}). Reproduced "
                f"needs ≥ {SHARE_EQUAL:.0%} and ≥ {SHARE_CONSIDERABLY:.0%}; partly ≥ {SHARE_PARTLY:.0%}.")
    if share >= SHARE_EQUAL - TOL and big >= SHARE_CONSIDERABLY - TOL:
        v.verdict = REPRODUCED
    elif share >= SHARE_PARTLY - TOL:
        v.verdict = PARTLY
    else:
        v.verdict = NOT
    return v


def band(x: float) -> str:
    """"positive", "level" or "negative": a difference in nats read against the equality band, so that
    a median of +0.004 is level, as the page treats any two values within 0.05 as equal."""
    return "positive" if above(x, EQUAL) else "negative" if above(-x, EQUAL) else "level"


def iw_minus_vi(ev: Evidence, datasets) -> dict[str, dict[str, float]]:
    """{depth's model: {data set: ours(LV^k, IW) − ours(LV^k, VI)}} where both cells exist (two −∞ of the
    paper's: no difference)."""
    out: dict[str, dict[str, float]] = {m: {} for m in LV_MODELS}
    for d in datasets:
        for m in LV_MODELS:
            iw, vi = ev.mean(d, (m, "iw")), ev.mean(d, (m, "vi"))
            if iw is not None and vi is not None and not math.isnan(iw - vi):
                out[m][d] = iw - vi
    return out


def criterion2(ev: Evidence, universe: list[str]) -> Verdict:
    """IW outperforms VI, more so for deeper models: at each depth k the median over data sets of
    ours(LV^k, IW) − ours(LV^k, VI). Reproduced: positive (above the 0.05 band) at all three depths
    and median(3) ≥ median(1); partly: positive at (at least) two; "no verdict" where a depth has no
    data set."""
    v = Verdict("2. IW outperforms VI, more so for deeper models", NONE, needed=len(universe))
    header = ["data set", *(f"{m}: IW − VI" for m in LV_MODELS)]
    v.lines = [_row(*header), _rule(len(header))]
    by_depth = iw_minus_vi(ev, universe)
    diffs = {m: list(x.values()) for m, x in by_depth.items()}
    for d in universe:
        cells = [_diff(by_depth[m].get(d)) for m in LV_MODELS]
        v.cells |= {(d, m, k) for m in LV_MODELS if d in by_depth[m] for k in ("iw", "vi")}
        if any(c != "–" for c in cells):
            v.datasets.append(d)
            v.lines.append(_row(d, *cells))
    medians = {m: float(np.median(x)) if x else None for m, x in diffs.items()}
    v.lines.append(_row("**median**", *(_median_text(medians[m]) for m in LV_MODELS)))
    v.lines.append(_row("data sets", *(len(diffs[m]) for m in LV_MODELS)))
    v.lines += ["", f"A median is positive above +{EQUAL} and level within ±{EQUAL} (the page's equality band). "
                "Reproduced: the three medians positive and depth 3's at least depth 1's; partly: positive at two "
                "depths or more."]
    v.counts = (f"{len(v.datasets)} of {len(universe)} data sets have IW and VI at some depth "
                f"(depth 1: {len(diffs['LV-GP'])}, 2: {len(diffs['LV-GP-GP'])}, 3: {len(diffs['LV-GP-GP-GP'])}).")
    absent = [m for m in LV_MODELS if medians[m] is None]
    if absent:
        v.missing = [f"{name((m, 'iw'))} and {name((m, 'vi'))} on any data set" for m in absent]
        return v
    positive = sum(band(medians[m]) == "positive" for m in LV_MODELS)
    if positive == 3 and at_least(medians["LV-GP-GP-GP"], medians["LV-GP"]):
        v.verdict = REPRODUCED
    else:
        v.verdict = PARTLY if positive >= 2 else NOT
    return v


def _median_text(x: float | None) -> str:
    """A median to three decimals with its reading against the band: "+0.004 (level)"."""
    return "–" if x is None or math.isnan(x) else f"{x:+.3f} ({band(x)})"


def criterion2_vi_poor(ev: Evidence, universe: list[str], d: str) -> Verdict:
    """Conclusion 2's sub-claim on data set d: some VI latent-variable model is very poor and IW is
    not: at some depth, ours(LV^k, VI) ≤ ours(LV^k, IW) − 0.5. Reproduced where a depth shows it; not
    reproduced where all three depths are measured and none does; else no verdict."""
    v = Verdict(f"2. sub-claim: VI very poor on {d}", NONE, needed=1, named=True)
    header = ["data set", *(f"{m}: IW − VI" for m in LV_MODELS), "VI ≥ 0.5 below IW"]
    v.lines = [_row(*header), _rule(len(header))]
    cells, holds = [], False
    for m in LV_MODELS:
        iw, vi = ev.mean(d, (m, "iw")), ev.mean(d, (m, "vi"))
        if iw is None or vi is None:
            cells.append("–")
            continue
        holds |= not math.isnan(iw - vi) and at_least(iw - vi, VERY_POOR)
        cells.append(_diff(iw - vi))
        v.cells |= {(d, m, "iw"), (d, m, "vi")}
    lacks = _lacking(ev, d, universe, [(m, k) for m in LV_MODELS for k in ("vi", "iw")])
    if cells.count("–") < len(cells):
        v.datasets = [d]
        v.lines += [_row(d, *cells, _yes(holds)), "", f"Holds where VI is at least {VERY_POOR} below IW at one depth "
                    "or more."]
    v.counts = f"{len(LV_MODELS) - cells.count('–')} of the {len(LV_MODELS)} depths measured on {d}."
    if holds:
        v.verdict = REPRODUCED  # one depth suffices, whatever the others
    elif lacks:
        v.missing = lacks
    else:
        v.verdict = NOT
    return v


def criterion3(ev: Evidence, universe: list[str]) -> Verdict:
    """Some data sets need latent variables, others depth. Marginals group (forest, power,
    keggundirected): max over the LV columns ≥ max(GP-GP, GP-GP-GP) + 0.1, max(GP-GP, GP-GP-GP) ≤ GP +
    0.05, and the best LV column's W < 0.99. Mappings group (sml, kin8nm): max(GP-GP, GP-GP-GP) ≥
    LV-GP + 0.1, LV-GP being the better of its VI and IW columns. Reproduced: all five meet their test;
    partly: at least half; no verdict where one lacks a column."""
    v = Verdict("3. Some data sets need latent variables; others need depth", NONE,
                needed=len(MARGINALS) + len(MAPPINGS), named=True)
    head_m = ["data set (marginals)", "best LV column", "best deep noise-free", "GP", "best LV − best deep",
              "best deep − GP", "W of best LV", "meets"]
    head_p = ["data set (mappings)", "best deep noise-free", "LV-GP (better of VI, IW)", "best deep − LV-GP", "meets"]
    marg, mapp, meets, missing = [_row(*head_m), _rule(len(head_m))], [_row(*head_p), _rule(len(head_p))], 0, []
    for d in MARGINALS:
        lacks = _lacking(ev, d, universe, [*LV, *DEEP, GP])
        if not lacks:
            best = max(LV, key=lambda c: ev.mean(d, c))  # (the first of tied columns, in Table 1's order)
            w = ev.shapiro(d, best)
            lacks = _lacking(ev, d, universe, shapiro=[best])
        if lacks:
            missing += lacks
            continue
        lv, deep, gp = ev.mean(d, best), max(ev.mean(d, c) for c in DEEP), ev.mean(d, GP)
        ok = at_least(lv - deep, BEATS) and at_least(gp + EQUAL, deep) and w < NON_GAUSSIAN_W
        meets += ok
        v.datasets.append(d)
        v.cells |= {(d, *c) for c in [*LV, *DEEP, GP]}
        marg.append(_row(d, f"{name(best)} {lv:.2f}", f"{deep:.2f}", f"{gp:.2f}", f"{lv - deep:+.2f}",
                         f"{deep - gp:+.2f}", f"{w:.3f}", _yes(ok)))
    for d in MAPPINGS:
        lacks = _lacking(ev, d, universe, [*DEEP, ("LV-GP", "vi"), ("LV-GP", "iw")])
        if lacks:
            missing += lacks
            continue
        deep, lv = max(ev.mean(d, c) for c in DEEP), max(ev.mean(d, ("LV-GP", k)) for k in ("vi", "iw"))
        ok = at_least(deep - lv, BEATS)
        meets += ok
        v.datasets.append(d)
        v.cells |= {(d, *c) for c in [*DEEP, ("LV-GP", "vi"), ("LV-GP", "iw")]}
        mapp.append(_row(d, f"{deep:.2f}", f"{lv:.2f}", f"{deep - lv:+.2f}", _yes(ok)))
    v.lines = [*marg, "", *mapp, "", f"Marginals: best LV − best deep ≥ {BEATS}, best deep − GP ≤ {EQUAL}, W below "
               f"{NON_GAUSSIAN_W}. Mappings: best deep − LV-GP ≥ {BEATS}."]
    total = len(MARGINALS) + len(MAPPINGS)
    v.counts = f"{len(v.datasets)} of the {total} named data sets measured; {meets} of them meet their group's test."
    if missing:
        v.missing = missing
    else:
        v.verdict = _share_verdict(meets, total)
    return v


def criterion4(ev: Evidence, universe: list[str]) -> Verdict:
    """Some data sets benefit from both (bike, keggdirected): LV-GP (the better of VI, IW) and GP-GP
    each more than 0.05 above GP; every LV column's W < 0.99; LV-GP-GP-GP (the better of VI, IW) within
    0.05 of the best of the nine columns. Reproduced: both data sets; partly: one; not: neither."""
    v = Verdict("4. Some data sets benefit from both", NONE, needed=len(BOTH), named=True)
    head = ["data set", "LV-GP − GP", "GP-GP − GP", "largest W of the LV columns", "best of the nine",
            "LV-GP-GP-GP − best", "holds"]  # (LV-GP, LV-GP-GP-GP: the better of each one's VI and IW columns)
    v.lines = [_row(*head), _rule(len(head))]
    holds, missing = 0, []
    for d in BOTH:
        lacks = _lacking(ev, d, universe, CONFIGS, LV)
        if lacks:
            missing += lacks
            continue
        gp = ev.mean(d, GP)
        lv1 = max(ev.mean(d, ("LV-GP", k)) for k in ("vi", "iw"))
        lv3 = max(ev.mean(d, ("LV-GP-GP-GP", k)) for k in ("vi", "iw"))
        best = max(CONFIGS, key=lambda c: ev.mean(d, c))
        w = max(ev.shapiro(d, c) for c in LV)
        ok = (above(lv1 - gp, EQUAL) and above(ev.mean(d, GP2) - gp, EQUAL) and w < NON_GAUSSIAN_W
              and at_least(lv3, ev.mean(d, best) - EQUAL))
        holds += ok
        v.datasets.append(d)
        v.cells |= {(d, *c) for c in CONFIGS}
        v.lines.append(_row(d, f"{lv1 - gp:+.2f}", f"{ev.mean(d, GP2) - gp:+.2f}", f"{w:.3f}",
                            f"{name(best)} {ev.mean(d, best):.2f}", f"{lv3 - ev.mean(d, best):+.2f}", _yes(ok)))
    v.lines += ["", f"LV-GP, LV-GP-GP-GP: the better of each one's VI and IW columns. Holds: both differences above "
                f"{EQUAL}, every LV column's W below {NON_GAUSSIAN_W}, LV-GP-GP-GP − best ≥ −{EQUAL}."]
    v.counts = f"{len(v.datasets)} of the {len(BOTH)} named data sets measured; it holds on {holds}."
    if missing:
        v.missing = missing
    else:
        v.verdict = REPRODUCED if holds == len(BOTH) else PARTLY if holds else NOT
    return v


def criterion5(ev: Evidence, universe: list[str]) -> Verdict:
    """On average LV-GP-GP-GP is best: the nine columns' average rank over the data sets with all
    nine (ranks per split, 1 = lowest, :func:`deepgp_bench.report.average_ranks`). Reproduced:
    LV-GP-GP-GP (IW) has the best (highest) average rank; partly: (IW) or (VI) is among the best two."""
    v = Verdict("5. On average LV-GP-GP-GP is best", NONE, needed=len(universe))
    complete = [d for d in universe if all(ev.mean(d, c) is not None for c in CONFIGS)
                and set.intersection(*(set(ev.runs[(d, *c)]) for c in CONFIGS))]
    ranks = average_ranks({d: {c: ev.runs[(d, *c)] for c in CONFIGS} for d in complete}, list(CONFIGS))
    v.datasets = complete
    v.cells = {(d, *c) for d in complete for c in CONFIGS}
    v.counts = f"{len(complete)} of {len(universe)} data sets have all nine columns (on a common run)."
    if not complete:
        v.missing = ["any data set with all nine columns"]
        return v
    position = {c: 1 + sum(above(ranks[o][0], ranks[c][0]) for o in CONFIGS) for c in CONFIGS}
    head = ["column", "average rank (s.e.)", "position"]
    v.lines = [_row(*head), _rule(len(head))]
    for c in sorted(CONFIGS, key=lambda c: -ranks[c][0]):
        mean, se = ranks[c]
        v.lines.append(_row(name(c), f"{mean:.2f}" + (f" ({se:.2f})" if math.isfinite(se) else ""), position[c]))
    v.lines += ["", "Rank 9 is the highest test log-likelihood; position 1 the best average rank."]
    if position[LV3_IW] == 1:
        v.verdict = REPRODUCED
    elif min(position[LV3_IW], position[("LV-GP-GP-GP", "vi")]) <= 2:
        v.verdict = PARTLY
    else:
        v.verdict = NOT
    return v


def _sizes_known(ev: Evidence, universe: list[str], small: bool) -> list[str]:
    return [d for d in universe if d in ev.n and (ev.n[d] < SMALL) == small]


def _pairs(v: Verdict, datasets: list[str], value, first: tuple, second: tuple, holds, row) -> int:
    """For each data set with both ``value(d, first)`` and ``value(d, second)``: record it in ``v`` with its
    table line ``row(d, a, b, ok)``, ok = ``holds(a, b)``; returns on how many it holds."""
    hits = 0
    for d in datasets:
        a, b = value(d, first), value(d, second)
        if a is None or b is None:
            continue
        ok = holds(a, b)
        hits += ok
        v.datasets.append(d)
        v.cells |= {(d, *first), (d, *second)}
        v.lines.append(row(d, a, b, ok))
    return hits


def criterion5_small(ev: Evidence, universe: list[str]) -> Verdict:
    """CVAE overfits on the small sets: on each data set with N < 1,000, ours(CVAE-50) < ours(Linear) −
    0.05 (below the equality band). Reproduced: on every such data set measured; partly: on at least
    half."""
    v = Verdict("5. sub-claim: CVAE-50 below Linear where N < 1,000", NONE)
    head = ["data set", "N", "CVAE-50", "Linear", "CVAE-50 − Linear", "below"]
    v.lines = [_row(*head), _rule(len(head))]
    small = _sizes_known(ev, universe, small=True)
    hits = _pairs(v, small, ev.mean, CVAE, LINEAR, lambda a, b: above(b - EQUAL, a), lambda d, a, b, ok: _row(
        d, f"{ev.n[d]:,}", f"{a:.2f}", f"{b:.2f}", f"{a - b:+.2f}", _yes(ok)))
    v.lines += ["", f"N: training + test points. Below: more than {EQUAL} below. Reproduced: below on every data "
                "set measured; partly: on at least half."]
    return _subclaim(v, hits, len(small), "small data sets (N < 1,000)",
                     "CVAE-50 (VI) and Linear on a data set with N < 1,000")


def criterion5_large(ev: Evidence, universe: list[str]) -> Verdict:
    """CVAE does not beat LV-GP-GP-GP (IW) on the larger sets: on each data set with N ≥ 1,000,
    ours(LV-GP-GP-GP, IW) ≥ ours(CVAE-50) − 0.05 (equal or better). Reproduced: on every such data set
    measured; partly: on at least half."""
    v = Verdict("5. sub-claim: CVAE-50 does not beat LV-GP-GP-GP (IW) where N ≥ 1,000", NONE)
    head = ["data set", "N", "CVAE-50", "LV-GP-GP-GP (IWVI)", "LV-GP-GP-GP − CVAE-50", "not beaten"]
    v.lines = [_row(*head), _rule(len(head))]
    large = _sizes_known(ev, universe, small=False)
    hits = _pairs(v, large, ev.mean, CVAE, LV3_IW, lambda a, b: at_least(b, a - EQUAL), lambda d, a, b, ok: _row(
        d, f"{ev.n[d]:,}", f"{a:.2f}", f"{b:.2f}", _diff(b - a), _yes(ok)))
    v.lines += ["", f"Not beaten: LV-GP-GP-GP (IW) at least CVAE-50 − {EQUAL} (equal or better). Reproduced: on every "
                "data set measured; partly: on at least half."]
    return _subclaim(v, hits, len(large), "larger data sets (N ≥ 1,000)",
                     "CVAE-50 (VI) and LV-GP-GP-GP (IWVI) on a data set with N ≥ 1,000")


def criterion5_marginals(ev: Evidence, universe: list[str]) -> Verdict:
    """CVAE marginals are more Gaussian: W(CVAE-50) > W(LV-GP-GP-GP, IW) on most data sets (more than
    half of those with both); partly: on exactly half."""
    v = Verdict("5. sub-claim: CVAE-50's W above LV-GP-GP-GP (IW)'s on most data sets", NONE)
    head = ["data set", "W of CVAE-50", "W of LV-GP-GP-GP (IWVI)", "CVAE-50 above"]
    v.lines = [_row(*head), _rule(len(head))]
    hits = _pairs(v, universe, ev.shapiro, CVAE, LV3_IW, above,
                  lambda d, a, b, ok: _row(d, f"{a:.4f}", f"{b:.4f}", _yes(ok)))
    v.lines += ["", "Above: strictly (a tie is not above). Reproduced: on more than half of the data sets measured; "
                "partly: on half."]
    v = _subclaim(v, hits, len(universe), "data sets", "the W of CVAE-50 (VI) and of LV-GP-GP-GP (IWVI) on a data set")
    if v.verdict != NONE:  # "most": more than half
        k = len(v.datasets)
        v.verdict = REPRODUCED if 2 * hits > k else PARTLY if 2 * hits == k else NOT
    return v


def _subclaim(v: Verdict, hits: int, needed: int, what: str, missing: str) -> Verdict:
    k, v.needed = len(v.datasets), needed
    v.counts = f"{k} of the {needed} {what} measured; it holds on {hits}."
    if not k:
        v.missing = [missing]
    else:
        v.verdict = _share_verdict(hits, k)
    return v


def judge(ev: Evidence, universe: list[str]) -> list[Verdict]:
    """Every criterion and sub-claim, in the document's order."""
    return [criterion1(ev, universe), criterion2(ev, universe),
            *(criterion2_vi_poor(ev, universe, d) for d in VI_POOR), criterion3(ev, universe),
            criterion4(ev, universe), criterion5(ev, universe), criterion5_small(ev, universe),
            criterion5_large(ev, universe), criterion5_marginals(ev, universe)]


# -- reading the results ---------------------------------------------------------------------------
def select_rows(rows: list[dict], recipe: str | None = None,
                reference: dict | None = None) -> tuple[list[dict], str, dict]:
    """One setting per cell (dataset, model, method): among its rows' settings (their recipe and
    :func:`~deepgp_bench.runner.variant` against ``reference``, default the defaults), those of
    ``recipe`` (default: the recipe of most rows) where the cell has any, then the setting of most rows
    (ties: the reference's). Returns the rows kept, the recipe, and {cell: the settings set aside}."""
    recipe = recipe or Counter(r["recipe"] for r in rows).most_common(1)[0][0]
    reference = {k: v for k, v in (reference or {}).items() if k != "recipe"}  # (the recipe: chosen here)
    common = Counter(variant(r, reference=reference) for r in rows)
    settings: dict[tuple, dict[str, str]] = defaultdict(dict)
    for r in rows:
        settings[(r["dataset"], r["model"], r["method"])][variant(r, reference=reference)] = r["recipe"]
    chosen, aside = {}, {}
    for cell, found in settings.items():
        pool = sorted(v for v, rec in found.items() if rec == recipe) or sorted(found)
        chosen[cell] = max(pool, key=lambda v: (common[v], v == ""))  # (ties: the reference's, then by name)
        if len(found) > 1:
            aside[cell] = [v or _reference_text(reference) for v in sorted(found) if v != chosen[cell]]
    kept = [r for r in rows if variant(r, reference=reference) == chosen[(r["dataset"], r["model"], r["method"])]]
    return kept, recipe, aside


def _reference_text(reference: dict | None) -> str:
    """"the defaults", or "inner_width=input" (the settings the rows were compared against)."""
    return ", ".join(f"{k}={_text(v)}" for k, v in (reference or {}).items() if k != "recipe") or "the defaults"


def _options(reference: dict | None) -> list[str]:
    """``reference`` as the command line options that give it ("--inner-width input")."""
    out = []
    for name, value in (reference or {}).items():
        option = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            out.append(option if value else "--no-" + name.replace("_", "-"))
        else:
            out.append(f"{option} {_text(value)}")
    return out


def evidence_from_rows(rows: list[dict]) -> Evidence:
    """The criteria's inputs from results rows of one setting per cell (:func:`select_rows`): each
    cell at its longest budget (:func:`~deepgp_bench.report.summarise`)."""
    ev = Evidence()
    cell = lambda g: g[:3]  # noqa: E731  (summarise's groups are (dataset, model, method, variant))
    ev.runs = _on_common_runs({cell(g): v for g, v in summarise(rows, METRIC).items()})
    w = _on_common_runs({cell(g): v for g, v in summarise(rows, "shapiro_median").items()}, ev.runs)
    ev.w = {c: float(np.mean(list(v.values()))) for c, v in w.items() if c in ev.runs}
    iterations = {cell(g): max(v.values()) for g, v in summarise(rows, "iterations").items()}
    ev.budget = {c: (tuple(sorted({s for s, _ in ev.runs[c]})), len(ev.runs[c]), iterations[c]) for c in ev.runs}
    for r in rows:  # N = training + test points (a test set capped by test_limit only where N > 10 × the cap)
        if r["n_train"] is not None and r["n_test"] is not None:  # (unknown in a file they were deleted from)
            ev.n[r["dataset"]] = max(ev.n.get(r["dataset"], 0), r["n_train"] + r["n_test"])
    return ev


def _on_common_runs(cells: dict, runs: dict | None = None) -> dict:
    """``cells`` {(dataset, model, method): {run: value}} restricted, per data set, to the runs that
    every Table 1 column it has shares (of ``runs``, where given), so that the columns a criterion
    compares are averaged over the same splits; a cell without any of those runs (a baseline run on
    other splits, or every cell where the columns share none) is left out. A data set without Table 1
    columns keeps its cells."""
    common: dict[str, set] = {}
    for (d, *config), values in (runs or cells).items():
        if tuple(config) in CONFIGS:
            common[d] = common[d] & set(values) if d in common else set(values)
    kept = {}
    for c, values in cells.items():
        shared = {k: v for k, v in values.items() if k in common[c[0]]} if c[0] in common else values
        if shared:
            kept[c] = shared
    return kept


def evidence_from_paper(paper=None, s1=None, s2=None) -> Evidence:
    """The paper's means as evidence (one run per cell): Table 1 (``paper``) over Table S1 (``s1``),
    the W of Table S2 (``s2``), N from whichever table has it."""
    ev = Evidence()
    means = {**(read_paper(s1) if s1 else {}), **(read_paper(paper) if paper else {})}
    ev.runs = {k: {(0, 0): v[0]} for k, v in means.items()}
    ev.w = {k: v[0] for k, v in read_paper(s2).items()} if s2 else {}
    for path in (s2, s1, paper):
        if path:
            ev.n.update(read_paper_sizes(path))
    return ev


SAMPLING_WORDS = {"independent": "per-sample", "joint": "joint", "batch": "batch"}


def _draws(sampling: str) -> str:
    """"per-sample draws (`inner_sampling=independent`)"."""
    return f"{SAMPLING_WORDS.get(sampling, sampling)} draws (`inner_sampling={sampling}`)"


def sampling_dependence(rows: list[dict], kept: list[dict], recipe: str, reference: dict | None,
                        ev: Evidence) -> tuple[str, list[str]]:
    """How conclusion 2 reads with the IW rows at another ``inner_sampling`` than the cells' own, where the
    results hold such rows at the kept recipe: per depth, the median IW − VI over the data sets that have
    them, beside the kept cells' median on the same data sets and runs. Returns a sentence for the summary
    and the section's lines ("", [] where the results hold no such rows)."""
    own = {(r["dataset"], r["model"]): r["inner_sampling"] for r in kept if r["method"] == "iw"}
    others: dict[str, set] = defaultdict(set)
    for r in rows:
        cell = (r["dataset"], r["model"])
        if r["method"] == "iw" and r["recipe"] == recipe and cell in own and r["inner_sampling"] != own[cell]:
            others[r["inner_sampling"]].add(cell)
    if not others:
        return "", []
    mine = Counter(own.values()).most_common(1)[0][0]
    summary, lines = [], []
    for sampling, cells in sorted(others.items()):
        rows_alt = [r for r in rows if not (r["method"] == "iw" and (r["dataset"], r["model"]) in cells
                                            and (r["inner_sampling"] != sampling or r["recipe"] != recipe))]
        ev_alt = evidence_from_rows(select_rows(rows_alt, recipe, reference)[0])
        same = Evidence(runs={c: {k: v for k, v in values.items() if k in ev_alt.runs.get(c, {})}
                              for c, values in ev.runs.items()})  # the kept cells on the alternative's runs
        table = []
        for m in LV_MODELS:
            alt = iw_minus_vi(ev_alt, sorted(d for d, model in cells if model == m))[m]
            if not alt:
                continue
            kept_diffs = iw_minus_vi(same, alt)[m]
            a, b = float(np.median(list(alt.values()))), float(np.median(list(kept_diffs.values())))
            table.append(_row(m, len(alt), _median_text(a), _median_text(b)))
            summary.append(f"{m} {a:+.3f} ({band(a)}; {_sets(len(alt))}, where {SAMPLING_WORDS.get(mine, mine)} "
                           f"draws give {b:+.3f})")
        if not table:
            continue
        sets = sorted({d for d, _ in cells}, key=lambda d: (ev.n.get(d, math.inf), d))
        head = ["depth", "data sets", f"IW − VI, {SAMPLING_WORDS.get(sampling, sampling)} draws: median",
                f"IW − VI, {SAMPLING_WORDS.get(mine, mine)} draws (these cells), same data sets and runs: median"]
        lines += [f"**Depends on the IW bound's inner draws.** The IW cells above use {_draws(mine)}. The results "
                  f"also hold IW cells with {_draws(sampling)} at the same recipe, on {_sets(len(sets))} "
                  f"({', '.join(sets)}); with them in place of these cells:", "", _row(*head), _rule(len(head)),
                  *table, ""]
    text = (f"the IW bound's inner draws ({SAMPLING_WORDS.get(mine, mine)} here): with "
            + " or ".join(f"{SAMPLING_WORDS.get(s, s)} draws" for s in sorted(others))
            + f" the median IW − VI is {', '.join(summary)}")
    return text, lines


def _budget_text(ev: Evidence, cells) -> str:
    """"1 run (split 0) × 10,000 it. (36 cells); 2 runs (splits 0, 1) × 5,000 it. (6 cells)"."""
    groups = Counter(ev.budget[c] for c in cells if c in ev.budget)
    parts = []
    for (splits, runs, iterations), k in sorted(groups.items(), key=lambda x: (-x[1], x[0])):
        where = f"split{'s' if len(splits) > 1 else ''} {', '.join(map(str, splits))}"
        parts.append(f"{runs} run{'s' if runs > 1 else ''} ({where}) × {iterations:,} it. ({k} cell{'s' * (k > 1)})")
    return "; ".join(parts) or "–"


def _shown(path) -> str:
    """A path as given where it lies under the working folder, else its name (no machine's layout)."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return p.name


# -- the section -----------------------------------------------------------------------------------
def render(results: list, paper=None, s1=None, s2=None, recipe: str | None = None, data_dir=None,
           universe: list[str] | None = None, reference: dict | None = None) -> str:
    """The Markdown section "## Evidence and verdicts" for the results CSVs ``results``. ``universe``:
    every data set a criterion ranges over (default: those of the data folder, :func:`list_uci`, with
    those of the results)."""
    rows, damaged = [], []
    for path in results:
        loaded = load_results(path)
        rows += loaded.rows
        damaged += [f"{_shown(path)}: {len(loaded.damaged)}"] if loaded.damaged else []
    other = Counter(name((r["model"], r["method"])) for r in rows if (r["model"], r["method"]) not in USED)
    rows = [r for r in rows if (r["model"], r["method"]) in USED]
    if not rows:
        raise ValueError("the results hold no rows of the columns the criteria read (Table 1's nine, Linear, CVAE-50)")
    kept, chosen, aside = select_rows(rows, recipe, reference)
    compared = {k: v for k, v in (reference or {}).items() if k != "recipe"}  # (as select_rows names settings)
    ev = evidence_from_rows(kept)
    yardstick = evidence_from_paper(paper, s1, s2) if (paper or s1) else None
    if universe is None:
        folder = list_uci(data_dir)
        universe = sorted(set(folder) | ev.datasets())
        where = "`--data-dir`" if data_dir is not None else "`$DEEPGP_DATA`"
        source = (f"in the data folder ({where})" if folder
                  else "(no data folder was found: those with results only)")
    else:
        source = "given"
    universe = sorted(universe, key=lambda d: (ev.n.get(d) or (yardstick.n.get(d) if yardstick else None)
                                               or math.inf, d))
    if yardstick:
        # sizes the results lack (the data sets not run) from the paper's table, for the N < 1,000 split
        ev.n = {**{d: n for d, n in yardstick.n.items() if d in universe}, **ev.n}
    verdicts = judge(ev, universe)
    depends, depends_lines = sampling_dependence(rows, kept, chosen, reference, ev)
    if depends:
        c2 = next(v for v in verdicts if v.title.startswith("2. IW outperforms VI"))
        c2.depends, c2.depends_lines = depends, depends_lines

    command = ["python benchmarks/uci/conclusions.py", *map(_shown, results),
               *(['--paper "$PAPER_TABLE1"'] if paper else []), *(['--s1 "$PAPER_S1"'] if s1 else []),
               *(['--s2 "$PAPER_S2"'] if s2 else []), *_options(reference), "--update benchmarks/uci/conclusions.md"]
    files = ", ".join(f"`{_shown(p)}`" for p in results)
    lines = [HEADING, "", f"Computed by `benchmarks/uci/conclusions.py` from {files}: {len(kept)} rows of the "
             "columns the criteria read. This section is regenerated, not edited:", "", "```sh",
             " \\\n    ".join(command), "```", ""]
    have = [d for d in universe if d in ev.datasets()]
    lacking = [d for d in universe if d not in ev.datasets()]
    lines.append(f"- **Data sets with results: {len(have)} of the {len(universe)} {source}**: {', '.join(have)}.")
    if lacking:
        lines.append(f"- Without results: {', '.join(lacking)}.")
    partial = []
    for d in have:
        lacks = [name(c) for c in CONFIGS if ev.mean(d, c) is None]
        if lacks:
            partial.append(f"{d} ({'none of them' if len(lacks) == len(CONFIGS) else 'lacks ' + ', '.join(lacks)})")
    if partial:
        lines.append(f"- With results but not all nine columns: {'; '.join(partial)}.")
    how = "given by `--recipe`" if recipe else "the recipe of most rows; `--recipe` chooses"
    lines.append(f"- Recipe, where a cell has rows of several: {chosen} ({how}). ours(d, c): the test KDE "
                 "log-likelihood at the cell's longest budget, mean over the runs that every Table 1 column of "
                 "its data set has (a cell with none of them counts as missing); W: the median Shapiro-Wilk W, "
                 "mean over the same runs.")
    settings: dict[str, list] = defaultdict(list)
    for r in kept:
        settings[variant(r, reference=compared) or _reference_text(compared)].append(r)
    for text, group in settings.items():
        cells = {(r["dataset"], r["model"], r["method"]) for r in group}
        models = list(dict.fromkeys(name((r["model"], r["method"])) for r in group))
        extra = sorted({f"protocol {r['protocol']}, M = {r['num_inducing']}, ≤ {r['test_limit']:,} test points"
                        for r in group})
        lines.append(f"- Setting `{text}` ({'; '.join(extra)}): {len(cells)} cells, "
                     f"{len({c[0] for c in cells})} data sets, {', '.join(models)}; {_budget_text(ev, cells)}.")
    if aside:
        by_setting: dict[str, list] = defaultdict(list)
        for cell, found in aside.items():
            for text in found:
                by_setting[text].append(cell)
        lines.append("- Rows set aside, at another setting than their cell's: " + "; ".join(
            f"`{text}` ({len(cells)} cell{'s' * (len(cells) > 1)} on {', '.join(dict.fromkeys(c[0] for c in cells))})"
            for text, cells in by_setting.items()) + ".")
    if other:
        lines.append(f"- Rows no criterion reads: {', '.join(f'{k} ({n})' for k, n in other.items())}.")
    if damaged:
        lines.append(f"- Damaged lines ignored: {', '.join(damaged)}.")
    if yardstick:
        tables = ", ".join(f"`{Path(p).name}`" for p in (paper, s1, s2) if p)
        lines.append(f"- The paper's means ({tables}) by the same test, as a yardstick: on the data sets behind "
                     "our verdict, and on all of ours it has.")
    lines.append("- Verdicts on few data sets are weak: each says how many data sets back it.")

    paper_all, paper_same = {}, {}  # {title: the paper's verdict} on all its data sets, on those behind ours
    if yardstick:
        known = [d for d in universe if d in yardstick.datasets()]
        paper_all = {v.title: v for v in judge(yardstick, known)}
        for v in verdicts:
            same = [d for d in v.datasets if d in yardstick.datasets()]
            if not v.named and same:
                paper_same[v.title] = next(x for x in judge(yardstick, same) if x.title == v.title)
    dependent = any(v.depends for v in verdicts)
    head = ["conclusion", "verdict", "data sets behind it", "runs × iterations",
            *(["the paper's means, same test"] if yardstick else []), *(["depends on"] if dependent else [])]
    lines += ["", _row(*head), "|" + " --- |" * len(head)]
    for v in verdicts:
        paper_text = []
        if yardstick:
            same = paper_same.get(v.title)
            whole = paper_all[v.title]
            paper_text = [(f"{same.verdict} on these {len(same.datasets)}; " if same else "")
                          + f"{whole.verdict} on {len(whole.datasets)}"]
        behind = f"{len(v.datasets)} of {v.needed}"
        lines.append(_row(v.title, v.text(), behind, _budget_text(ev, v.cells), *paper_text,
                          *([v.depends or "–"] if dependent else [])))

    for v in verdicts:
        lines += ["", f"### {v.title}", "", f"Verdict: {v.text()}. {v.counts}", "",
                  f"Behind the numbers: {_budget_text(ev, v.cells)}."]
        if yardstick:
            whole = paper_all[v.title]
            same = paper_same.get(v.title)
            lines.append(f"The paper's means by the same test: {whole.text()} on the {_sets(len(whole.datasets))} of "
                         "ours it has" + (f"; {same.text()} on the {len(same.datasets)} behind our verdict" if same
                                          else "") + ".")
        if v.datasets:
            lines += ["", *v.lines]
        if v.depends_lines:
            lines += ["", *v.depends_lines[:-1]]
    return "\n".join(_wrap(lines)) + "\n"


def _wrap(lines: list[str], width: int = 100) -> list[str]:
    """Prose lines folded at ``width`` (as the hand-written page is), tables and code kept whole."""
    out, code = [], False
    for line in lines:
        code ^= line.startswith("```")
        if code or line.startswith(("|", "```")) or len(line) <= width:
            out.append(line)
            continue
        out += textwrap.wrap(line, width, subsequent_indent="  " if line.startswith("- ") else "",
                             break_long_words=False, break_on_hyphens=False)
    return out


def update(path, section: str) -> None:
    """Replace ``path``'s "## Evidence and verdicts" section (its heading to the end) with ``section``,
    keeping what is above it; written to a temporary file beside it, then renamed over it."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    start = text.find("\n" + HEADING + "\n")
    if start < 0:
        raise ValueError(f"{path} has no line {HEADING!r}: nothing to replace")
    new = text[: start + 1] + section
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new)
        os.replace(tmp, path)  # atomic: a failed write leaves the page as it was
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", help="results CSVs written by deepgp benchmark")
    p.add_argument("--paper", help="the paper's Table 1 as CSV (table1_test_loglik.csv)")
    p.add_argument("--s1", help="the paper's Table S1 as CSV, with the baselines (table_s1_all_methods.csv)")
    p.add_argument("--s2", help="the paper's Table S2 (Shapiro-Wilk W) as CSV (table_s2_shapiro_wilk.csv)")
    p.add_argument("--data-dir", help="the folder of the data sets (default: $DEEPGP_DATA), to list those without "
                   "results")
    p.add_argument("--out", help="write the section to this file")
    p.add_argument("--update", help="replace the section of this page (conclusions.md) from its heading to the end")
    add_reference_settings(p, helps={"recipe": "the setting kept where a cell has rows of several recipes (default: "
                                     "the recipe of most rows)"})
    args = p.parse_args(argv)
    if args.out:  # before the work: a file in a folder that exists (none is made)
        try:
            check_writable(args.out, "--out")
        except ValueError as err:
            p.error(" ".join(str(err).split()))
    reference = reference_of(args)
    text = render(args.results, args.paper, args.s1, args.s2, reference.get("recipe"), args.data_dir,
                  reference=reference)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if args.update:
        update(args.update, text)
    if not (args.out or args.update):
        print(text, end="")


if __name__ == "__main__":
    main()
