"""Box-Muller kernel: float32 standard normals straight from Philox blocks, SBUF-resident.

What it computes
----------------
For blocks ``b = block0 .. block0 + nblocks - 1`` (see
:mod:`trnrand.kernels.philox`) the lanes ``(w0, w1)`` and ``(w2, w3)`` are
two Box-Muller pairs, the float32 pairing of the torch path when a draw
starts at an even word. For a pair ``(a, b)``:

    u1 = ((a >> 8) + 1) 2**-24          in (0, 1]   (never log 0)
    r  = sqrt(-2 ln u1 + 2**-100)       (the tiny bias keeps u1 = 1 inside sqrt's valid range)
    m  = b >> 8,  m' = ((b + 2**30) mod 2**32) >> 8 = (m + 2**22) mod 2**24   (a quarter turn)
    z  = r sin(m S - C),  z' = r sin(m' S - C)

with ``C`` the largest float32 below pi and ``S = 2 C 2**-24``: every Sin
argument lies in ``[-C, C]``, inside the Scalar Engine's valid range
``[-pi, pi]`` by construction (no range check can fail, no cos needed).
Output ``[nblocks, 4]`` float32: row ``b - block0`` is ``(z_A, z'_A, z_B,
z'_B)``, i.e. the normal of stream word position ``4b + lane``.

``odd=True`` is the pairing of a draw that starts at an odd word: pairs
``(w1, w2)`` of block ``b`` and ``(w3 of b, w0 of b + 1)``; row ``b`` then
holds the normals of words ``4b + 1 .. 4b + 4``. The Philox tiles are one
column wider (``[128, F + 1]``, iota ``p F + i`` for ``i = 0 .. F``): column
``F`` of partition ``p`` recomputes block ``(p + 1) F``, the next
partition's first, so every pair is a free-axis slice (no cross-partition
move). Same instruction counts; 1/F more Philox work per instruction; SBUF
per partition grows from 40 x 4 x F to 40 x 4 x (F + 1) bytes (80.2 KiB at
F = 512). The host keeps an odd call inside one 2**32-block span including
the block after its last (else torch).

Engines: shifts on Vector (bitvec), ``+ 2**30`` on GpSimd (exact uint32),
Ln / Sqrt / Sin on the Scalar Engine (fp32 data times a float scale plus a
``(P, 1)`` bias tile, as trn1 requires), the two products ``r sin`` on
Vector. The Scalar Engine's functions are approximations on hardware; the
emulator evaluates them in fp32, so kernel and torch normals agree to a few
ulp, not bit for bit (the uint32 words and uniforms are bit-identical).

Dimensions
----------
``seed``, ``subsequence``, ``block0``, ``nblocks``: compile-time ints (the
stream position; no HBM input). ``odd`` (bool): the pairing.
Output ``[nblocks, 4]`` float32 in HBM; on chip, tiles ``[128, F]`` (``[128, F + 1]``
when ``odd``) of blocks, ``F = tile_f(nblocks)``.

Pseudocode
----------
::

    for t in static_range(T):                        # tile t: blocks tile(t, nblocks, 128 F)
        w0..w3 = philox_rounds(iota(block0 + t 128 F, channel step F))
        for each pair (a, b) of lanes:
            r = sqrt(-2 ln(((a >> 8) + 1) 2**-24) + 2**-100)
            z, z' = r sin(m S - C), r sin(m' S - C)   (m = b >> 8, m' = a quarter turn on)
        store rows of the tile (one DMA, two when ragged)

Tiling and closed forms
-----------------------
As the Philox kernel (``128 x F`` blocks per tile, ``F = min(512,
ceil(nblocks/128))``, ``T`` tiles, one store per tile, two for a ragged
last tile). Per tile: Philox (GpSimd 181, Vector 178) + per pair Vector 5
(three shifts, two products), Scalar 4, GpSimd 1; two pairs:

    GpSimd = 7 (memsets) + T * 183
    Vector = 3 (bias memsets) + T * 188
    Scalar = T * 8
    HBM bytes written = 16 nblocks
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

from .philox import CONST_TILES, GPSIMD_PER_TILE, MASK, VECTOR_PER_TILE, Lanes, _store_dmas, store_tile, tile_f

#: float32 Box-Muller constants (the host models trnrand._philox, trnrand.fp32 and trnrand._threefry use
#: them too): C = the largest float32 below pi, the angle grid step S = 2 C 2**-24 (exact in float32) and
#: the radius bias that keeps sqrt's argument > 0
C_PI = 3.1415925025939941  # float(np.nextafter(np.float32(np.pi), 0)); checked in the tests
S_ANGLE = 2.0 * C_PI * 2.0**-24
R_BIAS = 2.0**-100

QUARTER = 1 << 30


def normal_counts(nblocks: int) -> dict:
    """Closed-form counters of one ``normal_kernel`` call."""
    f = tile_f(nblocks)
    t = cdiv(nblocks, PMAX * f)
    return {
        "hbm_read_bytes": 0,
        "hbm_write_bytes": 16 * nblocks,
        "gpsimd": CONST_TILES + 1 + t * (GPSIMD_PER_TILE + 2),
        "vector": 3 + t * (VECTOR_PER_TILE + 10),
        "scalar": 8 * t,
        "dma": _store_dmas(nblocks, f),
    }


def _tile(f, name, dtype=nl.uint32):
    return nl.ndarray((PMAX, f), dtype=dtype, buffer=nl.sbuf, name=name)


def _column(value, name):
    c = nl.ndarray((PMAX, 1), dtype=nl.float32, buffer=nl.sbuf, name=name)
    nisa.memset(c, value)
    return c


@nki.jit
def normal_kernel(seed, subsequence, block0, nblocks, odd=False):
    """Box-Muller standard normals for stream words 4 block0 (+1 if odd) .. : [nblocks, 4] float32 (module docs)."""
    f = tile_f(nblocks)
    ln = Lanes(f + 1 if odd else f)
    quarter = ln.const(QUARTER)[:, 0:f]
    ulow, rbias, shift = _column(2.0**-24, "u_bias"), _column(R_BIAS, "r_bias"), _column(-C_PI, "angle_bias")
    b_hi = block0 >> 32
    s0, s1 = subsequence & MASK, subsequence >> 32
    out = nl.ndarray((nblocks, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    for t in nl.static_range(ntiles(nblocks, PMAX * f)):
        b0, rem = tile(t, nblocks, PMAX * f)
        x = ln.rounds(ln.block_tile((block0 + b0) & MASK, step=f), b_hi, s0, s1, seed)
        res = nl.ndarray((PMAX, f, 4), dtype=nl.float32, buffer=nl.sbuf, name="z")
        if odd:  # pairs (w1, w2) and (w3, next block's w0): column i + 1 is block b + 1
            pairs = ((x[1][:, 0:f], x[2][:, 0:f]), (x[3][:, 0:f], x[0][:, 1:f + 1]))
        else:
            pairs = ((x[0], x[1]), (x[2], x[3]))
        for j, (a, b) in zip((0, 2), pairs):
            lg = _tile(f, "log_u1", nl.float32)
            nisa.activation(lg, nl.log, ln.ts(a, nl.right_shift, 8, out=_tile(f, "t")), bias=ulow, scale=2.0**-24)
            r = _tile(f, "radius", nl.float32)
            nisa.activation(r, nl.sqrt, lg, bias=rbias, scale=-2.0)
            for k, word in enumerate((b, ln.tt(b, quarter, nl.add, nisa.engine.gpsimd, out=_tile(f, "t")))):
                s = _tile(f, "sin", nl.float32)
                nisa.activation(s, nl.sin, ln.ts(word, nl.right_shift, 8, out=_tile(f, "t")), bias=shift, scale=S_ANGLE)
                nisa.tensor_tensor(res[:, :, j + k], s, r, nl.multiply, engine=nisa.engine.vector)
        store_tile(out, res, b0, rem, f)
    return out
