"""Vector reduction kernel: per-partition partials of ``dot``, ``asum``, ``nrm2``, ``iamax``, ``iamin``.

Dimensions
----------
``x`` : ``[n]`` float32, bfloat16 or float16 (contiguous).
``y`` : ``[n]`` same dtype for ``op="dot"``, else None.
Constant ``op`` in ``{"dot", "asum", "nrm2", "amax", "amin", "camax", "camin"}``;
``camax``/``camin`` take ``x`` as the interleaved ``[2 n]`` float32 view of
a complex64 vector and rank its ``n`` elements by BLAS's complex magnitude
``|Re| + |Im|`` (pieces as in :mod:`trnblas.kernels.caxpby`: columns
doubled, parts as even/odd strided views).
Output ``part`` : ``[128, k * np]`` float32, ``k = 1`` (dot, asum) or 2
(nrm2, amax, amin) columns per piece; ``np`` pieces as in
:func:`trnblas.kernels.axpby.pieces` (``[128, <=2048]`` chunks of the first
``128 (n // 128)`` elements, then a ``[1, r]`` tail). Rows of a piece that
does not use them hold the op's identity.

The host combines the ``128 k np`` partials in float64 (at most 0.4% of
the bytes read: ``k np / (n/128)`` 4-byte values against ``n``
elements): a sum for ``dot``/``asum``; for ``nrm2`` the scaled partials
below; for ``amax``/``amin`` the best value and the smallest index
holding it.

Pseudocode
----------
Per piece (p = 128 or 1 rows, f columns); V = Vector, S = Scalar (Activation),
G = GpSimd instructions, balanced so that no engine makes more than one
full pass over the piece per input where it can be avoided::

    dot : t = x*y (V);  part[:, j] = sum_f t  (S: activation_reduce)       V 1, S 2
    asum: part[:, j] = sum_f |x|  (V: tensor_scalar_reduce)                V 1
    nrm2: m = max_f |x| (V); s = 1/max(m, 2^-126) (V, one column)
          part[:, 2j] = s;  part[:, 2j+1] = sum_f (s x)^2  (S)             V 2, S 2
    amax: m = max_f |x| -> part[:, 2j] (V; min_f for amin)
          e = (|x| == m) (V); i = iota(global index) (G)
          c = (i - 2^24) * e (V); part[:, 2j+1] = min_f (c + 2^24) (V)     V 4, G 1
    camax: a = |xr| (V) + |xi| (S, then V add); m = max_f a (V); then as
          amax from e = (a == m) on                                    V 6, S 1, G 1

(an ``activation_reduce`` is two Scalar instructions: the pass and the
read-out of the accumulation registers).

``nrm2`` is reference BLAS's scaled sum of squares, per partition and
piece: ``sum x^2 = ss / s^2`` with every scaled entry ``|x| s <= 1``, so
squares neither overflow nor (for entries within 2^63 of the piece's
largest) underflow; the host adds ``ss_j / s_j^2`` in float64, whose range
covers every fp32 square. An Inf entry gives ``s = 0`` and a NaN gives
``s = NaN``; the host maps those to Inf and NaN (NaN first), as
:func:`torch.linalg.vector_norm`. ``amax``/``amin``: the candidate of a row
is its first index reaching the row's extreme (indices < 2^24 are exact in
fp32; the host routes longer vectors to torch); a NaN makes the row's
extreme NaN and the host then finds the first NaN itself (one host pass).

Closed forms (s = bytes per element; V, S, G per piece as above; k columns
per piece)
--------------------------------------------------------------------------
    HBM bytes read    = s * n * (1 + (op == "dot"))    each input read once
    HBM bytes written = 4 * 128 * k * np
    DMA transfers     = np * (1 + (op == "dot")) + 1
    Vector instructions = np * V + k       (the k memsets of the identity)
    Scalar instructions = np * S;  GpSimd instructions = np * G
"""

from trnblas.kernels.axpby import piece_view, pieces
from trnblas.kernels.caxpby import complex_piece_view
from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX

OPS = ("dot", "asum", "nrm2", "amax", "amin", "camax", "camin")
COLUMNS = {"dot": 1, "asum": 1, "nrm2": 2, "amax": 2, "amin": 2, "camax": 2, "camin": 2}
#: (Vector, Scalar, GpSimd) instructions per piece.
_PER_PIECE = {"dot": (1, 2, 0), "asum": (1, 0, 0), "nrm2": (2, 2, 0), "amax": (4, 0, 1), "amin": (4, 0, 1),
              "camax": (6, 1, 1), "camin": (6, 1, 1)}
TINY = 2.0 ** -126  # smallest normal fp32: the reciprocal of a zero row's scale stays finite
BIG = float(2 ** 24)  # index sentinel; indices below it are exact in fp32
MAX_INDEX = 2 ** 24


