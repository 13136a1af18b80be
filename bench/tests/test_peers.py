"""The peers (deepgp_bench.peers): densities that integrate to one, draws that follow them, early stopping
that keeps its best state, seeded fits that repeat, and the runner's results file."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.integrate
import torch

from deepgp_bench.peers import make_peer
from deepgp_bench.peers.base import early_stopping_split, mlp, train_early_stopping

# small, quick versions of each peer (the defaults' structure, fewer units and epochs)
QUICK = {
    "ngboost": dict(n_estimators=300, learning_rate=0.2, early_stopping_rounds=10),
    "ensemble": dict(hidden=(16, 16), lr=1e-2, max_epochs=15, patience=5),
    "mdn": dict(hidden=(16, 16), components=3, lr=1e-2, max_epochs=15, patience=5),
    "flow": dict(hidden=(16, 16), transforms=2, lr=1e-2, max_epochs=15, patience=5),
}
NEEDS = {"ngboost": "ngboost", "flow": "zuko"}


def _peer(name: str, **settings):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    return make_peer(name, **{**QUICK[name], **settings})


def _data(n: int = 300, seed: int = 0):
    """y | x bimodal with a spread that grows with x₁: x [n, 2], y [n]."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(n, 2))
    sign = np.where(rng.uniform(size=n) < 0.5, -1.0, 1.0)
    y = np.sin(2 * X[:, 0]) + 0.6 * sign * X[:, 1] + (0.1 + 0.2 * np.abs(X[:, 0])) * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def fitted():
    """Each peer fitted once on the same data with seed 0 (shared by the tests that only read it)."""
    X, y = _data()
    X_fit, y_fit, X_val, y_val = early_stopping_split(X, y, split=0)
    out = {}
    for name in QUICK:
        if name in NEEDS:
            try:
                __import__(NEEDS[name])
            except ImportError:
                continue
        out[name] = (make_peer(name, **QUICK[name]).fit(X_fit, y_fit, X_val, y_val, seed=0), X_val, y_val)
    return out


def _get(fitted, name):
    if name not in fitted:
        pytest.importorskip(NEEDS[name])
    return fitted[name]


X_FIXED = np.array([[0.0, 0.0], [1.0, -1.0], [-1.2, 0.8]])
GRID = np.linspace(-12.0, 12.0, 24_001)  # spacing 0.001: the trapezoid rule's error is far below 1e-4 here


@pytest.mark.parametrize("name", list(QUICK))
def test_density_integrates_to_one(fitted, name):
    """∫ p(y | x) dy = 1 for fixed x, by the trapezoid rule on a fine grid that holds all the mass."""
    peer = _get(fitted, name)[0]
    for x in X_FIXED:
        density = np.exp(peer.log_density(np.repeat(x[None], len(GRID), 0), GRID))
        assert scipy.integrate.trapezoid(density, GRID) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("name", list(QUICK))
def test_draws_follow_the_density(fitted, name):
    """A Kolmogorov–Smirnov distance between 4,000 seeded draws at a fixed x and the CDF integrated from
    log_density: below the 1% critical value 1.63/√n (the draws are seeded, so the test is deterministic)."""
    peer = _get(fitted, name)[0]
    n = 4000
    for x in X_FIXED:
        draws = np.sort(peer.sample(x[None], n, seed=3)[:, 0])
        density = np.exp(peer.log_density(np.repeat(x[None], len(GRID), 0), GRID))
        cdf = scipy.integrate.cumulative_trapezoid(density, GRID, initial=0.0)
        at = np.interp(draws, GRID, cdf)
        ks = max(np.max(np.arange(1, n + 1) / n - at), np.max(at - np.arange(n) / n))
        assert ks < 1.63 / np.sqrt(n)


