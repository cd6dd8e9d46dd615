"""trnblas's NKI lowerings, one module per public family; importing this package registers them all.

:mod:`.level1`, :mod:`.level2`, :mod:`.level3` and :mod:`.chem` hold the
``"nki"`` lowerings (which also serve ``"simulator"``) of the Ops declared
in :mod:`trnblas.level1`, :mod:`trnblas.level2`, :mod:`trnblas.level3` (its
``level3_*`` modules) and :mod:`trnblas.chem`: each declares what its kernel
takes (``dtypes=``, ``supports=``, ``counts=``), lays the operands out as
the kernel reads them, runs it through :func:`trnsci.nki.run` and finishes
on the host. ``trnblas/__init__.py`` imports this package last, through
:func:`trnsci.dispatch.load_lowerings`.
"""

from trnblas._nki import chem, level1, level2, level3  # noqa: F401  (each registers its lowerings on import)
