"""Level-1/2 NKI kernels (axpby, vreduce, gemv, ger): results vs NumPy, counters vs closed forms, plan == run.

Shapes are ragged (n not a multiple of 128, matrices not multiples of
128/512). Tolerances: fp32 elementwise results are one fp32 rounding of
each product/sum (rtol 1e-6); reductions and matrix-vector products
accumulate n fp32 terms, bounded by ``n * 2^-24 * sum |terms|``.
"""

import ml_dtypes
import numpy as np
import pytest
import torch

import trnblas
from trnblas.kernels.axpby import axpby_counts, axpby_kernel
from trnblas.kernels.axpby import kind as axpby_kind
from trnblas.kernels.caxpby import caxpby_counts, caxpby_kernel
from trnblas.kernels.dgmm import dgmm_counts, dgmm_kernel
from trnblas.kernels.gemv import gemv_counts, gemv_kernel
from trnblas.kernels.ger import ger_counts, ger_kernel
from trnblas.kernels.syr2k import syr2k_counts, syr2k_kernel
from trnblas.kernels.vreduce import vreduce_counts, vreduce_kernel
from trnsci import nki
from trnsci.testing import assert_counts, assert_plan_matches_run, kernel_ran

pytestmark = pytest.mark.simulator

U32 = 2.0 ** -24
N_RAGGED = (1, 127, 1000, 128 * 2050 + 37)  # tail only; tail only; [128, 7] + tail; two chunks + tail


def _bound(n, terms):
    return (n + 2) * U32 * float(np.abs(terms).sum()) + 1e-30


def _row(*vals):
    return np.array([vals], dtype=np.float32)


