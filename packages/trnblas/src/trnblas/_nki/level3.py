"""NKI lowerings of trnblas's level-3 ops (:mod:`trnblas.level3`), and the GEMM helpers level 2 reuses.

Each function below is registered as the ``"nki"`` lowering (which also
serves ``"simulator"``) of an :class:`~trnsci.dispatch.Op` declared next to
its public function (:mod:`trnblas.level3_gemm`, ``level3_symmetric``, ``level3_triangular``), with the
same signature as its torch lowering, and declares what its kernel takes:
``dtypes=`` (checked against the call's dtype), ``supports=`` (shapes the
kernel's SBUF plan cannot hold) and ``counts=`` (the kernel's closed-form
HBM bytes and instruction counts, shown by plans). The lowering
puts the operands in the layout the kernel expects (contraction dim first,
i.e. on the partition dim), runs the kernel through :func:`trnsci.nki.run`,
and applies alpha, beta, triangles and the dtype on the host. Kernels
return float32 (PSUM accumulates in fp32); the result is cast once to the
input dtype, so bf16 results are rounded once.

Host-side copies and why they are there:

* GEMM/batched GEMM: ``op(A)^T`` ([k, m]) is passed to the kernel, which
  is ``A`` itself for ``transA="T"`` and one transpose pass over ``A``
  for ``"N"``; ``op(B)`` ([k, n]) is ``B`` for ``"N"`` and one transpose for
  ``"T"``. No padding: ragged edges are handled in the kernel. complex64:
  one real GEMM ``[ar ai] @ [[br, bi], [-bi, br]]`` (m x 2n x 2k) on
  host-split parts (:func:`_complex_operands`).
* K larger than one SBUF panel allows (:func:`trnblas.kernels.gemm.max_k`,
  7680 for bf16 / 3840 for fp32) is split into chunks on the host and the
  fp32 partial products added.
* SYRK: ``X = A^T`` for ``trans="N"``; ``X = A`` for ``"T"``.
* TRSM: reduced to a lower, left, no-transpose solve by transposes and
  row/column reversals, unit diagonals set explicitly, and the diagonal
  blocks inverted in float64 (see :mod:`trnblas.kernels.trsm`).
* ``geam``: transposed operands are transposed on the host (one pass each),
  then the axpby kernel (:mod:`trnblas._nki.level1`) reads both once.
  ``dgmm``: its own kernel.
* ``syr2k``: ``op(A)^T`` and ``op(B)^T`` go to :mod:`trnblas.kernels.syr2k`
  (a transpose pass each for ``trans="N"``, none for ``"T"``), which adds
  both products in one PSUM group for the requested triangle's tiles;
  alpha, beta and the other triangle of ``C`` are applied on the host, as
  SYRK. Beyond SBUF: ``[a b] [b a]^T`` through the GEMM kernel.
"""

from __future__ import annotations

import torch

from trnblas import level3 as L3
from trnblas._nki import level3_ozaki as _ozaki
from trnblas._nki.level1 import REAL_VEC_DTYPES, VEC_DTYPES, _lin_counts, _run_lin
from trnblas.kernels.batched_gemm import batched_gemm_kernel
from trnblas.kernels.dgmm import MAX_N as DGMM_MAX_N
from trnblas.kernels.dgmm import dgmm_counts, dgmm_kernel
from trnblas.kernels.dgmm import fits as dgmm_fits
from trnblas.kernels.gemm import gemm_counts, gemm_kernel, max_k
from trnblas.kernels.syr2k import fits as syr2k_fits
from trnblas.kernels.syr2k import syr2k_counts, syr2k_kernel
from trnblas.kernels.syrk import fits as syrk_fits
from trnblas.kernels.syrk import syrk_counts, syrk_kernel
from trnblas.kernels.trsm import MAX_N as TRSM_MAX_N
from trnblas.kernels.trsm import TB as TRSM_BLOCK
from trnblas.kernels.trsm import fits as trsm_fits
from trnblas.kernels.trsm import trsm_counts, trsm_kernel
from trnblas.level3 import BATCHED_GEMM, GEMM, GEMM_EX, SYRK, TRSM
from trnblas.level3_gemm import GEMM_FP64
from trnsci import linalg as la
from trnsci import nki

__all__ = ["gemm_operands", "trsm_operands", "KERNEL_DTYPES"]

