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

from . import memory, storage, training
from .config import ModelConfig, TrainConfig, settings_of
from .early_stopping import split_rows
from .linalg import seeded
from .model import DeepGP
from .prediction import check_memory, chunks, draw_chunks, mixture_moments
from .preprocessing import Standardizer
from .protocols import ConditionalDensityModel
from .validation import as_matrix, check_device, check_positive_int, max_magnitude, torch_dtype

# the estimator's own settings, beside every field of ModelConfig and TrainConfig
OWN_SETTINGS = (
    ("predict_samples", 1000, "S, Monte Carlo draws per test point for predictions and scores"),
    ("device", None, "a torch device for the model, e.g. 'cuda' (None: the CPU)"),
    ("progress", True, "show a progress bar while fitting"),
)


# settings that an estimator's file may hold and no deep GP reads (the SGHMC baseline's sampler, which
# deepgp-bench's estimator adds; deepgp 0.2.0.dev0 wrote them into every file): it is read without them
RETIRED_SETTINGS = ("sghmc_samples", "sghmc_thinning", "sghmc_step", "sghmc_mdecay", "sghmc_window")


def _settings(config_classes) -> list[tuple[str, object, str]]:
    """(name, default, help) of every parameter: the fields of each of ``config_classes``, then the
    estimator's own."""
    out = [(f.name, f.default, f.metadata["help"]) for config in config_classes for f in fields(config)]
    return out + list(OWN_SETTINGS)


