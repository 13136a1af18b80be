"""deepgp used by a careless or a malicious user: files that try to run code, damaged files, bad
command lines, and arbitrary arrays. Every case ends in a one-line error or a finite result."""

import csv
import gzip
import io
import json
import math
import os
import re

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save as safetensors_bytes

import deepgp
from deepgp import DeepGPRegressor, kinds, storage
from deepgp.cli import main

FAST = ["--iterations", "30", "--num-inducing", "8", "--batch-size", "64", "--no-progress"]


# -- files that try to run code ------------------------------------------------------------------------
class Evil:
    """Unpickling this runs ``exec``, which writes a marker file: the attack of a shared model file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('code ran')",)


def evil_files(folder, marker) -> dict:
    """Pickle files that run code when opened, as model and checkpoint files of several shapes."""
    evil = Evil(marker)
    files = {
        "regressor.pt": {"format": "deepgp-regressor/1", "x": evil},
        "model.pt": {"format": "deepgp-model/1", "config": {"spec": evil}, "state": {}},
        "checkpoint.pt": {"model": {}, "adam": {"state": {0: {"step": evil}}, "param_groups": []}},
        "bare.pt": evil,
    }
    for name, blob in files.items():
        torch.save(blob, folder / name)
    torch.save(files["regressor.pt"], folder / "old-style.pt", _use_new_zipfile_serialization=False)
    # the current format holding a pickle in its JSON, as a string and as a made-up entry: both inert
    pickled = io.BytesIO()
    torch.save(evil, pickled)
    for name, value in {"in-config.safetensors": pickled.getvalue().hex(),
                        "entry.safetensors": {"$pickle": pickled.getvalue().hex()}}.items():
        tree = {"config": {"spec": "GP", "kernel": value}, "num_data": 3, "state": {"w": {"$tensor": "w"}}}
        (folder / name).write_bytes(safetensors_bytes({"w": torch.ones(1)}, metadata={
            "format": storage.REGRESSOR, "tree": json.dumps({"model": tree, "params": {}})}))
    return {name: folder / name for name in [*files, "old-style.pt", "in-config.safetensors", "entry.safetensors"]}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A CSV (x1, x2, y) and a model fitted on it by `deepgp fit`."""
    d = tmp_path_factory.mktemp("hostile")
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (120, 2))
    rows = np.c_[x, np.sin(2 * x[:, 0]) + 0.1 * rng.standard_normal(120)]
    data = d / "data.csv"
    with open(data, "w", newline="") as f:
        csv.writer(f).writerows([["x1", "x2", "y"], *rows.round(5).tolist()])
    model = d / "model.safetensors"
    assert main(["fit", str(data), "--target", "y", "--model", "GP", "--method", "vi", "--out", str(model), *FAST]) == 0
    return d, data, model


def test_opening_a_malicious_file_never_runs_its_code(fitted, tmp_path, capsys):
    _, data, model = fitted
    marker = tmp_path / "PWNED"
    files = evil_files(tmp_path, marker)
    x, y = np.random.default_rng(0).standard_normal((20, 2)), np.zeros((20, 1))
    for name, path in files.items():
        for load in (DeepGPRegressor.load, deepgp.DeepGP.load):
            with pytest.raises(ValueError) as err:
                load(path)
            assert str(path) in str(err.value) and "\n" not in str(err.value), (name, err.value)
        with pytest.raises(ValueError, match=str(path)):
            deepgp.fit(deepgp.DeepGP.from_spec("GP", x, y, num_inducing=4), x, y, iterations=2, progress=False,
                       checkpoint=path)
        for argv in (["predict", str(path), str(data)], ["evaluate", str(path), str(data)],
                     ["plot", "posterior", str(path), "--out", str(tmp_path / "p.png")],
                     ["plot", "marginals", str(path), "--data", str(data), "--out", str(tmp_path / "m.png")],
                     ["convert", str(path), str(tmp_path / "new.safetensors")]):  # no --trust
            capsys.readouterr()
            assert main(argv) == 2, argv
            err = capsys.readouterr().err
            lines = [line for line in err.splitlines() if line.strip() and not line.startswith("deepgp: warning:")]
            assert len(lines) == 1 and "Traceback" not in err, (argv, err)
        assert not marker.exists(), f"opening {name} ran its code"


