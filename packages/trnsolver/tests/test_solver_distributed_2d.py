"""Cholesky and LU on a 2-D block-cyclic grid (trnsolver.distributed2d), 4 ranks as 2 x 2, one spawn.

n = 37 in blocks of 5 (8 blocks, the last of 2 columns): ragged in every
direction.  References: ``numpy.linalg.cholesky`` and
``scipy.linalg.lu_factor`` (same pivots, same packed factors), tolerance
``testing.tolerance(float64, n)`` times the data's scale (times ``n`` more
for LU, whose growth is bounded by the partial-pivoting factor, small for
Gaussian data).  Bytes each rank sends are asserted equal to the formulas
in the module docstring, recomputed here from the descriptor and, for the
row interchanges, from SciPy's pivots.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from trnsci import distributed as D
from trnsci import testing

P = 4
NN, NB = 37, 5


def _gather_full(desc, loc):
    """Every rank's blocks, assembled into the full matrix on every rank (test-side, uncounted)."""
    flat = loc.reshape(1, -1)
    sizes = []
    for q in range(desc.P):
        a, b = desc.coords(q)
        sizes.append(len(desc.local_rows(a)) * len(desc.local_cols(b)))
    allp = D.all_to_all([flat.reshape(-1)] * desc.P, [(s,) for s in sizes], loc.dtype)
    pieces = []
    for q, piece in enumerate(allp):
        a, b = desc.coords(q)
        pieces.append(piece.reshape(len(desc.local_rows(a)), len(desc.local_cols(b))))
    return desc.join(pieces).numpy()


def _rows(desc, p, blocks):
    return sum(desc.width(b) for b in blocks if b % desc.pr == p)


def _chol_words(desc, p, q):
    pr, pc, nbk = desc.pr, desc.pc, desc.nblocks
    tot = 0
    for k in range(nbk):
        w = desc.width(k)
        if (p, q) == (k % pr, k % pc):
            tot += (pr - 1) * w * w
        if q == k % pc:
            tot += (pc - 1) * w * _rows(desc, p, range(k + 1, nbk))
        tot += (pr - 1) * w * sum(desc.width(J) for J in range(k + 1, nbk) if J % pr == p and J % pc == q)
    return tot


