"""Philox4x32 and THE trnrand stream, in uint32 word arithmetic (private).

This module is the single definition of every bit trnrand produces. The NKI
kernel phase mirrors it operation for operation, so it is written only with
operations an engine has: 32-bit xor/and/shift/add and an exact 32 x 32 ->
64-bit product split into its high and low words.

Representation: uint32 words are held in uint64 NumPy arrays for the bulk
stream (``_blocks``) and in int64 torch tensors for the explicit-counter block
function (``_philox_torch``). The product of two such words is < 2**64 and
both dtypes multiply modulo 2**64, so ``p = a * M`` holds the exact 64
product bits; ``p & 0xFFFFFFFF`` is the low word and ``p >> 32`` the high
word (masked again in int64, whose shift is arithmetic). The kernel cannot do
this (its integer ALU is 32 bits wide) and uses 16-bit limbs instead; see
``trnrand.kernels.philox``. All give the same words (tests pin them to the
Random123 known answers and to a pure-Python reference).

The stream (see docs/trnrand.md "The stream"):

* key   = (seed mod 2**32, seed >> 32)                       (seed: 0 .. 2**64-1)
* word j of subsequence s (j, s: 0 .. 2**64-1 and 2**64-1):
  block b = j // 4, lane j % 4 of
  philox4x32_10(counter=(b mod 2**32, b >> 32, s mod 2**32, s >> 32), key)
"""

from __future__ import annotations

import numpy as np
import torch

M0 = 0xD2511F53
M1 = 0xCD9E8D57
W0 = 0x9E3779B9  # golden ratio
W1 = 0xBB67AE85  # sqrt(3) - 1
MASK = 0xFFFFFFFF
_CHUNK = 1 << 14  # Philox blocks per pass (6 uint64 buffers of 128 KiB, L2-sized); 2**12 and 2**16 were slower


def _philox_torch(counter: torch.Tensor, key: torch.Tensor, rounds: int) -> torch.Tensor:
    """Philox4x32-``rounds`` of int64 tensors holding uint32: (..., 4), (..., 2) -> (..., 4)."""
    x0, x1, x2, x3 = (counter[..., i] for i in range(4))
    k0, k1 = key[..., 0], key[..., 1]
    for r in range(rounds):
        if r:
            k0 = (k0 + W0) & MASK
            k1 = (k1 + W1) & MASK
        p0 = x0 * M0
        p1 = x2 * M1
        x0, x1, x2, x3 = (((p1 >> 32) ^ x1 ^ k0) & MASK, p1 & MASK, ((p0 >> 32) ^ x3 ^ k1) & MASK, p0 & MASK)
    return torch.stack((x0, x1, x2, x3), dim=-1)


def _keys(seed: int, rounds: int) -> list[tuple[int, int]]:
    k0, k1 = seed & MASK, (seed >> 32) & MASK
    out = []
    for _ in range(rounds):
        out.append((k0, k1))
        k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
    return out


