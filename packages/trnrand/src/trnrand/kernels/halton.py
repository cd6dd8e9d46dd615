"""Halton kernel: radical inverses of many points in many bases, all 128 partitions, in fp32.

What it computes
----------------
Inputs (HBM): ``radix [d, 2]`` float32 (column 0 the dimension's prime base
``p``, column 1 ``fl32(1/p)``) and ``scale [d, L]`` float32 (``p**-(l + 1)``,
the torch path's float64 ``b2r`` sequence rounded to fp32). Constants
``skip``, ``n``, ``L`` (digits: the bit length of ``skip + n - 1``, base 2's
count; larger bases reach ``q = 0`` earlier and add zeros). Output
``x [d, n]`` float32:

    x[k, i] = sum_l digit_l(skip + i, p_k) p_k**-(l + 1)      (least significant digit first, as SciPy)

Digits in fp32, exactly: ``q < 2**24`` is an exact fp32 integer; ``t = q
fl32(1/p)`` is within ``q/p 2**-23 < 1`` of ``q/p``, so ``floor(t)`` (round
through ``2**23`` and step back where it rounded up) is ``q // p`` or one
off, and ``r = q - p floor(t)`` (exact: integers below ``2**24``) is fixed by
one step each way: ``r < 0`` -> ``q // p`` is one less, ``r >= p`` -> one more.
Then ``x += r p**-(l + 1)`` (one fp32 multiply-add) and ``q = q // p``.

Why not the torch path's bits: it accumulates in float64 and rounds the
sum to float32 once; the kernel rounds each of the ``L`` fp32 additions.
The digits are exact, so the points agree to a few float32 ulp (tested
against SciPy's float64 points: 4 ulp of 1); float64 output stays on the
torch path, as do ``skip + n > 2**24`` and scrambled points.

Dimensions
----------
``radix [d, 2]``, ``scale [d, L]`` float32; ``skip``, ``n`` compile-time ints.
Output ``x [d, n]`` float32. On chip: partitions are (point group, dimension),
``g dd <= 128``; free dim ``F`` points.

Pseudocode
----------
::

    for each dimension tile (dd <= 128 dimensions):
        load radix, scale into each of the g groups            (2 g DMAs)
        for each point tile of g F points:
            q = iota(point index) per group;  acc = 0
            for l in range(L):  r = q mod p (exact fp32 steps);  acc += r scale[l];  q = q // p
            store each group's points (tiles of F from the tile's first point)

Layout and tiling
-----------------
As the Sobol' kernel: partitions hold (point group, dimension), ``g =
max(1, 128 // dd)`` groups of ``dd <= 128`` dimensions, ``F = min(512,
ceil(n / g))`` points per partition and tile, radix and scale loaded into
every group once (``2 g`` DMAs), one ``iota`` per group and point tile,
one store DMA per group that holds points.

Closed forms (per dimension tile: ``dd``, ``g``, ``F``, ``T = ceil(n / (g F))``
point tiles; summed over ``ceil(d / 128)`` dimension tiles; ``L`` digits)
------------------------------------------------------------------------
    GpSimd instructions = sum T g                (the iotas)
    Vector instructions = sum T (2 + 12 L)
    DMA transfers       = sum (2 g + ceil(n / F))
    HBM bytes read      = sum 4 g dd (2 + L);   written = 4 d n
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile, tiles

from .sobol import groups

CAP = float(1 << 23)


def halton_levels(skip: int, n: int) -> int:
    """Digits to extract: base 2's count for indices below skip + n (at least 1)."""
    return max(1, (skip + n - 1).bit_length())


def halton_counts(d: int, n: int, skip: int) -> dict:
    """Closed-form counters of one ``halton_kernel`` call."""
    lv = halton_levels(skip, n)
    gp, vec, dma, rd = 0, 0, 0, 0
    for _, dd in tiles(d, PMAX):
        g, f, t = groups(dd, n)
        gp += t * g
        vec += t * (2 + 12 * lv)
        dma += 2 * g + cdiv(n, f)
        rd += 4 * g * dd * (2 + lv)
    return {"hbm_read_bytes": rd, "hbm_write_bytes": 4 * d * n, "gpsimd": gp, "vector": vec, "dma": dma}


