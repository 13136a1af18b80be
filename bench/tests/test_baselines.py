"""Baselines: Linear's bounds and estimators against its closed form, the CVAE's bounds, the SGHMC
sampler's stationary distribution, the SGHMC deep GP's posterior, the runner's rows, bad input."""

import numpy as np
import pytest
import scipy.stats
import torch

from deepgp import DeepGP
from deepgp.config import ModelConfig, TrainConfig
from deepgp.datasets.uci import write_uci
from deepgp.protocols import ConditionalDensityModel, Predictive
from deepgp_bench import runner
from deepgp_bench.baselines import check_pair, fit, hidden_widths, network_name
from deepgp_bench.baselines.cvae import CVAE, fit_cvae
from deepgp_bench.baselines.linear import Linear
from deepgp_bench.baselines.sghmc import SGHMC, SGHMCDeepGP, fit_sghmc
from deepgp_bench.config import SGHMCConfig
from deepgp_bench.estimator import BaselineRegressor

# the linear-Gaussian model y = a z + b·x + c + ε, z ~ N(0, 1), ε ~ N(0, σ²)
A, B, C, NOISE = 0.8, np.array([1.0, -0.5]), 0.3, 0.2


def linear_data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    Y = (X @ B + C + A * rng.normal(size=n) + np.sqrt(NOISE) * rng.normal(size=n))[:, None]
    return X, Y


def exact_linear(X, Y):
    """log p(y | x) = log N(y; b·x + c, a² + σ²): the closed form, written apart from the code."""
    return scipy.stats.norm.logpdf(Y[:, 0], X @ B + C, np.sqrt(A**2 + NOISE))


def linear_at_truth(posterior: bool = True) -> Linear:
    """A Linear model with the generating parameters; ``posterior``: its encoder is the exact p(z | x, y)."""
    model = Linear(2, 1, num_data=40)
    with torch.no_grad():
        model.decoder[0].weight.copy_(torch.tensor([[A, *B]]))
        model.decoder[0].bias.fill_(C)
        model.likelihood.variance.assign(NOISE)
        if posterior:  # z | x, y ~ N(k (y − b·x − c), 1 / prec): prec = 1 + a²/σ², k = a / (σ² prec)
            prec = 1 + A**2 / NOISE
            k = A / (NOISE * prec)
            enc = model.encoder[0]  # [x, y] → (mean, log-variance)
            enc.weight.copy_(torch.tensor([[-k * B[0], -k * B[1], k], [0.0, 0.0, 0.0]]))
            enc.bias.copy_(torch.tensor([-k * C, -np.log(prec)]))
    return model


def test_linear_bounds_equal_the_exact_marginal_likelihood_at_the_exact_posterior():
    X, Y = linear_data()
    model = linear_at_truth()
    exact = exact_linear(X, Y).sum()
    assert np.allclose(model.exact_log_density(X, Y).detach().numpy(), exact_linear(X, Y), atol=1e-10)
    torch.manual_seed(0)
    # every importance weight is p(y | x): the IW bound is exact for every draw and every K
    for K in (1, 7):
        assert model.elbo(X, Y, "iw", K).item() == pytest.approx(exact, abs=1e-9)
    # VI: E_q[log p(y | z)] − KL is exact in expectation (the K samples average the first term)
    vi = np.mean([model.elbo(X, Y, "vi", 2000).item() for _ in range(5)])
    assert vi == pytest.approx(exact, abs=0.05)


def test_linear_bounds_are_below_the_marginal_likelihood_and_iw_tightens_with_k():
    X, Y = linear_data()
    model = linear_at_truth(posterior=False)  # a Glorot encoder: a poor q
    exact = exact_linear(X, Y).sum()
    torch.manual_seed(0)
    vi = np.mean([model.elbo(X, Y, "vi", 1).item() for _ in range(400)])
    iw = [np.mean([model.elbo(X, Y, "iw", K).item() for _ in range(100)]) for K in (1, 10, 100)]
    assert vi < exact and iw[0] < iw[1] < iw[2] < exact
    assert exact - iw[2] < exact - vi


