"""Every setting of a deep GP and of its training, declared once, each with its meaning.

:class:`ModelConfig` is the architecture and its initial values (what :meth:`DeepGP.from_spec`
builds), :class:`TrainConfig` how it is trained (what :func:`deepgp.fit` does). Both check their
values when they are made: a bad value is a ``ValueError`` that names the setting. The help of a
field is its ``metadata["help"]`` (and, for the command line, ``metadata["choices"]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, cast

from .validation import check_positive_float, check_positive_int, check_seed

MODEL_TOKENS = ("GP", "LV")
KERNEL_NAMES = ("rbf", "matern52", "matern32")
DTYPE_NAMES = ("float64", "float32")
METHODS = ("vi", "iw")
INNER_SAMPLING = ("joint", "independent", "batch")
ENCODER_STDS = ("softplus", "exp")
INNER_WIDTHS = ("auto", "input", "hidden")
# inner_width="auto": "hidden" from this many training points on, "input" below (the one threshold,
# chosen on validation parts of training splits: benchmarks/README.md, time_to_quality.py)
HIDDEN_WIDTH_FROM = 5000
RECIPES = ("fast", "paper")
NOISE_FLOOR = 1e-6  # (params.FLOOR: a noise variance must exceed it)


def setting(default, help: str, **rules):
    """A dataclass field with its help text and the rules that :func:`check_declared` and the command
    line's options (:func:`deepgp.arguments.add_settings`) both read: ``choices``, ``minimum`` (integers).
    ``legacy``: the value that files written before the setting existed were made with (a results
    row, a checkpoint), where it differs from the default."""
    if isinstance(default, (list, dict)):
        raise TypeError("mutable defaults are not settings")
    return field(default=default, metadata={"help": help, **rules})


def parse_spec(spec: str) -> list[str]:
    """``"LV-GP-GP"`` → ``["LV", "GP", "GP"]``; any sequence of GP/LV tokens ending in GP."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"model spec must be a non-empty string like 'LV-GP-GP', got {spec!r}")
    tokens = [t.strip().upper() for t in spec.strip().split("-")]
    unknown = [t for t in tokens if t not in MODEL_TOKENS]
    if unknown:
        raise ValueError(f"unknown token(s) {unknown} in model spec {spec!r}; allowed tokens are 'GP' and 'LV'")
    if tokens[-1] != "GP":
        raise ValueError(f"model spec {spec!r} must end in 'GP' (the final layer is always a GP layer)")
    return tokens


def _choice(name: str, value, choices) -> str:
    if not isinstance(value, str) or value.lower() not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value.lower()


def check_declared(config) -> None:
    """Check every field by its declaration: one of its ``choices`` (normalised to lower case), an
    integer >= its ``minimum`` (1 unless declared), a boolean; a ValueError names the field."""
    for f in fields(config):
        value = getattr(config, f.name)
        if "choices" in f.metadata:
            object.__setattr__(config, f.name, _choice(f.name, value, f.metadata["choices"]))
        elif value is None and f.default is None:
            continue  # (an optional setting: None is its own meaning, e.g. "the recipe's value")
        elif f.type == "int" or (f.type == "int | None" and f.default is None):
            check_positive_int(f.name, value, minimum=f.metadata.get("minimum", 1))
        elif f.type.startswith("bool") and not isinstance(value, bool):
            raise ValueError(f"{f.name} must be True or False, got {value!r}")


