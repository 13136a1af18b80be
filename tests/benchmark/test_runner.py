"""Benchmark runner: rows, resuming, interrupted rows, parallel and Dask executors, the CLI."""

import numpy as np
import pytest

from deepgp.benchmark import runner
from deepgp.cli import main
from deepgp.datasets.uci import write_uci

FAST = dict(num_inducing=8, test_limit=20, num_samples=3, predict_samples=50, shapiro_points=10)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """Two small synthetic sets in the loader's format (the runner's logic does not need UCI data)."""
    folder = tmp_path_factory.mktemp("uci")
    rng = np.random.default_rng(0)
    for name, n, d in (("toya", 80, 2), ("toyb", 60, 3)):
        X = rng.normal(size=(n, d))
        write_uci(folder / f"{name}.csv.gz", np.column_stack([X, np.sin(X.sum(1)) + 0.1 * rng.normal(size=n)]))
    return folder


def configs(data_dir, pairs=(("GP", "vi"), ("LV-GP", "iw")), splits=(0, 1)):
    return runner.make_configs(["toya", "toyb"], pairs, splits, iterations=3, data_dir=str(data_dir), **FAST)


def test_model_methods_and_splits():
    assert runner.parse_splits("0-2,4") == [0, 1, 2, 4]
    assert runner.model_methods(["GP", "LV-GP", "LV-GP-GP:iw"], ["vi", "iw"]) == [
        ("GP", "vi"), ("LV-GP", "vi"), ("LV-GP", "iw"), ("LV-GP-GP", "iw")]  # no iw for GP: no latent variable
    paper = runner.make_configs(["a"], [("GP", "vi")], [0, 1, 2], 5, protocol="paper")
    assert [(c["split"], c["seed"]) for c in paper] == [(0, 0), (0, 1), (0, 2)]
    with pytest.raises(ValueError):
        runner.parse_splits("x")
    with pytest.raises(ValueError, match="device must be a torch device"):  # once, before any row runs
        runner.make_configs(["a"], [("GP", "vi")], [0], 5, device="gpu")


def test_writes_rows_then_resumes_without_rerunning(data_dir, tmp_path):
    results = tmp_path / "r.csv"
    lines = []
    assert runner.run_benchmark(configs(data_dir), results, log=lines.append) == 0
    rows = runner.read_results(results)
    assert len(rows) == 8 and len(lines) == 9  # a header line, then one progress line per row
    assert {(r["dataset"], r["model"], r["method"], r["split"]) for r in rows} == {
        (d, m, me, s) for d in ("toya", "toyb") for m, me in (("GP", "vi"), ("LV-GP", "iw")) for s in (0, 1)}
    for r in rows:
        assert np.isfinite([r[k] for k in runner.METRICS]).all() and r["iterations"] == 3 and r["seconds"] > 0
        assert r["n_test"] == (8 if r["dataset"] == "toya" else 6) and r["torch"]
    calls = []
    assert runner.run_benchmark(configs(data_dir), results, run=lambda c: calls.append(c), log=lambda m: None) == 0
    assert calls == [] and len(runner.read_results(results)) == 8


def test_interrupted_and_failed_rows_are_rerun(data_dir, tmp_path):
    results = tmp_path / "r.csv"
    todo = configs(data_dir, pairs=(("GP", "vi"),), splits=(0,))
    runner.run_benchmark(todo[:1], results, log=lambda m: None)
    # a crash in the middle of writing a row leaves a truncated line without its newline
    good = runner.format_row(runner.read_results(results)[0] | {"dataset": "toyb"})
    with open(results, "a") as f:
        f.write(good[: len(good) // 2])
    assert len(runner.read_results(results)) == 1

    def interrupted(config):
        raise KeyboardInterrupt  # Ctrl-C while training: nothing is written for the row

    with pytest.raises(KeyboardInterrupt):
        runner.run_benchmark(todo, results, run=interrupted, log=lambda m: None)

    def broken(config):
        raise FloatingPointError("bound became nan")

    assert runner.run_benchmark(todo, results, run=broken, log=lambda m: None) == 1
    assert len(runner.read_results(results)) == 1
    assert runner.run_benchmark(todo, results, log=lambda m: None) == 0
    rows = runner.read_results(results)
    assert sorted(r["dataset"] for r in rows) == ["toya", "toyb"]


@pytest.mark.parametrize("cuda_build", [False, True], ids=["fork", "spawn"])
def test_parallel_jobs(data_dir, tmp_path, monkeypatch, cuda_build):
    # a CUDA build of torch must spawn its workers (fork fails once autograd has run, as on the H100);
    # pretending to be one runs the spawn path here, with an explicit device setting travelling along
    import torch

    if cuda_build:
        monkeypatch.setattr(torch.version, "cuda", "13.0")
    results = tmp_path / "r.csv"
    todo = [c | {"device": "cpu"} for c in configs(data_dir, pairs=(("GP", "vi"),), splits=(0,))]
    assert runner.run_benchmark(todo, results, jobs=2, log=lambda m: None) == 0
    assert len(runner.read_results(results)) == 2


def test_dask_local_cluster(data_dir, tmp_path):
    distributed = pytest.importorskip("dask.distributed", reason="dask[distributed] not installed (optional extra)")
    results = tmp_path / "r.csv"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cl:
        failed = runner.run_benchmark(configs(data_dir, splits=(0,)), results, executor="dask",
                                      scheduler=cl.scheduler_address, log=lambda m: None)
    assert failed == 0 and len(runner.read_results(results)) == 4


def test_cli_benchmark_and_report(data_dir, tmp_path, capsys):
    results = tmp_path / "r.csv"
    args = ["benchmark", "--datasets", "toya", "--models", "GP,LV-GP", "--methods", "vi", "--splits", "0",
            "--iterations", "2", "--num-inducing", "8", "--predict-samples", "40", "--shapiro-points", "5",
            "--data-dir", str(data_dir), "--results", str(results)]
    assert main(args) == 0
    assert "toya LV-GP vi split 0" in capsys.readouterr().out
    assert main(args) == 0 and "0 to run" in capsys.readouterr().out
    assert main(["report", str(results)]) == 0
    assert "| toya | LV-GP (VI) | 1 |" in capsys.readouterr().out
    assert main(["benchmark", "--datasets", "nonesuch", "--data-dir", str(tmp_path), "--results", str(results)]) == 2
    assert "not found" in capsys.readouterr().err
