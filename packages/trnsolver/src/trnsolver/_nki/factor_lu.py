"""LU with partial pivoting on the device, and everything built on it.

Blocked right-looking ``getrf`` (block :data:`NB` = 128 columns). For each
block column ``k`` (rows/cols from ``k0``, ``b`` columns, ``w = n - k0`` rows):

=====  =====================================================  =====================
step   what                                                   launch
=====  =====================================================  =====================
1      factor the panel ``A[k0:, k0:k0+b]`` (transposed),       ``lu_panel_kernel``
       pivot search by ``max8`` / ``nc_find_index8``
2      apply its row interchanges to the other ``n - b``        ``row_gather_kernel``
       columns: gather the ``min(2b, w)`` rows that can move   (when ``n > b``)
3      ``U12 = L11^{-1} A12`` (unit lower, left)                trnblas ``trsm_kernel``
4      ``A22 -= L21 U12``                                       trnblas ``gemm_kernel``
=====  =====================================================  =====================

Steps 3-4 run only while columns remain to the right. Between launches
torch does layout work only, on the operands' device: the panel's
transpose, the column split of step 2 and the write-back of the gathered
rows, and folding the panel's ``b`` pivots into the gather permutation
(``b`` swaps of a device index vector; ``b`` integer swaps for host
tensors). No pivot is read on the host, so on a device the factorization
never synchronizes. trnblas's TRSM inverts its diagonal blocks with torch
as documented in :mod:`trnblas.kernels.trsm`. ``info`` (getrf's first zero
pivot) is computed from ``U``'s diagonal on the device.

Built on it (each a registered Op with this lowering):

* ``lu_solve``: ``P^T`` applied by ``row_gather_kernel``, then two
  ``trsm_kernel`` solves (``L`` unit lower, ``U`` upper); ``trans="T"/"C"``
  solves ``U^T``, ``L^T`` and applies ``P`` by the inverse gather.
* ``solve`` = LU + ``lu_solve``; ``inv`` = ``solve(A, I)``;
  ``slogdet``/``det`` = LU, then the sign and ``sum log|u_ii|`` of the ``n``
  diagonal scalars and the pivots' parity on the host.

Each plan's ``kernel`` entry lists the launches in order (``"kernels"``) and
their summed closed-form HBM bytes and Tensor/Vector instruction counts (the sum over the launches of
:func:`~trnsolver.kernels.lu_panel.lu_panel_counts`,
:func:`~trnsolver.kernels.row_gather.row_gather_counts` and trnblas's
``trsm_counts``/``gemm_counts``); tests hold the emulator's counters of the
runs to it.
"""

from __future__ import annotations

import torch

import trnblas
from trnblas.kernels.gemm import gemm_counts
from trnblas.kernels.trsm import trsm_counts
from trnsci import nki
from trnsci.nki.tiling import tiles
from trnsolver._nki.common import F32, KERNEL_DTYPES, _batch, _Tally, _trnblas, not_finite
from trnsolver.factor import INV, LU, LU_FACTOR, LU_SOLVE, SLOGDET, SOLVE, _zero_pivot
from trnsolver.kernels.lu_panel import MAX_W, lu_panel_counts, lu_panel_kernel
from trnsolver.kernels.row_gather import row_gather_counts, row_gather_kernel

#: Block (panel) width: one partition block.
NB = 128


# ------------------------------------------------------------------ closed forms

def _factor_tally(t: _Tally, n: int):
    for k0, b in tiles(n, NB):
        w = n - k0
        t.add(lu_panel_counts(w, b))
        if n > b:
            t.add(row_gather_counts(min(2 * b, w), n - b))
        rest = n - k0 - b
        if rest:
            t.add({"kernel": "trsm_kernel", **trsm_counts(b, rest)})
            t.add({"kernel": "gemm_kernel", **gemm_counts(rest, rest, b, 4)})


def _solve_tally(t: _Tally, n: int, k: int, trans: str = "N"):
    if trans == "N":  # P^T b, then L, then U
        t.add(row_gather_counts(n, k))
    t.add({"kernel": "trsm_kernel", **trsm_counts(n, k)}, 2)
    if trans != "N":  # U^T, then L^T, then P
        t.add(row_gather_counts(n, k))


def _scaled(t: _Tally, times: int):
    return t.result(times)


# ------------------------------------------------------------------ device paths


def _fold(steps: torch.Tensor, w: int) -> torch.Tensor:
    """LAPACK-style pivots (row j swapped with steps[j], in order) as one permutation of 0..w-1 (int64,
    on the pivots' device): ``(P^T A)[i] = A[perm[i]]``. On the host, ``len(steps)`` integer swaps; on a
    device the same swaps as device index operations, so no pivot is read on the host."""
    if steps.device.type == "cpu":
        perm = list(range(w))
        for j, p in enumerate(steps.tolist()):
            perm[j], perm[p] = perm[p], perm[j]
        return torch.tensor(perm, dtype=torch.int64)
    dev = steps.device
    perm = torch.arange(w, dtype=torch.int64, device=dev)
    pairs = torch.stack([torch.arange(steps.shape[0], dtype=torch.int64, device=dev), steps.to(torch.int64)], 1)
    for pair in pairs.unbind(0):  # swap perm[j] and perm[steps[j]]
        perm[pair] = perm[pair.flip(0)]
    return perm


