"""Training recipes: "paper" is the code before recipes existed; "fast" (the default) differs; every path records it."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import deepgp
from deepgp import runtime, storage
from deepgp.config import GAMMA_START, RECIPE_ITERATIONS, RECIPE_VALUES, TrainConfig, gamma_at

GOLDEN = Path(__file__).parent / "data" / "paper-recipe-fit.json"


def golden_problem():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 3))
    return X, np.sin(X[:, :1] * 2) + 0.1 * rng.standard_normal((300, 1))


@pytest.mark.parametrize("spec, method, K", [("GP-GP", "vi", 1), ("LV-GP", "iw", 3), ("GP", "vi", 1)])
def test_the_paper_recipe_is_the_training_of_before(spec, method, K, monkeypatch):
    # the histories were written by fit as it was before recipes existed (same problem, settings, seeds);
    # bitwise equal in the process that wrote them; another process may differ in the last bits (MKL's
    # results depend on memory alignment), and another CPU in the float32 draws' (deepgp.linalg.standard_normal:
    # torch's normal kernels for AVX2, AVX-512, none and ARM round differently), ε₃₂ ≈ 1.2e-7 of each draw,
    # which 40 steps carry to ~1e-7 of the bounds (measured: 1.2e-7 without AVX, 1.4e-8 with it); 1e-5 allows
    # 80 such roundings, while a recipe's difference moves them by more than 1e-3. They were written in
    # float64 throughout: so is this fit (the float32 products of deepgp.runtime, tested in test_runtime.py,
    # move 40 steps by more than 1e-6)
    monkeypatch.setenv(runtime.FLOAT32_PRODUCTS_ENV, "0")
    torch.set_num_threads(1)
    X, Y = golden_problem()
    expected = [float.fromhex(v) for v in json.loads(GOLDEN.read_text())[f"{spec}:{method}"]["history"]]
    runs = {}
    for recipe in ("paper", "fast"):
        model = deepgp.DeepGP.from_spec(spec, X, Y, num_inducing=20, seed=1)
        runs[recipe] = deepgp.fit(model, X, Y, method=method, num_samples=K, iterations=40, batch_size=64,
                                  decay_every=10, seed=2, progress=False, recipe=recipe)
    np.testing.assert_allclose(runs["paper"], expected, rtol=1e-5, atol=0)
    assert np.abs(runs["fast"] - np.asarray(expected)).max() > 1e-3 * np.abs(expected).max()


def test_recipe_values_fill_only_what_is_unset():
    assert TrainConfig().recipe == "fast"
    for recipe, values in RECIPE_VALUES.items():
        resolved = TrainConfig(recipe=recipe).resolved()
        assert {k: getattr(resolved, k) for k in values} == values
        assert resolved.resolved() == resolved
    assert TrainConfig(recipe="paper", lr=0.03).resolved().lr == 0.03
    assert TrainConfig(recipe="paper", natgrad_inner=True).resolved().natgrad_inner is True
    assert RECIPE_VALUES["paper"] == dict(lr=0.005, gamma=0.01, gamma_warmup=0, decay=0.98, decay_every=1000,
                                          natgrad_inner=False, early_stopping=False)
    assert RECIPE_ITERATIONS["paper"] == 100_000
    for bad in (dict(recipe="quick"), dict(gamma=1.5), dict(lr=-1.0), dict(gamma_warmup=-1), dict(decay_every=0),
                dict(natgrad_inner="yes")):
        with pytest.raises(ValueError, match=next(iter(bad))):
            TrainConfig(**bad)


def test_gamma_schedule():
    paper = TrainConfig(recipe="paper").resolved()
    for t in (0, 998, 999, 1000, 5000, 99_999):  # the expression of the paper's code, exactly
        assert gamma_at(paper, t) == 0.01 * 0.98 ** ((t + 1) // 1000)
    ramp = TrainConfig(recipe="paper", gamma=0.1, gamma_warmup=100, decay=1.0).resolved()
    steps = [gamma_at(ramp, t) for t in range(-1, 120)]
    assert steps[0] == pytest.approx(GAMMA_START)  # (t = −1: where the ramp starts)
    assert np.all(np.diff(steps[:101]) > 0) and steps[100] == 0.1 and set(steps[100:]) == {0.1}
    # log-linear: equal ratios per step
    np.testing.assert_allclose(np.diff(np.log(steps[:101])), np.log(10) / 100)
    small = TrainConfig(recipe="paper", gamma=0.001, gamma_warmup=100).resolved()
    assert gamma_at(small, 0) == 0.001  # no ramp up to a γ below where ramps start


def test_natural_gradients_on_the_inner_layers_take_them_out_of_adam(monkeypatch):
    import deepgp.training as training

    X, Y = golden_problem()
    model = deepgp.DeepGP.from_spec("GP-GP", X, Y, num_inducing=10, seed=0)
    before = model.layers[0].q_sqrt.detach().clone()
    adam_params = []
    adam = training._adam
    monkeypatch.setattr(training, "_adam", lambda params, lr: adam_params.extend(params) or adam(params, lr))
    history = deepgp.fit(model, X, Y, method="vi", iterations=30, batch_size=64, natgrad_inner=True, seed=0,
                         progress=False)
    inner, final = model.layers
    ids = {id(p) for p in adam_params}
    assert not ids & {id(inner.q_mu), id(inner.q_sqrt), id(final.q_mu), id(final.q_sqrt)}
    assert id(inner.kernel.lengthscale.psi) in ids
    assert np.isfinite(history).all()
    assert not torch.equal(inner.q_sqrt.detach(), before)  # it moved, by natural gradients


def test_a_checkpoint_from_before_recipes_resumes_as_the_paper_recipe(tmp_path):
    X, Y = golden_problem()
    path = tmp_path / "run.ckpt"

    def run(iterations, **kw):
        model = deepgp.DeepGP.from_spec("GP", X, Y, num_inducing=10, seed=0)
        return deepgp.fit(model, X, Y, method="vi", iterations=iterations, batch_size=64, seed=0, progress=False,
                          checkpoint=path, checkpoint_every=5, **kw)

    run(10, recipe="paper")
    state = storage.read(path, storage.CHECKPOINT)
    for name in ("recipe", "gamma_warmup", "natgrad_inner"):  # what a checkpoint of before did not record
        del state["fingerprint"]["settings"][name]
    storage.write(path, storage.CHECKPOINT, state)
    assert len(run(20, recipe="paper")) == 20
    with pytest.raises(ValueError, match="recipe='paper' .now 'fast'"):
        run(30)


def test_the_estimator_records_its_recipe_and_reads_old_files_as_the_papers(tmp_path):
    X, Y = golden_problem()
    est = deepgp.DeepGPRegressor("GP", method="vi", num_inducing=8, iterations=5, progress=False).fit(X, Y[:, 0])
    assert est.get_params()["recipe"] == "fast"
    path = tmp_path / "est.dgp"
    est.save(path)
    tree = storage.read(path, storage.REGRESSOR)
    for name in ("recipe", "gamma_warmup", "natgrad_inner", "inner_width"):
        del tree["params"][name]
    tree["params"].update(lr=0.005, gamma=0.01, decay=0.98, decay_every=1000)  # as deepgp wrote them then
    old = deepgp.DeepGPRegressor.from_tree(tree, path)
    assert old.get_params()["recipe"] == "paper" and old.get_params()["natgrad_inner"] is False
    assert est.get_params()["inner_width"] == "auto" and old.get_params()["inner_width"] == "input"
    np.testing.assert_array_equal(old.predict(X[:5]), est.predict(X[:5]))
