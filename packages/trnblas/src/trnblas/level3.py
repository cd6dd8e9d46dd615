"""BLAS level 3: matrix-matrix operations (cuBLAS ``cublas<t>gemm`` and friends), by family.

* :mod:`trnblas.level3_gemm` -- gemm, batched_gemm, strided_batched_gemm, gemm_ex,
  geam, dgmm; ops ``GEMM``, ``BATCHED_GEMM``, ``GEMM_EX``,
  ``GEMM_FP64``
* :mod:`trnblas.level3_symmetric` -- symm, hemm, syrk, herk, syr2k, her2k; op ``SYRK``
* :mod:`trnblas.level3_triangular` -- trmm, trsm; op ``TRSM``

Each public function validates its arguments, puts them in canonical form
(one-letter option codes ``"N"/"T"/"C"``, ``"U"/"L"``, ``"L"/"R"``,
``"U"/"N"``; Python scalars; ``C=None`` whenever ``beta == 0`` so that no
lowering can read it) and calls an :class:`trnsci.dispatch.Op` declared in
its module next to the op's torch lowering; their NKI lowerings are in
:mod:`trnblas._nki.level3`.
This module gathers the family modules' names.

Low precision: every level-3 routine accepts bfloat16 and float16. The
torch path computes in float32 and rounds the result once to the input
dtype; the kernels read bf16 operands as they are (Tensor Engine, fp32
PSUM), fp16 GEMM-family calls run on the torch path, and TRSM converts to
float32 on the host. Error bound per result entry, against the exact
result on the (already rounded) inputs: one rounding to the output dtype
(2^-8 relative for bf16, 2^-11 for fp16) plus ``(k + 2) 2^-24 * sum_l
|a_il b_lj|`` for a contraction of depth ``k`` (fp32 accumulation); TRSM
adds the usual backward-error term of a triangular solve.
"""

from trnblas.level3_gemm import (  # noqa: F401
    BATCHED_GEMM,
    DGMM,
    GEAM,
    GEMM,
    GEMM_EX,
    GEMM_FP64,
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
    "GEMM", "BATCHED_GEMM", "GEMM_EX", "GEMM_FP64", "SYRK", "SYR2K", "TRSM", "GEAM", "DGMM",
]
