"""Philox transform kernel: bernoulli, exponential, randint, geometric, truncated normal from THE stream.

What it computes
----------------
The Philox blocks ``b = block0 .. block0 + nblocks - 1`` of subsequence
``s`` (exactly as :mod:`trnrand.kernels.philox`), and then, without the
words leaving SBUF, one per-distribution epilogue (``transform``):

====================  =====  ====================================================  ========  ========
transform             words  sample (``w``, ``w'``: its words; ``m = w >> 8``)       out       bits
====================  =====  ====================================================  ========  ========
``bernoulli``         1      ``w < T`` with ``T = round(p 2**32)``                  uint8     = torch
``exponential``       1      ``log((m + 1) 2**-24) * c + 0``, ``c = -1/rate``        float32   = torch
``randint``           2      ``floor((w 2**32 + w') r / 2**64)``, ``r <= 2**32``     uint32    = torch
``geometric``         2      fp32 ``floor(log(u) c) + 1``, ``c = 1/log1p(-p)``      float32   same law
``truncated_normal``  2      fp32 PPND7 quantile, clamped, ``* std + mean``         float32   few ulp
====================  =====  ====================================================  ========  ========

``param`` is ``T`` (an int, ``0 < T < 2**32``), ``c`` (a float), ``r`` (an
int, ``1 <= r <= 2**32``), ``c``, or the truncated normal's 7 constants. The output is
``[nblocks, 4]`` (one-word transforms: row ``b - block0`` holds the samples
of stream words ``4b .. 4b + 3``) or ``[nblocks, 2]`` (two-word transforms:
the samples whose words start at ``4b`` and ``4b + 2``; with ``odd=True`` at
``4b + 1`` and ``4b + 3``, the pairing of a draw that starts at an odd word,
whose last pair takes word 0 of block ``b + 1``). The host adds ``low``
(randint), casts to the requested dtype and drops the samples before/after
the request -- integer-exact steps.

Dimensions
----------
``seed``, ``subsequence``, ``block0``, ``nblocks``: compile-time ints (the
stream position; no HBM input). ``transform`` (a key of
``TRANSFORMS``), ``param``, ``odd``. Output ``[nblocks, 4]`` (one-word
transforms) or ``[nblocks, 2]`` (two-word) of the transform's dtype; on chip,
``[128, F]`` block tiles.

Pseudocode
----------
::

    for t in static_range(T):                        # tile t: blocks tile(t, nblocks, 128 F)
        words = philox(tile)                         (as the Philox kernel)
        samples = epilogue[transform](words, param)  (the table above)
        store samples

Why the bits are (or are not) the torch path's
----------------------------------------------
* ``bernoulli``: ``w < T`` is one GpSimd ``tensor_tensor`` on uint32 tiles
  (native 32-bit integer arithmetic, exact: ``docs/emulator.md``,
  numerics); a Vector copy narrows the 0/1 words to uint8 (exact).
* ``randint``: ``x r / 2**64`` with ``x = w 2**32 + w'`` is
  ``hi(w r) + carry(lo(w r) + hi(w' r))``: two 32 x 32 -> 64-bit products by
  the constant ``r`` on 16-bit limbs (``Lanes.mulhilo``), a wrapping GpSimd
  add, the carry as ``sum < addend`` (a uint32 GpSimd compare) and a GpSimd
  add -- the torch path's ``_mulhi_range`` step for step, all exact.
  ``r = 2**32`` is the first word itself (one Vector copy).
* ``exponential`` (float32): ``m + 1 <= 2**24`` and the scale ``2**-24`` are
  exact, the Scalar Engine's Ln takes ``(m + 1) 2**-24`` in ``[2**-24, 1]``
  (inside its valid range ``[2**-64, 2**64]`` by construction), then one
  Vector ``* c + 0.0`` (``+ 0.0`` turns ``-0.0`` into ``0.0``): the torch
  path's float32 operations in its order with NumPy's float32 log, which is
  what the emulator evaluates, so bit for bit on the emulator (hardware Ln
  is an approximation: a few ulp). float64 stays on torch (no fp64 engine).
* ``geometric``: the torch path maps a 53-bit uniform with float64 log and
  division; no NeuronCore engine computes in float64, so the kernel
  cannot reproduce those bits. Its fp32 map takes the same 53-bit integer
  ``m = (w >> 5) 2**26 + (w' >> 6)`` (rounded to fp32), ``u = m 2**-53 +
  2**-53`` in ``[2**-53, 1]`` (Ln's range), ``x = min(log(u) c, 2**23)``
  (``x >= 0``), ``t = (x + 2**23) - 2**23`` (round to the nearest integer:
  the fp32 ulp at ``2**23`` is 1), ``k = t + 1 - (t > x)`` = ``floor(x) + 1``.
  The samples follow the same geometric law (the tests run the same
  chi-square test on both paths) and differ from the torch path's only
  where ``x`` is within fp32 rounding of an integer. The cap at ``2**23``
  costs ``(1 - p)**(2**23)`` of mass; the host sends ``p < 2**-16``
  (``<= e**-128``) to torch.
* ``truncated_normal`` (float32): the torch path inverts the normal CDF in
  float64 (``ndtri``); the kernel evaluates Wichura's AS 241 PPND7 (the
  single-precision quantile, ~1e-7 relative; three rational functions, each
  evaluated everywhere and selected with ``tensor_copy_predicated``, so no
  data-dependent control flow) in fp32 on the same 53-bit ``m`` and its
  integer complement ``2**53 - 1 - m``: ``q = lo + m 2**-53 (hi - lo)``
  and ``1 - q = up + (m' + 1) 2**-53 (hi - lo)`` are each accurate where they
  are small; the tail mass ``s``, the smaller of ``q`` and ``1 - q`` (one
  elementwise Vector ``minimum`` of the two tiles; floored at ``2**-62``,
  inside Ln's range), feeds the tails, ``sqrt(-ln s) >= 0.83`` feeds Sqrt inside its
  range. The host passes ``(a, b, 2**-53 (hi - lo), lo, up + 2**-53 (hi -
  lo), +-std, mean)`` from the torch path's float64 ``ndtr`` (mirrored for a
  positive interval, as torch does). Samples agree with the torch path's to
  a few float32 ulp (tested: relative 1e-6) but are not bit-identical;
  intervals of normal mass below ``2**-20`` stay on torch.

Layout and tiling
-----------------
The Philox kernel's: ``128 x F`` blocks per tile, ``F = min(512,
ceil(nblocks/128))``, ``T`` tiles, the four lanes written into one
``[128, F(+1), 4]`` word tile whose flat view ``[128, 4F]`` is the tile's
words in stream order. A two-word transform reads the pairs as two stride-2
views of it (``[128, 2F]`` each; offset 1 for ``odd``, where the word tile is
one column wider and its last column recomputes the next partition's first
block, as in the Box-Muller kernel). Each epilogue instruction covers the
whole tile. One store per tile (two for a ragged last tile).

Closed forms (per call; ``T`` tiles)
------------------------------------
Philox per tile: GpSimd 181, Vector 178; constants: GpSimd 6.

    bernoulli    GpSimd 6 + 1 + T (181 + 1)       Vector T (178 + 1)
    exponential  GpSimd 6 + T 181                 Vector 1 + T (178 + 2)    Scalar T
    randint      GpSimd 6 + K + T (181 + 23)      Vector T (178 + 16)       (K = distinct of r, r & 0xFFFF, r >> 16)
                 (r = 2**32:  GpSimd 6 + T 181    Vector T (178 + 1))
    geometric    GpSimd 6 + T 181                 Vector 1 + T (178 + 7)    Scalar T
    truncated_normal  GpSimd 6 + T 181            Vector 1 + T (178 + 53)   Scalar 2 T
    HBM bytes written = nblocks x (4 bernoulli, 16 exponential, 8 the two-word ones);  read 0
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

from .philox import CONST_TILES, GPSIMD_PER_TILE, MASK, VECTOR_PER_TILE, Lanes, tile_f

#: transform -> (stream words per sample, samples per block, output dtype name, output bytes per sample)
TRANSFORMS = {
    "bernoulli": (1, 4, "uint8", 1),
    "exponential": (1, 4, "float32", 4),
    "randint": (2, 2, "uint32", 4),
    "geometric": (2, 2, "float32", 4),
    "truncated_normal": (2, 2, "float32", 4),
}
#: Wichura's AS 241 PPND7 (the single-precision normal quantile, about 1e-7 relative): rational functions,
#: highest power first, of r = 0.180625 - (q - 1/2)**2 (|q - 1/2| <= 0.425) and of sqrt(-ln s) - 1.6 (<= 5)
#: or - 5 (beyond), s the tail mass (the smaller of q and 1 - q). All-positive coefficients: no cancellation in
#: fp32.
PPND7_A = (5.9109374720e+01, 1.5929113202e+02, 5.0434271938e+01, 3.3871327179e+00)
PPND7_B = (6.7187563600e+01, 7.8757757664e+01, 1.7895169469e+01, 1.0)
PPND7_C = (1.7023821103e-01, 1.3067284816e+00, 2.7568153900e+00, 1.4234372777e+00)
PPND7_D = (1.2021132975e-01, 7.3700164250e-01, 1.0)
PPND7_E = (1.7337203997e-02, 4.2868294337e-01, 3.0812263860e+00, 6.6579051150e+00)
PPND7_F = (1.2258202635e-02, 2.4197894225e-01, 1.0)
S_CENTRAL = 0.075  # s >= 0.075 <=> |q - 1/2| <= 0.425: the central formula
S_MIN = 2.0**-62  # the Ln input floor (its valid range starts at 2**-64)
FULL = 1 << 32
CAP = float(1 << 23)  # geometric: the fp32 floor below is exact up to 2**23


def _randint_consts(r: int) -> int:
    return len({r, r & 0xFFFF, r >> 16})


def philox_transform_counts(transform: str, nblocks: int, param=None) -> dict:
    """Closed-form counters of one ``philox_transform_kernel`` call (what the emulator must count)."""
    f = tile_f(nblocks)
    t = cdiv(nblocks, PMAX * f)
    spb, nbytes = TRANSFORMS[transform][1], TRANSFORMS[transform][3]
    g, v, s = CONST_TILES + t * GPSIMD_PER_TILE, t * VECTOR_PER_TILE, 0
    if transform == "bernoulli":
        g, v = g + 1 + t, v + t
    elif transform == "exponential":
        v, s = v + 1 + 2 * t, t
    elif transform == "randint":
        if param == FULL:
            v += t
        else:
            g, v = g + _randint_consts(param) + 23 * t, v + 16 * t
    elif transform == "geometric":
        v, s = v + 1 + 7 * t, t
    else:  # truncated_normal
        v, s = v + 1 + 53 * t, 2 * t
    out = {"hbm_read_bytes": 0, "hbm_write_bytes": spb * nbytes * nblocks, "gpsimd": g, "vector": v,
           "dma": _store_dmas(nblocks, f)}
    if s:
        out["scalar"] = s
    return out


def _store_dmas(nblocks: int, f: int) -> int:
    full, rem = divmod(nblocks, PMAX * f)
    return full + (rem // f > 0) + (rem % f > 0)


class _Flat(Lanes):
    """Lanes' tile helpers on ``[P, cols]`` tiles without the Philox constants (memset lazily, once)."""

    def __init__(self, cols: int):  # noqa: D107 -- deliberately not Lanes.__init__ (no Philox constants)
        self.f = cols
        self.mul_engine = nisa.engine.gpsimd
        self._const = {}


