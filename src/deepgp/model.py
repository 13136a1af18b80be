"""DeepGP: a stack of latent-variable and GP layers ending in a GP layer and a Gaussian likelihood.

The model string is the paper's notation, e.g. ``"LV-GP-GP"``; see :func:`deepgp.config.parse_spec`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from . import architectures, model_file, objectives, prediction
from .config import INNER_SAMPLING, ModelConfig
from .layers import GPLayer, LatentVariableLayer
from .likelihoods import GaussianLikelihood
from .linalg import PLAIN, Numerics
from .protocols import Predictive
from .validation import (
    as_model_data,
    check_magnitude,
    check_positive_int,
    check_seed,
)


class Marginals(NamedTuple):
    """The final layer's marginals for a training batch X [B, D] under w ~ q (:meth:`DeepGP.propagate_posterior`)."""

    mean: torch.Tensor  # [B, K, D_y]
    var: torch.Tensor  # [B, K, D_y], without the likelihood's σ²
    log_ratio: torch.Tensor  # Σ_LV log p(w) − log q(w) per sample [B, K] (zeros without LV layers)
    kl_w: torch.Tensor  # the analytic Σ_LV KL(q(w_n) ‖ p(w_n)) per point [B]
    latents: tuple[torch.Tensor, ...]  # each LV layer's w [B, K, d_w], in order


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

    # -- construction (deepgp.architectures) ----------------------------------------------------
    @classmethod
    def from_spec(cls, spec: str, X, Y, *, seed: int | None = 0, device=None, **settings) -> "DeepGP":
        """Build a model from the paper's notation and initialise it from training data X [N, D], Y [N, D_y].

        ``spec`` is a '-'-separated sequence of ``GP`` and ``LV`` ending in ``GP``; ``settings`` are
        any other fields of :class:`~deepgp.config.ModelConfig` (``num_inducing``, ``hidden_dim``,
        ``kernel``, ``dtype``, ...). The same as ``from_config(ModelConfig(model=spec, **settings), X, Y)``.
        """
        return cls.from_config(architectures.config_of(spec, settings), X, Y, seed=seed, device=device)

    @classmethod
    def from_config(cls, config: ModelConfig, X, Y, seed: int | None = 0, device=None) -> "DeepGP":
        """The architecture of ``config`` (:meth:`build`), initialised from training data X [N, D], Y [N, D_y].

        Initialisation follows the paper's code (docs/paper-vs-code.md §1): k-means inducing inputs
        padded with N(0, 1) in latent columns, lengthscales sqrt(D_in), PCA projection, inner
        q(v) = N(0, inner_q_sqrt² I), final q(v) = prior; the encoders' Glorot weights and the
        padding are drawn under ``seed``. M is at most the number of distinct inputs
        (:func:`deepgp.architectures.from_config`).
        """
        return architectures.from_config(cls, config, X, Y, seed, device)

    @classmethod
    def build(cls, config: ModelConfig, input_dim: int, output_dim: int, num_data: int | None = None) -> "DeepGP":
        """The architecture of ``config`` for D = ``input_dim`` inputs and D_y = ``output_dim`` outputs,
        with placeholder inducing inputs and projection (zeros), to be initialised or given a state dict
        (:func:`deepgp.architectures.build`; ``inner_width="auto"`` is resolved from ``num_data``)."""
        return architectures.build(cls, config, input_dim, output_dim, num_data)

    @classmethod
    def shapes(cls, config: ModelConfig, input_dim: int, output_dim: int, num_data: int | None = None) -> dict:
        """{name: shape} of every parameter and buffer that :meth:`build` makes, without allocating them
        (:func:`deepgp.architectures.shapes`)."""
        return architectures.shapes(cls, config, input_dim, output_dim, num_data)

    # -- persistence (deepgp.model_file) ------------------------------------------------------
    def save(self, path) -> None:
        """Write the architecture (``config``) and every parameter to ``path``.

        The file is safetensors with the config as JSON (:mod:`deepgp.storage`): opening it never
        runs code. The write is atomic: if it fails, a file already at ``path`` is left as it was.
        """
        model_file.save(self, path)

    @classmethod
    def load(cls, path, device=None, trust: bool = False) -> "DeepGP":
        """Rebuild a model written by :meth:`save`; a file that is not one is a ValueError naming it.

        ``trust=True`` also reads deepgp 0.1's pickle files, **which runs any code such a file holds**:
        only for a file whose origin you trust, and only to :meth:`save` it again in the safe format.
        """
        return model_file.load(cls, path, device, trust)

    def to_tree(self) -> dict:
        """The saved form: {"config": the ModelConfig's fields, "input_dim": D, "output_dim": D_y,
        "num_data": N, "state": the state dict}."""
        return model_file.to_tree(self)

    @classmethod
    def from_tree(cls, tree: dict, path="the file", device=None) -> "DeepGP":
        """The model saved as :meth:`to_tree`, checked field by field (``path`` names it in errors)."""
        return model_file.from_tree(cls, tree, path, device)

    # -- bookkeeping --------------------------------------------------------------------------
    @property
    def dtype(self):
        return self.layers[-1].Z.dtype

    @property
    def device(self):
        return self.layers[-1].Z.device

    @property
    def final_layer(self) -> GPLayer:
        layer = self.layers[-1]
        if not isinstance(layer, GPLayer):  # (__init__ checks it; self.layers is a ModuleList that can change)
            raise TypeError(f"the last layer of a DeepGP must be a GPLayer, got {type(layer).__name__}")
        return layer

    @property
    def has_latent(self) -> bool:
        return any(isinstance(layer, LatentVariableLayer) for layer in self.layers)

    def kl(self) -> torch.Tensor:
        """Σ over GP layers of KL(q(v) ‖ p(v))."""
        return functools.reduce(torch.add, [layer.kl() for layer in self.layers if isinstance(layer, GPLayer)])

    def _data(self, X, Y=None):
        return as_model_data(self, X, Y)

    # -- propagation --------------------------------------------------------------------------
    def propagate_posterior(self, X: torch.Tensor, Y: torch.Tensor | None, num_samples: int,
                            sampling: str = "independent", *, numerics: Numerics = PLAIN,
                            stop_q: bool = False) -> Marginals:
        """Push a batch through every layer but the last with w ~ q(w | x, y); the final layer's marginals.

        X [B, D], Y [B, D_y] (None for a model without LV layers), K = num_samples; ``sampling``
        (:data:`~deepgp.config.INNER_SAMPLING`) says how the inner GPs are drawn across a point's K samples:
          * ``"independent"``: every (point, sample) pair gets its own draw (VI; the released code's IW).
          * ``"joint"``: the K samples of a point share one draw of every inner GP (the paper's IW
            bound); before the first LV layer the K inputs are identical, so one draw per point is
            made and broadcast.
          * ``"batch"``: sample k of every point of the batch sees the same inducing draw of each
            inner layer, with its own residual (exact marginals): a point's K samples are drawn as in
            ``"independent"`` (the same expectation of any per-point term); the points of the batch
            are correlated through the K shared draws, and the O(L·M²) work is done K times per
            batch rather than B·K times.

        ``stop_q``: each log q(w) is taken with q's parameters held constant (DReG's estimator: the
        encoders' gradient reaches the ratio through w alone). ``numerics``: how the layers' linear
        algebra computes (:class:`~deepgp.linalg.Numerics`).
        """
        if sampling not in INNER_SAMPLING:
            raise ValueError(f"sampling must be one of {INNER_SAMPLING}, got {sampling!r}")
        B, D = X.shape
        K = num_samples
        # "batch" is sample-major [K, B, ·]: the groups are the sample indices, whose points share one inducing draw
        sample_major = sampling == "batch"
        if sample_major:
            H = X.unsqueeze(0).expand(K, B, D)
        elif sampling == "joint":
            H = X.unsqueeze(1)
        else:
            H = X.unsqueeze(1).expand(B, K, D)
        log_ratio = X.new_zeros(B, K)
        kl_w = X.new_zeros(B)
        latents = []
        for layer in self.layers[:-1]:
            if isinstance(layer, LatentVariableLayer):
                if Y is None:
                    raise ValueError(f"Y is needed for q(w | x, y) of {self.spec}'s latent-variable layer")
                mean_w, std_w = layer.posterior(X, Y)
                w, ratio = layer.sample_posterior(mean_w, std_w, K, stop_q=stop_q)
                latents.append(w)
                log_ratio = log_ratio + ratio
                kl_w = kl_w + layer.kl(mean_w, std_w)
                H = layer(H, w.transpose(0, 1) if sample_major else w)  # [B, K, d_w] → [K, B, d_w]
            elif sampling == "independent":
                G, P, _ = H.shape
                H = layer(H.reshape(G * P, 1, -1), numerics=numerics).reshape(G, P, -1)
            else:
                H = layer(H, full_cov=(sampling == "joint"), numerics=numerics)
        mean, var = self.final_layer.conditional(H, numerics=numerics)
        if sample_major:
            mean, var = mean.transpose(0, 1), var.transpose(0, 1)  # → [B, K, D_y]
        if sampling == "joint" and mean.shape[1] != K:  # no LV layer: every sample is the same draw
            mean, var = mean.expand(B, K, -1), var.expand(B, K, -1)
        return Marginals(mean, var, log_ratio, kl_w, tuple(latents))

    def propagate_prior(self, X: torch.Tensor, num_samples: int, *, numerics: Numerics = PLAIN) -> Predictive:
        """Push test inputs X [B, D] through every layer but the last with w from the prior, K = num_samples
        predictive samples per point, marginal draws (sample-major: sample k of every point shares one
        inducing draw of each inner layer); the final layer's moments [K, B, D_y]."""
        B, D = X.shape
        K = num_samples
        H = X.unsqueeze(0).expand(K, B, D)
        for layer in self.layers[:-1]:
            if isinstance(layer, LatentVariableLayer):
                H = layer(H, layer.sample_prior((K, B), X))
            else:
                H = layer(H, numerics=numerics)
        return Predictive(*self.final_layer.conditional(H, numerics=numerics))

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
