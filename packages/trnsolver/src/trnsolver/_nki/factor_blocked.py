"""Blocked Cholesky on trnblas TRSM/SYRK/GEMM: the torch reference for the
NKI factorization (right-looking, tile ``nb = 128`` = one partition block).

For each block column k (rows/cols ``[k0, k1)``):
    L_kk = chol(A_kk)                            one tile (on device:
                                                 trnsolver.kernels.potrf_tile)
    L_ik = A_ik L_kk^{-T}          i > k         trnblas.trsm (side="right")
    A_jj -= L_jk L_jk^T            j > k         trnblas.syrk (diagonal tiles)
    A_ij -= L_ik L_jk^T            i > j > k     trnblas.gemm (below-diagonal tiles)
Only the lower triangle is read and written. A failing diagonal tile raises
with the global order of the failing leading minor.
"""

from __future__ import annotations

import torch

import trnblas


def _blocked_cholesky_torch(A: torch.Tensor, nb: int = 128, diag=None) -> tuple[torch.Tensor, int]:
    """Lower Cholesky factor of a real 2-D SPD ``A``. Returns ``(L, info)``,
    ``info`` the 1-based order of the first non-PD leading minor (0 = success).

    ``diag(A_kk) -> (L_kk, info)`` factors a diagonal block from its lower
    triangle (default ``torch.linalg.cholesky_ex``; the NKI path passes the
    tile kernel)."""
    n = A.shape[-1]
    W = A.tril().clone()
    diag = diag or torch.linalg.cholesky_ex
    found = None  # on a device: the first failure's order, kept there (no read per block)
    for k0 in range(0, n, nb):
        k1 = min(k0 + nb, n)
        Lkk, info = diag(W[k0:k1, k0:k1])
        if isinstance(info, torch.Tensor) and not info.is_cpu:
            here = torch.where(info != 0, info + k0, torch.zeros_like(info))
            found = here if found is None else torch.where(found != 0, found, here)
        elif int(info):
            return W, k0 + int(info)
        W[k0:k1, k0:k1] = Lkk
        if k1 == n:
            break
        W[k1:, k0:k1] = trnblas.trsm(1.0, Lkk, W[k1:, k0:k1], side="right", uplo="lower", trans="T")
        for j0 in range(k1, n, nb):
            j1 = min(j0 + nb, n)
            Ljk = W[j0:j1, k0:k1]
            W[j0:j1, j0:j1] = trnblas.syrk(-1.0, Ljk, 1.0, W[j0:j1, j0:j1], uplo="lower")
            if j1 < n:
                W[j1:, j0:j1] = trnblas.gemm(-1.0, W[j1:, k0:k1], Ljk, 1.0, W[j1:, j0:j1], transB=True)
    return W.tril(), (0 if found is None else found)
