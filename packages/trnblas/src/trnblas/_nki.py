"""Host-side NKI lowerings of the level-3 operations.

Each function below is registered as the ``"nki"`` lowering (which also
serves ``"simulator"``) of an :class:`~trnsci.dispatch.Op` from
:mod:`trnblas.level3`, with the same signature as its torch lowering. It
puts the operands in the layout the kernel expects (contraction dim first,
i.e. on the partition dim), runs the kernel through :func:`trnsci.nki.run`,
and applies alpha, beta, triangles and the dtype on the host. Kernels
return float32 (PSUM accumulates in fp32); the result is cast once to the
input dtype, so bf16 results are rounded once.

Host-side copies and why they are there:

* GEMM/batched GEMM: ``op(A)^T`` ([k, m]) is passed to the kernel, which
  is ``A`` itself for ``transA="T"`` and one transpose pass over ``A``
  for ``"N"``; ``op(B)`` ([k, n]) is ``B`` for ``"N"`` and one transpose for
  ``"T"``. No padding: ragged edges are handled in the kernel.
* K larger than one SBUF panel allows (:func:`trnblas.kernels.gemm.max_k`,
  7680 for bf16 / 3840 for fp32) is split into chunks on the host and the
  fp32 partial products added.
* SYRK: ``X = A^T`` for ``trans="N"``; ``X = A`` for ``"T"``.
* TRSM: reduced to a lower, left, no-transpose solve by transposes and
  row/column reversals, unit diagonals set explicitly, and the diagonal
  blocks inverted in float64 (see :mod:`trnblas.kernels.trsm`).
"""

from __future__ import annotations

import torch

from trnblas import _common as c
from trnblas.kernels.batched_gemm import batched_gemm_kernel
from trnblas.kernels.gemm import gemm_kernel, max_k
from trnblas.kernels.syrk import fits as syrk_fits
from trnblas.kernels.syrk import syrk_kernel
from trnblas.kernels.trsm import MAX_N as TRSM_MAX_N
from trnblas.kernels.trsm import TB as TRSM_BLOCK
from trnblas.kernels.trsm import fits as trsm_fits
from trnblas.kernels.trsm import trsm_kernel
from trnblas.level3 import BATCHED_GEMM, GEMM, GEMM_EX, SYRK, TRSM
from trnsci import nki

__all__ = ["gemm_operands", "trsm_operands"]

F32 = torch.float32


def _finish(P, alpha, beta, C, dtype):
    """alpha * P + beta * C in fp32, cast once to ``dtype``."""
    R = P if alpha == 1 else P.mul_(alpha)
    if C is not None and beta != 0:
        R = R.add_(C.to(F32), alpha=beta)
    return R.to(dtype)


def gemm_operands(A, B, transA, transB):
    """(a_t [.., k, m], b [.., k, n]) as the GEMM kernels take them (contiguous)."""
    a_t = A if transA != "N" else A.mT
    b = B if transB == "N" else B.mT
    return a_t.contiguous(), b.contiguous()


def _run_gemm_kernel(kernel, a_t, b):
    """Run a (batched) GEMM kernel, splitting K on the host when it exceeds one SBUF panel."""
    K = a_t.shape[-2]
    kmax = max_k(a_t.element_size())
    if K <= kmax:
        return nki.run(kernel, a_t, b, out_dtype=F32)
    P = None
    for k0 in range(0, K, kmax):
        part = nki.run(kernel, a_t[..., k0:k0 + kmax, :].contiguous(), b[..., k0:k0 + kmax, :].contiguous(),
                       out_dtype=F32)
        P = part if P is None else P.add_(part)
    return P


@GEMM.lowering("nki")
def _gemm_nki(alpha, A, B, beta, C, transA, transB):
    a_t, b = gemm_operands(A, B, transA, transB)
    return _finish(_run_gemm_kernel(gemm_kernel, a_t, b), alpha, beta, C, A.dtype)


@GEMM_EX.lowering("nki")
def _gemm_ex_nki(alpha, A, B, beta, C, transA, transB, compute_dtype):
    """bf16 (or fp32) operands straight to the Tensor Engine; the fp32 PSUM result is kept."""
    a_t, b = gemm_operands(A, B, transA, transB)
    return _finish(_run_gemm_kernel(gemm_kernel, a_t, b), alpha, beta, C, compute_dtype)


@BATCHED_GEMM.lowering("nki")
def _batched_gemm_nki(alpha, A, B, beta, C, transA, transB):
    a_t, b = gemm_operands(A, B, transA, transB)
    return _finish(_run_gemm_kernel(batched_gemm_kernel, a_t, b), alpha, beta, C, A.dtype)


@SYRK.lowering("nki")
def _syrk_nki(alpha, A, beta, C, trans, uplo):
    X = (A.mT if trans == "N" else A).contiguous()  # [k, n]
    k, n = X.shape
    if syrk_fits(k, n, X.element_size()):
        P = nki.run(syrk_kernel, X, upper=uplo == "U", out_dtype=F32)
    else:  # X does not fit SBUF at once: full product through the GEMM kernel
        P = _run_gemm_kernel(gemm_kernel, X, X)
    R = _finish(P, alpha, beta, C, A.dtype)  # only the uplo triangle is meaningful
    return c.merge_triangle(R, C, uplo, False, False)


def trsm_operands(alpha, A, B, side, uplo, trans, diag):
    """Reduce any TRSM to ``L Y = R`` (L lower); returns (w, r, undo) with X = undo(Y).

    ``w`` is the kernel's operand: ``L^T`` with each diagonal block replaced
    by ``inv(L_bb)^T`` (inverted in float64); ``r`` is alpha times the
    right-hand side. Both float32.
    """
    M = A.to(torch.float64)
    upper = uplo == "U"
    if trans != "N":
        M, upper = M.mT, not upper
    if side == "L":
        rhs, transpose_back = B, False
    else:  # X op(A) = alpha B  <=>  op(A)^T X^T = alpha B^T
        M, upper, rhs, transpose_back = M.mT, not upper, B.mT, True
    flip = upper
    if flip:  # P U P is lower for the reversal permutation P
        M = M.flip(0, 1)
        rhs = rhs.flip(0)
    L = M.tril()
    if diag == "U":
        L.diagonal().fill_(1.0)
    n = L.shape[0]
    W = L.mT.contiguous()
    for b0 in range(0, n, TRSM_BLOCK):
        b1 = min(n, b0 + TRSM_BLOCK)
        eye = torch.eye(b1 - b0, dtype=torch.float64, device=L.device)
        inv = torch.linalg.solve_triangular(L[b0:b1, b0:b1], eye, upper=False)
        W[b0:b1, b0:b1] = inv.mT
    r = (rhs.to(torch.float64) * alpha).to(F32).contiguous()

    def undo(Y):
        if flip:
            Y = Y.flip(0)
        return Y.mT if transpose_back else Y

    return W.to(F32), r, undo


def _trsm_supports(alpha, A, B, side, uplo, trans, diag):
    n = A.shape[0]
    return None if trsm_fits(n) else f"triangular order {n} exceeds the kernel's SBUF plan (n <= {TRSM_MAX_N})"


@TRSM.lowering("nki", supports=_trsm_supports)
def _trsm_nki(alpha, A, B, side, uplo, trans, diag):
    w, r, undo = trsm_operands(alpha, A, B, side, uplo, trans, diag)
    Y = nki.run(trsm_kernel, w, r, out_dtype=F32)
    return undo(Y).to(B.dtype).contiguous()
