"""The last trnsolver/trnsparse operations made torch operators (issue 29, item 1): the Krylov solvers,
lstsq, inv_sqrt_spd_ns, schur, SpGEMM and BSR SpGEMM.

``torch.ops.trnsolver.{cg,gmres,bicgstab,minres}`` take A as a dense tensor or a CSR matrix's arrays and
the preconditioner as "none"/"jacobi"/"block_jacobi" with its tensors, and return x, the iteration count
(a 0-d tensor) and the residual history padded with -1 to a fixed length; their backward is implicit
differentiation of ``A x = b`` through one more solve. ``torch.ops.trnsparse.{spgemm,bsr_spgemm}`` return
a pattern whose size the data decides (an unbacked size under fake tensors). Checked here: opcheck, meta
shapes, values against SciPy, float64 gradcheck, and a compiled CG on a CSR matrix without graph breaks.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

import trnsolver
import trnsparse
from trnsci import dispatch

torch._dynamo = pytest.importorskip("torch._dynamo")

F64, C128 = torch.float64, torch.complex128
ts, ss = torch.ops.trnsolver, torch.ops.trnsparse


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _rand(*shape, seed=0, dtype=F64):
    return torch.randn(*shape, generator=_g(seed), dtype=dtype)


def _spd(n, seed=0):
    X = _rand(n, n, seed=seed)
    return X @ X.T + n * torch.eye(n, dtype=F64)


def _sparse_dense(m, n, seed=1, p=0.4):
    return _rand(m, n, seed=seed) * (torch.rand(m, n, generator=_g(seed + 1)) < p)


def _csr_spd(n=9, seed=3):
    D = _sparse_dense(n, n, seed=seed, p=0.3)
    return trnsparse.from_dense(D + D.T + 2 * n * torch.eye(n, dtype=F64))


def _csr_general(n=9, seed=5):
    return trnsparse.from_dense(_sparse_dense(n, n, seed=seed, p=0.35) + n * torch.eye(n, dtype=F64))


def _arrays(A):
    return A.values, A.col_indices, A.row_ptrs


def _scipy(A):
    return sp.csr_matrix((A.values.numpy(), A.col_indices.numpy(), A.row_ptrs.numpy()), shape=A.shape)


KRYLOV = ("trnsolver.cg", "trnsolver.gmres", "trnsolver.bicgstab", "trnsolver.minres")
REST = ("trnsolver.lstsq", "trnsolver.inv_sqrt_spd_ns", "trnsolver.schur", "trnsparse.spgemm", "trnsparse.bsr_spgemm")


def test_every_registered_op_is_a_torch_operator():
    # every library's Ops registered
    import trnblas  # noqa: F401
    import trnfft  # noqa: F401
    import trnrand  # noqa: F401
    import trntensor  # noqa: F401

    libraries = ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor")
    # (other tests and the docs' examples register scratch Ops outside these namespaces)
    assert [n for lib in libraries for n, o in dispatch.ops(lib).items() if o.operator is None] == []
    for name in KRYLOV + REST:
        op = dispatch.ops()[name]
        lib, nm = name.split(".")
        assert op.operator is getattr(getattr(torch.ops, lib), nm).default


# ------------------------------------------------------------------ opcheck and meta shapes

def _krylov_cases():
    S, b = _spd(6), _rand(6, seed=1)
    G = _rand(6, 6, seed=2) + 6 * torch.eye(6, dtype=F64)
    Ac, Ag = _csr_spd(), _csr_general()
    bc = _rand(9, seed=4)
    inv_d = 1.0 / S.diagonal()
    Mb = trnsolver.block_jacobi_preconditioner(S, block_size=4)  # one full block and a tail
    return [
        ("cg_dense", ts.cg, (S, None, None, b, None, 1e-10, 0.0, 50, "none", None, None)),
        ("cg_csr_jacobi", ts.cg, (*_arrays(Ac), bc, None, 1e-10, 0.0, 50, "jacobi",
                                  1.0 / Ac.to_dense().diagonal(), None)),
        ("cg_dense_block_jacobi_x0", ts.cg, (S, None, None, b, _rand(6, seed=9), 1e-10, 0.0, 50, "block_jacobi",
                                             Mb.Lb, Mb.L_tail)),
        ("cg_fixed_iterations", ts.cg, (S, None, None, b, None, 0.0, 0.0, 3, "jacobi", inv_d, None)),
        ("gmres_dense", ts.gmres, (G, None, None, b, None, 1e-10, 0.0, 8, "none", None, None, 3)),
        ("gmres_csr", ts.gmres, (*_arrays(Ag), bc, None, 1e-10, 0.0, 10, "none", None, None, 5)),
        ("bicgstab_dense", ts.bicgstab, (G, None, None, b, None, 1e-10, 0.0, 50, "none", None, None)),
        ("bicgstab_csr_jacobi", ts.bicgstab, (*_arrays(Ag), bc, None, 1e-10, 0.0, 50, "jacobi",
                                              1.0 / Ag.to_dense().diagonal(), None)),
        ("minres_dense", ts.minres, (S, None, None, b, None, 1e-10, 0.0, 50, "none", None, None)),
        ("minres_csr", ts.minres, (*_arrays(Ac), bc, None, 1e-10, 0.0, 50, "none", None, None)),
        ("cg_complex", ts.cg, ((S + 1j * (G - G.T)).to(C128), None, None, b.to(C128) * (1 - 1j), None, 1e-10, 0.0,
                               50, "none", None, None)),
    ]


KRYLOV_CASES = _krylov_cases()


@pytest.mark.parametrize("name,op,args", KRYLOV_CASES, ids=[c[0] for c in KRYLOV_CASES])
def test_opcheck_krylov_operator(name, op, args):
    tests = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_static")
    torch.library.opcheck(op, args, test_utils=tests)


def _meta(a):
    return torch.empty(a.shape, dtype=a.dtype, device="meta") if isinstance(a, torch.Tensor) else a


@pytest.mark.parametrize("name,op,args", KRYLOV_CASES, ids=[c[0] for c in KRYLOV_CASES])
def test_krylov_meta_shapes_equal_the_real_output(name, op, args):
    real = op(*args)
    fake = op(*(_meta(a) for a in args))
    assert len(real) == len(fake) == 3
    for r, f in zip(real, fake):
        assert f.device.type == "meta"
        assert (tuple(f.shape), f.dtype) == (tuple(r.shape), r.dtype)


@pytest.mark.parametrize("name,op,args", KRYLOV_CASES, ids=[c[0] for c in KRYLOV_CASES])
def test_krylov_operators_solve_what_scipy_solves(name, op, args):
    A, cols, ptrs, b = args[:4]
    x, iters, hist = op(*args)
    n = b.shape[0]
    D = A.numpy() if cols is None else sp.csr_matrix((A.numpy(), cols.numpy(), ptrs.numpy()), shape=(n, n)).toarray()
    want = np.linalg.solve(D, b.numpy())
    used = int(iters)
    recorded = hist[hist >= 0]
    assert 1 <= used and recorded.shape[0] >= 2 and (hist[recorded.shape[0]:] == -1).all()
    if name == "cg_fixed_iterations":  # tol 0: exactly maxiter steps; 3 CG steps reduce the residual
        assert used == 3 and recorded.shape[0] == 4 and recorded[-1] < recorded[0]
        return
    # tol 1e-10 on systems with condition numbers below ~10: the solution to ~1e-9 relative
    np.testing.assert_allclose(x.numpy(), want, rtol=1e-8, atol=1e-9 * np.abs(want).max())
    assert float(recorded[-1]) < 1e-9


# ------------------------------------------------------------------ gradients: implicit differentiation

def _grad_cases():
    n = 6
    G = _rand(n, n, seed=2) + n * torch.eye(n, dtype=F64)
    b = _rand(n, seed=1)
    Ac, Ag = _csr_spd(), _csr_general()
    ci, rp = Ac.col_indices, Ac.row_ptrs
    gi, gp = Ag.col_indices, Ag.row_ptrs
    sym = lambda M: M + M.mT + 2 * n * torch.eye(n, dtype=M.dtype)  # noqa: E731  Hermitian for CG/MINRES
    tol = 1e-13  # converged to rounding: the implicit derivative is the derivative of the computed x
    return [
        ("cg_dense", lambda M, b: ts.cg(sym(M), None, None, b, None, tol, 0.0, 200, "none", None, None)[0], (G, b)),
        ("cg_csr_rhs", lambda b: ts.cg(*_arrays(Ac), b, None, tol, 0.0, 200, "jacobi",
                                       1.0 / Ac.to_dense().diagonal(), None)[0], (_rand(9, seed=4),)),
        ("minres_dense", lambda M, b: ts.minres(sym(M), None, None, b, None, tol, 0.0, 200, "none", None, None)[0],
         (G, b)),
        ("gmres_dense", lambda A, b: ts.gmres(A, None, None, b, None, tol, 0.0, 20, "none", None, None, 6)[0],
         (G, b)),
        ("gmres_csr", lambda v, b: ts.gmres(v, gi, gp, b, None, tol, 0.0, 20, "none", None, None, 9)[0],
         (Ag.values, _rand(9, seed=4))),
        ("bicgstab_csr", lambda v, b: ts.bicgstab(v, gi, gp, b, None, tol, 0.0, 200, "jacobi",
                                                  1.0 / Ag.to_dense().diagonal(), None)[0],
         (Ag.values, _rand(9, seed=4))),
        ("bicgstab_dense_complex", lambda A, b: ts.bicgstab(A, None, None, b, None, tol, 0.0, 200, "none", None,
                                                            None)[0],
         (G.to(C128) * (1 + 0.3j), b.to(C128) * 1j)),
        ("cg_csr_values_symmetric", lambda v, b: ts.cg(v, ci, rp, b, None, tol, 0.0, 200, "none", None, None)[0],
         (Ac.values, _rand(9, seed=4))),
    ]


GRAD_CASES = _grad_cases()


@pytest.mark.parametrize("name,fn,args", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradcheck_float64_krylov_operator(name, fn, args):
    args = tuple(a.detach().clone().requires_grad_() for a in args)
    if name == "cg_csr_values_symmetric":
        # perturbing one stored entry makes A non-symmetric, where CG solves nothing: check the values'
        # gradient against SciPy's solve instead (dA_ij = -(A^-1 g)_i x_j on the pattern)
        v, b = args
        x = fn(v, b)
        gx = _rand(9, seed=8)
        (dv, db) = torch.autograd.grad(x, (v, b), gx)
        A = _scipy(trnsparse.CSRMatrix(v.detach(), Ac_cols(), Ac_ptrs(), (9, 9))).toarray()
        xs = np.linalg.solve(A, b.detach().numpy())
        gb = np.linalg.solve(A.T, gx.numpy())
        rows = np.repeat(np.arange(9), np.diff(Ac_ptrs().numpy()))
        np.testing.assert_allclose(db.numpy(), gb, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(dv.numpy(), -gb[rows] * xs[Ac_cols().numpy()], rtol=1e-9, atol=1e-12)
        return
    assert torch.autograd.gradcheck(fn, args)


def Ac_cols():
    return _csr_spd().col_indices


def Ac_ptrs():
    return _csr_spd().row_ptrs


def test_public_cg_under_the_simulator_takes_the_operator_and_its_gradient():
    # an input that requires grad under a kernel backend: the call crosses the operator (the matrix inside
    # the matvec object decides), and the gradient is the implicit one, equal to SciPy's adjoint solve
    S = _spd(6)
    b = _rand(6, seed=1).requires_grad_()
    A = S.clone().requires_grad_()
    with trnsolver.use_backend("simulator"):
        x, iters, relres = trnsolver.cg(A, b, tol=1e-13, maxiter=100)
    assert isinstance(iters, int) and isinstance(relres, float) and relres < 1e-12
    gx = _rand(6, seed=2)
    dA, db = torch.autograd.grad(x, (A, b), gx)
    gb = np.linalg.solve(S.numpy(), gx.numpy())
    xs = np.linalg.solve(S.numpy(), b.detach().numpy())
    np.testing.assert_allclose(db.numpy(), gb, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dA.numpy(), -np.outer(gb, xs), rtol=1e-10, atol=1e-12)


def test_callables_and_callbacks_keep_the_plain_path():
    S = _spd(6)
    b = _rand(6, seed=1)
    seen = []
    with trnsolver.use_backend("simulator"):
        x, iters, _ = trnsolver.cg(lambda v: S @ v, b, tol=1e-12, callback=seen.append)
    assert len(seen) == iters
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(S.numpy(), b.numpy()), rtol=1e-9)


# ------------------------------------------------------------------ SpGEMM / BSR SpGEMM

def _spgemm_args():
    A = trnsparse.from_dense(_sparse_dense(5, 7, seed=30))
    B = trnsparse.from_dense(_sparse_dense(7, 4, seed=32))
    return A, B, (*_arrays(A), [5, 7], *_arrays(B), [7, 4])


def _bsr_spgemm_args():
    A = trnsparse.BSRMatrix.from_dense(_sparse_dense(7, 6, seed=34, p=0.5), block_size=2)
    B = trnsparse.BSRMatrix.from_dense(_sparse_dense(6, 5, seed=36, p=0.5), block_size=2)
    return A, B, (A.blocks, A.block_col_indices, A.block_row_ptrs, [7, 6], B.blocks, B.block_col_indices,
                  B.block_row_ptrs, [6, 5], 2)


def test_opcheck_spgemm_operators_with_a_data_dependent_size():
    tests = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(ss.spgemm, _spgemm_args()[2], test_utils=tests)
    torch.library.opcheck(ss.bsr_spgemm, _bsr_spgemm_args()[2], test_utils=tests)


def test_spgemm_operators_compute_scipys_product_with_sorted_columns():
    A, B, args = _spgemm_args()
    vals, cols, ptrs = ss.spgemm(*args)
    got = sp.csr_matrix((vals.numpy(), cols.numpy(), ptrs.numpy()), shape=(5, 4))
    assert got.has_sorted_indices
    # one product per term, summed in some order: a few ulps
    np.testing.assert_allclose(got.toarray(), (_scipy(A) @ _scipy(B)).toarray(), rtol=1e-13, atol=1e-14)
    A, B, args = _bsr_spgemm_args()
    blocks, bcol, bptr = ss.bsr_spgemm(*args)
    C = trnsparse.BSRMatrix(blocks, bcol, bptr, (7, 5), block_size=2)
    want = A.to_dense().numpy() @ B.to_dense().numpy()
    np.testing.assert_allclose(C.to_dense().numpy(), want, rtol=1e-13, atol=1e-14)


def test_gradcheck_float64_spgemm_operators():
    A, B, args = _spgemm_args()
    av, bv = (t.detach().clone().requires_grad_() for t in (A.values, B.values))
    assert torch.autograd.gradcheck(lambda a, b: ss.spgemm(a, *args[1:4], b, *args[5:])[0], (av, bv))
    A, B, args = _bsr_spgemm_args()
    ab, bb = (t.detach().clone().requires_grad_() for t in (A.blocks, B.blocks))
    assert torch.autograd.gradcheck(lambda a, b: ss.bsr_spgemm(a, *args[1:4], b, *args[5:])[0], (ab, bb))


# ------------------------------------------------------------------ torch.compile: a converging CG on CSR

#: A constant of the compiled program (a CSRMatrix passed as an argument is not traced: its cached int32
#: index arrays check tensor version counters)
_CG_A = _csr_spd(12, seed=40)
_CG_M = trnsolver.jacobi_preconditioner(_CG_A.to_dense())


def _cg_program(b):
    x, iters, relres = trnsolver.cg(_CG_A, b, tol=1e-12, maxiter=50, M=_CG_M)
    return x.sin(), iters, relres


def test_compile_converging_cg_on_a_csr_matrix_without_graph_breaks():
    b = _rand(12, seed=41)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(_cg_program)(b)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert "torch.ops.trnsolver.cg" in "".join(g.code for g in explained.graphs)
    want = np.sin(spla.spsolve(_scipy(_CG_A).tocsc(), b.numpy()))
    for backend in ("eager", "inductor"):
        torch._dynamo.reset()
        x, iters, relres = torch.compile(_cg_program, fullgraph=True, backend=backend)(b)
        # tol 1e-12 on a diagonally dominant 12 x 12 system (cond < 3)
        np.testing.assert_allclose(x.numpy(), want, rtol=1e-10, atol=1e-12)
        assert 1 <= int(iters) <= 12 and float(relres) < 1e-11


# ------------------------------------------------------------------ lstsq, inv_sqrt_spd_ns, schur

def _dense_cases():
    A, B = _rand(7, 4, seed=50), _rand(7, 2, seed=51)
    W = _rand(3, 5, seed=52)  # underdetermined: no residues
    R = _rand(7, 3, seed=53) @ _rand(3, 4, seed=54)  # rank 3 of 4: no residues
    S = _spd(5, seed=55)
    N = _rand(6, 6, seed=56)
    return [
        ("lstsq_full_rank", ts.lstsq, (A, B, None, "gelsd")),
        ("lstsq_underdetermined_gelsy", ts.lstsq, (W, _rand(3, 2, seed=57), None, "gelsy")),
        ("lstsq_rank_deficient_gelss", ts.lstsq, (R, B, 1e-10, "gelss")),
        ("lstsq_batched", ts.lstsq, (_rand(2, 6, 3, seed=58), _rand(2, 6, 2, seed=59), None, "gelsd")),
        ("inv_sqrt_spd_ns", ts.inv_sqrt_spd_ns, (S, 40, 1e-13)),
        ("inv_sqrt_spd_ns_batched", ts.inv_sqrt_spd_ns, (torch.stack([S, _spd(5, seed=60)]), 40, 1e-13)),
        ("schur_real_lhp", ts.schur, (N, False, "lhp")),
        ("schur_complex_iuc", ts.schur, (N, True, "iuc")),
        ("schur_unsorted", ts.schur, (N, False, None)),
    ]


DENSE_CASES = _dense_cases()


@pytest.mark.parametrize("name,op,args", DENSE_CASES, ids=[c[0] for c in DENSE_CASES])
def test_opcheck_lstsq_ns_schur_operators(name, op, args):
    # lstsq's residues have a size the data decides: the dynamic AOT test applies there
    aot = "test_aot_dispatch_dynamic" if name.startswith("lstsq") else "test_aot_dispatch_static"
    torch.library.opcheck(op, args, test_utils=("test_schema", "test_autograd_registration", "test_faketensor", aot))


@pytest.mark.parametrize("name,op,args", [c for c in DENSE_CASES if not c[0].startswith("lstsq")],
                         ids=[c[0] for c in DENSE_CASES if not c[0].startswith("lstsq")])
def test_ns_schur_meta_shapes_equal_the_real_output(name, op, args):
    real, fake = op(*args), op(*(_meta(a) for a in args))
    for r, f in zip(real, fake):
        assert f.device.type == "meta" and (tuple(f.shape), f.dtype) == (tuple(r.shape), r.dtype)


def test_lstsq_ns_schur_operators_compute_what_scipy_computes():
    cases = {c[0]: c[2] for c in DENSE_CASES}
    for name in ("lstsq_full_rank", "lstsq_underdetermined_gelsy", "lstsq_rank_deficient_gelss"):
        A, B, rcond, driver = cases[name]
        X, res, rank, sv = ts.lstsq(A, B, rcond, driver)
        Xs, rs, rk, svs = sla.lstsq(A.numpy(), B.numpy(), cond=rcond, lapack_driver=driver)
        # well-conditioned float64 least squares (cond < 30): a few hundred ulps
        np.testing.assert_allclose(X.numpy(), Xs, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(res.numpy(), np.asarray(rs).reshape(-1), rtol=1e-10, atol=1e-12)
        assert int(rank) == rk
    S = cases["inv_sqrt_spd_ns"][0]
    X, iters, res = ts.inv_sqrt_spd_ns(S, 40, 1e-13)
    # converged to 1e-13 in ||I - Z Y|| on a matrix with cond < 10: the inverse root to ~1e-12
    np.testing.assert_allclose(X.numpy(), np.linalg.inv(sla.sqrtm(S.numpy()).real), rtol=1e-11, atol=1e-12)
    assert iters.dtype == torch.int64 and 0 < int(iters) <= 40 and float(res) <= 1e-13
    N = cases["schur_real_lhp"][0].numpy()
    for args in (cases["schur_real_lhp"], cases["schur_complex_iuc"]):
        T, Z, sdim = ts.schur(*args)
        _, _, want = sla.schur(N, output="complex" if args[1] else "real", sort=args[2])
        assert int(sdim) == want
        # the reconstruction to rounding (a 6 x 6 of unit scale)
        np.testing.assert_allclose((Z @ T @ Z.mH).numpy(), N, atol=1e-12)


def test_gradcheck_float64_lstsq_and_ns():
    A, B = _rand(7, 4, seed=50).requires_grad_(), _rand(7, 2, seed=51).requires_grad_()
    assert torch.autograd.gradcheck(lambda A, B: ts.lstsq(A, B, None, "gelsd")[:2], (A, B))
    W, C = _rand(3, 5, seed=52).requires_grad_(), _rand(3, 2, seed=57).requires_grad_()
    assert torch.autograd.gradcheck(lambda A, B: ts.lstsq(A, B, None, "gelsy")[0], (W, C))
    M = _rand(5, 5, seed=61).requires_grad_()
    spd = lambda M: M @ M.mT + 5 * torch.eye(5, dtype=F64)  # noqa: E731
    assert torch.autograd.gradcheck(lambda M: ts.inv_sqrt_spd_ns(spd(M), 40, 1e-14)[0], (M,))
    # the operator itself on a non-symmetric perturbation: the Daleckii-Krein derivative holds in every direction
    assert torch.autograd.gradcheck(lambda S: ts.inv_sqrt_spd_ns(S, 40, 1e-14)[0], (_spd(4, seed=62).requires_grad_(),))


def test_schur_outputs_carry_no_gradient_and_callables_stay_plain():
    N = _rand(6, 6, seed=56)
    with trnsolver.use_backend("simulator"):
        T, Z, sdim = trnsolver.schur(N.clone().requires_grad_(), sort="lhp")  # the operator (an input wants grad)
        assert isinstance(sdim, int) and not T.requires_grad and not Z.requires_grad
        T2, Z2, sdim2 = trnsolver.schur(N, sort=lambda re, im: re < 0)  # a callable: the plain Op
    assert sdim == sdim2 == sla.schur(N.numpy(), sort="lhp")[2]


def test_public_lstsq_and_ns_through_the_operator_keep_their_return_types():
    A, b = _rand(7, 4, seed=50), _rand(7, seed=51)
    with trnsolver.use_backend("simulator"):
        x, res, rank, sv = trnsolver.lstsq(A.clone().requires_grad_(), b)
        X, iters, r = trnsolver.inv_sqrt_spd_ns(_spd(5).requires_grad_(), tol=1e-12)
    xs, rs, rk, svs = sla.lstsq(A.numpy(), b.numpy())
    assert res.shape == np.shape(rs) and int(rank) == rk
    np.testing.assert_allclose(x.detach().numpy(), xs, rtol=1e-10, atol=1e-12)
    assert isinstance(iters, int) and isinstance(r, float) and r <= 1e-12