def _blocks(seed: int, subsequence: int, block0: int, nblocks: int, sink) -> None:
    """Philox4x32-10 of blocks block0 .. block0+nblocks-1 of one subsequence, chunk by chunk into ``sink``.

    ``sink(start, m, lanes)`` receives the chunk's blocks ``start .. start+m-1``
    (relative to block0) as four NumPy uint64 arrays holding the uint32 lanes
    (scratch: the sink may overwrite them).

    NumPy uint64, not torch int64: the same ten ops per round (two exact
    64-bit products, two logical shifts, four xors, two masks) run ~1.5-2x
    faster as NumPy ufuncs with ``out=`` on this CPU (measured, one thread),
    and uint64's logical shift needs no sign mask. Scalar key schedule; the
    counter's high words are constants of the subsequence, so round 1's second
    product is a scalar. Six preallocated L2-sized chunk buffers: no
    allocation inside the rounds (fresh large allocations page-fault).
    """
    keys = [(np.uint64(a), np.uint64(b)) for a, b in _keys(seed, 10)]
    s0, s1 = subsequence & MASK, (subsequence >> 32) & MASK
    # first round's product of the constant word x2 = s0
    q = s0 * M1
    q_hi, q_lo = q >> 32, q & MASK
    m0, m1, sh, mask = np.uint64(M0), np.uint64(M1), np.uint64(32), np.uint64(MASK)
    k0, k1 = keys[0]
    r1_x0, r1_x2 = np.uint64(q_hi) ^ k0, np.uint64(s1) ^ k1
    size = min(_CHUNK, nblocks)
    bufs = [np.empty(size, dtype=np.uint64) for _ in range(6)]
    for start in range(0, nblocks, _CHUNK):
        m = min(_CHUNK, nblocks - start)
        x0, x1, x2, x3, p0, p1 = (t[:m] for t in bufs)
        c = np.arange(block0 + start, block0 + start + m, dtype=np.uint64)
        np.right_shift(c, sh, out=x1)  # the block index's high word (a carry across 2**32 included)
        np.bitwise_and(c, mask, out=x0)
        # round 1: x2 = s0, x3 = s1 are scalars
        np.multiply(x0, m0, out=p0)
        np.bitwise_xor(x1, r1_x0, out=x0)
        x1.fill(q_lo)
        np.right_shift(p0, sh, out=x2)
        np.bitwise_xor(x2, r1_x2, out=x2)
        x3, p0 = p0, x3
        # x1 and x3 are only ever xor-ed into words that are masked afterwards, so they may keep the
        # product's high bits ("dirty"): x1 = p1 instead of p1 & MASK saves two ops per round.
        for k0, k1 in keys[1:]:
            np.multiply(x0, m0, out=p0)
            np.multiply(x2, m1, out=p1)
            np.right_shift(p1, sh, out=x0)
            np.bitwise_xor(x0, x1, out=x0)
            np.bitwise_xor(x0, k0, out=x0)
            np.bitwise_and(x0, mask, out=x0)
            np.right_shift(p0, sh, out=x2)
            np.bitwise_xor(x2, x3, out=x2)
            np.bitwise_xor(x2, k1, out=x2)
            np.bitwise_and(x2, mask, out=x2)
            x1, p1 = p1, x1
            x3, p0 = p0, x3
        np.bitwise_and(x1, mask, out=x1)
        np.bitwise_and(x3, mask, out=x3)
        sink(start, m, (x0, x1, x2, x3))


def _block_py(seed: int, subsequence: int, b: int) -> tuple[int, int, int, int]:
    """One block in Python ints: a few microseconds, far below 100 ufunc calls for tiny draws."""
    x0, x1, x2, x3 = b & MASK, (b >> 32) & MASK, subsequence & MASK, (subsequence >> 32) & MASK
    for k0, k1 in _keys(seed, 10):
        p0, p1 = x0 * M0, x2 * M1
        x0, x1, x2, x3 = (p1 >> 32) ^ x1 ^ k0, p1 & MASK, (p0 >> 32) ^ x3 ^ k1, p0 & MASK
    return x0, x1, x2, x3


_SMALL = 8  # blocks at or below which the Python-int path is faster than the ufunc rounds (measured)


def _span_blocks(seed: int, subsequence: int, b0: int, out: np.ndarray, block_fn) -> None:
    """Fill ``out`` (rows = blocks b0 .. b0+len(out)-1) chunk by chunk: ``block_fn(o, lanes)`` writes
    rows ``o`` from the four uint64 lane arrays (while they are in cache)."""
    nb = out.shape[0]
    if nb <= _SMALL:
        w = np.array([_block_py(seed, subsequence, b0 + i) for i in range(nb)], dtype=np.uint64)
        block_fn(out, tuple(w[:, i] for i in range(4)))
        return
    _blocks(seed, subsequence, b0, nb, lambda s, m, lanes: block_fn(out[s:s + m], lanes))


def _lanewise(lane_fn, finish=None):
    """block_fn writing column i of the rows from lane i (mapped by lane_fn), then finish(rows) in place."""
    def block_fn(o, lanes):
        for i, lane in enumerate(lanes):
            o[:, i] = lane_fn(lane)
        if finish is not None:
            finish(o)

    return block_fn


def _run(seed, subsequence, start, n, dtype, block_fn) -> np.ndarray:
    """Flat values of words start .. start+n-1 (one per word) of whole blocks, mapped by block_fn."""
    b0, b1 = start // 4, (start + n - 1) // 4 + 1
    out = np.empty((b1 - b0, 4), dtype=dtype)
    _span_blocks(seed, subsequence, b0, out, block_fn)
    lead = start - 4 * b0
    return out.reshape(-1)[lead:lead + n]


