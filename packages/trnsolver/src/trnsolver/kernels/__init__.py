"""trnsolver's NKI kernels (NKI 0.6, ``nisa`` with ``dst``), one per file.

* :mod:`trnsolver.kernels.jacobi` -- one parallel (Brent-Luk) Jacobi sweep on a tile.

Newton-Schulz and the blocked Cholesky run on trnblas's GEMM/SYRK/TRSM kernels.
"""
