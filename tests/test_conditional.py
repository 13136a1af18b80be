"""The GP conditional's fast form against its plain form (deepgp.conditional): values and gradients
in float64, for the whole conditional and for each fast piece."""

import pytest
import torch

from conftest import assert_fast_equals_plain, rbf_gram
from deepgp import conditional
from deepgp.conditional import joint_moments, joint_moments_plain, marginal_moments, marginal_moments_plain
from deepgp.kernels import RBF, Matern52


def random_q(M, L, seed):
    """A whitened q(v): m [M, L] and a lower-triangular R [L, M, M] with a diagonal in [0.5, 1.5)."""
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(M, L, generator=g, dtype=torch.float64)
    R = torch.tril(torch.randn(L, M, M, generator=g, dtype=torch.float64)) * 0.3
    R.diagonal(dim1=-2, dim2=-1).copy_(0.5 + torch.rand(L, M, generator=g, dtype=torch.float64))
    return m, R


@pytest.mark.parametrize("kernel", [RBF, Matern52])
@pytest.mark.parametrize("full_cov", [False, True])
def test_the_conditional_and_its_gradients_match_the_plain_formula(full_cov, kernel):
    """Both cases of conditional.moments (the fast paths, hand-written backward passes included)
    against autograd through moments_plain (a Cholesky factor and a triangular solve), for the
    inputs, Z, q and the kernel's parameters."""
    k = kernel(2)
    g = torch.Generator().manual_seed(0)
    Z = torch.randn(7, 2, generator=g, dtype=torch.float64, requires_grad=True)
    H = torch.randn(5, 2, 2, generator=g, dtype=torch.float64, requires_grad=True)
    m, R = (t.requires_grad_() for t in random_q(7, 3, seed=1))
    inputs = (H, Z, m, R, *k.parameters())  # (the kernel's parameters are read from k itself)

    def fast(H, Z, m, R, *_):
        return conditional.moments(k, Z, m, R.tril(), H, full_cov)

    def plain(H, Z, m, R, *_):
        return conditional.moments_plain(k, Z, m, R.tril(), H, full_cov)

    assert_fast_equals_plain(fast, plain, inputs, rtol=1e-8, atol=1e-10)
    assert fast(*inputs)[1].shape == ((5, 3, 2, 2) if full_cov else (5, 2, 3))


def _moment_inputs(M, L, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    Z = torch.randn(M, 2, generator=g, dtype=torch.float64)
    Lz_inv = torch.linalg.inv(torch.linalg.cholesky(rbf_gram(Z) + 1e-3 * torch.eye(M, dtype=torch.float64)))
    K = torch.randn(M, n, generator=g, dtype=torch.float64)
    R = torch.randn(L, M, M, generator=g, dtype=torch.float64).tril()
    m = torch.randn(M, L, generator=g, dtype=torch.float64)
    return [t.requires_grad_() for t in (Lz_inv, K, R, m)]


def test_marginal_moments_match_the_plain_formula_with_gradients():
    # R enters through tril, as in GPLayer.q: the fast path never reads R's top-right block (zero
    # for a triangular R) and returns no gradient there; tril's backward drops the strict upper one
    def fast(Lz_inv, K, R, m):
        return marginal_moments(Lz_inv, K, R.tril(), m)

    def plain(Lz_inv, K, R, m):
        return marginal_moments_plain(Lz_inv, K, R.tril(), m)

    for M in (7, 8):  # the 2×2 blocks split M unevenly or evenly
        assert_fast_equals_plain(fast, plain, _moment_inputs(M, L=3, n=10))
    assert torch.autograd.gradcheck(fast, _moment_inputs(5, L=2, n=4, seed=1))


def test_float32_products_match_the_plain_formula_to_float32_rounding():
    # M = 128 as in training; the products are float32, everything around them float64
    def fast(Lz_inv, K, R, m):
        return marginal_moments(Lz_inv, K, R.tril(), m, products_dtype=torch.float32)

    def plain(Lz_inv, K, R, m):
        return marginal_moments_plain(Lz_inv, K, R.tril(), m)

    inputs = _moment_inputs(128, L=3, n=50)
    outs, grads = [], []
    weights = [torch.randn(s, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) for s in ((50, 3),) * 2]
    for f in (fast, plain):
        out = f(*inputs)
        outs.append(out)
        grads.append(torch.autograd.grad(sum((o * w).sum() for o, w in zip(out, weights)), inputs))
    # float32 rounding, relative to each tensor's norm (an element that cancels to near 0 keeps its absolute error)
    for a, b in [*zip(*outs), *zip(*grads)]:
        assert (a - b).norm() <= 1e-5 * b.norm()
    assert [o.dtype for o in fast(*inputs)] == [torch.float64] * 2
    exact = marginal_moments(*inputs[:2], inputs[2].tril(), inputs[3])[1]
    assert not torch.equal(fast(*inputs)[1], exact)  # the products did run in float32


def test_float32_products_err_relative_to_the_variance_they_add():
    # an inner layer's start: R = 1e-5·I, so ‖R_lᵀa‖² ≈ 1e-10 beside ‖a‖² ≈ 1. Its float32 rounding is
    # relative to itself, not to ‖a‖²: the variance it adds keeps ~6 digits
    Lz_inv, K, _, m = (t.detach() for t in _moment_inputs(128, L=2, n=40))
    R = 1e-5 * torch.diag(torch.linspace(0.5, 2, 128, dtype=torch.float64)).expand(2, 128, 128)
    norm_a2 = (Lz_inv @ K).square().sum(0).unsqueeze(-1)
    added = marginal_moments_plain(Lz_inv, K, R, m)[1] + norm_a2
    added_low = marginal_moments(Lz_inv, K, R, m, torch.float32)[1] + norm_a2
    assert added.min() > 0
    torch.testing.assert_close(added_low, added, rtol=1e-5, atol=0.0)


def test_float32_products_leave_float32_inputs_untouched_and_only_narrow():
    inputs = [t.detach() for t in _moment_inputs(16, L=2, n=9)]
    inputs[2] = inputs[2].tril()
    exact = marginal_moments(*inputs)
    single = [t.float() for t in inputs]
    low = marginal_moments(*single, products_dtype=torch.float32)
    assert all(torch.equal(a, b) for a, b in zip(low, marginal_moments(*single)))
    # a products dtype wider than the inputs' is theirs, as is none
    assert all(torch.equal(a, b) for a, b in zip(marginal_moments(*single, torch.float64), low))
    assert all(torch.equal(a, b) for a, b in zip(marginal_moments(*inputs, None), exact))
    assert not torch.equal(marginal_moments(*inputs, torch.float32)[1], exact[1])


def test_joint_moments_match_the_plain_formula_with_gradients():
    g = torch.Generator().manual_seed(2)
    At = torch.randn(6, 4, 7, generator=g, dtype=torch.float64, requires_grad=True)
    R = torch.randn(3, 7, 7, generator=g, dtype=torch.float64).tril().requires_grad_()
    m = torch.randn(7, 3, generator=g, dtype=torch.float64, requires_grad=True)
    assert_fast_equals_plain(joint_moments, joint_moments_plain, (At, R, m))
    assert joint_moments(At, R, m)[1].shape == (6, 3, 4, 4)
