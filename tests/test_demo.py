"""`deepgp demo --quick` end to end (the latent-variable model must beat the GP on the letters), and the
tutorial, the demo written out, run as written."""

import json
import re
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

import deepgp.commands
import deepgp.demo
from deepgp.cli import main
from deepgp.config import RECIPE_ITERATIONS, RECIPE_VALUES
from deepgp.demo import LONG, QUICK, DemoConfig, config_from_args, run_demo


@pytest.mark.slow
def test_quick_demo_end_to_end(tmp_path, capsys):
    assert main(["demo", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    for name in ("GP", "GP-GP", "LV-GP", "LV-GP-GP"):
        assert f"\n{name:10s} " in out  # a row of the printed table
    record = json.loads((tmp_path / "scores.json").read_text())
    scores = record["scores"]
    assert list(scores) == ["GP", "GP-GP", "LV-GP", "LV-GP-GP"]
    # one Gaussian per x cannot fit three strokes of a letter; LV-GP-GP can (≈ −3.4 vs ≈ −1.3)
    assert scores["LV-GP-GP"]["test_log_density"] > scores["GP"]["test_log_density"] + 1.0
    # the exact density is the yardstick, in the same units: no model reaches it (≈ −0.72)
    assert record["exact"] > max(s["test_log_density"] for s in scores.values())
    assert f"(the exact letters density) {record['exact']:7.3f}" in out
    assert (tmp_path / "demo.png").stat().st_size > 20_000


def test_budget_options():
    assert config_from_args() == DemoConfig()
    assert config_from_args(quick=True) == QUICK
    assert config_from_args(quick=True, iterations=7).iterations == 7
    assert config_from_args(long=True) == LONG
    # --long with another budget keeps the annealing stretched over it
    assert config_from_args(long=True, iterations=80_000) == replace(LONG, iterations=80_000, decay_every=8_000)
    assert config_from_args(iterations=80_000).decay_every is None
    with pytest.raises(ValueError, match="--quick or --long"):
        config_from_args(quick=True, long=True)


def test_long_budget_anneals_as_far_as_the_recipe():
    # the README's figure: its budget is the recipe's annealing stretched, not a schedule of its own
    recipe = RECIPE_VALUES["fast"]
    assert DemoConfig().decay_every is None and QUICK.decay_every is None
    assert LONG.iterations / LONG.decay_every == RECIPE_ITERATIONS["fast"] / recipe["decay_every"]
    assert LONG.iterations > DemoConfig().iterations
    assert LONG.decay_every == 4_000


def test_the_figure_is_the_long_demo():
    # docs/demo.png and docs/scores.json are `deepgp demo --long --out docs`: LONG may not drift from them
    record = json.loads((Path(__file__).parents[1] / "docs" / "scores.json").read_text())
    assert record["config"] == asdict(LONG)
    assert list(record["scores"]) == ["GP", "GP-GP", "LV-GP", "LV-GP-GP"]


@pytest.mark.parametrize("flags, expected", [([], DemoConfig()), (["--quick"], QUICK), (["--long"], LONG),
                                             (["--long", "--iterations", "20000"],
                                              replace(LONG, iterations=20_000, decay_every=2_000))])
def test_the_cli_runs_the_chosen_budget(flags, expected, monkeypatch, tmp_path, capsys):
    seen = {}

    def fake_run_demo(out, models, config, progress):
        seen["config"] = config
        (Path(out) / "scores.json").write_text(json.dumps({"exact": -0.7}))
        return {"GP": {"method": "vi", "test_log_density": -1.3, "seconds": 0.0}}

    monkeypatch.setattr(deepgp.commands, "run_demo", fake_run_demo)
    assert main(["demo", *flags, "--out", str(tmp_path), "--no-progress"]) == 0
    assert seen["config"] == expected


class Stop(Exception):
    """Raised by the recording regressor's fit: the demo stops once its first regressor is made."""


@pytest.fixture
def made(monkeypatch):
    """The keyword arguments of every regressor the demo makes (its fit raises :class:`Stop`)."""
    made = []

    class Recorder:
        def __init__(self, **kwargs):
            made.append(kwargs)

        def fit(self, x, y):
            raise Stop

    monkeypatch.setattr(deepgp.demo, "DeepGPRegressor", Recorder)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    return made


def test_the_demo_trains_with_its_config(made, tmp_path):
    # every budget field reaches the regressor (decay_every None: the recipe's own)
    config = replace(QUICK, num_train=50, num_test=10, iterations=11, decay_every=3)
    with pytest.raises(Stop):
        run_demo(out=tmp_path, models=("LV-GP-GP",), config=config, progress=False)
    assert made[0]["iterations"] == 11 and made[0]["decay_every"] == 3 and made[0]["num_inducing"] == 25
    assert made[0]["method"] == "iw" and made[0]["num_samples"] == config.num_samples
    assert made[0]["kernel"] == "matern32" and made[0]["device"] is None  # (no GPU in this test: the CPU)


def test_the_demo_trains_on_a_gpu_where_there_is_one_and_says_so(made, monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "a test GPU")
    config = replace(QUICK, num_train=50, num_test=10, iterations=2)
    with caplog.at_level("INFO", logger="deepgp"), pytest.raises(Stop):
        run_demo(out=tmp_path, models=("GP",), config=config, progress=False)
    assert made[0]["device"] == "cuda" and "on cuda (a test GPU)" in caplog.text


def test_the_long_budget_keeps_the_papers_kernel():
    # the README's figure was drawn with the RBF (docs/scores.json); the default demo's kernel is the Matérn-3/2
    assert LONG.kernel == "rbf" and config_from_args(long=True, iterations=8_000).kernel == "rbf"
    assert DemoConfig().kernel == QUICK.kernel == "matern32"


def test_quick_and_long_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["demo", "--quick", "--long"])
    assert exit_.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_help_states_the_budgets(capsys):
    # the help's numbers are written out (the CLI does not import torch to print it): they must not drift
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert (f"(default: {DemoConfig().iterations}; {QUICK.iterations} with --quick; {LONG.iterations} with --long)"
            in help_text)


@pytest.mark.slow
def test_tutorial_runs_as_written(tmp_path, monkeypatch, capsys):
    # docs/tutorial.md is the demo written out: its code, pasted as is, must run against the current
    # API (here at the --quick budget, as DemoConfig() is the tutorial's one source of settings)
    text = (Path(__file__).parents[1] / "docs" / "tutorial.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 4 and "DemoConfig()" in blocks[0]
    monkeypatch.setattr(deepgp.demo, "DemoConfig", lambda: replace(QUICK, iterations=100))
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the suite stays on one thread
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for code in blocks[:4]:  # the fifth is `run_demo`, tested above
        exec(compile(code, "tutorial.md", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "GP (VI)        test log density" in printed and "LV-GP-GP (IW)  test log density" in printed
    assert (tmp_path / "letters.png").stat().st_size > 10_000
    assert namespace["x"].shape == (QUICK.num_train, 1)


def test_files_of_another_kind_where_the_demo_writes_are_kept(monkeypatch, tmp_path):
    """A data CSV where demo.png goes, or a JSON file that is not the demo's scores where scores.json goes,
    is refused before any model is fitted and left as it was; the demo's own files are replaced."""
    fitted = []
    monkeypatch.setattr(deepgp.demo, "DeepGPRegressor", lambda **kwargs: fitted.append(kwargs))
    config = replace(QUICK, num_train=50, num_test=10, iterations=2)
    for name, content, message in [("demo.png", b"x,y\n1,2\n", "the figure .* is not a figure"),
                                   ("scores.json", b'{"hi": 1}', "the scores .* is not the scores of deepgp demo")]:
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=message):
            run_demo(out=tmp_path, models=("GP",), config=config, progress=False)
        assert fitted == [] and (tmp_path / name).read_bytes() == content
        (tmp_path / name).unlink()


def test_an_output_it_cannot_write_stops_the_demo_before_training(monkeypatch, tmp_path):
    """A folder where the scores go, or a read-only figure, is refused before any model is fitted, and
    the old figure is kept."""
    import os

    fitted = []
    monkeypatch.setattr(deepgp.demo, "DeepGPRegressor", lambda **kwargs: fitted.append(kwargs))
    config = replace(QUICK, num_train=50, num_test=10, iterations=2)
    old = b"\x89PNG\r\n\x1a\nthe old figure"  # (a PNG's first bytes: a figure, which the demo may replace)
    (tmp_path / "demo.png").write_bytes(old)
    (tmp_path / "scores.json").mkdir()
    with pytest.raises(ValueError, match="the scores .*folder"):
        run_demo(out=tmp_path, models=("GP",), config=config, progress=False)
    assert fitted == [] and (tmp_path / "demo.png").read_bytes() == old
    (tmp_path / "scores.json").rmdir()
    (tmp_path / "demo.png").chmod(0o444)
    if os.access(tmp_path / "demo.png", os.W_OK):
        pytest.skip("this user may write read-only files (root)")
    with pytest.raises(ValueError, match="the figure .*read-only"):
        run_demo(out=tmp_path, models=("GP",), config=config, progress=False)
    assert fitted == [] and (tmp_path / "demo.png").read_bytes() == old
