"""benchmarks/uci/conclusions.py: each criterion of conclusions.md on results built so that its verdict
is known (reproduced, partly, not reproduced, no verdict), with values on either side of each threshold."""

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from deepgp_bench import runner
from deepgp_bench.runner import CONFIGS

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "uci" / "conclusions.py"
spec = importlib.util.spec_from_file_location("conclusions", SCRIPT)
conclusions = importlib.util.module_from_spec(spec)
sys.modules["conclusions"] = conclusions  # (its dataclasses look their module up there)
spec.loader.exec_module(conclusions)

R, P, N, NONE = conclusions.REPRODUCED, conclusions.PARTLY, conclusions.NOT, conclusions.NONE
LV = conclusions.LV


def evidence(means: dict, w: dict | None = None, n: dict | None = None):
    """Evidence of one run per cell: means {(dataset, model, method): value}, w likewise, n {dataset: N}."""
    return conclusions.Evidence(runs={k: {(0, 0): v} for k, v in means.items()}, w=dict(w or {}), n=dict(n or {}))


# -- 1. latent variables improve performance --------------------------------------------------------
def c1(diffs):
    """One data set per comparison: LV-GP (VI) − GP (VI) = diff."""
    means = {}
    for i, d in enumerate(diffs):
        means |= {(f"d{i}", "GP", "vi"): 0.0, (f"d{i}", "LV-GP", "vi"): d}
    return conclusions.criterion1(evidence(means), [f"d{i}" for i in range(len(diffs))])


@pytest.mark.parametrize("diffs, verdict", [
    # 8 of 10 equal or better (−0.04 is within 0.05, −0.06 is not), 3 of 10 considerably (0.21; not 0.19)
    ([0.21, 0.21, 0.21, -0.04, -0.04, 0.19, 0.19, 0.0, -0.06, -0.06], R),
    ([0.21, 0.21, 0.2, -0.04, -0.04, 0.2, 0.2, 0.0, -0.06, -0.06], P),  # considerably in 20% < 25% (0.2 is not)
    ([0.21, 0.0, 0.0, -0.06], P),  # equal or better in 75% < 80%
    ([0.21, 0.21, 0.21, -0.04, -0.04, 0.19, 0.19, -0.06, -0.06, -0.06], P),  # equal or better in 70% < 80%
    ([0.21, 0.21, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], R),  # 25% considerably: the bound itself
    ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.06, -0.06, -0.06, -0.06], P),  # 60% equal or better
    ([0.0, 0.0, 0.0, 0.0, 0.0, -0.06, -0.06, -0.06, -0.06], N),  # 56% < 60%
])
def test_criterion1_thresholds(diffs, verdict):
    assert c1(diffs).verdict == verdict


def test_criterion1_pairs_each_lv_model_with_its_depth_and_both_methods():
    # LV-GP-GP against GP-GP (not GP), by VI and by IW; GP is far above and must not enter
    means = {("a", "GP", "vi"): 9.0, ("a", "GP-GP", "vi"): 0.0, ("a", "LV-GP-GP", "vi"): 0.3,
             ("a", "LV-GP-GP", "iw"): 0.3}
    v = conclusions.criterion1(evidence(means), ["a", "b"])
    assert v.verdict == R and v.datasets == ["a"]
    assert "2 of the 12 comparisons (1 of 2 data sets)" in v.counts
    assert conclusions.criterion1(evidence({("a", "GP", "vi"): 0.0}), ["a"]).verdict == NONE


# -- 2. IW outperforms VI, more so for deeper models -----------------------------------------------
def c2(per_depth: list[list[float | None]], universe=None):
    """per_depth[k][i]: IW − VI at depth k + 1 on data set i (None: not run)."""
    means = {}
    for model, diffs in zip(conclusions.LV_MODELS, per_depth):
        for i, d in enumerate(diffs):
            if d is not None:
                means |= {(f"d{i}", model, "vi"): 0.0, (f"d{i}", model, "iw"): d}
    return conclusions.criterion2(evidence(means), universe or [f"d{i}" for i in range(3)])


