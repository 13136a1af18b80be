"""UCI loader, download parsing and the paper's splits."""

import gzip
import hashlib
from pathlib import Path

import numpy as np
import pytest

from deepgp.datasets import uci

# shared/ sits beside the clone (CI: /path/clone and /path/shared)
UCI_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "uci"
needs_data = pytest.mark.skipif(not (UCI_DIR / "yacht.csv.gz").exists(), reason=f"UCI data not found at {UCI_DIR}")


@needs_data
def test_load_uci_shapes_and_listing():
    X, Y = uci.load_uci("yacht", UCI_DIR)
    assert X.shape == (308, 6) and Y.shape == (308, 1) and X.dtype == np.float64
    assert {"yacht", "boston", "naval"} <= set(uci.list_uci(UCI_DIR))


def test_search_order_env_and_cache(tmp_path, monkeypatch):
    env, cache = tmp_path / "env", tmp_path / "cache"
    monkeypatch.setenv(uci.ENV_VAR, str(env))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    uci.write_uci(cache / "deepgp" / "uci" / "toy.csv.gz", np.arange(12.0).reshape(4, 3))
    assert uci.find_uci("toy") == cache / "deepgp" / "uci" / "toy.csv.gz"
    uci.write_uci(env / "toy.csv.gz", np.ones((4, 3)))
    assert uci.find_uci("toy") == env / "toy.csv.gz"  # $DEEPGP_DATA before the cache
    X, Y = uci.load_uci("toy")
    assert X.shape == (4, 2) and np.all(Y == 1)
    assert uci.list_uci() == ["toy"]
    uci.write_uci(tmp_path / "given" / "mine.csv.gz", np.ones((4, 3)))
    assert uci.list_uci(tmp_path / "given") == ["mine"]  # a folder named explicitly is the collection meant


