"""Marsaglia-Tsang gamma kernel: keyed rejection sampling with a fixed number of rounds, in fp32.

What it computes
----------------
Two-word samples of the stream (blocks ``block0 .. block0 + nblocks - 1``,
pairs and ``odd`` pairing as in :mod:`trnrand.kernels.philox_transform`):
each pair ``(w, w')`` is the sample's key. Attempt ``t = 0 .. rounds - 1``
reads the eight words of ``philox4x32_10(counter=(2t + i, component, 0, 0),
key=(w, w'))``, ``i = 0, 1`` -- trnrand's keyed attempt stream, the torch
path's words -- and, with ``a = shape (+1 if shape < 1)``, ``d = a - 1/3``,
``c = 1 / sqrt(9 d)``:

    x = r sin(A)        r = sqrt(-2 ln((m01 + 1) 2**-53) + 2**-100),  A = m23 S - C   (Box-Muller, words 0-3)
    u = (m45 + 1) 2**-53                                                               (words 4, 5)
    v = (1 + c x)**3;   accept  v > 0  and  ln u < x**2 / 2 + d (1 - v + ln v)
    value = d v  (times exp(ln((m67 + 1) 2**-53) / shape) when shape < 1, words 6, 7)

(``m01`` etc.: the torch path's 53-bit integers ``(w_i >> 5) 2**26 + (w_j >> 6)``,
rounded to fp32; ``C`` the largest fp32 below pi, ``S = 2 C 2**-53``, so Sin's
argument lies in ``[-pi, pi]``; Ln's inputs are ``>= 2**-53`` and ``ln v``
takes ``max(v, 2**-60)``, inside its ``[2**-64, 2**64]``.) The first accepted
attempt's value is the sample; all ``rounds`` attempts are computed for every
sample (no data-dependent control flow) and merged with
``tensor_copy_predicated``. Output ``[nblocks, 2]`` float32: the value, or
``-1`` where no attempt was accepted -- the host finishes those samples
with the torch path's attempts ``rounds, rounds + 1, ...`` (a vectorised
fallback; each attempt is independent, so the law is unchanged). The host
multiplies by ``scale``.

Why not the torch path's bits: it evaluates Box-Muller, the logs and the
acceptance test in float64, which no engine has. The kernel's fp32
acceptance test differs from it only for attempts within fp32 rounding of
the boundary: same law (tested: KS against scipy.stats on both paths, and
most samples equal to the torch path's to fp32 precision).

Dimensions
----------
``seed``, ``subsequence``, ``block0``, ``nblocks``: compile-time ints (the
stream position; no HBM input). ``shape``, ``component``, ``rounds``, ``odd``,
``student_df``: compile-time constants. Output ``[nblocks, 2]`` float32 (two
samples per block); on chip, ``[128, F]`` block tiles.

Pseudocode
----------
::

    for t in static_range(T):                        # tile t: blocks tile(t, nblocks, 128 F)
        keys = pairs of philox words of the tile
        result = -1
        for attempt in range(rounds):
            x, u = normal and uniform from philox(counter=(2 attempt + i, component), key=keys)
            v = (1 + c x)**3;  accept = v > 0 and ln u < x**2 / 2 + d (1 - v + ln v)
            value = d v  (times exp(ln u' / shape) when shape < 1)
            result = accept and result == -1 ? value : result    (tensor_copy_predicated)
        with student_df: result = z rsqrt(max(2 result / df, 2**-80)) where accepted, else NaN
        store result

Closed forms (``T`` tiles of ``128 x F`` blocks, ``F = min(256, ceil(nblocks
/ 128))``; ``K4``, ``K2`` the keyed Philox's per-tile counts for 4 and 2
output lanes, ``keyed_counts``; ``s = [shape < 1]``)
------------------------------------------------------------------------
    GpSimd = 6 + 6 + T (181 + R (K4g + K(2+2s)g))            (R rounds)
    Vector = 2 + 4 + T (178 + 1 + R (K4v + K(2+2s)v + 25 + 4 s))
    Scalar = T R (5 + 2 s)
with ``K4 = (198, 198)``, ``K2 = (188, 187)`` (GpSimd, Vector); ``student_df``
adds per tile one keyed Philox (``K4``), Box-Muller and the ratio: GpSimd
198, Vector 198 + 12, Scalar 4 (Ln, Sqrt, Sin, Rsqrt of ``max(2 G / df,
2**-80)``, inside Rsqrt's range). Per tile
and round: the epilogue's Vector instructions (shifts, fp32 assembly of
the 53-bit integers, Box-Muller's products, the cubic, the test and the
merge) and Scalar Ln, Sqrt, Sin, Ln, Ln (+ Ln, Exp when ``shape < 1``).
"""

