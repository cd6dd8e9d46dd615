"""Philox4x32 and THE trnrand stream, in uint32 word arithmetic (private).

This module is the single definition of every bit trnrand produces. The NKI
kernel phase mirrors it operation for operation, so it is written only with
operations an engine has: 32-bit xor/and/shift/add and an exact 32 x 32 ->
64-bit product split into its high and low words.

Representation: uint32 words are held in uint64 NumPy arrays for the bulk
stream (``_blocks``; its high and low words are also read as uint32 views),
in Python ints with one 64-bit slot per block for draws of a few blocks
(``_swar``), and in int64 torch tensors for the explicit-counter block
function (``_philox_torch``). The product of two words is < 2**64 and all
three multiply exactly (modulo 2**64), so ``p = a * M`` holds the 64 product
bits: the low word ``p & 0xFFFFFFFF`` and the high word ``p >> 32``. The
kernel cannot do this (its integer ALU is 32 bits wide) and uses 16-bit
limbs instead; see ``trnrand.kernels.philox``. All give the same words (tests
pin them to the Random123 known answers and to a pure-Python reference).

The stream (see docs/trnrand.md "The stream"):

* key   = (seed mod 2**32, seed >> 32)                       (seed: 0 .. 2**64-1)
* word j of subsequence s (j, s: 0 .. 2**64-1 and 2**64-1):
  block b = j // 4, lane j % 4 of
  philox4x32_10(counter=(b mod 2**32, b >> 32, s mod 2**32, s >> 32), key)
"""

from __future__ import annotations

import collections
import functools
import math
import threading

import numpy as np
import torch

from . import _host, _philox_jit
from .kernels.normal import C_PI, R_BIAS, S_ANGLE  # the kernels' float32 Box-Muller constants

M0 = 0xD2511F53
M1 = 0xCD9E8D57
W0 = 0x9E3779B9  # golden ratio
W1 = 0xBB67AE85  # sqrt(3) - 1
MASK = 0xFFFFFFFF
TWO_M24 = 2.0**-24
TWO_M53 = 2.0**-53


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


# ---- the bulk stream: NumPy uint64 ufuncs, in place on two L2-resident buffers ---------------------------------
#
# Per chunk of m blocks, the state lives in two (2, m) uint64 buffers: one holds the lanes (x0, x2), the other
# the previous round's products p0 = x0 M0, p1 = x2 M1, whose low words are the lanes x3, x1. One round is six
# ufunc calls, all in place:
#
#   * two multiplies, each row by its constant, over the lane buffer (it now holds this round's products);
#   * one uint32 xor of the two buffers viewed as uint32, offset by one word: word 2i + 1 of the products (the
#     high word of element i) meets word 2i of the previous products (the low word of element i), so the even
#     words get hi(p) ^ lo(p_prev) -- the next lanes, before the key -- and the odd words junk; written over
#     the previous products, which are dead from here;
#   * the two key xors (one per row) and one mask over both rows, which clears the junk high words.
#
# That is 4 uint64-passes per round over both lanes (a shift-and-mask formulation needs 5) and no allocation;
# the passes run at L2 bandwidth, so the buffers sit on 64-byte boundaries. Narrow chunks are bound by the
# ufunc calls instead: there the per-row constants are (2, m) arrays and a round is 4 calls
# (docs/perf-notes.md#design-trnrand-host).
# The multiply writes over its input, so each buffer alternates between lanes and products and the rows swap
# meaning from round to round; ``_round_steps`` derives the layout of every round once, symbolically.
# _CHUNK: blocks per pass, two (2, 2**14) uint64 buffers, 512 KiB; _TILED: chunk widths at or below which a round
# is 4 ufunc calls instead of 6 (the call-bound case); both the measured best (docs/perf-notes.md#design-trnrand-host)
_CHUNK = 1 << 14
_TILED = 1024
_SWAR = 32  # draws of at most this many blocks run on Python-int lanes (a few hundred big-int ops < 57 ufunc calls)
_U64 = np.uint64


def _z(v: int) -> np.ndarray:
    """A 0-d uint64 operand: a ufunc call takes it without converting a NumPy or Python scalar
    (docs/perf-notes.md#design-trnrand-host)."""
    return np.array(v, dtype=_U64)


_Z32, _ZMASK, _ZM = _z(32), _z(MASK), (_z(M0), _z(M1))


