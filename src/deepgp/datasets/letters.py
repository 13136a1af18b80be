"""The paper's synthetic "DGP" letters set (section 4.1).

Points on a fine regular grid inside the glyphs of the italic text "DGP"; the input is the
horizontal coordinate and the output the vertical one. The conditional density p(y | x) is then
multimodal, piecewise constant and changes discontinuously with x (bi- to tri-modal mid-'G').
The glyphs come from matplotlib's text-path machinery and its bundled DejaVu font, so no font
file is shipped and the set is the same on every machine with the same matplotlib.
"""

from __future__ import annotations

import numpy as np
from matplotlib.font_manager import FontProperties
from matplotlib.path import Path
from matplotlib.textpath import TextPath
from scipy.special import log_ndtr, logsumexp

TEXT = "DGP"


def _glyph_polygons(text: str) -> list[np.ndarray]:
    """Closed outlines [P_i, 2] of ``text`` in bold italic DejaVu Sans, cap height ≈ 0.73 units."""
    prop = FontProperties(family="DejaVu Sans", style="italic", weight="bold")
    return [np.asarray(p) for p in TextPath((0, 0), text, size=1.0, prop=prop).to_polygons()]


def letters_grid(resolution: int = 300, text: str = TEXT) -> tuple[np.ndarray, np.ndarray]:
    """Every point of a square grid that falls inside the glyphs of ``text``.

    Args:
        resolution: grid points per unit of font size (the glyphs are ≈ 2.35 × 0.73 units for
            "DGP", so 300 gives ≈ 81,000 points inside, close to the
            paper's 73,419).
    Returns:
        x [N, 1] horizontal and y [N, 1] vertical coordinates, in font units, sorted by x.
    """
    polygons = _glyph_polygons(text)
    lo = np.min([p.min(0) for p in polygons], axis=0)
    hi = np.max([p.max(0) for p in polygons], axis=0)
    step = 1.0 / resolution
    gx = np.arange(lo[0] + step / 2, hi[0], step)
    gy = np.arange(lo[1] + step / 2, hi[1], step)
    pts = np.stack(np.meshgrid(gx, gy, indexing="ij"), -1).reshape(-1, 2)
    # even-odd rule over the outlines: a point inside a counter (the holes of 'D' and 'P') lies
    # inside two outlines and is excluded
    inside = np.zeros(len(pts), dtype=bool)
    for poly in polygons:
        inside ^= Path(poly).contains_points(pts)
    pts = pts[inside]
    return pts[:, :1].copy(), pts[:, 1:].copy()


def load_letters(
    num_train: int = 2000, num_test: int = 1000, resolution: int = 300, seed: int = 0
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """A random train / test split of :func:`letters_grid`, drawn without replacement.

    Returns ((x_train [num_train, 1], y_train [num_train, 1]), (x_test [num_test, 1], y_test [num_test, 1]))
    in font units (not standardised).
    """
    x, y = letters_grid(resolution)
    if num_train + num_test > len(x):
        raise ValueError(
            f"num_train + num_test = {num_train + num_test} exceeds the {len(x)} grid points at resolution {resolution}"
        )
    idx = np.random.default_rng(seed).permutation(len(x))
    tr, te = idx[:num_train], idx[num_train : num_train + num_test]
    return (x[tr], y[tr]), (x[te], y[te])


def letters_log_density(
    x: np.ndarray, y: np.ndarray, noise_variance: float = 0.0, resolution: int = 300, text: str = TEXT
) -> np.ndarray:
    """The exact log p(y | x) of the letters: the yardstick for a model's test log density on them.

    At a grid column x the data are uniform over its n_x cells [c_j − h/2, c_j + h/2] inside the
    glyphs (h = 1 / resolution), so p(y | x) = 1 / (n_x h) on them and 0 elsewhere. With observation
    noise N(0, s²) added (s² = ``noise_variance``, in squared font units) each cell's uniform becomes

        p(y | x) = 1/(n_x h) · Σ_j [Φ((y − c_j + h/2) / s) − Φ((y − c_j − h/2) / s)],

    what a model with a perfect map from (x, w) to the strokes and that noise variance would score.

    Args:
        x: [N, 1] or [N], in font units as :func:`load_letters` returns them; each must be one of the
            grid's columns at ``resolution`` (within a tenth of a cell).
        y: [N, 1] or [N], in font units.
        noise_variance: s², in squared font units (a standardised σ² times the variance of y).
        resolution: the grid's, as in :func:`letters_grid`.
        text: the glyphs, as in :func:`letters_grid`.
    Returns:
        [N] log densities in font units (−inf where y is off the strokes and ``noise_variance`` is 0);
        add log(std of y) for a standardised y, as the demo does.
    """
    x, y = np.asarray(x, dtype=float).reshape(-1), np.asarray(y, dtype=float).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"x and y hold {x.size} and {y.size} values: one y per x")
    if not noise_variance >= 0:  # (NaN too)
        raise ValueError(f"noise_variance must be ≥ 0, got {noise_variance}")
    gx, gy = letters_grid(resolution, text)
    h = 1.0 / resolution
    columns, starts = np.unique(gx[:, 0], return_index=True)
    k = np.clip(np.searchsorted(columns, x), 1, len(columns) - 1)
    k -= np.abs(x - columns[k - 1]) < np.abs(x - columns[k])  # the nearest column
    off = np.abs(x - columns[k]) > h / 10
    if off.any():
        raise ValueError(f"x = {x[off][0]:.6g} is not a column of the letters' grid at resolution {resolution}")
    ends = np.append(starts[1:], len(gx))
    out = np.empty(len(x))
    for col in np.unique(k):  # one column's points at a time: [points, cells]
        at = k == col
        cells = gy[starts[col]:ends[col], 0]
        d = y[at, None] - cells  # [P, n_x]
        if noise_variance == 0:
            inside = np.any(np.abs(d) <= h / 2, axis=1)
            out[at] = np.where(inside, -np.log(len(cells) * h), -np.inf)
            continue
        s = np.sqrt(noise_variance)
        upper, lower = (d + h / 2) / s, (d - h / 2) / s
        # log(Φ(u) − Φ(l)) for u > l, computed on the side of the cell where it does not cancel
        flip = lower > 0
        u, l = np.where(flip, -lower, upper), np.where(flip, -upper, lower)
        with np.errstate(divide="ignore"):  # a cell far from y holds no mass: log 0 = −inf, summed away
            mass = log_ndtr(u) + np.log1p(-np.exp(log_ndtr(l) - log_ndtr(u)))
        out[at] = logsumexp(mass, axis=1) - np.log(len(cells) * h)
    return out
