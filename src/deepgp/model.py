"""DeepGP: a stack of latent-variable and GP layers ending in a GP layer and a Gaussian likelihood.

The model string is the paper's notation, e.g. ``"LV-GP-GP"``; see :func:`parse_spec`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.cluster.vq
import torch
from torch import nn

from . import objectives, prediction, storage
from .config import ModelConfig, parse_spec
from .encoders import STD_OFFSETS
from .kernels import make_kernel
from .layers import GPLayer, LatentVariableLayer
from .likelihoods import GaussianLikelihood
from .linalg import seeded
from .validation import (
    as_model_data,
    as_xy,
    check_device,
    check_magnitude,
    check_positive_int,
    check_seed,
)

MODES = ("joint", "independent", "batch", "predict")


def initial_inducing(X: np.ndarray, num_inducing: int, rng: np.random.Generator) -> np.ndarray:
    """k-means centres of X (scipy kmeans2, 'points' init), or X itself when N ≤ M."""
    if X.shape[0] <= num_inducing:
        return X.copy()
    # k-means on the distinct rows: repeated points (grids, duplicated records) otherwise give
    # empty clusters and coincident centres, i.e. a singular K(Z, Z)
    distinct = np.unique(X, axis=0)
    if distinct.shape[0] <= num_inducing:
        return distinct
    Z, _ = scipy.cluster.vq.kmeans2(distinct, num_inducing, minit="points", seed=rng)
    return Z


def principal_directions(X: np.ndarray, num: int) -> np.ndarray:
    """W [D, num]: the first min(num, D) principal directions of X as columns, then zero columns.

    (The paper says principal components; its code took columns of Vᵀ instead, docs/paper-vs-code.md §1.2.)
    """
    D = X.shape[1]
    _, _, Vh = np.linalg.svd(X - X.mean(0), full_matrices=False)
    W = np.zeros((D, num))
    c = min(num, D, Vh.shape[0])
    W[:, :c] = Vh[:c].T
    return W


DTYPES = {"float64": torch.float64, "float32": torch.float32}
def _check_sizes(config: ModelConfig, input_dim: int, output_dim: int, state: dict, path) -> None:
    """Refuse a file whose architecture needs more parameters than the file holds: the least count of
    ``config`` (q(v) of every GP layer, Z, each encoder's weights) against the state's size, so a small
    damaged file cannot ask for a huge allocation before anything is built."""
    if not (input_dim >= 1 and output_dim >= 1):
        raise ValueError(f"{path} is damaged: input_dim={input_dim}, output_dim={output_dim}")
    tokens, M, D, D_y = parse_spec(config.model), config.num_inducing, input_dim, output_dim
    inner = sum(1 for t in tokens[:-1] if t == "GP")
    chain = [D + D_y, *config.encoder_hidden, 2 * config.latent_dim]
    least = (D_y * M * M + inner * config.hidden_dim * M * M + M * D
             + tokens.count("LV") * sum(a * b for a, b in zip(chain[:-1], chain[1:])))
    size = sum(t.numel() for t in state.values())
    if least > size:
        raise ValueError(f"{path} is damaged: its config describes at least {least} parameters but it holds {size}")


def check_parameters(model: nn.Module) -> None:
    """A ValueError unless every parameter and buffer is finite and of a sane size (|value| < 1e30: 1e300
    is finite, but no trained model's), checked as loaded, i.e. after the cast to the model's dtype."""
    if not all(bool((t.abs() < 1e30).all()) for t in model.state_dict().values() if t.is_floating_point()):
        raise ValueError("it holds NaN, infinite or absurdly large parameters")


def torch_dtype(dtype) -> torch.dtype:
    """torch.float64 / torch.float32 (or their names) → the torch dtype; anything else is an error."""
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"dtype must be float64 (the default) or float32, got {dtype!r}")
    return DTYPES[name]


class DeepGP(nn.Module):
    """A deep GP with latent variables.

    Args:
        layers: GPLayer / LatentVariableLayer modules in order; the last must be a GPLayer.
        likelihood: a GaussianLikelihood.
        num_data: N, the training-set size that scales minibatch bounds.
    """

    def __init__(self, layers, likelihood: GaussianLikelihood, num_data: int, spec: str | None = None):
        super().__init__()
        if not layers or not isinstance(layers[-1], GPLayer):
            raise ValueError("the last layer of a DeepGP must be a GPLayer")
        self.layers = nn.ModuleList(layers)
        self.likelihood = likelihood
        self.num_data = int(num_data)
        self.spec = spec or "-".join("LV" if isinstance(layer, LatentVariableLayer) else "GP" for layer in layers)
        # the data dimension: the first GP layer's input less the latent coordinates added before it
        first_gp = next(i for i, layer in enumerate(layers) if isinstance(layer, GPLayer))
        self.input_dim = layers[first_gp].input_dim - sum(layer.latent_dim for layer in layers[:first_gp])
        self.output_dim = layers[-1].output_dim

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_spec(cls, spec: str, X, Y, *, seed: int | None = 0, device=None, **settings) -> "DeepGP":
        """Build a model from the paper's notation and initialise it from training data X [N, D], Y [N, D_y].

        ``spec`` is a '-'-separated sequence of ``GP`` and ``LV`` ending in ``GP``; ``settings`` are
        any other fields of :class:`~deepgp.config.ModelConfig` (``num_inducing``, ``hidden_dim``,
        ``kernel``, ``dtype``, ...). The same as ``from_config(ModelConfig(model=spec, **settings), X, Y)``.
        """
        unknown = sorted(set(settings) - ({f.name for f in dataclasses.fields(ModelConfig)} - {"model"}))
        if unknown:
            raise ValueError(f"unknown setting(s) {unknown} for a model; the settings are ModelConfig's fields")
        return cls.from_config(ModelConfig(model=spec, **settings), X, Y, seed=seed, device=device)

    @classmethod
    def from_config(cls, config: ModelConfig, X, Y, seed: int | None = 0, device=None) -> "DeepGP":
        """The architecture of ``config`` (:meth:`build`), initialised from training data (:meth:`initialise`).

        Initialisation follows the paper's code (docs/paper-vs-code.md §1): k-means inducing inputs
        padded with N(0, 1) in latent columns, lengthscales sqrt(D_in), PCA projection, inner
        q(v) = N(0, inner_q_sqrt² I), final q(v) = prior; the encoders' Glorot weights and the
        padding are drawn under ``seed``. M is at most the number of distinct inputs.
        """
        if not isinstance(config, ModelConfig):
            raise ValueError(f"config must be a ModelConfig, got {type(config).__name__}")
        dtype, device, seed = torch_dtype(config.dtype), check_device(device), check_seed(seed)
        X, Y = as_xy(X, Y, min_rows=2)
        check_magnitude(X, Y, dtype)
        Xn = X.cpu().numpy()
        rng = np.random.default_rng(seed)
        with seeded(seed, device):
            Z0 = initial_inducing(Xn, config.num_inducing, rng)
            config = dataclasses.replace(config, num_inducing=int(Z0.shape[0]))
            model = cls.build(config, Xn.shape[1], Y.shape[1], num_data=Xn.shape[0])  # draws the encoders' weights
            model.initialise(Xn, Z0, rng)
        return model.to(device=device, dtype=dtype)

    @classmethod
    def build(cls, config: ModelConfig, input_dim: int, output_dim: int, num_data: int | None = None) -> "DeepGP":
        """The architecture of ``config`` for D = ``input_dim`` inputs and D_y = ``output_dim`` outputs,
        with placeholder inducing inputs and projection (zeros): :meth:`initialise` or a state dict next.

        Inner GP layers have ``hidden_dim`` GPs and output D dimensions through the fixed [W, I] map
        (``inner_width="input"``) or their ``hidden_dim`` values over a fixed linear mean
        (``"hidden"``; ``"auto"`` is resolved from ``num_data``, :meth:`ModelConfig.resolved`); each LV
        layer adds ``latent_dim`` coordinates to the next layer's input.
        """
        if num_data is None and config.inner_width == "auto":
            raise ValueError("DeepGP.build: inner_width='auto' is resolved from num_data, the number of training "
                             "points: give num_data, or a concrete inner_width")
        num_data = 1 if num_data is None else num_data
        config = config.resolved(num_data)  # (the model records, and saves, the concrete inner width)
        tokens, D, D_y, M = parse_spec(config.model), int(input_dim), int(output_dim), config.num_inducing
        layers, D_in = [], D
        for i, tok in enumerate(tokens):
            last = i == len(tokens) - 1
            if tok == "LV":
                layers.append(LatentVariableLayer(D, D_y, config.latent_dim, hidden=config.encoder_hidden,
                                                  std_map=config.encoder_std,
                                                  std_offset=STD_OFFSETS[config.encoder_std]))
                D_in += config.latent_dim
                continue
            name = "the final GP layer" if last else f"GP layer {i + 1}"
            k = make_kernel(config.kernel, D_in, train_variance=last or config.train_inner_kernel_variance)
            Z = torch.zeros(M, D_in, dtype=torch.float64)
            if last:
                layers.append(GPLayer(k, Z, D_y, None, 1.0, name=name))
            elif config.inner_width == "hidden":
                P = torch.zeros(D_in, config.hidden_dim, dtype=torch.float64)
                layers.append(GPLayer(k, Z, config.hidden_dim, None, config.inner_q_sqrt, name=name, linear_mean=P))
                D_in = config.hidden_dim
            else:
                W = torch.zeros(D, config.hidden_dim, dtype=torch.float64)
                layers.append(GPLayer(k, Z, config.hidden_dim, W, config.inner_q_sqrt, name=name))
                D_in = D
        model = cls(layers, GaussianLikelihood(D_y, config.likelihood_variance), num_data, spec=config.model)
        model.config = config  # everything needed to rebuild the architecture without the data (save / load)
        return model.to(dtype=torch_dtype(config.dtype))

    @torch.no_grad()
    def initialise(self, X: np.ndarray, Z0: np.ndarray, rng: np.random.Generator) -> None:
        """Set every GP layer's inducing inputs (``Z0`` [M, D] in the data's columns, N(0, 1) draws from
        ``rng`` in latent ones) and the inner layers' projection W (X's principal directions). With
        linear means (``inner_width="hidden"``) the first is P = W and the later ones the identity,
        and the later layers' inducing inputs are Z0 W, Z0 pushed through the first mean."""
        W = principal_directions(X, self.config.hidden_dim)
        Zin = Z0  # the inducing inputs in the coordinates of the layers' (non-latent) inputs
        for layer in self.layers:
            if not isinstance(layer, GPLayer):
                continue
            Z = rng.standard_normal((Z0.shape[0], layer.input_dim))
            n = min(layer.input_dim, Zin.shape[1])
            Z[:, :n] = Zin[:, :n]
            layer.Z.copy_(torch.from_numpy(Z))
            if layer.W is not None:
                layer.W.copy_(torch.from_numpy(W))
            if layer.P is not None:
                P = np.zeros(tuple(layer.P.shape))
                first = Zin is Z0
                P[: W.shape[0] if first else W.shape[1]] = W if first else np.eye(W.shape[1])
                layer.P.copy_(torch.from_numpy(P))
                Zin = Zin @ W if first else Zin

    # -- persistence --------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the architecture (``config``) and every parameter to ``path``.

        The file is safetensors with the config as JSON (:mod:`deepgp.storage`): opening it never
        runs code. The write is atomic: if it fails, a file already at ``path`` is left as it was.
        """
        storage.write(path, storage.MODEL, self.to_tree())

    @classmethod
    def load(cls, path, device=None, trust: bool = False) -> "DeepGP":
        """Rebuild a model written by :meth:`save`; a file that is not one is a ValueError naming it.

        ``trust=True`` also reads deepgp 0.1's pickle files, **which runs any code such a file holds**:
        only for a file whose origin you trust, and only to :meth:`save` it again in the safe format.
        """
        device = check_device(device)
        tree = storage.read(path, storage.MODEL, trust=trust)
        with storage.written_by(path):
            return cls.from_tree(tree, path, device)

    def to_tree(self) -> dict:
        """The saved form: {"config": the ModelConfig's fields, "input_dim": D, "output_dim": D_y,
        "num_data": N, "state": the state dict}."""
        if not isinstance(getattr(self, "config", None), ModelConfig):
            raise ValueError("only models built by DeepGP.from_spec or from_config can be saved with save(); save "
                             "the parameters with safetensors.torch.save_file(model.state_dict(), path) instead")
        return {"config": dataclasses.asdict(self.config), "input_dim": self.input_dim, "output_dim": self.output_dim,
                "num_data": self.num_data, "state": self.state_dict()}

    @classmethod
    def from_tree(cls, tree: dict, path="the file", device=None) -> "DeepGP":
        """The model saved as :meth:`to_tree`, checked field by field (``path`` names it in errors)."""
        field = storage.field
        settings = dict(field(tree, "config", dict, path))
        unknown = sorted(set(tree) - {"config", "input_dim", "output_dim", "num_data", "state"})
        unknown += sorted(set(settings) - {f.name for f in dataclasses.fields(ModelConfig)})
        if unknown:
            raise ValueError(f"{path}: unknown field(s) {unknown} (written by a newer deepgp?)")
        for f in dataclasses.fields(ModelConfig):  # a file from before a setting existed: built with its legacy value
            if f.name not in settings and "legacy" in f.metadata:
                settings[f.name] = f.metadata["legacy"]
        try:
            config = ModelConfig(**settings)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path} is damaged: {err}") from None
        dims = [field(tree, k, int, path) for k in ("input_dim", "output_dim", "num_data")]
        state = field(tree, "state", dict, path)
        if not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise ValueError(f"{path} is damaged: its state holds values that are not tensors")
        _check_sizes(config, *dims[:2], state, path)
        if dims[2] < 1:
            raise ValueError(f"{path} is damaged: num_data={dims[2]}")
        try:
            with seeded(0):  # (the placeholder weights' draws leave the caller's random state alone)
                model = cls.build(config, *dims)
            model.load_state_dict(state)
        except (ValueError, TypeError, RuntimeError) as err:
            raise ValueError(f"{path} is damaged: its parameters do not fit its architecture "
                             f"({' '.join(str(err).split())[:300]})") from None
        try:
            check_parameters(model)
        except ValueError as err:
            raise ValueError(f"{path} is damaged: {err}") from None
        return model.to(device) if device is not None else model

    # -- bookkeeping --------------------------------------------------------------------------
    @property
    def dtype(self):
        return self.layers[-1].Z.dtype

    @property
    def device(self):
        return self.layers[-1].Z.device

    @property
    def final_layer(self) -> GPLayer:
        return self.layers[-1]

    @property
    def has_latent(self) -> bool:
        return any(isinstance(layer, LatentVariableLayer) for layer in self.layers)

    def kl(self) -> torch.Tensor:
        """Σ over GP layers of KL(q(v) ‖ p(v))."""
        return sum(layer.kl() for layer in self.layers if isinstance(layer, GPLayer))

    def _data(self, X, Y=None):
        return as_model_data(self, X, Y)

    # -- propagation --------------------------------------------------------------------------
    def propagate(self, X: torch.Tensor, Y: torch.Tensor | None, num_samples: int, mode: str,
                  latents: list | None = None):
        """Push a batch through every layer but the last; return the final layer's marginals.

        Modes (X [B, D], Y [B, D_y]; K = num_samples):
          * ``"joint"``: the K samples of a point share one draw of every inner GP (the paper's
            IW bound); before the first LV layer the K inputs are identical, so one draw per
            point is made and broadcast.
          * ``"independent"``: every (point, sample) pair gets its own draw (VI; the released
            code's IW).
          * ``"batch"``: sample k of every point of the batch sees the same inducing draw of each
            inner layer, with its own residual (exact marginals): a point's K samples are drawn as in
            ``"independent"`` (the same expectation of any per-point term); the points of the batch
            are correlated through the K shared draws, and the O(L·M²) work is done K times per
            batch rather than B·K times.
          * ``"predict"``: w from the prior; K predictive samples per test point, marginal draws.

        Returns mean and var [B, K, D_y] (``predict``: [K, B, D_y]), the log density ratio
        Σ_LV log p(w) − log q(w) [B, K] and the analytic Σ_LV KL(q(w_n) ‖ p(w_n)) [B] (zeros
        without LV layers, and in ``predict`` mode). ``latents``: a list that receives each LV layer's
        w [B, K, d_w], whose log q(w) is then taken with q's parameters held constant (DReG's estimator).
        """
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        B, D = X.shape
        K = num_samples
        # sample-major [K, B, ·]: the groups are the sample indices, whose points share one inducing draw
        sample_major = mode in ("predict", "batch")
        if sample_major:
            H = X.unsqueeze(0).expand(K, B, D)
        elif mode == "joint":
            H = X.unsqueeze(1)
        else:
            H = X.unsqueeze(1).expand(B, K, D)
        log_ratio = X.new_zeros(B, K)
        kl_w = X.new_zeros(B)
        for layer in self.layers[:-1]:
            if isinstance(layer, LatentVariableLayer):
                if mode == "predict":
                    w = layer.sample_prior((K, B), X)
                else:
                    mean_w, std_w = layer.posterior(X, Y)
                    w, ratio = layer.sample_posterior(mean_w, std_w, K, stop_q=latents is not None)
                    if latents is not None:
                        latents.append(w)
                    log_ratio = log_ratio + ratio
                    kl_w = kl_w + layer.kl(mean_w, std_w)
                    if sample_major:
                        w = w.transpose(0, 1)  # [B, K, d_w] → [K, B, d_w]
                H = layer(H, w)
            elif mode == "independent":
                G, P, _ = H.shape
                H = layer(H.reshape(G * P, 1, -1)).reshape(G, P, -1)
            else:
                H = layer(H, full_cov=(mode == "joint"))
        mean, var = self.final_layer.conditional(H)
        if mode == "batch":
            mean, var = mean.transpose(0, 1), var.transpose(0, 1)  # → [B, K, D_y]
        if mode == "joint" and mean.shape[1] != K:  # no LV layer: every sample is the same draw
            mean, var = mean.expand(B, K, -1), var.expand(B, K, -1)
        return mean, var, log_ratio, kl_w

    # -- objectives ---------------------------------------------------------------------------
    def elbo(self, X, Y, method: str = "vi", num_samples: int = 1, inner_sampling: str = "independent",
             dreg: bool = False) -> torch.Tensor:
        """Unbiased minibatch estimate of the VI or IW bound, scaled to the full data size N.

        X [B, D], Y [B, D_y] (numpy or torch). ``method="iw"`` uses K = num_samples importance
        samples; ``inner_sampling`` chooses how inner layers are sampled across them ("independent",
        the released code and the default; "joint", the paper's text; "batch", one draw per sample
        index shared by the batch); ``dreg`` gives the encoders DReG's gradient
        (:func:`~deepgp.objectives.elbo_iw`). Returns a scalar tensor.
        """
        X, Y = self._data(X, Y)
        check_magnitude(X, Y, self.dtype)  # (at prediction, far inputs only revert to the prior)
        num_samples = check_positive_int("num_samples", num_samples)
        if method == "vi":
            return objectives.elbo_vi(self, X, Y, num_samples)
        if method == "iw":
            return objectives.elbo_iw(self, X, Y, num_samples, inner_sampling, dreg)
        raise ValueError(f"method must be 'vi' or 'iw', got {method!r}")

    def forward(self, X, Y, method: str = "vi", num_samples: int = 1, inner_sampling: str = "independent",
                dreg: bool = False) -> torch.Tensor:
        """The bound (:meth:`elbo`), so that ``torch.func.functional_call`` works on a DeepGP."""
        return self.elbo(X, Y, method, num_samples, inner_sampling, dreg)

    # -- prediction ---------------------------------------------------------------------------
    def sample_predictive(self, X, num_samples: int = 1000, seed: int | None = None) -> np.ndarray:
        """Draws of y at X [N, D] with w from the prior: numpy [S, N, D_y]."""
        X, _ = self._data(X)
        return prediction.sample_predictive(self, X, check_positive_int("num_samples", num_samples), check_seed(seed))

    def predictive_log_density(
        self, X, Y, num_samples: int = 2000, estimator: str = "mixture", seed: int | None = None
    ) -> np.ndarray:
        """log p(y_n | x_n) per test point, numpy [N]; see :func:`deepgp.prediction.predictive_log_density`."""
        X, Y = self._data(X, Y)
        return prediction.predictive_log_density(
            self, X, Y, check_positive_int("num_samples", num_samples), estimator, check_seed(seed)
        )
