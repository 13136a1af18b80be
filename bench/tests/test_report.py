"""Report: means and s.e. over splits beside the paper, differences, ranks, median difference from GP."""

import csv
import math
from pathlib import Path

import pytest

from deepgp.config import RECIPE_VALUES
from deepgp_bench import report, runner

PAPER = Path(__file__).resolve().parents[2].parent / "shared" / "paper" / "table1_test_loglik.csv"


def write_results(path, values, iterations=10, **settings):
    """values: {(dataset, model, method): [kde per split]} → a results CSV (appended to one that exists);
    ``settings``: columns of every row."""
    base = {k: 0 for k in runner.COLUMNS} | runner.default_settings() | dict(
        protocol="splits", iterations=10, num_inducing=8, test_limit=10,
                                                 seconds=1.0, test_loglik_mixture=0.0, test_rmse=1.0,
                                                 shapiro_median=0.99, bound=-1.0, dtype="float64")
    runner.prepare_results(path)
    with open(path, "a") as f:
        for (d, m, me, *sampling), vals in values.items():
            inner = sampling[0] if sampling else (runner.SETTINGS["inner_sampling"].default if me == "iw" else "-")
            for s, v in enumerate(vals):
                f.write(runner.format_row(base | dict(dataset=d, model=m, method=me, split=s, seed=s,
                                                      inner_sampling=inner, test_loglik_kde=float(v),
                                                      iterations=iterations, seconds=iterations / 10) | settings))


def test_ranks_and_median_difference():
    gp, x = ("GP", "vi", ""), ("X", "iw", "")
    table = {"a": {gp: {0: 1.0, 1: 2.0}, x: {0: 3.0, 1: 1.0}},
             "b": {gp: {0: 0.0}, x: {0: 1.0}}}
    ranks = report.average_ranks(table, [gp, x])
    assert ranks[x][0] == pytest.approx((1.5 + 2) / 2)  # per split, then per dataset
    means = {("a", *gp): 0.0, ("a", *x): 1.0, ("b", *gp): 0.0, ("b", *x): 3.0}
    assert report.median_difference(means, [x], ["a", "b"])[x] == 2.0


def test_summary_compares_a_datasets_columns_on_the_runs_they_share():
    gp, x = ("GP", "vi", ""), ("X", "iw", "")
    groups = {("a", *gp): {0: 0.0, 1: 10.0}, ("a", *x): {0: 1.0},  # split 1 of GP alone: left out
              ("b", *gp): {0: 0.0, 1: 0.0}, ("b", *x): {0: 1.0, 1: 3.0}}
    complete, _, med, _, _ = report.summary(groups, [gp, x], ["a", "b"], {})
    assert complete == ["a", "b"] and med[x] == 1.5  # median of a: 1 − 0 and b: 2 − 0 (not of −4 and 2)
    # a dataset whose columns share no run is left out of the summary, and of its count
    groups[("c", *gp)], groups[("c", *x)] = {0: 0.0}, {1: 9.0}
    complete, ranks, med, _, _ = report.summary(groups, [gp, x], ["a", "b", "c"], {})
    assert complete == ["a", "b"] and med[x] == 1.5 and report.shared_runs(groups, [gp, x], ["c"]) == {}


def test_report_against_a_paper_table(tmp_path):
    paper = tmp_path / "paper.csv"
    paper.write_text("dataset,N,D,GP_VI,GP_VI_se,LV-GP-GP_IWVI,LV-GP-GP_IWVI_se\n"
                     "boston,506,13,0.02,0.00,0.14,0.00\nyacht,308,6,1.32,0.02,1.71,0.01\n")
    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0, 0.2], ("boston", "LV-GP-GP", "iw"): [0.1, 0.1],
                            ("yacht", "GP", "vi"): [1.0, 1.0], ("yacht", "LV-GP-GP", "iw"): [2.0, 2.0]})
    text = report.render_report(results, paper)
    assert "| boston | GP (VI) | 2 | 0.10 (0.07) | 0.02 (0.00) | +0.08 |" in text
    assert "| boston | LV-GP-GP (IWVI) | 2 | 0.10 (0.00) | 0.14 (0.00) | -0.04 |" in text
    assert "LV-GP-GP (IWVI): within 0.1 nats of the paper or better on 2 of 2 datasets." in text
    assert "| boston | +0.08 ✓ | -0.04 ✓ |" in text and "| yacht | -0.32 ✗ | +0.29 ✓ |" in text
    assert "| **within** | 1 of 2 | 2 of 2 |" in text
    assert "| median difference from GP (VI), ours | +0.00 | +0.50 |" in text


