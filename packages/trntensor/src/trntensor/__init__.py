"""trntensor: cuTENSOR for AWS Trainium -- einsum with contraction planning and tensor decompositions.

Every operation validates its arguments, asks :mod:`trnsci.dispatch` which
backend runs it, and calls its torch lowering or its NKI kernel (the fused
AO->MO transform); GEMM-shaped contraction steps go through trnblas's public
API and so reach trnblas's kernels. :func:`plan_contraction` (per step) and
:func:`plan` say what would run, and why.
"""

from trnsci.backend import bind as _bind
from trnsci.dispatch import load_lowerings as _load_lowerings
from trnsci.libinfo import library_version as _library_version

from ._host import get_autotune, set_autotune
from ._plan_cache import clear_plan_cache, plan_cache_info
from .chem import ao_to_mo_transform, mp2_energy
from .decompose import cp_decompose, cp_reconstruct, tt_decompose, tt_reconstruct, tucker_decompose, tucker_reconstruct
from .einsum import einsum, multi_einsum, tensordot
from .plan import ContractionPlan, ContractionStep, contract_path, estimate_flops, plan_contraction
from .residency import HAS_NKI, from_xla, to_xla
from .tensorops import elementwise, permute, reduce

__version__ = _library_version("trntensor")
set_backend, get_backend, use_backend = _bind("trntensor")

__all__ = [
    "__version__", "set_backend", "get_backend", "use_backend", "HAS_NKI",
    "einsum", "multi_einsum", "tensordot",
    "ContractionPlan", "ContractionStep", "plan_contraction", "contract_path", "estimate_flops",
    "clear_plan_cache", "plan_cache_info", "set_autotune", "get_autotune",
    "cp_decompose", "cp_reconstruct", "tucker_decompose", "tucker_reconstruct", "tt_decompose", "tt_reconstruct",
    "ao_to_mo_transform", "mp2_energy", "to_xla", "from_xla",
    "permute", "elementwise", "reduce",
]

# The NKI lowerings live in the package trntensor._nki (one module per family) and register on the Ops above;
# imported last (a broken kernel module warns and leaves the torch path running).
_load_lowerings("trntensor")
