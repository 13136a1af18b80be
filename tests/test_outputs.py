"""What the commands write: every number reads back as the float it came from, distinct columns have
distinct names, no NaN or infinity is written as a result (far inputs get the prior's answer, values a
model's dtype cannot hold are refused by line and column), and JSON is JSON."""

import csv
import json
import math
import re

import numpy as np
import pytest

from deepgp import DeepGPRegressor
from deepgp.cli import main
from deepgp.commands import level_name, load_regressor
from deepgp.metrics import regressor_metrics
from deepgp.outputs import column_text, json_text, number_text


def write_xy(path, rows):
    """A CSV file of columns x and y."""
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([["x", "y"], *rows])
    return path


@pytest.fixture(scope="module")
def offset(tmp_path_factory):
    """A GP fitted by the CLI to y = 10⁶ + sin(2x) + noise: the signal is in the digits past the sixth."""
    d = tmp_path_factory.mktemp("outputs")
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, 60)
    y = 1e6 + np.sin(2 * x) + 0.1 * rng.standard_normal(60)
    data = write_xy(d / "train.csv", zip(x.tolist(), y.tolist()))
    model = d / "model.safetensors"
    assert main(["fit", str(data), "--target", "y", "--model", "GP", "--iterations", "30", "--num-inducing", "8",
                 "--predict-samples", "50", "--out", str(model), "--no-progress"]) == 0
    return d, data, model


def read_table(path) -> dict[str, np.ndarray]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert len(set(rows[0])) == len(rows[0])  # one column per name
    return {name: np.array([float(r[j]) for r in rows[1:]]) for j, name in enumerate(rows[0])}


def test_predict_writes_every_number_as_the_float_it_is(offset):
    d, data, model = offset
    out = d / "pred.csv"
    assert main(["predict", str(model), str(data), "--out", str(out), "--quantiles", "0.1,0.10000001,0.9",
                 "--samples", "2"]) == 0
    table = read_table(out)
    assert list(table) == ["mean", "std", "q0.1", "q0.10000001", "q0.9", "sample_1", "sample_2"]
    reg, x = load_regressor(model), table_x(data)
    mean, std = reg.predict(x, return_std=True)
    quantiles = reg.predict_quantiles(x, [0.1, 0.10000001, 0.9])
    # bitwise: the file and these were computed in this process, by the same code and seeds
    np.testing.assert_array_equal(table["mean"], mean)
    np.testing.assert_array_equal(table["std"], std)
    for j, name in enumerate(["q0.1", "q0.10000001", "q0.9"]):
        np.testing.assert_array_equal(table[name], quantiles[:, j])
    np.testing.assert_array_equal(np.stack([table["sample_1"], table["sample_2"]]), reg.sample(x, 2))
    assert len(np.unique(np.round(mean, 3))) > 10  # (10⁶ + the signal: 6 digits would show one value)


def table_x(path):
    return read_table(path)["x"][:, None]


def test_quantiles_are_refused_where_the_draws_cannot_resolve_them(offset, capsys):
    """A level q needs S·min(q, 1 − q) ≥ 1 draws: from fewer, every quantile is the same draw or two."""
    d, data, model = offset
    out = d / "few.csv"
    for samples, levels, level, need in [("1", "0.5", "0.5", 2), ("19", "0.05,0.5,0.95", "0.05", 20),
                                         ("3", "0.3", "0.3", 4), ("1", "0,1", "0", 2)]:
        code = main(["predict", str(model), str(data), "--out", str(out), "--quantiles", levels,
                     "--predict-samples", samples])
        err = capsys.readouterr().err.strip().splitlines()
        assert (code, len(err)) == (2, 1) and not out.exists()
        assert f"--predict-samples={samples} draws cannot resolve the quantile level {level}: it needs at least " \
               f"{need} draws" in err[0]
    assert main(["predict", str(model), str(data), "--out", str(out), "--predict-samples", "20"]) == 0
    reg = load_regressor(model, predict_samples=4)
    with pytest.raises(ValueError, match="predict_samples=4 draws cannot resolve the quantile level 0.1: it needs"):
        reg.predict_quantiles(table_x(data), [0.5, 0.1])
    assert reg.predict_quantiles(table_x(data), [0.25, 0.75]).shape == (60, 2)


def test_evaluate_writes_the_metrics_as_computed(offset, capsys):
    _, data, model = offset
    reg, table = load_regressor(model), read_table(data)
    expected = regressor_metrics(reg, table["x"][:, None], table["y"])
    capsys.readouterr()
    assert main(["evaluate", str(model), str(data), "--json"]) == 0
    assert {k: v for k, v in json.loads(capsys.readouterr().out).items() if k in expected} == expected
    assert main(["evaluate", str(model), str(data)]) == 0
    text = capsys.readouterr().out
    for label, key in (("log density", "log_density"), ("RMSE", "rmse"), ("CRPS", "crps")):
        assert float(re.search(rf"{label}\s+(\S+)", text).group(1)) == expected[key]


def test_levels_name_columns_apart():
    levels = [0.0, 0.05, 0.1, 0.10000001, 0.1 + 2**-56, 0.5, 0.95, 1.0, 1e-300]
    names = [level_name(q) for q in levels]
    assert names[:3] == ["q0", "q0.05", "q0.1"] and names[7] == "q1"  # the short names where they are exact
    assert len(set(names)) == len(names)
    assert [float(n[1:]) for n in names] == levels  # each name reads back as its level


