import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import deepgp
from conftest import far_magnitude
from deepgp.config import KERNEL_NAMES
from deepgp.kernels import KERNELS, RBF, Matern32, Matern52, Stationary, far_input, make_kernel
from deepgp.linalg import seeded
from deepgp.params import FLOOR, Positive, inverse_positive, positive


def test_rbf_matches_formula():
    k = RBF(2)
    k.lengthscale.assign(torch.tensor([0.5, 2.0]))
    k.variance.assign(1.7)
    X, Z = torch.randn(4, 2, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64)
    d2 = (((X[:, None] - Z[None]) / torch.tensor([0.5, 2.0], dtype=torch.float64)) ** 2).sum(-1)
    torch.testing.assert_close(k.K(X, Z), 1.7 * torch.exp(-0.5 * d2))
    torch.testing.assert_close(k.K_diag(X), torch.full((4,), 1.7, dtype=torch.float64))


def test_matern52_matches_formula_and_is_one_at_zero():
    k = Matern52(1)
    X = torch.tensor([[0.0], [0.3]], dtype=torch.float64)
    r = 0.3 / k.lengthscale()[0]
    expected = (1 + math.sqrt(5) * r + 5 * r**2 / 3) * torch.exp(-math.sqrt(5) * r)
    K = k.K(X, X)
    torch.testing.assert_close(K[0, 1], expected)
    torch.testing.assert_close(torch.diagonal(K), torch.ones(2, dtype=torch.float64))
    K.sum().backward()  # finite gradient at r = 0
    assert torch.isfinite(k.lengthscale.psi.grad).all()


@pytest.mark.parametrize("cls, nu", [(Matern32, 1.5), (Matern52, 2.5)])
def test_matern_agrees_with_scikit_learn(cls, nu):
    # an independent implementation: scikit-learn's Matern (ARD lengthscales, unit variance)
    from sklearn.gaussian_process.kernels import Matern

    ls = [0.7, 1.9, 0.4]
    k = cls(3)
    k.lengthscale.assign(torch.tensor(ls))
    k.variance.assign(2.3)
    X, Z = torch.randn(5, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    expected = 2.3 * Matern(length_scale=ls, nu=nu)(X.numpy(), Z.numpy())
    torch.testing.assert_close(k.K(X, Z), torch.from_numpy(expected))
    K = k.K(X, X)
    torch.testing.assert_close(torch.diagonal(K), k.K_diag(X))
    K.sum().backward()  # finite gradient at r = 0
    assert torch.isfinite(k.lengthscale.psi.grad).all()


def test_every_kernel_name_the_settings_accept_is_built():
    assert set(KERNEL_NAMES) == set(KERNELS)


def test_lengthscale_initialised_to_sqrt_dim():
    k = make_kernel("rbf", 9)
    torch.testing.assert_close(k.lengthscale(), torch.full((9,), 3.0, dtype=torch.float64))


def test_unknown_kernel_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown kernel"):
        make_kernel("periodic", 2)


def test_positive_constraint_floor_and_inverse():
    assert float(positive(torch.tensor(-1e3, dtype=torch.float64))) == pytest.approx(FLOOR)
    for v in [1e-5, 0.01, 1.0, 50.0, 1e4]:
        assert float(positive(inverse_positive(v))) == pytest.approx(v, rel=1e-10)
    p = Positive(2.0, trainable=False)
    assert not any(True for _ in p.parameters())
    with pytest.raises(ValueError):
        inverse_positive(0.0)


# -- inputs far from the data --------------------------------------------------------------------
def unclamped_half_neg_sqdist(k, X, Z, offset=0.0):
    """Stationary.half_neg_sqdist without the clamp of the scaled inputs (the reference)."""
    ls = k.lengthscale()
    Xs, Zs = X / ls, Z / ls
    Xa = torch.cat([Xs, -0.5 * Xs.square().sum(-1, keepdim=True), torch.ones_like(Xs[..., :1])], -1)
    Za = torch.cat([Zs, torch.ones_like(Zs[..., :1]), offset - 0.5 * Zs.square().sum(-1, keepdim=True)], -1)
    return Xa @ Za.transpose(-1, -2)


def unclamped_K(k, X, Z):
    """K(X, Z) by the kernels' formulas without the clamp of the scaled inputs (the reference)."""
    if isinstance(k, RBF):
        return torch.exp(unclamped_half_neg_sqdist(k, X, Z, torch.log(k.variance())))
    return k.variance() * k.shape_fn((-2.0 * unclamped_half_neg_sqdist(k, X, Z)).clamp_min(0.0))


def kernel_of(name, D, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    k = KERNELS[name](D)
    k.lengthscale.assign(0.3 + 3 * torch.rand(D, generator=g, dtype=torch.float64))
    k.variance.assign(0.2 + 2 * float(torch.rand(1, generator=g, dtype=torch.float64)))
    return k.to(dtype), g


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(KERNELS)), st.integers(1, 4), st.sampled_from([torch.float64, torch.float32]),
       st.integers(0, 2**31), st.floats(-6, 6))