@pytest.mark.skipif(not PAPER.exists(), reason=f"paper table not found at {PAPER}")
def test_report_with_the_papers_table(tmp_path):
    results = tmp_path / "r.csv"
    write_results(results, {("power", "GP", "vi"): [-0.6, -0.7], ("power", "LV-GP-GP", "iw"): [-0.3, -0.2]})
    text = report.render_report(results, PAPER)
    assert "| power | LV-GP-GP (IWVI) | 2 | -0.25 (0.04) | -0.28 (0.05) | +0.03 |" in text
    assert "average rank, paper (its means) | 1.00 | 2.00 |" in text


def test_variants_are_reported_apart_and_against_the_same_paper_value(tmp_path):
    paper = tmp_path / "paper.csv"
    paper.write_text("dataset,N,D,GP_VI,GP_VI_se,LV-GP-GP_IWVI,LV-GP-GP_IWVI_se\nboston,506,13,0.02,0.00,0.14,0.00\n")
    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0], ("boston", "LV-GP-GP", "iw"): [-0.1],
                            ("boston", "LV-GP-GP", "iw", "joint"): [0.1]})
    text = report.render_report(results, paper)
    assert "| boston | LV-GP-GP (IWVI) | 1 | -0.10 | 0.14 (0.00) | -0.24 |" in text
    assert "| boston | LV-GP-GP (IWVI, joint inner draws) | 1 | 0.10 | 0.14 (0.00) | -0.04 |" in text
    assert "| boston | -0.02 ✓ | -0.24 ✗ | -0.04 ✓ |" in text  # one column each, the same paper value
    assert text.count("within 0.1 nats of the paper or better on") == 2


def test_the_tables_can_be_drawn_at_given_settings(tmp_path):
    """``deepgp report --inner-width input``: on a data set where the default width is "hidden", the rows run
    at the paper's width fill the tables, the default's rows are named apart, and a model that reads no
    width (GP) is the same cell either way."""
    from deepgp.cli import main

    results = tmp_path / "r.csv"
    write_results(results, {("power", "GP", "vi"): [0.1], ("power", "GP-GP", "vi"): [0.2]},
                  inner_width="input", n_train=9000)
    write_results(results, {("power", "GP-GP", "vi"): [0.3]}, inner_width="hidden", n_train=9000)
    assert "| power | 0.10 / – | 0.30 / – |" in report.render_table1(results)
    paper_width = {"inner_width": "input"}
    assert "| power | 0.10 / – | 0.20 / – |" in report.render_table1(results, reference=paper_width)
    text = report.render_report(results, reference=paper_width)
    assert "| power | GP-GP (VI) | 1 | 0.20 |" in text
    assert "| power | GP-GP (VI, inner_width=hidden) | 1 | 0.30 |" in text
    assert "the tables' rows: those at the settings `inner_width=input` (the others at their defaults)" in text
    out = tmp_path / "report.md"
    assert main(["report", str(results), "--inner-width", "input", "--out", str(out)]) == 0
    assert "| power | 0.10 / – | 0.20 / – |" in out.read_text(encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        main(["report", str(results), "--inner-width", "wide"])
    assert exit_.value.code == 2  # (argparse's one-line error naming the option)


def test_given_settings_are_checked_and_must_match_some_rows(tmp_path, capsys):
    """A reference is checked as ``deepgp benchmark`` checks its settings, one that no row was run at is an
    error naming it (not empty tables), and the inner draws can be given too (the paper grid's joint ones)."""
    from deepgp.cli import main

    results = tmp_path / "r.csv"
    write_results(results, {("a", "LV-GP-GP", "iw", "joint"): [0.5], ("a", "GP", "vi"): [0.1]})
    assert "| a | 0.10 / – |" in report.render_table1(results)
    assert "| a | 0.10 / – | – / – | – / – | – / – | – / – | – / – | 0.50 / – |" in report.render_table1(
        results, reference={"inner_sampling": "joint"})
    assert main(["report", str(results), "--gamma", "2"]) == 2
    assert "gamma must be in (0, 1]" in capsys.readouterr().err
    assert main(["report", str(results), "--batch-size", "64"]) == 2
    assert "no row at the settings `batch_size=64`" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not \\['num_samples'\\]"):
        report.render_table1(results, reference={"num_samples": 5})


def test_an_optimiser_setting_given_names_only_its_recipes_rows(tmp_path):
    """``--lr 0.02`` (the fast recipe's): a paper-recipe row keeps its own recipe's lr and is labelled by its
    recipe alone, not "lr=0.005" beside it."""
    results = tmp_path / "r.csv"
    write_results(results, {("a", "GP", "vi"): [0.1]})
    write_results(results, {("a", "GP", "vi"): [0.3]}, recipe="paper", **RECIPE_VALUES["paper"])
    text = report.render_report(results, reference={"lr": 0.02})
    assert "| a | GP (VI) | 1 | 0.10 |" in text and "| a | GP (VI, recipe=paper) | 1 | 0.30 |" in text


def test_a_gap_to_the_paper_is_labelled_by_its_trend(tmp_path):
    """Short of the paper by more than the tolerance: budget if still improving between the last two
    budgets, overfitting if getting worse, flat if neither (±0.02); no label with one budget."""
    paper = tmp_path / "paper.csv"
    paper.write_text("dataset,N,D,GP_VI,GP_VI_se,LV-GP-GP_IWVI,LV-GP-GP_IWVI_se\n"
                     "a,1,1,1.0,0.0,1.0,0.0\nb,1,1,1.0,0.0,1.0,0.0\nc,1,1,1.0,0.0,1.0,0.0\n")
    results = tmp_path / "r.csv"
    write_results(results, {("a", "GP", "vi"): [0.0], ("b", "GP", "vi"): [0.5], ("c", "GP", "vi"): [0.8]},
                  iterations=5)
    write_results(results, {("a", "GP", "vi"): [0.5], ("b", "GP", "vi"): [0.3], ("c", "GP", "vi"): [0.81]})
    write_results(results, {("a", "LV-GP-GP", "iw"): [0.0], ("b", "LV-GP-GP", "iw"): [0.95]})
    text = report.render_report(results, paper)
    assert "| a | -0.50 ✗ budget | -1.00 ✗ |" in text
    assert "| b | -0.70 ✗ overfitting | -0.05 ✓ |" in text
    assert "| c | -0.19 ✗ flat | – |" in text
    assert "| **within** | 0 of 3 | 1 of 2 |" in text


def test_the_papers_median_difference_needs_no_gp_rows_of_ours(tmp_path):
    paper = tmp_path / "paper.csv"
    paper.write_text("dataset,N,D,GP_VI,GP_VI_se,LV-GP-GP_IWVI,LV-GP-GP_IWVI_se\nboston,506,13,0.02,0.00,0.14,0.00\n")
    results = tmp_path / "r.csv"
    write_results(results, {("boston", "LV-GP-GP", "iw"): [0.1]})
    assert "| median difference from GP (VI), paper | +0.12 |" in report.render_report(results, paper)


def test_a_damaged_line_is_listed_and_every_other_row_reported(tmp_path):
    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0, 0.2]})
    with open(results, "a") as f:
        f.write('boston,GP,"vi,1\n')  # broken quoting: read as one line, it hides nothing after it
    with pytest.warns(runner.ResultsFileWarning, match="line 4"):
        write_results(results, {("yacht", "GP", "vi"): [1.0]})
    text = report.render_report(results)
    assert "| boston | GP (VI) | 2 |" in text and "| yacht | GP (VI) | 1 |" in text
    assert "- ignored damaged line 4 of the results file: not a complete row (`deepgp benchmark` runs its" in text


