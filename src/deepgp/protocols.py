"""What prediction, the metrics and :class:`~deepgp.DeepGPRegressor` ask of a model.

:class:`~deepgp.DeepGP` satisfies :class:`ConditionalDensityModel`, and so may any other model of
p(y | x) whose predictive is a mixture of Gaussians over draws: (1/S) Σ_s N(y; μ_s, s_s² + σ²), with
the final moments (μ_s, s_s²) of draw s from :meth:`~ConditionalDensityModel.propagate_prior` and the noise
σ² from its likelihood. The paper's baselines (the ``deepgp-bench`` package) are such models.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
import torch


class Predictive(NamedTuple):
    """The final layer's moments of K draws at test inputs X [B, D] under w ~ p
    (:meth:`ConditionalDensityModel.propagate_prior`)."""

    mean: torch.Tensor  # [K, B, D_y]
    var: torch.Tensor  # [K, B, D_y], without the likelihood's σ²


class Likelihood(Protocol):
    """The Gaussian noise of a model's outputs (:class:`~deepgp.likelihoods.GaussianLikelihood`)."""

    def variance(self) -> torch.Tensor:
        """σ² per output [D_y]."""
        ...

    def log_predictive(self, Y: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        """log N(y; mean, var + σ²) summed over the outputs: Y, mean, var [..., D_y] → [...]."""
        ...


@runtime_checkable
class ConditionalDensityModel(Protocol):
    """A model of p(y | x) that :mod:`deepgp.prediction`, :mod:`deepgp.metrics` and the estimator can
    predict with: D = ``input_dim`` inputs, D_y = ``output_dim`` outputs, its parameters of ``dtype`` on
    ``device``."""

    @property
    def input_dim(self) -> int: ...

    @property
    def output_dim(self) -> int: ...

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def likelihood(self) -> Likelihood: ...

    def eval(self) -> Any:
        """Evaluation mode (``torch.nn.Module.eval``)."""
        ...

    def propagate_prior(self, X: torch.Tensor, num_samples: int) -> Predictive:
        """K = ``num_samples`` predictive draws at X [B, D]: the final moments of each, mean and variance
        [K, B, D_y] (the variance without σ²)."""
        ...

    def sample_predictive(self, X, num_samples: int = 1000, seed: int | None = None) -> np.ndarray:
        """Draws of y at X [N, D]: numpy [S, N, D_y]."""
        ...

    def predictive_log_density(self, X, Y, num_samples: int = 2000, estimator: str = "mixture",
                               seed: int | None = None) -> np.ndarray:
        """log p(y_n | x_n) per point, numpy [N] (:func:`deepgp.prediction.predictive_log_density`)."""
        ...
