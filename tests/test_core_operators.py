"""trnsci operations as torch operators: opcheck, torch.compile without graph breaks, autograd on every backend.

References are independent: torch's own functions (torch.fft, torch.linalg, dense matmul) and
``torch.autograd.gradcheck``'s finite differences.
"""

from __future__ import annotations

import pytest
import torch

import trnblas
import trnfft
import trnrand  # noqa: F401  (its operators are rows of the autograd table the docs hold)
import trnsolver
import trnsparse
import trntensor
from trnsci import dispatch, operators
from trnsci.testing import kernel_ran

torch._dynamo = pytest.importorskip("torch._dynamo")

F64 = torch.float64


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _csr(m, n, dtype=F64, seed=1):
    D = torch.randn(m, n, generator=_g(seed), dtype=dtype) * (torch.rand(m, n, generator=_g(seed + 1)) < 0.4)
    return trnsparse.from_dense(D), D


# ------------------------------------------------------------------ the operators exist, per library

CONVERTED = ["trnblas.gemm", "trnblas.batched_gemm", "trnfft.fft", "trnfft.ifft", "trnfft.rfft", "trnfft.irfft",
             "trnfft.fftn", "trnfft.ifftn", "trnfft.rfftn", "trnfft.irfftn", "trnfft.hfft", "trnfft.ihfft",
             "trnsolver.cholesky", "trnsolver.solve", "trnsolver.eigh", "trnsparse.spmm"]


def test_converted_ops_are_torch_operators_in_their_library_namespace():
    ops = operators.operators()
    for name in CONVERTED:
        lib, op = name.split(".")
        assert ops[name] is getattr(getattr(torch.ops, lib), op).default
    assert set(operators.namespaces()) >= {"trnblas", "trnfft", "trnsolver", "trnsparse"}


def _opcheck_cases():
    A, B = torch.randn(5, 4, generator=_g(), dtype=F64), torch.randn(4, 3, generator=_g(1), dtype=F64)
    C = torch.randn(5, 3, generator=_g(2), dtype=F64)
    x = torch.randn(3, 16, generator=_g(3), dtype=F64)
    X = torch.randn(6, 6, generator=_g(4), dtype=F64)
    S = X @ X.T + 6 * torch.eye(6, dtype=F64)
    csr, _ = _csr(8, 6)
    cols, ptrs = csr.col_indices, csr.row_ptrs
    return [
        ("gemm", torch.ops.trnblas.gemm, (1.5, A, B, 0.5, C, "N", "N")),
        ("gemm_t", torch.ops.trnblas.gemm, (1.0, A.T.contiguous(), B, 0.0, None, "T", "N")),
        ("batched_gemm", torch.ops.trnblas.batched_gemm, (1.0, A.expand(2, 5, 4).contiguous(),
                                                           B.expand(2, 4, 3).contiguous(), 0.0, None, "N", "N")),
        ("fft", torch.ops.trnfft.fft, (x.to(torch.complex128), 16, 1, "backward", "fast")),
        ("fft_pad", torch.ops.trnfft.fft, (x, 20, 1, "ortho", "fast")),
        ("ifft", torch.ops.trnfft.ifft, (x.to(torch.complex128), 12, 1, "forward", "fast")),
        ("rfft", torch.ops.trnfft.rfft, (x, 16, 1, "backward", "fast")),
        ("irfft", torch.ops.trnfft.irfft, (torch.fft.rfft(x), 16, 1, "backward", "fast")),
        ("fftn", torch.ops.trnfft.fftn, (x.to(torch.complex128), [3, 16], [0, 1], "backward", "fast")),
        ("cholesky", torch.ops.trnsolver.cholesky, (S, False)),
        ("solve", torch.ops.trnsolver.solve, (S, torch.randn(6, 2, generator=_g(9), dtype=F64))),
        ("eigh", torch.ops.trnsolver.eigh, (S, "L", 0, 5, True, 1e-10, 100)),
        ("sddmm", torch.ops.trnsparse.sddmm, (cols, ptrs, csr.values, torch.randn(8, 3, dtype=F64),
                                              torch.randn(3, 6, dtype=F64), 1.5, 0.5)),
        ("spmm", torch.ops.trnsparse.spmm, (csr.values, cols, ptrs, [8, 6], torch.randn(6, 3, dtype=F64), 2.0,
                                            None, 0.0)),
    ]


