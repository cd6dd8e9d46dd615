"""NKI lowerings of :mod:`trnsparse.ops` (SpMV, SpMM, SDDMM, triangular solves), and the device SpMV seam.

SpGEMM and sparse add, also ops of :mod:`trnsparse.ops`, are in
:mod:`trnsparse._nki.ops_spgemm`. Each function is registered as the ``"nki"``
lowering (which also serves ``"simulator"``) of an
:class:`~trnsci.dispatch.Op` declared next to its public function, with the
same signature as its torch lowering, and
declares what its kernel takes: ``dtypes=``, ``supports=`` (block size,
SBUF plan, autograd) and ``counts=`` (the kernel's closed-form HBM bytes
and instruction counts, shown by plans). Kernels return float32 (PSUM
accumulates in fp32); results are cast once to the input dtype.

Host-side work and why it is there (all proportional to what is stored):

* BSR SpMM / SDDMM: each stored 128x128 tile is transposed (the contraction
  index goes on the partition dim); the block column indices go to the
  kernel as an int32 array and B's rows are gathered on chip by indirect
  DMA. Nothing of A is densified.
* CSR/CSC SpMV / SpMM: the device layout is built once per matrix by
  :mod:`trnsparse.layouts` and cached on it (values and column indices in
  slot order). SpMV and SpMM: column-blocked ELL-128, x read once and
  gathered on chip, A streamed once per panel of 4 columns
  (``csr_spmv_kernel``; 4x narrower column blocks, a second cached layout,
  for more than one column). Only when y's panel cannot stay on chip
  (more than 8192 x 128 / min(N, 4) rows): SELL-128-sigma, B rows gathered
  by indirect DMA (``csr_spmm_kernel``). alpha/beta are applied
  to the kernel's result in torch.
* Symmetric SpMV: S = T + T_strict^T is expanded on the host once and
  cached on the matrix, then runs the CSR SpMV/SpMM kernel (so the kernel
  reads both triangles: about 2x the bytes of one stored triangle).
* Triangular solves (spsv/spsm): every solve turned into a lower one
  (transpose, or reversed unknowns for an upper triangle: B and X flipped
  on the host), the 128 x 128 diagonal tiles inverted on the host in
  float64 once per matrix and cached, the rest as ELL blocks
  (:mod:`trnsparse._nki.ops_tri`).
* SDDMM on a BSR pattern: X is passed transposed ([k, m]) so k is the
  partition dim. On a CSR pattern: the SELL layout of the SpMM kernel, Y
  passed transposed ([n, k]: a column of Y is one row to gather); the
  kernel's slot-ordered result is mapped back to CSR order on the host
  (one gather of nnz entries), alpha/beta applied there.
"""

from __future__ import annotations

import numpy as np
import torch

from trnsci import nki
from trnsparse import arrays, layouts
from trnsparse import formats as _formats
from trnsparse._nki import ops_tri
from trnsparse.formats import CSRMatrix
from trnsparse.kernels.bsr_sddmm import bsr_sddmm_counts, bsr_sddmm_kernel
from trnsparse.kernels.bsr_spmm import bsr_spmm_counts, bsr_spmm_kernel
from trnsparse.kernels.bsr_spmm import fits as bsr_spmm_fits
from trnsparse.kernels.csr_sddmm import csr_sddmm_counts, csr_sddmm_kernel
from trnsparse.kernels.csr_spmm import csr_spmm_counts, csr_spmm_kernel
from trnsparse.kernels.csr_spmv import csr_spmv_counts, csr_spmv_kernel
from trnsparse.kernels.csr_spsv import csr_spsv_counts, csr_spsv_kernel
from trnsparse.ops import BSR_SDDMM, BSR_SPMM, SDDMM, SPMM, SPMV, SPMV_SYMMETRIC, SPSV, _finish, _symmetric_csr

F32 = torch.float32
#: What the kernels take here: float32 (the Tensor Engine has no fp64/complex, so those stay on the
#: torch path; bf16/fp16 matrices reach the other kernels as their cached float32 copy).
KERNEL_DTYPES = (torch.float32,)
TB = 128
LOWP = (torch.bfloat16, torch.float16)
#: The CSR SpMV/SpMM lowering also takes bfloat16/float16: natively in the x-resident kernel (bf16-class
#: replication matmuls, fp32 products and sums), upcast to float32 for the gather kernel.
SPMM_DTYPES = KERNEL_DTYPES + LOWP