def test_a_trusted_conversion_is_the_one_door_to_old_files(fitted, tmp_path, capsys):
    _, data, model = fitted
    marker = tmp_path / "PWNED"
    files = evil_files(tmp_path, marker)
    assert main(["convert", str(files["regressor.pt"]), str(tmp_path / "new.safetensors"), "--trust"]) == 2
    assert marker.exists()  # documented: --trust unpickles, and a pickle runs its code
    assert "is not a complete deepgp 0.1 model file" in capsys.readouterr().err


# -- bad command lines ---------------------------------------------------------------------------------
def bad_invocations(d, data, model, tmp) -> list[tuple[list[str], int, str]]:
    """(argv, exit status, text the one error line must contain)."""
    cut = tmp / "cut.csv.gz"
    cut.write_bytes(gzip.compress(data.read_bytes())[:-20])
    inf = tmp / "inf.csv"
    inf.write_text("x1,x2,y\n1,2,3\n4,inf,6\n7,8,9\n")
    one_row = tmp / "one.csv"
    one_row.write_text("x1,x2,y\n1,2,3\n")
    twice = tmp / "twice.csv"  # (a reader by name would keep one of the two x1 columns)
    twice.write_text("x1,x2, x1,y\n1,2,3,4\n5,6,7,8\n9,1,2,3\n")
    fifo = tmp / "pipe"
    os.mkfifo(fifo)  # opening it would block: every command must refuse it first
    one_input = tmp / "one.safetensors"
    assert main(["fit", str(data), "--target", "y", "--inputs", "x1", "--model", "GP", "--method", "vi", *FAST,
                 "--out", str(one_input)]) == 0
    half_model = tmp / "half.safetensors"
    storage.write(half_model, storage.REGRESSOR, {"params": {}, "model": {}})
    fit = ["fit", str(data), "--target", "y", *FAST]
    out = ["--out", str(tmp / "m.safetensors")]
    return [
        ([*fit, "--lr", "1000", "--model", "LV-GP-GP", *out], 1, "lr=1000"),
        # (joint draws: whichever a diverging step breaks first, the bound or a K × K Cholesky factor;
        # which one is chaotic in the step's rounding, so both messages say what to try)
        ([*fit, "--lr", "100", "--model", "LV-GP-GP", "--inner-sampling", "joint", "--iterations", "200", *out], 1,
         "smaller learning rate"),
        ([*fit, "--out", str(tmp / "nowhere" / "m.safetensors")], 2, "nowhere does not exist"),
        ([*fit, "--out", str(tmp)], 2, "it is a folder"),
        ([*fit, "--lr", "nan"], 2, "argument --lr: must be a finite number > 0"),
        ([*fit, "--lr", "-1"], 2, "argument --lr"),
        ([*fit, "--iterations", "-5"], 2, "argument --iterations: must be an integer >= 0"),
        ([*fit, "--batch-size", "0"], 2, "argument --batch-size"),
        ([*fit, "--num-inducing", "x"], 2, "argument --num-inducing: must be an integer >= 1, got 'x'"),
        ([*fit, "--seed", "-1"], 2, "argument --seed"),
        ([*fit, "--dtype", "float16"], 2, "invalid choice"),
        ([*fit, "--model", ""], 2, "model spec"),
        (["fit", str(cut), "--target", "y", *FAST, *out], 2, "could not read"),
        (["fit", str(tmp), "--target", "y", *FAST, *out], 2, str(tmp)),
        (["fit", str(inf), "--target", "y", *FAST, *out], 2,
         "infinite values in column(s) 'x2' (1 row(s), first on line 3)"),
        (["fit", str(one_row), "--target", "y", *FAST, *out], 2, "minimum of 2"),
        (["fit", str(twice), "--target", "y", *FAST, *out], 2, "twice.csv: duplicate column names ['x1']"),
        (["predict", str(model), str(twice)], 2, "twice.csv: duplicate column names ['x1']"),
        (["evaluate", str(model), str(twice)], 2, "twice.csv: duplicate column names ['x1']"),
        (["fit", str(data), *FAST], 2, "--target"),
        (["predict", str(model), str(data), "--predict-samples", "0"], 2, "argument --predict-samples"),
        (["predict", str(model), str(data), "--out", str(tmp / "no" / "p.csv")], 2, "does not exist"),
        (["predict", str(half_model), str(data)], 2, "lacks the field"),
        (["predict", str(tmp), str(data)], 2, "is not a file"),
        (["predict", str(data), str(data)], 2, "not a model saved by deepgp"),
        (["evaluate", str(model), str(data), "--json", str(tmp / "no" / "m.json")], 2, "does not exist"),
        (["plot", "prior", "--draws", "0", "--out", str(tmp / "p.png")], 2, "argument --draws"),
        (["plot", "marginals", str(model), "--data", str(data), "--points", "-3"], 2, "argument --points"),
        (["plot"], 2, "required"),
        (["demo", "--iterations", "0"], 2, "argument --iterations"),
        (["convert", str(model), str(tmp / "x.safetensors"), "--trust"], 2, "need no conversion"),
        (["nonesuch"], 2, "invalid choice"),
        ([], 2, "required"),
        # found by a hostile session: each was a traceback, a silent wrong answer, or worse
        ([*fit, *out[:1], str(data)], 2, "it is the command's own input"),
        ([*fit, "--inputs", "x1,x1", *out], 2, "names column(s) ['x1'] more than once"),
        ([*fit, "--inputs", ",", *out], 2, "--inputs names nothing"),
        ([*fit, "--inputs", "x1,,x2", *out], 2, "--inputs has an empty item"),
        ([*fit, "--encoder-hidden", "8,,4", *out], 2, "argument --encoder-hidden: must be comma-separated"),
        ([*fit, "--device", "meta", *out], 2, "device must be 'cpu' or a CUDA device"),
        ([*fit, "--seed", "99999999999999999999", *out], 2, "argument --seed: must be an integer <="),
        (["fit", str(fifo), "--target", "y", *FAST, *out], 2, "is not a regular file"),
        ([*fit, "--out", str(fifo)], 2, "is not a regular file"),
        (["predict", str(fifo), str(data)], 2, "is not a file"),
        (["predict", str(model), str(data), "--out", str(model)], 2, "it is the command's own input"),
        (["predict", str(model), str(data), "--quantiles", "0.5,0.5"], 2, "names a level twice"),
        (["plot", "marginals", str(model), str(one_input), "--data", str(data), "--out", str(tmp / "m.png")], 2,
         "plot models of the same inputs together"),
        (["plot", "marginals", str(model), "--data", str(data), "--samples", "1"], 2, "argument --samples"),
        (["plot", "prior", "--models", "", "--out", str(tmp / "p.png")], 2, "--models names nothing"),
        (["plot", "prior", "--models", "GP,", "--out", str(tmp / "p.png")], 2, "--models has an empty item"),
        (["convert", str(fifo), str(tmp / "x.safetensors"), "--trust"], 2, "is not a regular file"),
        ([*fit, "--lr", "1000", "--model", "LV-GP-GP", *out], 1, "lr=1000"),
    ]


