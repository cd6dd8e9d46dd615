"""Every NKI lowering of trntensor, in one place.

Registered as the ``"nki"`` lowering (which also serves ``"simulator"``) of
an :class:`~trnsci.dispatch.Op` declared next to its public function, with
the torch lowering's signature, and declaring what its kernel takes
(``dtypes``, ``supports`` -- the SBUF plan -- and ``counts``, the closed
forms plans show).

Contraction steps of :func:`trntensor.einsum` have no lowering here: the
GEMM-shaped ones call :func:`trnblas.gemm` / :func:`trnblas.batched_gemm`,
whose Ops pick trnblas's kernels (:attr:`trntensor.ContractionStep.plan`).

Host-side work of the AO->MO lowering: ``eri3`` is passed as its
``[nao, nao*naux]`` view (a copy only if it is not contiguous),
``C_occ``/``C_vir`` as they are (made contiguous), and the kernel's
``[nvir, naux*nocc]`` result is permuted to ``[nocc, nvir, naux]``.
"""

from __future__ import annotations

import torch

from trnsci import nki
from trnsci import runtime as _runtime

from . import _nki_ops  # noqa: F401 -- permute/elementwise/reduce lowerings register on import
from .chem import AO_TO_MO
from .kernels.ao_to_mo import ao_to_mo_counts, ao_to_mo_kernel, chunking

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


# ------------------------------------------------------------------ einsum: the device path as the Op's NKI lowering
# One decision for the whole call: under "simulator"/"nki" the einsum Op runs its plan through the
# device path (trntensor._device: transpose, gather, reduce and elementwise kernels, trnblas's GEMM
# kernels), and its plan lists those launches -- what the call runs.

from . import _device  # noqa: E402
from .einsum import EINSUM, _stochastic_round  # noqa: E402


def _einsum_supports(plan, operands, alpha, beta, C, compute_dtype, result_dtype, precision, autotune=None):
    if precision not in ("fast", "sr"):
        return f"precision {precision!r}: the device path runs precisions 'fast' and 'sr'"
    if torch.is_grad_enabled() and any(x.requires_grad for x in operands):
        return "autograd: the einsum runs on torch, its GEMM steps through trnblas's differentiable operators"
    if _einsum_counts(plan, operands, alpha, beta, C, compute_dtype, result_dtype, precision) is None:
        return "no launch of the plan would run a kernel (dtype, sizes): every piece runs on torch"
    return None


def _einsum_counts(plan, operands, alpha, beta, C, compute_dtype, result_dtype, precision, autotune=None):
    """The launches of the device path, planned on meta tensors: their kernel names in order."""
    resident = _runtime.residency((*operands, *([] if C is None else [C])), {})
    launches = _device.annotate(plan, compute_dtype, alpha, beta if C is not None else 0, resident).launches
    names = []
    for _, p in launches:
        if p.backend == "torch" or p.kernel is None:
            continue
        names += p.kernel.get("kernels") or [p.kernel.get("name")]
    if not names:
        return None
    return {"kernel": names[0], "kernels": names}


@EINSUM.lowering("nki", supports=_einsum_supports, counts=_einsum_counts)
def _einsum_device(plan, operands, alpha, beta, C, compute_dtype, result_dtype, precision, autotune=None):
    ops = [x if x.dtype == compute_dtype else x.to(compute_dtype) for x in operands]
    R = _device.run(plan, ops, alpha, beta, C, compute_dtype)
    if R.dtype == result_dtype:
        return R
    return _stochastic_round(R, result_dtype) if precision == "sr" else R.to(result_dtype)
