"""trnblas: cuBLAS for AWS Trainium -- BLAS levels 1-3, batched GEMM and a fused DF-MP2 energy kernel.

Every operation validates its arguments, asks :mod:`trnsci.dispatch` which
backend runs it, and calls either its torch lowering or its NKI kernel.
"""

from trnsci._libinfo import library_version as _library_version
from trnsci.backend import bind as _bind

__version__ = _library_version("trnblas")
set_backend, get_backend, use_backend = _bind("trnblas")

__all__ = ["__version__", "set_backend", "get_backend", "use_backend"]
