"""Markdown report of a results file beside the paper's Table 1.

Summaries follow the paper (its supplement, "Comparison of methods"): the mean and standard error
over splits (s.e. = std with ddof = 0 over runs / √runs, as the paper's code); average ranks computed
for each split separately (rank 1 = lowest test log-likelihood, so higher is better, ties averaged),
averaged over splits and then over datasets (± s.e. over datasets); and the median over datasets of
the difference from the single-layer GP (VI). A cell with rows at several budgets is summarised at
its longest; the per-dataset table then shows its trend against the budget before it.
"""

from __future__ import annotations

import contextlib
import csv
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.stats
from matplotlib.figure import Figure

from deepgp.kinds import Kind
from deepgp.metrics import scaled_mean
from deepgp.storage import write_bytes

from .baselines import network_name
from .markdown import markdown_cell
from .runner import BASELINES, CONFIGS, EVALUATION, SETTINGS, _repeated, _text, describe_lines, load_results, variant

_PAPER_METHOD = {"vi": "VI", "iw": "IWVI", "sghmc": "SGHMC"}
BASELINE = ("GP", "vi", "")
TREND = 0.02  # a change between a cell's last two budgets within ±this is "flat"
_LOWER_IS_BETTER = ("test_rmse",)
# how every document `deepgp report --out` writes begins: a results file's report, the comparison with the peers
REPORT_HEADINGS = ("# UCI benchmark: ", "# Time to quality: ")


def is_report(path) -> bool:
    """Whether the file at ``path`` is a document ``deepgp report --out`` wrote (its first line; nothing more
    is read)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return first.startswith(tuple(h.encode() for h in REPORT_HEADINGS))


REPORT = Kind("a report of deepgp report", is_report)


def read_paper(path, option: str = "--paper") -> dict[tuple[str, str, str], tuple[float, float]]:
    """The paper's table (e.g. table1_test_loglik.csv): (dataset, model, method) → (mean, s.e.), in the
    table's column order. Columns are ``MODEL_METHOD`` (and ``MODEL_METHOD_se``), METHOD one of VI, IWVI,
    SGHMC; the baselines' columns of Tables S1 and S2 are bare network names (``Linear``, ``CVAE-50``:
    trained by VI); "-inf" is the paper's "below −1000". Errors name the file as ``option`` gave it.
    A table without a value in any such column is refused."""
    out = {}
    with _table(path, option) as f:
        reader = csv.DictReader(f)
        if "dataset" not in _names(reader, path, option):
            raise ValueError(f"{option} {path} is not a table of the paper: it has no 'dataset' column")
        try:
            for rec in reader:
                for col, value in rec.items():
                    if col is None or col.endswith("_se") or not value:
                        continue
                    model, _, method = col.rpartition("_") if "_" in col else (network_name(col), "", "VI")
                    lower = {v: k for k, v in _PAPER_METHOD.items()}.get(method) if model else None
                    if lower is None:
                        continue
                    se = rec.get(col + "_se") or "nan"
                    out[(rec["dataset"], model, lower)] = (float(value), float(se))
        except (ValueError, TypeError) as err:  # (UnicodeDecodeError is _table's)
            raise ValueError(f"{option} {path}, line {reader.line_num}: {err}") from None
    if not out:
        raise ValueError(f"{option} {path} is not a table of the paper: no column like GP-GP_VI or LV-GP_IWVI "
                         "has a value")
    return out


def read_paper_sizes(path) -> dict[str, int]:
    """The size N of each data set of the paper's table (its ``N`` column): {dataset: N}; {} where the
    table has no ``N`` column."""
    with _table(path, "the paper's table") as f:
        reader = csv.DictReader(f)
        names = _names(reader, path, "the paper's table")
        if "dataset" not in names or "N" not in names:
            return {}
        try:
            return {rec["dataset"]: int(rec["N"]) for rec in reader if rec.get("N")}
        except ValueError as err:
            raise ValueError(f"{path}, line {reader.line_num}: {err}") from None


def _names(reader: csv.DictReader, path, option: str) -> list[str]:
    """The column names of a table; a name that occurs twice is a ValueError naming the file as ``option``
    gave it (a DictReader would keep the last column of that name)."""
    names = reader.fieldnames or []
    problem = _repeated(names)
    if problem:
        raise ValueError(f"{option} {path} {problem}")
    return names


@contextlib.contextmanager
def _table(path, option: str):
    """A CSV table open for reading as text (a byte order mark skipped); a file that is not UTF-8 is a
    ValueError naming it as ``option`` gave it."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        try:
            yield f
        except UnicodeDecodeError:
            raise ValueError(f"{option} {path} is not a table of text in UTF-8") from None


