import math

import numpy as np
import pytest
import torch

import deepgp
from deepgp import prediction


def test_single_gp_predictive_is_the_analytic_gaussian(fitted_gp):
    model, x, y = fitted_gp
    with torch.no_grad():
        mean, var = model.final_layer.conditional(torch.from_numpy(x)[None])
        expected = model.likelihood.log_predictive(torch.from_numpy(y)[None], mean, var)[0].numpy()
    np.testing.assert_allclose(model.predictive_log_density(x, y, 50), expected, rtol=1e-10)
    # KDE on Gaussian samples: within Monte-Carlo error plus the small smoothing bias
    kde = model.predictive_log_density(x, y, 4000, estimator="kde", seed=0)
    assert abs(kde.mean() - expected.mean()) < 0.05
    draws = model.sample_predictive(x, 20000, seed=0)[..., 0]
    sd = (var + model.likelihood.variance()).sqrt()[0, :, 0].detach().numpy()
    np.testing.assert_allclose(draws.mean(0), mean[0, :, 0].numpy(), atol=4 * sd.max() / math.sqrt(20000))
    np.testing.assert_allclose(draws.std(0), sd, rtol=0.03)


def test_prediction_is_chunk_independent_and_seeded(monkeypatch):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((30, 2)), rng.standard_normal((30, 1))
    model = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=8)
    a = model.predictive_log_density(x, y, 64, seed=3)
    assert np.array_equal(a, model.predictive_log_density(x, y, 64, seed=3))
    monkeypatch.setattr(prediction, "_ROWS_PER_CHUNK", 64 * 7)  # 5 chunks of ≤ 7 points
    b = model.predictive_log_density(x, y, 64, seed=3)
    assert a.shape == b.shape == (30,)
    assert abs(a.mean() - b.mean()) < 0.2  # different draws, same estimator
    assert model.sample_predictive(x, 10, seed=1).shape == (10, 30, 1)


def test_the_kde_needs_two_draws(fitted_gp):
    model, x, y = fitted_gp
    with pytest.raises(ValueError, match="num_samples must be >= 2 for estimator='kde', got 1"):
        model.predictive_log_density(x, y, 1, estimator="kde")
    assert np.isfinite(model.predictive_log_density(x, y, 2, estimator="kde", seed=0)).all()


def test_the_kde_bandwidth_follows_silvermans_rule_in_the_output_dimension():
    from deepgp.prediction import kde_log_density, silverman_bandwidth

    draws = torch.randn(4000, 3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    sd = draws.std(0)
    # one output: the paper's 1.06 σ S^(-1/5); d outputs: σ (4 / ((d + 2) S))^(1/(d + 4))
    torch.testing.assert_close(silverman_bandwidth(draws[..., :1], 0), 1.06 * sd[:, :1] * 4000 ** -0.2)
    torch.testing.assert_close(silverman_bandwidth(draws, 0, 2), sd * (4 / (4 * 4000)) ** (1 / 6))
    assert abs((4 / 3) ** 0.2 - 1.06) < 0.001  # the 1-D constant is the d-dimensional rule's, rounded
    # a KDE of standard normal draws in 2-D approaches log N(y; 0, I) (the bandwidth is small)
    y = torch.zeros(3, 2, dtype=torch.float64)
    expected = -math.log(2 * math.pi)
    np.testing.assert_allclose(kde_log_density(y, draws).numpy(), expected, atol=0.1)


class PriorOnly(torch.nn.Module):
    """A model with only what ``deepgp.protocols.ConditionalDensityModel`` declares for prediction (the
    named ``propagate_prior``, a likelihood, a device): here a DeepGP's, so that the predictions must be the
    DeepGP's own."""

    def __init__(self, dgp):
        super().__init__()
        self.dgp, self.likelihood = dgp, dgp.likelihood

    @property
    def device(self):
        return self.dgp.device

    def propagate_prior(self, X, num_samples):
        return self.dgp.propagate_prior(X, num_samples)


def test_a_model_with_only_the_declared_propagate_prior_predicts_as_the_deepgp():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((20, 2)), rng.standard_normal((20, 1))
    model = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=8)
    X, Y = (torch.from_numpy(a) for a in (x, y))
    for fn, args in ((prediction.predictive_log_density, (X, Y, 200, "mixture", 1)),
                     (prediction.sample_predictive, (X, 200, 1))):
        assert np.array_equal(fn(PriorOnly(model), *args), fn(model, *args))
