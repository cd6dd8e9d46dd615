"""trntensor: cuTENSOR for AWS Trainium -- einsum with contraction planning and tensor decompositions.

Every operation validates its arguments, asks :mod:`trnsci.dispatch` which
backend runs it, and calls either its torch lowering or its NKI kernel.
"""

from trnsci._libinfo import library_version as _library_version
from trnsci.backend import bind as _bind

__version__ = _library_version("trntensor")
set_backend, get_backend, use_backend = _bind("trntensor")

__all__ = ["__version__", "set_backend", "get_backend", "use_backend"]
