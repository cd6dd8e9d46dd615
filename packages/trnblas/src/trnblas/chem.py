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
* NKI (:mod:`trnblas.kernels.mp2_energy`, lowering in :mod:`trnblas._nki.chem`): one kernel computes every
  ``T^(ij)`` in PSUM and reduces it on the Vector/Scalar engines; ``T``
  never reaches HBM. The kernel takes fp32 or bf16 ``B``.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from trnsci import hostblas, plugins, validate
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
    schema="(Tensor B, Tensor eps_occ, Tensor eps_vir, float max_memory) -> Tensor",
    fake=lambda B, eps_occ, eps_vir, max_memory: B.new_empty((B.shape[0], B.shape[0]), dtype=result_dtype(B.dtype)),
)

_DEFAULT_MAX_MEMORY_MB = 512.0

def _validate(B, eps_occ, eps_vir, max_memory, where):
    B = validate.tensor(B, "B", where)
    eps_occ = validate.tensor(eps_occ, "eps_occ", where)
    eps_vir = validate.tensor(eps_vir, "eps_vir", where)
    validate.dtype(B, "B", validate.REAL_DTYPES, where)
    validate.dtype(eps_occ, "eps_occ", validate.REAL_DTYPES, where)
    validate.dtype(eps_vir, "eps_vir", validate.REAL_DTYPES, where)
    validate.ndim(B, "B", 3, where)
    nocc, nvir, naux = B.shape
    if nocc == 0 or nvir == 0 or naux == 0:
        raise ValueError(f"{where}: B must have nonzero (nocc, nvir, naux), got shape {tuple(B.shape)}")
    validate.ndim(eps_occ, "eps_occ", 1, where)
    validate.ndim(eps_vir, "eps_vir", 1, where)
    if eps_occ.shape[0] != nocc:
        raise ValueError(
            f"{where}: eps_occ has {eps_occ.shape[0]} entries but B has nocc={nocc} (B is (nocc, nvir, naux))"
        )
    if eps_vir.shape[0] != nvir:
        raise ValueError(
            f"{where}: eps_vir has {eps_vir.shape[0]} entries but B has nvir={nvir} (B is (nocc, nvir, naux))"
        )
    validate.same_device(where, B=B, eps_occ=eps_occ, eps_vir=eps_vir)
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


