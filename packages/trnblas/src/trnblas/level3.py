"""BLAS level 3: matrix-matrix operations (cuBLAS ``cublas<t>gemm`` and friends), by family.

* :mod:`trnblas.level3_gemm` -- gemm, batched_gemm, strided_batched_gemm, gemm_ex,
  geam, dgmm; ops ``GEMM``, ``BATCHED_GEMM``, ``GEMM_EX``
* :mod:`trnblas.level3_symmetric` -- symm, hemm, syrk, herk, syr2k, her2k; op ``SYRK``
* :mod:`trnblas.level3_triangular` -- trmm, trsm; op ``TRSM``

Each public function validates its arguments, puts them in canonical form
(one-letter option codes ``"N"/"T"/"C"``, ``"U"/"L"``, ``"L"/"R"``,
``"U"/"N"``; Python scalars; ``C=None`` whenever ``beta == 0`` so that no
lowering can read it) and calls an :class:`trnsci.dispatch.Op` declared in
its module next to the op's torch lowering; every NKI lowering is in
:mod:`trnblas._nki`. This module gathers the family modules' names.
"""

from trnblas.level3_gemm import (  # noqa: F401
    BATCHED_GEMM,
    DGMM,
    GEAM,
    GEMM,
    GEMM_EX,
    batched_gemm,
    dgmm,
    geam,
    gemm,
    gemm_ex,
    strided_batched_gemm,
)
from trnblas.level3_symmetric import SYR2K, SYRK, hemm, her2k, herk, symm, syr2k, syrk  # noqa: F401
from trnblas.level3_triangular import TRSM, trmm, trsm  # noqa: F401

__all__ = [
    "gemm", "batched_gemm", "strided_batched_gemm", "gemm_ex",
    "symm", "hemm", "syrk", "herk", "syr2k", "her2k",
    "trmm", "trsm", "geam", "dgmm",
    "GEMM", "BATCHED_GEMM", "GEMM_EX", "SYRK", "SYR2K", "TRSM", "GEAM", "DGMM",
]