def test_finite_extremes_in_a_hand_edited_file_give_finite_means_and_total(tmp_path, recwarn):
    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [1.7e308, 1.7e308]}, test_loglik_mixture=-1.7e308,
                  test_rmse=1.5e308, seconds=1e308)
    text = report.render_report(results)
    assert "inf" not in text and "∞" not in text and not [w for w in recwarn if "overflow" in str(w.message)]
    assert f"| boston | GP (VI) | 2 | {1.7e308:.2f} (0.00) |" in text  # the mean is the value itself
    assert f"Total compute: {1e308 / 3600 * 2:.2f} h over 2 runs" in text


def test_a_csv_that_is_not_a_results_file_is_refused(tmp_path):
    other = tmp_path / "other.csv"
    other.write_text("dataset,model\nboston,GP\n")
    with pytest.raises(ValueError, match=r"other.csv is not a deepgp results file: it lacks the columns \['method', "):
        report.render_report(other)


def test_table_s1_and_s2_put_every_method_beside_the_paper(tmp_path):
    s1, s2 = tmp_path / "s1.csv", tmp_path / "s2.csv"
    s1.write_text("dataset,N,D,Linear,Linear_se,CVAE-50,CVAE-50_se,CVAE-100-100,CVAE-100-100_se,GP_VI,GP_VI_se,"
                  "GP_SGHMC,GP_SGHMC_se\nyacht,308,6,-0.14,0.10,-7.91,4.34,-inf,,1.32,0.02,-0.26,0.79\n")
    s2.write_text("dataset,N,D,Linear,CVAE-50,GP_VI,GP_SGHMC\nyacht,308,6,1,0.9987,1,1\n")
    paper = report.read_paper(s1)
    assert list(paper) == [("yacht", m, me) for m, me in (("Linear", "vi"), ("CVAE-50", "vi"), ("CVAE-100-100", "vi"),
                                                          ("GP", "vi"), ("GP", "sghmc"))]
    assert paper[("yacht", "CVAE-50", "vi")] == (-7.91, 4.34) and paper[("yacht", "GP", "sghmc")] == (-0.26, 0.79)
    assert paper[("yacht", "CVAE-100-100", "vi")][0] == float("-inf")
    results = tmp_path / "r.csv"
    write_results(results, {("yacht", "Linear", "vi"): [-0.2, -0.1], ("yacht", "GP", "sghmc"): [0.5],
                            ("yacht", "CVAE-100-100", "vi"): [-3.0]})
    text = report.write_report(results, paper=s1, shapiro=s2)
    assert "| yacht | CVAE-100-100 (VI) | 1 | -3.00 | −∞ | +inf |" in text
    assert ("| dataset | Linear (VI) | CVAE-50 (VI) | CVAE-100-100 (VI) | GP (VI) | GP (SGHMC) |\n"
            in text.split("its Table S1")[1])
    assert "| yacht | -0.15 / -0.14 | – / -7.91 | -3.00 / −∞ | – / 1.32 | 0.50 / -0.26 |" in text
    assert "| yacht | 0.990 / 1.000 | – / 0.999 | – / 1.000 | 0.990 / 1.000 | 0.990 / – |" in text  # ours last
    # what the paper has and we have not run is listed below each table, per method
    s1_text = text.split("its Table S1")[1].split("## ")[0]
    assert "Not run here where the paper has a value: CVAE-50 (VI), GP (VI) on yacht (1 of 1)." in s1_text
    assert "CVAE-100-100 (VI)" not in s1_text.split("Not run here")[1]  # run, even if the paper's is −∞


