"""Quasi-random (low-discrepancy) point sets: Sobol', Halton, Latin hypercube."""

from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
import torch

from trnsci import validate
from trnsci.dispatch import Op

from . import _joe_kuo, _philox
from .distributions import THRESHOLD
from .generator import Generator, _resolve, key_tensor, key_values

SOBOL_BITS = 30  # as scipy.stats.qmc.Sobol's default: points are k * 2**-30
SOBOL_MAX_DIMS = 21201  # Joe-Kuo new-joe-kuo-6.21201


# ---- Ops (threshold: see trnrand.distributions.THRESHOLD; a guess, no hardware to calibrate) -------
# Each is also a torch operator (torch.ops.trnrand.sobol, ...; no derivative: outputs marked
# non-differentiable). Points are (n, dims) row-major on the CPU; latin_hypercube's generator crosses as a
# key tensor (trnrand.generator.key_tensor) and its orthogonal array as a tensor and its prime.


def _lhs_to_operator(seed, subsequence, base, n, d, oa, dtype):
    table, p = oa if oa is not None else (None, 0)
    return key_tensor(seed, subsequence, base), n, d, table, p, dtype


def _lhs_from_operator(key, n, d, table, p, dtype):
    return (*key_values(key), n, d, None if table is None else (table, p), dtype)


SOBOL = Op("trnrand.sobol", "samples", THRESHOLD, size=lambda V, shift, skip, n, dtype: float(n * V.shape[0]),
           dtype=lambda V, shift, skip, n, dtype: dtype,
           describe=lambda V, shift, skip, n, dtype: f"{n} points x {V.shape[0]} dims from point {skip}",
           doc="Gray-code Sobol' points; samples = points x dims",
           schema="(Tensor V, Tensor shift, int skip, int n, ScalarType dtype) -> Tensor",
           fake=lambda V, shift, skip, n, dtype: torch.empty(n, V.shape[0], dtype=dtype, device=V.device),
           differentiable=False)
HALTON = Op("trnrand.halton", "samples", THRESHOLD, size=lambda b, p, skip, n, dtype: float(n * b.numel()),
            dtype=lambda b, p, skip, n, dtype: dtype, doc="radical inverses; samples = points x dims",
            schema="(Tensor bases, Tensor? perms, int skip, int n, ScalarType dtype) -> Tensor",
            fake=lambda b, p, skip, n, dtype: torch.empty(n, b.numel(), dtype=dtype, device=b.device),
            differentiable=False)
LATIN_HYPERCUBE = Op("trnrand.latin_hypercube", "samples", THRESHOLD,
                     size=lambda s, q, base, n, d, oa, dtype: float(n * d),
                     dtype=lambda s, q, base, n, d, oa, dtype: dtype,
                     doc="random permutations per dimension (strength 1) or an orthogonal array (2)",
                     schema="(Tensor key, int n, int d, Tensor? oa, int p, ScalarType dtype) -> Tensor",
                     fake=lambda key, n, d, oa, p, dtype: torch.empty(n, d, dtype=dtype, device=key.device),
                     to_operator=_lhs_to_operator, from_operator=_lhs_from_operator, differentiable=False)


def _fdtype(dtype, where):
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{where}: dtype must be a torch.dtype, got {type(dtype).__name__}")
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"{where}: dtype must be float32 or float64, got {str(dtype).replace('torch.', '')}")
    return dtype


def _seed_generator(seed, where) -> Generator:
    """Scrambling randomness: ``seed`` may be None (OS entropy), an int, or a trnrand.Generator (advanced)."""
    if isinstance(seed, Generator):
        return seed
    from .generator import _u64

    return Generator(seed=None if seed is None else _u64(seed, "seed", where), subsequence=0x5EED)


