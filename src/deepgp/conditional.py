"""The GP conditional: the moments and draws of q(g(h)) = ∫ p(g(h) | v) q(v) dv for one layer's L GPs,
from their whitened inducing values v_l ~ q(v_l) = N(m_l, R_lR_lᵀ) at inducing inputs Z [M, D_in].

Shapes used throughout: an input batch H is [G, P, D_in]: G *groups*, each of P points that share
one draw of the layer's function (for the importance-weighted bound a group is a data point and
its P = K importance samples; for ordinary VI P = 1; for prediction and for the IW bound with
``inner_sampling="batch"`` the groups are sample indices and their points the batch's). The L GPs
share one kernel and one set of M inducing inputs.

Conditional (docs/mathematics.md §2), with Lz the Cholesky factor of K(Z, Z), A = Lz⁻¹ K_ZH and
Q = K_HH − AᵀA the prior conditional:
    mean_l = Aᵀ m_l,   cov_l = Q + (R_lᵀA)ᵀ(R_lᵀA).
Sampling draws v_l = m_l + R_l ε once per group and sets g = Aᵀ v + chol(Q) ξ: exactly the same
distribution as mean + chol(cov) ε, but the K×K Cholesky is of Q, shared by the L GPs, and the
O(L·M²) work is per group instead of per point (docs/paper-vs-code.md §7 counts the dense alternative).

Two forms of the moments, side by side. :func:`moments_plain` is the formula as it reads, in ordinary
torch operations differentiated by autograd: the definition. :func:`moments` (and :func:`sample`),
what the layers call, computes each case in the layout that is fast for it (docs/paper-vs-code.md
§6.3–6.4): the marginal path keeps A as [M, GP] for :func:`marginal_moments`, a triangular block
product with a hand-written backward; the joint path keeps Aᵀ as [G, P, M] for
:func:`joint_moments`, so that per-group products are batched GEMMs on contiguous memory. Lz⁻¹ is
formed explicitly (:func:`deepgp.linalg.inverse_cholesky`): a GEMM with it is faster than a
triangular solve with GP right-hand sides, and cond(Lz) ≤ ~1e4 with the 1e-6 jitter is harmless in
float64. Each fast piece has its own ``*_plain`` form; the tests compare every fast function with
its plain one in float64, values and gradients.
"""

from __future__ import annotations

import torch

from .kernels import Stationary
from .linalg import (
    DEFAULT_JITTER,
    PLAIN,
    Numerics,
    cholesky,
    gram,
    inverse_cholesky,
    matmul_nt,
    narrower,
    standard_normal,
)


# -- the moments, as the formula reads -------------------------------------------------------------
def moments_plain(kernel: Stationary, Z: torch.Tensor, m: torch.Tensor, R: torch.Tensor, H: torch.Tensor,
                  full_cov: bool = False, jitter: float = DEFAULT_JITTER) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`moments` as the formula reads, differentiated by autograd. Per group, A = Lz⁻¹K(Z, H)
    [G, M, P] by a triangular solve, mean = Aᵀm [G, P, L] and cov_l = K_HH − AᵀA + (R_lᵀA)ᵀ(R_lᵀA)
    [G, L, P, P], or (``full_cov=False``) its diagonal [G, P, L]."""
    Lz = cholesky(kernel.K(Z, Z), jitter)
    A = torch.linalg.solve_triangular(Lz, kernel.K(Z, H), upper=False)  # [G, M, P]
    RtA = R.mT @ A.unsqueeze(1)  # [G, L, M, P]
    mean = A.mT @ m
    if full_cov:
        return mean, (kernel.K(H, H) - A.mT @ A).unsqueeze(1) + RtA.mT @ RtA
    Q = kernel.K_diag(H) - A.square().sum(-2)  # [G, P]
    return mean, Q.unsqueeze(-1) + RtA.square().sum(-2).mT


def marginal_moments_plain(
    Lz_inv: torch.Tensor, K: torch.Tensor, R: torch.Tensor, m: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`marginal_moments` as the formula reads (docs/mathematics.md §2.3), differentiated by autograd."""
    A = Lz_inv @ K  # [M, n]
    RtA = R.mT @ A  # [L, M, n]
    return A.T @ m, RtA.square().sum(1).T - A.square().sum(0).unsqueeze(-1)


