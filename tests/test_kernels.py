import math

import pytest
import torch

from deepgp.config import KERNEL_NAMES
from deepgp.kernels import KERNELS, RBF, Matern32, Matern52, make_kernel
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
