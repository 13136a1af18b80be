import math

import numpy as np
import pytest
import torch

import deepgp
from deepgp.config import INNER_SAMPLING, TrainConfig
from deepgp.linalg import CholeskyError, cholesky, seeded
from deepgp.natgrad import natgrad_step_q
from deepgp.reference import expectation_parameters, natgrad_step


def gp_model(seed=0, n=40):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, 2))
    y = np.sin(x[:, :1] * 2) + 0.3 * x[:, 1:] + 0.1 * rng.standard_normal((n, 1))
    model = deepgp.DeepGP.from_spec("GP", x, y, num_inducing=10, seed=seed)
    with torch.no_grad():
        model.likelihood.variance.assign(torch.tensor([0.05]))
    return model, torch.from_numpy(x), torch.from_numpy(y)


def titsias_bound(model, X, Y):
    """log N(y | 0, Qnn + σ²I) − tr(Knn − Qnn)/(2σ²), with the layer's own jittered K(Z, Z)."""
    layer = model.final_layer
    k = layer.kernel
    Lz = cholesky(k.K(layer.Z, layer.Z), layer.jitter)
    A = torch.linalg.solve_triangular(Lz, k.K(layer.Z, X), upper=False)
    s2 = model.likelihood.variance()[0]
    cov = A.T @ A + s2 * torch.eye(X.shape[0], dtype=X.dtype)
    logml = torch.distributions.MultivariateNormal(torch.zeros(X.shape[0], dtype=X.dtype), cov).log_prob(Y[:, 0])
    return logml - (k.K_diag(X) - A.square().sum(0)).sum() / (2 * s2), A, s2


def test_vi_bound_at_optimal_q_equals_collapsed_titsias_bound():
    model, X, Y = gp_model()
    expected, A, s2 = titsias_bound(model, X, Y)
    M = A.shape[0]
    with torch.no_grad():
        S = torch.linalg.inv(torch.eye(M, dtype=X.dtype) + A @ A.T / s2)
        model.final_layer.q_mu.copy_(S @ A @ Y / s2)
        model.final_layer.q_sqrt.copy_(torch.linalg.cholesky(S)[None])
        bound = model.elbo(X, Y, method="vi")
    assert float(bound) == pytest.approx(float(expected), rel=1e-6)


def test_one_natural_gradient_step_with_unit_step_reaches_the_optimum():
    model, X, Y = gp_model(seed=1)
    expected, _, _ = titsias_bound(model, X, Y)
    layer = model.final_layer
    with torch.no_grad():
        layer.q_mu.copy_(torch.randn_like(layer.q_mu))
        R = torch.tril(torch.randn_like(layer.q_sqrt)) * 0.2
        R.diagonal(dim1=-2, dim2=-1).copy_(0.3 + torch.rand(layer.num_gps, layer.num_inducing))
        layer.q_sqrt.copy_(R)
        assert float(model.elbo(X, Y)) < float(expected) - 1.0
    with expectation_parameters(layer) as (eta1, eta2):
        model.elbo(X, Y, method="vi").backward()
    assert natgrad_step(layer, eta1.grad, eta2.grad, gamma=1.0) == 1.0
    with torch.no_grad():
        assert float(model.elbo(X, Y)) == pytest.approx(float(expected), rel=1e-6)


