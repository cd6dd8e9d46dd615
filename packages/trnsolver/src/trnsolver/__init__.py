"""trnsolver: cuSOLVER for AWS Trainium -- dense factorizations, eigensolvers and Krylov methods.

Every operation validates its arguments and calls one private torch
implementation (``_<op>_torch``); ``eigh``/``eigvalsh``/``eigh_generalized``,
``cholesky``/``cho_factor`` and ``inv_sqrt_spd_ns`` go through
:class:`trnsci.dispatch.Op` objects (``EIGH``, ``CHOLESKY``,
``INV_SQRT_SPD_NS``) whose NKI lowerings (:mod:`trnsolver._nki`) run the
parallel Jacobi kernel and trnblas's GEMM/SYRK/TRSM kernels.
"""

from trnsci._libinfo import library_version as _library_version
from trnsci.backend import bind as _bind

__version__ = _library_version("trnsolver")
set_backend, get_backend, use_backend = _bind("trnsolver")

from trnsci._iterative import ConvergenceError, ConvergenceWarning, SolverInfo  # noqa: E402
from trnsci._linalg import LinAlgError  # noqa: E402
from trnsolver.eigen import EIGH, eigh, eigh_generalized, eigvalsh  # noqa: E402, F401
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

__all__ = [
    "__version__", "set_backend", "get_backend", "use_backend",
    # eigen
    "eigh", "eigvalsh", "eigh_generalized",
    # factorizations and solves
    "cholesky", "cho_factor", "cho_solve", "lu", "lu_factor", "lu_solve", "qr", "svd",
    "pinv", "solve", "solve_spd", "lstsq", "inv", "inv_spd", "det", "slogdet",
    "inv_sqrt_spd", "inv_sqrt_spd_ns",
    # Krylov
    "cg", "gmres", "bicgstab", "minres",
    "jacobi_preconditioner", "block_jacobi_preconditioner", "ssor_preconditioner",
    # results and errors
    "LinAlgError", "ConvergenceError", "ConvergenceWarning", "SolverInfo",
]

# Every NKI lowering lives in trnsolver._nki and registers itself on the Ops
# declared next to the public functions; imported last. A broken kernel
# module must not take the torch path down: it warns (or raises under
# TRNSCI_REQUIRE_NKI=1) and every operation runs on torch.
try:
    from trnsolver import _nki  # noqa: E402, F401
except Exception as _exc:
    from trnsci.dispatch import NkiRequiredError as _Required
    from trnsci.dispatch import require_nki as _require

    if _require():
        raise _Required(f"trnsolver: NKI lowerings failed to import: {_exc}") from _exc
    import warnings as _warnings

    _warnings.warn(f"trnsolver: NKI lowerings not registered ({type(_exc).__name__}: {_exc}); "
                   "every operation runs on torch", RuntimeWarning, stacklevel=2)
