"""Blocked Householder QR on the device, compact WY updates on the Tensor Engine.

For each block column (``k0``, ``b <=`` :data:`NB` columns, ``w = m - k0`` rows):

=====  ==============================================================  ==========================
step   what                                                            launch
=====  ==============================================================  ==========================
1      Householder panel ``A[k0:, k0:k0+b]`` (transposed): ``V``, tau     ``qr_panel_kernel``
2      Gram ``S = V^T V`` (``T^{-1} = diag(1/tau) + striu(S)``,          ``gemm_kernel``
       the "UT transform" form of the compact WY factor)
3      trailing ``C = A[k0:, k0+b:]``: ``Wt = V^T C``                     ``gemm_kernel``
4      ``Y = T^T Wt`` as the solve ``T^{-T} Y = Wt``                      ``trsm_kernel``
5      ``C -= V Y``  (``C <- (I - V T^T V^T) C = Q_k^T C``)               ``gemm_kernel``
=====  ==============================================================  ==========================

Steps 3-5 only while columns remain to the right. ``Q`` (modes
``"reduced"``/``"complete"``) is accumulated backwards from the identity,
block by block, with the same three launches per block (``V^T Q``, the
``T^{-1}`` solve, ``Q -= V Y``). Host work between launches: transposes,
``V``'s unit-lower layout, and the ``b x b`` ``T^{-1}`` assembly from ``S``
and the ``b`` taus.

``lstsq`` (float32, ``m >= n``, full column rank) is ``R x = Q^T b``: QR, one
GEMM (``Q^T B``) and one TRSM; the residual sums come from the last ``m - n``
rows of ``Q^T B`` (complete ``Q``). A rank-deficient ``A`` (a diagonal entry
of ``R`` below ``max(m, n) eps32 max|r_ii|``) has no unique QR solution: that
call is answered by the torch lowering (gelsd's minimum-norm solution).
"""

from __future__ import annotations

import torch

import trnblas
from trnblas.kernels.gemm import gemm_counts
from trnblas.kernels.trsm import trsm_counts
from trnsci import nki
from trnsci.nki.tiling import tiles
from trnsolver._nki.common import KERNEL_DTYPES, _batch, _Tally, _trnblas, not_finite
from trnsolver.factor import LSTSQ, QR
from trnsolver.kernels.qr_panel import MAX_W, qr_panel_counts, qr_panel_kernel

F32 = torch.float32
NB = 128
EPS32 = float(torch.finfo(torch.float32).eps)

__all__ = ["qr_device"]


def _gemm(m, n, k):
    return {"kernel": "gemm_kernel", **gemm_counts(m, n, k, 4)}


def _qr_tally(t: _Tally, m: int, n: int, qcols: int):
    k = min(m, n)
    blocks = list(tiles(k, NB))
    for k0, b in blocks:
        w, k1 = m - k0, k0 + b
        t.add(qr_panel_counts(w, b))
        t.add(_gemm(b, b, w))
        if k1 < n:
            t.add(_gemm(b, n - k1, w))
            t.add({"kernel": "trsm_kernel", **trsm_counts(b, n - k1)})
            t.add(_gemm(w, n - k1, b))
    if qcols:  # Q accumulated backwards, block by block
        for k0, b in reversed(blocks):
            w, c = m - k0, qcols - k0
            t.add(_gemm(b, c, w))
            t.add({"kernel": "trsm_kernel", **trsm_counts(b, c)})
            t.add(_gemm(w, c, b))


def _apply(V, Tinv, C, transpose):
    """``C <- (I - V T^T V^T) C`` (transpose) or ``(I - V T V^T) C`` on the GEMM/TRSM kernels."""
    Wt = trnblas.gemm(1.0, V, C, transA=True)
    Y = trnblas.trsm(1.0, Tinv, Wt, side="left", uplo="upper", trans=transpose)
    return trnblas.gemm(-1.0, V, Y, 1.0, C)