def _column(value, name):
    c = nl.ndarray((PMAX, 1), dtype=nl.float32, buffer=nl.sbuf, name=name)
    nisa.memset(c, value)
    return c


def _m53(ew, hi, lo, name):
    """fp32 tile of the torch path's 53-bit ``m = (hi >> 5) 2**26 + (lo >> 6)`` (2 shifts + 1 stt, Vector)."""
    h, l_ = ew.ts(hi, nl.right_shift, 5), ew.ts(lo, nl.right_shift, 6)
    m = ew.tile(name, nl.float32)
    nisa.scalar_tensor_tensor(m, h, nl.multiply, float(1 << 26), nl.add, l_)
    return m


def _poly(ew, x, coef, name):
    """Horner in fp32 on tiles: coef[0] x**k + ... + coef[k] (one tensor_scalar, then one stt per coefficient)."""
    acc = ew.tile(name, nl.float32)
    nisa.tensor_scalar(acc, x, nl.multiply, float(coef[0]))
    for c in coef[1:-1]:
        nisa.scalar_tensor_tensor(acc, acc, nl.add, float(c), nl.multiply, x)
    nisa.tensor_scalar(acc, acc, nl.add, float(coef[-1]))
    return acc


def _ratio(ew, x, shift, num, den, name):
    """num(x - shift) / den(x - shift) on fp32 tiles (Horner, then a Vector reciprocal and a product)."""
    y = ew.tile(name, nl.float32)
    nisa.tensor_scalar(y, x, nl.subtract, shift)
    p, q = _poly(ew, y, num, name + "_num"), _poly(ew, y, den, name + "_den")
    nisa.reciprocal(q, q)
    nisa.tensor_tensor(p, p, q, nl.multiply, engine=nisa.engine.vector)
    return p