@functools.lru_cache(maxsize=32)
def _direction_numbers(n_dims: int) -> np.ndarray:
    """V (n_dims, 30) int64: V[d, j] = m_{d,j} << (29 - j) from Joe-Kuo's primitive polynomials and initial m.

    Recurrence (Bratley-Fox): with s = deg p_d and p_d = x^s + a_1 x^(s-1) + ... + a_(s-1) x + 1,
    V_j = V_(j-s) ^ (V_(j-s) >> s) ^ a_1 V_(j-1) ^ ... ^ a_(s-1) V_(j-s+1) for j >= s.
    Dimension 0 is the van der Corput sequence (V_j = 2**(29-j)).
    """
    poly, vinit = _joe_kuo.table(n_dims)
    B = SOBOL_BITS
    Vn = np.zeros((n_dims, B), dtype=np.int64)
    s = np.array([int(p).bit_length() - 1 for p in poly], dtype=np.int64)
    s[0] = 0
    shifts = B - 1 - np.arange(B)
    rows = np.arange(n_dims)
    for j in range(B):
        init = j < s
        val = np.zeros(n_dims, dtype=np.int64)
        if j < vinit.shape[1]:
            val = np.where(init, vinit[:, j] << shifts[j], 0)
        rec = ~init & (s > 0)
        if rec.any():
            js = np.clip(j - s, 0, B - 1)
            base = Vn[rows, js]
            r = base ^ (base >> s)
            for k in range(1, int(s.max())):
                ak = (poly >> np.maximum(s - k, 0)) & 1
                use = rec & (k < s) & (ak == 1)
                r = np.where(use, r ^ Vn[rows, max(j - k, 0)], r)
            val = np.where(rec, r, val)
        Vn[:, j] = val
    Vn[0] = 1 << shifts
    return Vn


def _index_weights(V: np.ndarray) -> np.ndarray:
    """W (n_dims, 30) with x_i = XOR over the set bits k of i (plain binary) of W[:, k].

    x_i = XOR_b bit_b(gray(i)) V_b and gray(i) = i ^ (i >> 1) is linear over GF(2): bit k of i sets
    bits k and k - 1 of gray(i), so W_k = V_k ^ V_(k-1) (W_0 = V_0).
    """
    W = V.copy()
    W[:, 1:] ^= V[:, :-1]
    return W


def _doubling(W: np.ndarray, L: int) -> np.ndarray:
    """x_c for c = 0 .. 2**L - 1 as (2**L, n_dims): x_(c + 2**j) = x_c ^ W_j for c < 2**j (L array calls)."""
    low = np.zeros((1 << L, W.shape[0]), dtype=W.dtype)
    for j in range(L):
        np.bitwise_xor(low[: 1 << j], W[:, j], out=low[1 << j: 2 << j])
    return low


