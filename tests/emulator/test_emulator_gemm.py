"""Counters of the reference tiled GEMM against its closed form, and speed."""


import ml_dtypes
import numpy as np
import pytest
from ref_gemm import expected_counts, gemm_kernel

from trnsci.nki.emulator import bf16_products, nki, profile


def _operands(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    return a, b


def _check(M, N, K, target="trn1"):
    a, b = _operands(M, N, K)
    c, p = profile(gemm_kernel, np.ascontiguousarray(a.T), b, target=target)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4 * np.sqrt(K))
    exp = expected_counts(M, N, K)
    assert p.hbm_read_bytes == exp["hbm_read_bytes"]
    assert p.hbm_write_bytes == exp["hbm_write_bytes"]
    assert p.instructions["tensor"] == exp["tensor"]
    assert p.dma_transfers == p.instructions["dma"] == exp["dma_transfers"]
    assert p.flops == exp["flops"]
    return p


def test_gemm_1024_counters_match_closed_form():
    p = _check(1024, 1024, 1024)
    assert p.hbm_read_bytes == 4 * (1024 * 1024 + 8 * 1024 * 1024) == 37_748_736
    assert p.hbm_write_bytes == 4_194_304
    assert p.instructions["tensor"] == 128
    assert p.instructions["vector"] == 16  # one PSUM -> SBUF copy per output tile
    assert p.instructions["scalar"] == p.instructions["gpsimd"] == 0
    # one 128x512 fp32 PSUM bank per column block, two column blocks
    assert p.peak_psum_bytes == 2 * 2048
    assert 0 < p.tensor_engine_utilization() <= 1


def test_gemm_ragged_edges_closed_form():
    _check(200, 700, 300)
    _check(1, 1, 1)


def test_gemm_bf16_inputs():
    M = N = K = 256
    a, b = _operands(M, N, K, seed=1)
    at = np.ascontiguousarray(a.T).astype(ml_dtypes.bfloat16)
    bb = b.astype(ml_dtypes.bfloat16)
    c, p = profile(gemm_kernel, at, bb)
    ref = at.astype(np.float64).T @ bb.astype(np.float64)
    # trn1/trn2 round each bf16 x bf16 product to bf16 (u = 2**-8) before fp32 accumulation
    # (emulator numerics.py): |err| <= (u + K u32) sum_k |a_k b_k|, u32 = 2**-24, first order
    bound = (2.0**-8 + K * 2.0**-24) * (np.abs(at.astype(np.float64)).T @ np.abs(bb.astype(np.float64)))
    assert (np.abs(c - ref) <= bound).all()
    assert np.abs(c - ref).max() > 1e-3  # the product rounding shows
    with bf16_products("exact"):  # exact products: only the fp32 accumulation error (K u32 |terms|)
        c_exact = profile(gemm_kernel, at, bb)[0]
    np.testing.assert_allclose(c_exact, ref, rtol=1e-4, atol=1e-3)
    exp = expected_counts(M, N, K, in_bytes=2)
    assert p.hbm_read_bytes == exp["hbm_read_bytes"]
    assert p.flops_bf16 == p.flops and p.flops_fp32 == 0
    # bf16 runs the Tensor Engine 4x faster than fp32 in the model
    _, p32 = profile(gemm_kernel, np.ascontiguousarray(a.T), b)
    assert p.engine_time_s["tensor"] == pytest.approx(p32.engine_time_s["tensor"] / 4)


def test_gemm_via_jit_matches_numpy():
    a, b = _operands(128, 512, 256, seed=2)
    c = nki.jit(gemm_kernel)(np.ascontiguousarray(a.T), b)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.slow
def test_gemm_2048_counters_and_result():
    """The 2048^3 case the speed budget is about (timed in benchmarks/bench_emulator.py)."""
    M = N = K = 2048
    a, b = _operands(M, N, K, seed=3)
    at = np.ascontiguousarray(a.T)
    c, p = profile(gemm_kernel, at, b)
    exp = expected_counts(M, N, K)
    assert p.hbm_read_bytes == exp["hbm_read_bytes"] and p.instructions["tensor"] == exp["tensor"]
    np.testing.assert_allclose(c[:64], a[:64].astype(np.float64) @ b, rtol=1e-4, atol=2e-3)
