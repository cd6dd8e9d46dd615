"""Elementwise vector kernel: ``u = a x + b y`` (and optionally ``w = c x + d y``) on the Vector Engine.

One kernel serves every level-1 routine that writes vectors: ``axpy``
(``a = alpha, b = 1``), ``scal`` (no ``y``), ``copy`` (no ``y``, ``a = 1``),
``swap`` (pair: ``u = y, w = x``), ``rot`` (pair: ``u = c x + s y,
w = c y - s x``) and ``geam`` (a matrix is a vector of ``m n`` elements).

Inputs (HBM)
------------
``x`` : ``[n]`` float32, bfloat16 or float16 (contiguous).
``y`` : ``[n]`` same dtype, or None (then ``b``, ``d`` are unused).
Constants ``coef = (a, b, c, d)`` (Python floats) and ``pair`` (bool).
Output ``u`` (and ``w`` when ``pair``) : ``[n]`` in ``x``'s dtype; the
Vector Engine computes in fp32 and rounds once into the output.

The coefficients are compile-time constants (as in the emulator, which
takes them as kernel constants): on hardware each distinct value is one
more compilation of the kernel. Loops that vary alpha per call would want
them as a small HBM tensor broadcast to the partitions instead (a known
follow-up, not needed by BLAS's usual fixed-alpha calls).

Layout (shared with :mod:`.vreduce`): with ``q = n // 128`` and
``r = n - 128 q``, the first ``128 q`` elements are viewed as ``[128, q]``
(partition ``p`` holds elements ``p q .. p q + q - 1``, one contiguous run
per partition) and cut into column chunks of ``F = 2048`` elements; the
last ``r`` elements are one ``[1, r]`` piece. So there are
``np = ceil(q / F) + (r > 0)`` pieces, every element is in exactly one,
and nothing is padded.

Pseudocode (per piece)::

    xt = load(x piece); yt = load(y piece)        (1 or 2 DMAs)
    u  = a*xt + b*yt                              (lincomb: 0, 1 or 2 instructions)
    w  = c*xt + d*yt   if pair
    store(u); store(w)

``lincomb`` costs 0 instructions when the result is one input unchanged
(``copy``; ``swap``), 1 when there is no ``y`` or its coefficient is 1
(``tensor_scalar`` / ``scalar_tensor_tensor``), else 2.

Closed forms (s = bytes per element, ni = 1 + (y given), no = 1 + pair)
-----------------------------------------------------------------------
    HBM bytes read    = s * n * ni          each input read once
    HBM bytes written = s * n * no          each output written once
    DMA transfers     = np * (ni + no)
    Vector instructions = np * (lincomb(a, b) + pair * lincomb(c, d))
    Tensor Engine instructions = 0
This is the analytic minimum traffic of the operation.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv

F = 2048  # free-dim chunk, elements per partition (8 KiB fp32)


def pieces(n):
    """``(kind, c0, rows, cols)`` of each piece of an ``n``-vector: kind 0 = a [128, q] chunk, 1 = the tail."""
    q, r = divmod(n, PMAX)
    out = [(0, c * F, PMAX, min(F, q - c * F)) for c in range(cdiv(q, F))]
    if r:
        out.append((1, 0, 1, r))
    return out


def piece_view(x, n, kind, c0, cols):
    """The HBM view of one piece of the 1-D tensor ``x`` (see :func:`pieces`)."""
    q = n // PMAX
    if kind == 0:
        return x[0:PMAX * q].reshape((PMAX, q))[:, c0:c0 + cols]
    return x[PMAX * q:n].reshape((1, n - PMAX * q))


def lincomb_instructions(a, b, has_y):
    """Vector instructions :func:`lincomb` issues for ``a x + b y``."""
    if not has_y or b == 0:
        return 0 if a == 1 else 1
    if a == 0:
        return 0 if b == 1 else 1
    return 1 if b == 1 else 2


def lincomb(dst, tmp, xt, yt, a, b):
    """``a xt + b yt`` into ``dst`` (``tmp`` scratch); returns the tile holding the result."""
    if yt is None or b == 0:
        if a == 1:
            return xt
        nisa.tensor_scalar(dst, xt, nl.multiply, float(a))
        return dst
    if a == 0:
        if b == 1:
            return yt
        nisa.tensor_scalar(dst, yt, nl.multiply, float(b))
        return dst
    if b != 1:
        nisa.tensor_scalar(tmp, yt, nl.multiply, float(b))
        yt = tmp
    nisa.scalar_tensor_tensor(dst, xt, nl.multiply, float(a), nl.add, yt)
    return dst


def axpby_counts(n, itemsize, coef, has_y, pair):
    """The closed forms above as a dict (what the emulator must count)."""
    a, b, c, d = coef
    npc = len(pieces(n))
    ni, no = 1 + bool(has_y), 1 + bool(pair)
    vec = lincomb_instructions(a, b, has_y) + (lincomb_instructions(c, d, has_y) if pair else 0)
    return {"hbm_read_bytes": itemsize * n * ni, "hbm_write_bytes": itemsize * n * no,
            "dma": npc * (ni + no), "vector": npc * vec, "tensor": 0}


@nki.jit
def axpby_kernel(x, y, coef, pair=False):
    """``u = a x + b y`` (and ``w = c x + d y`` when ``pair``): x, y [n] -> u (, w) [n] in x's dtype."""
    n = x.shape[0]
    a, b, c, d = coef
    u = nl.ndarray((n,), dtype=x.dtype, buffer=nl.shared_hbm)
    w = nl.ndarray((n,), dtype=x.dtype, buffer=nl.shared_hbm) if pair else None
    for kind, c0, rows, cols in pieces(n):
        xt = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf, name="x_tile")
        nisa.dma_copy(dst=xt, src=piece_view(x, n, kind, c0, cols))
        yt = None
        if y is not None:
            yt = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf, name="y_tile")
            nisa.dma_copy(dst=yt, src=piece_view(y, n, kind, c0, cols))
        tmp = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf, name="scratch")
        ut = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf, name="u_tile")
        res = lincomb(ut, tmp, xt, yt, a, b)
        nisa.dma_copy(dst=piece_view(u, n, kind, c0, cols), src=res)
        if pair:
            wt = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf, name="w_tile")
            res = lincomb(wt, tmp, xt, yt, c, d)
            nisa.dma_copy(dst=piece_view(w, n, kind, c0, cols), src=res)
    if pair:
        return u, w
    return u
