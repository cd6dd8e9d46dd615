"""Inverse real FFT kernel by the half-length trick: ``n irfft`` of even ``n`` through one inverse FFT of ``h = n/2``.

The inverse of :mod:`trnfft.kernels.rfft`. For real ``x`` of length
``n = 2h`` with ``z_j = x_2j + i x_2j+1`` and ``Z = FFT_h(z)``, the half
spectrum satisfies ``X_k = E_k + w^k O_k`` (``w = exp(-2 pi i/n)``, ``E``/``O``
the spectra of the even/odd samples) and ``X_(h-k) = conj(E_k - w^k O_k)``.
Solving for ``Z = E + i O`` and doubling::

    Z'_k = (X_k + conj X_(h-k)) + i w^-k (X_k - conj X_(h-k)),   k = 0 .. h-1

so the unnormalized inverse transform of ``Z'`` (length h) is ``2 h z = n z``:
its real parts are ``n x_2j``, its imaginary parts ``n x_2j+1`` -- written
back interleaved by two stride-2 DMAs. With ``A = X_k + conj X_(h-k)``,
``D = X_k - conj X_(h-k)`` and ``w^-k = c + i s``::

    Re Z'_k = Re A - (s Re D + c Im D),   Im Z'_k = Im A + (c Re D - s Im D)

for ``0 < k < h`` (``X_(h-k)`` read through a reversed ``.ap`` view, step -1),
and ``Z'_0 = (Re X_0 + Re X_h) + i (Re X_0 - Re X_h)``: the imaginary parts of
``X_0`` and ``X_h`` are never used, which is what ``numpy.fft.irfft`` and
``scipy.fft.irfft`` do with them (a real signal's DC and Nyquist bins are real).

Dimensions
----------
``x``     : ``[2, B, h + 1]`` float32, the half spectrum (real plane, imaginary plane);
            ``h`` a power of two, ``2 <= h <= 4096``.
``ihalf`` : ``[2, h - 1]`` float32 ``exp(+2 pi i k / n)`` for ``k = 1 .. h-1``
            (:func:`ihalf_table`: fp64 from exactly reduced angles, rounded once).
``tw``    : ``[2, T]`` the Stockham twiddle table of length ``h``.
Output ``y`` : ``[B, n]`` float32, ``n`` times ``irfft(x, n)`` (unnormalized; the host scales).

SBUF per partition: the real plane of the input (``4 (h + 1)`` bytes), the
three Stockham plane pairs (``24 h``; the input's imaginary plane lands in one
of them) and the table (``8 (h - 1)``, freed before the stages, which then
hold one stage table of ``<= 8 h``): about ``36 h`` bytes, 144 KiB at
``h = 4096`` (trn1: 192 KiB).

Pre-pass per batch tile (Vector Engine): 4 ``tensor_tensor`` for ``A`` and
``D``, 2 for ``Z'_0``, 4 each for ``Re Z'`` and ``Im Z'``: 14.

Pseudocode
----------
Per batch tile of <= 128 rows::

    X = load x (half spectrum)
    A = X_k + conj X_(h-k),  D = X_k - conj X_(h-k)
    Z' = A + i w^-k D        (Z'_0 from X_0, X_h)
    z = inverse stockham_tile(Z')                       (length h)
    y[:, 0::2], y[:, 1::2] = Re z, Im z                 (two strided DMAs)

Closed forms (tb = ceil(B/128); s = Stockham per-tile counts of length h)
------------------------------------------------------------------------
    vector instructions = tb (s.vector + 14)
    DMA transfers       = tb (5 + s.tables)      (2 planes in, the table, 2 interleaved stores)
    HBM bytes read      = 4 B (2 h + 1) + B (8 (h - 1) + 4 s.table_elems)
    HBM bytes written   = 4 B n
    Tensor Engine instructions = 0

fp32 error: relative 2-norm error of ``y`` at most the inner transform's
``STOCKHAM_BOUND(h)`` plus ~4 u (one rounded sum and a rounded two-term
product per component before it); tested against ``scipy.fft.irfft``.
"""

from __future__ import annotations

import functools

import numpy as np

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

from .fft_pow2 import planes, stockham_tile, tile_counts