class _Uncached:
    """Where a layout is kept for one call when no matrix holds the arrays (the torch operator's call)."""


def _grad(*ts):
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in ts)


def _bsr_spmm_supports(blocks, block_col_indices, block_row_ptrs, shape, block_size, B, owner=None):
    if block_size != TB:
        return f"block_size {block_size}: the kernel takes 128x128 tiles"
    if B.dtype != blocks.dtype:
        return f"B dtype {B.dtype} differs from A's {blocks.dtype}"
    if _grad(blocks, B):
        return "autograd: the kernel has no backward (the torch path is differentiable)"
    if B.numel() == 0:
        return "empty B: nothing to compute"
    if not bsr_spmm_fits(blocks.shape[0], blocks.element_size(), 1 if B.dim() == 1 else B.shape[1]):
        return f"{blocks.shape[0]} stored tiles exceed the kernel's SBUF plan for the index tiles"
    return None


def _bsr_spmm_counts(blocks, block_col_indices, block_row_ptrs, shape, block_size, B, owner=None):
    N = 1 if B.dim() == 1 else B.shape[1]
    return {"kernel": "bsr_spmm_kernel",
            **bsr_spmm_counts(shape[0], shape[1], N, block_col_indices.tolist(), block_row_ptrs.tolist(),
                              blocks.element_size())}


@BSR_SPMM.lowering("nki", dtypes=KERNEL_DTYPES, supports=_bsr_spmm_supports, counts=_bsr_spmm_counts)
def _bsr_spmm_nki(blocks, block_col_indices, block_row_ptrs, shape, block_size, B, owner=None):
    vec = B.dim() == 1
    b = (B[:, None] if vec else B).contiguous()
    blocks_t = blocks.transpose(1, 2).contiguous()
    bcol = block_col_indices.to(torch.int32).reshape(1, -1).contiguous()
    C = nki.run(bsr_spmm_kernel, blocks_t, bcol, b, row_ptrs=tuple(block_row_ptrs.tolist()), M=shape[0],
                cols=tuple(block_col_indices.tolist()), out_dtype=F32)
    C = C.to(B.dtype)
    return C[:, 0] if vec else C


# ----------------------------------------------------------------- CSR SpMV / SpMM (SELL layout)

def _spmm_supports(values, cols, ptrs, shape, x, alpha, y, beta, owner=None):
    if _grad(values, x, y):
        return "autograd: the kernel has no backward (the torch path is differentiable)"
    if shape[0] == 0 or x.numel() == 0:
        return "empty operand: nothing to compute"
    if values.numel() >= 2**31 or shape[1] >= 2**31 - 1:
        return "indices beyond int32"
    m = shape[0]
    # read on the host once per pattern (cached on the matrix): no sync per call on a device
    longest = layouts.cached(owner, "_longest_row", (ptrs,), lambda: int((ptrs[1:m + 1] - ptrs[:m]).max()))
    if longest > layouts.TB * layouts.KMAX:
        return f"a row of {longest} entries: more than 128 x {layouts.KMAX} slots (one slice)"
    return None


