"""trnblas NKI kernels: results vs NumPy/SciPy, and the emulator's counters vs the closed forms.

Every test that goes through the public API records kernel runs with
``trnsci.nki.capture()`` and asserts one happened: a silent torch fallback
fails here (and NkiFallbackWarning is an error in the pytest config).
"""

import ml_dtypes
import numpy as np
import pytest
import scipy.linalg
import torch

import trnblas
import trnsci
from trnblas.kernels.batched_gemm import batched_gemm_counts, batched_gemm_kernel
from trnblas.kernels.gemm import gemm_counts, gemm_kernel, max_k, panel_width
from trnblas.kernels.syrk import syrk_counts, syrk_kernel
from trnblas.kernels.trsm import trsm_counts, trsm_kernel
from trnsci import nki
from trnsci.nki.emulator import bf16_products
from trnsci.testing import assert_counts, kernel_ran

pytestmark = pytest.mark.simulator

BF16 = ml_dtypes.bfloat16


@pytest.fixture
def simulator():
    """The simulator backend, recording kernel runs; fails the test if no kernel ran."""
    with kernel_ran() as runs:
        yield runs


# ----------------------------------------------------------------- GEMM

@pytest.mark.parametrize("m,n,k", [(200, 300, 700), (128, 128, 128), (1, 1, 1), (130, 513, 129), (10, 5000, 1024)])
@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_gemm_kernel_counters_match_closed_form(m, n, k, dtype):
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    out, prof = nki.profile(gemm_kernel, np.ascontiguousarray(a.T), b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # fp32 accumulation of the products; bf16 x bf16 products are each rounded to bf16 first on
    # trn1/trn2 (modeled by the emulator: trnsci.nki.emulator.numerics), one more 2**-8 of |a_k b_k|
    tol = 2e-6 * k * np.abs(ref).max() + 1e-6
    if dtype is BF16:
        tol = tol + 2.0**-8 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert (np.abs(out - ref) <= tol).all()
    expected = gemm_counts(m, n, k, np.dtype(dtype).itemsize)
    assert_counts(prof, expected)
    assert prof.instructions["dma"] == expected["dma"]
    if (m, n, k) == (10, 5000, 1024) and dtype is np.float32:
        assert panel_width(k, n, 4) < n  # this case exercises several B panels (A re-read)
        assert expected["hbm_read_bytes"] > 4 * (k * n + k * m)


def test_gemm_minimum_traffic_when_b_fits():
    out, prof = nki.profile(gemm_kernel, np.ones((384, 256), np.float32), np.ones((384, 700), np.float32))
    assert prof.hbm_read_bytes == 4 * (384 * 700 + 384 * 256)  # each input read once
    assert prof.hbm_write_bytes == 4 * 256 * 700
    assert np.all(out == 384)


def test_gemm_2048_bf16_modeled_tensor_engine_utilization():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2048, 2048)).astype(BF16)
    b = rng.standard_normal((2048, 2048)).astype(BF16)
    # counters and modeled time do not depend on the products' rounding: exact products keep this
    # 2048^3 run at BLAS speed (rounding every product costs K M N elementwise operations)
    with bf16_products("exact"):
        _, prof = nki.profile(gemm_kernel, a, b, target="trn1")
    assert_counts(prof, gemm_counts(2048, 2048, 2048, 2))
    assert prof.instructions["tensor"] == 16 * 16 * 4
    # Tensor busy 1024 x 512 cycles / 2.8 GHz = 187 us; before the first matmul the whole B panel
    # (8 MiB, 4 KiB/partition) and the first A strip (1 KiB/partition, ~43 % DMA efficiency) must
    # land (~51 us modeled, issue #24's timeline), and DMA is busy ~180 us of the run: modeled
    # utilization ~0.72. Below 0.70 the overlap of loads and stores with the matmuls has broken.
    assert prof.tensor_engine_utilization() >= 0.70


