"""DeepGPRegressor: scikit-learn conventions, original units, save / load."""

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import check_estimator

from deepgp import DeepGPRegressor
from deepgp.preprocessing import Standardizer

# check_estimator checks that do not apply, and why (everything else must pass):
EXPECTED_FAILED_CHECKS = {
    # predictions are Monte Carlo averages over draws made for the whole batch at once under the
    # estimator's seed, so a point's prediction depends (within MC error) on the rest of the batch
    "check_methods_subset_invariance": "Monte Carlo predictions: a point's draws depend on its batch",
    "check_methods_sample_order_invariance": "Monte Carlo predictions: a point's draws depend on its batch",
}
# reported as skipped by scikit-learn itself in this environment (not by us):
#   check_array_api_input (needs SCIPY_ARRAY_API=1).


def tiny(**kw):
    settings = dict(model="LV-GP", iterations=3, num_inducing=8, batch_size=64, predict_samples=20, progress=False)
    settings.update(kw)
    return DeepGPRegressor(**settings)


def test_check_estimator():
    results = check_estimator(tiny(), expected_failed_checks=EXPECTED_FAILED_CHECKS, on_fail=None)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert not failed


@pytest.fixture(scope="module")
def fitted(bimodal_data):
    (x, y), _ = bimodal_data
    # original units far from standard: the estimator must undo its own standardisation
    reg = DeepGPRegressor(model="LV-GP", iterations=200, num_inducing=16, batch_size=128, predict_samples=200,
                          progress=False)
    return reg.fit(10 * x + 3, 100 * y[:, 0] - 50)


def test_units_and_shapes(fitted, bimodal_data):
    _, (xt, yt) = bimodal_data
    xt, yt = 10 * xt + 3, 100 * yt[:, 0] - 50
    mean, std = fitted.predict(xt, return_std=True)
    assert mean.shape == std.shape == (len(xt),)
    assert abs(mean.mean() + 50) < 30 and 40 < std.mean() < 150  # ±100 branches around -50
    assert fitted.sample(xt[:7], 11).shape == (11, 7)
    q = fitted.predict_quantiles(xt[:7], [0.1, 0.5, 0.9])
    assert q.shape == (7, 3) and np.all(np.diff(q, axis=1) >= 0)
    assert fitted.predict_quantiles(xt[:7], 0.5).shape == (7,)
    # score is in the units of y: the same model on y/100 would score log(100) higher
    lp = fitted.log_density(xt, yt)
    assert lp.shape == (len(xt),)
    assert fitted.score(xt, yt) == pytest.approx(lp.mean())
    assert -6.5 < fitted.score(xt, yt) < -3.5


def test_save_load_round_trip(fitted, bimodal_data, tmp_path):
    _, (xt, yt) = bimodal_data
    xt = 10 * xt + 3
    fitted.save(tmp_path / "reg.pt")
    loaded = DeepGPRegressor.load(tmp_path / "reg.pt")
    assert loaded.get_params() == fitted.get_params()
    np.testing.assert_array_equal(loaded.predict(xt), fitted.predict(xt))
    np.testing.assert_array_equal(loaded.sample(xt, 5), fitted.sample(xt, 5))
    assert loaded.score(xt, 100 * yt[:, 0] - 50) == fitted.score(xt, 100 * yt[:, 0] - 50)


