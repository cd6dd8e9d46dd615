"""trnsolver: cuSOLVER for AWS Trainium -- dense factorizations, eigensolvers and Krylov methods.

Every operation validates its arguments and dispatches one
:class:`trnsci.dispatch.Op` (``EIGH``, ``CHOLESKY``, ``LU_FACTOR``, ``QR``,
``SVD``, ``CG``, ...) to its torch lowering or to its NKI lowering
(the package :mod:`trnsolver._nki`, one module per family): trnsolver's own
kernels (:mod:`trnsolver.kernels`) composed with trnblas's GEMM/SYRK/TRSM
kernels. bfloat16/float16 inputs are computed in float32 and returned in
their dtype: each public routine is declared ``@precision.computes_in("float32")``
in its family module (:mod:`trnsci.precision`).
"""

from trnsci.backend import bind as _bind
from trnsci.dispatch import load_lowerings as _load_lowerings
from trnsci.libinfo import library_version as _library_version

__version__ = _library_version("trnsolver")
set_backend, get_backend, use_backend = _bind("trnsolver")

from trnsci.iterative import ConvergenceError, ConvergenceWarning, SolverInfo  # noqa: E402
from trnsci.linalg import LinAlgError  # noqa: E402
from trnsci.nki import HAS_NKI  # noqa: E402  published name: True when the Neuron SDK's NKI is importable
from trnsolver.eigen import EIGH, SCHUR, eigh, eigh_generalized, eigvalsh, schur  # noqa: E402, F401
from trnsolver.factor import (  # noqa: E402, F401
    CHOLESKY,
    INV_SQRT_SPD_NS,
    cho_factor,
    cho_solve,
    cholesky,
    det,
    inv,
    inv_spd,
    inv_sqrt_spd,
    inv_sqrt_spd_ns,
    lstsq,
    lu,
    lu_factor,
    lu_solve,
    pinv,
    qr,
    slogdet,
    solve,
    solve_spd,
    svd,
)
from trnsolver.iterative import (  # noqa: E402
    bicgstab,
    block_jacobi_preconditioner,
    cg,
    gmres,
    jacobi_preconditioner,
    minres,
    ssor_preconditioner,
)
from trnsolver.plan import plan  # noqa: E402

__all__ = [
    "__version__", "set_backend", "get_backend", "use_backend", "HAS_NKI",
    # eigen
    "eigh", "eigvalsh", "eigh_generalized", "schur",
    # factorizations and solves
    "cholesky", "cho_factor", "cho_solve", "lu", "lu_factor", "lu_solve", "qr", "svd",
    "pinv", "solve", "solve_spd", "lstsq", "inv", "inv_spd", "det", "slogdet",
    "inv_sqrt_spd", "inv_sqrt_spd_ns",
    # Krylov
    "cg", "gmres", "bicgstab", "minres",
    "jacobi_preconditioner", "block_jacobi_preconditioner", "ssor_preconditioner",
    # results and errors
    "LinAlgError", "ConvergenceError", "ConvergenceWarning", "SolverInfo",
    # planning
    "plan",
]

# The NKI lowerings live in the package trnsolver._nki (one module per family) and register on the Ops above;
# imported last (a broken kernel module warns and leaves the torch path running).
_load_lowerings("trnsolver")
