"""Standardisation: inputs and targets in units of their training columns' standard deviation.

:func:`standardise` is the statistics the paper's splits use (deepgp.datasets.uci); :class:`Standardizer`
keeps them for a fitted estimator, the command line, the demo and the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# the largest |value| a column may hold: the differences x − mean of its values stay finite
LARGEST = float(np.finfo(np.float64).max) / 4


def column_statistics(train: np.ndarray, name: str = "the data") -> tuple[np.ndarray, np.ndarray]:
    """(mean [D], std [D]) of each column of ``train`` [N, D], at any scale float64 holds.

    Each column is divided by a power of two near its largest |value| first, which is exact: the
    statistics are those of the unscaled column to the last bit wherever its sums and squares
    neither overflow nor underflow, and of the column's true spread where they would (1e-170 squared
    is 0 in float64; 1e200 squared is inf). A constant column (every value equal) keeps std 1, so it
    becomes all zeros instead of dividing by zero. A column whose std is not a normal float64 (a
    spread below 2.2e-308, whose reciprocal overflows) or whose values exceed :data:`LARGEST` is
    refused: a ValueError naming ``name`` and the column.
    """
    train = np.asarray(train, dtype=np.float64)
    biggest = np.abs(train).max(axis=0, initial=0.0)
    for j in np.flatnonzero(~(biggest <= LARGEST)):
        raise ValueError(f"{name} has a value {biggest[j]:.3g} in column {j}, beyond the {LARGEST:.3g} whose "
                         "differences float64 can hold; rescale that column")
    const = np.ptp(train, axis=0) == 0  # exact: np.std of equal floats can be ~1e-16, not 0
    scale = np.ldexp(1.0, np.frexp(np.where(biggest > 0, biggest, 1.0))[1])  # 2^e ≥ |value|: exact division
    scaled = train / scale
    mean = np.where(const, train[0], scaled.mean(axis=0) * scale)  # (a constant column centred on its value)
    std = scaled.std(axis=0) * scale
    tiny = np.finfo(np.float64).tiny
    for j in np.flatnonzero(~const & ~(std >= tiny)):
        raise ValueError(f"{name} has a spread of {std[j]:.3g} in column {j} (values {train[:, j].min():.3g} to "
                         f"{train[:, j].max():.3g}), below the {tiny:.3g} that float64 arithmetic carries; "
                         "rescale that column")
    return mean, np.where(const, 1.0, std)


def standardise(train: np.ndarray, *others: np.ndarray, name: str = "the training data"):
    """Standardise by the statistics of ``train`` [N, D] (per column, :func:`column_statistics`).

    Returns ``(mean [D], std [D], train_std, *others_std)``. A constant column (std 0, e.g.
    naval's x9 and x12) keeps std 1, so it becomes all zeros instead of dividing by zero.
    """
    mean, std = column_statistics(train, name)
    return (mean, std, (train - mean) / std, *((o - mean) / std for o in others))


@dataclass
class Standardizer:
    """Per-column affine map ``z = (a - mean) / std`` with the statistics of
    :func:`column_statistics` (a constant column keeps std 1).

    mean, std: [D] arrays. The estimator, the CLI, the demo and the figures all go through it.
    """

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, A: np.ndarray, name: str = "the data") -> "Standardizer":
        """From data A [N, D]; a column float64 cannot standardise is a ValueError naming ``name``."""
        return cls(*column_statistics(A, name))

    def transform(self, A: np.ndarray) -> np.ndarray:
        """[..., D] original → standardised."""
        return (np.asarray(A, dtype=np.float64) - self.mean) / self.std

    def inverse(self, Z: np.ndarray) -> np.ndarray:
        """[..., D] standardised → original."""
        return np.asarray(Z) * self.std + self.mean

    @property
    def log_jacobian(self) -> float:
        """Σ_d log std_d: log p_original(y) = log p_standardised(z) − log_jacobian."""
        return float(np.log(self.std).sum())
