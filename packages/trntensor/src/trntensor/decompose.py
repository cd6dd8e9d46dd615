"""Tensor decompositions: CP (ALS), Tucker (HOSVD / HOOI), tensor train (TT-SVD).

All heavy steps are GEMMs on unfoldings (mode-n matricizations, C order:
``unfold(T, n) = T.moveaxis(n, 0).reshape(T.shape[n], -1)``); the
Khatri-Rao product is one broadcast multiply per factor, no loop over rank.
"""

from __future__ import annotations

import math

import torch

from trnsci import validate
from trnsci.dispatch import Op

__all__ = ["cp_decompose", "cp_reconstruct", "tucker_decompose", "tucker_reconstruct", "tt_decompose",
           "tt_reconstruct"]

_DTYPES = (torch.float32, torch.float64)
_METHOD = validate.Options({"hooi": ("hooi",), "hosvd": ("hosvd",)})


def _unfold(T, n):
    return T.moveaxis(n, 0).reshape(T.shape[n], -1)


def _gemm(A, B):
    """``A @ B`` (2-D): through :func:`trnblas.gemm` where trnblas could run its GEMM kernel (its backend
    ``"nki"``/``"simulator"``, or ``"auto"`` on a NeuronCore above the size einsum uses) -- the rule of
    einsum's GEMM steps (:func:`trntensor.plan.via_trnblas`) -- else torch's matmul."""
    from . import plan as P

    if P.via_trnblas(2 * A.shape[0] * A.shape[1] * B.shape[1], A.dtype, False):
        import trnblas

        return trnblas.gemm(1.0, A, B)
    return A @ B


def _via_trnsolver(dtype) -> bool:
    """Whether an SVD/QR/pinv step goes through trnsolver's public functions -- einsum's rule for trnblas
    (:func:`trntensor.plan.via_trnblas`) applied to trnsolver: only where trnsolver could pick one of its
    kernels, i.e. float32 (its kernels' only dtype) under trnsolver's backend ``"nki"``/``"simulator"``, or
    ``"auto"`` on a machine with a NeuronCore (trnsolver's own threshold then decides). Otherwise the step
    calls torch.linalg itself: no validation or dispatch overhead on the host path."""
    from trnsci import dispatch

    return dtype == torch.float32 and dispatch.kernels_possible("trnsolver")


def _svd(M):
    """Thin ``(U, S, Vh)`` of a 2-D matrix: :func:`trnsolver.svd` (one-sided Jacobi kernel while
    ``min(m, n) <= 128``; past that trnsolver's plan says why and it runs torch) by :func:`_via_trnsolver`,
    else torch.linalg.svd."""
    if _via_trnsolver(M.dtype):
        import trnsolver  # trntensor -> trnsolver: imported only where a step needs it

        # the tensor was checked finite on entry; trnsolver's kernel route re-checks anyway (its supports)
        return trnsolver.svd(M.contiguous(), full_matrices=False, check_finite=False)
    return torch.linalg.svd(M, full_matrices=False)


def _complete(U, r):
    """``U`` (m, k) with orthonormal columns, extended to ``r > k`` orthonormal columns by the complete Q
    of ``U`` (:func:`trnsolver.qr` by :func:`_via_trnsolver`, blocked Householder on the device): its
    columns past ``k`` span the orthogonal complement of ``U``'s range."""
    if _via_trnsolver(U.dtype):
        import trnsolver

        Q = trnsolver.qr(U.contiguous(), mode="complete")[0]
    else:
        Q = torch.linalg.qr(U, mode="complete")[0]
    return torch.cat([U, Q[:, U.shape[1]:r]], 1)


def _pinv_sym(G):
    """Pseudo-inverse of the (symmetric PSD) ALS normal matrix: :func:`trnsolver.pinv` by
    :func:`_via_trnsolver` (SVD kernel, then the GEMM kernel), else torch.linalg.pinv (hermitian).
    Both cut singular values below ``max(m, n) eps sigma_max``."""
    if _via_trnsolver(G.dtype):
        import trnsolver

        return trnsolver.pinv(G.contiguous(), check_finite=False)
    return torch.linalg.pinv(G, hermitian=True)