@pytest.mark.parametrize("per_depth, verdict", [
    ([[-1.0, 0.1, 0.1], [0.1, 0.1, 0.1], [0.1, 0.2, 0.2]], R),  # medians 0.1, 0.1, 0.2 (the mean at depth 1 < 0)
    ([[0.2, 0.2, 0.2], [0.1, 0.1, 0.1], [0.1, 0.1, 0.1]], P),  # all positive, but depth 3 below depth 1
    ([[0.1, 0.1, 0.1], [-0.1, -0.1, 0.1], [0.1, 0.1, 0.1]], P),  # positive at two depths
    ([[0.1, 0.1, 0.1], [-0.1, -0.1, 0.1], [0.0, 0.0, 0.1]], N),  # a median of 0 is not positive
    # a median within the 0.05 band is level, as the page reads any two values within 0.05 as equal
    ([[0.03, 0.03, 0.03], [0.1, 0.1, 0.1], [0.1, 0.1, 0.1]], P),
    ([[0.05, 0.05, 0.05], [0.1, 0.1, 0.1], [0.1, 0.1, 0.1]], P),  # the band's edge is level
    ([[0.06, 0.06, 0.06], [0.1, 0.1, 0.1], [0.1, 0.1, 0.1]], R),
    ([[0.1, 0.1, 0.1], [-0.04, -0.04, 0.1], [0.04, 0.04, 0.1]], N),
    ([[0.1, 0.1, 0.1], [0.1, 0.1, 0.1], [None, None, None]], NONE),
])
def test_criterion2(per_depth, verdict):
    v = c2(per_depth)
    assert v.verdict == verdict
    if verdict == NONE:
        assert "LV-GP-GP-GP (IWVI) and LV-GP-GP-GP (VI) on any data set" in v.missing[0]


def test_the_band_reads_a_median_as_the_page_reads_a_difference():
    assert [conclusions.band(x) for x in (0.0035, 0.05, 0.0501, -0.043, -0.05, -0.051)] == [
        "level", "level", "positive", "level", "level", "negative"]
    v = c2([[0.0035, 0.0035, 0.0035], [0.1, 0.1, 0.1], [0.1, 0.1, 0.1]])
    assert "| **median** | +0.004 (level) | +0.100 (positive) | +0.100 (positive) |" in v.lines


@pytest.mark.parametrize("diffs, verdict", [
    ([0.0, 0.5, None], R),  # VI 0.5 below IW at depth 2: enough, whatever depth 3
    ([0.49, 0.49, 0.49], N),
    ([0.49, 0.49, None], NONE),
])
def test_criterion2_vi_very_poor(diffs, verdict):
    means = {}
    for model, d in zip(conclusions.LV_MODELS, diffs):
        if d is not None:
            means |= {("autompg", model, "vi"): -d, ("autompg", model, "iw"): 0.0}
    v = conclusions.criterion2_vi_poor(evidence(means), ["autompg", "keggundirected"], "autompg")
    assert v.verdict == verdict
    kegg = conclusions.criterion2_vi_poor(evidence(means), ["autompg", "keggundirected"], "keggundirected")
    assert kegg.verdict == NONE and kegg.missing == ["keggundirected (no results)"]


# -- 3. latent variables or depth ------------------------------------------------------------------
def marginals(d, lv=0.15, deep=0.05, w=0.989):
    """GP 0, GP-GP = deep, GP-GP-GP 0, the best LV column (LV-GP-GP, IW) = lv with W = w (0.989: still
    below 0.99), the rest lower."""
    means = {(d, "GP", "vi"): 0.0, (d, "GP-GP", "vi"): deep, (d, "GP-GP-GP", "vi"): 0.0}
    means |= {(d, *c): -1.0 for c in LV} | {(d, "LV-GP-GP", "iw"): lv}
    return means, {(d, *c): 1.0 for c in LV} | {(d, "LV-GP-GP", "iw"): w}


def mappings(d, lv_iw=-0.5):
    """Best deep column 0.1 (GP-GP-GP), LV-GP 0.0 by VI and lv_iw by IW."""
    return {(d, "GP-GP", "vi"): 0.0, (d, "GP-GP-GP", "vi"): 0.1, (d, "LV-GP", "vi"): 0.0, (d, "LV-GP", "iw"): lv_iw}


