"""trnsparse NKI kernels through the simulator: results vs dense NumPy / SciPy and the torch path,
and the emulator's counters vs the kernels' closed forms.

Shapes are small and ragged (not multiples of 128) with 2-3 block rows of 128: the emulator is NumPy,
so every kernel runs only a few times here.
"""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import trnsparse
from trnsci import nki
from trnsci.testing import assert_counts, kernel_ran
from trnsparse.kernels.bsr_spmm import bsr_spmm_counts, bsr_spmm_kernel
from trnsparse.ops import _bsr_spmm_torch

pytestmark = pytest.mark.simulator


def _tiled(rng, m, n, keep, dtype=np.float32):
    """A dense (m, n) matrix that is zero outside the 128x128 tiles where ``keep`` is True."""
    D = rng.standard_normal((m, n))
    D *= np.kron(keep, np.ones((128, 128)))[:m, :n]
    return D.astype(dtype)


# 3 x 3 block grid, ragged on both edges; block row 1 has no tile, block row 2 has two
KEEP = np.array([[1, 0, 1], [0, 0, 0], [0, 1, 1]], bool)


def test_bsr_spmm_kernel_counters_match_closed_form():
    rng = np.random.default_rng(0)
    M, K, N = 300, 270, 70
    D = _tiled(rng, M, K, KEEP)
    A = trnsparse.BSRMatrix.from_dense(torch.from_numpy(D), block_size=128)
    B = rng.standard_normal((K, N)).astype(np.float32)
    bcol = A.block_col_indices.to(torch.int32).numpy()[None, :].copy()
    ptrs = tuple(int(p) for p in A.block_row_ptrs)
    blocks_t = A.blocks.transpose(1, 2).contiguous().numpy()
    ref = D.astype(np.float64) @ B
    assert A.n_blocks == 4
    # tiles (0,0), (0,2), (2,1), (2,2); block column 2 holds only K - 256 = 14 rows of B
    for cols, kv in [((), 128 + 14 + 128 + 14), (tuple(bcol[0].tolist()), 128 + 14 + 128)]:
        # cols=(): one B gather per stored tile; cols given: B row tiles resident, one gather per block column
        out, prof = nki.profile(bsr_spmm_kernel, blocks_t, bcol, B, row_ptrs=ptrs, M=M, cols=cols)
        # fp32 products accumulated in fp32 over at most 2 tiles (K <= 270): error << 1e-5 * |ref|max
        np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
        expected = bsr_spmm_counts(M, K, N, bcol[0].tolist(), ptrs, 4, keep_b=bool(cols))
        assert_counts(prof, expected, ignore=("flops",))
        # HBM bytes are proportional to the stored tiles: 4 tiles of A (fp32) once, the B rows
        # gathered, and the index row per partition
        assert prof.hbm_read_bytes == 4 * 128 * 4 + 4 * 128 * 128 * 4 + 4 * N * kv
        assert prof.hbm_write_bytes == 4 * M * N


def test_bsr_spmm_simulator_vs_scipy_and_torch():
    dtype = torch.float32
    rng = np.random.default_rng(1)
    M, K, N = 260, 300, 600  # N > 512: two PSUM tiles per block row
    keep = np.array([[1, 1, 0], [0, 0, 1], [1, 0, 1]], bool)
    D = _tiled(rng, M, K, keep)
    A = trnsparse.BSRMatrix.from_dense(torch.from_numpy(D).to(dtype), block_size=128)
    B = torch.from_numpy(rng.standard_normal((K, N)).astype(np.float32)).to(dtype)
    with kernel_ran("bsr_spmm_kernel"):
        C = trnsparse.bsr_spmm(A, B)
    assert C.dtype == dtype and C.shape == (M, N)
    Dq = A.to_dense().double().numpy()
    ref = sp.csr_matrix(Dq) @ B.double().numpy()
    # fp32 accumulation over K=300 terms: relative error well under 1e-5 of the largest entry
    tol = 1e-5
    np.testing.assert_allclose(C.double().numpy(), ref, rtol=0, atol=tol * np.abs(ref).max())
    T = _bsr_spmm_torch(A.blocks, A.block_col_indices, A.block_row_ptrs, A.shape, 128, B)
    np.testing.assert_allclose(C.double().numpy(), T.double().numpy(), rtol=0, atol=tol * np.abs(ref).max())