import math

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

from .discrete import keyed_counts, keyed_philox, tile_f
from .normal import C_PI, R_BIAS
from .philox import CONST_TILES, GPSIMD_PER_TILE, MASK, VECTOR_PER_TILE, W0, W1, Lanes
from .philox_transform import _column, _Flat, _m53, _store, _store_dmas

S53 = 2.0 * C_PI * 2.0**-53  # the angle step: 2**53 S = 2 C exactly (a power-of-two scaling of fp32 2C)
V_MIN = 2.0**-60


def gamma_counts(nblocks: int, shape: float, rounds: int, student: bool = False) -> dict:
    """Closed-form counters of one ``gamma_kernel`` call (``student``: with ``student_df``)."""
    f = tile_f(nblocks, True)
    t = cdiv(nblocks, PMAX * f)
    small = shape < 1.0
    g4, v4 = keyed_counts(lanes=4)
    g2, v2 = keyed_counts(lanes=4 if small else 2)
    return {"hbm_read_bytes": 0, "hbm_write_bytes": 8 * nblocks,
            "gpsimd": CONST_TILES + 6 + t * (GPSIMD_PER_TILE + rounds * (g4 + g2) + student * g4),
            "vector": 2 + 4 + t * (VECTOR_PER_TILE + 1 + rounds * (v4 + v2 + 25 + 4 * small) + student * (v4 + 12)),
            "scalar": t * (rounds * (5 + 2 * small) + 4 * student),
            "dma": _store_dmas(nblocks, f)}


def _ln_open(ew, m, bias, name):
    """ln((m + 1) 2**-53) of an fp32 tile m (Scalar)."""
    out = ew.tile(name, nl.float32)
    nisa.activation(out, nl.log, m, bias=bias, scale=2.0**-53)
    return out


def _normal(ew, w, ulow, rbias, ang, name):
    """Box-Muller's first normal r sin(A) of four word tiles w (fp32): 7 Vector, 3 Scalar."""
    lg = _ln_open(ew, _m53(ew, w[0], w[1], "m01"), ulow, "ln_u1")
    r = ew.tile("radius", nl.float32)
    nisa.activation(r, nl.sqrt, lg, bias=rbias, scale=-2.0)
    x = ew.tile(name, nl.float32)
    nisa.activation(x, nl.sin, _m53(ew, w[2], w[3], "m23"), bias=ang, scale=S53)
    nisa.tensor_tensor(x, x, r, nl.multiply, engine=nisa.engine.vector)
    return x