def test_bad_command_lines_end_in_one_line_and_an_exit_status(fitted, tmp_path, capsys):
    d, data, model = fitted
    for argv, status, text in bad_invocations(d, data, model, tmp_path):
        capsys.readouterr()
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse's own errors
            code = exit_.code
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip() and not line.startswith("deepgp: warning:")]
        assert code == status, (argv, code, err)
        assert len(lines) == 1 and ": error: " in lines[0] and text in lines[0], (argv, err)
        assert "Traceback" not in err, argv


def test_more_marginal_points_than_rows_show_every_row(fitted, tmp_path, capsys):
    # --points beyond the data's rows is clamped to them before the memory estimate, not refused by it
    _, data, model = fitted
    argv = ["plot", "marginals", str(model), "--data", str(data), "--samples", "20", "--out", str(tmp_path / "pm.png")]
    assert main([*argv, "--points", str(10**9)]) == 0, capsys.readouterr().err
    assert (tmp_path / "pm.png").stat().st_size > 0


def test_a_refused_plot_makes_no_folder(fitted, tmp_path, capsys):
    # a figure's folder must exist, as a model's must: a refused command (for any reason) leaves nothing
    d, data, model = fitted
    new = tmp_path / "nd" / "x.png"
    for argv, said in [(["plot", "prior", "--models", "XX"], "does not exist"),
                       (["plot", "prior"], "the folder " + str(tmp_path / "nd") + " does not exist"),
                       (["plot", "posterior", str(model)], "does not exist"),
                       (["plot", "marginals", str(model), "--data", str(tmp_path / "absent.csv")], "does not exist")]:
        capsys.readouterr()
        assert main([*argv, "--out", str(new)]) == 2, argv
        assert said in capsys.readouterr().err, argv
        assert not (tmp_path / "nd").exists(), argv


