"""Compiled CPU kernels of THE stream (numba): the same words as :mod:`trnrand._philox`'s NumPy passes.

Imported only through :mod:`trnrand._philox_jit`, on the first draw (importing numba costs ~0.3-0.6 s).

With numba installed (``pip install trnrand[jit]``), the host's bulk Philox4x32-10 runs as one compiled loop
per block instead of ~45 NumPy array passes per chunk, and the float32/float64 uniform maps are fused into
it (each word is read once, in registers). Every step is the integer arithmetic of ``_philox`` -- 32 x 32 ->
64-bit products, xors, masks, shifts -- and the uniform maps are exact (a cast of at most 24 / 53 significant
bits and a power-of-two scale), so the output is bit for bit the NumPy route's (tested). Without numba,
:data:`AVAILABLE` is False and ``_philox`` keeps its NumPy passes.

Entry points (all write into caller-allocated arrays; keys: the (10, 2) uint64 key schedule):

* :func:`lanes_prods` -- a chunk's ``(lanes, prods)`` in the layout ``_philox._blocks`` hands its sinks;
Draws start at word ``start = 4 b0 + lead`` (``b0`` a uint64 block index, ``lead`` 0-3: a word index can
exceed 2**64).

* :func:`uniform32` -- words ``start .. start + n - 1`` as float32 ``(w & ~0xFF) 2**-32`` (``+ 2**-24`` for
  ``(0, 1]``);
* :func:`uniform64` -- word pairs from ``start`` as float64 ``m53 2**-53`` (``(m53 + 1) 2**-53``);
* :func:`normal32_prep` / :func:`normal32_finish` -- float32 Box-Muller around NumPy's float32 ``log`` and
  ``sin`` (which stay NumPy's: they define the bits, as the emulator's Ln and Sin): the words and every
  cast, product and sum before them, then ``sqrt`` and the products after, in ``_box_muller_np``'s order.
"""

from __future__ import annotations

import numba
import numpy as np

_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_S32 = np.uint64(32)
_S27 = np.uint64(27)
_K24 = np.uint32(0xFFFFFF00)
_K53 = np.uint64(0xFFFFFFE0)
_K6 = np.uint64(0xFFFFFFC0)
_QUARTER = np.uint64(1 << 30)
_MASK = np.uint64(0xFFFFFFFF)
_F2M32 = np.float32(2.0**-32)
_F256 = np.float32(256.0)
_F2M59 = np.float64(2.0**-59)
_TILE = 1024  # blocks per tile: four uint32 lane arrays of 4 KiB, in L1

_jit = numba.njit(cache=True, nogil=True, boundscheck=False)

@numba.njit(inline="always", boundscheck=False)
def _rounds(b, m, s0, s1, keys, x0, x1, x2, x3):
    """Philox4x32-10 of blocks b .. b + m - 1 into the uint32 lane arrays: per block, the ten rounds on
    registers (a loop LLVM vectorizes across blocks; each product a 32 x 32 -> 64-bit multiply of a
    zero-extended word)."""
    kk = np.empty(20, np.uint32)
    for r in range(10):
        kk[2 * r] = np.uint32(keys[r, 0])
        kk[2 * r + 1] = np.uint32(keys[r, 1])
    for i in range(m):
        c = b + np.uint64(i)
        a0 = np.uint32(c & _MASK)
        a1 = np.uint32(c >> _S32)
        a2 = s0
        a3 = s1
        for r in range(10):
            p0 = np.uint64(a0) * _M0
            p1 = np.uint64(a2) * _M1
            a0 = np.uint32(p1 >> _S32) ^ a1 ^ kk[2 * r]
            a2 = np.uint32(p0 >> _S32) ^ a3 ^ kk[2 * r + 1]
            a1 = np.uint32(p1)
            a3 = np.uint32(p0)
        x0[i] = a0
        x1[i] = a1
        x2[i] = a2
        x3[i] = a3

