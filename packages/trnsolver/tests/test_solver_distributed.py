"""Row-distributed sparse matrices (trnsparse.distributed) and solvers on them (trnsolver.distributed), 3 ranks.

References are SciPy on the whole matrix: ``A @ x`` for SpMV (exact up to
the summation order: ``testing.tolerance(float64, max nnz per row)``),
``scipy.sparse.linalg.spsolve`` for the solvers (tolerance: the requested
relative residual 1e-10 times the condition-number bound ``||A^-1|| ||A||``
estimated from the dense matrix), ``numpy.linalg.qr`` for TSQR (R with a
non-negative diagonal is unique).  Halo bytes are asserted against the
count of entries each rank's rows read from another rank, taken from the
SciPy matrix.  Grids are 7 x 9 (63 unknowns: 21 rows per rank, halo one
grid line).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sps
import scipy.sparse.linalg as spla

from trnsci import distributed as D
from trnsci import testing

P = 3


def _poisson(nx, ny, conv=0.0):
    """5-point Laplacian on an nx x ny grid (Dirichlet), plus an upwind convection term when conv != 0."""
    ex, ey = np.ones(nx), np.ones(ny)
    Tx = sps.diags([-ex[1:] * (1 + conv), 2 * ex, -ex[1:]], [-1, 0, 1])
    Ty = sps.diags([-ey[1:], 2 * ey, -ey[1:]], [-1, 0, 1])
    return (sps.kron(sps.eye(ny), Tx) + sps.kron(Ty, sps.eye(nx))).tocsr()


def _checks():
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import Shard

    from trnsolver import distributed as SD
    from trnsparse.distributed import DistCSR

    r = dist.get_rank()
    out = testing.RankChecks()
    check = out.check

    m1 = D.mesh()
    n = 63
    off = D.shard_offsets(n, P)
    rows = slice(off[r], off[r + 1])
    A = _poisson(7, 9)
    Ad = DistCSR.from_global(A)
    # halo volume: my columns that other ranks' rows touch
    want = 0
    for q in range(P):
        if q != r:
            cols = np.unique(A[off[q]:off[q + 1]].indices)
            want += int(np.count_nonzero((cols >= off[r]) & (cols < off[r + 1])))
    check("halo bytes formula", Ad.halo_bytes == want * 8 and want == 7 * (1 if r in (0, 2) else 2),
          (Ad.halo_bytes, want))
    x = testing.random((n,), seed=1)
    with D.counting() as t:
        y = Ad.matvec(torch.from_numpy(x[rows]))
    err = float(np.max(np.abs(y.numpy() - (A @ x)[rows])))
    check("spmv", err <= testing.tolerance(torch.float64, 5) * float(np.max(np.abs(A) @ np.abs(x))), err)
    check("spmv sends only the halo", t.by_kind == {"halo": want * 8}, t.by_kind)
    # solvers
    b = testing.random((n,), seed=2)
    bd = D.distribute(torch.from_numpy(b) if r == 0 else None, m1, [Shard(0)])
    dense = A.toarray()
    cond = np.linalg.cond(dense)
    ref = spla.spsolve(A.tocsc(), b)
    xs, it, rel = SD.cg(Ad, bd, tol=1e-10, maxiter=200)
    xf = xs.full_tensor().numpy()
    check("cg", rel <= 1e-10 and np.linalg.norm(b - A @ xf) <= 1e-10 * np.linalg.norm(b) * 10
          and np.linalg.norm(xf - ref) <= 1e-10 * cond * np.linalg.norm(ref) * 10, (it, rel))
    jac = torch.from_numpy(1.0 / A.diagonal()[rows])
    xs, it_j, rel = SD.cg(Ad, bd, tol=1e-10, maxiter=200, M=lambda v: jac * v)
    check("cg jacobi", rel <= 1e-10 and np.allclose(xs.full_tensor().numpy(), ref, rtol=0, atol=1e-8), it_j)
    N = _poisson(7, 9, conv=0.5)
    Nd = DistCSR.from_global(N)
    cond = np.linalg.cond(N.toarray())
    ref = spla.spsolve(N.tocsc(), b)
    for name, fn, kw in (("bicgstab", SD.bicgstab, {}), ("gmres", SD.gmres, {"restart": 20})):
        xs, it, rel = fn(Nd, bd, tol=1e-10, maxiter=400, **kw)
        xf = xs.full_tensor().numpy()
        true_rel = np.linalg.norm(b - N @ xf) / np.linalg.norm(b)
        check(name, true_rel <= 1e-9 and np.linalg.norm(xf - ref) <= 1e-9 * cond * np.linalg.norm(ref),
              (it, rel, true_rel))
    # TSQR, 40 x 6 (14/14/12 rows); the rank with the fewest rows still has more than n here, and 8 x 6 over
    # 3 ranks (3/3/2 rows) gives blocks shorter than n
    for mm in (40, 8):
        G = testing.random((mm, 6), seed=3)
        Gd = D.distribute(torch.from_numpy(G) if r == 0 else None, m1, [Shard(0)])
        Q, R = SD.tsqr(Gd)
        Rn = np.linalg.qr(G, mode="r")
        Rn = np.sign(np.diag(Rn))[:, None] * Rn
        Qf = Q.full_tensor().numpy()
        tol = testing.tolerance(torch.float64, mm) * np.linalg.norm(G)
        check(f"tsqr {mm}", np.max(np.abs(R.numpy() - Rn)) <= tol and np.max(np.abs(Qf @ R.numpy() - G)) <= tol
              and np.max(np.abs(Qf.T @ Qf - np.eye(6))) <= testing.tolerance(torch.float64, mm), mm)
    # block-cyclic Cholesky, n = 37 in blocks of 5 (8 blocks, the last of 2) over 3 ranks, vs numpy
    nn, nb = 37, 5
    G = testing.random((nn, nn), seed=4)
    S = G @ G.T + nn * np.eye(nn)
    desc = SD.BlockCyclic(nn, nb, P)
    with D.counting() as t:
        Lloc = SD.cholesky(desc.split(torch.from_numpy(S), r), desc)
    cols = [len(desc.local_columns(q)) for q in range(P)]
    allT = D.all_gather(Lloc.T.contiguous(), 0, cols)  # (n, n) rows = global columns in rank order
    pieces = [p.T for p in allT.split(cols)]
    Lfull = desc.join(pieces).numpy()
    Lref = np.linalg.cholesky(S)
    err = float(np.max(np.abs(Lfull - Lref)))
    check("block-cyclic cholesky", err <= testing.tolerance(torch.float64, nn) * np.sqrt(np.max(np.diag(S))), err)
    want = sum((P - 1) * (nn - desc.block(b)[0]) * (desc.block(b)[1] - desc.block(b)[0]) * 8
               for b in range(desc.nblocks) if desc.owner(b) == r)
    check("block-cyclic cholesky bytes", t.by_kind.get("broadcast") == want, (t.by_kind, want))
    Sbad = S.copy()
    Sbad[20, 20] = -1.0  # block 4 (columns 20-24), owned by rank 1
    try:
        SD.cholesky(desc.split(torch.from_numpy(Sbad), r), desc)
        check("cholesky not SPD", False, "no error")
    except np.linalg.LinAlgError as e:
        check("cholesky not SPD", r == 1 and "positive definite" in str(e), e)
    except D.DistributedError as e:
        check("cholesky not SPD", r != 1, e)
    # block-cyclic LU with partial pivoting vs scipy.linalg.lu_factor (same pivots, same packed factors)
    Ag = testing.random((nn, nn), seed=5)
    with D.counting() as t:
        Floc, ipiv = SD.lu(desc.split(torch.from_numpy(Ag), r), desc)
    allT = D.all_gather(Floc.T.contiguous(), 0, cols)
    Ffull = desc.join([p.T for p in allT.split(cols)]).numpy()
    lu_ref, piv_ref = scipy.linalg.lu_factor(Ag)
    err = float(np.max(np.abs(Ffull - lu_ref)))
    check("block-cyclic lu", np.array_equal(ipiv.numpy(), piv_ref)
          and err <= testing.tolerance(torch.float64, nn) * nn * float(np.max(np.abs(Ag))), err)
    want = sum((P - 1) * ((nn - desc.block(b)[0]) + 1) * (desc.block(b)[1] - desc.block(b)[0]) * 8
               for b in range(desc.nblocks) if desc.owner(b) == r)
    check("block-cyclic lu bytes", t.by_kind.get("broadcast") == want, (t.by_kind, want))
    # bad input on all ranks
    try:
        SD.cg(Ad, bd, tol=-1)
        check("cg bad tol", False, "no error")
    except ValueError as e:
        check("cg bad tol", "tol" in str(e), e)
    try:
        DistCSR(A[:5], A.shape)
        check("DistCSR wrong rows", False, "no error")
    except ValueError as e:
        check("DistCSR wrong rows", "must hold" in str(e), e)
    return out


@pytest.fixture(scope="module")
def results():
    return D.spawn(_checks, P, timeout=300, collective_timeout=60)


def test_solver_distributed(results):
    testing.assert_ranks_passed(results, count=16)