@pytest.mark.parametrize("n", N_RAGGED)
def test_axpby_kernel_results_and_counters(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    for coef, has_y, pair in [((2.5, 1.0, 0.0, 0.0), True, False), ((-3.0, 0.0, 0.0, 0.0), False, False),
                              ((0.6, 0.8, -0.8, 0.6), True, True), ((0.0, 1.0, 1.0, 0.0), True, True),
                              ((0.5, -2.0, 0.0, 0.0), True, False), ((1.0, 1.0, 0.0, 0.0), True, False)]:
        form = tuple(axpby_kind(v) for v in coef)
        out, prof = nki.profile(axpby_kernel, x, y if has_y else None, _row(*coef), form=form, pair=pair)
        a, b, c, d = coef
        outs = out if pair else (out,)
        yv = y if has_y else np.zeros_like(y)
        refs = [(a * x.astype(np.float64) + b * yv, abs(a * x) + abs(b * yv))]
        if pair:
            refs.append((c * x.astype(np.float64) + d * y, abs(c * x) + abs(d * y)))
        for o, (r, mag) in zip(outs, refs):
            assert np.all(np.abs(o - r) <= 3 * U32 * mag)  # <= 3 fp32 roundings of the terms
        expected = axpby_counts(n, 4, form, has_y, pair)
        assert_counts(prof, expected)
        # each input read once, each output written once: the analytic minimum (+ the 16-byte coefficient row)
        assert prof.hbm_read_bytes == 4 * n * (1 + has_y) + 16 * expected["tensor"]
        assert prof.hbm_write_bytes == 4 * n * (1 + pair)


def test_one_form_serves_every_alpha():
    """The coefficient values are data: axpy with alpha 2 and alpha 3 use one kernel form (one compilation)."""
    from trnblas._nki.level1 import _lin_plan

    x = torch.ones(10)
    k2, f2, r2 = _lin_plan(x, (2.0, 1.0, 0.0, 0.0))
    k3, f3, r3 = _lin_plan(x, (3.0, 1.0, 0.0, 0.0))
    assert (k2, f2) == (k3, f3) and r2 != r3


@pytest.mark.parametrize("n", N_RAGGED)
@pytest.mark.parametrize("op", ["dot", "asum", "nrm2", "amax", "amin"])
def test_reduce_kernel_partials_combine_to_numpy(n, op):
    rng = np.random.default_rng(n + 1)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    part, prof = nki.profile(vreduce_kernel, x, y if op == "dot" else None, op=op)
    assert_counts(prof, vreduce_counts(n, 4, op))
    assert prof.hbm_read_bytes == 4 * n * (2 if op == "dot" else 1)
    p = part.astype(np.float64)
    xd = x.astype(np.float64)
    if op == "dot":
        assert abs(p.sum() - xd @ y) <= _bound(n, xd * y)
    elif op == "asum":
        assert abs(p.sum() - np.abs(xd).sum()) <= _bound(n, xd)
    elif op == "nrm2":
        got = np.sqrt((p[:, 1::2] / p[:, 0::2] ** 2).sum())
        assert abs(got - np.linalg.norm(xd)) <= 4 * (n + 2) * U32 * np.linalg.norm(xd)
    else:
        v, i = p[:, 0::2], p[:, 1::2]
        best = v.max() if op == "amax" else v.min()
        ref = np.argmax(np.abs(x)) if op == "amax" else np.argmin(np.abs(x))
        assert int(i[v == best].min()) == ref


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the emulator's Inf * 0
def test_nrm2_kernel_neither_overflows_nor_underflows(simulator_backend):
    for scale in (1e30, 1e-30):
        x = torch.full((1000,), scale, dtype=torch.float32)
        got = float(trnblas.nrm2(x))  # the unscaled fp32 sum of squares would be inf / 0
        assert got == pytest.approx(scale * np.sqrt(1000), rel=1e-5)
    x = torch.ones(300)
    x[7] = float("inf")
    assert float(trnblas.nrm2(x)) == float("inf")
    x[9] = float("nan")
    assert np.isnan(float(trnblas.nrm2(x)))


def test_iamax_ties_and_nan_follow_torch(simulator_backend):
    x = torch.zeros(700)
    x[[650, 3, 300]] = torch.tensor([-5.0, 5.0, 5.0])
    assert trnblas.iamax(x) == 3  # first of the ties
    x[500] = float("nan")
    assert trnblas.iamax(x) == int(torch.argmax(x.abs())) == 500


@pytest.fixture
def simulator_backend():
    with kernel_ran() as runs:
        yield runs


@pytest.mark.parametrize("m,n", [(300, 700), (5, 3000), (129, 513)])
@pytest.mark.parametrize("trans", [False, True])
def test_gemv_kernel_counters(m, n, trans):
    rng = np.random.default_rng(m * n)
    a = rng.standard_normal((m, n)).astype(np.float32)
    x = rng.standard_normal(m if trans else n).astype(np.float32)
    y, prof = nki.profile(gemv_kernel, a, x, trans=trans)
    op = a.T.astype(np.float64) if trans else a.astype(np.float64)
    ref = op @ x
    k = op.shape[1]
    assert np.all(np.abs(y - ref) <= (k + 2) * U32 * (np.abs(op) @ np.abs(x)) + 1e-30)
    assert_counts(prof, gemv_counts(m, n, 4, trans))
    assert prof.hbm_read_bytes == 4 * (m * n + x.size)  # A once, x once


def test_gemv_kernel_bf16_reads_two_bytes():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((130, 600)).astype(ml_dtypes.bfloat16)
    x = rng.standard_normal(600).astype(ml_dtypes.bfloat16)
    y, prof = nki.profile(gemv_kernel, a, x, trans=False)
    ref = a.astype(np.float64) @ x.astype(np.float64)  # bf16 products are exact in fp32
    assert np.all(np.abs(y - ref) <= 602 * U32 * (np.abs(a.astype(np.float64)) @ np.abs(x.astype(np.float64))))
    assert_counts(prof, gemv_counts(130, 600, 2, False))


@pytest.mark.parametrize("k,has_a", [(1, True), (2, True), (1, False)])
def test_ger_kernel_counters(k, has_a):
    m, n = 200, 530
    rng = np.random.default_rng(k)
    a = rng.standard_normal((m, n)).astype(np.float32)
    xs = rng.standard_normal((k, m)).astype(np.float32)
    ys = rng.standard_normal((k, n)).astype(np.float32)
    c, prof = nki.profile(ger_kernel, a if has_a else None, xs, ys)
    ref = (a if has_a else 0) + xs.T.astype(np.float64) @ ys
    np.testing.assert_allclose(c, ref, rtol=0, atol=8 * U32 * (np.abs(a).max() + k * 25))
    assert_counts(prof, ger_counts(m, n, k, 4, has_a))


@pytest.mark.parametrize("n,k", [(300, 70), (130, 257)])
@pytest.mark.parametrize("upper", [False, True])
def test_syr2k_kernel_triangle_and_counters(n, k, upper):
    rng = np.random.default_rng(n + k)
    a = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    c, prof = nki.profile(syr2k_kernel, np.ascontiguousarray(a.T), np.ascontiguousarray(b.T), upper=upper)
    ref = a.astype(np.float64) @ b.T + b.astype(np.float64) @ a.T
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.T) * 2
    keep = np.triu(np.ones((n, n), bool)) if upper else np.tril(np.ones((n, n), bool))
    assert np.all(np.abs(c - ref)[keep] <= ((2 * k + 2) * U32 * mag)[keep])
    assert_counts(prof, syr2k_counts(n, k, 4, upper))
    assert prof.hbm_read_bytes == 2 * 4 * k * n  # a and b once each: the analytic minimum