def c3(absent=(), **changes):
    """The five named data sets, each meeting its group's test but for ``changes`` {dataset: marginals'
    or mappings' arguments}; those ``absent`` not run."""
    means, w = {}, {}
    for d in conclusions.MARGINALS:
        if d not in absent:
            m, s = marginals(d, **changes.get(d, {}))
            means, w = means | m, w | s
    for d in conclusions.MAPPINGS:
        if d not in absent:
            means |= mappings(d, **changes.get(d, {}))
    return conclusions.criterion3(evidence(means, w), [*conclusions.MARGINALS, *conclusions.MAPPINGS])


def test_criterion3_boundaries():
    # each group's test met right at its margins: best LV − best deep = 0.10, best deep − GP = 0.05,
    # best deep − LV-GP = 0.10
    assert c3(forest=dict(lv=0.15, deep=0.05)).verdict == R
    assert c3(forest=dict(lv=0.14)).verdict == P  # beats by 0.09 < 0.1: 4 of 5 meet
    assert c3(forest=dict(lv=0.17, deep=0.06)).verdict == P  # depth alone helps by 0.06 > 0.05
    assert c3(forest=dict(w=0.99)).verdict == P  # W = 0.99 is Gaussian (not below 0.99)
    assert c3(sml=dict(lv_iw=0.01)).verdict == P  # LV-GP is the better of VI and IW: 0.09 behind


def test_criterion3_verdicts():
    v = c3(forest=dict(w=0.99), power=dict(lv=0.14))
    assert v.verdict == P  # 3 of 5: at least half
    assert "| forest | LV-GP-GP (IWVI) 0.15 | 0.05 | 0.00 | +0.10 | +0.05 | 0.990 | no |" in v.lines
    assert c3(forest=dict(w=0.99), power=dict(lv=0.14), sml=dict(lv_iw=0.01)).verdict == N  # 2 of 5
    v = c3(absent=("keggundirected",))
    assert v.verdict == NONE and v.missing == ["keggundirected (no results)"]
    assert v.datasets == ["forest", "power", "sml", "kin8nm"]  # the evidence of those measured is shown
    means, w = marginals("forest")
    del w[("forest", "LV-GP-GP", "iw")]
    v = conclusions.criterion3(evidence(means, w), ["forest"])
    assert "forest: W of LV-GP-GP (IWVI)" in v.missing


# -- 4. both ---------------------------------------------------------------------------------------
def both(d, gpgp=0.06, lv3=1.0, w=0.989):
    """GP 0, GP-GP = gpgp, LV-GP 0.06 (VI; IW 0), the best of the nine 1.04 (LV-GP-GP IW), LV-GP-GP-GP
    (IW) = lv3; every LV column's W 0.98 but LV-GP's (VI) = w (0.989: still below 0.99)."""
    means = {(d, *c): 0.0 for c in CONFIGS} | {(d, "GP-GP", "vi"): gpgp, (d, "LV-GP", "vi"): 0.06,
                                                (d, "LV-GP-GP", "iw"): 1.04, (d, "LV-GP-GP-GP", "iw"): lv3}
    return means, {(d, *c): 0.98 for c in LV} | {(d, "LV-GP", "vi"): w}


def c4(bike, kegg):
    """bike and keggdirected, each with the arguments of :func:`both` (None: not run)."""
    means, w = {}, {}
    for d, kw in (("bike", bike), ("keggdirected", kegg)):
        if kw is not None:
            m, s = both(d, **kw)
            means, w = means | m, w | s
    return conclusions.criterion4(evidence(means, w), ["bike", "keggdirected"])


@pytest.mark.parametrize("bike, kegg, verdict", [
    ({}, {}, R),  # 0.06 above GP, LV-GP-GP-GP 0.04 below the best
    ({"gpgp": 0.05}, {}, P),  # GP-GP only 0.05 above GP: not more than 0.05
    ({}, {"w": 0.99}, P),  # one LV column Gaussian
    ({"lv3": 0.98}, {"w": 0.99}, N),  # LV-GP-GP-GP 0.06 below the best
    ({}, None, NONE),
])
def test_criterion4(bike, kegg, verdict):
    v = c4(bike, kegg)
    assert v.verdict == verdict
    if verdict == NONE:
        assert v.missing == ["keggdirected (no results)"]


