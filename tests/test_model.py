import math

import numpy as np
import pytest
import torch

import deepgp
from conftest import only_meta_builds
from deepgp import GPLayer, LatentVariableLayer
from deepgp.architectures import initial_inducing, principal_directions
from deepgp.conditional import inverse_cholesky_zz
from deepgp.config import INNER_SAMPLING, parse_spec
from deepgp.linalg import seeded

SPECS = ["GP", "GP-GP", "GP-GP-GP", "LV-GP", "LV-GP-GP", "LV-GP-GP-GP", "GP-LV-GP", "LV-LV-GP", "GP-LV-GP-LV-GP"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((60, 3)), rng.standard_normal(60)


@pytest.mark.parametrize("spec", SPECS)
def test_every_spec_builds_and_gives_finite_bounds(spec, data):
    x, y = data
    model = deepgp.DeepGP.from_spec(spec, x, y, num_inducing=16, hidden_dim=5, latent_dim=2)
    kinds = ["LV" if isinstance(layer, LatentVariableLayer) else "GP" for layer in model.layers]
    assert "-".join(kinds) == spec and model.spec == spec
    for layer in model.layers[:-1]:
        if isinstance(layer, GPLayer):
            assert layer.output_dim == 3 and layer.num_gps == 5
    assert model.final_layer.output_dim == 1
    for method in ("vi", "iw"):
        for sampling in INNER_SAMPLING:
            bound = model.elbo(x[:20], y[:20], method=method, num_samples=4, inner_sampling=sampling)
            assert bound.shape == () and torch.isfinite(bound)
    assert model.sample_predictive(x[:7], 11).shape == (11, 7, 1)


def test_batch_draws_share_each_sample_index_across_points_and_keep_a_points_samples_independent():
    """propagate_posterior "batch" against "independent", K = 20,000 draws of the final layer's mean at three
    points (two of them the same pair (x, y)): the same per-point mean and variance; a point's samples
    uncorrelated in both; across points, uncorrelated when independent, one shared draw in "batch"."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((6, 1)), rng.standard_normal((6, 1))
    model = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=4, hidden_dim=2, inner_q_sqrt=0.5,
                                    encoder_hidden=(3,), seed=0)
    with torch.no_grad(), seeded(5):
        model.final_layer.q_mu.copy_(torch.randn_like(model.final_layer.q_mu))
    X, Y = torch.from_numpy(x)[[0, 0, 1]], torch.from_numpy(y)[[0, 0, 1]]
    K, tol = 20000, 4 / math.sqrt(20000)
    with torch.no_grad(), seeded(1):
        draws = {mode: model.propagate_posterior(X, Y, K, mode).mean[..., 0].numpy()
                 for mode in ("independent", "batch")}
    ind, bat = draws["independent"], draws["batch"]
    assert bat.shape == (3, K)
    assert np.all(np.abs(bat.mean(1) - ind.mean(1)) < 4 * np.sqrt(2 * ind.var(1) / K))
    np.testing.assert_allclose(bat.var(1), ind.var(1), rtol=0.06)
    for g in (ind, bat):
        assert abs(np.corrcoef(g[0, :-1], g[0, 1:])[0, 1]) < tol  # sample k against k + 1 of one point
    assert abs(np.corrcoef(ind)[0, 1]) < tol and abs(np.corrcoef(ind)[0, 2]) < tol
    assert np.corrcoef(bat)[0, 1] > 0.5 and np.corrcoef(bat)[0, 2] > 0.5


def test_dimension_bookkeeping_follows_the_paper():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((300, 4)), rng.standard_normal((300, 1))
    model = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=32, latent_dim=1)
    gp1, gp2 = model.layers[1], model.layers[2]
    assert gp1.input_dim == 5 and gp1.output_dim == 4 and gp2.input_dim == 4
    assert gp1.Z.shape == (32, 5) and gp2.Z.shape == (32, 4)
    # k-means inducing inputs shared by the data columns; latent column padded with N(0, 1)
    torch.testing.assert_close(gp1.Z[:, :4], gp2.Z)
    torch.testing.assert_close(gp1.kernel.lengthscale(), torch.full((5,), 5**0.5, dtype=torch.float64))
    # W has orthonormal columns (PCA directions), zero for GPs beyond D
    W = gp1.W
    torch.testing.assert_close(W.T[:4] @ W[:, :4], torch.eye(4, dtype=torch.float64))
    assert torch.all(W[:, 4] == 0)
    # inner kernel variance fixed at 1, final one trained; inner q(v) starts near-deterministic
    assert not gp1.kernel.variance.psi.requires_grad and model.final_layer.kernel.variance.psi.requires_grad
    assert float(gp1.q_sqrt.detach().diagonal(dim1=-2, dim2=-1).max()) == pytest.approx(1e-5)


@pytest.mark.parametrize("spec", ["GP-GP-GP", "LV-GP-GP", "GP-LV-GP"])
def test_hidden_width_inner_layers_are_gpfluxs_architecture(spec):
    """inner_width="hidden": each inner layer outputs its hidden_dim values over a fixed linear mean,
    the PCA directions W in the first layer (zero rows for latent inputs), the identity after; the
    later layers' inducing inputs are the first layer's pushed through W."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((300, 4)) @ rng.standard_normal((4, 4)), rng.standard_normal((300, 1))
    model = deepgp.DeepGP.from_spec(spec, x, y, num_inducing=32, hidden_dim=3, inner_width="hidden")
    gps = [layer for layer in model.layers if isinstance(layer, GPLayer)]
    latent = [isinstance(layer, LatentVariableLayer) for layer in model.layers]
    first, second = gps[0], gps[1]
    assert first.input_dim == 4 + latent[0] and first.output_dim == 3 and first.W is None
    assert second.input_dim == 3 + ("LV" in spec[1:]) and model.input_dim == 4
    W = first.P[:4]
    torch.testing.assert_close(W.T @ W, torch.eye(3, dtype=torch.float64))  # orthonormal PCA directions
    assert torch.all(first.P[4:] == 0)
    if second.P is not None:  # (GP-GP-GP's middle layer: the identity mean)
        torch.testing.assert_close(second.P, torch.eye(3, dtype=torch.float64))
    torch.testing.assert_close(second.Z[:, :3], first.Z[:, :4] @ W)
    H = torch.from_numpy(x[:6, None, :])
    if latent[0]:
        H = torch.cat([H, torch.zeros(6, 1, 1, dtype=torch.float64)], -1)
    g = first.sample(H)
    torch.testing.assert_close(first.project(H, g), H @ first.P + g)
    for method in ("vi", "iw"):
        assert torch.isfinite(model.elbo(x[:20], y[:20], method=method, num_samples=3))


@pytest.mark.parametrize("spec", ["LV-GP-GP", "GP-LV-GP-LV-GP", "GP-GP-GP"])
def test_the_default_architecture_is_the_papers(spec):
    """Below HIDDEN_WIDTH_FROM points inner_width's default ("auto") leaves the [W, I] layers and their random
    draws as they were: every state equal, bit for bit, to the initialisation from before inner_width (written
    out here: Z0 in the data's columns of every GP layer, N(0, 1) draws in the latent ones, one rng in layer
    order, W in every inner layer)."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((100, 4)), rng.standard_normal((100, 1))
    a = deepgp.DeepGP.from_spec(spec, x, y, num_inducing=16, hidden_dim=3, seed=5)
    b = deepgp.DeepGP.from_spec(spec, x, y, num_inducing=16, hidden_dim=3, seed=5, inner_width="input")
    gps = [layer for layer in a.layers if isinstance(layer, GPLayer)]
    assert all(layer.P is None for layer in gps) and all(layer.W is not None for layer in gps[:-1])
    assert not any(name.endswith(".P") for name in a.state_dict())

    rng = np.random.default_rng(5)
    with seeded(5):
        Z0 = initial_inducing(x, 16, rng)
        old = deepgp.DeepGP.build(a.config, 4, 1, num_data=100)
    W = torch.from_numpy(principal_directions(x, 3))
    with torch.no_grad():
        for layer in old.layers:
            if isinstance(layer, GPLayer):
                Z = rng.standard_normal((16, layer.input_dim))
                Z[:, : min(layer.input_dim, 4)] = Z0[:, : min(layer.input_dim, 4)]
                layer.Z.copy_(torch.from_numpy(Z))
                if layer.W is not None:
                    layer.W.copy_(W)
    for model in (a, b):
        assert model.state_dict().keys() == old.state_dict().keys()
        for (n, p), q in zip(model.state_dict().items(), old.state_dict().values()):
            torch.testing.assert_close(p, q, rtol=0, atol=0, msg=n)


def test_auto_inner_width_is_resolved_where_the_model_is_built(tmp_path, monkeypatch):
    """inner_width="auto" builds GPflux's layers from HIDDEN_WIDTH_FROM training points on, the paper's below;
    the model records (and saves) the concrete width, so that a file reloads as it was built; a file from
    before the setting existed (no inner_width) was built with the paper's layers, however large its N."""
    from deepgp import config

    monkeypatch.setattr(config, "HIDDEN_WIDTH_FROM", 60)  # (the rule at a size a test builds quickly)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((80, 3)), rng.standard_normal((80, 1))
    small = deepgp.DeepGP.from_spec("LV-GP-GP", x[:59], y[:59], num_inducing=8)
    large = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=8)
    assert (small.config.inner_width, large.config.inner_width) == ("input", "hidden")
    assert small.layers[1].W is not None and small.layers[1].P is None
    assert large.layers[1].W is None and large.layers[1].P is not None and large.layers[1].output_dim == 5
    explicit = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=8, inner_width="hidden")
    for (n, p), q in zip(large.state_dict().items(), explicit.state_dict().values()):
        torch.testing.assert_close(p, q, rtol=0, atol=0, msg=n)  # "auto" is that width, draw for draw

    large.save(tmp_path / "large.pt")
    monkeypatch.setattr(config, "HIDDEN_WIDTH_FROM", 10**6)  # (a later rule does not change a saved model)
    loaded = deepgp.DeepGP.load(tmp_path / "large.pt")
    assert loaded.config.inner_width == "hidden"
    np.testing.assert_array_equal(large.predictive_log_density(x, y, 10, seed=1),
                                  loaded.predictive_log_density(x, y, 10, seed=1))

    monkeypatch.setattr(config, "HIDDEN_WIDTH_FROM", 60)
    old = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=8, inner_width="input")
    tree = old.to_tree()
    del tree["config"]["inner_width"]
    assert deepgp.DeepGP.from_tree(tree).config.inner_width == "input"
    with pytest.raises(ValueError, match="inner_width='auto' is resolved from num_data"):
        deepgp.DeepGP.build(deepgp.ModelConfig(), 3, 1)  # (built without data: the width must be named)
    assert deepgp.DeepGP.build(deepgp.ModelConfig(inner_width="hidden"), 3, 1).config.inner_width == "hidden"


