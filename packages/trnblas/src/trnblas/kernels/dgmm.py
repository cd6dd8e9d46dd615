"""DGMM kernel: ``C = diag(x) A`` (side left) or ``C = A diag(x)`` (side right) on the Vector Engine.

Dimensions
----------
``a`` : ``[m, n]`` float32, bfloat16 or float16, row-major (rows on partitions).
``x`` : ``[m]`` (left) or ``[n]`` (right), ``a``'s dtype.
Constant ``left`` (bool). Output ``c`` : ``[m, n]`` in ``a``'s dtype (fp32
arithmetic, one rounding).

Left: each row is scaled by its own ``x_i``, a per-partition scalar: one
``tensor_scalar`` per ``[<=128, <=2048]`` tile with the ``[rows, 1]`` slice
of ``x`` as operand (``x`` loaded once as a ``[128, tm]`` resident tile).
Right: every row is multiplied elementwise by ``x``, so ``x`` is read once
as a ``[1, n]`` row and replicated to all partitions by the Tensor Engine
(``ones[1, 128]^T x``, one matmul per 512 columns, as in the GEMV kernel);
then one ``tensor_tensor`` per tile.

Pseudocode
----------
::

    left : for mt, ft: C[mt, ft] = A[mt, ft] * xcol[mt]
    right: xrep = ones^T x;  for mt, ft: C[mt, ft] = A[mt, ft] * xrep[:, ft]

Closed forms (s = bytes per element, tm = ceil(m/128), nf = ceil(n/2048),
tn = ceil(n/512))
------------------------------------------------------------------------
    HBM bytes read    = s (m n + len x)      each operand once
    HBM bytes written = s m n
    left : Vector = tm nf;             DMA = tm + 2 tm nf;   Tensor = 0
    right: Vector = 1 + tn + tm nf;    DMA = 1 + 2 tm nf;    Tensor = tn
Right side needs ``n <=`` :data:`MAX_N` (the replicated row, 4n bytes per partition).
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import MOVING_FMAX, PMAX, cdiv, ntiles, tile

F = 2048
TN = MOVING_FMAX
MAX_N = 24576


def fits(m, n, left):
    return bool(left) or n <= MAX_N


def dgmm_counts(m, n, itemsize, left):
    """The closed forms above as a dict (what the emulator must count)."""
    tm, nf, tn = cdiv(m, PMAX), cdiv(n, F), cdiv(n, TN)
    base = {"hbm_read_bytes": itemsize * (m * n + (m if left else n)), "hbm_write_bytes": itemsize * m * n}
    if left:
        return {**base, "vector": tm * nf, "dma": tm + 2 * tm * nf, "tensor": 0}
    return {**base, "vector": 1 + tn + tm * nf, "dma": 1 + 2 * tm * nf, "tensor": tn}


@nki.jit
def dgmm_kernel(a, x, left):
    """``diag(x) a`` (left) or ``a diag(x)``: a [m, n] -> C [m, n] in a's dtype."""
    m, n = a.shape
    tm = cdiv(m, PMAX)
    c = nl.ndarray((m, n), dtype=a.dtype, buffer=nl.shared_hbm)
    if left:
        xs = nl.ndarray((PMAX, tm), dtype=nl.float32, buffer=nl.sbuf, name="x_columns")
        for mt in nl.static_range(tm):
            m0, mm = tile(mt, m, PMAX)
            nisa.dma_copy(dst=xs[0:mm, mt:mt + 1], src=x[m0:m0 + mm].reshape((mm, 1)))
    else:
        xrow = nl.ndarray((1, n), dtype=x.dtype, buffer=nl.sbuf, name="x_row")
        nisa.dma_copy(dst=xrow, src=x.reshape((1, n)))
        ones = nl.ndarray((1, PMAX), dtype=x.dtype, buffer=nl.sbuf, name="ones")
        nisa.memset(ones, 1.0)
        xs = nl.ndarray((PMAX, n), dtype=nl.float32, buffer=nl.sbuf, name="x_replicated")
        for nt in nl.static_range(ntiles(n, TN)):
            n0, nn = tile(nt, n, TN)
            ps = nl.ndarray((PMAX, nn), dtype=nl.float32, buffer=nl.psum, name="x_bcast")
            nisa.nc_matmul(ps, ones, xrow[0:1, n0:n0 + nn])
            nisa.tensor_copy(xs[:, n0:n0 + nn], ps)
    for mt in nl.static_range(tm):
        m0, mm = tile(mt, m, PMAX)
        for ft in nl.static_range(ntiles(n, F)):
            f0, ff = tile(ft, n, F)
            at = nl.ndarray((mm, ff), dtype=a.dtype, buffer=nl.sbuf, name="a_tile")
            nisa.dma_copy(dst=at, src=a[m0:m0 + mm, f0:f0 + ff])
            ct = nl.ndarray((mm, ff), dtype=a.dtype, buffer=nl.sbuf, name="c_tile")
            if left:
                nisa.tensor_scalar(ct, at, nl.multiply, xs[0:mm, mt:mt + 1])
            else:
                nisa.tensor_tensor(ct, at, xs[0:mm, f0:f0 + ff], nl.multiply)
            nisa.dma_copy(dst=c[m0:m0 + mm, f0:f0 + ff], src=ct)
    return c