@pytest.mark.parametrize("name,op,args", _opcheck_cases(), ids=lambda c: c if isinstance(c, str) else "")
def test_opcheck(name, op, args):
    # the default tests: schema, fake implementation, autograd registration, AOT dispatch (static)
    tests = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_static")
    if name == "eigh":  # eigenvectors are unique up to sign: the AOT test compares them exactly, run apart
        tests = tests[:3]
    torch.library.opcheck(op, args, test_utils=tests)


def test_meta_tensors_give_shapes_without_data():
    A, B = torch.empty(5, 4, device="meta"), torch.empty(4, 3, device="meta")
    out = torch.ops.trnblas.gemm(1.0, A, B, 0.0, None, "N", "N")
    assert out.device.type == "meta" and out.shape == (5, 3)
    y = torch.ops.trnfft.rfft(torch.empty(2, 16, device="meta"), 16, 1, "backward", "fast")
    assert y.shape == (2, 9) and y.dtype == torch.complex64


# ------------------------------------------------------------------ torch.compile: six typical programs

def _spectral_conv(x, w):
    return trnfft.irfft(trnfft.rfft(x) * w, n=x.shape[-1])


def _mp2_step(B, e_occ, e_vir):
    # DF-MP2 pair energies of one occupied pair block: (ia|jb) = sum_P B[i,a,P] B[j,b,P]
    iajb = trntensor.einsum("iaP,jbP->iajb", B, B)
    eo, ev = e_occ[:, None], e_vir[None, :]
    denom = (eo - ev)[:, :, None, None] + (eo - ev)[None, None, :, :]
    return (iajb * (2 * iajb - iajb.permute(0, 3, 2, 1)) / denom).sum()


