"""Latin hypercube kernel (strength 1): ranks of Philox keys by counting comparisons, in SBUF.

What it computes
----------------
Point ``i`` and dimension ``k`` (``n`` points, ``d`` dimensions) own Philox
block ``b = block0 + i d + k`` of the stream (four words, the torch path's
``words(base, 4 n d)`` when ``base = 4 block0``): a 63-bit key ``(w0 >> 1,
w1)`` and a 53-bit ``m = (w2 >> 5) 2**26 + (w3 >> 6)``. Output ``x [n, d]``
float32:

    rank[i, k] = #{j : key[j, k] < key[i, k]} + #{j < i : key[j, k] = key[i, k]}    (the stable argsort's rank)
    x[i, k]    = (rank[i, k] + m 2**-53) fl32(1/n)

The ranks are exact (uint32 compares on GpSimd, a Vector sum of 0/1 below
``2**24``): the same strata as the torch path's ``argsort(argsort(key))``.
The position inside the stratum is fp32 (the torch path computes ``(rank +
u) / n`` in float64 and rounds once): a few float32 ulp apart (tested).

Dimensions
----------
``seed``, ``subsequence``, ``block0``, ``n``: compile-time ints (the
stream position; no HBM input). ``d``: dimensions; the kernel's ``n`` is the number of points.
Output ``x [n, d]`` float32; points on the partitions (tiles of 128), partners
on the free dim (chunks of ``J``).

Pseudocode
----------
::

    for point tile i (<= 128 points):
        own key, m = philox(blocks block0 + i d + k)          ([128, d] blocks)
        for dimension k, partner chunk j (<= J points):
            partner keys = philox(blocks of the chunk)        (same on every partition)
            rank[:, k] += sum_free [key_j < key_i or (key_j == key_i and j < i)]
        x[i, :] = (rank + m 2**-53) fl32(1/n);  store

Layout
------
Points on partitions (tiles of 128), comparison partners on the free dim
(chunks of ``J <= 512`` points). Per point tile: one Philox pass over
``[128, d]`` blocks (iota with channel multiplier ``d``) gives every
point's own keys and ``m``; per dimension and partner chunk, a second
Philox pass over ``[128, J]`` blocks whose iota is the same on every
partition (free step ``d``) gives the partners' keys -- recomputed per
partition instead of broadcast (no cross-partition move); the own key and
index are broadcast along the free dim (stride-0 views, Vector copies).
Then ``lt = [H_j < H_i] + [H_j = H_i] ([L_j < L_i] + [L_j = L_i][j < i])``
(9 GpSimd) and one Vector sum over the free axis, accumulated per chunk.

Closed forms (``Ti = ceil(n / 128)``, ``J = min(512, n)``, ``Tj = ceil(n / J)``, ``r = [n mod J != 0]``)
------------------------------------------------------------------------------------------
    GpSimd = 12 + r + Ti (182 + d (191 Tj + 2 r))
    Vector = Ti (184 + d (2 + 181 Tj) + 2)
    DMA    = Ti;   HBM bytes written = 4 n d;   read 0

Per point tile: the own Philox (181 GpSimd with its iota, 178 Vector), the
point index iota, 6 Vector (key and ``m`` assembly, broadcasts, zeroing);
per dimension 2 Vector broadcasts; per dimension and chunk the partners'
Philox (181 + 178), its index iota, 9 GpSimd compares and products (2 more
masking partners past ``n`` in a ragged chunk), 3 Vector (shift, sum,
accumulate); 2 Vector for ``x``. 12 constant memsets (two Philox tile
shapes), one more for ``n`` when a chunk is ragged.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

from .philox import MASK, Lanes

JMAX = 512


def lhs_counts(n: int, d: int) -> dict:
    """Closed-form counters of one ``lhs_kernel`` call."""
    jc = min(JMAX, n)
    ti, tj, r = cdiv(n, PMAX), cdiv(n, jc), int(n % jc != 0)
    return {"hbm_read_bytes": 0, "hbm_write_bytes": 4 * n * d,
            "gpsimd": 12 + r + ti * (182 + d * (191 * tj + 2 * r)),
            "vector": ti * (184 + d * (2 + 181 * tj) + 2), "dma": ti}


def _philox_words(ln, ctr, b_hi, s0, s1, seed, f, name):
    words = nl.ndarray((PMAX, f, 4), dtype=nl.uint32, buffer=nl.sbuf, name=name)
    ln.rounds(ctr, b_hi, s0, s1, seed, outs=tuple(words[:, :, j] for j in range(4)))
    return words


@nki.jit
def lhs_kernel(seed, subsequence, block0, n, d):
    """Latin hypercube points x [n, d] float32 from blocks block0 .. block0 + n d - 1 (see the module docs)."""
    jc = min(JMAX, n)
    own = Lanes(d)
    part = Lanes(jc)
    b_hi = block0 >> 32
    s0, s1 = subsequence & MASK, subsequence >> 32
    g, vec = nisa.engine.gpsimd, nisa.engine.vector
    x = nl.ndarray((n, d), dtype=nl.float32, buffer=nl.shared_hbm)
    for it in nl.static_range(ntiles(n, PMAX)):
        i0, pi = tile(it, n, PMAX)
        ctr = own.block_tile((block0 + i0 * d) & MASK, step=d)
        w = _philox_words(own, ctr, b_hi, s0, s1, seed, d, "own")
        hi_own = own.ts(w[:, :, 0], nl.right_shift, 1)
        lo_own = w[:, :, 1]
        # m 2**-53 in fp32
        mh, ml = own.ts(w[:, :, 2], nl.right_shift, 5), own.ts(w[:, :, 3], nl.right_shift, 6)
        u = nl.ndarray((PMAX, d), dtype=nl.float32, buffer=nl.sbuf, name="u")
        nisa.scalar_tensor_tensor(u, mh, nl.multiply, float(1 << 26), nl.add, ml)
        iidx = nl.ndarray((PMAX, 1), dtype=nl.int32, buffer=nl.sbuf, name="i")
        nisa.iota(iidx, [[1, 1]], offset=i0, channel_multiplier=1)
        ib = part.tile("i_b")
        nisa.tensor_copy(ib, iidx.view(nl.uint32).broadcast(1, jc), engine=vec)
        rank = nl.ndarray((PMAX, d), dtype=nl.float32, buffer=nl.sbuf, name="rank")
        nisa.memset(rank, 0.0, engine=vec)
        for k in range(d):
            hb, lb = part.tile("h_b"), part.tile("l_b")
            nisa.tensor_copy(hb, hi_own[:, k:k + 1].broadcast(1, jc), engine=vec)
            nisa.tensor_copy(lb, lo_own[:, k:k + 1].broadcast(1, jc), engine=vec)
            for jt in nl.static_range(cdiv(n, jc)):
                j0 = jt * jc
                pc = nl.ndarray((PMAX, jc), dtype=nl.int32, buffer=nl.sbuf, name="ctr_j")
                off = (block0 + j0 * d + k) & MASK
                nisa.iota(pc, [[d, jc]], offset=off - (1 << 32) if off >= 1 << 31 else off, channel_multiplier=0)
                wj = _philox_words(part, pc.view(nl.uint32), b_hi, s0, s1, seed, jc, "partners")
                jidx = nl.ndarray((PMAX, jc), dtype=nl.int32, buffer=nl.sbuf, name="j")
                nisa.iota(jidx, [[1, jc]], offset=j0, channel_multiplier=0)
                hj = part.ts(wj[:, :, 0], nl.right_shift, 1)
                lt = part.tt(hj, hb, nl.less, g)
                eh = part.tt(hj, hb, nl.equal, g)
                ll = part.tt(wj[:, :, 1], lb, nl.less, g)
                el = part.tt(wj[:, :, 1], lb, nl.equal, g)
                before = part.tt(jidx.view(nl.uint32), ib, nl.less, g)
                tie = part.tt(el, before, nl.multiply, g)
                tie = part.tt(ll, tie, nl.add, g)
                tie = part.tt(eh, tie, nl.multiply, g)
                lt = part.tt(lt, tie, nl.add, g)
                if j0 + jc > n:  # partners past n: not points
                    valid = part.tt(jidx.view(nl.uint32), part.const(n), nl.less, g)
                    lt = part.tt(lt, valid, nl.multiply, g)
                cnt = nl.ndarray((PMAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="count")
                nisa.tensor_reduce(cnt, nl.add, lt, axis=1)
                nisa.tensor_tensor(rank[:, k:k + 1], rank[:, k:k + 1], cnt, nl.add, engine=vec)
        res = nl.ndarray((PMAX, d), dtype=nl.float32, buffer=nl.sbuf, name="x")
        nisa.scalar_tensor_tensor(res, u, nl.multiply, 2.0**-53, nl.add, rank)
        nisa.tensor_scalar(res, res, nl.multiply, 1.0 / n)
        nisa.dma_copy(dst=x[i0:i0 + pi, :], src=res[0:pi, :])
    return x
