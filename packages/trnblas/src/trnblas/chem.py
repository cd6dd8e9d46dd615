"""Density-fitted MP2 (DF-MP2) correlation energies.

With density-fitted three-index integrals ``B[i, a, Q]`` (occupied ``i``,
virtual ``a``, auxiliary ``Q``; ``(ia|jb) = sum_Q B[i,a,Q] B[j,b,Q]``), the
closed-shell MP2 correlation energy is

    E = sum_ij e_ij,
    e_ij = sum_ab T_ab (2 T_ab - T_ba) / (e_i + e_j - e_a - e_b),
    T = T^(ij) = B_i @ B_j^T  (nvir x nvir, a contraction over naux).

Two implementations share one operation (``"trnblas.mp2_energy"``, judged
by its FLOP count ``2 nocc^2 nvir^2 naux``):

* torch: occupied indices are grouped into blocks ``I``, ``J`` and each
  block pair is one GEMM ``(|I| nvir, naux) @ (naux, |J| nvir)``; only
  blocks with ``J <= I`` are formed (``e_ji = e_ij``). Block sizes bound the
  intermediate memory by ``max_memory``.
* NKI (:mod:`trnblas.kernels.mp2_energy`, lowering in :mod:`trnblas._nki`): one kernel computes every
  ``T^(ij)`` in PSUM and reduces it on the Vector/Scalar engines; ``T``
  never reaches HBM. The kernel takes fp32 or bf16 ``B``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from trnsci import _validate as V
from trnsci.dispatch import Op

__all__ = ["mp2_pair_energies", "mp2_energy", "df_factors", "dfmp2", "MP2_ENERGY"]

def _mp2_flops(B, eps_occ, eps_vir, max_memory) -> float:
    nocc, nvir, naux = B.shape
    return 2 * nocc * nocc * nvir * nvir * naux


def _mp2_describe(B, eps_occ, eps_vir, max_memory) -> str:
    nocc, nvir, naux = B.shape
    return f"nocc={nocc}, nvir={nvir}, naux={naux}"


MP2_ENERGY = Op(
    "trnblas.mp2_energy", "flops", 1e9, size=_mp2_flops, describe=_mp2_describe,
    doc="DF-MP2 pair energies; flops = 2 nocc^2 nvir^2 naux. Default is a guess pending `trnsci calibrate`.",
)

_DEFAULT_MAX_MEMORY_MB = 512.0

def _validate(B, eps_occ, eps_vir, max_memory, where):
    B = V.tensor(B, "B", where)
    eps_occ = V.tensor(eps_occ, "eps_occ", where)
    eps_vir = V.tensor(eps_vir, "eps_vir", where)
    V.dtype(B, "B", V.REAL_DTYPES, where)
    V.dtype(eps_occ, "eps_occ", V.REAL_DTYPES, where)
    V.dtype(eps_vir, "eps_vir", V.REAL_DTYPES, where)
    V.ndim(B, "B", 3, where)
    nocc, nvir, naux = B.shape
    if nocc == 0 or nvir == 0 or naux == 0:
        raise ValueError(f"{where}: B must have nonzero (nocc, nvir, naux), got shape {tuple(B.shape)}")
    V.ndim(eps_occ, "eps_occ", 1, where)
    V.ndim(eps_vir, "eps_vir", 1, where)
    if eps_occ.shape[0] != nocc:
        raise ValueError(
            f"{where}: eps_occ has {eps_occ.shape[0]} entries but B has nocc={nocc} (B is (nocc, nvir, naux))"
        )
    if eps_vir.shape[0] != nvir:
        raise ValueError(
            f"{where}: eps_vir has {eps_vir.shape[0]} entries but B has nvir={nvir} (B is (nocc, nvir, naux))"
        )
    V.same_device(where, B=B, eps_occ=eps_occ, eps_vir=eps_vir)
    gap = eps_vir.double().min().item() - eps_occ.double().max().item()
    if not gap > 0:  # also catches NaN
        raise ValueError(
            f"{where}: the lowest virtual orbital energy must lie above the highest occupied one "
            f"(gap {gap:g}); MP2 denominators e_i + e_j - e_a - e_b would vanish or change sign"
        )
    if max_memory is None:
        max_memory = _DEFAULT_MAX_MEMORY_MB
    if isinstance(max_memory, (bool, np.bool_)) or not isinstance(max_memory, numbers.Real):
        raise TypeError(f"{where}: max_memory must be a number of MiB, got {type(max_memory).__name__}")
    if not max_memory > 0:  # also catches NaN
        raise ValueError(f"{where}: max_memory must be a positive number of MiB, got {max_memory!r}")
    return B, eps_occ, eps_vir, float(max_memory)


def result_dtype(dtype: torch.dtype) -> torch.dtype:
    # bf16/fp16 pair energies would keep 2-3 digits: report them in fp32.
    return torch.float64 if dtype == torch.float64 else torch.float32


def _occ_block(nocc: int, nvir: int, itemsize: int, max_memory_mb: float) -> int:
    """Occupied block size so that ~4 live (|I|, |J|, nvir, nvir) arrays fit in max_memory."""
    per_pair = 4 * nvir * nvir * itemsize
    if max_memory_mb * 2**20 >= per_pair * nocc * nocc:  # everything fits (also max_memory=inf)
        return nocc
    pairs = max(1, int(max_memory_mb * 2**20 // per_pair))
    return max(1, min(nocc, math.isqrt(pairs)))


@MP2_ENERGY.lowering("torch")
def _mp2_pairs_torch(B, eps_occ, eps_vir, max_memory):
    nocc, nvir, naux = B.shape
    dtype = result_dtype(B.dtype)
    Bc = B.to(dtype)
    eia = eps_occ.to(dtype)[:, None] - eps_vir.to(dtype)[None, :]  # (nocc, nvir), negative
    bo = _occ_block(nocc, nvir, torch.finfo(dtype).bits // 8, max_memory)
    out = torch.empty((nocc, nocc), dtype=dtype, device=B.device)
    for i0 in range(0, nocc, bo):
        i1 = min(nocc, i0 + bo)
        bi = Bc[i0:i1].reshape((i1 - i0) * nvir, naux)
        for j0 in range(0, i1, bo):
            j1 = min(nocc, j0 + bo)
            bj = Bc[j0:j1].reshape((j1 - j0) * nvir, naux)
            # one GEMM for the whole block pair: (|I| nvir, naux) @ (naux, |J| nvir)
            t = (bi @ bj.T).view(i1 - i0, nvir, j1 - j0, nvir).permute(0, 2, 1, 3)  # (i, j, a, b)
            denom = eia[i0:i1, None, :, None] + eia[None, j0:j1, None, :]
            e = (t * (2.0 * t - t.transpose(-1, -2)) / denom).sum(dim=(-1, -2))
            out[i0:i1, j0:j1] = e
            if j0 != i0:
                out[j0:j1, i0:i1] = e.T
    return out


def _pairs(B, eps_occ, eps_vir, max_memory, where):
    B, eps_occ, eps_vir, max_memory = _validate(B, eps_occ, eps_vir, max_memory, where)
    return MP2_ENERGY(B, eps_occ, eps_vir, max_memory)


@V.numpy_io
def mp2_pair_energies(B, eps_occ, eps_vir, *, max_memory=None):
    """Closed-shell DF-MP2 pair energies ``e_ij``.

    Parameters
    ----------
    B : (nocc, nvir, naux) tensor
        Density-fitted integrals, ``(ia|jb) = sum_Q B[i,a,Q] B[j,b,Q]``
        (e.g. ``B_ia^Q = sum_P (ia|P) (P|Q)^-1/2``). float32, float64 or
        bfloat16; the NKI kernel takes float32/bfloat16.
    eps_occ : (nocc,) tensor
        Occupied orbital energies.
    eps_vir : (nvir,) tensor
        Virtual orbital energies; all must lie above ``eps_occ.max()``.
    max_memory : float, optional
        Bound, in MiB, on the torch path's intermediates (default 512); it
        sets how many occupied orbitals go into one GEMM.

    Returns
    -------
    (nocc, nocc) tensor
        ``e_ij = sum_ab (ia|jb) [2 (ia|jb) - (ib|ja)] / (e_i + e_j - e_a - e_b)``,
        symmetric; float64 for float64 input, else float32.

    Raises
    ------
    ValueError
        Wrong shapes, empty dimensions, or a virtual energy not above every
        occupied one (vanishing denominators).
    TypeError
        Non-tensor arguments or unsupported dtypes.

    Examples
    --------
    >>> import torch, trnblas
    >>> B = torch.randn(3, 5, 8, dtype=torch.float64) * 0.1
    >>> e = trnblas.mp2_pair_energies(B, -torch.ones(3, dtype=torch.float64), torch.ones(5, dtype=torch.float64))
    >>> e.shape
    torch.Size([3, 3])
    """
    return _pairs(B, eps_occ, eps_vir, max_memory, "mp2_pair_energies")


@V.numpy_io
def mp2_energy(B, eps_occ, eps_vir, *, max_memory=None):
    """Closed-shell DF-MP2 correlation energy ``E = sum_ij e_ij``.

    Same arguments as :func:`mp2_pair_energies`. Returns a 0-d tensor
    (float64 for float64 input, else float32), negative for a physical
    system; a NumPy input gives a 0-d NumPy array.

    Examples
    --------
    >>> import torch, trnblas
    >>> B = torch.randn(3, 5, 8, dtype=torch.float64) * 0.1
    >>> float(trnblas.mp2_energy(B, -torch.ones(3, dtype=torch.float64), torch.ones(5, dtype=torch.float64))) < 0
    True
    """
    return _pairs(B, eps_occ, eps_vir, max_memory, "mp2_energy").sum()


# ----------------------------------------------------------------- from PySCF

def df_factors(mf, auxbasis=None, *, frozen=0):
    """Density-fitted factors ``(B, eps_occ, eps_vir)`` of a closed-shell PySCF mean field.

    ``B[i, a, Q] = sum_P (ia|P) [(P|Q)^-1/2]_PQ`` over the active occupied
    orbitals (the lowest ``frozen`` are dropped) and all virtuals, so that
    ``(ia|jb) ~= sum_Q B[i,a,Q] B[j,b,Q]``; the inverse square root drops
    eigenvalues of the Coulomb metric below 1e-10.

    Parameters
    ----------
    mf : pyscf.scf.hf.RHF
        A converged restricted Hartree-Fock object.
    auxbasis : str or dict, optional
        The RI auxiliary basis; default PySCF's choice for MP2
        (``pyscf.df.make_auxbasis(mol, mp2fit=True)``, e.g. cc-pVDZ-RI).
    frozen : int
        Number of core orbitals left out of the correlation treatment.

    Returns
    -------
    B : (nocc - frozen, nvir, naux) float64 tensor
    eps_occ : (nocc - frozen,) float64 tensor
    eps_vir : (nvir,) float64 tensor

    Raises
    ------
    ImportError
        PySCF is not installed (``pip install "trnsci[chem]"``).
    ValueError
        An open-shell or unconverged mean field, or ``frozen`` out of range.
    """
    import numpy as np
    from pyscf import df

    mol = mf.mol
    occ = np.asarray(mf.mo_occ)
    if occ.ndim != 1 or not np.all((occ == 0) | (occ == 2)):
        raise ValueError("df_factors: mf must be a closed-shell restricted mean field (occupations 0 or 2)")
    if not getattr(mf, "converged", True):
        raise ValueError("df_factors: mf has not converged; run mf.kernel() first")
    nocc = int(np.count_nonzero(occ))
    frozen = V.integer(frozen, "frozen", "df_factors", minimum=0)
    if frozen >= nocc:
        raise ValueError(f"df_factors: frozen must be below nocc={nocc}, got {frozen}")
    if auxbasis is None:
        auxbasis = df.make_auxbasis(mol, mp2fit=True)
    auxmol = df.addons.make_auxmol(mol, auxbasis)
    c_occ = mf.mo_coeff[:, frozen:nocc]
    c_vir = mf.mo_coeff[:, nocc:]
    j3c = df.incore.aux_e2(mol, auxmol, intor="int3c2e", aosym="s1")  # (nao, nao, naux)
    w, v = np.linalg.eigh(auxmol.intor("int2c2e"))
    keep = w > 1e-10
    metric = (v[:, keep] / np.sqrt(w[keep])) @ v[:, keep].T
    ov = np.einsum("mnP,mi,na->iaP", j3c, c_occ, c_vir, optimize=True)
    B = torch.from_numpy(np.ascontiguousarray(ov @ metric))
    eps = torch.from_numpy(np.asarray(mf.mo_energy, dtype=np.float64).copy())
    return B, eps[frozen:nocc].clone(), eps[nocc:].clone()


def dfmp2(mf, auxbasis=None, *, frozen=0, dtype=torch.float64, max_memory=None) -> float:
    """Closed-shell DF-MP2 correlation energy (Eh) of a converged PySCF RHF object.

    :func:`df_factors` then :func:`mp2_energy` with ``B`` in ``dtype``
    (float32 or bfloat16 let the NKI kernel take it under backends that
    choose it; float64 always runs on torch). Matches
    ``pyscf.mp.dfmp2.DFMP2(mf, frozen=frozen).kernel()[0]`` (whose default
    auxiliary basis is the same MP2-fit basis; note that
    ``pyscf.mp.MP2(mf).density_fit()`` without ``auxbasis`` switches to the
    JK-fit default instead).
    """
    B, eo, ev = df_factors(mf, auxbasis, frozen=frozen)
    return float(mp2_energy(B.to(dtype), eo, ev, max_memory=max_memory))
