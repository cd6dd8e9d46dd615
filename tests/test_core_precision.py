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


# --------------------------------------------------------------- promote: computed in float32, results kept there

@pytest.mark.parametrize("dtype", HALVES)
def test_op_promote_computes_in_float32_and_keeps_the_result(dtype):
    seen = []
    with scratch_ops():
        op = _op(seen, half=precision.promote("float32"))
        x, y = _data(dtype)
        r, i = op(1.5, x, y)
        r32, _ = op(1.5, *_data(torch.float32))
    # reference: NumPy float32 on the exact float32 values of the half inputs, no rounding at the end
    ref = np.float32(1.5) * x.float().numpy() + y.float().numpy()
    assert seen == [(torch.float32, torch.float32)] * 2
    assert r.dtype == torch.float32 and np.array_equal(r.numpy(), ref)  # exact: the same float32 operations
    assert i.dtype == torch.int64 and int(i) == int(np.argmax(x.float().numpy()))
    assert r32.dtype == torch.float32


def test_promote_declaration_spelling():
    p = precision.promote("float32")
    assert p == precision.promote() and hash(p) == hash(precision.promote()) and repr(p) == "promote('float32')"
    assert precision.compute_dtype(p) is torch.float32
    assert precision.rounds("float32") and not precision.rounds(p)
    with pytest.raises(ValueError, match="promote: .*'float32'"):
        precision.promote("float64")
    with scratch_ops(), pytest.raises(ValueError, match="trnsci.test_precision_bad2: half"):
        Op("trnsci.test_precision_bad2", "elements", 1e9, half=precision.Promote("int8"))


@precision.computes_in(precision.promote("float32"))
def spectrum(x, w=None):
    """Windowed DFT (NumPy's promotion for half data).

    Examples
    --------
    >>> 1
    1
    """
    CALLS.append((x.dtype, None if w is None else w.dtype))
    return torch.fft.fft(x if w is None else x * w)


@pytest.mark.parametrize("dtype", HALVES)
def test_computes_in_promote_keeps_complex64(dtype):
    x = torch.randn(64, generator=torch.Generator().manual_seed(3)).to(dtype)
    X = spectrum(x)
    # reference: numpy.fft in float64 on the exact values; the float32 FFT's error ~ log2(n) 2^-24 relative to
    # the largest coefficient (bound 1e-6 * max|X|: two decades of margin, far below a bf16 rounding of 2^-8)
    ref = np.fft.fft(x.double().numpy())
    assert CALLS[-1] == (torch.float32, None) and X.dtype == torch.complex64
    assert np.abs(X.numpy() - ref).max() <= 1e-6 * np.abs(ref).max()
    # promotion allows mixing: a float32 window passes as given, the half signal is upcast
    w = torch.hann_window(64)
    assert spectrum(x, w).dtype == torch.complex64 and CALLS[-1] == (torch.float32, torch.float32)
    # NumPy float16 in -> NumPy complex64 out
    Xn = spectrum(x.float().numpy().astype(np.float16))
    assert isinstance(Xn, np.ndarray) and Xn.dtype == np.complex64
    assert "computed in float32 and the results" in spectrum.__doc__  # NOTE_PROMOTE, before Examples
    assert spectrum.__doc__.index("Low precision") < spectrum.__doc__.index("Examples")


@precision.computes_in(precision.promote("float32"), args=("x",), note=False)
def scaled(x, w, *, v=None):
    CALLS.append((x.dtype, w.dtype, None if v is None else v.dtype))
    return x * 2


def test_computes_in_args_covers_only_the_named_parameters():
    h = torch.ones(3, dtype=torch.bfloat16)
    assert scaled(h, h).dtype == torch.float32 and CALLS[-1] == (torch.float32, torch.bfloat16, None)
    assert scaled(x=h, w=h, v=h).dtype == torch.float32 and CALLS[-1] == (torch.float32, torch.bfloat16,
                                                                        torch.bfloat16)
    assert scaled(torch.ones(3), h).dtype == torch.float32 and CALLS[-1] == (torch.float32, torch.bfloat16, None)

    def g(x):
        return x

    with pytest.raises(ValueError, match="computes_in: g has no parameter 'y'"):
        precision.computes_in(args=("y",))(g)


# --------------------------------------------------------------- the protocol: objects that give their float32 form

class _Pair:
    """A minimal protocol object: two tensors of one dtype."""

    upcasts = 0

    def __init__(self, a, b):
        self.a, self.b = a, b

    @property
    def dtype(self):
        return self.a.dtype

    def __trnsci_upcast__(self, dtype):
        _Pair.upcasts += 1
        return _Pair(self.a.to(dtype), self.b.to(dtype))

    def to(self, dtype):
        return _Pair(self.a.to(dtype), self.b.to(dtype))


@precision.computes_in("float32", note=False)
def _pair_axpy(p, x):
    CALLS.append((p.dtype, x.dtype))
    return _Pair(p.a * x + p.b, p.b), p.a.sum()


