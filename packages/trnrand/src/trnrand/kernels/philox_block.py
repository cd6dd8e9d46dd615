"""Philox4x32-R block function on explicit counters and keys (``trnrand.philox4x32`` on the device).

What it computes
----------------
Inputs (HBM): ``counter [n, 4]`` and ``key [n, 2]`` uint32 (row ``i`` is one
counter and its key, least significant word first); constant ``rounds``
(1 .. 16). Output ``[n, 4]`` uint32: row ``i`` is
``philox4x32_R(counter[i], key[i])`` -- the Random123 block function, the
torch path's ``_philox_torch`` word for word (integers: bit-identical).

Unlike :mod:`trnrand.kernels.philox` (the stream: counters from an
``iota``, one key per call), every element has its own key, so the key
schedule is two tiles: after each round but the last ``k0 += W0``,
``k1 += W1`` (GpSimd uint32 adds, exact and wrapping mod 2**32). The
multiplies are ``Lanes.mulhilo`` (16-bit limbs on GpSimd, see the stream
kernel's docstring for why), the xors Vector bitvec instructions on tiles.

Dimensions
----------
``counter [n, 4]``, ``key [n, 2]`` uint32 in HBM; ``rounds`` compile-time.
Output ``[n, 4]`` uint32; on chip, tiles of ``[128, F]`` rows.

Pseudocode
----------
::

    for t in static_range(T):                        # tile t: rows tile(t, n, 128 F)
        c, k = load counter, key rows of the tile
        repeat rounds times: (c0..c3) = philox_round(c, k);  k += (W0, W1) but after the last
        store c

Layout and tiling
-----------------
Partition dim: 128 runs of consecutive rows; free dim: ``F = min(512,
ceil(n / 128))`` rows per partition, so a tile is ``128 x F`` rows, row
``tile0 + p F + i`` at partition ``p``, column ``i``. Per tile the counters
(``[128, 4F]``) and keys (``[128, 2F]``) are loaded with one DMA each (two
for a ragged last tile: its full partitions, then the leftover rows),
the rounds run in SBUF, the result is stored with one DMA (two when
ragged). Lanes and key words are strided views of the loaded tiles (no
copies). A ragged last tile computes its unused lanes on whatever the SBUF
held (never stored).

Closed forms (``T = ceil(n / (128 F))`` tiles, ``R`` rounds, ``D`` = DMAs per
array = ``T + [ragged last tile has both parts]``)
------------------------------------------------------------------------
Per round: 2 ``mulhilo`` (Vector 8 + GpSimd 10 each) + 4 Vector xors; the key
bump (GpSimd 2) after every round but the last.

    GpSimd instructions = 8 (memset constants) + T (22 R - 2)
    Vector instructions = T * 20 R
    DMA transfers       = 3 D
    HBM bytes read      = 24 n;   written = 16 n
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

from .philox import M0, M1, W0, W1, Lanes, _store_dmas, tile_f


def philox_block_counts(n: int, rounds: int = 10) -> dict:
    """Closed-form counters of one ``philox_block_kernel`` call of ``n`` rows."""
    f = tile_f(n)
    t = cdiv(n, PMAX * f)
    return {
        "hbm_read_bytes": 24 * n,
        "hbm_write_bytes": 16 * n,
        "gpsimd": 8 + t * (22 * rounds - 2),
        "vector": t * 20 * rounds,
        "dma": 3 * _store_dmas(n, f),
    }


def _move(hbm, sbuf, r0: int, rem: int, f: int, width: int, load: bool):
    """DMA rows r0 .. of hbm [n, width] to/from SBUF [P, f, width]: the full partitions, then the leftover rows."""
    q, r = divmod(rem, f)
    parts = []
    if q:
        parts.append((hbm[r0:r0 + q * f, :].reshape((q, width * f)), sbuf[0:q, :, :].reshape((q, width * f))))
    if r:
        parts.append((hbm[r0 + q * f:r0 + q * f + r, :].reshape((1, width * r)),
                      sbuf[q:q + 1, 0:r, :].reshape((1, width * r))))
    for h, s in parts:
        if load:
            nisa.dma_copy(dst=s, src=h)
        else:
            nisa.dma_copy(dst=h, src=s)


@nki.jit
def philox_block_kernel(counter, key, rounds=10):
    """philox4x32_rounds of every row of counter [n, 4] under key [n, 2] (uint32): [n, 4] uint32."""
    n = counter.shape[0]
    f = tile_f(n)
    ln = Lanes(f)
    w0, w1 = ln.const(W0), ln.const(W1)
    out = nl.ndarray((n, 4), dtype=nl.uint32, buffer=nl.shared_hbm)
    for t in nl.static_range(ntiles(n, PMAX * f)):
        r0, rem = tile(t, n, PMAX * f)
        c = nl.ndarray((PMAX, f, 4), dtype=nl.uint32, buffer=nl.sbuf, name="ctr")
        k = nl.ndarray((PMAX, f, 2), dtype=nl.uint32, buffer=nl.sbuf, name="key")
        _move(counter, c, r0, rem, f, 4, load=True)
        _move(key, k, r0, rem, f, 2, load=True)
        res = nl.ndarray((PMAX, f, 4), dtype=nl.uint32, buffer=nl.sbuf, name="words")
        x0, x1, x2, x3 = (c[:, :, j] for j in range(4))
        k0, k1 = k[:, :, 0], k[:, :, 1]
        for rnd in range(rounds):
            last = rnd == rounds - 1
            hi0, lo0 = ln.mulhilo(x0, M0, out_lo=res[:, :, 3] if last else None)
            hi1, lo1 = ln.mulhilo(x2, M1, out_lo=res[:, :, 1] if last else None)
            y0 = ln.tt(hi1, x1, nl.bitwise_xor, nisa.engine.vector)
            y0 = ln.tt(y0, k0, nl.bitwise_xor, nisa.engine.vector, out=res[:, :, 0] if last else None)
            y2 = ln.tt(hi0, x3, nl.bitwise_xor, nisa.engine.vector)
            y2 = ln.tt(y2, k1, nl.bitwise_xor, nisa.engine.vector, out=res[:, :, 2] if last else None)
            x0, x1, x2, x3 = y0, lo1, y2, lo0
            if not last:
                k0 = ln.add(k0, w0)
                k1 = ln.add(k1, w1)
        _move(out, res, r0, rem, f, 4, load=False)
    return out