def test_table_1_has_the_nine_columns_italics_summary_and_coverage(tmp_path):
    columns = [(m, k) for m, k in runner.CONFIGS]
    values = {("a", m, k): [float(i), float(i) + 0.2] for i, (m, k) in enumerate(columns)}
    values[("b", "GP", "vi")] = [0.5]  # b has one column only: not in the summary, its other cells "–"
    results = tmp_path / "r.csv"
    write_results(results, values)
    # a's LV-GP (IW) marginals are non-Gaussian: its cell in italics
    with open(results, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        if (r["model"], r["method"]) == ("LV-GP", "iw"):
            r["shapiro_median"] = "0.95"
    with open(results, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    paper = tmp_path / "paper.csv"
    paper.write_text("dataset,N,D,GP_VI,GP_VI_se,LV-GP-GP-GP_IWVI,LV-GP-GP-GP_IWVI_se\na,10,1,-1.00,0.1,2.50,0.1\n"
                     "c,10,1,0.0,0.0,0.0,0.0\n")
    shapiro = tmp_path / "s2.csv"
    shapiro.write_text("dataset,N,D,GP_VI,LV-GP-GP-GP_IWVI\na,10,1,1,0.90\n")
    text = report.render_table1(results, paper, shapiro)
    assert "| dataset | GP (VI) | GP-GP (VI) | GP-GP-GP (VI) | LV-GP (VI) | LV-GP (IWVI) |" in text
    row_a = next(line for line in text.splitlines() if line.startswith("| a |"))
    cells = [c.strip() for c in row_a.split("|")[2:-1]]
    assert cells[0] == "0.10 / -1.00" and cells[4] == "*4.10* / –" and cells[8] == "8.10 / *2.50*"
    assert "| b | 0.50 / – | – / – |" in text
    assert "(1 datasets)" in text and "median difference from GP (VI), ours / paper" in text
    # the coverage table: runs × iterations, – where nothing ran
    assert "| a | 2 × 10 | 2 × 10 |" in text and "| b | 1 × 10 | – | – |" in text
    assert "Datasets of the paper's table with no rows here: c." in text
    # the cells not run yet, where another column of their dataset has the run
    assert ("where other columns of the same dataset have them: b split 0: GP-GP (VI), "
            "GP-GP-GP (VI), LV-GP (VI)") in text and "a split" not in text
    # ...and the report includes it
    assert "## Table 1: test log-likelihood" in report.write_report(results, paper=paper, shapiro=shapiro)


def test_gaps_name_the_run_a_column_lacks():
    gp, x = ("GP", "vi", ""), ("LV-GP", "iw", "")
    groups = {("d", *gp): {(0, 0): 1.0, (0, 3): 2.0, (1, 1): 0.0}, ("d", *x): {(0, 0): 1.0},
              ("e", *gp): {(0, 0): 1.0}, ("e", *x): {(0, 0): 1.0}}
    assert report._gaps(groups, [gp, x], ["d", "e"]) == ["d split 0 seed 3: LV-GP (IWVI)", "d split 1: LV-GP (IWVI)"]


def test_a_cell_with_several_budgets_shows_its_trend(tmp_path):
    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0], ("yacht", "GP", "vi"): [1.0, 1.0]})
    one_budget = report.render_report(results)
    assert "trend" not in one_budget and "| boston | GP (VI) | 1 | 0.00 | – | – | 0.00 |" in one_budget
    write_results(results, {("boston", "GP", "vi"): [0.03], ("yacht", "GP", "vi"): [1.0, 1.1]}, iterations=20)
    write_results(results, {("boston", "GP", "vi"): [0.1], ("yacht", "GP", "vi"): [0.9, 1.0],
                            ("yacht", "LV-GP", "iw"): [2.0]}, iterations=30)
    text = report.render_report(results)
    # the numbers at the longest budget; the trend against the budget before it, over the runs at both
    assert "| boston | GP (VI) | 1 | 0.10 | – | – | +0.07 improving (from 20) | 0.00 |" in text
    assert "| yacht | GP (VI) | 2 | 0.95 (0.04) | – | – | -0.10 worse (from 20) | 0.00 |" in text
    assert "| yacht | LV-GP (IWVI) | 1 | 2.00 | – | – | – | 0.00 |" in text
    assert "Total compute: 0.00 h over 4 runs (10 rows; a run counted once, at its longest budget)" in text
    assert report.trends(runner.read_results(results), "test_rmse") == {
        ("boston", "GP", "vi", ""): (20, 0.0), ("yacht", "GP", "vi", ""): (20, 0.0)}
    assert report._trend(20, 0.01, "test_loglik_kde") == "+0.01 flat (from 20)"
    assert report._trend(1000, -0.05, "test_rmse") == "-0.05 improving (from 1,000)"  # lower is better


