"""Sparse products, sums and triangular solves (cuSPARSE / scipy.sparse surface).

Every public function validates its arguments into canonical form and
calls one private ``_<op>_torch`` lowering that does no validation.
Matrices may be any trnsparse format (or a SciPy sparse matrix); dense
operands are torch tensors or NumPy arrays (NumPy in -> NumPy out).

bfloat16 / float16: every product, sum and solve here upcasts its operands
to float32 (exactly), runs the float32 path (kernel or torch; the float32
copy of the matrix is kept on it while its arrays are unchanged) and rounds
the result once to the input dtype. (The x-resident SpMV/SpMM kernel reads
the 2-byte data natively and computes in float32 on chip: the same bound.)
Error bound: the float32 computation's (``~k * 2^-24 * sum |a||x|`` for k
terms; ``cond * 2^-24`` for solves) plus one rounding, ``|r| * 2^-8``
(bfloat16) or ``|r| * 2^-11`` (float16). Integer and bool data are a
TypeError.
"""

from __future__ import annotations

import numpy as np
import torch

from trnsci import linalg as la
from trnsci import precision, validate
from trnsci import routes as _routes
from trnsci.dispatch import Op, torch_only, traceable_as
from trnsci.settled import call, public

from . import _host, arrays
from . import formats as _formats
from .formats import BSRMatrix, COOMatrix, CSCMatrix, CSRMatrix, SparseMatrix, _index_arrays, as_sparse

_UPLO = la.uplo
#: How every product, sum and solve here takes bfloat16/float16 data (see the module docstring): computed in
#: float32 -- the matrix through its kept float32 copy (``SparseMatrix.__trnsci_upcast__``) -- and the
#: result (tensor or matrix) rounded once to the input dtype, by the core (:mod:`trnsci.precision`). The
#: public functions validate first (their messages name the given dtypes), then call a private compute
#: function that carries the declaration.
_in_float32 = precision.computes_in("float32", note=False)


# --------------------------------------------------------------- the SpMV / SpMM Ops

# Thresholds: there is no Trainium here to calibrate them (``trnsci calibrate``
# does that on hardware). They are set so a kernel launch (tens of
# microseconds) is amortized by at least a few full 128x128x512 Tensor
# Engine tiles of work; below that the host path wins.
_TILE_FLOPS = 2 * 128 * 128 * 512


def _ncols(x):
    return 1 if x.dim() == 1 else x.shape[1]


SPMM = Op(
    "trnsparse.spmm", "flops", 8 * _TILE_FLOPS,
    size=lambda values, cols, ptrs, shape, x, *r: 2.0 * values.shape[0] * _ncols(x),
    describe=lambda values, cols, ptrs, shape, x, *r: f"CSR {shape[0]}x{shape[1]} nnz={values.shape[0]} @ "
                                                       f"{_ncols(x)} column(s)",
    doc="alpha * A @ X + beta * Y for a CSR matrix; flops = 2 nnz k",
    # the matrix itself (``owner``, where the kernel keeps its device layout) stays on the host side
    schema="(Tensor values, Tensor col_indices, Tensor row_ptrs, SymInt[] shape, Tensor x, Scalar alpha, "
           "Tensor? y, Scalar beta) -> Tensor",
    fake=lambda values, cols, ptrs, shape, x, alpha, y, beta, owner=None: values.new_empty(
        (shape[0],) if x.dim() == 1 else (shape[0], x.shape[1])),
    half="float32",  # the torch lowering: bf16/fp16 computed in float32, rounded once, by the core
)


SPMV = Op(
    "trnsparse.spmv", "flops", 8 * _TILE_FLOPS,
    size=lambda values, cols, ptrs, shape, x, *r: 2.0 * values.shape[0],
    describe=lambda values, cols, ptrs, shape, x, *r: f"CSR {shape[0]}x{shape[1]} nnz={values.shape[0]} @ vector",
    doc="alpha * A @ x + beta * y for a CSR matrix and a vector (SpMM's lowerings, one column); flops = 2 nnz",
    schema="(Tensor values, Tensor col_indices, Tensor row_ptrs, SymInt[] shape, Tensor x, Scalar alpha, "
           "Tensor? y, Scalar beta) -> Tensor",
    fake=lambda values, cols, ptrs, shape, x, alpha, y, beta, owner=None: values.new_empty((shape[0],)),
    half="float32",  # the torch lowering: bf16/fp16 computed in float32, rounded once, by the core
)


# --------------------------------------------------------------- helpers

