"""Deep GPs sampled by stochastic-gradient HMC (Havasi, Hernández-Lobato & Murillo-Fuentes, 2018),
the paper's ``GP``/``GP-GP``/``GP-GP-GP`` SGHMC columns.

The model is the GP-only :class:`~deepgp.DeepGP` of the same spec (same kernels, inducing inputs,
inner projections and initialisation), but with no variational q(v): the whitened inducing outputs
v = {v_l} of every layer (u_l = L_l v_l, L_l the Cholesky factor of K(Z_l, Z_l)) are sampled from
their posterior p(v | y, θ) ∝ p(y | v, θ) N(v; 0, I). Given v, each layer is its prior conditional
N(Aᵀ v, k − ‖a‖²), and the log likelihood of a minibatch of B points is estimated by one sample
through the inner layers and the final layer's Gaussian marginal:

    log p(y | v, θ) ≈ (N/B) Σ_b log N(y_b; μ_b, s_b² + σ²).

(Havasi et al. write the sampler on u; sampling v is the same posterior in other coordinates, and
its prior N(0, I) does not depend on θ.)

**Sampler** (the scale-adapted SGHMC of Springenberg et al. 2016): for the
potential U(v) = −log p(y | v, θ) − log N(v; 0, I), with step ε, momentum decay α and a
preconditioner M̂⁻¹ = 1/√ĝ² (ĝ² a running mean of the squared gradient, adapted during burn-in only):

    r ← (1 − α) r − ε² M̂⁻¹ ∇U(v) + N(0, 2 ε² α M̂⁻¹),    v ← v + r.

With exact gradients and fixed M̂ this is a discretised underdamped Langevin dynamics whose
stationary distribution tends to exp(−U) as ε → 0 (bench/tests/test_baselines.py checks it on a
Gaussian target).

**Hyperparameters** θ (kernels, likelihood variance, inducing inputs) by moving-window Monte Carlo
EM (Havasi et al.): after each sampler step during burn-in, one Adam step on −log p(y | v*, θ)
with v* drawn at random from the last ``window`` samples of the chain. Then θ is fixed and the
chain runs ``samples × thinning`` more steps, keeping every ``thinning``-th state.

**Prediction** averages over the kept samples: draw s uses the kept state v_(s) (a block of
draws uses distinct states, chosen at random), then the layers' conditionals as in
:mod:`deepgp.prediction`, so the mixture and the KDE estimators apply unchanged.
"""

from __future__ import annotations

import collections
import random

import numpy as np
import torch
from torch import nn

from deepgp import prediction
from deepgp.layers import GPLayer
from deepgp.linalg import seeded, standard_normal
from deepgp.protocols import Predictive
from deepgp.training import Batches
from deepgp.validation import as_model_data, check_positive_int, check_seed

from .common import staircase_adam


class SGHMC:
    """Scale-adapted SGHMC on tensors ``params`` (their ``.grad`` holds ∇U when :meth:`step` is called).

    Args:
        step: ε; mdecay: α in (0, 1); adapt_rate: weight of a new squared gradient in ĝ² while adapting.
    """

    def __init__(self, params, step: float = 0.01, mdecay: float = 0.05, adapt_rate: float = 0.01):
        self.params = list(params)
        if not (step > 0 and 0 < mdecay < 1 and 0 < adapt_rate <= 1):
            raise ValueError(f"SGHMC needs step > 0, 0 < mdecay < 1, 0 < adapt_rate <= 1; got {step}, {mdecay}, "
                             f"{adapt_rate}")
        self.eps, self.mdecay, self.rate = step, mdecay, adapt_rate
        self.momentum = [torch.zeros_like(p) for p in self.params]
        self.g2: list[torch.Tensor | None] = [None] * len(self.params)

    @torch.no_grad()
    def step(self, adapt: bool = False) -> None:
        """One update of every parameter; ``adapt`` updates ĝ² first (burn-in)."""
        for i, (p, r) in enumerate(zip(self.params, self.momentum)):
            g = p.grad
            if self.g2[i] is None:
                self.g2[i] = g.square().clamp_min(1e-16)
            elif adapt:
                self.g2[i].mul_(1 - self.rate).add_(self.rate * g.square())
            m_inv = 1.0 / (self.g2[i].sqrt() + 1e-16)
            noise = (2 * self.eps**2 * self.mdecay * m_inv).sqrt() * standard_normal(p.shape, p)
            r.mul_(1 - self.mdecay).add_(-self.eps**2 * m_inv * g + noise)
            p.add_(r)