@pytest.mark.parametrize("tA,tB", [("N", "N"), ("T", "N"), ("N", "T"), ("T", "T")])
def test_gemm_public_api_runs_kernel(simulator, tA, tB):
    g = torch.Generator().manual_seed(3)
    m, n, k = 70, 130, 200
    A = torch.randn((m, k) if tA == "N" else (k, m), generator=g)
    B = torch.randn((k, n) if tB == "N" else (n, k), generator=g)
    C = torch.randn(m, n, generator=g)
    R = trnblas.gemm(1.5, A, B, -0.5, C, transA=tA, transB=tB)
    opA = A if tA == "N" else A.T
    opB = B if tB == "N" else B.T
    ref = 1.5 * opA.double() @ opB.double() - 0.5 * C.double()
    torch.testing.assert_close(R.double(), ref, rtol=1e-5, atol=1e-4)
    assert [r.kernel for r in simulator] == ["gemm_kernel"]
    assert simulator[0].backend == "simulator"


def test_gemm_bf16_public_api(simulator):
    g = torch.Generator().manual_seed(4)
    A = torch.randn(65, 300, generator=g).bfloat16()
    B = torch.randn(300, 129, generator=g).bfloat16()
    R = trnblas.gemm(1.0, A, B)
    assert R.dtype == torch.bfloat16
    ref = A.double() @ B.double()
    # each bf16 x bf16 product rounded to bf16 on the Tensor Engine (2^-8 of |a_k b_k|, modeled by the
    # emulator: trnsci.nki.emulator.numerics), fp32 accumulation, one bf16 rounding of the result (2^-8 relative)
    mag = A.double().abs() @ B.double().abs()
    assert ((R.double() - ref).abs() <= 2**-8 * ref.abs() + 2**-8 * mag + 1e-3 * ref.abs().max().item()).all()
    assert len(simulator) == 1


def test_gemm_large_k_split_on_host(simulator):
    k = max_k(4) + 100
    A = torch.randn(8, k, generator=torch.Generator().manual_seed(5))
    B = torch.randn(k, 9, generator=torch.Generator().manual_seed(6))
    R = trnblas.gemm(1.0, A, B)
    torch.testing.assert_close(R.double(), A.double() @ B.double(), rtol=1e-5, atol=1e-3)
    assert len(simulator) == 2  # two K chunks, two kernel runs


# ----------------------------------------------------------------- batched GEMM

def test_batched_gemm_kernel_counters():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 150, 70)).astype(np.float32)
    b = rng.standard_normal((3, 150, 520)).astype(np.float32)
    out, prof = nki.profile(batched_gemm_kernel, a, b)
    np.testing.assert_allclose(out, np.einsum("bkm,bkn->bmn", a, b), rtol=1e-5, atol=1e-4)
    assert_counts(prof, batched_gemm_counts(3, 70, 520, 150, 4))


def test_batched_gemm_public_api_one_kernel_call(simulator):
    g = torch.Generator().manual_seed(8)
    A = torch.randn(5, 33, 47, generator=g)
    B = torch.randn(5, 47, 140, generator=g)
    C = torch.randn(5, 33, 140, generator=g)
    R = trnblas.batched_gemm(2.0, A, B, 1.0, C)
    torch.testing.assert_close(R, 2.0 * torch.bmm(A, B) + C, rtol=1e-5, atol=1e-4)
    assert [r.kernel for r in simulator] == ["batched_gemm_kernel"]  # the whole batch in one call


# ----------------------------------------------------------------- SYRK

@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("n,k", [(1000, 70), (130, 257)])
def test_syrk_kernel_counters(n, k, upper):
    x = np.random.default_rng(n + k).standard_normal((k, n)).astype(np.float32)
    out, prof = nki.profile(syrk_kernel, x, upper=upper)
    ref = x.T.astype(np.float64) @ x
    keep = np.triu(np.ones((n, n), bool)) if upper else np.tril(np.ones((n, n), bool))
    np.testing.assert_allclose(out[keep], ref[keep], rtol=1e-5, atol=1e-3)
    assert_counts(prof, syrk_counts(n, k, 4, upper))