F32 = torch.float32
#: What the GEMM, SYRK and MP2 kernels take (the Tensor Engine's fp32 and bf16; no fp64/complex).
KERNEL_DTYPES = (torch.float32, torch.bfloat16)
#: GEMM and batched GEMM also take complex64, as one real GEMM on split parts (see _complex_operands).
GEMM_DTYPES = KERNEL_DTYPES + (torch.complex64,)


def _finish(P, alpha, beta, C, dtype):
    """alpha * P + beta * C in fp32, cast once to ``dtype``."""
    R = P if alpha == 1 else P.mul_(alpha)
    if C is not None and beta != 0:
        R = R.add_(C.to(R.dtype), alpha=beta)
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


def _gemm_figures(m, n, k, itemsize, batch=1, kernel="gemm_kernel"):
    """Closed-form counts of one (batched) GEMM kernel run; None when the host splits K."""
    if k > max_k(itemsize):  # several kernel runs, one per K chunk
        return None
    return {"kernel": kernel, **{key: batch * val for key, val in gemm_counts(m, n, k, itemsize).items()}}


def _gemm_counts(alpha, A, B, beta, C, transA, transB, *rest):
    m, k = la.op_shape(A, transA)
    n = la.op_shape(B, transB)[1]
    size = A.element_size()
    if A.is_complex():  # one real GEMM of m x 2n x 2k on float32 parts
        n, k, size = 2 * n, 2 * k, 4
    if A.dim() == 3:
        return _gemm_figures(m, n, k, size, A.shape[0], "batched_gemm_kernel")
    return _gemm_figures(m, n, k, size)


def _complex_operands(A, B, transA, transB):
    """complex64 ``op(A) op(B)`` as one real GEMM: ``[ar ai] @ [[br, bi], [-bi, br]] = [Re, Im]``.

    Returns (a_t [.., 2k, m], b [.., 2k, 2n]) float32, contiguous. The host
    builds them in one pass over A and two over B; the kernel then reads
    B's parts twice (its HBM bytes are ``4 (4 k n + 2 k m)`` per panel,
    against ``8 (k n + k m)`` for the complex operands themselves).
    """
    a = la.op(A, transA).resolve_conj()
    b = la.op(B, transB).resolve_conj()
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    a_t = torch.cat([ar.mT, ai.mT], dim=-2).contiguous()
    b2 = torch.cat([torch.cat([br, bi], dim=-1), torch.cat([-bi, br], dim=-1)], dim=-2).contiguous()
    return a_t, b2


def _run_any_gemm(kernel, A, B, transA, transB):
    """The fp32 (real) or complex64 product ``op(A) op(B)`` through a GEMM kernel."""
    if not A.is_complex():
        return _run_gemm_kernel(kernel, *gemm_operands(A, B, transA, transB))
    P = _run_gemm_kernel(kernel, *_complex_operands(A, B, transA, transB))
    n = P.shape[-1] // 2
    return torch.complex(P[..., :n], P[..., n:])


def _gemm_kernels(alpha, A, *rest):
    """Where the closed form does not apply (K split on the host): the same kernel, run per K chunk."""
    return ("batched_gemm_kernel",) if A.dim() == 3 else ("gemm_kernel",)


@GEMM.lowering("nki", dtypes=GEMM_DTYPES, counts=_gemm_counts, kernels=_gemm_kernels)
def _gemm_nki(alpha, A, B, beta, C, transA, transB):
    return _finish(_run_any_gemm(gemm_kernel, A, B, transA, transB), alpha, beta, C, A.dtype)


def _fp64_supports(alpha, A, B, beta, C, transA, transB):
    k = la.op_shape(A, transA)[1]
    if k > 2 ** 18:
        return f"precision='fp64' with k={k} > 2^18: slices of 2 bits or fewer (fp64 GEMM on the host instead)"
    return None


def _fp64_counts(alpha, A, B, beta, C, transA, transB):
    """The ``S`` launches of ``gemm_kernel`` (launch ``t``: ``m x (S + 1 - t) n x k``), summed, with the
    slicing; None when the host splits K (k > :func:`max_k`)."""
    m, k = la.op_shape(A, transA)
    n = la.op_shape(B, transB)[1]
    p = _ozaki.plan(k)
    parts = [_gemm_figures(m, (p["slices"] + 1 - t) * n, k, 4) for t in range(1, p["slices"] + 1)]
    if any(f is None for f in parts):
        return None
    total: dict = {"kernel": f"gemm_kernel x {p['launches']} (Ozaki: {p['slices']} slices of "
                             f"{p['slice_bits']} bits, {p['products']} slice products)",
                   "kernels": [f["kernel"] for f in parts]}
    for f in parts:
        for key, val in f.items():
            if key != "kernel":
                total[key] = total.get(key, 0) + val
    return total