@pytest.mark.parametrize("m,n", [(300, 2500), (5, 700)])
@pytest.mark.parametrize("left", [True, False])
def test_dgmm_kernel_exact_and_counters(m, n, left):
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((m, n)).astype(np.float32)
    x = rng.standard_normal(m if left else n).astype(np.float32)
    c, prof = nki.profile(dgmm_kernel, a, x, left=left)
    np.testing.assert_array_equal(c, a * (x[:, None] if left else x))  # one fp32 product: exactly NumPy's
    assert_counts(prof, dgmm_counts(m, n, 4, left))


def test_level3_public_api_on_new_kernels():
    g = torch.Generator().manual_seed(11)
    A, B = torch.randn(130, 70, generator=g), torch.randn(130, 70, generator=g)
    C = torch.randn(130, 130, generator=g)
    Ad, Bd = A.double(), B.double()
    with kernel_ran("syr2k_kernel", "syr2k_kernel", "axpby_kernel", "axpby_kernel", "dgmm_kernel", "dgmm_kernel"):
        R = trnblas.syr2k(1.5, A, B, 0.5, C, uplo="L")
        ref = 1.5 * (Ad @ Bd.T + Bd @ Ad.T) + 0.5 * C.double()
        torch.testing.assert_close(torch.tril(R).double(), torch.tril(ref), rtol=1e-5, atol=1e-4)
        assert torch.equal(torch.triu(R, 1), torch.triu(C, 1))  # BLAS: the other triangle is C's
        R = trnblas.syr2k(1.0, A.T, B.T, trans=True, uplo="U")  # trans="T", no C
        torch.testing.assert_close(torch.triu(R).double(), torch.triu(Ad @ Bd.T + Bd @ Ad.T), rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(trnblas.geam(2.0, A, -1.0, B).double(), 2 * Ad - Bd, rtol=3 * U32, atol=0)
        torch.testing.assert_close(trnblas.geam(2.0, A, 3.0, C[:70], transB=True).double(),
                                   2 * Ad + 3 * C[:70].double().T, rtol=0, atol=1e-5)
        torch.testing.assert_close(trnblas.dgmm(A, B[:, 0]).double(), Ad * Bd[:, :1], rtol=U32, atol=0)
        torch.testing.assert_close(trnblas.dgmm(A, B[0], side="right").double(), Ad * Bd[0], rtol=U32, atol=0)


# ----------------------------------------------------------------- public API through the simulator

def _vec(n, seed, dtype=torch.float32):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed)).to(dtype)


def test_level1_public_api_runs_kernels_and_matches_float64():
    n = 1000
    x, y = _vec(n, 1), _vec(n, 2)
    xd, yd = x.double(), y.double()
    names = ["axpby_kernel"] * 5 + ["vreduce_kernel"] * 6
    with kernel_ran(*names):
        torch.testing.assert_close(trnblas.axpy(2.0, x, y).double(), 2 * xd + yd, rtol=4 * U32, atol=0)
        torch.testing.assert_close(trnblas.scal(-0.5, x).double(), -0.5 * xd, rtol=U32, atol=0)
        assert torch.equal(trnblas.copy(x), x)
        a, b = trnblas.swap(x, y)
        assert torch.equal(a, y) and torch.equal(b, x)
        a, b = trnblas.rot(x, y, 0.6, 0.8)
        torch.testing.assert_close(b.double(), 0.6 * yd - 0.8 * xd, rtol=0, atol=4 * U32 * 8)
        assert abs(float(trnblas.dot(x, y)) - float(xd @ yd)) <= _bound(n, (xd * yd).numpy())
        assert abs(float(trnblas.dotc(x, y)) - float(xd @ yd)) <= _bound(n, (xd * yd).numpy())
        assert abs(float(trnblas.asum(x)) - float(xd.abs().sum())) <= _bound(n, xd.numpy())
        assert float(trnblas.nrm2(x)) == pytest.approx(float(xd.norm()), rel=(n + 2) * U32)
        assert trnblas.iamax(x) == int(x.abs().argmax())
        assert trnblas.iamin(x) == int(x.abs().argmin())