def test_small_data_uses_the_data_as_inducing_inputs():
    x, y = np.arange(10.0).reshape(5, 2), np.arange(5.0)
    model = deepgp.DeepGP.from_spec("GP", x, y, num_inducing=128)
    torch.testing.assert_close(model.final_layer.Z, torch.from_numpy(x))


@pytest.mark.parametrize("bad", ["", "GP-LV", "LV", "GP-XX-GP", "GP--GP", None, 3])
def test_bad_spec_is_a_clear_error(bad, data):
    x, y = data
    with pytest.raises(ValueError, match="spec|token"):
        deepgp.DeepGP.from_spec(bad, x, y)


def test_propagating_a_latent_model_without_targets_names_y(data):
    x, y = data
    model = deepgp.DeepGP.from_spec("GP-LV-GP", x, y, num_inducing=8)
    X = torch.from_numpy(x[:4])
    assert model.propagate_posterior(X, torch.from_numpy(y[:4, None]), 2).mean.shape == (4, 2, 1)
    with pytest.raises(ValueError, match="Y is needed for q\\(w \\| x, y\\) of GP-LV-GP"):
        model.propagate_posterior(X, None, 2)


def test_parse_spec_is_case_insensitive():
    assert parse_spec("lv-gp-Gp") == ["LV", "GP", "GP"]


