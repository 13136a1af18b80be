"""Test inputs far from the training data: every model's answer there is its prior, finite for any finite
input its dtype holds, and an input the dtype cannot hold is refused by name (the commands: test_outputs.py)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import deepgp
from conftest import far_magnitude
from deepgp import DeepGPRegressor
from deepgp.kernels import KERNELS
from deepgp.prediction import predictive_moments

SPECS = ("GP", "GP-GP", "LV-GP", "LV-GP-GP")
_MODELS: dict = {}


def model_of(spec: str, kernel: str, dtype: str, width: str = "input") -> deepgp.DeepGP:
    """A model on 40 points (built once) with a random q(v) in every layer, so that its mean is not 0."""
    key = (spec, kernel, dtype, width)
    if key not in _MODELS:
        rng = np.random.default_rng(0)
        x = rng.uniform(-2, 2, (40, 2))
        y = np.sin(x[:, :1]) + 0.1 * rng.standard_normal((40, 1))
        model = deepgp.DeepGP.from_spec(spec, x, y, num_inducing=6, kernel=kernel, dtype=dtype, inner_width=width)
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for layer in model.layers:
                if hasattr(layer, "q_mu"):
                    layer.q_mu.copy_(torch.randn(layer.q_mu.shape, generator=g, dtype=torch.float64))
                    layer.q_sqrt.mul_(0.5 + torch.rand(layer.q_sqrt.shape, generator=g, dtype=torch.float64))
        _MODELS[key] = model
    return _MODELS[key]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(SPECS), st.sampled_from(sorted(KERNELS)), st.sampled_from(["float64", "float32"]),
       st.sampled_from(["input", "hidden"]), st.floats(0, 1), st.sampled_from([-1.0, 1.0]), st.booleans())
def test_far_from_the_data_the_prediction_is_the_prior(spec, kernel, dtype, width, where, sign, both):
    # the final layer's moments at x far from the data (1e30 up to the dtype's largest number, in one input
    # or both) are its prior's: mean 0 and variance σ_f², exactly, whatever q(v) holds
    model = model_of(spec, kernel, dtype, width)
    top = torch.finfo(model.dtype).max
    far = sign * far_magnitude(where, top)
    X = torch.tensor([[far, far if both else 0.3], [0.3, -0.2]], dtype=model.dtype)
    mean, var = predictive_moments(model.eval(), X, 3)  # [S, 2, 1]
    assert torch.equal(mean[:, 0], torch.zeros_like(mean[:, 0]))
    assert torch.equal(var[:, 0], model.final_layer.kernel.variance().expand_as(var[:, 0]))
    assert torch.isfinite(mean).all() and torch.isfinite(var).all()
    density = model.predictive_log_density(X.double().numpy(), np.zeros((2, 1)), 4, seed=0)
    prior = float(model.final_layer.kernel.variance().detach() + model.likelihood.variance().detach())
    np.testing.assert_allclose(density[0], -0.5 * math.log(2 * math.pi * prior), rtol=1e-6)
    assert np.isfinite(model.sample_predictive(X.double().numpy(), 3, seed=0)).all()


def test_the_estimator_predicts_the_prior_far_away():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (50, 1))
    y = 1e6 + np.sin(2 * x[:, 0]) + 0.1 * rng.standard_normal(50)
    for kernel in sorted(KERNELS):
        reg = DeepGPRegressor("GP", kernel=kernel, num_inducing=6, iterations=5, predict_samples=20,
                              progress=False).fit(x, y)
        mean, std = reg.predict(np.array([[1e160], [-1e300], [1.7e308]]), return_std=True)
        layer, noise = reg.model_.final_layer, reg.model_.likelihood.variance()
        prior_std = math.sqrt(float(layer.kernel.variance().detach() + noise.detach())) * reg.y_scaler_.std[0]
        # exactly the prior's moments, up to the rounding of a mean over 20 equal draws (20 ε)
        np.testing.assert_allclose(mean, reg.y_scaler_.mean[0], rtol=20 * np.finfo(float).eps)
        np.testing.assert_allclose(std, prior_std, rtol=20 * np.finfo(float).eps)


def test_inputs_a_float32_model_cannot_hold_are_refused_by_name():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (30, 1))
    model = deepgp.DeepGP.from_spec("GP", x, np.sin(x), num_inducing=5, dtype="float32")
    for call in (lambda X: model.sample_predictive(X, 3), lambda X: model.predictive_log_density(X, np.zeros((2, 1)))):
        with pytest.raises(ValueError, match=r"X has values beyond the range of float32 \(±3.4e\+38; first at row, "
                                             r"column \[\[1, 0\]\]\); use float64"):
            call(np.array([[0.5], [1e39]]))
    with pytest.raises(ValueError, match=r"Y has values beyond the range of float32"):
        model.predictive_log_density(np.zeros((2, 1)), np.array([[0.0], [-1e39]]))
    reg = DeepGPRegressor("GP", num_inducing=5, iterations=2, dtype="float32", progress=False).fit(x, x[:, 0])
    for call in (reg.predict, lambda X: reg.sample(X, 2), lambda X: reg.score(X, np.zeros(2))):
        with pytest.raises(ValueError, match=r"X has values beyond the range of float32"):
            call(np.array([[0.5], [1e39]]))
