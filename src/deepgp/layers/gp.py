"""Sparse variational GP layer (whitened), the building block of every deep GP.

The layer holds L independent GPs sharing one kernel and one set of M inducing inputs Z, and the
whitened q(v_l) = N(m_l, R_lR_lᵀ) of their inducing values; its conditional (moments and draws at
inputs H [G, P, D_in]: G groups of P points that share a draw) is :mod:`deepgp.conditional`.
"""

from __future__ import annotations

import torch
from torch import nn

from .. import conditional
from ..kernels import Stationary
from ..linalg import DEFAULT_JITTER, PLAIN, Numerics


class GPLayer(nn.Module):
    """L independent whitened SVGPs on a shared kernel, with a fixed linear output map.

    Args:
        kernel: the layer's kernel on ``input_dim`` inputs.
        inducing: initial inducing inputs Z [M, input_dim].
        num_gps: L, the number of independent GPs.
        projection: None for the final layer (output = the L GP values). For an inner layer,
            W [output_dim, L]; the output is ``H[..., :output_dim] + g Wᵀ`` (identity mean on the
            first output_dim input coordinates, the paper's fixed [W, I] map, supplement A).
        q_sqrt_init: initial R = q_sqrt_init · I (1 for the final layer: q = prior; 1e-5 for inner
            layers, the near-deterministic start of the paper's code).
        linear_mean: instead of ``projection``, P [input_dim, L], fixed: the output is ``H P + g``
            (L values: a linear mean function plus the GPs, GPflux's inner layers).
    """

    P: torch.Tensor | None  # the buffers of linear_mean and projection (None without one)
    W: torch.Tensor | None

    def __init__(
        self,
        kernel: Stationary,
        inducing: torch.Tensor,
        num_gps: int,
        projection: torch.Tensor | None = None,
        q_sqrt_init: float = 1.0,
        jitter: float = DEFAULT_JITTER,
        name: str = "GP layer",
        linear_mean: torch.Tensor | None = None,
    ):
        super().__init__()
        M, D_in = inducing.shape
        if kernel.input_dim != D_in:
            raise ValueError(f"kernel input_dim {kernel.input_dim} != inducing inputs' dimension {D_in}")
        self.kernel = kernel
        self.input_dim, self.num_gps, self.num_inducing = D_in, num_gps, M
        self.Z = nn.Parameter(inducing.clone())
        dtype = inducing.dtype
        self.q_mu = nn.Parameter(torch.zeros(M, num_gps, dtype=dtype))
        self.q_sqrt = nn.Parameter(q_sqrt_init * torch.eye(M, dtype=dtype).expand(num_gps, M, M).clone())
        if linear_mean is not None and projection is not None:
            raise ValueError("a GP layer takes a projection or a linear_mean, not both")
        if linear_mean is not None and tuple(linear_mean.shape) != (D_in, num_gps):
            raise ValueError(f"linear_mean must be [{D_in}, {num_gps}], got {tuple(linear_mean.shape)}")
        self.register_buffer("P", None if linear_mean is None else linear_mean.clone())
        if projection is None:
            self.output_dim = num_gps
            self.register_buffer("W", None)
        else:
            self.output_dim = projection.shape[0]
            if projection.shape[1] != num_gps or self.output_dim > D_in:
                raise ValueError(f"projection must be [output_dim <= {D_in}, {num_gps}], got {tuple(projection.shape)}")
            self.register_buffer("W", projection.clone())
        self.jitter = jitter
        self.name = name

    # -- variational distribution -------------------------------------------------------------
    def q(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(m [M, L], R [L, M, M] lower-triangular) of the whitened q(v) = N(m, RRᵀ)."""
        return self.q_mu, torch.tril(self.q_sqrt)

    def kl(self) -> torch.Tensor:
        """Σ_l KL(N(m_l, R_lR_lᵀ) ‖ N(0, I)) — equal to the unwhitened KL(q(u) ‖ p(u))."""
        m, R = self.q()
        logdet = torch.log(torch.diagonal(R, dim1=-2, dim2=-1).square()).sum()
        return 0.5 * (R.square().sum() + m.square().sum() - self.num_gps * self.num_inducing - logdet)

    # -- the conditional (deepgp.conditional) ---------------------------------------------------
    def conditional(self, H: torch.Tensor, full_cov: bool = False, numerics: Numerics = PLAIN):
        """Moments of the L GP values g at H [G, P, D_in] under q (docs/mathematics.md §2.2):

            A = Lz⁻¹K_ZH,   mean_l = Aᵀm_l,   cov_l = Q + (R_lᵀA)ᵀ(R_lᵀA),   Q = K_HH − AᵀA.

        Returns mean [G, P, L] and either the marginal variances [G, P, L] or, with
        ``full_cov=True``, the covariance across the P points of each group [G, L, P, P]
        (:func:`deepgp.conditional.moments`, whose plain form is :func:`deepgp.conditional.moments_plain`).
        ``numerics``: how the linear algebra computes (:class:`~deepgp.linalg.Numerics`).
        """
        H = self._check_input(H)
        m, R = self.q()
        return conditional.moments(self.kernel, self.Z, m, R, H, full_cov, jitter=self.jitter, name=self.name,
                                   numerics=numerics)

    def sample(self, H: torch.Tensor, full_cov: bool = False, numerics: Numerics = PLAIN) -> torch.Tensor:
        """One draw of the L GP values per group, g [G, P, L] (:func:`deepgp.conditional.sample`): the
        points of a group share one inducing draw, and their residual is drawn jointly (``full_cov=True``)
        or per point."""
        H = self._check_input(H)
        m, R = self.q()
        return conditional.sample(self.kernel, self.Z, m, R, H, full_cov, jitter=self.jitter, name=self.name,
                                  numerics=numerics)

    def prior_conditional(self, H: torch.Tensor, full_cov: bool, numerics: Numerics = PLAIN):
        """Aᵀ [G, P, M] and Q ([G, P, P] if full_cov else [G, P]) of g | v ~ N(Aᵀv, Q) at H [G, P, D_in]
        (:func:`deepgp.conditional.prior_conditional`)."""
        return conditional.prior_conditional(self.kernel, self.Z, H, full_cov, jitter=self.jitter, name=self.name,
                                             numerics=numerics)

    def project(self, H: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """The layer's output from its input H [..., D_in] and GP values g [..., L]."""
        if self.P is not None:
            return H @ self.P + g
        if self.W is None:
            return g
        return H[..., : self.output_dim] + g @ self.W.T

    def forward(self, H: torch.Tensor, full_cov: bool = False, numerics: Numerics = PLAIN) -> torch.Tensor:
        """A sample of the layer's output [G, P, output_dim] (inner layers)."""
        return self.project(H, self.sample(H, full_cov, numerics))

    def _check_input(self, H):
        if H.dim() != 3 or H.shape[-1] != self.input_dim:
            raise ValueError(f"{self.name} expects inputs [groups, points, {self.input_dim}], got {tuple(H.shape)}")
        return H

    def extra_repr(self):
        return f"{self.name}: {self.input_dim} -> {self.output_dim}, L={self.num_gps}, M={self.num_inducing}"