def test_a_file_from_a_newer_deepgp_names_its_version(fitted, tmp_path, monkeypatch):
    """A setting this version does not know: the file is newer, not damaged, when its header says so."""
    from deepgp import storage

    fitted.save(tmp_path / "reg.pt")
    blob = storage.read(tmp_path / "reg.pt", storage.REGRESSOR)
    blob["params"]["halo"] = 1
    monkeypatch.setattr("deepgp.version.__version__", "99.0")  # the version write() records
    storage.write(tmp_path / "new.pt", storage.REGRESSOR, blob)
    monkeypatch.undo()
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['halo'\] \(written by deepgp 99\.0, newer than"):
        DeepGPRegressor.load(tmp_path / "new.pt")
    with pytest.raises(ValueError, match=r"device must be .*'bogus'$"):  # the caller's mistake, not the file's
        DeepGPRegressor.load(tmp_path / "new.pt", device="bogus")


def test_a_file_with_the_sghmc_settings_reads_without_them(fitted, tmp_path):
    """deepgp 0.2.0.dev0 wrote the SGHMC baseline's sampler settings into every estimator's file; no deep GP reads
    them, and the estimator that does is deepgp-bench's."""
    from deepgp import storage

    fitted.save(tmp_path / "reg.pt")
    blob = storage.read(tmp_path / "reg.pt", storage.REGRESSOR)
    blob["params"].update(sghmc_samples=2000, sghmc_thinning=5, sghmc_step=0.01, sghmc_mdecay=0.05, sghmc_window=100)
    storage.write(tmp_path / "old.pt", storage.REGRESSOR, blob)
    loaded = DeepGPRegressor.load(tmp_path / "old.pt")
    assert loaded.get_params() == fitted.get_params() and "sghmc_samples" not in loaded.get_params()
    np.testing.assert_array_equal(loaded.predict(np.zeros((3, 1))), fitted.predict(np.zeros((3, 1))))
    blob["params"]["sghmc_steps"] = 1  # a name it never had is still unknown
    storage.write(tmp_path / "bad.pt", storage.REGRESSOR, blob)
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['sghmc_steps'\]"):
        DeepGPRegressor.load(tmp_path / "bad.pt")


def test_a_gpu_fitted_file_loads_on_a_machine_without_one(fitted, tmp_path, monkeypatch):
    import torch

    from deepgp import storage

    fitted.save(tmp_path / "reg.pt")
    blob = storage.read(tmp_path / "reg.pt", storage.REGRESSOR)
    blob["params"]["device"] = "cuda"  # as if fitted with DeepGPRegressor(device="cuda")
    storage.write(tmp_path / "gpu.pt", storage.REGRESSOR, blob)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match="not available here; loading on the CPU"):
        loaded = DeepGPRegressor.load(tmp_path / "gpu.pt")
    assert loaded.device is None and loaded.model_.device.type == "cpu"


def test_errors(tmp_path):
    with pytest.raises(NotFittedError):
        tiny().predict(np.zeros((3, 1)))
    with pytest.raises(NotFittedError):
        tiny().save(tmp_path / "x.pt")
    (tmp_path / "not_a_model.pt").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a model saved by deepgp"):
        DeepGPRegressor.load(tmp_path / "not_a_model.pt")
    with pytest.raises(ValueError, match="unknown token"):
        tiny(model="GP-XX").fit(np.zeros((5, 1)), np.arange(5.0))
    with pytest.raises(ValueError, match="inner_sampling"):
        tiny(inner_sampling="both").fit(np.zeros((5, 1)), np.arange(5.0))


def test_inner_sampling_is_a_parameter_that_reaches_training():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 2)), rng.standard_normal(40)
    joint = tiny(model="LV-GP-GP", inner_sampling="joint").fit(X, y)
    independent = tiny(model="LV-GP-GP").fit(X, y)
    assert independent.get_params()["inner_sampling"] == "independent"
    assert not np.allclose(joint.history_, independent.history_)


def test_multi_output_and_helpers():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((40, 2)), rng.standard_normal((40, 2)) * [1, 10]
    reg = tiny(model="GP", method="vi").fit(X, Y)
    assert reg.predict(X).shape == (40, 2) and reg.sample(X, 3).shape == (3, 40, 2)
    s = Standardizer.fit(np.c_[np.ones(5), np.arange(5.0)])
    assert s.std[0] == 1 and np.allclose(s.inverse(s.transform([[1, 2]])), [[1, 2]])


def test_a_reloaded_estimator_checks_dataframe_columns_as_the_fitted_one(tmp_path):
    pd = pytest.importorskip("pandas")  # a dev dependency: DataFrames are how most users pass columns
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.standard_normal(40), "b": 10 + rng.standard_normal(40)})
    reg = tiny(model="GP", method="vi").fit(X, X["a"] + X["b"])
    reg.save(tmp_path / "reg.safetensors")
    loaded = DeepGPRegressor.load(tmp_path / "reg.safetensors")
    assert list(loaded.feature_names_in_) == ["a", "b"]
    np.testing.assert_array_equal(loaded.predict(X), reg.predict(X))
    for est in (reg, loaded):  # columns in another order: refused before and after saving, not silently wrong
        with pytest.raises(ValueError, match="feature names"):
            est.predict(X[["b", "a"]])
    twice = pd.concat([X["a"], X["a"] * 2, X["b"]], axis=1)  # columns a, a, b: which a is which?
    with pytest.raises(ValueError, match=r"X names the column\(s\) \['a'\] more than once"):
        tiny(model="GP", method="vi").fit(twice, X["b"])