def _split(start: int, count: int) -> tuple[int, int, int]:
    """(L, a0, number of a) of the split i = a 2**L + c (c < 2**L) of i = start .. start+count-1, with
    L about half the bits of count: both tables then have ~sqrt(count) rows."""
    L = max(1, (count.bit_length() + 1) // 2)
    a0 = start >> L
    return L, a0, ((start + count - 1) >> L) - a0 + 1


def _index_rows(W: np.ndarray, start: int, count: int) -> np.ndarray:
    """x_i for i = start .. start+count-1 as (count, n_dims), for the linear map x_i = XOR_k bit_k(i) W[:, k].

    x_i = x_(a 2**L) ^ x_c (see ``_split``); the x_(a 2**L) are the same problem for W shifted by L,
    so the recursion is a few levels of small array calls.
    """
    d = W.shape[0]
    if count <= 2:
        rows = np.zeros((count, d), dtype=W.dtype)
        for r in range(count):
            bits = [k for k in range((start + r).bit_length()) if (start + r) >> k & 1]
            if bits:
                rows[r] = np.bitwise_xor.reduce(W[:, bits], axis=1)
        return rows
    L, a0, na = _split(start, count)
    X = (_index_rows(W[:, L:], a0, na)[:, None, :] ^ _doubling(W, L)[None, :, :]).reshape(-1, d)
    off = start - (a0 << L)
    return X[off: off + count]


_ONE_BITS = 0x3FF0000000000000  # float64 1.0: with a 30-bit k in bits 22 .. 51 the pattern is 1 + k 2**-30


_SERIAL = 32767  # elements per torch call: below ATen's grain size (32768) an op runs on the calling thread only


def _xor_serial(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """(rows, 2**L, n_dims) = high[:, None, :] ^ low[None, :, :], by torch calls on the calling thread only.

    Each call stays below ATen's grain size, so no OpenMP team is woken and no call waits at a barrier
    for a descheduled thread; the extra calls cost a few percent of the pass
    (docs/perf-notes.md#design-trnrand-host).
    """
    na, c, d = high.shape[0], low.shape[0], low.shape[1]
    out = np.empty((na, c, d), dtype=high.dtype)
    th, tl, to = torch.from_numpy(high), torch.from_numpy(low), torch.from_numpy(out)
    if c * d <= _SERIAL:
        step = _SERIAL // (c * d)
        for a in range(0, na, step):
            torch.bitwise_xor(th[a:a + step, None, :], tl[None], out=to[a:a + step])
    else:
        step = max(1, _SERIAL // d)  # n_dims <= 21201 < the grain: a slice of rows of low per call
        for a in range(na):
            for c0 in range(0, c, step):
                torch.bitwise_xor(th[a], tl[c0:c0 + step], out=to[a, c0:c0 + step])
    return out


@SOBOL.lowering("torch")
def _sobol_torch(V: torch.Tensor, shift: torch.Tensor, skip: int, n: int, dtype) -> torch.Tensor:
    """Sobol' integers in Gray-code order: x_i = XOR over set bits b of gray(i) of V[:, b], then ^ shift.

    V: (n_dims, 30) int64 direction numbers (already scrambled when scrambling); shift: (n_dims,) int64.
    x_i is linear in i over GF(2) (``_index_weights``): split i = a 2**L + c (c < 2**L, L about half the
    bits of n), x_i = x_(a 2**L) ^ x_c, so the points are one broadcast XOR of a ``high`` table (shift
    folded in) with a ``low`` table, both of ~sqrt(n) rows (Gray-code order as SciPy, without its loop
    per point). float64: the tables hold the bit patterns of 1 + x 2**-30 (high: exponent and x << 22,
    low: x << 22), so the XOR writes the float64 1 + x_i 2**-30 and one subtraction of 1.0 leaves
    x_i 2**-30 -- exact (31 significant bits; Sterbenz), no integer-to-float cast. float32: the tables
    are pre-shifted to the top 24 bits (the shift distributes over XOR) and one cast-and-scale follows.
    The broadcast XOR runs in torch (``_xor_serial``): its kernel vectorizes this (rows, 2**L, n_dims)
    broadcast, where NumPy's loops over the short n_dims axis (docs/perf-notes.md#design-trnrand-host).
    """
    d = V.shape[0]
    if n == 0:
        return torch.empty((0, d), dtype=dtype)
    W = _index_weights(V.numpy())
    L, a0, na = _split(skip, n)
    high = _index_rows(W[:, L:], a0, na) ^ shift.numpy()
    low = _doubling(W, L)
    off = skip - (a0 << L)
    if dtype == torch.float64:
        high = (high << 22) | _ONE_BITS
        low <<= 22
        out = _xor_serial(high, low)
        x = out.view(np.float64).reshape(-1, d)[off:off + n]
        np.subtract(x, 1.0, out=x)
        return torch.from_numpy(x)
    high >>= SOBOL_BITS - 24
    low >>= SOBOL_BITS - 24
    m = _xor_serial(high.astype(np.int32), low.astype(np.int32)).reshape(-1, d)[off:off + n]
    return torch.from_numpy(np.multiply(m, np.float32(2.0**-24), dtype=np.float32))


def _sobol_floats(X: torch.Tensor, dtype) -> torch.Tensor:
    """30-bit Sobol' integers -> floats, exactly: X 2**-30 (float64) or (X >> 6) 2**-24 (float32)."""
    if dtype == torch.float64:
        return X.to(torch.float64).mul_(2.0**-SOBOL_BITS)
    return (X >> (SOBOL_BITS - 24)).to(torch.float32).mul_(2.0**-24)


def _lms_scramble(Vn: np.ndarray, gen: Generator) -> tuple[np.ndarray, np.ndarray]:
    """Linear matrix scramble (random unit lower-triangular L_d over GF(2), MSB first) + digital shift."""
    d, B = Vn.shape
    w = gen._words(gen._reserve(d * B * B + d), d * B * B + d).numpy()
    L = np.tril((w[: d * B * B] >> 31).reshape(d, B, B))
    L[:, np.arange(B), np.arange(B)] = 1
    weights = (1 << (B - 1 - np.arange(B))).astype(np.int64)  # bit k, MSB first
    if hasattr(np, "bitwise_count"):  # NumPy >= 2: new bit p of V[d, j] = parity(row p of L_d & V[d, j])
        rows = (L.astype(np.int64) * weights).sum(-1)  # (d, p): row p of L_d as a B-bit mask
        newbits = np.bitwise_count(rows[:, None, :] & Vn[:, :, None]) & 1  # (d, j, p)
    else:
        bits = (Vn[:, :, None] >> (B - 1 - np.arange(B))[None, None, :]) & 1  # (d, j, bit MSB-first)
        newbits = np.einsum("dpk,djk->djp", L, bits) & 1
    Vs = (newbits.astype(np.int64) * weights).sum(-1)
    shift = w[d * B * B :] >> (32 - B)
    return Vs.astype(np.int64), shift.astype(np.int64)


def sobol(n_points, n_dims, seed=None, scramble=True, dtype=torch.float32, skip=0):
    """Sobol' points in [0, 1)^d with Joe-Kuo direction numbers (up to 21201 dimensions).

    Point ``i`` (``i = skip .. skip + n_points - 1``) is
    ``x_i = XOR_b bit_b(gray(i)) V_b`` with ``gray(i) = i ^ (i >> 1)`` --
    the Gray-code order of ``scipy.stats.qmc.Sobol``, so unscrambled
    float64 output equals ``Sobol(d, scramble=False).random(n)`` bit for
    bit. Values are 30-bit: ``k * 2**-30`` in float64; float32 keeps the top
    24 bits (truncated, so never rounded up to 1.0).

    Parameters
    ----------
    n_points : int
        >= 0; ``skip + n_points <= 2**30``.
    n_dims : int
        1 .. 21201.
    seed : int, trnrand.Generator or None
        Scrambling randomness (None: from the OS).
    scramble : bool
        Linear matrix scramble (a random unit lower-triangular binary
        matrix per dimension) + digital shift, as SciPy does, drawn from a
        trnrand.Generator(seed) -- reproducible, not SciPy's numbers.
    dtype : torch.float32 or torch.float64
    skip : int
        Points to skip (0 starts at the origin when unscrambled).

    Returns
    -------
    torch.Tensor of shape (n_points, n_dims)

    Raises
    ------
    ValueError
        n_dims outside 1 .. 21201, negative n_points/skip, more than 2**30 points.

    Examples
    --------
    >>> import trnrand
    >>> trnrand.sobol(4, 2, scramble=False, dtype=torch.float64).tolist()
    [[0.0, 0.0], [0.5, 0.5], [0.75, 0.25], [0.25, 0.75]]
    """
    where = "sobol"
    n = validate.integer(n_points, "n_points", where, minimum=0)
    d = validate.integer(n_dims, "n_dims", where, minimum=1)
    if d > SOBOL_MAX_DIMS:
        raise ValueError(f"{where}: n_dims must be <= {SOBOL_MAX_DIMS} (the Joe-Kuo table), got {d}")
    skip = validate.integer(skip, "skip", where, minimum=0)
    if skip + n > 1 << SOBOL_BITS:
        raise ValueError(f"{where}: skip + n_points must be <= 2**{SOBOL_BITS}, got {skip + n}")
    if not isinstance(scramble, bool):
        raise TypeError(f"{where}: scramble must be a bool, got {type(scramble).__name__}")
    dtype = _fdtype(dtype, where)
    if seed is not None and not isinstance(seed, Generator):
        seed = validate.integer(seed, "seed", where, minimum=0)
    Vn = _direction_numbers(d)
    shift = np.zeros(d, dtype=np.int64)
    gen = _seed_generator(seed, where) if scramble else None
    # a planned or failing call leaves a caller's Generator as it was
    with gen._draw() if gen is not None else contextlib.nullcontext():
        if scramble:
            Vn, shift = _lms_scramble(Vn, gen)
        return SOBOL(torch.from_numpy(Vn), torch.from_numpy(shift), skip, n, dtype)


def _first_primes(n: int) -> list[int]:
    limit = max(16, int(n * (math.log(n + 1) + math.log(math.log(n + 3)) + 3)))
    sieve = np.ones(limit, dtype=bool)
    sieve[:2] = False
    for p in range(2, int(limit**0.5) + 1):
        if sieve[p]:
            sieve[p * p :: p] = False
    return np.flatnonzero(sieve)[:n].tolist()


def _halton_levels(base: int, perms, skip: int, n: int) -> int:
    """Digit levels every point runs through: unscrambled, the digits of the largest index (a point with
    fewer adds 0.0, which changes nothing); scrambled, levels while b2r >= 2**-54 (permuted zeros count)."""
    if perms is None:
        last, lev = skip + n - 1, 0
        while last:
            last //= base
            lev += 1
        return lev
    b2r, lev = 1.0 / base, 0
    while lev < perms.shape[0]:
        lev += 1
        b2r /= base
        if b2r < 2.0**-54:
            break
    return lev


def _radical_inverse(base: int, perms, levels: int, start: int, count: int) -> np.ndarray:
    """x_i for i = start .. start+count-1 (float64), accumulated as SciPy does: x = 0; per level, least
    significant digit first, x += digit * b2r; b2r /= base (perms: None or (levels, base) int64 digit maps).

    Split i = a base**K + c (c < base**K, base**K about 2 sqrt(count)): after K levels every point holds
    the same partial sum as point c -- the table, this function for the first base**K indices -- and the
    later digits are a's, constant over each block of base**K points. So each later level is one
    broadcast add of one term per block, and the sums keep SciPy's order and rounding (bit-identical),
    where the per-point loop costs a division, a multiply and an add per point and level.
    """
    K, bK = 0, 1
    while K < levels and bK * base <= 2 * math.isqrt(count):
        K, bK = K + 1, bK * base
    if count <= 256 or K == 0:
        q = np.arange(start, start + count, dtype=np.int64)
        x = np.zeros(count)
        b2r = 1.0 / base
        for lev in range(levels):
            q, dig = np.divmod(q, base)
            x += (dig if perms is None else perms[lev][dig]) * b2r
            b2r /= base
        return x
    table = _radical_inverse(base, perms, K, 0, bK)
    a0 = start // bK
    q = np.arange(a0, (start + count - 1) // bK + 1, dtype=np.int64)
    X = np.empty((q.size, bK))
    X[...] = table
    b2r = 1.0 / base
    for _ in range(K):
        b2r /= base
    for lev in range(K, levels):
        q, dig = np.divmod(q, base)
        X += ((dig if perms is None else perms[lev][dig]) * b2r)[:, None]
        b2r /= base
    off = start - a0 * bK
    return X.reshape(-1)[off:off + count]


@HALTON.lowering("torch")
def _halton_torch(bases: torch.Tensor, perms, skip: int, n: int, dtype) -> torch.Tensor:
    """Radical inverses of i = skip .. skip+n-1 in each base, accumulated as SciPy does:
    x += digit * b2r; b2r /= base (float64, least significant digit first); see ``_radical_inverse``.

    perms: None, or a list of (levels, base) int64 digit permutations per dimension (scrambled).
    Digits are exact int64 arithmetic on tables of ~sqrt(n) entries; returns the (n, d) transpose of a
    (d, n) array.
    """
    d = bases.numel()
    x = np.zeros((d, n))
    pn = None if perms is None else perms.numpy()
    for c, base in enumerate(bases.tolist()):
        if n:
            pc = None if pn is None else pn[c]
            x[c] = _radical_inverse(base, pc, _halton_levels(base, pc, skip, n), skip, n)
    x = torch.from_numpy(x).T
    return x if dtype == torch.float64 else x.to(torch.float32).clamp_(max=1.0 - 2.0**-24)


def halton(n_points, n_dims, scramble=False, seed=None, dtype=torch.float32, skip=0):
    """Halton points: coordinate ``d`` of point ``i`` is the radical inverse of ``i`` in the d-th prime.

    Unscrambled float64 output equals ``scipy.stats.qmc.Halton(d,
    scramble=False).random(n)`` bit for bit (same summation order; point 0
    is the origin). ``scramble=True`` applies a random permutation of the
    digits at every level of every base (Owen-type digit scrambling, to
    double precision), drawn from ``trnrand.Generator(seed)``.

    Parameters
    ----------
    n_points : int
    n_dims : int
        >= 1 (Halton degrades past ~20 dimensions; prefer Sobol').
    scramble : bool
    seed : int, trnrand.Generator or None
    dtype : torch.float32 or torch.float64
    skip : int
        Index of the first point.

    Returns
    -------
    torch.Tensor of shape (n_points, n_dims)

    Examples
    --------
    >>> import trnrand
    >>> trnrand.halton(4, 2, dtype=torch.float64).tolist()
    [[0.0, 0.0], [0.5, 0.3333333333333333], [0.25, 0.6666666666666666], [0.75, 0.1111111111111111]]
    """
    where = "halton"
    n = validate.integer(n_points, "n_points", where, minimum=0)
    d = validate.integer(n_dims, "n_dims", where, minimum=1)
    if d > 10000:
        raise ValueError(f"{where}: n_dims must be <= 10000, got {d}")
    skip = validate.integer(skip, "skip", where, minimum=0)
    if skip + n > 1 << 52:
        raise ValueError(f"{where}: skip + n_points must be <= 2**52")
    if n * d > 1 << 40:
        raise ValueError(f"{where}: n_points * n_dims must be <= 2**40, got {n * d}")
    if not isinstance(scramble, bool):
        raise TypeError(f"{where}: scramble must be a bool, got {type(scramble).__name__}")
    dtype = _fdtype(dtype, where)
    if seed is not None and not isinstance(seed, Generator):
        seed = validate.integer(seed, "seed", where, minimum=0)
    bases = torch.tensor(_first_primes(d), dtype=torch.int64)
    perms = None
    g = _seed_generator(seed, where) if scramble else None
    # a planned or failing call leaves a caller's Generator as it was
    with g._draw() if g is not None else contextlib.nullcontext():
        if scramble:
            perms = _halton_perms(g, bases, d)
        return HALTON(bases, perms, skip, n, dtype)


def _halton_perms(g: Generator, bases: torch.Tensor, d: int) -> torch.Tensor:
    """Random digit permutations (d, levels, max base) for scrambled Halton."""
    maxb = int(bases.max())
    levels = max(1, math.ceil(53 * math.log(2) / math.log(2)))  # enough levels for base 2; others finish earlier
    w = g._words(g._reserve(2 * d * levels * maxb), 2 * d * levels * maxb).reshape(d, levels, maxb, 2)
    key = ((w[..., 0] >> 1) << 32) | w[..., 1]
    # digits >= base get keys after every real digit, so each row's first `base` entries permute 0..base-1
    key = torch.where(torch.arange(maxb)[None, None, :] < bases[:, None, None], key, torch.iinfo(torch.int64).max)
    return torch.argsort(key, dim=-1, stable=True)


def latin_hypercube(n_points, n_dims, dtype=torch.float32, generator=None, strength=1):
    """Latin hypercube sample in [0, 1)^d: every dimension has one point in each of the n strata [k/n, (k+1)/n).

    ``strength=1``: a random permutation of the strata per dimension and a
    uniform position inside each stratum. ``strength=2``: an orthogonal-
    array LHS (n = p**2 for a prime p, n_dims <= p + 1): additionally every
    2-D projection has exactly one point in each cell of the p x p grid.

    Parameters
    ----------
    n_points, n_dims : int
    dtype : torch.float32 or torch.float64
    generator : trnrand.Generator, optional
    strength : 1 or 2

    Returns
    -------
    torch.Tensor of shape (n_points, n_dims)

    Raises
    ------
    ValueError
        Bad sizes; strength 2 with n_points not a prime squared or n_dims > sqrt(n_points) + 1.

    Examples
    --------
    >>> import trnrand
    >>> x = trnrand.latin_hypercube(5, 3, generator=trnrand.Generator(seed=1))
    >>> sorted((x[:, 0] * 5).floor().int().tolist())
    [0, 1, 2, 3, 4]
    """
    where = "latin_hypercube"
    n = validate.integer(n_points, "n_points", where, minimum=0)
    d = validate.integer(n_dims, "n_dims", where, minimum=1)
    if n * d > 1 << 40:
        raise ValueError(f"{where}: n_points * n_dims must be <= 2**40, got {n * d}")
    dtype = _fdtype(dtype, where)
    strength = validate.integer(strength, "strength", where)
    if strength not in (1, 2):
        raise ValueError(f"{where}: strength must be 1 or 2, got {strength}")
    g = _resolve(generator, where)
    if strength == 1:
        with g._draw():
            base = g._reserve(4 * n * d)
            return LATIN_HYPERCUBE(g._seed, g._subsequence, base, n, d, None, dtype)
    p = math.isqrt(n)
    if p * p != n or p < 2 or any(p % q == 0 for q in range(2, math.isqrt(p) + 1)):
        raise ValueError(f"{where}: strength=2 needs n_points = p**2 for a prime p, got {n}")
    if d > p + 1:
        raise ValueError(f"{where}: strength=2 needs n_dims <= sqrt(n_points) + 1 = {p + 1}, got {d}")
    i = torch.arange(p).repeat_interleave(p)
    j = torch.arange(p).repeat(p)
    cols = [i, j] + [(i + k * j) % p for k in range(1, p)]
    oa = torch.stack(cols[:d], dim=1)  # (n, d) levels 0..p-1, each pair of columns an OA of strength 2
    with g._draw():
        base = g._reserve(6 * n * d)
        return LATIN_HYPERCUBE(g._seed, g._subsequence, base, n, d, (oa, p), dtype)


@LATIN_HYPERCUBE.lowering("torch")
def _lhs_torch(seed, subsequence, base, n, d, oa, dtype):
    w = _philox.words(seed, subsequence, base, 4 * n * d).reshape(n, d, 4)
    key = ((w[..., 0] >> 1) << 32) | w[..., 1]
    u = _philox._m53(w[..., 2], w[..., 3]).to(torch.float64).mul_(2.0**-53)
    if oa is None:
        strata = torch.argsort(torch.argsort(key, dim=0, stable=True), dim=0)  # rank of each key: a permutation
    else:
        levels, p = oa
        w2 = _philox.words(seed, subsequence, base + 4 * n * d, 2 * n * d).reshape(n, d, 2)
        lkey = ((w2[..., 0] >> 1) << 32) | w2[..., 1]
        # random relabelling of the p levels per column
        relabel = torch.argsort(lkey[:p, :], dim=0, stable=True)  # (p, d) a permutation per column
        lev = torch.gather(relabel, 0, levels)
        # within each level, a random order of its p points gives the sub-stratum
        o1 = torch.argsort(key, dim=0, stable=True)
        o2 = torch.argsort(torch.gather(lev, 0, o1), dim=0, stable=True)
        order = torch.gather(o1, 0, o2)  # points sorted by (level, key)
        rank = torch.argsort(order, dim=0)
        strata = rank  # level * p + position within level
    x = (strata.to(torch.float64) + u) / n
    x = x.to(dtype)
    return x.clamp_(max=torch.nextafter(torch.tensor(1.0, dtype=dtype), torch.tensor(0.0, dtype=dtype)).item())
