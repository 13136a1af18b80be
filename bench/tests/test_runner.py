"""Benchmark runner: rows, resuming, interrupted and damaged rows, claims, parallel and Dask executors, the CLI."""

import contextlib
import csv
import functools
import math
import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from deepgp import config, metrics
from deepgp.cli import main
from deepgp.config import RECIPE_ITERATIONS, RECIPE_VALUES
from deepgp.datasets import uci
from deepgp.datasets.uci import write_uci
from deepgp.storage import locked
from deepgp_bench import cli as bench_cli
from deepgp_bench import runner

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


def fake_row(config: dict) -> dict:
    """A complete row without training. The config may carry ``sleep`` (seconds to take) and ``claims``
    (a claims folder: its number of lock files while this runs is returned as n_train)."""
    time.sleep(config.get("sleep", 0))
    held = len(list(Path(config["claims"]).glob("*.lock"))) if "claims" in config else 0
    return {k: config[k] for k in runner.KEY} | dict.fromkeys(runner.METRICS, 0.5) | dict(
        num_samples=1, n_train=held, n_test=1, seconds=0.1, deepgp="0", torch="0", numpy="0", python="3")


def fake_run(config: dict) -> list[dict]:
    """:func:`fake_row` as a configuration's rows (what ``run_benchmark``'s ``run`` returns)."""
    return [fake_row(config)]


def fake_configs(datasets=("a", "b"), recipe="fast", **extra):
    """Configurations of GP (VI) on split 0, each carrying ``extra`` (sleep, claims) for :func:`fake_row`."""
    return [c | extra for c in runner.make_configs(list(datasets), [("GP", "vi")], [0], iterations=3, recipe=recipe)]


# the header of the results files of deepgp 0.1 (before inner_sampling, dtype and most settings were columns)
OLD_COLUMNS = ["dataset", "model", "method", "split", "seed", "protocol", "iterations", "num_inducing", "test_limit",
               *runner.METRICS, "num_samples", "n_train", "n_test", "seconds", "deepgp", "torch", "numpy", "python"]


def quiet(msg):
    pass


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


def test_a_run_of_no_iterations_leaves_its_bound_empty_not_nan(data_dir, tmp_path):
    results, lines = tmp_path / "r.csv", []
    todo = runner.make_configs(["toya"], [("GP", "vi")], [0], iterations=0, data_dir=str(data_dir), **FAST)
    assert runner.run_benchmark(todo, results, log=lines.append) == 0
    text = results.read_text()
    assert "nan" not in text.lower() and "nan" not in " ".join(lines).lower() and "bound -" in lines[-1]
    header, values = csv.reader(text.splitlines())
    row = dict(zip(header, values))
    assert row["bound"] == "" and np.isfinite(float(row["test_loglik_kde"]))  # (the untrained model is still scored)
    (read,) = runner.read_results(results)  # a complete row, not a damaged line to run again
    assert math.isnan(read["bound"]) and runner.run_benchmark(todo, results, log=lines.append) == 0
    assert results.read_text() == text


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
    with pytest.warns(runner.ResultsFileWarning, match="ignoring damaged line 3"):
        assert len(runner.read_results(results)) == 1

    def interrupted(config):
        raise KeyboardInterrupt  # Ctrl-C while training: nothing is written for the row

    with pytest.raises(KeyboardInterrupt), pytest.warns(runner.ResultsFileWarning):
        runner.run_benchmark(todo, results, run=interrupted, log=lambda m: None)

    def broken(config):
        raise FloatingPointError("bound became nan")

    with pytest.warns(runner.ResultsFileWarning):
        # it runs (and fails): the interrupted run released its claim
        assert runner.run_benchmark(todo, results, run=broken, log=lambda m: None) == 1
        assert len(runner.read_results(results)) == 1
        assert runner.run_benchmark(todo, results, log=lambda m: None) == 0
        rows = runner.read_results(results)
    assert sorted(r["dataset"] for r in rows) == ["toya", "toyb"]


@pytest.mark.slow
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
    with open(results, newline="") as f:  # the seconds as measured, not rounded to 10 ms
        assert all(len(r["seconds"].partition(".")[2]) > 2 for r in csv.DictReader(f))
    assert main(args) == 0 and "0 to run" in capsys.readouterr().out
    assert main(["report", str(results)]) == 0
    # measured one way throughout (fewer draws than the default): said once, beside the budget
    out = capsys.readouterr().out
    assert "| toya | LV-GP (VI) | 1 |" in out and "40 predictive draws, Shapiro-Wilk on the first 5 test points" in out
    assert main(args[:4] + ["LV-GP-GP:iw", "--inner-sampling", "joint", "--dtype", "float32"] + args[5:]) == 0
    assert ("toya LV-GP-GP iw split 0 seed 0 (joint inner draws, float32, predict_samples=40, shapiro_points=5)"
            in capsys.readouterr().out)
    assert main(["benchmark", "--datasets", "nonesuch", "--data-dir", str(tmp_path), "--results", str(results)]) == 2
    assert "not found" in capsys.readouterr().err


def test_inner_sampling_and_dtype_are_row_keys(data_dir, tmp_path):
    results = tmp_path / "r.csv"
    pairs = (("GP", "vi"), ("LV-GP-GP", "iw"))
    base = runner.make_configs(["toya"], pairs, [0], iterations=3, data_dir=str(data_dir), **FAST)
    other = runner.make_configs(["toya"], pairs, [0], iterations=3, data_dir=str(data_dir),
                                inner_sampling="joint",
                                dtype="float32", **FAST)
    assert runner.run_benchmark(base, results, log=lambda m: None) == 0
    calls = []
    runner.run_benchmark(other, results, run=lambda c: calls.append(c) or runner.run_config(c), log=lambda m: None)
    assert [(c["model"], c["inner_sampling"], c["dtype"]) for c in calls] == [
        ("GP", "-", "float32"), ("LV-GP-GP", "joint", "float32")]  # nothing reused from the float64 rows
    rows = runner.read_results(results)
    assert sorted((r["model"], r["inner_sampling"], r["dtype"]) for r in rows) == [
        ("GP", "-", "float32"), ("GP", "-", "float64"), ("LV-GP-GP", "independent", "float64"),
        ("LV-GP-GP", "joint", "float32")]
    lv = {r["inner_sampling"]: r for r in rows if r["model"] == "LV-GP-GP"}
    assert lv["joint"]["bound"] != lv["independent"]["bound"]