@pytest.mark.parametrize("spec", ["GP", "GP-GP"])
def test_natgrad_step_from_q_gradients_equals_the_step_from_autograd_through_eta(spec):
    # training takes the step from ∂F/∂(m, R) by the chain rule; the definition differentiates
    # through η leaves. Two outputs (L = 2 GPs in the final layer) and a negative diagonal entry in
    # R: the bound depends on R only through RRᵀ, and the chain rule must hold for any triangular
    # square root.
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, (30, 2))
    y = np.column_stack([np.sin(2 * x[:, 0]), np.cos(x[:, 1])]) + 0.1 * rng.standard_normal((30, 2))
    model = deepgp.DeepGP.from_spec(spec, x, y, num_inducing=8, seed=0)
    layer = model.final_layer
    with torch.no_grad(), seeded(1):
        layer.q_mu.copy_(torch.randn_like(layer.q_mu))
        R = torch.tril(torch.randn_like(layer.q_sqrt)) * 0.3
        R.diagonal(dim1=-2, dim2=-1).copy_(0.5 + torch.rand(2, 8))
        R[1, 3, 3] *= -1.0
        layer.q_sqrt.copy_(R)
    start = [p.detach().clone() for p in (layer.q_mu, layer.q_sqrt)]
    X, Y = torch.from_numpy(x), torch.from_numpy(y)
    with seeded(0), expectation_parameters(layer) as (eta1, eta2):
        model.elbo(X, Y).backward()
    assert natgrad_step(layer, eta1.grad, eta2.grad, gamma=0.3) == 0.3
    by_eta = [p.detach().clone() for p in (layer.q_mu, layer.q_sqrt)]
    with torch.no_grad():
        layer.q_mu.copy_(start[0])
        layer.q_sqrt.copy_(start[1])
    with seeded(0):
        model.elbo(X, Y).backward()
    assert natgrad_step_q(layer, layer.q_mu.grad, layer.q_sqrt.grad, gamma=0.3) == 0.3
    assert not torch.equal(layer.q_mu, start[0])
    torch.testing.assert_close(layer.q_mu, by_eta[0], rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(layer.q_sqrt, by_eta[1], rtol=1e-9, atol=1e-9)


def test_natgrad_step_refuses_a_singular_q_factor():
    model, _, _ = gp_model()
    layer = model.final_layer
    with torch.no_grad():
        layer.q_sqrt[0, 2, 2] = 0.0
    g_m, g_R = torch.ones_like(layer.q_mu), torch.ones_like(layer.q_sqrt)
    with pytest.raises(CholeskyError, match="q\\(v\\) covariance of the final GP layer is singular"):
        natgrad_step_q(layer, g_m, g_R, gamma=0.1)


def replicate(model, x, y, method, K, reps, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        vals = np.array([float(model.elbo(x, y, method=method, num_samples=K)) for _ in range(reps)])
    return vals.mean(), vals.std(ddof=1) / math.sqrt(reps)


@pytest.mark.slow  # (trains the shared fitted_lv model)
def test_iw_with_one_sample_equals_vi_in_expectation(fitted_lv, bimodal_data):
    model, _ = fitted_lv
    (x, y), _ = bimodal_data
    m_vi, se_vi = replicate(model, x, y, "vi", 1, 300, 0)
    m_iw, se_iw = replicate(model, x, y, "iw", 1, 300, 1)
    print(f"VI {m_vi:.2f} ({se_vi:.2f}), IW K=1 {m_iw:.2f} ({se_iw:.2f})")
    assert abs(m_vi - m_iw) < 4 * math.hypot(se_vi, se_iw), (m_vi, se_vi, m_iw, se_iw)


@pytest.mark.slow  # (trains the shared fitted_lv model)
def test_iw_bound_grows_with_the_number_of_samples(fitted_lv, bimodal_data):
    model, _ = fitted_lv
    (x, y), _ = bimodal_data
    stats = {K: replicate(model, x, y, "iw", K, 150, K) for K in (1, 5, 20)}
    for small, large in [(1, 5), (5, 20)]:
        gain = stats[large][0] - stats[small][0]
        se = math.hypot(stats[large][1], stats[small][1])
        assert gain > se, (stats, small, large)
    print("IW bound mean (s.e.) by K:", {K: (round(m, 2), round(s, 2)) for K, (m, s) in stats.items()})


def test_iw_without_latent_layers_is_the_doubly_stochastic_bound():
    model, X, Y = gp_model()
    with torch.no_grad():
        torch.testing.assert_close(model.elbo(X, Y, "iw", 5), model.elbo(X, Y, "vi", 5))


@pytest.mark.parametrize("inner_sampling", ["joint", "independent", "batch"])
def test_iw_gradcheck(inner_sampling):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 1)), rng.standard_normal((4, 1))
    model = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=3, hidden_dim=2, inner_q_sqrt=0.5, seed=0)
    X, Y = torch.from_numpy(x), torch.from_numpy(y)
    names = ["layers.1.Z", "layers.1.q_mu", "layers.1.q_sqrt", "layers.0.encoder.linears.0.weight",
             "layers.2.kernel.lengthscale.psi", "likelihood.variance.psi"]
    params = dict(model.named_parameters())
    inputs = tuple(params[n].detach().clone().requires_grad_(True) for n in names)

    def bound(*values):
        torch.manual_seed(0)  # the same Monte-Carlo draws at every evaluation
        kwargs = dict(method="iw", num_samples=3, inner_sampling=inner_sampling)
        return torch.func.functional_call(model, dict(zip(names, values)), (X, Y), kwargs, strict=False)

    assert torch.autograd.gradcheck(bound, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)


def test_unknown_method_and_sampling_are_errors():
    model, X, Y = gp_model()
    with pytest.raises(ValueError, match="method"):
        model.elbo(X, Y, method="mcmc")
    lv = deepgp.DeepGP.from_spec("LV-GP", X, Y, num_inducing=5)
    with pytest.raises(ValueError, match="inner_sampling"):
        lv.elbo(X, Y, method="iw", num_samples=2, inner_sampling="both")


def small_lv(spec="LV-GP-GP", n=6, seed=0):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((n, 1)), rng.standard_normal((n, 1))
    model = deepgp.DeepGP.from_spec(spec, x, y, num_inducing=4, hidden_dim=2, inner_q_sqrt=0.5, encoder_hidden=(3,),
                                    seed=seed)
    return model, torch.from_numpy(x), torch.from_numpy(y)


def iw_gradients(model, X, Y, dreg: bool, seed: int, K: int = 5, inner_sampling: str = "independent"):
    """The IW bound and every parameter's gradient, under ``seed``'s draws."""
    model.zero_grad(set_to_none=True)
    with seeded(seed):
        bound = model.elbo(X, Y, "iw", K, inner_sampling, dreg=dreg)
    bound.backward()
    return float(bound.detach()), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("inner_sampling", ["independent", "batch"])