@dataclass(frozen=True)
class ModelConfig:
    """The architecture of a deep GP with latent variables, and its initial values."""

    model: str = setting("LV-GP-GP", "the layers in the paper's notation: GP and LV joined by '-', ending in GP "
                                     "(GP, GP-GP, LV-GP, LV-GP-GP, GP-LV-GP, ...)")
    num_inducing: int = setting(128, "M, inducing points per GP layer (at most the number of distinct inputs)")
    hidden_dim: int = setting(5, "GPs in each inner GP layer (mapped back to the data's dimension, or the layer's "
                                 "width with inner_width='hidden')")
    inner_width: str = setting("auto", "what an inner GP layer outputs: 'input', the paper's, D values (its input's "
                                       "first D plus the hidden_dim GPs through the fixed PCA directions W: H[:D] + g "
                                       "Wᵀ); 'hidden', GPflux's, hidden_dim values (a fixed linear mean plus the GPs: "
                                       "H P + g, P = W in the first layer, the identity after); 'auto' (the default): "
                                       f"'hidden' from N = {HIDDEN_WIDTH_FROM:,} training points on, 'input' below",
                               choices=INNER_WIDTHS, legacy="input")
    latent_dim: int = setting(1, "dimension of the latent variable w_n of each LV layer")
    kernel: str = setting("rbf", "the GP layers' kernel", choices=KERNEL_NAMES)
    likelihood_variance: float = setting(0.01, "initial noise variance σ² of the Gaussian likelihood")
    inner_q_sqrt: float = setting(1e-5, "initial scale of the inner layers' q(v) = N(0, s² I)")
    train_inner_kernel_variance: bool = setting(False, "train the inner layers' kernel variances (fixed at 1 "
                                                       "in the paper)")
    encoder_hidden: tuple[int, ...] = setting((20, 20), "hidden widths of each LV layer's encoder of q(w_n)")
    encoder_std: str = setting("softplus", "the encoder's std of q(w_n): softplus(o - 3) (the paper's code) or "
                                           "exp(o - 5) (the paper's text, with encoder_hidden 10,10)",
                               choices=ENCODER_STDS)
    dtype: str = setting("float64", "float32 is the opt-in fast mode: K(Z, Z) and the natural-gradient algebra "
                                    "stay float64", choices=DTYPE_NAMES)

    def __post_init__(self):
        set_ = object.__setattr__  # (frozen: normalised values are written once, here)
        set_(self, "model", "-".join(parse_spec(self.model)))
        if str(self.dtype).removeprefix("torch.") not in DTYPE_NAMES:
            raise ValueError(f"dtype must be float64 (the default) or float32, got {self.dtype!r}")
        set_(self, "dtype", str(self.dtype).removeprefix("torch."))
        check_declared(self)
        if check_positive_float("likelihood_variance", self.likelihood_variance, above=NOISE_FLOOR) > 1e30:
            raise ValueError(f"likelihood_variance must be at most 1e30, got {self.likelihood_variance!r}")
        check_positive_float("inner_q_sqrt", self.inner_q_sqrt)
        if not isinstance(self.encoder_hidden, (tuple, list)):
            raise ValueError(f"encoder_hidden must be a sequence of layer widths, got {self.encoder_hidden!r}")
        set_(self, "encoder_hidden", tuple(check_positive_int("encoder_hidden", w) for w in self.encoder_hidden))

    def resolved(self, num_data: int) -> "ModelConfig":
        """This config for N = ``num_data`` training points: ``inner_width="auto"`` made concrete, "hidden"
        where N >= :data:`HIDDEN_WIDTH_FROM` and "input" below (what a built model records and saves)."""
        if self.inner_width != "auto":
            return self
        n = check_positive_int("num_data", num_data)
        return replace(self, inner_width="hidden" if n >= HIDDEN_WIDTH_FROM else "input")


