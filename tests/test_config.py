"""The settings' declarations: defaults, checks that name the setting, normalised values."""

import pytest

from deepgp.config import HIDDEN_WIDTH_FROM, ModelConfig, TrainConfig, parse_spec, settings_of


def test_defaults_are_valid_and_values_are_normalised():
    assert ModelConfig().model == "LV-GP-GP" and TrainConfig().method == "iw"
    m = ModelConfig(model="lv-gp", kernel="RBF", encoder_hidden=[10, 10], dtype="torch.float32")
    assert (m.model, m.kernel, m.encoder_hidden, m.dtype) == ("LV-GP", "rbf", (10, 10), "float32")
    assert parse_spec(" gp - LV -GP") == ["GP", "LV", "GP"]
    assert settings_of(TrainConfig, {"lr": 0.1, "model": "GP"}) == {"lr": 0.1}


@pytest.mark.parametrize("config, settings, message", [
    (ModelConfig, {"model": "GP-LV"}, "must end in 'GP'"),
    (ModelConfig, {"num_inducing": 0}, "num_inducing must be an integer >= 1"),
    (ModelConfig, {"kernel": "cosine"}, "kernel must be one of"),
    (ModelConfig, {"likelihood_variance": 1e-7}, "likelihood_variance must be a finite number > 1e-06"),
    (ModelConfig, {"likelihood_variance": 1e31}, "likelihood_variance must be at most 1e30"),
    (ModelConfig, {"train_inner_kernel_variance": 1}, "train_inner_kernel_variance must be True or False"),
    (ModelConfig, {"encoder_hidden": 20}, "encoder_hidden must be a sequence"),
    (ModelConfig, {"dtype": "float16"}, "dtype must be float64 .the default. or float32"),
    (ModelConfig, {"inner_width": "wide"}, "inner_width must be one of"),
    (TrainConfig, {"method": "ml"}, "method must be one of"),
    (TrainConfig, {"gamma": 2.0}, r"gamma must be in \(0, 1\]"),
    (TrainConfig, {"decay": 0.0}, "decay must be a finite number > 0"),
    (TrainConfig, {"iterations": -1}, "iterations must be an integer >= 0"),
    (TrainConfig, {"natgrad": "yes"}, "natgrad must be True or False"),
    (TrainConfig, {"seed": 2**64}, "seed must be an integer <="),
])
def test_a_bad_setting_is_refused_by_name(config, settings, message):
    with pytest.raises(ValueError, match=message):
        config(**settings)


def test_the_configs_are_exported_at_the_top_level():
    import deepgp

    assert deepgp.ModelConfig is ModelConfig and deepgp.TrainConfig is TrainConfig
    assert {"ModelConfig", "TrainConfig"} <= set(deepgp.__all__)
    assert all(hasattr(deepgp, name) for name in deepgp.__all__)


def test_auto_inner_width_is_hidden_from_the_threshold_on():
    """inner_width="auto" (the default) resolves from N: the paper's "input" below HIDDEN_WIDTH_FROM training
    points, GPflux's "hidden" from it on; a concrete width is left as it is, whatever N."""
    auto = ModelConfig()
    assert auto.inner_width == "auto" and HIDDEN_WIDTH_FROM == 5000
    assert auto.resolved(HIDDEN_WIDTH_FROM - 1).inner_width == "input"
    assert auto.resolved(HIDDEN_WIDTH_FROM).inner_width == "hidden"
    assert auto.resolved(1).inner_width == "input" and auto.resolved(10**6).inner_width == "hidden"
    for width in ("input", "hidden"):
        fixed = ModelConfig(inner_width=width)
        assert fixed.resolved(1) is fixed and fixed.resolved(10**6) is fixed
    assert auto.resolved(10**6) == ModelConfig(inner_width="hidden")  # (nothing else changes)
    with pytest.raises(ValueError, match="num_data must be an integer >= 1"):
        auto.resolved(0)


def test_k_left_unset_is_the_methods():
    assert TrainConfig().num_samples is None
    assert TrainConfig(method="iw").resolved().num_samples == 5
    assert TrainConfig(method="vi").resolved().num_samples == 1
    assert TrainConfig(method="vi", num_samples=5).resolved().num_samples == 5  # an explicit K wins
