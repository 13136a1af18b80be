"""The harness's commands: ``deepgp-bench benchmark | report`` and the same commands as ``deepgp benchmark |
report`` (added through the entry-point group deepgp.commands); every bad command line is one error line."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deepgp import cli
from deepgp.datasets.uci import write_uci
from deepgp_bench import cli as bench_cli

MAINS = {"deepgp": cli.main, "deepgp-bench": bench_cli.main}


def test_the_package_adds_its_commands_to_deepgp():
    assert {ep.name: ep.value for ep in cli.plugins()} == {"benchmark": "deepgp_bench.cli:register_benchmark",
                                                           "report": "deepgp_bench.cli:register_report"}
    for parser in (cli.build_parser(), bench_cli.build_parser()):
        text = " ".join(parser.format_help().split())  # (argparse wraps the help to the terminal's width)
        assert "run the UCI benchmark grid" in text and "Markdown table of a results CSV" in text


def test_only_the_harness_commands_import_the_harness(tmp_path):
    """`deepgp fit` and `deepgp --help` list benchmark and report without importing any deepgp_bench module;
    `deepgp benchmark --help` imports it (one process, the modules loaded after each command)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    train = write_uci(tmp_path / "toy.csv.gz", np.column_stack([X, X.sum(1)]))
    commands = [["fit", str(train), "--target", "y", "--model", "GP", "--iterations", "2", "--num-inducing", "4",
                 "--no-progress", "--out", str(tmp_path / "m.safetensors")], ["--help"], ["benchmark", "--help"]]
    code = ("import json, sys\nfrom deepgp.cli import main\n"
            f"for argv in {commands!r}:\n"
            "    try:\n        status = main(argv)\n    except SystemExit as exit_:\n        status = exit_.code\n"
            "    print('loaded', json.dumps([status, sorted(m for m in sys.modules if m.startswith('deepgp_bench'))]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    fit, help_, benchmark = (json.loads(line[7:]) for line in out.splitlines() if line.startswith("loaded "))
    assert fit == [0, []] and help_ == [0, []]
    words = " ".join(out.split())  # (argparse wraps the help to the terminal's width)
    assert "run the UCI benchmark grid" in words and "Markdown table of a results CSV" in words
    assert benchmark[0] == 0 and "deepgp_bench.runner" in benchmark[1] and "--snapshots" in out


def test_deepgp_bench_is_a_command_of_its_own():
    script = Path(sys.executable).with_name("deepgp-bench")  # the console script installed beside this Python
    for argv in ([str(script), "--version"], [sys.executable, "-m", "deepgp_bench", "--version"]):
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        assert out.startswith("deepgp-bench ")


def bad_invocations(tmp):
    not_results = tmp / "other.csv"
    not_results.write_text("a,b\n1,2\n")
    return [
        (["report", str(not_results)], str(not_results)),
        (["report", str(tmp / "absent.csv")], "absent.csv"),
        (["report", str(not_results), "--metric", "nope"], "argument --metric: invalid choice"),
        (["report", str(tmp / "absent.csv"), "--paper", str(not_results)], "absent.csv"),
        (["benchmark", "--num-inducing", "0"], "argument --num-inducing"),
        (["benchmark", "--test-limit", "0"], "argument --test-limit"),
        (["benchmark", "--splits", "abc", "--data-dir", str(tmp)], "abc"),
        (["benchmark", "--splits", "0-99999999999", "--data-dir", str(tmp)], "argument --splits"),
        (["benchmark", "--datasets", "", "--results", str(tmp / "r.csv")], "--datasets names nothing"),
        (["benchmark", "--datasets", "toya", "--models", " , ", "--results", str(tmp / "r.csv")],
         "--models names nothing"),
        # an empty item is a slip to report, not an item to drop
        (["benchmark", "--datasets", "toya,,toyb", "--results", str(tmp / "r.csv")], "--datasets has an empty item"),
        (["benchmark", "--datasets", "toya", "--models", "GP:vi,", "--results", str(tmp / "r.csv")],
         "--models has an empty item"),
        (["benchmark", "--datasets", "toya", "--methods", "vi,,iw", "--results", str(tmp / "r.csv")],
         "--methods has an empty item"),
    ]


@pytest.mark.parametrize("prog", sorted(MAINS))
def test_bad_command_lines_end_in_one_line_and_exit_2(prog, tmp_path, capsys):
    for argv, text in bad_invocations(tmp_path):
        capsys.readouterr()
        try:
            code = MAINS[prog](argv)
        except SystemExit as exit_:  # argparse's own errors
            code = exit_.code
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and text in err, (argv, err)
        assert err.startswith(f"{prog} {argv[0]}: error: ") and "Traceback" not in err, (argv, err)


def test_both_commands_write_the_same_rows_and_report(tmp_path, capsys):
    """`deepgp benchmark` and `deepgp-bench benchmark` are one command: the same rows (bar their timing), and
    the same report of one results file, byte for byte."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    write_uci(tmp_path / "toy.csv.gz", np.column_stack([X, X.sum(1) + 0.1 * rng.normal(size=60)]))
    rows, reports = {}, {}
    for prog, main in MAINS.items():
        results = tmp_path / f"{prog}.csv"
        assert main(["benchmark", "--datasets", "toy", "--models", "GP:vi", "--splits", "0", "--iterations", "3",
                     "--num-inducing", "5", "--predict-samples", "20", "--data-dir", str(tmp_path),
                     "--results", str(results)]) == 0
        assert "toy GP vi split 0 seed 0" in capsys.readouterr().out
        (row,) = csv.DictReader(results.open())
        rows[prog] = {column: value for column, value in row.items() if column != "seconds"}
    assert rows["deepgp"] == rows["deepgp-bench"]
    for prog, main in MAINS.items():
        assert main(["report", str(tmp_path / "deepgp.csv")]) == 0
        reports[prog] = capsys.readouterr().out
    assert reports["deepgp"] == reports["deepgp-bench"] and "| toy | GP (VI) |" in reports["deepgp"]
