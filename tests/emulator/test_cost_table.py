"""The cost table and the timeline, each checked against the formula its AWS source states.

Expected cycles are worked out by hand from the formula the table cites
(``trnsci/nki/emulator/_cost.py``); times divide by the documented clocks
(trn1 Vector 1.12 GHz, Tensor 2.8 GHz; trn2 Vector 0.96 GHz).
"""

import numpy as np
import pytest

from trnsci.nki.emulator import INSTRUCTIONS, nisa, nl, profile
from trnsci.nki.emulator._cost import COSTS
from trnsci.nki.emulator.profile import DMA_LATENCY_S, TARGETS, dma_efficiency

VHZ = {"trn1": 1.12e9, "trn2": 0.96e9}


def _vector_cycles(body, target="trn1", *arrays):
    def k(*hbm):
        body(*hbm)
        o = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        return o

    _, p = profile(k, *arrays, target=target)
    return round(p.engine_time_s["vector"] * VHZ[target]), p


def test_every_emulated_instruction_has_a_cited_rule_per_engine():
    for name, spec in INSTRUCTIONS.items():
        if not spec.emulated or not name.startswith("nisa."):
            continue
        assert name in COSTS, name
        for eng in spec.engines:
            rule = COSTS[name].get(eng)
            assert rule is not None, (name, eng)
            assert rule.source and rule.formula, (name, eng)


def _tt(d1_buf, d2_buf, dtype, op=nl.add):
    def body():
        a = nl.ndarray((2, 500), dtype=dtype, buffer=d1_buf)
        b = nl.ndarray((2, 500), dtype=dtype, buffer=d2_buf)
        o = nl.ndarray((2, 500), dtype=dtype, buffer=nl.sbuf)
        nisa.memset(a, 1.0)
        nisa.memset(b, 1.0)
        nisa.tensor_tensor(o, a, b, op)
    return body


@pytest.mark.parametrize(
    "bufs,dtype,target,cycles",
    [
        ((nl.sbuf, nl.sbuf), nl.float32, "trn1", 1000),   # 2N otherwise
        ((nl.psum, nl.sbuf), nl.float32, "trn1", 500),    # N: one input in PSUM
        ((nl.sbuf, nl.sbuf), nl.bfloat16, "trn2", 500),   # N: trn2 all-bf16 SBUF add (ARCH2 2a)
        ((nl.sbuf, nl.sbuf), nl.bfloat16, "trn1", 1000),  # trn1: no performance mode
    ],
)
def test_tensor_tensor_cost(bufs, dtype, target, cycles):
    total, _ = _vector_cycles(_tt(*bufs, dtype), target)
    # two memsets of N = 500 (non-zero: N) precede the instruction
    assert total - 2 * 500 == cycles


