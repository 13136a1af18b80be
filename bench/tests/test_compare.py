"""deepgp's time to quality against the peers (deepgp_bench.compare, ``deepgp report --peers``): the first
pass and its time ratio on rows with known answers, same-run deepgp curves taken first, the tables and the
figure, and one-line errors for bad files and outputs."""

import json
import re

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from deepgp.cli import main
from deepgp_bench import compare
from deepgp_bench.peers import peer_classes

PNG = b"\x89PNG\r\n\x1a\n"


def peer_row(dataset, split, peer, log_density, seconds, cpu=None, **extra):
    settings = json.loads(json.dumps(peer_classes()[peer].DEFAULTS))
    return {"key": {"dataset": dataset, "split": split, "peer": peer, "settings": settings, "part": "test",
                    "draws": 2000}, "log_density": log_density,
            "kde": None if log_density is None else log_density - 0.01, "fit_seconds": seconds, "fit_cpu_seconds": cpu,
            **extra}


def deepgp_row(dataset, split, curve):
    return {"key": {"dataset": dataset, "split": split, "peer": "deepgp", "settings": {}, "part": "test",
                    "draws": 2000},
            "curve": [{"iterations": i, "seconds": s, "log_density": v, "kde": v - 0.02} for i, s, v in curve]}


def snapshot(dataset, split, iterations, seconds, mixture, **key):
    return {"key": {"system": "deepgp", "dataset": dataset, "model": "LV-GP-GP", "method": "iw", "split": split,
                    "part": "test", "recipe": "fast", "overrides": {}, "points": 2000, "draws": 2000, **key},
            "iterations": iterations, "seconds": seconds, "kde": mixture - 0.01, "mixture": mixture, "rmse": 0.5}


