"""What the commands write: every number reads back as the float it came from, distinct columns have
distinct names, no NaN or infinity is written as a result, and JSON is JSON."""

import csv
import json
import math
import re

import numpy as np
import pytest

from deepgp.cli import main
from deepgp.commands import level_name, load_regressor
from deepgp.metrics import regressor_metrics
from deepgp.outputs import column_text, json_text, number_text


def write_xy(path, x, y):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["x", "y"])
        w.writerows(zip(map(repr, map(float, x)), map(repr, map(float, y))))
    return path


@pytest.fixture(scope="module")
def offset(tmp_path_factory):
    """A GP fitted by the CLI to y = 10⁶ + sin(2x) + noise: the signal is in the digits past the sixth."""
    d = tmp_path_factory.mktemp("outputs")
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, 60)
    data = write_xy(d / "train.csv", x, 1e6 + np.sin(2 * x) + 0.1 * rng.standard_normal(60))
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