def test_level1_complex_real_coefficients_use_the_real_view():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(300, dtype=torch.complex64, generator=g)
    y = torch.randn(300, dtype=torch.complex64, generator=g)
    with kernel_ran("axpby_kernel", "vreduce_kernel", "vreduce_kernel"):
        torch.testing.assert_close(trnblas.axpy(2.0, x, y), 2 * x + y, rtol=4 * U32, atol=1e-6)
        assert float(trnblas.nrm2(x)) == pytest.approx(float(x.cdouble().abs().pow(2).sum().sqrt()), rel=1e-5)
        ref = float(torch.view_as_real(x).double().abs().sum())
        assert float(trnblas.asum(x)) == pytest.approx(ref, rel=1e-5)
    # complex dot/dotc: two real dot kernels each; vs NumPy's complex128 vdot/dot
    xn, yn = x.cdouble().numpy(), y.cdouble().numpy()
    mag = float(np.abs(xn) @ np.abs(yn)) * 2
    with kernel_ran(*["vreduce_kernel"] * 4):
        assert abs(complex(trnblas.dotc(x, y)) - np.vdot(xn, yn)) <= 302 * U32 * mag
        assert abs(complex(trnblas.dot(x, y)) - np.dot(xn, yn)) <= 302 * U32 * mag
    # complex iamax/iamin: BLAS's |Re| + |Im| ranked inside the reduction kernel, vs NumPy
    mag = np.abs(xn.real) + np.abs(xn.imag)
    with kernel_ran("vreduce_kernel", "vreduce_kernel"):
        assert trnblas.iamax(x) == int(np.argmax(mag))
        assert trnblas.iamin(x) == int(np.argmin(mag))


@pytest.mark.parametrize("n", [5, 1000, 128 * 2050 + 3])
@pytest.mark.parametrize("op", ["camax", "camin"])
def test_complex_index_reduction_counters(n, op):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    part, prof = nki.profile(vreduce_kernel, x.view(np.float32), None, op=op)
    assert_counts(prof, vreduce_counts(n, 4, op))
    assert prof.hbm_read_bytes == 8 * n  # both parts, once
    v, i = part[:, 0::2].astype(np.float64), part[:, 1::2]
    best = v.max() if op == "camax" else v.min()
    mag = np.abs(x.real).astype(np.float64) + np.abs(x.imag)
    assert int(i[v == best].min()) == int(np.argmax(mag) if op == "camax" else np.argmin(mag))


@pytest.mark.parametrize("dtype,u", [(torch.bfloat16, 2.0 ** -8), (torch.float16, 2.0 ** -11)])
def test_level1_low_precision_both_paths(dtype, u):
    x, y = _vec(777, 5, dtype), _vec(777, 6, dtype)
    ref = 1.5 * x.double() + y.double()  # exact on the rounded inputs
    with kernel_ran("axpby_kernel"):
        R = trnblas.axpy(1.5, x, y)
    with trnblas.use_backend("torch"):
        T = trnblas.axpy(1.5, x, y)
    for out in (R, T):
        assert out.dtype is dtype
        assert torch.all((out.double() - ref).abs() <= u * ref.abs() + 1e-30)  # one rounding


def test_int_and_bool_vectors_stay_type_errors():
    with pytest.raises(TypeError, match="x has dtype int64"):
        trnblas.axpy(1.0, torch.ones(3, dtype=torch.long), torch.ones(3, dtype=torch.long))
    with pytest.raises(TypeError, match="A has dtype bool"):
        trnblas.gemv(1.0, torch.ones(2, 2, dtype=torch.bool), torch.ones(2, dtype=torch.bool))


