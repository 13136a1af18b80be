"""The paper's synthetic "DGP" letters set (section 4.1).

Points on a fine regular grid inside the glyphs of the italic text "DGP"; the input is the
horizontal coordinate and the output the vertical one. The conditional density p(y | x) is then
multimodal, piecewise constant and changes discontinuously with x (bi- to tri-modal mid-'G').
The glyphs come from matplotlib's text-path machinery and its bundled DejaVu font, so no font
file is shipped and the set is the same on every machine with the same matplotlib.
"""

from __future__ import annotations

import numpy as np

TEXT = "DGP"


def _glyph_polygons(text: str) -> list[np.ndarray]:
    """Closed outlines [P_i, 2] of ``text`` in bold italic DejaVu Sans, cap height ≈ 0.73 units."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath

    prop = FontProperties(family="DejaVu Sans", style="italic", weight="bold")
    return TextPath((0, 0), text, size=1.0, prop=prop).to_polygons()


def letters_grid(resolution: int = 300, text: str = TEXT) -> tuple[np.ndarray, np.ndarray]:
    """Every point of a square grid that falls inside the glyphs of ``text``.

    Args:
        resolution: grid points per unit of font size (the glyphs are ≈ 2.35 × 0.73 units for
            "DGP", so 300 gives ≈ 81,000 points inside, close to the
            paper's 73,419).
    Returns:
        x [N, 1] horizontal and y [N, 1] vertical coordinates, in font units, sorted by x.
    """
    from matplotlib.path import Path

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
