"""Test metrics: CRPS against closed forms, the Shapiro–Wilk median's contrast, one split's metrics."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from deepgp import metrics


def test_crps_of_a_point_mass_and_of_a_standard_normal():
    # CRPS of a point mass at the truth is 0; of N(0,1) draws at 0 it is (√2 − 1)/√π ≈ 0.234
    assert metrics.crps_from_samples(np.zeros((10, 1)), np.zeros(1))[0] == 0
    draws = np.random.default_rng(1).standard_normal((20000, 1))
    assert metrics.crps_from_samples(draws, np.zeros(1))[0] == pytest.approx(0.2337, abs=0.01)


def test_shapiro_median_separates_gaussian_from_bimodal():
    rng = np.random.default_rng(0)
    gauss = rng.standard_normal((500, 20))
    bimodal = gauss * 0.1 + rng.choice([-1, 1], (500, 20))
    assert metrics.shapiro_median(gauss) > 0.99
    assert metrics.shapiro_median(bimodal) < 0.9


def test_split_metrics_agree_with_the_models_own_estimators(fitted_gp):
    model, x, y = fitted_gp
    got = metrics.split_metrics(model, x, y, num_samples=200, shapiro_points=10, seed=3)
    # a single GP's predictive is Gaussian: every draw's mixture term is the same closed form
    exact = model.predictive_log_density(x, y, 200, "mixture", seed=3).mean()
    assert got["test_loglik_mixture"] == pytest.approx(exact, rel=1e-10)
    assert abs(got["test_loglik_kde"] - exact) < 0.2 and got["test_rmse"] > 0 and 0.9 < got["shapiro_median"] <= 1


finite = st.floats(-1e300, 1e300, allow_nan=False, allow_subnormal=False)


# no deadline: an example takes a millisecond, but a loaded host can pause one for longer than hypothesis's
# default 200 ms, which fails it as flaky
@settings(deadline=None)
@given(arrays(np.float64, st.integers(1, 50), elements=finite), st.integers(1, 1000))
def test_scaled_means_are_the_one_rows_value_repeated_and_never_overflow(a, copies):
    # n copies of one row: the one row's value (to rounding), however close to float64's largest it is
    assert metrics.root_mean_square(np.tile(a, copies)) == pytest.approx(metrics.root_mean_square(a), rel=1e-12)
    assert metrics.scaled_mean(np.tile(a, copies)) == pytest.approx(metrics.scaled_mean(a), rel=1e-9,
                                                                     abs=1e-12 * np.abs(a).max())
    assert math.isfinite(metrics.root_mean_square(a)) and math.isfinite(metrics.scaled_mean(a))
    if len(a) == 1:
        assert metrics.root_mean_square(a) == pytest.approx(abs(a[0]), rel=1e-12)


@settings(deadline=None)  # (as above)
@given(arrays(np.float64, st.integers(1, 50), elements=st.floats(-1e100, 1e100, allow_nan=False)))
def test_scaled_means_are_float64_math_at_ordinary_scales(a):
    # where no square or sum leaves float64, the plain formulas; the scaling costs a few roundings
    assert metrics.root_mean_square(a) == pytest.approx(np.sqrt(np.mean(a**2)), rel=1e-12, abs=1e-150)
    assert metrics.scaled_mean(a) == pytest.approx(np.mean(a), rel=1e-12, abs=1e-12 * np.abs(a).max())
    assert metrics.root_mean_square(np.zeros(3)) == 0 and metrics.scaled_mean(np.zeros(3)) == 0