def test_level2_public_api_runs_kernels():
    g = torch.Generator().manual_seed(7)
    m, n = 150, 270
    A = torch.randn(m, n, generator=g)
    S = torch.randn(m, m, generator=g)
    xm, xn = torch.randn(m, generator=g), torch.randn(n, generator=g)
    Ad, Sd = A.double(), S.double()
    tol = 1e-4
    names = ["gemv_kernel"] * 5 + ["trsm_kernel"] + ["ger_kernel"] * 3  # symv: two gemv runs
    with kernel_ran(*names):
        torch.testing.assert_close(trnblas.gemv(2.0, A, xn, 0.5, xm).double(),
                                   2 * Ad @ xn.double() + 0.5 * xm.double(), rtol=tol, atol=tol)
        torch.testing.assert_close(trnblas.gemv(1.0, A, xm, trans=True).double(), Ad.T @ xm.double(),
                                   rtol=tol, atol=tol)
        full = torch.triu(Sd) + torch.triu(Sd, 1).T
        torch.testing.assert_close(trnblas.symv(1.0, S, xm).double(), full @ xm.double(), rtol=tol, atol=tol)
        torch.testing.assert_close(trnblas.trmv(S, xm, uplo="L", diag="unit").double(),
                                   (torch.tril(Sd, -1) + torch.eye(m, dtype=torch.float64)) @ xm.double(),
                                   rtol=tol, atol=tol)
        T = torch.eye(m) * 4 + torch.triu(torch.randn(m, m, generator=g)) * 0.1
        z = trnblas.trsv(T, xm, uplo="U", trans=True)
        torch.testing.assert_close(T.double().T @ z.double(), xm.double(), rtol=tol, atol=tol)
        torch.testing.assert_close(trnblas.ger(3.0, xm, xn, A).double(),
                                   Ad + 3 * torch.outer(xm.double(), xn.double()), rtol=tol, atol=tol)
        R = trnblas.syr(2.0, xm, S, uplo="U")
        ref = Sd + 2 * torch.outer(xm.double(), xm.double())
        torch.testing.assert_close(torch.triu(R).double(), torch.triu(ref), rtol=tol, atol=tol)
        assert torch.equal(torch.tril(R, -1), torch.tril(S, -1))  # the other triangle is A's
        R = trnblas.syr2(1.0, xm, xm.flip(0), uplo="L")
        P = torch.outer(xm.double(), xm.flip(0).double())
        torch.testing.assert_close(torch.tril(R).double(), torch.tril(P + P.T), rtol=tol, atol=tol)


@pytest.mark.parametrize("which", ["axpy", "nrm2", "iamax", "gemv_n", "gemv_t", "ger", "syr2"])
def test_plan_equals_run(which):
    g = torch.Generator().manual_seed(9)
    x, y = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
    A = torch.randn(130, 600, generator=g)
    calls = {
        "axpy": (trnblas.axpy, (2.0, x, y)), "nrm2": (trnblas.nrm2, (x,)), "iamax": (trnblas.iamax, (x,)),
        "gemv_n": (trnblas.gemv, (1.0, A, y[:600])), "gemv_t": (trnblas.gemv, (1.0, A, x[:130], 0.0, None, True)),
        "ger": (trnblas.ger, (1.0, x[:130], y[:600], A)), "syr2": (trnblas.syr2, (1.0, x[:300], y[:300])),
    }
    fn, args = calls[which]
    with trnblas.use_backend("simulator"):
        plan, _, runs = assert_plan_matches_run(fn, *args)
    assert plan.backend == "simulator" and plan.kernel is not None and [r.kernel for r in runs] == [plan.kernel["name"]]