def test_dreg_changes_only_the_encoders_gradient_into_its_formula(inner_sampling):
    model, X, Y = small_lv()
    plain, g0 = iw_gradients(model, X, Y, False, 3, inner_sampling=inner_sampling)
    dreg, g1 = iw_gradients(model, X, Y, True, 3, inner_sampling=inner_sampling)
    assert dreg == plain  # the same bound
    encoder = [n for n in g0 if ".encoder." in n]
    assert encoder and set(g1) == set(g0)
    for n in set(g0) - set(encoder):
        torch.testing.assert_close(g1[n], g0[n], rtol=1e-12, atol=1e-14)
    assert all(not torch.allclose(g1[n], g0[n]) for n in encoder)
    # Σ_k w̃_k² ∂ℓ^k/∂w^k ∂w^k/∂φ, written out (log q at constant a, b; ℓ^k depends on w^k alone)
    with seeded(3):
        mean, var, log_ratio, _, latents = model.propagate_posterior(X, Y, 5, inner_sampling, stop_q=True)
    ell = model.likelihood.variational_expectation(Y.unsqueeze(1), mean, var) + log_ratio  # [B, K]
    (w,) = latents
    (dl_dw,) = torch.autograd.grad(ell.sum(), w, retain_graph=True)
    weights = torch.softmax(ell.detach(), dim=1).unsqueeze(-1)
    params = dict(model.named_parameters())
    expected = torch.autograd.grad(w, [params[n] for n in encoder], grad_outputs=weights.square() * dl_dw)
    for n, e in zip(encoder, expected):
        torch.testing.assert_close(g1[n], model.num_data / X.shape[0] * e, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("spec, inner_sampling", [("LV-GP", "independent"), ("LV-GP-GP", "batch")])
def test_dreg_has_the_expectation_of_the_iw_gradient(spec, inner_sampling):
    """Paired over the same draws: the mean difference of the encoder's gradients is zero within its
    error (the dropped score term Σ_k w̃_k ∂ log q(w^k)/∂φ is not mean-zero for K > 1, so leaving it out
    without DReG's extra weight would fail this)."""
    model, X, Y = small_lv(spec, n=4)
    encoder = [n for n, _ in model.named_parameters() if ".encoder." in n]
    diffs = []
    for seed in range(400):
        g0 = iw_gradients(model, X, Y, False, seed, inner_sampling=inner_sampling)[1]
        g1 = iw_gradients(model, X, Y, True, seed, inner_sampling=inner_sampling)[1]
        diffs.append(torch.cat([(g0[n] - g1[n]).flatten() for n in encoder]).numpy())
    diffs = np.array(diffs)
    z = diffs.mean(0) / (diffs.std(0, ddof=1) / math.sqrt(len(diffs)))
    assert np.all(np.abs(z) < 4.5), z
    assert np.all(diffs.std(0) > 0)  # the two estimators differ draw by draw


def test_batch_inner_draws_have_the_expectation_of_independent_ones():
    """Each point's K samples are drawn alike in the two modes (the batch's points share the draws
    in "batch"), so the IW estimate has one expectation; joint draws, a different bound, are told apart."""
    model, X, Y = small_lv(n=7)  # (B ≠ K: a sample-major mix-up cannot pass by shape)
    with torch.no_grad(), seeded(5):
        # a random final q and encoder: each point's q(w) its own, the latent reaching y
        for name, p in model.named_parameters():
            if name == "layers.2.q_mu" or ".encoder." in name:
                p.copy_(torch.randn_like(p))
    stats = {}
    for i, sampling in enumerate(INNER_SAMPLING):
        with torch.no_grad(), seeded(10 + i):
            vals = np.array([float(model.elbo(X, Y, "iw", 5, sampling)) for _ in range(600)])
        stats[sampling] = vals.mean(), vals.std(ddof=1) / math.sqrt(len(vals))
    (m_i, se_i), (m_b, se_b), (m_j, se_j) = stats["independent"], stats["batch"], stats["joint"]
    assert abs(m_b - m_i) < 4 * math.hypot(se_b, se_i), stats
    assert abs(m_j - m_i) > 4 * math.hypot(se_j, se_i), stats


def test_dreg_needs_independent_inner_draws():
    model, X, Y = small_lv()
    with pytest.raises(ValueError, match="independent"):
        model.elbo(X, Y, "iw", 3, "joint", dreg=True)
    with pytest.raises(ValueError, match="dreg needs inner_sampling='independent'"):
        deepgp.fit(model, X.numpy(), Y.numpy(), config=TrainConfig(method="iw", inner_sampling="joint", dreg=True,
                                                                   iterations=3), progress=False)
    gp, _, _ = gp_model()  # (no importance weights over latents: no effect)
    deepgp.fit(gp, gp.final_layer.Z.detach().numpy(), np.zeros((10, 1)), method="iw", dreg=True, iterations=2,
               progress=False)
    history = deepgp.fit(model, X.numpy(), Y.numpy(), method="iw", inner_sampling="independent", dreg=True,
                         iterations=3, progress=False)
    assert len(history) == 3 and np.all(np.isfinite(history))
