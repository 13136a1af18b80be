"""The captured training step (deepgp.capture): its buffers, device-side flags and redo logic on
the CPU (the body runs without a graph, the same code a CUDA graph records), and on a GPU where
there is one."""

import logging
from functools import partial

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import deepgp
from deepgp import capture, objectives, training
from deepgp.capture import CapturedStep
from deepgp.natgrad import NaturalGradient

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def problem(n=120, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2))
    return x, np.sin(x[:, :1]) * np.sign(rng.standard_normal((n, 1))) + 0.1 * rng.standard_normal((n, 1))


def fitted(spec, method, capture, iterations=20, device=None, **settings):
    x, y = problem()
    model = deepgp.DeepGP.from_spec(spec, x, y, num_inducing=10, seed=0, device=device)
    history = deepgp.fit(model, x, y, method, 3, iterations=iterations, batch_size=32, decay_every=7,
                         progress=False, capture=capture, **settings)
    return model, history


def assert_same(a, b):
    (ma, ha), (mb, hb) = a, b
    np.testing.assert_array_equal(ha, hb)
    for (name, ta), tb in zip(ma.state_dict().items(), mb.state_dict().values()):
        assert torch.equal(ta, tb), name


@pytest.mark.parametrize("spec,method", [("GP", "vi"), ("LV-GP-GP", "iw"), ("GP-LV-GP", "vi")])
def test_the_captured_step_is_the_eager_step(spec, method):
    # the same arithmetic on the same draws: bitwise the same run (the step size decays within it)
    assert_same(fitted(spec, method, False), fitted(spec, method, True))


class _NoHostReads(TorchDispatchMode):
    """Fails on any operation that reads a tensor's value on the host or makes a shape from data:
    in a CUDA graph such an operation cannot be recorded."""

    FORBIDDEN = ("_local_scalar_dense", "nonzero", "masked_select", "unique", "is_nonzero", "equal")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(func.__name__.startswith(name) for name in self.FORBIDDEN):
            raise AssertionError(f"the captured step reads the device on the host: {func}")
        return func(*args, **(kwargs or {}))


def step_of(spec, method, natural=("final",)):
    """A CapturedStep on the CPU after one eager iteration (so that Adam has its buffers); ``natural``
    names the layers trained by natural gradients ("final", or an index into model.layers)."""
    x, y = problem()
    model = deepgp.DeepGP.from_spec(spec, x, y, num_inducing=10, seed=0)
    X, Y = torch.as_tensor(x), torch.as_tensor(y)
    model.num_data = X.shape[0]
    objective = partial(objectives.elbo_iw if method == "iw" else objectives.elbo_vi, num_samples=3)
    layers = [model.final_layer if n == "final" else model.layers[n] for n in natural]
    skip = {id(p) for layer in layers for p in (layer.q_mu, layer.q_sqrt)}
    adam = training._adam([p for p in model.parameters() if id(p) not in skip], 0.01)
    (-objective(model, X[:32], Y[:32])).backward()
    adam.step()
    step = CapturedStep(model, X, Y, objective, adam, NaturalGradient(layers, 0.1), 32, graph=False)
    return model, step


@pytest.mark.parametrize("spec,method", [("LV-GP-GP", "iw"), ("GP-GP", "vi"), ("LV-GP", "vi")])
def test_the_recorded_body_never_waits_on_the_device(spec, method):
    model, step = step_of(spec, method)
    step.run(torch.arange(32), 0.01, 0.1)  # the first run allocates the backup
    with _NoHostReads():
        step.body()
    # ...and the detector does detect a host read
    with pytest.raises(AssertionError, match="reads the device"), _NoHostReads():
        deepgp.linalg.cholesky(torch.eye(3, dtype=torch.float64))


