"""trntensor's NKI lowerings, one module per public family; importing this package registers them all.

:mod:`.einsum` (the device path of a whole contraction plan), :mod:`.chem`
(the fused AO->MO transform) and :mod:`.tensorops` (permute, elementwise,
reduce) hold the ``"nki"`` lowerings (which also serve ``"simulator"``) of
the Ops of :mod:`trntensor.einsum`, :mod:`trntensor.chem` and
:mod:`trntensor.tensorops`, each declaring what its kernels take
(``dtypes``, ``supports`` -- the SBUF plan -- and ``counts``, the closed
forms plans show). The GEMM-shaped contraction steps call
:func:`trnblas.gemm` / :func:`trnblas.batched_gemm`, whose Ops pick
trnblas's kernels (:attr:`trntensor.ContractionStep.plan`). :mod:`.einsum_device` runs
a plan's data movements through the Ops with kernels (einsum's device path).
``trntensor/__init__.py`` imports
this package last, through :func:`trnsci.dispatch.load_lowerings`.
"""

from trntensor._nki import chem, einsum, einsum_device, tensorops  # noqa: F401  (families register on import)