@pytest.mark.parametrize("tA,tB", [("N", "N"), ("C", "T")])
def test_complex64_gemm_is_one_real_gemm(tA, tB):
    """[ar ai] @ [[br, bi], [-bi, br]] = [Re, Im]: one gemm_kernel run of m x 2n x 2k, vs NumPy complex128."""
    g = torch.Generator().manual_seed(12)
    m, n, k = 70, 50, 130
    A = torch.randn((m, k) if tA == "N" else (k, m), dtype=torch.complex64, generator=g)
    B = torch.randn((k, n) if tB == "N" else (n, k), dtype=torch.complex64, generator=g)
    C = torch.randn(m, n, dtype=torch.complex64, generator=g)
    with trnblas.use_backend("simulator"):
        plan, R, runs = assert_plan_matches_run(trnblas.gemm, 1 + 2j, A, B, 0.5 - 1j, C, transA=tA, transB=tB)
    assert [r.kernel for r in runs] == ["gemm_kernel"]
    assert plan.kernel["hbm_read_bytes"] == 4 * (2 * k * 2 * n + 2 * k * m)  # fp32 parts, B's twice
    a = A.cdouble().numpy() if tA == "N" else A.cdouble().numpy().conj().T
    b = B.cdouble().numpy() if tB == "N" else B.cdouble().numpy().T
    ref = (1 + 2j) * a @ b + (0.5 - 1j) * C.cdouble().numpy()
    mag = 3 * (np.abs(a) @ np.abs(b)) + 2 * np.abs(C.cdouble().numpy())
    assert R.dtype is torch.complex64
    assert np.all(np.abs(R.cdouble().numpy() - ref) <= (2 * k + 4) * U32 * mag)


def test_plan_by_routine_name_covers_the_new_ops():
    x = torch.ones(1000)
    with trnblas.use_backend("simulator"):
        p = trnblas.plan("nrm2", x)
        q = trnblas.plan("trnblas.gemv", 1.0, torch.ones(130, 600), torch.ones(600))
    assert (p.op, p.kernel["name"]) == ("trnblas.nrm2", "vreduce_kernel")
    assert (q.op, q.kernel["name"]) == ("trnblas.gemv", "gemv_kernel")
    with pytest.raises(ValueError, match="routine name; got 'rotg'"):
        trnblas.plan("rotg", 1.0, 2.0)


def test_complex64_level2_matrix_vector_through_the_gemm_kernel():
    """gemv (N and C), hemv, trmv on complex64: the GEMM kernel on split parts, vs NumPy complex128."""
    g = torch.Generator().manual_seed(13)
    m, n = 70, 130
    A = torch.randn(m, n, dtype=torch.complex64, generator=g)
    H = torch.randn(m, m, dtype=torch.complex64, generator=g)
    x = torch.randn(n, dtype=torch.complex64, generator=g)
    y = torch.randn(m, dtype=torch.complex64, generator=g)
    a, h, xn, yn = (t.cdouble().numpy() for t in (A, H, x, y))
    hf = np.triu(h) + np.triu(h, 1).conj().T
    np.fill_diagonal(hf, np.diag(h).real)  # BLAS hemv reads only the real part of the diagonal
    cases = [
        (lambda: trnblas.gemv(1 + 1j, A, x, 0.5j, y), (1 + 1j) * a @ xn + 0.5j * yn,
         2 * np.abs(a) @ np.abs(xn) + np.abs(yn), n),
        (lambda: trnblas.gemv(1.0, A, y, trans="C"), a.conj().T @ yn, np.abs(a.T) @ np.abs(yn), m),
        (lambda: trnblas.hemv(1.0, H, y), hf @ yn, np.abs(hf) @ np.abs(yn), m),
        (lambda: trnblas.trmv(H, y, uplo="L", trans="T"), np.tril(h).T @ yn, np.abs(h.T) @ np.abs(yn), m),
    ]
    with kernel_ran(*["gemm_kernel"] * len(cases)):
        for call, ref, mag, k in cases:
            R = call()
            assert R.dtype is torch.complex64
            assert np.all(np.abs(R.cdouble().numpy() - ref) <= (2 * k + 4) * U32 * 2 * mag)