def _signed(value: float) -> str:
    return f"{value:+.2f}" if math.isfinite(value) else "–"


def label(model: str, method: str, extra: str = "") -> str:
    """A column's name as the paper writes it: ``label("LV-GP", "iw")`` → "LV-GP (IWVI)"; ``extra`` (a
    variant) goes inside the brackets."""
    return markdown_cell(f"{model} ({_PAPER_METHOD[method]}{', ' + extra if extra else ''})")


def _fmt(mean: float, se: float | None = None) -> str:
    if mean is None or math.isnan(mean):
        return "–"
    if not math.isfinite(mean):  # the paper's "below −1000"
        return _number(mean)
    return f"{mean:.2f}" if se is None or not math.isfinite(se) else f"{mean:.2f} ({se:.2f})"


def _group(r: dict, evaluation: bool, reference: dict | None = None) -> tuple[str, str, str, str]:
    return r["dataset"], r["model"], r["method"], variant(r, evaluation, reference)


def mixed_evaluation(rows: list[dict]) -> bool:
    """Whether ``rows`` were measured in more than one way (:data:`~deepgp_bench.runner.EVALUATION`):
    only then do those settings tell groups apart; one way is named once, beside the budget."""
    return len({tuple(r[k] for k in EVALUATION) for r in rows}) > 1


def summarise(rows: list[dict], metric: str = "test_loglik_kde", apart: bool | None = None,
              reference: dict | None = None):
    """Group rows by (dataset, model, method, variant), keeping per group only its largest iteration
    budget; the variant names non-default settings (:func:`deepgp_bench.runner.variant`; settings
    other than ``reference``'s where one is given), and how a row was measured where ``apart`` (None:
    where the rows were measured in several ways).

    Returns ``{(dataset, model, method, variant): {run_id: value}}`` where run_id = (split, seed).
    """
    apart = mixed_evaluation(rows) if apart is None else apart
    budget: dict[tuple, int] = defaultdict(int)
    for r in rows:
        g = _group(r, apart, reference)
        budget[g] = max(budget[g], r["iterations"])
    groups: dict[tuple, dict] = defaultdict(dict)
    for r in rows:
        g = _group(r, apart, reference)
        if r["iterations"] == budget[g]:
            groups[g][(r["split"], r["seed"])] = r[metric]
    return groups