def test_natural_gradients_on_several_layers_are_each_the_eager_step():
    # the final and an inner layer both by natural gradients: the body's steps equal natgrad_step_q's
    import copy

    model, step = step_of("GP-GP", "vi", natural=("final", 0))
    twin = copy.deepcopy(model)  # the state before the step...
    layers = [twin.final_layer, twin.layers[0]]
    skip = {id(p) for layer in layers for p in (layer.q_mu, layer.q_sqrt)}
    adam = training._adam([p for p in twin.parameters() if id(p) not in skip], 0.01)
    adam.load_state_dict(copy.deepcopy(step.adam.state_dict()))  # ...Adam's included
    idx = torch.arange(40, 72)
    with deepgp.linalg.seeded(3):
        bound, _, failed = step.run(idx, 0.01, 0.2)
    assert failed == [False, False] and len(step.grads) == 2
    # the same iteration by hand on the twin, with the same draws
    with deepgp.linalg.seeded(3):
        b = step.objective(twin, step.X[idx], step.Y[idx])
    (-b).backward()
    adam.step()
    for layer in layers:
        assert deepgp.natgrad.natgrad_step_q(layer, -layer.q_mu.grad, -layer.q_sqrt.grad, 0.2) == 0.2
    assert bound == float(b)
    for (name, a), c in zip(model.state_dict().items(), twin.state_dict().values()):
        assert torch.equal(a, c), name


def test_restore_puts_back_every_parameter_and_adam_buffer():
    model, step = step_of("LV-GP-GP", "iw")
    step.run(torch.arange(32), 0.01, 0.1)
    before = [t.clone() for t in step._state()]
    step.run(torch.arange(32, 64), 0.01, 0.1)
    changed = [not torch.equal(a, b) for a, b in zip(before, step._state())]
    assert sum(changed) > len(changed) // 2  # the step moved most of the state...
    step.restore()
    for a, b in zip(before, step._state()):
        assert torch.equal(a, b)  # ...and restore undid all of it


def test_a_step_whose_cholesky_failed_is_undone_and_redone_eagerly(monkeypatch, caplog):
    body = CapturedStep.body
    runs = []

    def failing_on_the_fifth(self):
        body(self)
        runs.append(1)
        if len(runs) == 5:  # as a factor that needed more jitter would have flagged it
            self.cholesky_failed.fill_(True)
            self.out[1] = 1.0

    monkeypatch.setattr(CapturedStep, "body", failing_on_the_fifth)
    with caplog.at_level(logging.INFO, logger="deepgp"):
        model, history = fitted("LV-GP-GP", "iw", True, iterations=12)
    assert "1 of 12 captured steps were redone eagerly" in caplog.text
    assert len(history) == 12 and np.isfinite(history).all()
    # Adam counted 12 steps, not 13: the failed step's update was undone, not kept
    assert {float(state["step"]) for state in _adams[-1].state.values()} == {12.0}


_adams: list = []


@pytest.fixture(autouse=True)
def _keep_adam(monkeypatch):
    """Keeps every Adam that fit makes (to read its buffers after the run)."""
    make = training._adam

    def keep(params, lr):
        _adams.append(make(params, lr))
        return _adams[-1]

    monkeypatch.setattr(training, "_adam", keep)
    yield
    _adams.clear()


def test_a_natural_gradient_step_refused_at_gamma_is_halved_as_eagerly(monkeypatch):
    candidate = deepgp.natgrad._candidate

    def refused_above(R, D, w, Rt_g1, step):  # any step above 0.3 is "not positive definite"
        m, R_new, info = candidate(R, D, w, Rt_g1, step)
        return m, R_new, info + int(float(step) > 0.3)

    monkeypatch.setattr(deepgp.natgrad, "_candidate", refused_above)
    taken = []
    step_q = deepgp.natgrad.natgrad_step_q

    def spy(*args, **kwargs):
        taken.append(step_q(*args, **kwargs))
        return taken[-1]

    monkeypatch.setattr(deepgp.natgrad, "natgrad_step_q", spy)
    eager = fitted("GP", "vi", False, gamma=0.5, recipe="paper")
    assert all(0.2 < t <= 0.25 for t in taken)  # every step halved once (else the test cannot fail)
    taken.clear()
    captured = fitted("GP", "vi", True, gamma=0.5, recipe="paper")
    # the first iteration is eager; on the 19 captured ones the device refused γ and the host took γ/2
    assert len(taken) == 20 and all(0.2 < t <= 0.25 for t in taken)
    assert_same(eager, captured)