def test_sample_shapes_and_seed(fitted):
    peer = _get(fitted, "mdn")[0]
    X = _data(7, seed=1)[0]
    a, b, c = peer.sample(X, 11, seed=0), peer.sample(X, 11, seed=0), peer.sample(X, 11, seed=1)
    assert a.shape == (11, 7) and a.dtype == np.float64
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_early_stopping_restores_the_best_state():
    """A network that overfits 20 noise points: training runs ``patience`` epochs past its best validation
    loss, and the module it leaves has exactly that best loss (bitwise: the same process and arithmetic)."""
    torch.manual_seed(0)
    X, y, X_val, y_val = torch.randn(20, 3), torch.randn(20), torch.randn(200, 3), torch.randn(200)
    net = mlp(3, 1, (50, 50), "relu")

    def loss(module, x, t):
        return (module(x)[:, 0] - t).square().mean()

    run = train_early_stopping(net, loss, X, y, X_val, y_val, lr=1e-2, batch_size=10, max_epochs=500, patience=7,
                               seed=0)
    assert run.epochs == run.best_epoch + 7 < 500
    assert run.best_epoch == int(np.argmin(run.history)) + 1
    assert run.history[-1] > run.best_loss
    with torch.no_grad():
        assert float(loss(net, X_val, y_val)) == run.best_loss


@pytest.mark.parametrize("name", ["ensemble", "mdn", "flow"])
def test_networks_keep_their_best_epoch(fitted, name):
    """Each member's kept state is its best epoch's: its validation loss recomputed (in float64 now, float32
    during training: agreement to float32's rounding of a mean of O(1) terms) is the minimum of its history."""
    peer, X_val, y_val = _get(fitted, name)
    x, y = (torch.as_tensor(a, dtype=torch.float64) for a in (X_val, y_val))
    for net, run in zip(peer.nets, peer.runs):
        assert run.best_loss == min(run.history)
        with torch.no_grad():
            assert float(peer.member_loss(net, x, y)) == pytest.approx(run.best_loss, abs=1e-5)


def test_ngboost_predicts_with_its_best_stage(fitted):
    """NGBoost keeps ``early_stopping_rounds`` stages past its best: the peer's density is the package's own
    at the best stage, and its validation log density is minus that stage's validation loss."""
    peer, X_val, y_val = _get(fitted, "ngboost")
    assert peer.stages < peer.fit_info["iterations"]
    ours = peer.log_density(X_val, y_val)
    np.testing.assert_allclose(ours, peer.model.pred_dist(X_val, max_iter=peer.stages).logpdf(y_val), rtol=1e-12)
    assert -ours.mean() == pytest.approx(min(peer.model.evals_result["val"]["LOGSCORE"]), rel=1e-10)


@pytest.mark.parametrize("name", list(QUICK))
def test_seeded_fit_is_reproducible(name):
    """The same seed fits the same peer (bitwise, within one process); another seed a different one
    (NGBoost without subsampling is deterministic whatever its seed, so only the first half for it)."""
    X, y = _data(200, seed=2)
    parts = early_stopping_split(X, y, split=1)
    a, b = (_peer(name).fit(*parts, seed=5).log_density(X, y) for _ in range(2))
    assert np.array_equal(a, b)
    if name != "ngboost":
        assert not np.array_equal(a, _peer(name).fit(*parts, seed=6).log_density(X, y))


def test_unknown_setting_is_refused():
    with pytest.raises(ValueError, match="unknown setting"):
        make_peer("mdn", learning_rate=0.1)
    with pytest.raises(ValueError, match="unknown peer"):
        make_peer("gp")


def test_a_setting_is_checked_against_its_default_kind():
    """A width, count or rate its peer cannot take failed only inside each fit: refused when the peer is made."""
    assert make_peer("mdn", hidden=[16, 16], lr=1, activation="relu").settings["hidden"] == [16, 16]
    for setting, says in ((dict(hidden=(16, 0)), "hidden must be integers >= 1"), (dict(lr=float("inf")), "lr must"),
                          (dict(max_epochs=True), "max_epochs must be an integer >= 1"),
                          (dict(components=2.0), "components must be an integer >= 1")):
        with pytest.raises(ValueError, match=says):
            make_peer("mdn", **setting)