def test_label_and_the_papers_sizes(tmp_path):
    assert report.label("LV-GP", "iw") == "LV-GP (IWVI)"
    assert report.label("GP", "vi", "float32") == "GP (VI, float32)"
    paper = tmp_path / "paper.csv"
    paper.write_text("dataset,N,D,GP_VI,GP_VI_se\nboston,506,13,0.02,0.00\nyacht,308,6,1.32,0.02\n")
    assert report.read_paper_sizes(paper) == {"boston": 506, "yacht": 308}
    (tmp_path / "no_n.csv").write_text("dataset,GP_VI\nboston,0.02\n")
    assert report.read_paper_sizes(tmp_path / "no_n.csv") == {}
    (tmp_path / "bad.csv").write_text("dataset,N\nboston,many\n")
    with pytest.raises(ValueError, match="line 2"):
        report.read_paper_sizes(tmp_path / "bad.csv")


def test_a_file_measured_several_ways_reports_each_apart(tmp_path):
    """Predictive draws and Shapiro-Wilk points: named once where the whole file shares them (and its rows
    count as the defaults in Table 1); rows measured another way are reported apart, out of Table 1."""
    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0]})
    row = runner.load_results(results).rows[0]
    with open(results, "a") as f:  # the same run measured on every test point
        f.write(runner.format_row(row | dict(shapiro_points=0, test_loglik_kde=1.0)))
    text = report.render_report(results)
    assert "| boston | GP (VI) | 1 | 0.00 |" in text and "| boston | GP (VI, shapiro_points=0) | 1 | 1.00 |" in text
    assert "Shapiro-Wilk on every test point" in text and "Shapiro-Wilk on the first 200 test points" in text
    assert "| boston | 0.00 / – |" in report.render_table1(results)

    one_way = tmp_path / "one.csv"
    runner.prepare_results(one_way)
    with open(one_way, "a") as f:
        f.write(runner.format_row(row | dict(shapiro_points=0, test_loglik_kde=0.5)))
    assert "| boston | GP (VI) | 1 | 0.50 |" in report.render_report(one_way)
    assert "| boston | 0.50 / – |" in report.render_table1(one_way)


def test_columns_follow_the_papers_order_whatever_order_the_rows_came_in(tmp_path):
    results = tmp_path / "r.csv"
    write_results(results, {("a", "GP", "sghmc"): [0.0], ("a", "LV-GP-GP", "iw"): [0.0], ("a", "Linear", "vi"): [0.0],
                            ("a", "GP", "vi"): [0.0]})
    text = report.render_report(results)
    assert "| median difference from GP (VI), ours | +0.00 | +0.00 | +0.00 | +0.00 |" in text
    assert "| | GP (VI) | LV-GP-GP (IWVI) | Linear (VI) | GP (SGHMC) |" in text


