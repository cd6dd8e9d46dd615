"""trnblas level 1 against reference BLAS (scipy.linalg.blas).

Tolerances: sums of n <= 7 O(1) terms carry at most about n * eps relative
error; ``16 (n + 1) eps`` leaves room for a different summation order.
Elementwise results (axpy, scal, rot) are one or two roundings per entry.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg.blas as sb
import torch

import trnblas
from trnsci.testing import NUMPY_DTYPES, assert_close
from trnsci.testing import random as rand

DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]
NP = NUMPY_DTYPES
PREFIX = {torch.float32: "s", torch.float64: "d", torch.complex64: "c", torch.complex128: "z"}




def close(got, want, dtype, n=1):
    """Within ``16 (n + 1) eps`` of the reference, relative to its largest entry (see the module docstring)."""
    assert_close(got, want, dtype=dtype, k=n)


def t(a):
    return torch.from_numpy(a)


N = 7


@pytest.mark.parametrize("dtype", DTYPES)
def test_axpy(dtype):
    x, y = rand(N, dtype, 1), rand(N, dtype, 2)
    for alpha in [1.0, -2.5, 0.0] + ([1 + 1j] if dtype.is_complex else []):
        want = sb.get_blas_funcs("axpy", dtype=NP[dtype])(x, y.copy(), a=alpha)
        close(trnblas.axpy(alpha, t(x), t(y)), want, dtype)
    yy = t(y.copy())
    assert trnblas.axpy(2.0, t(x), yy, out=yy) is yy  # BLAS in-place update through out=
    close(yy, 2 * x + y, dtype)
    assert torch.equal(trnblas.axpy(0.0, torch.full((2,), math.nan), torch.ones(2)), torch.ones(2))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dot_dotu_dotc(dtype):
    x, y = rand(N, dtype, 1), rand(N, dtype, 2)
    p = PREFIX[dtype]
    if dtype.is_complex:
        close(trnblas.dot(t(x), t(y)), getattr(sb, p + "dotu")(x, y), dtype, N)
        close(trnblas.dotu(t(x), t(y)), getattr(sb, p + "dotu")(x, y), dtype, N)
        close(trnblas.dotc(t(x), t(y)), getattr(sb, p + "dotc")(x, y), dtype, N)
    else:
        close(trnblas.dot(t(x), t(y)), getattr(sb, p + "dot")(x, y), dtype, N)
        close(trnblas.dotc(t(x), t(y)), getattr(sb, p + "dot")(x, y), dtype, N)
    assert float(abs(trnblas.dot(torch.ones(0, dtype=dtype), torch.ones(0, dtype=dtype)))) == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_nrm2_asum(dtype):
    x = rand(N, dtype, 1)
    nrm = {torch.float32: sb.snrm2, torch.float64: sb.dnrm2, torch.complex64: sb.scnrm2, torch.complex128: sb.dznrm2}
    asm = {torch.float32: sb.sasum, torch.float64: sb.dasum, torch.complex64: sb.scasum, torch.complex128: sb.dzasum}
    close(trnblas.nrm2(t(x)), nrm[dtype](x), dtype, N)
    close(trnblas.asum(t(x)), asm[dtype](x), dtype, N)  # complex: sum |re| + |im|
    assert not trnblas.nrm2(t(x)).is_complex()


@pytest.mark.parametrize("scale", [1e200, 1e-200, 1e150, 1e-170])
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_nrm2_is_overflow_and_underflow_safe(scale, dtype):
    x = rand(N, dtype, 3) * scale
    want = (sb.dnrm2 if dtype == torch.float64 else sb.dznrm2)(x)
    assert math.isfinite(want) and want > 0
    got = float(trnblas.nrm2(t(x)))
    assert got == pytest.approx(want, rel=1e-14)


def test_nrm2_float32_range_and_specials():
    x = np.array([3e30, 4e30], dtype=np.float32)  # squares overflow float32
    assert float(trnblas.nrm2(t(x))) == pytest.approx(float(sb.snrm2(x)), rel=1e-6)
    x = np.array([3e-30, 4e-30], dtype=np.float32)  # squares underflow float32
    assert float(trnblas.nrm2(t(x))) == pytest.approx(5e-30, rel=1e-6)
    assert float(trnblas.nrm2(torch.tensor([1.0, math.inf]))) == math.inf
    assert math.isnan(float(trnblas.nrm2(torch.tensor([1.0, math.nan]))))
    assert float(trnblas.nrm2(torch.zeros(3))) == 0.0
    assert float(trnblas.nrm2(torch.zeros(0))) == 0.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_scal(dtype):
    x = rand(N, dtype, 1)
    for alpha in [2.0, -0.5] + ([0.5 - 1j] if dtype.is_complex else []):
        want = sb.get_blas_funcs("scal", dtype=NP[dtype])(alpha, x.copy())
        close(trnblas.scal(alpha, t(x)), want, dtype)
    if dtype.is_complex:  # real alpha on complex data (csscal / zdscal)
        f = sb.csscal if dtype == torch.complex64 else sb.zdscal
        close(trnblas.scal(3.0, t(x)), f(3.0, x.copy()), dtype)
    assert torch.equal(trnblas.scal(0.0, torch.full((3,), math.nan)), torch.zeros(3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_iamax_iamin(dtype):
    x = rand(N, dtype, 5)
    imax = {torch.float32: sb.isamax, torch.float64: sb.idamax, torch.complex64: sb.icamax,
            torch.complex128: sb.izamax}[dtype]
    assert trnblas.iamax(t(x)) == int(imax(x))  # scipy's i?amax is 0-based too
    mags = np.abs(x.real) + np.abs(x.imag) if dtype.is_complex else np.abs(x)
    assert trnblas.iamin(t(x)) == int(np.argmin(mags))


def test_iamax_ties_complex_magnitude_and_empty():
    x = np.array([1.0, -3.0, 3.0, 2.0])
    assert trnblas.iamax(x) == sb.idamax(x) == 1
    assert trnblas.iamin(np.array([2.0, -1.0, 1.0])) == 1
    # |re| + |im|, not the modulus: 3+3j (6) beats 5 (modulus 5 > 4.24)
    z = np.array([5.0, 3 + 3j, -6j + 0])
    assert trnblas.iamax(z) == sb.izamax(z) == 1
    assert trnblas.iamin(z) == 0
    assert trnblas.iamax(torch.zeros(0)) == -1
    assert trnblas.iamin(torch.zeros(0)) == -1


@pytest.mark.parametrize("dtype", DTYPES)
def test_rot(dtype):
    x, y = rand(N, dtype, 1), rand(N, dtype, 2)
    c, s = 0.6, 0.8
    ref = {torch.float32: sb.srot, torch.float64: sb.drot, torch.complex64: sb.csrot, torch.complex128: sb.zdrot}[dtype]
    wx, wy = ref(x.copy(), y.copy(), c, s)
    gx, gy = trnblas.rot(t(x), t(y), c, s)
    close(gx, wx, dtype, 2)
    close(gy, wy, dtype, 2)
    if dtype.is_complex:  # complex s (crot / zrot): y' = c y - conj(s) x
        s = 0.6j
        gx, gy = trnblas.rot(t(x), t(y), 0.8, s)
        close(gx, 0.8 * x + s * y, dtype, 2)
        close(gy, 0.8 * y - np.conj(s) * x, dtype, 2)


@pytest.mark.parametrize("a,b", [(3.0, 4.0), (-3.0, 4.0), (4.0, -3.0), (0.0, 2.0), (2.0, 0.0), (0.0, 0.0),
                                 (1e300, 1e300), (1e-300, -2e-300), (-1.0, -1.0)])
def test_rotg_real(a, b):
    c, s, r, z = trnblas.rotg(a, b)
    wc, ws = sb.drotg(a, b)
    assert c == pytest.approx(wc, rel=1e-15, abs=1e-300)
    assert s == pytest.approx(ws, rel=1e-15, abs=1e-300)
    # the defining properties: [c s; -s c] [a; b] = [r; 0], and BLAS's z
    assert c * a + s * b == pytest.approx(r, rel=1e-14, abs=1e-300)
    assert -s * a + c * b == pytest.approx(0.0, abs=1e-14 * max(abs(a), abs(b), 1e-300))
    if b == 0:
        assert z == 0.0
    elif abs(a) > abs(b):
        assert z == s
    elif c != 0:
        assert z == pytest.approx(1 / c)
    else:
        assert z == 1.0


@pytest.mark.parametrize("a,b", [(1 + 1j, 2 - 1j), (0j, 1 + 2j), (3 + 0j, 0j), (-2j, 3 + 4j), (0j, 0j),
                                 (-2j, 1e100 + 1e100j)])
def test_rotg_complex(a, b):
    c, s, r, z = trnblas.rotg(a, b)
    wc, ws = sb.zrotg(a, b)
    assert c == pytest.approx(wc.real, rel=1e-14, abs=1e-300)
    assert s == pytest.approx(ws, rel=1e-14, abs=1e-300)
    assert c * a + s * b == pytest.approx(r, rel=1e-14, abs=1e-300)
    assert z is None


@pytest.mark.parametrize("a,b", [(-2j, 1e200 + 1e200j), (1e-200j, 3e-200 + 0j), (1e200 + 0j, 1e-200j)])
def test_rotg_complex_extreme_scales(a, b):
    # scipy's zrotg wrapper is unreliable at these scales: check the definition
    c, s, r, z = trnblas.rotg(a, b)
    assert 0 <= c <= 1 and c * c + abs(s) ** 2 == pytest.approx(1.0, rel=1e-14)
    assert c * a + s * b == pytest.approx(r, rel=1e-14)
    assert -s.conjugate() * a + c * b == pytest.approx(0, abs=1e-14 * abs(r))


@pytest.mark.parametrize("dtype", DTYPES)
def test_swap_copy(dtype):
    x, y = t(rand(N, dtype, 1)), t(rand(N, dtype, 2))
    x0, y0 = x.clone(), y.clone()
    a, b = trnblas.swap(x, y)
    assert torch.equal(a, y0) and torch.equal(b, x0)
    assert torch.equal(x, x0) and a.data_ptr() != y.data_ptr()  # copies; inputs untouched
    cp = trnblas.copy(x)
    assert torch.equal(cp, x) and cp.data_ptr() != x.data_ptr()
    out = torch.empty_like(x)
    assert trnblas.copy(x, out=out) is out and torch.equal(out, x)


def test_strided_vectors_and_numpy():
    base = np.arange(10.0)
    x = base[::2]  # BLAS incx = 2
    assert trnblas.dot(x, x) == pytest.approx(float(x @ x))
    assert isinstance(trnblas.axpy(1.0, x, x), np.ndarray)
    r = trnblas.nrm2(np.array([3.0, 4.0]))
    assert isinstance(r, np.ndarray) and float(r) == 5.0