def test_complex64_rank_updates_on_the_real_view():
    """geru/gerc/her/her2/syr2 on complex64: the rank-update kernel on A's real view, vs NumPy complex128."""
    g = torch.Generator().manual_seed(14)
    c = torch.complex64
    x, y = torch.randn(70, dtype=c, generator=g), torch.randn(90, dtype=c, generator=g)
    y7 = torch.randn(70, dtype=c, generator=g)
    A, S = torch.randn(70, 90, dtype=c, generator=g), torch.randn(70, 70, dtype=c, generator=g)
    xn, yn, y7n, an, sn = (t.cdouble().numpy() for t in (x, y, y7, A, S))
    al = 0.7 - 0.3j
    p_her2 = al * np.outer(xn, y7n.conj())
    lo, up = np.tril(np.ones((70, 70), bool)), np.triu(np.ones((70, 70), bool))
    her_ref = sn + 0.5 * np.outer(xn, xn.conj())
    np.fill_diagonal(her_ref, np.diag(her_ref).real)  # BLAS her/her2: a real diagonal
    her2_ref = sn + p_her2 + p_her2.conj().T
    np.fill_diagonal(her2_ref, np.diag(her2_ref).real)
    cases = [  # (call, reference, which entries BLAS defines)
        (lambda: trnblas.geru(al, x, y, A), an + al * np.outer(xn, yn), None),
        (lambda: trnblas.gerc(al, x, y, A), an + al * np.outer(xn, yn.conj()), None),
        (lambda: trnblas.her(0.5, x, S, uplo="L"), her_ref, lo),
        (lambda: trnblas.her2(al, x, y7, S, uplo="U"), her2_ref, up),
        (lambda: trnblas.syr2(al, x, y7, S, uplo="U"), sn + al * (np.outer(xn, y7n) + np.outer(y7n, xn)), up),
    ]
    with kernel_ran(*["ger_kernel"] * len(cases)):
        for call, ref, keep in cases:
            R = call().cdouble().numpy()
            err = np.abs(R - ref) if keep is None else np.abs(R - ref)[keep]
            assert err.max() <= 16 * U32 * (np.abs(ref).max() + 4)  # a few fp32 roundings per entry


@pytest.mark.parametrize("n", [5, 1000, 128 * 2050 + 3])
def test_caxpby_kernel_complex_coefficients(n):
    """Complex a x + b y on interleaved parts vs NumPy complex128; each input read once."""
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    y = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    a, b, c, d = 0.6 - 0.8j, 1.5 + 0.25j, 0.3 + 0j, -1.5 + 0.25j
    for coef, has_y, pair in [((a, 1, 0, 0), True, False), ((a, b, c, d), True, True), ((a, 0, 0, 0), False, False)]:
        row = _row(*[p for v in coef for p in (complex(v).real, complex(v).imag)])
        form = tuple(0 if v == 0 else 1 if v == 1 else 2 for v in (coef[1], coef[3]))
        out, prof = nki.profile(caxpby_kernel, x.view(np.float32), y.view(np.float32) if has_y else None, row,
                                form=form, pair=pair)
        outs = out if pair else (out,)
        xd, yd = x.astype(np.complex128), y.astype(np.complex128) if has_y else 0
        refs = [(coef[0] * xd + coef[1] * yd, abs(coef[0]) * abs(xd) + abs(coef[1]) * abs(yd))]
        if pair:
            refs.append((coef[2] * xd + coef[3] * yd, abs(coef[2]) * abs(xd) + abs(coef[3]) * abs(yd)))
        for o, (r, mag) in zip(outs, refs):
            assert np.all(np.abs(o.view(np.complex64) - r) <= 8 * U32 * (mag + 1e-30))  # a few fp32 roundings
        assert_counts(prof, caxpby_counts(n, form, has_y, pair))
        assert prof.hbm_read_bytes == 8 * n * (1 + has_y) + 32


def test_complex_coefficients_run_the_caxpby_kernel():
    g = torch.Generator().manual_seed(15)
    c = torch.complex64
    x, y = torch.randn(1000, dtype=c, generator=g), torch.randn(1000, dtype=c, generator=g)
    A, B = torch.randn(30, 70, dtype=c, generator=g), torch.randn(70, 30, dtype=c, generator=g)
    xd, yd = x.cdouble(), y.cdouble()
    al, s = 0.6 - 0.8j, 0.48 + 0.64j
    tol = dict(rtol=0, atol=1e-5)
    with kernel_ran(*["caxpby_kernel"] * 4):
        torch.testing.assert_close(trnblas.axpy(al, x, y).cdouble(), al * xd + yd, **tol)
        torch.testing.assert_close(trnblas.scal(al, x).cdouble(), al * xd, **tol)
        xr, yr = trnblas.rot(x, y, 0.6, s)
        torch.testing.assert_close(yr.cdouble(), 0.6 * yd - s.conjugate() * xd, **tol)
        torch.testing.assert_close(trnblas.geam(al, A, 1j, B, transB="C").cdouble(),
                                   al * A.cdouble() + 1j * B.cdouble().mH, **tol)


