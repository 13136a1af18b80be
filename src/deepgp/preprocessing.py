"""Standardisation: inputs and targets in units of their training columns' standard deviation.

:func:`standardise` is the statistics the paper's splits use (deepgp.datasets.uci); :class:`Standardizer`
keeps them for a fitted estimator, the command line, the demo and the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def standardise(train: np.ndarray, *others: np.ndarray):
    """Standardise by the statistics of ``train`` [N, D] (per column).

    Returns ``(mean [D], std [D], train_std, *others_std)``. A constant column (std 0, e.g.
    naval's x9 and x12) keeps std 1, so it becomes all zeros instead of dividing by zero.
    """
    # constant columns are detected exactly (np.std of equal floats can be ~1e-16, not 0) and
    # centred on their value, so they come out exactly 0
    const = np.ptp(train, axis=0) == 0
    # columns with values beyond 1e100 are scaled down first: their sums and squares would overflow
    scale = np.abs(train).max(axis=0, initial=0.0)
    scale = np.where(scale > 1e100, scale, 1.0)
    mean = np.where(const, train[0], (train / scale).mean(axis=0) * scale)
    std = (train / scale).std(axis=0) * scale
    std = np.where(const | (std == 0), 1.0, std)  # std 0 without ptp 0: spreads of ~1e-300 underflow
    return (mean, std, (train - mean) / std, *((o - mean) / std for o in others))


@dataclass
class Standardizer:
    """Per-column affine map ``z = (a - mean) / std`` with the statistics of
    :func:`standardise` (a constant column keeps std 1).

    mean, std: [D] arrays. The estimator, the CLI, the demo and the figures all go through it.
    """

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, A: np.ndarray) -> "Standardizer":
        """From data A [N, D]."""
        mean, std, _ = standardise(np.asarray(A, dtype=np.float64))  # constant columns keep std 1
        return cls(mean, std)

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