def _aligned(shape: tuple, dtype) -> np.ndarray:
    """np.empty on a 64-byte boundary: NumPy's large arrays start 16 bytes past one, which slows the rounds'
    vector loops (docs/perf-notes.md#design-trnrand-host)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    off = -raw.ctypes.data % 64
    return raw[off:off + nbytes].view(dtype).reshape(shape)


def _out(shape: tuple, dtype) -> np.ndarray:
    """A call's output array: 64-byte aligned when large (see ``_aligned``); small ones come straight from
    np.empty, where finding the address (``ndarray.ctypes``) would cost more than the alignment saves."""
    if math.prod(shape) * np.dtype(dtype).itemsize <= 1 << 16:
        return np.empty(shape, dtype)
    return _aligned(shape, dtype)


@functools.lru_cache(maxsize=64)
def _key_schedule(seed: int) -> list[tuple[int, int]]:
    return _keys(seed, 10)


def _round_steps():
    """Rows of rounds 3..10 (rounds 1 and 2 are set up per chunk with the counter's constant words).

    Buffer 1 starts with the lanes (x0, x2), buffer 0 with round 2's products (p0, p1). Returns per round
    ``(lane buffer, product buffer, [(row, multiplier 0/1)], rows aligned?, [(row, key 0/1)])`` and the
    final layout: the buffer and rows of (x0, x2) and of (p0, p1).
    """
    lanes, prods = {0: "x0", 1: "x2"}, {0: "p0", 1: "p1"}
    a, p = 1, 0
    steps = []
    for _ in range(8):
        muls = [(r, 0 if lanes[r] == "x0" else 1) for r in (0, 1)]
        new_prods = {r: "p0" if lanes[r] == "x0" else "p1" for r in (0, 1)}
        # x0' comes from p1 and lo(p1_prev): it lands on the row that held p1_prev; x2' on p0_prev's row
        new_lanes = {r: "x0" if prods[r] == "p1" else "x2" for r in (0, 1)}
        keys = [(r, 0 if new_lanes[r] == "x0" else 1) for r in (0, 1)]
        steps.append((a, p, muls, new_prods[0] == prods[0], keys))
        lanes, prods, a, p = new_lanes, new_prods, p, a
    assert lanes == {0: "x0", 1: "x2"} and prods == {0: "p0", 1: "p1"}  # the period-4 layout ends where it began
    return steps, a, p


_STEPS, _FINAL_LANES, _FINAL_PRODS = _round_steps()


class _Plan:
    """Buffers and every view the rounds use, for chunks of width ``m`` (one per thread and size class)."""

    def __init__(self, m: int):
        self.m = m
        self.iota_m0 = _aligned((m,), _U64)
        np.multiply(np.arange(m, dtype=_U64), _U64(M0), out=self.iota_m0)  # round 1's products: c M0 + i M0
        bufs = (_aligned((2, m), _U64), _aligned((2, m), _U64))
        views = []
        for b in bufs:
            w, w2 = b.reshape(-1).view(np.uint32), b.view(np.uint32)
            views.append({"rows": (b[0], b[1]), "all": b, "flat": b.reshape(-1),
                          # aligned rows: one flat call over both; swapped rows: product row r meets row 1 - r
                          "hi": w[1:], "lo": w[:-1], "hi2": w2[:, 1:], "lo2": w2[::-1, :-1]})
        self.bufs, self.views = bufs, views
        self.lanes, self.prods = bufs[_FINAL_LANES], bufs[_FINAL_PRODS]
        self.ops: collections.OrderedDict = collections.OrderedDict()
        self.mults: dict = {}  # (2, m) multiplier rows of the narrow-chunk rounds, per row order

    def rounds(self, seed: int, last_mask: int) -> list:
        """The ufunc calls of rounds 3..10 as (ufunc, a, b, out), for one key schedule (cached per seed).

        Narrow chunks are call-bound: there each round's two multiplies and two key xors are one call each,
        against (2, m) arrays of the per-row constants (4 calls per round instead of 6).
        """
        key = (seed, last_mask)
        ops = self.ops.get(key)
        if ops is not None:
            self.ops.move_to_end(key)
            return ops
        ks = _keys(seed, 10)[2:]
        masks = (_ZMASK,) * 7 + (_z(last_mask),)
        tiled = self.m <= _TILED
        if tiled:
            kk = _aligned((8, 2, self.m), _U64)
            kk[...] = np.array([[ks[r][k] for _, k in step[4]] for r, step in enumerate(_STEPS)], _U64)[:, :, None]
        ops = []
        for r, ((a, p, muls, aligned, keys), mask) in enumerate(zip(_STEPS, masks)):
            va, vp = self.views[a], self.views[p]
            if tiled:
                order = tuple(k for _, k in muls)
                mm = self.mults.get(order)
                if mm is None:
                    mm = self.mults[order] = _aligned((2, self.m), _U64)
                    mm[...] = np.array([(M0, M1)[k] for k in order], _U64)[:, None]
                ops.append((_mul, va["all"], mm, va["all"]))
            else:
                ops += [(_mul, va["rows"][row], _ZM[k], va["rows"][row]) for row, k in muls]
            hi, lo = (va["hi"], vp["lo"]) if aligned else (va["hi2"], vp["lo2"])
            ops.append((_xor, hi, lo, lo))
            if tiled:
                ops.append((_xor, vp["all"], kk[r], vp["all"]))
            else:
                ops += [(_xor, vp["rows"][row], _z(ks[r][k]), vp["rows"][row]) for row, k in keys]
            ops.append((_and, vp["flat"], mask, vp["flat"]))
        self.ops[key] = ops
        if len(self.ops) > 4:
            self.ops.popitem(last=False)
        return ops


_local = threading.local()


def _size_class(m: int) -> int:
    """Buffer width for a chunk of m blocks: powers of two up to 1024, then multiples of 256 (the unused
    columns compute blocks past the chunk, which are dropped)."""
    return 1 << (m - 1).bit_length() if m <= 1024 else -(-m // 256) * 256


def _plan(m: int) -> _Plan:
    plans = _local.__dict__.get("plans")
    if plans is None:  # per thread (the buffers are scratch), the 8 most recently used widths
        plans = _local.plans = collections.OrderedDict()
    w = _size_class(m)
    plan = plans.get(w)
    if plan is None:
        plan = plans[w] = _Plan(w)
        if len(plans) > 8:
            plans.popitem(last=False)
    else:
        plans.move_to_end(w)
    return plan


@functools.lru_cache(maxsize=256)
def _swar_const(m: int) -> tuple[int, int, int]:
    """(1 in every slot, MASK in every slot, i in slot i) for m 64-bit slots."""
    rep = ((1 << (64 * m)) - 1) // ((1 << 64) - 1)
    return rep, rep * MASK, int.from_bytes(np.arange(m, dtype=_U64).tobytes(), "little")


@functools.lru_cache(maxsize=256)
def _swar_keys(seed: int, m: int) -> tuple[tuple[int, int], ...]:
    rep = _swar_const(m)[0]
    return tuple((k0 * rep, k1 * rep) for k0, k1 in _key_schedule(seed))


def _swar(seed: int, s0: int, s1: int, block0: int, m: int, last_mask: int):
    """Rounds of m <= _SWAR blocks on Python ints holding m 64-bit slots (SIMD within a register: no product
    overflows its slot); returns the (lanes, prods) arrays of ``_blocks``."""
    rep, masks, iota = _swar_const(m)
    if (block0 & MASK) + m <= 1 << 32:
        x0, x1 = (block0 & MASK) * rep + iota, (block0 >> 32) * rep
    else:  # the block index carries into counter word 1 inside the draw
        x0 = sum(((block0 + i) & MASK) << (64 * i) for i in range(m))
        x1 = sum(((block0 + i) >> 32) << (64 * i) for i in range(m))
    x2, x3 = s0 * rep, s1 * rep
    for k0, k1 in _swar_keys(seed, m):
        p0, p1 = x0 * M0, x2 * M1
        x0 = (((p1 >> 32) ^ x1) & masks) ^ k0
        x2 = (((p0 >> 32) ^ x3) & masks) ^ k1
        x1, x3 = p1, p0  # full products: their low words are the lanes
    keep, nbytes = last_mask * rep, 16 * m
    lanes = np.frombuffer(bytearray(((x0 & keep) | ((x2 & keep) << (64 * m))).to_bytes(nbytes, "little")), _U64)
    prods = np.frombuffer(bytearray((x3 | (x1 << (64 * m))).to_bytes(nbytes, "little")), _U64)
    return lanes.reshape(2, m), prods.reshape(2, m)


_mul, _xor, _and, _rsh, _add = np.multiply, np.bitwise_xor, np.bitwise_and, np.right_shift, np.add


def _blocks(seed: int, subsequence: int, block0: int, nblocks: int, sink, last_mask: int = MASK,
            extra: int = 0, kind: str = "words") -> None:
    """Philox4x32-10 of blocks block0 .. block0+nblocks-1 of one subsequence, chunk by chunk into ``sink``.

    ``sink(start, m, lanes, prods)`` receives blocks ``start .. start+m-1`` (relative to block0) as two
    (2, m + extra) uint64 arrays: ``lanes`` = (x0, x2) & ``last_mask``, ``prods`` = products whose low 32
    bits are (x3, x1) (high bits junk); with ``extra=1`` column m is the chunk's next block (the next chunk's
    first), for maps whose word groups straddle blocks. Both are scratch: the sink may overwrite them and
    must not keep them. A chunk never crosses a multiple of 2**32 blocks (counter word 1 is constant in it).

    A draw of several chunks may run them on torch's threads (route ``"threads"``, chosen by measuring,
    per ``kind`` of sink and number of chunks, see :func:`trnrand._host._route`): the sink is then called from
    several threads at once, on disjoint chunks, so it must write only its own rows and use per-thread scratch.
    """
    ks = _key_schedule(seed)
    s0, s1 = subsequence & MASK, (subsequence >> 32) & MASK
    if _host._JIT is not None:
        _jit_blocks(seed, s0, s1, block0, nblocks, sink, last_mask, extra)
        return
    if nblocks + extra <= _SWAR:
        sink(0, nblocks, *_swar(seed, s0, s1, block0, nblocks + extra, last_mask))
        return
    spans = []
    start = 0
    while start < nblocks:
        c = block0 + start
        m = min(_CHUNK - extra, nblocks - start, (1 << 32) - (c & MASK))
        spans.append((start, m))
        start += m
    args = (seed, s0, s1, ks, block0, extra, last_mask, sink)
    if len(spans) > 1 and torch.get_num_threads() > 1 and _host._route(kind, _chunks, args, spans) == "threads":
        _host._threaded(_chunks, args, spans)
    else:
        _chunks(args, spans)


@functools.lru_cache(maxsize=64)
def _jit_keys(seed: int) -> np.ndarray:
    return _philox_jit.key_array(_key_schedule(seed))


def _jit_radii(npairs: int) -> np.ndarray:
    """This thread's float32 scratch for Box-Muller's radii (reused up to 2**20 pairs: a fresh array faults its
    pages in on every draw), ``npairs`` long."""
    if npairs > 1 << 20:
        return np.empty(npairs, np.float32)
    u = _local.__dict__.get("jit_radii")
    if u is None or u.size < npairs:
        u = _local.jit_radii = _aligned((max(npairs, 1 << 12),), np.float32)
    return u[:npairs]


def _jit_blocks(seed, s0, s1, block0, nblocks, sink, last_mask, extra) -> None:
    """``_blocks`` on the compiled route: chunks of ``_CHUNK`` blocks (+ ``extra``), each one compiled loop; the
    counter is formed per block in 64 bits, so a chunk may cross a multiple of 2**32 blocks."""
    keys = _jit_keys(seed)
    z0, z1, zm = _U64(s0), _U64(s1), _U64(last_mask)
    start = 0
    while start < nblocks:
        m = min(_CHUNK, nblocks - start)
        w = min(m + extra, (1 << 64) - (block0 + start))  # never past the counter's last block
        lanes, prods = _scratch("jit_lanes", (2, m + extra), _U64), _scratch("jit_prods", (2, m + extra), _U64)
        _philox_jit.lanes_prods(keys, z0, z1, _U64(block0 + start), w, zm, lanes, prods)
        sink(start, m, lanes, prods)
        start += m


def _chunks(args, spans) -> None:
    """Run the chunks ``spans`` ((start, m) pairs) of a ``_blocks`` call on this thread, in order."""
    seed, s0, s1, ks, block0, extra, last_mask, sink = args
    q1 = s0 * M1  # round 1's product of the constant word x2 = s0
    x1 = q1 & MASK  # round 1's x1, a constant
    r1 = _z(s1 ^ ks[0][1])
    k0, k1 = ks[1]
    for start, m in spans:
        c = block0 + start
        w = m + extra if (c & MASK) + m + extra <= 1 << 32 else m  # else the extra block is past the carry
        plan = _plan(w)
        (a0, a1), (b0, b1) = plan.bufs[1], plan.bufs[0]
        # round 1: x0 = b_lo (array), x1 = b_hi, x2 = s0, x3 = s1 (constants): p0 = b_lo M0 is an array,
        # x0' a constant; round 2: p0 = x0' M0 a constant
        x0 = (q1 >> 32) ^ (c >> 32) ^ ks[0][0]
        q0 = x0 * M0
        _add(plan.iota_m0, _z((c & MASK) * M0), a1)  # p0 (its low word is x3')
        _rsh(a1, _Z32, a0)
        _xor(a0, r1, a0)  # x2' = hi(p0) ^ s1 ^ k1
        _mul(a0, _ZM[1], b1)  # round 2: p1 = x2' M1
        _rsh(b1, _Z32, a0)
        _xor(a0, _z(x1 ^ k0), a0)  # x0'' = hi(p1) ^ x1' ^ k0
        _xor(a1, _z((q0 >> 32) ^ k1), a1)
        _and(a1, _ZMASK, a1)  # x2'' = hi(q0) ^ lo(p0) ^ k1
        b0.fill(q0)  # round 2's p0, a constant
        for f, x, y, out in plan.rounds(seed, last_mask):
            f(x, y, out)
        lanes, prods = plan.lanes, plan.prods
        if plan.m != w:
            lanes, prods = lanes[:, :w], prods[:, :w]
        if w < m + extra:  # the next block, first of the next 2**32 span, on Python ints
            nl, npr = _swar(seed, s0, s1, c + m, extra, last_mask)
            lanes, prods = np.concatenate((lanes, nl), axis=1), np.concatenate((prods, npr), axis=1)
        sink(start, m, lanes, prods)


def _scratch(name: str, shape: tuple, dtype) -> np.ndarray:
    """A per-thread scratch array of at most a few chunks, reused across chunks and calls (fresh large arrays
    fault their pages in); larger ones (the word-array fallbacks) are allocated each time."""
    if math.prod(shape) > 4 * _CHUNK:
        return _aligned(shape, dtype)
    pool = _local.__dict__.setdefault("scratch", {})
    a = pool.get((name, shape, dtype))
    if a is None:
        if len(pool) >= 32:  # shapes of one-off draws: keep the pool bounded
            pool.clear()
        a = pool[(name, shape, dtype)] = _aligned(shape, dtype)
    return a


def _to_device(a: np.ndarray, device) -> torch.Tensor:
    t = torch.from_numpy(a)
    return t if getattr(device, "type", device) == "cpu" else t.to(device)


def _span(start: int, n: int) -> tuple[int, int, int]:
    """(first block, number of blocks, lead words) of words start .. start+n-1."""
    b0 = start // 4
    return b0, (start + n - 1) // 4 + 1 - b0, start - 4 * b0


def _put(o: np.ndarray, cols) -> None:
    """o[:, j] = row (cast) for (j, row) in cols; rows are uint64 < 2**63, read as int64 (a faster cast)."""
    for j, row in cols:
        o[:, j] = row.view(np.int64)


_Z24, _Z53, _Z6 = _z(0xFFFFFF00), _z(0xFFFFFFE0), _z(0xFFFFFFC0)  # keep 24 bits / 27 bits / 26 bits of a word
_Z27, _ONE24, _ONE53 = _z(27), _z(1 << 8), _z(1 << 6)
_F2M32, _F2M59 = np.array(2.0**-32, dtype=np.float32), np.array(2.0**-59)
_Z24_32, _ONE24_32, _Z53_32, _Z6_32 = (np.array(v, np.uint32) for v in (0xFFFFFF00, 1 << 8, 0xFFFFFFE0, 0xFFFFFFC0))


def words(seed: int, subsequence: int, start: int, n: int, device="cpu") -> torch.Tensor:
    """Words start .. start+n-1 of the stream as an int64 tensor (n,) of uint32 values."""
    if n <= 0:
        return torch.empty(0, dtype=torch.int64, device=device)
    b0, nb, lead = _span(start, n)
    out = _out((nb, 4), _U64)

    def sink(s, m, lanes, prods):
        _and(prods, _ZMASK, prods)
        o = out[s:s + m]
        o[:, 0], o[:, 1], o[:, 2], o[:, 3] = lanes[0], prods[1], lanes[1], prods[0]

    _blocks(seed, subsequence, b0, nb, sink)
    return _to_device(out.reshape(-1)[lead:lead + n].view(np.int64), device)


# ---- read-ahead for small sequential draws ----------------------------------------------------------------------
#
# A small draw is bound by the ~45 ufunc calls of one pass through the rounds, whatever its width (below ~1000
# blocks). A run of small draws from one generator reads consecutive words, so the second draw in a row that
# starts where the previous one ended computes blocks ahead into this thread's buffer and the next draws read
# their words from it: the rounds' fixed cost is paid once per refill. Refills in a row double, from _AHEAD_MAX
# to _AHEAD blocks, so a pattern of two small draws after each jump computes little it does not use. The buffer
# holds words of the stream, a pure function of (seed, subsequence, word index): it is keyed by (seed,
# subsequence) and dropped when either changes (a reseed), so it never serves words of another stream.
_AHEAD = _CHUNK  # largest refill (256 KiB of words): one bulk chunk, the widest at the lowest cost per block
_AHEAD_MAX = 1024  # draws of at most this many blocks may use the buffer (larger ones are proportional); first refill


class _Ahead:
    """One thread's read-ahead: words lo .. lo+n-1 of stream ``key`` in ``buf`` (n = 0: none); ``end`` is the
    word after the thread's last small draw of that stream."""

    __slots__ = ("key", "lo", "n", "buf", "end", "size")

    def __init__(self):
        self.key, self.lo, self.n, self.buf, self.end, self.size = None, 0, 0, None, -1, _AHEAD_MAX


