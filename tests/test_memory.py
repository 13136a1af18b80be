"""Memory is bounded by what a request implies: a file's architecture is counted before it is built,
training and prediction estimate what they need and are refused, by name and estimate, before they
allocate it; prediction over many samples is computed in groups whose result is that of one pass."""

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import deepgp
from conftest import only_meta_builds
from deepgp import DeepGPRegressor, memory, prediction, storage
from deepgp.config import ModelConfig

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="an address-space limit (Linux)")


def limited(code: str, limit: str = "1G") -> dict:
    """Run ``code`` in a Python process that may map at most 1.5 GB beyond what importing deepgp mapped, with
    DEEPGP_MEMORY_LIMIT=``limit``, so that a request the library failed to refuse fails there, not here.
    The code prints one JSON line, which is returned (with the exit status and standard error)."""
    prelude = textwrap.dedent("""
        import json, re, resource, sys
        import numpy as np, torch
        import deepgp, deepgp.cli
        torch.set_num_threads(1)
        mapped = int(re.search(r"VmSize:\\s+(\\d+) kB", open("/proc/self/status").read())[1]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mapped + 3 * 2**29, resource.RLIM_INFINITY))
        """)
    env = {**os.environ, "DEEPGP_MEMORY_LIMIT": limit, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, timeout=600)
    lines = done.stdout.strip().splitlines()
    return {"rc": done.returncode, "stderr": done.stderr, **(json.loads(lines[-1]) if lines else {})}


