"""NKI lowering of :mod:`trntensor.chem`'s fused AO->MO transform (:mod:`trntensor.kernels.ao_to_mo`).

Host-side work of the AO->MO lowering: ``eri3`` is passed as its
``[nao, nao*naux]`` view (a copy only if it is not contiguous),
``C_occ``/``C_vir`` as they are (made contiguous), and the kernel's
``[nvir, naux*nocc]`` result is permuted to ``[nocc, nvir, naux]``.
"""

from __future__ import annotations

import torch

from trnsci import nki

from ..chem import AO_TO_MO
from ..kernels.ao_to_mo import ao_to_mo_counts, ao_to_mo_kernel, chunking

F32 = torch.float32


def _dims(eri3, C_occ, C_vir):
    return eri3.shape[0], C_occ.shape[1], C_vir.shape[1], eri3.shape[2]


def _ao_to_mo_supports(eri3, C_occ, C_vir):
    if chunking(*_dims(eri3, C_occ, C_vir)) is None:
        return f"nao={eri3.shape[0]}: not even one column of the intermediate fits the SBUF budget"
    return None


def _ao_to_mo_counts(eri3, C_occ, C_vir):
    return {"kernel": "ao_to_mo_kernel", **ao_to_mo_counts(*_dims(eri3, C_occ, C_vir))}


@AO_TO_MO.lowering("nki", dtypes=(F32,), supports=_ao_to_mo_supports, counts=_ao_to_mo_counts)
def _ao_to_mo_nki(eri3, C_occ, C_vir):
    nao, nocc, nvir, naux = _dims(eri3, C_occ, C_vir)
    out = nki.run(ao_to_mo_kernel, eri3.reshape(nao, nao * naux).contiguous(), C_occ.contiguous(),
                  C_vir.contiguous(), out_dtype=F32)
    return out.reshape(nvir, naux, nocc).permute(2, 0, 1).contiguous()
