"""trnsci: the scientific-computing suite for AWS Trainium.

The ``trnsci`` import package is shipped by two distributions on two floors:

* ``trnsci-core`` (floor 1, this file): what the six libraries share --
  backend selection (:mod:`trnsci.backend`), dispatch thresholds and
  operations (:mod:`trnsci.dispatch`), the kernel layer (:mod:`trnsci.nki`),
  argument checks, the distributed helpers and the ``trnsci`` command. It
  imports no library.
* ``trnsci`` (floor 3, the umbrella): pins the core and all six libraries and
  adds the cross-library workflows (:mod:`trnsci.chem`, the DF-MP2 demo) as
  modules of this same package.

The libraries (``trnblas``, ``trnfft``, ``trnsparse``, ``trnsolver``,
``trnrand``, ``trntensor``) are separate distributions on floor 2. What the
core needs from a floor above (demo and bench cases, workflows) it finds
through entry points (:mod:`trnsci.plugins`), never by import.
"""

# The umbrella's modules may live in another directory of sys.path (an
# editable install, a source checkout): let them join this package.
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from trnsci._version import __version__
from trnsci.backend import LIBRARIES, get_backend, reset_backend, set_backend, use_backend
from trnsci.dispatch import Decision, NkiFallbackWarning, NkiRequiredError, Op, Plan, decide, plan_call

__all__ = [
    "__version__", "LIBRARIES", "set_backend", "get_backend", "use_backend", "reset_backend",
    "decide", "Decision", "NkiFallbackWarning", "NkiRequiredError", "Op", "Plan", "plan_call",
]