# -- the runner -------------------------------------------------------------------------------------------
@pytest.fixture
def data_dir(tmp_path):
    from deepgp.datasets.uci import write_uci

    X, y = _data(120, seed=4)
    write_uci(tmp_path / "toy.csv.gz", np.concatenate([X, y[:, None]], 1))
    return tmp_path


def _run(data_dir, out, *extra):
    from deepgp_bench.peers.run import main

    return main(["--datasets", "toy", "--splits", "0", "--peers", "mdn", "--set", "mdn.max_epochs=2",
                 "--draws", "50", "--data-dir", str(data_dir), "--out", str(out), *extra])


def test_runner_appends_once_and_resumes(data_dir, tmp_path):
    out = tmp_path / "rows.jsonl"
    assert _run(data_dir, out) == 0
    lines = out.read_text().splitlines()
    row = json.loads(lines[0])
    assert len(lines) == 1 and row["key"]["settings"]["max_epochs"] == 2 and row["n_eval"] == 12
    assert all(np.isfinite(row[m]) for m in ("log_density", "kde", "crps", "rmse", "val_log_density"))
    assert _run(data_dir, out) == 0  # already there: nothing appended
    assert out.read_text().splitlines() == lines
    with open(out, "a") as f:
        f.write('{"key": {"dataset": "toy", "spl')  # a line cut by a kill
    assert _run(data_dir, out, "--part", "validation") == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()[2:]]
    assert out.read_text().splitlines()[:2] == [*lines, '{"key": {"dataset": "toy", "spl']
    assert [r["key"]["part"] for r in rows] == ["validation"] and rows[0]["n_eval"] == 11  # 10% of 108 rows


def test_runner_refuses_bad_arguments(data_dir, tmp_path, capsys):
    for extra in (["--set", "mdn.nope=1"], ["--peers", "gp"], ["--splits", "2-1"]):
        assert _run(data_dir, tmp_path / "rows.jsonl", *extra) == 2
        assert capsys.readouterr().err.startswith("error: ")
    from deepgp_bench.peers.run import main

    assert main(["--datasets", "missing", "--data-dir", str(data_dir), "--out", str(tmp_path / "r.jsonl")]) == 2
    assert not (tmp_path / "rows.jsonl").exists()


BAD_ARGUMENTS = [
    (["--datasets", ""], "--datasets names nothing"),
    (["--datasets", "y/a"], "--datasets: a data set's name is a letter or digit"),
    (["--datasets", "toy,,toy"], "--datasets has an empty item"),
    (["--datasets", "toy,"], "--datasets has an empty item"),
    (["--peers", "mdn,,flow"], "--peers has an empty item"),
    (["--peers", ""], "--peers names nothing"),
    (["--splits", "0,,1"], "--splits has an empty item"),
    (["--splits", "0-99999999999"], "--splits: splits must be integers in [0, 4294967295]"),
    (["--set", "mdn.hidden=abc"], "--set: mdn: hidden must be integers >= 1 like [50, 50], got 'abc'"),
    (["--set", "mdn.lr=NaN"], "--set: mdn: lr must be a finite number > 0, got nan"),
    (["--set", "mdn.lr=-1"], "--set: mdn: lr must be a finite number > 0, got -1"),
    (["--set", "mdn.components=1e400"], "--set: mdn: components must be an integer >= 1, got inf"),
    (["--set", "mdn.activation=relu2"], "--set: mdn: activation must be one of relu, tanh"),
    (["--draws", "1"], "argument --draws: must be an integer >= 2"),
    (["--draws", "x"], "argument --draws: must be an integer >= 2"),
    (["--threads", "0"], "argument --threads: must be an integer >= 1"),
    (["--threads", str(10**8)], "--threads must be at most the"),
    (["--part", "train"], "argument --part: invalid choice"),
]