def test_memset_zero_bf16_is_half_rate_and_tensor_reduce_bf16_too():
    def body():
        a = nl.ndarray((2, 1000), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(a, 0.0)                      # N/2 = 500
        r = nl.ndarray((2, 1), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_reduce(r, nl.add, a, axis=1)  # N/2 = 500
        f = nl.ndarray((2, 1000), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(f, 0.0)                      # fp32: N = 1000
    total, _ = _vector_cycles(body)
    assert total == 500 + 500 + 1000


def test_tensor_scalar_reduce_adds_min_ii_and_reciprocal_is_8n():
    def body():
        a = nl.ndarray((2, 1000), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(a, 2.0)                                          # 1000
        o = nl.ndarray((2, 1000), dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((2, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(o, a, nl.multiply, 2.0, nl.add, r)  # max(64, N) + 64 = 1064
        nisa.reciprocal(o, a)                                        # 8N = 8000
    total, _ = _vector_cycles(body)
    assert total == 1000 + 1064 + 8000


def test_tensor_engine_transpose_has_no_fp32_factor():
    def k():
        a = nl.ndarray((128, 100), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(a, 1.0)
        p = nl.ndarray((100, 128), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(p, a)
        return nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)

    _, prof = profile(k)
    # max(P, min(64, F)) = max(128, 64) = 128 Tensor cycles at 2.8 GHz (the matmul rule would say 4 x 128)
    assert prof.engine_time_s["tensor"] == pytest.approx(128 / 2.8e9)


def test_dependent_vector_chain_pays_100_cycles_per_link():
    def run(dependent):
        def k(x):
            t = nl.load(x)
            a = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)
            b = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)
            c = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(a, t, nl.multiply, 2.0)
            nisa.tensor_scalar(b, a if dependent else t, nl.multiply, 2.0)
            nisa.tensor_scalar(c, b if dependent else t, nl.multiply, 2.0)
            return nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        return profile(k, np.ones((128, 1000), np.float32))[1]

    dep, ind = run(True), run(False)
    assert dep.engine_time_s == ind.engine_time_s  # same busy cycles
    assert dep.modeled_time_s - ind.modeled_time_s == pytest.approx(2 * 100 / 1.12e9)
    assert dep.modeled_time_lower_s <= dep.modeled_time_s <= dep.modeled_time_upper_s


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("free", [64, 448, 1000])
def test_one_load_streams_at_the_documented_efficiency(target, free):
    def k(x):
        nl.load(x)
        return nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)

    _, p = profile(k, np.ones((128, free), np.float32), target=target)
    nbytes = 128 * free * 4
    rate = TARGETS[target].dma_bytes_per_s * dma_efficiency(free * 4)
    assert p.modeled_time_s == pytest.approx(DMA_LATENCY_S + nbytes / rate)


def test_dma_efficiency_follows_the_published_curve():
    # the digitized points of nki-dma-overview's figure, and BWG's bands
    assert dma_efficiency(4096) > 0.95 and dma_efficiency(32768) == 1.0
    assert 0.7 < dma_efficiency(1792) < 0.75          # the MP2 tiles: 448 fp32 per partition
    assert dma_efficiency(256) < 0.15                 # "severely overhead-bound" below 256 B
    assert dma_efficiency(2048) == pytest.approx(0.814)
    xs = [2 ** k for k in range(3, 16)]
    assert all(dma_efficiency(a) < dma_efficiency(b) for a, b in zip(xs, xs[1:]))


def test_fused_bf16_and_predicated_and_bn_aggr_rules():
    def body():
        x = nl.ndarray((2, 600), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(x, 1.0)                                          # 600
        o = nl.ndarray((2, 600), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(o, x, nl.subtract, 1.0, nl.multiply, x)  # bf16 subtract-multiply, even N: 600
        nisa.scalar_tensor_tensor(o, x, nl.add, 1.0, nl.multiply, x)       # other ops: 2N = 1200
        p = nl.ndarray((2, 600), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.memset(p, 1)                                            # 600
        nisa.tensor_copy_predicated(o, x, p)                         # SBUF -> SBUF: 2N = 1200
        s = nl.ndarray((2, 6), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(s, 1.0)                                          # max(64, 6) = 64
        m = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(m, s)                                           # max(64, 13 * 6 / 3 = 26) = 64
        big = nl.ndarray((2, 300), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(big, 1.0)                                        # 300
        m2 = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(m2, big)                                        # 13 * 300 / 3 = 1300
    total, _ = _vector_cycles(body)
    assert total == 600 + 600 + 1200 + 600 + 1200 + 64 + 64 + 300 + 1300


def test_gpsimd_startup_on_affine_select_and_iota():
    def k():
        t = nl.ndarray((4, 200), dtype=nl.float32, buffer=nl.sbuf)
        nisa.iota(t, [[1, 200]], offset=0, channel_multiplier=0)     # 150 + N = 350
        d = nl.ndarray((4, 200), dtype=nl.float32, buffer=nl.sbuf)
        nisa.affine_select(d, [[1, 200]], 1, t, 0.0, cmp_op=nl.greater_equal)  # 150 + N = 350
        return nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)

    _, p = profile(k)
    assert p.engine_time_s["gpsimd"] == pytest.approx((350 + 350) / 1.4e9)
