"""benchmarks/time_to_quality.py: a run's key names what ran, whatever way it was asked for, and its table
averages only like with like."""

import importlib.util
import math
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "time_to_quality.py"


@pytest.fixture(scope="module")
def ttq():
    spec = importlib.util.spec_from_file_location("time_to_quality", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("time_to_quality", module)
    spec.loader.exec_module(module)
    return module


def test_the_key_holds_the_settings_that_differ_from_the_defaults_for_these_data(ttq):
    """A default asked for explicitly is the default run; inner_width is compared as "auto" resolves for
    the run's training points: "hidden" on 5,000 or more is the default run, "input" there is not."""
    assert ttq.without_defaults({"recipe": "fast", "num_inducing": 128, "gamma": 0.05}, 100) == {"gamma": 0.05}
    assert ttq.without_defaults({"inner_width": "input"}, 100) == {}
    assert ttq.without_defaults({"inner_width": "hidden"}, 100) == {"inner_width": "hidden"}
    assert ttq.without_defaults({"inner_width": "hidden"}, 5000) == {}
    assert ttq.without_defaults({"inner_width": "auto"}, 5000) == {}
    assert ttq.without_defaults({"inner_width": "input"}, 5000) == {"inner_width": "input"}


def test_a_value_its_setting_refuses_stops_the_run_in_one_line(ttq):
    """``--set inner_width=wide``: the run stops with the setting's own message, not a traceback from
    building the run's key."""
    args = type("Args", (), dict(model="LV-GP-GP", method="iw", recipe="fast", split=0))()
    with pytest.raises(SystemExit, match="--set: .*inner_width"):
        ttq.run_configs(args, {"inner_width": "wide"})
    with pytest.raises(SystemExit, match="unknown setting"):
        ttq.run_configs(args, {"widht": 3})
    with pytest.raises(SystemExit, match="given by the options"):
        ttq.run_configs(args, {"recipe": "paper"})
    model, train = ttq.run_configs(args, {"inner_width": "input", "lr": 0.01})
    assert model.inner_width == "input" and train.lr == 0.01 and train.num_samples == 5


def test_set_values_are_read_as_their_settings_take_them(ttq):
    assert ttq.parse_overrides(["lr=0.02", "encoder_hidden=10,10", "dreg=true", "encoder_std=EXP"]) == {
        "lr": 0.02, "encoder_hidden": (10, 10), "dreg": True, "encoder_std": "EXP"}
    args = type("Args", (), dict(model="LV-GP-GP", method="iw", recipe="fast", split=0))()
    model, _ = ttq.run_configs(args, {"encoder_hidden": (10, 10), "encoder_std": "EXP"})
    assert model.encoder_hidden == (10, 10) and model.encoder_std == "exp"


def test_the_table_never_averages_runs_evaluated_differently(ttq, tmp_path):
    import json

    def record(split, points, draws, value):
        key = dict(system="deepgp", dataset="concrete", model="LV-GP-GP", method="iw", split=split, part="validation",
                   recipe="fast", overrides={}, points=points, draws=draws)
        return json.dumps(dict(key=key, iterations=1000, seconds=1.0, kde=value, mixture=value, rmse=0.3,
                               bound=-1.0)) + "\n"

    out = tmp_path / "screen.jsonl"
    out.write_text(record(0, 500, 1000, -0.2) + record(1, 500, 1000, -0.4) + record(0, 2000, 2000, 0.9))
    lines = ttq.table(out, "mixture", "validation").splitlines()[2:]
    assert len(lines) == 2  # (the mean over two splits, and the other evaluation's one run)
    assert lines[0].startswith("| concrete | LV-GP-GP | IW | deepgp | fast | - | -0.300")
    assert lines[1].startswith("| concrete | LV-GP-GP | IW | deepgp | fast | points=2000, draws=2000 | 0.900")


def test_a_run_opted_out_of_float32_products_is_its_own_run(ttq, tmp_path, monkeypatch):
    """Each record says in what dtype fit computed its R_lᵀA products; a run with
    ``DEEPGP_FLOAT32_PRODUCTS=0`` has "products" in its key, so it never resumes from, or is skipped for,
    the default run's records and checkpoint, and the table shows it on its own line."""
    import json

    out = tmp_path / "runs.jsonl"
    argv = ["time_to_quality.py", "--dataset", "letters:60", "--model", "GP", "--method", "vi", "--points", "20",
            "--draws", "20", "--snapshots", "2", "--out", str(out), "--checkpoints", str(tmp_path / "ck")]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.delenv("DEEPGP_FLOAT32_PRODUCTS", raising=False)
    ttq.main()
    monkeypatch.setenv("DEEPGP_FLOAT32_PRODUCTS", "0")
    ttq.main()
    default, opted_out = (json.loads(line) for line in out.read_text().splitlines())
    assert default["products"] == "float32" and "products" not in default["key"]
    assert opted_out["products"] == "float64" and opted_out["key"] == {**default["key"], "products": "float64"}
    assert len(list((tmp_path / "ck").iterdir())) == 2
    lines = ttq.table(out, "mixture", "test").splitlines()[2:]
    assert [line.split(" | ")[5] for line in lines] == ["-", "products=float64"]


def test_only_a_float64_model_opted_out_of_float32_products_has_them_in_its_key(ttq, monkeypatch):
    """A float32 model's products are float32 whatever the opt-out says: its key stays the default one."""
    from deepgp.config import ModelConfig

    args = type("Args", (), dict(peers=False, dataset="kin8nm", model="GP", method="vi", split=0, part="test",
                                 recipe="fast", points=10, draws=10))()
    keys = {}
    for opt_out in (None, "0"):
        if opt_out is None:
            monkeypatch.delenv("DEEPGP_FLOAT32_PRODUCTS", raising=False)
        else:
            monkeypatch.setenv("DEEPGP_FLOAT32_PRODUCTS", opt_out)
        for dtype in ("float64", "float32"):
            overrides = {"dtype": dtype} if dtype == "float32" else {}
            keys[opt_out, dtype] = ttq.deepgp_key(args, overrides, ModelConfig(model="GP", dtype=dtype), 100)
    assert keys["0", "float64"] == {**keys[None, "float64"], "products": "float64"}
    assert keys["0", "float32"] == keys[None, "float32"] and "products" not in keys[None, "float32"]


KEY = dict(system="deepgp", dataset="letters:60", model="GP", method="vi", split=0, part="test", recipe="fast",
           overrides={}, points=20, draws=20)
# a complete record of KEY
GOOD = dict(key=KEY, iterations=10, seconds=1.0, kde=0.5, mixture=0.6, rmse=0.3, bound=-1.0)


def test_a_record_after_a_line_cut_by_a_kill_starts_a_line_of_its_own(ttq, tmp_path):
    import json

    out = tmp_path / "runs.jsonl"
    out.write_text('{"key": {"system": "deepgp", "dataset": "let')  # a kill mid-write: no newline
    ttq.append(out, dict(GOOD, iterations=10, seconds=1.0))
    ttq.append(out, dict(GOOD, iterations=20, seconds=2.0))
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and [json.loads(line)["iterations"] for line in lines[1:]] == [10, 20]
    assert sorted(ttq.done_snapshots(out, KEY)) == [10, 20]


@pytest.mark.parametrize("flags", [["--snapshots", "abc"], ["--snapshots", "0"], ["--threads", "0"],
                                   ["--draws", "0"], ["--draws", "1"], ["--points", "-1"], ["--split", "-1"],
                                   ["--split", "4294967296"], ["--dataset", "letters:abc"],
                                   ["--dataset", "letters:1e3"], ["--dataset", "letters:99999"],
                                   ["--dataset", "no_such_set"], ["--dataset", "a\nb"], ["--data-dir", "NOPE"],
                                   ["--set", "lr=nan"], ["--checkpoints", "FILE"], ["--out", "DIR"],
                                   ["--out", "MODEL"], ["--out", "NOPE/x.jsonl"], ["--out", "DANGLING"],
                                   ["--checkpoints", "NOPE/ck"], ["--draws", "10000000000"],
                                   ["--set", "iterations=5"],
                                   ["--peers", "--method", "vi", "--peers-python", "DIR/python"]])
def test_a_bad_argument_is_one_line_and_exit_2_before_any_training(ttq, tmp_path, monkeypatch, capsys, flags):
    """Each bad argument is refused before any training; a missing folder (named, or the target's of a
    link) is refused too, and not made."""
    (tmp_path / "FILE").write_text("")
    (tmp_path / "DIR").mkdir()
    (tmp_path / "MODEL").write_bytes(b"X\x00\x00\x00\x00\x00\x00\x00{" + bytes(20))  # (no newline at its end)
    (tmp_path / "DANGLING").symlink_to(tmp_path / "NOPE" / "x.jsonl")
    monkeypatch.setenv("DEEPGP_DATA", str(tmp_path / "DIR"))
    flags = [str(tmp_path / f) if f.split("/")[0] in ("FILE", "DIR", "MODEL", "NOPE", "DANGLING") else f
             for f in flags]
    trained = []
    monkeypatch.setattr(ttq, "run_deepgp", lambda *a: trained.append(a))
    monkeypatch.setattr(ttq, "run_peer", lambda *a: trained.append(a))
    argv = ["time_to_quality.py", "--dataset", "letters:60", "--out", str(tmp_path / "o.jsonl"),
            "--checkpoints", str(tmp_path / "ck"), "--snapshots", "2", *flags]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_:
        ttq.main()
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and trained == [] and err[-1].startswith("time_to_quality.py: error: ")
    assert (tmp_path / "MODEL").read_bytes() == b"X\x00\x00\x00\x00\x00\x00\x00{" + bytes(20)  # as it was
    assert not (tmp_path / "NOPE").exists() and not (tmp_path / "o.jsonl").exists()
    if flags[0] == "--draws" and int(flags[1]) > 1:  # (more memory than any machine has: refused by its estimate)
        assert err[-1].startswith("time_to_quality.py: error: --draws=10000000000 needs about ")
    if "NOPE/" in " ".join(flags) or "DANGLING" in " ".join(flags):
        assert f"the folder {tmp_path / 'NOPE'} does not exist" in err[-1]


def test_an_empty_out_is_refused_as_no_file_name(ttq, tmp_path, monkeypatch, capsys):
    """``--out ''`` names no file (not the current folder, which Path("") would be)."""
    argv = ["time_to_quality.py", "--dataset", "letters:60", "--out", "", "--checkpoints", str(tmp_path / "ck"),
            "--snapshots", "2"]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(ttq, "run_deepgp", lambda *a: pytest.fail("trained"))
    with pytest.raises(SystemExit) as exit_:
        ttq.main()
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2
    assert err[-1] == "time_to_quality.py: error: --out's records: expected a file name, got ''"


def run_main(ttq, monkeypatch, capsys, *flags, out):
    """main() with ``flags`` on ``out`` (training replaced by a note of it): (exit status, stderr lines, trained)."""
    trained = []
    monkeypatch.setattr(ttq, "run_deepgp", lambda *a: trained.append(a))
    monkeypatch.setattr(sys, "argv", ["time_to_quality.py", "--dataset", "letters:60", "--model", "GP", "--method",
                                      "vi", "--points", "20", "--draws", "20", "--snapshots", "10", "--out", str(out),
                                      "--checkpoints", str(out.parent / "ck"), *flags])
    code = 0
    try:
        ttq.main()
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().err.strip().splitlines(), trained


def test_lines_cut_short_are_skipped_by_the_run_and_the_table_and_named(ttq, tmp_path, monkeypatch, capsys):
    """A line that is not JSON (a write cut short by a kill, the last line or one an append went on after;
    bytes that are not text) is left out by both, and both say which in one warning line on stderr."""
    import json

    out = tmp_path / "runs.jsonl"
    cut = '{"key": {"system": "deep'
    out.write_bytes(f"{cut}\n{json.dumps(GOOD)}\n".encode() + b"\xff\xfe\n[[[[[[[[[[\n" + b'{"key": 5')
    before = out.read_bytes()
    assert list(ttq.done_snapshots(out, KEY)) == [10]
    warning = f"warning: --out {out}: skipped lines 1, 3, 4, 5, not JSON (a write cut short)"
    for flags in (["--table", "--metric", "kde"], []):
        code, err, trained = run_main(ttq, monkeypatch, capsys, *flags, out=out)
        assert code == 0 and err == [warning] and len(trained) == (0 if flags else 1)
    assert out.read_bytes() == before
    lines = ttq.table(out, "kde", "test").splitlines()
    assert len(lines) == 3 and lines[2].endswith("| 0.500 |")


@pytest.mark.parametrize("line, why", [
    ("42", "not a JSON object with a run's key"), ("null", "not a JSON object with a run's key"),
    ('"text"', "not a JSON object with a run's key"),
    (dict(GOOD, key={k: v for k, v in KEY.items() if k != "points"}), "its key's points is absent, not a whole number"),
    (dict(GOOD, key=dict(KEY, split="0")), 'its key\'s split is "0", not a whole number'),
    (dict(GOOD, key=dict(KEY, dataset="x|y")), 'its key\'s dataset is "x|y", no data set\'s name'),
    (dict(GOOD, iterations=True), "iterations is true, not a count of at least 1"),
    (dict(GOOD, iterations=0), "iterations is 0, not a count of at least 1"),
    (dict(GOOD, kde=math.nan), "kde is NaN, not a finite number"),
    (dict(GOOD, mixture=None), "mixture is null, not a finite number"),
    ({k: v for k, v in GOOD.items() if k != "bound"}, "bound is absent, not a finite number"),
    (dict(GOOD, rmse=math.inf), "rmse is Infinity, not a finite number of at least 0"),
    (dict(GOOD, seconds=-math.inf), "seconds is -Infinity, not a finite number of at least 0"),
    (dict(GOOD, seconds=-1.0), "seconds is -1.0, not a finite number of at least 0")])
def test_a_damaged_line_is_refused_by_the_run_and_the_table_alike(ttq, tmp_path, monkeypatch, capsys, line, why):
    """JSON that is no complete record (a field outside its domain: a NaN estimate, negative seconds, no
    count of iterations; a key of another type) is damaged: the table shows no part of it and the run
    neither trains its snapshot again nor reads past it; both name the line in one line, exit status 2."""
    import json

    out = tmp_path / "runs.jsonl"
    out.write_text(json.dumps(dict(GOOD, iterations=5)) + "\n" + (line if isinstance(line, str) else json.dumps(line))
                   + "\n")
    before = out.read_bytes()
    for flags in (["--table"], []):
        code, err, trained = run_main(ttq, monkeypatch, capsys, *flags, out=out)
        assert code == 2 and trained == [] and out.read_bytes() == before
        assert err[-1] == f"time_to_quality.py: error: --out {out}, line 2 is damaged: {why}: mend or delete that line"


@pytest.mark.parametrize("text", ["hello\nworld\n", "[1, 2]\n", '{"key": 5', "", "\n\n"])
def test_a_file_without_records_is_refused_by_the_table_as_by_the_run(ttq, tmp_path, monkeypatch, capsys, text):
    """Another file given as --out (text, other JSON; one whose records' keys are damaged) is one line, exit
    status 2, in both modes; the table also refuses a file with nothing in it, where the run may begin."""
    out = tmp_path / "g.jsonl"
    out.write_text(text)
    for flags in (["--table"], []):
        code, err, trained = run_main(ttq, monkeypatch, capsys, *flags, out=out)
        if not text.strip() and not flags:
            assert code == 0 and len(trained) == 1
            continue
        assert code == 2 and trained == [] and out.read_text() == text
        assert err[-1] == (f"time_to_quality.py: error: --out {out} holds no record of this script (a JSON line "
                           f"with a run's key): it is another file; give another --out")


def test_each_out_trains_its_own_run(ttq, tmp_path, monkeypatch):
    """The same run recorded into two --out files trains twice, each from its own checkpoint: a second file
    never finds the first's checkpoint past its snapshots, nor resumes from it (its seconds would lack the
    first's training); one file still resumes its own run."""
    import json

    def run(out, snapshots):
        monkeypatch.setattr(sys, "argv", ["time_to_quality.py", "--dataset", "letters:60", "--model", "GP", "--method",
                                          "vi", "--points", "20", "--draws", "20", "--snapshots", snapshots, "--out",
                                          str(tmp_path / out), "--checkpoints", str(tmp_path / "ck")])
        ttq.main()
        return [json.loads(line) for line in (tmp_path / out).read_text().splitlines()]

    monkeypatch.delenv("DEEPGP_FLOAT32_PRODUCTS", raising=False)
    ok = run("ok.jsonl", "20,40")
    assert [r["iterations"] for r in run("y.jsonl", "20,40")] == [20, 40]
    assert [r["iterations"] for r in run("z.jsonl", "60")] == [60]
    assert len(list((tmp_path / "ck").iterdir())) == 3
    resumed = run("ok.jsonl", "20,40,60")
    assert resumed[:2] == ok and [r["iterations"] for r in resumed] == [20, 40, 60]
    assert len(list((tmp_path / "ck").iterdir())) == 3  # (its own checkpoint, at 40)


def test_a_run_whose_evaluation_is_not_finite_records_nothing(ttq, tmp_path, monkeypatch, capsys):
    """A NaN estimate is an error (exit status 1) naming it, not a record holding NaN (not JSON)."""
    import deepgp.metrics

    real = deepgp.metrics.split_metrics
    monkeypatch.setattr(deepgp.metrics, "split_metrics", lambda *a, **k: real(*a, **k) | {"test_loglik_kde": math.nan})
    out = tmp_path / "runs.jsonl"
    monkeypatch.setattr(sys, "argv", ["time_to_quality.py", "--dataset", "letters:60", "--model", "GP", "--method",
                                      "vi", "--points", "20", "--draws", "20", "--snapshots", "2", "--out", str(out),
                                      "--checkpoints", str(tmp_path / "ck")])
    with pytest.raises(SystemExit, match="gave test_loglik_kde = nan: not recorded") as exit_:
        ttq.main()
    assert exit_.value.code != 0 and not out.exists()
    with pytest.raises(ValueError):
        ttq.append(out, dict(key=KEY, iterations=1, seconds=1.0, kde=math.nan))
    assert not out.exists()


def test_the_table_keeps_its_columns_whatever_text_a_key_holds(ttq, tmp_path):
    """Any text of a key (an override's name and value) is escaped in its cell: ``|`` and line breaks never
    end a cell or a row."""
    import json
    import re

    good = dict(GOOD, key=dict(KEY, overrides={"a|b": "|\n|"}))
    out = tmp_path / "runs.jsonl"
    out.write_text(json.dumps(good) + "\n")
    lines = ttq.table(out, "kde", "test").splitlines()
    assert len(lines) == 3
    assert [len(re.findall(r"(?<!\\)\|", line)) for line in lines] == [8, 8, 8]
    assert "a\\|b=\\|<br>\\|" in lines[2]


@pytest.mark.parametrize("field, value, script, report", [
    ("split", -1, "not a whole number of at least 0", "not an integer >= 0"),
    ("points", 0, "not a whole number of at least 1", "not an integer >= 1"),
    ("dataset", "x|y", "no data set's name", "not a data set's name")])
def test_the_script_and_the_report_refuse_the_same_keys(ttq, tmp_path, field, value, script, report):
    """One schema (deepgp_bench.curves): a key outside its domain (a negative split, no points, no data set's
    name) is a damaged line to the script and to the report (deepgp's curves) alike, each in its own words."""
    import json

    from deepgp_bench import compare

    out = tmp_path / "runs.jsonl"
    out.write_text(json.dumps(GOOD) + "\n" + json.dumps(dict(GOOD, key=dict(KEY, **{field: value}))) + "\n")
    damaged = f"line 2 is damaged: its key's {field} is {json.dumps(value)}, "
    with pytest.raises(ttq.UsageError) as refused:
        ttq.read_out(out)
    assert str(refused.value) == f"--out {out}, {damaged}{script}: mend or delete that line"
    with pytest.raises(ValueError) as refused:
        compare.read_curves(out)
    assert str(refused.value) == f"--curves {out}, {damaged}{report}"


def test_only_the_report_takes_a_kde_not_recorded_and_only_the_values_it_reads():
    from deepgp_bench.curves import REPORT, SCRIPT, record_problem

    assert record_problem(dict(GOOD, kde=None), SCRIPT) == "kde is null, not a finite number"
    assert record_problem(dict(GOOD, kde=None), REPORT, null=("kde",)) == ""
    assert record_problem(dict(GOOD, rmse=-1), REPORT, ("iterations", "seconds")) == ""