def _fill_words(seed: int, subsequence: int, b0: int, nb: int, reuse=None) -> np.ndarray:
    """Words of blocks b0 .. b0+nb-1 as a flat uint32 array, written into ``reuse`` (4 nb words) if given."""
    buf = np.empty((nb, 4), np.uint32) if reuse is None else reuse.reshape(nb, 4)

    def sink(s, m, lanes, prods):
        o = buf[s:s + m]  # the uint64 -> uint32 assignment keeps the low word: the products' junk goes
        o[:, 0], o[:, 1], o[:, 2], o[:, 3] = lanes[0], prods[1], lanes[1], prods[0]

    _blocks(seed, subsequence, b0, nb, sink)
    return buf.reshape(-1)


def _ahead_words(seed: int, subsequence: int, start: int, nwords: int):
    """uint32 words start .. start+nwords-1 from this thread's read-ahead buffer, or None: compute them directly.

    The result is a view of the buffer, valid until this thread's next draw: convert it, never return it.
    """
    st = _local.__dict__.get("ahead")
    if st is None:
        st = _local.ahead = _Ahead()
    key = (seed, subsequence)
    end = start + nwords
    if st.key == key:
        if st.lo <= start and end <= st.lo + st.n:
            st.end = end
            return st.buf[start - st.lo:end - st.lo]
        if start == st.end:  # the second draw in a row: read ahead from here
            b0 = start // 4
            nb = min(max(st.size, (end - 1) // 4 + 1 - b0), (1 << 64) - b0)  # never past the counter's last block
            st.n = 0  # the buffer is rewritten: nothing in it is valid until the fill is complete
            buf = st.buf if st.buf is not None and st.buf.size == 4 * nb else None
            st.buf = _fill_words(seed, subsequence, b0, nb, buf)
            st.lo, st.n, st.end, st.size = 4 * b0, 4 * nb, end, min(2 * st.size, _AHEAD)
            return st.buf[start - st.lo:end - st.lo]
    # another stream (a reseed: its words are never served again) or a jump: start over
    st.key, st.n, st.end, st.size = key, 0, end, _AHEAD_MAX
    return None


def uniform32(seed: int, subsequence: int, start: int, n: int, device="cpu", open_low=False) -> torch.Tensor:
    """``_unit(words(...), float32, open_low)`` fused: per chunk, in cache, no word array.

    Each word keeps its top 24 bits in place (``w & 0xFFFFFF00`` = ``(w >> 8) 2**8``, plus ``2**8`` for
    ``(0, 1]``), is cast to float32 (exact: at most 24 significant bits) and scaled by ``2**-32`` (exact):
    ``m 2**-24`` or ``(m + 1) 2**-24``, bit for bit the two-step map.
    """
    if n <= 0:
        return torch.empty(0, dtype=torch.float32, device=device)
    if _host._JIT is not None:  # one compiled loop: the words and the map fused, no read-ahead needed
        out = _out((n,), np.float32)
        _philox_jit.uniform32(_jit_keys(seed), _U64(subsequence & MASK), _U64((subsequence >> 32) & MASK),
                              _U64(start // 4), start % 4, n, bool(open_low), out)
        return _to_device(out, device)
    b0, nb, lead = _span(start, n)
    if nb <= _AHEAD_MAX:
        w = _ahead_words(seed, subsequence, start, n)
        if w is not None:  # the same map on the buffered words: keep 24 bits (+ 2**8), cast (exact), scale
            u = _and(w, _Z24_32)
            if open_low:
                _add(u, _ONE24_32, u)
            return _to_device(_mul(u, _F2M32, dtype=np.float32, casting="unsafe"), device)
    out = _out((nb, 4), np.float32)

    def sink(s, m, lanes, prods):
        _and(prods, _Z24, prods)
        if open_low:
            _add(lanes, _ONE24, lanes)
            _add(prods, _ONE24, prods)
        o = out[s:s + m]
        _put(o, ((0, lanes[0]), (1, prods[1]), (2, lanes[1]), (3, prods[0])))
        _mul(o, _F2M32, o)

    _blocks(seed, subsequence, b0, nb, sink, last_mask=0xFFFFFF00, kind="uniform32")
    return _to_device(out.reshape(-1)[lead:lead + n], device)


def _m53_pairs(lanes, prods) -> None:
    """In place: lanes[r] = m53 << 6 of the pairs (x0, x1), (x2, x3), from lanes = (x0, x2) & 0xFFFFFFE0.

    m53 = (w_hi >> 5) 2**26 + (w_lo >> 6); shifted left by 6 it is ((w_hi >> 5) << 32) | (w_lo & ~63):
    bits 6 .. 58, exact in float64.
    """
    _and(prods, _Z6, prods)
    np.left_shift(lanes, _Z27, lanes)
    np.bitwise_or(lanes[0], prods[1], lanes[0])
    np.bitwise_or(lanes[1], prods[0], lanes[1])


def uniform64(seed: int, subsequence: int, start: int, n: int, device="cpu", open_low=False) -> torch.Tensor:
    """``_unit(words(start, 2 n), float64, open_low)``, mapped per chunk in cache; exact.

    m53 << 6 = ((w_hi & ~31) << 27) | (w_lo & ~63) (bits 6 .. 58, exact in float64), one cast and one
    power-of-two scale 2**-59. An even ``start`` pairs lanes (0, 1) and (2, 3) of each block; an odd one
    (1, 2) and (3, 0 of the next block), from chunks that carry their next block.
    """
    if n <= 0:
        return torch.empty(0, dtype=torch.float64, device=device)
    if _host._JIT is not None:
        out = _out((n,), np.float64)
        _philox_jit.uniform64(_jit_keys(seed), _U64(subsequence & MASK), _U64((subsequence >> 32) & MASK),
                              _U64(start // 4), start % 4, n, bool(open_low), out)
        return _to_device(out, device)
    if n <= 2 * _AHEAD_MAX:
        w = _ahead_words(seed, subsequence, start, 2 * n)
        if w is not None:  # the same map on buffered word pairs
            w = w.reshape(n, 2)
            v = _and(w[:, 0], _Z53_32, dtype=_U64)
            np.left_shift(v, _Z27, v)
            np.bitwise_or(v, _and(w[:, 1], _Z6_32), v)
            if open_low:
                _add(v, _ONE53, v)
            return _to_device(_mul(v.view(np.int64), _F2M59), device)
    b0, r = start // 4, start % 4
    lead = r // 2  # pairs of block b0 before the draw's first
    nb = (n + lead + 1) // 2
    out = _out((nb, 2), np.float64)
    odd = r % 2

    def sink(s, m, lanes, prods):
        if odd:  # pairs (x1, x2), (x3, x0'): the products are the high words
            _and(prods, _Z53, prods)
            np.left_shift(prods, _Z27, prods)
            v0, v1 = prods[1, :m], prods[0, :m]
            np.bitwise_or(v0, lanes[1, :m], v0)
            np.bitwise_or(v1, lanes[0, 1:m + 1], v1)
        else:
            _m53_pairs(lanes, prods)
            v0, v1 = lanes[0], lanes[1]
        if open_low:
            _add(v0, _ONE53, v0)
            _add(v1, _ONE53, v1)
        o = out[s:s + m]
        _put(o, ((0, v0), (1, v1)))
        _mul(o, _F2M59, o)

    _blocks(seed, subsequence, b0, nb, sink, last_mask=0xFFFFFFC0 if odd else 0xFFFFFFE0, extra=odd, kind="uniform64")
    return _to_device(out.reshape(-1)[lead:lead + n], device)


# ---- Box-Muller on NumPy: the one map of every normal (chunked stream, word fallback, keyed samplers) -------------
_F32 = {k: np.array(v, dtype=np.float32) for k, v in
        (("2m32", 2.0**-32), ("-2", -2.0), ("bias", R_BIAS), ("scale", S_ANGLE * 2.0**-8), ("c", C_PI))}
_F64 = {k: np.array(v) for k, v in
        (("2m59", 2.0**-59), ("-2", -2.0), ("bias", 0.0), ("scale", 2.0 * math.pi * 2.0**-59), ("c", math.pi))}
_QUARTER32, _QUARTER64, _TOP64 = _z(1 << 30), _z(1 << 57), _z((1 << 59) - 1)


class _OneTorchThread:
    """``with _OneTorchThread():`` -- torch runs on one thread inside (restored on exit; nestable, thread-safe).

    torch's float64 sin goes to MKL's vector math, which wakes its own thread team even for a few thousand
    values, and a descheduled team member stalls the call (docs/perf-notes.md#design-trnrand-host); NumPy
    and torch.randn, the peers, are single-threaded. The first thread in saves the count, the last one out
    restores it, so concurrent draws never leave torch at one thread. Elementwise results do not depend on
    the thread count (checked bit for bit).
    """

    _lock = threading.Lock()
    _depth = 0
    _saved = 1

    def __enter__(self):
        cls = _OneTorchThread
        with cls._lock:
            if cls._depth == 0:
                cls._saved = torch.get_num_threads()
                if cls._saved != 1:
                    torch.set_num_threads(1)
            cls._depth += 1
        return self

    def __exit__(self, *exc):
        cls = _OneTorchThread
        with cls._lock:
            cls._depth -= 1
            if cls._depth == 0 and cls._saved != 1:
                torch.set_num_threads(cls._saved)
        return False


def _box_muller_np(uw: np.ndarray, aw: np.ndarray, z0, z1, wide: bool) -> None:
    """Normals of prepared pairs into the rows of z0 and z1 (any strides); uw, aw (k, n) uint64 are consumed.

    float32: uw = the u1 word & 0xFFFFFF00 (= (w >> 8) 2**8), aw = the angle word & 0xFFFFFF00 (= m 2**8):
    u1 = (uw + 2**8) 2**-32 = ((w >> 8) + 1) 2**-24, angle m S - C, computed as (m 2**8)(S 2**-8) - C (the
    same float32 product: a power-of-two factor moves between the operands exactly), quarter turn
    (m 2**8 + 2**30) mod 2**32. float64: uw, aw = m53 << 6 of the two word pairs; u1 = (uw + 2**6) 2**-59,
    angle (m53 2**6)(2 pi 2**-59) - pi, quarter turn (aw + 2**57) mod 2**59. Then r = sqrt(-2 log u1 +
    bias) and z = r sin(angle), z' = r sin(angle'), each step one float op of the dtype (the kernel's order).
    """
    k, n = uw.shape
    ft, c = (np.float64, _F64) if wide else (np.float32, _F32)
    r = _scratch("bm_r", (k, n), ft)
    _add(uw, _ONE53 if wide else _ONE24, uw)
    r[...] = uw.view(np.int64)
    _mul(r, c["2m59" if wide else "2m32"], r)
    np.log(r, r)
    _mul(r, c["-2"], r)
    _add(r, c["bias"], r)
    np.sqrt(r, r)
    ang = _scratch("bm_a", (2, k, n), ft)
    ang[0] = aw.view(np.int64)
    _add(aw, _QUARTER64 if wide else _QUARTER32, aw)
    _and(aw, _TOP64 if wide else _ZMASK, aw)
    ang[1] = aw.view(np.int64)
    _mul(ang, c["scale"], ang)
    np.subtract(ang, c["c"], ang)
    if wide:  # each width's sin on the library that is faster for it (docs/perf-notes.md#design-trnrand-host)
        t = torch.from_numpy(ang)
        if torch.get_num_threads() == 1:
            torch.sin(t, out=t)
        else:
            with _OneTorchThread():
                torch.sin(t, out=t)
    else:
        np.sin(ang, ang)
    for i in range(k):
        _mul(ang[0, i], r[i], z0[i])
        _mul(ang[1, i], r[i], z1[i])


def normals(seed: int, subsequence: int, start: int, npairs: int, dtype, device="cpu") -> torch.Tensor:
    """Flat normals (2 npairs,) of the Box-Muller pairs whose words start at ``start``, per chunk in cache.

    A float64 pair is 4 words (u1 from the first two, the angle from the last two), a float32 pair 2; pairs
    that straddle blocks (a start that is not a multiple of 4, resp. odd) take their next block from chunks
    that carry it. ``distributions._box_muller`` is the same map from a word array.
    """
    wide = dtype == torch.float64
    if npairs <= 0:
        return torch.empty(0, dtype=dtype, device=device)
    if _host._JIT is not None and not wide:  # compiled words and float32 steps around NumPy's log and sin
        out = _out((2 * npairs,), np.float32)  # the angles, then their sines, then the normals, in place
        u = _jit_radii(npairs)
        _philox_jit.normal32_prep(_jit_keys(seed), _U64(subsequence & MASK), _U64((subsequence >> 32) & MASK),
                                  _U64(start // 4), start % 4, npairs, _F32["scale"][()], _F32["c"][()], u, out)
        np.log(u, u)
        np.sin(out, out)
        _philox_jit.normal32_finish(u, _F32["-2"][()], _F32["bias"][()], out.reshape(npairs, 2))
        return _to_device(out, device)
    b0, r = start // 4, start % 4
    per = 1 if wide else 2  # pairs per block
    lead = r // (4 // per)  # pairs of block b0 before the draw's first
    nb = (npairs + lead + per - 1) // per
    out = _out((nb, 2 * per), np.float64 if wide else np.float32)
    extra = int(r % (4 // per) != 0)

    def word(lanes, prods, j, m):
        """Lane j (0 .. 7: 4 .. 7 in the next block) of the chunk's m blocks."""
        src = (lanes[0], prods[1], lanes[1], prods[0])[j % 4]
        return src[j // 4:j // 4 + m]

    def sink(s, m, lanes, prods):
        o = out[s:s + m]
        if wide:
            # lanes (x0, x2) serve as the high words of both 53-bit fields when r is even, else as the low words
            hi, lo = (lanes, prods) if r % 2 == 0 else (prods, lanes)
            _and(prods, _Z6 if r % 2 == 0 else _Z53, prods)
            np.left_shift(hi, _Z27, hi)
            u, a = _scratch("bm_u", (1, m), _U64), _scratch("bm_w", (1, m), _U64)
            np.bitwise_or(word(lanes, prods, r, m), word(lanes, prods, r + 1, m), u[0])
            np.bitwise_or(word(lanes, prods, r + 2, m), word(lanes, prods, r + 3, m), a[0])
            _box_muller_np(u, a, (o[:, 0],), (o[:, 1],), True)
        else:
            _and(prods, _Z24, prods)
            if not extra:  # pairs (x0, x1) -> columns 0, 1; pair (x2, x3) -> columns 2, 3
                _box_muller_np(lanes, prods[::-1], (o[:, 0], o[:, 2]), (o[:, 1], o[:, 3]), False)
            else:  # pairs (x1, x2) and (x3, x0')
                a = _scratch("bm_w", (2, m), _U64)
                a[0], a[1] = lanes[1, :m], lanes[0, 1:m + 1]
                _box_muller_np(prods[::-1, :m], a, (o[:, 0], o[:, 2]), (o[:, 1], o[:, 3]), False)

    last = 0xFFFFFF00 if not wide else (0xFFFFFFE0 if r % 2 == 0 else 0xFFFFFFC0)
    _blocks(seed, subsequence, b0, nb, sink, last_mask=last, extra=extra, kind="normal64" if wide else "normal32")
    return _to_device(out.reshape(-1)[2 * lead:2 * (lead + npairs)], device)


# ---- words -> floats (exact: every step is an integer op or a power-of-two scale) -------------------------------
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
