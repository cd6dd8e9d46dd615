"""SpGEMM (BSR and CSR) and sparse add through the simulator: results vs SciPy / dense NumPy,
the emulator's counters vs the kernels' closed forms, and the symbolic-phase caches.

Shapes are ragged (not multiples of 128) with 2-3 block rows, empty block rows / rows, and block
rows of A whose matching block rows of B are empty; the emulator is NumPy, so each kernel runs
a few times only.
"""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import trnsci
import trnsparse
from trnsci import dispatch, nki
from trnsci.testing import assert_counts, kernel_ran
from trnsparse import symbolic as _spgemm
from trnsparse._nki import ops_spgemm as _nki_spgemm
from trnsparse.kernels.bsr_spgemm import bsr_spgemm_counts, bsr_spgemm_kernel
from trnsparse.kernels.csr_add import csr_add_counts
from trnsparse.kernels.csr_spgemm import csr_spgemm_counts

pytestmark = pytest.mark.simulator


def _tiled(rng, m, n, keep):
    D = rng.standard_normal((m, n))
    D *= np.kron(keep, np.ones((128, 128)))[:m, :n]
    return D.astype(np.float32)


# A: 3 x 3 block grid (300 x 270), block row 1 empty; B: 3 x 2 grid (270 x 200), block row 1 empty,
# so A's tile (2, 1) meets nothing
KA = np.array([[1, 0, 1], [0, 0, 0], [0, 1, 1]], bool)
KB = np.array([[1, 1], [0, 0], [1, 0]], bool)


def _pair(seed=0):
    rng = np.random.default_rng(seed)
    DA, DB = _tiled(rng, 300, 270, KA), _tiled(rng, 270, 200, KB)
    A = trnsparse.BSRMatrix.from_dense(torch.from_numpy(DA))
    B = trnsparse.BSRMatrix.from_dense(torch.from_numpy(DB))
    return DA, DB, A, B


def test_bsr_spgemm_kernel_counters_match_closed_form():
    DA, DB, A, B = _pair()
    sch = _spgemm.bsr_symbolic(A.block_col_indices, A.block_row_ptrs, B.block_col_indices, B.block_row_ptrs)
    # C's block pattern, independently: (I, J) with some K where both tiles are stored
    want = (KA.astype(int) @ KB.astype(int)) > 0
    got = np.zeros_like(want)
    got[np.repeat(np.arange(3), np.diff(sch.c_bptr.numpy())), sch.c_bcol.numpy()] = True
    np.testing.assert_array_equal(got, want)
    # products: C00 = A00 B00 + A02 B20, C01 = A00 B01, C20 = A22 B20 (A21 meets the empty block row of B)
    assert sch.products == 4 and sch.nc == 3
    ref = DA.astype(np.float64) @ DB
    a_t = A.blocks.transpose(1, 2).contiguous().numpy()
    for keep in (True, False):
        out, prof = nki.profile(bsr_spgemm_kernel, a_t, B.blocks.numpy(), rows=sch.rows, nc=sch.nc, keep_b=keep)
        C = trnsparse.BSRMatrix._make(torch.from_numpy(np.asarray(out)), sch.c_bcol, sch.c_bptr, (300, 200), 128)
        # fp32 products summed in fp32 PSUM over at most 2 tiles (256 terms): << 1e-5 of the largest entry
        np.testing.assert_allclose(C.to_dense().double().numpy(), ref, rtol=0, atol=1e-5 * np.abs(ref).max())
        assert_counts(prof, bsr_spgemm_counts(sch.rows, B.n_blocks, sch.nc, 4, keep), ignore=("flops",))
        # the bytes by hand: A's 3 tiles of the rows with output (row 2's two tiles, row 0's two), B's 3
        # tiles once (resident) or one per product (4), C's 3 tiles written in fp32
        t = 128 * 128 * 4
        assert prof.hbm_read_bytes == t * (4 + (3 if keep else 4))
        assert prof.hbm_write_bytes == t * 3