# -- 5. average ranks and the baselines ------------------------------------------------------------
def ranked(order: list[tuple], datasets=("a", "b")):
    """Every data set with the nine columns, valued by their place in ``order`` (last = best), on 2 splits."""
    runs = {(d, *c): {(s, s): float(order.index(c)) + s for s in (0, 1)} for d in datasets for c in order}
    return conclusions.Evidence(runs=runs)


def test_criterion5():
    order = list(CONFIGS)  # LV-GP-GP-GP (IW) last: the best
    assert conclusions.criterion5(ranked(order), ["a", "b", "c"]).verdict == R
    v = conclusions.criterion5(ranked([order[-1], *order[:-1]]), ["a", "b", "c"])  # IW worst, VI best
    assert v.verdict == P and "2 of 3 data sets" in v.counts
    second = [order[-1], *order[:-3], order[-2], order[-3]]  # (IW) worst, (VI) second
    assert conclusions.criterion5(ranked(second), ["a", "b"]).verdict == P
    iw_second = [order[-2], *order[:-3], order[-1], order[-3]]  # (VI) worst, (IW) second
    assert conclusions.criterion5(ranked(iw_second), ["a", "b"]).verdict == P
    third = [order[-1], *order[:-4], order[-2], order[-4], order[-3]]  # (IW) worst, (VI) third
    assert conclusions.criterion5(ranked(third), ["a", "b"]).verdict == N
    ev = ranked(order)
    del ev.runs[("a", "GP", "vi")], ev.runs[("b", "GP", "vi")]
    assert conclusions.criterion5(ev, ["a", "b"]).verdict == NONE


def test_criterion5_small_sets():
    lin, cvae = conclusions.LINEAR, conclusions.CVAE
    means = {("s", *lin): 0.0, ("s", *cvae): -1.0, ("t", *lin): 0.0, ("t", *cvae): -1.0}
    # N = 1,000 is a larger set: only s counts
    v = conclusions.criterion5_small(evidence(means, n={"s": 999, "t": 1000}), ["s", "t"])
    assert v.verdict == R and v.datasets == ["s"]
    means |= {("u", *lin): 0.0, ("u", *cvae): 0.1}
    assert conclusions.criterion5_small(evidence(means, n={"s": 999, "t": 999, "u": 10}), ["s", "t", "u"]).verdict == P
    assert conclusions.criterion5_small(evidence(means, n={"s": 999, "t": 5000, "u": 10}), ["s", "t", "u"]).verdict == P
    means |= {("s", *cvae): -0.04}  # within the 0.05 band: level, not below
    assert conclusions.criterion5_small(evidence(means, n={"s": 999, "t": 5000, "u": 10}), ["s", "t", "u"]).verdict == N
    assert conclusions.criterion5_small(evidence(means, n={"s": 5000, "t": 5000, "u": 5000}),
                                        ["s", "t", "u"]).verdict == NONE


def test_criterion5_larger_sets():
    cvae, lv3 = conclusions.CVAE, conclusions.LV3_IW
    means = {("a", *cvae): 0.0, ("a", *lv3): -0.04, ("b", *cvae): 0.0, ("b", *lv3): -0.06}
    ev = evidence(means, n={"a": 2000, "b": 2000})
    assert conclusions.criterion5_large(ev, ["a"]).verdict == R  # 0.04 behind: equal or better
    assert conclusions.criterion5_large(ev, ["a", "b"]).verdict == P  # b: CVAE-50 beats it by 0.06
    assert conclusions.criterion5_large(ev, ["b"]).verdict == N
    assert conclusions.criterion5_large(evidence(means, n={"a": 999, "b": 999}), ["a", "b"]).verdict == NONE


def test_criterion5_marginals():
    cvae, lv3 = conclusions.CVAE, conclusions.LV3_IW
    w = {("a", *cvae): 0.999, ("a", *lv3): 0.95, ("b", *cvae): 0.999, ("b", *lv3): 0.96,
         ("c", *cvae): 0.98, ("c", *lv3): 0.98}  # c: a tie is not above
    ev = evidence({}, w)
    assert conclusions.criterion5_marginals(ev, ["a", "b", "c"]).verdict == R  # 2 of 3: most
    assert conclusions.criterion5_marginals(ev, ["a", "c"]).verdict == P  # half
    assert conclusions.criterion5_marginals(ev, ["c"]).verdict == N
    assert conclusions.criterion5_marginals(ev, ["d"]).verdict == NONE


