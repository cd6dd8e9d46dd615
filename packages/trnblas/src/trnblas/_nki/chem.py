"""NKI lowering of trnblas's DF-MP2 pair energies (:mod:`trnblas.chem`): the fused kernel
:mod:`trnblas.kernels.mp2_energy`, which reads the DF factors once and writes the lower triangle of the
pair energies.
"""

from __future__ import annotations

import torch

from trnblas._nki.level3 import KERNEL_DTYPES
from trnblas.chem import MP2_ENERGY, result_dtype
from trnblas.kernels.mp2_energy import mp2_energy_counts, mp2_energy_kernel, occ_block
from trnsci import nki


def _mp2_supports(B, eps_occ, eps_vir, max_memory):
    """None when the fused kernel's SBUF plan holds this problem, else why not."""
    nocc, nvir, naux = B.shape
    try:
        occ_block(nocc, nvir, naux, B.element_size())
    except ValueError as exc:
        return str(exc)
    return None


def _mp2_counts(B, eps_occ, eps_vir, max_memory):
    nocc, nvir, naux = B.shape
    return {"kernel": "mp2_energy_kernel", **mp2_energy_counts(nocc, nvir, naux, B.element_size())}


@MP2_ENERGY.lowering("nki", dtypes=KERNEL_DTYPES, supports=_mp2_supports, counts=_mp2_counts)
def _mp2_pairs_nki(B, eps_occ, eps_vir, max_memory):
    nocc, nvir, naux = B.shape
    # The kernel contracts over naux on the partition dim: it reads B as
    # L[Q, i*nvir + a] (one host pass over B; PySCF's own DF tensors are
    # already in this (naux, nocc*nvir) layout).
    L = B.permute(2, 0, 1).reshape(naux, nocc * nvir).contiguous()
    eo = eps_occ.to(torch.float32).reshape(1, nocc).contiguous()
    ev = eps_vir.to(torch.float32).reshape(1, nvir).contiguous()
    raw = nki.run(mp2_energy_kernel, L, eo, ev, nocc=nocc, out_dtype=torch.float32)
    # The kernel writes the lower triangle (j <= i); e_ji = e_ij.
    low = torch.tril(raw.to(torch.float32))
    return (low + torch.tril(low, -1).T).to(result_dtype(B.dtype))
