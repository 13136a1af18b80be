"""Benchmark runner: rows, resuming, interrupted rows, parallel and Dask executors, the CLI."""

import csv

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
    with pytest.raises(ValueError, match="inner_sampling must be one of"):
        runner.make_configs(["a"], [("GP", "vi")], [0], 5, inner_sampling="both")
    with pytest.raises(ValueError, match="dtype must be float64 .the default. or float32, got 'float16'"):
        runner.make_configs(["a"], [("GP", "vi")], [0], 5, dtype="float16")


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
    assert main(args[:4] + ["LV-GP:iw", "--inner-sampling", "independent", "--dtype", "float32"] + args[5:]) == 0
    assert "toya LV-GP iw split 0 seed 0 (independent inner draws, float32)" in capsys.readouterr().out
    assert main(["benchmark", "--datasets", "nonesuch", "--data-dir", str(tmp_path), "--results", str(results)]) == 2
    assert "not found" in capsys.readouterr().err


def test_inner_sampling_and_dtype_are_row_keys(data_dir, tmp_path):
    results = tmp_path / "r.csv"
    pairs = (("GP", "vi"), ("LV-GP-GP", "iw"))
    base = runner.make_configs(["toya"], pairs, [0], iterations=3, data_dir=str(data_dir), **FAST)
    other = runner.make_configs(["toya"], pairs, [0], iterations=3, data_dir=str(data_dir), inner_sampling="independent",
                                dtype="float32", **FAST)
    assert runner.run_benchmark(base, results, log=lambda m: None) == 0
    calls = []
    runner.run_benchmark(other, results, run=lambda c: calls.append(c) or runner.run_config(c), log=lambda m: None)
    assert [(c["model"], c["inner_sampling"], c["dtype"]) for c in calls] == [
        ("GP", "-", "float32"), ("LV-GP-GP", "independent", "float32")]  # nothing reused from the float64 rows
    rows = runner.read_results(results)
    assert sorted((r["model"], r["inner_sampling"], r["dtype"]) for r in rows) == [
        ("GP", "-", "float32"), ("GP", "-", "float64"), ("LV-GP-GP", "independent", "float32"),
        ("LV-GP-GP", "joint", "float64")]
    lv = {r["inner_sampling"]: r for r in rows if r["model"] == "LV-GP-GP"}
    assert lv["joint"]["bound"] != lv["independent"]["bound"]


def test_a_results_file_from_before_the_new_columns_is_migrated_and_resumed(data_dir, tmp_path):
    results = tmp_path / "old.csv"
    todo = configs(data_dir, splits=(0,))
    runner.run_benchmark(todo, results, log=lambda m: None)
    # rewrite it as the previous format wrote it: no inner_sampling / dtype columns
    old_columns = [c for c in runner.COLUMNS if c not in runner.ADDED]
    rows = list(csv.DictReader(open(results)))
    with open(results, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(old_columns)
        w.writerows([r[c] for c in old_columns] for r in rows)
        f.write("toya,GP,vi,0,trunc")  # a line cut by a crash: still ignored
    assert {(r["method"], r["inner_sampling"], r["dtype"]) for r in runner.read_results(results)} == {
        ("vi", "-", "float64"), ("iw", "joint", "float64")}  # read as the values those runs used
    calls = []
    assert runner.run_benchmark(todo, results, run=lambda c: calls.append(c), log=lambda m: None) == 0
    assert calls == []  # every row was recognised as done
    header = open(results).readline().strip().split(",")
    assert tuple(header) == runner.COLUMNS and len(runner.read_results(results)) == len(rows)
    (tmp_path / "alien.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="use another --results file"):
        runner.prepare_results(tmp_path / "alien.csv")
