"""Sobol' kernel: Gray-code Sobol' integers for many points and dimensions in one call.

What it computes
----------------
Inputs (HBM): ``v [d, 30]`` uint32 direction numbers (``v[k, b]`` is
``V_b`` of dimension ``k``, 30-bit, already scrambled when scrambling) and
``shift [d, 1]`` uint32 (the digital shift; zeros when unscrambled).
Constants: ``skip``, ``n``. Output ``x [d, n]`` uint32 with

    x[k, i] = shift[k] ^ XOR_{b : bit b of gray(skip + i) is set} v[k, b],   gray(j) = j ^ (j >> 1)

-- the Gray-code order of ``scipy.stats.qmc.Sobol``. The host transposes
to ``[n, d]`` and maps to floats exactly (``x * 2**-30`` in float64, the top
24 bits times ``2**-24`` in float32), as the torch path does.

Dimensions
----------
``v [d, 30]``, ``shift [d, 1]`` uint32; ``skip``, ``n`` compile-time ints.
Output ``x [d, n]`` uint32. On chip: partitions are (point group, dimension),
``g dd <= 128``; free dim ``F`` points.

Pseudocode
----------
::

    for each dimension tile (dd <= 128 dimensions):
        load v, shift into each of the g groups               (2 g DMAs)
        for each point tile of g F points:
            h = gray(iota(point index))
            acc = XOR over bits b of h of v[:, b]             (3 Vector + 1 GpSimd per bit)
            store each group's points (tiles of F from the tile's first point)

Layout and tiling: all 128 partitions
-------------------------------------
Partition dim: (point group, dimension); free dim: points. Per tile of
``dd <= 128`` dimensions, ``g = max(1, 128 // dd)`` groups of ``dd``
partitions each (``g dd <= 128`` partitions busy: all 128 when ``dd``
divides 128, else at least 65), group ``j`` holding points ``j F .. j F +
F - 1`` of the point tile with ``F = min(512, ceil(n / g))`` columns. ``v``
and ``shift`` are loaded once per dimension tile into every group (``2 g``
DMAs) and stay in SBUF; per point tile of ``g F`` points: one ``iota`` per
group (GpSimd) writes the point indices, ``h = j ^ (j >> 1)`` (2 Vector),
then for each of the ``B = max(1, bit_length(skip + n - 1))`` Gray-code
bits

    t = (h >> b) & 1                 (Vector, one two-op bitvec tensor_scalar)
    m = 0 - t  (all ones or zero)    (GpSimd, exact uint32 wrap)
    y = m & v[:, b]                  (Vector, bitvec with a (P, 1) column)
    acc ^= y                         (Vector; bit 0 starts acc)

then ``acc ^ shift`` (Vector) and one store DMA per group that holds
points (``x[k0 : k0 + dd, points]``). Bits >= B of every gray code are
zero, so they are skipped. Points past ``n`` in the last tile are
computed and not stored. With 10 dimensions, 12 groups fill 120
partitions: 16384 points take 3 tiles instead of the 32 of a
dimensions-only layout (10 partitions busy).

Closed forms (per dimension tile: ``dd``, ``g``, ``F`` as above, ``T =
ceil(n / (g F))`` point tiles; summed over ``td = ceil(d / 128)`` tiles)
----------------------------------------------------------------------
    GpSimd instructions = 1 + sum T (g + B)
    Vector instructions = sum T (3 B + 2)
    DMA transfers       = sum (2 g + ceil(n / F))
    HBM bytes read      = sum 4 * 31 dd g;   written = 4 d n
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile, tiles

BITS = 30
FMAX = 512


def gray_bits(skip: int, n: int) -> int:
    """Bits that can be set in gray(j) for j < skip + n (at least 1)."""
    return max(1, (skip + n - 1).bit_length())


def groups(dd: int, n: int) -> tuple[int, int, int]:
    """(g, F, T) of a dimension tile of dd dimensions: point groups, points per partition, point tiles."""
    g = max(1, PMAX // dd)
    f = max(1, min(FMAX, cdiv(n, g)))
    return g, f, cdiv(n, g * f)


def sobol_counts(d: int, n: int, skip: int) -> dict:
    """Closed-form counters of one ``sobol_kernel`` call."""
    b = gray_bits(skip, n)
    gp, vec, dma, rd = 1, 0, 0, 0
    for _, dd in tiles(d, PMAX):
        g, f, t = groups(dd, n)
        gp += t * (g + b)
        vec += t * (3 * b + 2)
        dma += 2 * g + cdiv(n, f)
        rd += 4 * (BITS + 1) * dd * g
    return {"hbm_read_bytes": rd, "hbm_write_bytes": 4 * d * n, "gpsimd": gp, "vector": vec, "dma": dma}


@nki.jit
def sobol_kernel(v, shift, skip, n):
    """Sobol' integers x [d, n] uint32 of points skip .. skip+n-1 from direction numbers v [d, 30]."""
    d = v.shape[0]
    nb = gray_bits(skip, n)
    x = nl.ndarray((d, n), dtype=nl.uint32, buffer=nl.shared_hbm)
    zero = nl.ndarray((PMAX, FMAX), dtype=nl.uint32, buffer=nl.sbuf, name="zero")
    nisa.memset(zero, 0, engine=nisa.engine.gpsimd)
    for kt in nl.static_range(ntiles(d, PMAX)):
        k0, dd = tile(kt, d, PMAX)
        g, f, tiles = groups(dd, n)
        pp = g * dd  # busy partitions
        vs = nl.ndarray((pp, BITS), dtype=nl.uint32, buffer=nl.sbuf, name="v")
        sh = nl.ndarray((pp, 1), dtype=nl.uint32, buffer=nl.sbuf, name="shift")
        for j in range(g):  # every group holds every dimension's direction numbers
            nisa.dma_copy(dst=vs[j * dd:(j + 1) * dd, :], src=v[k0:k0 + dd, :])
            nisa.dma_copy(dst=sh[j * dd:(j + 1) * dd, :], src=shift[k0:k0 + dd, :])

        def work_tile(name, pp=pp, f=f):
            return nl.ndarray((pp, f), dtype=nl.uint32, buffer=nl.sbuf, name=name)

        for jt in nl.static_range(tiles):
            j0 = jt * g * f
            idx = nl.ndarray((pp, f), dtype=nl.int32, buffer=nl.sbuf, name="idx")
            for j in range(g):
                nisa.iota(idx[j * dd:(j + 1) * dd, :], [[1, f]], offset=skip + j0 + j * f, channel_multiplier=0)
            half = work_tile("half")
            nisa.tensor_scalar(half, idx.view(nl.uint32), nl.right_shift, 1)
            gray = work_tile("gray")
            nisa.tensor_tensor(gray, half, idx.view(nl.uint32), nl.bitwise_xor, engine=nisa.engine.vector)
            acc = work_tile("acc")
            for b in range(nb):
                t = work_tile("bit")
                nisa.tensor_scalar(t, gray, nl.right_shift, b, op1=nl.bitwise_and, operand1=1)
                m = work_tile("mask")
                nisa.tensor_tensor(m, zero[0:pp, 0:f], t, nl.subtract, engine=nisa.engine.gpsimd)
                if b == 0:
                    nisa.tensor_scalar(acc, m, nl.bitwise_and, vs[:, 0:1])
                else:
                    y = work_tile("term")
                    nisa.tensor_scalar(y, m, nl.bitwise_and, vs[:, b:b + 1])
                    nisa.tensor_tensor(acc, acc, y, nl.bitwise_xor, engine=nisa.engine.vector)
            res = work_tile("x")
            nisa.tensor_scalar(res, acc, nl.bitwise_xor, sh)
            for j in range(min(g, ntiles(n, f, j0))):  # the groups holding points (the rest lie past n)
                p0, ff = tile(j, n, f, j0)
                nisa.dma_copy(dst=x[k0:k0 + dd, p0:p0 + ff], src=res[j * dd:(j + 1) * dd, 0:ff])
    return x