def _truncated_normal(ew, a, b, param, zero, dst):
    """Inverse-CDF truncated normals from pairs (a, b) of words into dst (see the module docs): fp32, Vector."""
    lo_b, hi_b, scale, off_lo, off_up, std, mean = param
    f32 = nl.float32
    # the torch path's 53-bit m = (w >> 5) 2**26 + (w' >> 6) and its complement 2**53 - 1 - m, from exact integer
    # halves ((w ^ ~0) >> 5 = 2**27 - 1 - (w >> 5)); each rounded to fp32 only where it is large
    m0, m1 = ew.ts(a, nl.right_shift, 5), ew.ts(b, nl.right_shift, 6)
    m0c = ew.tile("m0c")
    nisa.tensor_scalar(m0c, a, nl.bitwise_xor, MASK, op1=nl.right_shift, operand1=5)
    m1c = ew.tile("m1c")
    nisa.tensor_scalar(m1c, b, nl.bitwise_xor, MASK, op1=nl.right_shift, operand1=6)
    v, vc = ew.tile("v", f32), ew.tile("vc", f32)
    nisa.scalar_tensor_tensor(v, m0, nl.multiply, float(1 << 26), nl.add, m1)
    nisa.scalar_tensor_tensor(vc, m0c, nl.multiply, float(1 << 26), nl.add, m1c)
    q, qu = ew.tile("q", f32), ew.tile("q_up", f32)  # q = P(X <= x) and 1 - q, each accurate where it is small
    nisa.tensor_scalar(q, v, nl.multiply, scale, op1=nl.add, operand1=off_lo)
    nisa.tensor_scalar(qu, vc, nl.multiply, scale, op1=nl.add, operand1=off_up)
    s = ew.tile("s", f32)
    nisa.tensor_tensor(s, q, qu, nl.minimum, engine=nisa.engine.vector)
    nisa.tensor_scalar(s, s, nl.maximum, S_MIN)
    # tails: rt = sqrt(-ln s); C/D of rt - 1.6 up to rt = 5, E/F of rt - 5 beyond; negative below the median
    lg, rt = ew.tile("ln_s", f32), ew.tile("rt", f32)
    nisa.activation(lg, nl.log, s, bias=zero, scale=1.0)
    nisa.activation(rt, nl.sqrt, lg, bias=zero, scale=-1.0)
    xt = _ratio(ew, rt, 1.6, PPND7_C, PPND7_D, "near")
    far = _ratio(ew, rt, 5.0, PPND7_E, PPND7_F, "far")
    sel = ew.tile("is_far", nl.uint8)
    nisa.tensor_scalar(sel, rt, nl.greater, 5.0)
    nisa.tensor_copy_predicated(xt, far, sel)
    sgn = ew.tile("sign", f32)  # -1 below the median, +1 above: 2 [q > 1 - q] - 1
    nisa.tensor_tensor(sgn, q, qu, nl.greater, engine=nisa.engine.vector)
    nisa.tensor_scalar(sgn, sgn, nl.multiply, 2.0, op1=nl.add, operand1=-1.0)
    nisa.tensor_tensor(xt, xt, sgn, nl.multiply, engine=nisa.engine.vector)
    # central: x = (q - 1/2) A(r) / B(r), r = 0.180625 - (q - 1/2)**2, floored at 0 where it is not used
    qc, r = ew.tile("qc", f32), ew.tile("r", f32)
    nisa.tensor_scalar(qc, q, nl.subtract, 0.5)
    nisa.tensor_tensor(r, qc, qc, nl.multiply, engine=nisa.engine.vector)
    nisa.tensor_scalar(r, r, nl.subtract, 0.180625, reverse0=True, op1=nl.maximum, operand1=0.0)
    cn, cd = _poly(ew, r, PPND7_A, "c_num"), _poly(ew, r, PPND7_B, "c_den")
    nisa.reciprocal(cd, cd)
    x = ew.tile("x", f32)
    nisa.tensor_tensor(x, cn, cd, nl.multiply, engine=nisa.engine.vector)
    nisa.tensor_tensor(x, x, qc, nl.multiply, engine=nisa.engine.vector)
    tail = ew.tile("is_tail", nl.uint8)
    nisa.tensor_scalar(tail, s, nl.less, S_CENTRAL)  # 1.0 / 0.0, written as uint8 (the predicate dtype)
    nisa.tensor_copy_predicated(x, xt, tail)
    nisa.tensor_scalar(x, x, nl.maximum, lo_b, op1=nl.minimum, operand1=hi_b)
    nisa.tensor_scalar(dst, x, nl.multiply, std, op1=nl.add, operand1=mean)


