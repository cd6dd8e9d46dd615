"""trnblas's NKI lowerings, one module per public family; importing this package registers them all.

:mod:`.level1`, :mod:`.level2`, :mod:`.level3` and :mod:`.chem` hold the
``"nki"`` lowerings (which also serve ``"simulator"``) of the Ops declared
in :mod:`trnblas.level1`, :mod:`trnblas.level2`, :mod:`trnblas.level3` (its
``level3_*`` modules) and :mod:`trnblas.chem`: each declares what its kernel
takes (``dtypes=``, ``supports=``, ``counts=``), lays the operands out as
the kernel reads them, runs it through :func:`trnsci.nki.run` and finishes
on the host. :mod:`.level3_ozaki` is the host half of level 3's float64
GEMM (the Ozaki slicing, its plan and error bound), used only here.
``trnblas/__init__.py`` imports this package last, through
:func:`trnsci.dispatch.load_lowerings`.
"""

from trnblas._nki import chem, level1, level2, level3, level3_ozaki  # noqa: F401  (the families register their lowerings on import)
