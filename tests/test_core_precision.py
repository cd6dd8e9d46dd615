"""trnsci.precision: low precision declared on an Op (``half=``) or a composite function (``computes_in``).

Reference: NumPy float32 on the half inputs' exact values (bf16/fp16 -> float32 is exact), rounded once to
the input dtype by torch (round to nearest even) -- the mechanism's promise is *exactly* that, so the
comparisons are exact (tolerance 0): float32 arithmetic of the same operations on the same values, in the
same order, then one rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trnsci import precision, settled
from trnsci.dispatch import Op
from trnsci.testing import scratch_ops

HALVES = (torch.bfloat16, torch.float16)


def _op(seen, half="float32", native=None):
    """``(x * a + y, argmax x)``: a floating and an integer result; ``seen`` logs the dtypes the lowering got."""
    op = Op("trnsci.test_precision_axpy", "elements", 1e9, size=lambda a, x, y: x.numel(), half=half)

    @op.lowering("torch")
    def low(a, x, y):
        seen.append((x.dtype, y.dtype))
        return x * a + y, torch.argmax(x)

    if native is not None:
        @op.lowering("nki", dtypes=native)
        def kernel(a, x, y):
            seen.append(("nki", x.dtype))
            return (x * a + y), torch.argmax(x)
    return op


def _data(dtype):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(33, generator=g).to(dtype), torch.randn(33, generator=g).to(dtype)
    return x, y


def _ref(a, x, y, dtype):
    """NumPy float32 of the exactly-upcast inputs, rounded once to ``dtype``."""
    r = np.float32(a) * x.float().numpy() + y.float().numpy()
    return torch.from_numpy(r).to(dtype), int(np.argmax(x.float().numpy()))


@pytest.mark.parametrize("dtype", HALVES)
def test_op_half_computes_in_float32_and_rounds_once(dtype):
    seen = []
    with scratch_ops():
        op = _op(seen)
        x, y = _data(dtype)
        r, i = op(1.5, x, y)
    ref, iref = _ref(1.5, x, y, dtype)
    assert seen == [(torch.float32, torch.float32)]  # the lowering saw float32 only
    assert r.dtype == dtype and torch.equal(r, ref)
    assert i.dtype == torch.int64 and int(i) == iref  # integer results untouched


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64))
def test_op_half_leaves_other_dtypes_to_the_lowering(dtype):
    seen = []
    with scratch_ops():
        op = _op(seen)
        x, y = _data(dtype)
        r, _ = op(1.5, x, y)
    assert seen == [(dtype, dtype)] and r.dtype == dtype
    np.testing.assert_array_equal(r.numpy(), 1.5 * x.numpy() + y.numpy())


def test_op_without_half_passes_half_tensors_through():
    seen = []
    with scratch_ops():
        op = _op(seen, half=None)
        x, y = _data(torch.bfloat16)
        r, _ = op(1.5, x, y)
    assert seen == [(torch.bfloat16, torch.bfloat16)] and r.dtype == torch.bfloat16


def test_bad_half_declaration_names_the_op():
    with scratch_ops(), pytest.raises(ValueError, match="trnsci.test_precision_bad: half.*'float32'"):
        Op("trnsci.test_precision_bad", "elements", 1e9, half="float64")


@pytest.mark.simulator
def test_a_kernel_that_takes_half_natively_is_not_upcast():
    from trnsci.backend import use_backend

    seen = []
    with scratch_ops():
        op = _op(seen, native=(torch.float32, torch.bfloat16))
        x, y = _data(torch.bfloat16)
        with use_backend("simulator"):
            op(1.5, x, y)
            seen.append("--")
            op(1.5, *_data(torch.float16))  # not in the kernel's dtypes: the torch lowering, upcast
    assert seen == [("nki", torch.bfloat16), "--", (torch.float32, torch.float32)]


@pytest.mark.parametrize("dtype", HALVES)
def test_settled_routes_per_dtype(dtype):
    # the key fixes the dtype: a float32 key's route is the lowering itself, a half key's the upcast one
    seen = []
    with scratch_ops():
        op = _op(seen)

        @settled.public(op, "scalar tensor tensor")
        def axpy(a, x, y):
            return settled.call(op, a, x, y)

        x32, y32 = _data(torch.float32)
        xh, yh = _data(dtype)
        for _ in range(3):
            r32, _ = axpy(1.5, x32, y32)
            rh, ih = axpy(1.5, xh, yh)
        routes = list(op.settled[axpy].values())
    assert len(routes) == 2
    assert op.lowering_for("torch").fn in routes  # float32: the lowering as written, nothing around it
    assert seen == [(torch.float32, torch.float32)] * 6
    ref, iref = _ref(1.5, xh, yh, dtype)
    assert rh.dtype == dtype and torch.equal(rh, ref) and int(ih) == iref
    assert r32.dtype == torch.float32


def test_upcast_and_round_once_structures():
    h = torch.ones(2, dtype=torch.float16)
    i = torch.arange(2, dtype=torch.int32)
    c = torch.ones(2, dtype=torch.complex64)
    up = precision.upcast([h, (i, 2.0), np.ones(2, np.float16), np.ones(2, np.float32)])
    assert up[0].dtype == torch.float32 and up[1][0] is i and up[1][1] == 2.0
    assert isinstance(up[2], torch.Tensor) and up[2].dtype == torch.float32
    assert isinstance(up[3], np.ndarray)  # only float16 arrays are half
    down = precision.round_once((torch.ones(2), i, c, torch.ones(2, dtype=torch.float64)), torch.bfloat16)
    assert [t.dtype for t in down] == [torch.bfloat16, torch.int32, torch.complex64, torch.float64]


CALLS: list = []


@precision.computes_in("float32")
def solve(A, b, *, tol=1e-3):
    """Solve.

    Examples
    --------
    >>> 1
    1
    """
    CALLS.append((A.dtype, b.dtype))
    return torch.linalg.solve(A, b), torch.tensor(3)


def test_computes_in_composite_function():
    calls = CALLS
    A = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.bfloat16)
    b = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    x, n = solve(A, b)
    ref = np.linalg.solve(A.float().numpy(), b.float().numpy())
    assert calls[-1] == (torch.float32, torch.float32) and x.dtype == torch.bfloat16 and n.dtype == torch.int64
    assert torch.equal(x, torch.from_numpy(ref).to(torch.bfloat16)) or torch.allclose(
        x.float(), torch.from_numpy(ref), rtol=2.0 ** -8, atol=0)  # LAPACK vs torch: one bf16 ulp apart at most
    assert solve.__doc__.index("Low precision") < solve.__doc__.index("Examples")
    # NumPy float16 in -> NumPy float16 out
    xn, _ = solve(A.float().numpy().astype(np.float16), np.array([1.0, 2.0], np.float16))
    assert isinstance(xn, np.ndarray) and xn.dtype == np.float16
    # float32 calls pass straight through
    assert solve(A.float(), b.float())[0].dtype == torch.float32 and calls[-1] == (torch.float32, torch.float32)
    with pytest.raises(TypeError, match="solve: arguments mix dtypes bfloat16, float32"):
        solve(A, b.float())
    with pytest.raises(TypeError, match="mix dtypes bfloat16, float16"):
        solve(A, b.half())
    with pytest.raises(ValueError, match="computes_in: .*'float32'"):
        precision.computes_in("bfloat16")


def test_library_lowerings_under_half_do_not_test_for_it():
    # an Op declaring half= leaves low precision to the core: its torch lowering has no bf16/fp16 branch
    import inspect

    import trnblas  # noqa: F401
    import trnsparse  # noqa: F401
    from trnsci.dispatch import ops

    declared = {name: op for name, op in ops().items() if op.half is not None}
    assert {"trnblas.gemm", "trnblas.dot", "trnblas.gemv", "trnblas.syrk", "trnsparse.spmv"} <= set(declared)
    for name, op in declared.items():
        src = inspect.getsource(op.lowering_for("torch").fn)
        for word in ("LOWP", "torch.bfloat16", "torch.float16", "HALF"):
            assert word not in src, (name, word)
