"""Quantum-chemistry contractions: the AO->MO transform of DF integrals and DF-MP2."""

from __future__ import annotations

import torch

import trnblas
from trnsci import validate
from trnsci.dispatch import Op

__all__ = ["ao_to_mo_transform", "mp2_energy", "AO_TO_MO"]

_DTYPES = (torch.float32, torch.float64)


def _ao_to_mo_flops(eri3, C_occ, C_vir):
    nao, naux = eri3.shape[0], eri3.shape[2]
    nocc, nvir = C_occ.shape[1], C_vir.shape[1]
    return 2 * nocc * nao * nao * naux + 2 * nocc * nvir * nao * naux


def _ao_to_mo_describe(eri3, C_occ, C_vir):
    return (f"eri3 {tuple(eri3.shape)}, C_occ {tuple(C_occ.shape)}, C_vir {tuple(C_vir.shape)} "
            f"-> B ({C_occ.shape[1]}, {C_vir.shape[1]}, {eri3.shape[2]})")


# Threshold: the fused kernel replaces two trnblas GEMMs (and their HBM round trip of the intermediate),
# so it takes over at trnblas.batched_gemm's default size, 2*256^3 flops. Uncalibrated: no hardware here.
AO_TO_MO = Op(
    "trntensor.ao_to_mo_transform", "flops", 2 * 256**3, size=_ao_to_mo_flops, describe=_ao_to_mo_describe,
    doc="B[i,a,P] = sum_mn C_occ[m,i] eri3[m,n,P] C_vir[n,a]; flops = 2 nocc nao^2 naux + 2 nocc nvir nao naux",
    schema="(Tensor eri3, Tensor C_occ, Tensor C_vir) -> Tensor",
    fake=lambda eri3, C_occ, C_vir: eri3.new_empty((C_occ.shape[1], C_vir.shape[1], eri3.shape[2])),
)


@AO_TO_MO.lowering("torch")
def _ao_to_mo_torch(eri3, C_occ, C_vir):
    """``B[i,a,P] = sum_{mn} C_occ[m,i] eri3[m,n,P] C_vir[n,a]`` as two GEMMs.

    First ``X[i, n*P] = C_occ^T @ eri3[m, n*P]`` (one GEMM, K = nao), then
    ``B[i, a, P] = C_vir^T @ X[i][n, P]`` as one batched GEMM over ``i``.
    Cost ``2 nocc nao^2 naux + 2 nocc nvir nao naux`` flops.
    """
    nao, _, naux = eri3.shape
    nocc, nvir = C_occ.shape[1], C_vir.shape[1]
    X = trnblas.gemm(1.0, C_occ, eri3.reshape(nao, nao * naux), transA=True)  # (nocc, nao*naux)
    X = X.reshape(nocc, nao, naux)
    Cv = C_vir.mT.unsqueeze(0).expand(nocc, nvir, nao)
    return trnblas.batched_gemm(1.0, Cv, X)  # (nocc, nvir, naux)


@validate.numpy_io
def ao_to_mo_transform(eri3, C_occ, C_vir):
    """Transform three-index DF integrals from the AO to the MO basis.

    ``B[i, a, P] = sum_{m, n} C_occ[m, i] eri3[m, n, P] C_vir[n, a]``.

    Parameters
    ----------
    eri3 : tensor (nao, nao, naux)
        ``(mn|P)``, AO-pair by auxiliary function (e.g. PySCF's
        ``df.incore.aux_e2`` reshaped, or a Cholesky-whitened ``L``).
    C_occ : tensor (nao, nocc)
        Occupied MO coefficients (columns are orbitals).
    C_vir : tensor (nao, nvir)
        Virtual MO coefficients.

    Returns
    -------
    tensor (nocc, nvir, naux)
        Same dtype (float32 or float64) and device as the inputs.

    Raises
    ------
    TypeError
        Non-tensor arguments, dtypes other than float32/float64, or dtypes
        that differ.
    ValueError
        Wrong ranks, ``eri3`` not square in its AO dimensions, row counts of
        ``C_occ``/``C_vir`` not ``nao``, devices differ.

    Notes
    -----
    ``2 nocc nao^2 naux + 2 nocc nvir nao naux`` flops, the occupied side
    contracted first (the cheaper order, as ``nocc < nvir`` in practice).
    The torch path runs two GEMMs through trnblas; the NKI kernel
    (float32; :mod:`trntensor.kernels.ao_to_mo`) fuses them and keeps the
    ``nocc nao naux`` intermediate in SBUF, so it never reaches HBM.
    ``trnsci.dispatch.plan_call(trntensor.ao_to_mo_transform, eri3, C_occ,
    C_vir)`` says which runs, and why (with the kernel's closed-form HBM
    bytes and instruction counts when it would run).

    Examples
    --------
    >>> import torch, trntensor
    >>> eri3 = torch.randn(6, 6, 10, dtype=torch.float64)
    >>> B = trntensor.ao_to_mo_transform(eri3, torch.randn(6, 2, dtype=torch.float64),
    ...                                  torch.randn(6, 4, dtype=torch.float64))
    >>> B.shape
    torch.Size([2, 4, 10])
    """
    where = "ao_to_mo_transform"
    eri3 = validate.tensor(eri3, "eri3", where)
    C_occ = validate.tensor(C_occ, "C_occ", where)
    C_vir = validate.tensor(C_vir, "C_vir", where)
    for name, t in (("eri3", eri3), ("C_occ", C_occ), ("C_vir", C_vir)):
        validate.dtype(t, name, _DTYPES, where)
    validate.same_dtype(where, eri3=eri3, C_occ=C_occ, C_vir=C_vir)
    validate.same_device(where, eri3=eri3, C_occ=C_occ, C_vir=C_vir)
    validate.ndim(eri3, "eri3", 3, where)
    validate.ndim(C_occ, "C_occ", 2, where)
    validate.ndim(C_vir, "C_vir", 2, where)
    nao = eri3.shape[0]
    validate.shape(eri3, "eri3", (nao, nao, None), where)
    validate.shape(C_occ, "C_occ", (nao, None), where)
    validate.shape(C_vir, "C_vir", (nao, None), where)
    nocc, nvir, naux = C_occ.shape[1], C_vir.shape[1], eri3.shape[2]
    if 0 in (nao, nocc, nvir, naux):
        return eri3.new_zeros((nocc, nvir, naux))
    return AO_TO_MO(eri3, C_occ, C_vir)


def mp2_energy(B, eps_occ, eps_vir):
    """Closed-shell DF-MP2 correlation energy from ``B[i, a, P]``.

    ``E = sum_{ijab} (ia|jb) [2 (ia|jb) - (ib|ja)] / (e_i + e_j - e_a - e_b)``
    with ``(ia|jb) = sum_P B[i,a,P] B[j,b,P]``. Delegates to
    :func:`trnblas.mp2_energy` (its fused kernel on Neuron); same arguments,
    errors and result (a 0-d tensor, float64 for float64 input).

    Examples
    --------
    >>> import torch, trntensor
    >>> B = torch.randn(3, 5, 8, dtype=torch.float64) * 0.1
    >>> float(trntensor.mp2_energy(B, -torch.ones(3, dtype=torch.float64), torch.ones(5, dtype=torch.float64))) < 0
    True
    """
    return trnblas.mp2_energy(B, eps_occ, eps_vir)
