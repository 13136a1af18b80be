"""benchmarks/estimator_spread.py: its per-point values are split_metrics' own, point by point."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from deepgp import DeepGP
from deepgp.metrics import split_metrics

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "estimator_spread.py"


@pytest.fixture(scope="module")
def spread():
    sys.path.insert(0, str(SCRIPT.parent))  # (it imports time_to_quality from beside it)
    try:
        spec = importlib.util.spec_from_file_location("estimator_spread", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


@pytest.mark.parametrize("spec", ["GP", "LV-GP-GP"])
def test_per_point_values_average_to_split_metrics(spread, spec, monkeypatch):
    from deepgp import prediction

    monkeypatch.setattr(prediction, "_ROWS_PER_CHUNK", 128 * 8)  # 8 points a block: several blocks, as on real data
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    Y = np.sin(X[:, :1]) + 0.1 * rng.normal(size=(40, 1))
    model = DeepGP.from_spec(spec, X, Y, num_inducing=6, seed=0)
    kde, mixture, z = spread.per_point(model, X[:25], Y[:25], 300, seed=3)
    whole = split_metrics(model, X[:25], Y[:25], 300, shapiro_points=3, seed=3)
    assert kde.shape == mixture.shape == z.shape == (25,)
    assert kde.mean() == pytest.approx(whole["test_loglik_kde"], abs=1e-12)
    assert mixture.mean() == pytest.approx(whole["test_loglik_mixture"], abs=1e-12)
    assert np.all(mixture - kde > -1.0)  # (two estimates of one density: no gross disagreement on smooth data)
    other = spread.per_point(model, X[:25], Y[:25], 300, seed=4)[0]
    assert not np.allclose(other, kde)  # the seed reaches the draws