@numba.njit(inline="always", boundscheck=False)
def _words(b, m, s0, s1, keys, x0, x1, x2, x3, w):
    """w[0 : 4m] = the words of blocks b .. b + m - 1, in stream order."""
    _rounds(b, m, s0, s1, keys, x0, x1, x2, x3)
    for i in range(m):
        w[4 * i] = x0[i]
        w[4 * i + 1] = x1[i]
        w[4 * i + 2] = x2[i]
        w[4 * i + 3] = x3[i]

def _lanes():
    return (np.empty(_TILE + 1, np.uint32), np.empty(_TILE + 1, np.uint32), np.empty(_TILE + 1, np.uint32),
            np.empty(_TILE + 1, np.uint32), np.empty(4 * _TILE + 4, np.uint32))

_lanes = numba.njit(cache=True)(_lanes)

@_jit
def lanes_prods(keys, s0, s1, block0, w, last_mask, lanes, prods):
    """Blocks block0 .. block0 + w - 1 into lanes = (x0, x2) & last_mask and prods = (x3, x1) ((2, >= w))."""
    x0, x1, x2, x3, _ = _lanes()
    z0, z1, mk = np.uint32(s0), np.uint32(s1), np.uint32(last_mask)
    for t in range(0, w, _TILE):
        m = min(_TILE, w - t)
        _rounds(block0 + np.uint64(t), m, z0, z1, keys, x0, x1, x2, x3)
        for i in range(m):
            lanes[0, t + i] = x0[i] & mk
            lanes[1, t + i] = x2[i] & mk
            prods[0, t + i] = x3[i]
            prods[1, t + i] = x1[i]

@_jit
def uniform32(keys, s0, s1, b0, lead, n, open_low, out):
    """out[k] = float32 of word start + k: (w & ~0xFF) 2**-32, plus 2**-24 when open_low (exact: the
    sum (m + 1) 2**8 has at most 24 significant bits)."""
    x0, x1, x2, x3, w = _lanes()
    z0, z1 = np.uint32(s0), np.uint32(s1)
    nb = (lead + n + 3) // 4
    add = _F256 if open_low else np.float32(0.0)
    for t in range(0, nb, _TILE):
        m = min(_TILE, nb - t)
        _words(b0 + np.uint64(t), m, z0, z1, keys, x0, x1, x2, x3, w)
        base = 4 * t - lead  # out index of w[0]
        lo = max(0, -base)
        hi = min(4 * m, n - base)
        for j in range(lo, hi):
            out[base + j] = (np.float32(w[j] & _K24) + add) * _F2M32

@numba.njit(inline="always")
def _f53(hi, lo, add):
    return np.float64((((np.uint64(hi) & _K53) << _S27) | (np.uint64(lo) & _K6)) + add) * _F2M59