def test_a_failed_save_keeps_the_estimator_that_was_there(fitted, tmp_path):
    path = tmp_path / "reg.safetensors"
    fitted.save(path)
    good = path.read_bytes()
    fitted.columns_ = {"inputs": [object()], "target": "y"}  # cannot be written
    try:
        with pytest.raises(ValueError, match="cannot save a value of type object"):
            fitted.save(path)
    finally:
        del fitted.columns_
    assert path.read_bytes() == good


def test_settings_checked_before_training_and_lengths_before_scoring(fitted):
    X, y = np.zeros((5, 1)), np.arange(5.0)
    for kw, message in [({"predict_samples": -2}, "predict_samples must be an integer >= 1, got -2"),
                        ({"gamma": float("nan")}, "gamma must be a finite number > 0"),
                        ({"lr": 0.0}, "lr must be a finite number > 0"),
                        ({"likelihood_variance": float("nan")}, "likelihood_variance must be a finite number")]:
        with pytest.raises(ValueError, match=message):
            tiny(**kw).fit(X, y)
    with pytest.raises(ValueError, match="X and y have different numbers of rows: 10 and 9"):
        fitted.score(np.zeros((10, 1)), np.zeros(9))


def test_files_of_deepgp_0_1_need_trust_then_predict_as_they_did(tmp_path):
    # written by deepgp 0.1 (a pickle): an LV-GP estimator and its model, with the predictions it gave then
    from pathlib import Path

    from deepgp import DeepGP
    from deepgp.cli import main

    data = Path(__file__).parent / "data"
    old, expected = data / "deepgp-0.1-regressor.pt", np.load(data / "deepgp-0.1-predictions.npy")
    x = np.linspace(-2, 2, 5)[:, None]
    with pytest.raises(ValueError, match="pickle format, which can run code"):
        DeepGPRegressor.load(old)
    trusted = DeepGPRegressor.load(old, trust=True)
    # the expected predictions were computed in another process, on another CPU: float64 through Lz⁻¹, the
    # inverse Cholesky factor of K(Z, Z) (M = 4), whose rounding (SIMD widths, BLAS kernels) moves them by
    # about κ(K(Z, Z))·ε₆₄ of their scale; and a mean over latent draws made in float32
    # (deepgp.linalg.standard_normal), which a CPU with another normal kernel (torch's AVX2 and AVX-512 ones
    # against the plain one, ARM's) rounds differently: each draw moves by about ε₃₂ of itself, the mean over
    # draws by about ε₃₂ of the predictive spread (measured: 0.45 of it without AVX). 10× both
    layer = trusted.model_.final_layer
    Kzz = layer.kernel.K(layer.Z, layer.Z) + layer.jitter * torch.eye(layer.num_inducing, dtype=torch.float64)
    mean, std = trusted.predict(x, return_std=True)
    atol = 10 * (float(torch.linalg.cond(Kzz)) * np.finfo(np.float64).eps * np.abs(expected).max()
                 + np.finfo(np.float32).eps * std.max())
    np.testing.assert_allclose(mean, expected, rtol=0, atol=atol)
    assert DeepGP.load(data / "deepgp-0.1-model.pt", trust=True).spec == "LV-GP"
    with pytest.raises(ValueError, match="is not a model saved by deepgp .DeepGP.save.; it is a model saved by deepgp "
                                         r"\(DeepGPRegressor.save"):
        DeepGP.load(old, trust=True)
    assert main(["convert", str(old), str(tmp_path / "new.safetensors"), "--trust"]) == 0
    converted = DeepGPRegressor.load(tmp_path / "new.safetensors")
    np.testing.assert_array_equal(converted.predict(x), trusted.predict(x))  # (bitwise: both in this process)
    assert converted.columns_ == {"inputs": ["x"], "target": "y"}


def test_the_estimator_imports_without_docstrings():
    """`python -OO` strips docstrings: the estimator's appended parameter list must not need one."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-OO", "-c", "from deepgp import DeepGPRegressor; DeepGPRegressor()"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr.splitlines()[-1:]
