"""The paper's baselines (its Table S1), each a :class:`deepgp.protocols.ConditionalDensityModel`.

* ``Linear`` (:mod:`~deepgp_bench.baselines.linear`): the CVAE with no hidden layers, as in the paper;
* ``CVAE-50``, ``CVAE-100-100``, ``CVAE-50-50``, ... (:mod:`~deepgp_bench.baselines.cvae`): any hidden widths,
  trained by the VI bound (``vi``, the paper) or the importance-weighted one (``iw``: an IWAE);
* any GP-only spec (``GP``, ``GP-GP``, ``GP-GP-GP``) with method ``sghmc``
  (:mod:`~deepgp_bench.baselines.sghmc`): inducing outputs sampled by SGHMC (Havasi et al. 2018).

Each model has ``sample_predictive``, ``predictive_log_density`` (``kde``, ``mixture``; Linear also
``exact``) and ``propagate_prior(X, S)``, so :func:`deepgp.metrics.split_metrics`, the
runner and the estimator (:class:`deepgp_bench.estimator.BaselineRegressor`) treat it as one more model.
"""

from __future__ import annotations

import dataclasses
import re

from deepgp import DeepGP
from deepgp.config import ModelConfig, TrainConfig, parse_spec, settings_of
from deepgp.linalg import seeded
from deepgp.validation import as_xy, check_device, torch_dtype

from ..config import SGHMCConfig
from .cvae import CVAE, fit_cvae
from .linear import Linear
from .sghmc import SGHMCDeepGP, fit_sghmc

CVAE_METHODS = ("vi", "iw")
SGHMC = "sghmc"


def network_name(model: str) -> str | None:
    """``"linear"`` → ``"Linear"``, ``"cvae-100-100"`` → ``"CVAE-100-100"``; None for anything else
    (a deep GP spec); ``"CVAE"`` without widths is an error."""
    if not isinstance(model, str):
        return None
    text = model.strip()
    if text.lower() == "linear":
        return "Linear"
    if not text.upper().startswith("CVAE"):
        return None
    if not re.fullmatch(r"CVAE(-[1-9][0-9]*)+", text.upper()):
        raise ValueError(f"a CVAE is named by its hidden widths, like 'CVAE-50' or 'CVAE-100-100', got {model!r}")
    return text.upper()


def hidden_widths(name: str) -> tuple[int, ...]:
    """The hidden widths of a network name: ``"Linear"`` → (), ``"CVAE-50-50"`` → (50, 50)."""
    return () if name == "Linear" else tuple(int(w) for w in name.split("-")[1:])


def check_pair(model: str, method: str) -> tuple[str, str] | None:
    """The normalised (model, method) of a baseline, None for a deep GP trained by VI or IW; a
    ValueError for a pair that is neither (a CVAE by sghmc, SGHMC on a spec with LV layers)."""
    name = network_name(model)
    if name is not None:
        if method not in CVAE_METHODS:
            raise ValueError(f"{name} is trained by one of {CVAE_METHODS}, got {method!r}")
        return name, method
    if method != SGHMC:
        return None
    tokens = parse_spec(model)
    if "LV" in tokens:
        raise ValueError(f"sghmc samples GP-only deep GPs (GP, GP-GP, GP-GP-GP), got {model!r}")
    return "-".join(tokens), method


def train_method(model: str, method: str) -> str:
    """The TrainConfig method of a (model, method): itself, or "vi" for sghmc (whose sampler reads only
    TrainConfig's budget, batch and Adam schedule); a baseline's pair is checked."""
    check_pair(model, method)
    return "vi" if method == SGHMC else method


def model_config(model: str, settings: dict) -> ModelConfig:
    """The ModelConfig of ``model`` from ``settings`` (any dict holding its fields): a network baseline
    (Linear, CVAE-...) reads only ``latent_dim`` and ``dtype`` from it, and gets the spec "GP" there."""
    return ModelConfig(**{**settings_of(ModelConfig, settings), "model": "GP" if network_name(model) else model})


def fit(model: str, method: str, X, Y, model_config: ModelConfig | None = None,
        train: TrainConfig | None = None, sghmc: SGHMCConfig | None = None, device=None):
    """Build and train the baseline ``model`` by ``method`` on X [N, D], Y [N, D_y] (standardised);
    returns (the fitted model, its bound per iteration).

    A CVAE takes ``latent_dim`` and ``dtype`` from ``model_config`` and its training from ``train``
    (``method``, ``num_samples``, ``iterations``, ``batch_size``, ``lr``, ``decay``, ``decay_every``,
    ``seed``). An SGHMC deep GP is the DeepGP of ``model_config`` with the model's spec, sampled
    with ``sghmc``'s settings after ``train.iterations`` burn-in steps.
    """
    model, method = check_pair(model, method) or (model, method)
    model_config = model_config or ModelConfig()
    train = (train or TrainConfig()).resolved()  # (the optimiser settings left unset: the recipe's)
    sghmc = sghmc or SGHMCConfig()
    schedule = dict(iterations=train.iterations, batch_size=train.batch_size, lr=train.lr, decay=train.decay,
                    decay_every=train.decay_every, seed=train.seed)
    if method == SGHMC:
        dgp = DeepGP.from_config(dataclasses.replace(model_config, model=model), X, Y, seed=train.seed, device=device)
        net = SGHMCDeepGP(dgp)
        history = fit_sghmc(net, X, Y, samples=sghmc.sghmc_samples, thinning=sghmc.sghmc_thinning,
                            step=sghmc.sghmc_step, mdecay=sghmc.sghmc_mdecay, window=sghmc.sghmc_window, **schedule)
        return net, history
    X, Y = as_xy(X, Y, min_rows=2)
    widths = hidden_widths(model)
    with seeded(train.seed):
        net = (Linear(X.shape[1], Y.shape[1], model_config.latent_dim, X.shape[0]) if not widths else
               CVAE(X.shape[1], Y.shape[1], widths, model_config.latent_dim, X.shape[0]))
    net = net.to(device=check_device(device), dtype=torch_dtype(model_config.dtype))
    history = fit_cvae(net, X, Y, method, train.resolved().num_samples if method == "iw" else 1, **schedule)
    return net, history


__all__ = ["check_pair", "fit", "hidden_widths", "model_config", "network_name", "train_method"]
