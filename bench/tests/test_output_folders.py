"""Every writer of the harness and the benchmark scripts refuses a file in a folder that does not exist (named
directly, or the folder of a link's target) before any work, one line and exit status 2, and makes no
folder: a mistyped folder is a mistake, not a new tree."""

import importlib.util
import sys
from pathlib import Path

import pytest

from deepgp.cli import main

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def script(path: Path):
    """The script at ``path`` as a module (its folder on sys.path: the scripts import their neighbours)."""
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault(path.stem, module)  # (its dataclasses look their module up there)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def results_and_paper(tmp_path):
    from deepgp_bench import runner

    results, paper = tmp_path / "r.csv", tmp_path / "paper.csv"
    runner.prepare_results(results)
    paper.write_text("dataset,N,D,GP_VI,GP_VI_se\nboston,506,13,0.02,0.00\n")
    return results, paper


def report(tmp_path, out, monkeypatch):
    results, paper = results_and_paper(tmp_path)
    return main(["report", str(results), "--paper", str(paper), "--figure", str(out)])


def early_stopping(tmp_path, out, monkeypatch):
    module = script(BENCHMARKS / "early_stopping.py")
    monkeypatch.setattr(module, "train", lambda *a: pytest.fail("trained"))
    monkeypatch.setattr(sys, "argv", ["early_stopping.py", "--out", str(out)])
    module.main()


def learning_curve(tmp_path, out, monkeypatch):
    module = script(BENCHMARKS / "uci" / "learning_curve.py")
    monkeypatch.setattr(module, "load_split", lambda *a, **k: pytest.fail("loaded the data"))
    module.main(["--dataset", "boston", "--out", str(out)])


def conclusions(tmp_path, out, monkeypatch):
    results, paper = results_and_paper(tmp_path)
    script(BENCHMARKS / "uci" / "conclusions.py").main([str(results), "--paper", str(paper), "--out", str(out)])


def longest_runs(tmp_path, out, monkeypatch):
    _, paper = results_and_paper(tmp_path)
    script(BENCHMARKS / "uci" / "longest_runs.py").main(["--paper", str(paper), "--out", str(out)])


def estimator_spread(tmp_path, out, monkeypatch):
    module = script(BENCHMARKS / "estimator_spread.py")
    monkeypatch.setattr(module, "evaluate", lambda *a: pytest.fail("evaluated"))
    monkeypatch.setattr(sys, "argv", ["estimator_spread.py", "--out", str(out)])
    module.main()


WRITERS = [report, early_stopping, learning_curve, conclusions, longest_runs, estimator_spread]


@pytest.mark.parametrize("how", ["folder", "link"])
@pytest.mark.parametrize("writer", WRITERS)
def test_a_file_in_a_missing_folder_is_refused_and_no_folder_is_made(tmp_path, monkeypatch, capsys, writer, how):
    name = "f.png" if writer is report else "x.md" if writer in (conclusions, longest_runs) else "x.jsonl"
    missing = tmp_path / "nodir"
    out = missing / name
    if how == "link":
        out = tmp_path / ("link" + Path(name).suffix)
        out.symlink_to(missing / name)
    try:
        status = writer(tmp_path, out, monkeypatch)
    except SystemExit as exit_:
        status = exit_.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and f"the folder {missing} does not exist" in err[-1]
    assert not missing.exists()


def test_early_stopping_makes_its_checkpoints_folder_only_in_a_folder_that_exists(tmp_path, monkeypatch, capsys):
    module = script(BENCHMARKS / "early_stopping.py")
    monkeypatch.setattr(module, "train", lambda *a: pytest.fail("trained"))
    monkeypatch.setattr(sys, "argv", ["early_stopping.py", "--out", str(tmp_path / "x.jsonl"),
                                      "--checkpoints", str(tmp_path / "nodir" / "ck")])
    with pytest.raises(SystemExit) as exit_:
        module.main()
    assert exit_.value.code == 2 and f"the folder {tmp_path / 'nodir'} does not exist" in capsys.readouterr().err
    assert not (tmp_path / "nodir").exists()
