"""Complex elementwise multiply: ``y = a * b`` (or ``a * conj(b)``) on split real/imaginary planes.

Dimensions
----------
``a``, ``b`` : ``[2, B, n]`` float32 (plane 0 real, plane 1 imaginary).
Output ``y`` : ``[2, B, n]`` float32.

Tiling: the batch ``B`` is the partition dim (tiles of ``<= 128`` rows, the
last one ragged); the free dim is cut into chunks of ``F = 2048`` elements
(8 KiB per plane per partition), so SBUF holds 6 chunk planes (48 KiB).

Pseudocode
----------
Per tile (Vector Engine, :func:`cmul_tile`)::

    t1 = ar * bi ; t2 = ai * bi
    yr = ar * br ; yr = yr - t2        (+ for conj(b))
    yi = ai * br ; yi = yi + t1        (- for conj(b))

six ``tensor_tensor`` instructions; the result may overwrite ``a`` (in place).

Closed forms (T = ceil(B/128) * ceil(n/F) tiles)
------------------------------------------------
    HBM bytes read    = 16 B n        (four planes)
    HBM bytes written = 8 B n
    Vector instructions = 6 T
    DMA transfers       = 6 T         (four loads, two stores)

Error: each output is two rounded products and one rounded sum: relative
error <= 3 u per component of |a||b| (u = 2^-24).
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

F = 2048  # free-dim chunk (elements)


def cmul_tile(yr, yi, ar, ai, br, bi, t1, t2, conj=False):
    """``y = a * b`` (``a * conj(b)``) on equal-shape views; ``y`` may be ``a``; t1, t2 scratch."""
    nisa.tensor_tensor(dst=t1, data1=ar, data2=bi, op=nl.multiply)
    nisa.tensor_tensor(dst=t2, data1=ai, data2=bi, op=nl.multiply)
    nisa.tensor_tensor(dst=yr, data1=ar, data2=br, op=nl.multiply)
    nisa.tensor_tensor(dst=yr, data1=yr, data2=t2, op=nl.add if conj else nl.subtract)
    nisa.tensor_tensor(dst=yi, data1=ai, data2=br, op=nl.multiply)
    nisa.tensor_tensor(dst=yi, data1=yi, data2=t1, op=nl.subtract if conj else nl.add)


def cmul_counts(B, n):
    """The closed forms above as a dict (what the emulator must count)."""
    t = cdiv(B, PMAX) * cdiv(n, F)
    return {"hbm_read_bytes": 16 * B * n, "hbm_write_bytes": 8 * B * n, "vector": 6 * t, "dma": 6 * t,
            "tensor": 0}


@nki.jit
def cmul_kernel(a, b, conj=False):
    """``a * b`` (or ``a * conj(b)``) for ``[2, B, n]`` float32 split-complex arrays."""
    _, B, n = a.shape
    y = nl.ndarray((2, B, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for bt in nl.static_range(ntiles(B, PMAX)):
        b0, bb = tile(bt, B, PMAX)
        for ft in nl.static_range(ntiles(n, F)):
            f0, ff = tile(ft, n, F)
            tiles = [nl.ndarray((bb, ff), dtype=nl.float32, buffer=nl.sbuf, name=f"c{i}") for i in range(6)]
            ar, ai, br, bi, t1, t2 = tiles
            for plane, src in ((ar, a[0]), (ai, a[1]), (br, b[0]), (bi, b[1])):
                nisa.dma_copy(dst=plane, src=src[b0:b0 + bb, f0:f0 + ff])
            cmul_tile(ar, ai, ar, ai, br, bi, t1, t2, conj)
            nisa.dma_copy(dst=y[0][b0:b0 + bb, f0:f0 + ff], src=ar)
            nisa.dma_copy(dst=y[1][b0:b0 + bb, f0:f0 + ff], src=ai)
    return y