def test_complex64_herk_her2k_syr2k_through_the_complex_gemm():
    """Complex rank-k updates: the full product through the GEMM kernel (split parts), vs NumPy complex128."""
    g = torch.Generator().manual_seed(16)
    c = torch.complex64
    A, B = torch.randn(70, 40, dtype=c, generator=g), torch.randn(70, 40, dtype=c, generator=g)
    C = torch.randn(70, 70, dtype=c, generator=g)
    C = C + C.mH
    a, b, cn = (t.cdouble().numpy() for t in (A, B, C))
    al = 0.3 + 0.7j
    p = al * a @ b.conj().T
    ph = p + p.conj().T
    lo, up = np.tril(np.ones((70, 70), bool)), np.triu(np.ones((70, 70), bool))
    cases = [
        (lambda: trnblas.herk(0.5, A, 2.0, C, uplo="L"), 0.5 * a @ a.conj().T + 2 * cn, lo),
        (lambda: trnblas.her2k(al, A, B, 1.0, C, uplo="U"), ph + cn, up),
        (lambda: trnblas.her2k(al, A.mH.contiguous(), B.mH.contiguous(), trans="C", fill="full"), ph, None),
        (lambda: trnblas.syr2k(al, A.T.contiguous(), B.T.contiguous(), trans="T", fill="full"),
         al * (a @ b.T + b @ a.T), None),
    ]
    with kernel_ran(*["gemm_kernel"] * len(cases)):
        for call, ref, keep in cases:
            R = call().cdouble().numpy()
            err = np.abs(R - ref) if keep is None else np.abs(R - ref)[keep]
            assert err.max() <= (2 * 80 + 8) * U32 * 4 * (np.abs(a).max() * np.abs(b).max() * 40 + np.abs(cn).max())


@pytest.mark.parametrize("n", [130, 300])
@pytest.mark.parametrize("uplo", ["U", "L"])
def test_symv_trmv_read_one_triangle_on_the_device(n, uplo):
    """Issue 32: symv and trmv select A's stored triangle in SBUF (gemv_kernel's ``tri``) instead of forming
    the symmetric matrix or the triangle on the host: the other triangle holds NaN, which must never reach
    the result. Reference: NumPy float64 on the triangle; bound 1e-5 of |T| |x| (fp32 sums of n terms);
    trmv's counters equal gemv_counts(n, n, 4, trans, tri)."""
    from trnblas._nki.level2 import _trmv_counts
    from trnsci.testing import assert_counts

    rng = np.random.default_rng(n)
    T = np.triu(rng.standard_normal((n, n))) if uplo == "U" else np.tril(rng.standard_normal((n, n)))
    other = np.tril(np.ones((n, n)), -1) if uplo == "U" else np.triu(np.ones((n, n)), 1)
    A = torch.from_numpy(np.where(other > 0, np.nan, T).astype(np.float32))
    x = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
    Td, xd = T.astype(np.float32).astype(np.float64), x.double().numpy()
    S = Td + Td.T - np.diag(np.diag(Td))
    with kernel_ran("gemv_kernel", "gemv_kernel"):
        y = trnblas.symv(1.0, A, x, uplo=uplo)
    np.testing.assert_allclose(y.double().numpy(), S @ xd, rtol=0, atol=1e-5 * (np.abs(S) @ np.abs(xd)).max())
    for trans in (False, True):
        for diag in ("nonunit", "unit"):
            M = Td - np.diag(np.diag(Td)) + np.eye(n) if diag == "unit" else Td
            M = M.T if trans else M
            with kernel_ran("gemv_kernel") as runs:
                z = trnblas.trmv(A, x, uplo=uplo, trans=trans, diag=diag)
            assert not torch.isnan(z).any()
            np.testing.assert_allclose(z.double().numpy(), M @ xd, rtol=0,
                                       atol=1e-5 * (np.abs(M) @ np.abs(xd)).max())
            want = _trmv_counts(A, x, uplo, "T" if trans else "N", "U" if diag == "unit" else "N")
            assert_counts(runs[0].profile, want, ignore=("kernel",))