@GEMM_FP64.lowering("nki", dtypes=(torch.float64,), supports=_fp64_supports, counts=_fp64_counts,
                   kernels=("gemm_kernel",))
def _gemm_fp64_nki(alpha, A, B, beta, C, transA, transB):
    """float64 ``alpha op(A) op(B) + beta C`` from exact fp32 kernel products of integer slices
    (:mod:`trnblas._nki.level3_ozaki`): launch ``t`` is ``I_t @ [J_1 | ... | J_(S+1-t)]``; the host scales each
    slice product by its power of two and adds them in float64, smallest first."""
    a = la.op(A, transA)
    b = la.op(B, transB)
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):  # NaN/Inf: the float64 GEMM propagates them
        R = a @ b
        return _finish64(R, alpha, beta, C)
    m, k = a.shape
    n = b.shape[1]
    p = _ozaki.plan(k)
    s, S = p["slice_bits"], p["slices"]
    ea, Ia = _ozaki.scaled_slices(a, 1, s, S)
    fb, Jb = _ozaki.scaled_slices(b, 0, s, S)
    parts = []
    for t in range(1, S + 1):
        P = _run_gemm_kernel(gemm_kernel, Ia[t - 1].mT.contiguous(), torch.cat(Jb[:S + 1 - t], dim=1))
        parts.append(P.to(torch.float64))
    R = torch.zeros((m, n), dtype=torch.float64, device=a.device)
    for d in range(S + 1, 1, -1):  # t + u = d, the smallest terms first
        for t in range(max(1, d - S), min(S, d - 1) + 1):
            u = d - t
            R.add_(parts[t - 1][:, (u - 1) * n:u * n], alpha=2.0 ** (-d * s))
    return _finish64(_ozaki.unscale(R, ea, fb), alpha, beta, C)


def _finish64(R, alpha, beta, C):
    if alpha != 1:
        R = R.mul_(alpha)
    if C is not None and beta != 0:
        R = R.add_(C, alpha=beta)
    return R


def _gemm_ex_supports(alpha, A, B, beta, C, transA, transB, compute_dtype):
    if compute_dtype is not torch.float32:
        return f"compute_dtype {str(compute_dtype).replace('torch.', '')}: the kernel accumulates in float32"
    return None


@GEMM_EX.lowering("nki", dtypes=KERNEL_DTYPES, supports=_gemm_ex_supports, counts=_gemm_counts,
                 kernels=_gemm_kernels)
def _gemm_ex_nki(alpha, A, B, beta, C, transA, transB, compute_dtype):
    """bf16 (or fp32) operands straight to the Tensor Engine; the fp32 PSUM result is kept."""
    a_t, b = gemm_operands(A, B, transA, transB)
    return _finish(_run_gemm_kernel(gemm_kernel, a_t, b), alpha, beta, C, compute_dtype)


@BATCHED_GEMM.lowering("nki", dtypes=GEMM_DTYPES, counts=_gemm_counts, kernels=_gemm_kernels)
def _batched_gemm_nki(alpha, A, B, beta, C, transA, transB):
    return _finish(_run_any_gemm(batched_gemm_kernel, A, B, transA, transB), alpha, beta, C, A.dtype)


def _syrk_counts(alpha, A, beta, C, trans, uplo, full=False):
    n, k = la.op_shape(A, trans)
    size = A.element_size()
    if not syrk_fits(k, n, size):
        return _gemm_figures(n, n, k, size)
    return {"kernel": "syrk_kernel", **syrk_counts(n, k, size, uplo == "U")}


