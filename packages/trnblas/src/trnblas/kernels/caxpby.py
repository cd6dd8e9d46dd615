"""Complex elementwise kernel: ``u = a x + b y`` (and ``w = c x + d y``) with complex coefficients.

The complex counterpart of :mod:`trnblas.kernels.axpby` for complex64 data
and complex coefficients (``caxpy``, ``cscal``, ``crot`` with complex
``s``, complex ``geam``), computed natively on interleaved parts: no
host-side splitting, each operand read once.

Dimensions
----------
``x``, ``y`` : ``[2 n]`` float32, the interleaved real views of complex64
               vectors (``y`` may be None).
``coef``     : ``[1, 8]`` float32, ``(Re a, Im a, Re b, Im b, Re c, Im c, Re d, Im d)``.
Constants ``form = (kind b, kind d)`` (:data:`~trnblas.kernels.axpby.ZERO`,
``ONE`` for ``1 + 0j``, ``GENERAL``) and ``pair`` (bool). The values are
data (one compiled kernel for every alpha), broadcast to the partitions by
:func:`trnblas.kernels.axpby.load_coefficients`.
Output ``u`` (and ``w``) : ``[2 n]`` float32, interleaved.

The coefficients are compile-time constants (as in the emulator, which
takes them as kernel constants): on hardware each distinct value is one
more compilation of the kernel. Loops that vary alpha per call would want
them as a small HBM tensor broadcast to the partitions instead (a known
follow-up, not needed by BLAS's usual fixed-alpha calls).

Layout: the pieces of :func:`trnblas.kernels.axpby.pieces` over the ``n``
complex elements, every column doubled (a complex element's two parts
always share a partition): ``[128, 2 f]`` chunks of the first ``128 (n //
128)`` elements, then a ``[1, 2 r]`` tail. The real and imaginary parts
of a tile are its even and odd columns (strided SBUF views).

Pseudocode
----------
Per piece and output, on the Vector Engine (``ar`` = Re a, ... as
per-partition scalar columns)::

    t  = xi * ai ;   ur = xr * ar - t                  (2)
    t  = xr * ai ;   ui = xi * ar + t                  (2)
    with y, b == 1:  ur += yr ; ui += yi               (+2)
    with y, general: t2 = yi * bi ; t2 = yr * br - t2 ; ur += t2
                     t2 = yr * bi ; t2 = yi * br + t2 ; ui += t2   (+6)

Closed forms (np pieces, ni = 1 + (y given), no = 1 + pair; v(b) = 4,
6 or 10 instructions per output as above)
------------------------------------------------------------------------
    HBM bytes read    = 8 n ni + 32     each input read once, plus the coefficient row
    HBM bytes written = 8 n no
    DMA transfers     = np (ni + no) + 1
    Vector instructions = np (v(b) + pair * v(d)) + 2
    Tensor Engine instructions = 1      (the coefficient broadcast)
"""

from trnblas.kernels.axpby import ONE, ZERO, load_coefficients, pieces
from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX


def complex_piece_view(x, n, kind, c0, cols):
    """The HBM view of one piece (columns doubled) of the interleaved ``[2 n]`` tensor."""
    q = n // PMAX
    if kind == 0:
        return x[0:2 * PMAX * q].reshape((PMAX, 2 * q))[:, 2 * c0:2 * (c0 + cols)]
    return x[2 * PMAX * q:2 * n].reshape((1, 2 * (n - PMAX * q)))


def clincomb_instructions(kb, has_y):
    """Vector instructions per output for ``a x + b y`` (``kb`` the kind of ``b``)."""
    if not has_y or kb == ZERO:
        return 4
    return 6 if kb == ONE else 10


