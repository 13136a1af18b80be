"""Early stopping (deepgp.early_stopping through fit): where it stops, what it returns, what it trains on,
its checkpoint and its settings."""

import csv

import numpy as np
import pytest
import torch

import deepgp
from deepgp import early_stopping, objectives, storage
from deepgp.cli import main
from deepgp.config import TrainConfig

EVERY = 5
SETTINGS = dict(method="iw", num_samples=2, iterations=200, batch_size=16, early_stopping=True,
                validation_every=EVERY, progress=False)


def problem(n=60, seed=0):
    """y = sin(x₀) + 0.1 ε on x [n, 2]: every y distinct, so that a row is known by its target."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2))
    return x, np.sin(x[:, :1]) + 0.1 * rng.standard_normal((n, 1))


def model_for(x, y):
    return deepgp.DeepGP.from_spec("LV-GP", x, y, num_inducing=8, seed=1)


def held_out(x, y, fraction=0.1, seed=0):
    fitted, held = early_stopping.split_rows(len(x), fraction, seed)
    return (x[fitted], y[fitted]), (torch.as_tensor(x[held]), torch.as_tensor(y[held]))


def scripted(monkeypatch, scores):
    """The held-out score replaced by ``scores``, one per evaluation, in order."""
    sequence = iter(scores)
    monkeypatch.setattr(early_stopping, "held_out_density", lambda model, X, Y: next(sequence))


def test_it_stops_after_patience_scores_past_the_peak_and_returns_the_peak_state(monkeypatch):
    x, y = problem()
    scripted(monkeypatch, [1.0, 2.0, 3.0, 2.9, 2.5, 2.0, 1.0])
    model = model_for(x, y)
    history = deepgp.fit(model, x, y, patience=3, **SETTINGS)
    assert (history.best_iteration, history.stopped_at, len(history)) == (3 * EVERY, 6 * EVERY, 6 * EVERY)
    assert history.evaluations.tolist() == [[EVERY * (i + 1), s] for i, s in enumerate([1.0, 2.0, 3.0, 2.9, 2.5,
                                                                                         2.0])]
    # the scores draw their own random numbers: training to the peak alone reaches the same state
    scripted(monkeypatch, [1.0, 2.0, 3.0])
    peak = model_for(x, y)
    again = deepgp.fit(peak, x, y, **{**SETTINGS, "iterations": 3 * EVERY}, patience=3)
    assert np.array_equal(again, history[: 3 * EVERY]) and again.stopped_at is None
    for k, v in peak.state_dict().items():
        assert torch.equal(v, model.state_dict()[k]), k


def test_a_score_that_never_improves_on_its_best_counts_and_a_non_finite_one_is_never_best(monkeypatch):
    x, y = problem()
    scripted(monkeypatch, [float("nan"), 1.0, 1.0, float("inf") * -1, 0.5])
    history = deepgp.fit(model_for(x, y), x, y, patience=3, **SETTINGS)
    assert (history.best_iteration, history.stopped_at) == (2 * EVERY, 5 * EVERY)  # an equal score is no new best


def test_the_returned_model_scores_the_best_recorded_score():
    x, y = problem()
    model = model_for(x, y)
    history = deepgp.fit(model, x, y, patience=1, **{**SETTINGS, "iterations": 400})
    _, (Xh, Yh) = held_out(x, y)
    scores = history.evaluations[:, 1]
    assert history.stopped_at == len(history) == EVERY * len(scores) < 400  # a real score, stopped early
    assert history.best_iteration == EVERY * (1 + int(np.argmax(scores))) < history.stopped_at
    assert early_stopping.held_out_density(model, Xh, Yh) == scores.max() > scores[-1]  # same draws, same process
    assert history.seconds > 0


def test_without_a_stop_it_trains_its_budget_and_returns_the_best_state_scored():
    x, y = problem()
    history = deepgp.fit(model_for(x, y), x, y, patience=10**6, **{**SETTINGS, "iterations": 32})
    assert len(history) == 32 and history.stopped_at is None and len(history.evaluations) == 32 // EVERY


def test_the_held_out_rows_are_in_no_step(monkeypatch):
    x, y = problem()
    seen = []
    bound = objectives.elbo_iw

    def recorded(model, X, Y, *args, **kwargs):
        seen.append(Y.detach().numpy().ravel().copy())
        return bound(model, X, Y, *args, **kwargs)

    monkeypatch.setattr(objectives, "elbo_iw", recorded)
    model = model_for(x, y)
    deepgp.fit(model, x, y, patience=10**6, **{**SETTINGS, "iterations": 40})
    (_, y_fit), (_, y_held) = held_out(x, y)
    stepped = set(np.concatenate(seen))
    assert len(seen) == 40 and stepped == set(y_fit.ravel())  # every training row, and no other
    assert not stepped & set(y_held.numpy().ravel()) and len(y_held) == 6
    assert model.num_data == len(x) - 6  # the bound is scaled to the rows trained on


def test_held_out_rows_are_a_function_of_the_size_fraction_and_seed():
    fitted, held = early_stopping.split_rows(100, 0.1, 3)
    assert len(held) == 10 and sorted({*fitted, *held}) == list(range(100))
    assert np.array_equal(held, early_stopping.split_rows(100, 0.1, 3)[1])
    assert not np.array_equal(held, early_stopping.split_rows(100, 0.1, 4)[1])
    assert np.array_equal(early_stopping.split_rows(100, 0.1, None)[1], early_stopping.split_rows(100, 0.1, 0)[1])
    for n, fraction in ((4, 0.1), (3, 0.5), (10, 0.9)):  # no held-out row, or fewer than 2 to train on
        with pytest.raises(ValueError, match="validation_fraction"):
            early_stopping.split_rows(n, fraction, 0)


@pytest.mark.parametrize("settings, name", [
    (dict(validation_fraction=0.0), "validation_fraction"), (dict(validation_fraction=1.0), "validation_fraction"),
    (dict(validation_fraction=-0.2), "validation_fraction"), (dict(validation_fraction="a"), "validation_fraction"),
    (dict(validation_fraction=float("nan")), "validation_fraction"), (dict(validation_every=0), "validation_every"),
    (dict(validation_every=2.5), "validation_every"), (dict(patience=0), "patience"), (dict(patience=True), "patience"),
    (dict(early_stopping="yes"), "early_stopping"), (dict(early_stopping=True, recipe="paper"), "early_stopping"),
])
def test_bad_settings_are_refused_when_the_config_is_made_naming_them(settings, name):
    with pytest.raises(ValueError, match=name) as err:
        TrainConfig(**settings)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=name):
        deepgp.DeepGPRegressor(**settings, iterations=1).fit(*problem())  # before any training


def test_a_fraction_too_small_for_the_data_is_refused_by_fit_naming_it():
    x, y = problem(n=8)
    with pytest.raises(ValueError, match="validation_fraction=0.05 of 8 training rows holds out 0"):
        deepgp.fit(model_for(x, y), x, y, **{**SETTINGS, "validation_fraction": 0.05})


def test_the_paper_recipe_never_stops_early_and_the_default_is_off():
    assert TrainConfig(recipe="paper").resolved().early_stopping is False
    assert TrainConfig().resolved().early_stopping is False
    x, y = problem()
    history = deepgp.fit(model_for(x, y), x, y, iterations=10, recipe="paper", progress=False)
    assert history.evaluations is None and history.best_iteration is None and history.stopped_at is None
    assert isinstance(np.mean(history), float) and type(history - 1) is np.ndarray  # computations: plain


def test_a_run_resumed_from_its_checkpoint_stops_where_an_uninterrupted_one_does(tmp_path, monkeypatch):
    x, y = problem()
    settings = {**SETTINGS, "iterations": 400, "patience": 1}
    model = model_for(x, y)
    whole = deepgp.fit(model, x, y, **settings)
    assert whole.stopped_at is not None and 2 * EVERY < whole.stopped_at < settings["iterations"]

    class Interrupted(Exception):
        pass

    def kill(t, bound):
        if t + 1 == whole.stopped_at - EVERY - 2:  # between two scores, after the checkpoint of the one before
            raise Interrupted

    ckpt = tmp_path / "run.ckpt"
    with pytest.raises(Interrupted):
        deepgp.fit(model_for(x, y), x, y, checkpoint=ckpt, checkpoint_every=EVERY, callback=kill, **settings)
    saved = storage.read(ckpt, storage.CHECKPOINT)
    assert saved["early_stopping"]["evaluations"].shape[0] == saved["iteration"] // EVERY > 0
    resumed_model = model_for(x, y)
    resumed = deepgp.fit(resumed_model, x, y, checkpoint=ckpt, **settings)
    assert np.array_equal(resumed, whole) and np.array_equal(resumed.evaluations, whole.evaluations)
    assert (resumed.best_iteration, resumed.stopped_at) == (whole.best_iteration, whole.stopped_at)
    for k, v in resumed_model.state_dict().items():
        assert torch.equal(v, model.state_dict()[k]), k
    # a stopped run's checkpoint trains no further, even with a larger budget: it returns the best state
    again = model_for(x, y)
    more = deepgp.fit(again, x, y, checkpoint=ckpt, **{**settings, "iterations": 800})
    assert np.array_equal(more, whole) and more.stopped_at == whole.stopped_at
    for k, v in again.state_dict().items():
        assert torch.equal(v, model.state_dict()[k]), k


def test_a_checkpoint_of_another_early_stopping_setting_or_a_damaged_state_is_refused(tmp_path):
    x, y = problem()
    ckpt = tmp_path / "run.ckpt"
    deepgp.fit(model_for(x, y), x, y, patience=10**6, checkpoint=ckpt, **{**SETTINGS, "iterations": 20})
    with pytest.raises(ValueError, match="other settings: early_stopping=True"):
        deepgp.fit(model_for(x, y), x, y, checkpoint=ckpt, **{**SETTINGS, "iterations": 20, "early_stopping": False})
    with pytest.raises(ValueError, match="other settings: patience=1000000 \\(now 3\\)"):
        deepgp.fit(model_for(x, y), x, y, patience=3, checkpoint=ckpt, **{**SETTINGS, "iterations": 20})
    off = tmp_path / "off.ckpt"
    deepgp.fit(model_for(x, y), x, y, checkpoint=off, **{**SETTINGS, "iterations": 20, "early_stopping": False})
    with pytest.raises(ValueError, match="other settings: early_stopping=False \\(now True\\)"):
        deepgp.fit(model_for(x, y), x, y, patience=10**6, checkpoint=off, **{**SETTINGS, "iterations": 20})
    state = storage.read(ckpt, storage.CHECKPOINT)
    damages = {
        "a missing score": lambda s: s.update(evaluations=s["evaluations"][:-1]),
        "a best that is not the best": lambda s: s.update(best_iteration=s["best_iteration"] + EVERY
                                                         if s["best_iteration"] < 20 else EVERY),
        "a stop before patience": lambda s: s.update(stopped_at=20),
        "a best state of another model": lambda s: s["best_state"].pop(next(iter(s["best_state"]))),
        "a count that disagrees": lambda s: s.update(waited=s["waited"] + 1),
        "no state": lambda s: s.clear(),
    }
    for what, damage in damages.items():
        broken = {**state, "early_stopping": {**state["early_stopping"],
                                              "best_state": dict(state["early_stopping"]["best_state"])}}
        damage(broken["early_stopping"])
        storage.write(ckpt, storage.CHECKPOINT, broken)
        with pytest.raises(ValueError, match="is damaged"):
            deepgp.fit(model_for(x, y), x, y, patience=10**6, checkpoint=ckpt, **{**SETTINGS, "iterations": 20})
        assert what


def test_the_estimator_holds_out_the_rows_and_initialises_from_the_others():
    x, y = problem(n=80)
    reg = deepgp.DeepGPRegressor("LV-GP", num_inducing=8, iterations=30, batch_size=16, early_stopping=True,
                                 validation_every=10, patience=5, progress=False).fit(x, y[:, 0])
    assert reg.model_.num_data == 72 and reg.history_.best_iteration in (10, 20, 30)
    assert [i for i, _ in reg.history_.evaluations] == [10, 20, 30]


def test_the_command_line_takes_the_settings_and_says_where_the_best_state_was(tmp_path, capsys):
    x, y = problem(n=80)
    data = tmp_path / "d.csv"
    with open(data, "w", newline="") as f:
        csv.writer(f).writerows([["a", "b", "y"], *([*r, t] for r, t in zip(x, y[:, 0]))])
    out = tmp_path / "m.safetensors"
    assert main(["fit", str(data), "--target", "y", "--model", "GP", "--num-inducing", "8", "--iterations", "20",
                 "--early-stopping", "--validation-every", "10", "--patience", "1", "--validation-fraction", "0.2",
                 "--no-progress", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "best score at iteration" in said and "on 80 rows" in said
    reg = deepgp.DeepGPRegressor.load(out)
    assert (reg.early_stopping, reg.validation_fraction, reg.patience) == (True, 0.2, 1)
    assert main(["fit", str(data), "--target", "y", "--validation-fraction", "1.5", "--out", str(tmp_path / "n"),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "validation_fraction" in err and len(err.strip().splitlines()) == 1


def test_the_captured_step_stops_where_the_eager_one_does():
    x, y = problem()
    eager, captured = model_for(x, y), model_for(x, y)
    settings = {**SETTINGS, "iterations": 400, "patience": 1}
    a = deepgp.fit(eager, x, y, capture=False, **settings)
    b = deepgp.fit(captured, x, y, capture=True, **settings)
    assert a.stopped_at is not None and np.array_equal(a.evaluations, b.evaluations)
    assert (a.best_iteration, a.stopped_at) == (b.best_iteration, b.stopped_at)
    for k, v in eager.state_dict().items():
        assert torch.equal(v, captured.state_dict()[k]), k