def _resident_x(shape, x):
    """y's panel on chip (csr_spmv_kernel): x read once, replicated and gathered on chip; else the
    B-row gather kernel (csr_spmm_kernel)."""
    return -(-shape[0] // layouts.TB) * min(_ncols(x), layouts.RES_NMAX) <= layouts.SMAX


def _spmm_counts(values, cols, ptrs, shape, x, alpha, y, beta, owner=None):
    if _resident_x(shape, x):
        N = _ncols(x)
        st, _ = layouts.ell_layout(owner, values, cols, ptrs, shape, N)
        return {"kernel": "csr_spmv_kernel",
                **csr_spmv_counts(shape[0], shape[1], st.blocks, N, values.element_size())}
    st, _ = layouts.layout(owner, values, cols, ptrs, shape)
    return {"kernel": "csr_spmm_kernel", **csr_spmm_counts(shape[0], _ncols(x), st.nnz, st.slices)}


def _ncols(x):
    return 1 if x.dim() == 1 else x.shape[1]


def _on_device(owner, st, device, tables):
    """The layout ``st``'s index tables (``tables()``, built on the host) on ``device``: uploaded once
    per layout and device and kept on the matrix, so that steady-state calls on a device copy nothing."""
    if device.type == "cpu":
        return tables()
    key = f"_device_tables_{id(st)}"  # st is held by the entry: its id is not reused while it lives
    hit = owner.__dict__.get(key)
    if hit is not None and hit[0] is st and hit[1] == device:
        return hit[2]
    ts = tuple((torch.from_numpy(t) if isinstance(t, np.ndarray) else t).to(device) for t in tables())
    owner.__dict__[key] = (st, device, ts)
    return ts


@SPMV.lowering("nki", dtypes=SPMM_DTYPES, supports=_spmm_supports, counts=_spmm_counts)  # one column
@SPMM.lowering("nki", dtypes=SPMM_DTYPES, supports=_spmm_supports, counts=_spmm_counts)
def _spmm_nki(values, cols, ptrs, shape, x, alpha, y, beta, owner=None):
    if owner is None:  # called as the torch operator (the matrix stays outside): a layout for this call only
        owner = _Uncached()
    vec = x.dim() == 1
    b = (x[:, None] if vec else x).contiguous()
    if _resident_x(shape, x):
        st, sv = layouts.ell_layout(owner, values, cols, ptrs, shape, _ncols(x))
        scols, tg = _on_device(owner, st, b.device, lambda: (
            st.cols, st.target if st.target.numel() else torch.zeros(1, 2, dtype=F32)))
        C = nki.run(csr_spmv_kernel, sv, scols, tg, b, blocks=st.blocks, M=shape[0], out_dtype=F32)
    else:
        st, sv = layouts.layout(owner, values, cols, ptrs, shape)
        scols, orow, rloc = _on_device(owner, st, b.device, lambda: (
            st.cols, st.orow, st.rloc if st.rloc.numel() else torch.zeros(1, dtype=F32)))
        if sv.dtype in LOWP:  # the gather kernel's closed form is for float32 operands
            sv, b = sv.float(), b.float()
        C = nki.run(csr_spmm_kernel, sv, scols, orow, rloc, b, slices=st.slices, out_dtype=F32)
    C = C[:, 0] if vec else C
    if x.dtype in LOWP:  # alpha/beta in float32 too: the result is rounded once
        return _finish(C, alpha, None if y is None else y.float(), beta).to(x.dtype)
    return _finish(C.to(x.dtype), alpha, y, beta)


# ----------------------------------------------------------------- symmetric SpMV: S expanded once, cached

def _symmetric(owner, values, cols, ptrs, n, uplo):
    """S = T + T_strict^T as a CSR matrix, cached on ``owner`` while its arrays are unchanged."""
    return layouts.cached(owner, f"_symmetric_{uplo}", (values, cols, ptrs),
                        lambda: CSRMatrix._make(*_symmetric_csr(values, cols, ptrs, n, uplo), (n, n)))


def _spmv_sym_supports(values, cols, ptrs, n, x, alpha, uplo, owner=None):
    if _grad(values, x):
        return "autograd: the kernel has no backward (the torch path is differentiable)"
    if n == 0 or x.numel() == 0:
        return "empty operand: nothing to compute"
    S = _symmetric(owner, values, cols, ptrs, n, uplo)
    return _spmm_supports(S.values, S.col_indices, S.row_ptrs, (n, n), x, alpha, None, 0, S)


def _spmv_sym_counts(values, cols, ptrs, n, x, alpha, uplo, owner=None):
    S = _symmetric(owner, values, cols, ptrs, n, uplo)
    return _spmm_counts(S.values, S.col_indices, S.row_ptrs, (n, n), x, alpha, None, 0, S)


@SPMV_SYMMETRIC.lowering("nki", dtypes=KERNEL_DTYPES, supports=_spmv_sym_supports, counts=_spmv_sym_counts)
def _spmv_sym_nki(values, cols, ptrs, n, x, alpha, uplo, owner=None):
    S = _symmetric(owner, values, cols, ptrs, n, uplo)
    return _spmm_nki(S.values, S.col_indices, S.row_ptrs, (n, n), x, alpha, None, 0, S)


# ----------------------------------------------------------------- triangular solves (block triangular)

def _tri_layout(owner, values, cols, ptrs, n, lower, unit, trans):
    key = f"_tri_{int(lower)}{int(unit)}{int(trans)}"
    return layouts.cached(owner, key, (values, cols, ptrs),
                        lambda: ops_tri.build(values, cols, ptrs, n, lower, unit, trans))


def _spsv_supports(values, cols, ptrs, n, B, lower, unit, trans, owner=None):
    if _grad(values, B):
        return "autograd: the kernel has no backward (the torch path is differentiable)"
    if n == 0 or B.numel() == 0:
        return "empty operand: nothing to compute"
    st = _tri_layout(owner, values, cols, ptrs, n, lower, unit, trans)
    widest = max((b[1] for b in st.blocks), default=0)
    if widest > ops_tri.WMAX:
        return (f"a row with {widest} entries left of its diagonal tile: more than {ops_tri.WMAX} slots "
                "(the kernel's SBUF plan)")
    return None


def _spsv_counts(values, cols, ptrs, n, B, lower, unit, trans, owner=None):
    st = _tri_layout(owner, values, cols, ptrs, n, lower, unit, trans)
    return {"kernel": "csr_spsv_kernel", **csr_spsv_counts(n, _ncols(B), st.nnz_off, st.blocks)}


@SPSV.lowering("nki", dtypes=KERNEL_DTYPES, supports=_spsv_supports, counts=_spsv_counts)
def _spsv_nki(values, cols, ptrs, n, B, lower, unit, trans, owner=None):
    st = _tri_layout(owner, values, cols, ptrs, n, lower, unit, trans)
    vec = B.dim() == 1
    b = B[:, None] if vec else B
    if st.upper:  # an upper solve is the lower solve of the reversed unknowns
        b = b.flip(0)
    X = nki.run(csr_spsv_kernel, st.linv_t, st.vals, st.cols, b.contiguous(), blocks=st.blocks, out_dtype=F32)
    if st.upper:
        X = X.flip(0)
    X = X.to(B.dtype)
    return X[:, 0] if vec else X


# ----------------------------------------------------------------- SDDMM on a CSR pattern

def _sddmm_supports(cols, ptrs, values, X, Y, alpha, beta, owner=None):
    if _grad(values, X, Y):
        return "autograd: the kernel has no backward (the torch path is differentiable)"
    if cols.numel() == 0 or X.shape[1] == 0:
        return "no stored entry or k = 0: nothing to compute"
    if isinstance(alpha, complex) or isinstance(beta, complex):
        return "complex alpha/beta with real data"
    m = X.shape[0]
    longest = int((ptrs[1:m + 1] - ptrs[:m]).max())
    if longest > layouts.TB * layouts.KMAX:
        return f"a row of {longest} entries: more than 128 x {layouts.KMAX} slots (one slice)"
    return None


def _sddmm_layout(owner, cols, ptrs, X, Y):
    if owner is None:  # SpMM's backward (or the torch operator): a layout for this call only
        owner = _Uncached()
    st = layouts.structure(owner, cols, ptrs, (X.shape[0], Y.shape[1]))
    prow = layouts.cached(owner, "_sell_prow", (cols, ptrs), lambda: layouts.partition_rows(st))
    return st, prow


def _sddmm_counts(cols, ptrs, values, X, Y, alpha, beta, owner=None):
    st, _ = _sddmm_layout(owner, cols, ptrs, X, Y)
    return {"kernel": "csr_sddmm_kernel", **csr_sddmm_counts(X.shape[1], st.nnz, st.slices)}


@SDDMM.lowering("nki", dtypes=KERNEL_DTYPES, supports=_sddmm_supports, counts=_sddmm_counts)
def _sddmm_nki(cols, ptrs, values, X, Y, alpha, beta, owner=None):
    st, prow = _sddmm_layout(owner, cols, ptrs, X, Y)
    out = nki.run(csr_sddmm_kernel, st.cols, prow, X.contiguous(), Y.mT.contiguous(), slices=st.slices,
                  out_dtype=F32)
    out = out[st.pos.to(out.device)]  # slot order -> CSR order (a gather of nnz entries)
    if alpha != 1:
        out = out.mul_(alpha)
    if beta != 0:
        out = out.add_(values, alpha=beta)
    return out.to(values.dtype)


# ----------------------------------------------------------------- SDDMM on a BSR pattern

def _bsr_sddmm_supports(blocks, block_col_indices, block_row_ptrs, shape, block_size, X, Y, alpha, beta):
    if block_size != TB:
        return f"block_size {block_size}: the kernel takes 128x128 tiles"
    if _grad(blocks, X, Y):
        return "autograd: the kernel has no backward (the torch path is differentiable)"
    if blocks.shape[0] == 0 or X.shape[1] == 0:
        return "no stored tile or k = 0: nothing to compute"
    if isinstance(alpha, complex) or isinstance(beta, complex):
        return "complex alpha/beta with real data"
    return None


def _bsr_sddmm_counts(blocks, block_col_indices, block_row_ptrs, shape, block_size, X, Y, alpha, beta):
    return {"kernel": "bsr_sddmm_kernel",
            **bsr_sddmm_counts(shape[0], shape[1], X.shape[1], block_row_ptrs.tolist(),
                               block_col_indices.tolist())}


@BSR_SDDMM.lowering("nki", dtypes=KERNEL_DTYPES, supports=_bsr_sddmm_supports, counts=_bsr_sddmm_counts)
def _bsr_sddmm_nki(blocks, block_col_indices, block_row_ptrs, shape, block_size, X, Y, alpha, beta):
    P = nki.run(bsr_sddmm_kernel, X.mT.contiguous(), Y.contiguous(), row_ptrs=tuple(block_row_ptrs.tolist()),
                cols=tuple(block_col_indices.tolist()), out_dtype=F32)
    if alpha != 1:
        P = P.mul_(alpha)
    if beta != 0:
        P = P.add_(blocks, alpha=beta)
    return P.to(blocks.dtype)


# ----------------------------------------------------------------- the SpMV seam for iterative solvers

class DeviceSpMV:
    """``y = A p`` on the device for a square float32 CSR ``A``, as an iterative solver launches it:
    ``run(p)`` takes and returns ``[n, 1]`` float32 (one :func:`csr_spmv_kernel` launch on the
    layout cached on ``A``), ``counts()`` is that launch's closed form. Returned by
    :meth:`trnsparse.CSRMatrix.__trnsci_spmv__`; trnsolver's CG uses it without importing trnsparse."""

    kernel = "csr_spmv_kernel"

    def __init__(self, A):
        self._A = A
        self.n = A.shape[0]

    def _layout(self):
        """The layout cached on ``A`` -- keyed on the same index tensors ``spmv`` uses (int32 host
        copies when SciPy may run), so the solver and ``spmv`` on ``A`` share one entry."""
        A = self._A
        cols, ptrs = A._host_indices() if arrays.host_ok(A.values) else (A.col_indices, A.row_ptrs)
        return layouts.ell_layout(A, A.values, cols, ptrs, A.shape, 1)

    def run(self, p):
        st, sv = self._layout()
        tg = st.target if st.target.numel() else torch.zeros(1, 2, dtype=F32)
        return nki.run(csr_spmv_kernel, sv, st.cols, tg, p, blocks=st.blocks, M=self.n, out_dtype=F32)

    def counts(self):
        st, _ = self._layout()
        return {"kernel": self.kernel, **csr_spmv_counts(self.n, self.n, st.blocks, 1, 4)}


def device_spmv(A):
    """A :class:`DeviceSpMV` for ``A``, or a string saying why ``A`` has none."""
    m, n = A.shape
    if m != n:
        return f"A is {m} x {n}, not square"
    if A.values.dtype != F32:
        return f"A is {str(A.values.dtype).replace('torch.', '')}, the device SpMV seam takes float32"
    if A.values.requires_grad:
        return "autograd: the kernel has no backward"
    if n == 0:
        return "empty matrix"
    probe = torch.zeros(n, 1, dtype=F32)
    why = _spmm_supports(A.values, A.col_indices, A.row_ptrs, A.shape, probe, 1.0, None, 0.0, A)
    if why is None and not _resident_x(A.shape, probe):
        why = f"n = {n}: y does not fit on chip for csr_spmv_kernel"
    return why if why is not None else DeviceSpMV(A)


_formats._OPERATIONS["device_spmv"] = device_spmv  # CSRMatrix.__trnsci_spmv__