def _identity(op):
    """The memset values of the partial columns (value column, index column)."""
    return {"dot": (0.0,), "asum": (0.0,), "nrm2": (1.0, 0.0), "amax": (-1.0, BIG), "amin": (float("inf"), BIG),
            "camax": (-1.0, BIG), "camin": (float("inf"), BIG)}[op]


def vreduce_counts(n, itemsize, op):
    """The closed forms above as a dict (what the emulator must count; camax/camin: n complex elements)."""
    npc = len(pieces(n))
    if op in ("camax", "camin"):
        n, itemsize = 2 * n, 4  # bytes: both parts
    ni = 2 if op == "dot" else 1
    k = COLUMNS[op]
    v, sc, g = _PER_PIECE[op]
    return {"hbm_read_bytes": itemsize * n * ni, "hbm_write_bytes": 4 * PMAX * k * npc,
            "dma": npc * ni + 1, "vector": npc * v + k, "scalar": npc * sc, "gpsimd": npc * g, "tensor": 0}


@nki.jit
def vreduce_kernel(x, y, op):
    """Vector reduction: per-partition partials of ``op`` over x (and y): -> part [128, k * pieces] fp32."""
    cplx = op in ("camax", "camin")
    n = x.shape[0] // 2 if cplx else x.shape[0]
    q = n // PMAX
    k = COLUMNS[op]
    plist = pieces(n)
    npc = len(plist)
    part = nl.ndarray((PMAX, k * npc), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((PMAX, k * npc), dtype=nl.float32, buffer=nl.sbuf, name="partials")
    ident = _identity(op)
    if k == 1:
        nisa.memset(res, ident[0])
    else:  # column 2j: value (or scale), column 2j+1: sum of squares (or index)
        res2 = res.reshape((PMAX, npc, 2))
        nisa.memset(res2[:, :, 0:1], ident[0])
        nisa.memset(res2[:, :, 1:2], ident[1])
    for j, (kind, c0, rows, cols) in enumerate(plist):
        t = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf, name="work")
        if cplx:  # |Re| + |Im| of each complex element: the magnitude BLAS ranks by
            xt = nl.ndarray((rows, 2 * cols), dtype=x.dtype, buffer=nl.sbuf, name="x_tile")
            nisa.dma_copy(dst=xt, src=complex_piece_view(x, n, kind, c0, cols))
            t2 = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf, name="work2")
            nisa.tensor_scalar(t, xt[:, 0::2], nl.abs, None)
            nisa.activation(t2, nl.abs, xt[:, 1::2])
            nisa.tensor_tensor(t, t, t2, nl.add)
        else:
            xt = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf, name="x_tile")
            nisa.dma_copy(dst=xt, src=piece_view(x, n, kind, c0, cols))
        if op == "dot":
            yt = nl.ndarray((rows, cols), dtype=y.dtype, buffer=nl.sbuf, name="y_tile")
            nisa.dma_copy(dst=yt, src=piece_view(y, n, kind, c0, cols))
            nisa.tensor_tensor(t, xt, yt, nl.multiply)
            nisa.activation_reduce(t, nl.copy, t, nl.add, res[0:rows, j:j + 1])
            continue
        if op == "asum":
            nisa.tensor_scalar_reduce(t, xt, nl.abs, None, nl.add, res[0:rows, j:j + 1])
            continue
        val = res[0:rows, 2 * j:2 * j + 1]
        aux = res[0:rows, 2 * j + 1:2 * j + 2]
        if op == "nrm2":
            m = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf, name="row_max")
            nisa.tensor_scalar_reduce(t, xt, nl.abs, None, nl.maximum, m)
            nisa.tensor_scalar(val, m, nl.maximum, TINY, op1=nl.reciprocal, operand1=None)
            nisa.activation_reduce(t, nl.square, xt, nl.add, aux, scale=val)
            continue
        extreme = nl.maximum if op in ("amax", "camax") else nl.minimum
        if cplx:
            nisa.tensor_reduce(val, extreme, t, axis=1)
        else:
            nisa.tensor_scalar_reduce(t, xt, nl.abs, None, extreme, val)
        eq = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf, name="hit")
        nisa.tensor_scalar(eq, t, nl.equal, val)
        idx = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf, name="index")
        if kind == 0:
            nisa.iota(idx, [[1, cols]], offset=c0, channel_multiplier=q)
        else:
            nisa.iota(idx, [[1, cols]], offset=PMAX * q, channel_multiplier=0)
        nisa.scalar_tensor_tensor(t, idx, nl.subtract, BIG, nl.multiply, eq)
        nisa.tensor_scalar_reduce(t, t, nl.add, BIG, nl.minimum, aux)
    nisa.dma_copy(dst=part, src=res)
    return part
