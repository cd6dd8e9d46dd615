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
    out, prof = nki.profile(bsr_spmm_kernel, A.blocks.transpose(1, 2).contiguous().numpy(), bcol, B,
                            row_ptrs=ptrs, M=M)
    ref = D.astype(np.float64) @ B
    # fp32 products accumulated in fp32 over at most 2 tiles (K <= 270): error << 1e-5 * |ref|max
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    expected = bsr_spmm_counts(M, K, N, bcol[0].tolist(), ptrs, 4)
    assert_counts(prof, expected, ignore=("flops",))
    # HBM bytes are proportional to the stored tiles: 4 tiles of A (fp32) once, their B rows
    # (the tile in block column 2 reads only K - 256 = 14 rows), and the index row per partition
    assert A.n_blocks == 4
    kv = 128 + 14 + 128 + 14  # tiles (0,0), (0,2), (2,1), (2,2)
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
