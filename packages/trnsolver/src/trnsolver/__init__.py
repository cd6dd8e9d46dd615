"""trnsolver: cuSOLVER for AWS Trainium -- dense factorizations, eigensolvers and Krylov methods.

Every operation validates its arguments, asks :mod:`trnsci.dispatch` which
backend runs it, and calls either its torch lowering or its NKI kernel.
"""

from trnsci._libinfo import library_version as _library_version
from trnsci.backend import bind as _bind

__version__ = _library_version("trnsolver")
set_backend, get_backend, use_backend = _bind("trnsolver")

__all__ = ["__version__", "set_backend", "get_backend", "use_backend"]
