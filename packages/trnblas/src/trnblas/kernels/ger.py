"""Rank-1 / rank-2 update kernel: ``A + X^T Y`` with ``X [k, m]``, ``Y [k, n]``, ``k in {1, 2}``.

Serves ``ger``/``geru`` (``X = x``, ``Y = alpha y``), ``syr`` (``X = x``,
``Y = alpha x``) and ``syr2`` (``X = [x; y]``, ``Y = alpha [y; x]``: both
outer products in one matmul of contraction depth 2). The host keeps the
requested triangle for ``syr``/``syr2`` (the kernel updates the full matrix).

Dimensions
----------
``a``  : ``[m, n]`` float32 or bfloat16, or None (then ``A = 0``).
``xs`` : ``[k, m]``, ``ys`` : ``[k, n]`` in ``a``'s dtype (alpha already in ``ys``).
Output ``c`` : ``[m, n]`` in ``xs``'s dtype (fp32 PSUM, one rounding).

Pseudocode
----------
``xs`` and ``ys`` stay in SBUF (``k`` partitions; ``(m + n) s <=``
:data:`MAX_BYTES` per partition). For each ``[<=128, <=512]`` tile of C
one ``nc_matmul`` (stationary ``xs[:, rows]``, moving ``ys[:, cols]``,
contraction ``k``) writes the outer product into a PSUM bank; the Vector
Engine adds the ``A`` tile and the result is stored::

    for mt, nt: P = xs[:, mt]^T ys[:, nt]; C[mt, nt] = A[mt, nt] + P

Closed forms (s = bytes per element, tm = ceil(m/128), tn = ceil(n/512),
ha = 1 if a is given)
------------------------------------------------------------------------
    HBM bytes read    = s * (ha m n + k (m + n))     each operand once
    HBM bytes written = s * m n
    Tensor Engine instructions = tm * tn;  Vector = tm * tn
    DMA transfers     = 2 + (1 + ha) tm tn
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import MOVING_FMAX, PMAX, cdiv, ntiles, tile

TN = MOVING_FMAX
MAX_BYTES = 96 * 1024  # resident xs + ys, bytes per partition


def fits(m, n, itemsize):
    """True when the resident vectors fit the SBUF plan."""
    return (m + n) * itemsize <= MAX_BYTES


def ger_counts(m, n, k, itemsize, has_a):
    """The closed forms above as a dict (what the emulator must count)."""
    tm, tn = cdiv(m, PMAX), cdiv(n, TN)
    ha = int(bool(has_a))
    return {"hbm_read_bytes": itemsize * (ha * m * n + k * (m + n)), "hbm_write_bytes": itemsize * m * n,
            "tensor": tm * tn, "vector": tm * tn, "dma": 2 + (1 + ha) * tm * tn, "flops": 2 * k * m * n}


@nki.jit
def ger_kernel(a, xs, ys):
    """``a + xs^T ys``: a [m, n] (or None), xs [k, m], ys [k, n] -> C [m, n] in xs's dtype."""
    k, m = xs.shape
    n = ys.shape[1]
    c = nl.ndarray((m, n), dtype=xs.dtype, buffer=nl.shared_hbm)
    xr = nl.ndarray((k, m), dtype=xs.dtype, buffer=nl.sbuf, name="x_rows")
    yr = nl.ndarray((k, n), dtype=ys.dtype, buffer=nl.sbuf, name="y_rows")
    nisa.dma_copy(dst=xr, src=xs)
    nisa.dma_copy(dst=yr, src=ys)
    for mt in nl.static_range(ntiles(m, PMAX)):
        m0, mm = tile(mt, m, PMAX)
        for nt in nl.static_range(ntiles(n, TN)):
            n0, nn = tile(nt, n, TN)
            ps = nl.ndarray((mm, nn), dtype=nl.float32, buffer=nl.psum, name="outer")
            nisa.nc_matmul(ps, xr[:, m0:m0 + mm], yr[:, n0:n0 + nn])
            res = nl.ndarray((mm, nn), dtype=xs.dtype, buffer=nl.sbuf, name="c_tile")
            if a is not None:
                at = nl.ndarray((mm, nn), dtype=a.dtype, buffer=nl.sbuf, name="a_tile")
                nisa.dma_copy(dst=at, src=a[m0:m0 + mm, n0:n0 + nn])
                nisa.tensor_tensor(res, at, ps, nl.add)
            else:
                nisa.tensor_copy(res, ps)
            nisa.dma_copy(dst=c[m0:m0 + mm, n0:n0 + nn], src=res)
    return c