def _store(out, res, b0: int, rem: int, f: int, spb: int):
    """Store SBUF res [P, F, spb] into out rows b0 ..: one DMA per full part (see philox.store_tile)."""
    q, r = divmod(rem, f)
    if q:
        nisa.dma_copy(dst=out[b0:b0 + q * f, :].reshape((q, spb * f)), src=res[0:q, :, :].reshape((q, spb * f)))
    if r:
        nisa.dma_copy(dst=out[b0 + q * f:b0 + q * f + r, :].reshape((1, spb * r)),
                      src=res[q:q + 1, 0:r, :].reshape((1, spb * r)))


@nki.jit
def philox_transform_kernel(seed, subsequence, block0, nblocks, transform, param, odd=False):
    """Samples of ``transform`` from blocks block0 .. block0+nblocks-1: [nblocks, 4 or 2] (see the module docs)."""
    wps, spb, odt_name, _ = TRANSFORMS[transform]
    odd = int(bool(odd) and wps == 2)
    f = tile_f(nblocks)
    fw = f + 1 if odd else f
    ln = Lanes(fw)
    n = spb * f  # samples per partition of a tile
    ew = _Flat(n)  # epilogue tiles [P, n]
    odt = getattr(nl, odt_name)
    if transform == "bernoulli":
        thr = ew.const(param)
    elif transform == "exponential":
        ulow = _column(2.0**-24, "u_bias")
    elif transform == "randint" and param != FULL:
        for v in (param, param & 0xFFFF, param >> 16):
            ew.const(v)
    elif transform == "geometric":
        ulow = _column(2.0**-53, "u_bias")
    elif transform == "truncated_normal":
        ulow = _column(0.0, "zero_bias")
    b_hi = block0 >> 32
    s0, s1 = subsequence & MASK, subsequence >> 32
    out = nl.ndarray((nblocks, spb), dtype=odt, buffer=nl.shared_hbm)
    for t in nl.static_range(ntiles(nblocks, PMAX * f)):
        b0, rem = tile(t, nblocks, PMAX * f)
        words = ln.words(block0 + b0, b_hi, s0, s1, seed, fw, step=f)
        flat = words.reshape((PMAX, 4 * fw))
        res = nl.ndarray((PMAX, f, spb), dtype=odt, buffer=nl.sbuf, name="samples")
        dst = res.reshape((PMAX, n))
        if transform == "bernoulli":
            lt = ew.tt(flat, thr, nl.less, nisa.engine.gpsimd)
            nisa.tensor_copy(dst, lt, engine=nisa.engine.vector)
        elif transform == "exponential":
            m = ew.ts(flat, nl.right_shift, 8)
            lg = ew.tile("log_u", nl.float32)
            nisa.activation(lg, nl.log, m, bias=ulow, scale=2.0**-24)
            nisa.tensor_scalar(dst, lg, nl.multiply, float(param), op1=nl.add, operand1=0.0)
        else:
            a, b = flat[:, odd:odd + 4 * f:2], flat[:, odd + 1:odd + 4 * f:2]
            if transform == "randint":
                if param == FULL:
                    nisa.tensor_copy(dst, a, engine=nisa.engine.vector)
                else:
                    hi_a, lo_a = ew.mulhilo(a, param)
                    hi_b, _ = ew.mulhilo(b, param)
                    s = ew.add(lo_a, hi_b)  # wraps mod 2**32
                    carry = ew.tt(s, lo_a, nl.less, nisa.engine.gpsimd)  # 1 iff the add wrapped
                    ew.tt(hi_a, carry, nl.add, nisa.engine.gpsimd, out=dst)
            elif transform == "truncated_normal":
                _truncated_normal(ew, a, b, param, ulow, dst)
            else:  # geometric
                v = _m53(ew, a, b, "v")  # the torch path's 53-bit m, rounded to fp32
                lg = ew.tile("log_u", nl.float32)
                nisa.activation(lg, nl.log, v, bias=ulow, scale=2.0**-53)
                x = ew.tile("x", nl.float32)
                nisa.tensor_scalar(x, lg, nl.multiply, float(param), op1=nl.minimum, operand1=CAP)
                r = ew.tile("rounded", nl.float32)
                nisa.tensor_scalar(r, x, nl.add, CAP, op1=nl.subtract, operand1=CAP)
                gt = ew.tile("over", nl.float32)
                nisa.tensor_tensor(gt, r, x, nl.greater, engine=nisa.engine.vector)
                nisa.scalar_tensor_tensor(dst, r, nl.add, 1.0, nl.subtract, gt)
        _store(out, res, b0, rem, f, spb)
    return out
