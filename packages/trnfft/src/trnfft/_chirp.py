"""A torch route for lengths torch.fft may be slow at: Bluestein (chirp-z) on torch.fft.

torch's CPU FFT (MKL, as the wheels are built) handles a length whose
largest prime factor ``p`` is large by an algorithm whose cost grows
with ``p``: on one 2-core x86 machine, one thread, a batch of
transforms of prime length 4099 took 1.5x SciPy's time (pocketfft), 65537
3.3x; on another the same lengths ran at par. Bluestein's identity ``jk = (j^2 + k^2 - (k - j)^2) / 2`` turns a
length-``n`` DFT into a circular convolution of length ``m >= 2n - 1``,
done with two ``torch.fft`` calls at a smooth ``m``::

    w[k]  = exp(-i pi k^2 / n)                          (the chirp)
    X[k]  = w[k] * sum_j (x[j] w[j]) conj(w[k - j])
          = w[k] * ifft_m(fft_m(x w) * fft_m(h))[k],    h = conj(w) wrapped to length m

``fft_m(h)`` is computed once per ``(n, dtype, device, direction, norm)``
in float64 (``k^2 mod 2n`` in integers, so the angle is exact before the
one rounding of ``exp``), with the ``1/m`` of the inverse and the
transform's own normalization folded in, and cached (LRU, 32 entries).

:data:`MIN_PRIME` is where it becomes a candidate route (:mod:`trnfft._host`
times it against torch.fft and scipy.fft where the code runs);
:func:`slow_length` is the test. Accuracy: the same order as a
direct FFT of length ``m`` -- measured normwise relative error against
NumPy's float64 transform 2e-7 to 3.5e-7 in complex64 and 1e-15 in
complex128 for n from 4099 to 99991, inside trnfft's stated float32 bound
``8 u log2 n`` and the float64 test bound 1e-12.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from ._engine import _resize as _fit  # crop or zero-pad to length n along d

# Bluestein is a *candidate* (trnfft._host times it against torch.fft and scipy.fft where the code runs)
# for lengths whose largest prime factor is at least this; below it the route is never timed
# (docs/perf-notes.md#design-bluestein).
MIN_PRIME = 1000


@functools.lru_cache(maxsize=1024)
def slow_length(n: int) -> bool:
    """True when ``n``'s largest prime factor is at least :data:`MIN_PRIME` (Bluestein is a candidate)."""
    if n < MIN_PRIME:
        return False
    k = n
    for p in (2, 3, 5, 7):
        while k % p == 0:
            k //= p
    f = 11
    while f * f <= k:
        while k % f == 0:
            k //= f
        if k < MIN_PRIME:
            return False
        f += 2
    return k >= MIN_PRIME


def slow(n: int) -> bool:
    """:func:`slow_length` with the common answer (``n`` below :data:`MIN_PRIME`) inline."""
    return n >= MIN_PRIME and slow_length(n)


def slow_real(n: int) -> bool:
    """:func:`slow` for the real-input/real-output transforms: odd ``n`` only (for even ``n``
    torch runs a half-length complex transform, which measured faster than this route)."""
    return n >= MIN_PRIME and n & 1 == 1 and slow_length(n)


def _smooth_length(lo: int) -> int:
    """The smallest ``2^a 3^b 5^c 7^d >= lo`` with ``a >= 3`` (lengths with few factors of 2,
    e.g. 2025 = 3^4 5^2, ran at a third of the speed of a nearby power of two)."""
    best = 1 << (lo - 1).bit_length()
    f7 = 1
    while f7 < best:
        f5 = f7
        while f5 < best:
            f3 = f5
            while f3 < best:
                m = f3 * 8
                while m < lo:
                    m *= 2
                best = min(best, m)
                f3 *= 3
            f5 *= 5
        f7 *= 7
    return best


@functools.lru_cache(maxsize=32)
def _plan(n: int, dtype: torch.dtype, device: torch.device, inverse: bool, scale: float):
    """``(m, w, H)``: convolution length, chirp (n,) and filter spectrum (m,) as ``dtype`` tensors."""
    m = _smooth_length(2 * n - 1)
    k = np.arange(n, dtype=np.int64)
    angle = (np.pi / n) * ((k * k) % (2 * n))  # exact integer reduction, then one rounding
    w = np.exp((1j if inverse else -1j) * angle)
    h = np.zeros(m, dtype=np.complex128)
    h[:n] = w.conj()
    h[m - n + 1:] = w[1:].conj()[::-1]
    H = np.fft.fft(h) * (scale / m)  # 1/m: the inverse below runs unnormalized (norm="forward")
    return m, torch.from_numpy(w).to(device=device, dtype=dtype), torch.from_numpy(H).to(device=device, dtype=dtype)


_COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128,
            torch.complex64: torch.complex64, torch.complex128: torch.complex128}


def _scale(norm: str, inverse: bool, n: int) -> float:
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "forward") != inverse else 1.0


def c2c_last(x: torch.Tensor, n: int, norm: str, inverse: bool, keep: int | None = None) -> torch.Tensor:
    """DFT of length ``n`` (``x`` already that long) along the last dim; the first ``keep`` outputs."""
    cdt = _COMPLEX[x.dtype]
    m, w, H = _plan(n, cdt, x.device, inverse, _scale(norm, inverse, n))
    y = torch.fft.fft(x * w, m)
    z = torch.fft.ifft(y.mul_(H), norm="forward")
    keep = n if keep is None else keep
    return z[..., :keep].mul_(w[:keep])


def c2c(x: torch.Tensor, n: int, d: int, norm: str, inverse: bool) -> torch.Tensor:
    """fft/ifft of length ``n`` along dim ``d`` (>= 0) by Bluestein."""
    x = _fit(x, n, d).movedim(d, -1)
    return c2c_last(x, n, norm, inverse).movedim(-1, d)


def r2c(x: torch.Tensor, n: int, d: int, norm: str) -> torch.Tensor:
    """rfft: the first ``n//2 + 1`` outputs of the complex transform of the real input."""
    x = _fit(x, n, d).movedim(d, -1)
    return c2c_last(x, n, norm, False, n // 2 + 1).movedim(-1, d)


def c2r(x: torch.Tensor, n: int, d: int, norm: str) -> torch.Tensor:
    """irfft: the Hermitian completion of the half spectrum, inverse-transformed, real part.

    As in NumPy, the input is first cropped or zero-padded to ``n//2 + 1``
    entries; the imaginary parts of ``X[0]`` (and of ``X[n/2]`` for even
    ``n``) only add imaginary terms to the result, so taking the real part
    ignores them.
    """
    half = n // 2 + 1
    x = _fit(x, half, d).movedim(d, -1)
    tail = x[..., 1:n - half + 1].flip(-1).conj()
    full = torch.cat((x, tail), -1)
    return c2c_last(full, n, norm, True).real.movedim(-1, d).contiguous()


def c2c_nd(x: torch.Tensor, s: tuple, dims: tuple, norm: str, inverse: bool) -> torch.Tensor:
    """fftn/ifftn: Bluestein along the slow axes, one torch.fft call for the others.

    The n-D normalization is the product of the per-axis ones, so each
    part applies its own.
    """
    rest_s, rest_d = [], []
    for k, d in zip(s, dims):
        if slow_length(k):
            x = c2c(x, k, d, norm, inverse)
        else:
            rest_s.append(k)
            rest_d.append(d)
    if rest_s:
        x = (torch.fft.ifftn if inverse else torch.fft.fftn)(x, rest_s, rest_d, norm)
    return x


def r2c_nd(x: torch.Tensor, s: tuple, dims: tuple, norm: str) -> torch.Tensor:
    """rfftn: the half spectrum along ``dims[-1]``, then the full transform along the others."""
    k, d = s[-1], dims[-1]
    x = r2c(x, k, d, norm) if slow_real(k) else torch.fft.rfft(x, k, d, norm)
    return c2c_nd(x, s[:-1], dims[:-1], norm, False) if len(s) > 1 else x


def c2r_nd(x: torch.Tensor, s: tuple, dims: tuple, norm: str) -> torch.Tensor:
    """irfftn: the inverse along all but ``dims[-1]``, then the real inverse along it."""
    if len(s) > 1:
        x = c2c_nd(x, s[:-1], dims[:-1], norm, True)
    k, d = s[-1], dims[-1]
    return c2r(x, k, d, norm) if slow_real(k) else torch.fft.irfft(x, k, d, norm)


def any_slow(s, real: bool = False) -> bool:
    """True when a length in ``s`` is :func:`slow` (the last one :func:`slow_real` when ``real``:
    the half-spectrum axis of rfftn/irfftn)."""
    if real and s:
        return slow_real(s[-1]) or any_slow(s[:-1])
    for k in s:
        if k >= MIN_PRIME and slow_length(k):
            return True
    return False