def _lu_words(desc, p, q, piv):
    """(broadcast, pivot_search, row_swap) words for rank (p, q), the swaps replayed from the reference pivots."""
    pr, pc, nbk, nb = desc.pr, desc.pc, desc.nblocks, desc.nb
    bc = ps = sw = 0
    ncols = len(desc.local_cols(q))
    for k in range(nbk):
        w = desc.width(k)
        k0 = desc.block(k)[0]
        if q == k % pc:
            ps += w * (pr - 1) * (2 * w + 2)
            bc += (pc - 1) * w * (1 + _rows(desc, p, range(k, nbk)))
        if p == k % pr:
            bc += (pr - 1) * w * sum(desc.width(J) for J in range(k + 1, nbk) if J % pc == q)
        perm = {}
        for jj in range(w):
            j, v = k0 + jj, int(piv[k0 + jj])
            a, b = perm.get(j, j), perm.get(v, v)
            perm[j], perm[v] = b, a
        other = ncols - (w if q == k % pc else 0)
        for i, o in perm.items():
            if i != o and (o // nb) % pr == p and (i // nb) % pr != p:
                sw += other
    return bc * 8, ps * 8, sw * 8


def _checks():
    import torch
    import torch.distributed as dist

    from trnsci import linalg as la
    from trnsolver import distributed as SD

    r = dist.get_rank()
    out = testing.RankChecks()
    check = out.check
    desc = SD.BlockCyclic2D.grid(NN, NB, P)
    check("grid rule 2x2", (desc.pr, desc.pc) == (2, 2), (desc.pr, desc.pc))
    p, q = desc.coords(r)
    tol = testing.tolerance(torch.float64, NN)
    # Cholesky
    G = testing.random((NN, NN), seed=4)
    S = G @ G.T + NN * np.eye(NN)
    with D.counting() as t:
        Lloc = SD.cholesky(desc.split(torch.from_numpy(S), r), desc)
    Lfull = _gather_full(desc, Lloc)
    err = float(np.max(np.abs(Lfull - np.linalg.cholesky(S))))
    check("2-D cholesky", err <= tol * np.sqrt(np.max(np.diag(S))), err)
    check("2-D cholesky bytes", t.by_kind.get("broadcast", 0) == 8 * _chol_words(desc, p, q)
          and set(t.by_kind) <= {"broadcast", "status"}, (t.by_kind, 8 * _chol_words(desc, p, q)))
    Sbad = S.copy()
    Sbad[25, 25] = -1.0  # block 5 (rows/columns 25-29): diagonal on process (1, 1) = rank 3
    try:
        SD.cholesky(desc.split(torch.from_numpy(Sbad), r), desc)
        check("2-D cholesky not SPD", False, "no error")
    except la.LinAlgError as e:
        check("2-D cholesky not SPD", r == 3 and "positive definite" in str(e), e)
    except D.DistributedError as e:
        check("2-D cholesky not SPD", r != 3, e)
    # LU with partial pivoting
    Ag = testing.random((NN, NN), seed=5)
    with D.counting() as t:
        Floc, ipiv = SD.lu(desc.split(torch.from_numpy(Ag), r), desc)
    Ffull = _gather_full(desc, Floc)
    lu_ref, piv_ref = scipy.linalg.lu_factor(Ag)
    err = float(np.max(np.abs(Ffull - lu_ref)))
    check("2-D lu pivots", np.array_equal(ipiv.numpy(), piv_ref), (ipiv.tolist(), piv_ref.tolist()))
    check("2-D lu factors", err <= tol * NN * float(np.max(np.abs(Ag))), err)
    bc, ps, sw = _lu_words(desc, p, q, piv_ref)
    got = (t.by_kind.get("broadcast", 0), t.by_kind.get("pivot_search", 0), t.by_kind.get("row_swap", 0))
    check("2-D lu bytes", got == (bc, ps, sw) and sw > 0, (t.by_kind, (bc, ps, sw)))
    Abad = Ag.copy()
    Abad[:, 22] = 0.0  # column 22: block 4, diagonal on process (0, 0) = rank 0
    try:
        SD.lu(desc.split(torch.from_numpy(Abad), r), desc)
        check("2-D lu singular", False, "no error")
    except la.LinAlgError as e:
        check("2-D lu singular", r == 0 and "singular" in str(e), e)
    except D.DistributedError as e:
        check("2-D lu singular", r != 0, e)
    # the other grids of 4 ranks: 4 x 1 (pivot search over 4 process rows) and 1 x 4 (interchanges all local)
    for pr_, pc_ in ((4, 1), (1, 4)):
        g = SD.BlockCyclic2D(NN, NB, pr_, pc_)
        gp, gq = g.coords(r)
        with D.counting() as t:
            Lg = SD.cholesky(g.split(torch.from_numpy(S), r), g)
        err = float(np.max(np.abs(_gather_full(g, Lg) - np.linalg.cholesky(S))))
        check(f"{pr_}x{pc_} cholesky", err <= tol * np.sqrt(np.max(np.diag(S)))
              and t.by_kind.get("broadcast", 0) == 8 * _chol_words(g, gp, gq), (err, t.by_kind))
        with D.counting() as t:
            Fg, ipg = SD.lu(g.split(torch.from_numpy(Ag), r), g)
        err = float(np.max(np.abs(_gather_full(g, Fg) - lu_ref)))
        got = (t.by_kind.get("broadcast", 0), t.by_kind.get("pivot_search", 0), t.by_kind.get("row_swap", 0))
        check(f"{pr_}x{pc_} lu", np.array_equal(ipg.numpy(), piv_ref) and err <= tol * NN * float(np.max(np.abs(Ag)))
              and got == _lu_words(g, gp, gq, piv_ref), (err, t.by_kind, _lu_words(g, gp, gq, piv_ref)))
    try:
        SD.lu(desc.split(torch.from_numpy(Ag), r).to(torch.complex128), desc)
        check("2-D complex", False, "no error")
    except TypeError as e:
        check("2-D complex", "real floating" in str(e), e)
    # a wrong local shape on one rank: ValueError there, DistributedError on the others
    loc = desc.split(torch.from_numpy(S), r)
    try:
        SD.cholesky(loc[:-1] if r == 2 else loc, desc)
        check("2-D bad shape", False, "no error")
    except ValueError as e:
        check("2-D bad shape", r == 2 and "A_local" in str(e), e)
    except D.DistributedError as e:
        check("2-D bad shape", r != 2, e)
    return out


@pytest.fixture(scope="module")
def results():
    return D.spawn(_checks, P, timeout=120, collective_timeout=30)


def test_solver_distributed_2d(results):
    testing.assert_ranks_passed(results, count=14)


def test_block_cyclic_2d_layout():
    """split/join round-trip and ownership, no ranks needed."""
    import torch

    from trnsolver.distributed2d import BlockCyclic2D

    desc = BlockCyclic2D(NN, NB, 2, 3)
    A = torch.arange(NN * NN, dtype=torch.float64).reshape(NN, NN)
    pieces = [desc.split(A, r) for r in range(6)]
    assert torch.equal(desc.join(pieces), A)
    # rank 4 = (1, 1): row blocks 1, 3, 5, 7 (5+5+5+2 rows), column blocks 1, 4, 7 (5+5+2 columns)
    assert pieces[4].shape == (17, 12)
    assert pieces[4][0, 0] == A[5, 5] and pieces[4][-1, -1] == A[36, 36]
    with pytest.raises(ValueError, match="nb"):
        BlockCyclic2D(NN, 0, 2, 2)
