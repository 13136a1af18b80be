"""benchmarks/time_to_quality.py: a run's key names what ran, whatever way it was asked for."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "time_to_quality.py"


@pytest.fixture(scope="module")
def ttq():
    spec = importlib.util.spec_from_file_location("time_to_quality", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("time_to_quality", module)
    spec.loader.exec_module(module)
    return module


def test_the_key_holds_the_settings_that_differ_from_the_defaults_for_these_data(ttq):
    """A default asked for explicitly is the default run; inner_width is compared as "auto" resolves for
    the run's training points: "hidden" on 5,000 or more is the default run, "input" there is not."""
    assert ttq.without_defaults({"recipe": "fast", "num_inducing": 128, "gamma": 0.05}, 100) == {"gamma": 0.05}
    assert ttq.without_defaults({"inner_width": "input"}, 100) == {}
    assert ttq.without_defaults({"inner_width": "hidden"}, 100) == {"inner_width": "hidden"}
    assert ttq.without_defaults({"inner_width": "hidden"}, 5000) == {}
    assert ttq.without_defaults({"inner_width": "auto"}, 5000) == {}
    assert ttq.without_defaults({"inner_width": "input"}, 5000) == {"inner_width": "input"}


def test_a_value_its_setting_refuses_stops_the_run_in_one_line(ttq):
    """``--set inner_width=wide``: the run stops with the setting's own message, not a traceback from
    building the run's key."""
    args = type("Args", (), dict(model="LV-GP-GP", method="iw", recipe="fast", split=0))()
    with pytest.raises(SystemExit, match="--set: .*inner_width"):
        ttq.run_configs(args, {"inner_width": "wide"})
    with pytest.raises(SystemExit, match="unknown setting"):
        ttq.run_configs(args, {"widht": 3})
    with pytest.raises(SystemExit, match="given by the options"):
        ttq.run_configs(args, {"recipe": "paper"})
    model, train = ttq.run_configs(args, {"inner_width": "input", "lr": 0.01})
    assert model.inner_width == "input" and train.lr == 0.01 and train.num_samples == 5


def test_set_values_are_read_as_their_settings_take_them(ttq):
    assert ttq.parse_overrides(["lr=0.02", "encoder_hidden=10,10", "dreg=true", "encoder_std=EXP"]) == {
        "lr": 0.02, "encoder_hidden": (10, 10), "dreg": True, "encoder_std": "EXP"}
    args = type("Args", (), dict(model="LV-GP-GP", method="iw", recipe="fast", split=0))()
    model, _ = ttq.run_configs(args, {"encoder_hidden": (10, 10), "encoder_std": "EXP"})
    assert model.encoder_hidden == (10, 10) and model.encoder_std == "exp"