def _to_device(a: np.ndarray, device) -> torch.Tensor:
    t = torch.from_numpy(a)
    return t if torch.device(device).type == "cpu" else t.to(device)


def words(seed: int, subsequence: int, start: int, n: int, device="cpu") -> torch.Tensor:
    """Words start .. start+n-1 of the stream as an int64 tensor (n,) of uint32 values."""
    if n <= 0:
        return torch.empty(0, dtype=torch.int64, device=device)
    return _to_device(_run(seed, subsequence, start, n, np.uint64, _lanewise(_same)).view(np.int64), device)


def _same(lane):
    return lane


def _u24_lane(open_low: bool):
    def fn(lane):
        lane = np.right_shift(lane, np.uint64(8), out=lane)
        return lane + np.uint64(1) if open_low else lane

    return fn


def _scale24(o):
    o *= np.float32(TWO_M24)


def uniform32(seed: int, subsequence: int, start: int, n: int, device="cpu", open_low=False) -> torch.Tensor:
    """``_unit(words(...), float32, open_low)`` fused: each lane goes straight to float32, no int64 words array.

    Bit-identical to the two-step form: m = w >> 8 (or m + 1) is < 2**24 + 1,
    exact in float32, and the scale 2**-24 is a power of two (applied per chunk, in cache).
    """
    if n <= 0:
        return torch.empty(0, dtype=torch.float32, device=device)
    return _to_device(_run(seed, subsequence, start, n, np.float32, _lanewise(_u24_lane(open_low), _scale24)), device)


def _m53_np(hi, lo, open_low):
    m = np.right_shift(hi, np.uint64(5), out=hi)
    np.left_shift(m, np.uint64(26), out=m)
    np.bitwise_or(m, np.right_shift(lo, np.uint64(6), out=lo), out=m)
    if open_low:
        m += np.uint64(1)
    return m


def uniform64(seed: int, subsequence: int, start: int, n: int, device="cpu", open_low=False) -> torch.Tensor:
    """``_unit(words(start, 2 n), float64, open_low)`` on NumPy words (no torch int64 round trip); exact.

    An even ``start`` pairs lanes (0, 1) and (2, 3) of each block: mapped per chunk, in cache. An odd one
    pairs across blocks: the words first, then the map.
    """
    if n <= 0:
        return torch.empty(0, dtype=torch.float64, device=device)
    if start % 2 == 0:
        def block_fn(o, lanes):
            for j in (0, 1):
                o[:, j] = _m53_np(lanes[2 * j], lanes[2 * j + 1], open_low)
            o *= TWO_M53

        b0, b1 = start // 4, (start + 2 * n - 1) // 4 + 1
        out = np.empty((b1 - b0, 2), dtype=np.float64)
        _span_blocks(seed, subsequence, b0, out, block_fn)
        lead = (start - 4 * b0) // 2
        return _to_device(out.reshape(-1)[lead:lead + n], device)
    w = _run(seed, subsequence, start, 2 * n, np.uint64, _lanewise(_same)).reshape(n, 2)
    u = _m53_np(w[:, 0].copy(), w[:, 1].copy(), open_low).astype(np.float64)
    u *= TWO_M53
    return _to_device(u, device)