def test_linear_estimators_agree_with_the_closed_form_and_its_draws_are_gaussian():
    X, Y = linear_data(n=30)
    model = linear_at_truth()
    exact = exact_linear(X, Y)
    assert np.allclose(model.predictive_log_density(X, Y), exact, atol=1e-10)  # the default: exact
    mixture = model.predictive_log_density(X, Y, 4000, "mixture", seed=0)
    kde = model.predictive_log_density(X, Y, 4000, "kde", seed=0)
    assert abs(mixture.mean() - exact.mean()) < 0.02 and abs(kde.mean() - exact.mean()) < 0.05
    draws = model.sample_predictive(X, 4000, seed=1)  # [S, N, 1]
    assert draws.shape == (4000, 30, 1)
    assert np.allclose(draws.mean(0)[:, 0], X @ B + C, atol=0.1)
    assert np.allclose(draws.var(0)[:, 0], A**2 + NOISE, rtol=0.1)


def test_training_linear_reaches_its_maximum_likelihood():
    X, Y = linear_data(n=400, seed=1)
    model = Linear(2, 1, num_data=400)
    fit_cvae(model, X, Y, iterations=3000, batch_size=400, lr=0.02)
    # the least-squares fit with its residual variance is the maximum of the exact likelihood
    design = np.column_stack([X, np.ones(len(X))])
    coef, *_ = np.linalg.lstsq(design, Y[:, 0], rcond=None)
    resid = Y[:, 0] - design @ coef
    best = scipy.stats.norm.logpdf(resid, 0, resid.std()).mean()
    assert model.exact_log_density(X, Y).mean().item() == pytest.approx(best, abs=5e-3)


def test_cvae_iw_bound_is_above_vi_and_below_the_mixture_estimate():
    X, Y = linear_data(n=50)
    torch.manual_seed(0)
    model = CVAE(2, 1, (20, 20), num_data=50)
    fit_cvae(model, X, Y, "iw", 5, iterations=300, batch_size=50)
    vi = np.mean([model.elbo(X, Y, "vi").item() for _ in range(200)])
    iw = np.mean([model.elbo(X, Y, "iw", 50).item() for _ in range(20)])
    logp = model.predictive_log_density(X, Y, 20000, "mixture", seed=0).sum()
    assert vi < iw < logp + 0.5  # (the mixture estimate of log p is itself a little low)


def test_sghmc_samples_a_gaussian_target():
    """Exact gradients of U(θ) = ½ θᵀ Σ⁻¹ θ: 4000 chains' states after burn-in have mean 0 and covariance Σ."""
    torch.manual_seed(0)
    cov = torch.tensor([[4.0, 2.4], [2.4, 2.0]], dtype=torch.float64)
    precision = torch.linalg.inv(cov)
    theta = torch.randn(4000, 2, dtype=torch.float64)
    sampler = SGHMC([theta], step=0.05, mdecay=0.05)
    draws = []
    for t in range(2500):
        theta.grad = theta @ precision
        sampler.step(adapt=t < 1000)
        if t >= 1500 and t % 50 == 0:
            draws.append(theta.clone())
    draws = torch.cat(draws)  # 80,000 states, correlated within a chain over ~20 steps (1/mdecay): nearly independent
    assert draws.mean(0).abs().max() < 0.05
    assert torch.allclose(torch.cov(draws.T), cov, rtol=0.04, atol=0.04)
    # a sampler that ignored the noise term would collapse to the mode: the spread is the target's
    assert draws.std(0).min() > 1.3


