"""Real-input FFT kernel by the half-length trick: rfft of even ``n`` through one complex FFT of ``h = n/2``.

``z_j = x_2j + i x_2j+1`` (the even and odd samples, read by two strided
DMAs), ``Z = FFT_h(z)`` with the Stockham stages
(:func:`trnfft.kernels.fft_pow2.stockham_tile`), then for ``0 < k < h``
with ``Z'_k = conj(Z_(h-k))`` (a reversed view: ``.ap`` with step -1)::

    X_k = (Z_k + Z'_k)/2 + exp(-2 pi i k/n) (Z_k - Z'_k)/(2i)

and ``X_0 = Re Z_0 + Im Z_0``, ``X_h = Re Z_0 - Im Z_0`` (real).

Dimensions
----------
``x``    : ``[B, n]`` float32, ``n = 2h``, ``h`` a power of two, ``2 <= h <= 4096``.
``half`` : ``[2, h - 1]`` float32 ``exp(-2 pi i k / n) / 2`` for ``k = 1 .. h-1``
           (fp64 from reduced angles, halved exactly, rounded once).
``tw``   : ``[2, T]`` the Stockham twiddle table of length ``h``.
Output ``y`` : ``[2, B, h + 1]`` float32, the half spectrum.

Post-processing per batch tile (Vector Engine): 4 ``tensor_tensor`` for the
sums/differences of ``Z`` and its reversal, 3 ``tensor_tensor`` + 1
``scalar_tensor_tensor`` for each of the real and imaginary parts, 2 for
``X_0``/``X_h`` and 2 memsets (their imaginary parts): 16.

Pseudocode
----------
Per batch tile of <= 128 rows::

    zr, zi = x[:, 0::2], x[:, 1::2]                     (two strided DMAs)
    Z = stockham_tile(z)                                (length h)
    A = Z + Z', D = Z - Z'    (Z'_k = conj Z_(h-k), a reversed view)
    X_k = A_k / 2 - i half_k D_k   for 0 < k < h;   X_0, X_h from Re/Im Z_0
    store y[:, :, tile] = X

Closed forms (tb = ceil(B/128); s = Stockham per-tile counts of length h)
------------------------------------------------------------------------
    vector instructions = tb (s.vector + 16)
    DMA transfers       = tb (5 + s.tables)
    HBM bytes read      = 4 B n + B (8 (h - 1) + 4 s.table_elems)
    HBM bytes written   = 8 B (h + 1)

fp32 error: the inner transform's ``STOCKHAM_BOUND(h)`` plus ~3 u.
"""

from __future__ import annotations

import functools

import numpy as np

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

from .fft_pow2 import MAX_N, planes, stockham_tile, tile_counts

MAX_HALF = MAX_N


def fits(n: int) -> bool:
    """True when the kernel takes length n (even, n/2 a power of two in [2, MAX_HALF])."""
    h = n // 2
    return n % 2 == 0 and 2 <= h <= MAX_HALF and h & (h - 1) == 0


