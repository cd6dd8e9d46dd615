"""Sobol' kernel: Gray-code Sobol' integers for many points and dimensions in one call.

What it computes
----------------
Inputs (HBM): ``v [d, 30]`` uint32 direction numbers (``v[k, b]`` is
``V_b`` of dimension ``k``, 30-bit, already scrambled when scrambling) and
``shift [d, 1]`` uint32 (the digital shift; zeros when unscrambled).
Constants: ``skip``, ``n``. Output ``x [d, n]`` uint32 with

    x[k, i] = shift[k] ^ XOR_{b : bit b of gray(skip + i) is set} v[k, b],   gray(j) = j ^ (j >> 1)

-- the Gray-code order of ``scipy.stats.qmc.Sobol``. The host transposes
to ``[n, d]`` and maps to floats exactly (``x * 2**-30`` in float64, the top
24 bits times ``2**-24`` in float32), as the torch path does.

Layout and tiling
-----------------
Partition dim: dimensions (tiles of ``dd <= 128``); free dim: points (tiles
of ``ff <= 512``). Per dimension tile, ``v`` and ``shift`` are loaded once
(two DMAs) and stay in SBUF; per (dimension, point) tile: ``iota`` the point
indices (GpSimd), ``g = j ^ (j >> 1)`` (2 Vector), then for each of the
``B = max(1, bit_length(skip + n - 1))`` Gray-code bits

    t = (g >> b) & 1                 (Vector, one two-op bitvec tensor_scalar)
    m = 0 - t  (all ones or zero)    (GpSimd, exact uint32 wrap)
    y = m & v[:, b]                  (Vector, bitvec with a (dd, 1) column)
    acc ^= y                         (Vector; bit 0 starts acc)

then ``acc ^ shift`` (Vector) and one store DMA. Bits >= B of every gray
code are zero, so they are skipped.

Closed forms (``td = ceil(d/128)``, ``tn = ceil(n/512)``, ``B`` as above)
------------------------------------------------------------------------
    GpSimd instructions = 1 + td tn (1 + B)
    Vector instructions = td tn (3 B + 2)
    DMA transfers       = 2 td + td tn
    HBM bytes read      = 4 * 31 d;   written = 4 d n
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv

BITS = 30
FMAX = 512


def gray_bits(skip: int, n: int) -> int:
    """Bits that can be set in gray(j) for j < skip + n (at least 1)."""
    return max(1, (skip + n - 1).bit_length())


def sobol_counts(d: int, n: int, skip: int) -> dict:
    """Closed-form counters of one ``sobol_kernel`` call."""
    td, tn, b = cdiv(d, PMAX), cdiv(n, FMAX), gray_bits(skip, n)
    return {
        "hbm_read_bytes": 4 * (BITS + 1) * d,
        "hbm_write_bytes": 4 * d * n,
        "gpsimd": 1 + td * tn * (1 + b),
        "vector": td * tn * (3 * b + 2),
        "dma": 2 * td + td * tn,
    }


@nki.jit
def sobol_kernel(v, shift, skip, n):
    """Sobol' integers x [d, n] uint32 of points skip .. skip+n-1 from direction numbers v [d, 30]."""
    d = v.shape[0]
    nb = gray_bits(skip, n)
    x = nl.ndarray((d, n), dtype=nl.uint32, buffer=nl.shared_hbm)
    zero = nl.ndarray((PMAX, FMAX), dtype=nl.uint32, buffer=nl.sbuf, name="zero")
    nisa.memset(zero, 0, engine=nisa.engine.gpsimd)
    for kt in nl.static_range(cdiv(d, PMAX)):
        k0 = kt * PMAX
        dd = min(PMAX, d - k0)
        vs = nl.ndarray((dd, BITS), dtype=nl.uint32, buffer=nl.sbuf, name="v")
        nisa.dma_copy(dst=vs, src=v[k0:k0 + dd, :])
        sh = nl.ndarray((dd, 1), dtype=nl.uint32, buffer=nl.sbuf, name="shift")
        nisa.dma_copy(dst=sh, src=shift[k0:k0 + dd, :])
        for jt in nl.static_range(cdiv(n, FMAX)):
            j0 = jt * FMAX
            ff = min(FMAX, n - j0)

            def tile(name, dd=dd, ff=ff):
                return nl.ndarray((dd, ff), dtype=nl.uint32, buffer=nl.sbuf, name=name)

            idx = nl.ndarray((dd, ff), dtype=nl.int32, buffer=nl.sbuf, name="idx")
            nisa.iota(idx, [[1, ff]], offset=skip + j0, channel_multiplier=0)
            half = tile("half")
            nisa.tensor_scalar(half, idx.view(nl.uint32), nl.right_shift, 1)
            g = tile("gray")
            nisa.tensor_tensor(g, half, idx.view(nl.uint32), nl.bitwise_xor, engine=nisa.engine.vector)
            acc = tile("acc")
            for b in range(nb):
                t = tile("bit")
                nisa.tensor_scalar(t, g, nl.right_shift, b, op1=nl.bitwise_and, operand1=1)
                m = tile("mask")
                nisa.tensor_tensor(m, zero[0:dd, 0:ff], t, nl.subtract, engine=nisa.engine.gpsimd)
                if b == 0:
                    nisa.tensor_scalar(acc, m, nl.bitwise_and, vs[:, 0:1])
                else:
                    y = tile("term")
                    nisa.tensor_scalar(y, m, nl.bitwise_and, vs[:, b:b + 1])
                    nisa.tensor_tensor(acc, acc, y, nl.bitwise_xor, engine=nisa.engine.vector)
            res = tile("x")
            nisa.tensor_scalar(res, acc, nl.bitwise_xor, sh)
            nisa.dma_copy(dst=x[k0:k0 + dd, j0:j0 + ff], src=res)
    return x