def test_the_demo_makes_its_folder_only_to_write_in_it(monkeypatch, tmp_path, capsys):
    class Interrupted:
        def __init__(self, **kwargs):
            pass

        def fit(self, x, y):
            raise KeyboardInterrupt

    monkeypatch.setattr(deepgp.demo, "DeepGPRegressor", Interrupted)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    assert main(["demo", "--quick", "--models", "GP", "--no-progress", "--out", str(tmp_path / "new")]) == 130
    assert not (tmp_path / "new").exists()  # interrupted in training: nothing to write, no folder
    monkeypatch.chdir(tmp_path)
    for out, said in [("", "out (--out) must name a folder"), (str(tmp_path / "no" / "new"), "does not exist")]:
        capsys.readouterr()
        assert main(["demo", "--quick", "--models", "GP", "--no-progress", "--out", out]) == 2
        assert said in capsys.readouterr().err
    assert os.listdir(tmp_path) == []  # (nothing written into the current folder either)


def test_an_rmse_within_float64_is_computed_though_its_sum_of_squares_is_not(fitted, tmp_path, capsys):
    # 1,000 errors of 5e152: their squares sum to 2.5e308, beyond float64; their RMSE, 5e152, is not
    import warnings

    _, _, model = fitted
    far = tmp_path / "far.csv"
    far.write_text("x1,x2,y\n" + "0.5,-0.25,5e152\n" * 1000)
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["evaluate", str(model), str(far), "--predict-samples", "10", "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and err == "" and [str(w.message) for w in caught] == [], err
    metrics = json.loads(out)
    # every error is 5e152 - (a prediction near 1): 5e152 in float64, as is their root mean square
    assert metrics["rmse"] == pytest.approx(5e152, rel=1e-12) and metrics["crps"] == pytest.approx(5e152, rel=1e-6)


def test_evaluate_replaces_only_its_own_metrics_file(fitted, tmp_path, capsys):
    # --json replaces an earlier metrics file of evaluate's, or an empty file; never a model or other data
    _, data, model = fitted
    victim, other, metrics = tmp_path / "victim.safetensors", tmp_path / "notes.json", tmp_path / "m.json"
    victim.write_bytes(model.read_bytes())
    other.write_text('{"rmse": 1}')
    for target, said in [(victim, "; it is a model saved by deepgp"), (other, ", so it is not replaced")]:
        capsys.readouterr()
        assert main(["evaluate", str(model), str(data), "--json", str(target)]) == 2
        err = capsys.readouterr().err
        assert f"the file there is not a metrics file of deepgp evaluate{said}" in err and err.count("\n") == 1, err
    assert victim.read_bytes() == model.read_bytes() and other.read_text() == '{"rmse": 1}'
    metrics.touch()
    for _ in range(2):  # the empty file, then its own output
        assert main(["evaluate", str(model), str(data), "--json", str(metrics), "--predict-samples", "5"]) == 0
    assert set(json.loads(metrics.read_text())) == kinds.METRICS_FIELDS


def test_csv_messages_name_the_physical_line(tmp_path, capsys):
    # a quoted header name spans lines 1-2: 'abc' is on line 5 of the file, though in its 4th record
    from deepgp.tables import read_csv

    nl = tmp_path / "nl.csv"
    nl.write_text('"x\n1",y\n1,2\n2,3\n3,abc\n\n4,"5\n"\n6,inf\n')
    columns = read_csv(nl)
    assert columns["y"].bad == (5, "abc") and columns["y"].infinite == [9]
    assert list(columns["y"].lines) == [3, 4, 5, 7, 9]
    assert main(["fit", str(nl), "--target", "y", *FAST, "--out", str(tmp_path / "nl.safetensors")]) == 2
    assert "'abc' on line 5" in capsys.readouterr().err


def test_a_closed_standard_output_is_refused_in_one_line(fitted, tmp_path, capsys, monkeypatch):
    # `deepgp evaluate ... --json >&-`: Python has no sys.stdout at all
    _, data, model = fitted
    monkeypatch.setattr("sys.stdout", None)
    for argv, option in [(["evaluate", str(model), str(data), "--json"], "--json FILE"),
                         (["evaluate", str(model), str(data)], "--json FILE"),
                         (["predict", str(model), str(data)], "--out FILE")]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "standard output is closed" in err and option in err, err


def test_an_upper_case_gz_suffix_is_read_as_gzip(fitted, tmp_path):
    from deepgp.tables import read_csv

    _, data, _ = fitted
    loud = tmp_path / "DATA.CSV.GZ"
    loud.write_bytes(gzip.compress(data.read_bytes()))
    assert np.array_equal(read_csv(loud)["y"].values, read_csv(data)["y"].values)


def test_a_factor_that_fails_in_training_ends_in_one_line(fitted, tmp_path, capsys, monkeypatch):
    _, data, _ = fitted

    def fails(*args, **kwargs):
        deepgp.linalg.cholesky(torch.full((3, 3), float("nan"), dtype=torch.float64), where="the test's matrix")

    monkeypatch.setattr(deepgp.training, "fit", fails)
    assert main(["fit", str(data), "--target", "y", *FAST, "--out", str(tmp_path / "m.safetensors")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Cholesky of the test's matrix failed" in err and "smaller learning rate" in err
    assert not (tmp_path / "m.safetensors").exists()


def test_more_odd_input_is_read_or_refused_as_a_careful_user_expects(fitted, tmp_path, capsys, monkeypatch):
    _, data, model = fitted
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + data.read_bytes())  # a spreadsheet's UTF-8 byte-order mark
    assert main(["evaluate", str(model), str(bom), "--json"]) == 0  # the column is 'x1', not '\ufeffx1'
    odd = tmp_path / "odd.csv"
    odd.write_text("x1,x2,y\n1_000,2,3\n4,5,6\n")
    assert main(["fit", str(odd), "--target", "y", "--inputs", "x1,x2", *FAST,
                 "--out", str(tmp_path / "m.safetensors")]) == 2
    assert "non-numeric column(s) 'x1' (e.g. '1_000' on line 2)" in capsys.readouterr().err
    odd.write_text("x1,x2,y\n-nan,2,3\n4,5,6\n")
    assert main(["fit", str(odd), "--target", "y", *FAST, "--out", str(tmp_path / "m.safetensors")]) == 2
    assert "missing values in column(s) 'x1'" in capsys.readouterr().err
    assert main(["fit", str(data), "--target", "y", "--model", "GP", "--method", "vi", "--iterations", "0",
                 "--no-progress", "--out", str(tmp_path / "untrained.safetensors")]) == 0
    assert "not trained (0 iterations)" in capsys.readouterr().out
    monkeypatch.setenv("DEEPGP_DEBUG", "false")  # off, as 0, no and off are
    assert main(["predict", str(tmp_path / "absent.safetensors"), str(data)]) == 2


def test_trust_opens_the_pickle_door_only_when_it_is_true(tmp_path):
    marker = tmp_path / "PWNED"
    files = evil_files(tmp_path, marker)
    for trust in ("False", "no", 0, 1, [0], None):
        for load in (DeepGPRegressor.load, deepgp.DeepGP.load):
            with pytest.raises(ValueError, match="trust must be True or False"):
                load(files["regressor.pt"], trust=trust)
    assert not marker.exists()


def test_scores_refuse_weights_that_are_not_weights(fitted):
    _, data, model = fitted
    reg = DeepGPRegressor.load(model)
    X = np.random.default_rng(1).uniform(-2, 2, (10, 2))
    y = np.sin(2 * X[:, 0])
    assert reg.score(X, y, sample_weight=np.ones(10)) == pytest.approx(reg.score(X, y))
    for weights in (np.full(10, np.nan), np.zeros(10), -np.ones(10), np.ones(9)):
        with pytest.raises(ValueError, match="sample_weight must be 10 finite weights"):
            reg.score(X, y, sample_weight=weights)


def test_a_crafted_estimator_file_is_refused_by_setting(fitted, tmp_path):
    _, _, model = fitted
    good = storage.read(model, storage.REGRESSOR)
    for change, message in [({"predict_samples": 10**12}, "predict_samples must be an integer <= 10000000"),
                            ({"method": "xx"}, "method must be one of"), ({"seed": -4}, "seed must be"),
                            ({"progress": "yes"}, "the field 'progress' is a str")]:
        storage.write(tmp_path / "c", storage.REGRESSOR, {**good, "params": {**good["params"], **change}})
        with pytest.raises(ValueError, match=message):
            DeepGPRegressor.load(tmp_path / "c")


def test_a_crafted_file_whose_parts_disagree_is_damaged(fitted, tmp_path, capsys):
    """Each part of a model file agrees with the others: the settings with the model they built, the
    names of its inputs in both places, and every tensor it holds named by its contents."""
    _, data, model = fitted
    good = storage.read(model, storage.REGRESSOR)
    inputs = good["columns"]["inputs"]
    for change, message in [({"params": {**good["params"], "kernel": "matern52"}},
                             "its settings and its model disagree on kernel ('matern52' against 'rbf')"),
                            ({"params": {**good["params"], "num_inducing": 7}},
                             "its settings and its model disagree on num_inducing"),
                            ({"feature_names_in": inputs[::-1]},
                             "its fields 'feature_names_in' and 'columns' name different inputs")]:
        storage.write(tmp_path / "c.safetensors", storage.REGRESSOR, {**good, **change})
        with pytest.raises(ValueError, match=re.escape(message)):
            DeepGPRegressor.load(tmp_path / "c.safetensors")
    storage.write(tmp_path / "c.safetensors", storage.REGRESSOR, {**good, "feature_names_in": inputs})
    DeepGPRegressor.load(tmp_path / "c.safetensors")  # (the same names in both: consistent)
    # a tensor nothing in the file names: carried along, unread, of any size
    storage.write(tmp_path / "c.safetensors", storage.REGRESSOR, good)
    with safe_open(str(tmp_path / "c.safetensors"), framework="pt") as f:
        meta, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    (tmp_path / "c.safetensors").write_bytes(safetensors_bytes({**tensors, "extra": torch.zeros(3)}, metadata=meta))
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "c.safetensors"), str(data)]) == 2
    err = capsys.readouterr().err
    assert "c.safetensors is damaged: it holds tensors its contents do not name ('extra', ...)" in err
    assert err.count("\n") == 1