def _moved_rows(p: torch.Tensor, b: int) -> torch.Tensor:
    """Destination rows a panel's permutation ``p`` (length w) changes, as a fixed-size set:
    the top ``b`` rows, the rows ``i >= b`` with ``p[i] != i`` (at most ``b``, ascending), padded with
    the first unchanged rows to ``min(2 b, w)`` so the launch's figures do not depend on the pivots.
    A stable sort picks them, so the set is built on ``p``'s device without a host read."""
    w = p.shape[0]
    dev = p.device
    rest = torch.arange(b, w, device=dev)
    unchanged = (p[b:] == rest).to(torch.int32)
    first = torch.sort(unchanged, stable=True).indices[:min(b, w - b)]  # the changed rows, then the others
    return torch.cat([torch.arange(b, device=dev), rest[first]]).to(torch.int32)


def _gather(X: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    return nki.run(row_gather_kernel, X.to(F32).contiguous(), perm.to(torch.int32).reshape(-1, 1), out_dtype=F32)


def lu_factor_device(M: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Packed LU of one real ``[n, n]`` matrix by the launches above: ``(LU, ipiv, perm)``, ipiv 0-based
    int64 (LAPACK's), perm the row permutation they fold to (``(P^T A)[i] = A[perm[i]]``), all on ``M``'s
    device; the pivots never leave it."""
    n = M.shape[-1]
    dev = M.device
    W = M.to(F32).clone()
    ipiv = torch.empty(n, dtype=torch.int64, device=dev)
    perm = torch.arange(n, dtype=torch.int64, device=dev)
    for k0, b in tiles(n, NB):
        k1, w = k0 + b, n - k0
        lut, q = nki.run(lu_panel_kernel, W[k0:, k0:k1].T.contiguous(), out_dtype=F32)
        steps = torch.arange(b, device=q.device) + q[:, 0].to(torch.int64)
        ipiv[k0:k1] = k0 + steps
        W[k0:, k0:k1] = lut.T
        p = _fold(steps, w)
        perm[k0:] = perm[k0:][p]
        if n > b:
            cols = torch.cat([torch.arange(0, k0, device=dev), torch.arange(k1, n, device=dev)])
            dst = _moved_rows(p, b).long()
            W[k0 + dst[:, None], cols[None, :]] = _gather(W[k0:, cols], p[dst])
        if k1 < n:
            with _trnblas():
                U12 = trnblas.trsm(1.0, W[k0:k1, k0:k1].contiguous(), W[k0:k1, k1:].contiguous(), side="left",
                                   uplo="lower", diag="unit")
                W[k0:k1, k1:] = U12
                W[k1:, k1:] = trnblas.gemm(-1.0, W[k1:, k0:k1].contiguous(), U12, 1.0, W[k1:, k1:].contiguous())
    return W, ipiv, perm


def lu_solve_device(LU: torch.Tensor, perm: torch.Tensor, B: torch.Tensor, trans: str) -> torch.Tensor:
    """Solve with one packed factor for ``B`` [n, k] by the gather + two TRSM launches; ``perm`` is the
    factor's row permutation (:func:`lu_factor_device`'s, or :func:`_fold` of LAPACK pivots)."""
    n = LU.shape[-1]
    LUf = LU.to(F32).contiguous()
    with _trnblas():
        if trans == "N":
            Y = _gather(B, perm)
            Y = trnblas.trsm(1.0, LUf, Y, side="left", uplo="lower", diag="unit")
            return trnblas.trsm(1.0, LUf, Y, side="left", uplo="upper")
        Y = trnblas.trsm(1.0, LUf, B.to(F32).contiguous(), side="left", uplo="upper", trans="T")
        Y = trnblas.trsm(1.0, LUf, Y, side="left", uplo="lower", trans="T", diag="unit")
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(n, dtype=perm.dtype, device=perm.device)
        return _gather(Y, inv)


def _factor_all(A: torch.Tensor):
    """Factor every matrix of ``A`` [..., n, n]: stacked ``(LU [b, n, n], ipiv [b, n], perm [b, n])``."""
    n = A.shape[-1]
    out = [lu_factor_device(M) for M in A.reshape(-1, n, n)]
    return tuple(torch.stack(x) for x in zip(*out))


# ------------------------------------------------------------------ lowerings


def _square_supports(A, *rest):
    n = A.shape[-1]
    if A.shape[-2] != n:
        return "not square: the blocked kernel path factors square matrices"
    if n == 0 or A.numel() == 0:
        return "empty matrix: nothing to compute"
    if n > MAX_W:
        return f"n={n} exceeds the panel kernel's SBUF plan (n <= {MAX_W})"
    return not_finite(A)


def _lu_factor_counts(A):
    t = _Tally()
    _factor_tally(t, A.shape[-1])
    return _scaled(t, _batch(A))


@LU_FACTOR.lowering("nki", dtypes=KERNEL_DTYPES, supports=_square_supports, counts=_lu_factor_counts)
def _lu_factor_nki(A):
    LU_, ipiv, _ = _factor_all(A)
    LU_ = LU_.reshape(A.shape).to(A.dtype)
    piv = (ipiv + 1).to(torch.int32).reshape(A.shape[:-1])
    return LU_, piv, _zero_pivot(LU_)


@LU.lowering("nki", dtypes=KERNEL_DTYPES, supports=_square_supports, counts=_lu_factor_counts)
def _lu_nki(A):
    LU_, _, perm = _factor_all(A)
    n = A.shape[-1]
    eye = torch.eye(n, dtype=A.dtype, device=A.device)
    P = eye[perm].mT.reshape(A.shape)  # P^T = I[perm]: A = P L U
    LU_ = LU_.reshape(A.shape).to(A.dtype)
    L = LU_.tril(-1) + eye
    return P, L, LU_.triu(), _zero_pivot(LU_)


def _lu_solve_supports(LU_, piv1, B, trans):
    if LU_.is_complex() or B.is_complex():
        return "complex: the kernels are real float32"
    return _square_supports(LU_) or (None if B.shape[-1] else "no right-hand sides")


def _lu_solve_counts(LU_, piv1, B, trans):
    t = _Tally()
    _solve_tally(t, LU_.shape[-1], B.shape[-1], trans)
    return _scaled(t, _batch(LU_, B))


def _pairs(A, B):
    shape = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    n = A.shape[-1]
    As = A.expand(*shape, *A.shape[-2:]).reshape(-1, n, A.shape[-1])
    Bs = B.expand(*shape, *B.shape[-2:]).reshape(-1, *B.shape[-2:])
    return shape, As, Bs


@LU_SOLVE.lowering("nki", dtypes=KERNEL_DTYPES, supports=_lu_solve_supports, counts=_lu_solve_counts)
def _lu_solve_nki(LU_, piv1, B, trans):
    n = LU_.shape[-1]
    shape = torch.broadcast_shapes(LU_.shape[:-2], B.shape[:-2])
    LUs = LU_.expand(*shape, n, n).reshape(-1, n, n)
    Ps = piv1.expand(*shape, n).reshape(-1, n)
    Bs = B.expand(*shape, *B.shape[-2:]).reshape(-1, *B.shape[-2:])
    Xs = [lu_solve_device(L_, _fold(p.long() - 1, n), Bm, trans) for L_, p, Bm in zip(LUs, Ps, Bs)]
    return torch.stack(Xs).reshape(*shape, *B.shape[-2:]).to(B.dtype)


def _solve_supports(A, B):
    return _lu_solve_supports(A, None, B, "N")


def _solve_counts(A, B):
    t = _Tally()
    _factor_tally(t, A.shape[-1])
    _solve_tally(t, A.shape[-1], B.shape[-1])
    return _scaled(t, _batch(A, B))


@SOLVE.lowering("nki", dtypes=KERNEL_DTYPES, supports=_solve_supports, counts=_solve_counts)
def _solve_nki(A, B):
    shape, As, Bs = _pairs(A, B)
    Xs, infos = [], []
    for M, Bm in zip(As, Bs):
        W, _, perm = lu_factor_device(M)
        info = _zero_pivot(W)
        # a singular factor still solves (the result is discarded): deciding on the host would read info
        X = lu_solve_device(W, perm, Bm, "N")
        Xs.append(torch.where(info == 0, X, torch.zeros((), dtype=F32, device=X.device)))
        infos.append(info)
    X = torch.stack(Xs).reshape(*shape, *B.shape[-2:]).to(B.dtype)
    return X, torch.stack(infos).reshape(shape)


def _inv_counts(A):
    return _solve_counts(A, A)


@INV.lowering("nki", dtypes=KERNEL_DTYPES, supports=_square_supports, counts=_inv_counts)
def _inv_nki(A):
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand_as(A)
    return _solve_nki(A, eye)


def _slogdet_counts(A):
    return _lu_factor_counts(A)


@SLOGDET.lowering("nki", dtypes=KERNEL_DTYPES, supports=_square_supports, counts=_slogdet_counts)
def _slogdet_nki(A):
    n = A.shape[-1]
    LU_, ipiv, _ = _factor_all(A)
    d = LU_.diagonal(dim1=-2, dim2=-1).to(torch.float64)
    swaps = (ipiv != torch.arange(n, device=ipiv.device)).sum(-1)  # the pivots' parity, on the device
    sign = (1 - 2 * (swaps % 2)).to(torch.float64) * torch.sign(d).prod(-1)
    logabs = torch.where(sign != 0, d.abs().log().sum(-1), torch.full_like(sign, float("-inf")))
    shape = A.shape[:-2]
    return sign.to(A.dtype).reshape(shape), logabs.to(A.dtype).reshape(shape)


__all__ = ["lu_factor_device", "lu_solve_device", "NB"]