@pytest.mark.parametrize("extra, says", BAD_ARGUMENTS, ids=[" ".join(e) for e, _ in BAD_ARGUMENTS])
def test_every_bad_argument_is_one_line_and_exit_2_before_any_fit(data_dir, tmp_path, capsys, extra, says):
    """Each of these ended in a traceback (a data set's name, no data set at all), trained without an empty
    item, or failed in every fit (a setting its peer cannot take) or crashed (a thread count): each is
    refused by name before any fit, on one line, with exit status 2."""
    out = tmp_path / "rows.jsonl"
    capsys.readouterr()
    try:
        code = _run(data_dir, out, *extra)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    std, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and says in err and std == "", (extra, err)
    assert not out.exists()


def test_bad_folders_and_files_are_one_line_and_exit_2(data_dir, tmp_path, capsys):
    from deepgp.datasets.uci import write_uci
    from deepgp_bench.peers.run import main

    (data_dir / "empty.csv.gz").write_bytes(b"\x1f\x8bnot gzip")
    write_uci(data_dir / "tiny.csv.gz", np.zeros((0, 3)))
    out = tmp_path / "rows.jsonl"
    for extra, says in ((["--data-dir", str(tmp_path / "none")], "--data-dir"),
                        (["--data-dir", str(data_dir / "toy.csv.gz")], "--data-dir"),
                        (["--datasets", "empty"], f"--datasets: cannot read {data_dir / 'empty.csv.gz'}"),
                        (["--datasets", "tiny"], f"--datasets: cannot read {data_dir / 'tiny.csv.gz'}: 0 rows"),
                        (["--table", "--out", str(tmp_path)], "--out"),
                        (["--table", "--out", str(tmp_path / "none.jsonl")], "no such file")):
        capsys.readouterr()
        argv = ["--datasets", "toy", "--peers", "mdn", "--data-dir", str(data_dir), "--out", str(out), *extra]
        assert main(argv) == 2, extra
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and says in err, (extra, err)
    assert not out.exists()


def test_a_line_of_the_results_that_is_not_utf8_is_damaged(tmp_path):
    from deepgp_bench.peers.run import read_rows

    path = tmp_path / "rows.jsonl"
    good = json.dumps({"key": {"dataset": "toy", "split": 0, "peer": "mdn", "settings": {}, "part": "test",
                               "draws": 50}})
    path.write_bytes(good.encode() + b"\n" + b'{"key": "\xff"}\n' + b"[" * 100_000 + b"\n")
    rows, damaged = read_rows(path)
    assert len(rows) == 1 and damaged == [2, 3]


def test_an_out_file_in_a_missing_folder_is_refused_before_any_fit(data_dir, tmp_path, capsys):
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "gone" / "rows.jsonl")
    for out, folder in ((tmp_path / "nodir" / "rows.jsonl", "nodir"), (tmp_path / "dangling.jsonl", "gone")):
        assert _run(data_dir, out) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and f"the folder {tmp_path / folder} does not exist" in err, err
        assert "Traceback" not in err and not (tmp_path / folder).exists()


