"""The suite's version: the one place it is written.

All seven distributions (``trnsci`` and the six libraries) are released in
lockstep with this version; ``build_support/hatch_suite.py`` reads it when a
wheel is built and pins the libraries to it.
"""

__version__ = "0.1.0"