@nki.jit
def halton_kernel(radix, scale, skip, n):
    """Halton points x [d, n] float32 of indices skip .. skip+n-1 (see the module docs)."""
    d, lv = scale.shape
    x = nl.ndarray((d, n), dtype=nl.float32, buffer=nl.shared_hbm)
    f32, vec = nl.float32, nisa.engine.vector
    for kt in nl.static_range(ntiles(d, PMAX)):
        k0, dd = tile(kt, d, PMAX)
        g, f, tiles = groups(dd, n)
        pp = g * dd
        rad = nl.ndarray((pp, 2), dtype=f32, buffer=nl.sbuf, name="radix")
        sc = nl.ndarray((pp, lv), dtype=f32, buffer=nl.sbuf, name="scale")
        for j in range(g):
            nisa.dma_copy(dst=rad[j * dd:(j + 1) * dd, :], src=radix[k0:k0 + dd, :])
            nisa.dma_copy(dst=sc[j * dd:(j + 1) * dd, :], src=scale[k0:k0 + dd, :])
        base, inv = rad[:, 0:1], rad[:, 1:2]

        def work_tile(name, pp=pp, f=f):
            return nl.ndarray((pp, f), dtype=f32, buffer=nl.sbuf, name=name)

        for jt in nl.static_range(tiles):
            j0 = jt * g * f
            idx = nl.ndarray((pp, f), dtype=nl.int32, buffer=nl.sbuf, name="idx")
            for j in range(g):
                nisa.iota(idx[j * dd:(j + 1) * dd, :], [[1, f]], offset=skip + j0 + j * f, channel_multiplier=0)
            q = work_tile("q")
            nisa.tensor_scalar(q, idx, nl.multiply, 1.0)  # exact: indices < 2**24
            acc = work_tile("x")
            nisa.memset(acc, 0.0, engine=vec)
            qd, r, t, c = work_tile("q_div"), work_tile("digit"), work_tile("t"), work_tile("fix")
            for lev in range(lv):
                nisa.tensor_scalar(t, q, nl.multiply, inv)
                nisa.tensor_scalar(qd, t, nl.add, CAP, op1=nl.subtract, operand1=CAP)  # round to nearest
                nisa.tensor_tensor(c, qd, t, nl.greater, engine=vec)
                nisa.tensor_tensor(qd, qd, c, nl.subtract, engine=vec)  # floor(t)
                nisa.scalar_tensor_tensor(r, qd, nl.multiply, base, nl.subtract, q, reverse1=True)  # q - p qd
                nisa.tensor_scalar(c, r, nl.less, 0.0)  # one too many
                nisa.tensor_tensor(qd, qd, c, nl.subtract, engine=vec)
                nisa.scalar_tensor_tensor(r, c, nl.multiply, base, nl.add, r)
                nisa.tensor_scalar(c, r, nl.greater_equal, base)  # one too few
                nisa.tensor_tensor(qd, qd, c, nl.add, engine=vec)
                nisa.scalar_tensor_tensor(r, c, nl.multiply, base, nl.subtract, r, reverse1=True)
                nisa.scalar_tensor_tensor(acc, r, nl.multiply, sc[:, lev:lev + 1], nl.add, acc)
                q, qd = qd, q  # the quotient is the next level's q (no copy)
            for j in range(min(g, ntiles(n, f, j0))):  # the groups holding points (the rest lie past n)
                p0, ff = tile(j, n, f, j0)
                nisa.dma_copy(dst=x[k0:k0 + dd, p0:p0 + ff], src=acc[j * dd:(j + 1) * dd, 0:ff])
    return x
