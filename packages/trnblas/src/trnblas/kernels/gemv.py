"""GEMV kernel: ``y = op(A) x`` for a row-major ``A [m, n]``, memory-bound, ``A`` read once.

Dimensions
----------
``a`` : ``[m, n]`` float32 or bfloat16, row-major (rows on partitions).
``x`` : ``[m]`` when ``trans``, else ``[n]``; ``a``'s dtype.
Constant ``trans`` (bool). Output ``y`` : ``[n]`` (trans) or ``[m]`` float32
(the host applies alpha, beta and the output dtype, as for GEMM).

Two engines, chosen by which dimension the contraction runs over:

``trans=True``, ``y = A^T x`` (contraction over the rows = partitions):
the Tensor Engine. ``x`` is loaded once into a resident ``[128, tm]`` tile
(column ``t`` holds ``x[128 t : 128 t + 128]``); for each ``<=512``-column
tile of ``A`` the ``tm`` row tiles are moving operands against the
1-column stationary ``x`` tile, accumulated in one PSUM row ``[1, <=512]``::

    for nt: for mt: psum[0, :] += x_t^T A[mt, nt]     (nc_matmul, K = rows)
            y[nt] = psum                              (copy, store)

``trans=False``, ``y = A x`` (contraction over the columns = free dim):
the Vector Engine. ``x`` is read once as a ``[1, n]`` row and replicated to
all 128 partitions by the Tensor Engine (``ones[1, 128]^T x``, one matmul
per 512 columns) into a resident ``[128, n]`` fp32 tile (``n <=``
:data:`MAX_N`); then each ``[<=128, <=2048]`` tile of ``A`` is multiplied by
it and summed along the free dim::

    xrep = ones^T x                                    (tn matmuls + tn copies)
    for mt: for ft: t = A[mt, ft] * xrep                (Vector)
                    part[:, ft] = sum_f t                (Scalar: activation_reduce)
            y[mt] = sum_ft part  (when nf > 1);  store

The multiply and the sum run on two engines, one pass each, so neither
makes two passes over A.

Closed forms (s = bytes per element; tm = ceil(m/128), tn = ceil(n/512),
nf = ceil(n/2048))
----------------------------------------------------------------------------
trans=True:
    HBM bytes read    = s * (m n + m)        A once, x once
    HBM bytes written = 4 n
    Tensor Engine instructions = tm * tn;  Vector = tn
    DMA transfers     = tm + tm * tn + tn
trans=False:
    HBM bytes read    = s * (m n + n)
    HBM bytes written = 4 m
    Tensor Engine instructions = tn;  Vector = 1 + tn + tm * (nf + (nf > 1))
                      (the 1 is the memset of the ones row);  Scalar = 2 tm nf
    DMA transfers     = 1 + tm * nf + tm
Both are the analytic minimum (each operand read once) up to the fp32
result (``4 * len(y)`` instead of ``s * len(y)``).

Triangles (``tri``): a square ``a`` read as one of its triangles, the other
entries taken as zero -- trmv and symv on ``A`` as given, without a host pass
forming the triangle or the symmetric matrix. ``tri`` is ``"upper"``
(``c >= r``), ``"lower"`` (``c <= r``), ``"strict_upper"`` (``c > r``) or
``"strict_lower"`` (``c < r``) of ``a[r, c]``; every loaded tile goes through
one GpSimd ``affine_select`` (value ``(c0 - r0) + i - p`` against 0) before
it is used, so the counters above gain ``GpSimd = tm tn`` (trans) or
``tm nf`` (not trans); everything else is unchanged.

Pseudocode
----------
Trans, with ``tri``::

    for nt: for mt: A_t = load A[mt, nt]; A_t = select(tri(r, c), A_t, 0)   (GpSimd)
                    psum[0, :] += x_t^T A_t
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import MOVING_FMAX, PMAX, cdiv, ntiles, tile

F = 2048  # Vector Engine free-dim chunk (trans=False)
TN = MOVING_FMAX  # 512: PSUM row width (trans=True) and replication width
#: Longest x for trans=False: the replicated [128, n] fp32 tile takes n*4 bytes per partition.
MAX_N = 24576


def fits(m, n, trans):
    """True when the kernel's SBUF plan holds this GEMV."""
    return bool(trans) or n <= MAX_N


#: ``tri`` -> (affine sign on the tile's column index, comparison with 0) of the kept entries a[r, c]
TRIANGLES = {"upper": (1, "greater_equal"), "strict_upper": (1, "greater"),
             "lower": (-1, "greater_equal"), "strict_lower": (-1, "greater")}


