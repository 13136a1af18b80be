import pytest
import torch

from deepgp.linalg import CholeskyError, cholesky, gram, inverse_cholesky, matmul_nt, seeded, standard_normal


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


def test_thin_batched_products_match_matmul_with_gradients():
    torch.manual_seed(0)
    A = torch.randn(7, 3, 11, dtype=torch.float64, requires_grad=True)
    Bt = torch.randn(7, 4, 11, dtype=torch.float64, requires_grad=True)
    assert torch.allclose(matmul_nt(A, Bt), A @ Bt.mT)
    assert torch.allclose(gram(A), A @ A.mT)
    assert torch.autograd.gradcheck(matmul_nt, (A, Bt))
    assert torch.autograd.gradcheck(gram, (A,))


def _rbf_gram(Z):
    return torch.exp(-0.5 * torch.cdist(Z, Z).square())


def test_inverse_cholesky_and_its_gradient_match_autograd_through_cholesky_and_solve():
    torch.manual_seed(0)
    Z = torch.randn(2, 9, 3, dtype=torch.float64, requires_grad=True)  # a batch of two
    G = torch.randn(2, 9, 9, dtype=torch.float64)
    eye = torch.eye(9, dtype=torch.float64)
    T_ref = torch.linalg.solve_triangular(torch.linalg.cholesky(_rbf_gram(Z) + 1e-6 * eye), eye, upper=False)
    T = inverse_cholesky(_rbf_gram(Z), 1e-6)
    torch.testing.assert_close(T, T_ref)
    (g_ref,) = torch.autograd.grad((T_ref * G).sum(), Z)
    (g,) = torch.autograd.grad((T * G).sum(), Z)
    torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-10)
    assert torch.autograd.gradcheck(lambda Z: inverse_cholesky(_rbf_gram(Z), 1e-6), (Z[0].detach().requires_grad_(),))


def test_inverse_cholesky_retries_with_jitter_then_reports():
    A = torch.ones(3, 3, dtype=torch.float64)
    T = inverse_cholesky(A, jitter=0.0)
    L = torch.linalg.inv(T)
    assert torch.allclose(L @ L.T, A, atol=1e-5)
    with pytest.raises(CholeskyError, match="my matrix"):
        inverse_cholesky(-torch.eye(3, dtype=torch.float64), where="my matrix")
