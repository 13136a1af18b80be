"""benchmarks/figures.py: a figure's record keeps the records of the other figures of its stage."""

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "figures.py"


@pytest.fixture(scope="module")
def figures():
    spec = importlib.util.spec_from_file_location("figures", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _args(out, **settings):
    return SimpleNamespace(**{"out": out, "iterations": 10_000, "num_inducing": 128, "device": None, "seed": 0,
                              "jobs": 1, **settings})


def test_marginals_record_keeps_the_other_data_sets(figures, tmp_path):
    figures._record(_args(tmp_path, device="cuda"), "marginals", {"fits": {"GP vi": {"fit_seconds": 1.0}}}, key="power")
    figures._record(_args(tmp_path), "marginals", {"fits": {"GP vi": {"fit_seconds": 2.0}}}, key="keggdirected")
    record = json.loads((tmp_path / "marginals.json").read_text())
    assert list(record) == ["power", "keggdirected"]
    assert record["power"]["device"] == "cuda" and record["keggdirected"]["device"] is None
    assert record["power"]["fits"]["GP vi"]["fit_seconds"] == 1.0
    # a rerun of one data set replaces its own entry only
    figures._record(_args(tmp_path, device="cuda"), "marginals", {"fits": {}}, key="power")
    record = json.loads((tmp_path / "marginals.json").read_text())
    assert record["power"]["fits"] == {} and record["keggdirected"]["fits"]["GP vi"]["fit_seconds"] == 2.0


def test_older_single_run_layout_is_replaced(figures, tmp_path):
    (tmp_path / "marginals.json").write_text(json.dumps({"deepgp": "0.1", "iterations": 5, "power GP vi": {}}))
    figures._record(_args(tmp_path), "marginals", {"fits": {}}, key="power")
    assert list(json.loads((tmp_path / "marginals.json").read_text())) == ["power"]


def test_letters_record_is_the_run_s_own(figures, tmp_path):
    figures._record(_args(tmp_path), "letters", {"points": 10})
    figures._record(_args(tmp_path), "letters", {"points": 20})
    record = json.loads((tmp_path / "letters.json").read_text())
    assert record["points"] == 20 and "deepgp" in record