@pytest.mark.slow
def test_sghmc_gp_samples_the_exact_posterior_of_its_inducing_outputs():
    """One GP layer, full batch, hyperparameters held (lr tiny): p(v | y) is Gaussian,
    N(Σ A Λ⁻¹ y, Σ) with Σ = (I + A Λ⁻¹ Aᵀ)⁻¹, A = Lz⁻¹K(Z, X), Λ = diag(k − ‖a‖² + σ²)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (30, 1))
    Y = np.sin(2 * X) + 0.3 * rng.normal(size=(30, 1))
    model = SGHMCDeepGP(DeepGP.from_spec("GP", X, Y, num_inducing=4, likelihood_variance=0.1))
    fit_sghmc(model, X, Y, iterations=1000, samples=2000, thinning=8, batch_size=30, lr=1e-12, step=0.05)
    layer = model.dgp.layers[0]
    with torch.no_grad():
        At, Q = layer.prior_conditional(torch.as_tensor(X).unsqueeze(0), full_cov=False)
        Aw, lam = At[0].numpy().T, Q[0].numpy() + model.likelihood.variance().item()
    Sigma = np.linalg.inv(np.eye(4) + (Aw / lam) @ Aw.T)
    mean = Sigma @ (Aw / lam) @ Y[:, 0]
    V = model.samples[0][:, :, 0].numpy()  # [2000, M]
    sd = np.sqrt(np.diag(Sigma))
    assert np.all(np.abs(V.mean(0) - mean) < 0.25 * sd)
    assert np.allclose(V.std(0), sd, rtol=0.2)


def test_sghmc_deep_gp_predicts_through_its_samples():
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, (60, 1))
    Y = np.sin(2 * X) + 0.1 * rng.normal(size=(60, 1))
    model, history = fit("GP-GP", "sghmc", X, Y, ModelConfig(num_inducing=10), TrainConfig(iterations=50),
                         SGHMCConfig(sghmc_samples=20, sghmc_thinning=2))
    assert len(history) == 50 + 40 and model.samples[0].shape == (20, 10, 5) and model.samples[1].shape == (20, 10, 1)
    draws = model.sample_predictive(X[:5], 30, seed=0)
    assert draws.shape == (30, 5, 1) and np.isfinite(draws).all()
    assert np.array_equal(draws, model.sample_predictive(X[:5], 30, seed=0))
    assert np.isfinite(model.predictive_log_density(X, Y, 50, "kde", seed=0)).all()


def test_names_and_bad_input_are_refused_in_one_line():
    assert network_name("cvae-100-100") == "CVAE-100-100" and network_name("linear") == "Linear"
    assert network_name("LV-GP") is None and hidden_widths("CVAE-50-50") == (50, 50) and hidden_widths("Linear") == ()
    assert check_pair("GP-GP", "sghmc") == ("GP-GP", "sghmc") and check_pair("LV-GP", "iw") is None
    for model, method, match in (("CVAE", "vi", "hidden widths"), ("CVAE-0", "vi", "hidden widths"),
                                 ("CVAE-50", "sghmc", "trained by"), ("Linear", "sghmc", "trained by"),
                                 ("LV-GP", "sghmc", "GP-only"), ("GP-XX", "sghmc", "unknown token")):
        with pytest.raises(ValueError, match=match):
            check_pair(model, method)
    with pytest.raises(ValueError, match="sghmc_mdecay"):
        SGHMCConfig(sghmc_mdecay=1.0)
    with pytest.raises(ValueError, match="sghmc_samples"):
        SGHMCConfig(sghmc_samples=0)
    model = CVAE(2, 1, (5,))
    with pytest.raises(ValueError, match="3 columns|dimension|2"):
        model.sample_predictive(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="method"):
        model.elbo(np.zeros((4, 2)), np.zeros((4, 1)), "sghmc")
    with pytest.raises(ValueError, match="NaN|finite"):
        model.elbo(np.full((4, 2), np.nan), np.zeros((4, 1)))
    with pytest.raises(ValueError, match="fit it first"):
        SGHMCDeepGP(DeepGP.from_spec("GP", np.zeros((5, 1)) + np.arange(5)[:, None], np.zeros((5, 1)),
                                     num_inducing=3)).sample_predictive(np.zeros((2, 1)))
    with pytest.raises(ValueError, match="GP-only"):
        SGHMCDeepGP(DeepGP.from_spec("LV-GP", np.arange(5.0)[:, None], np.zeros((5, 1)), num_inducing=3))


@pytest.mark.parametrize("model, method", [("Linear", "vi"), ("CVAE-20", "iw"), ("GP", "sghmc")])
def test_every_baseline_is_a_conditional_density_model(model, method):
    """What prediction, the metrics and the estimator ask of a model (deepgp.protocols), as DeepGP is."""
    X, Y = linear_data()
    net, _ = fit(model, method, X, Y, ModelConfig(num_inducing=5), TrainConfig(iterations=2),
                 SGHMCConfig(sghmc_samples=2, sghmc_thinning=1))
    assert isinstance(net, ConditionalDensityModel)
    moments = net.propagate_prior(torch.as_tensor(X[:3], dtype=net.dtype), 4)  # named, as DeepGP's
    assert isinstance(moments, Predictive) and moments.mean.shape == moments.var.shape == (4, 3, Y.shape[1])
    assert isinstance(DeepGP.from_spec("GP", X, Y, num_inducing=5), ConditionalDensityModel)
    assert not isinstance(torch.nn.Linear(2, 1), ConditionalDensityModel)


FAST = dict(num_inducing=8, test_limit=20, predict_samples=50, shapiro_points=10, sghmc_samples=5, sghmc_thinning=2)


def test_the_runner_takes_baselines_and_resumes_their_rows(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    write_uci(tmp_path / "toy.csv.gz", np.column_stack([X, np.sin(X.sum(1)) + 0.1 * rng.normal(size=80)]))
    pairs = runner.model_methods(["linear", "CVAE-20-20", "GP-GP:sghmc", "GP", "LV-GP"], ["vi", "iw", "sghmc"])
    assert pairs == [("Linear", "vi"), ("Linear", "iw"), ("CVAE-20-20", "vi"), ("CVAE-20-20", "iw"),
                     ("GP-GP", "sghmc"), ("GP", "vi"), ("GP", "sghmc"), ("LV-GP", "vi"), ("LV-GP", "iw")]
    for bad in (["CVAE-50:sghmc"], ["LV-GP:sghmc"], ["GP:hmc"]):
        with pytest.raises(ValueError):
            runner.model_methods(bad, ["vi"])
    todo = runner.make_configs(["toy"], [("Linear", "vi"), ("CVAE-20", "iw"), ("GP", "sghmc")], [0], iterations=4,
                               data_dir=str(tmp_path), **FAST)
    assert [(c["num_samples"], c["inner_sampling"]) for c in todo] == [(1, "-"), (5, "-"), (1, "-")]
    results = tmp_path / "r.csv"
    assert runner.run_benchmark(todo, results, log=lambda m: None) == 0
    rows = runner.read_results(results)
    assert [(r["model"], r["method"], r["sghmc_samples"]) for r in rows] == [  # (the networks do not read it)
        ("Linear", "vi", 2000), ("CVAE-20", "iw", 2000), ("GP", "sghmc", 5)]
    assert all(np.isfinite(r["test_loglik_kde"]) and r["iterations"] == 4 for r in rows)
    calls = []
    assert runner.run_benchmark(todo, results, run=calls.append, log=lambda m: None) == 0 and not calls
    with pytest.raises(ValueError, match="sghmc_step"):
        runner.make_configs(["toy"], [("GP", "sghmc")], [0], iterations=4, sghmc_step=-1.0)


@pytest.mark.parametrize("model, method", [("CVAE-20", "iw"), ("Linear", "vi"), ("GP", "sghmc")])
def test_the_estimator_fits_a_baseline(model, method):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (100, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(100)
    reg = BaselineRegressor(model, method=method, iterations=30, num_inducing=10, sghmc_samples=10, predict_samples=50,
                          progress=False).fit(X, y)
    assert np.isfinite(reg.score(X, y)) and reg.predict(X[:4]).shape == (4,) and reg.sample(X[:3], 7).shape == (7, 3)
    with pytest.raises(ValueError, match="not supported"):
        reg.save("unused.safetensors")


def test_the_estimator_refuses_a_baseline_with_a_wrong_method():
    with pytest.raises(ValueError, match="trained by one of"):
        BaselineRegressor("CVAE-50", method="sghmc").fit(np.arange(10.0)[:, None], np.arange(10.0))


def test_the_baseline_estimator_fits_a_deep_gp_as_the_librarys_does():
    from sklearn.base import clone

    from deepgp import DeepGPRegressor

    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (60, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(60)
    settings = dict(iterations=20, num_inducing=8, predict_samples=20, progress=False)
    ours, theirs = BaselineRegressor("LV-GP", **settings).fit(X, y), DeepGPRegressor("LV-GP", **settings).fit(X, y)
    assert np.array_equal(ours.history_, theirs.history_) and np.array_equal(ours.predict(X), theirs.predict(X))
    assert "sghmc_samples" in ours.get_params() and "sghmc_samples" not in theirs.get_params()
    assert clone(ours).get_params() == ours.get_params() and "sghmc_window = 100" in BaselineRegressor.__doc__