def test_bsr_spgemm_simulator_vs_scipy_and_through_spgemm():
    DA, DB, A, B = _pair(1)
    ref = sp.csr_array(DA.astype(np.float64)) @ sp.csr_array(DB.astype(np.float64))
    with kernel_ran("bsr_spgemm_kernel", "bsr_spgemm_kernel"):
        C = trnsparse.bsr_spgemm(A, B)
        Ccsr = trnsparse.spgemm(A, B)
    assert isinstance(C, trnsparse.BSRMatrix) and C.shape == (300, 200) and C.n_blocks == 3
    assert isinstance(Ccsr, trnsparse.CSRMatrix)
    tol = 1e-5 * np.abs(ref.toarray()).max()
    np.testing.assert_allclose(C.to_dense().double().numpy(), ref.toarray(), rtol=0, atol=tol)
    np.testing.assert_allclose(Ccsr.to_dense().double().numpy(), ref.toarray(), rtol=0, atol=tol)
    T = trnsparse.bsr_spgemm(A, B)  # the same on the torch path (outside the simulator block)
    np.testing.assert_allclose(T.to_dense().double().numpy(), ref.toarray(), rtol=0, atol=tol)


def _csr(m, n, density, seed, empty_row=None):
    S = sp.random(m, n, density, format="csr", random_state=seed, dtype=np.float32)
    if empty_row is not None:
        S = S.tolil()
        S[empty_row, :] = 0
        S = S.tocsr()
    S.eliminate_zeros()
    return S


def test_csr_spgemm_through_tiles_vs_scipy():
    SA, SB = _csr(200, 150, 0.3, 1, empty_row=7), _csr(150, 140, 0.3, 2)
    A, B = trnsparse.from_scipy(SA), trnsparse.from_scipy(SB)
    with kernel_ran("bsr_spgemm_kernel") as runs:
        C = trnsparse.spgemm(A, B)
    R = (SA.astype(np.float64) @ SB.astype(np.float64)).tocsr()
    R.sort_indices()
    # the structural pattern, sorted: here no product cancels, so it is SciPy's
    assert C.has_sorted_indices
    np.testing.assert_array_equal(C.row_ptrs.numpy(), R.indptr)
    np.testing.assert_array_equal(C.col_indices.numpy(), R.indices)
    # fp32 sums of <= 150 products of entries in [0, 1): error << 1e-5 * max
    np.testing.assert_allclose(C.values.double().numpy(), R.data, rtol=0, atol=1e-5 * R.data.max())
    plan = A.__dict__["_spgemm_csr_plan"][1]
    sch = plan.sched
    nb = B.__dict__["_tiles128_structure"][1].nblk
    assert_counts(runs[0].profile, bsr_spgemm_counts(sch.rows, nb, sch.nc, 4, True), ignore=("flops",))
    # 2 x 2 tiles of A, 2 x 2 of B, all stored: 8 tile products, C's 2 x 2 tiles
    assert sch.products == 8 and sch.nc == 4 and nb == 4


def test_csr_spgemm_row_merge_vs_scipy(monkeypatch):
    # the estimates set so that the row merge is the route (tile products and the host made slow)
    monkeypatch.setattr(_nki_spgemm, "PRODUCT_S", 1.0)
    monkeypatch.setattr(_nki_spgemm, "HOST_PRODUCT_S", 1.0)
    SA, SB = _csr(300, 270, 0.02, 14, empty_row=5), _csr(270, 200, 0.03, 15, empty_row=9)
    A, B = trnsparse.from_scipy(SA), trnsparse.from_scipy(SB)
    with trnsci.use_backend("simulator"):
        p = dispatch.plan_call(trnsparse.spgemm, A, B)
    assert p.kernel["name"] == "csr_spgemm_kernel"
    with kernel_ran("csr_spgemm_kernel") as runs:
        C = trnsparse.spgemm(A, B)
    R = (SA.astype(np.float64) @ SB.astype(np.float64)).tocsr()
    R.sort_indices()
    np.testing.assert_array_equal(C.row_ptrs.numpy(), R.indptr)
    np.testing.assert_array_equal(C.col_indices.numpy(), R.indices)
    # fp32 sums of a few products of entries in [0, 1)
    np.testing.assert_allclose(C.values.double().numpy(), R.data, rtol=0, atol=1e-6)
    plan = A.__dict__["_spgemm_rowmerge_plan"][1]
    assert_counts(runs[0].profile, csr_spgemm_counts(plan.blocks, plan.wB))
    assert {k: v for k, v in p.kernel.items() if k != "name"}.items() <= {
        **csr_spgemm_counts(plan.blocks, plan.wB)}.items()
    # 3 row blocks (128, 128, 44 rows), each with work; C's ELL rows written once
    assert [b[0] for b in plan.blocks] == [128, 128, 44]
    assert runs[0].profile.hbm_write_bytes == 4 * sum(b[0] * b[2] for b in plan.blocks)