def test_report_draws_ours_against_the_paper(tmp_path, capsys):
    from deepgp.cli import main

    paper = tmp_path / "paper.csv"
    paper.write_text("dataset,N,D,GP_VI,GP_VI_se,LV-GP-GP_IWVI,LV-GP-GP_IWVI_se\n"
                     "boston,506,13,0.02,0.00,0.14,0.00\nyacht,308,6,1.32,0.02,1.71,0.01\n")
    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0], ("boston", "LV-GP-GP", "iw"): [0.1],
                            ("yacht", "GP", "vi"): [-2.0], ("yacht", "LV-GP-GP", "iw"): [2.0]})
    fig = report.against_paper_figure(results, paper)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == ["GP (VI): 1 of 2 within 0.1", "LV-GP-GP (IWVI): 2 of 2 within 0.1"]
    # yacht's GP is 3.32 below the paper: drawn at the edge (clipped to -1) as a downward triangle
    (line,) = [ln for ln in shown[0].lines if ln.get_marker() == "v"]
    assert line.get_ydata()[0] == -1.0 and line.get_color() == "tab:red"
    out = tmp_path / "fig" / "against.png"
    out.parent.mkdir()  # (a writer makes no folder: bench/tests/test_output_folders.py)
    assert main(["report", str(results), "--paper", str(paper), "--figure", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    assert main(["report", str(results), "--figure", str(tmp_path / "x.png")]) == 2
    assert "--figure" in capsys.readouterr().err and not (tmp_path / "x.png").exists()
    assert main(["report", str(results), "--paper", str(paper), "--figure", str(tmp_path / "x.txt")]) == 2
    assert ".png" in capsys.readouterr().err


def test_the_report_reads_how_rows_were_measured_once_not_once_per_row(tmp_path, monkeypatch):
    """mixed_evaluation reads every row: called per row, a report of thousands of rows took a minute."""
    results = tmp_path / "r.csv"
    write_results(results, {("a", "GP", "vi"): [0.0] * 20, ("b", "GP", "vi"): [0.0] * 20}, iterations=5)
    write_results(results, {("a", "GP", "vi"): [0.1] * 20, ("b", "GP", "vi"): [0.1] * 20})  # a trend: snapshots
    calls = []
    real = report.mixed_evaluation
    monkeypatch.setattr(report, "mixed_evaluation", lambda rows: calls.append(len(rows)) or real(rows))
    assert "Total compute" in report.render_report(results)
    assert 0 < len(calls) <= 10  # a few passes over the 80 rows, not one per row


def test_report_figure_errors_before_writing_anything(tmp_path, capsys):
    """A --figure that cannot be drawn (no cell the paper has) is a one-line error, exit 2, with no report
    printed or written before it."""
    from deepgp.cli import main

    paper = tmp_path / "paper.csv"
    paper.write_text("dataset,N,D,GP-GP_VI,GP-GP_VI_se\nboston,506,13,0.5,0.0\n")
    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0]})
    capsys.readouterr()
    assert main(["report", str(results), "--paper", str(paper), "--figure", str(tmp_path / "f.png")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("deepgp report: error: ") and err.count("\n") == 1 and "no cell" in err
    out_md = tmp_path / "r.md"
    assert main(["report", str(results), "--paper", str(paper), "--out", str(out_md),
                 "--figure", str(tmp_path / "f.png")]) == 2
    assert not out_md.exists() and not (tmp_path / "f.png").exists()


def test_report_out_replaces_only_an_earlier_report(tmp_path, capsys):
    from deepgp.cli import main

    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0, 0.2]})
    other_results, data = tmp_path / "other.csv", tmp_path / "data.csv"
    other_results.write_bytes(results.read_bytes())
    data.write_text("x,y\n1,2\n")
    for victim in (other_results, data):
        before = victim.read_bytes()
        assert main(["report", str(results), "--out", str(victim)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "a report of deepgp report" in err and victim.read_bytes() == before
    out = tmp_path / "r.md"
    for _ in range(2):  # (a new file, then the report it wrote)
        assert main(["report", str(results), "--out", str(out)]) == 0
    assert report.is_report(out)
    peers_doc = tmp_path / "peers.md"
    peers_doc.write_text(report.REPORT_HEADINGS[1] + "deepgp against the peers\n")
    assert main(["report", str(results), "--out", str(peers_doc)]) == 0


def test_the_heading_says_which_way_is_better(tmp_path):
    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0]})
    assert "higher is better" in report.render_report(results).splitlines()[0]
    assert "lower is better" in report.render_report(results, metric="test_rmse").splitlines()[0]
    # and so do the ranks: 1 is the lowest value, the worst log density and the best RMSE
    assert "Ranks: 1 = lowest test_loglik_kde, so a higher average rank is better" in report.render_report(results)
    assert "Ranks: 1 = lowest test_rmse, so a lower average rank is better" in report.render_report(
        results, metric="test_rmse")