def check_quantile_draws(levels, S: int, setting: str = "predict_samples") -> None:
    """Refuse quantile levels that S draws cannot resolve: a level q is estimated only where, on average,
    at least one draw lies on each side of it, S·min(q, 1 − q) ≥ 1 (S ≥ 20 for the 0.05 and 0.95
    quantiles); levels 0 and 1 (the draws' minimum and maximum) need S ≥ 2."""
    levels = np.atleast_1d(np.asarray(levels, dtype=np.float64))
    tail = np.minimum(levels, 1 - levels)  # the mass on the level's thinner side
    j = int(np.argmin(np.where(tail > 0, tail, np.inf)))
    # (a relative slack: 1 / 0.05 is 20 only to rounding)
    need = max(2, int(np.ceil(1 / tail[j] * (1 - 1e-12)))) if tail[j] > 0 else 2
    if S < need:
        raise ValueError(f"{setting}={S} draws cannot resolve the quantile level {levels[j]:g}: it needs at "
                         f"least {need} draws (one on each side of the level, on average); raise {setting}")


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

    A subclass may fit another :class:`~deepgp.protocols.ConditionalDensityModel`: it overrides
    :meth:`fit_model` (and :meth:`configs`), and names the settings classes of its parameters in
    ``config_classes``; its signature and parameter list are generated from them as this class's are.

    What it is given is checked: a DataFrame X must hold the fitted inputs in their fitted order (the
    names of ``feature_names_in_``, or the CSV columns of a model written by ``deepgp fit``); other
    columns, missing ones or another order are refused, as scikit-learn refuses them, never taken by
    position. y must have the fitted outputs' shape wherever it is taken (``score``, ``log_density``).
    Each column is standardised by its real spread at any scale float64 holds (a constant column by 1);
    a column whose spread is below the smallest normal float64 (2.2e-308), or with values beyond
    4.5e307, is refused by name.
    """

    # the settings classes whose fields are the estimator's parameters, beside its own (OWN_SETTINGS)
    config_classes: tuple[type, ...] = (ModelConfig, TrainConfig)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__init__" not in vars(cls):  # (its own __init__, to carry its own signature)
            def __init__(self, *args, **kwargs):
                DeepGPRegressor.__init__(self, *args, **kwargs)

            cls.__init__ = __init__
        _declare_parameters(cls)

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
        self.configs()
        self._draws()
        if not isinstance(self.progress, bool):
            raise ValueError(f"progress must be True or False, got {self.progress!r}")

    def configs(self) -> tuple:
        """The parameters as one config of each of :attr:`config_classes` (ModelConfig, TrainConfig), each
        checked by its own rules: a ValueError names a bad setting."""
        params = self.get_params()
        return tuple(config(**settings_of(config, params)) for config in self.config_classes)

    def fit_model(self, X: np.ndarray, Y: np.ndarray) -> tuple[ConditionalDensityModel, np.ndarray]:
        """Build and train the model on standardised X [N, D], Y [N, D_y]: (the fitted model, its bound per
        iteration). The DeepGP of :class:`~deepgp.config.ModelConfig` trained by :func:`deepgp.fit`."""
        architecture, train = self.configs()[:2]  # (a subclass's configs come after these two)
        memory.check_training(DeepGP, architecture, train, len(X), X.shape[1], Y.shape[1], self.device)
        rows = np.arange(len(X))
        if train.resolved().early_stopping:  # initialised from the rows fit trains on, as it holds out the rest
            rows = split_rows(len(X), train.validation_fraction, train.seed)[0]
        model = DeepGP.from_config(architecture, X[rows], Y[rows], seed=self.seed, device=self.device)
        return model, training.fit(model, X, Y, config=train, progress=self.progress)

    def _draws(self) -> int:
        """``predict_samples``, checked where it is used (``deepgp predict`` sets it on a loaded estimator)."""
        return check_positive_int("predict_samples", self.predict_samples, maximum=MAX_PREDICT_SAMPLES)

    def fit(self, X, y):
        """Fit on X [N, D] and y [N] or [N, D_y]; returns self."""
        self._check_params()  # before training, not after it
        for name, value in (("X", X), ("y", y)):  # scikit-learn's own message does not say which
            if _is_complex(value):
                raise ValueError(f"{name}: Complex data not supported; the inputs and targets must be real numbers")
        names = [str(c) for c in getattr(X, "columns", ())]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:  # (two columns of one name: a prediction could not tell which is which)
            raise ValueError(f"X names the column(s) {twice} more than once; give each input its own name")
        X, y = _validate(self, "X and y", X, y, multi_output=True, y_numeric=True, ensure_min_samples=2)
        if y.dtype.kind not in "biuf":  # y_numeric converts object arrays only, not strings
            raise ValueError(f"y must be numeric, got an array of dtype {y.dtype}")
        y2 = y.reshape(len(y), -1)
        self.y_ndim_ = y.ndim
        self.x_scaler_ = Standardizer.fit(X, "X")
        self.y_scaler_ = Standardizer.fit(y2, "y")
        Xs, Ys = self.x_scaler_.transform(X), self.y_scaler_.transform(y2)
        _check_spread(Xs, self.dtype)
        self.model_, self.history_ = self.fit_model(Xs, Ys)
        return self

    # -- prediction ---------------------------------------------------------------------------
    def _inputs(self, X) -> np.ndarray:
        """X [N, D] checked and standardised. A DataFrame's columns must be the fitted inputs in their fitted
        order (scikit-learn's convention for ``feature_names_in_``, and for the CSV columns of a model written
        by ``deepgp fit``): other columns, missing ones or another order are refused, never used by position."""
        check_is_fitted(self, "model_")
        columns, names = getattr(X, "columns", None), (getattr(self, "columns_", None) or {}).get("inputs")
        if columns is not None and names is not None and getattr(self, "feature_names_in_", None) is None:
            # fitted on the arrays of a CSV's named columns (`deepgp fit`): scikit-learn knows no names to check
            _check_columns(list(columns), names)
            X = np.asarray(X)
        X = _validate(self, "X", X, reset=False)
        return self.x_scaler_.transform(X)

    def _targets(self, y, n: int) -> np.ndarray:
        """y [n, D_y] for the fitted D_y outputs: y as fitted ([n] or [n, D_y]; [n] and [n, 1] alike for
        one output), numeric and finite; anything else is a ValueError naming y."""
        outputs = self.y_scaler_.mean.shape[0]
        try:
            shape = np.shape(y)
        except (ValueError, TypeError):  # ragged: as_matrix says what is wrong
            shape = None
        if shape is not None and (len(shape) == 0 or shape[0] != n):
            raise ValueError(f"X and y have different numbers of rows: {n} and {shape[0] if shape else 'a scalar'}")
        if shape is not None and (len(shape) > 2 or (len(shape) == 2 and shape[1] != outputs)
                                  or (len(shape) == 1 and outputs != 1)):
            fitted = f"[{n}]" if self.y_ndim_ == 1 else f"[{n}, {outputs}]"
            raise ValueError(f"y has shape {tuple(shape)} but the estimator was fitted on {outputs} output(s): "
                             f"give y as {fitted}")
        return as_matrix("y", y, allow_vector=True).numpy()

    def _shape_y(self, A: np.ndarray) -> np.ndarray:
        """[..., D_y] → [...] when the training y was 1-D."""
        return A[..., 0] if self.y_ndim_ == 1 else A

    @torch.no_grad()
    def _moments(self, Xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance [N, D_y] (standardised units) of the predictive mixture at Xs [N, D]
        (:func:`deepgp.prediction.mixture_moments`)."""
        model, S = self.model_, self._draws()
        check_memory(model, len(Xs), S, "reduction", setting="predict_samples")
        model.eval()
        X = as_matrix("X", Xs, model.dtype, model.device)  # (refused where the dtype cannot hold it)
        with seeded(self.seed, model.device):
            mean, var = zip(*(mixture_moments(model, X[sl], S) for sl in chunks(len(X), S, X.device)))
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
        n = check_positive_int("n", n)
        # the draws, and their copy in the units of y
        check_memory(self.model_, len(Xs), n, "draws", result=2 * n * len(Xs), setting="n")
        draws = self.model_.sample_predictive(Xs, n, seed=self.seed if seed is None else seed)
        return self._shape_y(self.y_scaler_.inverse(draws))

    @torch.no_grad()
    def predict_quantiles(self, X, q) -> np.ndarray:
        """Predictive quantiles from ``predict_samples`` draws (those of :meth:`sample`), a chunk of points at
        a time: no more than one chunk's draws are held.

        q: a level in [0, 1] or a sequence of Q levels, each one the draws resolve
        (:func:`check_quantile_draws`: S·min(q, 1 − q) ≥ 1). Returns [N] (scalar q) or [N, Q] for a
        1-D y; [N, D_y] or [N, Q, D_y] otherwise.
        """
        levels = np.asarray(q, dtype=np.float64)
        if levels.ndim > 1 or np.any((levels < 0) | (levels > 1)):
            raise ValueError(f"quantile levels must be a number or a 1-D sequence in [0, 1], got {q!r}")
        S = self._draws()
        check_quantile_draws(levels, S)
        Xs, model = self._inputs(X), self.model_
        check_memory(model, len(Xs), S, "quantiles", setting="predict_samples")
        out = []
        with seeded(self.seed, model.device):
            for _, y in draw_chunks(model, torch.as_tensor(Xs, dtype=model.dtype, device=model.device), S):
                out.append(np.quantile(self._shape_y(self.y_scaler_.inverse(y.cpu().numpy())), levels, axis=0))
        return np.moveaxis(np.concatenate(out, axis=1), 0, 1) if levels.ndim else np.concatenate(out, axis=0)

    def log_density(self, X, y) -> np.ndarray:
        """log p(y_n | x_n) per point in the units of y (mixture estimator): [N]."""
        Xs = self._inputs(X)
        Ys = self.y_scaler_.transform(self._targets(y, len(Xs)))
        S = self._draws()
        check_memory(self.model_, len(Xs), S, "reduction", setting="predict_samples")
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
            raise ValueError(f"saving a fitted {type(self.model_).__name__} ({self.model} by {self.method}) is not "
                             "supported: only a DeepGP is saved")
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
        params = {k: v for k, v in params.items() if k in known or k not in RETIRED_SETTINGS}
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
        if names is not None and columns is not None and list(names) != columns["inputs"]:
            raise ValueError(f"{path} is damaged: its fields 'feature_names_in' and 'columns' name different inputs")
        model = field(tree, "model", dict, path)
        est.model_ = DeepGP.from_tree(model, path, check_device(params["device"]))
        if (est.model_.input_dim != est.n_features_in_ or est.x_scaler_.mean.shape != (est.n_features_in_,)
                or est.y_scaler_.mean.shape != (est.model_.output_dim,)):
            raise ValueError(f"{path} is damaged: its model, scalers and input count disagree")
        said, built = est.configs()[0], est.model_.config  # the settings and the model they built agree
        differ = [f.name for f in fields(ModelConfig) if getattr(said, f.name) != getattr(built, f.name)
                  and not (f.name == "inner_width" and said.inner_width == "auto")]  # ("auto": resolved on fit)
        if differ:
            raise ValueError(f"{path} is damaged: its settings and its model disagree on {differ[0]} "
                             f"({getattr(said, differ[0])!r} against {getattr(built, differ[0])!r})")
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