def _occ_block(nocc: int, nvir: int, itemsize: int, max_memory_mb: float, workers: int = 1) -> int:
    """Rows ``|I|`` of one energy block.

    At most ~nocc/12 rows (many blocks: skipping ``j > max(I)`` then saves
    close to half the GEMM flops, and the workers balance), and each
    worker's block ``(|I|, nvir, i1, nvir)`` plus two per-row temporaries
    within ``max_memory``.
    """
    per_row = nocc * nvir * nvir * itemsize
    fit = max_memory_mb * 2**20 / (workers * per_row) - 2  # may be inf (max_memory=inf)
    rows = nocc if fit >= nocc else int(fit)
    return max(1, min(-(-nocc // 12), rows))


_SLAB_BYTES = 2 * 2**20  # elementwise work on slabs that stay in cache


def _pair_block(Bf, eia, nvir, i0, i1, out):
    """``out[i, :i+1] = e_ij`` for ``i0 <= i < i1``: one GEMM for the block, then cache-sized slabs."""
    t = (Bf[i0 * nvir:i1 * nvir] @ Bf[:i1 * nvir].T).view(i1 - i0, nvir, i1, nvir)  # T[i, a, j, b]
    jc = max(1, _SLAB_BYTES // (nvir * nvir * t.element_size()))
    for k in range(i1 - i0):
        i = i0 + k
        for j0 in range(0, i + 1, jc):
            j1 = min(i + 1, j0 + jc)
            ti = t[k, :, j0:j1, :]  # (a, j, b); the exchange partner T_ibja is in the same slab
            u = eia[i][:, None, None] + eia[None, j0:j1, :]  # D_iajb
            torch.div(ti, u, out=u)  # u = T / D
            x = torch.add(ti, ti.permute(2, 1, 0), alpha=-0.5)  # T_iajb - T_ibja / 2
            x.mul_(u)
            out[i, j0:j1] = 2.0 * x.sum(dim=(0, 2))


@MP2_ENERGY.lowering("torch")
def _mp2_pairs_torch(B, eps_occ, eps_vir, max_memory):
    # e_ij = sum_ab T_ab (2 T_ab - T_ba) / D_ab only for j <= i (e_ji = e_ij). Rows are grouped
    # into blocks I with one GEMM (|I| nvir, naux) @ (naux, i1 nvir) each, i1 = max(I) + 1; the
    # elementwise reduction then runs row by row on cache-sized slabs. Blocks are independent:
    # with N intra-op threads they go to N Python workers running single-threaded torch (the GEMM
    # and reductions release the GIL) instead of N-thread GEMMs with a barrier per call, where the
    # measured route says so (_mp2_route; docs/perf-notes.md#design-mp2-pool).
    nocc, nvir, naux = B.shape
    dtype = result_dtype(B.dtype)
    if torch.is_grad_enabled() and (B.requires_grad or eps_occ.requires_grad or eps_vir.requires_grad):
        return _mp2_dense(B, eps_occ, eps_vir)  # autograd records it (the blocks write in place)
    Bf = B.to(dtype).reshape(nocc * nvir, naux)
    eia = eps_occ.to(dtype)[:, None] - eps_vir.to(dtype)[None, :]  # (nocc, nvir), negative
    nthreads = torch.get_num_threads()
    bo = _occ_block(nocc, nvir, torch.finfo(dtype).bits // 8, max_memory, nthreads)
    blocks = [(i0, min(nocc, i0 + bo)) for i0 in range(0, nocc, bo)][::-1]  # largest first
    workers = min(nthreads, len(blocks))
    if workers <= 1 or B.device.type != "cpu":
        out = _pairs_serial(Bf, eia, nvir, blocks)
    elif _mp2_route(Bf, eia, nvir, blocks, workers, naux) == "serial":
        out = _pairs_serial(Bf, eia, nvir, blocks)
    else:
        out = _pairs_pool(Bf, eia, nvir, blocks, workers)
    low = out.tril(-1)
    return low + low.T + torch.diag(out.diagonal())


def _pairs_serial(Bf, eia, nvir, blocks):
    """The lower triangle of ``e_ij`` block after block on torch's own threads."""
    nocc = eia.shape[0]
    out = torch.zeros((nocc, nocc), dtype=Bf.dtype, device=Bf.device)
    for i0, i1 in blocks:
        _pair_block(Bf, eia, nvir, i0, i1, out)
    return out


def _pairs_pool(Bf, eia, nvir, blocks, workers):
    """The same, the blocks spread over ``workers`` Python threads each running single-threaded torch."""
    out = torch.zeros((eia.shape[0], eia.shape[0]), dtype=Bf.dtype, device=Bf.device)
    hostblas.each_single_threaded(lambda block: _pair_block(Bf, eia, nvir, *block, out), blocks, workers)
    return out


def _bucket(v: int) -> int:
    return 1 << max(0, (int(v) - 1).bit_length())


def _mp2_route(Bf, eia, nvir, blocks, workers, naux) -> str:
    """``"pool"`` (the default) or ``"serial"`` for a CPU call with several torch threads, measured once
    per shape class and thread count (:mod:`trnsci.routes`, family ``trnblas.mp2``).

    The pool wins where each block's GEMM and reductions are long enough to run in parallel outside the
    GIL; for a few small blocks the threads' start-up and the GIL-bound Python loop between small torch
    calls can cost more than they save (docs/perf-notes.md#design-mp2-pool). Problems above
    ``_host.MAX_TIMED_MNK`` multiply-adds keep the pool untimed (timing would cost seconds).
    """
    from trnblas import _host
    from trnsci import routes

    nocc = eia.shape[0]
    cls = (str(Bf.dtype).replace("torch.", ""), _bucket(nocc), _bucket(nvir), _bucket(naux), _bucket(len(blocks)))
    worth = nocc * nocc * nvir * nvir * naux <= _host.MAX_TIMED_MNK
    c = routes.choose("trnblas.mp2", cls,
                      {"pool": lambda: _pairs_pool(Bf, eia, nvir, blocks, workers),
                       "serial": lambda: _pairs_serial(Bf, eia, nvir, blocks)},
                      default="pool", worth_timing=worth, robust=True)
    return c.route


def _pairs(B, eps_occ, eps_vir, max_memory, where):
    B, eps_occ, eps_vir, max_memory = _validate(B, eps_occ, eps_vir, max_memory, where)
    return MP2_ENERGY(B, eps_occ, eps_vir, max_memory)


@validate.numpy_io
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


@validate.numpy_io
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
# The suite's DF-MP2 pipeline lives in the umbrella's trnsci.chem (floor 3: it
# uses trnblas and trnsolver). These two keep their signatures and hand the
# call up through the umbrella's ``trnsci.workflows`` entry point: a library
# never imports the floor above it.

def df_factors(mf, auxbasis=None, *, frozen=0):
    """Density-fitted factors ``(B, eps_occ, eps_vir)`` of a closed-shell PySCF mean field.

    A thin wrapper of :func:`trnsci.chem.df_factors` (see it for the
    stages): ``(ia|jb) ~= sum_Q B[i,a,Q] B[j,b,Q]`` over the active occupied
    orbitals (the lowest ``frozen`` dropped) and all virtuals.

    Parameters
    ----------
    mf : pyscf.scf.hf.RHF
        A converged restricted Hartree-Fock object.
    auxbasis : str or dict, optional
        The RI auxiliary basis; default what PySCF's ``DFMP2(mf)`` takes
        (:func:`trnsci.chem.aux_basis`: the MP2-fit basis, e.g. cc-pVDZ-RI,
        unless ``mf`` is density-fitted).
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
        PySCF or the umbrella distribution is not installed (``pip install "trnsci[chem]"``).
    ValueError
        An open-shell or unconverged mean field, or ``frozen`` out of range.
    """
    chem = plugins.workflow("chem", "trnblas.chem.df_factors")
    return chem.df_factors(mf, auxbasis, frozen=frozen)


def dfmp2(mf, auxbasis=None, *, frozen=0, dtype=torch.float64, max_memory=None) -> float:
    """Closed-shell DF-MP2 correlation energy (Eh) of a converged PySCF RHF object.

    ``trnsci.chem.df_mp2(mf, ...).e_corr`` (prefer that: it also reports
    timings and backends per stage). ``B`` goes to the energy stage in
    ``dtype`` (float32 or bfloat16 let the NKI kernel take it under backends
    that choose it). Matches ``pyscf.mp.dfmp2.DFMP2(mf, frozen=frozen).kernel()[0]``.
    """
    chem = plugins.workflow("chem", "trnblas.chem.dfmp2")
    return chem.df_mp2(mf, auxbasis=auxbasis, frozen=frozen, dtype=dtype, max_memory=max_memory,
                       progress=False).e_corr


def _mp2_backward(inputs, output, g, needs):
    """The gradient of the pair energies by a dense torch formula: ``e_ij = sum_ab T_ab (2 T_ab - T_ba) / D_ab``
    with ``T_ab = sum_P B[i,a,P] B[j,b,P]`` and ``D_ab = e_i + e_j - e_a - e_b``, differentiated by torch
    (its memory is the full ``(nocc, nocc, nvir, nvir)`` amplitude tensor, not the forward's blocks)."""
    B, eps_occ, eps_vir, max_memory = inputs
    with torch.enable_grad():
        leaves = [t.detach().requires_grad_() for t in (B, eps_occ, eps_vir)]
        e = _mp2_dense(*leaves)
        wanted = [t for t, n in zip(leaves, needs[:3]) if n]
        got = iter(torch.autograd.grad(e, wanted, g.to(e.dtype)) if wanted else ())
    return tuple(next(got) if n else None for n in needs[:3]) + (None,)


def _mp2_dense(B, eps_occ, eps_vir):
    """The pair energies as one differentiable torch expression over the full amplitudes
    ``T[i,j,a,b] = (ia|jb)`` (memory ``nocc^2 nvir^2``): what autograd differentiates."""
    dtype = result_dtype(B.dtype)
    b, eo, ev = B.to(dtype), eps_occ.to(dtype), eps_vir.to(dtype)
    T = torch.einsum("iaP,jbP->ijab", b, b)
    eia = eo[:, None] - ev[None, :]
    D = eia[:, None, :, None] + eia[None, :, None, :]
    return (T * (2 * T - T.transpose(2, 3)) / D).sum((2, 3))


MP2_ENERGY.backward(_mp2_backward, formula="de/dB, de/d eps of e_ij = sum_ab T_ab (2 T_ab - T_ba) / D_ab "
                    "(T = (ia|jb), D = e_i + e_j - e_a - e_b)",
                    runs="torch: the dense amplitudes differentiated (not the forward's blocks)")
