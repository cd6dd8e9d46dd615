"""permute / elementwise / reduce: torch path and kernels (simulator) vs NumPy, counters vs closed forms.

References are NumPy in float64 on the same (fp32-exact) inputs. Tolerances:
a transpose moves bits (exact; alpha a power of two keeps it exact); the
elementwise kernel's activations are fp32 functions (a few ulp) followed by
at most three fp32 roundings, so ``1e-6`` relative to the magnitude of the
terms; reductions of ``K`` terms in fp32 are within ``K u`` of the sum of
magnitudes (``u = 2^-24``). bf16/fp16 results are rounded once from fp32:
within one unit of the output format, ``2^-8`` / ``2^-11`` relative.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import trnsci
import trntensor
from trnsci import nki
from trnsci.dispatch import plan_call
from trnsci.testing import assert_counts, assert_plan_matches_run, kernel_ran
from trntensor.kernels.elementwise import elementwise_counts, elementwise_kernel
from trntensor.kernels.gather import gather_counts, gather_kernel
from trntensor.kernels.reduce import reduce_counts, reduce_kernel
from trntensor.kernels.transpose import transpose_counts, transpose_kernel, transpose_passes

U = U_ROUND = 2.0**-24
F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16


def _rng(seed=0):
    return np.random.default_rng(seed)


def _f32(shape, seed=0, lo=None, hi=None):
    r = _rng(seed)
    x = r.standard_normal(shape) if lo is None else r.uniform(lo, hi, shape)
    return x.astype(np.float32)


# ------------------------------------------------------------------ kernels, directly

@pytest.mark.simulator
@pytest.mark.parametrize("B,M,N", [(1, 130, 200), (5, 3, 7), (300, 2, 3), (2, 129, 1000), (1, 600, 530), (1, 1, 1)])
def test_transpose_kernel_exact_and_counts(B, M, N):
    x = _f32((B, M, N))
    out, prof = nki.profile(transpose_kernel, x, alpha=-2.0)
    assert np.array_equal(out, -2.0 * x.transpose(0, 2, 1))
    assert_counts(prof, transpose_counts(B, M, N, 4))


@pytest.mark.simulator
def test_gather_kernel_strided_views_exact_and_counts():
    x = torch.from_numpy(_f32((130, 130, 5)))
    cases = [x.diagonal(0, 0, 1).T,  # "iia->ia": rows of 655 elements apart
             x.diagonal(0, 0, 1).T[:, 1::2],  # and a stepped slice of it
             torch.from_numpy(_f32(300))[1::2],  # 1-D
             x[::3, 2:129:2, 1:4]]  # 3-D, ragged rows (44 of them)
    for v in cases:
        span = 1 + sum((n - 1) * st for n, st in zip(v.shape, v.stride()))
        flat = v.as_strided((span,), (1,), v.storage_offset())
        out, prof = nki.profile(gather_kernel, flat, shape=tuple(v.shape), strides=tuple(v.stride()), offset=0)
        assert np.array_equal(out, v.numpy())
        assert_counts(prof, gather_counts(tuple(v.shape), 4))


def test_transpose_passes_realize_every_permutation():
    rng = _rng(1)
    for shape in [(2, 3, 4), (2, 1, 3, 5), (3, 4, 1, 2, 2)]:
        x = rng.standard_normal(shape)
        for perm in itertools.permutations(range(len(shape))):
            y = x.copy()
            passes = transpose_passes(shape, perm)
            assert len(passes) <= len(shape) - 1
            for b, m, n in passes:
                y = y.reshape(b, m, n).transpose(0, 2, 1).copy()
            assert np.array_equal(y.reshape(-1), x.transpose(perm).reshape(-1)), (shape, perm)
    # a transpose of two groups of axes is one pass; size-1 axes and merged runs move nothing
    assert transpose_passes((4, 5, 6), (2, 0, 1)) == [(1, 20, 6)]
    assert transpose_passes((4, 1, 6), (1, 0, 2)) == []


_NP_UNARY = {"identity": lambda x: x, "sqrt": np.sqrt, "relu": lambda x: np.maximum(x, 0), "conj": np.conj,
             "rcp": lambda x: 1 / x, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh, "exp": np.exp,
             "log": np.log, "abs": np.abs, "neg": np.negative, "sin": np.sin, "cos": np.cos}
_NP_BINARY = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
# inputs inside every activation's range (sqrt/log need > 0, sin [-pi, pi], cos [-pi/2, 3pi/2])
_LO, _HI = 0.25, 1.5


@pytest.mark.simulator
@pytest.mark.parametrize("n", [1, 131, 70001])
def test_elementwise_kernel_every_unary_op(n):
    a = _f32(n, 0, _LO, _HI)
    for op in _NP_UNARY:
        out, prof = nki.profile(elementwise_kernel, a, None, None, alpha=3.0, beta=1.0, gamma=1.0, op_a=op,
                                op_b="identity", op_c="identity", op_ab="add", op_abc="add")
        ref = 3.0 * _NP_UNARY[op](a.astype(np.float64))
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=0, err_msg=op)
        assert_counts(prof, elementwise_counts(n, 4, False, False, 3.0, 1, 1, op, "identity", "identity"))


@pytest.mark.simulator
@pytest.mark.parametrize("op_ab,op_abc", [("add", "max"), ("mul", "min"), ("max", "add"), ("min", "mul")])
def test_elementwise_kernel_trinary(op_ab, op_abc):
    n = 1000
    a, b, c = _f32(n, 0, _LO, _HI), _f32(n, 1), _f32(n, 2, -3, 1.5)
    out, prof = nki.profile(elementwise_kernel, a, b, c, alpha=2.0, beta=0.5, gamma=-1.0, op_a="cos", op_b="rcp",
                            op_c="tanh", op_ab=op_ab, op_abc=op_abc)
    f = lambda x: x.astype(np.float64)  # noqa: E731
    ab = _NP_BINARY[op_ab](2 * np.cos(f(a)), 0.5 / f(b))
    ref = _NP_BINARY[op_abc](ab, -np.tanh(f(c)))
    scale = np.abs(2 * np.cos(f(a))) + np.abs(0.5 / f(b)) + 1
    assert np.all(np.abs(out - ref) <= 1e-6 * scale * (np.abs(ref) + 1))
    assert_counts(prof, elementwise_counts(n, 4, True, True, 2.0, 0.5, -1.0, "cos", "rcp", "tanh"))


@pytest.mark.simulator
@pytest.mark.parametrize("M,K", [(1, 1), (130, 5000), (7, 3), (1, 5000), (1, 300001)])
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_reduce_kernel(M, K, op):
    x = _f32((M, K), 0, 0.9, 1.1) if op == "prod" else _f32((M, K))
    c = _f32(M, 1)
    out, prof = nki.profile(reduce_kernel, x, c, op=op, alpha=2.0, beta=-0.5)
    f = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}[op]
    ref = 2 * f(x.astype(np.float64), axis=1) - 0.5 * c
    mag = 2 * (np.abs(x).sum(1) if op == "sum" else np.abs(f(x.astype(np.float64), axis=1))) + np.abs(c)
    assert np.all(np.abs(out - ref) <= (K + 3) * U * mag)
    assert_counts(prof, reduce_counts(M, K, 4, True, 2.0, op))
    _, prof = nki.profile(reduce_kernel, x, None, op=op, alpha=1.0, beta=0.0)
    assert_counts(prof, reduce_counts(M, K, 4, False, 1.0, op))
    if M == 1 and op == "sum" and K > 256:  # split over the partitions, added by a matmul with ones
        assert prof.instructions["tensor"] == 1
        x[0, 7] = np.inf
        assert nki.profile(reduce_kernel, x, None, op=op, alpha=1.0, beta=0.0)[0][0] == np.inf


# ------------------------------------------------------------------ public functions: torch path

def test_torch_path_against_numpy():
    A = _f32((3, 4, 5)).astype(np.float64)
    B = _f32((5, 4), 1).astype(np.float64)
    np.testing.assert_array_equal(trntensor.permute(A, (2, 0, 1), alpha=3.0), 3 * A.transpose(2, 0, 1))
    R = trntensor.permute(torch.from_numpy(A), (0, 1, 2))
    assert R.data_ptr() != torch.from_numpy(A).data_ptr()
    got = trntensor.elementwise(np.abs(A) + 1, B, op_a="log", op_b="exp", op_ab="mul", alpha=2.0,
                                subscripts="abc,cb->abc")
    np.testing.assert_allclose(got, 2 * np.log(np.abs(A) + 1) * np.exp(B.T)[None, :, :], rtol=1e-12)
    got = trntensor.elementwise(A, C=A[0], op_abc="max", gamma=-1.0)  # NumPy broadcasting without subscripts
    np.testing.assert_array_equal(got, np.maximum(A, -A[0]))
    for op, f in [("sum", np.sum), ("max", np.max), ("min", np.min), ("prod", np.prod)]:
        np.testing.assert_allclose(trntensor.reduce(A, (0, 2), op=op, alpha=2.0, beta=-1.0, C=B[0]),
                                   2 * f(A, axis=(0, 2)) - B[0], rtol=1e-12)
    np.testing.assert_allclose(trntensor.reduce(A), A.sum(), rtol=1e-12)
    np.testing.assert_array_equal(trntensor.reduce(A, ()), A)
    x = np.full(3, np.nan)
    np.testing.assert_allclose(trntensor.reduce(A, 0, C=x[:1]), A.sum(0))  # beta=0 never reads C


def test_bad_input_names_the_argument():
    A = torch.ones(2, 3)
    cases = [
        (lambda: trntensor.permute(A, (0, 0)), ValueError, "perm"),
        (lambda: trntensor.permute(A, (0,)), ValueError, "perm"),
        (lambda: trntensor.permute(A, (0, 1), alpha="x"), TypeError, "alpha"),
        (lambda: trntensor.elementwise(A, op_a="cosh"), ValueError, "op_a"),
        (lambda: trntensor.elementwise(A, A, op_ab="sub"), ValueError, "op_ab"),
        (lambda: trntensor.elementwise(A, torch.ones(4)), ValueError, "broadcast"),
        (lambda: trntensor.elementwise(A, A.T, subscripts="ab,bc->ab"), ValueError, "'c'"),
        (lambda: trntensor.elementwise(A, A, subscripts="ab->ab"), ValueError, "subscripts"),
        (lambda: trntensor.elementwise(A, A, subscripts="ab,ab->ab", beta=1j), TypeError, "beta"),
        (lambda: trntensor.elementwise(A.to(torch.complex64), A, op_ab="max"), TypeError, "max"),
        (lambda: trntensor.reduce(A, 2), ValueError, "axes"),
        (lambda: trntensor.reduce(A, 0, op="mean"), ValueError, "op"),
        (lambda: trntensor.reduce(A, 0, beta=1.0), ValueError, "C"),
        (lambda: trntensor.reduce(A, 0, beta=1.0, C=torch.ones(2)), ValueError, "C"),
        (lambda: trntensor.reduce(torch.ones(0, 2), 0, op="max"), ValueError, "empty"),
        (lambda: trntensor.reduce(A.bool(), 0), TypeError, "A"),
    ]
    for fn, exc, word in cases:
        with pytest.raises(exc, match=word):
            fn()


# ------------------------------------------------------------------ public functions: kernels

@pytest.mark.simulator
@pytest.mark.parametrize("dtype,rtol", [(F32, 0.0), (BF16, 2.0**-8), (F16, 2.0**-11)])
def test_kernels_through_the_public_functions(dtype, rtol):
    A = torch.from_numpy(_f32((3, 130, 7))).to(dtype)
    B = torch.from_numpy(_f32((7, 130, 3), 1, _LO, _HI)).to(dtype)
    a64, b64 = A.double().numpy(), B.double().numpy()
    with kernel_ran("transpose_kernel"):
        R = trntensor.permute(A, (2, 0, 1), alpha=2.0)
    assert R.dtype == dtype and torch.equal(R, (2 * A.permute(2, 0, 1)).contiguous())
    with kernel_ran("transpose_kernel", "transpose_kernel", "elementwise_kernel"):
        R = trntensor.elementwise(A, B, op_b="sqrt", op_ab="mul", subscripts="abc,cba->abc")
    ref = a64 * np.sqrt(b64.transpose(2, 1, 0))
    assert R.dtype == dtype
    np.testing.assert_allclose(R.double().numpy(), ref, rtol=rtol + 4e-7, atol=0)
    with kernel_ran("transpose_kernel", "reduce_kernel"):
        R = trntensor.reduce(A, (0, 2), op="sum", alpha=0.5)
    ref = 0.5 * a64.sum((0, 2))
    assert R.dtype == dtype
    bound = rtol * np.abs(ref) + 24 * U * 0.5 * np.abs(a64).sum((0, 2))
    assert np.all(np.abs(R.double().numpy() - ref) <= bound)


@pytest.mark.simulator
def test_elementwise_broadcast_operands_on_the_device():
    X, b, c = _f32((6, 130, 5)), _f32(130, 1), _f32((5, 6), 2)
    with kernel_ran("gather_kernel", "gather_kernel", "elementwise_kernel"):
        R = trntensor.elementwise(X, b, c, subscripts="abc,b,ca->abc", op_ab="add", op_abc="mul", gamma=2.0)
    ref = (X.astype(np.float64) + b[None, :, None]) * (2 * c.T[:, None, :])
    np.testing.assert_allclose(R, ref, rtol=4 * U, atol=0)  # two fp32 roundings, a power-of-two scale


@pytest.mark.simulator
def test_plans_say_what_runs_including_the_torch_cases():
    A = torch.from_numpy(_f32((4, 33, 5)))
    pos = A.abs() + 0.5
    with trnsci.use_backend("simulator"):
        for fn, args, kw, backend in [
            (trntensor.permute, (A, (1, 2, 0)), {}, "simulator"),
            (trntensor.permute, (A, (0, 1, 2)), {"alpha": 3.0}, "simulator"),  # no move: scaled copy
            (trntensor.permute, (A.double(), (1, 0, 2)), {}, "torch"),  # float64: not a kernel dtype
            (trntensor.elementwise, (pos, A), {"op_a": "log", "subscripts": "abc,abc->abc"}, "simulator"),
            (trntensor.elementwise, (A, A), {"op_a": "log"}, "torch"),  # log of negatives: out of range
            (trntensor.elementwise, (A, A[0]), {}, "simulator"),  # broadcast operand: gathered (stride 0)
            (trntensor.elementwise, (A, A.double()), {}, "torch"),  # mixed dtypes
            (trntensor.reduce, (A, 1), {"op": "min", "beta": 2.0, "C": torch.ones(4, 5)}, "simulator"),
            (trntensor.reduce, (A, ()), {}, "torch"),
        ]:
            plan, _, runs = assert_plan_matches_run(fn, *args, **kw)
            assert plan.backend == backend, (fn.__name__, plan.reason)
    with trnsci.use_backend("simulator"):
        p = plan_call(trntensor.elementwise, A, A, op_a="log")
    assert "range" in p.reason and "log" in p.reason
    A[0, 0, 0] = float("inf")
    with trnsci.use_backend("simulator"):
        p = plan_call(trntensor.permute, A, (1, 0, 2))
    assert p.backend == "torch" and "NaN/Inf" in p.reason


# ------------------------------------------------------------------ einsum: every step on a kernel

@pytest.mark.simulator
def test_einsum_with_a_trace_a_presum_and_a_transpose_runs_every_step_on_kernels():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(6, 6, 130, generator=g)  # "iia": a diagonal; i then summed (held by A only)
    B = torch.randn(130, 9, 5, generator=g)  # "abx": x held by B only, summed before the step
    C = torch.randn(9, 7, generator=g)  # "bc"; the output "ca" needs transposes
    out = torch.randn(7, 130, generator=g)
    sub = "iia,abx,bc->ca"
    with trnsci.use_backend("simulator"):
        plan = trntensor.plan_contraction(sub, A, B, C)
        with nki.capture() as runs:
            R = trntensor.einsum(sub, A, B, C, alpha=2.0, beta=0.5, out=out.clone())
    assert plan.backend == "simulator" and all(s.backend == "simulator" for s in plan.steps)
    assert plan.launches and all(p.backend == "simulator" for _, p in plan.launches)
    planned = [n for _, p in plan.launches for n in (p.kernel.get("kernels") or [p.kernel["name"]])]
    ran = [r.kernel for r in runs]
    # alpha/beta are the elementwise kernel's, after the plan's launches
    assert ran == planned + ["elementwise_kernel"]
    assert {"gather_kernel", "reduce_kernel", "transpose_kernel", "gemm_kernel"} <= set(ran)
    assert any(st == "prepare operand 0" and p.kernel["name"] == "gather_kernel" for st, p in plan.launches)
    f = [x.double().numpy() for x in (A, B, C)]
    ref = 2.0 * np.einsum(sub, *f) + 0.5 * out.double().numpy()
    # fp32 throughout: each output is a sum of 6*5*130*9 products in a few stages; bound the error by
    # 1e-5 of the same contraction of absolute values (about 100x the fp32 worst case of its depth)
    mag = 2.0 * np.einsum(sub, *[np.abs(x) for x in f]) + 0.5 * np.abs(out.double().numpy())
    assert np.all(np.abs(R.double().numpy() - ref) <= 1e-5 * mag)


def test_einsum_on_torch_plans_no_launches():
    with trnsci.use_backend("torch"):
        plan = trntensor.plan_contraction("iij,jk->ki", (3, 3, 4), (4, 5))
    assert plan.launches == [] and plan.backend in ("torch", "numpy", "numpy+torch")


# ------------------------------------------------------------------ decompositions: GEMMs on trnblas's kernels

@pytest.mark.simulator
def test_decomposition_gemms_run_on_the_gemm_kernel():
    rng = _rng(3)
    A, B, C = (rng.standard_normal((n, 2)) for n in (9, 7, 5))
    T = np.einsum("ir,jr,kr->ijk", A, B, C)  # exact rank 2
    with kernel_ran() as runs:
        factors, weights = trntensor.cp_decompose(torch.from_numpy(T).float(), 2, max_iter=30, tol=1e-7)
    # MTTKRP and the fit's reconstruction; the SVD init and the pinvs on trnsolver's Jacobi kernel
    assert {r.kernel for r in runs} == {"gemm_kernel", "svd_sweep_kernel"}
    f = [x.double().numpy() for x in factors]
    X = np.einsum("r,ir,jr,kr->ijk", weights.double().numpy(), *f)
    assert np.linalg.norm(X - T) <= 1e-4 * np.linalg.norm(T)  # fp32 ALS on an exact rank-2 tensor
    G = rng.standard_normal((3, 2, 4))
    Us = [rng.standard_normal((n, r)) for n, r in ((9, 3), (7, 2), (5, 4))]
    with kernel_ran("gemm_kernel", "gemm_kernel", "gemm_kernel"):  # one mode product (GEMM) per mode
        R = trntensor.tucker_reconstruct(torch.from_numpy(G).float(), [torch.from_numpy(u).float() for u in Us])
    ref = np.einsum("abc,ia,jb,kc->ijk", G, *Us)
    mag = np.einsum("abc,ia,jb,kc->ijk", np.abs(G), *[np.abs(u) for u in Us])
    assert np.all(np.abs(R.double().numpy() - ref) <= 24 * U_ROUND * mag)


@pytest.mark.simulator
@pytest.mark.parametrize("dtype,u,gemm_kernels", [(BF16, 2.0**-8, True), (F16, 2.0**-11, False)])
def test_einsum_half_precision_on_the_device(dtype, u, gemm_kernels):
    # fp32 inside every kernel, the input dtype between steps: each of the ~6 stages (two sums, two GEMMs
    # with their bf16 products, transposes exact) rounds once to the input format -> 8 u of the magnitudes
    g = torch.Generator().manual_seed(1)
    A, B, C = (torch.randn(*s, generator=g).to(dtype) for s in ((5, 5, 40), (40, 9, 3), (9, 7)))
    sub = "iia,abx,bc->ca"
    with trnsci.use_backend("simulator"):
        plan = trntensor.plan_contraction(sub, A, B, C)
        with nki.capture() as runs:
            R = trntensor.einsum(sub, A, B, C)
    assert R.dtype == dtype
    ran = [r.kernel for r in runs]
    assert ("gemm_kernel" in ran) == gemm_kernels  # trnblas's GEMM kernels take bfloat16, not float16
    torch_launches = [p for _, p in plan.launches if p.backend == "torch"]
    assert all("float16" in p.reason for p in torch_launches) and (not torch_launches) == gemm_kernels
    f = [x.double().numpy() for x in (A, B, C)]
    ref, mag = np.einsum(sub, *f), np.einsum(sub, *[np.abs(x) for x in f])
    assert np.all(np.abs(R.double().numpy() - ref) <= 8 * u * mag)
