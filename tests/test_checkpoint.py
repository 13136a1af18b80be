"""The checkpoint object (deepgp.checkpoint): fingerprint, save, validate and resume, apart from fit."""

import dataclasses

import numpy as np
import pytest
import torch

import deepgp
from deepgp import storage, training
from deepgp.checkpoint import Checkpoint, TrainingState, fingerprint
from deepgp.config import TrainConfig


def problem(n=40):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 2))
    return torch.as_tensor(x), torch.as_tensor(np.sin(x[:, :1]) + 0.1 * rng.standard_normal((n, 1)))


def state_of(model, steps=0, seed=0):
    """A training state after ``steps`` Adam steps on minibatches of 16 (as fit keeps it)."""
    X, Y = problem()
    adam = training._adam(list(model.parameters()), 0.01)
    schedule = torch.optim.lr_scheduler.StepLR(adam, step_size=2, gamma=0.5)
    run = TrainingState(model, adam, schedule, training.Batches(X.shape[0], 16))
    with deepgp.linalg.seeded(seed):
        for _ in range(steps):
            adam.zero_grad()
            idx = run.batches.next()
            bound = model.elbo(X[idx], Y[idx])
            (-bound).backward()
            adam.step()
            schedule.step()
            run.history.append(bound.item())
    return run


# every training setting but the budget, as a fingerprint records them
SETTINGS = {k: v for k, v in dataclasses.asdict(TrainConfig(method="vi", lr=0.01).resolved()).items()
            if k != "iterations"}


def test_a_fingerprint_is_of_the_data_as_values_the_architecture_and_the_settings():
    X, Y = problem()
    model = deepgp.DeepGP.from_spec("GP", X, Y, num_inducing=5)
    print_ = fingerprint(model, X, Y, SETTINGS)
    assert print_ == fingerprint(model, X.clone(), Y.clone(), dict(SETTINGS))
    assert print_["num_data"] == 40 and print_["settings"] == SETTINGS and print_["model"]["num_inducing"] == 5
    zero, negative = X.clone(), X.clone()
    zero[0, 0], negative[0, 0] = 0.0, -0.0
    assert fingerprint(model, zero, Y, SETTINGS) == fingerprint(model, negative, Y, SETTINGS)  # the same data
    moved = X.clone()
    moved[3, 1] += 1e-12
    assert fingerprint(model, moved, Y, SETTINGS)["data"] != print_["data"]
    assert fingerprint(model, X.float(), Y.float(), SETTINGS)["data"] != print_["data"]  # other bytes, other data
    assert fingerprint(model, X, Y, {**SETTINGS, "lr": 0.02}) != print_


def test_a_saved_state_round_trips_through_validate_and_resume(tmp_path):
    X, Y = problem()
    model = deepgp.DeepGP.from_spec("LV-GP", X, Y, num_inducing=5)
    run = state_of(model, steps=5)
    checkpoint = Checkpoint(tmp_path / "run.ckpt", fingerprint(model, X, Y, SETTINGS))
    assert not checkpoint.exists()
    with deepgp.linalg.seeded(9):
        checkpoint.save(run)
        rng = torch.get_rng_state()
    assert checkpoint.exists()
    fresh = deepgp.DeepGP.from_spec("LV-GP", X, Y, num_inducing=5, seed=4)  # other initial values
    resumed = state_of(fresh)
    again = Checkpoint(tmp_path / "run.ckpt", fingerprint(fresh, X, Y, SETTINGS))
    again.validate(storage.read(again.path, storage.CHECKPOINT), resumed)
    with deepgp.linalg.seeded(1):
        assert again.resume(resumed) == 5
        assert torch.equal(torch.get_rng_state(), rng)  # the generator as it was saved
    assert resumed.history == run.history
    assert torch.equal(resumed.batches.buffer, run.batches.buffer)
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    assert resumed.schedule.state_dict() == run.schedule.state_dict()
    for p, q in zip(model.parameters(), fresh.parameters()):
        for k in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(run.adam.state[p][k], resumed.adam.state[q][k])


def test_validate_names_what_differs_or_is_damaged(tmp_path):
    X, Y = problem()
    model = deepgp.DeepGP.from_spec("GP", X, Y, num_inducing=5)
    run = state_of(model, steps=3)
    path = tmp_path / "run.ckpt"
    Checkpoint(path, fingerprint(model, X, Y, SETTINGS)).save(run)
    state = storage.read(path, storage.CHECKPOINT)
    for args, message in [((X[:30], Y[:30], SETTINGS), r"other training data \(40 points, not 30\)"),
                          ((X, Y, {**SETTINGS, "lr": 0.5}), r"other settings: lr=0.01 \(now 0.5\)")]:
        with pytest.raises(ValueError, match=message):
            Checkpoint(path, fingerprint(model, *args)).validate(state, state_of(model))
    own = Checkpoint(path, fingerprint(model, X, Y, SETTINGS))
    with pytest.raises(ValueError, match=rf"checkpoint {path} is damaged \(ValueError: its history"):
        own.validate({**state, "iteration": 4}, state_of(model))
    with pytest.raises(ValueError, match="is damaged .*KeyError"):
        own.validate({k: v for k, v in state.items() if k != "batches"}, state_of(model))