def test_numbers_read_back_as_the_floats_they_were():
    values = [1e6 + math.sin(2.0), 1 / 3, -0.0, 5e-324, 1.7976931348623157e308, 2.0**53 + 2, 3.0, -12.0, 1e-170]
    for v in values:
        assert float(number_text(v)) == v and math.copysign(1, float(number_text(v))) == math.copysign(1, v)
    assert number_text(3.0) == "3" and number_text(-0.0) == "-0" and number_text(1e16) == "1e+16"
    assert number_text(1e6 + math.sin(2.0)) == "1000000.9092974268"
    assert [float(t) for t in column_text(np.array(values))] == values
    single = np.array(values[:4], dtype=np.float32)  # (a float32 model's numbers, read as float64)
    assert [float(t) for t in column_text(single)] == single.tolist()


def test_json_is_json():
    assert json.loads(json_text({"a": [1.5, 2]}, "the test")) == {"a": [1.5, 2]}
    for bad, where in (({"rmse": math.nan}, "['rmse'] = nan"), ({"a": [1.0, -math.inf]}, "['a'][1] = -inf"),
                       (np.float64(math.inf), "the value = inf")):
        with pytest.raises(ValueError, match=re.escape(f"the metrics would hold a value that is not a finite number "
                                                       f"({where}); nothing was written")):
            json_text(bad, "the metrics")


# -- far inputs: never NaN -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A float64 LV-GP-GP with the Matérn-5/2 kernel and a float32 GP, fitted by the CLI; a CSV of far rows."""
    d = tmp_path_factory.mktemp("far")
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, 60)
    train = write_xy(d / "train.csv", zip(x.tolist(), (1e6 + np.sin(2 * x)).tolist()))
    models = {}
    for name, flags in (("matern52", ["--kernel", "matern52"]), ("float32", ["--model", "GP", "--dtype", "float32"])):
        models[name] = d / f"{name}.safetensors"
        assert main(["fit", str(train), "--target", "y", *flags, "--iterations", "5", "--num-inducing", "6",
                     "--predict-samples", "20", "--out", str(models[name]), "--no-progress"]) == 0
    far = write_xy(d / "far.csv", [["0.5", "1000000.8"], ["1e160", "1e6"], ["-1e300", "1e6"], ["1.7e308", "1e6"]])
    return d, models, far


def test_far_rows_are_predicted_and_evaluated_as_finite_numbers(fitted, capsys):
    d, models, far = fitted
    out = d / "pred.csv"
    assert main(["predict", str(models["matern52"]), str(far), "--out", str(out), "--samples", "2"]) == 0
    with open(out, newline="") as f:
        rows = list(csv.reader(f))[1:]
    assert len(rows) == 4 and np.isfinite(np.array(rows, dtype=float)).all()
    capsys.readouterr()
    assert main(["evaluate", str(models["matern52"]), str(far), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert all(math.isfinite(metrics[k]) for k in ("log_density", "rmse", "crps"))


def previous_outputs(d) -> dict:
    """{path: text} of a previous predictions file and a previous metrics file, written in ``d``: the files
    that predict and evaluate would replace."""
    kept = {d / "kept.csv": "mean,std,q0.5\n1.0,2.0,1.0\n",
            d / "kept.json": json.dumps(dict.fromkeys(["model", "target", "n", "log_density", "rmse", "crps"], 1))}
    for out, good in kept.items():
        out.write_text(good)
    return kept


def test_a_value_beyond_the_models_dtype_is_refused_by_file_line_and_column(fitted, capsys):
    d, models, far = fitted
    data = write_xy(d / "big.csv", [["0.5", "1000000.8"], ["", ""], ["1e39", "1e6"]])  # (a blank line: line 4)
    kept = previous_outputs(d)
    for argv in (["predict", str(models["float32"]), str(data), "--out", str(d / "kept.csv")],
                 ["evaluate", str(models["float32"]), str(data), "--json", str(d / "kept.json")]):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and (f"{data}, line 4: 'x' is 1e+39, beyond what the model's float32 arithmetic "
                                         "holds once standardised (1 such value(s)); fit a float64 model") in err
        assert all(out.read_text() == good for out, good in kept.items())
    big_y = write_xy(d / "big_y.csv", [["0.5", "1000000.8"], ["0.1", "1e45"]])
    assert main(["evaluate", str(models["float32"]), str(big_y)]) == 2
    assert f"{big_y}, line 3: 'y' is 1e+45, beyond what the model's float32" in capsys.readouterr().err


def test_a_prediction_that_is_not_finite_is_refused_by_line_and_nothing_is_written(fitted, capsys, monkeypatch):
    # the last line of defence: whatever made it, NaN or inf is never written as a result
    d, models, far = fitted
    kept = previous_outputs(d)
    real = DeepGPRegressor.predict

    def broken(self, X, return_std=False):
        mean, std = real(self, X, return_std=True)
        mean[2] = math.nan
        return (mean, std) if return_std else mean

    monkeypatch.setattr(DeepGPRegressor, "predict", broken)
    for argv, what in ((["predict", str(models["matern52"]), str(far), "--out", str(d / "kept.csv")], "predictions"),
                       (["evaluate", str(models["matern52"]), str(far), "--json", str(d / "kept.json")],
                        "log density, error")):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{far}, line(s) 4: the model's {what}" in err and "nothing was written" in err
        assert all(out.read_text() == good for out, good in kept.items())


def test_a_mean_near_float64s_largest_is_written_not_overflowed(fitted, capsys, monkeypatch):
    # CRPS of 1e308 at every point: their sum is beyond float64, their mean is not (metrics.scaled_mean)
    d, models, far = fitted
    monkeypatch.setattr("deepgp.metrics.crps_from_samples", lambda draws, y: np.full(len(y), 1e308))
    assert main(["evaluate", str(models["matern52"]), str(far), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["crps"] == pytest.approx(1e308, rel=1e-12)
