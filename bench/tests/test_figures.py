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


def test_the_marginals_stage_records_each_data_set(figures, tmp_path, monkeypatch):
    """Two runs of the stage, one data set each (fits, loading and drawing stubbed): both recorded."""
    import numpy as np

    import deepgp
    from deepgp import plotting
    from deepgp.datasets import uci

    data = SimpleNamespace(X_train=np.zeros((2, 1)), Y_train=np.zeros((2, 1)), X_test=np.zeros((2, 1)))
    monkeypatch.setattr(uci, "load_split", lambda *a, **k: data)
    monkeypatch.setattr(figures, "_fit_all", lambda jobs, n: [{"path": j["path"], "seconds": 3.0} for j in jobs])
    monkeypatch.setattr(deepgp.DeepGPRegressor, "load", staticmethod(lambda *a, **k: None))
    monkeypatch.setattr(plotting, "marginals_figure", lambda *a, **k: None)
    monkeypatch.setattr(plotting, "save_figure", lambda fig, path: path)
    for dataset in ("power", "keggdirected"):
        figures.stage_marginals(_args(tmp_path, datasets=dataset, work=tmp_path / "work", data_dir=None,
                                      predict_samples=10, threads=1))
    record = json.loads((tmp_path / "marginals.json").read_text())
    assert list(record) == ["power", "keggdirected"]
    assert record["power"]["fits"] == {f"{m} {k}": {"fit_seconds": 3.0} for m, k in figures.MARGINALS}


def test_older_single_run_layout_is_replaced(figures, tmp_path):
    (tmp_path / "marginals.json").write_text(json.dumps({"deepgp": "0.1", "iterations": 5, "power GP vi": {}}))
    figures._record(_args(tmp_path), "marginals", {"fits": {}}, key="power")
    assert list(json.loads((tmp_path / "marginals.json").read_text())) == ["power"]


def test_letters_record_is_the_run_s_own(figures, tmp_path):
    figures._record(_args(tmp_path), "letters", {"points": 10})
    figures._record(_args(tmp_path), "letters", {"points": 20})
    record = json.loads((tmp_path / "letters.json").read_text())
    assert record["points"] == 20 and "deepgp" in record