def _cg(A, b, iters=5):
    x = torch.zeros_like(b)
    r = b.clone()
    p = r.clone()
    rr = trnblas.dot(r, r)
    for _ in range(iters):
        Ap = trnblas.gemv(1.0, A, p)
        alpha = rr / trnblas.dot(p, Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rr_new = trnblas.dot(r, r)
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


def _einsum_chain(A, B, C):
    return trntensor.einsum("ij,jk,kl->il", A, B, C).sin()


def _attention(Q, K, V, mask):
    return trnsparse.block_sparse_attention(Q, K, V, mask) + Q


def _gemm_bias_act(A, W, b):
    return torch.nn.functional.gelu(trnblas.gemm(1.0, A, W) + b)


def _scenarios():
    x = torch.randn(4, 32, generator=_g(), dtype=F64)
    w = torch.randn(17, generator=_g(1), dtype=torch.complex128)
    B = torch.randn(3, 4, 10, generator=_g(2), dtype=F64)
    e_occ = -torch.rand(3, generator=_g(3), dtype=F64) - 1
    e_vir = torch.rand(4, generator=_g(4), dtype=F64) + 1
    M = torch.randn(8, 8, generator=_g(5), dtype=F64)
    A = M @ M.T + 8 * torch.eye(8, dtype=F64)
    b = torch.randn(8, generator=_g(6), dtype=F64)
    E = [torch.randn(s, generator=_g(7 + i), dtype=F64) for i, s in enumerate([(5, 6), (6, 7), (7, 4)])]
    Q, K, V = (torch.randn(16, 8, generator=_g(10 + i), dtype=F64) for i in range(3))
    mask = trnsparse.local_window_mask(16, 1, block_size=4)
    X, W, bias = torch.randn(6, 5, generator=_g(20), dtype=F64), torch.randn(5, 3, generator=_g(21), dtype=F64), \
        torch.randn(3, generator=_g(22), dtype=F64)
    return [("spectral_conv", _spectral_conv, (x, w)), ("df_mp2_step", _mp2_step, (B, e_occ, e_vir)),
            ("cg_loop", _cg, (A, b)), ("einsum_chain", _einsum_chain, tuple(E)),
            ("sparse_attention", _attention, (Q, K, V, mask)), ("gemm_bias_act", _gemm_bias_act, (X, W, bias))]


SCENARIOS = _scenarios()


@pytest.mark.parametrize("name,fn,args", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_compile_fullgraph_without_graph_breaks(name, fn, args):
    torch._dynamo.reset()
    ref = fn(*args)
    explained = torch._dynamo.explain(fn)(*args)
    assert explained.graph_break_count == 0, explained.break_reasons
    for backend in ("eager", "inductor"):
        got = torch.compile(fn, fullgraph=True, backend=backend)(*args)
        # float64 throughout: inductor may reassociate sums (a few ulps of the result's scale)
        torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-10)


def test_compiled_graph_holds_the_trnsci_operators():
    torch._dynamo.reset()
    graphs = torch._dynamo.explain(_gemm_bias_act)(*SCENARIOS[-1][2]).graphs
    code = "".join(g.code for g in graphs)
    assert "torch.ops.trnblas.gemm" in code
    graphs = torch._dynamo.explain(_spectral_conv)(*SCENARIOS[0][2]).graphs
    code = "".join(g.code for g in graphs)
    assert "torch.ops.trnfft.rfft" in code and "torch.ops.trnfft.irfft" in code


def test_bad_input_inside_compile_names_the_argument():
    torch._dynamo.reset()

    def f(A, B):
        return trnblas.gemm(1.0, A, B)

    with pytest.raises(ValueError, match="inner dimensions"):
        torch.compile(f, backend="eager")(torch.ones(3, 4), torch.ones(5, 2))
    with pytest.raises(TypeError, match="B"):
        torch.compile(f, backend="eager")(torch.ones(3, 4), torch.ones(4, 2, dtype=F64))


# ------------------------------------------------------------------ autograd: float64 gradcheck on the torch path

def _grad_cases():
    A = torch.randn(5, 4, generator=_g(), dtype=F64)
    B = torch.randn(4, 3, generator=_g(1), dtype=F64)
    C = torch.randn(5, 3, generator=_g(2), dtype=F64)
    x = torch.randn(3, 16, generator=_g(3), dtype=F64)
    X = torch.randn(6, 6, generator=_g(4), dtype=F64)
    rhs = torch.randn(6, 2, generator=_g(5), dtype=F64)
    csr, _ = _csr(8, 6)
    spd = lambda X: X @ X.T + 6 * torch.eye(6, dtype=F64)  # noqa: E731
    return [
        ("gemm", lambda A, B, C: trnblas.gemm(1.5, A, B, 0.5, C), (A, B, C)),
        ("gemm_TC", lambda A, B: trnblas.gemm(2.0, A, B, transA=True, transB="C"),
         (A.T.contiguous(), B.T.contiguous())),
        ("gemm_complex", lambda A, B: trnblas.gemm(1 - 2j, A, B, transA="C"),
         (A.T.contiguous().to(torch.complex128) * (1 + 1j), B.to(torch.complex128))),
        ("fft", lambda x: trnfft.fft(x, n=20, norm="ortho"), (x,)),
        ("ifft_trunc", lambda x: trnfft.ifft(x.to(torch.complex128), n=12), (x,)),
        ("rfft_irfft", lambda x: trnfft.irfft(trnfft.rfft(x) * 2, n=16), (x,)),
        ("cholesky", lambda X: trnsolver.cholesky(spd(X)), (X,)),
        ("solve", lambda X, rhs: trnsolver.solve(spd(X), rhs), (X, rhs)),
        ("eigvalsh", lambda X: trnsolver.eigh(X + X.T)[0], (X,)),
        ("spmm", lambda Bx: trnsparse.spmm(csr, Bx, alpha=2.0), (torch.randn(6, 3, generator=_g(6), dtype=F64),)),
        ("spmm_values", lambda v, Bx: trnsparse.spmm(trnsparse.CSRMatrix(v, csr.col_indices, csr.row_ptrs, csr.shape),
                                                      Bx, alpha=2.0), (csr.values, torch.randn(6, 3, dtype=F64))),
        ("spmv", lambda x: trnsparse.spmv(csr, x), (torch.randn(6, generator=_g(8), dtype=F64),)),
        ("einsum", lambda A, B: trntensor.einsum("ij,jk->ki", A, B), (A, B)),
    ]


@pytest.mark.parametrize("name,fn,args", _grad_cases(), ids=[c[0] for c in _grad_cases()])
def test_gradcheck_float64_through_the_operator(name, fn, args):
    args = tuple(a.clone().requires_grad_() for a in args)
    assert torch.autograd.gradcheck(fn, args)


# ----------------------------------------------------- autograd under "simulator": kernels in forward and backward

def _sim_cases():
    A = torch.randn(70, 40, generator=_g(), dtype=F64)
    B = torch.randn(40, 30, generator=_g(1), dtype=F64)
    x = torch.randn(3, 64, generator=_g(3), dtype=F64)
    X = torch.randn(12, 12, generator=_g(4), dtype=F64)
    spd = lambda X: X @ X.T + 12 * torch.eye(12, dtype=X.dtype)  # noqa: E731
    csr64, D = _csr(20, 12)
    csr32 = trnsparse.from_dense(D.float())
    return [
        # (name, f(ops..., csr), inputs, backward kernels expected, kernel-name fragment)
        ("gemm", lambda A, B: trnblas.gemm(1.5, A, B).square().sum(), (A, B), True, "gemm"),
        ("gemm_T", lambda A, B: trnblas.gemm(1.0, A, B, transA=True).sum(), (A.T.contiguous(), B), True, "gemm"),
        ("fft", lambda x: trnfft.fft(x, n=64).abs().sum(), (x,), True, ""),
        ("ifft", lambda x: trnfft.ifft(x.to(torch.complex64 if x.dtype == torch.float32 else torch.complex128))
         .real.square().sum(), (x,), True, ""),
        ("cholesky", lambda X: trnsolver.cholesky(spd(X)).sum(), (X,), False, ""),
        ("eigvalsh", lambda X: trnsolver.eigh(X + X.T)[0].square().sum(), (X,), False, ""),
        ("spmm", lambda Bx: trnsparse.spmm(csr32 if Bx.dtype == torch.float32 else csr64, Bx).square().sum(),
         (torch.randn(12, 5, generator=_g(6), dtype=F64),), True, "csr"),
        ("spmm_values", lambda v, Bx: trnsparse.spmm(trnsparse.CSRMatrix(v, csr64.col_indices, csr64.row_ptrs,
                                                                           csr64.shape), Bx).square().sum(),
         (csr64.values, torch.randn(12, 5, generator=_g(7), dtype=F64)), True, "csr"),
        # the einsum operator's own kernel path: a transpose kernel, then the GEMM kernel
        ("einsum", lambda A, B: trntensor.einsum("ij,jk->ik", A, B).square().sum(), (A, B), True, "_kernel"),
    ]


@pytest.mark.parametrize("name,fn,args,in_backward,kernel", _sim_cases(), ids=[c[0] for c in _sim_cases()])
def test_simulator_float32_gradients_equal_the_torch_path(name, fn, args, in_backward, kernel):
    want = [a.clone().requires_grad_() for a in args]
    fn(*want).backward()
    got = [a.float().requires_grad_() for a in args]
    with kernel_ran() as runs:
        loss = fn(*got)
        forward = len(runs)
        loss.backward()
    assert forward >= 1 and all(kernel in r.kernel for r in runs[:forward])
    if in_backward:  # the declared backward is forward Op calls: kernels run in it too
        assert len(runs) > forward
    for g, w in zip(got, want):
        # float32 forward tolerance, scaled by the gradient's magnitude
        scale = float(w.grad.abs().max()) + 1.0
        torch.testing.assert_close(g.grad.double(), w.grad, rtol=2e-4, atol=2e-4 * scale)


def test_simulator_without_grad_takes_no_operator(monkeypatch):
    from trnblas.level3 import GEMM

    called = []
    monkeypatch.setattr(dispatch.Op, "operator_call", lambda self, *a, **k: called.append(self.name))
    with kernel_ran("gemm_kernel"):
        trnblas.gemm(1.0, torch.ones(3, 2), torch.ones(2, 4))
    assert called == [] and GEMM.operator is not None


def test_docs_autograd_table_is_the_generated_one():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "operators.md").read_text()
    assert operators.autograd_table() in doc, "docs/operators.md is stale: regenerate with python -m trnsci.operators"