def trends(rows: list[dict], metric: str = "test_loglik_kde",
           reference: dict | None = None) -> dict[tuple, tuple[int, float]]:
    """For each group of :func:`summarise` with rows at more than one budget: (the budget before its
    longest, the mean over the runs at both of ``metric`` at the longest minus at that one)."""
    apart = mixed_evaluation(rows)
    by_budget: dict[tuple, dict[int, dict]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        by_budget[_group(r, apart, reference)][r["iterations"]][(r["split"], r["seed"])] = r[metric]
    out = {}
    for g, values in by_budget.items():
        if len(values) > 1:
            previous, last = (values[b] for b in sorted(values)[-2:])
            runs = sorted(last.keys() & previous.keys())
            diff = scaled_mean([last[run] - previous[run] for run in runs]) if runs else float("nan")
            out[g] = sorted(values)[-2], diff
    return out


def _trend(previous: int, diff: float, metric: str) -> str:
    """"+0.05 improving (from 5,000)": the change, and whether it is better, worse or within ±TREND."""
    if math.isnan(diff):
        return "–"
    better = -diff if metric in _LOWER_IS_BETTER else diff
    word = "improving" if better > TREND else "worse" if better < -TREND else "flat"
    return f"{diff:+.2f} {word} (from {previous:,})"


def _mean_se(values) -> tuple[float, float]:
    """The mean and its standard error (std, ddof 0, / √n), scaled by the largest magnitude first (values
    near float64's largest in a hand-edited file do not overflow: deepgp.metrics.scaled_mean)."""
    v = np.asarray(list(values), dtype=float)
    # one run has no standard error (shown without one), rather than a misleading (0.00)
    m = float(np.max(np.abs(v))) if v.size else math.nan
    se = m * float(np.std(v / m)) / math.sqrt(len(v)) if len(v) > 1 and 0 < m < math.inf else (
        0.0 if len(v) > 1 and m == 0 else float("nan"))
    return scaled_mean(v), se


def average_ranks(table: dict[str, dict[tuple, dict]], configs: list[tuple]) -> dict[tuple, tuple[float, float]]:
    """Paper-style average ranks. ``table[dataset][config][run_id] = value``.

    For each dataset and run (split) where every config has a value, rank the configs (1 = lowest);
    average over runs per dataset, then mean (s.e.) over datasets.
    """
    per_dataset: dict[tuple, list[float]] = defaultdict(list)
    for by_config in table.values():
        if not all(c in by_config for c in configs):
            continue
        runs = set.intersection(*(set(by_config[c]) for c in configs))
        if not runs:
            continue
        ranks = np.mean([scipy.stats.rankdata([by_config[c][run] for c in configs]) for run in sorted(runs)], axis=0)
        for c, r in zip(configs, ranks):
            per_dataset[c].append(float(r))
    return {c: _mean_se(v) for c, v in per_dataset.items()}


def median_difference(means: dict[tuple, float], configs: list[tuple], datasets: list[str]) -> dict[tuple, float]:
    """Median over datasets of mean(config) − mean(GP VI), over datasets where both exist."""
    out = {}
    for c in configs:
        diffs = [means[(d, *c)] - means[(d, *BASELINE)] for d in datasets
                 if (d, *c) in means and (d, *BASELINE) in means]
        out[c] = float(np.median(diffs)) if diffs else float("nan")
    return out


def shared_runs(groups: dict, configs: list[tuple], datasets: list[str]) -> dict[str, set]:
    """{dataset: the runs (split, seed) that every config of ``configs`` has there}, for the datasets
    where each of them has rows and they share at least one run."""
    out = {}
    for d in datasets:
        cells = [groups.get((d, *c)) for c in configs]
        if all(cells):
            runs = set.intersection(*(set(v) for v in cells))
            if runs:
                out[d] = runs
    return out


def summary(groups: dict, configs: list[tuple], datasets: list[str], paper_table: dict):
    """The summary rows, over the datasets where every config has results on a common run (as a rank
    needs): those datasets, our average ranks {config: (mean, s.e.)} and median differences from GP
    (VI), each dataset's columns taken over the runs they all have (not split 0 against splits 0-1),
    and the paper's (from its means, over those datasets where it has every config)."""
    shared = shared_runs(groups, configs, datasets)
    complete = list(shared)
    ranks = average_ranks({d: {c: groups[(d, *c)] for c in configs} for d in complete}, configs)
    with_gp = {d: shared[d] & set(groups.get((d, *BASELINE), ())) for d in complete}
    med = median_difference({(d, *c): scaled_mean([groups[(d, *c)][r] for r in runs])
                             for d, runs in with_gp.items() if runs for c in [*configs, BASELINE]}, configs, complete)
    paper = {(d, *c): paper_table[(d, *c[:2])][0] for d in complete for c in [*configs, BASELINE]
             if (d, *c[:2]) in paper_table}
    paper_complete = [d for d in complete if all((d, *c) in paper for c in configs)]
    paper_ranks = average_ranks({d: {c: {0: paper[(d, *c)]} for c in configs} for d in paper_complete}, configs)
    return complete, ranks, med, paper_ranks, median_difference(paper, configs, paper_complete)


GAP_CAUSES = {"improving": "budget", "worse": "overfitting", "flat": "flat"}


@dataclass(frozen=True)
class Gap:
    """One cell against the paper: ours − paper (``diff``), whether within the tolerance or better
    (``ok``), and for a cell short of it the cause its trend suggests ("budget", "overfitting",
    "flat"; "" where the cell ran one budget)."""

    dataset: str
    paper: float
    diff: float
    ok: bool
    cause: str


def gaps_to_paper(groups: dict, trend: dict, paper_of: dict, configs: list[tuple], datasets: list[str], metric: str,
                  tolerance: float) -> dict[tuple, list[Gap]]:
    """Per config with any cell the paper has, its cells against the paper in dataset order; a gap is
    labelled by the cell's trend (:func:`trends`): budget (still improving), overfitting (getting
    worse) or flat (neither)."""
    out: dict[tuple, list[Gap]] = {}
    for c in configs:
        for d in datasets:
            g = (d, *c)
            if g not in groups or g not in paper_of:
                continue
            ours, paper = _mean_se(groups[g].values())[0], paper_of[g][0]
            diff = 0.0 if ours == paper == -math.inf else ours - paper  # (both −∞: level, not NaN)
            ok = (-diff if metric in _LOWER_IS_BETTER else diff) >= -tolerance  # (False for NaN: ours has none)
            cause = ""
            if not ok and g in trend and not math.isnan(trend[g][1]):
                cause = GAP_CAUSES[_trend(*trend[g], metric).split()[1]]
            out.setdefault(c, []).append(Gap(d, paper_of[g][0], diff, ok, cause))
    return out


def against_paper(gaps: dict[tuple, list[Gap]], datasets: list[str], tolerance: float,
                  metric: str = "test_loglik_kde") -> list[str]:
    """The report's section "against the paper": a dataset × config table of :func:`gaps_to_paper` (a
    NaN cell, where a run produced NaN, is shown so and left out of the counts)."""
    unit = {"test_rmse": "(standardised units)", "shapiro_median": "(W)"}.get(metric, "nats")
    if not gaps:
        return []
    shown = list(gaps)
    lines = ["", f"## Against the paper (within {tolerance} {unit} or better)", "",
             "Each cell: ours − paper, ✓ where within the tolerance or better. A gap is labelled by the cell's trend "
             "between its last two budgets: **budget** (still improving), **overfitting** (getting worse), **flat** "
             "(neither: the model, recipe or protocol, not the budget); unlabelled where the cell ran one budget.", "",
             "| dataset | " + " | ".join(label(*c) for c in shown) + " |", "| --- |" + " ---: |" * len(shown)]
    cell = {(c, gap.dataset): gap for c in shown for gap in gaps[c]}
    for d in datasets:
        texts = []
        for c in shown:
            gap = cell.get((c, d))
            if gap is None:
                texts.append("–")
            elif math.isnan(gap.diff):
                texts.append("no value (NaN)")
            else:
                texts.append(f"{gap.diff:+.2f} {'✓' if gap.ok else '✗'}" + (f" {gap.cause}" if gap.cause else ""))
        lines.append(f"| {markdown_cell(d)} | " + " | ".join(texts) + " |")
    counts = {c: (sum(g.ok for g in gaps[c]), sum(not math.isnan(g.diff) for g in gaps[c])) for c in shown}
    lines.append("| **within** | " + " | ".join(f"{k} of {n}" for k, n in counts.values()) + " |")
    lines.append("")
    lines += [f"{label(*c)}: within {tolerance} {unit} of the paper or better on {counts[c][0]} of {counts[c][1]} "
              "datasets." for c in shown if c[:2] == ("LV-GP-GP", "iw")]
    return lines


def _comparison(rows: list[dict], paper_table: dict, metric: str, reference: dict | None = None):
    """What the report compares: (groups of :func:`summarise`, the configs (model, method, variant) in the
    paper's column order (Table S1's, then as they first appear), the datasets, the paper's value per
    group, the trends)."""
    groups = summarise(rows, metric, reference=reference)
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    apart = mixed_evaluation(rows)
    order = {c: i for i, c in enumerate(CONFIGS + BASELINES)}
    configs = sorted(dict.fromkeys(_group(r, apart, reference)[1:] for r in rows),
                     key=lambda c: order.get(c[:2], len(order)))
    # the paper's value for a config: its (model, method), whatever our variant of it
    # (and for the GP (VI) baseline, which the paper's median differences need even if we did not run it)
    paper_of = {(d, *c): paper_table[(d, *c[:2])] for d in datasets for c in [*configs, BASELINE]
                if (d, *c[:2]) in paper_table}
    return groups, configs, datasets, paper_of, trends(rows, metric, reference)


def against_paper_figure(results, paper, metric: str = "test_loglik_kde", tolerance: float = 0.1,
                         reference: dict | None = None):
    """A matplotlib Figure of ours − paper per data set, one panel per column: the paper's value across,
    the difference up; a cell within ``tolerance`` of the paper or above it in blue, below it (the
    shaded band) in red; differences beyond ±1 drawn at the edge as triangles."""
    rows = load_results(results).rows
    groups, configs, datasets, paper_of, trend = _comparison(rows, read_paper(paper), metric, reference)
    gaps = gaps_to_paper(groups, trend, paper_of, configs, datasets, metric, tolerance)
    if not gaps:
        raise ValueError(f"{results} has no cell that the paper's table {Path(paper).name} has")
    ncols = min(3, len(gaps))
    nrows = math.ceil(len(gaps) / ncols)
    fig = Figure(figsize=(4.2 * ncols, 3.2 * nrows), layout="constrained")  # (room for the suptitle too)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    limit = 1.0
    for ax, (c, cells) in zip(axes.flat, gaps.items()):
        worse = (tolerance, limit * 1.1) if metric in _LOWER_IS_BETTER else (-limit * 1.1, -tolerance)
        ax.axhspan(*worse, color=(1.0, 0.92, 0.92), zorder=0)  # short of the paper
        ax.axhline(0.0, color="0.4", lw=0.8)
        for gap in cells:
            x = gap.paper if math.isfinite(gap.paper) else np.nan
            y = float(np.clip(gap.diff, -limit, limit)) if not math.isnan(gap.diff) else np.nan
            clipped = abs(gap.diff) > limit
            marker = ("^" if gap.diff > 0 else "v") if clipped else "o"
            ax.plot(x, y, marker, color="tab:blue" if gap.ok else "tab:red", ms=5)
            ax.annotate(gap.dataset, (x, y), fontsize=6, xytext=(3, 2), textcoords="offset points")
        within = sum(g.ok for g in cells)
        hidden = sum(not math.isfinite(g.paper) for g in cells)  # (the paper's −∞: no place on the x axis)
        ax.set_title(f"{label(*c)}: {within} of {sum(not math.isnan(g.diff) for g in cells)} within {tolerance}"
                     + (f"\n({hidden} at the paper's −∞ not drawn)" if hidden else ""), fontsize=9)
        ax.set_ylim(-limit * 1.1, limit * 1.1)
        ax.set_xlabel("the paper's value", fontsize=8)
        ax.set_ylabel("ours − paper", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(gaps):]:
        ax.set_visible(False)
    fig.suptitle(f"{metric}: ours against the paper ({Path(paper).name})", fontsize=10)
    return fig


def render_report(results, paper=None, metric: str = "test_loglik_kde", tolerance: float = 0.1,
                  reference: dict | None = None) -> str:
    """The Markdown report of ``results`` (a results CSV), beside ``paper`` (the paper's Table 1 CSV);
    ``reference``: the settings whose rows are shown as the columns (default: the defaults)."""
    loaded = load_results(results)
    rows = loaded.rows
    ignored = f"damaged {describe_lines(loaded.damaged)}" if loaded.damaged else ""
    if not rows:
        raise ValueError(f"{results} holds no complete results rows" + (f" (ignored its {ignored})" if ignored else ""))
    paper_table = read_paper(paper) if paper else {}
    groups, configs, datasets, paper_of, trend = _comparison(rows, paper_table, metric, reference)
    ours = {g: _mean_se(v.values()) for g, v in groups.items()}
    budgets = sorted({(r["iterations"], r["num_inducing"], r["protocol"], r["test_limit"], r["predict_samples"],
                       r["shapiro_points"]) for r in rows})

    better = "lower" if metric in _LOWER_IS_BETTER else "higher"
    lines = [f"{REPORT_HEADINGS[0]}{metric} (standardised units, {better} is better)", ""]
    # the paper's table by its name: where it lies on one machine is no part of the result
    lines.append(f"Results: `{results}` ({len(rows)} rows). Paper: `{Path(paper).name}`." if paper
                 else f"Results: `{results}`.")
    for it, m, protocol, limit, draws, shapiro in budgets:
        shapiro = f"the first {shapiro} test points" if shapiro else "every test point"
        lines.append(f"- budget: {it} iterations, {m} inducing points, protocol `{protocol}`, test limit {limit}, "
                     f"{draws} predictive draws, Shapiro-Wilk on {shapiro}")
    if reference:
        lines.append(f"- the tables' rows: those at the {_settings(reference)}; a row at other settings is named "
                     "apart by them")
    if ignored:
        one = len(loaded.damaged) == 1
        lines.append(f"- ignored {ignored} of the results file: {'not a complete row' if one else 'not complete rows'} "
                     f"(`deepgp benchmark` runs {'its configuration' if one else 'their configurations'} again)")
    if trend:
        # a snapshot row's seconds are part of its run's longest row's: each run is counted once
        by_budget = sorted(rows, key=lambda r: r["iterations"])
        apart = mixed_evaluation(rows)  # (once: it reads every row)
        longest = {(*_group(r, apart, reference), r["split"], r["seed"]): r["seconds"] for r in by_budget}
        lines.append(f"- mean (s.e.) over runs, at each cell's longest budget; s.e. = std (ddof 0) / √runs, as the "
                     f"paper. Total compute: {_compute(longest.values())} "
                     f"({len(rows)} rows; a run counted once, at its longest budget).")
        lines.append(f"- trend: ours at the cell's longest budget − at the budget before it, over the runs with both; "
                     f"improving or worse beyond ±{TREND}, else flat.")
    else:
        lines.append(f"- mean (s.e.) over runs; s.e. = std (ddof 0) / √runs, as the paper. Total compute: "
                     f"{_compute(r['seconds'] for r in rows)}.")
    columns = ["dataset", "model", "runs", "ours", "paper", "ours − paper", *(["trend"] if trend else []), "mixture",
               "RMSE", "Shapiro W", "s/run"]
    lines += ["", "## Per dataset and model", "", "| " + " | ".join(columns) + " |",
              "| --- | --- |" + " ---: |" * (len(columns) - 2)]
    extra = {k: summarise(rows, k, reference=reference)
             for k in ("test_loglik_mixture", "test_rmse", "shapiro_median", "seconds")}
    for d in datasets:
        for c in configs:
            g = (d, *c)
            if g not in groups:
                continue
            mean, se = ours[g]
            p = paper_of.get(g)
            diff = f"{mean - p[0]:+.2f}" if p else "–"
            ex = [scaled_mean(list(extra[k][g].values())) for k in extra]
            known = [v for v in extra["seconds"][g].values() if not math.isnan(v)]  # (a hand-edited file may lack them)
            ex[3] = scaled_mean(known) if known else math.nan
            cells = [markdown_cell(d), label(*c), len(groups[g]), _fmt(mean, se), _fmt(*p) if p else "–", diff,
                     *([_trend(*trend[g], metric) if g in trend else "–"] if trend else []),
                     f"{ex[0]:.2f}", f"{ex[1]:.3f}", f"{ex[2]:.3f}", _number(ex[3], 0)]
            lines.append("| " + " | ".join(map(str, cells)) + " |")

    complete, ranks, med, paper_ranks, paper_med = summary(groups, configs, datasets, paper_table)
    lines += ["", f"## Summary over the {len(complete)} datasets with every model done", "",
              "| | " + " | ".join(label(*c) for c in configs) + " |",
              "| --- |" + " ---: |" * len(configs)]
    lines.append("| median difference from GP (VI), ours | " + " | ".join(_signed(med[c]) for c in configs) + " |")
    if paper_table:
        lines.append("| median difference from GP (VI), paper | "
                     + " | ".join(_signed(paper_med[c]) for c in configs) + " |")
    lines.append("| average rank, ours | " + " | ".join(_fmt(*ranks[c]) if c in ranks else "–" for c in configs) + " |")
    if paper_table:
        lines.append("| average rank, paper (its means) | "
                     + " | ".join(_fmt(*paper_ranks[c]) if c in paper_ranks else "–" for c in configs) + " |")
    lines.append("")
    better = "lower" if metric in _LOWER_IS_BETTER else "higher"
    lines.append(f"Datasets in the summary: {', '.join(complete) or 'none'}. Ranks: 1 = lowest {metric}, so a {better} "
                 "average rank is better, computed per split and averaged (the paper's convention); the paper's ranks "
                 "here come from its published means on the same datasets and models.")

    if paper_table:
        lines += against_paper(gaps_to_paper(groups, trend, paper_of, configs, datasets, metric, tolerance), datasets,
                               tolerance, metric)
    return "\n".join(lines) + "\n"


def _compute(seconds) -> str:
    """"1.20 h over 8 runs", and how many of them have no time recorded (a column deleted by hand)."""
    seconds = list(seconds)
    known = [s for s in seconds if not math.isnan(s)]
    unknown = f", {len(seconds) - len(known)} of them of unknown time" if len(known) < len(seconds) else ""
    hours = scaled_mean(known) / 3600 * len(known) if known else 0.0  # (a sum near float64's largest stays finite)
    return f"{hours:.2f} h over {len(seconds)} runs{unknown}"


def _default_rows(rows: list[dict], reference: dict | None = None) -> list[dict]:
    """The rows at the default settings (or ``reference``'s), each data set's measured the way most of
    its cells were (:func:`prevailing_evaluation`): one row measured another way cannot take a table
    over, and no data set drops out of it. Summarise them with ``apart=False``."""
    defaults = [r for r in rows if not variant(r, False, reference)]
    by_dataset: dict[str, list[dict]] = defaultdict(list)
    for r in defaults:
        by_dataset[r["dataset"]].append(r)
    usual = prevailing_evaluation(defaults)  # (a data set's tie goes the file's way)
    way = {d: prevailing_evaluation(rs, usual) for d, rs in by_dataset.items()}
    return [r for r in defaults if _evaluation(r) == way[r["dataset"]]]


def _settings(reference: dict | None) -> str:
    """"default settings", or "settings `inner_width=input` (the others at their defaults)"."""
    if not reference:
        return "default settings"
    given = ", ".join(f"{name}={_text(value)}" for name, value in reference.items())
    return f"settings `{given}` (the others at their defaults)"


def _measured(every: list[dict], shown: list[dict]) -> str:
    """Where ``every`` row was not measured one way: how the ``shown`` rows were, the most common way
    first, then the data sets measured otherwise (", measured with predict_samples=…, shapiro_points=…")."""
    if not shown or not mixed_evaluation(every):
        return ""
    ways = {r["dataset"]: _evaluation(r) for r in shown}
    common = prevailing_evaluation(shown)
    words = lambda way: ", ".join(f"{k}={v}" for k, v in zip(EVALUATION, way))  # noqa: E731
    others = defaultdict(list)
    for d, way in ways.items():
        if way != common:
            others[way].append(d)
    return ", measured with " + words(common) + "".join(f" ({', '.join(ds)}: {words(w)})" for w, ds in others.items())


def _evaluation(row: dict) -> tuple:
    return tuple(str(row[k]) for k in EVALUATION)


def prevailing_evaluation(rows: list[dict], prefer: tuple | None = None) -> tuple | None:
    """The way (:data:`~deepgp_bench.runner.EVALUATION`'s values, as text) most cells (dataset, model,
    method) of ``rows`` were measured, whatever their snapshots and splits; on a tie, ``prefer`` if it is
    among the most, else the defaults' way if it is, else the first found."""
    cells: dict[tuple, set] = defaultdict(set)
    for r in rows:
        cells[_evaluation(r)].add((r["dataset"], r["model"], r["method"]))
    if not cells:
        return None
    most = max(map(len, cells.values()))
    for way in (prefer, tuple(str(SETTINGS[k].default) for k in EVALUATION)):
        if len(cells.get(way, ())) == most:
            return way
    return next(w for w, c in cells.items() if len(c) == most)


def render_matrix(results, paper, metric: str, title: str, digits: int = 2, reference: dict | None = None) -> str:
    """A Markdown table of ``metric`` (mean over our runs at the default settings) beside the paper's
    ``paper`` table (Table S1: test log density; Table S2: the Shapiro-Wilk W): one row per dataset of
    ``results``, one column per method of the paper (then any method of ours it lacks), "ours / paper"."""
    every = load_results(results).rows
    rows = _default_rows(every, reference)
    groups = summarise(rows, metric, apart=False, reference=reference)
    paper_table = read_paper(paper)
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    methods = list(dict.fromkeys([k[1:] for k in paper_table] + [g[1:3] for g in groups]))
    ours = {g[:3]: scaled_mean(list(v.values())) for g, v in groups.items()}
    shown = _settings(reference) + _measured(every, rows)
    lines = [f"## {title}", "", f"{metric}: ours (mean over our runs, {shown}) / "
             f"the paper's `{Path(paper).name}`; – where there is none (ours: not run; the paper's: not in "
             "its table).", "",
             "| dataset | " + " | ".join(label(*m) for m in methods) + " |",
             "| --- |" + " ---: |" * len(methods)]
    for d in datasets:
        cells = [f"{_number(ours.get((d, *m)), digits)} / {_number(paper_table.get((d, *m), (None,))[0], digits)}"
                 for m in methods]
        lines.append(f"| {markdown_cell(d)} | " + " | ".join(cells) + " |")
    # the cells the paper fills and we have not run, methods with the same data sets together
    not_run: dict[tuple, list[str]] = {}
    for m in methods:
        lacking = tuple(d for d in datasets if (d, *m) not in ours and (d, *m) in paper_table)
        if lacking:
            not_run.setdefault(lacking, []).append(label(*m))
    if not_run:
        lines += ["", "Not run here where the paper has a value: " + "; ".join(
            f"{', '.join(names)} on {', '.join(lacking)} ({len(lacking)} of {len(datasets)})"
            for lacking, names in not_run.items()) + "."]
    return "\n".join(lines) + "\n"


def _number(value, digits: int = 2) -> str:
    if value is None or math.isnan(value):
        return "–"
    return f"{value:.{digits}f}" if math.isfinite(value) else ("−∞" if value < 0 else "∞")


NON_GAUSSIAN_W = 0.99  # the paper italicises a Table 1 cell whose median Shapiro-Wilk W is below this


def _table1_cell(value, w, digits: int = 2) -> str:
    """A value, in italics where its predictive marginals are non-Gaussian (W below NON_GAUSSIAN_W)."""
    text = _number(value, digits)
    return f"*{text}*" if text != "–" and w is not None and w < NON_GAUSSIAN_W else text


def render_table1(results, paper=None, shapiro=None, metric: str = "test_loglik_kde",
                  reference: dict | None = None) -> str:
    """The paper's Table 1 re-measured: one row per dataset of ``results``, the nine columns of
    :data:`deepgp_bench.runner.CONFIGS` (rows at the default settings, each group at its largest
    budget), each cell "ours / paper" in italics where the median Shapiro-Wilk W is below 0.99 (ours
    from our rows, the paper's from its Table S2 ``shapiro``), then the summary rows (median
    difference from GP (VI), average rank over the datasets with all nine columns) and the runs ×
    iterations behind every cell, "–" where a cell has no rows."""

    every = load_results(results).rows
    rows = _default_rows(every, reference)
    groups = summarise(rows, metric, apart=False, reference=reference)
    w_ours = {g[:3]: scaled_mean(list(v.values()))
              for g, v in summarise(rows, "shapiro_median", False, reference).items()}
    budget = {g[:3]: max(v.values()) for g, v in summarise(rows, "iterations", False, reference).items()}
    paper_table = read_paper(paper) if paper else {}
    paper_w = {k: v[0] for k, v in read_paper(shapiro, "--shapiro").items()} if shapiro else {}
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    configs = [(m, k, "") for m, k in CONFIGS]
    means = {g: _mean_se(v.values())[0] for g, v in groups.items()}
    header = "| dataset | " + " | ".join(label(*c) for c in configs) + " |"
    rule = "| --- |" + " ---: |" * len(configs)
    lines = ["## Table 1: test log-likelihood, ours / the paper's", "",
             f"{metric}, mean over our runs at the {_settings(reference) + _measured(every, rows)} / the paper's "
             "Table 1. "
             f"*Italics*: median Shapiro-Wilk W below {NON_GAUSSIAN_W} (a non-Gaussian predictive; the paper's from "
             "its Table S2). – where there is no value.", "", header, rule]
    for d in datasets:
        cells = []
        for c in configs:
            ours = _table1_cell(means.get((d, *c)), w_ours.get((d, *c[:2])))
            theirs = _table1_cell(paper_table.get((d, *c[:2]), (None,))[0], paper_w.get((d, *c[:2])))
            cells.append(f"{ours} / {theirs}")
        lines.append(f"| {markdown_cell(d)} | " + " | ".join(cells) + " |")
    complete, ranks, med, paper_ranks, paper_med = summary(groups, configs, datasets, paper_table)
    lines.append(f"| median difference from GP (VI), ours / paper ({len(complete)} datasets) | "
                 + " | ".join(f"{_signed(med[c])} / {_signed(paper_med[c])}" for c in configs) + " |")
    lines.append("| average rank, ours / paper | " + " | ".join(
        f"{_number(ranks.get(c, (None,))[0])} / {_number(paper_ranks.get(c, (None,))[0])}" for c in configs) + " |")
    lines += ["", f"Summary rows over the {len(complete)} datasets with all nine columns"
              + (f" ({', '.join(complete)})" if complete else "") + ", over the runs a dataset's nine share (the "
              "cells above: over all of each one's runs); ranks per split, 1 = lowest, as the paper.",
              "", "Runs × iterations behind each cell (– : not run):", "", header, rule]
    for d in datasets:
        cells = [f"{len(groups[(d, *c)])} × {budget[(d, *c[:2])]:,}" if (d, *c) in groups else "–" for c in configs]
        lines.append(f"| {markdown_cell(d)} | " + " | ".join(cells) + " |")
    gaps = _gaps(groups, configs, datasets)
    if gaps:
        lines += ["", "Runs missing from cells (not run, or not yet to the cell's longest budget) where other "
                  "columns of the same dataset have them: " + "; ".join(gaps) + "."]
    missing = [d for d in dict.fromkeys(k[0] for k in paper_table) if d not in datasets]
    if missing:
        lines += ["", f"Datasets of the paper's table with no rows here: {', '.join(missing)}."]
    return "\n".join(lines) + "\n"


def _gaps(groups: dict, configs: list[tuple], datasets: list[str]) -> list[str]:
    """Per dataset and run (split, seed) of any of its columns: the columns without that run, as
    "dataset split s: columns" (the seed named where it is not the split's own)."""
    out = []
    for d in datasets:
        runs = {c: set(groups.get((d, *c), ())) for c in configs}
        for split, seed in sorted(set().union(*runs.values())):
            lacking = [label(*c) for c in configs if (split, seed) not in runs[c]]
            if lacking:
                run = f"split {split}" + (f" seed {seed}" if seed != split else "")
                out.append(f"{d} {run}: {', '.join(lacking)}")
    return out


def write_report(results, out=None, paper=None, metric: str = "test_loglik_kde", shapiro=None,
                 reference: dict | None = None) -> str:
    """:func:`render_report`; with ``paper``, Table S1 (:func:`render_matrix` of ``metric``) after it; with
    ``shapiro`` (the paper's Table S2), Table S2 of the median Shapiro-Wilk W. ``reference``: the
    settings whose rows the tables show (default: the defaults; :func:`~deepgp_bench.runner.variant`)."""
    if reference and not _default_rows(load_results(results).rows, reference):
        raise ValueError(f"{results} has no row at the settings {_settings(reference).removeprefix('settings ')}: "
                         "give the settings its rows were run with (each row's label in the report names them)")
    text = render_report(results, paper, metric, reference=reference)
    text += "\n" + render_table1(results, paper, shapiro, metric, reference)
    if paper:
        text += "\n" + render_matrix(results, paper, metric, "Every method beside the paper (its Table S1)",
                                      reference=reference)
    if shapiro:
        text += "\n" + render_matrix(results, shapiro, "shapiro_median",
                                      "Shapiro-Wilk W of the predictive marginals beside the paper (its Table S2)", 3,
                                      reference)
    if out:
        write_bytes(out, text.encode())
    return text
