"""Sparse variational GP layer (whitened), the building block of every deep GP.

Shapes used throughout: an input batch H is [G, P, D_in]: G *groups*, each of P points that share
one draw of the layer's function (for the importance-weighted bound a group is a data point and
its P = K importance samples; for ordinary VI P = 1; for prediction and for the IW bound with
``inner_sampling="batch"`` the groups are sample indices and their points the batch's). The layer
has L independent GPs sharing one kernel and one set of M inducing inputs.

Conditional (docs/mathematics.md §2), with A = Lz⁻¹ K_ZH and Q = K_HH − AᵀA the prior conditional:
    mean_l = Aᵀ m_l,   cov_l = Q + (R_lᵀA)ᵀ(R_lᵀA).
Sampling draws v_l = m_l + R_l ε once per group and sets g = Aᵀ v + chol(Q) ξ: exactly the same
distribution as mean + chol(cov) ε, but the K×K Cholesky is of Q, shared by the L GPs, and the
O(L·M²) work is per group instead of per point (docs/paper-vs-code.md §7 counts the dense alternative).
"""

from __future__ import annotations

import torch
from torch import nn

from ..kernels import Stationary
from ..linalg import (
    DEFAULT_JITTER,
    cholesky,
    gram,
    inverse_cholesky,
    joint_moments,
    marginal_moments,
    matmul_nt,
    standard_normal,
)


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

    # -- the conditional ----------------------------------------------------------------------
    # Each case of the conditional is the formula of docs/mathematics.md §2.2 in the layout that is fast
    # for it (docs/paper-vs-code.md §6.3–6.4): the marginal path keeps A = Lz⁻¹K(Z, H) as [M, GP]
    # for linalg.marginal_moments; the joint path keeps Aᵀ as [G, P, M], so that per-group
    # products are batched GEMMs on contiguous memory. Lz⁻¹ is formed explicitly
    # (linalg.inverse_cholesky): a GEMM with it is faster than a triangular solve with GP
    # right-hand sides, and cond(Lz) ≤ ~1e4 with the 1e-6 jitter is harmless in float64.
    def _Lz_inv(self, Kzz: torch.Tensor | None = None) -> torch.Tensor:
        """Lz⁻¹ [M, M] (lower-triangular), Lz the Cholesky factor of K(Z, Z) (``Kzz`` where given).

        Always computed in float64 (K(Z, Z) is near-singular for close inducing inputs, and its
        Cholesky is what float32 cannot do reliably), then cast to the layer's dtype.
        """
        if Kzz is None:
            Z = self.Z.double()  # the kernel's float32 parameters promote to float64 against it
            Kzz = self.kernel.K(Z, Z)
        return inverse_cholesky(Kzz, self.jitter, where=f"K(Z, Z) of {self.name}").to(self.Z.dtype)

    def _whiten(self, H: torch.Tensor, point_major: bool = False):
        """Lz⁻¹ [M, M] and K(Z, H) [M, GP] (``point_major``: K(H, Z) [GP, M]) for H [G, P, D_in].

        In float64 one kernel call gives both: K(Z, Z) is the first M columns (rows) of
        K(Z, [Z; H]) (K([Z; H], Z)), so the kernel's operations are dispatched once per layer, not
        twice (commit 9d5fb88). In float32 K(Z, Z) is its own float64 call (:meth:`_Lz_inv`).
        """
        Hf = H.reshape(-1, H.shape[-1])
        with_zz = self.Z.dtype == torch.float64
        X = torch.cat([self.Z, Hf]) if with_zz else Hf
        K = self.kernel.K(X, self.Z) if point_major else self.kernel.K(self.Z, X)
        if not with_zz:
            return self._Lz_inv(), K
        # split, not two slices: its backward writes both gradients into one buffer in one pass
        Kzz, cross = K.split([self.num_inducing, Hf.shape[0]], dim=0 if point_major else 1)
        return self._Lz_inv(Kzz), cross

    def prior_conditional(self, H: torch.Tensor, full_cov: bool):
        """The prior conditional of the layer's GPs at H [G, P, D_in] given whitened inducing values v:
        g | v ~ N(Aᵀv, Q). Returns Aᵀ = K(H, Z)Lz⁻ᵀ [G, P, M] (point-major, for the per-group products of
        the joint path) and Q = k(H, H) − AᵀA: [G, P, P] if full_cov else its diagonal [G, P]."""
        G, P, _ = H.shape
        # K(H, Z) [GP, M] straight from the kernel: Aᵀ as K(Z, H)ᵀLz⁻ᵀ would be a GEMM of two
        # transposed operands, a slow layout (commit 30aca33)
        Lz_inv, Khz = self._whiten(H, point_major=True)
        At = (Khz @ Lz_inv.mT).reshape(G, P, -1)
        if full_cov:
            Q = self.kernel.K(H, H) - gram(At)
        else:
            Q = self.kernel.K_diag(H) - At.square().sum(-1)
        return At, Q

    def conditional(self, H: torch.Tensor, full_cov: bool = False):
        """Moments of the L GP values g at H [G, P, D_in] under q (docs/mathematics.md §2.2):

            A = Lz⁻¹K_ZH,   mean_l = Aᵀm_l,   cov_l = Q + (R_lᵀA)ᵀ(R_lᵀA),   Q = K_HH − AᵀA.

        Returns mean [G, P, L] and either the marginal variances [G, P, L] or, with
        ``full_cov=True``, the covariance across the P points of each group [G, L, P, P]. Each
        case computes that formula in its fast layout; the plain versions are
        :func:`~deepgp.linalg.joint_moments_plain` and :func:`~deepgp.linalg.marginal_moments_plain`.
        """
        H = self._check_input(H)
        G, P, _ = H.shape
        m, R = self.q()
        if full_cov:
            At, Q = self.prior_conditional(H, True)  # Aᵀ [G, P, M], Q = K_HH − AᵀA [G, P, P]
            mean, RtA_gram = joint_moments(At, R, m)  # Aᵀm, (R_lᵀA)ᵀ(R_lᵀA) [G, L, P, P]
            return mean, Q.unsqueeze(1) + RtA_gram
        Lz_inv, Kzh = self._whiten(H)  # A = Lz⁻¹K_ZH is formed by marginal_moments
        mean, var = marginal_moments(Lz_inv, Kzh, R, m)  # Aᵀm, ‖R_lᵀa‖² − ‖a‖² for each column a of A
        var = var + self.kernel.K_diag(H).reshape(-1, 1)  # + k(h, h): the diagonal of Q + (R_lᵀA)ᵀ(R_lᵀA)
        return mean.reshape(G, P, self.num_gps), var.reshape(G, P, self.num_gps)

    def sample(self, H: torch.Tensor, full_cov: bool = False) -> torch.Tensor:
        """One draw of the L GP values per group, g [G, P, L].

        With one point per group (P = 1) this is mean + sqrt(var)·ξ. With P > 1 the points of a
        group share one inducing draw v = m + Rε (O(L·M²) per group, O(L·M) per point) and their
        residual N(0, Q) is drawn jointly (K×K Cholesky of Q, ``full_cov=True``: one function
        draw shared by the group) or per point (``full_cov=False``: exact marginals, used for
        prediction and ``inner_sampling="batch"``, where the groups are sample indices).
        """
        H = self._check_input(H)
        G, P, _ = H.shape
        if P == 1:
            mean, var = self.conditional(H)
            return mean + var.clamp_min(1e-12).sqrt() * standard_normal(mean.shape, mean)
        m, R = self.q()
        At, Q = self.prior_conditional(H, full_cov)
        M = At.shape[-1]
        # v_l = m_l + R_l ε per group, stored transposed [G, L, M] so that g = Aᵀv is a product of
        # two M-contiguous operands (and the transpose copy moves whole rows of M)
        Vt = (standard_normal((self.num_gps, G, M), At) @ R.mT + m.T.unsqueeze(1)).transpose(0, 1).contiguous()
        g = matmul_nt(At, Vt)  # [G, P, L]
        xi = standard_normal(g.shape, g)
        if full_cov:
            # in float64: Q = k − AᵀA cancels, and its K×K factor is cheap (a no-op cast in float64 mode)
            LQ = cholesky(Q.double(), DEFAULT_JITTER, where=f"the joint conditional covariance of {self.name}")
            LQ = LQ.to(Q.dtype)
            return g + LQ @ xi
        return g + Q.clamp_min(1e-12).sqrt().unsqueeze(-1) * xi

    def project(self, H: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """The layer's output from its input H [..., D_in] and GP values g [..., L]."""
        if self.P is not None:
            return H @ self.P + g
        if self.W is None:
            return g
        return H[..., : self.output_dim] + g @ self.W.T

    def forward(self, H: torch.Tensor, full_cov: bool = False) -> torch.Tensor:
        """A sample of the layer's output [G, P, output_dim] (inner layers)."""
        return self.project(H, self.sample(H, full_cov))

    def _check_input(self, H):
        if H.dim() != 3 or H.shape[-1] != self.input_dim:
            raise ValueError(f"{self.name} expects inputs [groups, points, {self.input_dim}], got {tuple(H.shape)}")
        return H

    def extra_repr(self):
        return f"{self.name}: {self.input_dim} -> {self.output_dim}, L={self.num_gps}, M={self.num_inducing}"