# ------------------------------------------------------------------ one decision: the plan says what the call runs

def _plan_walk():
    F32 = torch.float32
    g = _g(30)
    A, B = torch.randn(70, 40, generator=g), torch.randn(40, 30, generator=g)
    x = torch.randn(4, 64, generator=g)
    X = torch.randn(12, 12, generator=g)
    S = X @ X.T + 12 * torch.eye(12)
    csr, _ = _csr(20, 12, dtype=F32)
    return [
        ("trnblas.gemm", trnblas.gemm, (1.0, A, B)),
        ("trnblas.gemm", trnblas.gemm, (1.0, A.double(), B.double())),  # float64: torch, says why
        ("trnfft.fft", trnfft.fft, (x,)), ("trnfft.ifft", trnfft.ifft, (x.to(torch.complex64),)),
        ("trnfft.rfft", trnfft.rfft, (x,)), ("trnfft.irfft", trnfft.irfft, (torch.fft.rfft(x),)),
        ("trnsolver.cholesky", trnsolver.cholesky, (S,)), ("trnsolver.solve", trnsolver.solve, (S, x[0, :12])),
        ("trnsolver.eigh", trnsolver.eigh, (S,)),
        ("trnsparse.spmm", trnsparse.spmm, (csr, torch.randn(12, 3, generator=g))),
        ("trnsparse.spmv", trnsparse.spmv, (csr, torch.randn(12, generator=g))),
        ("trntensor.einsum", trntensor.einsum, ("ij,jk->ki", A, B)),
    ]


