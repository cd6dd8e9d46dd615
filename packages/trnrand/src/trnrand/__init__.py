"""trnrand: cuRAND for AWS Trainium -- counter-based random numbers (Philox4x32-10) and quasi-random sequences.

Every operation validates its arguments, asks :mod:`trnsci.dispatch` which
backend runs it, and calls either its torch lowering or its NKI kernel.
"""

from trnsci._libinfo import library_version as _library_version
from trnsci.backend import bind as _bind

__version__ = _library_version("trnrand")
set_backend, get_backend, use_backend = _bind("trnrand")

__all__ = ["__version__", "set_backend", "get_backend", "use_backend"]
