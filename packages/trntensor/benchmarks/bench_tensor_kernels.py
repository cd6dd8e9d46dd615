"""trntensor's permute/elementwise/reduce/gather kernels and a whole einsum on the device:
emulator counters (exact) and modeled times.

Run: ``pytest packages/trntensor/benchmarks/bench_tensor_kernels.py --benchmark-enable --benchmark-only``
or ``python packages/trntensor/benchmarks/bench_tensor_kernels.py`` for the table. Modeled times come
from the emulator's cost model (the kernel's timeline; see NKI.md): "modeled", never measured on a
NeuronCore. The einsum row sums the modeled times of every launch of the plan (launches run one after
another).
"""

import ml_dtypes
import numpy as np
import pytest
import torch

import trnsci
import trntensor
from trnsci import nki
from trntensor.kernels.elementwise import elementwise_kernel
from trntensor.kernels.gather import gather_kernel
from trntensor.kernels.reduce import reduce_kernel
from trntensor.kernels.transpose import transpose_kernel

BF16 = ml_dtypes.bfloat16


def _ew(op_a):
    return {"alpha": 1.0, "beta": 2.0, "gamma": 1.0, "op_a": op_a, "op_b": "identity", "op_c": "identity",
            "op_ab": "add", "op_abc": "add"}


def _cases():
    rng = np.random.default_rng(0)

    def r(*shape, dtype=np.float32):
        return rng.standard_normal(shape).astype(dtype)

    yield "transpose 1024x1024 fp32", transpose_kernel, (r(1, 1024, 1024),), {"alpha": 1.0}
    yield "transpose 1024x1024 bf16", transpose_kernel, (r(1, 1024, 1024, dtype=BF16),), {"alpha": 1.0}
    yield "transpose 4096 x (60x7) fp32", transpose_kernel, (r(4096, 60, 7),), {"alpha": 1.0}
    a = r(2**20)
    yield "elementwise exp(A)+2B 2^20 fp32", elementwise_kernel, (a, r(2**20), None), _ew("exp")
    yield "reduce rows 1024x1024 fp32", reduce_kernel, (r(1024, 1024), None), {"op": "sum", "alpha": 1.0,
                                                                                "beta": 0.0}
    x = r(512, 512, 8)
    yield "gather diagonal 512x512x8 fp32", gather_kernel, (x.reshape(-1),), {"shape": (512, 8),
                                                                               "strides": (512 * 8 + 8, 1),
                                                                               "offset": 0}


def counters_table(target="trn1"):
    return [(name, nki.profile(k, *args, target=target, **kw)[1]) for name, k, args, kw in _cases()]


def einsum_row(target="trn1"):
    """A whole contraction on the device: its launches and their summed modeled time (trn1 emulator)."""
    g = torch.Generator().manual_seed(0)
    A, B, C = (torch.randn(*s, generator=g) for s in ((64, 64, 256), (256, 96, 16), (96, 200)))
    with trnsci.use_backend("simulator"), nki.capture() as runs:
        trntensor.einsum("iia,abx,bc->ca", A, B, C)
    return [r.kernel for r in runs], sum(r.profile.modeled_time_s for r in runs)


def format_table(rows):
    head = (f"{'case':<36} {'TE':>5} {'Vec':>5} {'Act':>5} {'DMA':>5} {'HBM read':>12} {'HBM write':>12} "
            f"{'modeled us':>11}")
    lines = [head, "-" * len(head)]
    for name, p in rows:
        i = p.instructions
        lines.append(f"{name:<36} {i['tensor']:>5} {i['vector']:>5} {i['scalar']:>5} {i['dma']:>5} "
                     f"{p.hbm_read_bytes:>12,d} {p.hbm_write_bytes:>12,d} {p.modeled_time_s * 1e6:>11.1f}")
    return "\n".join(lines)


CASE_NAMES = ["transpose 1024x1024 fp32", "transpose 1024x1024 bf16", "transpose 4096 x (60x7) fp32",
              "elementwise exp(A)+2B 2^20 fp32", "reduce rows 1024x1024 fp32", "gather diagonal 512x512x8 fp32"]


@pytest.mark.parametrize("case", CASE_NAMES)
def test_bench_kernel_counters(benchmark, case):
    name, kernel, args, kw = next(c for c in _cases() if c[0] == case)
    _, prof = benchmark.pedantic(nki.profile, args=(kernel, *args), kwargs=kw, rounds=1, iterations=1)
    benchmark.extra_info.update(
        tensor=prof.instructions["tensor"], vector=prof.instructions["vector"], scalar=prof.instructions["scalar"],
        dma=prof.instructions["dma"], hbm_read_bytes=prof.hbm_read_bytes, hbm_write_bytes=prof.hbm_write_bytes,
        modeled_time_us=round(prof.modeled_time_s * 1e6, 2))


if __name__ == "__main__":
    for tgt in ("trn1", "trn2"):
        print(f"target {tgt} (modeled)")
        print(format_table(counters_table(tgt)))
        print()
    names, t = einsum_row()
    print(f"einsum iia,abx,bc->ca 64x64x256, 256x96x16, 96x200 fp32 on trn1: {len(names)} launches "
          f"({', '.join(names)}), {t * 1e6:.1f} us modeled in all")