def test_a_crafted_size_beyond_any_model_is_damage_not_a_crash(fitted, tmp_path, capsys):
    # sizes beyond int64 (torch's TypeError) and within it (a count beyond any computer's): one line, exit 2
    _, data, model = fitted
    good = storage.read(model, storage.REGRESSOR)
    for where, value in [("input_dim", 2**63), ("input_dim", 10**29), ("output_dim", 2**63 - 1),
                         ("config/latent_dim", 2**62), ("config/encoder_hidden", (20, 2**70))]:
        tree = {**good["model"], "config": dict(good["model"]["config"])}
        *parent, leaf = where.split("/")
        (tree[parent[0]] if parent else tree)[leaf] = value
        storage.write(tmp_path / "c.safetensors", storage.REGRESSOR, {**good, "model": tree})
        capsys.readouterr()
        assert main(["predict", str(tmp_path / "c.safetensors"), str(data)]) == 2
        err = capsys.readouterr().err
        assert "c.safetensors is damaged" in err and "unexpected" not in err and err.count("\n") == 1, (where, err)


def test_debug_shows_the_traceback(fitted, tmp_path):
    _, data, _ = fitted
    argv = ["predict", str(tmp_path / "absent.safetensors"), str(data)]
    with pytest.raises(FileNotFoundError):
        main([*argv, "--debug"])
    assert main(argv) == 2


