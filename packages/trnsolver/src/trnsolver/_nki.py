"""Every NKI lowering of trnsolver, in one place.

Each function below is registered as the ``"nki"`` lowering (which also
serves ``"simulator"``) of an :class:`~trnsci.dispatch.Op` declared next to
its public function, with the torch lowering's signature.

* ``EIGH`` (real float32): parallel Brent-Luk Jacobi. ``n <= 128``: one tile,
  one :func:`~trnsolver.kernels.jacobi.jacobi_sweep_kernel` launch per sweep
  (``n - 1`` rounds of ``n/2`` rotations inside), until
  ``off(A) <= max(tol, FP32_TOL) ||A||_F`` or the off-norm stops falling
  (fp32 floor). ``n > 128``: block Jacobi (:data:`BLOCK` x :data:`BLOCK`
  blocks, each block pair one tile solved by the same kernel for a fixed
  two sweeps), the pair rotations applied by ``trnblas.gemm``. Eigenvalues
  are sorted on the host; no LAPACK call.
* ``CHOLESKY`` (real float32): the blocked right-looking factorization of
  :mod:`trnsolver._blocked` with trnblas's TRSM/SYRK/GEMM (their kernels)
  for the panel and trailing updates; the ``CHOL_BLOCK``-sized diagonal
  blocks on :func:`~trnsolver.kernels.potrf_tile.potrf_tile_kernel` (a
  matrix of order <= ``CHOL_BLOCK`` is that one launch). The plan lists the
  launches with their summed closed forms.
* LU and the ops on it, and the SPD solves/inverses: :mod:`trnsolver._nki_lu`
  and :mod:`trnsolver._nki_spd`; QR and lstsq: :mod:`trnsolver._nki_qr`;
  SVD and pinv (one-sided Jacobi): :mod:`trnsolver._nki_svd`; the real Schur
  form (explicit double-shift QR steps): :mod:`trnsolver._nki_schur`; CG (dense A):
  :mod:`trnsolver._nki_krylov`.
* ``INV_SQRT_SPD_NS`` (real float32): coupled Newton-Schulz, three
  ``trnblas.gemm`` calls (the GEMM kernel) a step.

trnblas is called through its public functions inside
``use_backend(<trnsolver's backend>, "trnblas")``, so its own Ops decide
(dtype, SBUF plan) and its plans show the kernels that ran.
"""

from __future__ import annotations

import functools
import warnings

import torch

import trnblas
from trnsci import iterative as it_
from trnsci import linalg as la
from trnsci import nki
from trnsci.backend import get_backend, use_backend
from trnsolver._blocked import _blocked_cholesky_torch
from trnsolver._jacobi import _block_jacobi_eigh_torch
from trnsolver.eigen import EIGH
from trnsolver.factor import CHOLESKY, INV_SQRT_SPD_NS, _inv_sqrt_spd_ns_torch
from trnsolver.kernels.jacobi import MAX_N, jacobi_sweep_kernel, partner_table
from trnsolver.kernels.potrf_tile import potrf_tile_counts, potrf_tile_kernel

F32 = torch.float32
KERNEL_DTYPES = (torch.float32,)
#: Off-norm target below which fp32 sweeps cannot usefully go (relative to ||A||_F).
FP32_TOL = 1e-6
#: Block size of block Jacobi (a block pair is one 2*BLOCK <= 128 tile).
BLOCK = MAX_N // 2
#: Diagonal block of the device Cholesky.
CHOL_BLOCK = 128


def _trnblas():
    """Run trnblas on trnsolver's backend for the duration of a lowering."""
    return use_backend(get_backend("trnsolver"), "trnblas")


@functools.lru_cache(maxsize=8)
def _tables(m: int):
    return torch.eye(m, dtype=F32), torch.from_numpy(partner_table(m))


def jacobi_tile(M: torch.Tensor, tol: float, max_sweeps: int, stop_early: bool = True):
    """Jacobi on one real ``[n, n]`` tile (n <= 128) with the sweep kernel.

    Returns ``(d, V, sweeps, converged)``: unsorted diagonal, ``V`` with
    ``M ~= V diag(d) V^T``. With ``stop_early=False`` exactly ``max_sweeps``
    sweeps run (block Jacobi's fixed inner work).
    """
    n = M.shape[-1]
    m = n + n % 2
    a = torch.zeros(m, m, dtype=F32)
    a[:n, :n] = 0.5 * (M + M.mT).to(F32)
    eye, S = _tables(m)
    vt = eye.clone()
    off2 = float((a - torch.diag(a.diagonal())).square().sum())
    tot2 = float(a.square().sum())
    goal = max(tol, FP32_TOL) ** 2 * tot2 if stop_early else -1.0
    sweeps = 0
    converged = off2 <= goal or tot2 == 0
    while not converged and sweeps < max_sweeps:
        a, vt, norms = nki.run(jacobi_sweep_kernel, a, vt, eye, S, out_dtype=F32)
        sweeps += 1
        new = float(norms[0, 0])
        if new != new:  # NaN/Inf in A (check_finite=False): stop, reported as not converged
            break
        converged = new <= goal
        if stop_early and not converged and new >= off2:  # fp32 floor reached
            converged = new <= (64 * FP32_TOL) ** 2 * tot2
            break
        off2 = new
    return a.diagonal()[:n].clone(), vt.mT[:n, :n].contiguous(), sweeps, converged