@_jit
def uniform64(keys, s0, s1, b0, lead, n, open_low, out):
    """out[k] = float64 of the word pair (start + 2k, start + 2k + 1): m53 2**-53, (m53 + 1) 2**-53 when
    open_low, with m53 << 6 = ((w_hi & ~31) << 27) | (w_lo & ~63) (exact: at most 53 significant bits)."""
    x0, x1, x2, x3, w = _lanes()
    z0, z1 = np.uint32(s0), np.uint32(s1)
    nw = 2 * n
    nb = (lead + nw + 3) // 4
    add = np.uint64(64) if open_low else np.uint64(0)
    if lead % 2 == 0:  # pairs (x0, x1), (x2, x3) of every block: straight from the lane arrays
        for t in range(0, nb, _TILE):
            m = min(_TILE, nb - t)
            _rounds(b0 + np.uint64(t), m, z0, z1, keys, x0, x1, x2, x3)
            q = 2 * t - lead // 2  # out index of block t's first pair
            lo = max(0, (-q + 1) // 2)  # blocks whose both pairs are in range
            hi = min(m, (n - q) // 2)
            for i in range(lo, hi):
                out[q + 2 * i] = _f53(x0[i], x1[i], add)
                out[q + 2 * i + 1] = _f53(x2[i], x3[i], add)
            for i in (lo - 1, hi):  # the at most two half-used blocks at the ends
                if 0 <= i < m:
                    if 0 <= q + 2 * i < n:
                        out[q + 2 * i] = _f53(x0[i], x1[i], add)
                    if 0 <= q + 2 * i + 1 < n:
                        out[q + 2 * i + 1] = _f53(x2[i], x3[i], add)
        return
    for t in range(0, nb, _TILE):  # odd start: pairs straddle blocks, read from the word buffer
        m = min(_TILE, nb - t)
        # one block more where the tile's last pair may end in the next tile's first block
        _words(b0 + np.uint64(t), m + (1 if t + m < nb else 0), z0, z1, keys, x0, x1, x2, x3, w)
        base = 4 * t - lead  # stream word index (relative to start) of w[0]
        j0 = max(0, -base)
        j0 += (base + j0) % 2  # the first pair that starts in this tile
        for j in range(j0, min(4 * m, nw - base), 2):
            out[(base + j) // 2] = _f53(w[j], w[j + 1], add)

@numba.njit(inline="always")
def _bm_in(first, second, scale, c, u, ang, p):
    u[p] = (np.float32(first & _K24) + _F256) * _F2M32
    aw = second & _K24
    ang[2 * p] = np.float32(aw) * scale - c
    ang[2 * p + 1] = np.float32((np.uint64(aw) + _QUARTER) & _MASK) * scale - c

@_jit
def normal32_prep(keys, s0, s1, b0, lead, npairs, scale, c, u, ang):
    """Box-Muller's float32 inputs of the pairs of words (start + 2p, start + 2p + 1): u[p] = ((w >> 8) + 1)
    2**-24, ang[2p] = m S - C and ang[2p + 1] the quarter turn's, m = the second word >> 8 (as
    ``_philox._box_muller_np``: each a cast and float32 operations in its order; the quarter turn is
    (m 2**8 + 2**30) mod 2**32)."""
    x0, x1, x2, x3, w = _lanes()
    z0, z1 = np.uint32(s0), np.uint32(s1)
    nw = 2 * npairs
    nb = (lead + nw + 3) // 4
    if lead % 2 == 0:
        for t in range(0, nb, _TILE):
            m = min(_TILE, nb - t)
            _rounds(b0 + np.uint64(t), m, z0, z1, keys, x0, x1, x2, x3)
            q = 2 * t - lead // 2
            lo = max(0, (-q + 1) // 2)
            hi = min(m, (npairs - q) // 2)
            for i in range(lo, hi):
                _bm_in(x0[i], x1[i], scale, c, u, ang, q + 2 * i)
                _bm_in(x2[i], x3[i], scale, c, u, ang, q + 2 * i + 1)
            for i in (lo - 1, hi):
                if 0 <= i < m:
                    if 0 <= q + 2 * i < npairs:
                        _bm_in(x0[i], x1[i], scale, c, u, ang, q + 2 * i)
                    if 0 <= q + 2 * i + 1 < npairs:
                        _bm_in(x2[i], x3[i], scale, c, u, ang, q + 2 * i + 1)
        return
    for t in range(0, nb, _TILE):
        m = min(_TILE, nb - t)
        _words(b0 + np.uint64(t), m + (1 if t + m < nb else 0), z0, z1, keys, x0, x1, x2, x3, w)
        base = 4 * t - lead
        j0 = max(0, -base)
        j0 += (base + j0) % 2
        for j in range(j0, min(4 * m, nw - base), 2):
            _bm_in(w[j], w[j + 1], scale, c, u, ang, (base + j) // 2)

@_jit
def normal32_finish(lg, m2, bias, z):
    """z[p, 0], z[p, 1] = sin(A) r, sin(A') r in place (z holds the sines, (npairs, 2)), with r = sqrt(log(u)
    (-2) + bias) from lg = log(u) (float32, one rounding per operation: sqrt is correctly rounded everywhere)."""
    for p in range(lg.shape[0]):
        r = np.sqrt(lg[p] * m2 + bias)
        z[p, 0] *= r
        z[p, 1] *= r


def key_array(schedule) -> np.ndarray:
    """The (10, 2) uint64 key schedule the kernels take, from ``_philox._key_schedule(seed)``."""
    return np.array(schedule, dtype=np.uint64).reshape(10, 2)
