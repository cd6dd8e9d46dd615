"""trnsparse: cuSPARSE for AWS Trainium -- sparse formats (COO/CSR/CSC/BSR), sparse products,
triangular solves, preconditioners, BSR iterative solvers, integral screening and
block-sparse attention.

Every operation validates its arguments and calls its torch lowering (the
NKI kernels and dispatch through :mod:`trnsci.dispatch` come next).
"""

from trnsci.backend import bind as _bind
from trnsci.dispatch import load_lowerings as _load_lowerings
from trnsci.libinfo import library_version as _library_version

from .attention import block_sparse_attention, block_sparse_attention_tiled, causal_mask, local_window_mask
from .formats import (
    BSRMatrix,
    COOMatrix,
    CSCMatrix,
    CSRMatrix,
    SparseMatrix,
    eye_sparse,
    from_dense,
    from_scipy,
    from_torch,
    random_sparse,
)
from .iterative import (
    bsr_diagonal,
    cg_bsr,
    chebyshev_bsr,
    chebyshev_coeffs,
    jacobi_preconditioner_bsr,
    power_iteration_bsr,
    richardson_bsr,
)
from .ops import (
    bsr_spgemm,
    bsr_spmm,
    nnz_per_row,
    sddmm,
    sparse_add,
    sparse_scale,
    sparse_transpose,
    spgemm,
    spmm,
    spmv,
    spmv_symmetric,
    spsm,
    spsv,
)
from .plan import plan
from .precond import Preconditioner, ic0, ilu0, jacobi
from .screening import density_screen, schwarz_bounds, screen_quartets, screened_spmm, sparsity_stats

__version__ = _library_version("trnsparse")
set_backend, get_backend, use_backend = _bind("trnsparse")
from trnsci.nki import HAS_NKI  # noqa: E402  published name: True when the Neuron SDK's NKI is importable

__all__ = [
    "__version__", "set_backend", "get_backend", "use_backend", "HAS_NKI",
    # formats
    "SparseMatrix", "COOMatrix", "CSRMatrix", "CSCMatrix", "BSRMatrix",
    "from_dense", "from_scipy", "from_torch", "eye_sparse", "random_sparse",
    # ops
    "spmv", "spmm", "spgemm", "bsr_spgemm", "sddmm", "spsv", "spsm", "spmv_symmetric", "bsr_spmm",
    "sparse_add", "sparse_scale", "sparse_transpose", "nnz_per_row",
    # preconditioners
    "Preconditioner", "ilu0", "ic0", "jacobi",
    # iterative solvers on BSR
    "cg_bsr", "chebyshev_bsr", "chebyshev_coeffs", "richardson_bsr", "power_iteration_bsr",
    "jacobi_preconditioner_bsr", "bsr_diagonal",
    # quantum chemistry
    "schwarz_bounds", "screen_quartets", "density_screen", "sparsity_stats", "screened_spmm",
    # attention
    "block_sparse_attention", "block_sparse_attention_tiled", "local_window_mask", "causal_mask",
    # planning
    "plan",
]

# The NKI lowerings live in the package trnsparse._nki (one module per family) and register on the Ops above;
# imported last (a broken kernel module warns and leaves the torch path running).
_load_lowerings("trnsparse")