def test_bsr_spmm_simulator_vector_through_spmv():
    rng = np.random.default_rng(2)
    D = _tiled(rng, 140, 200, np.array([[0, 1], [1, 1]], bool))
    A = trnsparse.BSRMatrix.from_dense(torch.from_numpy(D), block_size=128)
    x = rng.standard_normal(200).astype(np.float32)
    with kernel_ran("bsr_spmm_kernel"):
        y = trnsparse.spmv(A, torch.from_numpy(x), alpha=2.0)
    ref = 2.0 * (D.astype(np.float64) @ x)
    np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=1e-5 * np.abs(ref).max())


def _screen_case(rng, n, N):
    A = rng.standard_normal((n, n)).astype(np.float32)
    # Schwarz diagonal over several decades, with ties, and one pair exactly at the threshold
    d = (10.0 ** rng.uniform(-8, 0, n)).astype(np.float32)
    d[5] = d[7] = d[9]
    d[0], d[1] = 1e-3, 1e-5  # |d_0 d_1| = 1e-8 in float64 arithmetic: compared with > (excluded)
    B = rng.standard_normal((n, N)).astype(np.float32)
    thr = float(np.float64(d[0]) * np.float64(d[1]))
    return A, d, B, thr


def _screen_ref(A, d, B, thr):
    a = np.abs(d.astype(np.float64))
    mask = np.multiply.outer(a, a) > thr  # independent float64 mask, as the docstring defines it
    return (A.astype(np.float64) * mask) @ B.astype(np.float64), mask


def test_screened_spmm_kernel_counters_match_closed_form():
    from trnsparse._nki.screening import schwarz_ranks
    from trnsparse.kernels.screened_spmm import screened_spmm_counts, screened_spmm_kernel

    rng = np.random.default_rng(3)
    n, N = 200, 37
    A, d, B, thr = _screen_case(rng, n, N)
    ref, mask = _screen_ref(A, d, B, thr)
    rank, r = schwarz_ranks(torch.from_numpy(d), thr)
    assert np.array_equal(rank.numpy()[:, 0][None, :] >= r.numpy()[0][:, None], mask)  # exact 0/1 mask
    out, prof = nki.profile(screened_spmm_kernel, np.ascontiguousarray(A.T), B, rank.numpy(), r.numpy())
    # fp32 accumulation over n=200 terms
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    assert_counts(prof, screened_spmm_counts(n, N), ignore=("flops",))


