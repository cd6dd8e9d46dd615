"""Multi-core programs, liveness, Python truth and transpose mode, in AWS's kernel style (issue #30).

The kernels (``aws_style_lnc_kernels.py``, plain ``import nki``) are written
the way nki-library's MoE / MLP / attention kernels are; each result is
compared with NumPy.  Float32 data whose every operation is exact (scaling by
2, adding two values, copies, transposes) is compared exactly; the matmuls
sum K = 64 products of standard normals in fp32 against float64 NumPy
(error ~ sqrt(K) * 2**-24 * |terms| ~ 1e-6), checked at rtol 1e-5.
"""

import importlib
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import trnsci.nki as tn
from trnsci.nki.emulator import NkiValidationError, profile

HERE = pathlib.Path(__file__).parent
RNG = np.random.default_rng(30)
F32 = np.float32
BF16 = ml_dtypes.bfloat16


@pytest.fixture(scope="module")
def K():
    before = sys.modules.get("nki")
    tn.install_as_nki()
    sys.path.insert(0, str(HERE))
    try:
        yield importlib.import_module("aws_style_lnc_kernels")
    finally:
        sys.path.remove(str(HERE))
        sys.modules.pop("aws_style_lnc_kernels", None)
        tn.uninstall_nki()
        assert sys.modules.get("nki") is before


def test_sendrecv_exchanges_tiles_between_the_two_programs(K):
    x = RNG.standard_normal((2, 128, 48)).astype(F32)
    out, prof = profile(K.lnc_pair_sum[2], x, target="trn2")
    both = 2 * x[0] + 2 * x[1]
    np.testing.assert_array_equal(out, np.stack([both, both]))
    assert prof.by_instruction["nisa.sendrecv@dma"] == 2  # one per program


def test_shard_on_i_swiglu_keeps_the_kernels_bf16_intermediates(K):
    """nki-library's moe_cte differs from its fp32 torch reference by a few bf16 ulps; the emulator
    reproduces the kernel's own rounding chain. Reference: an independent NumPy model of that chain
    (float64 matmuls, ml_dtypes rounding at each bf16 destination), with exact products. Elements
    may differ only where fp32 accumulation order moves a value across a bf16 rounding boundary:
    at most 1 bf16 ulp, in under 1% of the elements (measured: none of 16384). The fp32-throughout
    model (no intermediate roundings) must differ far more, or this test could not see the chain."""
    from trnsci.nki.emulator import bf16_products

    h = t = 128
    i = 256
    rng = np.random.default_rng(7)
    xT = rng.standard_normal((h, t)).astype(BF16)
    wg, wu = (0.1 * rng.standard_normal((h, i))).astype(BF16), (0.1 * rng.standard_normal((h, i))).astype(BF16)
    wd = (0.1 * rng.standard_normal((i, h))).astype(BF16)
    aff = rng.uniform(0.1, 1.0, (t, 1)).astype(F32)
    prev = rng.standard_normal((t, h)).astype(BF16)
    with bf16_products("exact"):
        out = profile(K.lnc_shard_on_i_swiglu[2], xT, wg, wu, wd, aff, prev, target="trn2")[0]
    out = out.astype(np.float64)

    def model(rounded):
        rb = (lambda a: np.asarray(a, F32).astype(BF16).astype(np.float64)) if rounded else (lambda a: a)
        x = xT.astype(np.float64).T
        parts = []
        for r in (0, 1):
            cols = slice(r * 128, (r + 1) * 128)
            g = (x @ wg[:, cols].astype(np.float64)).astype(F32).astype(np.float64)
            u = (x @ wu[:, cols].astype(np.float64)).astype(F32).astype(np.float64)
            m = rb(rb(g / (1.0 + np.exp(-g))) * u)
            parts.append(rb((m @ wd[cols].astype(np.float64)).astype(F32)))
        s = rb(parts[0] + parts[1])
        return np.asarray(s * aff.astype(np.float64) + prev.astype(np.float64), F32).astype(BF16).astype(np.float64)

    ref = model(True)
    diff = np.abs(out - ref)
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(ref), 1e-30))) - 7)
    assert np.all(diff <= ulp * 1.0001)
    assert np.mean(diff > 0) < 0.01
    assert np.mean(np.abs(out - model(False)) > 0) > 0.2


def test_core_barrier_orders_the_programs_writes_and_reads(K):
    """Without the barrier (programs one after another) core 0 would read core 1's half unwritten."""
    x = RNG.standard_normal((256, 32)).astype(F32)
    out = profile(K.lnc_barrier_swap[2], x, target="trn2")[0]
    np.testing.assert_array_equal(out, np.concatenate([x[128:], x[:128]]))