def joint_moments_plain(At: torch.Tensor, R: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`joint_moments` as the formula reads (docs/mathematics.md §2.2), differentiated by autograd."""
    AtR = At.unsqueeze(1) @ R  # (R_lᵀA)ᵀ [G, L, P, M]
    return At @ m, AtR @ AtR.mT


# -- the moments and draws, fast -------------------------------------------------------------------
def moments(kernel: Stationary, Z: torch.Tensor, m: torch.Tensor, R: torch.Tensor, H: torch.Tensor,
            full_cov: bool = False, *, jitter: float = DEFAULT_JITTER, name: str = "a GP layer",
            numerics: Numerics = PLAIN) -> tuple[torch.Tensor, torch.Tensor]:
    """Moments of the L GP values g at H [G, P, D_in] under q (docs/mathematics.md §2.2):

        A = Lz⁻¹K_ZH,   mean_l = Aᵀm_l,   cov_l = Q + (R_lᵀA)ᵀ(R_lᵀA),   Q = K_HH − AᵀA.

    m [M, L], R [L, M, M] lower-triangular (pass ``tril(...)``: :func:`marginal_moments` never reads
    its upper blocks). Returns mean [G, P, L] and either the marginal variances [G, P, L] or, with
    ``full_cov=True``, the covariance across the P points of each group [G, L, P, P]: the values of
    :func:`moments_plain`. ``jitter``: added to K(Z, Z); ``name``: the layer, in a Cholesky error;
    ``numerics``: how the linear algebra computes (:class:`~deepgp.linalg.Numerics`).
    """
    G, P, _ = H.shape
    if full_cov:
        # Aᵀ [G, P, M], Q = K_HH − AᵀA [G, P, P]
        At, Q = prior_conditional(kernel, Z, H, True, jitter=jitter, name=name, numerics=numerics)
        mean, RtA_gram = joint_moments(At, R, m)  # Aᵀm, (R_lᵀA)ᵀ(R_lᵀA) [G, L, P, P]
        return mean, Q.unsqueeze(1) + RtA_gram
    # A = Lz⁻¹K_ZH is formed by marginal_moments
    Lz_inv, Kzh = whiten(kernel, Z, H, jitter=jitter, name=name, numerics=numerics)
    # Aᵀm, ‖R_lᵀa‖² − ‖a‖² for each column a of A
    mean, var = marginal_moments(Lz_inv, Kzh, R, m, numerics.products_dtype)
    var = var + kernel.K_diag(H).reshape(-1, 1)  # + k(h, h): the diagonal of Q + (R_lᵀA)ᵀ(R_lᵀA)
    return mean.reshape(G, P, m.shape[1]), var.reshape(G, P, m.shape[1])


def sample(kernel: Stationary, Z: torch.Tensor, m: torch.Tensor, R: torch.Tensor, H: torch.Tensor,
           full_cov: bool = False, *, jitter: float = DEFAULT_JITTER, name: str = "a GP layer",
           numerics: Numerics = PLAIN) -> torch.Tensor:
    """One draw of the L GP values per group, g [G, P, L] (the arguments as :func:`moments`').

    With one point per group (P = 1) this is mean + sqrt(var)·ξ. With P > 1 the points of a
    group share one inducing draw v = m + Rε (O(L·M²) per group, O(L·M) per point) and their
    residual N(0, Q) is drawn jointly (K×K Cholesky of Q, ``full_cov=True``: one function
    draw shared by the group) or per point (``full_cov=False``: exact marginals, used for
    prediction and ``inner_sampling="batch"``, where the groups are sample indices).
    """
    G, P, _ = H.shape
    if P == 1:
        mean, var = moments(kernel, Z, m, R, H, jitter=jitter, name=name, numerics=numerics)
        return mean + var.clamp_min(1e-12).sqrt() * standard_normal(mean.shape, mean)
    At, Q = prior_conditional(kernel, Z, H, full_cov, jitter=jitter, name=name, numerics=numerics)
    M = At.shape[-1]
    # v_l = m_l + R_l ε per group, stored transposed [G, L, M] so that g = Aᵀv is a product of
    # two M-contiguous operands (and the transpose copy moves whole rows of M)
    Vt = (standard_normal((m.shape[1], G, M), At) @ R.mT + m.T.unsqueeze(1)).transpose(0, 1).contiguous()
    g = matmul_nt(At, Vt)  # [G, P, L]
    xi = standard_normal(g.shape, g)
    if full_cov:
        # in float64: Q = k − AᵀA cancels, and its K×K factor is cheap (a no-op cast in float64 mode)
        LQ = cholesky(Q.double(), DEFAULT_JITTER, where=f"the joint conditional covariance of {name}",
                      deferred=numerics.deferred)
        LQ = LQ.to(Q.dtype)
        return g + LQ @ xi
    return g + Q.clamp_min(1e-12).sqrt().unsqueeze(-1) * xi


def prior_conditional(kernel: Stationary, Z: torch.Tensor, H: torch.Tensor, full_cov: bool, *,
                      jitter: float = DEFAULT_JITTER, name: str = "a GP layer", numerics: Numerics = PLAIN):
    """The prior conditional at H [G, P, D_in] given whitened inducing values v: g | v ~ N(Aᵀv, Q).
    Returns Aᵀ = K(H, Z)Lz⁻ᵀ [G, P, M] (point-major, for the per-group products of the joint path)
    and Q = k(H, H) − AᵀA: [G, P, P] if full_cov else its diagonal [G, P]."""
    G, P, _ = H.shape
    # K(H, Z) [GP, M] straight from the kernel: Aᵀ as K(Z, H)ᵀLz⁻ᵀ would be a GEMM of two
    # transposed operands, a slow layout
    Lz_inv, Khz = whiten(kernel, Z, H, point_major=True, jitter=jitter, name=name, numerics=numerics)
    At = (Khz @ Lz_inv.mT).reshape(G, P, -1)
    if full_cov:
        Q = kernel.K(H, H) - gram(At)
    else:
        Q = kernel.K_diag(H) - At.square().sum(-1)
    return At, Q


def whiten(kernel: Stationary, Z: torch.Tensor, H: torch.Tensor, point_major: bool = False, *,
           jitter: float = DEFAULT_JITTER, name: str = "a GP layer", numerics: Numerics = PLAIN):
    """Lz⁻¹ [M, M] and K(Z, H) [M, GP] (``point_major``: K(H, Z) [GP, M]) for H [G, P, D_in].

    In float64 one kernel call gives both: K(Z, Z) is the first M columns (rows) of
    K(Z, [Z; H]) (K([Z; H], Z)), so the kernel's operations are dispatched once per layer, not
    twice. In float32 K(Z, Z) is its own float64 call (:func:`inverse_cholesky_zz`).
    """
    Hf = H.reshape(-1, H.shape[-1])
    with_zz = Z.dtype == torch.float64
    X = torch.cat([Z, Hf]) if with_zz else Hf
    K = kernel.K(X, Z) if point_major else kernel.K(Z, X)
    if not with_zz:
        return inverse_cholesky_zz(kernel, Z, jitter=jitter, name=name, numerics=numerics), K
    # split, not two slices: its backward writes both gradients into one buffer in one pass
    Kzz, cross = K.split([Z.shape[0], Hf.shape[0]], dim=0 if point_major else 1)
    return inverse_cholesky_zz(kernel, Z, Kzz, jitter=jitter, name=name, numerics=numerics), cross


def inverse_cholesky_zz(kernel: Stationary, Z: torch.Tensor, Kzz: torch.Tensor | None = None, *,
                        jitter: float = DEFAULT_JITTER, name: str = "a GP layer",
                        numerics: Numerics = PLAIN) -> torch.Tensor:
    """Lz⁻¹ [M, M] (lower-triangular), Lz the Cholesky factor of K(Z, Z) (``Kzz`` where given).

    Always computed in float64 (K(Z, Z) is near-singular for close inducing inputs, and its
    Cholesky is what float32 cannot do reliably), then cast to Z's dtype.
    """
    if Kzz is None:
        Z64 = Z.double()  # the kernel's float32 parameters promote to float64 against it
        Kzz = kernel.K(Z64, Z64)
    where = f"K(Z, Z) of {name}"
    return inverse_cholesky(Kzz, jitter, where=where, deferred=numerics.deferred).to(Z.dtype)


class _MarginalMoments(torch.autograd.Function):
    """:func:`marginal_moments`. R_lᵀA is a triangular product, computed on 2×2 blocks (h = M // 2):

        top_l = R_l[:, :h]ᵀ A      [h, n]       bottom_l = R_l[h:, h:]ᵀ A[h:]      [M − h, n]

    each stacked over l into one GEMM: ¾ of the dense FLOPs, forward and backward (the zero block
    R_l[:h, h:] is skipped). The norms sum over rows, so top and bottom need not be re-joined.
    Two products (A, then R_lᵀA) rather than one of [Lz⁻¹; R_lᵀLz⁻¹] with K: forming R_lᵀLz⁻¹ adds
    FLOPs at training's batch sizes. The backward writes the gradients of A and R_lᵀA into contiguous
    buffers, where autograd's graph concatenates the split's gradients and adds the square,
    expand and multiply passes of each norm (docs/paper-vs-code.md §6.3).
    ``low``: the dtype of the R_lᵀA products, forward and backward (:meth:`Numerics.products_for`); the
    casts are no-ops where it is the inputs' own.
    """

    @staticmethod
    def forward(ctx, Lz_inv, K, R, m, low):
        (M, L), n = m.shape, K.shape[-1]
        h = M // 2
        A = Lz_inv @ K
        A_low = A.to(low)
        # copies of R's two lower blocks, transposed and stacked over l: one GEMM each
        top_t = R[:, :, :h].mT.reshape(L * h, M).to(low)
        bot_t = R[:, h:, h:].mT.reshape(L * (M - h), M - h).to(low)
        top, bot = (top_t @ A_low).view(L, h, n), (bot_t @ A_low[h:]).view(L, M - h, n)
        ctx.save_for_backward(Lz_inv, K, top_t, bot_t, m, A, A_low, top, bot)
        var = (top.square().sum(1) + bot.square().sum(1)).to(m.dtype)  # ||R_lᵀa_n||² [L, n]
        return A.T @ m, var.T - A.square().sum(0).unsqueeze(-1)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_mean, g_var):
        Lz_inv, K, top_t, bot_t, m, A, A_low, top, bot = ctx.saved_tensors
        (M, L), n = m.shape, A.shape[-1]
        h = M // 2
        # ∂/∂(R_lᵀA) = 2 R_lᵀA · g_var_l; the scale made contiguous first: broadcasting the
        # transposed [L, n] view over M would make the multiply a strided scalar loop
        scale = (2.0 * g_var.T).to(top.dtype).contiguous().unsqueeze(1)
        g_top, g_bot = (top * scale).view(L * h, n), (bot * scale).view(L * (M - h), n)
        gA_low = top_t.T @ g_top  # from the top blocks
        gA_low[h:].addmm_(bot_t.T, g_bot)  # from the bottom blocks
        gA = torch.addmm(gA_low.to(A.dtype), m, g_mean.T)  # + from mean = Aᵀm
        gA.addcmul_(A, g_var.sum(1), value=-2.0)  # from −||a_n||², shared by the L GPs
        gLz_inv = gA @ K.T if ctx.needs_input_grad[0] else None
        gK = Lz_inv.T @ gA if ctx.needs_input_grad[1] else None
        gR = None
        if ctx.needs_input_grad[2]:
            # ∂/∂R_l = A(∂/∂R_lᵀA)ᵀ block by block, each as column blocks of one product: the
            # faster GEMM orientation of the two
            gR = A.new_zeros(L, M, M)
            gR[:, :, :h] = (A_low @ g_top.T).view(M, L, h).transpose(0, 1)
            gR[:, h:, h:] = (A_low[h:] @ g_bot.T).view(M - h, L, M - h).transpose(0, 1)
        gm = A @ g_mean if ctx.needs_input_grad[3] else None
        return gLz_inv, gK, gR, gm, None


def marginal_moments(
    Lz_inv: torch.Tensor, K: torch.Tensor, R: torch.Tensor, m: torch.Tensor, products_dtype: torch.dtype | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The marginal conditional's moments less the prior variance: with A = Lz⁻¹K,
    mean = Aᵀm [n, L] and ‖R_lᵀa_n‖² − ‖a_n‖² [n, L] (a_n: the n-th column of A).

    Lz⁻¹ [M, M], K = K(Z, H) [M, n], R [L, M, M] lower-triangular, m [M, L]. The values of
    :func:`marginal_moments_plain`, with a triangular block product and a hand-written backward.
    The block R_l[:M // 2, M // 2:] is never read (the result is R_lᵀA when it is zero, as for any
    lower-triangular R) and its gradient is returned as zero: pass R as ``tril(...)`` (as
    ``GPLayer.q`` does), whose backward drops the strict upper triangle's gradient.

    ``products_dtype`` (:attr:`Numerics.products_dtype`): the dtype of the R_lᵀA products, forward and
    backward, where it is narrower than the inputs'. ‖R_lᵀa‖² is a sum of squares, so its float32 rounding
    is relative to itself (about 10⁻⁶ at M = 128), and it is a nonnegative part of the variance
    k(h, h) − ‖a‖² + ‖R_lᵀa‖², whose cancelling terms stay in the inputs' dtype: the variance is off by at
    most that relative amount.
    """
    return _MarginalMoments.apply(Lz_inv, K, R, m, narrower(products_dtype, m.dtype))


def joint_moments(At: torch.Tensor, R: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The joint conditional's moments less the prior covariance, per group of P points: from
    Aᵀ [G, P, M], R [L, M, M] and m [M, L], the mean Aᵀm [G, P, L] and (R_lᵀA)ᵀ(R_lᵀA) [G, L, P, P].

    The values of :func:`joint_moments_plain`; AᵀR_l is one [GP, M]·[M, M] GEMM per GP over all
    groups instead of G·L small ones.
    """
    G, P, M = At.shape
    AtR = (At.reshape(1, G * P, M) @ R).reshape(R.shape[0], G, P, M)  # (R_lᵀA)ᵀ [L, G, P, M]
    return At @ m, (AtR @ AtR.mT).transpose(0, 1)
