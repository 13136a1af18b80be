"""The command line: fit → predict → evaluate on a small CSV, plots, and every documented error."""

import csv
import gzip
import json
import re

import numpy as np
import pytest

from deepgp import DeepGPRegressor, cli
from deepgp.cli import build_parser, main

FAST = ["--iterations", "40", "--num-inducing", "8", "--batch-size", "64", "--no-progress"]


def write_csv(path, header, rows):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """train.csv.gz (x1, x2, a text column, y) and test.csv; a model fitted on them by the CLI."""
    d = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(0)

    def rows(n):
        x = rng.uniform(-2, 2, (n, 2))
        y = np.sin(2 * x[:, 0]) + 0.3 * x[:, 1] + 0.1 * rng.standard_normal(n)
        return [[f"{a:.5f}", f"{b:.5f}", "abc"[i % 3], f"{c:.5f}"]
                for i, (a, b, c) in enumerate(zip(x[:, 0], x[:, 1], y))]

    header = ["x1", "x2", "label", "y"]
    train = write_csv(d / "train.csv.gz", header, rows(200))
    test = write_csv(d / "test.csv", header, rows(50))
    model = d / "model.pt"
    assert main(["fit", str(train), "--target", "y", "--model", "GP-GP", "--method", "vi", "--out", str(model),
                 *FAST]) == 0
    return d, train, test, model


