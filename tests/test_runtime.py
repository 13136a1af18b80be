import os

import numpy as np
import torch

import deepgp
from deepgp import conditional, linalg, runtime, training


def count_empty_calls(monkeypatch):
    calls = []
    real = torch.empty

    def spy(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(runtime.torch, "empty", spy)
    return calls


def test_settle_heap_allocates_one_block_on_the_cpu(monkeypatch):
    monkeypatch.delenv(runtime.SETTLE_HEAP_ENV, raising=False)
    calls = count_empty_calls(monkeypatch)
    assert runtime.settle_heap(torch.device("cpu")) is True
    assert calls == [(runtime.GLIBC_MMAP_THRESHOLD_MAX - (1 << 20),)]


def test_settle_heap_does_nothing_off_the_cpu(monkeypatch):
    calls = count_empty_calls(monkeypatch)
    assert runtime.settle_heap("meta") is False
    assert calls == []


def test_fit_settles_the_heap_once_on_the_models_device_unless_opted_out(monkeypatch):
    seen = []
    monkeypatch.setattr(training, "settle_heap", seen.append)
    x = torch.linspace(-1, 1, 20, dtype=torch.float64).unsqueeze(-1)
    model = deepgp.DeepGP.from_spec("GP", x, torch.sin(3 * x), num_inducing=4, seed=0)
    monkeypatch.delenv(runtime.SETTLE_HEAP_ENV, raising=False)
    deepgp.fit(model, x, torch.sin(3 * x), method="vi", iterations=2, progress=False)
    assert seen == [model.device]
    for value in ("0", "false", "No", " off "):
        monkeypatch.setenv(runtime.SETTLE_HEAP_ENV, value)
        deepgp.fit(model, x, torch.sin(3 * x), method="vi", iterations=2, progress=False)
    assert seen == [model.device]


class CountedEnvironment(dict):
    """os.environ's variables, counting the reads of each name (get, [], in)."""

    def __init__(self, variables):
        super().__init__(variables)
        self.reads = {}

    def _count(self, name):
        self.reads[name] = self.reads.get(name, 0) + 1

    def get(self, name, default=None):
        self._count(name)
        return super().get(name, default)

    def __getitem__(self, name):
        self._count(name)
        return super().__getitem__(name)

    def __contains__(self, name):
        self._count(name)
        return super().__contains__(name)


def test_fit_reads_each_opt_out_once_when_it_starts(monkeypatch):
    x = torch.linspace(-1, 1, 20, dtype=torch.float64).unsqueeze(-1)
    model = deepgp.DeepGP.from_spec("LV-GP", x, torch.sin(3 * x), num_inducing=4, seed=0)
    for set_ in ({}, {runtime.FLOAT32_PRODUCTS_ENV: "0", runtime.SETTLE_HEAP_ENV: "1", runtime.CAPTURE_ENV: "off"}):
        environ = CountedEnvironment({**os.environ, **set_})
        monkeypatch.setattr(os, "environ", environ)
        deepgp.fit(model, x, torch.sin(3 * x), method="iw", iterations=2, progress=False)
        names = (runtime.FLOAT32_PRODUCTS_ENV, runtime.SETTLE_HEAP_ENV, runtime.CAPTURE_ENV)
        assert {name: environ.reads.get(name, 0) for name in names} == dict.fromkeys(names, 1)


def record_product_dtypes(monkeypatch):
    """The dtype of the R_lᵀA products of every marginal_moments call (its last argument)."""
    lows = []
    real = conditional._MarginalMoments.apply

    def spy(*args):
        lows.append(args[-1])
        return real(*args)

    monkeypatch.setattr(conditional._MarginalMoments, "apply", spy)
    return lows


def test_fit_steps_with_float32_products_and_predicts_in_float64(monkeypatch):
    monkeypatch.delenv(runtime.FLOAT32_PRODUCTS_ENV, raising=False)
    lows = record_product_dtypes(monkeypatch)
    x = torch.linspace(-1, 1, 20, dtype=torch.float64).unsqueeze(-1)
    model = deepgp.DeepGP.from_spec("LV-GP-GP", x, torch.sin(3 * x), num_inducing=4, seed=0)
    deepgp.fit(model, x, torch.sin(3 * x), method="iw", iterations=2, progress=False)
    assert lows and set(lows) == {torch.float32}
    lows.clear()
    model.predictive_log_density(x, torch.sin(3 * x), num_samples=5)
    model.elbo(x, torch.sin(3 * x), method="iw", num_samples=2)
    assert lows and set(lows) == {torch.float64}


def test_fit_steps_in_float64_when_opted_out(monkeypatch):
    lows = record_product_dtypes(monkeypatch)
    x = torch.linspace(-1, 1, 20, dtype=torch.float64).unsqueeze(-1)
    model = deepgp.DeepGP.from_spec("GP-GP", x, torch.sin(3 * x), num_inducing=4, seed=0)
    for value in ("0", "Off"):
        monkeypatch.setenv(runtime.FLOAT32_PRODUCTS_ENV, value)
        deepgp.fit(model, x, torch.sin(3 * x), method="vi", iterations=2, progress=False)
    assert lows and set(lows) == {torch.float64}


def test_the_products_dtype_a_results_row_records_is_the_one_fit_steps_with(monkeypatch):
    lows = record_product_dtypes(monkeypatch)
    x = torch.linspace(-1, 1, 20, dtype=torch.float64).unsqueeze(-1)
    for dtype, opt_out in ((torch.float64, None), (torch.float64, "0"), (torch.float32, None), (torch.float32, "0")):
        if opt_out is None:
            monkeypatch.delenv(runtime.FLOAT32_PRODUCTS_ENV, raising=False)
        else:
            monkeypatch.setenv(runtime.FLOAT32_PRODUCTS_ENV, opt_out)
        model = deepgp.DeepGP.from_spec("GP-GP", x, torch.sin(3 * x), num_inducing=4, seed=0, dtype=dtype)
        lows.clear()
        deepgp.fit(model, x.to(dtype), torch.sin(3 * x).to(dtype), method="vi", iterations=2, progress=False)
        assert lows and {str(low).removeprefix("torch.") for low in lows} == {runtime.training_products_dtype(dtype)}


def test_float32_products_move_the_gradient_far_less_than_its_monte_carlo_noise():
    # the step's gradient with float32 products against float64 at the same draws, and the float64
    # gradient at other draws: what the rounding adds is negligible beside what sampling does
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (64, 2))
    y = np.sin(x.sum(1, keepdims=True)) + 0.1 * rng.normal(size=(64, 1))
    model = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=32, seed=0)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # away from the initial q(v), where every R is 1e-5·I or I
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    X, Y = torch.as_tensor(x), torch.as_tensor(y)

    def gradient(seed, products=False):
        model.zero_grad()
        numerics = linalg.Numerics(torch.float32 if products else None)
        with linalg.seeded(seed):
            deepgp.elbo_iw(model, X, Y, 5, numerics=numerics).backward()
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    exact, low, other = gradient(1), gradient(1, products=True), gradient(2)
    assert not torch.equal(low, exact)
    assert (low - exact).norm() < 1e-4 * (other - exact).norm()


def test_an_opt_out_variable_reads_off_in_any_case_with_spaces_around(monkeypatch):
    """The rule for DEEPGP_FLOAT32_PRODUCTS, DEEPGP_SETTLE_HEAP and DEEPGP_CAPTURE alike."""
    for value in ("0", " 0 ", "FALSE", "off\n", "No"):
        monkeypatch.setenv("DEEPGP_CAPTURE", value)
        assert runtime.opted_out("DEEPGP_CAPTURE"), value
    for value in ("", "1", "2", "yes", "true"):
        monkeypatch.setenv("DEEPGP_CAPTURE", value)
        assert not runtime.opted_out("DEEPGP_CAPTURE"), value
    monkeypatch.delenv("DEEPGP_CAPTURE")
    assert not runtime.opted_out("DEEPGP_CAPTURE")