def test_a_diverging_captured_step_raises_and_leaves_the_model_as_before(monkeypatch):
    states = []
    vi = objectives.elbo_vi
    for capture_ in (False, True):
        calls = []

        def poisoned(*args, calls=calls, **kwargs):
            calls.append(1)
            bound = vi(*args, **kwargs)
            return bound * float("nan") if len(calls) == 9 else bound

        monkeypatch.setattr(objectives, "elbo_vi", poisoned)
        x, y = problem()
        model = deepgp.DeepGP.from_spec("GP-GP", x, y, num_inducing=10, seed=0)
        with pytest.raises(FloatingPointError, match="at iteration 8"):
            deepgp.fit(model, x, y, "vi", 1, iterations=20, batch_size=32, progress=False, capture=capture_)
        states.append(model.state_dict())
    for (name, a), b in zip(states[0].items(), states[1].values()):
        assert torch.equal(a, b), name


def test_a_checkpoint_resumes_across_eager_and_captured_runs(tmp_path):
    whole = fitted("LV-GP", "iw", False, iterations=20)
    ckpt = tmp_path / "state.safetensors"
    x, y = problem()
    model = deepgp.DeepGP.from_spec("LV-GP", x, y, num_inducing=10, seed=0)
    for capture_, iterations in ((True, 8), (False, 14), (True, 20)):
        history = deepgp.fit(model, x, y, "iw", 3, iterations=iterations, batch_size=32, decay_every=7,
                             progress=False, capture=capture_, checkpoint=ckpt)
    assert_same(whole, (model, history))


def test_capture_is_checked_and_can_be_switched_off_by_the_environment(monkeypatch):
    x, y = problem()
    model = deepgp.DeepGP.from_spec("GP", x, y, num_inducing=10, seed=0)
    with pytest.raises(ValueError, match="capture must be True, False or None"):
        deepgp.fit(model, x, y, iterations=2, progress=False, capture="yes")
    with pytest.raises(ValueError, match="needs the model on a GPU"):
        CapturedStep(model, torch.zeros(3, 2), torch.zeros(3, 1), None, None, [], 2, graph=True)
    assert capture.WARMUP >= 1


# -- on a GPU --------------------------------------------------------------------------------------


@cuda
@pytest.mark.parametrize("spec,method", [("GP-GP", "vi"), ("LV-GP-GP", "iw")])
def test_on_a_gpu_the_graph_trains_as_the_eager_step_does(spec, method):
    eager = fitted(spec, method, False, iterations=300, device="cuda")
    graph = fitted(spec, method, None, iterations=300, device="cuda")  # None: captured on a GPU
    assert np.isfinite(graph[1]).all()
    # the same distribution: the last 100 bounds' means within a few standard errors
    a, b = eager[1][-100:], graph[1][-100:]
    se = np.sqrt(a.var() / 100 + b.var() / 100)
    assert abs(a.mean() - b.mean()) < 5 * se + 1e-6 * abs(a.mean())


@cuda
def test_on_a_gpu_a_failed_replay_is_redone(monkeypatch, caplog):
    replay = torch.cuda.CUDAGraph.replay
    runs = []

    def failing(self):
        replay(self)
        runs.append(1)
        if len(runs) == 3:
            step = _captured[-1]
            step.out[1] = 1.0

    _captured = []
    init = CapturedStep.__init__

    def keep(self, *args, **kwargs):
        init(self, *args, **kwargs)
        _captured.append(self)

    monkeypatch.setattr(CapturedStep, "__init__", keep)
    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", failing)
    with caplog.at_level(logging.INFO, logger="deepgp"):
        model, history = fitted("LV-GP-GP", "iw", True, iterations=20, device="cuda")
    assert "1 of 20 captured steps were redone eagerly" in caplog.text
    assert np.isfinite(history).all()
