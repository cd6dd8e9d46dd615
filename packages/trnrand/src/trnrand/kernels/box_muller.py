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

Engines: shifts on Vector (bitvec), ``+ 2**30`` on GpSimd (exact uint32),
Ln / Sqrt / Sin on the Scalar Engine (fp32 data times a float scale plus a
``(P, 1)`` bias tile, as trn1 requires), the two products ``r sin`` on
Vector. The Scalar Engine's functions are approximations on hardware; the
emulator evaluates them in fp32, so kernel and torch normals agree to a few
ulp, not bit for bit (the uint32 words and uniforms are bit-identical).

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
from trnsci.nki.tiling import PMAX, cdiv

from .._philox import C_PI, R_BIAS, S_ANGLE
from .philox import CONST_TILES, GPSIMD_PER_TILE, MASK, VECTOR_PER_TILE, Lanes, _store_dmas, store_tile, tile_f

QUARTER = 1 << 30


def box_muller_counts(nblocks: int) -> dict:
    """Closed-form counters of one ``box_muller_kernel`` call."""
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


def _column(value, name):
    c = nl.ndarray((PMAX, 1), dtype=nl.float32, buffer=nl.sbuf, name=name)
    nisa.memset(c, value)
    return c


@nki.jit
def box_muller_kernel(seed, subsequence, block0, nblocks):
    """Standard normals for stream words 4 block0 .. 4 (block0 + nblocks) - 1: [nblocks, 4] float32."""
    f = tile_f(nblocks)
    ln = Lanes(f)
    quarter = ln.const(QUARTER)
    ulow, rbias, shift = _column(2.0**-24, "u_bias"), _column(R_BIAS, "r_bias"), _column(-C_PI, "angle_bias")
    b_hi = block0 >> 32
    s0, s1 = subsequence & MASK, subsequence >> 32
    out = nl.ndarray((nblocks, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    for t in nl.static_range(cdiv(nblocks, PMAX * f)):
        b0 = t * PMAX * f
        x = ln.rounds(ln.block_tile((block0 + b0) & MASK), b_hi, s0, s1, seed)
        res = nl.ndarray((PMAX, f, 4), dtype=nl.float32, buffer=nl.sbuf, name="z")
        for j in (0, 2):
            a, b = x[j], x[j + 1]
            lg = ln.tile("log_u1", nl.float32)
            nisa.activation(lg, nl.log, ln.ts(a, nl.right_shift, 8), bias=ulow, scale=2.0**-24)
            r = ln.tile("radius", nl.float32)
            nisa.activation(r, nl.sqrt, lg, bias=rbias, scale=-2.0)
            for k, word in enumerate((b, ln.add(b, quarter))):
                s = ln.tile("sin", nl.float32)
                nisa.activation(s, nl.sin, ln.ts(word, nl.right_shift, 8), bias=shift, scale=S_ANGLE)
                nisa.tensor_tensor(res[:, :, j + k], s, r, nl.multiply, engine=nisa.engine.vector)
        store_tile(out, res, b0, nblocks, f)
    return out
