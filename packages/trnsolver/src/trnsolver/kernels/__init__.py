"""trnsolver's NKI kernels (NKI 0.6, ``nisa`` with ``dst``), one per file.

* :mod:`trnsolver.kernels.eigh_sweep` -- one parallel (Brent-Luk) Jacobi sweep on a tile (``eigh``).
* :mod:`trnsolver.kernels.potrf_tile` -- Cholesky of one diagonal tile (n <= 128).
* :mod:`trnsolver.kernels.lu_panel` -- an LU panel with partial pivoting (``max8`` / ``nc_find_index8``).
* :mod:`trnsolver.kernels.row_gather` -- row interchanges by indirect DMA.
* :mod:`trnsolver.kernels.qr_panel` -- a Householder QR panel.
* :mod:`trnsolver.kernels.svd_sweep` -- one one-sided Jacobi SVD sweep.
* :mod:`trnsolver.kernels.cg_step` / :mod:`trnsolver.kernels.bicgstab_step` /
  :mod:`trnsolver.kernels.minres_step` -- one Krylov iteration;
  :mod:`trnsolver.kernels.gmres_arnoldi` -- one GMRES Arnoldi step.

The blocked factorizations' trailing updates, TRSMs and Newton-Schulz run on
trnblas's GEMM/SYRK/TRSM kernels.
"""
