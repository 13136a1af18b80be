"""The training step's two implementations (deepgp.steps): the eager one and the captured one, which
runs on the CPU without a graph, take the same steps."""

import copy
from functools import partial

import numpy as np
import pytest
import torch

import deepgp
from deepgp import objectives, steps, training
from deepgp.capture import CapturedStep
from deepgp.linalg import Numerics, seeded
from deepgp.natgrad import NaturalGradient


def problem(n=60):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 2))
    return torch.as_tensor(x), torch.as_tensor(np.sin(x[:, :1]) + 0.1 * rng.standard_normal((n, 1)))


def step_for(model, X, Y, method, natgrad_inner, captured):
    objective = partial(objectives.elbo_iw if method == "iw" else objectives.elbo_vi, num_samples=3)
    inner = [layer for layer in model.layers[:-1] if hasattr(layer, "q_mu")] if natgrad_inner else []
    natural = NaturalGradient([model.final_layer, *inner], 0.1)
    q = {id(p) for group in natural.param_groups for p in group["params"]}
    adam = training._adam([p for p in model.parameters() if id(p) not in q], 0.01)
    eager = steps.Eager(model, X, Y, objective, Numerics(torch.float32), adam, natural, 0.01, 0.1)
    return steps.Captured(eager, 16, graph=False) if captured else eager


@pytest.mark.parametrize("spec,method,natgrad_inner", [("GP-GP", "vi", True), ("LV-GP-GP", "iw", False)])
def test_the_captured_step_takes_the_eager_steps_bit_for_bit(spec, method, natgrad_inner):
    X, Y = problem()
    model = deepgp.DeepGP.from_spec(spec, X, Y, num_inducing=8, seed=0)
    twin = copy.deepcopy(model)
    eager = step_for(model, X, Y, method, natgrad_inner, captured=False)
    captured = step_for(twin, X, Y, method, natgrad_inner, captured=True)
    for t in range(6):
        idx, gamma = torch.randperm(60, generator=torch.Generator().manual_seed(t))[:16], 0.1 * 0.5 ** (t // 2)
        with seeded(t):
            a = eager(t, idx, gamma)
        with seeded(t):
            b = captured(t, idx, gamma)
        assert isinstance(a, steps.StepResult) and a == b and a.taken == gamma
        # the first step is eager (Adam has no buffers to replay on yet), every later one replayed
        assert (captured.captured is None) == (t == 0)
    assert isinstance(captured.captured, CapturedStep) and captured.captured.runs == 5
    for (name, p), q in zip(model.state_dict().items(), twin.state_dict().values()):
        assert torch.equal(p, q), name


def test_both_steps_stop_on_a_non_finite_bound_before_the_model_moves(monkeypatch):
    X, Y = problem()
    for captured in (False, True):
        model = deepgp.DeepGP.from_spec("GP", X, Y, num_inducing=8, seed=0)
        step = step_for(model, X, Y, "vi", False, captured)
        step(0, torch.arange(16), 0.1)
        before = copy.deepcopy(model.state_dict())
        monkeypatch.setattr(model.likelihood, "variational_expectation",
                            lambda *args: torch.full((16, 3), float("nan"), dtype=torch.float64))
        with pytest.raises(FloatingPointError, match=r"at iteration 1; try a smaller learning rate \(lr=0.01\) or "
                                                     r"gamma \(0.1\)"):
            step(1, torch.arange(16, 32), 0.1)
        monkeypatch.undo()
        for (name, p), q in zip(before.items(), model.state_dict().values()):
            assert torch.equal(p, q), name


def test_capture_mode_takes_the_environments_default_only_for_none():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert steps.capture_mode(None, cpu, True) == (False, False)
    assert steps.capture_mode(True, cpu, True) == (True, False)
    assert steps.capture_mode(None, cuda, True) == (True, True)
    assert steps.capture_mode(False, cuda, True) == (False, False)
    assert steps.capture_mode(None, cuda, False) == (False, False)  # DEEPGP_CAPTURE=0
    assert steps.capture_mode(True, cuda, False) == (True, True)
    with pytest.raises(ValueError, match="capture must be True, False or None"):
        steps.capture_mode("yes", cpu, True)