def test_a_results_file_from_before_the_new_columns_is_migrated_and_resumed(data_dir, tmp_path):
    results = tmp_path / "old.csv"
    # settings the old format did not record are read as their defaults (the recipe as "paper"): these
    # runs used them
    fast = {k: v for k, v in FAST.items() if k not in ("predict_samples", "shapiro_points")}
    todo = runner.make_configs(["toya", "toyb"], (("GP", "vi"), ("LV-GP-GP", "iw")), (0,), iterations=3,
                               data_dir=str(data_dir), recipe="paper", inner_sampling="joint", **fast)
    runner.run_benchmark(todo, results, log=lambda m: None)
    # rewrite it as the previous format wrote it: no inner_sampling / dtype columns, nor most settings
    old_columns = OLD_COLUMNS
    rows = list(csv.DictReader(open(results)))
    with open(results, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(old_columns)
        w.writerows([r[c] for c in old_columns] for r in rows)
        f.write("toya,GP,vi,0,trunc")  # a line cut by a crash: still ignored
    with pytest.warns(runner.ResultsFileWarning, match=f"ignoring damaged line {len(rows) + 2}"):
        assert {(r["method"], r["inner_sampling"], r["dtype"]) for r in runner.read_results(results)} == {
            ("vi", "-", "float64"), ("iw", "joint", "float64")}  # read as the values those runs used
    calls = []
    with pytest.warns(runner.ResultsFileWarning):
        assert runner.run_benchmark(todo, results, run=lambda c: calls.append(c), log=lambda m: None) == 0
    assert calls == []  # every row was recognised as done
    header = open(results).readline().strip().split(",")
    assert tuple(header) == runner.COLUMNS and len(runner.load_results(results).rows) == len(rows)
    (tmp_path / "alien.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="use another --results file"):
        runner.prepare_results(tmp_path / "alien.csv")


# -- damaged lines -------------------------------------------------------------------------------
def test_a_damaged_line_costs_that_line_only(tmp_path, capsys):
    results = tmp_path / "r.csv"
    todo = fake_configs("abcd")
    runner.run_benchmark(todo[:2], results, run=fake_run, log=quiet)
    with open(results, "a") as f:
        f.write('garbage,"oops\n')  # an unmatched quote: csv.reader of the file would read on to its end
    with pytest.warns(runner.ResultsFileWarning, match=r"r.csv: ignoring damaged line 4 .*will run again"):
        runner.run_benchmark(todo[2:], results, run=fake_run, log=quiet)
    loaded = runner.load_results(results)
    assert [r["dataset"] for r in loaded.rows] == ["a", "b", "c", "d"] and loaded.damaged == [4]
    with pytest.warns(runner.ResultsFileWarning, match="line 4"):
        assert len(runner.read_results(results)) == 4
    calls = []
    with pytest.warns(runner.ResultsFileWarning):
        runner.run_benchmark(todo, results, run=lambda c: calls.append(c) or fake_run(c), log=quiet)
    assert calls == []  # every row after the damaged line was recognised as done
    assert main(["report", str(results)]) == 0
    out = capsys.readouterr().out
    assert all(f"| {d} | GP (VI) | 1 |" in out for d in "abcd")
    assert "- ignored damaged line 4 of the results file" in out


def test_damaged_lines_are_listed_ten_at_most():
    assert runner.describe_lines([7]) == "line 7"
    assert runner.describe_lines(list(range(2, 15))) == "lines 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 3 more"


def test_what_counts_as_a_damaged_line(tmp_path):
    results = tmp_path / "r.csv"
    runner.run_benchmark(fake_configs("a"), results, run=fake_run, log=quiet)
    good = results.read_bytes().splitlines()[1]
    lines = [good.replace(b"a,", b"b,", 1), b"", good + b",extra", good.replace(b",3,", b",three,", 1), b'x,"y"z',
             good.replace(b"a,", b"c,", 1) + b"\r", good.replace(b"a,", b"\xff,", 1)]
    with open(results, "ab") as f:
        f.write(b"\n".join(lines))
    loaded = runner.load_results(results)
    assert [r["dataset"] for r in loaded.rows] == ["a", "b", "c"]  # a blank line and a CRLF line end are fine
    assert loaded.damaged == [5, 6, 7, 9]  # too many fields, a number that is not, broken quoting, not UTF-8


def test_migration_is_not_derailed_by_a_damaged_line(tmp_path):
    results = tmp_path / "old.csv"
    old_columns = OLD_COLUMNS
    rows = [fake_row(c) for c in fake_configs("abc", recipe="paper")]  # (what files of that format ran)
    with open(results, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(old_columns)
        w.writerow([rows[0][c] for c in old_columns])
        f.write('garbage,"oops\n')
        w.writerows([r[c] for c in old_columns] for r in rows[1:])
    with pytest.warns(runner.ResultsFileWarning, match="line 3"):
        done = runner.prepare_results(results)
    assert done == {runner.config_key(r) for r in rows}
    assert results.read_text().splitlines()[0] == ",".join(runner.COLUMNS)
    loaded = runner.load_results(results)
    assert len(loaded.rows) == 3 and loaded.damaged == [3]  # kept where it was, still ignored


def rewritten(path: Path, edit) -> bytes:
    """Rewrite the CSV at ``path`` with ``edit(records)`` (lists of fields, the header first); its new bytes."""
    records = edit(list(csv.reader(open(path, newline=""))))
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(records)
    return path.read_bytes()


def without(*names):
    """An edit of :func:`rewritten` that deletes the columns ``names``."""
    def edit(records):
        keep = [j for j, name in enumerate(records[0]) if name not in names]
        return [[r[j] for j in keep] for r in records]
    return edit


def test_the_added_columns_are_key_columns_each_added_once():
    added = [c for group in runner.ADDED_COLUMNS for c in group]
    assert len(added) == len(set(added)) and set(added) < set(runner.KEY)
    assert set(runner.KEY) - set(added) == set(OLD_COLUMNS) & set(runner.KEY)  # the first file's key columns


@pytest.mark.parametrize("newest", range(-1, len(runner.ADDED_COLUMNS)))
def test_every_layout_an_earlier_version_wrote_is_read_and_resumed(tmp_path, newest):
    """A file with the key columns of the first file and of the groups of ADDED_COLUMNS up to ``newest`` is
    one an earlier version wrote: its rows read with the later settings as their runs had them, and resumed."""
    results = tmp_path / "r.csv"
    todo = fake_configs("ab", recipe="paper")  # (what the runs of files without a recipe column used)
    runner.run_benchmark(todo, results, run=fake_run, log=quiet)
    later = [c for group in runner.ADDED_COLUMNS[newest + 1:] for c in group]
    rewritten(results, without(*later, "device", "products"))
    assert [runner.config_key(r) for r in runner.load_results(results).rows] == [runner.config_key(c) for c in todo]
    calls = []
    assert runner.run_benchmark(todo, results, run=lambda c: calls.append(c), log=quiet) == 0 and calls == []
    assert tuple(next(csv.reader(open(results)))) == runner.COLUMNS


def _prepare_after(barrier, results, out):
    barrier.wait()
    try:
        out.put(len(runner.prepare_results(results)))
    except Exception as err:  # noqa: BLE001 — reported to the test
        out.put(repr(err))


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs fork")
def test_processes_starting_together_migrate_an_old_file_once(tmp_path):
    results = tmp_path / "old.csv"
    old_columns = OLD_COLUMNS
    rows = [fake_row(c) for c in fake_configs("abc")] * 2000  # large enough for the rewrites to overlap
    with open(results, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(old_columns)
        w.writerows([r[c] for c in old_columns] for r in rows)
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_prepare_after, args=(barrier, results, out), daemon=True) for _ in range(3)]
    for p in procs:
        p.start()
    answers = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(10)
    assert answers == [3, 3, 3]  # no process saw a half-migrated file or another's temporary vanish
    assert results.read_text().splitlines()[0] == ",".join(runner.COLUMNS)
    assert len(runner.load_results(results).rows) == 6000


def test_a_file_that_is_not_a_results_file_is_refused(tmp_path):
    other = tmp_path / "x.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"x.csv is not a deepgp results file: it lacks the columns \['dataset', "):
        runner.load_results(other)
    other.write_text("")
    assert runner.load_results(other) == runner.Results([], [])


# -- claims --------------------------------------------------------------------------------------
# held until its standard input closes (it is killed, or the test's process ends): not for a fixed time, which a
# slow host's run could outlast
HOLD = ("import filelock, sys; lock = filelock.FileLock(sys.argv[1], timeout=0); lock.acquire(); "
        "print('held', flush=True); sys.stdin.read()")


def hold_claim(path: Path) -> subprocess.Popen:
    """Another process holding the claim at ``path`` (until it is killed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _benchmark_after(barrier, todo, results, run):
    barrier.wait()
    runner.run_benchmark(todo, results, run=run, log=quiet)


def run_together(todo, names, run=fake_run, timeout: float = 60) -> None:
    """``run_benchmark(todo)`` in one forked process per results file name, all started at once; each
    must finish, with exit status 0."""
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(len(names))
    procs = [ctx.Process(target=_benchmark_after, args=(barrier, todo, name, run), daemon=True) for name in names]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(timeout)
        assert [p.exitcode for p in procs] == [0] * len(procs)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs fork")
def test_two_processes_on_one_results_file_run_each_configuration_once(tmp_path):
    results = tmp_path / "r.csv"
    run_together(fake_configs(sleep=1.0), [results, results])  # (1 s: long enough for the two to overlap)
    assert sorted(r["dataset"] for r in runner.read_results(results)) == ["a", "b"]
    assert not results.with_name("r.csv.claims").exists()  # every lock file removed with its row, then the folder


def test_a_claims_folder_removed_by_another_run_while_claiming_is_made_again(tmp_path, monkeypatch):
    # Another run's close() removes the empty folder just after mkdir found it there (the race that
    # pathlib's mkdir(exist_ok=True) turns into FileExistsError, as it then finds no folder).
    results = tmp_path / "r.csv"
    todo = fake_configs("a")
    folder = runner.claim_path(results, todo[0]).parent
    real_mkdir, raced = os.mkdir, []

    def mkdir_racing_a_finished_run(path, *args, **kwargs):
        if os.fspath(path) == os.fspath(folder) and not raced:
            raced.append(path)
            real_mkdir(path, *args, **kwargs)
            os.rmdir(path)  # (the other run's close)
            raise FileExistsError(17, "File exists", os.fspath(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir_racing_a_finished_run)
    assert runner.run_benchmark(todo, results, run=fake_run, log=quiet) == 0
    assert raced and len(runner.read_results(results)) == 1 and not folder.exists()


def test_a_claim_left_by_a_killed_process_does_not_block_a_rerun(tmp_path):
    results = tmp_path / "r.csv"
    todo = fake_configs("a")
    lock = runner.claim_path(results, todo[0])
    assert lock.parent.name == "r.csv.claims" and lock.name.startswith("a-GP-vi-s0-") and lock.suffix == ".lock"
    holder = hold_claim(lock)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert lock.exists()  # the killed run left its lock file behind
    calls = []
    assert runner.run_benchmark(todo, results, run=lambda c: calls.append(c) or fake_run(c), log=quiet) == 0
    assert len(calls) == 1 and len(runner.read_results(results)) == 1 and not lock.exists()


@pytest.mark.parametrize("jobs, executor", [(1, "local"), (2, "local"), (1, "dask")])
def test_a_configuration_claimed_by_a_running_process_is_skipped(tmp_path, jobs, executor):
    if executor == "dask":
        pytest.importorskip("dask.distributed", reason="dask[distributed] not installed (optional extra)")
    results = tmp_path / "r.csv"
    todo = fake_configs("abc")
    holder = hold_claim(runner.claim_path(results, todo[1]))
    try:
        logs = []
        assert runner.run_benchmark(todo, results, jobs=jobs, executor=executor, run=fake_run, log=logs.append) == 0
        assert sorted(r["dataset"] for r in runner.read_results(results)) == ["a", "c"]
        assert "1 configuration was skipped: another process was running it (a rerun picks up" in logs[-1]
    finally:
        holder.kill()
        holder.wait()
    logs = []
    runner.run_benchmark(todo, results, run=fake_run, log=logs.append)  # its claim is free again
    assert sorted(r["dataset"] for r in runner.read_results(results)) == ["a", "b", "c"]
    assert "1 to run" in logs[0] and "skipped" not in logs[-1]


@pytest.mark.parametrize("jobs, executor", [(1, "local"), (2, "local"), (1, "dask")])
def test_claims_are_taken_as_configurations_start(tmp_path, jobs, executor):
    if executor == "dask":
        pytest.importorskip("dask.distributed", reason="dask[distributed] not installed (optional extra)")
    results = tmp_path / "r.csv"
    todo = fake_configs("abcde", claims=str(results.with_name("r.csv.claims")))
    assert runner.run_benchmark(todo, results, jobs=jobs, executor=executor, run=fake_run, log=quiet) == 0
    held = [r["n_train"] for r in runner.read_results(results)]  # lock files present while each ran
    assert len(held) == 5 and 1 <= min(held) and max(held) <= jobs  # never the whole grid up front


def test_a_failed_configuration_releases_its_claim(tmp_path):
    results = tmp_path / "r.csv"
    todo = fake_configs("a")

    def broken(config):
        raise FloatingPointError("bound became nan")

    assert runner.run_benchmark(todo, results, run=broken, log=quiet) == 1
    assert not results.with_name("r.csv.claims").exists()  # nothing left behind
    assert runner.run_benchmark(todo, results, run=fake_run, log=quiet) == 0
    assert len(runner.read_results(results)) == 1 and not results.with_name("r.csv.claims").exists()


# -- settings ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, splits", [("0-2,4", [0, 1, 2, 4]), (" 1 - 2 ,0", [0, 1, 2]), ("3,", [3])])
def test_parse_splits(text, splits):
    assert runner.parse_splits(text) == splits


@pytest.mark.parametrize("text", ["abc", "3-1", "-1", "1-x", "", "1-2-3", "0,x"])
def test_parse_splits_refuses_malformed_text(text):
    with pytest.raises(ValueError, match="splits must be integers in \\[0, 4294967295\\] like '0-4' or '0,2' "
                                         f"\\(at most 100000 of them\\), got '{text}'"):
        runner.parse_splits(text)


@pytest.mark.parametrize("setting, message", [
    (dict(num_inducing=0), "num_inducing must be an integer >= 1, got 0"),
    (dict(test_limit=0), "test_limit must be an integer >= 1, got 0"),
    (dict(iterations=-1), "iterations must be an integer >= 0, got -1"),
    (dict(num_samples=0), "num_samples must be an integer >= 1, got 0"),
    (dict(batch_size=2.5), "batch_size must be an integer >= 1, got 2.5"),
    (dict(predict_samples="9"), "predict_samples must be an integer >= 3, got '9'"),
    (dict(predict_samples=2), "predict_samples must be an integer >= 3, got 2"),
    (dict(shapiro_points=True), "shapiro_points must be an integer >= 0, got True"),
    (dict(splits=[0, -1]), "splits must be an integer >= 0, got -1"),
    (dict(snapshots=[0]), "snapshots must be an integer >= 1, got 0"),
    (dict(snapshots=[2, 5]), "snapshots must be an integer <= 4, got 5"),
])
def test_make_configs_refuses_bad_settings(setting, message):
    args = dict(datasets=["a"], pairs=[("GP", "vi")], splits=[0], iterations=5) | setting
    with pytest.raises(ValueError, match=message):
        runner.make_configs(**args)


def run_main(args, capsys):
    """(exit status, standard error) of ``deepgp ARGS``, whether argparse or a command refused it."""
    try:
        status = main(args)
    except SystemExit as exit:
        status = exit.code
    return status, capsys.readouterr().err


@pytest.mark.parametrize("bad, named", [
    (["--num-inducing", "0"], ["argument --num-inducing: must be an integer >= 1, got '0'"]),
    (["--test-limit", "0"], ["argument --test-limit"]),
    (["--iterations", "-1"], ["argument --iterations: must be an integer >= 0"]),
    (["--num-samples", "0"], ["argument --num-samples"]),
    (["--batch-size", "x"], ["argument --batch-size"]),
    (["--predict-samples", "0"], ["argument --predict-samples"]),
    (["--shapiro-points", "-1"], ["argument --shapiro-points"]),
    (["--jobs", "0"], ["argument --jobs"]),
    (["--splits", "abc"], ["argument --splits", "got 'abc'"]),
    (["--splits", "3-1"], ["argument --splits", "got '3-1'"]),
    (["--splits=-1"], ["argument --splits", "got '-1'"]),
    (["--splits", "1-x"], ["argument --splits", "got '1-x'"]),
    (["--snapshots", "x"], ["argument --snapshots: must be comma-separated integers >= 1", "got 'x'"]),
    (["--snapshots", "0"], ["argument --snapshots", "got '0'"]),
    (["--snapshots", ","], ["argument --snapshots", "got ','"]),
    (["--snapshots", "1"], ["--snapshots must be below --iterations (1), got 1"]),
    (["--iterations", "5", "--snapshots", "2,5,7"], ["--snapshots must be below --iterations (5), got 5,7"]),
])
def test_cli_bad_benchmark_settings_are_one_line_errors(data_dir, tmp_path, capsys, bad, named):
    results = tmp_path / "r.csv"
    args = ["benchmark", "--datasets", "toya", "--models", "GP:vi", "--splits", "0", "--iterations", "1",
            "--num-inducing", "4", "--test-limit", "5", "--predict-samples", "10", "--shapiro-points", "3",
            "--data-dir", str(data_dir), "--results", str(results)]
    status, err = run_main(args + bad, capsys)
    assert status == 2 and len(err.splitlines()) == 1 and "deepgp benchmark: error: " in err
    assert all(text in err for text in named) and "Traceback" not in err
    assert not results.exists()  # refused before any configuration ran


def test_cli_dask_missing_is_one_line_before_anything_is_claimed(data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask", None)  # as if the optional extra were not installed
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    results = tmp_path / "r.csv"
    status, err = run_main(["benchmark", "--datasets", "toya", "--models", "GP:vi", "--splits", "0", "--executor",
                            "dask", "--data-dir", str(data_dir), "--results", str(results)], capsys)
    assert status == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert ("deepgp benchmark: error: --executor dask needs dask.distributed: pip install 'deepgp-bench[distributed]'"
            in err)
    assert not results.exists() and not results.with_name("r.csv.claims").exists()


@pytest.mark.parametrize("content, says", [
    ("dataset,score\ntoya,1\n", "x.csv is not a deepgp results file: it lacks the columns ['model', 'method', "),
    ("", "x.csv holds no complete results rows"),
    (",".join(runner.COLUMNS) + "\n", "x.csv holds no complete results rows"),
    (",".join(runner.COLUMNS) + '\ngarbage,"oops\n',
     "x.csv holds no complete results rows (ignored its damaged line 2)"),
    (None, ": no such file"),
])
def test_cli_report_of_a_file_without_results_is_a_one_line_error(tmp_path, capsys, content, says):
    path = tmp_path / "x.csv"
    if content is not None:
        path.write_text(content)
    status, err = run_main(["report", str(path)], capsys)
    assert status == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("deepgp report: error: ") and says in err and "x.csv" in err


def test_a_data_set_or_model_named_twice_runs_once(data_dir, tmp_path, monkeypatch):
    """``--datasets toya,toya``: one configuration per (data set, model, method, split), as for models given
    twice, so that a new results file is never said to hold a finished row."""
    seen = {}
    monkeypatch.setattr(bench_cli, "run_benchmark", lambda configs, results, **kw: seen.update(configs=configs) or 0)
    assert main(["benchmark", "--datasets", "toya,toya,toyb", "--models", "GP,GP", "--methods", "vi",
                 "--splits", "0", "--data-dir", str(data_dir), "--results", str(tmp_path / "r.csv")]) == 0
    assert [(c["dataset"], c["model"]) for c in seen["configs"]] == [("toya", "GP"), ("toyb", "GP")]


def test_the_default_grid_is_table_s1_and_all_means_every_data_set_found(data_dir, tmp_path, monkeypatch):
    seen = {}

    def record(configs, results, **kwargs):
        seen["configs"] = configs
        return 0

    monkeypatch.setattr(bench_cli, "run_benchmark", record)
    # with --data-dir, "all" is that folder's data sets: not those in $DEEPGP_DATA or the cache
    uci.write_uci(tmp_path / "env" / "elsewhere.csv.gz", np.ones((4, 3)))
    uci.write_uci(tmp_path / "cache" / "deepgp" / "uci" / "cached.csv.gz", np.ones((4, 3)))
    monkeypatch.setenv("DEEPGP_DATA", str(tmp_path / "env"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert main(["benchmark", "--datasets", "all", "--splits", "0", "--data-dir", str(data_dir),
                 "--results", str(tmp_path / "r.csv")]) == 0
    columns = {(c["model"], c["method"]) for c in seen["configs"]}
    # the paper's Table S1: the nine columns of its Table 1, then its six baselines
    assert columns == set(runner.CONFIGS) | set(runner.BASELINES) and len(columns) == 15
    assert {"GP-GP-GP", "LV-GP-GP-GP"} <= {model for model, _ in columns}
    assert {("Linear", "vi"), ("CVAE-100-100", "vi"), ("GP-GP-GP", "sghmc")} <= columns
    configs = [(c["model"], c["method"]) for c in seen["configs"]]
    assert configs[:15] == [*runner.CONFIGS, *runner.BASELINES]  # per data set, the deep GPs first
    # every data set in the folder, the smallest file first
    order = list(dict.fromkeys(c["dataset"] for c in seen["configs"]))
    assert order == sorted(["toya", "toyb"], key=lambda d: (data_dir / f"{d}.csv.gz").stat().st_size)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "nocache"))
    monkeypatch.delenv("DEEPGP_DATA", raising=False)
    assert main(["benchmark", "--datasets", "all", "--data-dir", str(empty), "--results", str(tmp_path / "r.csv")]) == 2


def test_shapiro_points_0_takes_every_test_point(data_dir, monkeypatch):
    seen = []
    split_metrics = metrics.split_metrics

    def spy(model, X, Y, num_samples, shapiro_points, seed):
        seen.append((shapiro_points, len(X)))
        return split_metrics(model, X, Y, num_samples, shapiro_points, seed)

    monkeypatch.setattr(runner, "split_metrics", spy)
    config = runner.make_configs(["toya"], [("GP", "vi")], [0], iterations=2, data_dir=str(data_dir),
                                 **{**FAST, "shapiro_points": 0})[0]
    (row,) = runner.run_config(config)
    assert seen == [(None, row["n_test"])] and math.isfinite(row["shapiro_median"])
    assert row["shapiro_points"] == 0  # a column of the key: never mixed with rows on 200 points


def test_a_row_says_which_device_computed_it(data_dir, tmp_path, monkeypatch):
    config = runner.make_configs(["toya"], [("GP", "vi")], [0], iterations=2, data_dir=str(data_dir), **FAST)[0]
    assert [row["device"] for row in runner.run_config(config)] == ["cpu"]
    import torch

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H100 80GB HBM3")
    assert runner._device_name(torch.device("cuda", 0)) == "cuda:0 NVIDIA H100 80GB HBM3"
    # a file from before the column gains it empty, and reads as before
    results = tmp_path / "old.csv"
    old_columns = [c for c in runner.COLUMNS if c not in ("device", "products")]
    results.write_text(",".join(old_columns) + "\n")
    runner.prepare_results(results)
    assert results.read_text().splitlines()[0].split(",")[-2:] == ["device", "products"]


def test_a_row_says_in_what_dtype_training_computed_its_products(data_dir, tmp_path, monkeypatch):
    """"float32" by default, "float64" under DEEPGP_FLOAT32_PRODUCTS=0, "-" for a baseline (no such
    products); a file from before the column gains it empty, and its rows keep their keys."""
    monkeypatch.delenv("DEEPGP_FLOAT32_PRODUCTS", raising=False)
    config = runner.make_configs(["toya"], [("GP", "vi")], [0], iterations=2, data_dir=str(data_dir), **FAST)[0]
    assert [row["products"] for row in runner.run_config(config)] == ["float32"]
    monkeypatch.setenv("DEEPGP_FLOAT32_PRODUCTS", "0")
    (row,) = runner.run_config(config)
    assert row["products"] == "float64"
    (linear,) = runner.make_configs(["toya"], [("Linear", "vi")], [0], iterations=2, data_dir=str(data_dir), **FAST)
    assert [r["products"] for r in runner.run_config(linear)] == ["-"]
    results = tmp_path / "old.csv"
    old = {c: row[c] for c in runner.COLUMNS if c != "products"}
    line = runner.format_row(old).rstrip("\n").rsplit(",", 1)[0]  # (format_row writes every column)
    results.write_text(",".join(old) + "\n" + line + "\n")
    runner.prepare_results(results)
    (back,) = runner.read_results(results)
    assert back["products"] == "" and runner.config_key(back) == runner.config_key(row)


# -- snapshots -----------------------------------------------------------------------------------
def test_a_snapshot_row_is_the_row_of_a_run_with_that_budget(data_dir):
    # minibatches straddling epochs, the learning rate's staircase and the γ warm-up all cross the budgets
    schedule = dict(batch_size=16, decay_every=2, gamma_warmup=4, data_dir=str(data_dir), **FAST)
    (config,) = runner.make_configs(["toya"], [("LV-GP-GP", "iw")], [1], iterations=7, snapshots=[5, 3], **schedule)
    rows = runner.run_config(config)
    assert [r["iterations"] for r in rows] == [3, 5, 7]
    assert rows[0]["seconds"] <= rows[1]["seconds"] <= rows[2]["seconds"]  # the run up to each row
    for row in rows:
        (alone,) = runner.make_configs(["toya"], [("LV-GP-GP", "iw")], [1], iterations=row["iterations"], **schedule)
        (expected,) = runner.run_config(alone)
        assert runner.config_key(row) == runner.config_key(alone)
        assert {k: row[k] for k in (*runner.METRICS, "n_train", "n_test")} == {
            k: expected[k] for k in (*runner.METRICS, "n_train", "n_test")}  # bitwise
    # the baselines' schedules may depend on the total: they ignore snapshots
    (linear,) = runner.make_configs(["toya"], [("Linear", "vi")], [0], iterations=4, snapshots=[2],
                                    data_dir=str(data_dir), **FAST)
    assert [r["iterations"] for r in runner.run_config(linear)] == [4]


def fake_snapshots(config: dict) -> list[dict]:
    """:func:`fake_row` at each of the configuration's snapshots, then at its budget."""
    return [fake_row(config | {"iterations": s}) for s in [*config["snapshots"], config["iterations"]]]


def test_snapshot_rows_are_written_once_and_are_not_in_the_key(tmp_path):
    results = tmp_path / "r.csv"
    (short,) = runner.make_configs(["a"], [("GP", "vi")], [0], iterations=4, snapshots=[2])
    assert short["snapshots"] == (2,) and "snapshots" not in runner.COLUMNS
    assert runner.config_key(short) == runner.config_key(runner.make_configs(["a"], [("GP", "vi")], [0], 4)[0])
    assert runner.claim_path(results, short) == runner.claim_path(results, short | {"snapshots": ()})
    logs = []
    assert runner.run_benchmark([short], results, run=fake_snapshots, log=logs.append) == 0
    assert [r["iterations"] for r in runner.read_results(results)] == [2, 4]
    assert len(logs) == 3 and "a GP vi split 0 seed 0 at 2 iterations: kde" in logs[1] and "at 4 iterations" in logs[2]
    # a longer run with the same snapshots and more: only the rows not in the file yet are written
    (long,) = runner.make_configs(["a"], [("GP", "vi")], [0], iterations=8, snapshots=[4, 2, 6])
    logs = []
    assert runner.run_benchmark([long], results, run=fake_snapshots, log=logs.append) == 0
    assert [r["iterations"] for r in runner.read_results(results)] == [2, 4, 6, 8]
    assert len(logs) == 3 and "at 6 iterations" in logs[1] and "at 8 iterations" in logs[2]
    assert not results.with_name("r.csv.claims").exists()
    calls = []
    for again in (long, *runner.make_configs(["a"], [("GP", "vi")], [0], iterations=6)):
        assert runner.run_benchmark([again], results, run=lambda c: calls.append(c), log=quiet) == 0
    assert calls == []  # a snapshot row is the row of a run with its budget: found done


def test_cli_snapshots_then_the_reports_trend(data_dir, tmp_path, capsys):
    results = tmp_path / "r.csv"
    args = ["benchmark", "--datasets", "toya", "--models", "GP:vi", "--splits", "0", "--iterations", "3",
            "--snapshots", "2,1", "--num-inducing", "4", "--predict-samples", "10", "--shapiro-points", "3",
            "--test-limit", "5", "--data-dir", str(data_dir), "--results", str(results)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert all(f"toya GP vi split 0 seed 0 (predict_samples=10, shapiro_points=3) at {n} iterations" in out
               for n in (1, 2, 3))
    rows = runner.read_results(results)
    assert [r["iterations"] for r in rows] == [1, 2, 3]
    assert main(["report", str(results)]) == 0
    text = capsys.readouterr().out
    assert "| ours − paper | trend | mixture |" in text and "over 1 runs (3 rows;" in text
    kde = rows[2]["test_loglik_kde"] - rows[1]["test_loglik_kde"]
    assert f"| {kde:+.2f} " in text and "(from 2) |" in text


# a value other than the default for each setting some configuration does not read
OTHER = dict(hidden_dim=1, inner_width="hidden", inner_q_sqrt=0.3, train_inner_kernel_variance=True, latent_dim=2,
             encoder_hidden=(5,), encoder_std="exp", kernel="matern52", likelihood_variance=0.2, gamma=0.3,
             gamma_warmup=0, natgrad=False, natgrad_inner=True, sghmc_samples=7, sghmc_thinning=2, sghmc_step=0.02,
             sghmc_mdecay=0.1, sghmc_window=3, dreg=True, inner_sampling="joint")


@pytest.mark.parametrize("model, method", [("Linear", "vi"), ("CVAE-5", "iw"), ("GP", "sghmc"), ("GP-GP", "sghmc"),
                                           ("GP", "vi"), ("GP-GP", "vi"), ("LV-GP", "iw"), ("LV-GP-GP", "vi")])
def test_a_setting_a_model_does_not_read_neither_changes_its_numbers_nor_splits_its_key(data_dir, model, method):
    schedule = dict(data_dir=str(data_dir), **FAST, sghmc_samples=3, sghmc_thinning=1, sghmc_window=2)
    (usual,) = runner.make_configs(["toya"], [(model, method)], [0], iterations=4, **schedule)
    unread = runner.unread_settings(model, method)
    assert unread <= set(OTHER) and "num_inducing" not in unread
    (asked,) = runner.make_configs(["toya"], [(model, method)], [0], iterations=4,
                                   **schedule | {k: OTHER[k] for k in unread})
    assert runner.config_key(asked) == runner.config_key(usual)  # so a resumed grid does not run it again
    # ... and rightly so: the configuration with those settings changed computes the same numbers
    (expected,) = runner.run_config(usual)
    (changed,) = runner.run_config(usual | {k: OTHER[k] for k in unread})
    assert {k: changed[k] for k in runner.METRICS} == {k: expected[k] for k in runner.METRICS}
    # a setting it reads still splits the key
    read = {"Linear": "latent_dim", "CVAE-5": "lr", "GP": "kernel"}.get(model, "likelihood_variance")
    (other,) = runner.make_configs(["toya"], [(model, method)], [0], iterations=4,
                                   **schedule | {read: OTHER.get(read, 0.03)})
    assert runner.config_key(other) != runner.config_key(usual)


def test_rows_are_read_with_the_settings_their_model_does_not_read_at_defaults(tmp_path):
    """Rows written before a setting was normalised (LV-GP by IW with joint draws, which it does not
    have; Linear with an SGHMC setting) are read as make_configs now records them, so they match."""
    (lv, linear) = runner.make_configs(["toya"], [("LV-GP", "iw"), ("Linear", "vi")], [0], iterations=3, **FAST)
    results = tmp_path / "r.csv"
    runner.prepare_results(results)
    with open(results, "a") as f:
        for config, changed in ((lv, dict(inner_sampling="joint")), (linear, dict(sghmc_samples=5))):
            row = {k: config[k] for k in runner.KEY} | {k: 0.0 for k in runner.METRICS}
            f.write(runner.format_row(row | dict(iterations=3, seconds=1.0, n_train=1, n_test=1, deepgp="x", torch="x",
                                                 numpy="x", python="x", device="cpu") | changed))
    rows = runner.read_results(results)
    assert [runner.config_key(r) for r in rows] == [runner.config_key(lv), runner.config_key(linear)]
    assert rows[0]["inner_sampling"] == "independent" and rows[1]["sghmc_samples"] == 2000  # (typed as read)


def test_auto_inner_width_is_resolved_per_data_set_in_the_key(data_dir, tmp_path, monkeypatch):
    """inner_width="auto" (the default) is recorded as the width it gives each data set's training points,
    so a row names the architecture that ran: an old row on a large set, run at the paper's "input" before
    "auto" was the default, is that variant and not the default's row (which runs again); the report
    calls neither data set's default rows a variant."""
    monkeypatch.setattr(config, "HIDDEN_WIDTH_FROM", 70)  # toya has 72 training points, toyb 54
    pairs = (("GP", "vi"), ("GP-GP", "vi"))
    made = runner.make_configs(["toya", "toyb"], pairs, [0], iterations=3, data_dir=str(data_dir), **FAST)
    width = {(c["dataset"], c["model"]): c["inner_width"] for c in made}
    assert width == {("toya", "GP"): "auto", ("toyb", "GP"): "auto",  # (GP: no inner layer reads it)
                     ("toya", "GP-GP"): "hidden", ("toyb", "GP-GP"): "input"}
    toya = next(c for c in made if c["dataset"] == "toya" and c["model"] == "GP-GP")
    (row,) = runner.run_config(toya)
    assert row["inner_width"] == "hidden" and row["n_train"] == 72 and runner.variant(row, False) == ""
    old = row | {"inner_width": "input"}  # the paper's width, the default before "auto"
    assert runner.variant(old, False) == "inner_width=input"
    explicit = runner.make_configs(["toya"], [("GP-GP", "vi")], [0], iterations=3, data_dir=str(data_dir),
                                   inner_width="input", **FAST)[0]
    assert runner.config_key(explicit) == runner.config_key(old) != runner.config_key(toya)
    assert all(runner.variant(c, False) == "" for c in made)
    # a report drawn at the paper's width (deepgp report --inner-width input): the old row is its row, the
    # default's is named apart, and GP (no inner layer reads the width) is its row either way
    paper = {"inner_width": "input"}
    assert runner.variant(old, False, paper) == "" and runner.variant(row, False, paper) == "inner_width=hidden"
    assert [runner.variant(c, False, paper) for c in made if c["model"] == "GP"] == ["", ""]


def test_rows_no_run_writes_count_as_damaged(tmp_path):
    """+inf log densities, a blank data set and a negative split are refused; −inf (a failed fit's, and
    the paper's "below −1000") and nan stay rows."""
    results = tmp_path / "r.csv"
    runner.run_benchmark(fake_configs("a"), results, run=fake_run, log=quiet)
    header, good = results.read_text().splitlines()[:2]
    row = dict(zip(header.split(","), next(csv.reader([good]))))

    def line(**changes):
        return runner.format_row({**runner._parse_row(header.split(","), good.encode()), **changes}).rstrip("\n")

    lines = [line(dataset="b", test_loglik_kde=math.inf), line(dataset="c", test_loglik_mixture=math.inf),
             line(dataset=""), line(dataset="d", split=-1), line(dataset="e", test_loglik_kde=-math.inf),
             line(dataset="f", test_loglik_mixture=math.nan)]
    with open(results, "a") as f:
        f.write("\n".join(lines) + "\n")
    loaded = runner.load_results(results)
    assert row["dataset"] == "a" and [r["dataset"] for r in loaded.rows] == ["a", "e", "f"]
    assert loaded.damaged == [3, 4, 5, 6]


# -- refusals touch nothing ----------------------------------------------------------------------
SAFETENSORS_LIKE = b"\x58\x00\x00\x00\x00\x00\x00\x00{\"__metadata__\":{\"format\":\"deepgp-model/2\"}}" + bytes(40)


@pytest.mark.parametrize("content", [b"abc", SAFETENSORS_LIKE, b"a,b\n1,2", b"\xef\xbb\xbfdataset,x\nboston,1",
                                     b"dataset,model,method\nboston,GP,vi"],
                         ids=["text", "model", "table", "bom-table", "too-few-columns"])
def test_a_file_refused_as_results_is_left_byte_for_byte(data_dir, tmp_path, capsys, content):
    """``deepgp benchmark --results m.safetensors`` (a typo): one line, exit 2, and the file as it was, its
    last line not "mended" with a newline; no lock file or claims folder beside it either."""
    given = tmp_path / "m.safetensors"
    given.write_bytes(content)
    status, err = run_main(["benchmark", "--datasets", "toya", "--models", "GP:vi", "--splits", "0",
                            "--iterations", "1", "--data-dir", str(data_dir), "--results", str(given)], capsys)
    assert status == 2 and len(err.splitlines()) == 1 and "is not a deepgp results file" in err
    assert given.read_bytes() == content and [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]
    with pytest.raises(ValueError, match="is not a deepgp results file"):
        runner.prepare_results(given)
    assert given.read_bytes() == content and [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]


def test_a_results_file_that_is_no_regular_file_is_refused_before_it_is_opened(tmp_path, capsys):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)  # (opening a pipe to read its header would wait for a writer for ever)
    status, err = run_main(["benchmark", "--datasets", "toya", "--results", str(fifo)], capsys)
    assert status == 2 and "not a regular file" in err


def test_results_named_by_an_empty_string_is_one_line_naming_the_option(capsys):
    status, err = run_main(["benchmark", "--results", ""], capsys)
    assert (status, err) == (2, "deepgp benchmark: error: --results: expected a file name, got ''\n")


# -- claims follow the file ----------------------------------------------------------------------
def counted_run(config: dict) -> list[dict]:
    """:func:`fake_run`, each call recorded as a line of the file ``config["calls"]``."""
    with open(config["calls"], "a") as f:
        f.write(config["dataset"] + "\n")
    return fake_run(config)


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs fork")
@pytest.mark.parametrize("other_name", ["symlink", "dot"])
def test_two_runs_through_two_names_of_one_file_run_each_configuration_once(tmp_path, other_name):
    """One run names r.csv, another a symbolic link to it (or ./r.csv from another folder): the claims are
    the file's, so each configuration runs once and has one row."""
    results = tmp_path / "r.csv"
    if other_name == "symlink":
        (tmp_path / "elsewhere").mkdir()
        other = tmp_path / "elsewhere" / "link.csv"
        other.symlink_to(results)
    else:
        other = tmp_path / "sub" / ".." / "." / "r.csv"
        (tmp_path / "sub").mkdir()
    calls = tmp_path / "calls.txt"
    run_together(fake_configs("abcdefgh", sleep=0.5, calls=str(calls)), [results, other], counted_run)
    assert sorted(calls.read_text().split()) == list("abcdefgh")  # each ran once
    assert sorted(r["dataset"] for r in runner.read_results(results)) == list("abcdefgh")
    assert results.is_file() and not results.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == sorted([
        "calls.txt", "elsewhere" if other_name == "symlink" else "sub", "r.csv"])  # no claims left, no lock file


def test_a_row_written_meanwhile_is_not_written_twice(tmp_path):
    """The file is read again under its lock right before a row is written: a row that another process
    wrote meanwhile (one whose claim was released and taken again in that instant) is not written again."""
    results = tmp_path / "r.csv"
    todo = fake_configs("a")
    runner.prepare_results(results)

    def finished_elsewhere_meanwhile(config):
        rows = fake_run(config)
        with locked(results) as fd:  # the other process's row, appended first
            os.write(fd, runner.format_row(rows[0]).encode())
        return rows

    logs = []
    assert runner.run_benchmark(todo, results, run=finished_elsewhere_meanwhile, log=logs.append) == 0
    assert len(runner.read_results(results)) == 1
    assert "a GP vi split 0 seed 0: not written, already in" in logs[1]


@pytest.mark.parametrize("rows", [False, True], ids=["empty", "with-rows"])
def test_a_results_file_with_two_names_is_refused_untouched(data_dir, tmp_path, capsys, rows):
    """``deepgp benchmark --results r.csv`` where r.csv has a hard link elsewhere: runs through the other
    name would keep claims of their own, so it is one line naming the file, exit 2, the file as it was
    and nothing made beside it (no claims folder, no lock file)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    given, other = tmp_path / "a" / "r.csv", tmp_path / "b" / "r.csv"
    if rows:
        runner.prepare_results(given)
    else:
        given.write_bytes(b"")
    before = given.read_bytes()
    os.link(given, other)
    status, err = run_main(["benchmark", "--datasets", "toya", "--models", "GP:vi", "--splits", "0",
                            "--iterations", "1", "--data-dir", str(data_dir), "--results", str(given)], capsys)
    assert status == 2 and len(err.splitlines()) == 1
    assert f"{given} has 2 names (hard links)" in err and "use one name (or a copy)" in err
    assert given.read_bytes() == before and os.listdir(tmp_path / "a") == ["r.csv"]
    with pytest.raises(ValueError, match="has 2 names"):
        runner.run_benchmark(fake_configs("a"), given, run=fake_run, log=quiet)
    assert given.read_bytes() == before and os.listdir(tmp_path / "a") == ["r.csv"]


@pytest.mark.parametrize("how", ["folder", "link"])
def test_a_results_file_in_a_missing_folder_is_refused_and_nothing_is_made(data_dir, tmp_path, capsys, how):
    """``--results newdir/r.csv`` (or a link whose target's folder is missing): one line naming the missing
    folder, exit 2, and no folder made (a mistyped folder is a mistake, not a new tree)."""
    if how == "folder":
        given, missing = tmp_path / "newdir" / "r.csv", tmp_path / "newdir"
    else:
        given, missing = tmp_path / "link.csv", tmp_path / "gone"
        given.symlink_to(missing / "r.csv")
    status, err = run_main(["benchmark", "--datasets", "toya", "--models", "GP:vi", "--splits", "0",
                            "--iterations", "1", "--data-dir", str(data_dir), "--results", str(given)], capsys)
    assert status == 2 and len(err.splitlines()) == 1 and f"the folder {missing} does not exist" in err
    assert not missing.exists()
    with pytest.raises(ValueError, match="does not exist"):
        runner.run_benchmark(fake_configs("a"), given, run=fake_run, log=quiet)
    assert not missing.exists()


def test_a_snapshot_row_is_not_written_while_another_process_runs_its_budget(tmp_path):
    """A --snapshots run beside a plain run of the snapshot's budget: the snapshot's row is the plain
    run's to write (it holds the claim), so the file gets that row once."""
    results = tmp_path / "r.csv"
    (plain,) = runner.make_configs(["a"], [("GP", "vi")], [0], iterations=2)
    (long,) = runner.make_configs(["a"], [("GP", "vi")], [0], iterations=4, snapshots=[2])
    holder = hold_claim(runner.claim_path(results, plain))  # the plain run, running
    try:
        assert runner.run_benchmark([long], results, run=fake_snapshots, log=quiet) == 0
        assert [r["iterations"] for r in runner.read_results(results)] == [4]
    finally:
        holder.kill()
        holder.wait()
    assert runner.run_benchmark([plain], results, run=fake_snapshots, log=quiet) == 0  # it finishes
    assert runner.run_benchmark([long], results, run=fake_snapshots, log=quiet) == 0
    assert sorted(r["iterations"] for r in runner.read_results(results)) == [2, 4]


# -- shutdown ------------------------------------------------------------------------------------
def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            pass  # (gone meanwhile)
    return out


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_workers_end_with_the_benchmark_and_its_rows_stay(data_dir, tmp_path, sig):
    """``deepgp benchmark --jobs 2`` killed (SIGKILL: no code of its own runs) or terminated: no worker
    stays behind (they used to wait on a pipe for ever), the rows written stay, and SIGTERM is handled as
    Ctrl-C is: exit status 143, claims released."""
    results = tmp_path / "r.csv"
    cmd = [sys.executable, "-m", "deepgp", "benchmark", "--datasets", "toya,toyb", "--models", "GP:vi,LV-GP:iw",
           "--splits", "0-9", "--iterations", "300", "--num-inducing", "8", "--test-limit", "20",
           "--predict-samples", "50", "--shapiro-points", "10", "--jobs", "2", "--data-dir", str(data_dir),
           "--results", str(results)]
    env = {k: v for k, v in os.environ.items() if k != "DEEPGP_DEBUG"} | {"OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    workers = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if results.exists() and len(results.read_bytes().splitlines()) >= 2:  # a row is written
                break
            time.sleep(0.2)
        workers = _children(proc.pid)
        assert proc.poll() is None and len(workers) == 2, proc.stderr.read() if proc.poll() is not None else workers
        rows = len(runner.read_results(results))
        proc.send_signal(sig)
        status = proc.wait(30)
        gone = time.monotonic() + 10
        while any(map(_alive, workers)) and time.monotonic() < gone:
            time.sleep(0.1)
        assert not any(map(_alive, workers))
    finally:  # (a worker left behind by a failure here is this test's, and would wait for ever)
        if proc.poll() is None:
            proc.kill()
        for pid in workers:
            with contextlib.suppress(OSError):
                if _alive(pid) and str(results).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
    loaded = runner.load_results(results)
    assert len(loaded.rows) >= rows >= 1 and loaded.damaged == []
    if sig == signal.SIGTERM:
        assert status == 143 and proc.stderr.read().strip().splitlines()[-1] == "deepgp benchmark: terminated"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]  # no claims, no lock file
    else:
        assert status == -signal.SIGKILL


# -- hand-edited results files -------------------------------------------------------------------
def test_a_results_file_saved_with_a_byte_order_mark_keeps_its_rows(tmp_path, capsys):
    """A spreadsheet's "CSV UTF-8" starts with a byte order mark: the file is read, resumed and reported."""
    results = tmp_path / "r.csv"
    todo = fake_configs("ab")
    runner.run_benchmark(todo[:1], results, run=fake_run, log=quiet)
    results.write_bytes(b"\xef\xbb\xbf" + results.read_bytes().replace(b"\n", b"\r\n"))
    assert [r["dataset"] for r in runner.load_results(results).rows] == ["a"]
    calls = []
    assert runner.run_benchmark(todo, results, run=lambda c: calls.append(c) or fake_run(c), log=quiet) == 0
    assert [c["dataset"] for c in calls] == ["b"]
    loaded = runner.load_results(results)
    assert [r["dataset"] for r in loaded.rows] == ["a", "b"] and loaded.damaged == []
    assert main(["report", str(results)]) == 0 and "| a | GP (VI) | 1 |" in capsys.readouterr().out


@pytest.mark.parametrize("column", ["seconds", "n_train", "n_test", "deepgp"])
def test_a_column_deleted_by_hand_beside_the_key_is_unknown_not_damage(tmp_path, capsys, column):
    """Deleting ``seconds`` made the report a KeyError; deleting ``n_train`` made ``deepgp benchmark`` rewrite
    the file with every row damaged, and run them all again. Such a column is unknown: rows keep."""
    results = tmp_path / "r.csv"
    todo = fake_configs("ab")
    runner.run_benchmark(todo, results, run=fake_run, log=quiet)
    rewritten(results, without(column))
    calls = []
    assert runner.run_benchmark(todo, results, run=lambda c: calls.append(c), log=quiet) == 0
    assert calls == []
    loaded = runner.load_results(results)
    assert len(loaded.rows) == 2 and loaded.damaged == []
    assert all(r[column] in ("", None) or math.isnan(r[column]) for r in loaded.rows)
    assert main(["report", str(results)]) == 0
    out = capsys.readouterr().out
    assert "| a | GP (VI) | 1 |" in out and "nan" not in out
    if column == "seconds":
        assert "Total compute: 0.00 h over 2 runs, 2 of them of unknown time" in out and out.count(" – |\n") >= 2


@pytest.mark.parametrize("deleted", [
    ("num_inducing",), ("num_samples",), ("predict_samples",), ("iterations",), ("recipe",), ("lr",), ("gamma",),
    ("gamma_warmup",), ("decay",), ("inner_width",), ("dtype",), ("sghmc_step",), ("patience",),
    ("num_inducing", "recipe")])
def test_a_setting_column_deleted_by_hand_is_refused_before_any_work(data_dir, tmp_path, capsys, deleted):
    """Its rows' value of that setting is not known (reading it as today's default would make old rows
    claim a setting they did not run with and run them again): refused by name, the file as it was."""
    results = tmp_path / "r.csv"
    runner.run_benchmark(fake_configs("ab"), results, run=fake_run, log=quiet)
    content = rewritten(results, without(*deleted))
    says = f"r.csv lacks the setting column{'s' if len(deleted) > 1 else ''} {list(deleted)} "
    with pytest.raises(ValueError, match=re.escape(says)):
        runner.load_results(results)
    for command in (["benchmark", "--datasets", "toya", "--models", "GP:vi", "--splits", "0", "--iterations", "1",
                     "--data-dir", str(data_dir), "--results", str(results)], ["report", str(results)]):
        status, err = run_main(command, capsys)
        assert status == 2 and len(err.splitlines()) == 1 and says in err and "put the column" in err, err
    assert results.read_bytes() == content and sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]


def test_a_setting_column_deleted_from_an_earlier_versions_file_is_refused(tmp_path):
    results = tmp_path / "r.csv"
    runner.run_benchmark(fake_configs("ab"), results, run=fake_run, log=quiet)
    rewritten(results, without(*(c for c in runner.COLUMNS if c not in OLD_COLUMNS), "iterations"))
    with pytest.raises(ValueError, match=re.escape("r.csv lacks the setting column ['iterations'] ")):
        runner.prepare_results(results)


@pytest.mark.parametrize("column", ["seconds", "num_inducing", "dataset", "products"])
def test_a_column_named_twice_is_refused_before_any_work(data_dir, tmp_path, capsys, column):
    """A reader by name would keep one of the two (the last), and a rewrite of the file only that one."""
    results = tmp_path / "r.csv"
    runner.run_benchmark(fake_configs("ab"), results, run=fake_run, log=quiet)
    content = rewritten(results, lambda records: [r + [column if i == 0 else "9"] for i, r in enumerate(records)])
    says = f"r.csv has the column '{column}' twice in its header; keep one"
    with pytest.raises(ValueError, match=re.escape(says)):
        runner.load_results(results)
    with pytest.raises(ValueError, match=re.escape(says)):
        runner.prepare_results(results)
    for command in (["benchmark", "--datasets", "toya", "--models", "GP:vi", "--splits", "0", "--iterations", "1",
                     "--data-dir", str(data_dir), "--results", str(results)], ["report", str(results)]):
        status, err = run_main(command, capsys)
        assert status == 2 and len(err.splitlines()) == 1 and says in err, err
    assert results.read_bytes() == content and sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]


# -- names ---------------------------------------------------------------------------------------
def test_a_data_file_whose_name_is_not_a_plain_name_is_left_out(data_dir, tmp_path, capsys):
    """A file "ya\\ncht.csv.gz" made a row spanning two lines (one damaged line run again for ever, and a
    data set 'cht"' in the report). Such a name is refused where given and left out of --datasets all."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "toy\na.csv.gz").write_bytes((data_dir / "toya.csv.gz").read_bytes())
    results = tmp_path / "r.csv"
    base = ["benchmark", "--models", "GP:vi", "--splits", "0", "--iterations", "1", "--data-dir", str(folder),
            "--results", str(results)]
    status, err = run_main([*base, "--datasets", "toy\na"], capsys)
    assert status == 2 and "a data set's name is a letter or digit" in err and not results.exists()
    status, err = run_main([*base, "--datasets", "all"], capsys)
    assert status == 2 and "deepgp: warning: ignoring the data file 'toy\\na.csv.gz'" in err
    assert "no NAME.csv.gz in" in err and not results.exists()
    # a row of such a name, as an older deepgp wrote it: both its lines are damaged, no data set 'a"'
    runner.run_benchmark(fake_configs("b"), results, run=fake_run, log=quiet)
    with open(results, "a") as f:
        f.write(runner.format_row(fake_row(fake_configs("b")[0]) | {"dataset": "toy\na"}))
    loaded = runner.load_results(results)
    assert [r["dataset"] for r in loaded.rows] == ["b"] and loaded.damaged == [3, 4]


def test_a_data_dir_given_that_is_not_a_folder_is_refused_not_replaced_by_the_environment(
        data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DEEPGP_DATA", str(data_dir))  # where toya is: it used to be found there
    results = tmp_path / "r.csv"
    status, err = run_main(["benchmark", "--datasets", "toya", "--models", "GP:vi", "--splits", "0",
                            "--data-dir", str(tmp_path / "typo"), "--results", str(results)], capsys)
    assert status == 2 and f"--data-dir '{tmp_path / 'typo'}' is not a folder" in err and not results.exists()


def test_a_row_saved_by_a_spreadsheet_keeps_its_key(tmp_path):
    """A spreadsheet writes 1e-05 as 1.00E-05 and False as FALSE: the row is still the same
    configuration's, not one run again beside it."""
    results = tmp_path / "r.csv"
    todo = fake_configs("a")
    runner.run_benchmark(todo, results, run=fake_run, log=quiet)
    header, line = results.read_text().splitlines()
    cells = next(csv.reader([line]))
    for name, text in (("inner_q_sqrt", "1.00E-05"), ("train_inner_kernel_variance", "FALSE"), ("natgrad", "TRUE"),
                       ("likelihood_variance", "0.0100"), ("encoder_hidden", "20, 20")):
        cells[runner.COLUMNS.index(name)] = text
    with open(results, "w", newline="") as f:
        csv.writer(f, lineterminator="\r\n").writerows([header.split(","), cells])
    calls = []
    assert runner.run_benchmark(todo, results, run=lambda c: calls.append(c), log=quiet) == 0
    assert calls == [] and len(runner.read_results(results)) == 1


def test_a_results_file_from_before_recipes_reads_as_the_paper_recipe(tmp_path):
    config = runner.make_configs(["toy"], [("GP", "vi")], [0], iterations=3, recipe="paper")[0]
    assert {k: config[k] for k in RECIPE_VALUES["paper"]} == RECIPE_VALUES["paper"]
    row = {**{c: 0.0 for c in runner.COLUMNS}, **config, "deepgp": "0", "torch": "0", "numpy": "0", "python": "0"}
    # the header before recipes: without their group of key columns ("recipe", "gamma_warmup", "natgrad_inner")
    # and the groups added since
    since = next(i for i, group in enumerate(runner.ADDED_COLUMNS) if "recipe" in group)
    old_columns = [c for c in runner.COLUMNS if not any(c in group for group in runner.ADDED_COLUMNS[since:])]
    values = dict(zip(runner.COLUMNS, next(csv.reader([runner.format_row(row)]))))
    path = tmp_path / "old.csv"
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([old_columns, [values[c] for c in old_columns]])
    (read,) = runner.read_results(path)
    assert read["recipe"] == "paper" and read["gamma_warmup"] == 0 and read["natgrad_inner"] == "False"
    assert runner.config_key(read) == runner.config_key(config)  # a rerun under the paper recipe skips it
    fast = runner.make_configs(["toy"], [("GP", "vi")], [0], iterations=3)[0]
    assert fast["recipe"] == "fast" and runner.config_key(fast) != runner.config_key(config)
    assert runner.variant(config) == "recipe=paper" and runner.variant(fast) == ""
    assert runner.variant({**fast, "lr": 0.5}) == "lr=0.5"


def test_the_benchmark_budget_is_the_recipes(monkeypatch):
    seen = []
    monkeypatch.setattr(bench_cli, "run_benchmark", lambda configs, *a, **k: seen.append(configs) or 0)
    monkeypatch.setattr(bench_cli, "find_uci", lambda *a, **k: None)
    for argv, budget in ((["benchmark"], RECIPE_ITERATIONS["fast"]), (["benchmark", "--recipe", "paper"], 100_000),
                         (["benchmark", "--iterations", "7"], 7)):
        args = bench_cli.build_parser().parse_args([*argv, "--datasets", "toy", "--models", "GP:vi", "--splits", "0"])
        assert bench_cli._benchmark(args) == 0
        assert seen[-1][0]["iterations"] == budget


@pytest.mark.parametrize("debug", [False, True])
def test_a_failed_configuration_shows_its_traceback_only_when_asked(data_dir, tmp_path, capsys, debug):
    def fails(config):
        raise RuntimeError("the test's failure")

    logged = []
    todo = configs(data_dir, pairs=(("GP", "vi"),), splits=(0,))[:1]
    failed = runner.run_benchmark(todo, tmp_path / "r.csv", log=logged.append, run=fails, debug=debug)
    err = capsys.readouterr().err
    assert failed == 1 and "FAILED toya GP vi split 0" in logged[-1] and "the test's failure" in logged[-1]
    assert ("Traceback (most recent call last)" in err) is debug and ("in fails" in err) is debug


def test_deepgp_debug_shows_a_failed_configurations_traceback(data_dir, tmp_path, capsys, monkeypatch):
    def fails(config):
        raise RuntimeError("the test's failure")

    monkeypatch.setattr(bench_cli, "run_benchmark", functools.partial(runner.run_benchmark, run=fails))
    args = ["benchmark", "--datasets", "toya", "--models", "GP:vi", "--splits", "0", "--iterations", "2",
            "--data-dir", str(data_dir), "--results", str(tmp_path / "r.csv")]
    assert main(args) == 1 and "Traceback" not in capsys.readouterr().err
    assert main(["--debug", *args]) == 1 and "in fails" in capsys.readouterr().err


def test_a_results_row_keeps_every_digit(tmp_path):
    config = runner.make_configs(["toy"], [("GP", "vi")], [0], iterations=3)[0]
    measured = dict(test_loglik_kde=1 / 3, test_loglik_mixture=-1234567.8901234567, test_rmse=math.pi * 1e-170,
                    shapiro_median=0.9876543210987654, bound=-98765.43210987654, seconds=12.345678901234567)
    row = {**config, **measured, "n_train": 90, "n_test": 10, "deepgp": "0", "torch": "0", "numpy": "0",
           "python": "0"}
    path = tmp_path / "r.csv"
    path.write_text(",".join(runner.COLUMNS) + "\n" + runner.format_row(row))
    (back,) = runner.read_results(path)
    assert {k: back[k] for k in measured} == measured