# -- reading results, the section, the page ---------------------------------------------------------
def write_results(path, cells: dict, recipe="fast", iterations=10, shapiro=0.98, sampling="independent", **extra):
    """cells: {(dataset, model, method): [kde per split]} appended to a results CSV; the IW rows with
    ``sampling`` inner draws."""
    base = {k: 0 for k in runner.COLUMNS} | runner.default_settings(recipe) | dict(
        protocol="splits", num_inducing=8, test_limit=10, seconds=1.0, test_loglik_mixture=0.0, test_rmse=1.0,
        bound=-1.0, n_train=90, n_test=10) | extra
    runner.prepare_results(path)
    with open(path, "a") as f:
        for (d, m, me), vals in cells.items():
            for s, v in enumerate(vals):
                f.write(runner.format_row(base | dict(
                    dataset=d, model=m, method=me, split=s, seed=s, inner_sampling=sampling if me == "iw" else "-",
                    num_samples=5 if me == "iw" else 1, test_loglik_kde=float(v), iterations=iterations,
                    shapiro_median=shapiro)))


def test_rows_at_the_longest_budget_and_one_setting_per_cell(tmp_path):
    path = tmp_path / "r.csv"
    write_results(path, {("a", "GP", "vi"): [0.0, 1.0], ("a", "LV-GP", "vi"): [5.0, 6.0]}, iterations=10)
    write_results(path, {("a", "GP", "vi"): [2.0, 3.0]}, iterations=20)  # the longest budget wins
    write_results(path, {("a", "LV-GP", "vi"): [9.0, 10.0]}, recipe="paper", iterations=50)  # another recipe
    rows = runner.load_results(path).rows
    kept, recipe, aside = conclusions.select_rows(rows)
    ev = conclusions.evidence_from_rows(kept)
    assert recipe == "fast"  # 6 of the 8 rows
    assert ev.mean("a", ("GP", "vi")) == 2.5 and ev.budget[("a", "GP", "vi")] == ((0, 1), 2, 20)
    assert ev.mean("a", ("LV-GP", "vi")) == 5.5 and aside == {("a", "LV-GP", "vi"): ["recipe=paper"]}
    assert ev.n == {"a": 100} and ev.shapiro("a", ("GP", "vi")) == 0.98
    kept, recipe, _ = conclusions.select_rows(rows, "paper")
    ev = conclusions.evidence_from_rows(kept)
    assert ev.mean("a", ("LV-GP", "vi")) == 9.5  # --recipe paper: that cell's paper rows
    assert ev.mean("a", ("GP", "vi")) == 2.5  # a cell without paper rows keeps its own


def test_columns_are_compared_on_the_splits_they_share(tmp_path):
    """A split that only some of a data set's Table 1 columns have is left out of all of its cells
    (there: split 1 of GP), and of the runs and the W behind them; another data set keeps its own."""
    path = tmp_path / "r.csv"
    write_results(path, {("a", "GP", "vi"): [0.0, 4.0], ("a", "LV-GP", "vi"): [1.0],
                         ("b", "GP", "vi"): [0.0, 2.0], ("b", "LV-GP", "vi"): [1.0, 3.0]}, iterations=10)
    ev = conclusions.evidence_from_rows(runner.load_results(path).rows)
    assert ev.mean("a", ("GP", "vi")) == 0.0 and ev.budget[("a", "GP", "vi")] == ((0,), 1, 10)
    assert ev.mean("a", ("LV-GP", "vi")) == 1.0
    assert ev.mean("b", ("GP", "vi")) == 1.0 and ev.budget[("b", "GP", "vi")] == ((0, 1), 2, 10)
    v = conclusions.criterion1(ev, ["a", "b"])
    assert "| a | +1.00 ✓✓ |" in "\n".join(v.lines)  # not +1.00 − 2.00 = −1.00 ✗ over split 0 against splits 0-1
    # the W: over the runs of the values' cells
    assert conclusions._on_common_runs({("a", "GP", "vi"): {(0, 0): 0.9, (1, 1): 0.5}},
                                       runs={("a", "GP", "vi"): {(0, 0): 0.0}}) == {("a", "GP", "vi"): {(0, 0): 0.9}}
    # a baseline: its runs among the columns' common ones; none of them: left out
    cells = {("d", "GP", "vi"): {(0, 0): 1.0}, ("d", "Linear", "vi"): {(0, 0): 2.0, (1, 1): 3.0},
             ("d", "CVAE-50", "vi"): {(1, 1): 4.0}, ("e", "Linear", "vi"): {(1, 1): 5.0}}
    assert conclusions._on_common_runs(cells) == {
        ("d", "GP", "vi"): {(0, 0): 1.0}, ("d", "Linear", "vi"): {(0, 0): 2.0}, ("e", "Linear", "vi"): {(1, 1): 5.0}}
    # the columns share no split: the data set's cells are all left out (missing), not compared across splits
    assert conclusions._on_common_runs({("c", "GP", "vi"): {(0, 0): 1.0}, ("c", "LV-GP", "vi"): {(1, 1): 2.0}}) == {}


