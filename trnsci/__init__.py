"""trnsci: the scientific-computing suite for AWS Trainium.

This package is the core the six libraries share -- backend selection
(:mod:`trnsci.backend`), dispatch thresholds and operations
(:mod:`trnsci.dispatch`), the kernel layer (:mod:`trnsci.nki`) and argument
checks -- and the ``trnsci`` command. The libraries are separate packages:
``trnblas``, ``trnfft``, ``trnsparse``, ``trnsolver``, ``trnrand``,
``trntensor``.
"""

from trnsci._version import __version__
from trnsci.backend import LIBRARIES, get_backend, reset_backend, set_backend, use_backend
from trnsci.dispatch import Decision, NkiFallbackWarning, NkiRequiredError, Op, Plan, decide, plan_call

__all__ = [
    "__version__", "LIBRARIES", "set_backend", "get_backend", "use_backend", "reset_backend",
    "decide", "Decision", "NkiFallbackWarning", "NkiRequiredError", "Op", "Plan", "plan_call",
]
