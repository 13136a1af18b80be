"""Figures: written, non-empty, and the numbers behind them are right."""

import os

import numpy as np
import pytest

import deepgp
from deepgp import GPLayer, plotting


def test_density_grid_integrates_to_one(fitted_lv):
    model, _ = fitted_lv
    yg = np.linspace(-4, 4, 400)
    logp = plotting.log_density_grid(model, np.array([-1.0, 0.5]), yg, num_samples=100)
    assert logp.shape == (400, 2)
    mass = np.exp(logp).sum(0) * (yg[1] - yg[0])
    np.testing.assert_allclose(mass, 1.0, atol=0.02)


def test_prior_draw_fans_out_only_with_latent_variables():
    x = np.linspace(-2, 2, 50)
    w = np.linspace(-2, 2, 5)
    for spec, fan in [("GP-GP", False), ("LV-GP", True)]:
        model = deepgp.DeepGP.from_spec(spec, x[:, None], np.zeros((50, 1)), num_inducing=8, hidden_dim=1)
        f = plotting.prior_draw(model, x, w, seed=1)
        assert f.shape == (5, 50)
        assert (np.ptp(f, axis=0).mean() > 0.1) == fan
        np.testing.assert_array_equal(f, plotting.prior_draw(model, x, w, seed=1))  # reproducible


def test_figures_are_written(fitted_lv, bimodal_data, tmp_path):
    model, _ = fitted_lv
    (x, y), (xt, _) = bimodal_data
    figs = {
        "prior.png": plotting.prior_figure(["GP", "LV-GP-GP", "GP-LV-GP"], num_draws=2, resolution=60),
        "posterior.pdf": plotting.posterior_figure({"LV-GP": model}, (-2, 2), (-1.5, 1.5), data=(x, y), resolution=40,
                                                   num_samples=50),
        "marginals.png": plotting.marginals_figure({"LV-GP": model}, xt, num_points=5, num_samples=200),
    }
    for name, fig in figs.items():
        path = plotting.save_figure(fig, tmp_path / name)
        assert path.stat().st_size > 5000
    with pytest.raises(ValueError, match="the folder .*sub does not exist"):  # none is made
        plotting.save_figure(plotting.prior_figure("GP", num_draws=1, resolution=10), tmp_path / "sub" / "x.png")
    assert not (tmp_path / "sub").exists()
    with pytest.raises(ValueError, match="must end in one of"):
        plotting.save_figure(plotting.prior_figure("GP", num_draws=1, resolution=10), tmp_path / "x.svg")


def test_bad_models_are_refused():
    X = np.random.default_rng(0).standard_normal((20, 2))
    two_inputs = deepgp.DeepGP.from_spec("GP", X, X[:, :1], num_inducing=5)
    with pytest.raises(ValueError, match="1 input"):
        plotting.log_density_grid(two_inputs, np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="1-D input"):
        plotting.prior_draw(two_inputs, np.zeros(3), np.zeros(1))
    with pytest.raises(ValueError, match="expected a DeepGP"):
        plotting.log_density_grid("model.pt", np.zeros(3), np.zeros(3))


def test_a_failed_figure_leaves_the_old_file(tmp_path, monkeypatch):
    import matplotlib.figure

    from deepgp.plotting import prior_figure, save_figure

    path = save_figure(prior_figure(["GP"], num_draws=1, resolution=20), tmp_path / "prior.png")
    good = path.read_bytes()

    def fail(self, *args, **kwargs):
        raise RuntimeError("renderer failed")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", fail)
    with pytest.raises(RuntimeError, match="renderer failed"):
        save_figure(prior_figure(["GP"], num_draws=1, resolution=20), path)
    assert path.read_bytes() == good and os.listdir(tmp_path) == ["prior.png"]


def test_importing_the_figures_leaves_the_users_backend_alone():
    import subprocess
    import sys

    code = "import matplotlib; matplotlib.use('svg'); import deepgp.plotting; print(matplotlib.get_backend())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "svg"


def test_prior_figures_use_the_papers_unit_lengthscale(monkeypatch):
    # the paper's Figure 3: "all the GP layers ... use the RBF kernel with unit lengthscale"
    # (training starts at sqrt(D_in) instead: the LV-GP's final layer has 2 inputs)
    seen = []
    draw = plotting.prior_draw

    def spy(model, *args, **kwargs):
        seen.append([layer.kernel.lengthscale().tolist() for layer in model.layers if isinstance(layer, GPLayer)])
        return draw(model, *args, **kwargs)

    monkeypatch.setattr(plotting, "prior_draw", spy)
    plotting.prior_figure(["LV-GP-GP"], num_draws=1, resolution=10)
    assert seen and all(abs(v - 1.0) < 1e-9 for layers in seen for ls in layers for v in ls)
    seen.clear()
    plotting.prior_figure(["LV-GP"], num_draws=1, resolution=10, lengthscale=None)
    assert abs(seen[0][-1][0] - 2 ** 0.5) < 1e-6  # the training initialisation, √D_in (float32 torch.full)