def test_settings_are_named_against_the_given_ones(tmp_path):
    """``--inner-width input``: a large data set's rows at the paper's width are its cells' own setting, and the
    page's command gives the option."""
    path = tmp_path / "r.csv"
    write_results(path, {("big", "GP-GP", "vi"): [1.0], ("big", "GP", "vi"): [0.5]}, inner_width="input",
                  n_train=9000)
    write_results(path, {("big", "GP-GP", "vi"): [2.0]}, inner_width="hidden", n_train=9000)
    rows = runner.load_results(path).rows
    kept, _, aside = conclusions.select_rows(rows, reference={"inner_width": "input"})
    assert conclusions.evidence_from_rows(kept).mean("big", ("GP-GP", "vi")) == 1.0
    assert aside == {("big", "GP-GP", "vi"): ["inner_width=hidden"]}
    text = conclusions.render([path], universe=["big"], reference={"inner_width": "input"})
    assert "--inner-width input" in text and "- Setting `inner_width=input` (" in text
    # --recipe paper: the kept paper rows are named by their recipe, as the set-aside fast ones by theirs
    write_results(path, {("big", "GP", "vi"): [0.7]}, recipe="paper", inner_width="input", n_train=9000)
    text = conclusions.render([path], universe=["big"], recipe="paper", reference={"recipe": "paper"})
    assert "- Setting `recipe=paper` (" in text and "set aside" in text


