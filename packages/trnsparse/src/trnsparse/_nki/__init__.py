"""trnsparse's NKI lowerings, one module per public family; importing this package registers them all.

:mod:`.ops` (SpMV, SpMM, SDDMM, triangular solves, the device SpMV seam)
and :mod:`.ops_spgemm` (SpGEMM, sparse add) hold the ``"nki"`` lowerings (which
also serve ``"simulator"``) of the Ops of :mod:`trnsparse.ops`;
:mod:`.attention` and :mod:`.screening` those of :mod:`trnsparse.attention`
and :mod:`trnsparse.screening`. ``trnsparse/__init__.py`` imports this
package last, through :func:`trnsci.dispatch.load_lowerings`.
"""

from trnsparse._nki import attention, ops, ops_spgemm, screening  # noqa: F401  (each registers its lowerings on import)