def write_lines(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def files(tmp_path):
    """boston: the ensemble best on both splits (0.5 in 10 s wall, 2.5 s CPU; 0.3 in 20 s); deepgp passes
    split 0 at 2,000 iterations (40 s: 4× the wall seconds, 16× the CPU) and never split 1. concrete: one
    split, deepgp ahead from its first snapshot."""
    peers = write_lines(tmp_path / "peers.jsonl", [
        peer_row("boston", 0, "ngboost", 0.2, 5.0, 1.0), peer_row("boston", 0, "ensemble", 0.5, 10.0, 2.5),
        peer_row("boston", 1, "ngboost", 0.1, 6.0, 1.5), peer_row("boston", 1, "ensemble", 0.3, 20.0, 4.0),
        peer_row("concrete", 0, "mdn", -0.4, 3.0, 3.0)])
    curves = write_lines(tmp_path / "ttq.jsonl", [
        snapshot("boston", 0, 1000, 20.0, 0.1), snapshot("boston", 0, 2000, 40.0, 0.6),
        snapshot("boston", 0, 5000, 100.0, 0.7),
        snapshot("boston", 1, 1000, 20.0, 0.0), snapshot("boston", 1, 5000, 100.0, 0.2),
        snapshot("concrete", 0, 1000, 30.0, -0.1), snapshot("concrete", 0, 5000, 90.0, 0.0),
        snapshot("boston", 0, 1000, 1.0, 9.0, model="GP"),  # another model: not the user's default
        {**snapshot("boston", 0, 1000, 1.0, 9.0), "key": {**snapshot("boston", 0, 1, 1, 1)["key"], "system": "gpflux"}},
    ])
    return peers, curves


def test_the_first_pass_and_its_time_ratio(files):
    peers, curves = files
    comparisons = compare.compare(compare.read_peers(peers), compare.read_curves(curves))
    assert [(c.dataset, c.split) for c in comparisons] == [("boston", 0), ("boston", 1), ("concrete", 0)]
    b0, b1, c0 = comparisons
    assert b0.best.peer == "ensemble" and b0.first_pass.iterations == 2000 and b0.first_pass.seconds == 40.0
    assert b0.ratio == 4.0 and b0.cpu_ratio == 16.0
    assert b1.first_pass is None and b1.ratio is None and b1.cpu_ratio is None  # 0.2 < 0.3 at every snapshot
    assert c0.first_pass.iterations == 1000 and c0.ratio == 10.0
    assert [s.iterations for s in b0.curve.snapshots] == [1000, 2000, 5000] and not b0.curve.same_run
    line = compare.summary_line(comparisons)
    # at 5K boston's mean 0.45 ≥ its best peers' 0.4 (split 1 behind, split 0 ahead), concrete's 0.0 ≥ −0.4
    assert "on 2 of 2 data sets at its last snapshot and on 2 of 2 at 5,000 iterations" in line
    assert "median time ratio to first pass 7.0× the best peer's wall seconds" in line  # median of 4 and 10
    assert "over the 2 of 3 splits" in line
    # the wait for the default: boston 100 s to 5K over its best peers' 15 s (means of 10 and 20), concrete 90 / 3
    assert "to 5,000 iterations takes 6.7–30× the best peer's wall seconds (median 18× over the 2 data sets)" in line


def test_a_snapshot_level_with_the_best_peer_passes_it(tmp_path):
    peers = write_lines(tmp_path / "p.jsonl", [peer_row("yacht", 0, "flow", 1.5, 8.0, 2.0)])
    curves = write_lines(tmp_path / "c.jsonl", [snapshot("yacht", 0, 1000, 10.0, 1.0),
                                               snapshot("yacht", 0, 2000, 24.0, 1.5)])
    (c,) = compare.compare(compare.read_peers(peers), compare.read_curves(curves))
    assert c.first_pass.iterations == 2000 and c.ratio == 3.0


def test_a_curve_that_never_passes_is_never_in_every_table(files, tmp_path):
    peers, _ = files
    curves = write_lines(tmp_path / "low.jsonl", [snapshot("boston", s, i, i / 50, -1.0) for s in (0, 1)
                                                  for i in (1000, 5000)])
    comparisons = compare.compare(compare.read_peers(peers), compare.read_curves(curves))
    assert all(c.first_pass is None and c.ratio is None for c in comparisons)
    line = compare.summary_line(comparisons)
    assert "on 0 of 1 data sets" in line and "passes the best peer on none of the 2 splits" in line
    text = compare.render(comparisons, peers, curves)
    assert "| never / never |" in text and "never passes it (best −1.000)" in text and "nan" not in text.lower()


def test_same_run_deepgp_rows_are_taken_before_time_to_quality_curves(files, tmp_path):
    """A peers' file row of peer deepgp is that split's curve (on the peers' own test points: their
    log_density, not the means over the first 2,000); the other split keeps time_to_quality.py's."""
    _, curves = files
    peers = write_lines(tmp_path / "same.jsonl", [
        peer_row("boston", 0, "ensemble", 0.5, 10.0, 2.5, log_density_first_2000=0.05),
        peer_row("boston", 1, "ensemble", 0.3, 20.0, 4.0, log_density_first_2000=-5.0),
        deepgp_row("boston", 0, [(1000, 30.0, 0.4), (5000, 150.0, 0.55)])])
    rows = compare.read_peers(peers)
    assert set(rows.curves) == {("boston", 0)} and "deepgp" not in rows.fits[("boston", 0)]
    b0, b1 = compare.compare(rows, compare.read_curves(curves))
    assert b0.curve.same_run and b0.best.log_density == 0.5  # all its test points, as the same run's deepgp
    assert b0.first_pass.iterations == 5000 and b0.ratio == 15.0  # not time_to_quality's 2,000 at 40 s
    assert not b1.curve.same_run and b1.best.log_density == -5.0  # the first 2,000, as time_to_quality's
    assert b1.first_pass.iterations == 1000
    # no --curves at all: the same-run curve alone
    (only,) = compare.compare(rows)
    assert only.split == 0 and only.curve.same_run


def test_rows_at_other_settings_other_parts_or_without_a_density_are_not_compared(files, tmp_path):
    _, curves = files
    other = peer_row("boston", 0, "ensemble", 9.0, 1.0, 1.0)
    other["key"]["settings"]["lr"] = 0.5
    validation = peer_row("boston", 0, "flow", 9.0, 1.0, 1.0)
    validation["key"]["part"] = "validation"
    peers = write_lines(tmp_path / "p.jsonl", [other, validation, peer_row("boston", 0, "ngboost", 0.2, 5.0),
                                               peer_row("boston", 0, "mdn", None, 5.0)])
    rows = compare.read_peers(peers)
    (c,) = compare.compare(rows, compare.read_curves(curves), ["boston"])
    assert list(c.peers) == ["ngboost"] and c.best.fit_cpu_seconds is None and c.cpu_ratio is None
    assert any("ensemble on boston split 0 at other settings" in why for why in rows.left_out)
    assert any("mdn on boston split 0: its log density is not finite" in why for why in rows.left_out)


def _cells(text: str, dataset: str) -> list[str]:
    row = next(line for line in text.splitlines() if line.startswith(f"| {dataset} |"))
    return [c.strip() for c in row.strip("|").split("|")]


def _float(cell: str) -> float:
    return float(cell.replace("−", "-").replace(",", ""))


def test_the_command_writes_the_table_and_the_figure(files, tmp_path, capsys):
    peers, curves = files
    out, png = tmp_path / "t.md", tmp_path / "f.png"
    assert main(["report", "--peers", str(peers), "--curves", str(curves), "--out", str(out),
                 "--figure", str(png)]) == 0
    assert png.stat().st_size > 1000 and png.read_bytes()[:8] == PNG
    text = out.read_text(encoding="utf-8")
    comparisons = compare.compare(compare.read_peers(peers), compare.read_curves(curves))
    summary = compare.summarise(comparisons[:2])
    # the compact table's numbers read back as the summary's, to the digits printed (3 decimals, seconds
    # to the unit at or above 10 s)
    cells = _cells(text, "boston")
    assert cells[1:3] == ["0, 1", "ensemble"]
    assert _float(cells[3]) == pytest.approx(summary.best, abs=5e-4) == 0.4
    assert [_float(v) for v in cells[4].split(" / ")] == pytest.approx([15.0, 3.25], abs=0.05)
    assert _float(cells[5]) == pytest.approx(summary.at_default[0], abs=5e-4) == 0.45
    assert _float(cells[6]) == pytest.approx(summary.at_default[1], abs=0.5)
    assert cells[7] == "40 / never"
    full = _cells(text.split("## Every column")[1], "boston")
    assert full[11:] == ["4.0 / never", "16 / never"]
    assert "### concrete (splits 0)" in text and "| mdn | −0.400 | −0.410 | 3.0 | 3.0 |" in text
    # the figure: a panel per data set, deepgp's curve a line per split, each peer a point per split
    fig = compare.figure(comparisons)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["boston (splits 0, 1)", "concrete (splits 0)"]
    assert panels[0].get_xscale() == "log"
    assert sorted(list(ln.get_xdata()) for ln in panels[0].lines if ln.get_color() == "C0") == [
        [20.0, 40.0, 100.0], [20.0, 100.0]]
    assert {ln.get_ydata()[0] for ln in panels[0].lines if ln.get_marker() == "s"} == {0.5, 0.3}  # the ensemble
    # seconds in plain numbers at the major ticks inside each panel, none at the minor ones (which overlap)
    FigureCanvasAgg(fig).draw()
    for ax in panels:
        low, high = ax.get_xlim()
        shown = [t.get_text() for t in ax.get_xticklabels() if low <= t.get_position()[0] <= high]
        assert len(shown) >= 2 and all(re.fullmatch(r"[0-9.]+", t) for t in shown), shown
        assert not any(t.get_text() for t in ax.get_xticklabels(minor=True))


def test_the_datasets_shown_can_be_chosen(files, capsys):
    peers, curves = files
    assert main(["report", "--peers", str(peers), "--curves", str(curves), "--datasets", "concrete"]) == 0
    out = capsys.readouterr().out
    assert "| concrete |" in out and "| boston |" not in out
    assert main(["report", "--peers", str(peers), "--curves", str(curves), "--datasets", "concrete,yacht"]) == 2
    assert "--datasets: no split with both a deepgp curve and a peer's fit on yacht" in capsys.readouterr().err


def _error(argv, capsys) -> str:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and out == "", (argv, err)
    return err


def test_bad_files_are_one_line_errors(files, tmp_path, capsys):
    peers, curves = files
    assert "--peers " in _error(["report", "--peers", str(tmp_path / "absent.jsonl")], capsys)
    assert "absent.jsonl: no such file" in _error(["report", "--peers", str(peers), "--curves",
                                                   str(tmp_path / "absent.jsonl")], capsys)
    # a file of the other kind, either way round, and a results CSV
    assert "holds no row of `python -m deepgp_bench.peers.run`" in _error(["report", "--peers", str(curves)], capsys)
    assert "holds no record of `benchmarks/time_to_quality.py`" in _error(
        ["report", "--peers", str(peers), "--curves", str(peers)], capsys)
    csv = tmp_path / "r.csv"
    csv.write_text("dataset,model\nboston,GP\n")
    assert "is it another file?" in _error(["report", "--peers", str(csv)], capsys)
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage\n")
    assert "is it another file?" in _error(["report", "--peers", str(binary)], capsys)
    # a damaged line: cut short, or a deepgp row whose curve is not one
    cut = tmp_path / "cut.jsonl"
    cut.write_text(peers.read_text(encoding="utf-8") + json.dumps(peer_row("boston", 2, "mdn", 0.1, 1.0))[:40] + "\n")
    assert f"--peers {cut}, line 6 is damaged: not a JSON object" in _error(["report", "--peers", str(cut)], capsys)
    bad_curve = write_lines(tmp_path / "bad.jsonl", [peer_row("boston", 0, "mdn", 0.1, 1.0),
                                                     {**deepgp_row("boston", 0, []), "curve": [{"iterations": 0}]}])
    assert "line 2 is damaged: point 1 of its curve: iterations is 0, not an integer >= 1" in _error(
        ["report", "--peers", str(bad_curve)], capsys)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(curves.read_text(encoding="utf-8").replace('"mixture": 0.6', '"mixture": null'))
    assert "line 2 is damaged: mixture is null, not a finite number" in _error(
        ["report", "--peers", str(peers), "--curves", str(damaged)], capsys)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert "holds no row" in _error(["report", "--peers", str(empty)], capsys)


def test_outputs_are_checked_before_any_work(files, tmp_path, capsys):
    peers, curves = files
    base = ["report", "--peers", str(peers), "--curves", str(curves)]
    before = peers.read_bytes()
    assert "own input" in _error([*base, "--out", str(peers)], capsys)
    assert "own input" in _error([*base, "--figure", str(curves.with_suffix(".png")), "--out", str(curves)], capsys)
    assert peers.read_bytes() == before and not curves.with_suffix(".png").exists()
    assert "does not exist" in _error([*base, "--figure", str(tmp_path / "no" / "f.png")], capsys)
    assert not (tmp_path / "no").exists()
    assert "does not exist" in _error([*base, "--out", str(tmp_path / "no" / "t.md")], capsys)
    assert "goes there" in _error([*base, "--out", str(tmp_path / "x.png"), "--figure", str(tmp_path / "x.png")],
                                  capsys)
    assert ".png" in _error([*base, "--figure", str(tmp_path / "f.txt")], capsys)
    # a figure that cannot be drawn (nothing to compare) leaves the report unwritten too
    lonely = write_lines(tmp_path / "lonely.jsonl", [peer_row("yacht", 0, "mdn", 0.1, 1.0)])
    err = _error(["report", "--peers", str(lonely), "--curves", str(curves), "--out", str(tmp_path / "t.md")], capsys)
    assert "no data set and split has both" in err and not (tmp_path / "t.md").exists()


def test_the_options_of_each_report_stay_apart(files, tmp_path, capsys):
    peers, curves = files
    assert "--curves goes with --peers" in _error(["report", "r.csv", "--curves", str(curves)], capsys)
    assert "`deepgp benchmark`, or --peers FILE" in _error(["report"], capsys)
    err = _error(["report", str(curves), "--peers", str(peers)], capsys)
    assert "the comparison with the peers takes no results file" in err
    assert "takes no --lr" in _error(["report", "--peers", str(peers), "--lr", "0.1"], capsys)
    assert "--datasets names nothing" in _error(["report", "--peers", str(peers), "--datasets", " , "], capsys)


def _damaged(path, rows, expected, capsys, option="--peers", peers=None):
    """``rows`` written to ``path`` are refused by ``report`` as a damaged file: one line naming ``option``,
    the file, the line and ``expected``, nothing on standard output."""
    write_lines(path, rows)
    argv = ["report", "--peers", str(path)] if option == "--peers" else ["report", "--peers", str(peers), option,
                                                                         str(path)]
    err = _error(argv, capsys)
    assert f"{option} {path}, line {len(rows)} is damaged: {expected}" in err, err


def _without(row, field):
    return {k: v for k, v in row.items() if k != field}


GOOD = peer_row("boston", 0, "ensemble", 0.5, 10.0, 2.5)


@pytest.mark.parametrize("row, expected", [
    ({**GOOD, "fit_seconds": -5.0}, "fit_seconds is -5.0, not a finite number >= 0"),
    ({**GOOD, "fit_cpu_seconds": -0.5}, "fit_cpu_seconds is -0.5, not a finite number >= 0 or null"),
    ({**GOOD, "fit_seconds": None}, "fit_seconds is null, not a finite number >= 0"),
    ({**GOOD, "kde": "0.4"}, 'kde is "0.4", not a finite number or null'),
    ({**GOOD, "log_density_first_2000": float("inf")}, "log_density_first_2000 is Infinity, not a finite number"),
    ({**GOOD, "key": {**GOOD["key"], "split": -1}}, "its key's split is -1, not an integer >= 0"),
    ({**GOOD, "key": {**GOOD["key"], "draws": 0}}, "its key's draws is 0, not an integer >= 1"),
    ({**GOOD, "key": {**GOOD["key"], "split": 0.5}}, "its key's split is 0.5, not an integer >= 0"),
    # a field the report reads, missing: as damaged as a NaN in it
    (_without(GOOD, "log_density"), "no log_density"),
    (_without(GOOD, "kde"), "no kde"),
    (_without(GOOD, "fit_seconds"), "no fit_seconds"),
    (_without(GOOD, "fit_cpu_seconds"), "no fit_cpu_seconds"),
    # deepgp's curve: one training run, whose iterations rise and whose seconds never fall
    (deepgp_row("boston", 0, [(1000, 30.0, 0.4), (1000, 40.0, 0.5)]),
     "point 2 of its curve: iterations 1000 after 1000"),
    (deepgp_row("boston", 0, [(1000, 30.0, 0.4), (2000, 20.0, 0.5)]), "point 2 of its curve: seconds 20.0 after 30.0"),
    (deepgp_row("boston", 0, [(1000, -1.0, 0.4)]), "point 1 of its curve: seconds is -1.0, not a finite number >= 0"),
    ({**GOOD, "key": GOOD["key"] | {"peer": "deepgp"}, "curve": [{"iterations": 1000, "seconds": 1.0, "kde": 0.1}]},
     "point 1 of its curve: no log_density"),
])
def test_a_peers_line_outside_the_domain_of_a_field_the_report_reads_is_damaged(tmp_path, capsys, row, expected):
    """A negative fit time was averaged into the table (19 s shown as 8.8), and a later line of a fit without
    its log density replaced a good one (the split left the table): each is a damaged line, as a NaN is."""
    _damaged(tmp_path / "p.jsonl", [GOOD, row], expected, capsys)


@pytest.mark.parametrize("change, expected", [
    (dict(seconds=-2.0), "seconds is -2.0, not a finite number >= 0"),
    (dict(iterations=0), "iterations is 0, not an integer >= 1"),
    (dict(iterations=1000.5), "iterations is 1000.5, not an integer >= 1"),
    (dict(kde="x"), 'kde is "x", not a finite number or null'),
    (dict(key={**snapshot("boston", 0, 1, 1, 1)["key"], "points": 0}), "its key's points is 0, not an integer >= 1"),
    (dict(key={**snapshot("boston", 0, 1, 1, 1)["key"], "split": -3}), "its key's split is -3, not an integer >= 0"),
])
def test_a_curves_line_outside_the_domain_of_a_field_the_report_reads_is_damaged(files, tmp_path, capsys, change,
                                                                                  expected):
    peers, _ = files
    rows = [snapshot("boston", 0, 1000, 20.0, 0.1), {**snapshot("boston", 0, 2000, 40.0, 0.6), **change}]
    _damaged(tmp_path / "c.jsonl", rows, expected, capsys, option="--curves", peers=peers)


def test_the_curves_of_separate_runs_may_have_falling_seconds(files, tmp_path):
    """Snapshots of one key in time_to_quality.py's file come from separate runs of the script (a later line
    replaces an earlier one), so a later snapshot may have fewer seconds: read as written."""
    peers, _ = files
    curves = write_lines(tmp_path / "c.jsonl", [snapshot("boston", 0, 1000, 60.0, 0.1),
                                               snapshot("boston", 0, 2000, 40.0, 0.6)])
    assert [s.seconds for s in compare.read_curves(curves)[("boston", 0)].snapshots] == [60.0, 40.0]


def test_a_null_log_density_is_a_fit_left_out_not_a_damaged_line(tmp_path):
    """The run writes a non-finite mean as null: a row to name as not compared, unlike a missing field."""
    rows = compare.read_peers(write_lines(tmp_path / "p.jsonl", [GOOD, peer_row("boston", 0, "mdn", None, 5.0)]))
    assert rows.fits[("boston", 0)]["mdn"]["log_density"] is None


def test_the_report_is_written_only_to_a_markdown_file(files, tmp_path, capsys):
    """``--out o.json`` or ``o.csv`` was given Markdown: refused, nothing written; ``.md`` is written."""
    peers, curves = files
    base = ["report", "--peers", str(peers), "--curves", str(curves)]
    for name in ("o.json", "o.csv", "o"):
        assert "--out: the report is Markdown: give a file ending in .md" in _error(
            [*base, "--out", str(tmp_path / name)], capsys)
        assert not (tmp_path / name).exists()
    assert main([*base, "--out", str(tmp_path / "o.MD")]) == 0
    assert (tmp_path / "o.MD").read_text(encoding="utf-8").startswith("# ")


def test_an_empty_item_in_the_datasets_shown_is_refused(files, capsys):
    peers, curves = files
    err = _error(["report", "--peers", str(peers), "--curves", str(curves), "--datasets", "boston,,concrete"], capsys)
    assert "--datasets has an empty item (got 'boston,,concrete')" in err
