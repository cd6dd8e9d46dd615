"""Precision modes through the public API, and plans (cache, execute, backend/reason, tables).

References: scipy.fft in float64 of the same (float32-representable) data.
Tolerances: the per-algorithm bounds of trnfft.algorithms, loosened to a
normwise max-abs measure (x sqrt(n) is not needed: max-abs / max-abs is at
most the 2-norm ratio times sqrt(n_out), and we use fixed generous factors
stated per mode below).
"""

import numpy as np
import pytest
import scipy.fft as sf
import torch

import trnfft
from trnfft import algorithms as A

# normwise max-abs relative error allowed per mode for float32 data, n <= 4099:
# fast/double/kahan: 1e-5 (float32 rounding of the output dominates "double"; bound 30 u log2 m ~ 2.5e-5
# in 2-norm for Bluestein is never approached in practice: measured < 3e-7); bf16: 1.5e-2 (2 u_b per
# GEMM stage, <= 5 stages); bf16_refined: 2e-4 (4 u_b^2 per stage + float32).
TOL = {"fast": 1e-5, "double": 1e-6, "kahan": 1e-5, "bf16": 1.5e-2, "bf16_refined": 2e-4}


def rel(y, ref):
    y = y.detach().numpy() if isinstance(y, torch.Tensor) else y
    return np.abs(y - ref).max() / np.abs(ref).max()


@pytest.mark.parametrize("mode", list(TOL))
def test_precision_modes_public_functions(mode):
    r = np.random.default_rng(1)
    for n in [5, 16, 97, 360, 1024]:
        x = (r.standard_normal((2, n)) + 1j * r.standard_normal((2, n))).astype(np.complex64)
        x64 = x.astype(np.complex128)
        xr = x.real.copy()
        t, tr = torch.from_numpy(x), torch.from_numpy(xr)
        # norm scaling is shared code (tested for every norm in test_fft_transforms): one norm per slow mode
        for norm in ["backward", "ortho"] if mode in ("fast", "double") else ["ortho"]:
            y = trnfft.fft(t, norm=norm, precision=mode)
            assert y.dtype == torch.complex64
            assert rel(y, sf.fft(x64, norm=norm)) <= TOL[mode], (mode, n)
            assert rel(trnfft.ifft(t, norm=norm, precision=mode), sf.ifft(x64, norm=norm)) <= TOL[mode]
            assert rel(trnfft.rfft(tr, norm=norm, precision=mode), sf.rfft(xr.astype(np.float64), norm=norm)) \
                <= TOL[mode]
            h = sf.rfft(xr.astype(np.float64)).astype(np.complex64)
            for m in (n, n + 1):
                assert rel(trnfft.irfft(torch.from_numpy(h), m, norm=norm, precision=mode),
                           sf.irfft(h.astype(np.complex128), m, norm=norm)) <= TOL[mode]
                assert rel(trnfft.hfft(torch.from_numpy(h), m, norm=norm, precision=mode),
                           sf.hfft(h.astype(np.complex128), m, norm=norm)) <= TOL[mode]
            assert rel(trnfft.ihfft(tr, norm=norm, precision=mode), sf.ihfft(xr.astype(np.float64), norm=norm)) \
                <= TOL[mode]
    y3 = (r.standard_normal((3, 6, 10))).astype(np.float32)
    assert rel(trnfft.rfftn(torch.from_numpy(y3), precision=mode), sf.rfftn(y3.astype(np.float64))) <= TOL[mode]
    assert rel(trnfft.fftn(torch.from_numpy(y3), dim=(0, 2), precision=mode),
               sf.fftn(y3.astype(np.float64), axes=(0, 2))) <= TOL[mode]
    Y = sf.rfftn(y3.astype(np.float64), axes=(0, 1, 2)).astype(np.complex64)
    assert rel(trnfft.irfftn(torch.from_numpy(Y), s=(3, 6, 10), precision=mode),
               sf.irfftn(Y.astype(np.complex128), s=(3, 6, 10))) <= TOL[mode]