def _declare_parameters(cls) -> None:
    """``cls.__init__``'s signature (``model`` first, positional; then every setting by keyword) and the list
    of parameters closing its docstring, from its settings (``cls.config_classes``, then the estimator's own)."""
    settings = _settings(cls.config_classes)
    cls.__init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
         inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=ModelConfig.model)]
        + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
           for name, default, _ in settings if name != "model"])
    cls.__doc__ = (cls.__doc__ or "") + "\n    Parameters (name = default: meaning):\n\n" + "\n".join(
        f"    * ``{name} = {default!r}``: {help}" for name, default, help in settings) + "\n"


_declare_parameters(DeepGPRegressor)


def _check_columns(given: list, fitted: list[str]) -> None:
    """A one-line ValueError unless a DataFrame's columns ``given`` are exactly the ``fitted`` names in order."""
    if given == fitted:
        return
    missing = [n for n in fitted if n not in given]
    unexpected = [n for n in given if n not in fitted]
    twice = sorted({str(n) for n in given if given.count(n) > 1})
    said = [f"{what} {names}" for what, names in (("lacks the fitted input(s)", missing),
                                                  ("has unexpected column(s)", unexpected),
                                                  ("names twice", twice)) if names]
    problem = "; ".join(said) if said else f"has the fitted inputs in another order {given}"
    raise ValueError(f"X {problem}: pass X[{fitted}], the columns the estimator was fitted on, in that order")


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
