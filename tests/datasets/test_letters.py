import numpy as np
import pytest
from scipy.integrate import trapezoid  # (numpy.trapezoid is numpy 2 only; the floor is 1.24)

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


def test_exact_density_is_uniform_over_each_columns_cells():
    gx, gy = letters.letters_grid(resolution=100)
    h = 1 / 100
    column = gx[:, 0] == np.median(gx[:, 0])
    n = column.sum()
    x, y = gx[column], gy[column]
    # on the strokes: 1 / (n_x h), the same everywhere in the column
    np.testing.assert_allclose(letters.letters_log_density(x, y, resolution=100), -np.log(n * h))
    # in a gap between two runs of cells (the column crosses a hole or two strokes) and far off: zero density
    ys = np.sort(y[:, 0])
    gaps = np.flatnonzero(np.diff(ys) > 1.5 * h)
    assert gaps.size  # the middle column crosses more than one stroke
    between = (ys[gaps[0]] + ys[gaps[0] + 1]) / 2
    assert np.all(letters.letters_log_density(x[:2, 0], [between, ys[-1] + 1.0], resolution=100) == -np.inf)


@pytest.mark.parametrize("noise_variance", [0.0, 1e-4, 4e-3])
def test_exact_density_integrates_to_one(noise_variance):
    gx, _ = letters.letters_grid(resolution=100)
    x0 = gx[len(gx) // 3, 0]
    y = np.linspace(-1.0, 2.0, 60001)
    p = np.exp(letters.letters_log_density(np.full_like(y, x0), y, noise_variance, resolution=100))
    assert abs(trapezoid(p, y) - 1) < 2e-3


def test_exact_density_with_noise_is_the_uniform_convolved_with_a_gaussian():
    # the closed form against a direct numerical convolution of the noise-free density, in its far tail too
    from scipy.stats import norm

    gx, gy = letters.letters_grid(resolution=100)
    x0 = gx[len(gx) // 2, 0]
    s2 = 1e-3
    ys = np.array([gy[len(gy) // 2, 0], gy[gx[:, 0] == x0, 0].max() + 0.05, gy[gx[:, 0] == x0, 0].max() + 0.2])
    t = np.linspace(-1.0, 2.0, 300001)
    clean = np.exp(letters.letters_log_density(np.full_like(t, x0), t, resolution=100))
    direct = [np.log(trapezoid(clean * norm.pdf(v - t, scale=np.sqrt(s2)), t)) for v in ys]
    got = letters.letters_log_density(np.full_like(ys, x0), ys, s2, resolution=100)
    np.testing.assert_allclose(got, direct, atol=2e-3)
    assert np.all(np.isfinite(got)) and got[2] < got[1] < got[0]


def test_exact_density_refuses_what_it_cannot_score():
    with pytest.raises(ValueError, match="not a column"):
        letters.letters_log_density([[0.123456]], [[0.3]], resolution=100)
    with pytest.raises(ValueError, match="one y per x"):
        letters.letters_log_density(np.zeros(3), np.zeros(2), resolution=100)
    with pytest.raises(ValueError, match="noise_variance"):
        gx, gy = letters.letters_grid(resolution=100)
        letters.letters_log_density(gx[:1], gy[:1], -1.0, resolution=100)
