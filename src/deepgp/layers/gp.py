"""Sparse variational GP layer (whitened), the building block of every deep GP.

Shapes used throughout: an input batch H is [G, P, D_in]: G *groups*, each of P points that share
one draw of the layer's function (for the importance-weighted bound a group is a data point and
its P = K importance samples; for ordinary VI and for prediction P = 1 or the groups are sample
indices). The layer has L independent GPs sharing one kernel and one set of M inducing inputs.

Conditional (docs/math.md §2), with A = Lz⁻¹ K_ZH and Q = K_HH − AᵀA the prior conditional:
    mean_l = Aᵀ m_l,   cov_l = Q + (R_lᵀA)ᵀ(R_lᵀA).
Sampling draws v_l = m_l + R_l ε once per group and sets g = Aᵀ v + chol(Q) ξ: exactly the same
distribution as mean + chol(cov) ε, but the K×K Cholesky is of Q, shared by the L GPs, and the
O(L·M²) work is per group instead of per point (docs/paper-vs-code.md §7 counts the dense alternative).
"""

from __future__ import annotations

import torch
from torch import nn

from ..kernels import Stationary
from ..linalg import DEFAULT_JITTER, cholesky, gram, inverse_cholesky, matmul_nt, standard_normal


class _MarginalMoments(torch.autograd.Function):
    """The marginal path's products and moments, with a backward written for this machine class.

    Forward: A = Lz⁻¹K [M, n] from Lz⁻¹ [M, M] and K = K(Z, H) [M, n], then R_lᵀA for all L GPs
    (R [L, M, M] must be lower-triangular: the block R_l[:h, h:] is never read, so the result is
    R_lᵀA only when that block is zero); returns mean = Aᵀm [n, L] and ||R_lᵀa_n||² − ||a_n||²
    [n, L] (the variance less k(h, h)).

    R_lᵀA is a triangular product, computed on 2×2 blocks (h = M // 2 rows on top):
        top_l = R_l[:, :h]ᵀ A      [h, n]       bottom_l = R_l[h:, h:]ᵀ A[h:]      [M − h, n]
    each stacked over l into one GEMM: ¾ of the dense FLOPs, forward and backward (the zero block
    R_l[:h, h:] is skipped). The norms sum over rows, so top and bottom need not be re-joined.
    Two products (A, then R_lᵀA) rather than one of [Lz⁻¹; R_lᵀLz⁻¹] with K: forming R_lᵀLz⁻¹
    cost a sixth more FLOPs at B = 512. The backward builds the gradients of A and R_lᵀA in
    contiguous buffers; autograd's graph of the same expression concatenated the split's
    gradients and added the square, expand and multiply passes of each norm.
    """

    @staticmethod
    def forward(ctx, Lz_inv, K, R, m):
        (M, L), n = m.shape, K.shape[-1]
        h = M // 2
        A = Lz_inv @ K
        # copies of R's two lower blocks, transposed and stacked over l: one GEMM each
        top_t = R[:, :, :h].mT.reshape(L * h, M)
        bot_t = R[:, h:, h:].mT.reshape(L * (M - h), M - h)
        top, bot = (top_t @ A).view(L, h, n), (bot_t @ A[h:]).view(L, M - h, n)
        ctx.save_for_backward(Lz_inv, K, top_t, bot_t, m, A, top, bot)
        var = top.square().sum(1) + bot.square().sum(1)  # ||R_lᵀa_n||² [L, n]
        return A.T @ m, var.T - A.square().sum(0).unsqueeze(-1)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_mean, g_var):
        Lz_inv, K, top_t, bot_t, m, A, top, bot = ctx.saved_tensors
        (M, L), n = m.shape, A.shape[-1]
        h = M // 2
        # ∂/∂(R_lᵀA) = 2 R_lᵀA · g_var_l; the scale made contiguous first: broadcasting the
        # transposed [L, n] view over M makes the multiply a strided scalar loop (4× slower)
        scale = (2.0 * g_var.T).contiguous().unsqueeze(1)
        g_top, g_bot = (top * scale).view(L * h, n), (bot * scale).view(L * (M - h), n)
        gA = torch.addmm(m @ g_mean.T, top_t.T, g_top)  # from mean = Aᵀm and from the top blocks
        gA[h:].addmm_(bot_t.T, g_bot)  # from the bottom blocks
        gA.addcmul_(A, g_var.sum(1), value=-2.0)  # from −||a_n||², shared by the L GPs
        gLz_inv = gA @ K.T if ctx.needs_input_grad[0] else None
        gK = Lz_inv.T @ gA if ctx.needs_input_grad[1] else None
        gR = None
        if ctx.needs_input_grad[2]:
            # ∂/∂R_l = A(∂/∂R_lᵀA)ᵀ block by block, each as column blocks of one product: this
            # orientation ran 0.77× the time of (∂/∂R_lᵀA)Aᵀ here (MKL, 1 thread)
            gR = A.new_zeros(L, M, M)
            gR[:, :, :h] = (A @ g_top.T).view(M, L, h).transpose(0, 1)
            gR[:, h:, h:] = (A[h:] @ g_bot.T).view(M - h, L, M - h).transpose(0, 1)
        gm = A @ g_mean if ctx.needs_input_grad[3] else None
        return gLz_inv, gK, gR, gm


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
        # set by natgrad.expectation_parameters: (m, R) as functions of the expectation parameters
        self._q_override: tuple[torch.Tensor, torch.Tensor] | None = None

    # -- variational distribution -------------------------------------------------------------
    def q(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(m [M, L], R [L, M, M] lower-triangular) of the whitened q(v) = N(m, RRᵀ)."""
        if self._q_override is not None:
            return self._q_override
        return self.q_mu, torch.tril(self.q_sqrt)

    def kl(self) -> torch.Tensor:
        """Σ_l KL(N(m_l, R_lR_lᵀ) ‖ N(0, I)) — equal to the unwhitened KL(q(u) ‖ p(u))."""
        m, R = self.q()
        logdet = torch.log(torch.diagonal(R, dim1=-2, dim2=-1).square()).sum()
        return 0.5 * (R.square().sum() + m.square().sum() - self.num_gps * self.num_inducing - logdet)

    # -- the conditional ----------------------------------------------------------------------
    # Layouts: the marginal path keeps A = Lz⁻¹K(Z, H) as [M, GP] and R_lᵀA as two GEMMs over
    # all L GPs, the triangular product's blocks (_MarginalMoments); the joint path keeps Aᵀ as
    # [G, P, M] so per-group products are batched GEMMs on contiguous memory (no permuted copies
    # of [GP, M] tensors in the hot path).
    # Lz⁻¹ is formed explicitly (linalg.inverse_cholesky, an M×M triangular solve per step): a
    # GEMM with it is faster here than a triangular solve with GP right-hand sides.
    # cond(Lz) ≤ ~1e4 with the 1e-6 jitter, harmless in float64.
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
        K(Z, [Z; H]) (K([Z; H], Z)). Two calls dispatched the kernel's ≈ 60 operations (forward and
        backward) twice per layer; one call made the GP-GP-GP VI forward + backward 0.96× at 2
        threads (commit 9d5fb88). In float32 K(Z, Z) is its own float64
        call (:meth:`_Lz_inv`).
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

    def _prior_conditional(self, H: torch.Tensor, full_cov: bool):
        """Aᵀ = K(H, Z)Lz⁻ᵀ [G, P, M] (point-major, for the per-group products of the joint path)
        and Q = k(H, H) − AᵀA: [G, P, P] if full_cov else its diagonal [G, P]."""
        G, P, _ = H.shape
        # K(H, Z) [GP, M] straight from the kernel: forming Aᵀ as K(Z, H)ᵀLz⁻ᵀ would be a GEMM of
        # two transposed operands, 3× slower than this one (measured, 2560×128×128)
        Lz_inv, Khz = self._whiten(H, point_major=True)
        At = (Khz @ Lz_inv.mT).reshape(G, P, -1)
        if full_cov:
            Q = self.kernel.K(H, H) - gram(At)
        else:
            Q = self.kernel.K_diag(H) - At.square().sum(-1)
        return At, Q

    def conditional(self, H: torch.Tensor, full_cov: bool = False):
        """Moments of the L GP values g at H [G, P, D_in] under q.

        Returns mean [G, P, L] and either the marginal variances [G, P, L] or, with
        ``full_cov=True``, the covariance across the P points of each group [G, L, P, P].
        """
        H = self._check_input(H)
        G, P, _ = H.shape
        m, R = self.q()
        L = self.num_gps
        if full_cov:
            At, Q = self._prior_conditional(H, True)
            AtR = (At.reshape(1, G * P, -1) @ R).reshape(L, G, P, -1)  # (R_lᵀA)ᵀ for every GP
            return At @ m, Q.unsqueeze(1) + (AtR @ AtR.mT).transpose(0, 1)
        Lz_inv, Kzx = self._whiten(H)
        mean, var = _MarginalMoments.apply(Lz_inv, Kzx, R, m)
        var = var + self.kernel.K_diag(H).reshape(-1, 1)
        return mean.reshape(G, P, L), var.reshape(G, P, L)

    def sample(self, H: torch.Tensor, full_cov: bool = False) -> torch.Tensor:
        """One draw of the L GP values per group, g [G, P, L].

        With one point per group (P = 1) this is mean + sqrt(var)·ξ. With P > 1 the points of a
        group share one inducing draw v = m + Rε (O(L·M²) per group, O(L·M) per point) and their
        residual N(0, Q) is drawn jointly (K×K Cholesky of Q, ``full_cov=True``: one function
        draw shared by the group) or per point (``full_cov=False``: exact marginals, used for
        prediction where the groups are sample indices).
        """
        H = self._check_input(H)
        G, P, _ = H.shape
        if P == 1:
            mean, var = self.conditional(H)
            return mean + var.clamp_min(1e-12).sqrt() * standard_normal(mean.shape, mean)
        m, R = self.q()
        At, Q = self._prior_conditional(H, full_cov)
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
