"""``BaselineRegressor``: :class:`deepgp.DeepGPRegressor` that also fits the paper's baselines.

``model`` may name a network (``Linear``, ``CVAE-50``, ``CVAE-100-100``, ...: trained by ``vi`` or
``iw``) and ``method`` may be ``sghmc`` (a GP-only spec sampled by SGHMC), beside every deep GP the
library's estimator fits, which it fits exactly as that one does. The SGHMC sampler's settings
(:class:`~deepgp_bench.config.SGHMCConfig`) are parameters too. A fitted baseline predicts and scores
as a deep GP does; it is not saved (``save`` refuses it).
"""

from __future__ import annotations

import numpy as np

from deepgp import DeepGPRegressor
from deepgp.config import ModelConfig, TrainConfig, settings_of

from .baselines import check_pair, fit, model_config, train_method
from .config import SGHMCConfig


class BaselineRegressor(DeepGPRegressor):
    """A deep GP regressor that also fits the paper's baselines (see the module docstring)."""

    config_classes = (ModelConfig, TrainConfig, SGHMCConfig)

    def __init__(self, *args, **kwargs):  # (its signature, generated: DeepGPRegressor's parameters and SGHMCConfig's)
        super().__init__(*args, **kwargs)

    def configs(self) -> tuple[ModelConfig, TrainConfig, SGHMCConfig]:
        """The settings as configs; a baseline's ``model`` (Linear, CVAE-50, ...) or ``method`` (sghmc) is
        checked by :func:`deepgp_bench.baselines.check_pair` and made into the configs it reads."""
        params = self.get_params()
        train = {**settings_of(TrainConfig, params), "method": train_method(self.model, self.method)}
        return model_config(self.model, params), TrainConfig(**train), SGHMCConfig(**settings_of(SGHMCConfig, params))

    def fit_model(self, X: np.ndarray, Y: np.ndarray):
        """A baseline of the paper's Table S1 (:func:`deepgp_bench.baselines.fit`), else the deep GP."""
        if not check_pair(self.model, self.method):
            return super().fit_model(X, Y)
        architecture, train, sampler = self.configs()
        return fit(self.model, self.method, X, Y, architecture, train, sampler, self.device)
