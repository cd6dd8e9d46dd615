"""trnblas: cuBLAS for AWS Trainium -- BLAS levels 1-3, batched GEMM and a fused DF-MP2 energy kernel.

Every operation validates its arguments, asks :mod:`trnsci.dispatch` which
backend runs it, and calls either its torch lowering or its NKI kernel.
:func:`plan_gemm` (and :func:`plan`) say which one a call would use, and why.
"""

from trnsci.backend import bind as _bind
from trnsci.dispatch import load_lowerings as _load_lowerings
from trnsci.libinfo import library_version as _library_version

__version__ = _library_version("trnblas")
set_backend, get_backend, use_backend = _bind("trnblas")

from trnblas.level1 import (  # noqa: E402
    asum,
    axpy,
    copy,
    dot,
    dotc,
    dotu,
    iamax,
    iamin,
    nrm2,
    rot,
    rotg,
    scal,
    swap,
)
from trnblas.level2 import (  # noqa: E402
    gemv,
    ger,
    gerc,
    geru,
    hemv,
    her,
    her2,
    symv,
    syr,
    syr2,
    trmv,
    trsv,
)
from trnblas.level3 import (  # noqa: E402
    batched_gemm,
    dgmm,
    geam,
    gemm,
    gemm_ex,
    hemm,
    her2k,
    herk,
    strided_batched_gemm,
    symm,
    syr2k,
    syrk,
    trmm,
    trsm,
)
from trnblas.plan import BlasPlan, plan, plan_batched_gemm, plan_gemm, plan_syrk, plan_trsm  # noqa: E402
from trnsci.nki import HAS_NKI  # noqa: E402  published name: True when the Neuron SDK's NKI is importable

__all__ = [
    "__version__", "set_backend", "get_backend", "use_backend", "HAS_NKI",
    # level 1
    "axpy", "dot", "dotu", "dotc", "nrm2", "asum", "scal", "iamax", "iamin",
    "rot", "rotg", "swap", "copy",
    # level 2
    "gemv", "symv", "hemv", "ger", "geru", "gerc", "syr", "syr2", "her", "her2", "trmv", "trsv",
    # level 3
    "gemm", "batched_gemm", "strided_batched_gemm", "gemm_ex", "symm", "hemm",
    "syrk", "herk", "syr2k", "her2k", "trmm", "trsm", "geam", "dgmm",
    # planning
    "BlasPlan", "plan", "plan_gemm", "plan_batched_gemm", "plan_syrk", "plan_trsm",
]

from trnblas.chem import df_factors, dfmp2, mp2_energy, mp2_pair_energies  # noqa: E402

__all__ += ["mp2_energy", "mp2_pair_energies", "df_factors", "dfmp2"]

# The NKI lowerings live in the package trnblas._nki (one module per family) and register on the Ops above;
# imported last (a broken kernel module warns and leaves the torch path running).
_load_lowerings("trnblas")