@functools.lru_cache(maxsize=64)
def half_table(n: int) -> np.ndarray:
    """float32 ``[2, n/2 - 1]``: ``exp(-2 pi i k/n) / 2``, k = 1 .. n/2 - 1."""
    from trnfft.algorithms import cos_sin, reduced_angle

    c, s = cos_sin(reduced_angle(np.arange(1, n // 2), n))
    return np.ascontiguousarray((np.stack([c, s]) / 2).astype(np.float32))


def rfft_counts(B: int, n: int) -> dict:
    """The closed forms above as a dict (what the emulator must count)."""
    h = n // 2
    tb = cdiv(B, PMAX)
    s = tile_counts(h)
    return {"hbm_read_bytes": 4 * B * n + B * (8 * (h - 1) + 4 * s["table_elems"]),
            "hbm_write_bytes": 8 * B * (h + 1), "vector": tb * (s["vector"] + 16),
            "dma": tb * (5 + s["tables"]), "tensor": 0}


@nki.jit
def rfft_kernel(x, half, tw):
    """Half spectrum ``[2, B, n/2 + 1]`` of the real rows ``x`` ``[B, n]`` by the half-length complex FFT."""
    B, n = x.shape
    h = n // 2
    y = nl.ndarray((2, B, h + 1), dtype=nl.float32, buffer=nl.shared_hbm)
    for bt in nl.static_range(ntiles(B, PMAX)):
        b0, bb = tile(bt, B, PMAX)
        X, T, Z = planes(bb, h, "x"), planes(bb, h, "t"), planes(bb, h, "z")
        for p in range(2):  # even samples -> real plane, odd samples -> imaginary plane
            nisa.dma_copy(dst=X[p], src=x.ap(pattern=[[n, bb], [2, h]], offset=b0 * n + p))
        R, F = stockham_tile(X, T, Z, tw, bb, h, False)
        zr, zi = R
        q = h - 1
        fr, fi = zr[:, 1:h], zi[:, 1:h]  # Z_k, k = 1 .. h-1
        rr = zr.ap(pattern=[[h, bb], [-1, q]], offset=q)  # Z_(h-k)
        ri = zi.ap(pattern=[[h, bb], [-1, q]], offset=q)
        tab = nl.ndarray((bb, 2 * q), dtype=nl.float32, buffer=nl.sbuf, name="half")
        nisa.dma_copy(dst=tab, src=half.ap(pattern=[[0, bb], [q, 2], [1, q]], offset=0))
        hc, hs = tab[:, 0:q], tab[:, q:2 * q]
        yr = nl.ndarray((bb, h + 1), dtype=nl.float32, buffer=nl.sbuf, name="yr")
        yi = nl.ndarray((bb, h + 1), dtype=nl.float32, buffer=nl.sbuf, name="yi")
        sr, ai = yr[:, 1:h], yi[:, 1:h]
        dr, gi = F[0][:, 0:q], F[1][:, 0:q]
        t1, t2 = T[0][:, 0:q], T[1][:, 0:q]
        nisa.tensor_tensor(dst=sr, data1=fr, data2=rr, op=nl.add)       # 2 Re E
        nisa.tensor_tensor(dst=ai, data1=fi, data2=ri, op=nl.subtract)  # 2 Im E
        nisa.tensor_tensor(dst=dr, data1=fr, data2=rr, op=nl.subtract)  # Re D   (D = Z - Z', O = D/(2i))
        nisa.tensor_tensor(dst=gi, data1=fi, data2=ri, op=nl.add)       # Im D
        # X = E + w O with O = D/(2i): Re X = Re E + (c Im D + s Re D)/2, Im X = Im E + (s Im D - c Re D)/2
        nisa.tensor_tensor(dst=t1, data1=gi, data2=hc, op=nl.multiply)
        nisa.tensor_tensor(dst=t2, data1=dr, data2=hs, op=nl.multiply)
        nisa.tensor_tensor(dst=t1, data1=t1, data2=t2, op=nl.add)
        nisa.scalar_tensor_tensor(dst=sr, data=sr, op0=nl.multiply, operand0=0.5, op1=nl.add, operand1=t1)
        nisa.tensor_tensor(dst=t1, data1=gi, data2=hs, op=nl.multiply)
        nisa.tensor_tensor(dst=t2, data1=dr, data2=hc, op=nl.multiply)
        nisa.tensor_tensor(dst=t1, data1=t1, data2=t2, op=nl.subtract)
        nisa.scalar_tensor_tensor(dst=ai, data=ai, op0=nl.multiply, operand0=0.5, op1=nl.add, operand1=t1)
        nisa.tensor_tensor(dst=yr[:, 0:1], data1=zr[:, 0:1], data2=zi[:, 0:1], op=nl.add)
        nisa.tensor_tensor(dst=yr[:, h:h + 1], data1=zr[:, 0:1], data2=zi[:, 0:1], op=nl.subtract)
        nisa.memset(dst=yi[:, 0:1], value=0.0)
        nisa.memset(dst=yi[:, h:h + 1], value=0.0)
        nisa.dma_copy(dst=y[0][b0:b0 + bb, :], src=yr)
        nisa.dma_copy(dst=y[1][b0:b0 + bb, :], src=yi)
    return y
