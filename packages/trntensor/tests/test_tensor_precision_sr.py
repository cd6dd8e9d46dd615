"""einsum's precision="sr" (stochastic rounding of a float32 accumulation) and target_forward_error=.

References are independent: float64 NumPy contractions, and the two bfloat16 /
float16 neighbours of each value computed from its bits (bfloat16: the upper
16 bits of the float32 pattern) or by numpy.nextafter in float16.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnsci
import trntensor
from trnsci import nki
from trntensor.einsum import _stochastic_round

U_BF16, U_F16, U_F32, U_F64 = 2.0**-8, 2.0**-11, 2.0**-24, 2.0**-53


def _bf16_neighbours(x32):
    """(toward zero, away from zero) bfloat16 neighbours of float32 values, as float64, from their bits."""
    bits = x32.view(np.uint32)
    low = (bits & np.uint32(0xFFFF0000)).view(np.float32).astype(np.float64)
    exact = (bits & np.uint32(0xFFFF)) == 0
    high = np.where(exact, low, ((bits & np.uint32(0xFFFF0000)) + np.uint32(0x10000)).view(np.float32))
    return low, high.astype(np.float64)


def test_stochastic_round_bf16_picks_a_neighbour_and_is_unbiased():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(64) * 10.0 ** rng.integers(-3, 4, 64)).astype(np.float32)
    x[:4] = [1.0, -2.5, 0.0, 1.0 + 2.0**-7]  # exactly representable: never moved
    lo, hi = _bf16_neighbours(x)
    n = 4000
    X = torch.from_numpy(x).expand(n, -1).contiguous()
    torch.manual_seed(1)
    R = _stochastic_round(X, torch.bfloat16).double().numpy()
    assert np.all((R == lo) | (R == hi))
    assert np.all(R[:, :4] == x[:4])
    # E[R] = x: each draw is off by at most one ulp (hi - lo), so the mean of n draws has a standard
    # deviation <= (hi - lo) / (2 sqrt(n)); 6 of them never fail by chance (p < 1e-8 per entry)
    assert np.all(np.abs(R.mean(0) - x) <= 6 * np.abs(hi - lo) / (2 * np.sqrt(n)) + 1e-30)
    # and it is not round-to-nearest: an entry 1/8 of an ulp above 1 goes up in about 1/8 of the draws
    y = torch.full((n,), 1.0 + 2.0**-10)
    up = (_stochastic_round(y, torch.bfloat16).double() > 1.0).double().mean().item()
    assert abs(up - 0.125) < 6 * np.sqrt(0.125 * 0.875 / n)


def test_stochastic_round_f16_neighbours_from_numpy():
    rng = np.random.default_rng(2)
    x = rng.uniform(-300, 300, 200).astype(np.float32)
    near = x.astype(np.float16)
    other = np.nextafter(near, np.where(near.astype(np.float32) < x, np.float16(np.inf), np.float16(-np.inf)))
    torch.manual_seed(3)
    R = _stochastic_round(torch.from_numpy(x).expand(500, -1).contiguous(), torch.float16).numpy()
    exact = near.astype(np.float32) == x
    assert np.all((R == near) | ((R == other) & ~exact))
    assert np.all(np.abs(R.astype(np.float64).mean(0) - x)
                  <= 6 * np.abs(other.astype(np.float64) - near) / (2 * np.sqrt(500)) + 1e-12)


def test_einsum_sr_bf16_k512_meets_its_bound_and_is_unbiased():
    g = torch.Generator().manual_seed(4)
    A = torch.randn(40, 512, generator=g).bfloat16()
    B = torch.randn(512, 30, generator=g).bfloat16()
    a, b = A.double().numpy(), B.double().numpy()
    ref, mag = a @ b, np.abs(a) @ np.abs(b)
    R = trntensor.einsum("ik,kj->ij", A, B, precision="sr")
    assert R.dtype == torch.bfloat16
    # float32 accumulation (512 * 2^-24) and one stochastic rounding (< one bf16 ulp = 2 * 2^-8 relative)
    assert np.all(np.abs(R.double().numpy() - ref) <= (512 * U_F32 + 2 * U_BF16) * mag)
    # one product 1 + 2^-10 (1/8 of a bf16 ulp above 1): round-to-nearest always gives 1, "sr" the mean
    x = torch.tensor([1.0, 2.0**-10], dtype=torch.bfloat16)
    one = torch.ones(2, dtype=torch.bfloat16)
    n = 3000
    vals = np.array([float(trntensor.einsum("i,i->", x, one, precision="sr")) for _ in range(n)])
    assert set(np.unique(vals)) <= {1.0, 1.0 + 2.0**-7}
    assert abs(vals.mean() - (1 + 2.0**-10)) < 6 * 2.0**-7 * np.sqrt(0.125 * 0.875 / n)
    assert float(trntensor.einsum("i,i->", x, one)) == 1.0  # "fast": nearest


def test_einsum_sr_on_float32_and_float64_is_fast():
    g = torch.Generator().manual_seed(5)
    for dt in (torch.float32, torch.float64):
        A, B = torch.randn(9, 17, generator=g, dtype=dt), torch.randn(17, 4, generator=g, dtype=dt)
        assert torch.equal(trntensor.einsum("ij,jk->ik", A, B, precision="sr", autotune=False),
                           trntensor.einsum("ij,jk->ik", A, B, autotune=False))


@pytest.mark.parametrize("dtype,K,target,mode", [
    (torch.bfloat16, 512, 3.0, "fast"),       # fast bound 512 * 2^-8 = 2.0
    (torch.bfloat16, 512, 0.05, "sr"),        # sr bound 512 * 2^-24 + 2^-7 = 0.0078
    (torch.float32, 512, 1e-4, "fast"),       # 512 * 2^-24 = 3.1e-5
    (torch.float32, 512, 1e-6, "kahan"),      # 512 * 2^-53 + 2^-24 = 6e-8
    (torch.float64, 512, 1e-15, "dd"),        # kahan 5.7e-14 > 1e-15 >= dd's 2^-52
])
def test_target_forward_error_picks_the_cheapest_mode_that_meets_it(dtype, K, target, mode):
    from trntensor.einsum import _choose_precision

    assert _choose_precision(target, dtype, K, "t") == mode
    g = torch.Generator().manual_seed(6)
    A = torch.randn(7, K, generator=g).to(dtype)
    B = torch.randn(K, 5, generator=g).to(dtype)
    a, b = A.double().numpy(), B.double().numpy()
    ref, mag = a @ b, np.abs(a) @ np.abs(b)
    R = trntensor.einsum("ik,kj->ij", A, B, target_forward_error=target)
    assert R.dtype == dtype
    assert np.all(np.abs(R.double().numpy() - ref) <= target * mag)
    if mode != "sr":  # the deterministic modes: the call ran the chosen one
        assert torch.equal(R, trntensor.einsum("ik,kj->ij", A, B, precision=mode))


def test_target_forward_error_below_every_mode_and_bad_arguments():
    A = torch.ones(3, 4, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="target_forward_error=1e-05.*dtype="):
        trntensor.einsum("ij,jk->ik", A, A.T, target_forward_error=1e-5)  # a bf16 result is 2^-8 at best
    with pytest.raises(ValueError, match="not both"):
        trntensor.einsum("ij,jk->ik", A, A.T, precision="sr", target_forward_error=0.1)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="target_forward_error"):
            trntensor.einsum("ij,jk->ik", A, A.T, target_forward_error=bad)
    for bad in ("0.1", True, [0.1]):
        with pytest.raises(TypeError, match="target_forward_error"):
            trntensor.einsum("ij,jk->ik", A, A.T, target_forward_error=bad)
    with pytest.raises(TypeError, match="target_forward_error"):
        trntensor.einsum("ij,jk->ik", torch.ones(2, 2, dtype=torch.int64), torch.ones(2, 2, dtype=torch.int64),
                         target_forward_error=0.1)
    with pytest.raises(ValueError, match="precision"):
        trntensor.einsum("ij,jk->ik", A, A.T, precision="round")
    with pytest.raises(ValueError, match="not both"):
        trntensor.multi_einsum(("ij,jk->ik", A, A.T), precision="fast", target_forward_error=0.1)


def test_multi_einsum_target_forward_error_per_contraction():
    g = torch.Generator().manual_seed(7)
    X = [torch.randn(6, 256, generator=g).bfloat16() for _ in range(3)]
    Y = torch.randn(256, 5, generator=g).bfloat16()
    Z = torch.randn(5, 5, generator=g, dtype=torch.float64)
    outs = trntensor.multi_einsum(*[("ik,kj->ij", x, Y) for x in X], ("ij,jk->ik", Z, Z),
                                  target_forward_error=0.02)
    for x, R in zip(X, outs[:3]):  # bf16, K 256: "fast" (256 * 2^-8 = 1) misses, "sr" (0.0078) meets
        a, b = x.double().numpy(), Y.double().numpy()
        assert R.dtype == torch.bfloat16
        assert np.all(np.abs(R.double().numpy() - a @ b) <= 0.02 * (np.abs(a) @ np.abs(b)))
    z = Z.numpy()
    assert np.all(np.abs(outs[3].numpy() - z @ z) <= 1e-14 * (np.abs(z) @ np.abs(z)))


@pytest.mark.simulator
def test_einsum_sr_bf16_runs_the_gemm_on_a_kernel():
    g = torch.Generator().manual_seed(8)
    A = torch.randn(300, 260, generator=g).bfloat16()
    B = torch.randn(260, 200, generator=g).bfloat16()
    with trnsci.use_backend("simulator"):
        with nki.capture() as runs:
            R = trntensor.einsum("ik,kj->ij", A, B, precision="sr")
    assert "gemm_kernel" in [r.kernel for r in runs]
    a, b = A.double().numpy(), B.double().numpy()
    assert R.dtype == torch.bfloat16
    assert np.all(np.abs(R.double().numpy() - a @ b) <= (260 * U_F32 + 2 * U_BF16) * (np.abs(a) @ np.abs(b)))
