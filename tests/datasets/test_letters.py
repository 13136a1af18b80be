import numpy as np
import pytest

from deepgp.datasets import letters


def test_grid_is_inside_the_glyphs_and_multimodal():
    x, y = letters.letters_grid(resolution=100)
    assert x.shape == y.shape and x.shape[1] == 1
    assert 5000 < len(x) < 12000  # ≈ 81,000 at resolution 300 scales with the square
    assert np.all(np.diff(x[:, 0]) >= 0)  # sorted by x
    # the holes of 'D' and 'P' are empty: a vertical slice through the middle of 'D' has two runs
    xs = x[:, 0]
    d_mid = np.median(xs[xs < 0.8])
    col = np.sort(y[np.abs(xs - d_mid) < 0.006, 0])
    assert np.max(np.diff(col)) > 0.2


def test_split_is_disjoint_and_reproducible():
    (x, y), (xt, yt) = letters.load_letters(300, 100, resolution=100, seed=3)
    (x2, _), _ = letters.load_letters(300, 100, resolution=100, seed=3)
    assert x.shape == (300, 1) and yt.shape == (100, 1)
    np.testing.assert_array_equal(x, x2)
    train = set(map(tuple, np.hstack([x, y]).round(9)))
    assert not train & set(map(tuple, np.hstack([xt, yt]).round(9)))


def test_too_many_points_is_an_error():
    with pytest.raises(ValueError, match="exceeds"):
        letters.load_letters(10**6, 10, resolution=50)
