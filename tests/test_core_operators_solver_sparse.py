"""trnsolver's and trnsparse's operations as torch operators (issue 29, items 1-3).

Every trnsolver/trnsparse ``Op`` converted here is ``torch.ops.<lib>.<name>``: ``torch.library.opcheck``
(schema, fake implementation, autograd registration, AOT dispatch), a meta-tensor call whose shapes
and dtypes equal the real output's, ``torch.autograd.gradcheck`` in float64 through the operator (so
the declared backward is the one checked, against finite differences), float32 gradients under
backend ``"simulator"`` equal to the float64 torch path's within the forward tolerance with kernels
run in the forward and (declared backwards) in the backward, and torch.compile programs with no graph
break. Values are compared with NumPy/SciPy, never trnsci with itself.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
import torch

import trnsolver
import trnsparse
from trnsci import dispatch
from trnsci.testing import kernel_ran

torch._dynamo = pytest.importorskip("torch._dynamo")

F64, F32, C128 = torch.float64, torch.float32, torch.complex128

#: Ops that stay plain Ops: none since tests/test_core_operators_rest.py (the Krylov solvers, lstsq,
#: inv_sqrt_spd_ns, schur and the sparse products are operators there).
NOT_OPERATORS: set = set()


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _rand(*shape, seed=0, dtype=F64):
    return torch.randn(*shape, generator=_g(seed), dtype=dtype)


def _spd(n, seed=0, dtype=F64):
    X = _rand(n, n, seed=seed, dtype=dtype)
    return X @ X.mH + n * torch.eye(n, dtype=dtype)


def _sparse_dense(m, n, seed=1, p=0.4, dtype=F64):
    return _rand(m, n, seed=seed, dtype=dtype) * (torch.rand(m, n, generator=_g(seed + 1)) < p)


def test_every_solver_and_sparse_op_is_an_operator_but_the_listed_ones():
    left = {n for n, o in dispatch.ops().items()
            if o.operator is None and n.split(".")[0] in ("trnsolver", "trnsparse")}
    assert left == NOT_OPERATORS
    for name, op in dispatch.ops().items():
        if name.split(".")[0] in ("trnsolver", "trnsparse") and op.operator is not None:
            lib, nm = name.split(".")
            assert op.operator is getattr(getattr(torch.ops, lib), nm).default


# ------------------------------------------------------------------ opcheck: every new operator

def _cases():
    S, X = _spd(5), _rand(5, 5, seed=2)
    B = _rand(5, 3, seed=3)
    R = _rand(6, 4, seed=4)  # ragged: m != n
    LU, piv = torch.linalg.lu_factor(X)
    A = trnsparse.from_dense(_sparse_dense(7, 7) + 3 * torch.eye(7, dtype=F64))  # full pattern
    bsr = trnsparse.BSRMatrix.from_dense(_sparse_dense(7, 5, seed=5, p=0.6), block_size=2)
    mask = trnsparse.local_window_mask(10, 2, block_size=4)
    cmask = trnsparse.causal_mask(9, block_size=4)
    Q, K, V = (_rand(2, 10, 3, seed=10 + i) for i in range(3))
    Qc, Kc, Vc = (_rand(1, 9, 5, seed=20 + i) for i in range(3))
    ts, ss = torch.ops.trnsolver, torch.ops.trnsparse
    bargs = (bsr.blocks, bsr.block_col_indices, bsr.block_row_ptrs, [7, 5], 2)
    return [
        ("cho_solve_lower", ts.cho_solve, (torch.linalg.cholesky(S), B, True)),
        ("cho_solve_upper", ts.cho_solve, (torch.linalg.cholesky(S).mH.contiguous(), B, False)),
        ("lu_factor", ts.lu_factor, (X,)),
        ("lu_ragged", ts.lu, (R,)),
        ("lu_solve_N", ts.lu_solve, (LU, piv, B, "N")),
        ("lu_solve_T", ts.lu_solve, (LU, piv, B, "T")),
        ("qr_reduced", ts.qr, (R, "reduced")),
        ("qr_complete", ts.qr, (R.mT.contiguous(), "complete")),
        ("qr_r", ts.qr, (R, "r")),
        ("svd", ts.svd, (R, False)),
        ("svd_full", ts.svd, (R, True)),
        ("pinv", ts.pinv, (R, None)),
        ("solve_spd", ts.solve_spd, (S, B, False)),
        ("solve_spd_refine", ts.solve_spd, (S, B, True)),
        ("inv", ts.inv, (X,)),
        ("inv_batched", ts.inv, (_rand(2, 4, 4, seed=6),)),
        ("inv_spd", ts.inv_spd, (S,)),
        ("slogdet", ts.slogdet, (X,)),
        ("inv_sqrt_spd", ts.inv_sqrt_spd, (S, None)),
        ("spmv_symmetric", ss.spmv_symmetric, (A.values, A.col_indices, A.row_ptrs, 7, _rand(7, seed=7), 1.5, "L")),
        ("spmm_symmetric", ss.spmv_symmetric, (A.values, A.col_indices, A.row_ptrs, 7, _rand(7, 2, seed=8), 1.0, "U")),
        ("spsv", ss.spsv, (A.values, A.col_indices, A.row_ptrs, 7, _rand(7, 2, seed=9), True, False, False)),
        ("spsv_upper_trans_unit", ss.spsv, (A.values, A.col_indices, A.row_ptrs, 7, _rand(7, seed=9), False, True,
                                            True)),
        ("bsr_spmm", ss.bsr_spmm, (*bargs, _rand(5, 3, seed=11))),
        ("bsr_spmv", ss.bsr_spmm, (*bargs, _rand(5, seed=12))),
        ("bsr_sddmm", ss.bsr_sddmm, (*bargs, _rand(7, 3, seed=13), _rand(3, 5, seed=14), 1.5, 0.5)),
        ("attention", ss.block_sparse_attention, (Q, K, V, mask.blocks != 0, mask.block_row_indices,
                                                  mask.block_col_indices, 4, 0.5, False)),
        ("attention_causal", ss.block_sparse_attention, (Qc, Kc, Vc, cmask.blocks != 0, cmask.block_row_indices,
                                                         cmask.block_col_indices, 4, 0.4, True)),
        ("screened_spmm", ss.screened_spmm, (S, _rand(5, seed=15), B, 0.3)),
        ("schwarz_bounds", ss.schwarz_bounds, (_rand(6, seed=16),)),
        ("screen_quartets", ss.screen_quartets, (torch.rand(4, 4, generator=_g(17), dtype=F64), 0.1)),
        ("density_screen", ss.density_screen, (torch.rand(4, 4, generator=_g(18), dtype=F64),
                                               _rand(4, 4, seed=19), 0.1)),
    ]


CASES = _cases()


@pytest.mark.parametrize("name,op,args", CASES, ids=[c[0] for c in CASES])
def test_opcheck_solver_sparse_operator(name, op, args):
    tests = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_static")
    torch.library.opcheck(op, args, test_utils=tests)


def _meta(a):
    if isinstance(a, torch.Tensor):
        return torch.empty(a.shape, dtype=a.dtype, device="meta")
    return a


@pytest.mark.parametrize("name,op,args", CASES, ids=[c[0] for c in CASES])
def test_meta_shapes_equal_the_real_output(name, op, args):
    real = op(*args)
    fake = op(*(_meta(a) for a in args))
    real = real if isinstance(real, tuple) else (real,)
    fake = fake if isinstance(fake, tuple) else (fake,)
    assert len(real) == len(fake)
    for r, f in zip(real, fake):
        assert f.device.type == "meta"
        assert (tuple(f.shape), f.dtype) == (tuple(r.shape), r.dtype)


def test_converted_operators_compute_what_numpy_and_scipy_compute():
    # one value check per family, through the operators, against an independent reference
    S, X, B = _spd(5), _rand(5, 5, seed=2), _rand(5, 3, seed=3)
    Sn, Xn, Bn = S.numpy(), X.numpy(), B.numpy()
    LU, piv = torch.linalg.lu_factor(X)
    ts, ss = torch.ops.trnsolver, torch.ops.trnsparse
    # float64 solves of well-conditioned 5x5 systems: a few hundred ulps of the solution's scale
    tol = dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ts.lu_solve(LU, piv, B, "N").numpy(), np.linalg.solve(Xn, Bn), **tol)
    np.testing.assert_allclose(ts.lu_solve(LU, piv, B, "T").numpy(), np.linalg.solve(Xn.T, Bn), **tol)
    np.testing.assert_allclose(ts.solve_spd(S, B, False)[0].numpy(), np.linalg.solve(Sn, Bn), **tol)
    np.testing.assert_allclose(ts.inv(X)[0].numpy(), np.linalg.inv(Xn), **tol)
    np.testing.assert_allclose(ts.inv_spd(S)[0].numpy(), np.linalg.inv(Sn), **tol)
    np.testing.assert_allclose(ts.slogdet(X)[1].numpy(), np.linalg.slogdet(Xn)[1], **tol)
    np.testing.assert_allclose(ts.cho_solve(torch.linalg.cholesky(S), B, True).numpy(),
                               sla.cho_solve((np.linalg.cholesky(Sn), True), Bn), **tol)
    D = _sparse_dense(7, 7).numpy() + 3 * np.eye(7)
    A = trnsparse.from_dense(torch.from_numpy(D))
    x = _rand(7, 2, seed=4)
    np.testing.assert_allclose(ss.spsv(A.values, A.col_indices, A.row_ptrs, 7, x, True, False, True).numpy(),
                               sla.solve_triangular(np.tril(D), x.numpy(), lower=True, trans=1), **tol)
    Ssym = np.tril(D) + np.tril(D, -1).T
    np.testing.assert_allclose(ss.spmv_symmetric(A.values, A.col_indices, A.row_ptrs, 7, x, 2.0, "L").numpy(),
                               2.0 * Ssym @ x.numpy(), **tol)


def test_sparse_add_operator_has_a_data_dependent_size_and_a_gradient():
    # the union pattern's size is decided by the data: the fake implementation gives it an unbacked
    # size, so the static AOT test does not apply and the dynamic one does
    Da = _sparse_dense(5, 4, seed=80)
    Db = _sparse_dense(5, 4, seed=82)
    A, B = trnsparse.from_dense(Da), trnsparse.from_dense(Db)
    args = (A.values, A.col_indices, A.row_ptrs, B.values, B.col_indices, B.row_ptrs, [5, 4], 1.5, 2.0)
    op = torch.ops.trnsparse.sparse_add
    torch.library.opcheck(op, args, test_utils=("test_schema", "test_autograd_registration", "test_faketensor",
                                                 "test_aot_dispatch_dynamic"))
    vals, cols, ptrs = op(*args)
    import scipy.sparse as sp

    want = 1.5 * sp.csr_matrix(Da.numpy()) + 2.0 * sp.csr_matrix(Db.numpy())
    got = sp.csr_matrix((vals.numpy(), cols.numpy(), ptrs.numpy()), shape=(5, 4))
    np.testing.assert_allclose(got.toarray(), want.toarray(), rtol=1e-14, atol=0)  # one product and a sum
    av, bv = (t.detach().clone().requires_grad_() for t in (A.values, B.values))
    assert torch.autograd.gradcheck(lambda a, b: op(a, *args[1:3], b, *args[4:])[0], (av, bv))
    # torch.compile takes the unbacked size once told to capture data-dependent output shapes

    def f(A, B):
        return trnsparse.sparse_add(A, B, 1.5, 2.0).values.square().sum()

    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        explained = torch._dynamo.explain(f)(A, B)
        assert explained.graph_break_count == 0, explained.break_reasons
        got = torch.compile(f, fullgraph=True, backend="eager")(A, B)
    np.testing.assert_allclose(float(got), float((want.data ** 2).sum()), rtol=1e-13)


# ------------------------------------------------------------------ gradcheck in float64 through the operators

def _grad_cases():
    S, X, B = _spd(5), _rand(5, 5, seed=2), _rand(5, 3, seed=3)
    LU, piv = torch.linalg.lu_factor(X)
    Xc = X.to(C128) * (1 + 0.5j)
    LUc, pivc = torch.linalg.lu_factor(Xc)
    R = _rand(6, 4, seed=4)
    D = _sparse_dense(7, 7) + 3 * torch.eye(7, dtype=F64)
    A = trnsparse.from_dense(D)
    bsr = trnsparse.BSRMatrix.from_dense(_sparse_dense(7, 5, seed=5, p=0.6), block_size=2)
    ci, rp = A.col_indices, A.row_ptrs
    bc, bp = bsr.block_col_indices, bsr.block_row_ptrs
    mask = trnsparse.local_window_mask(10, 2, block_size=4)
    cmask = trnsparse.causal_mask(9, block_size=4)
    ts, ss = torch.ops.trnsolver, torch.ops.trnsparse
    spd = lambda M: M @ M.mH + 5 * torch.eye(5, dtype=M.dtype)  # noqa: E731
    return [
        # (name, function of the differentiable inputs, inputs)
        ("cho_solve_lower", lambda F, B: ts.cho_solve(F, B, True), (torch.linalg.cholesky(S), B)),
        ("cho_solve_upper", lambda F, B: ts.cho_solve(F, B, False), (torch.linalg.cholesky(S).mH.contiguous(), B)),
        ("lu_factor", lambda X: ts.lu_factor(X)[0], (X,)),
        ("lu_ragged", lambda R: ts.lu(R)[1:3], (R,)),
        ("lu_solve_N", lambda LU, B: ts.lu_solve(LU, piv, B, "N"), (LU, B)),
        ("lu_solve_T", lambda LU, B: ts.lu_solve(LU, piv, B, "T"), (LU, B)),
        ("lu_solve_complex_T", lambda LU, B: ts.lu_solve(LU, pivc, B, "T"), (LUc, B.to(C128))),
        ("lu_solve_complex_C", lambda LU, B: ts.lu_solve(LU, pivc, B, "C"), (LUc, B.to(C128) * 1j)),
        ("qr", lambda R: ts.qr(R, "reduced"), (R,)),
        ("svd_values", lambda R: ts.svd(R, False)[1], (R,)),
        ("pinv", lambda R: ts.pinv(R, None), (R,)),
        ("solve_spd", lambda M, B: ts.solve_spd(spd(M), B, False)[0], (X, B)),
        ("solve_spd_lower_read", lambda A, B: ts.solve_spd(A, B, False)[0], (S.tril(), B)),
        ("inv", lambda X: ts.inv(X)[0], (X,)),
        ("solve_broadcast", lambda A, B: ts.solve(A, B)[0], (_rand(2, 4, 4, seed=23), _rand(4, 3, seed=24))),
        ("solve_complex", lambda A, B: ts.solve(A, B)[0], (Xc, B.to(C128))),
        ("inv_complex", lambda X: ts.inv(X)[0], (Xc,)),
        ("inv_batched", lambda X: ts.inv(X)[0], (_rand(2, 4, 4, seed=6),)),
        ("inv_spd", lambda A: ts.inv_spd(A)[0], (S.tril(),)),
        ("slogdet", lambda X: ts.slogdet(X)[1], (X,)),
        ("slogdet_complex", lambda X: ts.slogdet(X), (Xc,)),
        ("slogdet_complex_phase_batched", lambda X: ts.slogdet(X)[0], (_rand(2, 4, 4, seed=25).to(C128) * (1 - 2j),)),
        ("inv_sqrt_spd", lambda M: ts.inv_sqrt_spd(spd(M), None)[0], (X,)),
        ("spmv_symmetric", lambda v, x: ss.spmv_symmetric(v, ci, rp, 7, x, 1.5, "L"), (A.values, _rand(7, seed=7))),
        ("spmm_symmetric_U", lambda v, x: ss.spmv_symmetric(v, ci, rp, 7, x, 1.0, "U"),
         (A.values, _rand(7, 2, seed=8))),
        ("spsv", lambda v, b: ss.spsv(v, ci, rp, 7, b, True, False, False), (A.values, _rand(7, 2, seed=9))),
        ("spsv_upper_trans_unit", lambda v, b: ss.spsv(v, ci, rp, 7, b, False, True, True),
         (A.values, _rand(7, seed=9))),
        ("spsv_complex_trans", lambda v, b: ss.spsv(v, ci, rp, 7, b, True, False, True),
         (A.values.to(C128) * (1 - 1j), _rand(7, seed=9).to(C128))),
        ("bsr_spmm", lambda t, B: ss.bsr_spmm(t, bc, bp, [7, 5], 2, B), (bsr.blocks, _rand(5, 3, seed=11))),
        ("bsr_spmv", lambda t, B: ss.bsr_spmm(t, bc, bp, [7, 5], 2, B), (bsr.blocks, _rand(5, seed=12))),
        ("bsr_sddmm", lambda t, X, Y: ss.bsr_sddmm(t, bc, bp, [7, 5], 2, X, Y, 1.5, 0.5),
         (bsr.blocks, _rand(7, 3, seed=13), _rand(3, 5, seed=14))),
        ("bsr_sddmm_complex", lambda t, X, Y: ss.bsr_sddmm(t, bc, bp, [7, 5], 2, X, Y, 1.5 - 1j, 0.5 + 2j),
         (bsr.blocks.to(C128), _rand(7, 3, seed=13).to(C128) * 1j, _rand(3, 5, seed=14).to(C128))),
        ("attention", lambda Q, K, V: ss.block_sparse_attention(Q, K, V, mask.blocks != 0, mask.block_row_indices,
                                                                mask.block_col_indices, 4, 0.5, False),
         tuple(_rand(2, 10, 3, seed=30 + i) for i in range(3))),
        ("attention_causal", lambda Q, K, V: ss.block_sparse_attention(
            Q, K, V, cmask.blocks != 0, cmask.block_row_indices, cmask.block_col_indices, 4, 0.4, True),
         tuple(_rand(1, 9, 5, seed=40 + i) for i in range(3))),
        ("sddmm_csr", lambda v, X, Y: ss.sddmm(ci, rp, v, X, Y, 1.5, 0.5),
         (A.values, _rand(7, 3, seed=21), _rand(3, 7, seed=22))),
        ("sddmm_csr_complex", lambda v, X, Y: ss.sddmm(ci, rp, v, X, Y, 1.5 - 1j, 0.5 + 1j),
         (A.values.to(C128), _rand(7, 3, seed=21).to(C128) * 1j, _rand(3, 7, seed=22).to(C128))),
        ("screened_spmm", lambda A, B: ss.screened_spmm(A, torch.linspace(0.1, 1, 5, dtype=F64), B, 0.3), (S, B)),
        ("schwarz_bounds", lambda d: ss.schwarz_bounds(d), (_rand(6, seed=16),)),
    ]


GRAD_CASES = _grad_cases()


@pytest.mark.parametrize("name,fn,args", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradcheck_float64_solver_sparse_operator(name, fn, args):
    args = tuple(a.detach().clone().requires_grad_() for a in args)
    assert torch.autograd.gradcheck(fn, args)


@pytest.mark.parametrize("name,fn,args", [
    ("lu_solve", lambda X, b: trnsolver.lu_solve(trnsolver.lu_factor(X), b), (_rand(5, 5, seed=2), _rand(5, seed=3))),
    ("cho_solve", lambda F, b: trnsolver.cho_solve((F, True), b), (torch.linalg.cholesky(_spd(5)), _rand(5, seed=3))),
    ("det", lambda X: trnsolver.det(X), (_rand(5, 5, seed=2),)),
    ("sddmm_bsr", lambda X, Y: trnsparse.sddmm(trnsparse.BSRMatrix.from_dense(torch.ones(6, 5, dtype=F64),
                                                                              block_size=4), X, Y).blocks,
     (_rand(6, 2, seed=5), _rand(2, 5, seed=6))),
    ("spsv", lambda b: trnsparse.spsv(trnsparse.from_dense(_spd(5)), b, lower=False), (_rand(5, seed=7),)),
], ids=lambda c: c if isinstance(c, str) else "")
def test_gradcheck_public_functions_under_simulator_through_the_operator(name, fn, args):
    # float64 under "simulator": the call takes the operator (an input requires grad), its implementation
    # answers on torch (no float64 kernel), and the gradient is the declared backward's
    args = tuple(a.detach().clone().requires_grad_() for a in args)
    with trnsolver.use_backend("simulator"), trnsparse.use_backend("simulator"):
        assert torch.autograd.gradcheck(fn, args)


# ----------------------------------------------------- float32 under "simulator": kernels in forward and backward

def _sim_cases():
    n = 140  # ragged against the kernels' 128 tiles
    S = _spd(n, seed=50)
    X = _rand(n, n, seed=51) + n ** 0.5 * torch.eye(n, dtype=F64)
    B = _rand(n, 3, seed=52)
    Sq = 200
    mask = trnsparse.local_window_mask(Sq, 2, block_size=128)
    qkv = tuple(_rand(2, Sq, 16, seed=53 + i) for i in range(3))
    bsr64 = trnsparse.BSRMatrix.from_dense(_sparse_dense(200, 150, seed=56, p=0.3), block_size=128)
    D = _sparse_dense(n, n, seed=57, p=0.05) + 4 * torch.eye(n, dtype=F64)

    def bsr(dtype):
        return bsr64 if dtype == F64 else bsr64.to(F32)

    def csr(dtype):
        return trnsparse.from_dense(D.to(dtype))

    return [
        # (name, loss of the inputs, inputs, a kernel runs in the backward, kernel-name fragment)
        ("attention", lambda Q, K, V: trnsparse.block_sparse_attention(Q, K, V, mask).square().sum(), qkv, True,
         "attention"),
        ("bsr_spmm", lambda B: trnsparse.bsr_spmm(bsr(B.dtype), B).square().sum(), (_rand(150, 4, seed=58),), True,
         "bsr"),
        ("bsr_sddmm", lambda X, Y: trnsparse.sddmm(bsr(X.dtype), X, Y).blocks.square().sum(),
         (_rand(200, 8, seed=59), _rand(8, 150, seed=60)), True, "bsr"),
        ("spmv_symmetric", lambda x: trnsparse.spmv_symmetric(csr(x.dtype), x).square().sum(),
         (_rand(n, seed=61),), True, "csr"),
        ("spsv", lambda b: trnsparse.spsv(csr(b.dtype), b).square().sum(), (_rand(n, seed=62),), True, "spsv"),
        ("sddmm_csr", lambda X, Y: trnsparse.sddmm(csr(X.dtype), X, Y).values.square().sum(),
         (_rand(n, 8, seed=63), _rand(8, n, seed=64)), True, "sddmm"),
        ("inv", lambda X: trnsolver.inv(X).square().sum(), (X,), True, ""),
        ("solve", lambda X, B: trnsolver.solve(X, B).square().sum(), (X, B), True, ""),
        ("solve_spd", lambda A, B: trnsolver.solve_spd(A, B).square().sum(), (S, B), True, ""),
        ("lu_solve", lambda X, B: trnsolver.lu_solve(trnsolver.lu_factor(X), B).square().sum(), (X, B), True, ""),
        ("cho_solve", lambda A, B: trnsolver.cho_solve(trnsolver.cho_factor(A, lower=True), B).square().sum(),
         (S, B), True, ""),
        ("slogdet", lambda X: trnsolver.slogdet(X)[1], (X,), True, ""),
    ]


SIM_CASES = _sim_cases()


@pytest.mark.parametrize("name,fn,args,in_backward,kernel", SIM_CASES, ids=[c[0] for c in SIM_CASES])
def test_simulator_float32_gradients_equal_the_torch_path_solver_sparse(name, fn, args, in_backward, kernel):
    want = [a.clone().requires_grad_() for a in args]
    fn(*want).backward()
    got = [a.float().requires_grad_() for a in args]
    with trnsolver.use_backend("simulator"), trnsparse.use_backend("simulator"):
        with kernel_ran() as runs:
            loss = fn(*got)
            forward = len(runs)
            loss.backward()
    assert forward >= 1 and all(kernel in r.kernel for r in runs[:forward]), [r.kernel for r in runs]
    if in_backward:  # the declared backward is forward Op calls: kernels run in it too
        assert len(runs) > forward
    for g, w in zip(got, want):
        # float32 forward tolerance, scaled by the gradient's magnitude
        scale = float(w.grad.abs().max()) + 1.0
        torch.testing.assert_close(g.grad.double(), w.grad, rtol=2e-3, atol=2e-4 * scale)


# ------------------------------------------------------------------ torch.compile: no graph break

def _attention_block(Q, K, V, W, mask):
    out = trnsparse.block_sparse_attention(Q, K, V, mask)
    return torch.tanh(out @ W).sum()


def _cg_matrix(n=10):
    D = _sparse_dense(n, n, seed=74, p=0.3)
    return trnsparse.from_dense(D + D.T + 2 * n * torch.eye(n, dtype=F64))


#: The CG program's matrix, a constant of the compiled function (a CSRMatrix passed as a compiled
#: function's argument is not traced: its cached int32 index arrays check tensor version counters)
_CG_A = _cg_matrix()


def _cg_spmv(b, iters=6):
    A = _CG_A
    x = torch.zeros_like(b)
    r = b.clone()
    p = r.clone()
    rr = r @ r
    for _ in range(iters):
        Ap = trnsparse.spmv(A, p)
        alpha = rr / (p @ Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rr_new = r @ r
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


def _lu_solve_program(X, B):
    return trnsolver.lu_solve(trnsolver.lu_factor(X), B).sin()


def _compile_cases():
    mask = trnsparse.local_window_mask(12, 2, block_size=4)
    Q, K, V = (_rand(2, 12, 4, seed=70 + i) for i in range(3))
    W = _rand(4, 3, seed=73)
    b = _rand(_CG_A.shape[0], seed=75)
    X = _rand(6, 6, seed=76) + 3 * torch.eye(6, dtype=F64)
    B = _rand(6, 2, seed=77)
    return [("sparse_attention_block", _attention_block, (Q, K, V, W, mask), (0, 1, 2)),
            ("cg_spmv_loop", _cg_spmv, (b,), (0,)),
            ("lu_solve", _lu_solve_program, (X, B), (0, 1))]


COMPILE_CASES = _compile_cases()


@pytest.mark.parametrize("name,fn,args,diff", COMPILE_CASES, ids=[c[0] for c in COMPILE_CASES])
def test_compile_solver_sparse_programs_without_graph_breaks(name, fn, args, diff):
    torch._dynamo.reset()
    explained = torch._dynamo.explain(fn)(*args)
    assert explained.graph_break_count == 0, explained.break_reasons
    code = "".join(g.code for g in explained.graphs)
    wanted = {"sparse_attention_block": "torch.ops.trnsparse.block_sparse_attention",
              "cg_spmv_loop": "torch.ops.trnsparse.spmv", "lu_solve": "torch.ops.trnsolver.lu_solve"}[name]
    assert wanted in code

    def loss(*a):
        out = fn(*a)
        return out.sum() if out.dim() else out

    def grads(f):
        inputs = [a.detach().clone().requires_grad_() if i in diff else a for i, a in enumerate(args)]
        value = f(*inputs)
        return value.detach(), torch.autograd.grad(value, [inputs[i] for i in diff])

    want_v, want_g = grads(loss)
    for backend in ("eager", "inductor"):
        torch._dynamo.reset()
        got_v, got_g = grads(torch.compile(loss, fullgraph=True, backend=backend))
        # float64 throughout: inductor may reassociate sums (a few ulps of the result's scale)
        torch.testing.assert_close(got_v, want_v, rtol=1e-10, atol=1e-10)
        for a, w in zip(got_g, want_g):
            torch.testing.assert_close(a, w, rtol=1e-9, atol=1e-10)


def test_compiled_values_match_numpy_and_scipy():
    # the compiled programs compute what NumPy/SciPy compute (not just what eager trnsci computes)
    torch._dynamo.reset()
    _, _, (X, B), _ = COMPILE_CASES[2]
    got = torch.compile(_lu_solve_program, fullgraph=True, backend="eager")(X, B)
    np.testing.assert_allclose(got.numpy(), np.sin(np.linalg.solve(X.numpy(), B.numpy())), rtol=1e-10, atol=1e-12)
    _, _, (b,), _ = COMPILE_CASES[1]
    A, n = _CG_A, b.shape[0]
    import scipy.sparse as sp
    import scipy.sparse.linalg  # noqa: F401

    As = sp.csr_matrix((A.values.numpy(), A.col_indices.numpy(), A.row_ptrs.numpy()), shape=(n, n))
    x = torch.compile(_cg_spmv, fullgraph=True, backend="eager")(b, iters=n)
    # n CG steps on an SPD n x n system (diagonally dominant, cond < 3): the solution to rounding
    np.testing.assert_allclose(x.numpy(), sp.linalg.spsolve(As.tocsc(), b.numpy()), rtol=1e-9, atol=1e-10)


def _sparse_cg(A, b, iters=5):
    """A fixed-iteration CG loop on a CSRMatrix passed as an argument, then an SpMM with it."""
    x = torch.zeros_like(b)
    r = b - trnsparse.spmv(A, x)
    p, rr = r.clone(), r @ r
    for _ in range(iters):
        Ap = A.matvec(p)
        a = rr / (p @ Ap)
        x, r = x + a * p, r - a * Ap
        rn = r @ r
        p, rr = r + (rn / rr) * p, rn
    return x, trnsparse.spmm(A, torch.stack([x, b], 1))


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_compiled_function_taking_a_csr_matrix_argument(backend):
    # the matrix is an argument (its arrays graph inputs), not a closure constant; from_scipy's matrix
    # and one used eagerly first hold cached int32 index arrays, which a trace must not read
    sp = pytest.importorskip("scipy.sparse")
    torch._dynamo.reset()
    compiled = torch.compile(_sparse_cg, fullgraph=True, backend=backend)
    for n, seed in ((8, 1), (11, 2)):
        D = torch.randn(n, n, generator=_g(seed), dtype=F64) * (torch.rand(n, n, generator=_g(seed + 1)) < 0.3)
        S = D @ D.T + n * torch.eye(n, dtype=F64)
        S = S * (S.abs() > 0.5)
        ref = sp.csr_array(S.numpy())
        b = torch.linspace(1, 2, n, dtype=F64)
        for A in (trnsparse.from_dense(S), trnsparse.from_scipy(ref)):
            _sparse_cg(A, b)  # eager first: the host paths cache their int32 indices on A
            if n == 8:
                torch._dynamo.reset()
                explained = torch._dynamo.explain(_sparse_cg)(A, b)
                assert explained.graph_break_count == 0, explained.break_reasons
                torch._dynamo.reset()
            x, Y = compiled(A, b)
            # reference: SciPy's CSR products driving the same iteration in NumPy
            xr, bn = np.zeros(n), b.numpy()
            r = bn - ref @ xr
            p, rr = r.copy(), r @ r
            for _ in range(5):
                Ap = ref @ p
                a = rr / (p @ Ap)
                xr, r = xr + a * p, r - a * Ap
                rn = r @ r
                p, rr = r + (rn / rr) * p, rn
            # float64, 5 steps of a well-conditioned (diagonally dominant) system: rounding only
            np.testing.assert_allclose(x.numpy(), xr, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(Y.numpy(), ref @ np.stack([x.numpy(), bn], 1), rtol=1e-13, atol=1e-13)


def test_compiled_spsv_with_a_matrix_argument_matches_scipy_and_asserts_the_diagonal():
    spla = pytest.importorskip("scipy.sparse.linalg")
    sp = pytest.importorskip("scipy.sparse")
    n = 7
    L = torch.tril(torch.randn(n, n, generator=_g(5), dtype=F64)) * (torch.rand(n, n, generator=_g(6)) < 0.5)
    L = L + 3 * torch.eye(n, dtype=F64)
    b = torch.randn(n, generator=_g(7), dtype=F64)

    def solve(A, b):
        return trnsparse.spsv(A, b, lower=True)

    torch._dynamo.reset()
    explained = torch._dynamo.explain(solve)(trnsparse.from_dense(L), b)
    assert explained.graph_break_count == 0, explained.break_reasons  # the singularity check reads no data
    torch._dynamo.reset()
    got = torch.compile(solve, fullgraph=True, backend="eager")(trnsparse.from_dense(L), b)
    want = spla.spsolve_triangular(sp.csr_array(L.numpy()), b.numpy(), lower=True)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)  # float64 substitution, n = 7
    Z = L.clone()
    Z[3, 3] = 0.0
    with pytest.raises(np.linalg.LinAlgError, match="spsv: A is singular: the diagonal entry of row 3"):
        solve(trnsparse.from_dense(Z), b)
    with pytest.raises(RuntimeError, match="spsv: A is singular: a diagonal entry is zero"):
        torch.compile(solve, fullgraph=True, backend="eager")(trnsparse.from_dense(Z), b)