# The training recipes: the values a TrainConfig field left at None takes (see TrainConfig.resolved).
# "paper" is the paper's code (Adam 0.005, γ = 0.01 on the final layer, both ×0.98 per 1,000 steps);
# "fast" was chosen by measurement on validation parts of training splits (benchmarks/README.md,
# time_to_quality.py): 4× the paper's Adam rate and 10× its γ (γ ramped up over the first 1,000
# iterations), decayed ×0.8 per 1,000 iterations, so that 10,000 iterations anneal as far as the
# paper's 100,000 (0.8^10 ≈ 0.98^100 ≈ 0.11). Every recipe has a value for every field below.
# Early stopping is part of a recipe: "paper" never stops early (its protocol trains for the whole budget).
RECIPE_VALUES = {
    "paper": dict(lr=0.005, gamma=0.01, gamma_warmup=0, decay=0.98, decay_every=1000, natgrad_inner=False,
                  early_stopping=False),
    "fast": dict(lr=0.02, gamma=0.1, gamma_warmup=1000, decay=0.8, decay_every=1000, natgrad_inner=False,
                 early_stopping=False),
}
# K when num_samples is None: the importance samples the paper recommends for iw, and for vi the one Monte Carlo
# sample its VI rows were trained with (K = 5 made VI's step 2.6-6.5x as long and was not better by 2,000
# iterations on the validation parts measured: benchmarks/README.md, early_stopping.py)
METHOD_SAMPLES = {"iw": 5, "vi": 1}
# the budget each recipe is meant for: `deepgp benchmark`'s default --iterations
RECIPE_ITERATIONS = {"paper": 100_000, "fast": 10_000}
GAMMA_START = 0.01  # where a γ warm-up starts (the paper's γ, stable from the first step)


@dataclass(frozen=True)
class TrainConfig:
    """How a deep GP is trained: the objective, the budget and the optimisers (one fused step each iteration).

    The optimiser's settings left at None (``lr``, ``gamma``, ``gamma_warmup``, ``decay``,
    ``decay_every``, ``natgrad_inner``) and ``early_stopping`` take the values of ``recipe`` (:data:`RECIPE_VALUES`),
    and ``num_samples`` the method's (:data:`METHOD_SAMPLES`): :meth:`resolved` fills them in. A value given
    explicitly wins.
    """

    method: str = setting("iw", "objective: vi (doubly stochastic VI) or iw (importance-weighted, the paper's "
                                "recommendation for LV models)", choices=METHODS)
    num_samples: int | None = setting(None, "K: importance samples per point for iw, Monte Carlo samples per point "
                                            "for vi; None: the method's (METHOD_SAMPLES: 5 for iw, 1 for vi)", legacy=5)
    inner_sampling: str = setting("independent", "iw: one inner-layer draw per sample (independent: the paper's code; "
                                                 "the default, chosen by measurement), one shared by a point's K "
                                                 "samples (joint: its text, a bound for every K), or one inducing "
                                                 "draw per sample index shared by the batch's points (batch: the "
                                                 "same expectation as independent, a cheaper step)",
                                  choices=INNER_SAMPLING, legacy="joint")
    dreg: bool = setting(False, "iw with inner_sampling independent or batch: doubly reparameterised gradients for "
                                "the encoders of q(w) (Tucker et al. 2018)", legacy=False)
    iterations: int = setting(5000, "training iterations (one minibatch each)", minimum=0)
    batch_size: int = setting(512, "B, points per minibatch (all of them when N < B)")
    recipe: str = setting("fast", "the optimiser settings not given explicitly: fast (the default, chosen by "
                                  "measurement) or paper (the paper's code)", choices=RECIPES, legacy="paper")
    lr: float | None = setting(None, "Adam's learning rate (everything but the q(v) trained by natural gradients); "
                                     "None: the recipe's", legacy=0.005)
    gamma: float | None = setting(None, "natural-gradient step on the final layer's q(v), in (0, 1]; None: the "
                                        "recipe's", legacy=0.01)
    gamma_warmup: int | None = setting(None, "iterations over which γ rises log-linearly from min(0.01, gamma) to "
                                             "gamma (0: none); None: the recipe's", minimum=0, legacy=0)
    decay: float | None = setting(None, "factor applied to lr and gamma every decay_every iterations, in (0, 1]; "
                                        "None: the recipe's", legacy=0.98)
    decay_every: int | None = setting(None, "iterations between decays (a staircase, as the paper's code); None: "
                                            "the recipe's", legacy=1000)
    natgrad: bool = setting(True, "natural gradients on the final layer's q(v); False trains it by Adam too")
    natgrad_inner: bool | None = setting(None, "natural gradients (step gamma) on the inner GP layers' q(v) too; "
                                               "None: the recipe's", legacy=False)
    seed: int | None = setting(0, "seeds the initialisation, the minibatches and every Monte Carlo draw")
    early_stopping: bool | None = setting(None, "hold out validation_fraction of the training rows (never trained "
                                                "on), score them every validation_every iterations, stop after "
                                                "patience scores without a new best and return the best model "
                                                "scored; None: the recipe's (never with recipe='paper')",
                                          legacy=False)
    validation_fraction: float = setting(0.1, "early stopping: the fraction of the training rows held out, in (0, 1)")
    validation_every: int = setting(100, "early stopping: iterations between two scores of the held-out rows")
    patience: int = setting(10, "early stopping: scores without a new best before training stops")

    def __post_init__(self):
        check_declared(self)
        if self.lr is not None:
            check_positive_float("lr", self.lr)
        if self.gamma is not None and check_positive_float("gamma", self.gamma) > 1:
            raise ValueError(f"gamma must be in (0, 1] (1 is the full natural-gradient step), got {self.gamma!r}")
        if self.decay is not None and check_positive_float("decay", self.decay) > 1:
            raise ValueError(f"decay must be in (0, 1] (the factor applied every decay_every iterations), "
                             f"got {self.decay!r}")
        check_seed(self.seed)
        if not check_positive_float("validation_fraction", self.validation_fraction) < 1:
            raise ValueError(f"validation_fraction must be in (0, 1) (the fraction of the training rows held out), "
                             f"got {self.validation_fraction!r}")
        if self.early_stopping and self.recipe == "paper":
            raise ValueError("early_stopping must be off with recipe='paper': the paper's protocol trains for the "
                             "whole budget")

    def resolved(self) -> ResolvedTrainConfig:
        """This config with every field left at None filled in from its recipe (:data:`RECIPE_VALUES`), and
        ``num_samples`` from its method (:data:`METHOD_SAMPLES`)."""
        values: dict[str, Any] = {**RECIPE_VALUES[self.recipe], "num_samples": METHOD_SAMPLES[self.method]}
        filled = replace(self, **{k: v for k, v in values.items() if getattr(self, k) is None})
        return cast("ResolvedTrainConfig", filled)  # (every recipe has a value for each field it narrows)