def test_fit_predict_evaluate(data, capsys):
    d, train, test, model = data
    out = d / "pred.csv"
    assert main(["predict", str(model), str(test), "--out", str(out), "--quantiles", "0.1,0.9", "--samples", "3"]) == 0
    with open(out) as f:
        table = list(csv.DictReader(f))
    assert len(table) == 50 and list(table[0]) == ["mean", "std", "q0.1", "q0.9", "sample_1", "sample_2", "sample_3"]
    assert all(float(r["q0.1"]) <= float(r["q0.9"]) and float(r["std"]) > 0 for r in table)
    capsys.readouterr()
    assert main(["evaluate", str(model), str(test), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert set(metrics) == {"model", "target", "n", "log_density", "rmse", "crps"} and metrics["n"] == 50
    assert metrics["rmse"] < 1.0 and 0 < metrics["crps"] < metrics["rmse"]  # y has std ≈ 1
    assert main(["evaluate", str(model), str(test)]) == 0
    assert "CRPS" in capsys.readouterr().out


def test_plots(data, tmp_path):
    d, train, test, _ = data
    # a one-input model for the posterior image: --inputs picks the column
    model1 = tmp_path / "one.pt"
    assert main(["fit", str(train), "--target", "y", "--inputs", "x1", "--model", "LV-GP", "--out", str(model1),
                 *FAST]) == 0
    for argv, name in [
        (["plot", "prior", "--models", "GP,LV-GP-GP", "--draws", "2"], "prior.png"),
        (["plot", "posterior", str(model1), "--data", str(test), "--samples", "50"], "post.pdf"),
        (["plot", "posterior", str(model1), "--samples", "50"], "post_nodata.png"),
        (["plot", "marginals", str(d / "model.pt"), "--data", str(test), "--points", "5", "--samples", "200"],
         "marg.png"),
    ]:
        assert main([*argv, "--out", str(tmp_path / name)]) == 0
        assert (tmp_path / name).stat().st_size > 5000


def test_a_source_tree_run_without_installing_names_its_version():
    """``PYTHONPATH=src`` (no installed metadata): the version is pyproject.toml's, as an install records it,
    so a results row or a file written that way still names the code that wrote it."""
    from pathlib import Path

    import deepgp

    tomllib = pytest.importorskip("tomllib")
    pyproject = Path(deepgp.__file__).resolve().parents[2] / "pyproject.toml"
    if not pyproject.exists():
        pytest.skip("deepgp is installed, not a source tree")
    declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    assert deepgp.version.source_version() == declared != "0+unknown"
    assert deepgp.__version__ == declared


def test_a_source_tree_wins_over_an_installed_deepgp_of_another_version(monkeypatch):
    from deepgp import version

    monkeypatch.setattr(version, "distribution_version", lambda name: "9.9")  # an installed deepgp 9.9 beside the tree
    monkeypatch.setattr(version, "source_version", lambda: "0.2.0.dev0")
    assert version.find_version() == "0.2.0.dev0"
    monkeypatch.setattr(version, "source_version", lambda: "0+unknown")  # installed, no tree: its metadata
    assert version.find_version() == "9.9"


def test_help_lists_every_command(capsys):
    parser = build_parser()
    help_text = parser.format_help()
    for cmd in ["demo", "fit", "predict", "evaluate", "plot", "convert"]:
        assert cmd in help_text
    for argv in (["fit", "--help"], ["predict", "--help"], ["evaluate", "--help"], ["plot", "prior", "--help"],
                 ["plot", "posterior", "--help"], ["plot", "marginals", "--help"], ["demo", "--help"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 0
    assert "--target" in capsys.readouterr().out


def test_help_states_each_default_once(capsys):
    texts = {}
    for command in ("fit", "predict", "demo"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        texts[command] = text = " ".join(capsys.readouterr().out.split())
        assert "(default: None)" not in text  # a None default is resolved elsewhere: its help says where
        assert not re.search(r"\(default: [^)]*\) \(default:", text), command  # stated once, not twice
    assert "(default: 128)" in texts["fit"]  # the others keep theirs


def errors_for(tmp_path, data):
    d, train, test, model = data
    bad = write_csv(tmp_path / "bad.csv", ["x1", "x2", "y"], [["1", "", "0.5"], ["2", "3", "oops"], ["2", "3", "0.1"]])
    short = write_csv(tmp_path / "short.csv", ["x1", "x2", "y"], [["1", "2"]])
    only_text = write_csv(tmp_path / "text.csv", ["name", "y"], [["a", "1"], ["b", "2"]])
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    header_only = write_csv(tmp_path / "header.csv", ["x", "y"], [])
    no_x2 = write_csv(tmp_path / "nox2.csv", ["x1", "y"], [["1", "2"], ["3", "4"]])
    fit = ["fit", "--out", str(tmp_path / "m.pt"), *FAST]
    return [
        ([*fit, str(tmp_path / "nope.csv"), "--target", "y"], "no such file"),
        ([*fit, str(empty), "--target", "y"], "is empty"),
        ([*fit, str(header_only), "--target", "y"], "no data rows"),
        ([*fit, str(short), "--target", "y"], "line 2: 2 fields"),
        ([*fit, str(train), "--target", "z"], "no column 'z'"),
        ([*fit, str(train), "--target", "label"], "non-numeric column(s) 'label'"),
        ([*fit, str(train), "--target", "y", "--inputs", "x1,label"],
         "non-numeric column(s) 'label' (e.g. 'a' on line 2)"),
        ([*fit, str(train), "--target", "y", "--inputs", "x1,x9"], "no column(s) ['x9']"),
        ([*fit, str(train), "--target", "y", "--inputs", "x1,y"], "includes the target"),
        ([*fit, str(bad), "--target", "x1"], "missing values in column(s) 'x2' (1 row(s), first on line 2)"),
        ([*fit, str(only_text), "--target", "y"], "no numeric input columns"),
        ([*fit, str(train), "--target", "y", "--model", "GP-LV"], "must end in 'GP'"),
        ([*fit, str(train), "--target", "y", "--device", "gpu"], "device must be a torch device"),
        (["predict", str(tmp_path / "nope.pt"), str(test)], "nope.pt"),
        (["predict", str(test), str(test)], "not a model saved by deepgp"),
        (["predict", str(model), str(no_x2)], "lacks the model's input column(s) ['x2']"),
        (["predict", str(model), str(test), "--quantiles", "0.5,1.5"], "--quantiles"),
        (["predict", str(model), str(test), "--quantiles", "0.1,,0.2"], "--quantiles"),  # (an empty level)
        (["predict", str(model), str(test), "--samples", "-1"], "--samples"),
        (["evaluate", str(model), str(write_csv(tmp_path / "noy.csv", ["x1", "x2"], [["1", "2"]]))],
         "lacks the target column 'y'"),
        (["plot", "posterior", str(model), "--out", str(tmp_path / "p.png")], "needs a model with one input"),
        (["plot", "prior", "--models", "GP,XX", "--out", str(tmp_path / "p.png")], "unknown token"),
        (["plot", "prior", "--out", str(tmp_path / "p.jpg")], "must end in one of"),
        (["demo", "--models", "GP,GP-GP-GP", "--out", str(tmp_path)], "unknown demo model"),
        (["demo", "--models", "GP,GP", "--out", str(tmp_path)], "a demo model named twice"),
    ]


def test_error_paths(data, tmp_path, capsys):
    for argv, message in errors_for(tmp_path, data):
        capsys.readouterr()
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse's own errors (a bad option value)
            code = exit_.code
        assert code == 2, argv
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if ": error: " in line]
        assert len(errors) == 1 and message in errors[0], (argv, err)  # one clear line
        assert "Traceback" not in err


RESULTS_CSV = b"dataset,model,method,split,seed,test_loglik_kde\nboston,GP,vi,0,0,-2.5\n"


@pytest.mark.parametrize("there", ["data", "results", "predictions", "text", "checkpoint"])
def test_fit_replaces_only_a_model_file(data, tmp_path, capsys, monkeypatch, there):
    """``deepgp fit --out X`` where X is a data CSV, a results file, predictions, a checkpoint, any file that is
    no model: one line naming X, exit 2, before any training, and X byte for byte as it was."""
    from deepgp import estimator, storage

    d, train, test, model = data
    out = tmp_path / "x"
    content = {"data": test.read_bytes(), "results": RESULTS_CSV, "predictions": b"mean,std,q0.5\n1.0,2.0,1.0\n",
               "text": b"notes\n"}.get(there)
    if there == "checkpoint":
        storage.write(out, storage.CHECKPOINT, {"iteration": 1})
        content = out.read_bytes()
    else:
        out.write_bytes(content)
    monkeypatch.setattr(estimator.DeepGPRegressor, "fit", lambda *a, **k: pytest.fail("trained"))
    capsys.readouterr()
    assert main(["fit", str(train), "--target", "y", "--out", str(out), *FAST]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write the model to {out}: the file there is not a model file" in err
    assert out.read_bytes() == content


def test_fit_replaces_a_model_file_or_an_empty_file(data, tmp_path, capsys):
    d, train, test, model = data
    for content in (model.read_bytes(), b""):
        out = tmp_path / "again.safetensors"
        out.write_bytes(content)
        assert main(["fit", str(train), "--target", "y", "--out", str(out), "--iterations", "2", *FAST[2:]]) == 0
        assert DeepGPRegressor.load(out).columns_["target"] == "y"


def test_plot_replaces_only_a_figure(data, tmp_path, capsys):
    """``deepgp plot ... --out X`` where X is a model or a data CSV: one line naming X, exit 2, before any
    drawing, and X as it was; a figure there (PNG or PDF, by its first bytes) or an empty file is replaced."""
    d, train, test, model = data
    for name, content in (("m.png", model.read_bytes()), ("d.pdf", test.read_bytes())):
        out = tmp_path / name
        out.write_bytes(content)
        for argv in (["plot", "prior", "--models", "GP", "--draws", "1"],
                     ["plot", "marginals", str(model), "--data", str(test), "--points", "2", "--samples", "20"]):
            capsys.readouterr()
            assert main([*argv, "--out", str(out)]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and f"cannot write the figure to {out}: the file there is not a figure" in err
            assert out.read_bytes() == content
        out.write_bytes(b"")
        assert main(["plot", "prior", "--models", "GP", "--draws", "1", "--out", str(out)]) == 0
        assert main(["plot", "prior", "--models", "GP", "--draws", "1", "--out", str(out)]) == 0  # its own figure


@pytest.mark.parametrize("there", ["model", "results", "data", "text"])
def test_predict_replaces_only_a_predictions_file(data, tmp_path, capsys, monkeypatch, there):
    """``deepgp predict M D --out X`` where X is a model, a results file, a data CSV: one line naming X, exit 2,
    before the model is loaded, and X as it was; a previous predictions file is replaced."""
    from deepgp import commands

    d, train, test, model = data
    out = tmp_path / "x.csv"
    content = {"model": model.read_bytes(), "results": RESULTS_CSV, "data": test.read_bytes(),
               "text": b"mean,std,notes\n"}[there]
    out.write_bytes(content)
    with monkeypatch.context() as m:
        m.setattr(commands, "load_regressor", lambda *a: pytest.fail("loaded the model"))
        capsys.readouterr()
        assert main(["predict", str(model), str(test), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write the predictions to {out}: the file there is not a predictions" in err
    assert out.read_bytes() == content
    if there == "model":
        assert "it is a model saved by deepgp" in err
    out.unlink()
    for args in (["--quantiles", "0.05,0.5"], ["--samples", "2", "--quantiles", "0.001"], []):  # each replaces the last
        assert main(["predict", str(model), str(test), "--out", str(out), *args]) == 0
    assert out.read_text().splitlines()[0] == "mean,std,q0.05,q0.5,q0.95"


@pytest.mark.parametrize("far", ["1e200", "1e300", "1.5e308"])
def test_evaluate_on_a_target_beyond_float64_squares_says_one_line_and_no_warning(data, tmp_path, capsys, far):
    """y = 1e200: its squared error overflows. The error names the line, alone (no numpy RuntimeWarning
    printed before it)."""
    import warnings

    d, train, test, model = data
    lines = test.read_text().splitlines()
    cells = lines[3].split(",")
    lines[3] = ",".join([*cells[:-1], far])
    far_csv = tmp_path / "far.csv"
    far_csv.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["evaluate", str(model), str(far_csv)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"deepgp evaluate: error: {far_csv}, line"), err
    assert [str(w.message) for w in caught] == []


def test_ignored_text_column_is_announced(data, tmp_path, capsys):
    _, train, _, _ = data
    capsys.readouterr()
    assert main(["fit", str(train), "--target", "y", "--out", str(tmp_path / "m.pt"), "--model", "GP", "--method", "vi",
                 *FAST]) == 0
    assert "ignoring non-numeric column(s) ['label']" in capsys.readouterr().err


def test_fit_inner_sampling_option(data, tmp_path, capsys):
    _, train, _, _ = data
    out = tmp_path / "indep.pt"
    assert main(["fit", str(train), "--target", "y", "--model", "LV-GP-GP", "--inner-sampling", "independent",
                 "--out", str(out), *FAST]) == 0
    assert DeepGPRegressor.load(out).inner_sampling == "independent"
    with pytest.raises(SystemExit):
        main(["fit", str(train), "--target", "y", "--inner-sampling", "both", *FAST])
    assert "invalid choice" in capsys.readouterr().err


def test_fit_float32_mode_round_trips(data, capsys):
    d, train, test, _ = data
    model = d / "model32.pt"
    assert main(["fit", str(train), "--target", "y", "--model", "LV-GP", "--dtype", "float32", "--device", "cpu",
                 "--out", str(model), *FAST]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(model), str(test), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert all(np.isfinite(v) for v in scores.values() if isinstance(v, float))


def test_fit_has_an_option_for_every_setting_and_passes_it_on(data, tmp_path):
    import dataclasses

    from deepgp.config import ModelConfig, TrainConfig

    d, train, _, _ = data
    parser = build_parser()
    fit_help = parser._subparsers._group_actions[0].choices["fit"].format_help()
    for config in (ModelConfig, TrainConfig):
        for f in dataclasses.fields(config):
            assert "--" + f.name.replace("_", "-") in fit_help, f.name
    out = tmp_path / "m.safetensors"
    assert main(["fit", str(train), "--target", "y", "--model", "LV-GP", "--kernel", "matern52", "--gamma", "0.05",
                 "--encoder-hidden", "8,8", "--no-natgrad", "--predict-samples", "77", *FAST, "--out", str(out)]) == 0
    reg = DeepGPRegressor.load(out)
    assert (reg.kernel, reg.gamma, reg.encoder_hidden, reg.natgrad, reg.predict_samples) == (
        "matern52", 0.05, (8, 8), False, 77)
    assert reg.model_.config.encoder_hidden == (8, 8)


class FakeEntryPoint:
    """An entry point of the group deepgp.commands, as importlib.metadata gives one."""

    def __init__(self, name, load):
        self.name, self.value, self._load, self.loads = name, f"somewhere:{name}", load, 0

    def load(self):
        self.loads += 1
        return self._load()


def test_a_package_adds_its_command_through_the_entry_point_group(monkeypatch, capsys):
    def register(sub):
        p = sub.add_parser("hello", help="say hello")
        p.add_argument("--to", default="world")
        p.set_defaults(func=lambda args: print(f"hello {args.to}, debug {args.debug}"))

    plugin = FakeEntryPoint("hello", lambda: register)
    monkeypatch.setattr(cli, "plugins", lambda: [plugin])
    assert "say hello" in " ".join(build_parser(load={"hello"}).format_help().split())  # (wrapped to the terminal)
    plugin.loads = 0
    # listed without loading its package, by the package's name; other commands load nothing
    assert re.search(r"hello\s+a\s+command\s+of\s+somewhere\n", build_parser().format_help()) and plugin.loads == 0
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    assert plugin.loads == 0 and "usage: deepgp fit" in capsys.readouterr().out
    assert main(["hello", "--to", "you"]) == 0 and capsys.readouterr().out == "hello you, debug False\n"
    assert main(["--debug", "hello"]) == 0 and capsys.readouterr().out == "hello world, debug True\n"
    assert plugin.loads == 2
    args = build_parser().parse_args(["hello", "--to", "me"])  # a parser that did not load it loads it when parsing
    args.debug = False
    assert args.func(args) is None and capsys.readouterr().out == "hello me, debug False\n"


def test_an_added_command_that_fails_to_load_fails_alone_in_one_line(monkeypatch, capsys):
    def broken():
        raise ModuleNotFoundError("No module named 'zuko'")

    monkeypatch.setattr(cli, "plugins", lambda: [FakeEntryPoint("hello", broken)])
    help_words = " ".join(build_parser(load={"hello"}).format_help().split())  # (wrapped to the terminal's width)
    assert "not available: No module named 'zuko'" in help_words
    assert main(["hello", "--to", "you", "-h"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "deepgp hello: error: the package that adds `deepgp hello`" in err
    assert "No module named 'zuko'" in err
    with pytest.raises(SystemExit) as exit_:  # the other commands are unharmed
        main(["fit", "--help"])
    assert exit_.value.code == 0


@pytest.mark.parametrize("command", ["benchmark", "report"])
def test_the_benchmark_commands_without_their_package_say_how_to_install_it(monkeypatch, capsys, command):
    monkeypatch.setattr(cli, "plugins", lambda: [])
    assert main(["--debug", command, "--datasets", "yacht"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"`deepgp {command}` comes with" in err and "pip install ./bench" in err
    assert command not in build_parser().format_help()