def _solver_plans(dtype, svds=(), qrs=(), pinvs=()) -> list:
    """``(what, m, n, plan)`` of each distinct SVD/QR/pinv step shape, by trnsolver's own plan of it --
    what :func:`_svd`/:func:`_complete`/:func:`_pinv_sym` will run; ``[]`` when the steps call
    torch.linalg (:func:`_via_trnsolver`). The plans see a zero-filled stand-in of each shape (an
    expanded scalar: no matrix is allocated)."""
    if not (svds or qrs or pinvs) or not _via_trnsolver(dtype):
        return []
    from trnsolver.factor import PINV, QR, SVD

    out = []
    for what, op, shapes, extra in (("svd", SVD, svds, (False,)), ("qr", QR, qrs, ("complete",)),
                                    ("pinv", PINV, pinvs, (None,))):
        for m, n in dict.fromkeys(tuple(s) for s in shapes):
            out.append((what, m, n, op.plan(torch.zeros((), dtype=dtype).expand(m, n), *extra)))
    return out


def _solver_steps(dtype, svds=(), qrs=(), pinvs=()) -> str:
    """The SVD/QR/pinv steps of a decomposition in words, each with the lowering trnsolver's own plan
    picks for it (and, for torch, its reason). ``svds``/``qrs``/``pinvs``: the distinct 2-D shapes of
    those steps."""
    if not (svds or qrs or pinvs):
        return ""
    if not _via_trnsolver(dtype):
        return "SVD/QR/pinv steps: torch.linalg (trnsolver could pick no kernel: " + (
            "float32 only)" if dtype != torch.float32 else "its backend runs torch here)")
    parts = [f"{what} {m}x{n}: " + (p.backend if p.backend != "torch" else f"torch ({p.reason})")
             for what, m, n, p in _solver_plans(dtype, svds, qrs, pinvs)]
    return "trnsolver steps: " + " | ".join(parts)


def _gemm_steps(dtype, flops) -> list:
    """trnblas's plan of a GEMM step when :func:`_gemm` sends it through trnblas (``[]`` when it runs
    torch's matmul itself): the kernel's name and backend do not depend on the step's shape."""
    from . import plan as P

    if not P.via_trnblas(flops, dtype, False):
        return []
    from trnblas.level3 import GEMM

    A = torch.empty((1, 1), dtype=dtype, device="meta")
    return [GEMM.plan(1.0, A, A, 0.0, None, "N", "N")]


def _cp_steps(T, rank, max_iter, tol, seed, nonneg, init):
    """The init SVDs, then the MTTKRP GEMMs and (ALS) the pinv of the normal matrix, in that order."""
    solver = [p for _, _, _, p in _solver_plans(T.dtype, _unfold_shapes(T.shape) if init is None else [])]
    pinv = [] if nonneg else [p for _, _, _, p in _solver_plans(T.dtype, pinvs=[(rank, rank)])]
    return solver + _gemm_steps(T.dtype, 2.0 * T.numel() * rank) + pinv


