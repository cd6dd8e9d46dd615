"""trnsolver's part of ``trnsci demo``: its NKI kernels at small, ragged shapes (:func:`kernel_cases`).

Run with ``trnsci demo --kernels-only``; every case goes through
trnsolver's public functions, once on the torch path (LAPACK through
torch/SciPy) and once with backend ``"simulator"`` (the kernels on the
NumPy NKI emulator; trnsolver's GEMM-shaped steps run trnblas's kernels).
"""

from __future__ import annotations

import torch

from trnsci.demo import KernelCase

__all__ = ["kernel_cases"]


def _sign_fixed(V: torch.Tensor) -> torch.Tensor:
    """Eigenvectors with each column's largest-magnitude entry made positive (a vector's sign is arbitrary)."""
    i = V.abs().argmax(0)
    s = torch.sign(V[i, torch.arange(V.shape[1])])
    return V * torch.where(s == 0, 1.0, s)


def kernel_cases() -> list[KernelCase]:
    """trnsolver's demo kernels: Jacobi eigh, blocked Cholesky, Newton-Schulz ``A^{-1/2}``, LU solve, SVD; float32.

    The test matrices have known spectra: ``A = Q diag(lam) Q^T`` with
    ``Q`` a random orthogonal matrix. Bounds are relative to
    ``max(1, max|torch result|)``, both paths float32:

    * ``eigh`` (n = 29, odd: the kernel pads one row/column): eigenvalues
      ``-9 .. 9``, gap 0.64, ``||A||_F`` ~ 29. The sweeps stop at an
      off-norm <= ``1e-6 ||A||_F`` ~ 3e-5, which bounds the eigenvector
      error by ~off/gap ~ 5e-5 (Jacobi converges quadratically, so it is
      far smaller in practice); fp32 rounding adds up to ~``n u ||A||/gap``
      ~ 2.5e-5 per path, and eigenvalues err by less (``~n u ||A||``).
      Eigenvectors are compared after fixing each column's sign: 1e-4.
    * ``cholesky`` (n = 150 > the 128 diagonal block: the two diagonal
      blocks run the ``potrf_tile`` kernel, the panel below the first and
      the 22 x 22 trailing update trnblas's TRSM and SYRK kernels):
      spectrum ``[1, 10]``, so ``max|L| <= sqrt(10)`` ~ 3.2. Either fp32
      factor's forward error is at most about ``n u cond(A) max|L|`` =
      150 * 6e-8 * 10 * 3.2 ~ 3e-4, i.e. ~1e-4 on the ``max|L|`` scale
      (typical errors are far smaller): 1e-4.
    * ``inv_sqrt_spd_ns`` (n = 40, spectrum ``[1, 4]``): coupled
      Newton-Schulz to ``||I - Z Y|| <= 1e-6`` on both paths (GEMM kernel
      vs torch.mm), each within ~1e-6 of ``A^{-1/2}`` (norm <= 1); 1e-5.
    * ``solve`` (n = 130, spectrum ``[1, 10]`` rotated by a random
      orthogonal matrix and made nonsymmetric by a random orthogonal right
      factor, so ``cond = 10``): LU with partial pivoting on the panel,
      row-gather, TRSM and GEMM kernels; ``|x| ~ 1``, either fp32 solution
      within ``~n u cond`` ~ 8e-5 of the exact one: 2e-4.
    * ``svd`` (30 x 12, singular values ``1 .. 4``): one-sided Jacobi sweep
      kernel; singular values within ``~n u sigma_max`` ~ 1e-5 on either
      path: 1e-4.

    Examples
    --------
    >>> from trnsci.demo import run_kernel_case
    >>> from trnsolver.demo import kernel_cases
    >>> case = kernel_cases()[1]
    >>> case.name
    'cholesky'
    >>> r = run_kernel_case(case)
    >>> r["ok"], r["kernels"]
    (True, ['potrf_tile_kernel', 'trsm_kernel', 'syrk_kernel', 'potrf_tile_kernel'])
    """
    import trnsolver

    g = torch.Generator().manual_seed(3)

    def spd(n, lam):
        Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
        return ((Q * lam) @ Q.T).float().contiguous()

    E = spd(29, torch.linspace(-9, 9, 29, dtype=torch.float64))
    C = spd(150, torch.linspace(1, 10, 150, dtype=torch.float64))
    N = spd(40, torch.linspace(1, 4, 40, dtype=torch.float64))
    Q2, _ = torch.linalg.qr(torch.randn(130, 130, generator=g, dtype=torch.float64))
    G = (spd(130, torch.linspace(1, 10, 130, dtype=torch.float64)).double() @ Q2).float().contiguous()
    rhs = torch.randn(130, generator=g).float()
    U0, _ = torch.linalg.qr(torch.randn(30, 12, generator=g, dtype=torch.float64))
    V0, _ = torch.linalg.qr(torch.randn(12, 12, generator=g, dtype=torch.float64))
    W = ((U0 * torch.linspace(4, 1, 12, dtype=torch.float64)) @ V0.T).float().contiguous()

    def eigh():
        w, V = trnsolver.eigh(E)
        return w, _sign_fixed(V)

    return [
        KernelCase("trnsolver", "eigh jacobi", "29x29 fp32, eigenvalues and vectors", eigh, 1e-4,
                   ("eigh_sweep_kernel",)),
        KernelCase("trnsolver", "cholesky", "150x150 fp32 (blocked, nb=128)", lambda: trnsolver.cholesky(C), 1e-4,
                   ("trsm_kernel", "syrk_kernel")),
        KernelCase("trnsolver", "inv_sqrt_ns", "40x40 fp32, cond 4",
                   lambda: trnsolver.inv_sqrt_spd_ns(N, tol=1e-6)[0], 1e-5, ("gemm_kernel",)),
        KernelCase("trnsolver", "solve lu", "130x130 fp32, cond 10 (blocked LU, nb=128)",
                   lambda: trnsolver.solve(G, rhs), 2e-4,
                   ("lu_panel_kernel", "row_gather_kernel", "trsm_kernel", "gemm_kernel")),
        KernelCase("trnsolver", "svd jacobi", "30x12 fp32, singular values 1..4",
                   lambda: trnsolver.svd(W)[1], 1e-4, ("svd_sweep_kernel",)),
    ]
