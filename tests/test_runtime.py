import torch

import deepgp
from deepgp import runtime, training


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


def test_settle_heap_does_nothing_when_opted_out_or_off_the_cpu(monkeypatch):
    calls = count_empty_calls(monkeypatch)
    for value in ("0", "false", "No", " off "):
        monkeypatch.setenv(runtime.SETTLE_HEAP_ENV, value)
        assert runtime.settle_heap("cpu") is False
    monkeypatch.setenv(runtime.SETTLE_HEAP_ENV, "1")
    assert runtime.settle_heap("meta") is False
    assert calls == []


def test_fit_settles_the_heap_once_on_the_models_device(monkeypatch):
    seen = []
    monkeypatch.setattr(training, "settle_heap", seen.append)
    x = torch.linspace(-1, 1, 20, dtype=torch.float64).unsqueeze(-1)
    model = deepgp.DeepGP.from_spec("GP", x, torch.sin(3 * x), num_inducing=4, seed=0)
    deepgp.fit(model, x, torch.sin(3 * x), method="vi", iterations=2, progress=False)
    assert seen == [model.device]