def test_syrk_about_half_of_gemm_instructions():
    n, k = 2048, 40  # q = n/512 = 4
    x = np.ones((k, n), np.float32)
    _, ps = nki.profile(syrk_kernel, x, upper=False)
    q = n // 512
    assert ps.instructions["tensor"] == 2 * q * (q + 1)  # tk = 1
    g = gemm_counts(n, n, k, 4)["tensor"]
    assert g == 4 * q * q
    assert ps.instructions["tensor"] / g == pytest.approx((q + 1) / (2 * q))  # 0.625 at n = 2048
    assert ps.hbm_read_bytes == 4 * k * n  # x read once
    assert ps.flops / gemm_counts(n, n, k, 4)["flops"] == pytest.approx((16 + 1) / (2 * 16))


@pytest.mark.parametrize("trans", ["N", "T"])
@pytest.mark.parametrize("uplo", ["U", "L"])
def test_syrk_public_api(simulator, trans, uplo):
    g = torch.Generator().manual_seed(9)
    n, k = 140, 60
    A = torch.randn((n, k) if trans == "N" else (k, n), generator=g)
    C = torch.randn(n, n, generator=g)
    R = trnblas.syrk(0.5, A, 2.0, C, trans=trans, uplo=uplo)
    a = A if trans == "N" else A.T
    full = 0.5 * a.double() @ a.double().T + 2.0 * C.double()
    mask = torch.ones(n, n, dtype=torch.bool).triu() if uplo == "U" else torch.ones(n, n, dtype=torch.bool).tril()
    ref = torch.where(mask, full, C.double())
    torch.testing.assert_close(R.double(), ref, rtol=1e-5, atol=1e-4)
    assert [r.kernel for r in simulator] == ["syrk_kernel"]


@pytest.mark.parametrize("uplo", ["U", "L"])
def test_syrk_kernel_path_without_C_returns_whole_matrix(simulator, uplo):
    """Issue 25: the published trnblas returned the whole A^T A without C; so does the kernel path."""
    A = torch.randn(70, 130, generator=torch.Generator().manual_seed(4))  # ragged n = 130
    R = trnblas.syrk(1.0, A, trans=True, uplo=uplo)
    a = A.double().numpy()
    np.testing.assert_allclose(R.double().numpy(), a.T @ a, rtol=1e-5, atol=1e-4 * 70)  # fp32, k = 70
    assert [r.kernel for r in simulator] == ["syrk_kernel"]


# ----------------------------------------------------------------- TRSM

def _well_conditioned(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, n, generator=g) * (0.5 / n**0.5) + 2.0 * torch.eye(n)


@pytest.mark.parametrize("side", ["L", "R"])
@pytest.mark.parametrize("uplo", ["U", "L"])
@pytest.mark.parametrize("trans", ["N", "T"])
@pytest.mark.parametrize("diag", ["N", "U"])
def test_trsm_vs_scipy(simulator, side, uplo, trans, diag):
    n, r = 300, 45  # three blocks, the last ragged
    A = _well_conditioned(n, 10)
    g = torch.Generator().manual_seed(11)
    B = torch.randn((n, r) if side == "L" else (r, n), generator=g)
    X = trnblas.trsm(1.5, A, B, side=side, uplo=uplo, trans=trans, diag=diag)
    a = A.double().numpy()
    a = np.triu(a) if uplo == "U" else np.tril(a)
    if diag == "U":
        np.fill_diagonal(a, 1.0)
    op = a.T if trans == "T" else a
    lower = (uplo == "L") != (trans == "T")
    b = 1.5 * B.double().numpy()
    if side == "L":
        ref = scipy.linalg.solve_triangular(op, b, lower=lower)
    else:  # X op = b  <=>  op^T X^T = b^T
        ref = scipy.linalg.solve_triangular(op.T, b.T, lower=not lower).T
    # fp32 kernel with float64-inverted diagonal blocks: relative error ~ cond * 2^-24 * sqrt(n);
    # cond(op(A)) < 2 here, so 1e-5 relative to max|X| leaves a wide margin.
    err = np.abs(X.double().numpy() - ref).max() / np.abs(ref).max()
    assert err < 1e-5
    assert [k.kernel for k in simulator] == ["trsm_kernel"]


