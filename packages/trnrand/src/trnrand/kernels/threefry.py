"""Threefry4x32-20 stream blocks (words, uniforms, normals) of one seed and subsequence.

What it computes
----------------
``threefry_kernel(seed, subsequence, block0, nblocks, mode)``: blocks
``b = block0 .. block0 + nblocks - 1`` of the Threefry stream
(:mod:`trnrand._threefry`): ``threefry4x32_20(counter=(b lo, b hi, s lo,
s hi), key=(seed lo, seed hi, 0, 0))``, output ``[nblocks, 4]``, row
``b - block0``:

* ``"words"`` -> uint32, the four words;
* ``"uniform"`` -> float32 ``(w >> 8) 2**-24`` in [0, 1) (exact),
  bit-identical to the torch path;
* ``"normal"`` -> float32 ``(z_A, z'_A, z_B, z'_B)``: the Box-Muller pairs
  ``(w0, w1)``, ``(w2, w3)`` with the map of :mod:`trnrand.kernels.normal`
  (Ln / Sqrt / Sin on the Scalar Engine; a few ulp from torch, not bit for
  bit, as there).

The host keeps ``[block0, block0 + nblocks)`` inside one 2**32 span (the
counter's word 1 is then a constant of the call). The block function of
explicit counter and key rows is :mod:`trnrand.kernels.threefry_block`, on
this file's lane arithmetic (:class:`Lanes`).

Dimensions
----------
Partition dim: 128 runs of consecutive blocks; free dim ``F = min(512,
ceil(nblocks / 128))`` blocks per partition (``trnrand.kernels.philox.tile_f``):
a tile is ``128 x F`` blocks, block ``tile0 + p F + i`` at partition ``p``,
column ``i``; ``T = ceil(nblocks / (128 F))`` tiles, each stored with one
DMA (two for a ragged last tile with both full rows and a leftover).

Pseudocode
----------
One tile; lanes are ``[128, F]`` uint32 tiles or host ints:

::

    x = (iota b, b >> 32, s lo, s hi)             # stream: only x0 is a tile
    ks = (k0, k1, k2, k3, k0 ^ k1 ^ k2 ^ k3 ^ 0x1BD11BDA)
    x_i += ks[i]                                   # inject(0)
    for r in 0 .. R-1:                             # (a, b, c, d) = (0,1,2,3) / (0,3,2,1)
        x_a += x_b ; x_b = (x_b << ra | x_b >> 32-ra) ^ x_a
        x_c += x_d ; x_d = (x_d << rb | x_d >> 32-rb) ^ x_c
        if r % 4 == 3: x_i += ks[(s + i) % 5], x3 += s  (s = (r + 1) // 4)
    store [x0, x1, x2, x3] (or the uniforms / normals made from them)

Engines: every 32-bit addition on GpSimd (``tensor_tensor`` add on uint32,
exact, wrapping mod 2**32 -- the Vector engine adds in fp32); shifts, or and
xor on Vector (bitvec, raw bits). An addition of a call constant (a host
int) reads a ``[128, F]`` tile memset once per call per use site. Host ints
meeting host ints fold on the host: only ``x0`` starts as a tile, so round 0
is 1 GpSimd add + 1 Vector xor, round 1 2 + 5, and rounds 2 .. 19 are 2 + 8
each.

Closed forms (R = 20)
---------------------
    GpSimd = 24 (memsets: 4 + 4 per injection) + T * (1 iota + 1 + 1 + 2 + 2*18 + 4*5) = 24 + 61 T
    Vector = T * (1 + 5 + 8*18) = 150 T               ("words")
           + 2 T                                      ("uniform": shift, scale)
           + 3 + 10 T, Scalar 8 T, GpSimd + 1 + 2 T    ("normal", as trnrand.kernels.normal)
    DMA = stores;  HBM bytes written = 16 nblocks, read 0
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, sbuf_budget, tile

from .normal import C_PI, QUARTER, R_BIAS, S_ANGLE
from .philox import FMAX, MASK, _store_dmas, store_tile, tile_f

PARITY = 0x1BD11BDA  # Skein key-schedule parity constant
#: Random123's threefry4x32 rotation constants, one pair per round, cycling every 8 rounds
ROT = ((10, 26), (11, 21), (13, 27), (23, 5), (6, 20), (17, 11), (25, 10), (18, 20))

MODES = ("words", "uniform", "normal")
STREAM_ROUNDS = 20
#: SBUF plan: at most this many [P, F] 4-byte tiles live at once (24 constant sites, the [P, F, 4]
#: output, four lanes, temporaries and the normal mode's radius/sin tiles; the emulator's peak at
#: F = 512 is 33 tiles for words, 37 for uniforms, 41 for normals) -- 96 KiB per partition at F = 512.
SBUF_TILES = 48
assert SBUF_TILES * 4 * FMAX <= sbuf_budget("trn1"), "the Threefry tile plan must fit SBUF"


def threefry_counts(nblocks: int, mode: str = "words") -> dict:
    """Closed-form counters of one ``threefry_kernel`` call (what the emulator must count)."""
    f = tile_f(nblocks)
    t = cdiv(nblocks, PMAX * f)
    c = {"hbm_read_bytes": 0, "hbm_write_bytes": 16 * nblocks, "gpsimd": 24 + 61 * t,
         "vector": 150 * t, "dma": _store_dmas(nblocks, f)}
    if mode == "uniform":
        c["vector"] += 2 * t
    elif mode == "normal":
        c["gpsimd"] += 1 + 2 * t
        c["vector"] += 3 + 10 * t
        c["scalar"] = 8 * t
    return c


class Lanes:
    """``P x F`` uint32 tile arithmetic on values that are tiles or host ints (call constants).

    A constant meeting a tile in an addition is a tile memset once per call per use site: the
    sites are numbered in program order within a tile, and later tiles reuse the first tile's.
    """

    def __init__(self, f: int):
        self.f = f
        self._sites = []
        self._i = 0

    def start_tile(self):
        self._i = 0

    def tile(self, name="t", dtype=None):
        return nl.ndarray((PMAX, self.f), dtype=dtype or nl.uint32, buffer=nl.sbuf, name=name)

    def const(self, v: int):
        if self._i == len(self._sites):
            t = self.tile(f"k{self._i}")
            nisa.memset(t, v, engine=nisa.engine.gpsimd)
            self._sites.append(t)
        t = self._sites[self._i]
        self._i += 1
        return t

    def add(self, a, b, out=None):
        if isinstance(a, int) and isinstance(b, int):
            return (a + b) & MASK
        if isinstance(a, int):
            a, b = b, a
        if isinstance(b, int):
            b = self.const(b)
        dst = self.tile() if out is None else out
        nisa.tensor_tensor(dst, a, b, nl.add, engine=nisa.engine.gpsimd)
        return dst

    def xor(self, a, b, out=None):
        if isinstance(a, int) and isinstance(b, int):
            return a ^ b
        if isinstance(a, int):
            a, b = b, a
        dst = self.tile() if out is None else out
        if isinstance(b, int):
            nisa.tensor_scalar(dst, a, nl.bitwise_xor, b)
        else:
            nisa.tensor_tensor(dst, a, b, nl.bitwise_xor, engine=nisa.engine.vector)
        return dst

    def rotl_xor(self, v, r: int, a):
        """``rotl(v, r) ^ a``: 4 Vector instructions for a tile ``v`` (1 for an int v and a tile a)."""
        if isinstance(v, int):
            return self.xor(((v << r) | (v >> (32 - r))) & MASK, a)
        hi = self.tile()
        nisa.tensor_scalar(hi, v, nl.left_shift, r)
        lo = self.tile()
        nisa.tensor_scalar(lo, v, nl.right_shift, 32 - r)
        nisa.tensor_tensor(hi, hi, lo, nl.bitwise_or, engine=nisa.engine.vector)
        return self.xor(hi, a)

    def rounds(self, x, k, rounds: int, outs=(None, None, None, None)):
        """Threefry4x32-``rounds`` on lanes ``x`` under key words ``k`` (tiles or ints); the last
        injection writes into ``outs`` views when given."""
        k4 = self.xor(self.xor(self.xor(k[0], k[1]), self.xor(k[2], k[3])), PARITY)
        ks = (k[0], k[1], k[2], k[3], k4)
        last = 4 * (rounds // 4) - 1

        def inject(s, x, o=(None, None, None, None)):
            y = [self.add(x[i], ks[(s + i) % 5], out=o[i] if i < 3 else None) for i in range(3)]
            v = ks[(s + 3) % 5]
            if isinstance(v, int):
                y.append(self.add(x[3], (v + s) & MASK, out=o[3]))
            else:
                t = self.add(x[3], v, out=None if s else o[3])
                y.append(self.add(t, s, out=o[3]) if s else t)
            return y

        x = inject(0, list(x))
        for r in range(rounds):
            ra, rb = ROT[r % 8]
            a, b, c, d = (0, 1, 2, 3) if r % 2 == 0 else (0, 3, 2, 1)
            x[a] = self.add(x[a], x[b])
            x[b] = self.rotl_xor(x[b], ra, x[a])
            x[c] = self.add(x[c], x[d])
            x[d] = self.rotl_xor(x[d], rb, x[c])
            if r % 4 == 3:
                x = inject((r + 1) // 4, x, outs if r == last else (None, None, None, None))
        if rounds % 4 and outs[0] is not None:  # rounds after the last injection: copy out
            for i in range(4):
                nisa.tensor_copy(outs[i], x[i], engine=nisa.engine.vector)
        return x


def _column(value, name):
    c = nl.ndarray((PMAX, 1), dtype=nl.float32, buffer=nl.sbuf, name=name)
    nisa.memset(c, value)
    return c


@nki.jit
def threefry_kernel(seed, subsequence, block0, nblocks, mode="words"):
    """Stream blocks block0 .. block0+nblocks-1: [nblocks, 4] uint32 words, fp32 uniforms or fp32 normals."""
    f = tile_f(nblocks)
    ln = Lanes(f)
    key = (seed & MASK, seed >> 32, 0, 0)
    b_hi = block0 >> 32
    s0, s1 = subsequence & MASK, subsequence >> 32
    odt = nl.uint32 if mode == "words" else nl.float32
    out = nl.ndarray((nblocks, 4), dtype=odt, buffer=nl.shared_hbm)
    if mode == "normal":
        quarter = nl.ndarray((PMAX, f), dtype=nl.uint32, buffer=nl.sbuf, name="quarter")
        nisa.memset(quarter, QUARTER, engine=nisa.engine.gpsimd)
        ulow, rbias, shift = _column(2.0**-24, "u_bias"), _column(R_BIAS, "r_bias"), _column(-C_PI, "angle_bias")
    for t in nl.static_range(ntiles(nblocks, PMAX * f)):
        b0, rem = tile(t, nblocks, PMAX * f)
        ln.start_tile()
        ctr = nl.ndarray((PMAX, f), dtype=nl.int32, buffer=nl.sbuf, name="ctr")
        lo = (block0 + b0) & MASK
        nisa.iota(ctr, [[1, f]], offset=lo - (1 << 32) if lo >= 1 << 31 else lo, channel_multiplier=f)
        x0 = ctr.view(nl.uint32)
        if mode == "normal":
            x = ln.rounds((x0, b_hi, s0, s1), key, STREAM_ROUNDS)
            res = nl.ndarray((PMAX, f, 4), dtype=nl.float32, buffer=nl.sbuf, name="z")
            for j, (a, b) in zip((0, 2), ((x[0], x[1]), (x[2], x[3]))):
                m = ln.tile()
                nisa.tensor_scalar(m, a, nl.right_shift, 8)
                lg = ln.tile("log_u1", nl.float32)
                nisa.activation(lg, nl.log, m, bias=ulow, scale=2.0**-24)
                r = ln.tile("radius", nl.float32)
                nisa.activation(r, nl.sqrt, lg, bias=rbias, scale=-2.0)
                for k in range(2):
                    word = b
                    if k:
                        word = ln.tile()
                        nisa.tensor_tensor(word, b, quarter, nl.add, engine=nisa.engine.gpsimd)
                    mw = ln.tile()
                    nisa.tensor_scalar(mw, word, nl.right_shift, 8)
                    s = ln.tile("sin", nl.float32)
                    nisa.activation(s, nl.sin, mw, bias=shift, scale=S_ANGLE)
                    nisa.tensor_tensor(res[:, :, j + k], s, r, nl.multiply, engine=nisa.engine.vector)
        else:
            words = nl.ndarray((PMAX, f, 4), dtype=nl.uint32, buffer=nl.sbuf, name="words")
            ln.rounds((x0, b_hi, s0, s1), key, STREAM_ROUNDS, outs=tuple(words[:, :, j] for j in range(4)))
            if mode == "uniform":
                m = nl.ndarray((PMAX, f, 4), dtype=nl.uint32, buffer=nl.sbuf, name="m24")
                nisa.tensor_scalar(m, words, nl.right_shift, 8)
                res = nl.ndarray((PMAX, f, 4), dtype=nl.float32, buffer=nl.sbuf, name="u")
                nisa.tensor_scalar(res, m, nl.multiply, 2.0**-24)
            else:
                res = words
        store_tile(out, res, b0, rem, f)
    return out