def gemv_counts(m, n, itemsize, trans, tri=None):
    """The closed forms above as a dict (what the emulator must count)."""
    tm, tn, nf = cdiv(m, PMAX), cdiv(n, TN), cdiv(n, F)
    if trans:
        out = {"hbm_read_bytes": itemsize * (m * n + m), "hbm_write_bytes": 4 * n,
               "tensor": tm * tn, "vector": tn, "dma": tm + tm * tn + tn, "flops": 2 * m * n}
        if tri:
            out["gpsimd"] = tm * tn
        return out
    out = {"hbm_read_bytes": itemsize * (m * n + n), "hbm_write_bytes": 4 * m,
           "tensor": tn, "vector": 1 + tn + tm * (nf + (nf > 1)), "scalar": 2 * tm * nf, "dma": 1 + tm * nf + tm,
           "flops": 2 * PMAX * n}
    if tri:
        out["gpsimd"] = tm * nf
    return out


def _keep(tile, r0, c0, tri):
    """Zero the entries of an [rows, cols] tile of a[r0:, c0:] outside triangle ``tri`` (in place, GpSimd)."""
    sign, cmp = TRIANGLES[tri]
    rows, cols = tile.shape
    nisa.affine_select(tile, [[sign, cols]], -sign, tile, 0.0, cmp_op=getattr(nl, cmp), offset=sign * (c0 - r0))


@nki.jit
def gemv_kernel(a, x, trans, tri=None):
    """``y = a^T x`` (trans) or ``a x``: a [m, n], x [m] or [n] -> y fp32 (``tri``: one triangle of a square a)."""
    m, n = a.shape
    tm = cdiv(m, PMAX)
    if trans:
        y = nl.ndarray((n,), dtype=nl.float32, buffer=nl.shared_hbm)
        xs = nl.ndarray((PMAX, tm), dtype=x.dtype, buffer=nl.sbuf, name="x_resident")
        for mt in nl.static_range(tm):
            m0, mm = tile(mt, m, PMAX)
            nisa.dma_copy(dst=xs[0:mm, mt:mt + 1], src=x[m0:m0 + mm].reshape((mm, 1)))
        for nt in nl.static_range(ntiles(n, TN)):
            n0, nn = tile(nt, n, TN)
            acc = nl.ndarray((1, nn), dtype=nl.float32, buffer=nl.psum, name="y_row")
            for mt in nl.static_range(tm):
                m0, mm = tile(mt, m, PMAX)
                at = nl.ndarray((mm, nn), dtype=a.dtype, buffer=nl.sbuf, name="a_tile")
                nisa.dma_copy(dst=at, src=a[m0:m0 + mm, n0:n0 + nn])
                if tri:
                    _keep(at, m0, n0, tri)
                nisa.nc_matmul(acc, xs[0:mm, mt:mt + 1], at)
            row = nl.ndarray((1, nn), dtype=nl.float32, buffer=nl.sbuf, name="y_sbuf")
            nisa.tensor_copy(row, acc)
            nisa.dma_copy(dst=y[n0:n0 + nn].reshape((1, nn)), src=row)
        return y
    y = nl.ndarray((m,), dtype=nl.float32, buffer=nl.shared_hbm)
    xrow = nl.ndarray((1, n), dtype=x.dtype, buffer=nl.sbuf, name="x_row")
    nisa.dma_copy(dst=xrow, src=x.reshape((1, n)))
    ones = nl.ndarray((1, PMAX), dtype=x.dtype, buffer=nl.sbuf, name="ones")
    nisa.memset(ones, 1.0)
    xrep = nl.ndarray((PMAX, n), dtype=nl.float32, buffer=nl.sbuf, name="x_replicated")
    for nt in nl.static_range(ntiles(n, TN)):
        n0, nn = tile(nt, n, TN)
        ps = nl.ndarray((PMAX, nn), dtype=nl.float32, buffer=nl.psum, name="x_bcast")
        nisa.nc_matmul(ps, ones, xrow[0:1, n0:n0 + nn])
        nisa.tensor_copy(xrep[:, n0:n0 + nn], ps)
    nf = cdiv(n, F)
    for mt in nl.static_range(tm):
        m0, mm = tile(mt, m, PMAX)
        part = nl.ndarray((mm, nf), dtype=nl.float32, buffer=nl.sbuf, name="row_partials")
        for ft in nl.static_range(nf):
            f0, ff = tile(ft, n, F)
            at = nl.ndarray((mm, ff), dtype=a.dtype, buffer=nl.sbuf, name="a_tile")
            nisa.dma_copy(dst=at, src=a[m0:m0 + mm, f0:f0 + ff])
            if tri:
                _keep(at, m0, f0, tri)
            t = nl.ndarray((mm, ff), dtype=nl.float32, buffer=nl.sbuf, name="products")
            nisa.tensor_tensor(t, at, xrep[0:mm, f0:f0 + ff], nl.multiply)
            nisa.activation_reduce(t, nl.copy, t, nl.add, part[:, ft:ft + 1])
        if nf > 1:
            col = nl.ndarray((mm, 1), dtype=nl.float32, buffer=nl.sbuf, name="y_col")
            nisa.tensor_reduce(col, nl.add, part, axis=1)
        else:
            col = part
        nisa.dma_copy(dst=y[m0:m0 + mm].reshape((mm, 1)), src=col)
    return y
