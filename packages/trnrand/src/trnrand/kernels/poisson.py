"""PTRS Poisson kernel (lam >= 10): transformed rejection with a fixed number of rounds, in fp32.

What it computes
----------------
Two-word samples of the stream (blocks ``block0 .. block0 + nblocks - 1``,
pairs and ``odd`` pairing as in :mod:`trnrand.kernels.philox_transform`):
each pair ``(w, w')`` keys the sample's attempt stream. Attempt ``t = 0 ..
rounds - 1`` reads words 0-3 of ``philox4x32_10(counter=(2t, 0, 0, 0),
key=(w, w'))`` -- the torch path's words -- and runs Hormann's PTRS test
with the torch path's constants ``a, b, 1/alpha, v_r`` (``_ptrs_constants``):

    U = m01 2**-53 - 1/2,  V = (m23 + 1) 2**-53,  us = 1/2 - |U|
    k = floor((2 a / us + b) U + lam + 0.43)
    accept  (us >= 0.07 and V <= v_r)
         or (k >= 0, not (us < 0.013 and V > us), and
             ln V + ln(1/alpha) - ln(a / us**2 + b) <= -lam + k ln lam - lgamma(k + 1))

(``m01``, ``m23``: the torch path's 53-bit integers, rounded to fp32.) The
first accepted attempt's ``k`` is the sample; all rounds run for every
sample (no data-dependent control flow), merged by
``tensor_copy_predicated``. Output ``[nblocks, 2]`` float32: ``k``, or
``-1`` where no attempt was accepted -- the host finishes those with the
torch path's attempts ``rounds, rounds + 1, ...`` (independent attempts:
the law is unchanged).

Dimensions
----------
``seed``, ``subsequence``, ``block0``, ``nblocks``: compile-time ints (the
stream position; no HBM input). ``lam``, ``a``, ``b``, ``invalpha``, ``vr``
(the PTRS constants), ``rounds``, ``odd``. Output ``[nblocks, 2]`` float32; on
chip, ``[128, F]`` block tiles.

Pseudocode
----------
::

    for t in static_range(T):                        # tile t: blocks tile(t, nblocks, 128 F)
        keys = word pairs of philox(tile);  result = -1
        for attempt in range(rounds):
            U, V = from philox(counter=(2 attempt, 0, 0, 0), key=keys)
            k = floor((2 a / us + b) U + lam + 0.43);  accept = PTRS test(U, V, k)
            result = accept and result == -1 ? k : result      (tensor_copy_predicated)
        store result

fp32 without cancellation
-------------------------
``floor`` is ``t = (y + 2**23) - 2**23`` (round to nearest) and ``t - (t > y)``
on ``y = k + 1`` clamped to ``[0, 2**23]`` (``y < 1`` is ``k < 0``: rejected,
as on torch). The right-hand side is rewritten with ``x = k + 1`` and
Stirling's series ``lgamma(x) = (x - 1/2) ln x - x + ln(2 pi) / 2 + 1/(12 x)
- 1/(360 x**3)`` so that its large terms cancel exactly in integers:

    rhs = (x - lam) - k ln(x / lam) - ln(x) / 2 - ln(2 pi) / 2 - 1/(12 x) + 1/(360 x**3)

(``x - lam`` is exact; ``ln(x / lam)`` is small near the mode), an absolute
error of about ``6e-8 lam`` in a log-probability -- the host keeps
``lam <= 2**16`` on the device. ``1/us`` is capped at ``2**28`` (Ln's input
``a / us**2 + b`` stays below ``2**64``; such attempts are rejected
either way but with probability ``2**-28``). Ln inputs ``V >= 2**-53``,
``x >= 1`` (floored), ``x / lam``: inside ``[2**-64, 2**64]``.

Why not the torch path's bits: the float64 test and this fp32 test accept
the same attempt except within rounding of the boundary (and Stirling's
2.6e-4 at ``x = 1``, a region of probability < 1e-3 for ``lam >= 10``):
same law (tested: chi-square on both paths; most samples equal).

Closed forms (``T`` tiles of ``128 x F`` blocks, ``F = min(256, ceil(nblocks
/ 128))``, ``R`` rounds; ``K4 = (198, 198)`` the keyed Philox's GpSimd and
Vector counts per tile)
------------------------------------------------------------------------
    GpSimd = 6 + 6 + T (181 + 198 R)
    Vector = 2 + 2 + T (178 + 1 + R (198 + 46))
    Scalar = 4 T R   (Ln of V, of a / us**2 + b, of x, of x / lam)
    HBM bytes written = 8 nblocks;  read 0
"""