def qr_device(M: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """QR of one real ``[m, n]`` matrix by the launches above: ``(Q, R)`` in torch.linalg.qr's shapes."""
    m, n = M.shape
    k = min(m, n)
    W = M.to(F32).clone()
    blocks = []
    with _trnblas():
        for k0, b in tiles(k, NB):
            k1, w = k0 + b, m - k0
            qt, tau = nki.run(qr_panel_kernel, W[k0:, k0:k1].T.contiguous(), out_dtype=F32)
            F = qt.T
            W[k0:, k0:k1] = F
            V = (F.tril(-1) + torch.eye(w, b, dtype=F32, device=F.device)).contiguous()
            S = trnblas.gemm(1.0, V, V, transA=True)
            Tinv = (S.triu(1) + torch.diag(1.0 / tau[:, 0])).contiguous()
            blocks.append((k0, V, Tinv))
            if k1 < n:
                W[k0:, k1:] = _apply(V, Tinv, W[k0:, k1:].contiguous(), True)
        R = W[:k if mode != "complete" else m, :].triu()
        if mode == "r":
            return torch.empty(0, dtype=F32, device=R.device), R
        qcols = k if mode == "reduced" else m
        Q = torch.eye(m, qcols, dtype=F32, device=W.device)
        for k0, V, Tinv in reversed(blocks):
            Q[k0:, k0:] = _apply(V, Tinv, Q[k0:, k0:].contiguous(), False)
    return Q, R


def _qr_supports(A, mode):
    m, n = A.shape[-2:]
    if A.numel() == 0:
        return "empty matrix: nothing to compute"
    if m > MAX_W:
        return f"m={m} exceeds the panel kernel's SBUF plan (m <= {MAX_W})"
    return not_finite(A)


def _qr_counts(A, mode):
    m, n = A.shape[-2:]
    t = _Tally()
    _qr_tally(t, m, n, {"r": 0, "reduced": min(m, n), "complete": m}[mode])
    return t.result(_batch(A))


@QR.lowering("nki", dtypes=KERNEL_DTYPES, supports=_qr_supports, counts=_qr_counts)
def _qr_nki(A, mode):
    m, n = A.shape[-2:]
    Qs, Rs = [], []
    for M in A.reshape(-1, m, n):
        Q, R = qr_device(M, mode)
        Qs.append(Q)
        Rs.append(R)
    R = torch.stack(Rs).reshape(*A.shape[:-2], *Rs[0].shape).to(A.dtype)
    if mode == "r":
        return torch.empty(0, dtype=A.dtype, device=A.device), R
    return torch.stack(Qs).reshape(*A.shape[:-2], *Qs[0].shape).to(A.dtype), R


# ------------------------------------------------------------------ lstsq


def _lstsq_supports(A, B, rcond, driver):
    m, n = A.shape[-2:]
    if B.is_complex():
        return "complex: the kernels are real float32"
    if A.numel() == 0 or B.numel() == 0:
        return "empty matrix: nothing to compute"
    if m < n:
        return f"m={m} < n={n}: the QR path solves overdetermined/square systems only"
    if A.shape[:-2] != B.shape[:-2]:
        return "batch dimensions differ"
    return _qr_supports(A, "complete")


def _lstsq_counts(A, B, rcond, driver):
    m, n = A.shape[-2:]
    t = _Tally()
    _qr_tally(t, m, n, m)
    t.add(_gemm(m, B.shape[-1], m))
    t.add({"kernel": "trsm_kernel", **trsm_counts(n, B.shape[-1])})
    return t.result(_batch(A))


@LSTSQ.lowering("nki", dtypes=KERNEL_DTYPES, supports=_lstsq_supports, counts=_lstsq_counts)
def _lstsq_nki(A, B, rcond, driver):
    m, n = A.shape[-2:]
    Xs, res, ranks = [], [], []
    for M, Bm in zip(A.reshape(-1, m, n), B.reshape(-1, m, B.shape[-1])):
        Q, R = qr_device(M, "complete")
        d = R.diagonal().abs()
        if bool((d <= max(m, n) * EPS32 * d.max()).any()):  # rank-deficient: no unique QR solution
            return LSTSQ.lowering_for("torch").fn(A, B, rcond, driver)
        with _trnblas():
            QtB = trnblas.gemm(1.0, Q, Bm.to(F32).contiguous(), transA=True)
            Xs.append(trnblas.trsm(1.0, R[:n, :n].contiguous(), QtB[:n].contiguous(), side="left", uplo="upper"))
        res.append((QtB[n:] ** 2).sum(0))
        ranks.append(n)
    shape = A.shape[:-2]
    X = torch.stack(Xs).reshape(*shape, n, B.shape[-1]).to(A.dtype)
    residues = torch.stack(res).reshape(*shape, B.shape[-1]).to(A.dtype) if m > n else A.new_zeros(0)
    return X, residues, torch.tensor(ranks, dtype=torch.int64, device=A.device).reshape(shape), A.new_zeros(0)
