"""Building a deep GP: the architecture a :class:`~deepgp.config.ModelConfig` describes, and its
initialisation from training data.

:meth:`DeepGP.from_spec <deepgp.DeepGP.from_spec>`, :meth:`~deepgp.DeepGP.from_config` and
:meth:`~deepgp.DeepGP.build` are this module's :func:`config_of`, :func:`from_config` and :func:`build`
for the class they are called on. Initialisation follows the paper's code (docs/paper-vs-code.md §1):
k-means inducing inputs (:func:`initial_inducing`) padded with N(0, 1) in latent columns, lengthscales
sqrt(D_in), the inner layers' projection from the inputs' principal directions
(:func:`principal_directions`), inner q(v) = N(0, inner_q_sqrt² I), final q(v) = prior.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.cluster.vq
import torch

from . import memory
from .config import ModelConfig, parse_spec
from .encoders import STD_OFFSETS
from .kernels import make_kernel
from .layers import GPLayer, LatentVariableLayer
from .likelihoods import GaussianLikelihood
from .linalg import seeded
from .validation import as_xy, check_device, check_magnitude, check_seed, torch_dtype


def config_of(spec: str, settings: dict) -> ModelConfig:
    """``ModelConfig(model=spec, **settings)``; a setting that is not a field of ModelConfig is a ValueError."""
    unknown = sorted(set(settings) - ({f.name for f in dataclasses.fields(ModelConfig)} - {"model"}))
    if unknown:
        raise ValueError(f"unknown setting(s) {unknown} for a model; the settings are ModelConfig's fields")
    return ModelConfig(model=spec, **settings)


def from_config(cls, config: ModelConfig, X, Y, seed: int | None = 0, device=None):
    """``cls.build`` of ``config``, initialised from training data X [N, D], Y [N, D_y] (:func:`initialise`);
    the encoders' Glorot weights and the latent columns' padding are drawn under ``seed``. M is at most
    the number of distinct inputs."""
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
        initialise(model, Xn, Z0, rng)
    return model.to(device=device, dtype=dtype)


def build(cls, config: ModelConfig, input_dim: int, output_dim: int, num_data: int | None = None):
    """A ``cls`` of the architecture of ``config`` for D = ``input_dim`` inputs and D_y = ``output_dim``
    outputs, with placeholder inducing inputs and projection (zeros): :func:`initialise` or a state dict next.

    Inner GP layers have ``hidden_dim`` GPs and output D dimensions through the fixed [W, I] map
    (``inner_width="input"``) or their ``hidden_dim`` values over a fixed linear mean
    (``"hidden"``; ``"auto"`` is resolved from ``num_data``, :meth:`ModelConfig.resolved`); each LV
    layer adds ``latent_dim`` coordinates to the next layer's input.
    """
    if num_data is None and config.inner_width == "auto":
        raise ValueError("DeepGP.build: inner_width='auto' is resolved from num_data, the number of training "
                         "points: give num_data, or a concrete inner_width")
    num_data = 1 if num_data is None else num_data
    if torch.get_default_device().type != "meta":  # (on the meta device this is the size of the real build)
        _check_memory(cls, config, input_dim, output_dim, num_data)
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


def shapes(cls, config: ModelConfig, input_dim: int, output_dim: int, num_data: int | None = None) -> dict:
    """{name: shape} of every parameter and buffer that :func:`build` makes, without allocating them: the
    model built on PyTorch's ``meta`` device, which keeps shapes and no values. A RuntimeError where a
    shape has more elements than a tensor can count."""
    with torch.device("meta"):
        model = cls.build(config, input_dim, output_dim, num_data)
    return {name: tuple(t.shape) for name, t in model.state_dict().items()}


def _check_memory(cls, config: ModelConfig, input_dim: int, output_dim: int, num_data: int) -> None:
    """A MemoryBudgetError before :func:`build` allocates more than is available (the count of :func:`shapes`),
    naming the setting the parameters grow with most (:func:`deepgp.memory.model_setting`)."""
    def count(**changed) -> float:  # the parameters and buffers, with the settings ``changed``
        try:
            sizes = shapes(cls, dataclasses.replace(config, **changed), input_dim, output_dim, num_data)
        except RuntimeError:  # more elements than a tensor can count
            return math.inf
        return sum(math.prod(s) for s in sizes.values())

    def estimate(**changed) -> float:
        return memory.model_bytes(count(**changed), torch_dtype(config.dtype))

    needed = estimate()
    if needed <= memory.available():
        return
    setting, value, also = memory.model_setting(config, estimate)
    numel = count()
    what = f"the {numel:,} parameters of a {config.model} model" if math.isfinite(numel) else f"a {config.model} model"
    memory.require(needed, setting, value, what, also=also)


@torch.no_grad()
def initialise(model, X: np.ndarray, Z0: np.ndarray, rng: np.random.Generator) -> None:
    """Set every GP layer's inducing inputs (``Z0`` [M, D] in the data's columns, N(0, 1) draws from
    ``rng`` in latent ones) and the inner layers' projection W (X's principal directions). With
    linear means (``inner_width="hidden"``) the first is P = W and the later ones the identity,
    and the later layers' inducing inputs are Z0 W, Z0 pushed through the first mean."""
    W = principal_directions(X, model.config.hidden_dim)
    Zin = Z0  # the inducing inputs in the coordinates of the layers' (non-latent) inputs
    for layer in model.layers:
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
