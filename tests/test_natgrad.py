import pytest
import torch

from deepgp import natgrad
from deepgp.kernels import RBF
from deepgp.layers import GPLayer
from deepgp.natgrad import NaturalGradient, NaturalGradientError
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


# -- the optimiser: its halving policy, eager and deferred ----------------------------------------


def layer_with_gradients(seed=0):
    """A layer and a loss gradient in its (q_mu, q_sqrt), as a backward pass leaves them."""
    layer = small_layer()
    g = torch.Generator().manual_seed(seed)
    # small: every step up to γ = 1 is positive definite but for the refusals the tests make
    layer.q_mu.grad = 0.1 * torch.randn(layer.q_mu.shape, generator=g, dtype=torch.float64)
    layer.q_sqrt.grad = 0.1 * torch.randn(layer.q_sqrt.shape, generator=g, dtype=torch.float64).tril()
    return layer


def refusing_above(monkeypatch, limit: float, calls: list):
    """Makes every candidate step above ``limit`` "not positive definite"; records each γ tried."""
    candidate = natgrad._candidate

    def refused(R, D, w, Rt_g1, step):
        calls.append(float(step))
        m, R_new, info = candidate(R, D, w, Rt_g1, step)
        return m, R_new, info + int(float(step) > limit)

    monkeypatch.setattr(natgrad, "_candidate", refused)


@pytest.mark.parametrize("limit,taken", [(1.0, 0.8), (0.5, 0.4), (0.1, 0.1), (0.09, 0.05), (0.8 / 64, 0.8 / 64),
                                         (0.8 / 65, 0.0)])
def test_the_optimiser_halves_a_refused_step_down_to_gamma_over_64_then_skips_it(monkeypatch, limit, taken):
    layer, tried = layer_with_gradients(), []
    before = [p.detach().clone() for p in (layer.q_mu, layer.q_sqrt)]
    refusing_above(monkeypatch, limit, tried)
    assert NaturalGradient([layer], gamma=0.8).step() == [taken]
    assert tried == [0.8 / 2**i for i in range(len(tried))] and len(tried) <= natgrad.MAX_HALVINGS + 1
    moved = not torch.equal(layer.q_mu, before[0])
    assert moved == (taken > 0)  # a skipped step leaves q(v) as it was
    if taken == 0.0:
        assert len(tried) == natgrad.MAX_HALVINGS + 1 and torch.equal(layer.q_sqrt, before[1])


@pytest.mark.parametrize("limit", [1.0, 0.5, 0.1, 0.8 / 64, 0.8 / 65])
def test_the_deferred_step_and_its_completion_are_the_eager_step(monkeypatch, limit):
    # the device tries γ alone; the host halves from γ/2 where it was refused: the same γ taken, bit for bit
    eager_layer, deferred_layer = layer_with_gradients(), layer_with_gradients()
    refusing_above(monkeypatch, limit, [])
    eager = NaturalGradient([eager_layer], gamma=0.8)
    deferred = NaturalGradient([deferred_layer], gamma=0.8)
    taken = eager.step(0.8)
    grads = deferred.gradients()
    refused = deferred.step_deferred(grads, torch.tensor(0.8, dtype=torch.float64))
    assert [bool(r) for r in refused] == [limit < 0.8]
    assert deferred.complete_deferred([bool(r) for r in refused], grads, 0.8) == taken
    for a, b in zip((eager_layer.q_mu, eager_layer.q_sqrt), (deferred_layer.q_mu, deferred_layer.q_sqrt)):
        assert torch.equal(a, b)


def test_the_optimiser_steps_each_layer_and_clears_their_gradients():
    layers = [layer_with_gradients(0), layer_with_gradients(1)]
    ngd = NaturalGradient(layers, gamma=0.3)
    assert len(ngd.param_groups) == 2 and ngd.param_groups[1]["params"] == [layers[1].q_mu, layers[1].q_sqrt]
    twins = [layer_with_gradients(0), layer_with_gradients(1)]
    assert ngd.step(0.2) == [0.2, 0.2]
    for layer, twin in zip(layers, twins):  # the step is natgrad_step_q's, from F = −loss
        assert natgrad.natgrad_step_q(twin, -twin.q_mu.grad, -twin.q_sqrt.grad, 0.2) == 0.2
        assert torch.equal(layer.q_mu, twin.q_mu) and torch.equal(layer.q_sqrt, twin.q_sqrt)
    ngd.zero_grad(set_to_none=True)
    assert all(layer.q_mu.grad is None and layer.q_sqrt.grad is None for layer in layers)


def test_the_optimiser_counts_its_first_layers_skipped_steps():
    ngd = NaturalGradient([layer_with_gradients()], gamma=0.25)
    for t, taken in enumerate([0.25, 0.0, 0.0, 0.125, 0.0]):
        ngd.count(taken, t)
    assert (ngd.skipped, ngd.in_a_row) == (3, 1)
    with pytest.warns(RuntimeWarning, match=r"skipped on 3 of 9 iterations \(gamma=0.25"):
        ngd.warn_skipped(9)
    for t in range(5, 5 + natgrad.MAX_SKIPPED_IN_A_ROW - 2):
        ngd.count(0.0, t)
    with pytest.raises(NaturalGradientError, match=r"failed on 100 iterations in a row \(up to iteration 104; "
                                                   r"gamma=0.25\)"):
        ngd.count(0.0, 104)
