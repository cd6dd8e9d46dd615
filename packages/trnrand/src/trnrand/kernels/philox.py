"""Philox4x32-10 kernel: blocks of THE trnrand stream as uint32 words or float32 uniforms.

What it computes
----------------
Blocks ``b = block0 .. block0 + nblocks - 1`` of subsequence ``s`` under key
``seed`` (``trnrand._philox``'s stream definition): block ``b`` is
``philox4x32_10(counter=(b lo, b hi, s lo, s hi), key=(seed lo, seed hi))``.
The output is ``[nblocks, 4]`` in HBM: row ``b - block0`` holds the block's
four lanes, i.e. words ``4b .. 4b+3`` of the stream in order. ``mode``:

* ``"words"`` -> uint32, the words themselves;
* ``"uniform"`` -> float32 ``(w >> 8) * 2**-24`` in [0, 1) (exact: a 24-bit
  integer times a power of two), bit-identical to the torch path.

The host guarantees that ``[block0, block0 + nblocks)`` does not cross a
multiple of 2**32 (so the counter's word 1, ``b >> 32``, is one constant)
and slices the < 4 words of a draw that starts or ends inside a block.

Dimensions
----------
``seed``, ``subsequence``, ``block0``, ``nblocks``: compile-time ints (the
stream position; no HBM input). ``mode`` (``"words"`` / ``"uniform"``), ``naive``.
Output ``[nblocks, 4]`` uint32 or float32 in HBM; on chip, tiles of ``[128, F]``
blocks, ``F = tile_f(nblocks)``.

Pseudocode
----------
::

    for t in static_range(T):                        # tile t: blocks tile(t, nblocks, 128 F)
        ctr = iota(block0 + t 128 F, channel step F)
        w0..w3 = 10 rounds of (mulhilo by the Philox constants, xor with the key, bump the key)
        res = words, or (w >> 8) 2**-24
        store_tile(res)                              (one DMA, two when ragged)

Exact 32 x 32 -> 64-bit products (why 16-bit limbs on GpSimd)
-------------------------------------------------------------
Each round needs the high and low words of two 32 x 32 -> 64-bit products.
The NKI 0.6 ISA (``nki/api/nki/isa/__init__.py``, ``tensor_tensor``; the
emulator's numerics section, ``docs/emulator.md``) gives exact native
32-bit integer arithmetic, wrapping mod 2**32, only to ``tensor_tensor`` on
the GpSimd engine with int32/uint32 operands; the Vector and Scalar engines
compute in fp32, which keeps 24 significand bits, and bitvec operators
(and/xor/shifts) run on Vector on raw bits. No instruction yields the high
word of a product. So:

* ``lo = a * M mod 2**32``: one GpSimd multiply (exact by the wrap rule);
* ``hi``: split ``a = ah 2**16 + al`` and ``M = Mh 2**16 + Ml`` (16-bit
  limbs); the four limb products are < 2**32, so exact on GpSimd;
  ``mid = (al Ml >> 16) + (al Mh & 0xFFFF) + (ah Ml & 0xFFFF) < 3 * 2**16``
  and ``hi = ah Mh + (al Mh >> 16) + (ah Ml >> 16) + (mid >> 16)`` (< 2**32)
  -- the schoolbook carry chain (``trnrand._philox._mulhilo_limbs``).
  Masks and shifts on Vector (bitvec), multiplies and adds on GpSimd.

The same kernel with ``naive=True`` runs the multiplies on the Vector
engine (fp32): the products lose their low bits and the known-answer test
fails (tested) -- the trap this design avoids.

Layout and tiling
-----------------
Partition dim: 128 runs of consecutive blocks; free dim: ``F = min(512,
ceil(nblocks / 128))`` blocks per partition, so a tile is ``128 x F``
blocks, block ``b = tile0 + p F + i`` at partition ``p``, column ``i``
(``iota`` with ``channel_multiplier = F``). Every tile is computed in SBUF
and stored with ONE DMA (``[128, 4F]`` contiguous rows of the output) --
a ragged last tile of ``rem`` blocks with two (``rem // F`` full rows, then
the ``rem % F`` leftover blocks of the next partition), none when it has no
leftover or no full row. One kernel call covers the whole request: no
per-tile dispatch. Rounds 1-2 fold the counter words that are constant in
a call (``b >> 32``, ``s``) into scalars on the host.

Closed forms (``T = ceil(nblocks / (128 F))`` tiles)
---------------------------------------------------
Per ``mulhilo`` of a tile by a constant: Vector 8, GpSimd 10. Per round
with both products on tiles: 2 mulhilo + 4 Vector xors = Vector 20, GpSimd
20. Round 1 (one product on a tile): Vector 9, GpSimd 10; round 2: Vector
10, GpSimd 10; round 3: Vector 19, GpSimd 20; rounds 4-10: 20 + 20 each.

    GpSimd instructions  = 6 (memset constants) + T (1 iota + 180)
    Vector instructions  = T * (178 + 2 [uniform mode])
    DMA transfers        = T + [ragged last tile has both parts]
    HBM bytes written    = 16 nblocks;  read = 0

At one full ``128 x 512`` tile: 181 GpSimd + 178 Vector (words) / 180
(uniform) instructions for 65536 blocks = 262144 words -- about 1.4
instructions per 1000 words.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, sbuf_budget, tile

M0 = 0xD2511F53
M1 = 0xCD9E8D57
W0 = 0x9E3779B9
W1 = 0xBB67AE85
MASK = 0xFFFFFFFF
FMAX = 512  # blocks per partition per tile
MODES = ("words", "uniform")

#: SBUF plan: at most this many [P, F] 4-byte tiles are live at once (6 constants, the [P, F, 4] output
#: tile(s), the four lanes and a mulhilo's temporaries; the emulator's peak is 29 for the uniform
#: mode and 25 for Box-Muller) -- 40 x 4 B x 512 = 80 KiB per partition, inside every target's SBUF.
SBUF_TILES = 40
assert SBUF_TILES * 4 * FMAX <= sbuf_budget("trn1"), "the Philox tile plan must fit SBUF"

#: instructions of one 128 x F tile (see the module docstring)
GPSIMD_PER_TILE = 1 + 180
VECTOR_PER_TILE = 178
CONST_TILES = 6


def tile_f(nblocks: int) -> int:
    """Blocks per partition of a tile: min(512, ceil(nblocks / 128)) (>= 1)."""
    return max(1, min(FMAX, cdiv(nblocks, PMAX)))


def _store_dmas(nblocks: int, f: int) -> int:
    """DMA transfers storing ``nblocks`` in tiles of 128 x f."""
    full, rem = divmod(nblocks, PMAX * f)
    return full + (rem // f > 0) + (rem % f > 0)


def philox_counts(nblocks: int, mode: str = "words") -> dict:
    """Closed-form counters of one ``philox_kernel`` call (what the emulator must count)."""
    f = tile_f(nblocks)
    t = cdiv(nblocks, PMAX * f)
    return {
        "hbm_read_bytes": 0,
        "hbm_write_bytes": 16 * nblocks,
        "gpsimd": CONST_TILES + t * GPSIMD_PER_TILE,
        "vector": t * (VECTOR_PER_TILE + (2 if mode == "uniform" else 0)),
        "dma": _store_dmas(nblocks, f),
    }


class Lanes:
    """Tile helpers for one kernel call: ``P x F`` uint32 tiles, constants cached.

    Values are either Python ints (constants of the call, folded on the
    host) or SBUF tiles; ``naive`` moves the multiplies to the fp32 Vector
    engine (the known-wrong variant).
    """

    def __init__(self, f: int, naive: bool = False):
        self.f = f
        self.mul_engine = nisa.engine.vector if naive else nisa.engine.gpsimd
        self._const = {}
        for m in (M0, M1):
            for v in (m, m & 0xFFFF, m >> 16):
                self.const(v)

    def tile(self, name, dtype=None):
        return nl.ndarray((PMAX, self.f), dtype=dtype or nl.uint32, buffer=nl.sbuf, name=name)

    def const(self, v):
        """A [P, F] uint32 tile filled with v (memset once per call)."""
        if v not in self._const:
            t = self.tile(f"c{v:x}")
            nisa.memset(t, v, engine=nisa.engine.gpsimd)
            self._const[v] = t
        return self._const[v]

    def ts(self, a, op, c, out=None):
        dst = self.tile("t") if out is None else out
        nisa.tensor_scalar(dst, a, op, c)
        return dst

    def tt(self, a, b, op, engine, out=None):
        dst = self.tile("t") if out is None else out
        nisa.tensor_tensor(dst, a, b, op, engine=engine)
        return dst

    def add(self, a, b):
        return self.tt(a, b, nl.add, nisa.engine.gpsimd)

    def mulhilo(self, a, m, out_lo=None):
        """(hi, lo) of tile a times the constant m (16-bit limbs, see the module docstring)."""
        if isinstance(a, int):
            p = a * m
            return p >> 32, p & MASK
        ml, mh = self.const(m & 0xFFFF), self.const(m >> 16)
        e = self.mul_engine
        lo = self.tt(a, self.const(m), nl.multiply, e, out=out_lo)
        al = self.ts(a, nl.bitwise_and, 0xFFFF)
        ah = self.ts(a, nl.right_shift, 16)
        ll = self.tt(al, ml, nl.multiply, e)
        lh = self.tt(al, mh, nl.multiply, e)
        hl = self.tt(ah, ml, nl.multiply, e)
        hh = self.tt(ah, mh, nl.multiply, e)
        mid = self.add(self.ts(ll, nl.right_shift, 16), self.ts(lh, nl.bitwise_and, 0xFFFF))
        mid = self.add(mid, self.ts(hl, nl.bitwise_and, 0xFFFF))
        hi = self.add(hh, self.ts(lh, nl.right_shift, 16))
        hi = self.add(hi, self.ts(hl, nl.right_shift, 16))
        hi = self.add(hi, self.ts(mid, nl.right_shift, 16))
        return hi, lo

    def xor3(self, h, x, k, out=None):
        """h ^ x ^ k with h a tile or int, x a tile or int, k an int key word."""
        tiles = [v for v in (h, x) if not isinstance(v, int)]
        c = k
        for v in (h, x):
            if isinstance(v, int):
                c ^= v
        if not tiles:
            return c
        if len(tiles) == 2:
            tiles = [self.tt(tiles[0], tiles[1], nl.bitwise_xor, nisa.engine.vector)]
        return self.ts(tiles[0], nl.bitwise_xor, c, out=out)

    def rounds(self, x0, x1, x2, x3, seed: int, outs=(None, None, None, None)):
        """Philox4x32-10 on lanes (ints or tiles); the last round writes into ``outs`` views when given."""
        k0, k1 = seed & MASK, (seed >> 32) & MASK
        for r in range(10):
            last = r == 9
            hi0, lo0 = self.mulhilo(x0, M0, out_lo=outs[3] if last else None)
            hi1, lo1 = self.mulhilo(x2, M1, out_lo=outs[1] if last else None)
            x0, x1, x2, x3 = (self.xor3(hi1, x1, k0, out=outs[0] if last else None), lo1,
                              self.xor3(hi0, x3, k1, out=outs[2] if last else None), lo0)
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        return x0, x1, x2, x3

    def block_tile(self, b_lo: int, step: int | None = None):
        """iota: b_lo + p step + i as uint32, step = F by default (int32 arithmetic wraps; the host keeps a
        call inside one 2**32 span). A tile one column wider than ``step`` repeats the next partition's
        first block in its last column (Box-Muller's odd pairing)."""
        t = nl.ndarray((PMAX, self.f), dtype=nl.int32, buffer=nl.sbuf, name="ctr")
        off = b_lo - (1 << 32) if b_lo >= 1 << 31 else b_lo
        nisa.iota(t, [[1, self.f]], offset=off, channel_multiplier=self.f if step is None else step)
        return t.view(nl.uint32)

    def words(self, b_lo: int, b_hi, s0, s1, seed, width: int, step: int | None = None, name: str = "words"):
        """The four Philox words of counter blocks ``b_lo + p step + i`` (:meth:`block_tile`) as a
        ``[P, width, 4]`` uint32 tile: the stream every trnrand kernel starts from."""
        words = nl.ndarray((PMAX, width, 4), dtype=nl.uint32, buffer=nl.sbuf, name=name)
        ctr = self.block_tile(b_lo & MASK, step=step)
        self.rounds(ctr, b_hi, s0, s1, seed, outs=tuple(words[:, :, j] for j in range(4)))
        return words


def store_tile(out, res, b0: int, rem: int, f: int):
    """Store SBUF res [P, F, 4] into out rows b0 .. (one DMA per full part; see the module docstring)."""
    q, r = divmod(rem, f)
    if q:
        nisa.dma_copy(dst=out[b0:b0 + q * f, :].reshape((q, 4 * f)), src=res[0:q, :, :].reshape((q, 4 * f)))
    if r:
        nisa.dma_copy(dst=out[b0 + q * f:b0 + q * f + r, :].reshape((1, 4 * r)),
                      src=res[q:q + 1, 0:r, :].reshape((1, 4 * r)))


@nki.jit
def philox_kernel(seed, subsequence, block0, nblocks, mode="words", naive=False):
    """Blocks block0 .. block0+nblocks-1 of subsequence ``subsequence``: [nblocks, 4] uint32 words or fp32 uniforms."""
    f = tile_f(nblocks)
    ln = Lanes(f, naive)
    b_hi = block0 >> 32
    s0, s1 = subsequence & MASK, subsequence >> 32
    odt = nl.float32 if mode == "uniform" else nl.uint32
    out = nl.ndarray((nblocks, 4), dtype=odt, buffer=nl.shared_hbm)
    for t in nl.static_range(ntiles(nblocks, PMAX * f)):
        b0, rem = tile(t, nblocks, PMAX * f)
        words = nl.ndarray((PMAX, f, 4), dtype=nl.uint32, buffer=nl.sbuf, name="words")
        ctr = ln.block_tile((block0 + b0) & MASK)
        ln.rounds(ctr, b_hi, s0, s1, seed, outs=tuple(words[:, :, j] for j in range(4)))
        if mode == "uniform":
            m = nl.ndarray((PMAX, f, 4), dtype=nl.uint32, buffer=nl.sbuf, name="m24")
            nisa.tensor_scalar(m, words, nl.right_shift, 8)
            res = nl.ndarray((PMAX, f, 4), dtype=nl.float32, buffer=nl.sbuf, name="u")
            nisa.tensor_scalar(res, m, nl.multiply, 2.0**-24)
        else:
            res = words
        store_tile(out, res, b0, rem, f)
    return out