def test_caches_follow_both_operands_arrays():
    SA, SB = _csr(200, 150, 0.3, 3), _csr(150, 140, 0.3, 4)
    A, B = trnsparse.from_scipy(SA), trnsparse.from_scipy(SB)
    with kernel_ran("bsr_spgemm_kernel", "bsr_spgemm_kernel", "bsr_spgemm_kernel", "bsr_spgemm_kernel"):
        trnsparse.spgemm(A, B)
        plan = A.__dict__["_spgemm_csr_plan"][1]
        trnsparse.spgemm(A, B)
        assert A.__dict__["_spgemm_csr_plan"][1] is plan  # same patterns: the symbolic phase is reused
        # B's values modified in place: the cached tiles of B are rebuilt, the plan kept
        with torch.no_grad():
            B.values.mul_(-2.0)
        C1 = trnsparse.spgemm(A, B)
        assert A.__dict__["_spgemm_csr_plan"][1] is plan
        # B's pattern modified in place (one column index moved inside its row): the plan is rebuilt
        cols = B.col_indices
        r0 = int(np.flatnonzero(np.diff(SB.indptr) > 0)[0])
        p0 = int(SB.indptr[r0 + 1]) - 1  # last entry of row r0 -> a column past the row's last
        newc = 139 if SB.indices[p0] != 139 else 138
        assert newc not in SB.indices[SB.indptr[r0]:SB.indptr[r0 + 1]]
        cols[p0] = newc
        C2 = trnsparse.spgemm(A, B)
        assert A.__dict__["_spgemm_csr_plan"][1] is not plan
    SB2 = (-2.0 * SB).tocsr()
    np.testing.assert_allclose(C1.to_dense().numpy(), (SA @ SB2).toarray(), rtol=0, atol=1e-4)
    SB2.indices[p0] = newc
    SB2.has_sorted_indices = False
    np.testing.assert_allclose(C2.to_dense().numpy(), (SA @ SB2).toarray(), rtol=0, atol=1e-4)


