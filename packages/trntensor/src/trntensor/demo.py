"""trntensor's part of ``trnsci demo``: its NKI kernels at small, ragged shapes (:func:`kernel_cases`).

Run with ``trnsci demo --kernels-only``; every case goes through
trntensor's public functions, once on the torch path and once with backend
``"simulator"``: einsum's GEMM-shaped steps then run trnblas's GEMM /
batched-GEMM kernels, ``ao_to_mo_transform`` its own fused kernel, all on
the NumPy NKI emulator.
"""

from __future__ import annotations

import torch

from trnsci.demo import KernelCase

__all__ = ["kernel_cases"]


def kernel_cases() -> list[KernelCase]:
    """trntensor's demo kernels: einsum contractions routed to GEMM kernels and the fused AO->MO transform; float32.

    Shapes are small DF-MP2-like sizes, none a multiple of 128 or 512:
    nao = 45, nocc = 6, nvir = 31, naux = 70. Bounds are relative to
    ``max(1, max|torch result|)``; both paths accumulate in float32. Every
    output is one fp32 sum of at most 70 products (``iaP,jbP``) or two
    nested sums of 45 (the AO->MO contractions, ``m`` then ``n``), whose
    rounding error grows like ``sqrt(k) u`` of the output scale, ~1e-7.
    einsum's two paths run the same planned pairwise steps (torch.mm vs
    the GEMM kernels); the fused kernel sums its tiles in its own order.
    1e-5 leaves a 10-100x margin over that and is still far below the O(1)
    error of a wrong index, tile or transpose.

    Examples
    --------
    >>> from trnsci.demo import run_kernel_case
    >>> from trntensor.demo import kernel_cases
    >>> case = kernel_cases()[3]
    >>> case.name
    'ao_to_mo fused'
    >>> r = run_kernel_case(case)
    >>> r["ok"], r["kernels"]
    (True, ['ao_to_mo_kernel'])
    """
    import trntensor

    g = torch.Generator().manual_seed(13)

    def rnd(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, dtype=torch.float32)

    nao, nocc, nvir, naux = 45, 6, 31, 70
    eri3 = rnd(nao, nao, naux)
    eri3 = 0.5 * (eri3 + eri3.transpose(0, 1))  # (mn|P) is symmetric in m, n
    Co, Cv = rnd(nao, nocc, scale=0.2), rnd(nao, nvir, scale=0.2)
    B = rnd(nocc, nvir, naux, scale=0.1)
    Xb, Yb = rnd(3, 50, 70), rnd(3, 70, 30)
    return [
        KernelCase("trntensor", "einsum df", "iaP,jbP->iajb 6x31x70 fp32",
                   lambda: trntensor.einsum("iaP,jbP->iajb", B, B), 1e-5, ("gemm_kernel",)),
        KernelCase("trntensor", "einsum bmm", "bij,bjk->bik 3x50x70 @ 3x70x30 fp32",
                   lambda: trntensor.einsum("bij,bjk->bik", Xb, Yb), 1e-5, ("batched_gemm_kernel",)),
        KernelCase("trntensor", "einsum ao->mo", "mi,mnP,na->iaP 45x6, 45x45x70, 45x31 fp32",
                   lambda: trntensor.einsum("mi,mnP,na->iaP", Co, eri3, Cv), 1e-5, ("gemm_kernel",)),
        KernelCase("trntensor", "ao_to_mo fused", "45x45x70, 45x6, 45x31 -> 6x31x70 fp32",
                   lambda: trntensor.ao_to_mo_transform(eri3, Co, Cv), 1e-5, ("ao_to_mo_kernel",)),
        KernelCase("trntensor", "permute", "45x45x70 (2, 0, 1) fp32",
                   lambda: trntensor.permute(eri3, (2, 0, 1)), 0.0, ("transpose_kernel",)),
        KernelCase("trntensor", "reduce", "max of 45x45x70 over axes (0, 2) fp32",
                   lambda: trntensor.reduce(eri3, (0, 2), op="max"), 0.0, ("transpose_kernel", "reduce_kernel")),
        KernelCase("trntensor", "einsum trace", "mmP,na->Pna 45x45x70, 45x31 fp32: diagonal, sum, outer product",
                   lambda: trntensor.einsum("mmP,na->Pna", eri3, Cv), 1e-5, ("gather_kernel", "reduce_kernel")),
    ]
