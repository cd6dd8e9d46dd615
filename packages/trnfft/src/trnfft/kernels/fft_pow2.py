"""Stockham FFT kernel: radix-8/4 self-sorting stages for power-of-two lengths (no bit reversal).

Dimensions
----------
``x``  : ``[2, B, n]`` float32 split-complex rows, ``n = 2**L``, ``2 <= n <= MAX_N``.
``tw`` : ``[2, T]`` float32, the stage twiddle tables (:func:`twiddle_table`):
         for every stage with ``ls > 1`` the ``ls x r`` table
         ``exp(-2 pi i p k1 / (ls r))`` (``k1 < ls``, ``p < r``), cos then sin.
Output ``y`` : ``[2, B, n]`` float32, the unnormalized DFT of every row
(``inverse=True``: the unnormalized inverse DFT, conjugate twiddles).

Layout and tiling: the batch is the partition dim (tiles of ``<= 128``
rows, the last one ragged); one row of ``n`` points lives along the free
dim of three plane pairs ``X``, ``T``, ``Z`` (``24 n`` bytes per partition)
plus one stage table (``<= 8 n`` bytes), so ``n <= 4096`` on trn1.

Pseudocode
----------
Per batch tile, for each stage of :func:`radices`: a stage of radix ``r``
(``ls -> ls r``, ``ns = n / (ls r)``) views ``X`` as
``[ls, r, ns]`` and

1. multiplies ``X[k1, p, :]`` by the twiddle ``w[k1, p]`` in place (six
   ``tensor_tensor`` over all ``n`` points, the table broadcast along
   ``ns`` by a stride-0 view; ``p = 0`` entries are exactly 1),
2. runs an ``r``-point DFT over ``p`` as radix-2 decimation-in-time
   levels whose outputs alternate between ``T`` and ``Z`` (multiplications
   by ``-i`` are folded into the add/subtract; the 45-degree twiddles of
   radix 8 cost two ``tensor_scalar`` and two ``scalar_tensor_tensor``),
3. writes output ``q`` to ``Z`` viewed as ``[r, ls, ns]`` -- the Stockham
   transpose that leaves the result in natural order. ``X`` and ``Z`` swap.

Radices: 8 while ``L`` allows, then one or two radix-4 stages (radix 2
only for ``n = 2``) -- :func:`radices`.

Closed forms (tb = ceil(B/128); per batch tile, over the stages):
    vector instructions = sum_stages [6 if ls > 1] + bfly(r)
        with bfly(1) = 0, bfly(m) = 2 bfly(m/2) + 2 m + 4 g(m),
        g(m) = number of k in 1..m/2-1 with k != m/4 (bfly(2)=4, bfly(4)=16, bfly(8)=56)
    DMA transfers       = 4 + (stages with ls > 1)     (x in, y out, one table per stage)
    HBM bytes read      = 8 B n + 8 B sum_stages(ls r)  (the table is read for every row)
    HBM bytes written   = 8 B n

fp32 error: ``||y - Y|| / ||Y|| <= STOCKHAM_BOUND(n) = 8 u log2 n``
(:mod:`trnfft.algorithms`), tested against ``scipy.fft``.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

MAX_N = 4096  # three plane pairs + one stage table: 32 n bytes per partition (128 KiB at 4096)


def radices(n: int) -> list[int]:
    """Stage radices for ``n = 2**L``: radix 8, then one or two radix 4 (``[2]`` for n = 2)."""
    L = n.bit_length() - 1
    if n < 2 or n != 1 << L:
        raise ValueError(f"stockham: n must be a power of two >= 2, got {n}")
    if L == 1:
        return [2]
    fours = {0: 0, 1: 2, 2: 1}[L % 3]
    return [8] * ((L - 2 * fours) // 3) + [4] * fours


def stages(n: int) -> list[tuple[int, int, int]]:
    """``(ls, r, ns)`` of every stage."""
    out, ls = [], 1
    for r in radices(n):
        out.append((ls, r, n // (ls * r)))
        ls *= r
    return out


@functools.lru_cache(maxsize=64)
def twiddle_table(n: int) -> np.ndarray:
    """float32 ``[2, T]``: cos and sin rows of every stage's ``ls x r`` table (stages with ls > 1).

    Computed in float64 from angles reduced into ``[-pi, pi]`` with sin only
    (``cos a = sin(a + pi/2)``), rounded once to float32.
    """
    from trnfft.algorithms import stage_twiddles

    parts = [np.stack(stage_twiddles(ls, r)).reshape(2, ls * r) for ls, r, _ in stages(n) if ls > 1]
    if not parts:
        return np.zeros((2, 1), np.float32)
    return np.ascontiguousarray(np.concatenate(parts, axis=1).astype(np.float32))


def bfly(m: int) -> int:
    """Vector instructions of one m-point radix-2 DIT butterfly network (see module docstring)."""
    if m == 1:
        return 0
    g = sum(1 for k in range(1, m // 2) if 4 * k != m)
    return 2 * bfly(m // 2) + 2 * m + 4 * g


def tile_counts(n: int) -> dict:
    """Per batch tile: vector instructions, table DMAs and table elements of :func:`stockham_tile`."""
    st = stages(n)
    return {"vector": sum((6 if ls > 1 else 0) + bfly(r) for ls, r, _ in st),
            "tables": sum(1 for ls, _, _ in st if ls > 1),
            "table_elems": sum(2 * ls * r for ls, r, _ in st if ls > 1)}


def fft_pow2_counts(B: int, n: int) -> dict:
    """The closed forms above as a dict (what the emulator must count)."""
    tb = cdiv(B, PMAX)
    c = tile_counts(n)
    return {"hbm_read_bytes": 8 * B * n + 4 * B * c["table_elems"], "hbm_write_bytes": 8 * B * n,
            "vector": tb * c["vector"], "dma": tb * (4 + c["tables"]), "tensor": 0}


def _sub(op_pos, sign):
    return op_pos if sign > 0 else (nl.subtract if op_pos is nl.add else nl.add)


def _butterflies(bufs, src, ls, r, ns, bb, inverse):
    """The r-point DFT over p of ``src`` ([ls, r, ns] slots) into ``bufs['Z']`` ([r, ls, ns])."""
    def slot(buf, s):
        return buf.reshape((bb, ls, r, ns))[:, :, s, :]

    def final(buf, q):
        return buf.reshape((bb, r, ls, ns))[:, q, :, :]

    tmp = []

    def dft(a, s, m, depth):
        if m == 1:
            return [(slot(src[0], a), slot(src[1], a))]
        E = dft(a, 2 * s, m // 2, depth + 1)
        O = dft(a + s, 2 * s, m // 2, depth + 1)
        h = m // 2
        if depth == 0:
            dst = [(final(bufs["Z"][0], q), final(bufs["Z"][1], q)) for q in range(m)]
        else:
            b = bufs["T"] if depth % 2 else bufs["Z"]
            dst = [(slot(b[0], a + s * k), slot(b[1], a + s * k)) for k in range(m)]
        for k in range(h):
            (er, ei), (o_r, oi) = E[k], O[k]
            if k == 0:  # w = 1
                tr, sr, ti, si = o_r, 1, oi, 1
            elif 4 * k == m:  # w = -i (forward) / +i (inverse): folded into the signs
                tr, ti = oi, o_r
                sr, si = (-1, 1) if inverse else (1, -1)
            else:
                ang = (2 if inverse else -2) * math.pi * k / m
                c, sn = math.cos(ang), math.sin(ang)
                if not tmp:
                    tmp.extend(nl.ndarray((bb, ls * ns), dtype=nl.float32, buffer=nl.sbuf, name=f"bt{i}")
                               for i in range(2))
                tr = tmp[0].reshape((bb, ls, ns))
                ti = tmp[1].reshape((bb, ls, ns))
                nisa.tensor_scalar(dst=tr, data=o_r, op0=nl.multiply, operand0=c)
                nisa.scalar_tensor_tensor(dst=tr, data=oi, op0=nl.multiply, operand0=-sn, op1=nl.add, operand1=tr)
                nisa.tensor_scalar(dst=ti, data=o_r, op0=nl.multiply, operand0=sn)
                nisa.scalar_tensor_tensor(dst=ti, data=oi, op0=nl.multiply, operand0=c, op1=nl.add, operand1=ti)
                sr = si = 1
            (dr0, di0), (dr1, di1) = dst[k], dst[k + h]
            nisa.tensor_tensor(dst=dr0, data1=er, data2=tr, op=_sub(nl.add, sr))
            nisa.tensor_tensor(dst=di0, data1=ei, data2=ti, op=_sub(nl.add, si))
            nisa.tensor_tensor(dst=dr1, data1=er, data2=tr, op=_sub(nl.add, -sr))
            nisa.tensor_tensor(dst=di1, data1=ei, data2=ti, op=_sub(nl.add, -si))
        return dst

    dft(0, 1, r, 0)


def stockham_tile(X, T, Z, tw, bb, n, inverse=False):
    """FFT of the ``bb`` rows of ``X`` (a pair of ``(bb, n)`` SBUF planes) with ``T``/``Z`` as work planes.

    ``tw`` is the HBM twiddle table of :func:`twiddle_table`. Returns the
    pair holding the result (``X`` or ``Z``) and the free pair.
    """
    off = 0
    T_len = tw.shape[1]
    for ls, r, ns in stages(n):
        if ls > 1:
            L = ls * r
            tab = nl.ndarray((bb, 2 * L), dtype=nl.float32, buffer=nl.sbuf, name="tw")
            nisa.dma_copy(dst=tab, src=tw.ap(pattern=[[0, bb], [T_len, 2], [1, L]], offset=off))
            off += L
            c = tab[:, 0:L].reshape((bb, ls, r)).expand_dim(3).broadcast(3, ns)
            s = tab[:, L:2 * L].reshape((bb, ls, r)).expand_dim(3).broadcast(3, ns)
            xr = X[0].reshape((bb, ls, r, ns))
            xi = X[1].reshape((bb, ls, r, ns))
            t1 = T[0].reshape((bb, ls, r, ns))
            t2 = T[1].reshape((bb, ls, r, ns))
            nisa.tensor_tensor(dst=t1, data1=xi, data2=s, op=nl.multiply)
            nisa.tensor_tensor(dst=t2, data1=xr, data2=s, op=nl.multiply)
            nisa.tensor_tensor(dst=xr, data1=xr, data2=c, op=nl.multiply)
            nisa.tensor_tensor(dst=xr, data1=xr, data2=t1, op=nl.add if inverse else nl.subtract)
            nisa.tensor_tensor(dst=xi, data1=xi, data2=c, op=nl.multiply)
            nisa.tensor_tensor(dst=xi, data1=xi, data2=t2, op=nl.subtract if inverse else nl.add)
            del tab
        _butterflies({"T": T, "Z": Z}, X, ls, r, ns, bb, inverse)
        X, Z = Z, X
    return X, Z


def planes(bb, n, name):
    """A (real, imaginary) pair of ``(bb, n)`` float32 SBUF planes."""
    return (nl.ndarray((bb, n), dtype=nl.float32, buffer=nl.sbuf, name=name + "r"),
            nl.ndarray((bb, n), dtype=nl.float32, buffer=nl.sbuf, name=name + "i"))


@nki.jit
def fft_pow2_kernel(x, tw, inverse=False):
    """Stockham FFT (or inverse) of every power-of-two row of ``x`` ``[2, B, n]``, unnormalized -> ``[2, B, n]``."""
    _, B, n = x.shape
    y = nl.ndarray((2, B, n), dtype=nl.float32, buffer=nl.shared_hbm)
    for bt in nl.static_range(ntiles(B, PMAX)):
        b0, bb = tile(bt, B, PMAX)
        X, T, Z = planes(bb, n, "x"), planes(bb, n, "t"), planes(bb, n, "z")
        nisa.dma_copy(dst=X[0], src=x[0][b0:b0 + bb, :])
        nisa.dma_copy(dst=X[1], src=x[1][b0:b0 + bb, :])
        R, _ = stockham_tile(X, T, Z, tw, bb, n, inverse)
        nisa.dma_copy(dst=y[0][b0:b0 + bb, :], src=R[0])
        nisa.dma_copy(dst=y[1][b0:b0 + bb, :], src=R[1])
    return y
