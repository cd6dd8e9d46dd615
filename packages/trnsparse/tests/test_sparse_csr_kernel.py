"""CSR/CSC device paths: SpMV/SpMM, SDDMM, symmetric SpMV, triangular solves -- results vs SciPy, counters
vs the closed forms, the layouts' invariants, and their caches' invalidation.

SpMV and SpMM run ``csr_spmv_kernel`` (column-blocked ELL-128, x resident on chip, panels of 4 columns);
``csr_spmm_kernel`` (SELL-128-sigma, B rows gathered by indirect DMA) runs when y's panel cannot stay on
chip (forced here by lowering ``SMAX``) and is tested directly; SDDMM on its SELL layout; spsv/spsm on
the block-triangular layout.

Matrices are ragged (rows and columns not multiples of 128), with empty rows and one row much longer
than the others (split into pieces recombined on the Tensor Engine). Tolerances: fp32 products summed
in fp32 over at most ~300 terms: |error| <= ~300 * 2^-24 * sum|a||x| -- we allow 1e-5 of the largest
|A| |x| row sum.
"""

import gc
import warnings
import weakref

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spl
import torch

import trnsparse
from trnsci import nki
from trnsci.dispatch import NkiFallbackWarning, plan_call
from trnsci.testing import assert_counts, kernel_ran
from trnsparse import layouts as _sell
from trnsparse._nki import ops_tri as _tri
from trnsparse.kernels.csr_sddmm import csr_sddmm_counts, csr_sddmm_kernel
from trnsparse.kernels.csr_spmm import csr_spmm_counts, csr_spmm_kernel
from trnsparse.kernels.csr_spmv import csr_spmv_counts, csr_spmv_kernel
from trnsparse.kernels.csr_spsv import csr_spsv_counts, csr_spsv_kernel
from trnsparse.ops import SPMV

pytestmark = pytest.mark.simulator


def _case(m=300, n=270, density=0.02, seed=1):
    """SciPy CSR (float32): random pattern, row 5 dense (the long row), rows 7 and m-1 empty."""
    rng = np.random.default_rng(seed)
    S = sp.random(m, n, density=density, random_state=seed, format="lil", dtype=np.float32)
    S[5, :] = rng.standard_normal(n).astype(np.float32)
    S[7, :] = 0
    S[m - 1, :] = 0
    S = S.tocsr()
    S.eliminate_zeros()
    return S


def _tol(S, B):
    return 1e-5 * float((abs(S).astype(np.float64) @ np.abs(B.astype(np.float64))).max())


def _run(S, B):
    A = trnsparse.from_scipy(S)
    st, v = _sell.layout(A, A.values, A.col_indices, A.row_ptrs, A.shape)
    rloc = st.rloc.numpy() if st.rloc.numel() else np.zeros(1, np.float32)
    out, prof = nki.profile(csr_spmm_kernel, v.numpy(), st.cols.numpy(), st.orow.numpy(), rloc, B,
                            slices=st.slices)
    return st, out, prof


@pytest.mark.parametrize("N", [1, 3, 600])  # vector; few columns; two 512-column panels
def test_csr_spmm_kernel_vs_scipy_and_closed_form(N):
    S = _case()
    B = np.random.default_rng(N).standard_normal((S.shape[1], N)).astype(np.float32)
    st, out, prof = _run(S, B)
    ref = S.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=0, atol=_tol(S, B))
    assert np.all(out[[7, S.shape[0] - 1]] == 0)  # empty rows written as zeros
    assert_counts(prof, csr_spmm_counts(S.shape[0], N, S.nnz, st.slices))
    # the closed form spelled out: values + indices of every slot, the row map, the split slices'
    # local rows, B rows once per stored entry (padding gathers skipped); y written once
    split_pc = sum(s[0] for s in st.slices if s[6] >= 0)
    assert split_pc > 0  # the long row was split
    assert prof.hbm_read_bytes == 8 * st.slots + 4 * S.shape[0] + 4 * split_pc + 4 * N * S.nnz
    assert prof.hbm_write_bytes == 4 * S.shape[0] * N