@pytest.mark.parametrize("dtype", HALVES)
def test_protocol_objects_are_upcast_and_rounded_once(dtype):
    g = torch.Generator().manual_seed(5)
    a, b, x = (torch.randn(20, generator=g).to(dtype) for _ in range(3))
    before = _Pair.upcasts
    r, s = _pair_axpy(_Pair(a, b), x)
    assert _Pair.upcasts == before + 1 and CALLS[-1] == (torch.float32, torch.float32)
    ref = a.float().numpy() * x.float().numpy() + b.float().numpy()  # NumPy float32, exact inputs
    assert isinstance(r, _Pair) and r.dtype == dtype and torch.equal(r.a, torch.from_numpy(ref).to(dtype))
    assert s.dtype == dtype
    with pytest.raises(TypeError, match="_pair_axpy: arguments mix dtypes"):
        _pair_axpy(_Pair(a, b), x.float())
    # float32 objects pass as they are
    p32 = _Pair(a.float(), b.float())
    assert precision.upcast(p32) is p32 and precision.round_once(p32, dtype, torch.float64) is p32


@pytest.mark.parametrize("dtype,unit", [(torch.bfloat16, 2.0 ** -8), (torch.float16, 2.0 ** -11)])
def test_sparse_matrices_take_part_through_their_kept_float32_copy(dtype, unit):
    import scipy.sparse as sp

    import trnsparse

    g = torch.Generator().manual_seed(7)
    D = torch.randn(30, 30, generator=g)
    D[D.abs() < 1.0] = 0
    A = trnsparse.from_dense(D.to(dtype))
    A32 = precision.upcast(A)
    assert A32.dtype == torch.float32 and precision.upcast(A) is A32  # kept on A
    assert torch.equal(A32.to_dense(), A.to_dense().float())  # exact
    A.values.mul_(2)  # in place: the copy no longer describes A's arrays
    assert precision.upcast(A) is not A32 and torch.equal(precision.upcast(A).to_dense(), A.to_dense().float())
    # results: the library's whole-matrix functions, rounded once to the input dtype; reference SciPy float64 on
    # the exact values, bound |r| unit (one rounding) + float32 accumulation ~ k 2^-24 sum|a||b| (k <= 30)
    S = sp.csr_array(A.to_dense().double().numpy())
    C = trnsparse.spgemm(A, A)
    ref = (S @ S).toarray()
    assert isinstance(C, trnsparse.CSRMatrix) and C.dtype == dtype
    absref = (abs(S) @ abs(S)).toarray()
    err = np.abs(C.to_dense().double().numpy() - ref)
    assert (err <= np.abs(ref) * unit + 30 * 2.0 ** -24 * absref + 1e-30).all()
    Sum = trnsparse.sparse_add(A, A, 1.0, -0.5)
    assert Sum.dtype == dtype and np.array_equal(Sum.to_dense().double().numpy(),
                                                 torch.from_numpy(0.5 * S.toarray()).to(dtype).double().numpy())


def test_no_library_module_tests_for_half_itself():
    """Outside trnsci.precision, no module of the six libraries or the umbrella compares a dtype with
    bfloat16/float16 (or a collection of only those) -- the core upcasts, as declared (Op(half=...),
    computes_in). The allow-list names the comparisons that are not an upcast, each with its reason."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    allowed = {
        # an NKI lowering whose kernel takes half data natively chooses its own operand dtypes (the core
        # upcasts for the torch lowering only)
        ("trnsparse/_nki/ops.py", "_spmm_nki"),
        # a size rule looked up under float32 for half data: nothing converted
        ("trntensor/_nki/einsum_device.py", "gemm"),
        # a rounding to bf16/fp16 (stochastic rounding), and the error bound of a mode: not an upcast
        ("trntensor/einsum.py", "_stochastic_round"),
        ("trntensor/einsum.py", "_forward_error_bound"),
    }

    def half(n):
        return (isinstance(n, ast.Attribute) and n.attr in ("bfloat16", "float16")
                and isinstance(n.value, ast.Name) and n.value.id in ("torch", "np", "numpy"))

    def half_only(n):
        return isinstance(n, (ast.Tuple, ast.List, ast.Set)) and n.elts and all(half(e) for e in n.elts)

    found, seen_modules = [], 0

    def visit(node, func, rel, names):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            func = node.name
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if half(side) or half_only(side) or (isinstance(side, ast.Name) and side.id in names) or (
                        isinstance(side, ast.Attribute) and side.attr in ("HALF", "LOWP")):
                    if (rel, func) not in allowed:
                        found.append(f"{rel}:{node.lineno} in {func}: {ast.unparse(node)}")
                    break
        for child in ast.iter_child_nodes(node):
            visit(child, func, rel, names)

    dirs = [root / "trnsci"] + sorted((root / "packages").glob("trn*/src/trn*"))
    for d in dirs:
        if d.name == "trnsci" and d.parent.name == "src":  # the core itself: precision, emulator, ...
            continue
        for path in sorted(d.rglob("*.py")):
            seen_modules += 1
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = set()  # module- or function-level names bound to a collection of only half dtypes
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and half_only(node.value):
                    names.update(t.id for t in node.targets if isinstance(t, ast.Name))

            rel = f"{d.name}/{path.relative_to(d).as_posix()}"
            visit(tree, None, rel, names)
    assert seen_modules > 100  # the scan found the libraries
    assert not found, "compare a dtype with bfloat16/float16 themselves (declare half= / computes_in):\n" + \
        "\n".join(found)