if TYPE_CHECKING:
    class ResolvedTrainConfig(TrainConfig):
        """The type checker's view of what :meth:`TrainConfig.resolved` returns: a TrainConfig whose
        settings left at None (the recipe's and the method's) are filled in. It exists for type checking
        only (``typing.TYPE_CHECKING``): at run time ``resolved()`` returns a plain TrainConfig."""

        num_samples: int
        lr: float
        gamma: float
        gamma_warmup: int
        decay: float
        decay_every: int
        natgrad_inner: bool
        early_stopping: bool


def gamma_at(cfg: ResolvedTrainConfig, t: int) -> float:
    """The natural-gradient step after iteration ``t`` (0-based) of a resolved config:

        γ_t = γ · r^(1 − (t + 1)/T) · decay^⌊(t + 1)/decay_every⌋,   r = min(0.01, γ)/γ,

    where the warm-up factor r^(…) applies for t + 1 < T = gamma_warmup only (a log-linear ramp from
    min(0.01, γ) to γ, as GPflow's examples ramp γ up), and the decay is the learning rate's staircase.
    Without a warm-up this is exactly the paper's code: ``gamma * decay ** ((t + 1) // decay_every)``.
    """
    step = cfg.gamma * cfg.decay ** ((t + 1) // cfg.decay_every)
    if t + 1 < cfg.gamma_warmup:
        step *= (min(GAMMA_START, cfg.gamma) / cfg.gamma) ** (1.0 - (t + 1) / cfg.gamma_warmup)
    return step


def settings_of(config_class, values: dict) -> dict:
    """The entries of ``values`` that are fields of ``config_class``."""
    names = {f.name for f in fields(config_class)}
    return {k: v for k, v in values.items() if k in names}