def test_conclusion_2_states_its_dependence_on_the_inner_draws(tmp_path, monkeypatch):
    """IW rows at another inner_sampling than the cells' own (set aside) recompute conclusion 2 on the data
    sets that have them, beside the verdict; the kept cells' median is taken on the same data sets and runs."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "r.csv"
    cells = {}
    for d in ("a", "b", "c"):
        cells |= {(d, m, "vi"): [0.0, 0.0] for m in conclusions.LV_MODELS}
        cells |= {(d, m, "iw"): [0.2, 0.4] for m in conclusions.LV_MODELS}  # per sample: +0.3 over splits 0-1
    write_results(path, cells)
    # joint draws on split 0 of a and b, LV-GP-GP only: +0.01 and +0.03 (median +0.02, level)
    write_results(path, {("a", "LV-GP-GP", "iw"): [0.01], ("b", "LV-GP-GP", "iw"): [0.03]}, sampling="joint")
    text = conclusions.render([path], universe=["a", "b", "c"])
    assert "| 2. IW outperforms VI, more so for deeper models | **reproduced** |" in text
    assert ("| the IW bound's inner draws (per-sample here): with joint draws the median IW − VI is LV-GP-GP "
            "+0.020 (level; 2 data sets, where per-sample draws give +0.200) |") in text
    assert "on 2 data sets (a, b); with them in place of these cells:" in " ".join(text.split())
    assert "| LV-GP-GP | 2 | +0.020 (level) | +0.200 (positive) |" in text  # per sample on split 0: 0.2
    row1 = next(line for line in text.splitlines() if line.startswith("| 1. Latent variables"))
    assert row1.endswith("| – |")  # a conclusion without a dependence says so in the same column
    # without rows of another setting the page has no such column
    plain = tmp_path / "p.csv"
    write_results(plain, cells)
    assert "depends on" not in conclusions.render([plain], universe=["a", "b", "c"])


def test_render_and_update(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "r.csv"
    write_results(path, {("a", *c): [float(i)] for i, c in enumerate(CONFIGS)} | {("a", "GP", "sghmc"): [0.0]})
    text = conclusions.render([path], universe=["a", "forest", "bike"])
    assert text.startswith(conclusions.HEADING + "\n")
    assert "**Data sets with results: 1 of the 3 given**: a." in text and "- Without results: bike, forest." in text
    assert ("| 5. On average LV-GP-GP-GP is best | **reproduced** | 1 of 3 | 1 run (split 0) × 10 it. (9 cells) |"
            in text)
    assert "**no verdict** (missing: bike (no results); keggdirected (not among the data sets))" in text
    assert "Rows no criterion reads: GP (SGHMC) (1)" in text
    assert "    r.csv \\" in text  # the command names the results as given, under the working folder

    page = tmp_path / "conclusions.md"
    page.write_text("# Title\n\nCriteria, by hand.\n\n## Evidence and verdicts\n\nold\n")
    conclusions.update(page, text)
    assert page.read_text(encoding="utf-8") == "# Title\n\nCriteria, by hand.\n\n" + text
    conclusions.update(page, text)  # again: the same page
    assert page.read_text(encoding="utf-8") == "# Title\n\nCriteria, by hand.\n\n" + text
    assert not [f for f in os.listdir(tmp_path) if f.startswith("conclusions.md.")]  # no temporary file left
    (tmp_path / "other.md").write_text("# No section\n")
    with pytest.raises(ValueError, match="no line '## Evidence and verdicts'"):
        conclusions.update(tmp_path / "other.md", text)


def test_main_with_the_papers_tables(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEEPGP_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no data folder: the results' data sets
    results = tmp_path / "r.csv"
    write_results(results, {("a", "GP", "vi"): [0.0], ("a", "LV-GP", "vi"): [1.0], ("a", "LV-GP", "iw"): [1.0],
                            ("a", "Linear", "vi"): [0.0], ("a", "CVAE-50", "vi"): [-5.0]})
    paper = tmp_path / "t1.csv"
    paper.write_text("dataset,N,D,GP_VI,GP_VI_se,LV-GP_VI,LV-GP_VI_se,LV-GP_IWVI,LV-GP_IWVI_se\n"
                     "a,100,2,0.0,0.0,-1.0,0.0,-1.0,0.0\n")
    s1 = tmp_path / "s1.csv"
    s1.write_text("dataset,N,D,Linear,Linear_se,CVAE-50,CVAE-50_se\na,100,2,0.0,0.0,-inf,\n")
    conclusions.main([str(results), "--paper", str(paper), "--s1", str(s1)])
    text = capsys.readouterr().out
    assert "(no data folder was found: those with results only)" in text
    assert ("| 1. Latent variables improve performance | **reproduced** | 1 of 1 | 1 run (split 0) × 10 it. (3 cells) "
            "| not reproduced on these 1; not reproduced on 1 |") in text
    assert "CVAE-50 below Linear where N < 1,000 | **reproduced** | 1 of 1" in text
    assert "(`t1.csv`, `s1.csv`)" in text and str(tmp_path) not in text  # the paper's tables by name only
    conclusions.main([str(results), "--out", str(tmp_path / "out.md")])
    assert (tmp_path / "out.md").read_text(encoding="utf-8").startswith(conclusions.HEADING)


def test_the_data_folder_is_named_as_it_was_given(tmp_path, monkeypatch):
    from deepgp.datasets.uci import write_uci

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "r.csv"
    write_results(path, {("a", "GP", "vi"): [0.0]})
    folder = tmp_path / "data"
    folder.mkdir()
    write_uci(folder / "b.csv.gz", np.zeros((10, 2)))
    monkeypatch.setenv("DEEPGP_DATA", str(tmp_path / "elsewhere"))
    assert "in the data folder (`--data-dir`)" in conclusions.render([path], data_dir=str(folder))
    monkeypatch.setenv("DEEPGP_DATA", str(folder))
    assert "in the data folder (`$DEEPGP_DATA`)" in conclusions.render([path])
