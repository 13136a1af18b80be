"""``DeepGPRegressor``: a deep GP with latent variables behind scikit-learn's fit / predict / score.

The estimator standardises inputs and targets internally (:class:`Standardizer`), fits a
:class:`~deepgp.DeepGP` in standardised units and reports everything in the original units. All
Monte Carlo predictions are reproducible: they draw under the estimator's ``seed``, so a
saved and reloaded estimator gives the same numbers.
"""

from __future__ import annotations

import inspect
import re
import warnings
from dataclasses import fields

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from . import storage
from .config import ModelConfig, SGHMCConfig, TrainConfig, settings_of
from .early_stopping import split_rows
from .linalg import seeded
from .model import DeepGP, torch_dtype
from .prediction import chunks, predictive_moments
from .preprocessing import Standardizer
from .training import fit as fit_model
from .validation import check_device, check_positive_int, max_magnitude

# the estimator's own settings, beside every field of ModelConfig and TrainConfig
OWN_SETTINGS = (
    ("predict_samples", 1000, "S, Monte Carlo draws per test point for predictions and scores"),
    ("device", None, "a torch device for the model, e.g. 'cuda' (None: the CPU)"),
    ("progress", True, "show a progress bar while fitting"),
)


def _settings() -> list[tuple[str, object, str]]:
    """(name, default, help) of every parameter: ModelConfig's fields, TrainConfig's, SGHMCConfig's (the
    SGHMC baseline's sampler), then the estimator's own."""
    out = [(f.name, f.default, f.metadata["help"]) for config in (ModelConfig, TrainConfig, SGHMCConfig)
           for f in fields(config)]
    return out + list(OWN_SETTINGS)