def test_construction_is_reproducible_under_seed(data):
    x, y = data
    a = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=16, seed=3)
    b = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=16, seed=3)
    for (n, p), (_, q) in zip(a.state_dict().items(), b.state_dict().items()):
        torch.testing.assert_close(p, q, msg=n)


def test_save_load_round_trip(tmp_path, data):
    x, y = data
    for spec, M, width in [("LV-GP-GP", 16, "input"), ("GP", 500, "input"), ("GP-LV-GP", 16, "hidden")]:
        # (k-means inducing inputs, the data itself as N < M, inner layers with linear means)
        model = deepgp.DeepGP.from_spec(spec, x, y, num_inducing=M, inner_width=width)
        deepgp.fit(model, x, y, "iw", 2, iterations=3, progress=False)
        model.save(tmp_path / "m.pt")
        loaded = deepgp.DeepGP.load(tmp_path / "m.pt")
        for (n, p), (_, q) in zip(model.state_dict().items(), loaded.state_dict().items()):
            torch.testing.assert_close(p, q, msg=n)
        np.testing.assert_array_equal(model.predictive_log_density(x, y, 20, seed=1),
                                      loaded.predictive_log_density(x, y, 20, seed=1))
    (tmp_path / "junk.pt").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a model saved by deepgp"):
        deepgp.DeepGP.load(tmp_path / "junk.pt")


