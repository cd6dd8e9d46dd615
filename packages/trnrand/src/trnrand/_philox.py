"""Philox4x32 and THE trnrand stream, in uint32 word arithmetic (private).

This module is the single definition of every bit trnrand produces. The NKI
kernel phase mirrors it operation for operation, so it is written only with
operations an engine has: 32-bit xor/and/shift/add and an exact 32 x 32 ->
64-bit product split into its high and low words.

Representation: uint32 words are held in int64 tensors (values 0 .. 2**32-1).
The product of two such words is < 2**64; int64 multiplication wraps modulo
2**64, so ``p = a * M`` holds the exact 64 product bits; ``p & 0xFFFFFFFF`` is
the low word and ``(p >> 32) & 0xFFFFFFFF`` the high word (the arithmetic
shift's sign extension is masked away). The kernel cannot do this (its
integer ALU is 32 bits wide) and uses 16-bit limbs instead; see
``trnrand.kernels.philox``. Both give the same words.

The stream (see docs/trnrand.md "The stream"):

* key   = (seed mod 2**32, seed >> 32)                       (seed: 0 .. 2**64-1)
* word j of subsequence s (j, s: 0 .. 2**64-1 and 2**64-1):
  block b = j // 4, lane j % 4 of
  philox4x32_10(counter=(b mod 2**32, b >> 32, s mod 2**32, s >> 32), key)
"""

from __future__ import annotations

import torch

M0 = 0xD2511F53
M1 = 0xCD9E8D57
W0 = 0x9E3779B9  # golden ratio
W1 = 0xBB67AE85  # sqrt(3) - 1
MASK = 0xFFFFFFFF
_CHUNK = 1 << 16  # Philox blocks per pass (6 int64 buffers of 512 KiB); 2**14 and 2**18 were not faster


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


def _blocks(seed: int, subsequence: int, block0: int, nblocks: int, device, out: torch.Tensor) -> None:
    """Philox4x32-10 of blocks block0 .. block0+nblocks-1 of one subsequence into out (nblocks, 4) int64.

    Scalar key schedule; the counter's high words are constants of the
    subsequence, so round 1's second product is a scalar. Six preallocated
    chunk buffers and ``out=`` / in-place ops: no allocation (and no page
    faults of fresh large allocations) inside the rounds -- about 1.5-2x
    faster than allocating each intermediate (measured, one thread).
    """
    keys = _keys(seed, 10)
    s0, s1 = subsequence & MASK, (subsequence >> 32) & MASK
    # first round's product of the constant word x2 = s0
    q = s0 * M1
    q_hi, q_lo = q >> 32, q & MASK
    b_lo0, b_hi0 = block0 & MASK, block0 >> 32
    size = min(_CHUNK, nblocks)
    x0, x1, x2, x3, p0, p1 = (torch.empty(size, dtype=torch.int64, device=device) for _ in range(6))
    for start in range(0, nblocks, _CHUNK):
        m = min(_CHUNK, nblocks - start)
        if m < size:
            x0, x1, x2, x3, p0, p1 = (t[:m] for t in (x0, x1, x2, x3, p0, p1))
        c = torch.arange(b_lo0 + start, b_lo0 + start + m, dtype=torch.int64, device=device, out=x3)
        torch.bitwise_right_shift(c, 32, out=x1).add_(b_hi0).bitwise_and_(MASK)  # carry into the high word
        torch.bitwise_and(c, MASK, out=x0)
        k0, k1 = keys[0]
        # round 1: x2 = s0, x3 = s1 are scalars
        torch.mul(x0, M0, out=p0)
        torch.bitwise_xor(x1, q_hi ^ k0, out=x0).bitwise_and_(MASK)
        x1.fill_(q_lo)
        torch.bitwise_right_shift(p0, 32, out=x2).bitwise_xor_(s1 ^ k1).bitwise_and_(MASK)
        x3, p0 = p0, x3
        # x1 and x3 are only ever xor-ed into words that are masked afterwards, so they may keep the
        # product's high bits ("dirty"): x1 = p1 instead of p1 & MASK saves two ops per round.
        for k0, k1 in keys[1:]:
            torch.mul(x0, M0, out=p0)
            torch.mul(x2, M1, out=p1)
            torch.bitwise_right_shift(p1, 32, out=x0).bitwise_xor_(x1).bitwise_xor_(k0).bitwise_and_(MASK)
            torch.bitwise_right_shift(p0, 32, out=x2).bitwise_xor_(x3).bitwise_xor_(k1).bitwise_and_(MASK)
            x1, p1 = p1, x1
            x3, p0 = p0, x3
        torch.stack((x0, x1.bitwise_and_(MASK), x2, x3.bitwise_and_(MASK)), dim=1, out=out[start:start + m])


def words(seed: int, subsequence: int, start: int, n: int, device="cpu") -> torch.Tensor:
    """Words start .. start+n-1 of the stream as an int64 tensor (n,) of uint32 values."""
    if n <= 0:
        return torch.empty(0, dtype=torch.int64, device=device)
    b0 = start // 4
    b1 = (start + n - 1) // 4 + 1
    out = torch.empty((b1 - b0, 4), dtype=torch.int64, device=device)
    _blocks(seed, subsequence, b0, b1 - b0, device, out)
    lead = start - 4 * b0
    return out.reshape(-1)[lead : lead + n]


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
