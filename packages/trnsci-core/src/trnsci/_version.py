"""The suite's version.

All eight distributions (``trnsci-core``, the six libraries and the
``trnsci`` umbrella) are released in lockstep with this version and pin each
other to it exactly; their ``pyproject.toml`` files write it out and
``tests/test_packaging.py`` checks that they agree with this file. The
local label ``+trnsci`` keeps the pins from resolving to other projects'
distributions of the same names on a package index (docs/packaging.md).
"""

__version__ = "2026.11.0+trnsci"