def test_screened_spmm_simulator_vs_numpy_and_torch():
    from trnsparse.screening import _screened_spmm_torch

    rng = np.random.default_rng(4)
    n, N = 260, 530  # ragged row tiles and two PSUM tiles
    A, d, B, thr = _screen_case(rng, n, N)
    ref, _ = _screen_ref(A, d, B, thr)
    with kernel_ran("screened_spmm_kernel"):
        C = trnsparse.screened_spmm(torch.from_numpy(A), torch.from_numpy(d), torch.from_numpy(B), thr)
    np.testing.assert_allclose(C.numpy(), ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    T = _screened_spmm_torch(torch.from_numpy(A), torch.from_numpy(d), torch.from_numpy(B), thr)
    np.testing.assert_allclose(C.numpy(), T.numpy(), rtol=0, atol=1e-5 * np.abs(ref).max())


def test_bsr_sddmm_kernel_counters_match_closed_form():
    from trnsparse.kernels.bsr_sddmm import bsr_sddmm_counts, bsr_sddmm_kernel

    rng = np.random.default_rng(5)
    m, n, k = 300, 270, 150  # k > 128: two contraction tiles
    X = rng.standard_normal((m, k)).astype(np.float32)
    Y = rng.standard_normal((k, n)).astype(np.float32)
    ptrs, cols = (0, 2, 2, 4), (0, 2, 1, 2)  # KEEP's tiles; block row 1 empty
    out, prof = nki.profile(bsr_sddmm_kernel, np.ascontiguousarray(X.T), Y, row_ptrs=ptrs, cols=cols)
    full = np.zeros((384, 384))
    full[:m, :n] = X.astype(np.float64) @ Y
    rows = (0, 0, 2, 2)
    ref = np.stack([full[128 * r:128 * r + 128, 128 * c:128 * c + 128] for r, c in zip(rows, cols)])
    # fp32 accumulation over k=150 terms
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    assert_counts(prof, bsr_sddmm_counts(m, n, k, ptrs, cols), ignore=("flops",))


def test_bsr_sddmm_simulator_vs_numpy_and_torch():
    from trnsparse.ops import _bsr_sddmm_torch

    rng = np.random.default_rng(6)
    m, n, k = 200, 140, 20
    D = _tiled(rng, m, n, np.array([[1, 1], [0, 1]], bool))
    A = trnsparse.BSRMatrix.from_dense(torch.from_numpy(D), block_size=128)
    X = torch.from_numpy(rng.standard_normal((m, k)).astype(np.float32))
    Y = torch.from_numpy(rng.standard_normal((k, n)).astype(np.float32))
    with kernel_ran("bsr_sddmm_kernel"):
        out = trnsparse.sddmm(A, X, Y, alpha=2.0, beta=0.5)
    assert isinstance(out, trnsparse.BSRMatrix)
    # reference: every entry of the stored tiles, dense NumPy in float64
    tile_mask = np.kron(np.array([[1, 1], [0, 1]]), np.ones((128, 128)))[:m, :n].astype(bool)
    ref = np.where(tile_mask, 2.0 * (X.double().numpy() @ Y.double().numpy()) + 0.5 * D, 0.0)
    np.testing.assert_allclose(out.to_dense().numpy(), ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    T = _bsr_sddmm_torch(A.blocks, A.block_col_indices, A.block_row_ptrs, A.shape, 128, X, Y, 2.0, 0.5)
    np.testing.assert_allclose(out.blocks.numpy(), T.numpy(), rtol=0, atol=1e-5 * np.abs(ref).max())


def _dense_attention(Q, K, V, allowed, scale):
    """Reference: dense masked softmax in float64; rows with no allowed key give zeros."""
    S = np.einsum("...qd,...kd->...qk", Q.astype(np.float64), K.astype(np.float64)) * scale
    S = np.where(allowed, S, -np.inf)
    mx = S.max(-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    P = np.where(allowed, np.exp(S - mx), 0.0)
    den = P.sum(-1, keepdims=True)
    return np.where(den > 0, (P @ V.astype(np.float64)) / np.where(den > 0, den, 1.0), 0.0)


def test_attention_kernel_counters_match_closed_form():
    from trnsparse.kernels.attention import attention_counts, attention_kernel

    rng = np.random.default_rng(7)
    G, S, d, dv = 2, 300, 16, 24
    mask = trnsparse.local_window_mask(S, 2, block_size=128, causal=True)  # 2-tile window, causal, ragged
    Q, K, V = (rng.standard_normal((G, S, w)).astype(np.float32) for w in (d, d, dv))
    ptrs = tuple(int(p) for p in mask.block_row_ptrs)
    cols = tuple(int(c) for c in mask.block_col_indices)
    out, prof = nki.profile(attention_kernel, np.ascontiguousarray(Q.transpose(0, 2, 1)),
                            np.ascontiguousarray(K.transpose(0, 2, 1)), V, row_ptrs=ptrs, cols=cols, scale=0.25,
                            causal=True)
    i = np.arange(S)
    allowed = (i[None, :] <= i[:, None]) & (i[:, None] // 128 - i[None, :] // 128 < 2)
    ref = _dense_attention(Q, K, V, allowed, 0.25)
    # fp32 softmax and products over <= 256 keys: error ~1e-6 of O(1) outputs
    np.testing.assert_allclose(out, ref, rtol=0, atol=2e-5)
    expected = attention_counts(G, S, S, d, dv, ptrs, cols, True)
    assert_counts(prof, expected)
    # no score matrix in HBM: reads are Q, the K/V tiles of the pattern; writes are O only
    assert prof.hbm_write_bytes == 4 * G * S * dv
    kv_rows = 128 + (128 + 128) + (128 + 44)  # keys read by block rows 0, 1, 2 (window of 2 tiles)
    assert prof.hbm_read_bytes == 4 * G * (d * S + kv_rows * (d + dv))


def test_attention_simulator_4d_ragged_empty_block_row():
    from trnsparse.attention import _block_sparse_attention_torch

    rng = np.random.default_rng(8)
    B_, H, S, d = 1, 2, 300, 8
    tiles = _tiled(np.random.default_rng(0), S, S, KEEP) != 0  # block row 1 has no tile
    mask = trnsparse.BSRMatrix.from_dense(torch.from_numpy(tiles.astype(np.float32)), block_size=128)
    Q, K, V = (torch.from_numpy(rng.standard_normal((B_, H, S, d)).astype(np.float32)) for _ in range(3))
    with kernel_ran("attention_kernel"):
        out = trnsparse.block_sparse_attention(Q, K, V, mask)
    assert out.shape == (B_, H, S, d)
    allowed = np.kron(KEEP, np.ones((128, 128)))[:S, :S].astype(bool)
    ref = _dense_attention(Q.numpy(), K.numpy(), V.numpy(), allowed, 1 / np.sqrt(d))
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=2e-5)
    assert np.all(out.numpy()[:, :, 128:256] == 0)  # the empty block row
    G = B_ * H
    T = _block_sparse_attention_torch(Q.reshape(G, S, d), K.reshape(G, S, d), V.reshape(G, S, d), mask.blocks != 0,
                                      mask.block_row_indices, mask.block_col_indices, 128, 1 / np.sqrt(d), False)
    np.testing.assert_allclose(out.reshape(G, S, d).numpy(), T.numpy(), rtol=0, atol=2e-5)


def test_attention_simulator_causal_flag_window_of_one():
    rng = np.random.default_rng(9)
    S, d = 200, 4
    Q, K, V = (torch.from_numpy(rng.standard_normal((S, d)).astype(np.float32)) for _ in range(3))
    mask = trnsparse.local_window_mask(S, 1, block_size=128)
    with kernel_ran("attention_kernel"):
        out = trnsparse.block_sparse_attention(Q, K, V, mask, scale=0.5, causal=True)
    i = np.arange(S)
    allowed = (i[None, :] <= i[:, None]) & (i[:, None] // 128 == i[None, :] // 128)
    ref = _dense_attention(Q.numpy(), K.numpy(), V.numpy(), allowed, 0.5)
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=2e-5)


def test_bsr_spmm_kernel_two_column_panels_and_full_k_tiles():
    # N = 2100 > 2048: two passes over the tiles (A read twice); K = 256: no ragged B tile, no memsets
    rng = np.random.default_rng(10)
    M, K, N = 130, 256, 2100
    D = _tiled(rng, M, K, np.array([[1, 1], [0, 1]], bool))
    A = trnsparse.BSRMatrix.from_dense(torch.from_numpy(D), block_size=128)
    B = rng.standard_normal((K, N)).astype(np.float32)
    bcol = A.block_col_indices.to(torch.int32).numpy()[None, :].copy()
    ptrs = tuple(int(p) for p in A.block_row_ptrs)
    out, prof = nki.profile(bsr_spmm_kernel, A.blocks.transpose(1, 2).contiguous().numpy(), bcol, B,
                            row_ptrs=ptrs, M=M)
    ref = D.astype(np.float64) @ B
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    expected = bsr_spmm_counts(M, K, N, bcol[0].tolist(), ptrs, 4, keep_b=False)
    assert_counts(prof, expected, ignore=("flops",))
    assert prof.hbm_read_bytes == 4 * 128 * 3 + 2 * 3 * 128 * 128 * 4 + 4 * N * 3 * 128


def test_bsr_spmm_resident_b_only_when_it_fits_sbuf():
    from trnsci.nki.tiling import sbuf_budget
    from trnsparse.kernels.bsr_spmm import resident

    # fp32, 2048-column panels: 8 KiB per partition per resident B row tile
    fit = (sbuf_budget(reserve=12 * 1024) - 4 * 128 - 4 * 2048 - 4 * 512) // (4 * 2048)
    cols = list(range(fit - 1))
    assert resident(cols, 4096, 4)
    assert not resident(list(range(fit + 1)), 4096, 4)
    assert resident(list(range(fit + 1)), 512, 4)  # narrower panels: more tiles fit


@pytest.mark.parametrize("d,dv", [(192, 192), (256, 256), (130, 600)])
def test_attention_kernel_k_tiled_head_dim_counters(d, dv):
    # head_dim > 128: the scores accumulate over ceil(d/128) K slices in PSUM; dv > 512: two P V slices
    from trnsparse.kernels.attention import attention_counts, attention_kernel

    rng = np.random.default_rng(d + dv)
    G, S = 2, 300
    mask = trnsparse.local_window_mask(S, 2, block_size=128, causal=True)
    Q, K, V = (rng.standard_normal((G, S, w)).astype(np.float32) for w in (d, d, dv))
    ptrs = tuple(int(p) for p in mask.block_row_ptrs)
    cols = tuple(int(c) for c in mask.block_col_indices)
    scale = 1 / np.sqrt(d)
    out, prof = nki.profile(attention_kernel, np.ascontiguousarray(Q.transpose(0, 2, 1)),
                            np.ascontiguousarray(K.transpose(0, 2, 1)), V, row_ptrs=ptrs, cols=cols,
                            scale=scale, causal=True)
    i = np.arange(S)
    allowed = (i[None, :] <= i[:, None]) & (i[:, None] // 128 - i[None, :] // 128 < 2)
    ref = _dense_attention(Q, K, V, allowed, scale)
    # fp32 scores summed over d <= 256 terms of O(1/sqrt(d)) scaled size, softmax over <= 256 keys: ~1e-6
    np.testing.assert_allclose(out, ref, rtol=0, atol=2e-5)
    expected = attention_counts(G, S, S, d, dv, ptrs, cols, True)
    assert_counts(prof, expected)
    kt, nv = -(-d // 128), -(-dv // 512)
    runs = 1 + 2 + 2  # tiles run by block rows 0, 1, 2 (window of 2 tiles, causal)
    assert prof.instructions["tensor"] == G * runs * (kt + 1 + nv)
    assert prof.instructions["dma"] == G * (3 * (kt + 1) + runs * (kt + 1))
    kv_rows = 128 + (128 + 128) + (128 + 44)
    assert prof.hbm_read_bytes == 4 * G * (d * S + kv_rows * (d + dv))
    assert prof.hbm_write_bytes == 4 * G * S * dv


@pytest.mark.parametrize("d", [192, 256])
def test_attention_simulator_head_dim_over_128_reaches_kernel(d):
    from trnsparse.attention import _block_sparse_attention_torch

    rng = np.random.default_rng(d)
    H, Sq = 2, 260
    tiles = _tiled(np.random.default_rng(1), Sq, Sq, KEEP) != 0
    mask = trnsparse.BSRMatrix.from_dense(torch.from_numpy(tiles.astype(np.float32)), block_size=128)
    Q, K, V = (torch.from_numpy(rng.standard_normal((H, Sq, d)).astype(np.float32)) for _ in range(3))
    with kernel_ran("attention_kernel"):
        out = trnsparse.block_sparse_attention(Q, K, V, mask)
    allowed = np.kron(KEEP, np.ones((128, 128)))[:Sq, :Sq].astype(bool)
    ref = _dense_attention(Q.numpy(), K.numpy(), V.numpy(), allowed, 1 / np.sqrt(d))
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=2e-5)
    T = _block_sparse_attention_torch(Q, K, V, mask.blocks != 0, mask.block_row_indices, mask.block_col_indices,
                                      128, 1 / np.sqrt(d), False)
    np.testing.assert_allclose(out.numpy(), T.numpy(), rtol=0, atol=2e-5)