# -- a file's architecture -----------------------------------------------------------------------------
def crafted(tmp_path, spec="GP-GP", D=12_000, hidden=12_000):
    """A model file of a few hundred KB whose config asks for a D × hidden projection (12,000² values: 1.2 GB),
    its state padded beyond a count of every parameter but that projection (q(v), Z and the lengthscales)."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((20, 2)), rng.standard_normal((20, 1))
    tree = deepgp.DeepGP.from_spec(spec, x, y, num_inducing=1, hidden_dim=2).to_tree()
    tree.update(input_dim=D, config={**tree["config"], "hidden_dim": hidden, "inner_width": "input"})
    without_w = 2 + hidden + 2 * D + 2 * D  # q(v) of both layers, both Z [1, D], both lengthscales [D]
    held = sum(t.numel() for t in tree["state"].values())
    tree["state"]["pad"] = torch.zeros(without_w - held)
    path = tmp_path / "crafted.safetensors"
    storage.write(path, storage.MODEL, tree)
    return path, tree


def test_a_small_file_is_refused_before_its_architecture_is_built(tmp_path, monkeypatch):
    path, _ = crafted(tmp_path)
    assert path.stat().st_size < 300_000
    only_meta_builds(monkeypatch)
    with pytest.raises(ValueError, match=r"crafted.safetensors is damaged: its config describes 144072005 "
                                         r"parameters but it holds 60002$"):
        deepgp.DeepGP.load(path)


def test_a_regressor_file_is_refused_by_deepgp_predict_before_it_is_built(tmp_path, monkeypatch, capsys):
    from deepgp.cli import main

    _, model_tree = crafted(tmp_path)
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((20, 2)), rng.standard_normal(20)
    reg = DeepGPRegressor(model="GP-GP", iterations=1, num_inducing=4, predict_samples=5, progress=False).fit(X, y)
    reg.columns_ = {"inputs": ["a", "b"], "target": "y"}
    reg.save(tmp_path / "reg.safetensors")
    tree = storage.read(tmp_path / "reg.safetensors", storage.REGRESSOR)
    names = [f"x{i}" for i in range(12_000)]
    tree.update(model=model_tree, n_features_in=12_000, columns={"inputs": names, "target": "y"},
                x_scaler={"mean": torch.zeros(12_000).double(), "std": torch.ones(12_000).double()})
    storage.write(tmp_path / "reg.safetensors", storage.REGRESSOR, tree)
    (tmp_path / "d.csv").write_text(",".join(names) + "\n" + ",".join("1" for _ in names) + "\n")
    only_meta_builds(monkeypatch)
    assert main(["predict", str(tmp_path / "reg.safetensors"), str(tmp_path / "d.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "reg.safetensors is damaged: its config describes 144072005 parameters" in err


@pytest.mark.parametrize("spec,settings", [
    ("LV-GP-GP", {}), ("GP-LV-GP-GP", {"inner_width": "hidden", "hidden_dim": 3}), ("GP", {"latent_dim": 2}),
    ("LV-GP", {"encoder_hidden": (7, 3, 5), "dtype": "float32"}), ("GP-GP-GP", {"inner_width": "input"}),
])
def test_the_count_is_what_build_allocates(spec, settings):
    config = ModelConfig(model=spec, num_inducing=6, **settings)
    shapes = deepgp.DeepGP.shapes(config, 4, 2, num_data=100)
    state = deepgp.DeepGP.build(config, 4, 2, num_data=100).state_dict()
    assert shapes == {name: tuple(t.shape) for name, t in state.items()}


def test_a_count_beyond_a_tensor_is_damage(tmp_path):
    path, tree = crafted(tmp_path)
    tree["config"]["num_inducing"] = 2**40
    storage.write(path, storage.MODEL, tree)
    with pytest.raises(ValueError, match="describes inf parameters"):
        deepgp.DeepGP.load(path)


# -- the budget ---------------------------------------------------------------------------------------
def test_the_limit_is_read_from_the_environment(monkeypatch):
    for text, value in [("8G", 8 * 2**30), ("512M", 512 * 2**20), ("2.5GB", 2.5 * 2**30), ("1000", 1000),
                        ("off", math.inf), ("0", math.inf)]:
        monkeypatch.setenv(memory.LIMIT_ENV, text)
        assert memory.available() == value
    monkeypatch.setenv(memory.LIMIT_ENV, "lots")
    with pytest.raises(ValueError, match="DEEPGP_MEMORY_LIMIT must be a size in bytes such as 8G"):
        memory.available()
    monkeypatch.delenv(memory.LIMIT_ENV)
    assert 0 < memory.available() < math.inf


def test_the_model_is_counted_before_it_is_built(monkeypatch):
    monkeypatch.setenv(memory.LIMIT_ENV, "100M")
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((30, 2)), rng.standard_normal((30, 1))
    with pytest.raises(memory.MemoryBudgetError, match=r"^hidden_dim=20000 with num_inducing=30 needs about 0.4\d+ GB "
                                                       r"of memory for the 18,6\d\d,\d+ parameters of a GP-GP model, "
                                                       r"more than the 0.105 GB available"):
        deepgp.DeepGP.from_spec("GP-GP", x, y, hidden_dim=20_000)
    with pytest.raises(memory.MemoryBudgetError, match=r"^hidden_dim=20000 with num_inducing=30 needs about .* GB "
                                                       r"of memory for training GP-GP"):  # (its 20,000 GPs, not K=5)
        DeepGPRegressor(model="GP-GP", hidden_dim=20_000, progress=False).fit(x, y[:, 0])
    with pytest.raises(memory.MemoryBudgetError, match=r"^num_inducing=10000000000 needs about inf GB of memory"):
        deepgp.DeepGP.build(ModelConfig(model="GP", num_inducing=10**10), 2, 1, num_data=10)  # beyond a tensor's count
    with pytest.raises(memory.MemoryBudgetError, match=r"^encoder_hidden=20000,20000 needs about .* GB of memory for "
                                                       r"the .* parameters of a LV-GP model"):
        deepgp.DeepGP.from_spec("LV-GP", x, y, encoder_hidden=(20_000, 20_000))  # the encoder's weights, not the GPs


@pytest.mark.parametrize("flags, named", [
    (["--latent-dim", "100000000"], "--latent-dim=100000000 needs about"),
    (["--num-samples", "10000000"], "--num-samples=10000000 with batches of 60 points, "),
    (["--hidden-dim", "1000000"], "--hidden-dim=1000000 with num_inducing=60 needs about"),
    (["--num-inducing", "3000", "--model", "GP"], "--num-inducing=3000 needs about"),  # (at most N: 3,000 rows)
    (["--encoder-hidden", "100000,100000"], "--encoder-hidden=100000,100000 needs about"),
    (["--latent-dim", "100000", "--num-samples", "50"], "--latent-dim=100000 needs about"),
    (["--latent-dim", "1000", "--num-samples", "10000000"], "--num-samples=10000000 with batches"),
], ids=["latent", "samples", "hidden", "inducing", "encoder", "latent-over-samples", "samples-over-latent"])
def test_a_refused_fit_names_the_setting_its_estimate_grows_with_most(tmp_path, monkeypatch, capsys, flags, named):
    """``deepgp fit --latent-dim 100000000`` on 60 rows was refused naming --num-samples (the step's rows B·K),
    which at 5 is not what asks for 1,700 GB: the refusal names the setting whose least value (1) shrinks the
    estimate most, before anything is trained or written."""
    from deepgp.cli import main

    monkeypatch.setenv(memory.LIMIT_ENV, "100M")
    rng = np.random.default_rng(0)
    data = tmp_path / "d.csv"
    rows = rng.standard_normal((3000 if "--num-inducing" in flags else 60, 2)).tolist()
    data.write_text("x,y\n" + "".join(f"{a!r},{b!r}\n" for a, b in rows))
    out = tmp_path / "m.safetensors"
    assert main(["fit", str(data), "--target", "y", "--no-progress", "--iterations", "1", "--out", str(out),
                 *flags]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"deepgp fit: error: {named}") and err.count("\n") == 1, err
    assert "use a smaller " + named.split("=")[0] in err and not out.exists()


def test_a_refusal_survives_being_sent_from_a_worker_process():
    import pickle

    err = memory.MemoryBudgetError("num_samples", 10**6, 5e11, 2e10, "training LV-GP-GP", " with batches of 60 points")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is memory.MemoryBudgetError and str(back) == str(err) and back.message(True) == err.message(True)


# -- training -----------------------------------------------------------------------------------------
@linux_only
def test_training_that_needs_more_memory_than_there_is_is_refused_before_it_starts(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, 60)
    data = tmp_path / "d.csv"
    data.write_text("x,y\n" + "".join(f"{a!r},{b!r}\n" for a, b in zip(x.tolist(), np.sin(2 * x).tolist())))
    out = limited(f"""
        from deepgp.cli import main
        from deepgp import DeepGP, DeepGPRegressor, MemoryBudgetError
        rc = main(["fit", {str(data)!r}, "--target", "y", "--num-samples", "1000000", "--no-progress",
                   "--out", {str(tmp_path / "m.safetensors")!r}])
        X = np.linspace(-2, 2, 60)[:, None]
        said = []
        try:
            DeepGPRegressor(model="LV-GP", num_samples=10**6, progress=False).fit(X, X[:, 0])
        except MemoryBudgetError as err:
            said.append(str(err))
        model = DeepGP.from_spec("LV-GP", X, X, num_inducing=10)
        try:
            deepgp.fit(model, X, X, num_samples=10**6, progress=False)
        except MemoryBudgetError as err:
            said.append(str(err))
        print(json.dumps({{"cli": rc, "said": said}}))
        """)
    assert out["cli"] == 1, out["stderr"]
    line = out["stderr"].strip()
    assert "\n" not in line and line.startswith("deepgp fit: error: --num-samples=1000000 with batches of 60 points, "
                                                "num_inducing=60 and hidden_dim=5 needs about ")
    assert "GB of memory for training LV-GP-GP" in line
    assert not (tmp_path / "m.safetensors").exists()
    assert len(out["said"]) == 2
    for said in out["said"]:
        assert said.startswith("num_samples=1000000 with batches of 60 points, num_inducing=")
        assert "more than the 1.07 GB available" in said


def test_the_estimate_follows_the_tensors_of_a_step():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((100, 2)), rng.standard_normal((100, 1))
    model = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=20)
    one = memory.fit_step_bytes(model, 100, 10)
    assert memory.fit_step_bytes(model, 100, 20) == 2 * one == memory.fit_step_bytes(model, 200, 10)  # rows B·K
    joint = memory.fit_step_bytes(model, 100, 10, inner_sampling="joint")
    assert memory.fit_step_bytes(model, 100, 20, inner_sampling="joint") > 2 * joint  # K × K covariances
    assert memory.fit_step_bytes(model, 100, 10, products=torch.float32) < one


# -- prediction ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lv():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((300, 2)), rng.standard_normal((300, 1))
    return deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=8), x, y


def test_groups_of_samples_are_the_draws_of_one_pass(lv, monkeypatch):
    """The same RNG stream: moments drawn in groups are those of one pass, to the bit, and so are the
    mixture density and moments computed from them."""
    model, x, y = lv
    X, Y = torch.from_numpy(x[:50]), torch.from_numpy(y[:50])
    S = 700
    with deepgp.linalg.seeded(1):
        mean, var = prediction.predictive_moments(model, X, S)
    monkeypatch.setattr(prediction, "SAMPLES_AT_ONCE", 256)  # groups of 256, 256 and 188 samples
    with deepgp.linalg.seeded(1):
        groups = list(prediction.sweeps(model, X, S))
    assert [m.shape[0] for m, _ in groups] == [256, 256, 188]
    assert torch.equal(torch.cat([m for m, _ in groups]), mean) and torch.equal(torch.cat([v for _, v in groups]), var)
    # the mixture: one logsumexp per group, then one over the groups
    lse = [torch.logsumexp(model.likelihood.log_predictive(Y[None], m, v), 0) for m, v in
           zip(mean.split(256), var.split(256))]
    grouped = prediction.mixture_sweeps(model, Y, groups, S)
    assert torch.equal(grouped, torch.logsumexp(torch.stack(lse), 0) - math.log(S))
    # and one pass: the same sum in another order, a few roundings of terms of size |log p| + log S
    whole = prediction.mixture_log_density(model, Y, mean, var)
    torch.testing.assert_close(grouped, whole, rtol=0, atol=16 * torch.finfo(torch.float64).eps * (
        whole.abs().max() + math.log(S)).item())
    # the moments of the mixture: Chan's pooled mean and squared deviations, against one pass's
    with deepgp.linalg.seeded(1):
        m_grouped, v_grouped = prediction.mixture_moments(model, X, S)
    monkeypatch.setattr(prediction, "SAMPLES_AT_ONCE", 2**14)
    with deepgp.linalg.seeded(1):
        m_whole, v_whole = prediction.mixture_moments(model, X, S)
    assert torch.equal(m_whole, mean.mean(0))
    torch.testing.assert_close(m_grouped, m_whole, rtol=0, atol=8 * 2.2e-16 * mean.abs().max().item())
    torch.testing.assert_close(v_grouped, v_whole, rtol=64 * 2.2e-16, atol=0)


def test_draws_and_quantiles_by_chunks_of_points_are_those_of_all_points(lv):
    model, x, y = lv
    S = 200  # chunks of 128 points
    with deepgp.linalg.seeded(5), torch.no_grad():  # draw_y's arithmetic, chunk by chunk, as draws were made before
        X = torch.from_numpy(x)
        ref = torch.cat([prediction.draw_y(model, *prediction.predictive_moments(model, X[sl], S))
                         for sl in prediction.chunks(len(x), S)], 1).numpy()
    assert len(prediction.chunks(len(x), S)) > 1
    np.testing.assert_array_equal(model.sample_predictive(x, S, seed=5), ref)
    reg = DeepGPRegressor(model="LV-GP-GP", iterations=2, num_inducing=8, predict_samples=S, progress=False)
    reg.fit(x, y[:, 0])
    levels = [0.05, 0.5, 0.95]
    np.testing.assert_array_equal(reg.predict_quantiles(x, levels), np.quantile(reg.sample(x, S), levels, 0).T)
    np.testing.assert_array_equal(reg.predict_quantiles(x, 0.3), np.quantile(reg.sample(x, S), 0.3, 0))


def test_a_reduction_holds_a_bounded_number_of_samples(lv):
    model, x, _ = lv
    at_once = prediction.memory_needed(model, 60, prediction.SAMPLES_AT_ONCE)
    assert prediction.memory_needed(model, 60, 10**7) == at_once  # the mixture and the moments: in groups
    assert prediction.memory_needed(model, 60, 10**7, "draws") > 10**7 * 60 * 8  # all of a chunk's draws


@linux_only
def test_prediction_that_needs_more_memory_than_there_is_is_refused_before_it_starts(tmp_path):
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-2, 2, (60, 1)), rng.standard_normal(60)
    data = tmp_path / "d.csv"
    data.write_text("x,y\n" + "".join(f"{a!r},{b!r}\n" for a, b in zip(X[:, 0].tolist(), y.tolist())))
    reg = DeepGPRegressor(model="LV-GP", iterations=2, num_inducing=8, predict_samples=20, progress=False).fit(X, y)
    reg.columns_ = {"inputs": ["x"], "target": "y"}
    reg.save(tmp_path / "m.safetensors")
    reg.predict_samples = 10**7  # a file may ask for this many
    reg.save(tmp_path / "big.safetensors")
    out = limited(f"""
        from deepgp.cli import main
        from deepgp import DeepGPRegressor, MemoryBudgetError
        rc = [main(["predict", {str(tmp_path / "m.safetensors")!r}, {str(data)!r}, "--predict-samples", "10000000"]),
              main(["predict", {str(tmp_path / "big.safetensors")!r}, {str(data)!r}]),
              main(["evaluate", {str(tmp_path / "m.safetensors")!r}, {str(data)!r}, "--predict-samples", "10000000"]),
              main(["predict", {str(tmp_path / "m.safetensors")!r}, {str(data)!r}, "--samples", "10000000"]),
              main(["plot", "posterior", {str(tmp_path / "m.safetensors")!r}, "--samples", "10000000",
                    "--out", {str(tmp_path / "p.png")!r}]),
              main(["plot", "marginals", {str(tmp_path / "m.safetensors")!r}, "--data", {str(data)!r},
                    "--samples", "10000000", "--out", {str(tmp_path / "p.png")!r}]),
              main(["plot", "prior", "--draws", "100000", "--out", {str(tmp_path / "p.png")!r}])]
        reg = DeepGPRegressor.load({str(tmp_path / "m.safetensors")!r})
        X = np.linspace(-2, 2, 60)[:, None]
        said = []
        for call in (lambda: reg.model_.sample_predictive(X, 10**7), lambda: reg.sample(X, 10**7),
                     lambda: reg.model_.predictive_log_density(X, X, 10**7, "kde"),
                     lambda: reg.set_params(predict_samples=10**7).predict_quantiles(X, 0.5)):
            try:
                call()
            except MemoryBudgetError as err:
                said.append(str(err))
        print(json.dumps({{"rc": rc, "said": said}}))
        """)
    assert out["rc"] == [1, 1, 1, 1, 1, 1, 2], out["stderr"]
    lines = out["stderr"].strip().splitlines()
    assert len(lines) == 7
    # (the second asks through the file's predict_samples, which the message names beside the option)
    options = ["--predict-samples=10000000", "--predict-samples=10000000 (the model file's predict_samples)",
               "--predict-samples=10000000"] + ["--samples=10000000"] * 3
    for line, option in zip(lines, options):
        assert f"error: {option} needs about " in line and "more than the 1.07 GB available" in line, line
    assert "GB of memory for the predictive quantiles at 60 points" in lines[0]
    assert lines[-1] == "deepgp plot: error: num_draws must be at most 100 (a row or column of panels each), got 100000"
    assert not (tmp_path / "p.png").exists()
    assert [s.split(" needs")[0] for s in out["said"]] == [
        "num_samples=10000000", "n=10000000", "num_samples=10000000", "predict_samples=10000000"]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/self/status (Linux)")
def test_the_budget_is_within_the_processs_address_space_limit():
    """Under ``ulimit -v`` an allocation past the limit fails as one past the memory does, so the budget
    (what a refusal compares with) is at most the limit less what the process maps already."""
    code = ("import resource, sys; from deepgp import memory; "
            "mapped = memory._status('VmSize'); cap = int(mapped + 2**30); "
            "resource.setrlimit(resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY)); "
            "room = memory.available(); print(room <= cap - memory._status('VmSize') + 1, room > 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]