def test_sell_layout_invariants():
    S = _case(m=700, n=333, density=0.01, seed=4)
    A = trnsparse.from_scipy(S)
    st = _sell.build_structure(A.col_indices, A.row_ptrs, A.shape)
    m, n = S.shape
    # reconstruct A from the slots alone (independent of the kernel): every entry in exactly one slot
    vals = _sell.slot_values(st, A.values).numpy()
    cols = st.cols.numpy()
    D = np.zeros((m, n))
    orow, rloc = st.orow.numpy(), st.rloc.numpy()
    seen = []
    for pc, w, R, full, off, ooff, loff in st.slices:
        assert 0 < pc <= 128 and R <= pc
        blk_v = vals[off:off + pc * w].reshape(pc, w)
        blk_c = cols[off:off + pc * w].reshape(pc, w)
        local = rloc[loff:loff + pc].astype(int) if loff >= 0 else np.arange(pc)
        assert loff >= 0 or R == pc
        rows = orow[ooff:ooff + R][local]
        pad = blk_c == n
        assert np.all(blk_v[pad] == 0) and np.all(~pad[:, :full])
        for p in range(pc):
            np.add.at(D[rows[p]], blk_c[p][~pad[p]], blk_v[p][~pad[p]])
        seen.extend(orow[ooff:ooff + R])
    assert sorted(seen) == list(range(m))  # every row (empty ones too) is one slice's output once
    np.testing.assert_array_equal(D, S.toarray())
    # sorted layout: padding telescopes to at most 128 * K slots
    assert S.nnz <= st.slots <= S.nnz + 128 * st.K
    assert st.K < S.shape[1]  # the dense row was split


def _poisson2d(k):
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    return (sp.kron(sp.eye(k), T) + sp.kron(T, sp.eye(k))).tocsr().astype(np.float32)


def _run_ell(S, x):
    A = trnsparse.from_scipy(S)
    st, v = _sell.ell_layout(A, A.values, A.col_indices, A.row_ptrs, A.shape)
    tg = st.target.numpy() if st.target.numel() else np.zeros((1, 2), np.float32)
    out, prof = nki.profile(csr_spmv_kernel, v.numpy(), st.cols, tg, x, blocks=st.blocks, M=S.shape[0])
    return st, out, prof


def test_spmv_poisson_hbm_bytes_within_1p5x_of_floor():
    # 2-D Poisson on a 23 x 23 grid (529 rows, ragged): no long row
    S = _poisson2d(23)
    x = np.random.default_rng(0).standard_normal((S.shape[1], 1)).astype(np.float32)
    st, out, prof = _run_ell(S, x)
    np.testing.assert_allclose(out, S.astype(np.float64) @ x, rtol=0, atol=_tol(S, x))
    m, n = S.shape
    floor = 8 * S.nnz + 4 * (n + m)  # values + indices once, x and y once
    assert not any(b[3] for b in st.blocks)
    assert_counts(prof, csr_spmv_counts(m, n, st.blocks))
    assert prof.hbm_read_bytes + prof.hbm_write_bytes <= 1.05 * floor  # measured 1.024


