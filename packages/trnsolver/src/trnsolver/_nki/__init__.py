"""trnsolver's NKI lowerings, one module per public family; importing this package registers them all.

:mod:`.factor` (Cholesky, Newton-Schulz) with its parts :mod:`.factor_lu`
(LU and the ops on it), :mod:`.factor_qr` (QR, lstsq), :mod:`.factor_spd`
(SPD solves and inverses) and :mod:`.factor_svd` (SVD, pinv) lower the Ops
of :mod:`trnsolver.factor`; :mod:`.eigen` those of :mod:`trnsolver.eigen`
(eigh, Schur); :mod:`.iterative` those of :mod:`trnsolver.iterative` (CG,
BiCGSTAB, MINRES, GMRES). :mod:`.common` holds what they share;
:mod:`.eigen_jacobi` (the block Jacobi eigensolver on torch the eigh
lowering runs) and :mod:`.factor_blocked` (the blocked Cholesky the
Cholesky lowering runs) are used only here. trnblas is
called through its public functions inside ``use_backend(<trnsolver's
backend>, "trnblas")``, so its own Ops decide and its plans show the
kernels that ran. ``trnsolver/__init__.py`` imports this package last,
through :func:`trnsci.dispatch.load_lowerings`.
"""

from trnsolver._nki import (  # noqa: F401  (the families register their lowerings on import)
    eigen,
    eigen_jacobi,
    factor,
    factor_blocked,
    factor_lu,
    factor_qr,
    factor_spd,
    factor_svd,
    iterative,
)