def test_one_row_measured_the_default_way_does_not_take_table_1_over(tmp_path):
    """A file measured on every test point, plus one row measured the default way: the tables show the
    many, and say how they were measured."""
    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0], ("yacht", "GP", "vi"): [0.0]})
    rows = runner.load_results(results).rows
    runner.prepare_results(many := tmp_path / "many.csv")
    with open(many, "a") as f:
        for row, value in zip(rows, (0.5, 0.7)):
            f.write(runner.format_row(row | dict(shapiro_points=0, test_loglik_kde=value)))
        f.write(runner.format_row(rows[0] | dict(test_loglik_kde=-3.0)))  # boston once more, on 200 points
    table = report.render_table1(many)
    assert "| boston | 0.50 / – |" in table and "| yacht | 0.70 / – |" in table
    assert "measured with predict_samples=2000, shapiro_points=0" in table
    paper = tmp_path / "paper.csv"
    paper.write_text("dataset,N,D,GP_VI,GP_VI_se\nboston,506,13,0.02,0.00\n")
    matrix = report.render_matrix(many, paper, "test_loglik_kde", "Table S1")
    assert "| boston | 0.50 / 0.02 |" in matrix and "shapiro_points=0" in matrix
    # a data set measured only the other way keeps its row, and the note says how (cells, not rows,
    # are counted: here three cells on every point against two on 200)
    with open(many, "a") as f:
        f.write(runner.format_row(rows[1] | dict(model="GP-GP", shapiro_points=0, test_loglik_kde=0.8)))
    write_results(many, {("protein", "GP", "vi"): [0.9, 0.9, 0.9]}, shapiro_median=0.98)
    table = report.render_table1(many)
    assert "| boston | 0.50 / – |" in table and "| protein | *0.90* / – |" in table  # (italic: mean W < 0.99)
    assert "measured with predict_samples=2000, shapiro_points=0 (protein: predict_samples=2000, " \
           "shapiro_points=200)" in table


def test_against_the_paper_where_either_side_is_minus_infinity_or_ours_is_nan(tmp_path):
    paper = tmp_path / "paper.csv"
    paper.write_text("dataset,N,D,GP_VI,GP_VI_se\na,10,1,-inf,\nb,10,1,-inf,\nc,10,1,0.0,0.0\nd,10,1,0.0,0.0\n")
    results = tmp_path / "r.csv"
    write_results(results, {("a", "GP", "vi"): [-1.0], ("b", "GP", "vi"): [-math.inf], ("c", "GP", "vi"): [math.nan],
                            ("d", "GP", "vi"): [-0.5]})
    text = report.render_report(results, paper)
    section = text[text.index("## Against the paper (within 0.1 nats or better)"):]
    assert "| a | +inf ✓ |" in section  # ours finite where the paper's is −∞: better
    assert "| b | +0.00 ✓ |" in section  # both −∞: level
    assert "| c | no value (NaN) |" in section and "| d | -0.50 ✗ |" in section
    assert "| **within** | 2 of 3 |" in section  # the NaN cell is not counted
    assert "within 0.1 (standardised units)" in report.render_report(results, paper, metric="test_rmse")


def test_a_file_that_is_not_the_papers_table_is_refused_under_its_own_option(tmp_path):
    """--shapiro's file is named as --shapiro's; a results file given as the paper's table (no MODEL_METHOD
    column) is refused, not reported as every cell missing."""
    no_dataset = tmp_path / "w.csv"
    no_dataset.write_text("name,GP_VI\nboston,0.9\n")
    with pytest.raises(ValueError, match="^--shapiro .*no 'dataset' column"):
        report.read_paper(no_dataset, "--shapiro")
    results = tmp_path / "results.csv"
    results.write_text("dataset,model,method,test_loglik_kde\nboston,GP,vi,0.1\n")
    with pytest.raises(ValueError, match="^--paper .*no column like"):
        report.read_paper(results)