def _inner_kernel(sub, inner_sweeps):
    """Each block-pair tile of ``sub`` [npair, 2b, 2b] through the kernel, unsorted."""
    return torch.stack([jacobi_tile(t, 0.0, inner_sweeps, stop_early=False)[1] for t in sub])


def _gemm_pairs(X, Y):
    """X @ Y for stacks of matrices, one trnblas.gemm per pair."""
    return torch.stack([trnblas.gemm(1.0, x.contiguous(), y.contiguous()) for x, y in zip(X, Y)])


def _eigh_supports(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    if A.shape[-1] == 0:
        return "empty matrix: nothing to compute"
    return None


def _eigh_counts(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    """None: the number of sweep launches depends on the data. One sweep's
    closed forms are :func:`~trnsolver.kernels.jacobi.jacobi_sweep_counts`."""
    return None


def _eigh_kernels(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    """The sweep kernel on one tile; past one tile (n > 128) block Jacobi adds trnblas's GEMM kernel."""
    return ("jacobi_sweep_kernel",) if A.shape[-1] <= 2 * BLOCK else ("jacobi_sweep_kernel", "gemm_kernel")


@EIGH.lowering("nki", dtypes=KERNEL_DTYPES, supports=_eigh_supports, counts=_eigh_counts, kernels=_eigh_kernels)
def _eigh_nki(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    n = A.shape[-1]
    full = la.symmetric(A, uplo)
    flat = full.reshape(-1, n, n)
    ws, Vs, bad = [], [], 0
    for M in flat:
        if n <= 2 * BLOCK:  # one tile (2 * BLOCK = MAX_N = 128)
            d, V, sweeps, ok = jacobi_tile(M, tol, max_sweeps)
            d, order = torch.sort(d)
            V = V[:, order]
        else:
            with _trnblas():
                d, V, sweeps = _block_jacobi_eigh_torch(M.to(F32), max(tol, FP32_TOL), max_sweeps, block=BLOCK,
                                                        inner=_inner_kernel, mm=_gemm_pairs)
            ok = sweeps < max_sweeps
        bad += not ok
        ws.append(d[lo:hi + 1])
        Vs.append(V[:, lo:hi + 1])
    if bad:
        warnings.warn(f"eigh: the Jacobi kernel did not reach tol on {bad} matrix(es) in max_sweeps={max_sweeps}",
                      it_.ConvergenceWarning, stacklevel=4)
    k = hi - lo + 1
    w = torch.stack(ws).reshape(*A.shape[:-2], k).to(A.device)
    if not vectors:
        return w, None
    return w, torch.stack(Vs).reshape(*A.shape[:-2], n, k).to(A.device)


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


def not_finite(A) -> str | None:
    """Why a kernel path cannot take ``A`` holding NaN/Inf (reached with ``check_finite=False``
    or from ``det``/``slogdet``): pivot searches, norms and ``rsqrt`` need finite values, and
    the torch path propagates NaN as LAPACK does."""
    # a host tensor is scanned; on a device that would be a host read per call: the pivots report NaN there
    if A.is_cpu and A.is_floating_point() and not bool(torch.isfinite(A).all()):
        return "A holds NaN/Inf: the kernels' pivot searches and norms need finite values"
    return None


def _cholesky_supports(A, upper):
    if A.shape[-1] == 0 or A.numel() == 0:
        return "empty matrix: nothing to compute"
    return not_finite(A)


def cholesky_tally(t, n: int, nb: int | None = None):
    """Add the blocked Cholesky's launches (closed forms) to a :class:`trnsolver._nki_lu._Tally`."""
    from trnblas.kernels.gemm import gemm_counts
    from trnblas.kernels.syrk import fits as syrk_fits
    from trnblas.kernels.syrk import syrk_counts
    from trnblas.kernels.trsm import trsm_counts

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
    from trnsolver._nki_lu import _batch, _Tally

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
    with _trnblas():
        if A.dim() == 2:
            return _inv_sqrt_spd_ns_torch(A, max_iters, tol)
        # trnblas.gemm is 2-D: one Newton-Schulz per matrix, worst residual reported
        Xs, its, res = [], 0, 0.0
        for M in A.reshape(-1, n, n):
            X, it, r = _inv_sqrt_spd_ns_torch(M, max_iters, tol)
            Xs.append(X)
            its, res = max(its, it), max(res, r)
    return torch.stack(Xs).reshape(A.shape), its, res


# LU with partial pivoting and the ops built on it, and the SPD solves, register from their own modules
from trnsolver import _nki_krylov, _nki_lu, _nki_qr, _nki_schur, _nki_spd, _nki_svd  # noqa: E402, F401