@pytest.mark.parametrize("xmax,gmax,N", [(100, 24, 1), (4096, 2048, 1), (400, 24, 3), (400, 24, 6)])
def test_csr_spmv_kernel_vs_scipy_and_closed_form(monkeypatch, xmax, gmax, N):
    # 3 column blocks and small groups; the default caps; 3 columns (blocks of xmax / 4 = 100);
    # 6 columns: two panels (4 + 2), A read once per panel
    monkeypatch.setattr(_sell, "XMAX", xmax)
    monkeypatch.setattr(_sell, "GMAX", gmax)
    S = _case()
    m, n = S.shape
    x = np.random.default_rng(5).standard_normal((n, N)).astype(np.float32)
    A = trnsparse.from_scipy(S)
    st, v = _sell.ell_layout(A, A.values, A.col_indices, A.row_ptrs, A.shape, N)
    tg = st.target.numpy() if st.target.numel() else np.zeros((1, 2), np.float32)
    out, prof = nki.profile(csr_spmv_kernel, v.numpy(), st.cols, tg, x, blocks=st.blocks, M=m)
    np.testing.assert_allclose(out, S.astype(np.float64) @ x, rtol=0, atol=_tol(S, x))
    assert np.all(out[[7, m - 1]] == 0)
    assert len(st.blocks) == -(-n // _sell.xmax_for(N))
    longs = [q for b in st.blocks for q in b[3]]
    assert longs  # the dense row 5 is cut into pieces recombined by the one-hot matmul
    assert_counts(prof, csr_spmv_counts(m, n, st.blocks, N))
    # spelled out: x once; per panel of 4 columns, values + indices of every slot and 2 floats of target
    # per long piece; y once
    P = -(-N // 4)
    assert prof.hbm_read_bytes == 4 * n * N + P * (8 * st.slots + 8 * sum(q[0] for q in longs))
    assert prof.hbm_write_bytes == 4 * m * N


def test_ell_layout_invariants(monkeypatch):
    monkeypatch.setattr(_sell, "XMAX", 128)
    S = _case(m=700, n=333, density=0.01, seed=4)
    A = trnsparse.from_scipy(S)
    st = _sell.build_ell(A.col_indices, A.row_ptrs, A.shape)
    m, n = S.shape
    vals = _sell.slot_values(st, A.values).numpy()
    cols = st.cols.astype(np.int64)
    tg = st.target.numpy().astype(np.int64)
    D = np.zeros((m, n))
    for c0, xc, groups, longs in st.blocks:
        for s0, pc, G, w, off in groups:
            v = vals[off:off + pc * G * w].reshape(pc, G, w)
            c = cols[off:off + pc * G * w].reshape(pc, G, w)
            for p in range(pc):
                for g in range(G):
                    keep = c[p, g] < xc
                    assert np.all(v[p, g][~keep] == 0)
                    np.add.at(D[128 * (s0 + g) + p], c0 + c[p, g][keep], v[p, g][keep])
        for pc, w, off, toff, chunks in longs:
            v = vals[off:off + pc * w].reshape(pc, w)
            c = cols[off:off + pc * w].reshape(pc, w)
            for p in range(pc):
                r = 128 * tg[toff + p, 1] + tg[toff + p, 0]
                keep = c[p] < xc
                np.add.at(D[r], c0 + c[p][keep], v[p][keep])
                assert any(s0 <= r // 128 < s0 + sc for s0, sc in chunks)
    np.testing.assert_array_equal(D, S.toarray())  # every entry in exactly one slot


def test_spmv_spmm_public_paths_csr_csc_batches():
    S = _case(m=260, n=150, density=0.03, seed=7)
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.standard_normal(150).astype(np.float32))
    y0 = torch.from_numpy(rng.standard_normal(260).astype(np.float32))
    A = trnsparse.from_scipy(S)
    with kernel_ran("csr_spmv_kernel"):
        y = trnsparse.spmv(A, x, alpha=-2.0, y=y0, beta=0.5)
    ref = -2.0 * (S.astype(np.float64) @ x.double().numpy()) + 0.5 * y0.double().numpy()
    np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=3 * _tol(S, x.numpy()[:, None]) + 1e-6)
    # CSC input and a batch of 130 right-hand sides (> 128)
    C = trnsparse.from_scipy(S, format="csc")
    B = rng.standard_normal((150, 130)).astype(np.float32)
    with kernel_ran("csr_spmv_kernel"):  # 33 panels of <= 4 columns
        Y = trnsparse.spmm(C, B)  # NumPy in, NumPy out
    np.testing.assert_allclose(Y, S.astype(np.float64) @ B, rtol=0, atol=_tol(S, B))
    # same through the operator; the torch path agrees
    with kernel_ran("csr_spmv_kernel"):
        Z = A @ torch.from_numpy(B)
    with trnsparse.use_backend("torch"):
        T = trnsparse.spmm(A, torch.from_numpy(B))
    np.testing.assert_allclose(Z.numpy(), T.numpy(), rtol=0, atol=_tol(S, B))


def test_layout_cached_and_invalidated_with_the_matrix():
    S = _case(m=200, n=180, density=0.03, seed=9)
    A = trnsparse.from_scipy(S)
    x = torch.ones(180)
    with kernel_ran("csr_spmv_kernel", "csr_spmv_kernel"):
        trnsparse.spmv(A, x)
        st = A.__dict__["_ell_structure"][1]
        vals = A.__dict__["_ell_values"][1][1]
        y1 = trnsparse.spmv(A, x)
    assert A.__dict__["_ell_structure"][1] is st and A.__dict__["_ell_values"][1][1] is vals  # built once
    np.testing.assert_allclose(y1.numpy(), S @ np.ones(180), rtol=0, atol=_tol(S, np.ones((180, 1))))
    # in-place change of the values: the slot values are rebuilt, the structure kept
    A.values.mul_(3.0)
    with kernel_ran("csr_spmv_kernel"):
        y3 = trnsparse.spmv(A, x)
    assert A.__dict__["_ell_structure"][1] is st
    np.testing.assert_allclose(y3.numpy(), 3 * (S @ np.ones(180)), rtol=0, atol=3 * _tol(S, np.ones((180, 1))))
    # a new values tensor: rebuilt again; the cache does not keep the replaced tensor alive
    old = weakref.ref(A.values)
    A.values = torch.full_like(A.values, 2.0)
    gc.collect()
    assert old() is None
    with kernel_ran("csr_spmv_kernel"):
        y2 = trnsparse.spmv(A, x)
    np.testing.assert_allclose(y2.numpy(), 2.0 * np.diff(S.indptr), rtol=0, atol=0)
    # a CSC matrix keeps its CSR form (and so the layout) while its arrays are unchanged
    C = trnsparse.from_scipy(S, format="csc")
    with kernel_ran("csr_spmv_kernel", "csr_spmv_kernel"):
        trnsparse.spmv(C, x)
        form = C.__dict__["_csr_form"][1]
        trnsparse.spmv(C, x)
    assert C.__dict__["_csr_form"][1] is form
    C.values.zero_()
    with kernel_ran("csr_spmv_kernel"):
        assert not trnsparse.spmv(C, x).any()


def test_dense_rows_capped_at_one_tile(monkeypatch):
    # caps lowered so that a small matrix exercises them: rows of ~540 entries, wider than one ELL group
    # tile (GMAX) and one SELL piece (KMAX); the kernels then cut them (an uncapped tile would overflow SBUF
    # at the real caps)
    monkeypatch.setattr(_sell, "GMAX", 256)
    monkeypatch.setattr(_sell, "KMAX", 128)
    S = sp.random(130, 600, density=0.9, random_state=0, format="csr", dtype=np.float32)
    A = trnsparse.from_scipy(S)
    rng = np.random.default_rng(0)
    x, B = rng.standard_normal(600).astype(np.float32), rng.standard_normal((600, 6)).astype(np.float32)
    with kernel_ran("csr_spmv_kernel"):
        y = trnsparse.spmv(A, torch.from_numpy(x))
    monkeypatch.setattr(_sell, "SMAX", 1)  # y's panel may not stay on chip: the B-row gather kernel
    with kernel_ran("csr_spmm_kernel"):
        Y = trnsparse.spmm(A, torch.from_numpy(B))
    ell, sell = A.__dict__["_ell_structure"][1], A.__dict__["_sell_structure"][1]
    widths = [g[3] for b in ell.blocks for g in b[2]] + [q[1] for b in ell.blocks for q in b[3]]
    assert ell.K <= 256 and max(widths) <= 256
    assert sell.K <= 128 and max(s[1] for s in sell.slices) <= 128
    np.testing.assert_allclose(y.numpy(), S.astype(np.float64) @ x, rtol=0, atol=_tol(S, x[:, None]))
    np.testing.assert_allclose(Y.numpy(), S.astype(np.float64) @ B, rtol=0, atol=_tol(S, B))


def test_kernel_failure_falls_back_with_one_warning():
    S = _case(m=150, n=140, density=0.03, seed=2)
    A = trnsparse.from_scipy(S)
    x = torch.ones(140)

    def broken(*args):
        raise RuntimeError("injected")

    low = SPMV.lowering_for("nki")  # spmv's op (spmm's shares its lowerings)
    with SPMV.override("nki", broken, supports=low.supports, counts=low.counts), \
            trnsparse.use_backend("simulator"), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = trnsparse.spmv(A, x)
    assert sum(issubclass(r.category, NkiFallbackWarning) for r in w) == 1
    np.testing.assert_allclose(y.numpy(), S @ np.ones(140), rtol=0, atol=_tol(S, np.ones((140, 1))))


@pytest.mark.parametrize("k", [5, 600])  # one k chunk; two (512 + 88), one slot per gathered chunk
def test_csr_sddmm_kernel_vs_numpy_and_closed_form(k):
    S = _case()
    m, n = S.shape
    rng = np.random.default_rng(k)
    X = rng.standard_normal((m, k)).astype(np.float32)
    Y = rng.standard_normal((k, n)).astype(np.float32)
    A = trnsparse.from_scipy(S)
    st = _sell.structure(A, A.col_indices, A.row_ptrs, A.shape)
    prow = _sell.partition_rows(st)
    out, prof = nki.profile(csr_sddmm_kernel, st.cols.numpy(), prow.numpy(), X, np.ascontiguousarray(Y.T),
                            slices=st.slices)
    rows = np.repeat(np.arange(m), np.diff(S.indptr))
    ref = (X.astype(np.float64) @ Y.astype(np.float64))[rows, S.indices]
    # fp32 dot products of k terms of N(0,1) data: error ~ k * 2^-24 * k; 1e-6 * k of scale sqrt(k) is loose
    np.testing.assert_allclose(out[st.pos.numpy()], ref, rtol=0, atol=1e-6 * k)
    assert_counts(prof, csr_sddmm_counts(k, S.nnz, st.slices))
    P = sum(s[0] for s in st.slices if s[1] > 0)
    # indices once, partition rows once, an X row per partition, a Y column per stored entry; out in slots
    assert prof.hbm_read_bytes == 4 * st.slots + 4 * P + 4 * k * P + 4 * k * S.nnz
    assert prof.hbm_write_bytes == 4 * st.slots


def test_csr_sddmm_public_path_alpha_beta():
    S = _case(m=140, n=130, density=0.05, seed=8)
    A = trnsparse.from_scipy(S)
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((140, 7)).astype(np.float32), rng.standard_normal((7, 130)).astype(np.float32)
    with kernel_ran("csr_sddmm_kernel"):
        R = trnsparse.sddmm(A, torch.from_numpy(X), torch.from_numpy(Y), alpha=-1.5, beta=2.0)
    rows = np.repeat(np.arange(140), np.diff(S.indptr))
    ref = -1.5 * (X.astype(np.float64) @ Y)[rows, S.indices] + 2.0 * S.data
    assert isinstance(R, trnsparse.CSRMatrix) and torch.equal(R.col_indices, A.col_indices)
    np.testing.assert_allclose(R.values.numpy(), ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    with trnsparse.use_backend("torch"):
        T = trnsparse.sddmm(A, torch.from_numpy(X), torch.from_numpy(Y), alpha=-1.5, beta=2.0)
    np.testing.assert_allclose(R.values.numpy(), T.values.numpy(), rtol=0, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("uplo", ["upper", "lower"])
def test_spmv_symmetric_through_the_csr_kernels(uplo):
    S = _case(m=200, n=200, density=0.05, seed=6)  # row 5 dense: a long row in the symmetric matrix too
    D = S.toarray().astype(np.float64)
    T = np.triu(D) if uplo == "upper" else np.tril(D)
    full = T + T.T - np.diag(np.diag(T))  # independent reference: the symmetric matrix, densely
    rng = np.random.default_rng(2)
    x, X = rng.standard_normal(200).astype(np.float32), rng.standard_normal((200, 3)).astype(np.float32)
    A = trnsparse.from_scipy(S)
    with kernel_ran("csr_spmv_kernel", "csr_spmv_kernel"):
        y = trnsparse.spmv_symmetric(A, torch.from_numpy(x), alpha=-0.5, uplo=uplo)
        trnsparse.spmv_symmetric(A, torch.from_numpy(x), uplo=uplo)
    sym = A.__dict__[f"_symmetric_{uplo[0].upper()}"][1]
    assert "_ell_structure" in sym.__dict__  # S expanded once, its layout cached on it
    tol = 1e-5 * float((np.abs(full) @ np.abs(x.astype(np.float64))).max())
    np.testing.assert_allclose(y.numpy(), -0.5 * full @ x, rtol=0, atol=tol)
    with kernel_ran("csr_spmv_kernel"):  # 3 columns: the x-resident kernel
        Y = trnsparse.spmv_symmetric(A.to_csc(), torch.from_numpy(X), uplo=uplo)
    np.testing.assert_allclose(Y.numpy(), full @ X, rtol=0, atol=1e-5 * float((np.abs(full) @ np.abs(X)).max()))


def _tri_case(n=300, seed=0):
    """Diagonally dominant (well-conditioned diagonal tiles), ragged n, with an empty off-diagonal row."""
    S = sp.random(n, n, density=0.03, random_state=seed, format="lil", dtype=np.float64)
    S[:, 0] = 0.3  # a dense column: the rows below reach back to block 0 from every block
    S.setdiag(4.0)
    return S.tocsr().astype(np.float32)


@pytest.mark.parametrize("N", [1, 600])
def test_csr_spsv_kernel_vs_scipy_and_closed_form(N):
    S = _tri_case()
    n = S.shape[0]
    B = np.random.default_rng(N).standard_normal((n, N)).astype(np.float32)
    A = trnsparse.from_scipy(S)
    st = _tri.build(A.values, A.col_indices, A.row_ptrs, n, True, False, False)
    out, prof = nki.profile(csr_spsv_kernel, st.linv_t.numpy(), st.vals.numpy(), st.cols.numpy(), B,
                            blocks=st.blocks)
    ref = spl.spsolve_triangular(sp.tril(S).tocsr().astype(np.float64), B.astype(np.float64), lower=True)
    # diagonal tiles with dominance 4 vs off-diagonal sums < 3: cond(L_tt) small; fp32 forward error << 1e-5
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    assert_counts(prof, csr_spsv_counts(n, N, st.nnz_off, st.blocks))
    tril = sp.tril(S).tocoo()
    assert st.nnz_off == int(np.sum(tril.col // 128 < tril.row // 128))  # entries left of the diagonal tiles
    pcs = [b[0] for b in st.blocks]
    assert prof.hbm_read_bytes == (4 * sum(p * p for p in pcs) + 8 * sum(b[0] * b[1] for b in st.blocks)
                                   + 4 * n * N + 4 * N * st.nnz_off)


@pytest.mark.parametrize("lower,unit,trans", [(True, False, False), (False, False, False), (True, True, True),
                                              (False, True, True)])
def test_spsv_spsm_public_paths_vs_scipy(lower, unit, trans):
    S = _tri_case(n=260, seed=3)
    A = trnsparse.from_scipy(S) if lower else trnsparse.from_scipy(S, format="csc")
    rng = np.random.default_rng(4)
    b, B = rng.standard_normal(260).astype(np.float32), rng.standard_normal((260, 5)).astype(np.float32)
    T = sp.tril(S) if lower else sp.triu(S)
    if trans:
        T = T.T
    if unit:
        T = T - sp.diags(T.diagonal()) + sp.eye(260)
    Tl = T.tocsr().astype(np.float64)
    low = lower != trans
    with kernel_ran("csr_spsv_kernel", "csr_spsv_kernel"):
        x = trnsparse.spsv(A, torch.from_numpy(b), lower=lower, unit_diagonal=unit, trans=trans)
        X = trnsparse.spsm(A, torch.from_numpy(B), lower=lower, unit_diagonal=unit, trans=trans)
    ref = spl.spsolve_triangular(Tl, b.astype(np.float64), lower=low)
    Ref = spl.spsolve_triangular(Tl, B.astype(np.float64), lower=low)
    np.testing.assert_allclose(x.numpy(), ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    np.testing.assert_allclose(X.numpy(), Ref, rtol=0, atol=1e-5 * np.abs(Ref).max())


def test_mostly_empty_matrix_all_kernels(monkeypatch):
    # 129 x 129 with 8 entries: whole slices of empty rows (SELL w = 0, ELL groups skipped), a ragged last row
    S = sp.random(129, 129, density=0.0005, random_state=0, format="csr", dtype=np.float32)
    assert S.nnz == 8
    A = trnsparse.from_scipy(S)
    rng = np.random.default_rng(0)
    x, X = rng.standard_normal(129).astype(np.float32), rng.standard_normal((129, 3)).astype(np.float32)
    with kernel_ran("csr_spmv_kernel", "csr_spmv_kernel", "csr_spmm_kernel", "csr_sddmm_kernel"):
        y = trnsparse.spmv(A, torch.from_numpy(x))
        Y = trnsparse.spmm(A, torch.from_numpy(X))
        monkeypatch.setattr(_sell, "SMAX", 1)  # y may not stay on chip: the B-row gather kernel
        Y6 = trnsparse.spmm(A, torch.from_numpy(np.tile(X, 2)))
        R = trnsparse.sddmm(A, torch.from_numpy(X), torch.from_numpy(X.T.copy()))
    np.testing.assert_allclose(y.numpy(), S @ x, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(Y.numpy(), S @ X, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(Y6.numpy(), S @ np.tile(X, 2), rtol=1e-6, atol=1e-6)
    rows = np.repeat(np.arange(129), np.diff(S.indptr))
    np.testing.assert_allclose(R.values.numpy(), (X.astype(np.float64) @ X.T)[rows, S.indices], rtol=1e-6,
                               atol=1e-6)


def test_spsv_rows_wider_than_the_sbuf_plan_stay_on_torch(monkeypatch):
    monkeypatch.setattr(_tri, "WMAX", 8)
    S = _tri_case(n=300, seed=1)  # rows of the last block reach back ~9 entries (and column 0)
    A = trnsparse.from_scipy(S)
    with trnsparse.use_backend("simulator"):
        p = plan_call(trnsparse.spsv, A, torch.ones(300))
    assert p.backend == "torch" and "more than 8 slots" in p.reason