def test_matern_kernel_builds_and_trains(data):
    x, y = data
    model = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=8, kernel="matern52")
    history = deepgp.fit(model, x, y, "iw", 3, iterations=5, progress=False)
    assert np.isfinite(history).all() and model.config.kernel == "matern52"


def test_float32_mode_keeps_the_bound_and_the_float64_pieces(tmp_path, data):
    x, y = data
    m64 = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=16, seed=3)
    m32 = deepgp.DeepGP.from_spec("LV-GP-GP", x, y, num_inducing=16, seed=3, dtype=torch.float32)
    assert m32.dtype == torch.float32 and {p.dtype for p in m32.parameters()} == {torch.float32}
    # Kzz's Cholesky runs in float64 and is cast down: it matches the float64 model's to float32 rounding
    Lz_inv32, Lz_inv64 = (inverse_cholesky_zz(m.final_layer.kernel, m.final_layer.Z) for m in (m32, m64))
    torch.testing.assert_close(Lz_inv32, Lz_inv64.float(), rtol=1e-5, atol=1e-5)
    for method in ("vi", "iw"):
        with torch.no_grad(), deepgp.linalg.seeded(0):
            b64 = m64.elbo(x, y, method, 4)
        with torch.no_grad(), deepgp.linalg.seeded(0):
            b32 = m32.elbo(x, y, method, 4)
        assert b32.dtype == torch.float32
        assert abs(float(b32) - float(b64)) <= 1e-4 * abs(float(b64))  # same draws, float32 arithmetic
    history = deepgp.fit(m32, x, y, "iw", 3, iterations=5, progress=False)  # natural gradients in float64
    assert np.isfinite(history).all() and m32.final_layer.q_sqrt.dtype == torch.float32
    m32.save(tmp_path / "m32.pt")
    loaded = deepgp.DeepGP.load(tmp_path / "m32.pt")
    assert loaded.dtype == torch.float32 and loaded.config.dtype == "float32"
    with pytest.raises(ValueError, match="dtype must be float64"):
        deepgp.DeepGP.from_spec("GP", x, y, num_inducing=8, dtype=torch.float16)


def test_settings_that_would_make_every_number_nan_are_refused(data):
    x, y = data
    for value in (float("nan"), float("inf"), 0.0, -1.0, 1e-7, "0.1", True):
        with pytest.raises(ValueError, match="likelihood_variance must be a finite number > 1e-06"):
            deepgp.DeepGP.from_spec("GP", x, y, num_inducing=8, likelihood_variance=value)
    with pytest.raises(ValueError, match="inner_q_sqrt must be a finite number > 0"):
        deepgp.DeepGP.from_spec("GP-GP", x, y, num_inducing=8, inner_q_sqrt=float("nan"))
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        deepgp.DeepGP.from_spec("GP", x, y, num_inducing=8, seed=-1)
    with pytest.raises(ValueError, match="encoder_hidden must be an integer >= 1"):
        deepgp.DeepGP.from_spec("LV-GP", x, y, num_inducing=8, encoder_hidden=(20, 0))


def test_a_failed_save_keeps_the_model_that_was_there(tmp_path, data):
    x, y = data
    model = deepgp.DeepGP.from_spec("GP", x, y, num_inducing=8)
    path = tmp_path / "m.safetensors"
    model.save(path)
    good = path.read_bytes()
    object.__setattr__(model.config, "kernel", object())  # a setting that cannot be written
    with pytest.raises(ValueError, match="cannot save a value of type object .at config/kernel."):
        model.save(path)
    assert path.read_bytes() == good and deepgp.DeepGP.load(path).spec == "GP"
    with pytest.raises(ValueError, match="the folder .*nowhere does not exist"):
        model.save(tmp_path / "nowhere" / "m.safetensors")