# -- arbitrary arrays ----------------------------------------------------------------------------------
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

NUMERICAL = (deepgp.CholeskyError, FloatingPointError, deepgp.natgrad.NaturalGradientError)

finite = st.floats(-1e3, 1e3, allow_nan=False, width=64)
special = st.sampled_from([math.nan, math.inf, -math.inf, 1e300, -1e300, 1e80, 1e-300, 0.0])
numbers = st.one_of(finite, finite, finite, special)  # mostly usable numbers, some hostile ones
finite32 = st.floats(-1e3, 1e3, allow_nan=False, width=32)
numbers32 = st.one_of(finite32, finite32, finite32,
                      st.sampled_from([math.nan, math.inf, -math.inf, float(np.float32(1e30)),
                                       float(np.float32(-1e30)), 0.0]))
odd = st.one_of(  # arrays no model can take
    hnp.arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(1, 2)), elements=finite),
    hnp.arrays(np.complex128, st.tuples(st.integers(1, 6), st.just(1))),
    st.just(np.array([["a", "b"], ["c", "d"]])), st.just(np.zeros((0, 2))), st.just(np.zeros((5, 0))),
)


@st.composite
def data_pairs(draw):
    """(X, Y): usually N rows each (X [N, D] of any real dtype, Y [N] or [N, 1]), sometimes a mismatch."""
    n, d = draw(st.integers(1, 12)), draw(st.integers(1, 3))
    dtype = draw(st.sampled_from([np.float64, np.float64, np.float32, np.int64, np.bool_]))
    elements = numbers if dtype is np.float64 else numbers32 if dtype is np.float32 else None
    X = draw(hnp.arrays(dtype, (n, d), elements=elements))
    Y = draw(hnp.arrays(np.float64, draw(st.sampled_from([(n,), (n, 1), (n + 1,), (n, 2)])), elements=numbers))
    swap = draw(st.sampled_from(["none", "none", "none", "X", "Y"]))
    if swap == "X":
        X = draw(odd)
    elif swap == "Y":
        Y = draw(odd)
    return X, Y


