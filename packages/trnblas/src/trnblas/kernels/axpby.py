"""Elementwise vector kernel: ``u = a x + b y`` (and optionally ``w = c x + d y``) on the Vector Engine.

One kernel serves every level-1 routine that writes vectors: ``axpy``
(``a = alpha, b = 1``), ``scal`` (no ``y``), ``copy`` (no ``y``, ``a = 1``),
``swap`` (pair: ``u = y, w = x``), ``rot`` (pair: ``u = c x + s y,
w = c y - s x``) and ``geam`` (a matrix is a vector of ``m n`` elements).

Dimensions
----------
``x``    : ``[n]`` float32, bfloat16 or float16 (contiguous).
``y``    : ``[n]`` same dtype, or None (then ``b``, ``d`` are unused).
``coef`` : ``[1, 4]`` float32, the values ``(a, b, c, d)``.
Constants ``form`` (four of :data:`ZERO`, :data:`ONE`, :data:`GENERAL`: which
coefficients are 0, 1 or anything else -- the host derives it from the
values) and ``pair`` (bool).
Output ``u`` (and ``w`` when ``pair``) : ``[n]`` in ``x``'s dtype; the
Vector Engine computes in fp32 and rounds once into the output.

The coefficient *values* are data, so a loop that changes alpha every call
(a Krylov solver) reuses one compiled kernel; only the ``form`` is a
compile-time constant (a handful of forms cover BLAS). When a coefficient
is general, the ``[1, 4]`` row is broadcast to all 128 partitions once per
call by the Tensor Engine (``ones[1, 128]^T coef``: one DMA, one memset,
one matmul, one PSUM copy) and each coefficient is then a per-partition
scalar column ``cs[:, i]`` of the Vector Engine's ``tensor_scalar`` /
``scalar_tensor_tensor``.

Layout (shared with :mod:`.vreduce`): with ``q = n // 128`` and
``r = n - 128 q``, the first ``128 q`` elements are viewed as ``[128, q]``
(partition ``p`` holds elements ``p q .. p q + q - 1``, one contiguous run
per partition) and cut into column chunks of ``F = 2048`` elements; the
last ``r`` elements are one ``[1, r]`` piece. So there are
``np = ceil(q / F) + (r > 0)`` pieces, every element is in exactly one,
and nothing is padded.

Pseudocode
----------
Per piece::

    xt = load(x piece); yt = load(y piece)        (1 or 2 DMAs)
    u  = a*xt + b*yt                              (lincomb: 0, 1 or 2 instructions)
    w  = c*xt + d*yt   if pair
    store(u); store(w)

``lincomb`` costs 0 instructions when the result is one input unchanged
(``copy``; ``swap``), 1 when there is no ``y`` or one coefficient is 0 or
1 (``tensor_scalar`` / ``scalar_tensor_tensor`` / ``tensor_tensor``), else 2.

Closed forms (s = bytes per element, ni = 1 + (y given), no = 1 + pair,
g = 1 when a coefficient the kernel uses is general, else 0)
-----------------------------------------------------------------------
    HBM bytes read    = s * n * ni + 16 g   each input read once (+ the coefficient row)
    HBM bytes written = s * n * no          each output written once
    DMA transfers     = np * (ni + no) + g
    Vector instructions = np * (lincomb(a, b) + pair * lincomb(c, d)) + 2 g
    Tensor Engine instructions = g
This is the analytic minimum traffic of the operation (plus 16 bytes).
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, tiles

F = 2048  # free-dim chunk, elements per partition (8 KiB fp32)
ZERO, ONE, GENERAL = 0, 1, 2


def kind(value):
    """The ``form`` entry of one coefficient value."""
    return ZERO if value == 0 else ONE if value == 1 else GENERAL


def pieces(n):
    """``(kind, c0, rows, cols)`` of each piece of an ``n``-vector: kind 0 = a [128, q] chunk, 1 = the tail."""
    q, r = divmod(n, PMAX)
    out = [(0, c0, PMAX, cols) for c0, cols in tiles(q, F)]
    if r:
        out.append((1, 0, 1, r))
    return out


def piece_view(x, n, kind, c0, cols):
    """The HBM view of one piece of the 1-D tensor ``x`` (see :func:`pieces`)."""
    q = n // PMAX
    if kind == 0:
        return x[0:PMAX * q].reshape((PMAX, q))[:, c0:c0 + cols]
    return x[PMAX * q:n].reshape((1, n - PMAX * q))


def load_coefficients(coef):
    """The ``[1, k]`` HBM row ``coef`` broadcast to a ``[128, k]`` fp32 SBUF tile (Tensor Engine)."""
    k = coef.shape[1]
    row = nl.ndarray((1, k), dtype=nl.float32, buffer=nl.sbuf, name="coef_row")
    nisa.dma_copy(dst=row, src=coef)
    ones = nl.ndarray((1, PMAX), dtype=nl.float32, buffer=nl.sbuf, name="ones")
    nisa.memset(ones, 1.0)
    ps = nl.ndarray((PMAX, k), dtype=nl.float32, buffer=nl.psum, name="coef_bcast")
    nisa.nc_matmul(ps, ones, row)
    cs = nl.ndarray((PMAX, k), dtype=nl.float32, buffer=nl.sbuf, name="coefficients")
    nisa.tensor_copy(cs, ps)
    return cs


def _used(form, has_y, pair):
    """The form entries the kernel reads (b, d only with y; c, d only with pair)."""
    a, b, c, d = form
    used = [a] + ([b] if has_y else [])
    if pair:
        used += [c] + ([d] if has_y else [])
    return used


def needs_coefficients(form, has_y, pair):
    return GENERAL in _used(form, has_y, pair)


def lincomb_instructions(ka, kb, has_y):
    """Vector instructions :func:`lincomb` issues for ``a x + b y`` with coefficient kinds ``ka``, ``kb``."""
    if not has_y or kb == ZERO:
        return 0 if ka == ONE else 1
    if ka == ZERO:
        return 0 if kb == ONE else 1
    return 1 if kb == ONE else 2


def lincomb(dst, tmp, xt, yt, ka, kb, ca, cb):
    """``a xt + b yt`` into ``dst`` (``tmp`` scratch; ``ca``/``cb`` the [rows, 1] value columns)."""
    if yt is None or kb == ZERO:
        if ka == ONE:
            return xt
        nisa.tensor_scalar(dst, xt, nl.multiply, 0.0 if ka == ZERO else ca)
        return dst
    if ka == ZERO:
        if kb == ONE:
            return yt
        nisa.tensor_scalar(dst, yt, nl.multiply, cb)
        return dst
    if kb != ONE:
        nisa.tensor_scalar(tmp, yt, nl.multiply, cb)
        yt = tmp
    if ka == ONE:
        nisa.tensor_tensor(dst, xt, yt, nl.add)
    else:
        nisa.scalar_tensor_tensor(dst, xt, nl.multiply, ca, nl.add, yt)
    return dst


def axpby_counts(n, itemsize, form, has_y, pair):
    """The closed forms above as a dict (what the emulator must count)."""
    ka, kb, kc, kd = form
    npc = len(pieces(n))
    ni, no = 1 + bool(has_y), 1 + bool(pair)
    g = int(needs_coefficients(form, has_y, pair))
    vec = lincomb_instructions(ka, kb, has_y) + (lincomb_instructions(kc, kd, has_y) if pair else 0)
    return {"hbm_read_bytes": itemsize * n * ni + 16 * g, "hbm_write_bytes": itemsize * n * no,
            "dma": npc * (ni + no) + g, "vector": npc * vec + 2 * g, "tensor": g}


@nki.jit
def axpby_kernel(x, y, coef, form, pair=False):
    """``u = a x + b y`` (and ``w = c x + d y`` when ``pair``): x, y [n], coef [1, 4] -> u (, w) [n]."""
    n = x.shape[0]
    ka, kb, kc, kd = form
    cs = load_coefficients(coef) if needs_coefficients(form, y is not None, pair) else None
    u = nl.ndarray((n,), dtype=x.dtype, buffer=nl.shared_hbm)
    w = nl.ndarray((n,), dtype=x.dtype, buffer=nl.shared_hbm) if pair else None
    for kind_, c0, rows, cols in pieces(n):
        cols_ = [None] * 4 if cs is None else [cs[0:rows, i:i + 1] for i in range(4)]
        xt = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf, name="x_tile")
        nisa.dma_copy(dst=xt, src=piece_view(x, n, kind_, c0, cols))
        yt = None
        if y is not None:
            yt = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf, name="y_tile")
            nisa.dma_copy(dst=yt, src=piece_view(y, n, kind_, c0, cols))
        tmp = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf, name="scratch")
        ut = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf, name="u_tile")
        res = lincomb(ut, tmp, xt, yt, ka, kb, cols_[0], cols_[1])
        nisa.dma_copy(dst=piece_view(u, n, kind_, c0, cols), src=res)
        if pair:
            wt = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf, name="w_tile")
            res = lincomb(wt, tmp, xt, yt, kc, kd, cols_[2], cols_[3])
            nisa.dma_copy(dst=piece_view(w, n, kind_, c0, cols), src=res)
    if pair:
        return u, w
    return u
