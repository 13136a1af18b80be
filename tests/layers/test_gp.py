import pytest
import torch
from torch.distributions import MultivariateNormal, kl_divergence

from conftest import assert_fast_equals_plain
from deepgp.conditional import moments_plain
from deepgp.kernels import RBF
from deepgp.layers import GPLayer
from deepgp.linalg import CholeskyError, cholesky

torch.manual_seed(0)


def random_layer(M=6, D=2, L=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    layer = GPLayer(RBF(D), torch.randn(M, D, generator=g, dtype=torch.float64), L, name="test layer")
    with torch.no_grad():
        layer.q_mu.copy_(torch.randn(M, L, generator=g, dtype=torch.float64))
        R = torch.tril(torch.randn(L, M, M, generator=g, dtype=torch.float64)) * 0.3
        R.diagonal(dim1=-2, dim2=-1).copy_(0.5 + torch.rand(L, M, generator=g, dtype=torch.float64))
        layer.q_sqrt.copy_(R)
    return layer


def test_kl_equals_dense_unwhitened_kl():
    layer = random_layer()
    Kzz = layer.kernel.K(layer.Z, layer.Z)
    Lz = cholesky(Kzz, layer.jitter)
    m, R = layer.q()
    expected = 0.0
    for l in range(layer.num_gps):
        q = MultivariateNormal(Lz @ m[:, l], scale_tril=Lz @ R[l])  # u = Lz v
        p = MultivariateNormal(torch.zeros(layer.num_inducing, dtype=torch.float64), scale_tril=Lz)
        expected = expected + kl_divergence(q, p)
    torch.testing.assert_close(layer.kl(), expected, rtol=1e-9, atol=1e-9)


def test_conditional_marginals_equal_diagonal_of_full_covariance():
    layer = random_layer()
    H = torch.randn(4, 5, 2, dtype=torch.float64)
    mean, var = layer.conditional(H)
    mean_f, cov = layer.conditional(H, full_cov=True)
    torch.testing.assert_close(mean, mean_f)
    assert cov.shape == (4, 3, 5, 5)
    torch.testing.assert_close(var, torch.diagonal(cov, dim1=-2, dim2=-1).transpose(-1, -2))


def test_conditional_matches_dense_unwhitened_formula():
    layer = random_layer()
    H = torch.randn(1, 4, 2, dtype=torch.float64)
    mean, cov = layer.conditional(H, full_cov=True)
    k = layer.kernel
    Kzz = k.K(layer.Z, layer.Z) + layer.jitter * torch.eye(layer.num_inducing, dtype=torch.float64)
    Lz = torch.linalg.cholesky(Kzz)
    Kxz, Kxx = k.K(H[0], layer.Z), k.K(H[0], H[0])
    m, R = layer.q()
    for l in range(layer.num_gps):
        mu_u, S_u = Lz @ m[:, l], Lz @ R[l] @ R[l].T @ Lz.T
        P = Kxz @ torch.linalg.inv(Kzz)
        torch.testing.assert_close(mean[0, :, l], P @ mu_u)
        torch.testing.assert_close(cov[0, l], Kxx - P @ Kzz @ P.T + P @ S_u @ P.T)


def test_joint_samples_have_the_analytic_covariance():
    torch.manual_seed(1)
    layer = random_layer(L=2)
    K = 4
    H = torch.randn(1, K, 2, dtype=torch.float64).expand(40000, K, 2)
    with torch.no_grad():
        g = layer.sample(H, full_cov=True)  # [G, K, L]
        mean, cov = layer.conditional(H[:1], full_cov=True)
    for l in range(2):
        draws = g[:, :, l]
        torch.testing.assert_close(draws.mean(0), mean[0, :, l], atol=0.03, rtol=0)
        emp = torch.cov(draws.T)
        torch.testing.assert_close(emp, cov[0, l], atol=0.03, rtol=0.05)
    # the K draws of a group are correlated as one function draw, not independent
    assert cov[0, 0].abs().triu(1).max() > 0.1


def test_marginal_samples_have_the_analytic_variance():
    torch.manual_seed(2)
    layer = random_layer(L=2)
    H = torch.randn(1, 3, 2, dtype=torch.float64).expand(40000, 3, 2)
    with torch.no_grad():
        g = layer.sample(H, full_cov=False)
        mean, var = layer.conditional(H[:1])
    torch.testing.assert_close(g.var(0), var[0], atol=0.03, rtol=0.05)
    torch.testing.assert_close(g.mean(0), mean[0], atol=0.03, rtol=0)


def test_projection_adds_identity_mean():
    W = torch.randn(2, 3, dtype=torch.float64)
    layer = GPLayer(RBF(3), torch.randn(5, 3, dtype=torch.float64), 3, projection=W)
    H = torch.randn(2, 1, 3, dtype=torch.float64)
    g = torch.randn(2, 1, 3, dtype=torch.float64)
    torch.testing.assert_close(layer.project(H, g), H[..., :2] + g @ W.T)


def test_linear_mean_adds_a_fixed_linear_map_of_the_input():
    P = torch.randn(3, 2, dtype=torch.float64)
    layer = GPLayer(RBF(3), torch.randn(5, 3, dtype=torch.float64), 2, linear_mean=P)
    assert layer.output_dim == 2 and not layer.P.requires_grad
    H = torch.randn(2, 1, 3, dtype=torch.float64)
    g = torch.randn(2, 1, 2, dtype=torch.float64)
    torch.testing.assert_close(layer.project(H, g), H @ P + g)
    assert layer(H).shape == (2, 1, 2)
    with pytest.raises(ValueError, match="not both"):
        GPLayer(RBF(3), torch.randn(5, 3, dtype=torch.float64), 2, torch.randn(2, 2, dtype=torch.float64),
                linear_mean=P)
    with pytest.raises(ValueError, match=r"linear_mean must be \[3, 2\]"):
        GPLayer(RBF(3), torch.randn(5, 3, dtype=torch.float64), 2, linear_mean=P.T)


def test_failed_cholesky_names_the_layer():
    layer = random_layer()
    with torch.no_grad():
        layer.kernel.variance.psi.fill_(float("nan"))
    try:
        layer.conditional(torch.randn(1, 2, 2, dtype=torch.float64))
    except CholeskyError as err:
        assert "test layer" in str(err) and "Try" in str(err)
    else:
        raise AssertionError("expected CholeskyError")


def test_cholesky_retries_with_more_jitter_only_where_needed():
    A = torch.stack([torch.eye(3, dtype=torch.float64),
                     torch.ones(3, 3, dtype=torch.float64) - 1e-5 * torch.eye(3, dtype=torch.float64)])
    L = cholesky(A, jitter=1e-8)
    torch.testing.assert_close(L[0], torch.eye(3, dtype=torch.float64) * (1 + 1e-8) ** 0.5)
    assert torch.isfinite(L).all()


@pytest.mark.parametrize("full_cov", [False, True])
def test_conditional_and_its_gradients_match_the_plain_formula(full_cov):
    """Both cases of GPLayer.conditional (the fast paths, hand-written backward passes included)
    against autograd through the plain formula (deepgp.conditional.moments_plain) at the layer's q,
    for every parameter and the inputs."""
    layer = random_layer(M=7, D=2, L=3)
    H = torch.randn(5, 2, 2, dtype=torch.float64, requires_grad=True)
    params = (H, layer.Z, layer.q_mu, layer.q_sqrt, *layer.kernel.parameters())
    assert_fast_equals_plain(lambda *_: layer.conditional(H, full_cov),
                             lambda *_: moments_plain(layer.kernel, layer.Z, *layer.q(), H, full_cov, layer.jitter),
                             params, rtol=1e-8, atol=1e-10)
