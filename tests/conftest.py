import math

import numpy as np
import pytest
import torch

import deepgp

torch.set_num_threads(1)  # the suite's shapes are small; one thread avoids pool contention on 2 cores


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


def rbf_gram(Z):
    """exp(−½‖z_i − z_j‖²) [..., M, M] for Z [..., M, D]: a kernel matrix built apart from deepgp's kernels."""
    return torch.exp(-0.5 * torch.cdist(Z, Z).square())


def bimodal(n, seed):
    """y = ±sin(3x) + 0.05 ε with a random sign: a two-branch conditional density."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, 1))
    sign = rng.choice([-1.0, 1.0], (n, 1))
    return x, sign * np.sin(3 * x) + 0.05 * rng.standard_normal((n, 1))


def only_meta_builds(monkeypatch):
    """Make ``DeepGP.build`` fail the test unless it builds on the meta device: counting a file's parameters
    there allocates nothing; a real build of a crafted file's architecture would."""
    real_build = deepgp.DeepGP.build.__func__

    def build(cls, *args, **kwargs):
        assert torch.get_default_device().type == "meta", "the crafted file's architecture was built"
        return real_build(cls, *args, **kwargs)

    monkeypatch.setattr(deepgp.DeepGP, "build", classmethod(build))


def far_magnitude(where: float, top: float) -> float:
    """|x| from 1e30 (``where`` = 0) to ``top``, a dtype's largest number (``where`` = 1), evenly in log:
    inputs far from any data."""
    exponent = 30 + where * (math.log10(top) - 30)
    return top if exponent > math.log10(top) - 1e-6 else 10**exponent


def smooth(n, seed):
    """A unimodal homoscedastic set: y = sin(2x) + 0.1 ε."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, 1))
    return x, np.sin(2 * x) + 0.1 * rng.standard_normal((n, 1))


@pytest.fixture(scope="session")
def bimodal_data():
    return bimodal(500, 0), bimodal(300, 1)


@pytest.fixture(scope="session")
def fitted_lv(bimodal_data):
    """An LV-GP fitted by IW on the bimodal set (shared by the objective tests, never modified)."""
    (x, y), _ = bimodal_data
    model = deepgp.DeepGP.from_spec("LV-GP", x, y, num_inducing=24, seed=0)
    history = deepgp.fit(model, x, y, method="iw", num_samples=5, iterations=1500, seed=0, progress=False)
    return model, history


@pytest.fixture(scope="session")
def fitted_gp():
    """A single-layer GP fitted by VI on a smooth 2-input set (its predictive is Gaussian in closed form)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 2))
    y = np.sin(x[:, :1]) + 0.1 * rng.standard_normal((40, 1))
    model = deepgp.DeepGP.from_spec("GP", x, y, num_inducing=10)
    deepgp.fit(model, x, y, "vi", 1, iterations=50, progress=False)
    return model, x, y