@pytest.mark.parametrize("backend", ["simulator", "torch"])
@pytest.mark.parametrize("op_name,fn,args", _plan_walk(), ids=[f"{c[0]}-{i}" for i, c in enumerate(_plan_walk())])
def test_plan_of_a_converted_function_is_what_its_call_runs(backend, op_name, fn, args):
    from trnsci.testing import check_plan_case

    plan, runs = check_plan_case(backend, op_name, (fn, args))
    if backend == "simulator" and args[-1].dtype != F64:
        assert runs and plan.backend == "simulator"
    if args[-1].dtype == F64:
        assert not runs and plan.backend == "torch" and (backend == "torch" or "float64" in plan.reason)


def test_dynamo_imported_before_trnsci_still_traces_the_full_forms():
    # the substitutions register at once when Dynamo is already loaded (here: a fresh interpreter)
    import subprocess
    import sys

    code = ("import torch, torch._dynamo\n"
            "import trnblas\n"
            "f = lambda A, B: torch.relu(trnblas.gemm(1.0, A, B))\n"
            "A, B = torch.ones(3, 2), torch.ones(2, 4)\n"
            "e = torch._dynamo.explain(f)(A, B)\n"
            "assert e.graph_break_count == 0, e.break_reasons\n"
            "assert 'torch.ops.trnblas.gemm' in e.graphs[0].code\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_compiled_backward_equals_eager(backend):
    # the backward is traced as well (AOT autograd): the declared backwards' Op calls on traced tensors
    torch._dynamo.reset()
    csr, _ = _csr(8, 6)
    X = torch.randn(6, 3, generator=_g(40), dtype=F64, requires_grad=True)
    W = torch.randn(3, 3, generator=_g(41), dtype=F64, requires_grad=True)

    def f(X, W):
        return (torch.tanh(trnblas.gemm(1.0, trnsparse.spmm(csr, X, alpha=2.0), W)).sum()
                + trnfft.fft(X, n=16, dim=0).abs().sum())

    want = torch.autograd.grad(f(X, W), (X, W))
    got = torch.autograd.grad(torch.compile(f, fullgraph=True, backend=backend)(X, W), (X, W))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_an_op_without_operator_keeps_gradients_under_a_kernel_backend(monkeypatch):
    # an op with a kernel but no torch operator (trnblas.dot with its operator taken away): with an
    # input that requires grad the one decision picks the differentiable torch lowering (and its plan
    # says so) -- never a kernel output without a gradient
    from trnblas.level1 import DOT

    monkeypatch.setattr(DOT, "_operator", None)
    x = torch.randn(300, generator=_g(50), requires_grad=True)
    y = torch.randn(300, generator=_g(51))
    with trnblas.use_backend("simulator"):
        plan = dispatch.plan_call(trnblas.dot, x, y)
        from trnsci import nki

        with nki.capture() as runs:
            r = trnblas.dot(x, y)
    assert plan.backend == "torch" and "autograd" in plan.reason and runs == []
    r.backward()
    torch.testing.assert_close(x.grad, y)  # d(x . y)/dx = y exactly


def test_solvers_compile_without_graph_breaks():
    # the finite scan and the info test read data on the host: torch.compile traces them as nothing
    torch._dynamo.reset()
    X = torch.randn(6, 6, generator=_g(60), dtype=F64)
    b = torch.randn(6, 2, generator=_g(61), dtype=F64)

    def f(X):
        A = X @ X.T + 6 * torch.eye(6, dtype=X.dtype)
        w, V = trnsolver.eigh(A)
        return trnsolver.cholesky(A).sum() + trnsolver.solve(A, b).sum() + w.sum()

    explained = torch._dynamo.explain(f)(X)
    assert explained.graph_break_count == 0, explained.break_reasons
    code = "".join(g.code for g in explained.graphs)
    assert all(f"torch.ops.trnsolver.{n}" in code for n in ("cholesky", "solve", "eigh"))
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="eager")(X), f(X), rtol=1e-12, atol=1e-12)
