"""trnrand's NKI lowerings, one module per public family; importing this package registers them all.

:mod:`.distributions` (the stream's distributions, and :func:`.distributions.stream`),
:mod:`.quasi` (Sobol, Halton, Latin hypercube), :mod:`.philox` and
:mod:`.threefry` (the counter-based block functions and the Threefry stream)
hold the ``"nki"`` lowerings (which also serve ``"simulator"``) of the Ops of
the public modules of the same names. ``trnrand/__init__.py`` imports this
package last, through :func:`trnsci.dispatch.load_lowerings`.
"""

from trnrand._nki import distributions, philox, quasi, threefry  # noqa: F401  (each registers its lowerings on import)
