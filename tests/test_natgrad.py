import pytest
import torch

from deepgp.kernels import RBF
from deepgp.layers import GPLayer
from deepgp.reference import expectation_parameters


def small_layer():
    g = torch.Generator().manual_seed(0)
    layer = GPLayer(RBF(2), torch.randn(4, 2, generator=g, dtype=torch.float64), 2)
    with torch.no_grad():
        layer.q_mu.copy_(torch.randn(4, 2, generator=g, dtype=torch.float64))
        layer.q_sqrt.mul_(0.7)
    return layer


def test_expectation_parameters_make_q_a_function_of_eta_and_restore_the_layer():
    layer, other = small_layer(), small_layer()
    params = list(layer.named_parameters())
    m0, R0 = (t.detach().clone() for t in layer.q())
    with expectation_parameters(layer) as (eta1, eta2):
        m, R = layer.q()
        torch.testing.assert_close(m, m0)
        torch.testing.assert_close(R, R0)
        g1, g2 = torch.autograd.grad(layer.kl(), (eta1, eta2))
        assert g1.abs().sum() > 0 and g2.abs().sum() > 0
        assert other.q()[0] is other.q_mu  # other layers read their parameters as ever
    assert "q" not in vars(layer)
    assert layer.q()[0] is layer.q_mu and list(layer.named_parameters()) == params
    assert layer.q_mu.grad is None and layer.q_sqrt.grad is None


def test_expectation_parameters_restore_the_layer_after_an_error():
    layer = small_layer()
    with pytest.raises(RuntimeError, match="inside"):
        with expectation_parameters(layer):
            raise RuntimeError("inside")
    assert "q" not in vars(layer) and layer.q()[0] is layer.q_mu