class SGHMCDeepGP(nn.Module):
    """A GP-only deep GP whose inducing outputs are sampled (see the module docstring).

    Args:
        dgp: a :class:`~deepgp.DeepGP` without LV layers, built and initialised as usual; its q(v)
            becomes a point (q_sqrt = 0, q_mu = the chain's current state).
    """

    def __init__(self, dgp):
        super().__init__()
        if dgp.has_latent:
            raise ValueError(f"SGHMC samples GP-only deep GPs (GP, GP-GP, ...), got {dgp.spec}")
        self.dgp = dgp
        for layer in self.gp_layers:
            layer.q_sqrt.requires_grad_(False)
            layer.q_sqrt.zero_()
        self.likelihood = dgp.likelihood
        self.spec, self.input_dim, self.output_dim = dgp.spec, dgp.input_dim, dgp.output_dim
        self.num_data = dgp.num_data
        self.samples: list[torch.Tensor] = []  # per layer, kept states [S_kept, M, L]

    has_latent = False

    @property
    def gp_layers(self) -> list[GPLayer]:
        return list(self.dgp.layers)

    @property
    def dtype(self):
        return self.dgp.dtype

    @property
    def device(self):
        return self.dgp.device

    def state(self) -> list[torch.Tensor]:
        """The chain's current state: every layer's v [M, L]."""
        return [layer.q_mu for layer in self.gp_layers]

    def hyperparameters(self) -> list[nn.Parameter]:
        """θ: every parameter but the states v and the (zero) q_sqrt."""
        skip = {id(p) for layer in self.gp_layers for p in (layer.q_mu, layer.q_sqrt)}
        return [p for p in self.dgp.parameters() if id(p) not in skip]

    def log_likelihood(self, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        """(N/B) Σ_b log N(y_b; μ_b, s_b² + σ²) at the current v, one sample through the inner layers (scalar)."""
        final = self.dgp.propagate_posterior(X, None, 1, "independent")  # [B, 1, D_y]; GP layers only: no Y
        return self.likelihood.log_predictive(Y, final.mean[:, 0], final.var[:, 0]).sum() * (self.num_data / X.shape[0])

    def log_prior(self) -> torch.Tensor:
        """log N(v; 0, I) up to its constant: −½ Σ_l ‖v_l‖²."""
        return -0.5 * sum(v.square().sum() for v in self.state())

    # -- prediction (DeepGP's contract) ----------------------------------------------------------
    def propagate_prior(self, X: torch.Tensor, num_samples: int) -> Predictive:
        """K = ``num_samples`` draws at X [B, D], draw k through the kept state v_(k): the final layer's mean
        and variance [K, B, D_y] (var excludes σ²)."""
        if not self.samples:
            raise ValueError("the SGHMC deep GP has no posterior samples yet: fit it first")
        kept = self.samples[0].shape[0]
        idx = torch.cat([torch.randperm(kept)[: num_samples - i] for i in range(0, num_samples, kept)])
        H = X.unsqueeze(0)  # [1, B, D]: the first layer's inputs are the same for every draw
        for layer, V in zip(self.gp_layers, self.samples):
            At, Q = layer.prior_conditional(H, full_cov=False)  # Aᵀ [G, B, M], Q [G, B]
            mean = At @ V[idx.to(V.device)]  # [K, B, L]
            var = Q.clamp_min(1e-12).unsqueeze(-1).expand_as(mean)
            if layer is not self.gp_layers[-1]:
                H = layer.project(H, mean + var.sqrt() * standard_normal(mean.shape, mean))
        return Predictive(mean, var)

    def sample_predictive(self, X, num_samples: int = 1000, seed: int | None = None) -> np.ndarray:
        """Draws of y at X [N, D] over the kept samples: numpy [S, N, D_y]."""
        X, _ = as_model_data(self.dgp, X)
        return prediction.sample_predictive(self, X, check_positive_int("num_samples", num_samples), check_seed(seed))

    def predictive_log_density(self, X, Y, num_samples: int = 2000, estimator: str = "mixture",
                               seed: int | None = None) -> np.ndarray:
        """log p(y_n | x_n) per point, numpy [N]: ``mixture`` (1/S) Σ_s N(y; μ_s, s_s² + σ²) or ``kde``."""
        X, Y = as_model_data(self.dgp, X, Y)
        return prediction.predictive_log_density(
            self, X, Y, check_positive_int("num_samples", num_samples), estimator, check_seed(seed))


def fit_sghmc(model: SGHMCDeepGP, X, Y, iterations: int = 5000, samples: int = 2000, thinning: int = 5,
              batch_size: int = 512, step: float = 0.01, mdecay: float = 0.05, window: int = 100,
              lr: float = 0.005, decay: float = 0.98, decay_every: int = 1000, seed: int | None = 0) -> list[float]:
    """Burn-in (``iterations`` sampler steps, each followed by one MCEM step on θ), then
    ``samples × thinning`` sampler steps keeping every ``thinning``-th state in ``model.samples``.

    Returns the minibatch estimate of log p(y, v | θ) (up to a constant) at every step of both phases.
    """
    X, Y = as_model_data(model.dgp, X, Y)
    for name, value in (("samples", samples), ("thinning", thinning), ("window", window)):
        check_positive_int(name, value)
    sampler = SGHMC(model.state(), step, mdecay)
    adam, schedule = staircase_adam(model.hyperparameters(), lr, decay, decay_every)
    history: list[float] = []
    kept: list[list[torch.Tensor]] = []
    with seeded(seed, X.device):  # (the caller's random state is left as it was)
        pick = random.Random(seed)
        batches = Batches(X.shape[0], batch_size, X.device)
        recent: collections.deque = collections.deque(maxlen=window)

        def sampler_step(adapt: bool) -> None:
            idx = batches.next()
            for v in model.state():
                v.grad = None
            log_joint = model.log_likelihood(X[idx], Y[idx]) + model.log_prior()
            v_grads = torch.autograd.grad(-log_joint, model.state())
            for v, g in zip(model.state(), v_grads):
                v.grad = g
            sampler.step(adapt)
            history.append(float(log_joint.detach()))

        for _ in range(iterations):
            sampler_step(adapt=True)
            recent.append([v.detach().clone() for v in model.state()])
            current = [v.detach().clone() for v in model.state()]
            with torch.no_grad():
                for v, w in zip(model.state(), pick.choice(recent)):
                    v.copy_(w)
            adam.zero_grad(set_to_none=True)
            idx = batches.next()
            (-model.log_likelihood(X[idx], Y[idx])).backward(inputs=model.hyperparameters())
            adam.step()
            schedule.step()
            with torch.no_grad():
                for v, w in zip(model.state(), current):
                    v.copy_(w)
        for t in range(samples * thinning):
            sampler_step(adapt=False)
            if (t + 1) % thinning == 0:
                kept.append([v.detach().clone() for v in model.state()])
    model.samples = [torch.stack(states) for states in zip(*kept)]
    return history