@functools.lru_cache(maxsize=64)
def ihalf_table(n: int) -> np.ndarray:
    """float32 ``[2, n/2 - 1]``: ``exp(+2 pi i k/n)`` (cos, sin), k = 1 .. n/2 - 1."""
    from trnfft.algorithms import cos_sin, reduced_angle

    c, s = cos_sin(reduced_angle(-np.arange(1, n // 2), n))  # angle +2 pi k/n, reduced exactly
    return np.ascontiguousarray(np.stack([c, s]).astype(np.float32))


def irfft_counts(B: int, n: int) -> dict:
    """The closed forms above as a dict (what the emulator must count)."""
    h = n // 2
    tb = cdiv(B, PMAX)
    s = tile_counts(h)
    return {"hbm_read_bytes": 4 * B * (2 * h + 1) + B * (8 * (h - 1) + 4 * s["table_elems"]),
            "hbm_write_bytes": 4 * B * n, "vector": tb * (s["vector"] + 14),
            "dma": tb * (5 + s["tables"]), "tensor": 0}


@nki.jit
def irfft_kernel(x, ihalf, tw):
    """``n irfft`` ``[B, n]`` (``n = 2 (m - 1)``) of the half spectra ``x`` ``[2, B, m]``, half-length inverse FFT."""
    _, B, m = x.shape
    h = m - 1
    n = 2 * h
    q = h - 1
    y = nl.ndarray((B, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for bt in nl.static_range(ntiles(B, PMAX)):
        b0, bb = tile(bt, B, PMAX)
        X, T, Z = planes(bb, h, "x"), planes(bb, h, "t"), planes(bb, h, "z")
        re = nl.ndarray((bb, m), dtype=nl.float32, buffer=nl.sbuf, name="re")
        nisa.dma_copy(dst=re, src=x[0][b0:b0 + bb, :])
        nisa.dma_copy(dst=T[1], src=x[1][b0:b0 + bb, 0:h])  # Im X_h is never needed
        tab = nl.ndarray((bb, 2 * q), dtype=nl.float32, buffer=nl.sbuf, name="ihalf")
        nisa.dma_copy(dst=tab, src=ihalf.ap(pattern=[[0, bb], [q, 2], [1, q]], offset=0))
        c, s = tab[:, 0:q], tab[:, q:2 * q]
        im = T[1]
        fr, fi = re[:, 1:h], im[:, 1:h]  # X_k, k = 1 .. h-1
        rr = re.ap(pattern=[[m, bb], [-1, q]], offset=q)  # X_(h-k)
        ri = im.ap(pattern=[[h, bb], [-1, q]], offset=q)
        ar, ai = X[0][:, 1:h], X[1][:, 1:h]  # A, then Z' in place
        dr, di = Z[0][:, 0:q], Z[1][:, 0:q]
        nisa.tensor_tensor(dst=ar, data1=fr, data2=rr, op=nl.add)       # Re A
        nisa.tensor_tensor(dst=ai, data1=fi, data2=ri, op=nl.subtract)  # Im A
        nisa.tensor_tensor(dst=dr, data1=fr, data2=rr, op=nl.subtract)  # Re D
        nisa.tensor_tensor(dst=di, data1=fi, data2=ri, op=nl.add)       # Im D
        nisa.tensor_tensor(dst=X[0][:, 0:1], data1=re[:, 0:1], data2=re[:, h:m], op=nl.add)
        nisa.tensor_tensor(dst=X[1][:, 0:1], data1=re[:, 0:1], data2=re[:, h:m], op=nl.subtract)
        t1, t2 = T[0][:, 0:q], T[1][:, 0:q]  # the imaginary input plane is consumed
        nisa.tensor_tensor(dst=t1, data1=dr, data2=s, op=nl.multiply)
        nisa.tensor_tensor(dst=t2, data1=di, data2=c, op=nl.multiply)
        nisa.tensor_tensor(dst=t1, data1=t1, data2=t2, op=nl.add)
        nisa.tensor_tensor(dst=ar, data1=ar, data2=t1, op=nl.subtract)  # Re Z' = Re A - (s Re D + c Im D)
        nisa.tensor_tensor(dst=t1, data1=dr, data2=c, op=nl.multiply)
        nisa.tensor_tensor(dst=t2, data1=di, data2=s, op=nl.multiply)
        nisa.tensor_tensor(dst=t1, data1=t1, data2=t2, op=nl.subtract)
        nisa.tensor_tensor(dst=ai, data1=ai, data2=t1, op=nl.add)       # Im Z' = Im A + (c Re D - s Im D)
        del tab, re, c, s, fr, rr  # free the input plane and the table (views included) before the stages
        R, _ = stockham_tile(X, T, Z, tw, bb, h, True)
        for p in range(2):  # real parts -> even outputs, imaginary parts -> odd outputs
            nisa.dma_copy(dst=y.ap(pattern=[[n, bb], [2, h]], offset=b0 * n + p), src=R[p])
    return y
