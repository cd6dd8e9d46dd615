"""Bluestein (chirp-z) kernel: a DFT of any length ``n`` as a length-``m`` circular convolution.

``X_k = w_k sum_j (x_j w_j) conj(w_(k-j))``, ``w_k = exp(-i pi k^2 / n)``,
``m = 2**ceil(log2(2n - 1))``; built on the Stockham stages
(:func:`trnfft.kernels.fft_pow2.stockham_tile`) and the complex multiply
(:func:`trnfft.kernels.cmul.cmul_tile`), all on chip.

Pseudocode
----------
Per batch tile of <= 128 rows:

1. load the row into planes of length ``m`` and zero the tail (2 memsets);
2. ``a = x * w`` (conjugate chirp for the inverse);
3. forward Stockham of length ``m``;
4. multiply by the filter spectrum ``F`` (host table, already divided by ``m``);
5. inverse Stockham of length ``m``;
6. ``y = c[:n] * w``; store.

Dimensions
----------
``x``     : ``[2, B, n]`` float32.
``chirp`` : ``[2, n]`` float32 ``w_k`` (k^2 reduced mod 2n exactly, fp64 -> fp32).
``filt``  : ``[2, m]`` float32 ``FFT_m(b) / m``, ``b_j = conj(w_|j|)`` wrapped
            circularly (for the inverse transform the filter of ``conj(w)``).
``tw``    : ``[2, T]`` the Stockham twiddle table of length ``m``.
Output ``y`` : ``[2, B, n]`` float32 (unnormalized DFT, or inverse DFT).

SBUF per partition: three plane pairs of ``m`` (24 m bytes), the filter
(8 m), the chirp (8 n) and one stage table (<= 8 m): ``m <= 4096``
(``n <= 2048``) on trn1.

Closed forms (tb = ceil(B/128); s = Stockham per-tile counts of length m)
------------------------------------------------------------------------
    vector instructions = tb (2 + 18 + 2 s.vector)   (memsets, three complex multiplies, two FFTs)
    DMA transfers       = tb (6 + 2 s.tables)
    HBM bytes read      = 8 B n + B (8 n + 8 m + 8 s.table_elems)
    HBM bytes written   = 8 B n

fp32 error: ``BLUESTEIN_BOUND(n) = 30 u log2 m`` relative.
"""

from __future__ import annotations

import functools

import numpy as np

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

from .cmul import cmul_tile
from .fft_pow2 import planes, stockham_tile, tile_counts

MAX_M = 4096


def length(n: int) -> int:
    """The convolution length m for n (a power of two >= 2n - 1)."""
    return 1 << (2 * n - 2).bit_length() if n > 1 else 1


@functools.lru_cache(maxsize=64)
def tables(n: int, inverse: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``(chirp [2, n], filter [2, m])`` (filter divided by m), from float64 tables."""
    from trnfft.algorithms import chirp, chirp_filter_spectrum

    c, s = chirp(n)
    m = length(n)
    if inverse:  # the chirp-z transform with conj(w): chirp conj(w), filter spectrum of w wrapped
        b = np.zeros(m, dtype=np.complex128)
        b[:n] = c + 1j * s
        b[m - n + 1:] = (c[1:] + 1j * s[1:])[::-1]
        B = np.fft.fft(b)
        fr, fi = B.real, B.imag
    else:
        fr, fi = chirp_filter_spectrum(n)
    return (np.ascontiguousarray(np.stack([c, s]).astype(np.float32)),
            np.ascontiguousarray((np.stack([fr, fi]) / m).astype(np.float32)))


def fft_any_length_counts(B: int, n: int) -> dict:
    """The closed forms above as a dict (what the emulator must count)."""
    m = length(n)
    tb = cdiv(B, PMAX)
    s = tile_counts(m)
    return {"hbm_read_bytes": 8 * B * n + B * (8 * n + 8 * m + 4 * 2 * s["table_elems"]),
            "hbm_write_bytes": 8 * B * n, "vector": tb * (20 + 2 * s["vector"]),
            "dma": tb * (6 + 2 * s["tables"]), "tensor": 0}


def _bcast(tab, hbm, bb, length_):
    nisa.dma_copy(dst=tab, src=hbm.ap(pattern=[[0, bb], [length_, 2], [1, length_]], offset=0))


@nki.jit
def fft_any_length_kernel(x, chirp, filt, tw, inverse=False):
    """Bluestein (chirp-z) DFT (or inverse) of every row of ``x`` ``[2, B, n]``, any n, unnormalized."""
    _, B, n = x.shape
    m = filt.shape[1]
    y = nl.ndarray((2, B, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for bt in nl.static_range(ntiles(B, PMAX)):
        b0, bb = tile(bt, B, PMAX)
        X, T, Z = planes(bb, m, "x"), planes(bb, m, "t"), planes(bb, m, "z")
        nisa.dma_copy(dst=X[0][:, 0:n], src=x[0][b0:b0 + bb, :])
        nisa.dma_copy(dst=X[1][:, 0:n], src=x[1][b0:b0 + bb, :])
        nisa.memset(dst=X[0][:, n:m], value=0.0)
        nisa.memset(dst=X[1][:, n:m], value=0.0)
        w = nl.ndarray((bb, 2 * n), dtype=nl.float32, buffer=nl.sbuf, name="chirp")
        _bcast(w, chirp, bb, n)
        wr, wi = w[:, 0:n], w[:, n:2 * n]
        cmul_tile(X[0][:, 0:n], X[1][:, 0:n], X[0][:, 0:n], X[1][:, 0:n], wr, wi,
                  T[0][:, 0:n], T[1][:, 0:n], conj=inverse)
        R, F = stockham_tile(X, T, Z, tw, bb, m, False)
        f = nl.ndarray((bb, 2 * m), dtype=nl.float32, buffer=nl.sbuf, name="filter")
        _bcast(f, filt, bb, m)
        cmul_tile(R[0], R[1], R[0], R[1], f[:, 0:m], f[:, m:2 * m], T[0], T[1])
        del f
        R, F = stockham_tile(R, T, F, tw, bb, m, True)
        cmul_tile(R[0][:, 0:n], R[1][:, 0:n], R[0][:, 0:n], R[1][:, 0:n], wr, wi,
                  T[0][:, 0:n], T[1][:, 0:n], conj=inverse)
        nisa.dma_copy(dst=y[0][b0:b0 + bb, :], src=R[0][:, 0:n])
        nisa.dma_copy(dst=y[1][b0:b0 + bb, :], src=R[1][:, 0:n])
    return y