import math

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

from .discrete import keyed_counts, keyed_philox, tile_f
from .philox import CONST_TILES, GPSIMD_PER_TILE, MASK, VECTOR_PER_TILE, W0, W1, Lanes
from .philox_transform import _column, _Flat, _m53, _store, _store_dmas

CAP = float(1 << 23)
INV_US_MAX = float(1 << 28)
HALF_LN_2PI = 0.5 * math.log(2.0 * math.pi)


def poisson_counts(nblocks: int, rounds: int) -> dict:
    """Closed-form counters of one ``poisson_kernel`` call."""
    f = tile_f(nblocks, True)
    t = cdiv(nblocks, PMAX * f)
    g4, v4 = keyed_counts(lanes=4)
    return {"hbm_read_bytes": 0, "hbm_write_bytes": 8 * nblocks,
            "gpsimd": CONST_TILES + 6 + t * (GPSIMD_PER_TILE + rounds * g4),
            "vector": 2 + 2 + t * (VECTOR_PER_TILE + 1 + rounds * (v4 + 46)),
            "scalar": 4 * t * rounds,
            "dma": _store_dmas(nblocks, f)}


@nki.jit
def poisson_kernel(seed, subsequence, block0, nblocks, lam, a, b, invalpha, vr, rounds=6, odd=False):
    """Poisson(lam) samples by PTRS (or -1 where every round rejected): [nblocks, 2] float32."""
    odd = int(bool(odd))
    f = tile_f(nblocks, True)
    fw = f + odd
    ln = Lanes(fw)
    n = 2 * f
    ew = _Flat(n)
    for k in (W0, W1):  # the key schedule's constants, on Vector (GpSimd is the busy engine)
        t_ = ew.tile(f"c{k:x}")
        nisa.memset(t_, k, engine=nisa.engine.vector)
        ew._const[k] = t_
    zero, bcol = _column(0.0, "zero_bias"), _column(b, "b_bias")
    b_hi = block0 >> 32
    s0, s1 = subsequence & MASK, subsequence >> 32
    out = nl.ndarray((nblocks, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    f32, vec = nl.float32, nisa.engine.vector

    def work_tile(name):
        return ew.tile(name, f32)

    for t in nl.static_range(ntiles(nblocks, PMAX * f)):
        b0, rem = tile(t, nblocks, PMAX * f)
        words = ln.words(block0 + b0, b_hi, s0, s1, seed, fw, step=f)
        flat = words.reshape((PMAX, 4 * fw))
        k0, k1 = flat[:, odd:odd + 4 * f:2], flat[:, odd + 1:odd + 4 * f:2]
        res = nl.ndarray((PMAX, f, 2), dtype=f32, buffer=nl.sbuf, name="poisson")
        dst = res.reshape((PMAX, n))
        nisa.memset(dst, -1.0, engine=vec)
        done = work_tile("done")
        for at in range(rounds):
            w = keyed_philox(ew, k0, k1, ctr=(2 * at, 0, 0, 0), lanes=4)
            u = work_tile("U")  # U = m 2**-53 - 1/2
            nisa.tensor_scalar(u, _m53(ew, w[0], w[1], "m01"), nl.multiply, 2.0**-53, op1=nl.add, operand1=-0.5)
            v = work_tile("V")  # V = (m + 1) 2**-53
            nisa.tensor_scalar(v, _m53(ew, w[2], w[3], "m23"), nl.multiply, 2.0**-53, op1=nl.add,
                               operand1=2.0**-53)
            us = work_tile("us")
            nisa.tensor_scalar(us, u, nl.abs, 0.0)
            nisa.tensor_scalar(us, us, nl.multiply, -1.0, op1=nl.add, operand1=0.5)
            inv = work_tile("inv_us")
            nisa.reciprocal(inv, us)
            nisa.tensor_scalar(inv, inv, nl.minimum, INV_US_MAX)
            # y = k + 1 = floor((2 a / us + b) U + lam + 1.43), clamped to [0, 2**23]
            y = work_tile("y")
            nisa.tensor_scalar(y, inv, nl.multiply, 2.0 * a, op1=nl.add, operand1=b)
            nisa.tensor_tensor(y, y, u, nl.multiply, engine=vec)
            nisa.tensor_scalar(y, y, nl.add, lam + 1.43, op1=nl.maximum, operand1=0.0)
            nisa.tensor_scalar(y, y, nl.minimum, CAP)
            x = work_tile("x")
            nisa.tensor_scalar(x, y, nl.add, CAP, op1=nl.subtract, operand1=CAP)
            gt = work_tile("over")
            nisa.tensor_tensor(gt, x, y, nl.greater, engine=vec)
            nisa.tensor_tensor(x, x, gt, nl.subtract, engine=vec)  # x = k + 1 >= 0
            # squeeze: fast = [us >= 0.07] [V <= v_r]; bad = [x < 1] or [us < 0.013] [V > us]
            fast, tmp = work_tile("fast"), work_tile("tmp")
            nisa.tensor_scalar(fast, us, nl.greater_equal, 0.07)
            nisa.tensor_scalar(tmp, v, nl.less_equal, vr)
            nisa.tensor_tensor(fast, fast, tmp, nl.multiply, engine=vec)
            good = work_tile("good")  # not bad
            nisa.tensor_tensor(good, v, us, nl.greater, engine=vec)
            nisa.tensor_scalar(tmp, us, nl.less, 0.013)
            nisa.tensor_tensor(good, good, tmp, nl.multiply, engine=vec)  # [us < 0.013][V > us]
            nisa.tensor_scalar(tmp, x, nl.less, 1.0)
            nisa.tensor_tensor(good, good, tmp, nl.maximum, engine=vec)  # bad
            nisa.tensor_scalar(good, good, nl.multiply, -1.0, op1=nl.add, operand1=1.0)
            # lhs = ln V + ln(1/alpha) - ln(a / us**2 + b)
            lhs, lq = work_tile("lhs"), work_tile("ln_q")
            nisa.activation(lhs, nl.log, v, bias=zero, scale=1.0)
            nisa.tensor_tensor(tmp, inv, inv, nl.multiply, engine=vec)
            nisa.activation(lq, nl.log, tmp, bias=bcol, scale=a)
            nisa.scalar_tensor_tensor(lhs, lhs, nl.add, math.log(invalpha), nl.subtract, lq)
            # rhs = (x - lam) - k ln(x / lam) - ln(x) / 2 - ln(2 pi) / 2 - 1/(12 x) + 1/(360 x**3), x floored at 1
            xc = work_tile("x_floor")
            nisa.tensor_scalar(xc, x, nl.maximum, 1.0)
            lx, lr = work_tile("ln_x"), work_tile("ln_ratio")
            nisa.activation(lx, nl.log, xc, bias=zero, scale=1.0)
            nisa.activation(lr, nl.log, xc, bias=zero, scale=1.0 / lam)
            rhs = work_tile("rhs")
            nisa.scalar_tensor_tensor(rhs, xc, nl.add, -1.0, nl.multiply, lr)  # k ln(x / lam)
            nisa.scalar_tensor_tensor(rhs, xc, nl.add, -lam - HALF_LN_2PI, nl.subtract, rhs)
            nisa.scalar_tensor_tensor(rhs, lx, nl.multiply, -0.5, nl.add, rhs)
            rx = work_tile("inv_x")
            nisa.reciprocal(rx, xc)
            nisa.tensor_tensor(tmp, rx, rx, nl.multiply, engine=vec)
            nisa.tensor_scalar(tmp, tmp, nl.multiply, 1.0 / 360.0, op1=nl.subtract, operand1=1.0 / 12.0)
            nisa.tensor_tensor(tmp, tmp, rx, nl.multiply, engine=vec)  # -(1/(12x) - 1/(360x**3))
            nisa.tensor_tensor(rhs, rhs, tmp, nl.add, engine=vec)
            ok = work_tile("ok")
            nisa.tensor_tensor(ok, lhs, rhs, nl.less_equal, engine=vec)
            nisa.tensor_tensor(ok, ok, good, nl.multiply, engine=vec)
            nisa.tensor_tensor(ok, ok, fast, nl.maximum, engine=vec)
            kv = work_tile("k")
            nisa.tensor_scalar(kv, x, nl.subtract, 1.0)
            take = ew.tile("take", nl.uint8)  # accepted now and not before
            if at == 0:
                nisa.tensor_copy(take, ok, engine=vec)
                nisa.tensor_copy(done, ok, engine=vec)
            else:
                nisa.tensor_tensor(take, ok, done, nl.greater, engine=vec)
                nisa.tensor_tensor(done, done, ok, nl.maximum, engine=vec)
            nisa.tensor_copy_predicated(dst, kv, take)
        _store(out, res, b0, rem, f, 2)
    return out