@SYRK.lowering("nki", dtypes=KERNEL_DTYPES, counts=_syrk_counts)
def _syrk_nki(alpha, A, beta, C, trans, uplo, full=False):
    X = (A.mT if trans == "N" else A).contiguous()  # [k, n]
    k, n = X.shape
    if syrk_fits(k, n, X.element_size()):
        P = nki.run(syrk_kernel, X, upper=uplo == "U", out_dtype=F32)
    else:  # X does not fit SBUF at once: full product through the GEMM kernel
        P = _run_gemm_kernel(gemm_kernel, X, X)
    R = _finish(P, alpha, beta, C, A.dtype)  # only the uplo triangle is meaningful
    return la.merge_triangle(R, C, uplo, full, False)  # full: mirrored on the host


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
    n = A.shape[0]  # the triangular order (the host reduces every variant to a left solve of this order)
    return None if trsm_fits(n) else f"triangular order {n} exceeds the kernel's SBUF plan (n <= {TRSM_MAX_N})"


def _trsm_counts(alpha, A, B, side, uplo, trans, diag):
    m, n = B.shape
    order, nrhs = (m, n) if side == "L" else (n, m)
    return {"kernel": "trsm_kernel", **trsm_counts(order, nrhs)}


@TRSM.lowering("nki", dtypes=(torch.float32, torch.bfloat16, torch.float16), supports=_trsm_supports,
               counts=_trsm_counts)
def _trsm_nki(alpha, A, B, side, uplo, trans, diag):
    w, r, undo = trsm_operands(alpha, A, B, side, uplo, trans, diag)
    Y = nki.run(trsm_kernel, w, r, out_dtype=F32)
    return undo(Y).to(B.dtype).contiguous()


# ----------------------------------------------------------------- level 3: geam, dgmm, syr2k

def _geam_mats(A, B, tA, tB):
    a = la.op(A, tA).contiguous()  # a transposed operand is one host transpose pass
    b = None if B is None else la.op(B, tB).contiguous()
    return a, b


@L3.GEAM.lowering("nki", dtypes=VEC_DTYPES,
                  counts=lambda al, A, be, B, tA, tB: _lin_counts(A, (al, be, 0.0, 0.0), B is not None, False))
def _geam_nki(alpha, A, beta, B, tA, tB):
    a, b = _geam_mats(A, B, tA, tB)
    R = _run_lin(a.reshape(-1), None if b is None else b.reshape(-1), (alpha, beta, 0.0, 0.0))
    return R.reshape(a.shape)


def _dgmm_supports(A, x, side):
    if A.is_complex():
        return "complex dgmm is not split into real kernels yet"
    if not dgmm_fits(*A.shape, side == "L"):
        return f"side right with n = {A.shape[1]} > {DGMM_MAX_N}: the replicated x row exceeds the SBUF plan"
    return None


@L3.DGMM.lowering("nki", dtypes=REAL_VEC_DTYPES, supports=_dgmm_supports,
                  counts=lambda A, x, side: {"kernel": "dgmm_kernel",
                                             **dgmm_counts(*A.shape, A.element_size(), side == "L")})
def _dgmm_nki(A, x, side):
    return nki.run(dgmm_kernel, A.contiguous(), x.contiguous(), left=side == "L", out_dtype=A.dtype)


def _syr2k_counts(alpha, A, B, beta, C, trans, uplo, full=False):
    n, k = la.op_shape(A, trans)
    size = A.element_size()
    if not syr2k_fits(k, n, size):
        return _gemm_figures(n, n, 2 * k, size)
    return {"kernel": "syr2k_kernel", **syr2k_counts(n, k, size, uplo == "U")}


@L3.SYR2K.lowering("nki", dtypes=KERNEL_DTYPES, counts=_syr2k_counts)
def _syr2k_nki(alpha, A, B, beta, C, trans, uplo, full=False):
    a, b = la.op(A, trans), la.op(B, trans)  # [n, k]
    k, n = a.shape[1], a.shape[0]
    if syr2k_fits(k, n, A.element_size()):  # x = a^T, z = b^T: the kernel adds a b^T + b a^T
        P = nki.run(syr2k_kernel, a.mT.contiguous(), b.mT.contiguous(), upper=uplo == "U", out_dtype=F32)
    else:  # both operands do not fit SBUF: [a b] [b a]^T through the GEMM kernel (depth 2k)
        x = torch.cat([a.mT, b.mT]).contiguous()
        z = torch.cat([b.mT, a.mT]).contiguous()
        P = _run_gemm_kernel(gemm_kernel, x, z)
    R = _finish(P, alpha, beta, C, A.dtype)  # only the uplo triangle is meaningful
    return la.merge_triangle(R, C, uplo, full, False)  # full: mirrored on the host