def test_sparse_add_counters_many_chunks(monkeypatch):
    # small chunks (128 x 4 slots) so that one call has several, the last one ragged
    monkeypatch.setattr(_spgemm, "FC", 4)
    SA, SB = _csr(130, 90, 0.07, 5, empty_row=3), _csr(130, 90, 0.05, 6)
    A, B = trnsparse.from_scipy(SA), trnsparse.from_scipy(SB)
    with kernel_ran("csr_add_kernel") as runs:
        C = trnsparse.sparse_add(A, B, alpha=2.0, beta=-0.5)
    R = (2.0 * SA.astype(np.float64) - 0.5 * SB.astype(np.float64)).tocsr()
    R.sort_indices()
    plan = A.__dict__["_sparse_add_plan"][1]
    # the union pattern, independently: SciPy's pattern of |A| + |B| (no cancellation)
    U = (abs(SA) + abs(SB)).tocsr()
    U.sort_indices()
    np.testing.assert_array_equal(C.row_ptrs.numpy(), U.indptr)
    np.testing.assert_array_equal(C.col_indices.numpy(), U.indices)
    np.testing.assert_allclose(C.to_dense().double().numpy(), R.toarray(), rtol=0, atol=1e-6)
    nnz = U.nnz
    assert len(plan.chunks) == -(-nnz // 512) > 1 and nnz % 512
    assert_counts(runs[0].profile, csr_add_counts(plan.chunks, nnz))
    assert runs[0].profile.hbm_write_bytes == 4 * nnz


def test_sparse_add_unsorted_operand_and_cache():
    # an unsorted CSR operand (SciPy's SpGEMM leaves columns unsorted inside rows)
    SA = _csr(140, 130, 0.05, 7)
    S2 = _csr(140, 130, 0.05, 8)
    A = trnsparse.from_scipy(SA)
    B0 = trnsparse.spgemm(trnsparse.from_scipy(S2), trnsparse.eye_sparse(130))  # host path: maybe unsorted
    B = trnsparse.CSRMatrix._make(B0.values.clone(), B0.col_indices.clone(), B0.row_ptrs.clone(), (140, 130),
                                  False)
    with kernel_ran("csr_add_kernel", "csr_add_kernel", "csr_add_kernel"):
        C = trnsparse.sparse_add(A, B, 1.5, 0.25)
        plan = A.__dict__["_sparse_add_plan"][1]
        np.testing.assert_allclose(C.to_dense().numpy(), (1.5 * SA + 0.25 * S2).toarray(), rtol=0, atol=1e-6)
        with torch.no_grad():
            B.values.add_(1.0)  # new values, same pattern: the plan is kept, the result follows
        C = trnsparse.sparse_add(A, B, 1.5, 0.25)
        assert A.__dict__["_sparse_add_plan"][1] is plan
        S3 = S2.copy()
        S3.data += 1.0
        np.testing.assert_allclose(C.to_dense().numpy(), (1.5 * SA + 0.25 * S3).toarray(), rtol=0, atol=1e-6)
        other = trnsparse.from_scipy(S3)  # another B (other index arrays): the plan is rebuilt
        C = trnsparse.sparse_add(A, other, 1.0, 1.0)
        assert A.__dict__["_sparse_add_plan"][1] is not plan
    np.testing.assert_allclose(C.to_dense().numpy(), (SA + S3).toarray(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype,eps", [(torch.bfloat16, 2.0 ** -8), (torch.float16, 2.0 ** -11)])
def test_low_precision_in_float32_rounded_once(dtype, eps):
    SA, SB = _csr(200, 150, 0.3, 9), _csr(150, 140, 0.3, 10)
    A, B = trnsparse.from_scipy(SA).to(dtype), trnsparse.from_scipy(SB).to(dtype)
    Aq = A.to(torch.float32).to_scipy().astype(np.float64)
    Bq = B.to(torch.float32).to_scipy().astype(np.float64)
    _, _, Ab, Bb = _pair(2)
    Ab, Bb = Ab.to(dtype=dtype), Bb.to(dtype=dtype)
    with kernel_ran("bsr_spgemm_kernel", "csr_add_kernel", "bsr_spgemm_kernel"):
        C = trnsparse.spgemm(A, B)
        D = trnsparse.sparse_add(A, A, 1.0, -0.25)
        E = trnsparse.bsr_spgemm(Ab, Bb)
    assert C.dtype == dtype and D.dtype == dtype and E.dtype == dtype
    Rb = Ab.to(dtype=torch.float64).to_dense().numpy() @ Bb.to(dtype=torch.float64).to_dense().numpy()
    np.testing.assert_allclose(E.to_dense().double().numpy(), Rb, rtol=eps, atol=1e-5 * np.abs(Rb).max())
    R = (Aq @ Bq).toarray()
    # one rounding of the fp32 result (relative eps) + the fp32 sum (<< eps)
    np.testing.assert_allclose(C.to_dense().double().numpy(), R, rtol=eps, atol=1e-5 * np.abs(R).max())
    np.testing.assert_allclose(D.to_dense().double().numpy(), 0.75 * Aq.toarray(), rtol=eps, atol=0)
