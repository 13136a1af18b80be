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