def _dense(x, name: str, where: str, dims, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    t = validate.tensor(x, name, where)
    if t.dtype != dtype:
        if t.dtype not in validate.BLAS_DTYPES:
            validate.dtype(t, name, validate.BLAS_DTYPES, where)
        raise TypeError(f"{where}: {name} has dtype {str(t.dtype).replace('torch.', '')} but the matrix has "
                        f"{str(dtype).replace('torch.', '')}; cast them to one dtype")
    validate.ndim(t, name, dims, where)
    if t.device != device:
        raise ValueError(f"{where}: {name} is on {t.device} but the matrix is on {device}")
    return t


def _scalar(x, name: str, where: str, dtype: torch.dtype):
    return validate.scalar(x, name, where, complex_ok=dtype.is_complex)


def _finish(result, alpha, y, beta):
    if alpha != 1:
        result = result * alpha
    if y is not None and beta != 0:
        result = result + beta * y
    return result


# --------------------------------------------------------------- SpMV / SpMM

@SPMV.lowering("torch")
@SPMM.lowering("torch")
def _spmv_torch(values, col_indices, row_ptrs, shape, x, alpha, y, beta, owner=None):
    """y <- alpha * A @ x + beta * y for CSR arrays; x 1-D or 2-D.

    ``owner``: the matrix holding the arrays, where the NKI lowering caches its device layout
    (unused here). bfloat16/float16 calls arrive upcast to float32 (the Ops' ``half="float32"``)."""
    return _finish(_host.spmv(values, col_indices, row_ptrs, shape, x), alpha, y, beta)


_spmm_torch = _spmv_torch  # one lowering serves vectors and column blocks


def _transpose_csr(values, cols, ptrs, shape):
    """The CSR arrays of A^T (values in A^T's order), on the arrays' device."""
    m, n = shape
    # every size here is a shape (nnz, m, n), none read from the data: traceable by torch.compile
    rows = torch.repeat_interleave(torch.arange(m, device=cols.device, dtype=cols.dtype), ptrs[1:] - ptrs[:-1],
                                   output_size=cols.shape[0])
    order = torch.argsort(cols * m + rows, stable=True)
    counts = torch.zeros(n + 1, dtype=ptrs.dtype, device=ptrs.device).index_add_(
        0, cols + 1, torch.ones_like(cols, dtype=ptrs.dtype))
    return values[order], rows[order], torch.cumsum(counts, 0).to(ptrs.dtype)


def _spmm_backward(inputs, output, g, needs):
    """``out = alpha A x + beta y``: dx = conj(alpha) A^H g (one SpMM/SpMV on A^T's arrays), d values =
    conj(alpha) (g x^H) sampled on A's pattern (one SDDMM), dy = conj(beta) g."""
    values, cols, ptrs, shape, x, alpha, y, beta = inputs[:8]
    cplx = values.is_complex()
    ca = alpha.conjugate() if cplx else alpha
    gx = gv = gy = None
    vec = x.dim() == 1
    if needs[4]:
        vt, ct, pt = _transpose_csr(values.conj() if cplx else values, cols, ptrs, shape)
        gx = (SPMV if vec else SPMM)(vt, ct, pt, (shape[1], shape[0]), g.contiguous(), ca, None, 0.0)
    if needs[0]:
        X = g[:, None] if vec else g
        Y = (x.conj() if cplx else x)[None, :] if vec else (x.conj() if cplx else x).mT
        gv = SDDMM(cols, ptrs, values, X.contiguous(), Y.contiguous(), ca, 0.0)
    if y is not None and needs[6]:
        gy = g * (beta.conjugate() if cplx else beta)
    return gv, None, None, None, gx, None, gy, None


_SPMM_GRAD = ("dx = conj(alpha) A^H g; d values = conj(alpha) (g x^H) on A's pattern; dy = conj(beta) g")
SPMM.backward(_spmm_backward, formula=_SPMM_GRAD,
              runs="`trnsparse.spmm` on A^T's arrays and `trnsparse.sddmm`")
SPMV.backward(_spmm_backward, formula=_SPMM_GRAD,
              runs="`trnsparse.spmv` on A^T's arrays and `trnsparse.sddmm`")


def _bsr_flops(blocks, cols, ptrs, shape, b, B, owner=None):
    return 2.0 * blocks.shape[0] * b * b * _ncols(B)


BSR_SPMM = Op(
    "trnsparse.bsr_spmm", "flops", 8 * _TILE_FLOPS, size=_bsr_flops,
    describe=lambda blocks, cols, ptrs, shape, b, B, owner=None: (f"BSR {shape[0]}x{shape[1]} ({blocks.shape[0]} "
                                                                  f"stored {b}x{b} blocks) @ {_ncols(B)} column(s)"),
    doc="A @ B for a BSR matrix, one tile product per stored block; flops = 2 n_blocks b^2 k",
    # the matrix (``owner``, where the row-GEMM route keeps its side-by-side tiles) stays on the host side
    schema="(Tensor blocks, Tensor block_col_indices, Tensor block_row_ptrs, SymInt[] shape, int block_size, "
           "Tensor B) -> Tensor",
    fake=lambda blocks, cols, ptrs, shape, b, B, owner=None: B.new_empty(
        (shape[0],) if B.dim() == 1 else (shape[0], B.shape[1]), dtype=torch.promote_types(blocks.dtype, B.dtype)),
)


@BSR_SPMM.lowering("torch")
def _bsr_spmm_torch(blocks, block_col_indices, block_row_ptrs, shape, block_size, B, owner=None):
    """C = A @ B for BSR arrays: one (b x b) @ (b x k) product per stored tile.

    ``owner``: the BSR matrix holding the arrays, where the row-GEMM route keeps its side-by-side
    form of the tiles (see :func:`_bsr_row_form`)."""
    m, n = shape
    b = block_size
    vec = B.dim() == 1
    if vec:
        B = B[:, None]
    k = B.shape[1]
    mb, nb = -(-m // b), -(-n // b)
    Bp = B
    if nb * b != n:
        Bp = torch.cat([B, B.new_zeros(nb * b - n, k)])
    nblk = blocks.shape[0]
    if k <= 8 and arrays.host_ok(blocks, Bp) and blocks.dtype == B.dtype:
        # few right-hand sides: SciPy's BSR kernel beats a batched GEMM of (b x b) @ (b x k) tiles
        y = np.zeros((mb * b, k), dtype=arrays.np_view(Bp[:0]).dtype)
        arrays.sparsetools.bsr_matvecs(mb, nb, k, b, b, arrays.np_view(block_row_ptrs),
                                       arrays.np_view(block_col_indices), arrays.np_view(blocks).ravel(),
                                       arrays.np_view(Bp).ravel(), y.ravel())
        out = torch.from_numpy(y)[:m]
        return out[:, 0] if vec else out
    route = _bsr_route(blocks, block_col_indices, block_row_ptrs, mb, nb, b, Bp) if nblk else "tiles"
    if route == "row_gemm":
        out = _bsr_row_gemm(blocks, block_col_indices, block_row_ptrs, mb, b, Bp, _bsr_row_form(blocks, owner))[:m]
        return out[:, 0] if vec else out
    if route == "dense":
        out = torch.mm(_bsr_dense_form(blocks, block_col_indices, block_row_ptrs, mb, nb, owner), Bp)[:m]
        return out[:, 0] if vec else out
    return _bsr_tiles(blocks, block_col_indices, block_row_ptrs, m, mb, nb, b, Bp, vec)


def _bsr_tiles(blocks, block_col_indices, block_row_ptrs, m, mb, nb, b, Bp, vec):
    """One batched (b x b) @ (b x k) product per stored tile, summed into block rows by index_add."""
    nblk, k = blocks.shape[0], Bp.shape[1]
    out = torch.zeros(mb, b, k, dtype=torch.promote_types(blocks.dtype, Bp.dtype), device=Bp.device)
    if nblk:
        brow = arrays.row_indices(block_row_ptrs, nblk)
        Bt = Bp.reshape(nb, b, k)
        step = max(1, (1 << 24) // max(1, b * k))  # bound the gathered operand to ~16M entries
        for s in range(0, nblk, step):
            e = min(nblk, s + step)
            out.index_add_(0, brow[s:e], torch.bmm(blocks[s:e], Bt[block_col_indices[s:e]]))
    out = out.reshape(mb * b, k)[:m]
    return out[:, 0] if vec else out


def _bsr_row_form(blocks, owner=None):
    """Every tile side by side, ``(b, n_blocks b)`` (a block row's tiles are a column slice): kept on
    ``owner`` while ``blocks`` is the same, unmodified tensor (as many bytes as the tiles)."""
    def build():
        b = blocks.shape[1]
        return blocks.detach().permute(1, 0, 2).reshape(b, -1)
    if owner is None:
        return build()
    from .layouts import cached

    return cached(owner, "_bsr_row_form", (blocks,), build)


#: The dense form is a route candidate only while it holds at most this many times the tiles' entries
#: (block density >= 1/4): a memory bound, not a speed rule -- which route is faster is measured.
BSR_DENSE_MAX_RATIO = 4


def _bsr_dense_form(blocks, cols, ptrs, mb, nb, owner=None):
    """The matrix as one dense ``(mb b, nb b)`` tensor (zeros outside the tiles): kept on ``owner`` while
    the tiles and their indices are the same, unmodified tensors."""
    def build():
        b = blocks.shape[1]
        D = blocks.new_zeros(mb, nb, b, b)
        D[arrays.row_indices(ptrs, blocks.shape[0]), cols] = blocks.detach()
        return D.permute(0, 2, 1, 3).reshape(mb * b, nb * b)
    if owner is None:
        return build()
    from .layouts import cached

    return cached(owner, "_bsr_dense_form", (blocks, cols, ptrs), build)


def _bsr_row_gemm(blocks, block_col_indices, block_row_ptrs, mb, b, Bp, lhs_all):
    """One GEMM per block row: its tiles side by side, ``(b, t b)``, times the ``t`` gathered
    ``(b, k)`` slabs of B stacked, ``(t b, k)`` -- the sum over the row's tiles happens inside the
    GEMM (a deeper product than a batch of ``b x b x k`` ones). Rows of more than ``step`` tiles are
    summed in pieces, bounding the gathered operand to ~16M entries. No autograd (``out=``)."""
    k = Bp.shape[1]
    Bt = Bp.reshape(-1, b, k)
    ptrs = block_row_ptrs.tolist()
    out = torch.empty(mb * b, k, dtype=Bp.dtype, device=Bp.device)
    step = max(1, _BSR_GATHER // max(1, b * k))
    for i in range(mb):
        s, e = ptrs[i], ptrs[i + 1]
        o = out[i * b:(i + 1) * b]
        if e == s:
            o.zero_()
            continue
        for j in range(s, e, step):
            t = min(e, j + step)
            lhs = lhs_all[:, j * b:t * b]
            rhs = Bt[block_col_indices[j:t]].reshape((t - j) * b, k)
            if j == s:
                torch.mm(lhs, rhs, out=o)
            else:
                o.addmm_(lhs, rhs)
    return out


_BSR_GATHER = 1 << 24  # entries of B gathered at once by the row-GEMM route

#: (shape class, thread count) -> the measured route of a BSR SpMM (trnsci.routes), cleared with them
_bsr_routes = _routes.Memo()
BSR_MEASURE_MIN_FLOPS = 1 << 24  # below this both routes take well under a millisecond: tiles, untimed


def _bsr_route(blocks, cols, ptrs, mb, nb, b, Bp) -> str:
    """"tiles" (the default: one batched product), "row_gemm" or "dense", measured once per shape class.

    Which is faster depends on the BLAS and the block density: the row GEMMs are deeper (fewer,
    larger products) but a Python step per block row; the batch is one call; at high block density
    one GEMM on the dense form (kept on the matrix, a candidate only while it is at most
    :data:`BSR_DENSE_MAX_RATIO` times the tiles' size) does the zero tiles' work too but in one deep
    call. Only on the CPU, same dtypes, no autograd."""
    if (Bp.device.type != "cpu" or blocks.dtype != Bp.dtype
            or torch.is_grad_enabled() and (blocks.requires_grad or Bp.requires_grad)):
        return "tiles"
    nblk, k = blocks.shape[0], Bp.shape[1]
    key = (_host.bucket(mb), _host.bucket(nb), _host.bucket(nblk), _host.bucket(k), b, blocks.dtype,
           torch.get_num_threads())
    hit = _bsr_routes.get(key)
    if hit is not None:
        return hit
    from trnsci import routes

    m = mb * b
    lhs_all = _bsr_row_form(blocks)  # built before the clock, as a matrix keeps it
    cands = {"tiles": lambda: _bsr_tiles(blocks, cols, ptrs, m, mb, nb, b, Bp, False),
             "row_gemm": lambda: _bsr_row_gemm(blocks, cols, ptrs, mb, b, Bp, lhs_all)}
    if nblk * BSR_DENSE_MAX_RATIO >= mb * nb:
        dense: list = []  # built by the untimed warm-up call (a matrix keeps it), and only if timed

        def dense_mm():
            if not dense:
                dense.append(_bsr_dense_form(blocks, cols, ptrs, mb, nb))
            return torch.mm(dense[0], Bp)

        cands["dense"] = dense_mm
    cls = ("bsr", *key[:5], str(blocks.dtype).replace("torch.", ""))
    c = routes.choose("trnsparse.bsr_spmm", cls, cands, default="tiles",  # robust: see _host._spmv_route
                      worth_timing=2.0 * nblk * b * b * k >= BSR_MEASURE_MIN_FLOPS, robust=key[-1] > 1)
    return _bsr_routes.remember(key, c.route)


@_in_float32
def _bsr_apply(A: BSRMatrix, x: torch.Tensor, alpha, y, beta):
    r = BSR_SPMM(A.blocks, A.block_col_indices, A.block_row_ptrs, A.shape, A.block_size, x, A)
    return _finish(r, alpha, y, beta)


def _apply(A: SparseMatrix, x: torch.Tensor, alpha, y, beta):
    if isinstance(A, BSRMatrix):
        return _bsr_apply(A, x, alpha, y, beta)
    given = A
    A = _csr_form(A)
    host = arrays.host_ok(A.values, x)
    cols, ptrs = A._host_indices() if host else (A.col_indices, A.row_ptrs)
    op = SPMV if x.dim() == 1 else SPMM
    args = (A.values, cols, ptrs, A.shape, x, alpha, y, beta, A)
    if host and given is A and y is None and alpha == 1 and type(x) is torch.Tensor and not x.requires_grad:
        # the plain product on the host: on the torch path the measured route's runner, settled on A for
        # x's signature (trnsci.settled: kind "owner" keeps it on the matrix, keyed by its arrays' state)
        return call(op, *args, via=_runner_via(A, x, cols, ptrs, args))
    return op(*args)


def _runner_via(A, x, cols, ptrs, args):
    """``via`` of :func:`trnsci.settled.call`: the measured host route's runner for ``x``'s signature (its
    per-call work done once), when the torch lowering is trnsparse's own; else the lowering as called."""

    def via(lowering):
        if lowering is not _spmv_torch:
            return lowering, args
        run = _host.spmv_runner(A.values, cols, ptrs, A.shape, x)
        return (lowering, args) if run is None else (run, (x,))

    return via


def _csr_form(A):
    """A as CSR; for another format its CSR form is kept on the matrix (and so the device layout cached
    on that form), valid while A's arrays are the same, unmodified tensors."""
    if isinstance(A, CSRMatrix):
        return A.to_csr()
    from .layouts import cached

    return cached(A, "_csr_form", (A._values_tensor(), *_index_arrays(A)), A.to_csr)


@public(SPMV, "owner plain scalar tensor? scalar")
def spmv(A, x, alpha=1.0, y=None, beta=0.0):
    """Sparse matrix times dense vector: ``alpha * A @ x + beta * y``.

    Parameters
    ----------
    A : sparse matrix (any trnsparse format or scipy.sparse), shape (m, n)
    x : (n,) tensor or ndarray of A's dtype
    alpha, beta : scalars (complex only for complex data)
    y : (m,) tensor, optional (not modified)

    Returns
    -------
    (m,) tensor (ndarray for NumPy input), on x's device, of A's dtype (bfloat16/float16:
    computed in float32 and rounded once, error <= the float32 bound + 2^-8 (bf16) /
    2^-11 (fp16) relative; see the module docstring).

    Raises
    ------
    TypeError
        A not a sparse matrix; x of another dtype.
    ValueError
        Length mismatches (named).

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.from_dense(torch.tensor([[2., 0.], [1., 3.]]))
    >>> trnsparse.spmv(A, torch.tensor([1., 1.]), alpha=2.0)
    tensor([4., 8.])
    """
    where = "spmv"
    A = as_sparse(A, "A", where)
    x = _dense(x, "x", where, 1, A.dtype, A.device)
    m, n = A.shape
    if x.shape[0] != n:
        raise ValueError(f"{where}: x must have {n} entries (A has shape {A.shape}), got {tuple(x.shape)}")
    alpha = _scalar(alpha, "alpha", where, A.dtype)
    beta = _scalar(beta, "beta", where, A.dtype)
    if y is not None:
        y = _dense(y, "y", where, 1, A.dtype, A.device)
        if y.shape[0] != m:
            raise ValueError(f"{where}: y must have {m} entries (A has shape {A.shape}), got {tuple(y.shape)}")
    return _apply(A, x, alpha, y, beta)


@public(SPMM, "owner plain scalar tensor? scalar")
def spmm(A, B, alpha=1.0, C=None, beta=0.0):
    """Sparse matrix times dense matrix: ``alpha * A @ B + beta * C``.

    Parameters
    ----------
    A : sparse matrix, shape (m, n)
    B : (n, k) tensor of A's dtype
    C : (m, k) tensor, optional (not modified)

    Returns
    -------
    (m, k) tensor of A's dtype (bfloat16/float16 as in :func:`spmv`).

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.eye_sparse(2, dtype=torch.float64)
    >>> trnsparse.spmm(A, torch.ones(2, 3, dtype=torch.float64), alpha=3.0)
    tensor([[3., 3., 3.],
            [3., 3., 3.]], dtype=torch.float64)
    """
    where = "spmm"
    A = as_sparse(A, "A", where)
    B = _dense(B, "B", where, 2, A.dtype, A.device)
    m, n = A.shape
    if B.shape[0] != n:
        raise ValueError(f"{where}: B must have {n} rows (A has shape {A.shape}), got shape {tuple(B.shape)}")
    alpha = _scalar(alpha, "alpha", where, A.dtype)
    beta = _scalar(beta, "beta", where, A.dtype)
    if C is not None:
        C = _dense(C, "C", where, 2, A.dtype, A.device)
        if tuple(C.shape) != (m, B.shape[1]):
            raise ValueError(f"{where}: C must have shape {(m, B.shape[1])}, got {tuple(C.shape)}")
    return _apply(A, B, alpha, C, beta)


@validate.numpy_io
def bsr_spmm(A, B):
    """Block-sparse times dense: ``A @ B`` with one tile product per stored block.

    Parameters
    ----------
    A : BSRMatrix, shape (m, n) (other formats are tiled with block_size 128)
    B : (n, k) or (n,) tensor of A's dtype

    Returns
    -------
    (m, k) or (m,) tensor.

    Notes
    -----
    Work and data read are proportional to the stored tiles:
    ``2 * n_blocks * b**2 * k`` flops. This is the torch lowering of the
    planned Tensor Engine kernel (one ``nc_matmul`` per tile into PSUM).

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.BSRMatrix.from_dense(torch.eye(4), block_size=2)
    >>> trnsparse.bsr_spmm(A, torch.arange(8.).reshape(4, 2))[:, 0]
    tensor([0., 2., 4., 6.])
    """
    where = "bsr_spmm"
    A = as_sparse(A, "A", where)
    if not isinstance(A, BSRMatrix):
        A = A.to_bsr(128)
    B = _dense(B, "B", where, (1, 2), A.dtype, A.device)
    if B.shape[0] != A.shape[1]:
        raise ValueError(f"{where}: B must have {A.shape[1]} rows (A has shape {A.shape}), got {tuple(B.shape)}")
    return _bsr_spmm(A, B)


@_in_float32
def _bsr_spmm(A: BSRMatrix, B: torch.Tensor) -> torch.Tensor:
    return BSR_SPMM(A.blocks, A.block_col_indices, A.block_row_ptrs, A.shape, A.block_size, B, A)


def spmv_symmetric(A, x, alpha=1.0, uplo="upper"):
    """``alpha * S @ x`` where S is the symmetric matrix held by one triangle of A.

    Only the ``uplo`` triangle of A (with the diagonal) is read; the other
    triangle is ignored. ``S = T + T_strict^T`` (a plain transpose, also
    for complex data: complex symmetric, not Hermitian).

    Parameters
    ----------
    A : square sparse matrix
    x : (n,) or (n, k) tensor
    alpha : scalar
    uplo : {"upper", "lower"} (also "U"/"L")

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.from_dense(torch.tensor([[1., 2.], [99., 3.]]))
    >>> trnsparse.spmv_symmetric(A, torch.tensor([1., 1.]), uplo="upper")
    tensor([3., 5.])
    """
    return _spmv_symmetric_public(A, x, alpha, uplo)


@validate.numpy_io
def _spmv_symmetric_public(A, x, alpha, uplo):
    where = "spmv_symmetric"
    A = as_sparse(A, "A", where)
    m, n = A.shape
    if m != n:
        raise ValueError(f"{where}: A must be square, got shape {A.shape}")
    x = _dense(x, "x", where, (1, 2), A.dtype, A.device)
    if x.shape[0] != n:
        raise ValueError(f"{where}: x must have {n} rows (A has shape {A.shape}), got {tuple(x.shape)}")
    alpha = _scalar(alpha, "alpha", where, A.dtype)
    code = _UPLO(uplo, "uplo", where)
    return _spmv_symmetric(A, x, alpha, code)


@_in_float32
def _spmv_symmetric(A: SparseMatrix, x: torch.Tensor, alpha, code: str) -> torch.Tensor:
    C = _csr_form(A)
    return SPMV_SYMMETRIC(C.values, C.col_indices, C.row_ptrs, A.shape[0], x, alpha, code, C)


def _symmetric_csr(values, col_indices, row_ptrs, n, uplo):
    """CSR arrays of ``T + T_strict^T``, T the uplo ('U'/'L') triangle of the given CSR arrays."""
    rows = arrays.row_indices(row_ptrs, values.numel())
    keep = col_indices >= rows if uplo == "U" else col_indices <= rows
    r, c, w = rows[keep], col_indices[keep], values[keep]
    strict = r != c
    rr = torch.cat([r, c[strict]])
    cc = torch.cat([c, r[strict]])
    ww = torch.cat([w, w[strict]])
    vals, rr, cc = arrays.coo_canonical(ww, rr, cc, (n, n))
    return vals, cc, arrays.ptrs_from_sorted(rr, n)


SPMV_SYMMETRIC = Op(
    "trnsparse.spmv_symmetric", "flops", 8 * _TILE_FLOPS,
    size=lambda values, cols, ptrs, n, x, *r: 4.0 * values.shape[0] * _ncols(x),
    doc="alpha * S @ x, S symmetric from one stored triangle; flops ~ 4 nnz k (kernel: S expanded once, "
        "cached, then the CSR SpMV/SpMM kernel)",
    schema="(Tensor values, Tensor col_indices, Tensor row_ptrs, SymInt n, Tensor x, Scalar alpha, str uplo)"
           " -> Tensor",
    fake=lambda values, cols, ptrs, n, x, alpha, uplo, owner=None: values.new_empty(
        (n,) if x.dim() == 1 else (n, x.shape[1])),
)


@SPMV_SYMMETRIC.lowering("torch")
def _spmv_symmetric_torch(values, col_indices, row_ptrs, n, x, alpha, uplo, owner=None):
    """alpha * (T + T_strict^T) @ x with T the uplo ('U'/'L') triangle of the CSR arrays.

    ``owner``: the CSR matrix holding the arrays (the NKI lowering caches the symmetric matrix on it)."""
    vals, cc, ptrs = _symmetric_csr(values, col_indices, row_ptrs, n, uplo)
    return _finish(_host.spmv(vals, cc, ptrs, (n, n), x), alpha, None, 0)


# --------------------------------------------------------------- SpGEMM / SDDMM

def _spgemm_flops(av, ac, ap, ash, bv, bc, bp, *r):
    """Useful flops of A @ B: 2 x the scalar products a_ik b_kj of the row merge."""
    if ac.numel() == 0:
        return 0.0
    return 2.0 * float((bp[1:] - bp[:-1])[ac.long()].sum())


# SpGEMM thresholds: one tile product's worth of work already pays for a launch against SciPy's SpGEMM
# (host measured, kernel modeled: docs/perf-notes.md#design-spgemm).
_SPGEMM_MIN = 2 * 128 ** 3


SPGEMM = Op(
    "trnsparse.spgemm", "flops", _SPGEMM_MIN, size=_spgemm_flops,
    describe=lambda av, ac, ap, ash, bv, bc, bp, bsh, *r: f"CSR {ash[0]}x{ash[1]} nnz={av.shape[0]} @ CSR "
                                                           f"{bsh[0]}x{bsh[1]} nnz={bv.shape[0]}",
    doc="C = A @ B, both CSR; flops = 2 x the scalar products of the row merge (kernels: 128x128 tiles or a "
        "Vector-Engine row merge, see trnsparse._nki.ops_spgemm)",
    # the matrices (where the tile forms and the symbolic phase are cached) stay on the host side; the
    # operator's product has its columns sorted inside rows (the lowering's sorted flag is the operator's
    # business) and int64 indices, its size decided by the data
    schema="(Tensor a_values, Tensor a_col_indices, Tensor a_row_ptrs, SymInt[] a_shape, Tensor b_values, "
           "Tensor b_col_indices, Tensor b_row_ptrs, SymInt[] b_shape) -> (Tensor, Tensor, Tensor)",
    fake=lambda av, ac, ap, ash, bv, bc, bp, bsh: _product_fake(av, bv, (), ash[0]),
)


@SPGEMM.lowering("torch")
def _spgemm_torch(a_values, a_cols, a_ptrs, a_shape, b_values, b_cols, b_ptrs, b_shape, owner_a=None, owner_b=None):
    """C = A @ B for CSR arrays -> (values, col_indices, row_ptrs, sorted) (int32 indices from SciPy
    when they fit, else int64): no duplicates; columns
    sorted inside rows only when ``sorted`` is True (SciPy's SpGEMM leaves them unsorted).

    ``owner_a`` / ``owner_b``: the matrices holding the arrays, where the NKI lowering caches its tile
    forms and the symbolic phase (unused here)."""
    return arrays.spgemm((a_values, a_cols, a_ptrs), (b_values, b_cols, b_ptrs), a_shape, b_shape)


def _product_fake(av, bv, tile, rows):
    """A sparse product's arrays: a pattern whose size is known only once computed (an unbacked size)."""
    nnz = torch.library.get_ctx().new_dynamic_size()
    return (av.new_empty((nnz, *tile), dtype=torch.promote_types(av.dtype, bv.dtype)),
            av.new_empty((nnz,), dtype=torch.int64), av.new_empty((rows + 1,), dtype=torch.int64))


def _pattern_rows(ptrs, nnz):
    counts = (ptrs[1:] - ptrs[:-1]).long()
    return torch.repeat_interleave(torch.arange(ptrs.shape[0] - 1, device=ptrs.device), counts, output_size=nnz)


def _spgemm_to_operator(av, ac, ap, ash, bv, bc, bp, bsh, owner_a=None, owner_b=None):
    return (av, ac, ap, list(ash), bv, bc, bp, list(bsh))


def _spgemm_from_operator(av, ac, ap, ash, bv, bc, bp, bsh):
    return (av, ac, ap, tuple(ash), bv, bc, bp, tuple(bsh))


def _spgemm_result(out, av, ac, ap, ash, bv, bc, bp, bsh):
    """The operator's product from the lowering's ``(values, cols, ptrs, sorted)``: columns sorted inside
    rows, int64 indices."""
    vals, cols, ptrs, is_sorted = out
    cols, ptrs = cols.long(), ptrs.long()
    if not is_sorted and vals.shape[0]:
        perm = torch.argsort(_pattern_rows(ptrs, vals.shape[0]) * max(int(bsh[1]), 1) + cols, stable=True)
        vals, cols = vals[perm], cols[perm]
    return vals, cols, ptrs


def _dense_of(vals, cols, ptrs, shape, tile=None):
    """The dense matrix of CSR (``tile``: BSR, ``vals`` (nnz, b, b)) arrays; entries of a repeated
    position add."""
    rows = _pattern_rows(ptrs, vals.shape[0])
    if tile is None:
        return vals.new_zeros(tuple(shape)).index_put((rows, cols.long()), vals, accumulate=True)
    b = tile
    mb, nb = -(-shape[0] // b), -(-shape[1] // b)
    D = vals.new_zeros((mb, nb, b, b)).index_put((rows, cols.long()), vals, accumulate=True)
    return D.permute(0, 2, 1, 3).reshape(mb * b, nb * b)


def _on_pattern(D, cols, ptrs, nnz, tile=None):
    """The entries (tiles) of dense ``D`` at a CSR (BSR) pattern's positions."""
    rows = _pattern_rows(ptrs, nnz)
    if tile is None:
        return D[rows, cols.long()]
    b = tile
    T = D.reshape(D.shape[0] // b, b, D.shape[1] // b, b).permute(0, 2, 1, 3)
    return T[rows, cols.long()]


@SPGEMM.backward(formula="dA = (G B^H) on A's pattern; dB = (A^H G) on B's pattern (G: the incoming values on "
                         "C's pattern)",
                 runs="torch: dense products of the scattered patterns")
def _spgemm_backward(inputs, output, grad, needs):
    av, ac, ap, ash, bv, bc, bp, bsh = inputs
    cv, cc, cp = output
    g = grad[0]
    out = [None] * len(inputs)
    if g is None:
        return tuple(out)
    G = _dense_of(g, cc, cp, (ash[0], bsh[1]))
    if needs[0]:
        out[0] = _on_pattern(G @ _dense_of(bv, bc, bp, bsh).to(G.dtype).mH, ac, ap, av.shape[0]).to(av.dtype)
    if needs[4]:
        out[4] = _on_pattern(_dense_of(av, ac, ap, ash).to(G.dtype).mH @ G, bc, bp, bv.shape[0]).to(bv.dtype)
    return tuple(out)


SPGEMM.boundary(_spgemm_to_operator, _spgemm_from_operator, _spgemm_result)


BSR_SPGEMM = Op(
    "trnsparse.bsr_spgemm", "flops", _SPGEMM_MIN,
    size=lambda ab, ac, ap, ash, bb, bc, bp, bsh, b, *r: 2.0 * b ** 3 * float(
        (bp[1:] - bp[:-1])[ac.long()].sum()) if ac.numel() else 0.0,
    describe=lambda ab, ac, ap, ash, bb, *r: f"BSR {ash[0]}x{ash[1]} ({ab.shape[0]} tiles) @ BSR ({bb.shape[0]} "
                                            f"tiles)",
    doc="C = A @ B for BSR matrices: one tile product per matching (A_IK, B_KJ) pair; flops = 2 b^3 x products",
    # A (``owner``, where the symbolic phase is cached) stays on the host side; C's tile count is decided by
    # the data (an unbacked size)
    schema="(Tensor a_blocks, Tensor a_block_col_indices, Tensor a_block_row_ptrs, SymInt[] a_shape, "
           "Tensor b_blocks, Tensor b_block_col_indices, Tensor b_block_row_ptrs, SymInt[] b_shape, "
           "SymInt block_size) -> (Tensor, Tensor, Tensor)",
    fake=lambda ab, ac, ap, ash, bb, bc, bp, bsh, b, owner=None: _product_fake(ab, bb, (b, b), ap.shape[0] - 1),
)


@BSR_SPGEMM.lowering("torch")
def _bsr_spgemm_torch(a_blocks, a_bcol, a_bptr, a_shape, b_blocks, b_bcol, b_bptr, b_shape, block_size,
                      owner=None):
    """C = A @ B for BSR arrays (same block size) -> (blocks, block_col_indices, block_row_ptrs) of C.

    C's block pattern is every (I, J) with a stored A_IK and B_KJ; each output tile is the sum of
    its (b x b) tile products (batched matmuls, index_add). ``owner``: A, where the symbolic phase is
    cached (the NKI lowering shares it)."""
    from .symbolic import bsr_schedule, bsr_symbolic

    sch = (bsr_schedule(owner, a_bcol, a_bptr, b_bcol, b_bptr) if owner is not None
           else bsr_symbolic(a_bcol, a_bptr, b_bcol, b_bptr))
    b = block_size
    dtype = torch.promote_types(a_blocks.dtype, b_blocks.dtype)
    out = torch.zeros(sch.nc, b, b, dtype=dtype, device=a_blocks.device)
    if sch.products:
        dev = a_blocks.device
        ia, ib, ic = (torch.from_numpy(x).to(dev) for x in (sch.ia, sch.ib, sch.ic))
        step = max(1, (1 << 24) // (b * b))
        for s in range(0, ia.numel(), step):
            e = s + step
            out = out.index_add(0, ic[s:e], torch.bmm(a_blocks[ia[s:e]].to(dtype), b_blocks[ib[s:e]].to(dtype)))
    return out, sch.c_bcol.to(a_blocks.device), sch.c_bptr.to(a_blocks.device)


@BSR_SPGEMM.backward(formula="d A tiles = (G B^H) on A's stored tiles; d B tiles = (A^H G) on B's stored tiles "
                             "(G: the incoming tiles on C's pattern)",
                     runs="torch: dense products of the scattered tiles")
def _bsr_spgemm_backward(inputs, output, grad, needs):
    ab, ac, ap, ash, bb, bc, bp, bsh, b = inputs
    cb, cc, cp = output
    g = grad[0]
    out = [None] * len(inputs)
    if g is None:
        return tuple(out)
    m, n = -(-ash[0] // b) * b, -(-bsh[1] // b) * b
    G = _dense_of(g, cc, cp, (m, n), b)
    if needs[0]:
        Bd = _dense_of(bb, bc, bp, (-(-bsh[0] // b) * b, n), b).to(G.dtype)
        out[0] = _on_pattern(G @ Bd.mH, ac, ap, ab.shape[0], b).to(ab.dtype)
    if needs[4]:
        Ad = _dense_of(ab, ac, ap, (m, -(-ash[1] // b) * b), b).to(G.dtype)
        out[4] = _on_pattern(Ad.mH @ G, bc, bp, bb.shape[0], b).to(bb.dtype)
    return tuple(out)


def _bsr_pair(A, B):
    """Both BSR in the device tile (128): off the torch path spgemm multiplies them tile by tile. (On the
    host, and for smaller blocks, SciPy's merge on the CSR forms is faster than dense tile products of
    partly empty tiles: 1.3 s against 4.1 s for 2048^2 at 30% here.)"""
    return isinstance(A, BSRMatrix) and isinstance(B, BSRMatrix) and A.block_size == B.block_size == 128


def spgemm(A, B) -> CSRMatrix:
    """Sparse times sparse: ``C = A @ B`` as a CSR matrix (canonical, no explicit zeros dropped).

    On the device two BSR matrices of block size 128 multiply tile by tile (:func:`bsr_spgemm`); the
    CSR result holds the nonzero entries of C's tiles. On the device (backend "nki"/"simulator") a CSR product
    runs through 128 x 128 tiles or a Vector-Engine row merge, whichever is estimated faster, when
    that beats the host's row merge (the plan says which, or why the host runs); its pattern is
    then the structural one, columns sorted.

    Parameters
    ----------
    A : sparse matrix (m, k)
    B : sparse matrix (k, n) of the same dtype

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.from_dense(torch.tensor([[1., 2.], [0., 3.]]))
    >>> (A @ A).to_dense()
    tensor([[1., 8.],
            [0., 9.]])
    """
    where = "spgemm"
    A, B = _pair(A, B, where)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"{where}: inner dimensions differ: A has shape {A.shape}, B has shape {B.shape}")
    if _bsr_pair(A, B) and not torch_only("trnsparse"):
        return _bsr_spgemm(A, B).to_csr()
    return _spgemm(A, B)


@_in_float32
def _spgemm(A: SparseMatrix, B: SparseMatrix) -> CSRMatrix:
    A, B = _csr_form(A), _csr_form(B)
    va, vb, sa, sb = A.values, B.values, A.shape, B.shape
    args = (va, A.col_indices, A.row_ptrs, sa, vb, B.col_indices, B.row_ptrs, sb, A, B)
    vals, cols, ptrs, *flag = call(SPGEMM, *args, via=_host_indices_via(A, B) if arrays.host_ok(va, vb) else None)
    is_sorted = flag[0] if flag else True  # the operator's product has its columns sorted
    return CSRMatrix._make(vals, cols, ptrs, (sa[0], sb[1]), is_sorted)


def _host_indices_via(A, B):
    """``via`` of :func:`trnsci.settled.call` for spgemm on the torch path: the lowering on the cached int32
    copies of the index arrays (SciPy's kernels read half the bytes)."""

    def via(lowering):
        (ca, pa), (cb, pb) = A._host_indices(), B._host_indices()
        return lowering, (A.values, ca, pa, A.shape, B.values, cb, pb, B.shape, A, B)

    return via


def _pair(A, B, where):
    A = as_sparse(A, "A", where)
    B = as_sparse(B, "B", where)
    if A.dtype != B.dtype:
        raise TypeError(f"{where}: B has dtype {B.dtype} but A has {A.dtype}; cast them to one dtype")
    if A.device != B.device:
        raise ValueError(f"{where}: B is on {B.device} but A is on {A.device}")
    return A, B


@_in_float32
def _bsr_spgemm(A, B) -> BSRMatrix:
    blocks, bcol, bptr = BSR_SPGEMM(A.blocks, A.block_col_indices, A.block_row_ptrs, A.shape, B.blocks,
                                    B.block_col_indices, B.block_row_ptrs, B.shape, A.block_size, A)
    return BSRMatrix._make(blocks, bcol, bptr, (A.shape[0], B.shape[1]), A.block_size)


def bsr_spgemm(A, B) -> BSRMatrix:
    """Block-sparse times block-sparse: ``C = A @ B`` as a BSR matrix of the same block size.

    C's tiles are the block pairs (I, J) with some stored A_IK and B_KJ (kept even when their
    sum is zero); each is the sum of its tile products. The pattern (the symbolic phase) is
    computed on the host once per pair of patterns and cached on A; on the device each tile
    product is one Tensor Engine matmul accumulating in PSUM (block size 128).

    Parameters
    ----------
    A : BSRMatrix (m, k); other formats are tiled with B's block size (128 if B is not BSR)
    B : BSRMatrix (k, n) of A's dtype; other formats are tiled like A

    Returns
    -------
    BSRMatrix (m, n). bfloat16/float16: computed in float32, rounded once.

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.BSRMatrix.from_dense(torch.eye(4), block_size=2)
    >>> trnsparse.bsr_spgemm(A, A).n_blocks
    2
    """
    where = "bsr_spgemm"
    A, B = _pair(A, B, where)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"{where}: inner dimensions differ: A has shape {A.shape}, B has shape {B.shape}")
    b = A.block_size if isinstance(A, BSRMatrix) else B.block_size if isinstance(B, BSRMatrix) else 128
    A, B = A.to_bsr(b), B.to_bsr(b)
    return _bsr_spgemm(A, B)


SDDMM = Op(
    "trnsparse.sddmm", "flops", 8 * _TILE_FLOPS,
    size=lambda cols, ptrs, values, X, Y, *r: 2.0 * cols.shape[0] * X.shape[1],
    dtype=lambda cols, ptrs, values, *r: values.dtype,
    describe=lambda cols, ptrs, values, X, Y, *r: f"CSR pattern {X.shape[0]}x{Y.shape[1]} nnz={cols.shape[0]}, "
                                                  f"k={X.shape[1]}",
    doc="alpha (X @ Y) sampled on a CSR pattern + beta A; flops = 2 nnz k",
    schema="(Tensor col_indices, Tensor row_ptrs, Tensor values, Tensor X, Tensor Y, Scalar alpha, Scalar beta)"
           " -> Tensor",
    fake=lambda cols, ptrs, values, X, Y, alpha, beta, owner=None: values.new_empty(cols.shape),
)


@SDDMM.lowering("torch")
def _sddmm_torch(col_indices, row_ptrs, values, X, Y, alpha, beta, owner=None):
    """values_out = alpha * (X @ Y)[i, j] + beta * values, for every stored (i, j).

    ``owner``: the pattern's matrix, where the NKI lowering caches its device layout (unused here)."""
    nnz = col_indices.numel()
    rows = arrays.row_indices(row_ptrs, nnz)
    k = X.shape[1]
    Yt = Y.transpose(0, 1)
    step = max(1, (1 << 24) // max(1, k))
    parts = [(X[rows[s:s + step]] * Yt[col_indices[s:s + step]]).sum(1) for s in range(0, nnz, step)]
    out = torch.cat(parts) if parts else X.new_zeros(0)
    out = out * alpha if alpha != 1 else out
    if beta != 0:
        out = out + beta * values
    return out


BSR_SDDMM = Op(
    "trnsparse.bsr_sddmm", "flops", 8 * _TILE_FLOPS,
    size=lambda blocks, cols, ptrs, shape, b, X, *r: 2.0 * blocks.shape[0] * b * b * X.shape[1],
    doc="alpha (X @ Y) on every entry of the stored tiles of a BSR pattern + beta A; flops = 2 n_blocks b^2 k",
    schema="(Tensor blocks, Tensor block_col_indices, Tensor block_row_ptrs, SymInt[] shape, int block_size, "
           "Tensor X, Tensor Y, Scalar alpha, Scalar beta) -> Tensor",
    fake=lambda blocks, cols, ptrs, shape, b, X, Y, alpha, beta: X.new_empty((blocks.shape[0], b, b)),
)


@BSR_SDDMM.lowering("torch")
def _bsr_sddmm_torch(blocks, block_col_indices, block_row_ptrs, shape, block_size, X, Y, alpha, beta):
    """Every entry of every stored tile: alpha * (X @ Y) tile + beta * tile; (n_blocks, b, b) out.

    Entries of ragged edge tiles outside ``shape`` stay zero.
    """
    m, n = shape
    b = block_size
    nblk = blocks.shape[0]
    k = X.shape[1]
    mb, nb = -(-m // b), -(-n // b)
    Xp = torch.nn.functional.pad(X, (0, 0, 0, mb * b - m)).reshape(mb, b, k)
    Yp = torch.nn.functional.pad(Y, (0, nb * b - n)).reshape(k, nb, b).permute(1, 0, 2)
    brow = arrays.row_indices(block_row_ptrs, nblk)
    out = torch.bmm(Xp[brow], Yp[block_col_indices]) if nblk else blocks.new_zeros(0, b, b)
    out = out * alpha if alpha != 1 else out
    if beta != 0:
        out = out + beta * blocks
    return out


def sddmm(A_pattern, X, Y, alpha=1.0, beta=0.0) -> CSRMatrix:
    """Sampled dense-dense product: ``alpha * (X @ Y)`` on A's pattern, ``+ beta * A``.

    Parameters
    ----------
    A_pattern : sparse matrix (m, n); its stored positions select the outputs
    X : (m, k) tensor, Y : (k, n) tensor (A's dtype)
    alpha, beta : scalars

    Returns
    -------
    CSRMatrix with A's pattern (explicit zeros kept); for a BSRMatrix pattern a
    BSRMatrix with A's tiles, every entry of each stored tile sampled (tile
    entries outside A's shape stay zero). Differentiable in X and Y.

    Examples
    --------
    >>> import torch, trnsparse
    >>> P = trnsparse.eye_sparse(2)
    >>> trnsparse.sddmm(P, torch.ones(2, 3), torch.ones(3, 2)).to_dense()
    tensor([[3., 0.],
            [0., 3.]])
    """
    where = "sddmm"
    A = as_sparse(A_pattern, "A_pattern", where)
    bsr = isinstance(A, BSRMatrix)
    if not bsr:
        A = A.to_csr()
    X = _dense(X, "X", where, 2, A.dtype, A.device)
    Y = _dense(Y, "Y", where, 2, A.dtype, A.device)
    m, n = A.shape
    if X.shape[0] != m or Y.shape[1] != n or X.shape[1] != Y.shape[0]:
        raise ValueError(f"{where}: need X (m, k), Y (k, n) for A_pattern of shape {A.shape}: X has shape "
                         f"{tuple(X.shape)}, Y has shape {tuple(Y.shape)}")
    alpha = _scalar(alpha, "alpha", where, A.dtype)
    beta = _scalar(beta, "beta", where, A.dtype)
    return _sddmm(A, X, Y, alpha, beta)


@_in_float32
def _sddmm(A: CSRMatrix | BSRMatrix, X: torch.Tensor, Y: torch.Tensor, alpha, beta):
    if isinstance(A, BSRMatrix):
        blocks = BSR_SDDMM(A.blocks, A.block_col_indices, A.block_row_ptrs, A.shape, A.block_size, X, Y, alpha, beta)
        return BSRMatrix._make(blocks, A.block_col_indices, A.block_row_ptrs, A.shape, A.block_size)
    vals = SDDMM(A.col_indices, A.row_ptrs, A.values, X, Y, alpha, beta, A)
    return CSRMatrix._make(vals, A.col_indices, A.row_ptrs, A.shape, A.has_sorted_indices)


# --------------------------------------------------------------- triangular solves

_SPSV_TILE = 128


SPSV = Op(
    "trnsparse.spsv", "flops", 8 * _TILE_FLOPS,
    size=lambda values, cols, ptrs, n, B, *r: 2.0 * values.shape[0] * _ncols(B),
    doc="sparse triangular solve op(A) X = B (CSR); flops = 2 nnz k",
    schema="(Tensor values, Tensor col_indices, Tensor row_ptrs, SymInt n, Tensor B, bool lower, "
           "bool unit_diagonal, bool trans) -> Tensor",
    fake=lambda values, cols, ptrs, n, B, lower, unit, trans, owner=None: B.new_empty(
        B.shape, dtype=torch.promote_types(values.dtype, B.dtype)),
)


@SPSV.lowering("torch")
def _spsv_torch(values, col_indices, row_ptrs, n, B, lower, unit_diagonal, trans, owner=None):
    """Solve op(T) X = B, T the lower/upper triangle of the CSR arrays (n x n); B 1-D or 2-D.

    Block forward substitution: 128-row tiles; each tile solves a dense
    triangular block after subtracting the already-solved part (a gather
    and segment sum). Python loops over tiles only. ``owner``: the CSR matrix holding the arrays,
    where the NKI lowering caches its layout (unused here).
    """
    if trans:
        values, col_indices, row_ptrs = arrays.csr_transpose(values, col_indices, row_ptrs, (n, n))
        lower = not lower
    vec = B.dim() == 1
    if vec:
        B = B[:, None]
    k = B.shape[1]
    rows = arrays.row_indices(row_ptrs, values.numel())
    cols = col_indices
    keep = cols <= rows if lower else cols >= rows
    if unit_diagonal:
        keep &= cols != rows
    rows, cols, vals = rows[keep], cols[keep], values[keep]
    if not lower:  # reverse the order of the unknowns: an upper solve becomes a lower one
        rows, cols, B = n - 1 - rows, n - 1 - cols, B.flip(0)
    dtype = torch.promote_types(vals.dtype, B.dtype)
    bs = min(_SPSV_TILE, max(n, 1))
    nbk = -(-n // bs)
    blk = rows // bs
    inb = (cols // bs) == blk
    tiles = torch.zeros(nbk, bs, bs, dtype=dtype, device=B.device)
    tiles = tiles.index_put((blk[inb], rows[inb] % bs, cols[inb] % bs), vals[inb].to(dtype), accumulate=True)
    eye = torch.arange(bs, device=B.device)
    pad_rows = torch.arange(nbk * bs, device=B.device).reshape(nbk, bs) >= n
    if unit_diagonal:
        tiles[:, eye, eye] = 1
    else:
        tiles[:, eye, eye] = torch.where(pad_rows, torch.ones((), dtype=dtype, device=B.device),
                                         tiles[:, eye, eye])
    off = ~inb
    orows, ocols, ovals = rows[off], cols[off], vals[off].to(dtype)
    order = torch.argsort(orows, stable=True)
    orows, ocols, ovals = orows[order], ocols[order], ovals[order]
    optr = arrays.ptrs_from_sorted(orows // bs, nbk).tolist()
    Bp = B.to(dtype)
    if nbk * bs != n:
        Bp = torch.cat([Bp, Bp.new_zeros(nbk * bs - n, k)])
    X = torch.zeros(nbk * bs, k, dtype=dtype, device=B.device)
    for t in range(nbk):
        r0 = t * bs
        rhs = Bp[r0:r0 + bs]
        s, e = optr[t], optr[t + 1]
        if e > s:
            contrib = torch.zeros(bs, k, dtype=dtype, device=B.device).index_add(
                0, orows[s:e] - r0, ovals[s:e, None] * X[ocols[s:e]])
            rhs = rhs - contrib
        X[r0:r0 + bs] = torch.linalg.solve_triangular(tiles[t], rhs, upper=False,
                                                      unitriangular=bool(unit_diagonal))
    X = X[:n]
    if not lower:
        X = X.flip(0)
    return X[:, 0] if vec else X


def _tri_solve(where, A, b, lower, unit_diagonal, trans, dims, b_name="b"):
    A = as_sparse(A, "A", where)
    m, n = A.shape
    if m != n:
        raise ValueError(f"{where}: A must be square, got shape {A.shape}")
    b = _dense(b, b_name, where, dims, A.dtype, A.device)
    if b.shape[0] != n:
        raise ValueError(f"{where}: {b_name} must have {n} rows (A has shape {A.shape}), got shape {tuple(b.shape)}")
    lower = _bool(lower, "lower", where)
    unit = _bool(unit_diagonal, "unit_diagonal", where)
    tr = _bool(trans, "trans", where)
    return _tri_solve_checked(where, A, b, lower, unit, tr)


@_in_float32
def _tri_solve_checked(where: str, A: SparseMatrix, b: torch.Tensor, lower: bool, unit: bool, tr: bool):
    """The solve of validated arguments (a zero or missing diagonal entry is a LinAlgError)."""
    n = A.shape[0]
    C = _csr_form(A)
    vals, cols, ptrs = C.values, C.col_indices, C.row_ptrs
    if not unit:
        rows = arrays.row_indices(ptrs, vals.numel())
        dmask = rows == cols
        # the stored diagonal entries summed per row (no boolean indexing: a shape the data decides)
        d = torch.zeros(n, dtype=A.dtype, device=A.device).index_add(
            0, rows, torch.where(dmask, vals.detach(), torch.zeros((), dtype=vals.dtype, device=vals.device)))
        _nonzero_diagonal(d, where)
    return SPSV(vals, cols, ptrs, n, b, lower, unit, tr, C)


def _nonzero_diagonal(d: torch.Tensor, where: str) -> None:
    """LinAlgError naming the first row whose diagonal entry ``d`` is zero (or not stored)."""
    zero = torch.nonzero(d == 0)
    if zero.numel():
        raise np.linalg.LinAlgError(f"{where}: A is singular: the diagonal entry of row "
                                    f"{int(zero[0])} is zero or not stored")


def _nonzero_diagonal_traced(d: torch.Tensor, where: str) -> None:
    # torch.compile: a graph assertion (RuntimeError when the graph runs), no host read of the data
    torch._assert_async((d != 0).all(), f"{where}: A is singular: a diagonal entry is zero or not stored")


traceable_as(_nonzero_diagonal, _nonzero_diagonal_traced)


def _bool(x, name, where) -> bool:
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    raise TypeError(f"{where}: {name} must be True or False, got {x!r}")


@validate.numpy_io
def spsv(A, b, lower=True, unit_diagonal=False, trans=False):
    """Sparse triangular solve ``op(A) x = b`` (keywords as ``scipy.sparse.linalg.spsolve_triangular``).

    Parameters
    ----------
    A : square sparse matrix; only its ``lower`` (or upper) triangle is read
    b : (n,) or (n, k) tensor of A's dtype
    lower : bool, default True
    unit_diagonal : bool, default False
        Take the diagonal as ones (stored diagonal entries are ignored).
    trans : bool, default False
        Solve ``A^T x = b`` instead.

    Returns
    -------
    x, same shape as b.

    Raises
    ------
    numpy.linalg.LinAlgError
        (a ``ValueError``) when a diagonal entry is zero or missing.

    Examples
    --------
    >>> import torch, trnsparse
    >>> L = trnsparse.from_dense(torch.tensor([[2., 0.], [1., 4.]], dtype=torch.float64))
    >>> trnsparse.spsv(L, torch.tensor([2., 9.], dtype=torch.float64))
    tensor([1., 2.], dtype=torch.float64)
    """
    return _tri_solve("spsv", A, b, lower, unit_diagonal, trans, (1, 2))


@validate.numpy_io
def spsm(A, B, lower=True, unit_diagonal=False, trans=False):
    """Sparse triangular solve with many right-hand sides: ``op(A) X = B`` (B is (n, k)).

    See :func:`spsv` for the keywords.

    Examples
    --------
    >>> import torch, trnsparse
    >>> U = trnsparse.from_dense(torch.tensor([[2., 1.], [0., 1.]], dtype=torch.float64))
    >>> trnsparse.spsm(U, torch.tensor([[3., 2.], [1., 0.]], dtype=torch.float64), lower=False)
    tensor([[1., 1.],
            [1., 0.]], dtype=torch.float64)
    """
    return _tri_solve("spsm", A, B, lower, unit_diagonal, trans, 2, "B")


# --------------------------------------------------------------- structure ops

SPARSE_ADD = Op(
    # memory bound; from here the host merge costs more than the (modeled) kernel: docs/perf-notes.md#design-spgemm
    "trnsparse.sparse_add", "nnz", float(1 << 15),
    size=lambda av, ac, ap, bv, *r: float(av.shape[0] + bv.shape[0]),
    describe=lambda av, ac, ap, bv, bc, bp, shape, *r: f"CSR {shape[0]}x{shape[1]} nnz={av.shape[0]} + "
                                                       f"nnz={bv.shape[0]}",
    doc="alpha A + beta B on the union of the patterns; size = nnz(A) + nnz(B) (kernel: union pattern "
        "cached on A, two gathers on chip)",
    # the matrices (``owner_a``/``owner_b``, where the union pattern is cached) stay on the host side
    schema="(Tensor a_values, Tensor a_col_indices, Tensor a_row_ptrs, Tensor b_values, Tensor b_col_indices, "
           "Tensor b_row_ptrs, SymInt[] shape, Scalar alpha, Scalar beta) -> (Tensor, Tensor, Tensor)",
    fake=lambda av, ac, ap, bv, bc, bp, shape, alpha, beta, owner_a=None, owner_b=None: _sparse_add_fake(
        av, ac, ap, bv, shape),
)


@SPARSE_ADD.lowering("torch")
def _sparse_add_torch(a_values, a_cols, a_ptrs, b_values, b_cols, b_ptrs, shape, alpha, beta, owner_a=None,
                      owner_b=None):
    """alpha * A + beta * B for CSR arrays -> canonical CSR arrays (values, col_indices, row_ptrs).

    ``owner_a`` / ``owner_b``: the CSR matrices holding the arrays. On the host, SciPy's merge reads
    their cached int32 indices, and the size of the union pattern is cached on A per pattern pair
    (while the four index arrays are the same, unmodified tensors), so a repeated sum is one merge
    of the values (see :func:`trnsparse.arrays.union_add`). The NKI lowering caches its union pattern
    on A as well."""
    if arrays.host_ok(a_values, b_values) and a_values.dtype == b_values.dtype:
        ia, ib = (a_cols, a_ptrs), (b_cols, b_ptrs)
        n_union, canonical = None, False
        if isinstance(owner_a, CSRMatrix) and isinstance(owner_b, CSRMatrix):
            canonical = owner_a.has_sorted_indices and owner_b.has_sorted_indices  # sorted CSR: no duplicates
            if canonical:
                from .layouts import cached

                ia, ib = owner_a._host_indices(), owner_b._host_indices()
                n_union = cached(owner_a, "_sparse_add_union_nnz", (a_cols, a_ptrs, b_cols, b_ptrs),
                                 lambda: arrays.union_nnz(*ia, *ib, shape))
        fast = arrays.union_add(a_values, *ia, b_values, *ib, shape, alpha, beta, n_union, canonical)
        if fast is not None:
            return fast
    ra = arrays.row_indices(a_ptrs, a_values.numel())
    rb = arrays.row_indices(b_ptrs, b_values.numel())
    vals = torch.cat([a_values * alpha if alpha != 1 else a_values, b_values * beta if beta != 1 else b_values])
    vals, rows, cols = arrays.coo_canonical(vals, torch.cat([ra, rb]), torch.cat([a_cols, b_cols]), shape)
    return vals, cols, arrays.ptrs_from_sorted(rows, shape[0])


def _sparse_add_fake(av, ac, ap, bv, shape):
    """The union pattern's size is known only once computed: a size the data decides."""
    nnz = torch.library.get_ctx().new_dynamic_size()
    return (av.new_empty((nnz,), dtype=torch.promote_types(av.dtype, bv.dtype)), ac.new_empty((nnz,)),
            ap.new_empty((shape[0] + 1,)))


def sparse_add(A, B, alpha=1.0, beta=1.0) -> CSRMatrix:
    """``alpha * A + beta * B`` as CSR on the union of the patterns (no dense intermediate).

    On the device the union pattern is computed on the host once per pair of patterns and
    cached on A; the values are combined by one kernel launch (:mod:`trnsparse.kernels.csr_add`).

    Examples
    --------
    >>> import torch, trnsparse
    >>> I = trnsparse.eye_sparse(2)
    >>> (I + I).to_dense()
    tensor([[2., 0.],
            [0., 2.]])
    """
    where = "sparse_add"
    A, B = _pair(A, B, where)
    if A.shape != B.shape:
        raise ValueError(f"{where}: A has shape {A.shape} but B has shape {B.shape}")
    alpha = _scalar(alpha, "alpha", where, A.dtype)
    beta = _scalar(beta, "beta", where, A.dtype)
    return _sparse_add(A, B, alpha, beta)


@_in_float32
def _sparse_add(A: SparseMatrix, B: SparseMatrix, alpha, beta) -> CSRMatrix:
    ca, cb = _csr_form(A), _csr_form(B)
    vals, cols, ptrs = SPARSE_ADD(ca.values, ca.col_indices, ca.row_ptrs, cb.values, cb.col_indices, cb.row_ptrs,
                                  A.shape, alpha, beta, ca, cb)
    return CSRMatrix._make(vals, cols, ptrs, A.shape)


def sparse_scale(A, alpha):
    """``alpha * A`` in A's format (same pattern).

    Examples
    --------
    >>> import trnsparse
    >>> (trnsparse.sparse_scale(trnsparse.eye_sparse(2), 3.0)).to_dense()[1, 1].item()
    3.0
    """
    where = "sparse_scale"
    A = as_sparse(A, "A", where)
    alpha = _scalar(alpha, "alpha", where, A.dtype)
    if isinstance(A, BSRMatrix):
        return BSRMatrix._make(A.blocks * alpha, A.block_col_indices, A.block_row_ptrs, A.shape, A.block_size)
    if isinstance(A, COOMatrix):
        return COOMatrix._make(A.values * alpha, A.row_indices, A.col_indices, A.shape, A._canonical)
    if isinstance(A, CSCMatrix):
        return CSCMatrix._make(A.values * alpha, A.row_indices, A.col_ptrs, A.shape)
    return CSRMatrix._make(A.values * alpha, A.col_indices, A.row_ptrs, A.shape, A.has_sorted_indices)


def sparse_transpose(A):
    """``A^T`` (plain transpose, no conjugation) in A's format.

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.from_dense(torch.tensor([[0., 1.], [0., 0.]]))
    >>> trnsparse.sparse_transpose(A).to_dense()
    tensor([[0., 0.],
            [1., 0.]])
    """
    where = "sparse_transpose"
    A = as_sparse(A, "A", where)
    m, n = A.shape
    if isinstance(A, COOMatrix):
        return COOMatrix._make(A.values, A.col_indices, A.row_indices, (n, m))
    if isinstance(A, CSCMatrix):
        return CSCMatrix._make(*arrays.csr_transpose(A.values, A.row_indices, A.col_ptrs, (n, m)), (n, m))
    if isinstance(A, BSRMatrix):
        brow = A.block_row_indices
        key = A.block_col_indices * max(A.n_block_rows, 1) + brow
        order = torch.argsort(key, stable=True)
        return BSRMatrix._make(A.blocks[order].transpose(1, 2).contiguous(), brow[order],
                               arrays.ptrs_from_sorted(A.block_col_indices[order], A.n_block_cols), (n, m),
                               A.block_size)
    vals, cols, ptrs = arrays.csr_transpose(A.values, A.col_indices, A.row_ptrs, (m, n))
    return CSRMatrix._make(vals, cols, ptrs, (n, m))


def _product_transpose(A):
    """A^T for ``x @ A`` (run as ``A^T @ x``): :func:`sparse_transpose`'s, except while ``torch.compile``
    traces a CSR or BSR matrix: then the arrays :func:`_transpose_csr` / :func:`_bsr_transpose` build (as
    the products' backwards do), every size a shape, so the trace has no graph break (sparse_transpose's
    host counting is data-dependent). Both keep the gradient path to A's values."""
    if not torch.compiler.is_compiling():
        return sparse_transpose(A)
    m, n = A.shape
    if type(A) is CSRMatrix:
        return CSRMatrix._make(*_transpose_csr(A.values, A.col_indices, A.row_ptrs, (m, n)), (n, m))
    if type(A) is BSRMatrix:
        bt, ct, pt = _bsr_transpose(A.blocks, A.block_col_indices, A.block_row_ptrs, (m, n), A.block_size)
        return BSRMatrix._make(bt.contiguous(), ct, pt, (n, m), A.block_size)
    return sparse_transpose(A)


# The sparse matrices' operator protocol (``A @ x``, ``A + B``, ``s * A``, ``A.T``) runs these functions.
_formats._OPERATIONS.update(spmv=spmv, spmm=spmm, spgemm=spgemm, sparse_add=sparse_add,
                            sparse_scale=sparse_scale, sparse_transpose=sparse_transpose,
                            product_transpose=_product_transpose)


def nnz_per_row(A) -> torch.Tensor:
    """Stored entries per row of the canonical CSR form (int64, length m).

    Examples
    --------
    >>> import trnsparse
    >>> trnsparse.nnz_per_row(trnsparse.eye_sparse(3)).tolist()
    [1, 1, 1]
    """
    A = as_sparse(A, "A", "nnz_per_row").to_csr()
    return A.row_ptrs[1:] - A.row_ptrs[:-1]


# --------------------------------------------------------------- derivatives
#
# Declared backwards (trnsci.operators) built from forward Op calls -- SpMV/SpMM, SDDMM and their BSR forms
# on transposed index arrays, the triangular solve with the opposite op -- so under a kernel backend the
# backward runs kernels as the forward does.


def _bsr_transpose(blocks, cols, ptrs, shape, b):
    """The BSR arrays of A^T (tiles transposed, in A^T's block order), on the arrays' device."""
    m, n = shape
    mb, nb = -(-m // b), -(-n // b)
    nblk = cols.shape[0]
    brow = torch.repeat_interleave(torch.arange(mb, device=cols.device, dtype=cols.dtype), ptrs[1:] - ptrs[:-1],
                                   output_size=nblk)
    order = torch.argsort(cols * mb + brow, stable=True)
    counts = torch.zeros(nb + 1, dtype=ptrs.dtype, device=ptrs.device).index_add_(
        0, cols + 1, torch.ones_like(cols, dtype=ptrs.dtype))
    return blocks[order].transpose(-1, -2), brow[order], torch.cumsum(counts, 0).to(ptrs.dtype)


def _bsr_spmm_backward(inputs, output, g, needs):
    blocks, cols, ptrs, shape, b, B = inputs[:6]
    cplx = blocks.is_complex()
    gblocks = gB = None
    if needs[5]:
        bt, ct, pt = _bsr_transpose(blocks.conj() if cplx else blocks, cols, ptrs, shape, b)
        gB = BSR_SPMM(bt.contiguous(), ct, pt, (shape[1], shape[0]), b, g.contiguous())
    if needs[0]:
        X = g[:, None] if B.dim() == 1 else g
        Y = (B.conj() if cplx else B)[None, :] if B.dim() == 1 else (B.conj() if cplx else B).mT
        gblocks = BSR_SDDMM(blocks, cols, ptrs, shape, b, X.contiguous(), Y.contiguous(), 1.0, 0.0)
    return gblocks, None, None, None, None, gB


BSR_SPMM.backward(_bsr_spmm_backward, formula="dB = A^H g; d tiles = (g B^H) on A's stored tiles",
                  runs="`trnsparse.bsr_spmm` on A^T's arrays and `trnsparse.bsr_sddmm`")


def _bsr_sddmm_backward(inputs, output, g, needs):
    blocks, cols, ptrs, shape, b, X, Y, alpha, beta = inputs
    cplx = X.is_complex() or blocks.is_complex()
    ca = alpha.conjugate() if cplx else alpha
    g = g.contiguous()
    gblocks = gX = gY = None
    if needs[0]:
        gblocks = g * (beta.conjugate() if cplx else beta)
    if needs[5]:  # dX = conj(alpha) G Y^H, G the BSR matrix of the incoming tiles
        gX = BSR_SPMM(g, cols, ptrs, shape, b, (Y.conj() if cplx else Y).mT.contiguous()) * ca
    if needs[6]:  # dY = conj(alpha) X^H G = conj(alpha) (G^H X)^H
        gt, ct, pt = _bsr_transpose(g.conj() if cplx else g, cols, ptrs, shape, b)
        GX = BSR_SPMM(gt.contiguous(), ct, pt, (shape[1], shape[0]), b, X.contiguous())
        gY = (GX.conj() if cplx else GX).mT * ca
    return gblocks, None, None, None, None, gX, gY, None, None


BSR_SDDMM.backward(_bsr_sddmm_backward, formula="dX = conj(alpha) G Y^H; dY = conj(alpha) X^H G (G: the incoming "
                   "tiles as a BSR matrix); d tiles = conj(beta) g",
                   runs="two `trnsparse.bsr_spmm` calls (G and G^T's arrays)")


def _triangle(cols, ptrs, nnz, lower, strict=False):
    rows = arrays.row_indices(ptrs, nnz)
    if strict:
        return (cols < rows) if lower else (cols > rows), rows
    return (cols <= rows) if lower else (cols >= rows), rows


def _spmv_symmetric_backward(inputs, output, g, needs):
    values, cols, ptrs, n, x, alpha, uplo = inputs[:7]
    cplx = values.is_complex()
    ca = alpha.conjugate() if cplx else alpha
    g = g.contiguous()
    gv = gx = None
    if needs[4]:  # S is symmetric (not Hermitian): S^H = conj(S)
        gx = SPMV_SYMMETRIC(values.conj() if cplx else values, cols, ptrs, n, g, ca, uplo)
    if needs[0]:
        X = g[:, None] if g.dim() == 1 else g
        xc = x.conj() if cplx else x
        Xc = xc[:, None] if x.dim() == 1 else xc
        # a stored triangle entry (i, j) is S[i, j] and, off the diagonal, S[j, i]: G[i, j] + G[j, i]
        gij = SDDMM(cols, ptrs, values, X, Xc.mT.contiguous(), ca, 0.0)
        gji = SDDMM(cols, ptrs, values, Xc, X.mT.contiguous(), ca, 0.0)
        tri, rows = _triangle(cols, ptrs, values.shape[0], uplo == "L")
        gv = torch.where(tri, gij + torch.where(cols != rows, gji, torch.zeros_like(gji)), torch.zeros_like(gij))
    return gv, None, None, None, gx, None, None


SPMV_SYMMETRIC.backward(_spmv_symmetric_backward, formula="dx = conj(alpha) conj(S) g; d values = conj(alpha) "
                        "(G[i, j] + G[j, i]) on the stored triangle, G = g x^H",
                        runs="one `trnsparse.spmv_symmetric` call and two `trnsparse.sddmm` calls")


def _spsv_backward(inputs, output, g, needs):
    values, cols, ptrs, n, B, lower, unit, trans = inputs[:8]
    cplx = values.is_complex() or B.is_complex()
    X = output
    # op(T) X = B: dB = op(T)^{-H} g, the solve with the other op of conj(T)
    dB = SPSV(values.conj() if cplx else values, cols, ptrs, n, g.contiguous(), lower, unit, not trans)
    gv = None
    if needs[0]:
        d2 = dB[:, None] if dB.dim() == 1 else dB
        x2 = X[:, None] if X.dim() == 1 else X
        xc = x2.conj() if cplx else x2
        # d T = -dB X^H (op = N) or -conj(X) dB^T (op = T), read on T's stored triangle
        gv = (SDDMM(cols, ptrs, values, d2.contiguous(), xc.mT.contiguous(), -1.0, 0.0) if not trans else
              SDDMM(cols, ptrs, values, xc.contiguous(), d2.mT.contiguous(), -1.0, 0.0))
        tri, rows = _triangle(cols, ptrs, values.shape[0], lower, strict=unit)
        gv = torch.where(tri, gv, torch.zeros_like(gv))
    return gv, None, None, None, (dB if needs[4] else None), None, None, None


SPSV.backward(_spsv_backward, formula="dB = op(T)^{-H} g; d values = -dB X^H (op = N) or -conj(X) dB^T (op = T) "
              "on the triangle read", runs="one `trnsparse.spsv` call (the other op) and one `trnsparse.sddmm`")


def _sddmm_backward(inputs, output, g, needs):
    cols, ptrs, values, X, Y, alpha, beta = inputs[:7]
    cplx = X.is_complex() or values.is_complex()
    ca = alpha.conjugate() if cplx else alpha
    m, n = X.shape[0], Y.shape[1]
    g = g.contiguous()
    gv = gX = gY = None
    if needs[2]:
        gv = g * (beta.conjugate() if cplx else beta)
    if needs[3]:  # dX = conj(alpha) G Y^H, G the CSR matrix of the incoming values
        gX = SPMM(g, cols, ptrs, (m, n), (Y.conj() if cplx else Y).mT.contiguous(), ca, None, 0.0)
    if needs[4]:  # dY = conj(alpha) X^H G = conj(alpha) (G^H X)^H
        vt, ct, pt = _transpose_csr(g.conj() if cplx else g, cols, ptrs, (m, n))
        GX = SPMM(vt, ct, pt, (n, m), X.contiguous(), 1.0, None, 0.0)
        gY = (GX.conj() if cplx else GX).mT * ca
    return None, None, gv, gX, gY, None, None


SDDMM.backward(_sddmm_backward, formula="dX = conj(alpha) G Y^H; dY = conj(alpha) X^H G (G: the incoming values on "
               "the pattern); d values = conj(beta) g", runs="two `trnsparse.spmm` calls (G and G^T's arrays)")
