"""trnsparse's NKI lowerings, one module per public family; importing this package registers them all.

:mod:`.ops` (SpMV, SpMM, SDDMM, triangular solves, the device SpMV seam)
and :mod:`.ops_spgemm` (SpGEMM, sparse add) hold the ``"nki"`` lowerings (which
also serve ``"simulator"``) of the Ops of :mod:`trnsparse.ops`;
:mod:`.attention` and :mod:`.screening` those of :mod:`trnsparse.attention`
and :mod:`trnsparse.screening`. ``trnsparse/__init__.py`` imports this
package last, through :func:`trnsci.dispatch.load_lowerings`. :mod:`.ops_tri` builds the triangular
solve's blocks for :mod:`.ops` (used only here); the layouts the kernels read and the symbolic phases
of SpGEMM and sparse add, which the torch lowerings share, are the public :mod:`trnsparse.layouts` and
:mod:`trnsparse.symbolic`.
"""

from trnsparse._nki import attention, ops, ops_spgemm, ops_tri, screening  # noqa: F401  (families register on import)