def test_multicore_rules(K):
    x = RNG.standard_normal((2, 128, 8)).astype(F32)
    with pytest.raises(NkiValidationError, match="multi-core deadlock: .*program 0 waits in nisa.sendrecv"):
        profile(K.lnc_unmatched_send[2], x[0], target="trn2")
    with pytest.raises(NkiValidationError, match="nisa.sendrecv synchronises the programs of a multi-core launch"):
        profile(K.lnc_pair_sum, x, target="trn2")  # launched without a grid
    with pytest.raises(NkiValidationError, match="nisa.sendrecv: not available on NeuronCore-v2"):
        profile(K.lnc_pair_sum[2], x, target="trn1")
    def lone_barrier(a):  # one program: nothing to wait for (nki-library's router_topk does this at LNC=1)
        import nki.isa as nisa
        import nki.language as nl

        nisa.core_barrier(a, (0, 1))
        o = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=o, src=t)
        return o

    out, prof = profile(tn.nki.jit(lone_barrier), x[0], target="trn2")
    np.testing.assert_array_equal(out, x[0])
    assert prof.by_instruction["nisa.core_barrier@gpsimd"] == 1
    with pytest.raises(NkiValidationError, match="nisa.core_barrier: only cores=\\(0, 1\\)"):
        def bad(a):
            import nki.isa as nisa

            nisa.core_barrier(a, (0, 2))
        profile(tn.nki.jit(bad)[2], x, target="trn2")


def test_psum_capacity_by_liveness_in_an_expert_loop(K):
    """Twelve expert GEMMs, each PSUM tile evacuated right after its matmul: runs (one bank live);
    the same GEMMs with every evacuation after all matmuls need 12 banks > 8 and are refused,
    naming the tiles live at the peak."""
    x = RNG.standard_normal((64, 128)).astype(F32)
    w = RNG.standard_normal((12, 64, 256)).astype(F32)
    out, prof = profile(K.expert_gemms, x, w)
    ref = np.einsum("km,ekn->emn", x.astype(np.float64), w)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert prof.peak_psum_bytes == 256 * 4
    with pytest.raises(NkiValidationError, match="PSUM capacity exceeded on trn1: .*12 live PSUM banks") as info:
        profile(K.expert_gemms_all_live, x, w)
    assert "'acc_e0' (128, 256) float32" in str(info.value) and "'acc_e11'" in str(info.value)


def test_bf16_transpose_mode_python_truth_and_optional_fields(K):
    x = RNG.standard_normal((128, 96)).astype(BF16)
    b = RNG.standard_normal((128, 96)).astype(BF16)
    x[3, 5] = np.nan  # transpose mode is bit-accurate for NaN/Inf on NeuronCore-v3
    out = profile(K.pe_transpose_bf16, x, target="trn2")[0]
    assert out.dtype == BF16
    np.testing.assert_array_equal(out.view(np.uint16), x.T.view(np.uint16))
    with_bias = profile(K.pe_transpose_bf16, x, bias=b, target="trn2")[0]
    ref = (x.astype(F32) + b.astype(F32)).astype(BF16).T  # the Vector Engine adds in fp32, rounds to bf16
    np.testing.assert_array_equal(with_bias.view(np.uint16), ref.view(np.uint16))
    # NeuronCore-v2 has no transpose mode: a bf16 dst stays refused there (dst float32 on v2/v3)
    with pytest.raises(NkiValidationError, match="nisa.nc_matmul: operand 'dst' .* must be float32$"):
        profile(K.pe_transpose_bf16, x, target="trn1")


def test_raw_integer_enums_stay_refused_naming_the_member():
    """nki-library's token-generation norms pass dge_mode=3; NKI 0.3's migration guide refuses raw
    integers for enum parameters (nki/migration/index.rst)."""
    from trnsci.nki.emulator import nisa, nl, simulate

    def k(a):
        t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, dge_mode=3)

    with pytest.raises(NkiValidationError, match="got 3; write nisa.dge_mode.none .*Integer enum constants"):
        simulate(k, np.zeros((4, 4), F32))


def test_hbm_outputs_stay_refused_citing_the_release_notes():
    from trnsci.nki.emulator import EmulatorError, nisa, nl, simulate

    def k(a):
        t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.hbm)
        nisa.dma_copy(dst=o, src=t)
        return o

    with pytest.raises(EmulatorError, match="must be allocated with buffer=nl.shared_hbm since NKI 0.3"):
        simulate(k, np.zeros((4, 4), F32))


def test_jit_kernel_called_inside_a_kernel_is_traced_inline():
    """nki-library's wrappers call their implementation kernels: same trace, target and program."""
    from trnsci.nki.emulator import nisa, nki, nl

    @nki.jit
    def inner(a, out):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_copy(dst=t, src=t, engine=nisa.engine.scalar)  # Scalar Engine copy: trn2 only
        nisa.dma_copy(dst=out, src=t)

    @nki.jit
    def wrapper(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        inner(a, out)
        return out

    x = RNG.standard_normal((4, 8)).astype(F32)
    out, prof = profile(wrapper, x, target="trn2")
    np.testing.assert_array_equal(out, x)
    assert prof.by_instruction["nisa.tensor_copy@scalar"] == 1  # counted in the caller's profile