def test_modes_differ_where_they_should():
    # a test that can fail: bf16 really is less accurate than fast, refined sits in between
    r = np.random.default_rng(3)
    x = (r.standard_normal((4, 360)) + 1j * r.standard_normal((4, 360))).astype(np.complex64)
    ref = sf.fft(x.astype(np.complex128))
    t = torch.from_numpy(x)
    e = {m: rel(trnfft.fft(t, precision=m), ref) for m in TOL}
    assert e["bf16"] > 1e-3 > e["bf16_refined"] > 1e-6 > e["fast"]
    assert e["double"] <= e["fast"] * 1.01


def test_float64_stays_float64_in_every_mode():
    x = torch.randn(3, 97, dtype=torch.float64)
    ref = sf.fft(x.numpy())
    for m in TOL:
        y = trnfft.fft(x, precision=m)
        assert y.dtype == torch.complex128 and rel(y, ref) <= 1e-12


def test_set_get_use_precision():
    assert trnfft.get_precision() == "fast"
    x = torch.randn(2, 360)
    ref = sf.fft(x.double().numpy())
    try:
        trnfft.set_precision("bf16")
        assert trnfft.get_precision() == "bf16"
        assert rel(trnfft.fft(x), ref) > 1e-3  # the default now is bf16
        assert rel(trnfft.fft(x, precision="fast"), ref) < 1e-5  # per call wins
    finally:
        trnfft.set_precision("fast")
    with trnfft.use_precision("kahan"):
        assert trnfft.get_precision() == "kahan"
    assert trnfft.get_precision() == "fast"
    with pytest.raises(ValueError, match="mode"):
        trnfft.set_precision("quad")
    with pytest.raises(ValueError, match="precision"):
        trnfft.fft(x, precision="triple")


def test_plan_execute_matches_function_and_caches():
    trnfft.clear_plan_cache()
    p = trnfft.create_plan(97)
    assert p is trnfft.create_plan(97)
    assert p.backend == "torch" and "NeuronCore" in p.reason and p.algorithms == ("bluestein",)
    assert any(k.startswith("chirp") for k in p.tables)
    x = torch.randn(5, 97, dtype=torch.complex64)
    assert torch.equal(p.execute(x), trnfft.fft(x))
    assert torch.equal(p(x[0]), trnfft.fft(x[0]))  # batch shape is free
    pi = trnfft.create_plan(97, inverse=True)
    assert pi.kind == "ifft"
    assert rel(pi.execute(p.execute(x)), x.numpy()) < 1e-5
    pr = trnfft.create_plan((4, 6, 10), kind="irfftn", dtype=torch.complex128, s=(4, 6, 18))
    X = torch.fft.rfftn(torch.randn(4, 6, 18, dtype=torch.float64))
    X = X[..., :10]
    assert rel(pr.execute(X), sf.irfftn(X.numpy(), s=(4, 6, 18))) < 1e-12
    xn = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    y = trnfft.create_plan(64, kind="rfft").execute(xn)
    assert isinstance(y, np.ndarray) and rel(y, sf.rfft(xn.astype(np.float64))) < 1e-5
    p2 = trnfft.create_plan((8, 4096), dim=1, precision="bf16")
    assert p2.algorithms == ("stockham",) and "bf16" in repr(p2) and "[128, 32]" in repr(p2)
    assert trnfft.create_plan(16).algorithms == ("dft_gemm",)
    with pytest.raises(ValueError, match="lengths"):
        p.execute(torch.randn(3, 96, dtype=torch.complex64))
    with pytest.raises(TypeError, match="made for"):
        p.execute(torch.randn(3, 97, dtype=torch.complex128))
    with pytest.raises(ValueError, match="kind"):
        trnfft.create_plan(8, kind="dct")
    with pytest.raises(ValueError, match="shape"):
        trnfft.create_plan(0)
    with pytest.raises(TypeError, match="dtype"):
        trnfft.create_plan(8, kind="rfft", dtype=torch.complex64)


def test_plan_cache_is_lru_bounded():
    from trnfft import plan as P

    trnfft.clear_plan_cache()
    first = trnfft.create_plan(2)
    for n in range(3, 3 + P.PLAN_CACHE_SIZE):
        trnfft.create_plan(n)
    assert len(P._cache) == P.PLAN_CACHE_SIZE
    assert trnfft.create_plan(2) is not first  # evicted, rebuilt
    trnfft.clear_plan_cache()
    assert len(P._cache) == 0 and A.dft_tables.cache_info().currsize == 0