def finite_or_refused(call):
    """Run ``call``: a finite result, a ValueError naming an argument or a named numerical error pass."""
    try:
        out = call()
    except ValueError as err:
        event("refused: ValueError")
        assert re.search(r"\b(X|Y|y)\b", str(err)), f"ValueError names no argument: {err}"
        return
    except NUMERICAL as err:
        event(f"refused: {type(err).__name__}")
        assert any(s in str(err) for s in ("lr", "gamma", "jitter", "learning rate")), f"names no setting: {err}"
        return
    event("finite result")
    arr = np.asarray(out.detach() if isinstance(out, torch.Tensor) else out, dtype=np.float64)
    assert np.isfinite(arr).all(), f"a non-finite result {arr}"


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(pair=data_pairs())
def test_arbitrary_arrays_are_refused_by_name_or_give_finite_numbers(pair):
    X, Y = pair

    def core():
        model = deepgp.DeepGP.from_spec("LV-GP", X, Y, num_inducing=4, seed=0)
        finite_or_refused(lambda: model.elbo(X, Y, "iw", 2))
        return deepgp.fit(model, X, Y, "iw", 2, iterations=2, batch_size=8, progress=False)

    finite_or_refused(core)

    def estimator():
        reg = DeepGPRegressor(model="GP", method="vi", num_inducing=4, iterations=2, predict_samples=5, progress=False)
        reg.fit(X, Y)
        return reg.predict(X), reg.score(X, Y)

    finite_or_refused(lambda: np.concatenate([np.ravel(a) for a in estimator()]))