def _tucker_steps(T, ranks, method, max_iter, tol):
    """The SVDs (and QR completions) of the factors, then the mode products (GEMMs)."""
    svds = _unfold_shapes(T.shape)
    if method == "hooi":
        R = math.prod(ranks)
        svds = svds + [(i, R // r) for i, r in zip(T.shape, ranks)]
    qrs = [(m, min(m, n)) for (m, n), r in zip(svds, list(ranks) * 2) if r > min(m, n)]
    plans = [p for _, _, _, p in _solver_plans(T.dtype, svds, qrs)]
    return plans + _gemm_steps(T.dtype, 2.0 * T.numel() * ranks[0])


def _tt_steps(T, max_rank, tol):
    """One SVD per core but the last; no GEMM."""
    shape = list(T.shape)
    svds, r = [], 1
    for n in range(len(shape) - 1):
        right = math.prod(shape[n + 1:])
        svds.append((r * shape[n], right))
        r = min(r * shape[n], right) if max_rank is None else min(r * shape[n], right, max_rank)
    return [p for _, _, _, p in _solver_plans(T.dtype, svds)]


def _unfold_shapes(shape):
    N = math.prod(shape)
    return [(i, N // i) for i in shape]


def _cp_describe(T, rank, max_iter, tol, seed, nonneg, init):
    svds = _unfold_shapes(T.shape) if init is None else []
    steps = _solver_steps(T.dtype, svds, pinvs=[] if nonneg else [(rank, rank)])
    return f"{tuple(T.shape)} rank {rank}" + (f"; {steps}" if steps else "")


def _tucker_describe(T, ranks, method, max_iter, tol):
    svds = _unfold_shapes(T.shape)
    if method == "hooi":
        R = math.prod(ranks)
        svds = svds + [(i, R // r) for i, r in zip(T.shape, ranks)]
    qrs = [(m, min(m, n)) for (m, n), r in zip(svds, list(ranks) * 2) if r > min(m, n)]
    return f"{tuple(T.shape)} ranks {tuple(ranks)} {method}; " + _solver_steps(T.dtype, svds, qrs)


def _tt_describe(T, max_rank, tol):
    """TT-SVD's step ``n`` factors an ``(r_{n-1} I_n, I_{n+1}...)`` matrix; ``r_{n-1}`` depends on the
    data, so the shapes are the largest possible (the exact ranks' bound, capped by ``max_rank``)."""
    shape = list(T.shape)
    svds, r = [], 1
    for n in range(len(shape) - 1):
        right = math.prod(shape[n + 1:])
        svds.append((r * shape[n], right))
        r = min(r * shape[n], right) if max_rank is None else min(r * shape[n], right, max_rank)
    return f"{tuple(T.shape)} (shapes at most: ranks depend on the data); " + _solver_steps(T.dtype, svds)


def _mode_dot(T, M, n):
    """``T x_n M``: contracts mode ``n`` of ``T`` with the columns of ``M`` (J, I_n): one GEMM
    ``M @ unfold(T, n)``, folded back."""
    rest = [T.shape[k] for k in range(T.dim()) if k != n]
    return _gemm(M, _unfold(T, n)).reshape(M.shape[0], *rest).moveaxis(0, n)


def _khatri_rao(mats):
    """Column-wise Kronecker product of (I_k, R) matrices, first matrix slowest."""
    R = mats[0].shape[1]
    out = mats[0]
    for M in mats[1:]:
        out = (out[:, None, :] * M[None, :, :]).reshape(-1, R)
    return out


def _tensor(T, where, min_dim=2):
    T = validate.tensor(T, "tensor", where)
    validate.dtype(T, "tensor", _DTYPES, where)
    if T.dim() < min_dim:
        raise ValueError(f"{where}: tensor must have at least {min_dim} dimensions, got shape {tuple(T.shape)}")
    if T.numel() == 0:
        raise ValueError(f"{where}: tensor is empty (shape {tuple(T.shape)})")
    if not bool(torch.isfinite(T).all()):
        raise ValueError(f"{where}: tensor holds NaN or Inf")
    return T


# ------------------------------------------------------------------ Ops
# One Op per public function, metric "elements" (of the full tensor, input or result). None has an
# NKI kernel of its own (their GEMMs -- MTTKRP, mode products, reconstructions -- go through trnblas's
# kernels by einsum's rule, see _gemm; their SVD/QR/pinv steps through trnsolver's by the same rule, see
# _via_trnsolver), so the thresholds are never consulted;
# 2^20 elements is a placeholder, uncalibrated: there is no hardware here.

def _numel(shape):
    return math.prod(shape)


def _first(x):
    return x[0] if isinstance(x, (list, tuple)) else x


def _rank_fake(bound=None):
    """A data-dependent rank under fake tensors (an unbacked size, at most ``bound``)."""
    ctx = torch.library.get_ctx()
    return ctx.new_dynamic_size(min=1) if bound is None else ctx.new_dynamic_size(min=1, max=bound)


def _cp_fake(T, rank, max_iter, tol, seed, nonneg, init):
    factors = [T.new_empty((n, rank)) for n in T.shape]
    return factors, T.new_empty((rank,)), torch.library.get_ctx().new_dynamic_size(min=0, max=max(max_iter, 0))


def _tucker_fake(T, ranks, method, max_iter, tol):
    return T.new_empty(tuple(ranks)), [T.new_empty((n, r)) for n, r in zip(T.shape, ranks)]


def _tt_fake(T, max_rank, tol):
    cores, r = [], 1
    for k, n in enumerate(T.shape):
        nxt = 1 if k == T.dim() - 1 else _rank_fake(max_rank)
        cores.append(T.new_empty((r, n, nxt)))
        r = nxt
    return cores


# The decompositions cross the operator boundary with their seed as a string (the public seed range is
# [-2^63, 2^64), wider than a schema int) and the warm start as a list.
CP = Op("trntensor.cp_decompose", "elements", 2**20, size=lambda T, *a: T.numel(), describe=_cp_describe,
        steps=_cp_steps, doc="CP-ALS of a dense tensor; elements of the input",
        schema="(Tensor T, int rank, int max_iter, float tol, str seed, bool nonneg, Tensor[]? init) "
               "-> (Tensor[], Tensor, SymInt)",
        fake=_cp_fake)
CP.boundary(lambda T, rank, max_iter, tol, seed, nonneg, init: (
                T, rank, max_iter, tol, str(seed), nonneg, None if init is None else list(init)),
            lambda T, rank, max_iter, tol, seed, nonneg, init: (
                T, rank, max_iter, tol, int(seed), nonneg, None if init is None else list(init)))
CP_RECONSTRUCT = Op("trntensor.cp_reconstruct", "elements", 2**20,
                    size=lambda fs, w: _numel(f.shape[0] for f in fs), dtype=lambda fs, w: fs[0].dtype,
                    steps=lambda fs, w: _gemm_steps(fs[0].dtype, 2.0 * _numel(f.shape[0] for f in fs) * w.numel())
                    if len(fs) > 1 else [],
                    doc="full tensor of CP factors; elements of the result",
                    schema="(Tensor[] factors, Tensor weights) -> Tensor",
                    fake=lambda fs, w: fs[0].new_empty(tuple(f.shape[0] for f in fs)))
TUCKER = Op("trntensor.tucker_decompose", "elements", 2**20, size=lambda T, *a: T.numel(), describe=_tucker_describe,
            steps=_tucker_steps, doc="HOSVD/HOOI Tucker decomposition; elements of the input",
            schema="(Tensor T, int[] ranks, str method, int max_iter, float tol) -> (Tensor, Tensor[])",
            fake=_tucker_fake)
TUCKER_RECONSTRUCT = Op("trntensor.tucker_reconstruct", "elements", 2**20,
                        size=lambda G, Us: _numel(U.shape[0] for U in Us) if Us else G.numel(),
                        steps=lambda G, Us: _gemm_steps(G.dtype, 2.0 * G.numel() * Us[0].shape[0]) if Us else [],
                        doc="full tensor of a Tucker core and factors; elements of the result",
                        schema="(Tensor core, Tensor[] factors) -> Tensor",
                        fake=lambda G, Us: G.new_empty(tuple(U.shape[0] for U in Us)))
TT = Op("trntensor.tt_decompose", "elements", 2**20, size=lambda T, *a: T.numel(), describe=_tt_describe,
        steps=_tt_steps, doc="TT-SVD; elements of the input",
        schema="(Tensor T, int? max_rank, float? tol) -> Tensor[]", fake=_tt_fake)
TT_RECONSTRUCT = Op("trntensor.tt_reconstruct", "elements", 2**20,
                    size=lambda cs: _numel(c.shape[1] for c in cs), dtype=lambda cs: _first(cs).dtype,
                    steps=lambda cs: _gemm_steps(_first(cs).dtype, 2.0 * _numel(c.shape[1] for c in cs))
                    if len(cs) > 1 else [],
                    doc="full tensor of TT cores; elements of the result",
                    schema="(Tensor[] cores) -> Tensor",
                    fake=lambda cs: cs[0].new_empty(tuple(c.shape[1] for c in cs)))
for _op in (CP, TUCKER, TT):
    _op.not_differentiable("an iterative or truncated factorization; differentiate its reconstruction instead")


# ------------------------------------------------------------------ CP

def _cp_init(T, rank, seed):
    """Leading left singular vectors of each unfolding (random columns past a mode's size)."""
    generator = torch.Generator().manual_seed(seed)
    factors = []
    for n in range(T.dim()):
        U = _svd(_unfold(T, n))[0]
        if U.shape[1] < rank:
            extra = torch.randn(T.shape[n], rank - U.shape[1], generator=generator, dtype=torch.float64)
            U = torch.cat([U, extra.to(device=T.device, dtype=T.dtype)], 1)
        factors.append(U[:, :rank].clone())
    return factors


def _gram_product(grams, n):
    """Hadamard product of every Gram matrix but mode ``n``'s: the ALS normal matrix."""
    G = torch.ones_like(grams[0])
    for k, g in enumerate(grams):
        if k != n:
            G = G * g
    return G


#: Floor of non-negative factor entries: multiplicative updates cannot leave an exact zero.
_NN_FLOOR = 1e-12


@CP.lowering("torch")
def _cp_torch(T, rank, max_iter, tol, seed, nonneg, init):
    """CP-ALS (or, ``nonneg``, multiplicative updates); returns ``(factors, weights, n_iter)``.

    ``init``: warm-start factors (already validated and copied) or None.
    Non-negative updates (Lee and Seung's rule applied per mode):
    ``F <- F * [T_(n) KR]_+ / (F G)`` with ``G`` the Hadamard product of the
    other modes' Gram matrices; factors stay >= a tiny floor.
    """
    d = T.dim()
    if init is not None:
        factors = init
    elif nonneg:
        factors = [F.abs() + _NN_FLOOR for F in _cp_init(T, rank, seed)]  # |singular vectors|: a positive start
    else:
        factors = _cp_init(T, rank, seed)
    weights = torch.ones(rank, dtype=T.dtype, device=T.device)
    if nonneg:  # weights folded into the factors while iterating; split out at the end
        factors = [F.clamp(min=_NN_FLOOR) for F in factors]
    normT = torch.linalg.norm(T)
    prev = math.inf
    grams = [F.mT @ F for F in factors]
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 -- the sweep count is returned
        for n in range(d):
            others = [factors[k] for k in range(d) if k != n]
            G = _gram_product(grams, n)
            mttkrp = _gemm(_unfold(T, n), _khatri_rao(others))  # MTTKRP: one GEMM
            if nonneg:
                F = factors[n] * mttkrp.clamp(min=0) / (factors[n] @ G).clamp(min=_NN_FLOOR)
                F = F.clamp(min=_NN_FLOOR)
            else:
                F = _gemm(mttkrp, _pinv_sym(G))
                weights = torch.linalg.norm(F, dim=0)
                F = F / torch.where(weights > 0, weights, torch.ones_like(weights))
            factors[n] = F
            grams[n] = F.mT @ F
        if nonneg:
            X = _gemm(factors[0], _khatri_rao(factors[1:]).mT).reshape(T.shape)
        else:
            X = _gemm(factors[0] * weights, _khatri_rao(factors[1:]).mT).reshape(T.shape)
        err = float(torch.linalg.norm(T - X) / normT)
        if err < tol or prev - err < tol * 1e-3:
            break
        prev = err
    if nonneg:  # unit-norm columns, the scale in the weights (as the ALS path returns them)
        weights = torch.ones(rank, dtype=T.dtype, device=T.device)
        for n in range(d):
            norms = torch.linalg.norm(factors[n], dim=0)
            factors[n] = factors[n] / norms
            weights = weights * norms
    return factors, weights, it


def _warm_start(factors, T, rank, where):
    if not isinstance(factors, (list, tuple)):
        raise TypeError(f"{where}: factors must be a list of matrices (one per mode), got {type(factors).__name__}")
    if len(factors) != T.dim():
        raise ValueError(f"{where}: factors has {len(factors)} matrices but tensor has {T.dim()} modes")
    out = []
    for k, F in enumerate(factors):
        F = validate.tensor(F, f"factors[{k}]", where)
        validate.dtype(F, f"factors[{k}]", _DTYPES, where)
        if tuple(F.shape) != (T.shape[k], rank):
            raise ValueError(f"{where}: factors[{k}] has shape {tuple(F.shape)}, expected ({T.shape[k]}, {rank})")
        if not bool(torch.isfinite(F).all()):
            raise ValueError(f"{where}: factors[{k}] holds NaN or Inf")
        out.append(F.detach().to(device=T.device, dtype=T.dtype).clone())  # never the caller's tensors
    return out


def cp_decompose(tensor, rank, max_iter=100, tol=1e-6, nonneg=False, factors=None, *, seed=0):
    """CP (CANDECOMP/PARAFAC) decomposition by alternating least squares.

    ``T[i, j, k, ...] ~ sum_r w[r] A0[i, r] A1[j, r] A2[k, r] ...``

    Parameters
    ----------
    tensor : tensor, at least 2-D, float32 or float64
    rank : int >= 1
    max_iter : int
        Sweeps at most.
    tol : float
        Stop once the relative error ``||T - X|| / ||T||`` drops below
        ``tol`` or stops improving.
    nonneg : bool
        Non-negative factors (and weights), by multiplicative updates
        (Lee-Seung, per mode) instead of ALS; negative entries of ``T``
        cannot be matched (the numerator is clipped at zero). Converges
        more slowly than ALS: give it more sweeps.
    factors : list of tensors (I_n, rank), optional
        Warm start, one matrix per mode (copied, never modified); replaces
        the SVD initialization. With ``nonneg`` entries are clipped to a
        tiny positive floor first.
    seed : int
        Seeds the random columns used when ``rank`` exceeds a mode's size
        (initialization is otherwise the leading singular vectors; their
        absolute values for ``nonneg``).

    Returns
    -------
    factors : list of tensors (I_n, rank)
        Unit-norm columns.
    weights : tensor (rank,)

    Raises
    ------
    TypeError, ValueError
        Wrong types, empty or non-finite tensors, ``rank < 1``, warm-start
        factors of the wrong number or shape.

    Examples
    --------
    >>> import torch, trntensor
    >>> g = torch.Generator().manual_seed(0)
    >>> A, B, C = (torch.randn(n, 2, generator=g, dtype=torch.float64) for n in (4, 5, 6))
    >>> T = torch.einsum("ir,jr,kr->ijk", A, B, C)
    >>> f, w = trntensor.cp_decompose(T, 2, max_iter=500, tol=1e-12)
    >>> bool(torch.linalg.norm(trntensor.cp_reconstruct(f, w) - T) < 1e-8 * torch.linalg.norm(T))
    True
    >>> f, w = trntensor.cp_decompose(T.abs(), 2, nonneg=True)
    >>> all(bool((F >= 0).all()) for F in f) and bool((w >= 0).all())
    True
    """
    where = "cp_decompose"
    T = _tensor(tensor, where)
    rank = validate.integer(rank, "rank", where, minimum=1, maximum=validate.INDEX_MAX)
    max_iter = validate.integer(max_iter, "max_iter", where, minimum=1, maximum=validate.INDEX_MAX)
    tol = validate.scalar(tol, "tol", where, complex_ok=False)
    if not tol >= 0:
        raise ValueError(f"{where}: tol must be >= 0, got {tol}")
    if not isinstance(nonneg, bool):
        raise TypeError(f"{where}: nonneg must be a bool, got {type(nonneg).__name__}")
    seed = validate.integer(seed, "seed", where, minimum=-(2**63), maximum=validate.SEED_MAX)
    init = None if factors is None else _warm_start(factors, T, rank, where)
    factors, weights, _ = CP(T, rank, max_iter, tol, seed, nonneg, init)
    return factors, weights


def cp_reconstruct(factors, weights=None):
    """The full tensor ``sum_r w[r] A0[:, r] o A1[:, r] o ...`` of CP factors.

    Parameters
    ----------
    factors : list of tensors (I_n, R)
    weights : tensor (R,), optional (ones)

    Returns
    -------
    tensor (I_0, I_1, ...)

    Examples
    --------
    >>> import torch, trntensor
    >>> trntensor.cp_reconstruct([torch.ones(2, 1), torch.ones(3, 1)], torch.tensor([2.0])).tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    """
    where = "cp_reconstruct"
    if not isinstance(factors, (list, tuple)) or not factors:
        raise TypeError(f"{where}: factors must be a non-empty list of matrices")
    fs = [validate.tensor(f, f"factors[{k}]", where) for k, f in enumerate(factors)]
    for k, f in enumerate(fs):
        validate.dtype(f, f"factors[{k}]", _DTYPES, where)
        validate.ndim(f, f"factors[{k}]", 2, where)
        if f.shape[1] != fs[0].shape[1]:
            raise ValueError(f"{where}: factors[{k}] has {f.shape[1]} columns but factors[0] has {fs[0].shape[1]}")
    validate.same_dtype(where, **{f"factors[{k}]": f for k, f in enumerate(fs)})
    R = fs[0].shape[1]
    if weights is None:
        w = torch.ones(R, dtype=fs[0].dtype, device=fs[0].device)
    else:
        w = validate.tensor(weights, "weights", where)
        validate.shape(w, "weights", (R,), where)
        w = w.to(fs[0].dtype)
    return CP_RECONSTRUCT(fs, w)


@CP_RECONSTRUCT.lowering("torch")
def _cp_reconstruct_torch(factors, weights):
    """``sum_r w[r] A0[:, r] o A1[:, r] o ...`` as one GEMM against the Khatri-Rao product."""
    shape = tuple(f.shape[0] for f in factors)
    if len(factors) == 1:
        return factors[0] @ weights
    return _gemm(factors[0] * weights, _khatri_rao(factors[1:]).mT).reshape(shape)


# ------------------------------------------------------------------ Tucker

def _leading(M, r):
    """``r`` orthonormal columns spanning ``M``'s leading left singular space.

    In HOOI the unfolding can have fewer columns than ``r`` (one rank larger
    than the product of the others): the thin SVD then has too few vectors,
    so the full basis is taken and completed by an orthonormal complement
    (those columns meet zeros of the unfolding; the fit is unchanged).
    """
    U = _svd(M)[0]
    return U[:, :r] if r <= U.shape[1] else _complete(U, r)


@TUCKER.lowering("torch")
def _tucker_torch(T, ranks, method, max_iter, tol):
    d = T.dim()
    factors = [_leading(_unfold(T, n), ranks[n]) for n in range(d)]
    if method == "hooi":
        normT = torch.linalg.norm(T)
        prev = None
        for _ in range(max_iter):
            for n in range(d):
                Y = T
                for k in range(d):
                    if k != n:
                        Y = _mode_dot(Y, factors[k].mT, k)
                factors[n] = _leading(_unfold(Y, n), ranks[n])
            core = _mode_dot(Y, factors[d - 1].mT, d - 1)
            fit = float(torch.linalg.norm(core) / normT)
            if prev is not None and abs(fit - prev) < tol:
                break
            prev = fit
    core = T
    for n in range(d):
        core = _mode_dot(core, factors[n].mT, n)
    return core, factors


def tucker_decompose(tensor, ranks, method="hosvd", *, max_iter=50, tol=1e-8):
    """Tucker decomposition ``T ~ G x_0 U0 x_1 U1 ...``.

    Parameters
    ----------
    tensor : tensor, at least 2-D, float32 or float64
    ranks : sequence of int
        Core size per mode, ``1 <= ranks[n] <= tensor.shape[n]``.
    method : {"hosvd", "hooi"}
        ``"hosvd"``: leading left singular vectors of each unfolding.
        ``"hooi"``: higher-order orthogonal iteration from the HOSVD start
        (never a worse fit).
    max_iter, tol
        HOOI sweeps at most, and the change in ``||G|| / ||T||`` that stops it.

    Returns
    -------
    core : tensor of shape ``ranks``
    factors : list of tensors (I_n, ranks[n]) with orthonormal columns

    Examples
    --------
    >>> import torch, trntensor
    >>> T = torch.randn(4, 5, 6, dtype=torch.float64)
    >>> G, U = trntensor.tucker_decompose(T, (4, 5, 6))
    >>> bool(torch.allclose(trntensor.tucker_reconstruct(G, U), T))
    True
    """
    where = "tucker_decompose"
    T = _tensor(tensor, where)
    if not isinstance(ranks, (list, tuple)):
        raise TypeError(f"{where}: ranks must be a sequence of ints, got {type(ranks).__name__}")
    if len(ranks) != T.dim():
        raise ValueError(f"{where}: ranks has {len(ranks)} entries for a {T.dim()}-D tensor")
    ranks = tuple(validate.integer(r, f"ranks[{k}]", where, minimum=1) for k, r in enumerate(ranks))
    for k, (r, n) in enumerate(zip(ranks, T.shape)):
        if r > n:
            raise ValueError(f"{where}: ranks[{k}]={r} exceeds the mode's size {n}")
    method = _METHOD(method, "method", where)
    max_iter = validate.integer(max_iter, "max_iter", where, minimum=1, maximum=validate.INDEX_MAX)
    tol = validate.positive(tol, "tol", where, zero_ok=True)
    return TUCKER(T, ranks, method, max_iter, tol)


def tucker_reconstruct(core, factors):
    """The full tensor ``G x_0 U0 x_1 U1 ...``.

    Examples
    --------
    >>> import torch, trntensor
    >>> trntensor.tucker_reconstruct(torch.ones(1, 1), [torch.ones(2, 1), torch.ones(3, 1)]).shape
    torch.Size([2, 3])
    """
    where = "tucker_reconstruct"
    G = validate.tensor(core, "core", where)
    validate.dtype(G, "core", _DTYPES, where)
    if not isinstance(factors, (list, tuple)) or len(factors) != G.dim():
        raise ValueError(f"{where}: factors must be a list of {G.dim()} matrices (one per core mode)")
    Us = []
    for n, U in enumerate(factors):
        U = validate.tensor(U, f"factors[{n}]", where)
        validate.ndim(U, f"factors[{n}]", 2, where)
        if U.shape[1] != G.shape[n]:
            raise ValueError(f"{where}: factors[{n}] has {U.shape[1]} columns but core mode {n} has size {G.shape[n]}")
        Us.append(U.to(G.dtype))
    return TUCKER_RECONSTRUCT(G, Us)


@TUCKER_RECONSTRUCT.lowering("torch")
def _tucker_reconstruct_torch(core, factors):
    """``G x_0 U0 x_1 U1 ...``: one mode product (GEMM) per mode."""
    X = core
    for n, U in enumerate(factors):
        X = _mode_dot(X, U, n)
    return X


# ------------------------------------------------------------------ tensor train

@TT.lowering("torch")
def _tt_torch(T, max_rank, tol):
    d = T.dim()
    shape = T.shape
    delta = tol * float(torch.linalg.norm(T)) / math.sqrt(max(d - 1, 1)) if tol else 0.0
    cores = []
    r = 1
    M = T.reshape(1, -1)
    for n in range(d - 1):
        M = M.reshape(r * shape[n], -1)
        U, S, Vh = _svd(M)
        # smallest rank whose discarded tail has norm <= delta
        tail = torch.flip(torch.cumsum(torch.flip(S**2, [0]), 0), [0])  # tail[k] = sum_{j>=k} S_j^2
        keep = int((tail > delta**2).sum()) if delta > 0 else int((S > 0).sum())
        keep = max(1, keep)
        if max_rank is not None:
            keep = min(keep, max_rank)
        cores.append(U[:, :keep].reshape(r, shape[n], keep))
        M = S[:keep, None] * Vh[:keep]
        r = keep
    cores.append(M.reshape(r, shape[d - 1], 1))
    return cores


def tt_decompose(tensor, max_rank=None, tol=None):
    """Tensor-train (matrix product state) decomposition by sequential SVDs.

    ``T[i0, i1, ...] ~ G0[0, i0, :] @ G1[:, i1, :] @ ... @ G_{d-1}[:, i_{d-1}, 0]``

    Parameters
    ----------
    tensor : tensor, at least 2-D, float32 or float64
    max_rank : int, optional
        Cap on every TT rank.
    tol : float, optional
        Relative Frobenius error target: each of the ``d - 1`` truncations
        discards at most ``tol ||T|| / sqrt(d - 1)``, so the total relative
        error is at most ``tol`` (before a ``max_rank`` cap). Neither given:
        exact (ranks limited only by numerical zeros).

    Returns
    -------
    list of tensors (r_{n-1}, I_n, r_n), ``r_{-1} = r_{d-1} = 1``

    Examples
    --------
    >>> import torch, trntensor
    >>> T = torch.randn(3, 4, 5, dtype=torch.float64)
    >>> cores = trntensor.tt_decompose(T)
    >>> [tuple(c.shape) for c in cores]
    [(1, 3, 3), (3, 4, 5), (5, 5, 1)]
    >>> bool(torch.allclose(trntensor.tt_reconstruct(cores), T))
    True
    """
    where = "tt_decompose"
    T = _tensor(tensor, where)
    if max_rank is not None:
        max_rank = validate.integer(max_rank, "max_rank", where, minimum=1)
    if tol is not None:
        tol = validate.scalar(tol, "tol", where, complex_ok=False)
        if not tol >= 0:
            raise ValueError(f"{where}: tol must be >= 0, got {tol}")
    return TT(T, max_rank, tol)


def tt_reconstruct(cores):
    """The full tensor of TT cores (see :func:`tt_decompose`).

    Examples
    --------
    >>> import torch, trntensor
    >>> trntensor.tt_reconstruct([torch.ones(1, 2, 1), torch.ones(1, 3, 1)]).shape
    torch.Size([2, 3])
    """
    where = "tt_reconstruct"
    if not isinstance(cores, (list, tuple)) or not cores:
        raise TypeError(f"{where}: cores must be a non-empty list of 3-D tensors")
    cs = [validate.tensor(c, f"cores[{k}]", where) for k, c in enumerate(cores)]
    for k, c in enumerate(cs):
        validate.ndim(c, f"cores[{k}]", 3, where)
        validate.dtype(c, f"cores[{k}]", _DTYPES, where)
        prev = 1 if k == 0 else cs[k - 1].shape[2]
        if c.shape[0] != prev:
            raise ValueError(f"{where}: cores[{k}] has left rank {c.shape[0]} but the previous right rank is {prev}")
    if cs[-1].shape[2] != 1:
        raise ValueError(f"{where}: the last core's right rank must be 1, got {cs[-1].shape[2]}")
    return TT_RECONSTRUCT([c.to(cs[0].dtype) for c in cs])


@TT_RECONSTRUCT.lowering("torch")
def _tt_reconstruct_torch(cores):
    """Left-to-right GEMMs ``(I_0...I_k, r_k) @ (r_k, I_{k+1} r_{k+1})``."""
    X = cores[0].reshape(cores[0].shape[1], cores[0].shape[2])
    shape = [cores[0].shape[1]]
    for c in cores[1:]:
        X = _gemm(X, c.reshape(c.shape[0], -1))
        shape.append(c.shape[1])
        X = X.reshape(-1, c.shape[2])
    return X.reshape(shape)
