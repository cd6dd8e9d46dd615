"""Float64 GEMM from exact float32 products of integer slices (the Ozaki scheme), host side.

``gemm(..., precision="fp64")`` on the kernel path (:mod:`trnblas._nki.level3`)
runs the float32 GEMM kernel on integer-valued slices of the float64
operands and adds the slice products in float64 on the host. This module
holds the host half: the slicing, the closed-form plan (slice width, slice
count, launches) and the error bound.

Slicing. Row ``i`` of ``op(A)`` is scaled by ``2^-e_i`` with ``e_i`` the
smallest exponent such that ``max_l |a_il| < 2^e_i``, so every entry of the
scaled row lies in (-1, 1); then, for ``t = 1..S``, ``R <- 2^s R``,
``I_t = round(R)``, ``R <- R - I_t``. Every step is exact in float64, the
slices are integers with ``|I_1| <= 2^s`` and ``|I_t| <= 2^(s-1)``
(``t >= 2``), and ``a_il = 2^e_i (sum_t 2^(-t s) I_t[i, l] + r_il)`` with
``|r_il| <= 2^(-S s - 1)``. Columns of ``op(B)`` are sliced the same way
(exponents ``f_j``).

Exactness on the Tensor Engine. A slice product ``I_t J_u`` has integer
entries of magnitude at most ``k 2^(2 s)``; with
``s = floor((24 - ceil(log2 k)) / 2)`` that is at most ``2^24``, so every
fp32 product and every partial sum (in any order, in PSUM or across the
host's K chunks) is an integer float32 holds exactly. The slices are passed
unscaled (integers), so no operand exponent ever meets fp32's range.

Truncation. Only the products with ``t + u <= S + 1`` run: one kernel launch
per slice ``t`` of ``A``, ``I_t @ [J_1 | ... | J_(S+1-t)]``, i.e. ``S``
launches and ``S (S + 1) / 2`` slice products. ``S`` is the smallest count
with ``S s >= 53 + ceil(log2(8 S + 16))``.

Error bound (per entry, on the float64 inputs; :func:`error_bound`)::

    |C_ij - c_ij| <= |alpha| eps(S, s) k max_l |a_il| max_l |b_lj| + 2^-52 |beta C0_ij|
    eps(S, s) = (8 S + 16) 2^(-S s) + 4 S (S + 1) 2^-53 + 2^-52

``c`` is the exact ``alpha op(A) op(B) + beta C``; the first term is the
dropped slice products and the remainders (``(2 S + 4) k 2^(-S s)`` before
scaling back, ``2^(e_i + f_j) < 4 max|a_i.| max|b_.j|``) plus the float64
additions of the ``S (S + 1) / 2`` scaled products (each sum of magnitudes
at most ``2 k`` for ``s >= 2``, i.e. ``k <= 2^18``), and the last ``2^-52``
with the second term the roundings of ``alpha`` and ``beta C0``. For
``k <= 2^10``, ``eps`` is below ``2^-44`` (about ``5.7e-14``).
"""

from __future__ import annotations

import math

import torch

__all__ = ["slice_bits", "slice_count", "plan", "error_bound", "scaled_slices"]

F64 = torch.float64


def slice_bits(k: int) -> int:
    """Bits ``s`` per slice for contraction depth ``k``: ``k 2^(2 s) <= 2^24`` (exact fp32 sums)."""
    if k < 1:
        raise ValueError(f"slice_bits: k must be >= 1, got {k}")
    s = (24 - math.ceil(math.log2(k))) // 2
    if s < 1:
        raise ValueError(f"slice_bits: k={k} exceeds 2^22, beyond an exact fp32 sum of 1-bit slice products")
    return s


def slice_count(s: int) -> int:
    """Slices ``S``: the smallest with ``S s >= 53 + ceil(log2(8 S + 16))``."""
    S = 1
    while S * s < 53 + math.ceil(math.log2(8 * S + 16)):
        S += 1
    return S


def plan(k: int) -> dict:
    """``{"slice_bits": s, "slices": S, "launches": S, "products": S (S + 1) / 2}`` for depth ``k``."""
    s = slice_bits(k)
    S = slice_count(s)
    return {"slice_bits": s, "slices": S, "launches": S, "products": S * (S + 1) // 2}


def eps(k: int) -> float:
    """``eps(S, s)`` of the bound above for contraction depth ``k``."""
    p = plan(k)
    S, s = p["slices"], p["slice_bits"]
    return (8 * S + 16) * 2.0 ** (-S * s) + 4 * S * (S + 1) * 2.0 ** -53 + 2.0 ** -52


def error_bound(alpha, a: torch.Tensor, b: torch.Tensor, beta=0.0, c0: torch.Tensor | None = None) -> torch.Tensor:
    """The per-entry bound of the module docstring for ``op(A) = a`` (m x k), ``op(B) = b`` (k x n)
    and the added ``beta C0``."""
    k = a.shape[1]
    amax = a.abs().amax(dim=1, keepdim=True).double()
    bmax = b.abs().amax(dim=0, keepdim=True).double()
    bound = abs(alpha) * eps(k) * k * amax * bmax
    return bound if c0 is None else bound + 2.0 ** -52 * abs(beta) * c0.abs().double()


def _exponents(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Per row (dim=1) or column (dim=0): ``e`` with ``max |x| < 2^e`` (0 for an all-zero line)."""
    return torch.frexp(x.abs().amax(dim=dim, keepdim=True))[1]


def _ldexp(x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """``x 2^e`` in two steps, so that ``2^e`` itself never overflows (subnormal lines)."""
    h = e // 2
    return x * torch.pow(2.0, h.to(F64)) * torch.pow(2.0, (e - h).to(F64))


def scaled_slices(x: torch.Tensor, dim: int, s: int, S: int):
    """``(e, [I_1, ..., I_S])``: the exponents (lines along ``dim``) and the float32 integer slices."""
    e = _exponents(x, dim)
    R = _ldexp(x, -e)
    out = []
    for _ in range(S):
        R = R * float(2 ** s)
        I = torch.round(R)  # noqa: E741
        R = R - I
        out.append(I.to(torch.float32))
    return e, out


def unscale(P: torch.Tensor, ea: torch.Tensor, fb: torch.Tensor) -> torch.Tensor:
    """``diag(2^ea) P diag(2^fb)``, one exact power-of-two step per side (barring over/underflow)."""
    return _ldexp(_ldexp(P, ea), fb)