def box_muller_fields(seed: int, subsequence: int, start: int, npairs: int, dtype, device="cpu") -> torch.Tensor:
    """(npairs, 3) ``(u1, m, m')`` of Box-Muller pairs from words start ..: what ``_box_muller`` computes
    from torch int64 words, here per chunk while the lanes are in cache. All exact in ``dtype``.

    float64 (start % 4 == 0; a pair is a block): u1 = (m53(w0, w1) + 1) 2**-53, m = m53(w2, w3),
    m' = (m + 2**51) mod 2**53. float32 (start even; pairs (w0, w1), (w2, w3)): u1 = ((a >> 8) + 1)
    2**-24, m = b >> 8, m' = (m + 2**22) mod 2**24.
    """
    wide = dtype == torch.float64
    assert start % (4 if wide else 2) == 0
    if wide:
        bits, per_block, ndt = 53, 1, np.float64
    else:
        bits, per_block, ndt = 24, 2, np.float32
    quarter, top = np.uint64(1 << (bits - 2)), np.uint64((1 << bits) - 1)

    def fields(o, a_hi, a_lo, b_hi, b_lo):  # o: rows x 3 (strided ok)
        if wide:
            u, m = _m53_np(a_hi, a_lo, True), _m53_np(b_hi, b_lo, False)
        else:
            u = np.right_shift(a_hi, np.uint64(8), out=a_hi)
            u += np.uint64(1)
            m = np.right_shift(b_hi, np.uint64(8), out=b_hi)
        o[:, 0] = u
        o[:, 0] *= TWO_M53 if wide else np.float32(TWO_M24)
        o[:, 1] = m
        m += quarter
        np.bitwise_and(m, top, out=m)
        o[:, 2] = m

    def block_fn(o, lanes):
        if wide:
            fields(o[:, 0], lanes[0], lanes[1], lanes[2], lanes[3])
        else:
            fields(o[:, 0], lanes[0], None, lanes[1], None)
            fields(o[:, 1], lanes[2], None, lanes[3], None)

    b0 = start // 4
    nb = (start + 4 // per_block * npairs - 1) // 4 + 1 - b0
    out = np.empty((nb, per_block, 3), dtype=ndt)
    _span_blocks(seed, subsequence, b0, out, block_fn)
    lead = (start - 4 * b0) // 2
    return _to_device(out.reshape(-1, 3)[lead:lead + npairs], device)


# ---- words -> floats (exact: every step is an integer op or a power-of-two scale) -------------------------------
TWO_M24 = 2.0**-24
TWO_M53 = 2.0**-53
#: float32 Box-Muller constants (shared with the kernel): C = the largest float32 below pi, the angle
#: grid step S = 2 C 2**-24 (exact in float32) and the radius bias that keeps sqrt's argument > 0
C_PI = 3.1415925025939941  # float(np.nextafter(np.float32(np.pi), 0)); checked in the tests
S_ANGLE = 2.0 * C_PI * 2.0**-24
R_BIAS = 2.0**-100


def _u24(w: torch.Tensor) -> torch.Tensor:
    """24-bit integer m = w >> 8 (the top 24 bits of a word)."""
    return w >> 8


def _m53(w_hi: torch.Tensor, w_lo: torch.Tensor) -> torch.Tensor:
    """53-bit integer from two words: (w_hi >> 5) * 2**26 + (w_lo >> 6)."""
    return ((w_hi >> 5) << 26) | (w_lo >> 6)


def _unit(w: torch.Tensor, dtype: torch.dtype, open_low: bool) -> torch.Tensor:
    """Words -> floats.

    float32: one word per value, m = w >> 8 (24 bits): [0, 1) is m * 2**-24,
    (0, 1] is (m + 1) * 2**-24. float64: two consecutive words (w[2i], w[2i+1])
    per value, m = (w[2i] >> 5) * 2**26 + (w[2i+1] >> 6) (53 bits): m * 2**-53
    or (m + 1) * 2**-53. All exact in the target dtype.
    """
    if dtype == torch.float64:
        w = w.reshape(-1, 2)
        m = _m53(w[:, 0], w[:, 1])
        scale = TWO_M53
    else:
        m = w >> 8
        scale = TWO_M24
    if open_low:
        m = m + 1
    return m.to(dtype).mul_(scale)


# ---- the kernel's multiply, on 16-bit limbs (reference for the NKI phase) ------------------------------------------
def _mulhilo_limbs(a: torch.Tensor, b: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(hi, lo) of the 64-bit product a * b (a: uint32 values in int64, b: a uint32 constant) from 16-bit limbs.

    Every intermediate is < 2**32: four 16 x 16 -> 32-bit products, 16-bit
    masks/shifts and 32-bit adds -- what an engine with an exact 32-bit
    integer ALU but no 64-bit product (GpSimd tensor_tensor / tensor_scalar
    on uint32) can do. An fp32 engine cannot: a 16 x 16 product needs up to
    32 significant bits, fp32 keeps 24.
    """
    al, ah = a & 0xFFFF, a >> 16
    bl, bh = b & 0xFFFF, b >> 16
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    mid = (ll >> 16) + (lh & 0xFFFF) + (hl & 0xFFFF)  # < 3 * 2**16
    lo = ((mid & 0xFFFF) << 16) | (ll & 0xFFFF)
    hi = hh + (lh >> 16) + (hl >> 16) + (mid >> 16)
    return hi, lo
