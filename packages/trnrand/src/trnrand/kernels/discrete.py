"""Philox threshold-count kernel: categorical and small-mean Poisson samples, exact, from THE stream.

What it computes
----------------
Two-word samples of the stream (blocks ``block0 .. block0 + nblocks - 1``,
pairs as in :mod:`trnrand.kernels.philox_transform`, ``odd`` pairing for a
draw that starts at an odd word). Per sample, a 53-bit integer

    m = (w >> 5) 2**26 + (w' >> 6)                      (the torch path's float64 uniform is m 2**-53)

from its pair ``(w, w')`` (``keyed=False``, categorical) or from words 0, 1
of ``philox4x32_10(counter=(0, 0, 0, 0), key=(w, w'))`` (``keyed=True``:
the sample's first attempt of trnrand's keyed samplers, Poisson), and then

    k = sum_j  c_j [m >= M_j]

for the host's ``thresholds = ((M_0, c_0), (M_1, c_1), ...)`` (``M_j`` integers
in ``1 .. 2**53``, ``c_j`` >= 1 the multiplicity of a repeated threshold).
Output ``[nblocks, 2]`` uint32 counts.

Dimensions
----------
``seed``, ``subsequence``, ``block0``, ``nblocks``: compile-time ints (the
stream position; no HBM input). ``thresholds`` (tuple of
``(M_j, c_j)``), ``keyed``, ``odd``. Output ``[nblocks, 2]`` uint32 counts; on
chip, ``[128, F]`` block tiles.

Pseudocode
----------
::

    for t in static_range(T):                        # tile t: blocks tile(t, nblocks, 128 F)
        (w, w') = word pairs of philox(tile)  (keyed: words 0, 1 of philox(0, key=(w, w')))
        m = (w >> 5) 2**26 + (w' >> 6)                (as two exact fp32 halves)
        k = sum_j c_j [m >= M_j]
        store k

Why this is the torch path bit for bit
--------------------------------------
Both samplers compare a float64 uniform ``u = m 2**-53`` against a fixed,
increasing float64 sequence, which the host computes with the torch path's
operations in its order:

* categorical: ``searchsorted(cdf, u T, right=True)`` counts the ``i`` with
  ``cdf[i] <= fl(u T)``; ``fl(m 2**-53 T)`` is non-decreasing in ``m``, so
  each condition is ``m >= M_i`` for the least such ``M_i`` (a binary search
  on the host, in float64); ``i = K - 1`` never counts below ``K - 1``.
* Poisson, ``lam < 10``: the sequential search stops at the first ``j`` with
  ``u <= cdf_j`` (``cdf_0 = exp(-lam)``, ``p_j = p_{j-1} lam / j``, ``cdf_j =
  cdf_{j-1} + p_j``, at most 200 steps), so ``k = #{j < 200 : u > cdf_j}``
  and ``u > cdf_j`` is ``m >= floor(cdf_j 2**53) + 1`` (scaling by ``2**53``
  is exact).

The kernel compares integers exactly: ``m`` is kept as ``H = w >> 5``
(27 bits) and ``L = w' >> 6`` (26 bits) in uint32, ``M`` as ``(M >> 26, M mod
2**26)``, and ``[m >= M] = [H > Mh] + [H == Mh] [L >= Ml]`` are GpSimd uint32
compares, products and adds (native 32-bit integer arithmetic, exact); the
multiplicity is a Vector multiply of 0/1 by a small integer (exact in fp32).
No engine computes in float64: the thresholds are where the float64
arithmetic lives, on the host, once per call.

Layout and tiling
-----------------
The transform kernel's: ``128 x F`` blocks per tile (``F = min(FMAX,
ceil(nblocks/128))``; ``FMAX = 512``, 256 when ``keyed`` -- its second Philox
runs on ``[128, 2F]`` tiles and must fit SBUF), the words in one ``[128,
F(+1), 4]`` tile, the pairs as stride-2 views, per threshold the two halves
``Mh``, ``Ml`` memset into two ``[128, 2F]`` tiles (Vector), one store per
tile (two when ragged). The keyed Philox: counter words are constants
(folded on the host), keys are tiles with a GpSimd key schedule; its last
round computes only the two lanes the sample uses.

Closed forms (``T`` tiles, ``J`` thresholds, ``R`` of them with ``c_j > 1``)
----------------------------------------------------------------------------
    GpSimd = 6 + T (181 + 6 J - 1)  [+ 6 + 188 T keyed]
    Vector = T (178 + 2 + 2 J + R)  [+ 2 + 187 T keyed]      (J = 0: T (178 + 1), one memset of zeros)
    HBM bytes written = 8 nblocks;  read 0;  DMA = T (+1 for a ragged last tile with both parts)

The keyed Philox per tile (``keyed_counts``): 17 limb products (rounds 2-9
two, round 10 one; round 1 has only constants) at GpSimd 10 + Vector 8,
the key schedule (GpSimd 2 x 9), and its xors; once per call 6 GpSimd
memsets of its limb constants and 2 Vector memsets of the key-schedule
constants. Per threshold: 2 Vector memsets, 5 GpSimd (compare, compare,
compare, product, add) and one GpSimd add into the count.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

from .philox import CONST_TILES, FMAX, GPSIMD_PER_TILE, M0, M1, MASK, VECTOR_PER_TILE, W0, W1, Lanes
from .philox_transform import _Flat, _store, _store_dmas

KEYED_FMAX = 256
TWO26 = 1 << 26


def tile_f(nblocks: int, keyed: bool) -> int:
    return max(1, min(KEYED_FMAX if keyed else FMAX, cdiv(nblocks, PMAX)))


def discrete_counts(nblocks: int, thresholds, keyed: bool = False) -> dict:
    """Closed-form counters of one ``discrete_kernel`` call."""
    f = tile_f(nblocks, keyed)
    t = cdiv(nblocks, PMAX * f)
    j = len(thresholds)
    rep = sum(1 for _, c in thresholds if c > 1)
    g = CONST_TILES + t * GPSIMD_PER_TILE
    v = t * VECTOR_PER_TILE
    if j == 0:
        v += t
    else:
        g += t * (6 * j - 1)
        v += t * (2 + 2 * j + rep)
    if keyed:
        kg, kv = keyed_counts()
        g += 6 + t * kg  # + the limb constants of its products (once per call)
        v += 2 + t * kv  # + the two key-schedule constants (Vector memsets, once per call)
    return {"hbm_read_bytes": 0, "hbm_write_bytes": 8 * nblocks, "gpsimd": g, "vector": v,
            "dma": _store_dmas(nblocks, f)}


def keyed_counts(rounds: int = 10, lanes: int = 2) -> tuple[int, int]:
    """(GpSimd, Vector) instructions of ``keyed_philox`` per tile (constant counter, tile keys, 2 or 4 lanes out)."""
    g = v = 0
    x_tile = [False, False, False, False]  # x0 .. x3 are tiles?
    for r in range(rounds):
        last = r == rounds - 1
        # mulhilo(x0, M0) unless it is a constant or (2 lanes) the last round (x2', x3' unused)
        if x_tile[0] and not (last and lanes == 2):
            g, v = g + 10, v + 8
        if x_tile[2]:
            g, v = g + 10, v + 8
        # x0' = hi1 ^ x1 ^ k0: tiles among (hi1, x1) xor'd together, then the key tile
        v += sum((x_tile[2], x_tile[1])) + 1
        if not (last and lanes == 2):
            v += sum((x_tile[0], x_tile[3])) + 1  # x2' = hi0 ^ x3 ^ k1
        if not last:
            g += 2  # the key schedule
        x_tile = [True, x_tile[2], True, x_tile[0]]
    return g, v


def keyed_philox(ew, k0, k1, rounds: int = 10, ctr=(0, 0, 0, 0), lanes: int = 2):
    """Words 0 .. lanes-1 of philox4x32(counter=ctr, key=(k0, k1)): ctr constant ints, k0, k1 tiles of ``ew``."""
    x = list(ctr)
    w0, w1 = ew.const(W0), ew.const(W1)
    for r in range(rounds):
        last = r == rounds - 1
        short = last and lanes == 2
        hi0, lo0 = (0, 0) if short else ew.mulhilo(x[0], M0)
        hi1, lo1 = ew.mulhilo(x[2], M1)
        y0 = _xor(ew, hi1, x[1], k0)
        y2 = None if short else _xor(ew, hi0, x[3], k1)
        x = [y0, lo1, y2, lo0]
        if not last:
            k0, k1 = ew.add(k0, w0), ew.add(k1, w1)
    return tuple(x[:lanes])


def _xor(ew, h, x, key_tile):
    """h ^ x ^ key for h, x ints or tiles and a key tile."""
    c, acc = 0, key_tile
    for v in (h, x):
        if isinstance(v, int):
            c ^= v
        else:
            acc = ew.tt(v, acc, nl.bitwise_xor, nisa.engine.vector)
    return ew.ts(acc, nl.bitwise_xor, c)


@nki.jit
def discrete_kernel(seed, subsequence, block0, nblocks, thresholds, keyed=False, odd=False):
    """Philox threshold count per two-word sample: sum_j c_j [m >= M_j] (see the module docs): [nblocks, 2] uint32."""
    odd = int(bool(odd))
    f = tile_f(nblocks, keyed)
    fw = f + odd
    ln = Lanes(fw)
    n = 2 * f
    ew = _Flat(n)
    if keyed:  # the key schedule's constants, on Vector (GpSimd is the busy engine)
        for c in (W0, W1):
            t_ = ew.tile(f"c{c:x}")
            nisa.memset(t_, c, engine=nisa.engine.vector)
            ew._const[c] = t_
    b_hi = block0 >> 32
    s0, s1 = subsequence & MASK, subsequence >> 32
    out = nl.ndarray((nblocks, 2), dtype=nl.uint32, buffer=nl.shared_hbm)
    for t in nl.static_range(ntiles(nblocks, PMAX * f)):
        b0, rem = tile(t, nblocks, PMAX * f)
        words = ln.words(block0 + b0, b_hi, s0, s1, seed, fw, step=f)
        flat = words.reshape((PMAX, 4 * fw))
        a, b = flat[:, odd:odd + 4 * f:2], flat[:, odd + 1:odd + 4 * f:2]
        res = nl.ndarray((PMAX, f, 2), dtype=nl.uint32, buffer=nl.sbuf, name="counts")
        dst = res.reshape((PMAX, n))
        if not thresholds:
            nisa.memset(dst, 0, engine=nisa.engine.vector)
        else:
            if keyed:
                a, b = keyed_philox(ew, a, b)
            hw, lw = ew.ts(a, nl.right_shift, 5), ew.ts(b, nl.right_shift, 6)
            mh, ml = ew.tile("m_hi"), ew.tile("m_lo")
            g = nisa.engine.gpsimd
            for j, (m, c) in enumerate(thresholds):
                nisa.memset(mh, m >> 26, engine=nisa.engine.vector)
                nisa.memset(ml, m & (TWO26 - 1), engine=nisa.engine.vector)
                gt = ew.tt(hw, mh, nl.greater, g)
                eq = ew.tt(hw, mh, nl.equal, g)
                ge = ew.tt(lw, ml, nl.greater_equal, g)
                hit = ew.tt(gt, ew.tt(eq, ge, nl.multiply, g), nl.add, g, out=dst if j == 0 and c == 1 else None)
                if c > 1:
                    hit = ew.ts(hit, nl.multiply, float(c), out=dst if j == 0 else None)
                if j:
                    ew.tt(dst, hit, nl.add, g, out=dst)
        _store(out, res, b0, rem, f, 2)
    return out