@nki.jit
def gamma_kernel(seed, subsequence, block0, nblocks, shape, component=0, rounds=4, odd=False, student_df=None):
    """Unscaled Gamma(shape) samples (or -1 where every round rejected): [nblocks, 2] float32.

    With ``student_df``: Student's t samples ``z / sqrt(2 G / df)`` (``G`` the gamma sample, ``z`` Box-Muller's
    first normal of the key's block ``(0, 1, 0, 0)``, as the torch path), NaN where every round rejected.
    """
    odd = int(bool(odd))
    a = shape + 1.0 if shape < 1.0 else shape
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    small = shape < 1.0
    f = tile_f(nblocks, True)
    fw = f + odd
    ln = Lanes(fw)
    n = 2 * f
    ew = _Flat(n)
    for k in (W0, W1):  # the key schedule's constants, on Vector (GpSimd is the busy engine)
        t_ = ew.tile(f"c{k:x}")
        nisa.memset(t_, k, engine=nisa.engine.vector)
        ew._const[k] = t_
    ulow, rbias, ang = _column(2.0**-53, "u_bias"), _column(R_BIAS, "r_bias"), _column(-C_PI, "angle_bias")
    zero = _column(0.0, "zero_bias")
    b_hi = block0 >> 32
    s0, s1 = subsequence & MASK, subsequence >> 32
    out = nl.ndarray((nblocks, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    f32, vec = nl.float32, nisa.engine.vector
    for t in nl.static_range(ntiles(nblocks, PMAX * f)):
        b0, rem = tile(t, nblocks, PMAX * f)
        words = ln.words(block0 + b0, b_hi, s0, s1, seed, fw, step=f)
        flat = words.reshape((PMAX, 4 * fw))
        k0, k1 = flat[:, odd:odd + 4 * f:2], flat[:, odd + 1:odd + 4 * f:2]
        res = nl.ndarray((PMAX, f, 2), dtype=f32, buffer=nl.sbuf, name="gamma")
        dst = res.reshape((PMAX, n))
        nisa.memset(dst, -1.0, engine=vec)
        done = ew.tile("done", f32)
        for at in range(rounds):
            w = keyed_philox(ew, k0, k1, ctr=(2 * at, component, 0, 0), lanes=4)
            w2 = keyed_philox(ew, k0, k1, ctr=(2 * at + 1, component, 0, 0), lanes=4 if small else 2)
            x = _normal(ew, w, ulow, rbias, ang, "x")  # Box-Muller's first output
            lgu = _ln_open(ew, _m53(ew, w2[0], w2[1], "m45"), ulow, "ln_u")
            # v = (1 + c x)**3, its log (floored), and the test ln u < x**2 / 2 + d (1 - v + ln v)
            v = ew.tile("v", f32)
            nisa.tensor_scalar(v, x, nl.multiply, c, op1=nl.add, operand1=1.0)
            v2 = ew.tile("v2", f32)
            nisa.tensor_tensor(v2, v, v, nl.multiply, engine=vec)
            nisa.tensor_tensor(v, v2, v, nl.multiply, engine=vec)
            vs = ew.tile("v_floor", f32)
            nisa.tensor_scalar(vs, v, nl.maximum, V_MIN)
            lv = ew.tile("ln_v", f32)
            nisa.activation(lv, nl.log, vs, bias=zero, scale=1.0)
            rhs = ew.tile("rhs", f32)
            nisa.tensor_tensor(rhs, lv, v, nl.subtract, engine=vec)  # ln v - v
            nisa.tensor_scalar(rhs, rhs, nl.add, 1.0, op1=nl.multiply, operand1=d)  # d (1 - v + ln v)
            xx = ew.tile("half_x2", f32)
            nisa.scalar_tensor_tensor(xx, x, nl.multiply, 0.5, nl.multiply, x)
            nisa.tensor_tensor(rhs, rhs, xx, nl.add, engine=vec)
            ok = ew.tile("ok", f32)
            nisa.tensor_tensor(ok, lgu, rhs, nl.less, engine=vec)
            pos = ew.tile("positive", f32)
            nisa.tensor_scalar(pos, v, nl.greater, 0.0)
            nisa.tensor_tensor(ok, ok, pos, nl.multiply, engine=vec)
            val = ew.tile("value", f32)
            nisa.tensor_scalar(val, v, nl.multiply, d)
            if small:  # times u2**(1/shape) = exp(ln u2 / shape), words 6, 7
                lg2 = _ln_open(ew, _m53(ew, w2[2], w2[3], "m67"), ulow, "ln_u2")
                boost = ew.tile("boost", f32)
                nisa.activation(boost, nl.exp, lg2, bias=zero, scale=1.0 / shape)
                nisa.tensor_tensor(val, val, boost, nl.multiply, engine=vec)
            take = ew.tile("take", nl.uint8)  # accepted now and not before
            if at == 0:
                nisa.tensor_copy(take, ok, engine=vec)
                nisa.tensor_copy(done, ok, engine=vec)
            else:
                nisa.tensor_tensor(take, ok, done, nl.greater, engine=vec)
                nisa.tensor_tensor(done, done, ok, nl.maximum, engine=vec)
            nisa.tensor_copy_predicated(dst, val, take)
        if student_df is not None:  # t = z rsqrt(max(2 G / df, 2**-80)) where a round accepted, else NaN
            z = _normal(ew, keyed_philox(ew, k0, k1, ctr=(0, 1, 0, 0), lanes=4), ulow, rbias, ang, "z")
            q = ew.tile("g_over_df", f32)
            nisa.tensor_scalar(q, dst, nl.multiply, 2.0 / student_df, op1=nl.maximum, operand1=2.0**-80)
            nisa.activation(q, nl.rsqrt, q, bias=zero, scale=1.0)
            nisa.tensor_tensor(z, z, q, nl.multiply, engine=vec)
            ok = ew.tile("accepted", nl.uint8)
            nisa.tensor_scalar(ok, done, nl.greater, 0.5)
            nisa.memset(dst, float("nan"), engine=vec)
            nisa.tensor_copy_predicated(dst, z, ok)
        _store(out, res, b0, rem, f, 2)
    return out