def _clincomb(dst, t, t2, xt, yt, cs, j, kb):
    """``a x + b y`` into ``dst``; ``a`` = (cs[:, 2j], cs[:, 2j+1]), ``b`` the next pair."""
    rows = xt.shape[0]
    ar, ai = cs[0:rows, 2 * j:2 * j + 1], cs[0:rows, 2 * j + 1:2 * j + 2]
    xr, xi = xt[:, 0::2], xt[:, 1::2]
    ur, ui = dst[:, 0::2], dst[:, 1::2]
    nisa.tensor_scalar(t, xi, nl.multiply, ai)
    nisa.scalar_tensor_tensor(ur, xr, nl.multiply, ar, nl.subtract, t)
    nisa.tensor_scalar(t, xr, nl.multiply, ai)
    nisa.scalar_tensor_tensor(ui, xi, nl.multiply, ar, nl.add, t)
    if yt is None or kb == ZERO:
        return
    yr, yi = yt[:, 0::2], yt[:, 1::2]
    if kb == ONE:
        nisa.tensor_tensor(ur, ur, yr, nl.add)
        nisa.tensor_tensor(ui, ui, yi, nl.add)
        return
    br, bi = cs[0:rows, 2 * j + 2:2 * j + 3], cs[0:rows, 2 * j + 3:2 * j + 4]
    nisa.tensor_scalar(t2, yi, nl.multiply, bi)
    nisa.scalar_tensor_tensor(t2, yr, nl.multiply, br, nl.subtract, t2)
    nisa.tensor_tensor(ur, ur, t2, nl.add)
    nisa.tensor_scalar(t2, yr, nl.multiply, bi)
    nisa.scalar_tensor_tensor(t2, yi, nl.multiply, br, nl.add, t2)
    nisa.tensor_tensor(ui, ui, t2, nl.add)


def caxpby_counts(n, form, has_y, pair):
    """The closed forms above as a dict (``n`` complex elements, ``form = (kind b, kind d)``)."""
    kb, kd = form
    npc = len(pieces(n))
    ni, no = 1 + bool(has_y), 1 + bool(pair)
    vec = clincomb_instructions(kb, has_y) + (clincomb_instructions(kd, has_y) if pair else 0)
    return {"hbm_read_bytes": 8 * n * ni + 32, "hbm_write_bytes": 8 * n * no, "dma": npc * (ni + no) + 1,
            "vector": npc * vec + 2, "tensor": 1}


@nki.jit
def caxpby_kernel(x, y, coef, form, pair=False):
    """Complex ``u = a x + b y`` (and ``w = c x + d y``) on interleaved float32 views [2n]; coef [1, 8]."""
    n = x.shape[0] // 2
    kb, kd = form
    cs = load_coefficients(coef)
    u = nl.ndarray((2 * n,), dtype=nl.float32, buffer=nl.shared_hbm)
    w = nl.ndarray((2 * n,), dtype=nl.float32, buffer=nl.shared_hbm) if pair else None
    for kind, c0, rows, cols in pieces(n):
        xt = nl.ndarray((rows, 2 * cols), dtype=nl.float32, buffer=nl.sbuf, name="x_tile")
        nisa.dma_copy(dst=xt, src=complex_piece_view(x, n, kind, c0, cols))
        yt = None
        if y is not None:
            yt = nl.ndarray((rows, 2 * cols), dtype=nl.float32, buffer=nl.sbuf, name="y_tile")
            nisa.dma_copy(dst=yt, src=complex_piece_view(y, n, kind, c0, cols))
        t = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf, name="scratch")
        t2 = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf, name="scratch2")
        ut = nl.ndarray((rows, 2 * cols), dtype=nl.float32, buffer=nl.sbuf, name="u_tile")
        _clincomb(ut, t, t2, xt, yt, cs, 0, kb)
        nisa.dma_copy(dst=complex_piece_view(u, n, kind, c0, cols), src=ut)
        if pair:
            wt = nl.ndarray((rows, 2 * cols), dtype=nl.float32, buffer=nl.sbuf, name="w_tile")
            _clincomb(wt, t, t2, xt, yt, cs, 2, kd)
            nisa.dma_copy(dst=complex_piece_view(w, n, kind, c0, cols), src=wt)
    if pair:
        return u, w
    return u