def test_too_many_draws_are_refused_by_name_before_any_fit(data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DEEPGP_MEMORY_LIMIT", "1GB")
    out = tmp_path / "rows.jsonl"
    assert _run(data_dir, out, "--draws", str(10**9)) == 2  # (10% of the toy rows × 1e9 draws × 32 bytes)
    err = capsys.readouterr().err
    assert err.startswith("error: --draws=1000000000 needs about") and err.count("\n") == 1
    assert not out.exists()


def test_non_finite_means_are_written_as_null():
    from deepgp_bench.peers.run import finite_or_none

    values, bad = finite_or_none({"a": 1.0, "b": float("-inf"), "c": float("nan"), "d": [1]})
    assert values == {"a": 1.0, "b": None, "c": None, "d": [1]} and bad == ["b", "c"]
    json.dumps(values, allow_nan=False)


def test_set_values_parse_as_json_or_text():
    from deepgp_bench.peers.run import parse_value

    assert [parse_value(t) for t in ("0.01", "100", "true", "[16, 16]", "tanh")] == [0.01, 100, True, (16, 16), "tanh"]


def test_test_table_means_over_splits_and_names_the_best():
    """Only rows with a peer's current settings count; the means are over the splits present."""
    from deepgp_bench.peers.run import _jsonable, test_table

    def row(peer, split, value, seconds, **settings):
        key = {"dataset": "boston", "split": split, "peer": peer, "part": "test", "draws": 2000,
               "settings": _jsonable(make_peer(peer, **settings).settings)}
        return {"key": key, "log_density": value, "fit_seconds": seconds, "fit_cpu_seconds": seconds / 2}

    rows = [row("mdn", 0, 0.1, 4.0), row("mdn", 1, 0.3, 6.0), row("ensemble", 0, 0.5, 8.0, lr=0.5),
            row("ensemble", 0, 0.15, 2.0)]
    line = test_table(rows).splitlines()[2]
    assert line.startswith("| boston | ")
    assert "0.20 (5 s, CPU 2 s, splits [0, 1])" in line and "0.15 (2 s, CPU 1 s, splits [0])" in line
    assert line.endswith("| mdn 0.20 (5 s, CPU 2 s) |") and "0.50" not in line


# -- deepgp's entry ---------------------------------------------------------------------------------------
DEEPGP_QUICK = ["--set", "deepgp.iterations=40", "--set", "deepgp.curve=[10,20,40]", "--set", "deepgp.num_inducing=16"]


def _run_deepgp(data_dir, out, *extra):
    from deepgp_bench.peers.run import main

    return main(["--datasets", "toy", "--splits", "0", "--peers", "deepgp", *DEEPGP_QUICK, "--draws", "50",
                 "--data-dir", str(data_dir), "--out", str(out), *extra])


def test_deepgp_entry_writes_its_curve(data_dir, tmp_path):
    """deepgp trains on every training row, seeded with the split; its curve is scored at 10, 20 and 40
    iterations and its last point is the final model's scores (bitwise: the same process and draws)."""
    out = tmp_path / "rows.jsonl"
    assert _run_deepgp(data_dir, out) == 0
    row = json.loads(out.read_text())
    assert row["key"]["peer"] == "deepgp" and row["key"]["settings"] == {
        "estimator": "DeepGPRegressor", "iterations": 40, "curve": [10, 20, 40], "num_inducing": 16}
    assert row["n_fit"] == row["n_train"] == 108 and row["n_val"] == 0 and row["val_log_density"] is None
    assert row["fit_info"]["iterations"] == 40 and row["non_finite"] == []
    curve = row["curve"]
    assert [p["iterations"] for p in curve] == [10, 20, 40] and set(curve[0]) == {"iterations", "seconds",
                                                                                 "log_density", "kde"}
    assert curve[-1]["log_density"] == row["log_density"] and curve[-1]["kde"] == row["kde"]
    assert curve[0]["seconds"] < curve[1]["seconds"] < curve[2]["seconds"] <= row["fit_seconds"]
    assert _run_deepgp(data_dir, out) == 0 and len(out.read_text().splitlines()) == 1  # resumed: nothing new


def test_deepgp_curve_changes_nothing_in_training():
    """The fit with the curve scored during training, the same fit without it and ``DeepGPRegressor`` itself
    end with the same parameters and bounds, bit for bit (one process): the curve's draws leave the training's
    random stream as it was, and ``CallbackRegressor`` fits as the estimator does."""
    from deepgp import DeepGPRegressor
    from deepgp_bench.peers.run import scores

    X, y = _data(100, seed=5)
    settings = dict(iterations=20, num_inducing=16)
    plain = DeepGPRegressor(**settings, seed=3, progress=False).fit(X, y)
    quiet = make_peer("deepgp", **settings).fit(X, y, seed=3)
    watched = make_peer("deepgp", **settings, curve=(5, 10, 20))
    watched.watch(lambda: scores(watched, X[:30], y[:30], 40, seed=3)[0], 40)
    watched.fit(X, y, seed=3)
    assert quiet.curve is None and [p["iterations"] for p in watched.curve] == [5, 10, 20]
    for other in (quiet.model, watched.model):
        assert np.array_equal(other.history_, plain.history_)
        ours, theirs = other.model_.state_dict(), plain.model_.state_dict()
        assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert not watched.model.model_.training  # left for prediction, as the estimator leaves it


def test_deepgp_curve_time_and_non_finite_scores(data_dir, tmp_path, monkeypatch):
    """A curve's evaluations are taken out of the fit's seconds, and a non-finite curve score is written as
    null and named in ``non_finite`` as the row's own means are."""
    import time

    import deepgp_bench.peers.run as run

    real, real_clock, skipped = run.scores, time.perf_counter, [0.0]
    # each evaluation takes an hour on the wall clock (skipped ahead, not slept): no host's own steps take as long
    # (a slept half second was outlasted by the steps of a loaded host)
    hour = 3600.0
    monkeypatch.setattr(time, "perf_counter", lambda: real_clock() + skipped[0])

    def slow_and_infinite(*args, **kwargs):
        skipped[0] += hour
        means, per_point = real(*args, **kwargs)
        return {**means, "kde": float("-inf")}, per_point

    monkeypatch.setattr(run, "scores", slow_and_infinite)
    out = tmp_path / "rows.jsonl"
    assert _run_deepgp(data_dir, out) == 0
    row = json.loads(out.read_text())
    assert row["kde"] is None and [p["kde"] for p in row["curve"]] == [None] * 3
    assert row["non_finite"] == ["kde", "curve[10].kde", "curve[20].kde", "curve[40].kde"]
    assert row["fit_info"]["curve_seconds"] >= 3 * hour  # three evaluations of at least an hour
    assert [p["seconds"] for p in row["curve"]] == sorted(p["seconds"] for p in row["curve"])
    assert row["curve"][-1]["seconds"] < hour  # the points' seconds are the training's alone
    # the fit's seconds are the last point's and the few steps after it, without its hour of evaluation
    assert 0 <= row["fit_seconds"] - row["curve"][-1]["seconds"] < hour


def test_deepgp_settings_are_checked():
    assert make_peer("deepgp").settings == {"estimator": "DeepGPRegressor", "iterations": 5000,
                                            "curve": (250, 500, 1000, 2000, 3000, 5000)}
    assert make_peer("deepgp", iterations=2500).curve_points() == [250, 500, 1000, 2000, 2500]
    for bad, match in ((dict(seed=1), "set by the run"), (dict(nope=1), "unknown setting"),
                       (dict(lr=-1.0), "lr"), (dict(curve=(20, 10)), "curve"), (dict(estimator="x"), "estimator"),
                       (dict(device="meta"), "device must be")):
        with pytest.raises(ValueError, match=match):
            make_peer("deepgp", **bad)


def test_test_table_shows_deepgp_beside_the_peers():
    from deepgp_bench.peers.run import PEERS, _jsonable, test_table

    rows = [{"key": {"dataset": "yacht", "split": 0, "peer": peer, "part": "test", "draws": 2000,
                     "settings": _jsonable(make_peer(peer).settings)},
             "log_density": value, "fit_seconds": 10.0, "fit_cpu_seconds": 9.0}
            for peer, value in (("mdn", 1.5), ("deepgp", 2.5))]
    header, _, line = test_table(rows).splitlines()
    assert PEERS[-1] == "deepgp" and header.split(" | ")[len(PEERS)] == "deepgp"
    assert line.endswith("| 2.50 (10 s, CPU 9 s, splits [0]) | deepgp 2.50 (10 s, CPU 9 s) |")