def test_missing_dataset_says_where_and_how(tmp_path, monkeypatch):
    monkeypatch.setenv(uci.ENV_VAR, str(tmp_path / "env"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "given").mkdir()
    with pytest.raises(FileNotFoundError) as info:
        uci.load_uci("boston", tmp_path / "given")
    msg = str(info.value)
    for folder in ("given", "env", "cache"):
        assert str(tmp_path / folder) in msg
    assert "Provide it with deepgp.datasets.download_uci('boston')" in msg and "DEEPGP_DATA" in msg
    assert "did you mean" not in msg


def test_a_data_folder_given_that_does_not_exist_is_an_error_not_a_reason_to_look_elsewhere(tmp_path, monkeypatch):
    monkeypatch.setenv(uci.ENV_VAR, str(tmp_path / "env"))
    uci.write_uci(tmp_path / "env" / "toy.csv.gz", np.ones((4, 3)))
    for look in (lambda: uci.find_uci("toy", tmp_path / "typo"), lambda: uci.list_uci(tmp_path / "typo")):
        with pytest.raises(FileNotFoundError, match=r"the data folder .*typo does not exist"):
            look()
    assert uci.find_uci("toy") == tmp_path / "env" / "toy.csv.gz"


@pytest.mark.parametrize("name", ["two\nlines", "a,b", "with space", '"quoted"', "../up", ".hidden", "", "x" * 101])
def test_a_data_set_name_is_a_plain_name(tmp_path, monkeypatch, name):
    """A name goes into results rows (one line each) and reports: one that holds a line break, a comma, a
    quote or a path is refused where it is given, and a file of such a name is left out of a listing."""
    monkeypatch.setenv(uci.ENV_VAR, str(tmp_path))
    with pytest.raises(ValueError, match="a data set's name is a letter or digit"):
        uci.find_uci(name)
    if name and "/" not in name and len(name) < 100:
        uci.write_uci(tmp_path / f"{name}.csv.gz", np.ones((4, 3)))
        uci.write_uci(tmp_path / "fine_1.2-x+y.csv.gz", np.ones((4, 3)))
        with pytest.warns(UserWarning, match="ignoring the data file"):
            assert uci.list_uci(tmp_path) == ["fine_1.2-x+y"]


def test_missing_dataset_suggests_a_near_name(tmp_path, monkeypatch):
    monkeypatch.setenv(uci.ENV_VAR, str(tmp_path / "env"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    uci.write_uci(tmp_path / "env" / "mydata.csv.gz", np.ones((4, 3)))
    with pytest.raises(FileNotFoundError, match=r"'mydat' not found \(did you mean 'mydata'\?\)") as info:
        uci.find_uci("mydat")
    assert "Provide it by placing mydat.csv.gz" in str(info.value)  # not downloadable: no download hint
    with pytest.raises(FileNotFoundError, match=r"did you mean 'boston'\?"):
        uci.find_uci("bostn")  # a downloadable name counts though it is not on disk
    with pytest.raises(FileNotFoundError) as info:
        uci.find_uci("zzzzzz")
    assert "did you mean" not in str(info.value)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty user cache folder, so downloads neither read nor write the real one."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "deepgp" / "uci"


def _pin(monkeypatch, name, path):
    """Pin ``path``'s SHA-256 as ``name``'s source hash, as if it were the upstream file."""
    monkeypatch.setitem(uci.SOURCE_SHA256, name, hashlib.sha256(Path(path).read_bytes()).hexdigest())


def _gal_text(rows):
    return "\n".join(" ".join(f"{v:g}" for v in r) for r in rows) + "\n"


def test_every_source_has_a_pinned_sha256():
    assert set(uci.SOURCE_SHA256) == set(uci.SOURCES)
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in uci.SOURCE_SHA256.values())


def test_download_parses_gal_and_trefor_formats(tmp_path, cache, monkeypatch):
    # Gal's energy: whitespace text, 8 inputs then the heating load
    rows = np.arange(27.0).reshape(3, 9)
    (tmp_path / "energy.txt").write_text(_gal_text(rows))
    _pin(monkeypatch, "energy", tmp_path / "energy.txt")
    path = uci.download_uci("energy", tmp_path / "out", url=(tmp_path / "energy.txt").as_uri())
    X, Y = uci.load_uci("energy", tmp_path / "out")
    assert path.name == "energy.csv.gz" and X.shape == (3, 8)
    np.testing.assert_array_equal(Y[:, 0], rows[:, 8])
    # Gal's naval: two targets last; the first is kept, the second dropped
    rows = np.arange(36.0).reshape(2, 18)
    (tmp_path / "naval.txt").write_text(_gal_text(rows))
    _pin(monkeypatch, "naval", tmp_path / "naval.txt")
    uci.download_uci("naval", tmp_path / "out", url=(tmp_path / "naval.txt").as_uri())
    X, Y = uci.load_uci("naval", tmp_path / "out")
    np.testing.assert_array_equal(X, rows[:, :16])
    np.testing.assert_array_equal(Y[:, 0], rows[:, 16])
    # treforevans: gzipped comma-separated, target last
    with gzip.open(tmp_path / "forest.csv.gz", "wt") as f:
        f.write("1,2,3\n4,5,6\n")
    _pin(monkeypatch, "forest", tmp_path / "forest.csv.gz")
    uci.download_uci("forest", tmp_path / "out", url=(tmp_path / "forest.csv.gz").as_uri())
    X, Y = uci.load_uci("forest", tmp_path / "out")
    np.testing.assert_array_equal(X, [[1, 2], [4, 5]])
    np.testing.assert_array_equal(Y, [[3], [6]])
    # a column index other than last (parse_source's own option)
    np.testing.assert_array_equal(uci.parse_source(b"9 1 2\n8 3 4\n", "whitespace", 0), [[1, 2, 9], [3, 4, 8]])
    with pytest.raises(ValueError, match="no known source"):
        uci.download_uci("nonesuch", tmp_path)


def test_download_checks_the_pinned_hash_and_reuses_the_verified_copy(tmp_path, cache, monkeypatch):
    rows = np.array([[1.0, 2.5, 3.0], [4.0, 5.0, 6.25]])
    src = tmp_path / "yacht.txt"
    src.write_text(_gal_text(rows))
    _pin(monkeypatch, "yacht", src)
    path = uci.download_uci("yacht", tmp_path / "out", url=src.as_uri())
    assert path == tmp_path / "out" / "yacht.csv.gz"
    with gzip.open(path, "rt") as f:
        assert f.readline() == "x1,x2,y\n"
    X, Y = uci.load_uci("yacht", tmp_path / "out")
    np.testing.assert_array_equal(np.hstack([X, Y]), rows)
    # the verified source is cached: a second download needs no source at all
    src.unlink()
    path.unlink()
    assert uci.download_uci("yacht", tmp_path / "out", url=src.as_uri()) == path and path.is_file()


@pytest.mark.parametrize("damage", ["one byte changed", "truncated"])
def test_download_refuses_a_changed_or_truncated_file(tmp_path, cache, monkeypatch, damage):
    with gzip.open(tmp_path / "good.csv.gz", "wt") as f:
        f.write("".join(f"{i},{i + 1},{2 * i}\n" for i in range(50)))
    _pin(monkeypatch, "forest", tmp_path / "good.csv.gz")
    raw = (tmp_path / "good.csv.gz").read_bytes()
    bad = raw[:20] + bytes([raw[20] ^ 1]) + raw[21:] if damage == "one byte changed" else raw[: len(raw) // 2]
    (tmp_path / "bad.csv.gz").write_bytes(bad)
    with pytest.raises(ValueError, match=r"UCI data set 'forest': the upstream file .* changed") as info:
        uci.download_uci("forest", tmp_path / "out", url=(tmp_path / "bad.csv.gz").as_uri())
    assert "\n" not in str(info.value) and uci.SOURCE_SHA256["forest"] in str(info.value)
    assert not (tmp_path / "out" / "forest.csv.gz").exists()
    assert not any((cache / "sources").iterdir())  # nothing unverified is kept


def test_url_override_is_checked_against_the_real_pin(tmp_path, cache):
    (tmp_path / "yacht.txt").write_text("1 2 3\n")
    with pytest.raises(ValueError, match="'yacht'.*changed"):
        uci.download_uci("yacht", tmp_path, url=(tmp_path / "yacht.txt").as_uri())
    assert not (tmp_path / "yacht.csv.gz").exists()


def test_split_sizes_seed_and_training_statistics():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(3.0, 2.0, (1000, 3)), rng.normal(-1.0, 5.0, (1000, 1))
    s = uci.split_data(X, Y, split=2)
    assert len(s.X_train) == 900 and len(s.X_test) == 100
    order = np.arange(1000)
    np.random.RandomState(2).shuffle(order)  # bayesian_benchmarks: np.random.seed(split); shuffle
    np.testing.assert_allclose(s.X_train * s.x_std + s.x_mean, X[order[:900]])
    np.testing.assert_allclose(s.Y_test * s.y_std + s.y_mean, Y[order[900:]])
    # training statistics: the training set is exactly standardised, the test set is not
    np.testing.assert_allclose(s.X_train.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(s.Y_train.std(0), 1)
    assert abs(s.Y_test.mean()) > 1e-6
    # same split → same data; another split → another shuffle
    np.testing.assert_array_equal(uci.split_data(X, Y, split=2).X_test, s.X_test)
    assert not np.array_equal(uci.split_data(X, Y, split=3).X_test, s.X_test)
    # the paper's code: all-data statistics
    a = uci.split_data(X, Y, split=2, stats="all")
    np.testing.assert_allclose(a.x_mean, X.mean(0))
    # at most test_limit test points, the first of the shuffled test set
    c = uci.split_data(X, Y, split=2, test_limit=30)
    np.testing.assert_array_equal(c.X_test, s.X_test[:30])


def test_constant_columns_stay_zero():
    X = np.column_stack([np.arange(10.0), np.full(10, 7.0)])
    _, std, Xs = uci.standardise(X)
    assert std[1] == 1 and np.all(Xs[:, 1] == 0) and np.all(np.isfinite(Xs))


@needs_data
def test_naval_split_is_finite_and_capped():
    s = uci.load_split("naval", 0, UCI_DIR, test_limit=500)
    assert len(s.X_train) == int(11934 * 0.9) and len(s.X_test) == 500
    assert np.all(np.isfinite(s.X_train)) and np.all(s.X_train[:, [8, 11]] == 0)
