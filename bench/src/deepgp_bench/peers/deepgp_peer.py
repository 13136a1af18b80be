"""deepgp as a user gets it, ``deepgp.DeepGPRegressor()`` with its defaults, as an entry of the peers' run,
with its learning curve recorded by ``deepgp.fit``'s callback."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from deepgp import DeepGP, DeepGPRegressor
from deepgp import fit as train
from deepgp.early_stopping import split_rows
from deepgp.memory import check_training
from deepgp.validation import check_device

from .base import Peer

# where the learning curve is scored: iterations done (the last, the default budget, is the final model)
CURVE = (250, 500, 1000, 2000, 3000, 5000)
# the estimator's settings the run decides, not ``--set``: the seed is the split's, the draws the run's
RUN_SETTINGS = ("seed", "predict_samples", "progress")


class CallbackRegressor(DeepGPRegressor):
    """``DeepGPRegressor`` whose training calls ``callback(iteration, bound)`` after every step (``deepgp.fit``'s
    callback: iteration 0-based, the minibatch bound before the step; True stops training), with the
    model as it trains already in ``model_``, so that ``log_density`` and ``sample`` score it mid-training.

    :meth:`fit_model` is ``DeepGPRegressor.fit_model``'s (the estimator's documented extension point) with the
    callback passed on: the same checks, initialisation and training. Without a callback it fits the same
    model, bit for bit (bench/tests/test_peers.py).
    """

    callback: Callable[[int, float], object] | None = None

    def fit_model(self, X: np.ndarray, Y: np.ndarray):
        architecture, config = self.configs()[:2]
        check_training(DeepGP, architecture, config, len(X), X.shape[1], Y.shape[1], self.device)
        rows = np.arange(len(X))
        if config.resolved().early_stopping:  # initialised from the rows fit trains on, as it holds out the rest
            rows = split_rows(len(X), config.validation_fraction, config.seed)[0]
        model = DeepGP.from_config(architecture, X[rows], Y[rows], seed=self.seed, device=self.device)
        self.model_ = model
        return model, train(model, X, Y, config=config, progress=self.progress, callback=self.callback)


class DeepGPPeer(Peer):
    """``deepgp.DeepGPRegressor()`` with its defaults: an LV-GP-GP trained by importance-weighted VI for 5,000
    iterations under the recipe "fast", on all the training rows (no early-stopping part: the default trains
    its whole budget), seeded with the split. p(y | x) is the mixture (1/S) Σ_s N(y; μ_s, s_s² + σ²) over
    S = the run's ``--draws`` predictive draws (``DeepGPRegressor.log_density``, what ``score`` averages),
    drawn under the split's seed.

    Settings: ``estimator`` (always "DeepGPRegressor"), ``iterations`` (the estimator's default, recorded),
    ``curve`` (the iterations at which the run's scores are taken during training: those up to
    ``iterations``, and ``iterations`` itself) and any other parameter of the estimator (``--set
    deepgp.model=LV-GP``) but the seed, ``predict_samples`` and ``progress``, which the run sets.

    After ``fit``, ``curve`` is a list of {"iterations", "seconds", "log_density", "kde"}: the wall seconds
    since ``fit`` began with the curve's own evaluations excluded, and the run's scores of the model as it
    stood. The evaluations draw under their own seed inside ``torch.random.fork_rng`` (deepgp's ``seed=``),
    which hands the training's random stream back as it was, and the model is put back in training mode:
    training is the same bit for bit with or without the curve. ``fit_info["curve_seconds"]`` and
    ``["curve_cpu_seconds"]`` are the evaluations' time, which the run takes out of the fit's.
    """

    name = "deepgp"
    holds_out = False
    DEFAULTS = dict(estimator="DeepGPRegressor", iterations=5000, curve=CURVE)

    def __init__(self, **settings):
        params = DeepGPRegressor().get_params()
        own = {k: v for k, v in settings.items() if k not in self.DEFAULTS}
        unknown = sorted(set(own) - set(params))
        if unknown:
            raise ValueError(f"{self.name}: unknown setting(s) {unknown}; its settings are {sorted(self.DEFAULTS)} "
                             "and DeepGPRegressor's parameters")
        decided = sorted(set(own) & set(RUN_SETTINGS))
        if decided:
            raise ValueError(f"{self.name}: {decided} are set by the run (the seed is the split, the draws --draws)")
        super().__init__(**{k: v for k, v in settings.items() if k in self.DEFAULTS})
        self.settings |= own
        if self.settings["estimator"] != "DeepGPRegressor":
            raise ValueError(f"{self.name}: estimator must be 'DeepGPRegressor', got {self.settings['estimator']!r}")
        curve = self.settings["curve"]
        if (not isinstance(curve, (tuple, list)) or not all(isinstance(c, int) and c >= 1 for c in curve)
                or list(curve) != sorted(set(curve))):
            raise ValueError(f"{self.name}: curve must be increasing iteration counts >= 1, got {curve!r}")
        self.draws = 2000  # (the run's default --draws, until watch says)
        self.evaluate: Callable[[], dict] | None = None
        self.curve: list[dict] | None = None
        self.estimator(seed=0).configs()  # every estimator setting checked now: a ValueError names a bad one
        check_device(self.settings.get("device"))  # (the one the configs do not hold)

    def estimator(self, seed: int) -> CallbackRegressor:
        """The estimator this entry fits, seeded ``seed``."""
        params = {k: v for k, v in self.settings.items() if k not in ("estimator", "curve")}
        return CallbackRegressor(**params, seed=seed, predict_samples=self.draws, progress=False)

    def watch(self, evaluate: Callable[[], dict], draws: int) -> None:
        self.evaluate, self.draws = evaluate, draws

    def curve_points(self) -> list[int]:
        """The iterations the curve is scored at: ``curve``'s up to ``iterations``, and ``iterations``."""
        total = self.settings["iterations"]
        return sorted({c for c in self.settings["curve"] if c <= total} | ({total} if total else set()))

    def fit(self, X, y, X_val=None, y_val=None, seed=0):
        started = time.perf_counter()
        self.model = est = self.estimator(seed)
        points, spent, curve = set(self.curve_points()), [0.0, 0.0], []
        evaluate = self.evaluate

        def record(t: int, bound: float) -> None:
            if evaluate is None or t + 1 not in points:
                return
            wall, cpu = time.perf_counter(), time.process_time()
            training = est.model_.training
            values = evaluate()
            est.model_.train(training)  # (prediction leaves the model in eval mode)
            curve.append({"iterations": t + 1, "seconds": wall - started - spent[0],
                          "log_density": values["log_density"], "kde": values["kde"]})
            spent[0] += time.perf_counter() - wall
            spent[1] += time.process_time() - cpu

        est.callback = record
        est.fit(X, y)
        self.curve = curve if evaluate is not None else None
        self.fit_info = {"iterations": len(est.history_), "curve_seconds": spent[0],
                         "curve_cpu_seconds": spent[1]}
        return self

    def log_density(self, X, y):
        return self.model.log_density(X, y)

    def sample(self, X, num_samples, seed=0):
        return self.model.sample(X, num_samples, seed=seed)
