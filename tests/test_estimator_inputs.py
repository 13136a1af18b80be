"""DeepGPRegressor checks what it is given: a DataFrame's columns by name, y against the fitted outputs,
and data at any scale that float64 holds (standardised by their real spread, or refused by name)."""

import csv
import math
import re
import warnings

import numpy as np
import pytest

from deepgp import DeepGPRegressor
from deepgp.cli import main
from deepgp.preprocessing import LARGEST, Standardizer

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EPS = np.finfo(np.float64).eps
TINY = np.finfo(np.float64).tiny


def tiny(**kw):
    return DeepGPRegressor(**{**dict(model="GP", method="vi", iterations=3, num_inducing=8, predict_samples=20,
                                     progress=False), **kw})


def data(n=30, outputs=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.5, 2.0, (n, 2)) * rng.choice([-1.0, 1.0], (n, 2))  # |x| ≥ 0.5: c·X stays normal longer
    y = np.sin(X[:, :1]) + 0.1 * rng.standard_normal((n, outputs))
    return X, (y[:, 0] if outputs == 1 else y)


# -- a DataFrame's columns --------------------------------------------------------------------------
def test_a_model_written_by_deepgp_fit_takes_dataframe_columns_by_name(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = data(40)
    with open(tmp_path / "train.csv", "w", newline="") as f:
        csv.writer(f).writerows([["a", "b", "y"], *([repr(float(v)) for v in row] for row in np.c_[X, y])])
    model = tmp_path / "m.safetensors"
    assert main(["fit", str(tmp_path / "train.csv"), "--target", "y", "--model", "GP", "--method", "vi",
                 "--iterations", "3", "--num-inducing", "8", "--predict-samples", "20", "--out", str(model),
                 "--no-progress"]) == 0
    reg = DeepGPRegressor.load(model)
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fitted columns in order: used as they are, without a warning
        np.testing.assert_array_equal(reg.predict(frame), reg.predict(X))
    for bad, said in [(frame[["b", "a"]], r"X has the fitted inputs in another order \['b', 'a'\]"),
                      (frame.assign(c=1.0), r"X has unexpected column\(s\) \['c'\]"),
                      (frame[["a"]], r"X lacks the fitted input\(s\) \['b'\]")]:
        for method in (reg.predict, lambda Z: reg.predict_quantiles(Z, 0.5), lambda Z: reg.score(Z, y),
                       lambda Z: reg.sample(Z, 2)):
            with pytest.raises(ValueError, match=said) as err:
                method(bad)
            assert "\n" not in str(err.value) and "pass X[['a', 'b']]" in str(err.value)


# -- y against the fitted outputs -----------------------------------------------------------------
def test_y_is_checked_against_the_fitted_outputs():
    X, Y = data(30, outputs=2)
    two = tiny().fit(X, Y)
    for bad in (Y[:, 0], Y[:, :1], np.c_[Y, Y[:, :1]], Y[:, :, None]):
        for method in (two.score, two.log_density):
            with pytest.raises(ValueError, match=rf"y has shape {re.escape(str(bad.shape))} but the estimator was "
                                                 r"fitted on 2 output\(s\): give y as \[30, 2\]"):
                method(X, bad)
    with pytest.raises(ValueError, match="y contains NaN"):
        two.score(X, np.where(np.eye(30, 2) > 0, np.nan, Y))
    one = tiny().fit(X, Y[:, 0])  # one output: y as [n] or [n, 1] alike
    assert one.score(X, Y[:, 0]) == one.score(X, Y[:, :1])
    with pytest.raises(ValueError, match=r"y has shape \(30, 2\) but the estimator was fitted on 1 output"):
        one.score(X, Y)


def test_evaluate_checks_y_too():
    from deepgp.metrics import regressor_metrics

    X, Y = data(30, outputs=2)
    with pytest.raises(ValueError, match=r"y has shape \(30,\)"):
        regressor_metrics(tiny().fit(X, Y), X, Y[:, 0])


# -- data at any scale ------------------------------------------------------------------------------
def test_tiny_scales_are_standardised_by_their_real_spread():
    X, y = data(30)
    base = tiny().fit(X, y)
    mean, std = base.predict(X, return_std=True)
    small_x = tiny().fit(X * 1e-170, y)
    assert small_x.x_scaler_.std == pytest.approx(1e-170 * base.x_scaler_.std, rel=8 * EPS)
    # the standardised inputs agree to a few roundings (c·x, the mean, the difference, the division), which
    # three training steps of a model whose K(Z, Z) has a condition number below ~1e8 (jitter 1e-6) carry
    # to ~1e-16 · 1e8 at most
    np.testing.assert_allclose(small_x.predict(X * 1e-170), mean, rtol=1e-6, atol=1e-6 * np.abs(mean).max())
    small_y = tiny().fit(X, y * 1e-170)
    m, s = small_y.predict(X, return_std=True)
    np.testing.assert_allclose(m, 1e-170 * mean, rtol=1e-6, atol=1e-176 * np.abs(mean).max())
    np.testing.assert_allclose(s, 1e-170 * std, rtol=1e-6)


def test_deepgp_fit_standardises_tiny_inputs_by_their_spread(tmp_path, capsys):
    X, y = data(30)
    with open(tmp_path / "train.csv", "w", newline="") as f:
        csv.writer(f).writerows([["a", "b", "y"], *([repr(float(v)) for v in row] for row in np.c_[X * 1e-170, y])])
    model = tmp_path / "m.safetensors"
    assert main(["fit", str(tmp_path / "train.csv"), "--target", "y", "--model", "GP", "--method", "vi",
                 "--iterations", "3", "--num-inducing", "8", "--out", str(model), "--no-progress"]) == 0
    reg = DeepGPRegressor.load(model)
    assert reg.x_scaler_.std == pytest.approx(1e-170 * X.std(0), rel=8 * EPS)
    assert np.ptp(reg.predict(X * 1e-170)) > 0.1  # not the constant prediction of inputs squashed to zero


def test_scales_float64_cannot_carry_are_refused_by_name():
    X, y = data(30)
    for Xb, yb, said in [(X * 1e-310, y, r"X has a spread of .* in column 0 .*below the 2.23e-308 that float64"),
                         (X, y * 1e-310, r"y has a spread of .* in column 0"),
                         (X * 3e307, y, r"X has a value .* in column 0, beyond the 4.49e\+307"),
                         (X, np.where(np.arange(30) == 3, 1e308, y), r"y has a value 1e\+308 in column 0")]:
        with pytest.raises(ValueError, match=said) as err:
            tiny().fit(Xb, yb)
        assert "\n" not in str(err.value)
    constant = np.c_[X[:, :1], np.full(30, 1e-300)]  # constant at any scale: std 1, the column all zeros
    assert tiny().fit(constant, y).x_scaler_.std[1] == 1.0


finite_scale = st.floats(min_value=5e-324, max_value=1e308, allow_subnormal=True)


@settings(max_examples=200, deadline=None)
@given(finite_scale)
def test_standardisation_is_equivariant_over_the_float_range(c):
    """Standardizer.fit(c·A): std = c·std(A) and the same standardised values, to the roundings of c·a
    (half an ulp, or 2^-1075 absolute where c·a is subnormal) and of the statistics; refused by name where
    the spread is subnormal or the values too large."""
    A = data(30)[0]
    ref = Standardizer.fit(A)
    with np.errstate(over="ignore"):
        cA = c * A
    assume(np.isfinite(cA).all())  # (an infinite value is refused before: validation.as_matrix)
    try:
        s = Standardizer.fit(cA, "X")
    except ValueError as err:
        spread = c * A.std(0)
        assert "X has" in str(err) and (spread.min() < 2 * TINY or np.abs(cA).max() > LARGEST / 2), str(err)
        return
    assert np.all(s.std >= TINY)
    # absolute error of c·a, relative to the spread c·std: half an ulp, plus the subnormal quantum
    lost = 0.5 * EPS + 2.0**-1075 / s.std.min()
    np.testing.assert_allclose(s.std, c * ref.std, rtol=16 * EPS + 2 * lost)
    np.testing.assert_allclose(s.transform(cA), ref.transform(A), rtol=0, atol=64 * EPS + 8 * lost)


_cache = {}


def fitted(outputs: int) -> tuple:
    """A two-output and a one-output estimator on the same data, fitted once."""
    if outputs not in _cache:
        X, Y = data(30, outputs=outputs)
        _cache[outputs] = X, Y, tiny().fit(X, Y)
    return _cache[outputs]


@settings(max_examples=20, deadline=None)
@given(st.integers(-1000, 1000), st.integers(-1000, 1000), st.sampled_from([1, 2]))
def test_scores_move_by_minus_log_c_under_y_to_c_y_and_not_under_x_to_c_x(kx, ky, outputs):
    """With c = 2^k the scaled data are exact, so the standardised data and hence the model and its draws
    are the same to the bit: log densities do not move under X → cX, and move by −Σ_d log c_d per point under
    y → c·y (c_d per output dimension), to the rounding of the log-Jacobians Σ_d log(c_d std_d)."""
    X, Y, ref = fitted(outputs)
    cx = 2.0**kx
    cy = 2.0 ** np.array([ky, -ky // 2][:outputs])
    assume(np.abs(X * cx).min() >= TINY and np.abs(Y * cy).min() >= TINY and np.abs(Y * cy).max() < LARGEST)
    assume(np.abs(X * cx).max() < LARGEST)
    on_x = tiny().fit(X * cx, Y)
    np.testing.assert_array_equal(on_x.log_density(X * cx, Y), ref.log_density(X, Y))
    on_y = tiny().fit(X, Y * cy)
    lp, lp_ref = on_y.log_density(X, Y * cy), ref.log_density(X, Y)
    shift = -np.log(cy).sum()
    # each side is logp_standardised − J, J a sum of logs: rounding ≤ a few ulps of the largest magnitude
    tol = 8 * EPS * (np.abs(lp).max() + np.abs(lp_ref).max() + np.abs(np.log(on_y.y_scaler_.std)).sum())
    np.testing.assert_allclose(lp - lp_ref, shift, rtol=0, atol=tol)
    assert on_y.score(X, Y * cy) - ref.score(X, Y) == pytest.approx(shift, abs=tol)
    assert outputs == 1 or math.isfinite(shift)

