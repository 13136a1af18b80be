import numpy as np
import pytest
import torch

import deepgp


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    return deepgp.DeepGP.from_spec("LV-GP", rng.standard_normal((30, 2)), rng.standard_normal(30), num_inducing=8)


GOOD_X, GOOD_Y = np.zeros((5, 2)), np.zeros(5)


@pytest.mark.parametrize(
    "X, Y, pattern",
    [
        (np.array([[0.0, np.nan]] * 5), GOOD_Y, "X contains NaN"),
        (GOOD_X, np.array([0, 0, np.inf, 0, 0]), "Y contains NaN or infinite"),
        (GOOD_X, np.zeros(4), "different numbers of points"),
        (np.zeros(5), GOOD_Y, "X must be 2-D"),
        (np.zeros((5, 2, 1)), GOOD_Y, "X must be 2-D"),
        (np.zeros((5, 3)), GOOD_Y, "3 columns but the model was built for 2"),
        (GOOD_X, np.zeros((5, 2)), "Y has 2 columns"),
        (np.array([["a", "b"]] * 5), GOOD_Y, "X must be numeric"),
        (GOOD_X, ["x"] * 5, "Y must be numeric"),
        (None, GOOD_Y, "X is None"),
        (torch.zeros(5, 2, dtype=torch.complex64), GOOD_Y, "real numbers"),
    ],
)
def test_bad_inputs_to_the_bound(model, X, Y, pattern):
    with pytest.raises(ValueError, match=pattern):
        model.elbo(X, Y)


def test_too_few_points_to_build_or_fit(model):
    with pytest.raises(ValueError, match="at least 2"):
        deepgp.DeepGP.from_spec("GP", np.zeros((1, 2)), np.zeros(1))
    with pytest.raises(ValueError, match="at least 2"):
        deepgp.fit(model, np.zeros((1, 2)), np.zeros(1), iterations=1, progress=False)


def test_bad_prediction_inputs(model):
    with pytest.raises(ValueError, match="X contains NaN"):
        model.sample_predictive(np.full((3, 2), np.nan), 5)
    with pytest.raises(ValueError, match="num_samples"):
        model.predictive_log_density(GOOD_X, GOOD_Y, num_samples=0)
    with pytest.raises(ValueError, match="estimator"):
        model.predictive_log_density(GOOD_X, GOOD_Y, num_samples=5, estimator="histogram")


def test_bad_settings(model):
    with pytest.raises(ValueError, match="num_samples"):
        model.elbo(GOOD_X, GOOD_Y, num_samples=0)
    with pytest.raises(ValueError, match="iterations"):
        deepgp.fit(model, GOOD_X, GOOD_Y, iterations=-1, progress=False)
    with pytest.raises(ValueError, match="method"):
        deepgp.fit(model, GOOD_X, GOOD_Y, method="ep", progress=False)
    with pytest.raises(ValueError, match="num_inducing"):
        deepgp.DeepGP.from_spec("GP", GOOD_X, GOOD_Y, num_inducing=0)


def test_bad_devices():
    with pytest.raises(ValueError, match="device must be a torch device"):
        deepgp.DeepGP.from_spec("GP", GOOD_X, GOOD_Y, num_inducing=4, device="gpu")
    assert deepgp.DeepGP.from_spec("GP", GOOD_X, GOOD_Y, num_inducing=4, device="cpu").device.type == "cpu"
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="does not exist"):
            deepgp.DeepGP.from_spec("GP", GOOD_X, GOOD_Y, num_inducing=4, device=f"cuda:{torch.cuda.device_count()}")
    else:  # torch itself would fail with an AssertionError from deep inside its CUDA module
        with pytest.raises(ValueError, match="CUDA is not available"):
            deepgp.DeepGP.from_spec("GP", GOOD_X, GOOD_Y, num_inducing=4, device="cuda")