@pytest.mark.parametrize("n,r", [(300, 40), (128, 600), (5, 1)])
def test_trsm_kernel_counters(n, r):
    from trnblas._nki.level3 import trsm_operands

    A = _well_conditioned(n, n)
    B = torch.randn(n, r, generator=torch.Generator().manual_seed(12))
    w, rhs, undo = trsm_operands(1.0, A, B, "L", "L", "N", "N")
    out, prof = nki.profile(trsm_kernel, w, rhs)
    ref = scipy.linalg.solve_triangular(np.tril(A.double().numpy()), B.double().numpy(), lower=True)
    assert np.abs(out - ref).max() / np.abs(ref).max() < 1e-5
    assert_counts(prof, trsm_counts(n, r))


def test_float64_goes_to_torch_not_kernel():
    A = torch.randn(20, 20, dtype=torch.float64)
    with trnsci.use_backend("simulator"), nki.capture() as runs:
        R = trnblas.gemm(1.0, A, A)
    torch.testing.assert_close(R, A @ A)
    assert runs == []  # the kernel takes fp32/bf16 only; fp64 is never downcast


def test_oversized_calls_plan_onto_torch_without_touching_the_kernel(monkeypatch):
    """Sizes beyond a kernel's SBUF plan route to torch up front (no fallback warning)."""
    import warnings

    import trnblas.kernels.trsm as trsm_mod

    monkeypatch.setattr(trsm_mod, "MAX_N", 100)
    A = torch.eye(130) * 2.0
    B = torch.ones(130, 3)
    with trnsci.use_backend("simulator"), trnsci.nki.capture() as runs, warnings.catch_warnings():
        warnings.simplefilter("error")
        X = trnblas.trsm(1.0, A, B)
    assert runs == []
    torch.testing.assert_close(X, B / 2.0)  # exact: division by 2 is exact in fp32


# ----------------------------------------------------------------- properties

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 300), n=st.integers(1, 600), k=st.integers(1, 300),
    transA=st.sampled_from(["N", "T"]), transB=st.sampled_from(["N", "T"]),
    alpha=st.sampled_from([1.0, -0.5]), beta=st.sampled_from([0.0, 2.0]),
)
def test_gemm_kernel_any_shape_matches_float64(m, n, k, transA, transB, alpha, beta):
    """Any ragged shape and transposition: the kernel's answer equals float64 BLAS to fp32 accuracy,
    and its counters equal the closed form."""
    g = torch.Generator().manual_seed(m * 7919 + n * 31 + k)
    A = torch.randn((m, k) if transA == "N" else (k, m), generator=g)
    B = torch.randn((k, n) if transB == "N" else (n, k), generator=g)
    C = torch.randn(m, n, generator=g)
    with trnsci.use_backend("simulator"), nki.capture() as runs:
        got = trnblas.gemm(alpha, A, B, beta, C, transA, transB)
    assert [r.kernel for r in runs] == ["gemm_kernel"]
    an, bn = A.double().numpy(), B.double().numpy()
    ref = scipy.linalg.blas.dgemm(alpha, an, bn, beta, C.double().numpy(),
                                  trans_a=transA == "T", trans_b=transB == "T")
    # Standard bound for a length-k fp32 dot product: |err| <= k u |alpha| (|op(A)| |op(B)|)_ij,
    # u = 2^-24, plus a few roundings of the alpha/beta update; elementwise, so it stays tight.
    u = 2.0**-24
    opa = an if transA == "N" else an.T
    opb = bn if transB == "N" else bn.T
    absprod = abs(alpha) * (np.abs(opa) @ np.abs(opb))
    bound = (k + 2) * u * absprod + 4 * u * (np.abs(ref) + abs(beta) * np.abs(C.double().numpy()))
    assert np.all(np.abs(got.double().numpy() - ref) <= bound)
    assert_counts(runs[0].profile, gemm_counts(m, n, k, 4))


