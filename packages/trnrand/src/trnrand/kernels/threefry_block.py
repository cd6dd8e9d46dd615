"""Threefry4x32-R block function on explicit counters and keys (``trnrand.threefry4x32`` on the device).

What it computes
----------------
``threefry_block_kernel(counters, keys, rounds)``: inputs (HBM) ``counters
[nb, 4]`` and ``keys [nb, 4]`` uint32 (row ``i`` is one counter and its key,
least significant word first); constant ``rounds`` (1 .. 72). Output ``[nb,
4]`` uint32: row ``i`` is ``threefry4x32_R(counters[i], keys[i])``
(:mod:`trnrand._threefry`), the torch path's words (integers: bit-identical).

Unlike :mod:`trnrand.kernels.threefry` (the stream: counters from an
``iota``, one key per call), every lane and key word is a tile, so nothing
folds on the host; the round arithmetic is that file's :class:`Lanes`
(32-bit additions on GpSimd, shifts, or and xor on Vector).

Dimensions
----------
``counters [nb, 4]``, ``keys [nb, 4]`` uint32 in HBM; ``rounds``
compile-time. Partition dim: 128 runs of consecutive rows; free dim ``F =
min(512, ceil(nb / 128))`` rows per partition
(``trnrand.kernels.philox.tile_f``), a tile is ``128 x F`` rows, row ``tile0 +
p F + i`` at partition ``p``, column ``i``; ``T = ceil(nb / (128 F))`` tiles.
Counters and keys are loaded, and the result stored, with one DMA each per
tile (two for a ragged last tile with both full rows and a leftover).

Pseudocode
----------
::

    for t in static_range(T):                      # tile t: rows tile(t, nb, 128 F)
        x, k = load counter, key rows of the tile  # lanes x0..x3, k0..k3: strided views
        ks = (k0, k1, k2, k3, k0 ^ k1 ^ k2 ^ k3 ^ 0x1BD11BDA)
        x_i += ks[i]                               # inject(0)
        for r in 0 .. R-1:                         # (a, b, c, d) = (0,1,2,3) / (0,3,2,1)
            x_a += x_b ; x_b = (x_b << ra | x_b >> 32-ra) ^ x_a
            x_c += x_d ; x_d = (x_d << rb | x_d >> 32-rb) ^ x_c
            if r % 4 == 3: x_i += ks[(s + i) % 5], x3 += s  (s = (r + 1) // 4)
        store [x0, x1, x2, x3]

Closed forms (``J = R // 4`` injections after rounds)
-----------------------------------------------------
    GpSimd = J (memsets of s = 1 .. J) + T * (4 + 2 R + 5 J)
    Vector = T * (4 + 8 R + 4 [R % 4 != 0: copy-out after the last round])
             (key parity: 3 xors of tiles + 1 with the constant)
    DMA = 3 * stores (counter and key loads in the store's parts); HBM read 32 nb, written 16 nb
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

from .philox import _store_dmas, store_tile, tile_f
from .threefry import Lanes


def threefry_block_counts(nblocks: int, rounds: int) -> dict:
    """Closed-form counters of one ``threefry_block_kernel`` call."""
    f = tile_f(nblocks)
    t = cdiv(nblocks, PMAX * f)
    j = rounds // 4
    return {"hbm_read_bytes": 32 * nblocks, "hbm_write_bytes": 16 * nblocks,
            "gpsimd": j + t * (4 + 2 * rounds + 5 * j), "vector": t * (4 + 8 * rounds + (4 if rounds % 4 else 0)),
            "dma": 3 * _store_dmas(nblocks, f)}



def _load_tile(dst, src, b0: int, rem: int, f: int):
    """Load rows b0 .. of src [nblocks, 4] into dst [P, F, 4] (the store's parts, mirrored)."""
    q, r = divmod(rem, f)
    if q:
        nisa.dma_copy(dst=dst[0:q, :, :].reshape((q, 4 * f)), src=src[b0:b0 + q * f, :].reshape((q, 4 * f)))
    if r:
        nisa.dma_copy(dst=dst[q:q + 1, 0:r, :].reshape((1, 4 * r)),
                      src=src[b0 + q * f:b0 + q * f + r, :].reshape((1, 4 * r)))


@nki.jit
def threefry_block_kernel(counters, keys, rounds=20):
    """Threefry4x32-rounds of uint32 rows: counters [nb, 4], keys [nb, 4] -> [nb, 4] uint32."""
    nblocks = counters.shape[0]
    f = tile_f(nblocks)
    ln = Lanes(f)
    out = nl.ndarray((nblocks, 4), dtype=nl.uint32, buffer=nl.shared_hbm)
    for t in nl.static_range(ntiles(nblocks, PMAX * f)):
        b0, rem = tile(t, nblocks, PMAX * f)
        ln.start_tile()
        c = nl.ndarray((PMAX, f, 4), dtype=nl.uint32, buffer=nl.sbuf, name="ctr")
        k = nl.ndarray((PMAX, f, 4), dtype=nl.uint32, buffer=nl.sbuf, name="key")
        _load_tile(c, counters, b0, rem, f)
        _load_tile(k, keys, b0, rem, f)
        words = nl.ndarray((PMAX, f, 4), dtype=nl.uint32, buffer=nl.sbuf, name="words")
        ln.rounds(tuple(c[:, :, j] for j in range(4)), tuple(k[:, :, j] for j in range(4)), rounds,
                  outs=tuple(words[:, :, j] for j in range(4)))
        store_tile(out, words, b0, rem, f)
    return out
