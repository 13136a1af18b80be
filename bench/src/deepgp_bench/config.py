"""The benchmark's own settings, declared as deepgp declares its own (:func:`deepgp.config.setting`):
how a configuration is split and evaluated, and the SGHMC baseline's sampler."""

from __future__ import annotations

from dataclasses import dataclass

from deepgp.config import check_declared, setting
from deepgp.validation import check_positive_float


@dataclass(frozen=True)
class BenchmarkConfig:
    """How a benchmark configuration is split and evaluated (the paper's protocol by default)."""

    protocol: str = setting("splits", "splits: real splits with training statistics; paper: split 0 with all-data "
                                      "statistics and the split numbers as seeds (the paper's code)",
                            choices=("splits", "paper"))
    test_limit: int = setting(10_000, "at most this many test points (a fixed random subset)")
    predict_samples: int = setting(2000, "predictive draws per test point (the paper: 2000; Shapiro-Wilk needs 3)",
                                   minimum=3)
    shapiro_points: int = setting(200, "test points for the median Shapiro-Wilk W (0: every test point, as the "
                                       "paper)", minimum=0)

    def __post_init__(self):
        check_declared(self)


@dataclass(frozen=True)
class SGHMCConfig:
    """The SGHMC deep GP baseline's sampler (:mod:`deepgp_bench.baselines.sghmc`). Its burn-in is TrainConfig's
    ``iterations``, its minibatch ``batch_size``, its hyperparameters' Adam ``lr``, ``decay``, ``decay_every``."""

    sghmc_samples: int = setting(2000, "SGHMC: posterior samples kept after the burn-in")
    sghmc_thinning: int = setting(5, "SGHMC: sampler steps per kept sample (samples × thinning steps after burn-in)")
    sghmc_step: float = setting(0.01, "SGHMC: the sampler's step size ε")
    sghmc_mdecay: float = setting(0.05, "SGHMC: the momentum decay α per step, in (0, 1)")
    sghmc_window: int = setting(100, "SGHMC: moving-window MCEM, each hyperparameter step uses one of the last "
                                     "window states")

    def __post_init__(self):
        check_declared(self)
        check_positive_float("sghmc_step", self.sghmc_step)
        if not 0 < check_positive_float("sghmc_mdecay", self.sghmc_mdecay) < 1:
            raise ValueError(f"sghmc_mdecay must be in (0, 1), got {self.sghmc_mdecay!r}")