def test_the_kernels_are_unchanged_bit_for_bit_within_the_bound(name, D, dtype, seed, log_scale):
    # the clamp that keeps far inputs finite changes no value (nor gradient) where nothing overflows
    k, g = kernel_of(name, D, dtype, seed)
    X = (torch.randn(7, D, generator=g, dtype=torch.float64) * 10**log_scale).to(dtype).requires_grad_()
    Z = torch.randn(5, D, generator=g, dtype=torch.float64).to(dtype)
    K, reference = k.K(X, Z), unclamped_K(k, X, Z)
    assert torch.equal(K, reference)
    grads = [torch.autograd.grad(v.sum(), [X, k.lengthscale.psi]) for v in (K, reference)]
    assert all(torch.equal(a, b) for a, b in zip(*grads))


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(KERNELS)), st.integers(1, 4), st.sampled_from([torch.float64, torch.float32]),
       st.integers(0, 2**31), st.floats(0, 1), st.data())
def test_far_from_the_data_every_kernel_is_the_prior(name, D, dtype, seed, where, data):
    # a finite input far from Z (up to the dtype's largest number; or infinite, as a float32 model reads
    # 1e39) is uncorrelated with it: K(x, Z) = 0 exactly, k(x, x) the variance, and never NaN
    k, g = kernel_of(name, D, dtype, seed)
    info = torch.finfo(dtype)
    magnitude = far_magnitude(where, info.max)
    signs = data.draw(st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=D, max_size=D).filter(any))
    X = torch.tensor([[s * magnitude for s in signs], [s * math.inf if s else 0.0 for s in signs]],
                     dtype=torch.float64).to(dtype)
    Z = torch.randn(5, D, generator=g, dtype=torch.float64).to(dtype)
    zeros = torch.zeros(2, 5, dtype=dtype)
    assert torch.equal(k.K(X, Z), zeros) and torch.equal(k.K(Z, X), zeros.T)
    assert torch.equal(k.K_diag(X), k.variance().expand(2))
    # two far points: their distance is rounding of |x|² (far beyond max_magnitude), but not NaN
    assert not k.K(X, X).isnan().any()


def test_the_bound_keeps_every_distance_finite():
    for dtype in (torch.float64, torch.float32):
        for D in (1, 3, 1000):
            B, top = far_input(dtype, D), torch.finfo(dtype).max
            r2 = 4 * D * B**2  # the largest squared distance of two clamped points
            assert r2 <= top / 4 * (1 + 1e-6) and (5 / 3) * r2 < top and math.sqrt(5 * r2) > 1e3  # exp(−√5 r) is 0


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_the_bound_and_its_gradient_are_those_of_the_unclamped_kernels_bit_for_bit(kernel, monkeypatch):
    # the paper's IW bound with joint inner draws (K(H, H), K(Z, [Z; H]) and K_diag in one graph): the
    # clamp changes no value of the bound, nor the order in which autograd sums any gradient
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((40, 2)), rng.standard_normal((40, 1))
    model = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=6, kernel=kernel, inner_width="hidden")

    def bound_and_gradient():
        model.zero_grad()
        with seeded(1):
            bound = model.elbo(x, y, "iw", 3, inner_sampling="joint")
        bound.backward()
        return [bound.detach().clone()] + [p.grad.clone() for p in model.parameters() if p.grad is not None]

    clamped = bound_and_gradient()

    monkeypatch.setattr(Stationary, "half_neg_sqdist", unclamped_half_neg_sqdist)
    reference = bound_and_gradient()
    assert len(clamped) == len(reference) > 10
    assert all(torch.equal(a, b) for a, b in zip(clamped, reference))  # (bitwise: one process)