def test_gemm_ex_feeds_bf16_operands_to_the_tensor_engine(simulator):
    """gemm_ex(bf16 inputs, compute float32): the kernel reads bf16 (2 bytes/element), keeps fp32."""
    m, n, k = 70, 130, 300
    g = torch.Generator().manual_seed(5)
    A = torch.randn(m, k, generator=g).to(torch.bfloat16)
    B = torch.randn(k, n, generator=g).to(torch.bfloat16)
    R = trnblas.gemm_ex(1.0, A, B, out_dtype=torch.float32)
    assert R.dtype == torch.float32
    assert [r.kernel for r in simulator] == ["gemm_kernel"]
    assert_counts(simulator[0].profile, gemm_counts(m, n, k, 2))  # bf16 traffic, not widened fp32
    ref = A.double().numpy() @ B.double().numpy()  # bf16 values are exact in float64
    mag = np.abs(A.double().numpy()) @ np.abs(B.double().numpy())
    # the Tensor Engine rounds each bf16 x bf16 product to bf16 (2^-8 of |a_k b_k|; trn1/trn2, modeled by
    # the emulator: trnsci.nki.emulator.numerics), then accumulates the k terms in fp32
    assert np.all(np.abs(R.double().numpy() - ref) <= (2.0**-8 + (k + 1) * 2.0**-24) * mag)
    # exact products (a CPU's fp32 fallback): fp32 accumulation over k terms only
    bound = (k + 1) * 2.0**-24 * mag
    with trnsci.use_backend("torch"):
        T = trnblas.gemm_ex(1.0, A, B, out_dtype=torch.float32)
    assert np.all(np.abs(T.double().numpy() - ref) <= bound)
    with bf16_products("exact"):
        E = trnblas.gemm_ex(1.0, A, B, out_dtype=torch.float32)
    assert np.all(np.abs(E.double().numpy() - ref) <= bound)  # the kernel with exact products: same bound


@pytest.mark.parametrize("which", ["gemm", "batched", "syrk", "trsm"])
def test_plan_predicts_the_kernel_counters(simulator, which):
    """A plan's closed-form kernel figures are what the emulator counts when the call runs."""
    g = torch.Generator().manual_seed(3)
    if which == "gemm":
        A, B = torch.randn(150, 260, generator=g), torch.randn(260, 90, generator=g)
        p, run = trnblas.plan_gemm(A, B), lambda: trnblas.gemm(1.0, A, B)
    elif which == "batched":
        A, B = torch.randn(3, 40, 30, generator=g), torch.randn(3, 30, 20, generator=g)
        p, run = trnblas.plan_gemm(A, B), lambda: trnblas.batched_gemm(1.0, A, B)
    elif which == "syrk":
        A = torch.randn(200, 140, generator=g)
        p, run = trnblas.plan_syrk(A, uplo="lower"), lambda: trnblas.syrk(1.0, A, uplo="lower")
    else:
        T = torch.eye(150) * 3 + torch.randn(150, 150, generator=g).triu() * 0.1
        B = torch.randn(150, 7, generator=g)
        p, run = trnblas.plan_trsm(T, B), lambda: trnblas.trsm(1.0, T, B)
    run()
    assert [r.kernel for r in simulator] == [p.kernel["name"]]
    prof = simulator[0].profile
    assert (prof.hbm_read_bytes, prof.hbm_write_bytes, prof.instructions["tensor"]) == (
        p.kernel["hbm_read_bytes"], p.kernel["hbm_write_bytes"], p.kernel["tensor"])
    assert "closed form" in str(p)
