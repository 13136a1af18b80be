import pytest
import torch

from conftest import assert_fast_equals_plain, rbf_gram
from deepgp.linalg import (
    PLAIN,
    CholeskyError,
    Numerics,
    cholesky,
    gram,
    gram_plain,
    inverse_cholesky,
    inverse_cholesky_plain,
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


def test_thin_batched_products_match_their_plain_formulas_with_gradients():
    torch.manual_seed(0)
    A = torch.randn(7, 3, 11, dtype=torch.float64, requires_grad=True)
    Bt = torch.randn(7, 4, 11, dtype=torch.float64, requires_grad=True)
    assert_fast_equals_plain(matmul_nt, matmul_nt_plain, (A, Bt))
    assert_fast_equals_plain(gram, gram_plain, (A,))
    assert torch.autograd.gradcheck(matmul_nt, (A, Bt))
    assert torch.autograd.gradcheck(gram, (A,))


def test_inverse_cholesky_and_its_gradient_match_the_plain_formula():
    torch.manual_seed(0)
    Z = torch.randn(2, 9, 3, dtype=torch.float64, requires_grad=True)  # a batch of two
    assert_fast_equals_plain(lambda Z: inverse_cholesky(rbf_gram(Z), 1e-6),
                             lambda Z: inverse_cholesky_plain(rbf_gram(Z), 1e-6), (Z,))
    eye = torch.eye(9, dtype=torch.float64)
    L = torch.linalg.cholesky(rbf_gram(Z) + 1e-6 * eye)
    torch.testing.assert_close(inverse_cholesky_plain(rbf_gram(Z), 1e-6) @ L, eye.expand(2, 9, 9))
    assert torch.autograd.gradcheck(lambda Z: inverse_cholesky(rbf_gram(Z), 1e-6), (Z[0].detach().requires_grad_(),))


def test_numerics_narrow_the_products_only():
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


def test_inverse_cholesky_retries_with_jitter_then_reports():
    A = torch.ones(3, 3, dtype=torch.float64)
    T = inverse_cholesky(A, jitter=0.0)
    L = torch.linalg.inv(T)
    assert torch.allclose(L @ L.T, A, atol=1e-5)
    with pytest.raises(CholeskyError, match="my matrix"):
        inverse_cholesky(-torch.eye(3, dtype=torch.float64), where="my matrix")