class DeepGPRegressor(RegressorMixin, BaseEstimator):
    """A deep GP regressor with scikit-learn conventions.

    Its parameters are the model's and the training's settings, declared once in
    :class:`~deepgp.config.ModelConfig` and :class:`~deepgp.config.TrainConfig` (with their
    defaults: an LV-GP-GP trained by importance-weighted VI), plus ``predict_samples``, ``device``
    and ``progress``; the full list is below. ``model`` may also come first, positionally:
    ``DeepGPRegressor("LV-GP", iterations=2000)``. ``seed`` seeds the initialisation, the training
    and every prediction.

    ``score`` is the mean log predictive density per point in the units of y (not R²): it is
    the quantity the paper reports, and the one that rewards a good conditional density.
    """

    def __init__(self, *args, **kwargs):
        # the signature is generated from the settings' declarations (set below, after the class):
        # scikit-learn reads it for get_params / clone, and an unknown name is a TypeError as usual
        bound = inspect.signature(type(self).__init__).bind(self, *args, **kwargs)
        bound.apply_defaults()
        for name, value in list(bound.arguments.items())[1:]:
            setattr(self, name, value)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        # score is a log density, not R²; with the tiny budgets of the generic checks it is poor
        tags.regressor_tags.poor_score = True
        return tags

    # -- fitting ------------------------------------------------------------------------------
    def _check_params(self) -> None:
        """Every setting checked without data (before training, and when a file is loaded): a
        ValueError naming it."""
        self._configs()
        self._draws()
        if not isinstance(self.progress, bool):
            raise ValueError(f"progress must be True or False, got {self.progress!r}")

    def _configs(self) -> tuple[ModelConfig, TrainConfig, SGHMCConfig]:
        """The settings as configs; a baseline's ``model`` (Linear, CVAE-50, ...) or ``method`` (sghmc) is
        checked by :func:`deepgp.baselines.check_pair` and made into the configs it reads."""
        from .baselines import model_config, train_method

        params = self.get_params()
        train = {**settings_of(TrainConfig, params), "method": train_method(self.model, self.method)}
        return model_config(self.model, params), TrainConfig(**train), SGHMCConfig(**settings_of(SGHMCConfig, params))

    def _draws(self) -> int:
        """``predict_samples``, checked where it is used (``deepgp predict`` sets it on a loaded estimator)."""
        return check_positive_int("predict_samples", self.predict_samples, maximum=MAX_PREDICT_SAMPLES)

    def fit(self, X, y):
        """Fit on X [N, D] and y [N] or [N, D_y]; returns self."""
        self._check_params()  # before training, not after it
        for name, value in (("X", X), ("y", y)):  # scikit-learn's own message does not say which
            if _is_complex(value):
                raise ValueError(f"{name}: Complex data not supported; the inputs and targets must be real numbers")
        X, y = _validate(self, "X and y", X, y, multi_output=True, y_numeric=True, ensure_min_samples=2)
        if y.dtype.kind not in "biuf":  # y_numeric converts object arrays only, not strings
            raise ValueError(f"y must be numeric, got an array of dtype {y.dtype}")
        y2 = y.reshape(len(y), -1)
        self.y_ndim_ = y.ndim
        self.x_scaler_ = Standardizer.fit(X)
        self.y_scaler_ = Standardizer.fit(y2)
        Xs, Ys = self.x_scaler_.transform(X), self.y_scaler_.transform(y2)
        _check_spread(Xs, self.dtype)
        from .baselines import check_pair
        from .baselines import fit as fit_baseline

        architecture, train, sampler = self._configs()
        if check_pair(self.model, self.method):  # Linear, CVAE-..., or sghmc: a baseline of the paper's Table S1
            self.model_, self.history_ = fit_baseline(self.model, self.method, Xs, Ys, architecture, train, sampler,
                                                      self.device)
            return self
        rows = slice(None)
        if train.resolved().early_stopping:  # initialised from the rows fit trains on, as it holds out the rest
            rows = split_rows(len(Xs), train.validation_fraction, train.seed)[0]
        model = DeepGP.from_config(architecture, Xs[rows], Ys[rows], seed=self.seed, device=self.device)
        self.history_ = fit_model(model, Xs, Ys, config=train, progress=self.progress)
        self.model_ = model
        return self

    # -- prediction ---------------------------------------------------------------------------
    def _inputs(self, X) -> np.ndarray:
        check_is_fitted(self, "model_")
        X = _validate(self, "X", X, reset=False)
        return self.x_scaler_.transform(X)

    def _shape_y(self, A: np.ndarray) -> np.ndarray:
        """[..., D_y] → [...] when the training y was 1-D."""
        return A[..., 0] if self.y_ndim_ == 1 else A

    @torch.no_grad()
    def _moments(self, Xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance [N, D_y] (standardised units) of the predictive mixture at Xs [N, D].

        The mixture (1/S) Σ_s N(μ_s, s_s² + σ²) has mean E[μ] and variance E[s² + σ²] + Var[μ].
        """
        model = self.model_
        model.eval()
        X = torch.as_tensor(Xs, dtype=model.dtype, device=model.device)
        S = self._draws()
        mean, var = [], []
        with seeded(self.seed, model.device):
            for sl in chunks(len(X), S, X.device):
                mu, s2 = predictive_moments(model, X[sl], S)  # [S, n, D_y]
                mean.append(mu.mean(0))
                var.append((s2 + model.likelihood.variance()).mean(0) + mu.var(0, unbiased=False))
        return torch.cat(mean).cpu().numpy(), torch.cat(var).cpu().numpy()

    def predict(self, X, return_std: bool = False):
        """Predictive mean (and standard deviation) in the units of y: [N] for a 1-D y, else [N, D_y]."""
        mean, var = self._moments(self._inputs(X))
        mu = self._shape_y(self.y_scaler_.inverse(mean))
        if not return_std:
            return mu
        return mu, self._shape_y(np.sqrt(var) * self.y_scaler_.std)

    def sample(self, X, n: int = 1000, seed: int | None = None) -> np.ndarray:
        """Draws from the predictive p(y | x): [n, N] for a 1-D y, else [n, N, D_y]."""
        Xs = self._inputs(X)
        draws = self.model_.sample_predictive(Xs, n, seed=self.seed if seed is None else seed)
        return self._shape_y(self.y_scaler_.inverse(draws))

    def predict_quantiles(self, X, q) -> np.ndarray:
        """Predictive quantiles from ``predict_samples`` draws.

        q: a level in [0, 1] or a sequence of Q levels. Returns [N] (scalar q) or [N, Q] for a
        1-D y; [N, D_y] or [N, Q, D_y] otherwise.
        """
        levels = np.asarray(q, dtype=np.float64)
        if levels.ndim > 1 or np.any((levels < 0) | (levels > 1)):
            raise ValueError(f"quantile levels must be a number or a 1-D sequence in [0, 1], got {q!r}")
        draws = self.sample(X, self._draws())  # [S, N(, D_y)]
        return np.moveaxis(np.quantile(draws, levels, axis=0), 0, 1) if levels.ndim else np.quantile(draws, levels, 0)

    def log_density(self, X, y) -> np.ndarray:
        """log p(y_n | x_n) per point in the units of y (mixture estimator): [N]."""
        Xs = self._inputs(X)
        y = np.asarray(y, dtype=np.float64)
        if y.ndim == 0 or len(y) != len(Xs):
            raise ValueError(f"X and y have different numbers of rows: {len(Xs)} "
                             f"and {len(y) if y.ndim else 'a scalar'}")
        y = y.reshape(len(Xs), -1)
        Ys = self.y_scaler_.transform(y)
        S = self._draws()
        logp = self.model_.predictive_log_density(Xs, Ys, S, "mixture", seed=self.seed)
        return logp - self.y_scaler_.log_jacobian

    def score(self, X, y, sample_weight=None) -> float:
        """Mean log predictive density per point, in the units of y (higher is better)."""
        logp = self.log_density(X, y)
        if sample_weight is not None:
            w = np.asarray(sample_weight, dtype=np.float64)
            if w.shape != logp.shape or not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
                raise ValueError(f"sample_weight must be {len(logp)} finite weights >= 0 with a positive sum")
            return float(np.average(logp, weights=w))
        return float(logp.mean())

    # -- persistence --------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write settings, scalers, column names and the fitted model to ``path``.

        The file is safetensors with the settings as JSON (:mod:`deepgp.storage`): opening it never
        runs code. The write is atomic: if it fails, a file already at ``path`` is left as it was.
        ``feature_names_in_`` (fitted on a DataFrame) and ``columns_`` ({"inputs": [...],
        "target": name}, set by ``deepgp fit``) are kept, so a reloaded estimator checks a
        DataFrame's columns as the fitted one did.
        """
        check_is_fitted(self, "model_")
        if not isinstance(self.model_, DeepGP):
            raise ValueError(f"saving a fitted baseline ({self.model} by {self.method}) is not supported yet")
        params = self.get_params()
        params["device"] = None if self.device is None else str(self.device)
        params["dtype"] = str(self.dtype).removeprefix("torch.")
        names = getattr(self, "feature_names_in_", None)
        tree = {
            "params": params, "x_scaler": vars(self.x_scaler_), "y_scaler": vars(self.y_scaler_),
            "y_ndim": int(self.y_ndim_), "n_features_in": int(self.n_features_in_),
            "feature_names_in": None if names is None else [str(n) for n in names],
            "history": np.asarray(self.history_, dtype=np.float64), "columns": getattr(self, "columns_", None),
            "model": self.model_.to_tree(),
        }
        storage.write(path, storage.REGRESSOR, tree)

    @classmethod
    def load(cls, path, device=None, trust: bool = False) -> "DeepGPRegressor":
        """An estimator written by :meth:`save`; it predicts exactly as the saved one did.

        A file that is not one (or is damaged) is a ValueError naming it. ``trust=True`` also reads
        deepgp 0.1's pickle files, **which runs any code such a file holds**: only for a file whose
        origin you trust, and only to :meth:`save` it again in the safe format.
        """
        if device is not None:
            check_device(device)  # (the caller's mistake, before the file can be blamed)
        tree = storage.read(path, storage.REGRESSOR, trust=trust)
        with storage.written_by(path):
            return cls.from_tree(tree, path, device)

    @classmethod
    def from_tree(cls, tree: dict, path="the file", device=None) -> "DeepGPRegressor":
        """The estimator saved by :meth:`save`, checked field by field (``path`` names it in errors)."""
        field = storage.field
        params = dict(field(tree, "params", dict, path))
        unknown = sorted(set(tree) - set(_FIELDS))
        if unknown:
            raise ValueError(f"{path}: unknown field(s) {unknown} (written by a newer deepgp?)")
        known = cls().get_params()
        if set(params) - set(known):
            raise ValueError(f"{path}: unknown setting(s) {sorted(set(params) - set(known))} "
                             "(written by a newer deepgp?)")
        for name in params:  # each setting of the type of its default (TrainConfig checks the values)
            kind = {float: (int, float), type(None): (str, int, float, bool, type(None))}.get(
                type(known[name]), type(known[name]))
            storage.field(params, name, kind, path)
        for f in (*fields(ModelConfig), *fields(TrainConfig)):  # a file from before a setting existed: its legacy value
            if f.name not in params and "legacy" in f.metadata:
                params[f.name] = f.metadata["legacy"]
        if device is not None:
            params["device"] = device
        else:
            # trained on a GPU, loaded where there is none (e.g. `deepgp predict` on a laptop): the CPU
            # gives the same predictions in distribution; say so rather than fail
            try:
                check_device(params.get("device"))
            except ValueError:
                warnings.warn(f"{path} was fitted on {params['device']}, which is not available here; "
                              "loading on the CPU",
                              stacklevel=2)
                params["device"] = None
        est = cls(**params)
        try:
            est._check_params()
        except ValueError as err:
            raise ValueError(f"{path} is damaged: {err}") from None
        est.x_scaler_, est.y_scaler_ = (_scaler(field(tree, k, dict, path), k, path) for k in ("x_scaler", "y_scaler"))
        est.y_ndim_ = field(tree, "y_ndim", int, path)
        if est.y_ndim_ not in (1, 2):
            raise ValueError(f"{path} is damaged: y_ndim={est.y_ndim_}")
        est.n_features_in_ = field(tree, "n_features_in", int, path)
        names = field(tree, "feature_names_in", list, path, optional=True)
        if names is not None:
            if len(names) != est.n_features_in_ or not all(isinstance(n, str) for n in names):
                raise ValueError(f"{path} is damaged: the field 'feature_names_in' "
                                 f"does not name {est.n_features_in_} inputs")
            est.feature_names_in_ = np.asarray(names, dtype=object)
        history = field(tree, "history", torch.Tensor, path)
        if history.dim() != 1 or not history.is_floating_point():
            raise ValueError(f"{path} is damaged: the field 'history' is not a sequence of bounds")
        est.history_ = history.double().numpy()
        columns = field(tree, "columns", dict, path, optional=True)
        if columns is not None:
            inputs, target = columns.get("inputs"), columns.get("target")
            if not (isinstance(inputs, list) and all(isinstance(n, str) for n in inputs) and isinstance(target, str)
                    and len(set(inputs)) == len(inputs) == est.n_features_in_ and target not in inputs):
                raise ValueError(f"{path} is damaged: the field 'columns' does not name {est.n_features_in_} distinct "
                                 "inputs and a target")
            est.columns_ = {"inputs": inputs, "target": target}  # the CSV column names, set by `deepgp fit`
        model = field(tree, "model", dict, path)
        est.model_ = DeepGP.from_tree(model, path, check_device(params["device"]))
        if (est.model_.input_dim != est.n_features_in_ or est.x_scaler_.mean.shape != (est.n_features_in_,)
                or est.y_scaler_.mean.shape != (est.model_.output_dim,)):
            raise ValueError(f"{path} is damaged: its model, scalers and input count disagree")
        return est


MAX_PREDICT_SAMPLES = 10**7  # more draws per point than any density estimate needs: a typo, or a damaged file


def _check_spread(Xs: np.ndarray, dtype) -> None:
    """Standardised inputs Xs within what the kernels' arithmetic allows (:func:`deepgp.validation.max_magnitude`),
    said in the units that matter here: standard deviations from a column's mean (only float32 gets near)."""
    dtype = torch_dtype(dtype)
    limit, far = max_magnitude("input", dtype), float(np.abs(Xs).max(initial=0.0))
    if far > limit:
        fix = "use dtype='float64'" if dtype == torch.float32 else "remove or transform the outlier"
        raise ValueError(f"X has a value {far:.3g} standard deviations from its column's mean, beyond the {limit:.2g} "
                         f"that {str(dtype).removeprefix('torch.')} arithmetic allows here; {fix}")


def _scaler(tree: dict, name: str, path) -> Standardizer:
    mean, std = (storage.field(tree, k, torch.Tensor, path).double().numpy() for k in ("mean", "std"))
    ok = mean.ndim == 1 and mean.shape == std.shape and np.isfinite(mean).all() and np.isfinite(std).all()
    if not ok or not (std > 0).all() or not np.isfinite(1 / std).all():  # (1 / std: no denormal std)
        raise ValueError(f"{path} is damaged: the field {name!r} is not a valid standardisation")
    return Standardizer(mean, std)


DeepGPRegressor.__init__.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
     inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=ModelConfig.model)]
    + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
       for name, default, _ in _settings() if name != "model"])
DeepGPRegressor.__doc__ = (DeepGPRegressor.__doc__ or "") + (  # (None under python -OO, which strips docstrings)
    "\n    Parameters (name = default: meaning):\n\n"
    + "\n".join(f"    * ``{name} = {default!r}``: {help}" for name, default, help in _settings()) + "\n")


def _is_complex(value) -> bool:
    try:
        return np.asarray(value).dtype.kind == "c"
    except (ValueError, TypeError):  # ragged and the like: validate_data says what is wrong
        return False


# the fields of a saved estimator (save / from_tree)
_FIELDS = ("params", "x_scaler", "y_scaler", "y_ndim", "n_features_in", "feature_names_in", "history", "columns",
           "model")


def _validate(estimator, names: str, *arrays, **kwargs):
    """scikit-learn's ``validate_data`` (float64), its errors made to name the argument where they do not."""
    try:
        return validate_data(estimator, *arrays, dtype=np.float64, **kwargs)
    except ValueError as err:
        if re.search(r"\b(X|y)\b", str(err)):
            raise
        raise ValueError(f"{names}: {err}") from None


__all__ = ["DeepGPRegressor"]