def test_a_papers_table_with_a_column_named_twice_is_refused_by_name(tmp_path, capsys):
    """A reader by name keeps one of the two columns (the last): the paper's value would be the wrong one."""
    from deepgp.cli import main

    paper = tmp_path / "paper.csv"
    paper.write_text("dataset,N,GP_VI,GP_VI_se,GP_VI\nboston,506,0.02,0.01,9\n")
    with pytest.raises(ValueError, match=r"^--shapiro .*paper.csv has the column 'GP_VI' twice in its header"):
        report.read_paper(paper, "--shapiro")
    with pytest.raises(ValueError, match=r"paper.csv has the column 'GP_VI' twice in its header"):
        report.read_paper_sizes(paper)
    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0]})
    assert main(["report", str(results), "--paper", str(paper)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "has the column 'GP_VI' twice" in err


def test_a_report_it_cannot_write_is_refused_in_one_line_naming_it(tmp_path, capsys):
    from deepgp.cli import main

    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0]})
    assert main(["report", str(results), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"deepgp report: error: cannot write the report to {tmp_path}: it is a folder; give a file name"]
    before = results.read_bytes()
    assert main(["report", str(results), "--out", str(results)]) == 2  # it would replace its own results
    assert "it is the command's own input" in capsys.readouterr().err and results.read_bytes() == before


@pytest.mark.parametrize("figure, out", [("SAME", "SAME"), ("RESULTS", None), ("PAPER", None), ("LINK", "SAME"),
                                         ("x.pdf", "RESULTS"), ("SAME", "LINK")])
def test_every_output_is_checked_against_the_inputs_and_the_other_output_before_any_work(tmp_path, capsys, figure,
                                                                                            out):
    """``--out x.pdf --figure x.pdf`` lost the report (the figure replaced it), and a --figure naming the
    results file replaced the results: each is refused before anything is drawn or written, and every
    file stays as it was."""
    from deepgp.cli import main

    paper = tmp_path / "paper.csv"
    paper.write_text("dataset,N,D,GP_VI,GP_VI_se\nboston,506,13,0.02,0.00\n")
    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0]})
    (tmp_path / "LINK.pdf").symlink_to(tmp_path / "SAME.pdf")  # (a link to where the report goes)
    (tmp_path / "results.png").symlink_to(results)  # (a figure's name, and yet the results)
    (tmp_path / "paper.png").symlink_to(paper)
    names = {"SAME": tmp_path / "SAME.pdf", "LINK": tmp_path / "LINK.pdf", "RESULTS": tmp_path / "results.png",
             "PAPER": tmp_path / "paper.png"}
    args = ["report", str(results), "--paper", str(paper), "--figure", str(names.get(figure, tmp_path / figure))]
    if out is not None:
        args += ["--out", str(names[out])]
    before = {p: p.read_bytes() for p in (results, paper)}
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("goes there" in err or "the command's own input" in err)
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["LINK.pdf", "paper.csv", "paper.png", "r.csv",
                                                          "results.png"]


def test_a_table_of_the_paper_that_is_not_text_is_named_in_the_error(tmp_path, capsys):
    from deepgp.cli import main

    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0]})
    table = tmp_path / "t1.csv"
    table.write_bytes(b"dataset,GP_VI\nboston,\xff\n")
    for option in ("--paper", "--shapiro"):
        assert main(["report", str(results), option, str(table)]) == 2
        assert capsys.readouterr().err == f"deepgp report: error: {option} {table} is not a table of text in UTF-8\n"


@pytest.mark.parametrize("args, says", [([""], "the results file: expected a file name, got ''"),
                                        (["DIR"], "the results file DIR is not a file"),
                                        (["R", "--paper", ""], "--paper: expected a file name, got ''"),
                                        (["R", "--shapiro", "DIR"], "--shapiro DIR is not a file"),
                                        (["R", "--paper", "MISSING"], "--paper MISSING: no such file")])
def test_an_input_that_is_no_file_is_one_line_naming_its_option(tmp_path, capsys, args, says):
    """``--paper ''`` was read as no --paper at all; a folder as the results was "Is a directory: .\""""
    from deepgp.cli import main

    results = tmp_path / "r.csv"
    write_results(results, {("boston", "GP", "vi"): [0.0]})
    names = {"R": str(results), "DIR": str(tmp_path), "MISSING": str(tmp_path / "missing.csv")}
    capsys.readouterr()
    assert main(["report", *(names.get(a, a) for a in args)]) == 2
    out, err = capsys.readouterr()
    for name, path in names.items():
        says = says.replace(name, path) if name != "R" else says
    assert out == "" and err.startswith(f"deepgp report: error: {says}") and err.count("\n") == 1


def test_text_put_into_a_cell_never_ends_it_or_its_row():
    """A column named by a variant holding ``|`` or a line break stays one cell of one row."""
    import re

    text = report.label("GP", "vi", "a|b=|\n|")
    assert "\n" not in text and not re.search(r"(?<!\\)\|", text) and text == "GP (VI, a\\|b=\\|<br>\\|)"
