import pytest
import torch

from deepgp.linalg import (
    PLAIN,
    CholeskyError,
    Numerics,
    cholesky,
    gram,
    gram_plain,
    inverse_cholesky,
    inverse_cholesky_plain,
    joint_moments,
    joint_moments_plain,
    marginal_moments,
    marginal_moments_plain,
    matmul_nt,
    matmul_nt_plain,
    seeded,
    standard_normal,
)


def test_seeded_is_reproducible_and_restores_the_callers_stream():
    torch.manual_seed(123)
    expected_next = torch.randn(3)
    torch.manual_seed(123)
    like = torch.zeros((), dtype=torch.float64)
    with seeded(7):
        a = standard_normal((4,), like)
    with seeded(7):
        b = standard_normal((4,), like)
    assert torch.equal(a, b) and a.dtype == torch.float64
    assert torch.equal(torch.randn(3), expected_next)  # the caller's stream continues as if untouched


def test_seeded_none_draws_fresh_but_still_restores():
    torch.manual_seed(5)
    expected_next = torch.randn(2)
    torch.manual_seed(5)
    with seeded(None, "cpu"):
        torch.randn(10)
    assert torch.equal(torch.randn(2), expected_next)


def test_cholesky_retries_with_jitter_then_reports():
    A = torch.ones(3, 3, dtype=torch.float64)  # rank 1: fails without jitter, the retries must recover it
    L = cholesky(A, jitter=0.0)
    assert torch.allclose(L @ L.T, A, atol=1e-5)
    bad = -torch.eye(3, dtype=torch.float64)
    with pytest.raises(CholeskyError, match="my matrix"):
        cholesky(bad, where="my matrix")


def test_cholesky_rejects_negative_jitter():
    with pytest.raises(ValueError, match="jitter"):
        cholesky(torch.eye(2, dtype=torch.float64), jitter=-1.0)


def assert_fast_equals_plain(fast, plain, inputs, rtol=1e-9, atol=1e-10):
    """fast(*inputs) and plain(*inputs) (each a tensor or a tuple of tensors) agree in value, and in
    the gradient of a random linear function of the outputs with respect to every input."""
    outs = [fast(*inputs), plain(*inputs)]
    outs = [o if isinstance(o, tuple) else (o,) for o in outs]
    gen = torch.Generator().manual_seed(0)
    weights = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outs[1]]
    grads = []
    for out in outs:
        assert [o.shape for o in out] == [w.shape for w in weights]
        grads.append(torch.autograd.grad(sum((o * w).sum() for o, w in zip(out, weights)), inputs))
    for o, o_ref in zip(*outs):
        torch.testing.assert_close(o, o_ref, rtol=rtol, atol=atol)
    for g, g_ref in zip(*grads):
        torch.testing.assert_close(g, g_ref, rtol=rtol, atol=atol)


def test_thin_batched_products_match_their_plain_formulas_with_gradients():
    torch.manual_seed(0)
    A = torch.randn(7, 3, 11, dtype=torch.float64, requires_grad=True)
    Bt = torch.randn(7, 4, 11, dtype=torch.float64, requires_grad=True)
    assert_fast_equals_plain(matmul_nt, matmul_nt_plain, (A, Bt))
    assert_fast_equals_plain(gram, gram_plain, (A,))
    assert torch.autograd.gradcheck(matmul_nt, (A, Bt))
    assert torch.autograd.gradcheck(gram, (A,))


def _rbf_gram(Z):
    return torch.exp(-0.5 * torch.cdist(Z, Z).square())


def test_inverse_cholesky_and_its_gradient_match_the_plain_formula():
    torch.manual_seed(0)
    Z = torch.randn(2, 9, 3, dtype=torch.float64, requires_grad=True)  # a batch of two
    assert_fast_equals_plain(lambda Z: inverse_cholesky(_rbf_gram(Z), 1e-6),
                             lambda Z: inverse_cholesky_plain(_rbf_gram(Z), 1e-6), (Z,))
    eye = torch.eye(9, dtype=torch.float64)
    L = torch.linalg.cholesky(_rbf_gram(Z) + 1e-6 * eye)
    torch.testing.assert_close(inverse_cholesky_plain(_rbf_gram(Z), 1e-6) @ L, eye.expand(2, 9, 9))
    assert torch.autograd.gradcheck(lambda Z: inverse_cholesky(_rbf_gram(Z), 1e-6), (Z[0].detach().requires_grad_(),))


def _moment_inputs(M, L, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    Z = torch.randn(M, 2, generator=g, dtype=torch.float64)
    Lz_inv = torch.linalg.inv(torch.linalg.cholesky(_rbf_gram(Z) + 1e-3 * torch.eye(M, dtype=torch.float64)))
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
    assert Numerics(torch.float32).products_for(torch.float64) == torch.float32
    assert Numerics(torch.float32).products_for(torch.float32) == torch.float32
    assert Numerics(torch.float64).products_for(torch.float32) == torch.float32
    assert PLAIN.products_for(torch.float64) == torch.float64


def test_a_deferred_cholesky_flags_its_failure_on_the_device_instead_of_retrying():
    flag = torch.zeros((), dtype=torch.bool)
    numerics = Numerics(torch.float32).deferring(flag)
    assert numerics.deferred is flag and numerics.products_dtype == torch.float32 and PLAIN.deferred is None
    good = torch.eye(3, dtype=torch.float64)
    torch.testing.assert_close(cholesky(good, deferred=flag), torch.eye(3, dtype=torch.float64) * (1 + 1e-6) ** 0.5)
    assert not bool(flag)
    # not positive definite until a jitter of 1e-5: retried to success without a flag, one failed attempt with one
    A = torch.tensor([[1.0, 1.0], [1.0, 1.0 - 1e-5]], dtype=torch.float64)
    assert torch.isfinite(cholesky(A)).all()
    cholesky(A, deferred=flag)
    assert bool(flag)
    cholesky(good, deferred=flag)  # a later success does not clear it: the flag ORs over a step
    assert bool(flag)
    flag.zero_()
    inverse_cholesky(A, deferred=flag)
    assert bool(flag)


def test_joint_moments_match_the_plain_formula_with_gradients():
    g = torch.Generator().manual_seed(2)
    At = torch.randn(6, 4, 7, generator=g, dtype=torch.float64, requires_grad=True)
    R = torch.randn(3, 7, 7, generator=g, dtype=torch.float64).tril().requires_grad_()
    m = torch.randn(7, 3, generator=g, dtype=torch.float64, requires_grad=True)
    assert_fast_equals_plain(joint_moments, joint_moments_plain, (At, R, m))
    assert joint_moments(At, R, m)[1].shape == (6, 3, 4, 4)


def test_inverse_cholesky_retries_with_jitter_then_reports():
    A = torch.ones(3, 3, dtype=torch.float64)
    T = inverse_cholesky(A, jitter=0.0)
    L = torch.linalg.inv(T)
    assert torch.allclose(L @ L.T, A, atol=1e-5)
    with pytest.raises(CholeskyError, match="my matrix"):
        inverse_cholesky(-torch.eye(3, dtype=torch.float64), where="my matrix")