def test_damaged_model_files_are_refused_by_field(tmp_path, data):
    from deepgp import storage

    x, y = data
    tree = deepgp.DeepGP.from_spec("LV-GP", x, y, num_inducing=8).to_tree()
    cases = {
        "lacks the field 'config'": {k: v for k, v in tree.items() if k != "config"},
        "lacks the field 'input_dim'": {k: v for k, v in tree.items() if k != "input_dim"},
        "num_inducing must be an integer >= 1, got '8'": {**tree, "config": {**tree["config"], "num_inducing": "8"}},
        r"unknown field\(s\) \['shell'\]": {**tree, "config": {**tree["config"], "shell": "rm -rf /"}},
        "describes 29000000585 parameters but it holds 672": {**tree, "input_dim": 10**9},
        "describes 643 parameters but it holds 672": {**tree, "input_dim": 2},
        "parameters do not fit its architecture":  # as many values, in another shape
            {**tree, "state": {**tree["state"], "layers.1.q_mu": tree["state"]["layers.1.q_mu"].T.contiguous()}},
        "NaN, infinite or absurdly large parameters":
            {**tree, "state": {**tree["state"],
                               "likelihood.variance.psi": torch.tensor([math.nan], dtype=torch.float64)}},
        # a tensor of another dtype would be cast on loading, to other values (bools to 0 and 1)
        "layers.1.Z is stored as torch.bool, where the model holds torch.float64":
            {**tree, "state": {**tree["state"], "layers.1.Z": tree["state"]["layers.1.Z"] > 0}},
        "layers.1.Z is stored as torch.float16, where the model holds torch.float64":
            {**tree, "state": {**tree["state"], "layers.1.Z": tree["state"]["layers.1.Z"].half()}},
        "likelihood.variance.psi is stored as torch.int64, where the model holds torch.float64":
            {**tree, "state": {**tree["state"], "likelihood.variance.psi": torch.tensor([1])}},
        "state holds values that are not tensors": {**tree, "state": {**tree["state"], "extra": [1, 2]}},
        "absurdly large":
            {**tree, "state": {**tree["state"], "layers.1.q_mu": torch.full((8, 1), 1e300, dtype=torch.float64)}},
    }
    for message, damaged in cases.items():
        storage.write(tmp_path / "d", storage.MODEL, damaged)
        with pytest.raises(ValueError, match=message):
            deepgp.DeepGP.load(tmp_path / "d")
    # a setting missing from the file (one added after it was written) takes its declared default
    storage.write(tmp_path / "d", storage.MODEL,
                  {**tree, "config": {k: v for k, v in tree["config"].items() if k != "kernel"}})
    assert deepgp.DeepGP.load(tmp_path / "d").config.kernel == "rbf"


def test_a_small_file_cannot_ask_for_a_huge_model(tmp_path, data, monkeypatch):
    from deepgp import storage

    x, y = data
    tree = deepgp.DeepGP.from_spec("LV-GP", x, y, num_inducing=8).to_tree()
    only_meta_builds(monkeypatch)  # refused before anything is allocated
    for config in ({"num_inducing": 40_000}, {"encoder_hidden": (10**9, 20)}):
        storage.write(tmp_path / "big", storage.MODEL, {**tree, "config": {**tree["config"], **config}})
        with pytest.raises(ValueError, match="describes .* parameters but it holds 672"):
            deepgp.DeepGP.load(tmp_path / "big")
    storage.write(tmp_path / "extra", storage.MODEL, {**tree, "script": "x"})
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['script'\]"):
        deepgp.DeepGP.load(tmp_path / "extra")


def test_the_papers_encoder_can_be_chosen_and_is_saved(tmp_path):
    # the paper's text: 10-10 tanh units, std exp(o - 5); the released code (the default): softplus(o - 3)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(40, 2)), rng.normal(size=(40, 1))
    model = deepgp.DeepGP.from_spec("LV-GP", x, y, num_inducing=8, encoder_hidden=(10, 10), encoder_std="exp")
    encoder = model.layers[0].encoder
    assert (encoder.std_map, encoder.std_offset) == ("exp", -5.0)
    assert [lin.out_features for lin in encoder.linears] == [10, 10, 2]
    with torch.no_grad():
        _, std = encoder(torch.as_tensor(x), torch.as_tensor(y))
    # at the start o ≈ 0: std ≈ exp(-5) (the code's softplus(-3) ≈ 0.049)
    assert abs(float(std.mean()) - math.exp(-5)) < 0.01
    model.save(tmp_path / "m.safetensors")
    back = deepgp.DeepGP.load(tmp_path / "m.safetensors")
    assert back.config.encoder_std == "exp" and back.layers[0].encoder.std_map == "exp"
    default = deepgp.DeepGP.from_spec("LV-GP", x, y, num_inducing=8).layers[0].encoder
    assert (default.std_map, default.std_offset) == ("softplus", -3.0)
    with pytest.raises(ValueError, match="encoder_std must be one of"):
        deepgp.DeepGP.from_spec("LV-GP", x, y, encoder_std="relu")
