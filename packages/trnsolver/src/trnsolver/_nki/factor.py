"""NKI lowerings of :mod:`trnsolver.factor`'s Cholesky and Newton-Schulz inverse square root.

* ``CHOLESKY`` (real float32): the blocked right-looking factorization of
  :mod:`trnsolver._nki.factor_blocked` with trnblas's TRSM/SYRK/GEMM (their kernels)
  for the panel and trailing updates; the ``CHOL_BLOCK``-sized diagonal
  blocks on :func:`~trnsolver.kernels.potrf_tile.potrf_tile_kernel` (a
  matrix of order <= ``CHOL_BLOCK`` is that one launch). The plan lists the
  launches with their summed closed forms.
* ``INV_SQRT_SPD_NS`` (real float32): coupled Newton-Schulz, three
  ``trnblas.gemm`` calls (the GEMM kernel) a step.

The rest of :mod:`trnsolver.factor` lowers in :mod:`trnsolver._nki.factor_lu`
(LU and the ops on it), :mod:`trnsolver._nki.factor_qr` (QR, lstsq),
:mod:`trnsolver._nki.factor_spd` (the SPD solves and inverses) and
:mod:`trnsolver._nki.factor_svd` (SVD, pinv).
"""

from __future__ import annotations

import torch

from trnblas.kernels.gemm import gemm_counts
from trnblas.kernels.syrk import fits as syrk_fits
from trnblas.kernels.syrk import syrk_counts
from trnblas.kernels.trsm import trsm_counts
from trnsci import linalg as la
from trnsci import nki
from trnsolver._nki.common import F32, KERNEL_DTYPES, _batch, _Tally, _trnblas, not_finite
from trnsolver._nki.factor_blocked import _blocked_cholesky_torch
from trnsolver.factor import CHOLESKY, INV_SQRT_SPD_NS
from trnsolver.kernels.potrf_tile import potrf_tile_counts, potrf_tile_kernel

#: Diagonal block of the device Cholesky.
CHOL_BLOCK = 128


def potrf_tile(Akk: torch.Tensor) -> tuple[torch.Tensor, int]:
    """One diagonal block (lower triangle read, n <= CHOL_BLOCK) by the tile kernel: ``(L_kk, info)``."""
    S = la.symmetric(Akk.to(F32), "L")
    lt, d = nki.run(potrf_tile_kernel, S.contiguous(), out_dtype=F32)
    if not lt.is_cpu:  # on a device: info stays there (0, or 1 + the first bad pivot), nothing read
        bad = ~(d[:, 0] > 0)
        first = torch.argmax(bad.to(torch.int32)).to(torch.int32) + 1
        return lt.mT.tril().contiguous(), torch.where(bad.any(), first, torch.zeros_like(first))
    bad = torch.nonzero(~(d[:, 0] > 0))
    info = int(bad[0, 0]) + 1 if bad.numel() else 0
    return lt.mT.tril().contiguous(), info


def _cholesky_supports(A, upper):
    if A.shape[-1] == 0 or A.numel() == 0:
        return "empty matrix: nothing to compute"
    return not_finite(A)


def cholesky_tally(t, n: int, nb: int | None = None):
    """Add the blocked Cholesky's launches (closed forms) to a :class:`trnsolver._nki.common._Tally`."""
    nb = nb or CHOL_BLOCK
    for k0 in range(0, n, nb):
        k1 = min(k0 + nb, n)
        b = k1 - k0
        t.add(potrf_tile_counts(b))
        if k1 == n:
            break
        t.add({"kernel": "trsm_kernel", **trsm_counts(b, n - k1)})
        for j0 in range(k1, n, nb):
            j1 = min(j0 + nb, n)
            jb = j1 - j0
            if syrk_fits(b, jb, 4):
                t.add({"kernel": "syrk_kernel", **syrk_counts(jb, b, 4, False)})
            else:
                t.add({"kernel": "gemm_kernel", **gemm_counts(jb, jb, b, 4)})
            if j1 < n:
                t.add({"kernel": "gemm_kernel", **gemm_counts(n - j1, jb, b, 4)})


def _cholesky_counts(A, upper):
    t = _Tally()
    cholesky_tally(t, A.shape[-1])
    return t.result(_batch(A))


def cholesky_device(M: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Lower factor of one real matrix (lower triangle read) on the kernels: ``(L, info)``."""
    with _trnblas():
        return _blocked_cholesky_torch(M.to(F32), CHOL_BLOCK, diag=potrf_tile)


@CHOLESKY.lowering("nki", dtypes=KERNEL_DTYPES, supports=_cholesky_supports, counts=_cholesky_counts)
def _cholesky_nki(A, upper):
    n = A.shape[-1]
    Ls, infos = [], []
    if upper:  # read the upper triangle, as the torch path does: its conjugate transpose is a lower one
        A = A.mH
    for M in A.reshape(-1, n, n):
        L, info = cholesky_device(M)
        Ls.append(L)
        infos.append(info)
    L = torch.stack(Ls).reshape(A.shape).to(A.dtype)
    if any(isinstance(i, torch.Tensor) for i in infos):  # device infos: stacked there
        info = torch.stack([i.to(torch.int32).reshape(()) for i in infos]).reshape(A.shape[:-2])
    else:
        info = torch.tensor(infos, dtype=torch.int32, device=A.device).reshape(A.shape[:-2])
    return (L.mH.contiguous() if upper else L), info


def _ns_supports(A, max_iters, tol):
    return "empty matrix" if A.shape[-1] == 0 else None


@INV_SQRT_SPD_NS.lowering("nki", dtypes=KERNEL_DTYPES, supports=_ns_supports, kernels=("gemm_kernel",))
def _inv_sqrt_spd_ns_nki(A, max_iters, tol):
    n = A.shape[-1]
    ns = INV_SQRT_SPD_NS.lowering_for("torch").fn  # Newton-Schulz on trnblas.gemm, its kernel under this backend
    with _trnblas():
        if A.dim() == 2:
            return ns(A, max_iters, tol)
        # trnblas.gemm is 2-D: one Newton-Schulz per matrix, worst residual reported
        Xs, its, res = [], 0, 0.0
        for M in A.reshape(-1, n, n):
            X, it, r = ns(M, max_iters, tol)
            Xs.append(X)
            its, res = max(its, it), max(res, r)
    return torch.stack(Xs).reshape(A.shape), its, res
