"""Density-fitted MP2 (DF-MP2) for PySCF mean fields: the suite's one DF-MP2 pipeline.

Why here: the pipeline strings together four of the six libraries -- PySCF
integrals, the metric's Cholesky factor (trnsolver), the AO->MO transform
(trntensor, whose GEMMs are trnblas's) and the pair energies (trnblas's
``mp2_energy`` operation with its fused NKI kernel). The umbrella package
``trnsci`` is the only one that depends on all six libraries, so the
pipeline lives in :mod:`trnsci.chem`; ``trnblas.dfmp2`` and
``trnblas.df_factors`` delegate to it.

Stages (the names in :attr:`DFMP2Result.timings` and ``.backends``):

``metric``
    The Coulomb metric ``J_PQ = (P|Q)`` of the auxiliary basis (PySCF's
    ``int2c2e``) and its Cholesky factor ``J = L L^T``
    (:func:`trnsolver.cholesky`). A metric that is numerically singular
    (not positive definite) falls back, as PySCF does, to ``J^{-1/2}`` from
    :func:`trnsolver.eigh` with eigenvalues ``<= 1e-10`` dropped.
``int3c``
    The three-centre integrals ``(mn|P)`` (PySCF's ``int3c2e``, packed
    ``m >= n``), one block of auxiliary shells at a time so that a block fits
    ``max_memory``.
``ao2mo``
    ``V[i, a, P] = sum_mn C[m, i] (mn|P) C[n, a]`` per auxiliary block with
    :func:`trntensor.ao_to_mo_transform` (two GEMMs through trnblas; no loop
    over orbitals).
``fit``
    ``B = V L^{-T}`` by one triangular solve (:func:`trnblas.trsm`), so that
    ``(ia|jb) ~= sum_Q B[i,a,Q] B[j,b,Q] = V J^{-1} V^T``.
``energy``
    Pair energies ``e_ij`` by :func:`trnblas.mp2_pair_energies` (operation
    ``trnblas.mp2_energy``): on torch one GEMM per block of occupied
    orbitals against all ``j <= i`` and a fused denominator/reduction; on
    NKI the fused kernel that keeps ``T_ij`` on chip.

A density-fitted mean field that holds its fitted integrals in memory
(``mf.with_df._cderi``, after its SCF) lends them, as PySCF's DFMP2 then
does too: ``metric``, ``int3c`` and ``fit`` are skipped (backend
``"cached (mf.with_df)"``) unless ``auxbasis`` is given.

The energy is ``E = sum_ij sum_ab (ia|jb) [2 (ia|jb) - (ib|ja)] /
(e_i + e_j - e_a - e_b)``, the closed-shell (R)MP2 correlation energy. An
unrestricted mean field (UHF) gets PySCF's DFUMP2 instead: ``B`` per spin,
same-spin and opposite-spin pair sums (:func:`_ump2_energy`).
"""

from __future__ import annotations

import contextvars
import functools
import numbers
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import numpy as np
import torch

from trnsci import hostblas

__all__ = ["DFMP2Result", "df_mp2", "df_mp2_from_tensors", "df_factors", "aux_basis", "STAGES",
           "scf", "SCFResult", "SCF_STAGES", "ConvergenceWarning"]

#: Stage names in pipeline order (keys of ``DFMP2Result.timings``).
STAGES = ("metric", "int3c", "ao2mo", "fit", "energy")

#: Eigenvalues of the metric at or below this are dropped when it is not
#: positive definite (PySCF's ``mp_dfmp2_thresh_lindep``).
THRESH_LINDEP = 1e-10

_DTYPES = (torch.float64, torch.float32, torch.bfloat16)


def _pyscf():
    try:
        import pyscf  # noqa: F401
        from pyscf import df, gto, lib
    except ImportError as exc:  # pragma: no cover - exercised only without PySCF
        raise ImportError(
            "trnsci.chem.df_mp2 needs PySCF for the integrals: pip install 'trnsci[chem]' (or pip install pyscf)"
        ) from exc
    return df, gto, lib


@dataclass
class DFMP2Result:
    """The outcome of :func:`df_mp2` / :func:`df_mp2_from_tensors`.

    Attributes
    ----------
    e_corr : float
        MP2 correlation energy (Eh).
    e_tot : float or None
        ``e_hf + e_corr``; None from :func:`df_mp2_from_tensors`.
    e_hf : float or None
        The mean field's total energy.
    nao, naux, nocc, nvir : int
        Basis functions, auxiliary functions (after any linear-dependency
        removal), active occupied and virtual orbitals.
    nfrozen : int
        Orbitals left out of the correlation treatment.
    auxbasis : object
        The auxiliary basis used (name or dict as PySCF takes it).
    dtype : torch.dtype
        dtype of ``B`` in the energy stage.
    timings : dict
        Wall-clock seconds per stage (see :data:`STAGES`) and ``"total"``.
    backends : dict
        Where each stage ran: ``"pyscf"``, ``"torch"``, ``"simulator"`` or
        ``"nki"`` (a kernel's name is appended when one ran).
    pair_energies : tensor or None
        ``(nocc, nocc)`` symmetric ``e_ij`` when asked for.
    ranks : int
        Processes that computed it (``process_group``'s size; 1 otherwise).
    bytes_sent : dict or None
        With ``process_group``: bytes this rank sent, per step
        (:mod:`trnsci.chem_distributed` gives the formulas).
    naux_per_rank : list or None
        With ``process_group``: auxiliary functions each rank integrated.
    kind : str
        ``"rhf"`` (closed-shell MP2) or ``"uhf"`` (open-shell, PySCF's
        DFUMP2); for ``"uhf"``, ``nocc`` and ``nvir`` are ``(alpha, beta)``.
    e_ss, e_os : float or None
        UHF only: same-spin and opposite-spin parts of ``e_corr``.
    """

    e_corr: float
    e_tot: float | None = None
    e_hf: float | None = None
    nao: int | None = None
    naux: int = 0
    nocc: int = 0
    nvir: int = 0
    nfrozen: int = 0
    auxbasis: object = None
    dtype: torch.dtype = torch.float64
    timings: dict = field(default_factory=dict)
    backends: dict = field(default_factory=dict)
    pair_energies: torch.Tensor | None = None
    ranks: int = 1
    bytes_sent: dict | None = None
    naux_per_rank: list | None = None
    kind: str = "rhf"
    e_ss: float | None = None
    e_os: float | None = None

    def __str__(self) -> str:
        head = f"DF-MP2 E_corr = {self.e_corr:.12f} Eh"
        if self.e_tot is not None:
            head += f", E_tot = {self.e_tot:.12f} Eh"
        dims = f"nocc={self.nocc} nvir={self.nvir} naux={self.naux}" + (
            f" nao={self.nao}" if self.nao is not None else "")
        stages = ", ".join(f"{k} {v:.3f} s ({self.backends.get(k, '?')})"
                           for k, v in self.timings.items() if k != "total")
        return f"{head}\n  {dims}, {self.dtype}\n  {stages}"


# ------------------------------------------------------------------ helpers

class _Progress:
    """A one-line progress bar on stderr (only when stderr is a terminal)."""

    def __init__(self, enabled: bool, label: str):
        self.on = bool(enabled) and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
        self.label = label

    def show(self, stage: str, done: int, total: int) -> None:
        if not self.on:
            return
        width = 24
        fill = int(width * done / max(total, 1))
        sys.stderr.write(f"\r{self.label} {stage:<7} [{'#' * fill}{'.' * (width - fill)}] {done}/{total}   ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.on:
            sys.stderr.write("\r" + " " * 72 + "\r")
            sys.stderr.flush()


@contextmanager
def _stage(name: str, timings: dict, backends: dict, default: str = "torch") -> Iterator[None]:
    """Time a stage and record where it ran (any NKI kernel run inside it wins)."""
    from trnsci import nki

    t0 = time.perf_counter()
    with nki.capture() as runs:  # nests: an enclosing nki.capture() sees these runs too
        yield
    timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0
    if runs:
        kernels = sorted({r.kernel for r in runs})
        backends[name] = f"{runs[0].backend}:{','.join(kernels)}"
    else:
        backends.setdefault(name, default)


def _max_memory(max_memory, default: float, where: str) -> float:
    if max_memory is None:
        return float(default)
    if isinstance(max_memory, (bool, np.bool_)) or not isinstance(max_memory, numbers.Real):
        raise TypeError(f"{where}: max_memory must be a number of MiB, got {type(max_memory).__name__}")
    if not max_memory > 0:
        raise ValueError(f"{where}: max_memory must be a positive number of MiB, got {max_memory!r}")
    return float(max_memory)


def _check_dtype(dtype, where: str) -> torch.dtype:
    if dtype not in _DTYPES:
        raise TypeError(f"{where}: dtype must be one of torch.float64, torch.float32, torch.bfloat16, got {dtype!r}")
    return dtype


def _check_device(device, where: str):
    """None (host) or the ``torch.device`` named by ``device``; ``"cpu"`` is the host path (None)."""
    if device is None:
        return None
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"{where}: device must be None, a str or a torch.device (e.g. 'neuron'), "
                        f"got {type(device).__name__}")
    try:
        dev = torch.device(device)
        torch.empty(0, device=dev)
    except (RuntimeError, ValueError, TypeError) as exc:
        msg = str(exc).strip().splitlines()
        raise ValueError(f"{where}: device {device!r} is not available here ({msg[0] if msg else ''})") from None
    return None if dev.type == "cpu" else dev


def _backend_scope(backend):
    if backend is None:
        return nullcontext()
    import trnsci

    return trnsci.use_backend(backend)


# ------------------------------------------------------------ mean field in

def aux_basis(mf, auxbasis=None):
    """The auxiliary basis PySCF's ``DFMP2(mf)`` would use (or ``auxbasis`` when given).

    A density-fitted mean field (``mf.with_df``) lends its own fitting basis
    (PySCF's JK-fit default when it names none); otherwise the MP2-fit basis
    ``pyscf.df.make_auxbasis(mol, mp2fit=True)`` (e.g. cc-pVDZ-RI).

    Returns
    -------
    str, dict or list
        Anything ``pyscf.df.addons.make_auxmol`` takes.

    Examples
    --------
    >>> from pyscf import gto
    >>> from types import SimpleNamespace
    >>> mol = gto.M(atom="He 0 0 0", basis="cc-pvdz", verbose=0)
    >>> aux_basis(SimpleNamespace(mol=mol))['He']
    'cc-pvdz-ri'
    """
    df, _, _ = _pyscf()
    if auxbasis is not None:
        return auxbasis
    with_df = getattr(mf, "with_df", None)
    if with_df is not None:
        if getattr(with_df, "auxbasis", None) is not None:
            return with_df.auxbasis
        return df.make_auxbasis(mf.mol)
    return df.make_auxbasis(mf.mol, mp2fit=True)


def _auxmol(mf, auxbasis):
    """``(auxmol, auxbasis)``: a DF mean field's own built auxmol when no basis is asked for.

    Otherwise the auxiliary molecule is built once per molecule *content*
    and basis request (:data:`_AUXMOLS`): choosing the fitting basis and
    building its Mole parse basis files (docs/perf-notes.md#design-mp2-pool).
    """
    df, _, _ = _pyscf()
    with_df = getattr(mf, "with_df", None)
    if auxbasis is None and with_df is not None and getattr(with_df, "auxmol", None) is not None:
        return with_df.auxmol, aux_basis(mf)
    mol = mf.mol
    try:
        key = (mol._atm.tobytes(), mol._bas.tobytes(), mol._env.tobytes(), bool(mol.cart), repr(mol._basis),
               repr(auxbasis), None if with_df is None else repr(getattr(with_df, "auxbasis", None)))
    except (AttributeError, TypeError):  # not a built Mole: no cache
        key = None
    hit = _AUXMOLS.get(key) if key is not None else None
    if hit is not None:
        return hit
    aux = aux_basis(mf, auxbasis)
    got = df.addons.make_auxmol(mol, aux), aux
    if key is not None:
        if len(_AUXMOLS) >= 8:
            _AUXMOLS.pop(next(iter(_AUXMOLS)))
        _AUXMOLS[key] = got
    return got


#: Built auxiliary molecules keyed by everything they are made from: the molecule's atoms, shells and
#: exponents/coefficients/coordinates (its ``_atm``/``_bas``/``_env`` arrays), its basis names, the
#: requested and the mean field's fitting basis. A molecule changed in place has another key. At most 8.
_AUXMOLS: dict = {}


def _mf_arrays(mf, where: str):
    for attr in ("mol", "mo_coeff", "mo_occ", "mo_energy"):
        if getattr(mf, attr, None) is None:
            raise TypeError(f"{where}: mf must be a PySCF RHF/UHF object after mf.kernel() or a "
                            f"trnsci.chem.scf result (no {attr!r})")
    occ = np.asarray(mf.mo_occ)
    coeff = np.asarray(mf.mo_coeff)
    if np.iscomplexobj(coeff):
        raise ValueError(f"{where}: mf must have real orbitals")
    return occ, coeff


def _is_unrestricted(mf) -> bool:
    """A UHF-shaped mean field: occupations and orbitals with a leading spin axis of 2."""
    occ = getattr(mf, "mo_occ", None)
    coeff = getattr(mf, "mo_coeff", None)
    return (occ is not None and coeff is not None and np.ndim(occ) == 2 and np.ndim(coeff) == 3
            and np.shape(occ)[0] == 2)


def _check_converged(mf, where: str) -> None:
    if not getattr(mf, "converged", False):
        raise ValueError(f"{where}: mf has not converged (mf.converged is False); run mf.kernel() to convergence")


def _select(coeff, occ, eps, frozen, where: str, allow_empty: bool = False):
    """Active occupied / virtual coefficients and energies of one spin (or of a closed shell).

    ``allow_empty``: a spin with no electron (UHF of one electron) gives empty occupied arrays."""
    nmo = occ.size
    active = np.ones(nmo, dtype=bool)
    if frozen is None or (isinstance(frozen, numbers.Integral) and not isinstance(frozen, bool)):
        nf = 0 if frozen is None else int(frozen)
        nocc = int(np.count_nonzero(occ))
        if not 0 <= nf < max(nocc, 1 if allow_empty and nf == 0 else 0):
            raise ValueError(f"{where}: frozen must be below nocc={nocc} (and not negative), got {frozen}")
        active[:nf] = False
    else:
        try:
            idx = np.asarray(list(frozen), dtype=np.int64)
        except (TypeError, ValueError):
            raise TypeError(f"{where}: frozen must be None, an int or a list of orbital indices, "
                            f"got {type(frozen).__name__}") from None
        if idx.size and (idx.min() < 0 or idx.max() >= nmo):
            raise ValueError(f"{where}: frozen orbital indices must lie in [0, {nmo}), got {idx.tolist()}")
        active[idx] = False
    o = active & (occ > 0)
    v = active & (occ == 0)
    if (not o.any() and not (allow_empty and not (occ > 0).any())) or not v.any():
        raise ValueError(f"{where}: frozen leaves no active occupied or no active virtual orbital")
    eps = np.asarray(eps, dtype=np.float64)
    return (np.ascontiguousarray(coeff[:, o]), np.ascontiguousarray(coeff[:, v]),
            eps[o].copy(), eps[v].copy(), int(nmo - active.sum()))


def _orbitals(mf, frozen, where: str):
    """Active occupied / virtual coefficient and energy arrays of a converged closed-shell mf."""
    occ, coeff = _mf_arrays(mf, where)
    if occ.ndim != 1 or coeff.ndim != 2 or not np.all((occ == 0) | (occ == 2)):
        raise ValueError(f"{where}: mf must be a closed-shell restricted mean field (RHF, occupations 0 or 2) "
                         "or an unrestricted one (UHF); restricted open-shell (ROHF) DF-MP2 is not supported")
    _check_converged(mf, where)
    return _select(coeff, occ, mf.mo_energy, frozen, where)


def _orbitals_u(mf, frozen, where: str):
    """Per spin ``(c_occ, c_vir, eps_occ, eps_vir)`` of a converged UHF, and the frozen count per spin."""
    occ, coeff = _mf_arrays(mf, where)
    if not np.all((occ == 0) | (occ == 1)):
        raise ValueError(f"{where}: an unrestricted mean field must have occupations 0 or 1 per spin orbital")
    _check_converged(mf, where)
    eps = np.asarray(mf.mo_energy, dtype=np.float64)
    if eps.shape != occ.shape:
        raise ValueError(f"{where}: mf.mo_energy has shape {eps.shape}, mf.mo_occ {occ.shape}")
    out = [_select(coeff[s], occ[s], eps[s], frozen, where, allow_empty=True) for s in range(2)]
    return [o[:4] for o in out], out[0][4]


# ------------------------------------------------------------ the pipeline

def _factor_metric(j2c: torch.Tensor):
    """``("cd", L)`` with ``J = L L^T``, or ``("eig", M)`` with ``M M^T = J^+`` (lindep dropped).

    Through trnsolver (``cholesky``, ``eigh``); while trnsolver cannot be
    imported (it is being finished in parallel) the same torch.linalg calls
    its torch path makes are used directly, and the stage says so.
    """
    try:
        import trnsolver

        cholesky_ex = lambda a: trnsolver.cholesky(a, check=False)  # noqa: E731
        eigh, where = trnsolver.eigh, "torch"
    except ImportError:
        cholesky_ex, eigh, where = torch.linalg.cholesky_ex, torch.linalg.eigh, "torch (trnsolver not importable)"
    L, info = cholesky_ex(j2c)
    if int(info) == 0:
        return "cd", L, where
    w, U = eigh(j2c)
    keep = w.abs() > THRESH_LINDEP
    return "eig", U[:, keep] * w[keep].rsqrt(), where


def _aux_blocks(auxmol, max_aux: int):
    """Ranges of auxiliary shells ``(s0, s1, p0, p1)`` of at most ``max_aux`` functions (one shell minimum)."""
    loc = auxmol.ao_loc_nr()
    s0 = 0
    for s in range(1, auxmol.nbas + 1):
        if loc[s] - loc[s0] > max_aux and s - 1 > s0:
            yield s0, s - 1, int(loc[s0]), int(loc[s - 1])
            s0 = s - 1
    yield s0, auxmol.nbas, int(loc[s0]), int(loc[auxmol.nbas])


_PIECE_BYTES = 4 * 2**20


def _NTHREADS() -> int:
    return torch.get_num_threads()


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` nearly equal ranges covering ``range(n)`` (empty ones dropped)."""
    edges = [n * k // parts for k in range(parts + 1)]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]


def _parallel(fn, items) -> None:
    """``fn(item)`` for every item on single-threaded torch workers (:func:`trnsci.hostblas.each_single_threaded`):
    the GEMMs and PySCF's C helpers release the GIL, so they overlap (measured in docs/chem.md)."""
    hostblas.each_single_threaded(fn, items)


def _ao2mo_block(pqL, q, *, Co, Cv, V, p0) -> None:
    """``V[:, :, p0+q0 : p0+q1] = C_occ^T (mn|Q) C_vir`` for the block's aux functions ``q0:q1``.

    ``pqL`` is PySCF's packed ``(npair, nQ)`` block in Fortran order, i.e.
    rows ``(nQ, npair)``; each row unpacks to a symmetric ``(nao, nao)``.
    Two GEMMs with all of the block's aux functions as rows:
    ``(nq nao, nao) @ C_occ``, then ``(nq nocc, nao) @ C_vir``.
    """
    import trnblas

    _, _, lib = _pyscf()
    nao, nocc = Co.shape
    nvir = Cv.shape[1]
    q0, q1 = q
    nq = q1 - q0
    eri = torch.from_numpy(lib.unpack_tril(pqL.T[q0:q1])).to(Co.dtype).to(Co.device)  # (nq, nao, nao)
    prec = _PRECISION.get()
    Y = trnblas.gemm(1.0, eri.view(nq * nao, nao), Co, precision=prec).view(nq, nao, nocc)
    del eri
    Y = Y.transpose(1, 2).reshape(nq * nocc, nao)
    W = trnblas.gemm(1.0, Y, Cv, precision=prec).view(nq, nocc, nvir)
    V[:, :, p0 + q0:p0 + q1] = W.permute(1, 2, 0).to(V.device)


def _cached_cderi(mf, auxbasis):
    """A density-fitted mean field's in-memory fitted integrals ``L^{-1} (P|mn)`` (naux, npair), or None."""
    with_df = getattr(mf, "with_df", None)
    cderi = getattr(with_df, "_cderi", None) if auxbasis is None else None
    if isinstance(cderi, np.ndarray) and cderi.ndim == 2 and cderi.flags.c_contiguous:
        nao = mf.mol.nao_nr()
        if cderi.shape[1] == nao * (nao + 1) // 2:
            return cderi
    return None


#: dtype of the AO->MO GEMM operands; float32 puts them on trnblas's kernels on the device path
#: (set by :func:`df_mp2` for ``dtype`` float32/bfloat16 there; ``V`` and the fit stay float64).
_AO_DTYPE: contextvars.ContextVar = contextvars.ContextVar("trnsci_chem_ao_dtype", default=torch.float64)


#: ``precision`` of the pipeline's trnblas GEMMs (None, or "fp64" from ``df_mp2(precision="fp64")``);
#: a context variable, so the ao2mo worker threads (copies of the caller's context) see it.
#: ``torch.device`` that holds ``B`` and the AO->MO operands (``df_mp2(device=...)``), or None (host).
_DEVICE: contextvars.ContextVar = contextvars.ContextVar("trnsci_chem_device", default=None)
_PRECISION: contextvars.ContextVar = contextvars.ContextVar("trnsci_chem_precision", default=None)


@contextmanager
def _device_scope(device):
    token = _DEVICE.set(device)
    try:
        yield
    finally:
        _DEVICE.reset(token)


@contextmanager
def _precision_scope(precision):
    token = _PRECISION.set(precision)
    try:
        yield
    finally:
        _PRECISION.reset(token)


def _check_precision(precision, dtype, where: str):
    """None or "fp64" (which needs ``dtype`` float64); "default" is None."""
    if precision is None:
        return None
    if not isinstance(precision, str):
        raise TypeError(f"{where}: precision must be None, 'default' or 'fp64', got {type(precision).__name__}")
    if precision not in ("default", "fp64"):
        raise ValueError(f"{where}: precision must be None, 'default' or 'fp64', got {precision!r}")
    if precision == "fp64" and dtype != torch.float64:
        raise ValueError(f"{where}: precision='fp64' computes in float64; dtype must be torch.float64, got {dtype}")
    return None if precision == "default" else precision


def _ao_operands(c_occ, c_vir):
    dt, dev = _AO_DTYPE.get(), _DEVICE.get()
    co, cv = torch.from_numpy(c_occ).to(dt), torch.from_numpy(c_vir).to(dt)
    return (co, cv) if dev is None else (co.to(dev), cv.to(dev))


def _device_path() -> bool:
    import trnblas

    return str(trnblas.get_backend()) in ("nki", "simulator")


@contextmanager
def _ao_dtype(dtype):
    """AO->MO in float32 (kernels) when the energy's ``dtype`` is below float64 and the device path is on."""
    kernels = _device_path() or _DEVICE.get() is not None
    token = _AO_DTYPE.set(torch.float32 if dtype != torch.float64 and kernels else torch.float64)
    try:
        yield
    finally:
        _AO_DTYPE.reset(token)


def _B_from_cderi(cderi, c_occ, c_vir, timings, backends):
    """``B`` from PySCF's cached fit (what its DFMP2 does then too): only the AO->MO stage runs."""
    nocc, nvir = c_occ.shape[1], c_vir.shape[1]
    naux, nao = cderi.shape[0], c_occ.shape[0]
    for name in ("metric", "int3c", "fit"):
        timings[name] = 0.0
        backends[name] = "cached (mf.with_df)"
    Co, Cv = _ao_operands(c_occ, c_vir)
    if Co.device.type != "cpu":
        return _B_on_device(cderi, Co, Cv, timings, backends)
    V = torch.empty((nocc, nvir, naux), dtype=torch.float64)
    with _stage("ao2mo", timings, backends):
        pieces = _split(naux, max(_NTHREADS(), -(-naux * nao * nao * 8 // _PIECE_BYTES)))
        _parallel(functools.partial(_ao2mo_block, cderi.T, Co=Co, Cv=Cv, V=V, p0=0), pieces)
    return V


def _B_on_device(cderi, Co, Cv, timings, backends):
    """``B`` on ``Co``'s device from the packed fit: the factors go over once (in ``Co``'s dtype), unpack
    there and both AO->MO GEMMs run on the resident tensors; ``B`` stays on the device."""
    import trnblas

    naux, nao, nocc, nvir = cderi.shape[0], Co.shape[0], Co.shape[1], Cv.shape[1]
    dev = Co.device
    packed = torch.from_numpy(cderi).to(Co.dtype).to(dev)  # (naux, npair): one transfer
    tri = torch.tril_indices(nao, nao).to(dev)  # one transfer
    B = torch.empty((nocc, nvir, naux), dtype=Co.dtype, device=dev)
    nq = max(1, min(naux, _PIECE_BYTES // (Co.element_size() * nao * nao)))
    with _stage("ao2mo", timings, backends):
        for q0 in range(0, naux, nq):
            q1 = min(naux, q0 + nq)
            eri = torch.zeros((q1 - q0, nao, nao), dtype=Co.dtype, device=dev)
            eri[:, tri[0], tri[1]] = packed[q0:q1]
            eri[:, tri[1], tri[0]] = packed[q0:q1]
            Y = trnblas.gemm(1.0, eri.view(-1, nao), Co).view(q1 - q0, nao, nocc)
            Y = Y.transpose(1, 2).reshape(-1, nao)
            W = trnblas.gemm(1.0, Y, Cv).view(q1 - q0, nocc, nvir)
            B[:, :, q0:q1] = W.permute(1, 2, 0)
    return B


def _int3c_reader(mol, auxmol):
    """``read(s0, s1)``: PySCF's three-centre integrals ``(mn|Q)`` of auxiliary shells ``[s0, s1)``, packed
    ``m >= n``, as an ``(npair, nQ)`` array in Fortran order; libcint's setup done once."""
    _, gto, _ = _pyscf()
    nbas = mol.nbas
    int3c = gto.moleintor.ascint3(mol._add_suffix("int3c2e"))
    atm, bas, env = gto.mole.conc_env(mol._atm, mol._bas, mol._env, auxmol._atm, auxmol._bas, auxmol._env)
    ao_loc = gto.moleintor.make_loc(bas, int3c)
    cintopt = gto.moleintor.make_cintopt(atm, bas, env, int3c)

    def read(s0, s1):
        return gto.moleintor.getints3c(int3c, atm, bas, env, (0, nbas, 0, nbas, nbas + s0, nbas + s1),
                                       1, "s2ij", ao_loc, cintopt)

    return read


def _ao2mo(pqL, nq, nao, Co, Cv, V, p0):
    """``V[:, :, p0:p0+nq] = Co^T (mn|Q) Cv`` of one block of packed integrals, threaded over pieces of
    ~``_PIECE_BYTES`` unpacked integrals (they stay in cache and need no fresh pages)."""
    pieces = _split(nq, max(_NTHREADS(), -(-nq * nao * nao * 8 // _PIECE_BYTES)))
    _parallel(functools.partial(_ao2mo_block, pqL, Co=Co, Cv=Cv, V=V, p0=p0), pieces)


def _build_B(mol, auxmol, c_occ, c_vir, max_memory_mb, timings, backends, progress):
    """``B (nocc, nvir, naux)`` float64: metric, 3c2e blocks, AO->MO, fit (see the module docstring)."""
    return _build_Bs(mol, auxmol, [(c_occ, c_vir)], max_memory_mb, timings, backends, progress)[0]


def _build_Bs(mol, auxmol, orbitals, max_memory_mb, timings, backends, progress):
    """One ``B`` per ``(c_occ, c_vir)`` pair (one per spin for UMP2), the integrals evaluated once."""
    import trnblas

    nao = mol.nao_nr()
    naux = auxmol.nao_nr()

    with _stage("metric", timings, backends):
        j2c = torch.from_numpy(auxmol.intor("int2c2e", hermi=1))  # PySCF; cheap next to the 3c2e
        kind, M, where = _factor_metric(j2c)
    if backends["metric"] == "torch":
        backends["metric"] = where

    # V (nocc, nvir, naux) per pair is the big array; each aux block holds the packed
    # and the unpacked integrals and the half-transformed intermediate.
    nov = sum(co.shape[1] * cv.shape[1] for co, cv in orbitals)
    nocc_max = max(co.shape[1] for co, _ in orbitals)
    per_aux = 8 * (nao * (nao + 1) // 2 + nao * nao + nocc_max * nao + nov)
    budget = max_memory_mb * 2**20 - 8 * nov * naux
    fit = budget / per_aux  # inf for max_memory=inf
    max_aux = naux if fit >= naux else max(1, int(fit))
    blocks = list(_aux_blocks(auxmol, max_aux))

    read = _int3c_reader(mol, auxmol)
    Cs = [_ao_operands(co, cv) for co, cv in orbitals]
    Vs = [torch.empty((co.shape[1], cv.shape[1], naux), dtype=torch.float64) for co, cv in orbitals]
    for k, (s0, s1, p0, p1) in enumerate(blocks):
        progress.show("int3c", k, len(blocks))
        with _stage("int3c", timings, backends, "pyscf"):
            pqL = read(s0, s1)
        with _stage("ao2mo", timings, backends):
            for (Co, Cv), V in zip(Cs, Vs):
                _ao2mo(pqL, p1 - p0, nao, Co, Cv, V, p0)
            pqL = None
    progress.show("int3c", len(blocks), len(blocks))

    out = []
    with _stage("fit", timings, backends):
        for V in Vs:
            nocc, nvir = V.shape[:2]
            Vf = V.view(nocc * nvir, naux)
            if kind == "cd":
                # B L^T = V  <=>  B = V L^{-T}; then B B^T = V J^{-1} V^T
                B = trnblas.trsm(1.0, M, Vf, side="right", uplo="lower", trans=True)
            else:
                B = trnblas.gemm(1.0, Vf, M, precision=_PRECISION.get())
            out.append(B.view(nocc, nvir, -1))
    return out


def _energy(B, eps_occ, eps_vir, max_memory_mb, timings, backends, progress):
    import trnblas

    progress.show("energy", 0, 1)
    with _stage("energy", timings, backends):
        if _PRECISION.get() == "fp64" and _device_path():
            pairs = _pairs_fp64(B, eps_occ, eps_vir, max_memory_mb)
        else:
            pairs = trnblas.mp2_pair_energies(B, eps_occ, eps_vir, max_memory=max_memory_mb)
        e = float(pairs.double().sum())
    progress.show("energy", 1, 1)
    return e, pairs


def _pairs_fp64(B, eps_occ, eps_vir, max_memory_mb):
    """Closed-shell pair energies with ``(ia|jb)`` from :func:`trnblas.gemm` at ``precision="fp64"``
    (on the device path: the Ozaki slices on the float32 GEMM kernel), the rest in float64 on the host.

    ``e_ij = sum_ab T_ab (2 T_ab - T_ba) / (e_i + e_j - e_a - e_b)`` with ``T = (ia|jb)``, one block of
    occupied ``i`` against all ``j`` per GEMM (sized to ``max_memory``).
    """
    import trnblas

    B = B.double()
    eo, ev = eps_occ.double(), eps_vir.double()
    nocc, nvir, naux = B.shape
    Bf = B.reshape(nocc * nvir, naux)
    vv = ev[:, None, None] + ev[None, None, :]
    pairs = torch.empty((nocc, nocc), dtype=torch.float64)
    step = max(1, min(nocc, int(max_memory_mb * 2**20 // max(8 * 4 * nvir * nocc * nvir, 1))))
    for i0 in range(0, nocc, step):
        i1 = min(i0 + step, nocc)
        T = trnblas.gemm(1.0, Bf[(i0 * nvir):(i1 * nvir)], Bf, transB=True, precision="fp64")
        T = T.view(i1 - i0, nvir, nocc, nvir)
        D = (eo[i0:i1, None, None, None] + eo[None, None, :, None]) - vv[None]
        pairs[i0:i1] = (T * (2 * T - T.permute(0, 3, 2, 1)) / D).sum(dim=(1, 3))
    return pairs


def _ump2_energy(Bs, eos, evs, dtype, max_memory_mb, timings, backends, progress):
    """``(E, E_same_spin, E_opposite_spin)`` of UMP2 from per-spin ``B`` (``(ia|jb) = B_i . B_j``).

    ``E_ss = 1/2 sum_s sum_{ij,ab} T_ab (T_ab - T_ba) / D`` with ``T = (ia|jb)``
    of spin ``s``; ``E_os = sum_{ij,ab} (i a|j b)^2 / D`` over alpha ``i a``, beta
    ``j b``; ``D = e_i + e_j - e_a - e_b``. The ``(ia|jb)`` blocks are
    :func:`trnblas.gemm` products of ``dtype`` ``B``, one block of occupied
    ``i`` at a time (sized to ``max_memory``); the rest in float64.
    """
    import trnblas

    progress.show("energy", 0, 3)
    e_ss = e_os = 0.0
    with _stage("energy", timings, backends):
        Bd = [B.to(dtype) for B in Bs]
        for k, (s, t) in enumerate(((0, 0), (1, 1), (0, 1))):
            Bi, Bj = Bd[s], Bd[t]
            ni_all, nva, naux = Bi.shape
            nj, nvb = Bj.shape[:2]
            if ni_all == 0 or nj == 0:
                continue
            Bjf = Bj.reshape(nj * nvb, naux)
            eo_i, ev_a = eos[s], evs[s]
            eo_j, ev_b = eos[t], evs[t]
            vv = ev_a[:, None, None] + ev_b[None, None, :]  # (a, ., b)
            per_i = 8 * 4 * nva * nj * nvb
            step = max(1, min(ni_all, int(max_memory_mb * 2**20 // max(per_i, 1))))
            for i0 in range(0, ni_all, step):
                i1 = min(i0 + step, ni_all)
                T = trnblas.gemm(1.0, Bi[i0:i1].reshape((i1 - i0) * nva, naux), Bjf, transB=True,
                                 precision=_PRECISION.get())
                T = T.view(i1 - i0, nva, nj, nvb).double()
                D = (eo_i[i0:i1, None, None, None] + eo_j[None, None, :, None]) - vv[None]
                if s == t:
                    e_ss += 0.5 * float((T * (T - T.permute(0, 3, 2, 1)) / D).sum())
                else:
                    e_os += float((T * T / D).sum())
            progress.show("energy", k + 1, 3)
    return e_ss + e_os, e_ss, e_os


def df_factors(mf, auxbasis=None, *, frozen=None, max_memory=None):
    """Density-fitted factors ``(B, eps_occ, eps_vir)`` of a converged closed-shell PySCF mean field.

    ``B[i, a, Q] = sum_P (ia|P) [L^{-T}]_PQ`` with ``J = L L^T`` the Cholesky
    factor of the auxiliary Coulomb metric (or ``J^{-1/2}`` without the
    linearly dependent part when ``J`` is numerically singular), so that
    ``(ia|jb) ~= sum_Q B[i,a,Q] B[j,b,Q]`` -- the same fit PySCF's DFMP2
    makes. The stages are those of :func:`df_mp2` up to ``fit``.

    Parameters
    ----------
    mf : pyscf.scf.hf.RHF
        Converged restricted Hartree-Fock (density-fitted or not).
    auxbasis : str or dict, optional
        Default: what PySCF's ``DFMP2(mf)`` takes (:func:`aux_basis`).
    frozen : int or list of int, optional
        The lowest ``frozen`` orbitals, or the listed orbital indices, stay
        out of the correlation treatment (PySCF's ``frozen``).
    max_memory : float, optional
        MiB for the integral blocks (default ``mf.max_memory``).

    Returns
    -------
    B : (nocc, nvir, naux) float64 tensor
    eps_occ : (nocc,) float64 tensor
    eps_vir : (nvir,) float64 tensor
        Active orbitals only.

    Raises
    ------
    ImportError
        PySCF is missing (``pip install 'trnsci[chem]'``).
    ValueError
        Open-shell or unconverged ``mf``; ``frozen`` out of range.
    """
    where = "df_factors"
    _pyscf()
    c_occ, c_vir, eo, ev, _ = _orbitals(mf, frozen, where)
    mm = _max_memory(max_memory, getattr(mf, "max_memory", 4000), where)
    auxmol, _ = _auxmol(mf, auxbasis)
    B = _build_B(mf.mol, auxmol, c_occ, c_vir, mm, {}, {}, _Progress(False, ""))
    return B, torch.from_numpy(eo), torch.from_numpy(ev)


def df_mp2(mf, *, auxbasis=None, frozen=None, dtype=torch.float64, backend=None, max_memory=None,
           progress=True, pair_energies=False, process_group=None, precision=None, device=None) -> DFMP2Result:
    """DF-MP2 energy of a converged mean field, stage by stage across the suite.

    Parameters
    ----------
    mf : pyscf.scf.hf.RHF, pyscf.scf.uhf.UHF or trnsci.chem.SCFResult
        Converged restricted (closed-shell MP2) or unrestricted (PySCF's
        DFUMP2) Hartree-Fock, plain or density-fitted, or the result of
        :func:`trnsci.chem.scf` (whose fitted integrals are reused).
    auxbasis : str or dict, optional
        RI basis. Default: the one PySCF's ``pyscf.mp.dfmp2.DFMP2(mf)``
        takes -- ``mf.with_df``'s basis for a density-fitted mean field,
        else the MP2-fit basis (cc-pVDZ -> cc-pVDZ-RI, def2-SVP ->
        def2-SVP-RI); see :func:`aux_basis`.
    frozen : int or list of int, optional
        Frozen orbitals as in PySCF (an int freezes the lowest ones).
    dtype : torch.dtype
        dtype of ``B`` in the energy stage: float64 (default; agrees with
        PySCF to round-off), float32 or bfloat16 (what the NKI kernel takes).
        Integrals, metric and fit are always float64.
    backend : str, optional
        Backend for the suite's operations in this call ("auto", "torch",
        "nki", "simulator"); default: the current setting.
    max_memory : float, optional
        MiB for the intermediates (integral blocks, energy blocks); default
        ``mf.max_memory``. ``B`` itself (``8 nocc nvir naux`` bytes) must fit.
    progress : bool
        Show a progress bar on stderr when it is a terminal.
    pair_energies : bool
        Also return the ``(nocc, nocc)`` pair energies.
    process_group : torch.distributed.ProcessGroup, optional
        Share the work among this group's ranks (every rank calls with the
        same ``mf``): integrals split by auxiliary shells, fit and energy by
        occupied orbitals, one all-reduce of the pair energies; every rank
        gets the same result. ``torch.distributed.group.WORLD`` for all
        ranks. See :mod:`trnsci.chem_distributed` and docs/distributed.md.
    precision : {None, "default", "fp64"}, optional
        ``"fp64"`` (with ``dtype`` float64): every trnblas GEMM of the
        pipeline (AO->MO, the eigen-fit's product, the ``(ia|jb)`` blocks of
        the energy) runs at ``trnblas.gemm(..., precision="fp64")``; on the
        device path (backends ``"nki"``/``"simulator"``) that puts them on
        the float32 GEMM kernel through exact integer slices (Ozaki scheme,
        float64 accumulation on the host; the closed-shell energy then sums
        its ``(ia|jb)`` blocks on the host in float64 instead of the fused
        float32 kernel). On torch it changes nothing (float64 throughout).
        docs/chem.md gives the measured agreement with PySCF.
    device : str or torch.device, optional
        A device (e.g. ``"neuron"``) that holds ``B``: the AO->MO GEMMs and
        the pair energies run as kernels on the resident operands (backend
        ``"auto"``/``"nki"``; float32 with ``dtype`` float32/bfloat16).
        Restricted mean fields; not with ``process_group`` or
        ``precision="fp64"``. None (default) or ``"cpu"``: the host path.

    Returns
    -------
    DFMP2Result
        ``e_corr``, ``e_tot = mf.e_tot + e_corr``, per-stage ``timings``
        and ``backends`` (stages: :data:`STAGES`).

    Raises
    ------
    ImportError
        PySCF is not installed (``pip install 'trnsci[chem]'``).
    TypeError
        ``mf`` is not a PySCF mean field after ``kernel()``; bad ``dtype``,
        ``max_memory`` or ``precision``.
    ValueError
        ROHF or unconverged ``mf``; ``frozen`` out of range; ``precision``
        not one of its values, or ``"fp64"`` with a ``dtype`` below float64.

    Notes
    -----
    Cost: integrals ``O(nao^2 naux)``; AO->MO ``2 nocc nao naux (nao +
    nvir)`` flops; fit ``nocc nvir naux^2``; energy ``nocc^2 nvir^2 naux``
    (``j <= i`` only). The module docstring lists the stages.

    Examples
    --------
    >>> from pyscf import gto, scf
    >>> import trnsci.chem
    >>> mol = gto.M(atom="H 0 0 0; F 0 0 0.917", basis="cc-pvdz", verbose=0)
    >>> mf = scf.RHF(mol).run()
    >>> r = trnsci.chem.df_mp2(mf, progress=False)
    >>> round(r.e_corr, 5)   # PySCF DFMP2(mf).kernel()[0] gives the same to 1e-12
    -0.20378
    >>> sorted(r.backends) == sorted(trnsci.chem.STAGES)
    True
    """
    where = "df_mp2"
    precision = _check_precision(precision, _check_dtype(dtype, where), where)
    target = _check_device(device, where)
    if target is not None and (process_group is not None or precision is not None):
        raise ValueError(f"{where}: device= is not available with process_group or precision='fp64' yet")
    if process_group is not None:
        if precision is not None:
            raise ValueError(f"{where}: precision='fp64' is not available with process_group yet")
        from trnsci.chem_distributed import df_mp2_distributed

        return df_mp2_distributed(mf, process_group, auxbasis=auxbasis, frozen=frozen, dtype=dtype,
                                  backend=backend, max_memory=max_memory, pair_energies=pair_energies)
    _pyscf()
    dtype = _check_dtype(dtype, where)
    if _is_unrestricted(mf):
        if target is not None:
            raise ValueError(f"{where}: device= supports restricted (closed-shell) mean fields only yet")
        with _precision_scope(precision):
            return _df_ump2(mf, auxbasis, frozen, dtype, backend, max_memory, progress, where)
    t_start = time.perf_counter()
    c_occ, c_vir, eo, ev, nfrozen = _orbitals(mf, frozen, where)
    mm = _max_memory(max_memory, getattr(mf, "max_memory", 4000), where)
    auxmol, aux = _auxmol(mf, auxbasis)
    timings: dict = {}
    backends: dict = {}
    bar = _Progress(progress, f"DF-MP2 {mf.mol.nao_nr()} bf")
    try:
        with _backend_scope(backend), _device_scope(target), _ao_dtype(dtype), _precision_scope(precision):
            cderi = _cached_cderi(mf, auxbasis)
            if cderi is not None:
                B = _B_from_cderi(cderi, c_occ, c_vir, timings, backends)
            else:
                B = _build_B(mf.mol, auxmol, c_occ, c_vir, mm, timings, backends, bar)
            eo_t, ev_t = torch.from_numpy(eo), torch.from_numpy(ev)
            if target is not None:  # B (if not built there), the orbital energies and the energy kernel there
                B, eo_t, ev_t = B.to(dtype).to(target), eo_t.to(dtype).to(target), ev_t.to(dtype).to(target)
            e, pairs = _energy(B.to(dtype), eo_t, ev_t, mm, timings, backends, bar)
            if pair_energies and pairs.device.type != "cpu":
                pairs = pairs.cpu()
    finally:
        bar.close()
    timings = {k: timings[k] for k in STAGES}
    timings["total"] = time.perf_counter() - t_start
    backends = {k: backends[k] for k in STAGES}
    return DFMP2Result(
        e_corr=e, e_tot=float(mf.e_tot) + e, e_hf=float(mf.e_tot), nao=mf.mol.nao_nr(), naux=B.shape[2],
        nocc=B.shape[0], nvir=B.shape[1], nfrozen=nfrozen, auxbasis=aux, dtype=dtype,
        timings=timings, backends=backends, pair_energies=pairs if pair_energies else None,
    )


def _df_ump2(mf, auxbasis, frozen, dtype, backend, max_memory, progress, where) -> DFMP2Result:
    """Open-shell DF-MP2 (PySCF's ``DFUMP2``) of a converged UHF: per-spin ``B``, then :func:`_ump2_energy`."""
    t_start = time.perf_counter()
    spins, nfrozen = _orbitals_u(mf, frozen, where)
    mm = _max_memory(max_memory, getattr(mf, "max_memory", 4000), where)
    auxmol, aux = _auxmol(mf, auxbasis)
    timings: dict = {}
    backends: dict = {}
    bar = _Progress(progress, f"DF-UMP2 {mf.mol.nao_nr()} bf")
    try:
        with _backend_scope(backend), _ao_dtype(dtype):
            cderi = _cached_cderi(mf, auxbasis)
            live = [s for s in spins if s[0].shape[1]]  # a spin without electrons has no B
            if cderi is not None:
                got = [_B_from_cderi(cderi, co, cv, timings, backends) for co, cv, _, _ in live]
            else:
                got = _build_Bs(mf.mol, auxmol, [(co, cv) for co, cv, _, _ in live], mm, timings, backends, bar)
            naux = got[0].shape[2]
            it = iter(got)
            Bs = [next(it) if s[0].shape[1] else torch.empty(0, s[1].shape[1], naux, dtype=torch.float64)
                  for s in spins]
            e, e_ss, e_os = _ump2_energy(Bs, [torch.from_numpy(x[2]) for x in spins],
                                         [torch.from_numpy(x[3]) for x in spins], dtype, mm, timings, backends, bar)
    finally:
        bar.close()
    timings = {k: timings[k] for k in STAGES}
    timings["total"] = time.perf_counter() - t_start
    backends = {k: backends[k] for k in STAGES}
    return DFMP2Result(
        e_corr=e, e_tot=float(mf.e_tot) + e, e_hf=float(mf.e_tot), nao=mf.mol.nao_nr(), naux=Bs[0].shape[2],
        nocc=(Bs[0].shape[0], Bs[1].shape[0]), nvir=(Bs[0].shape[1], Bs[1].shape[1]), nfrozen=nfrozen,
        auxbasis=aux, dtype=dtype, timings=timings, backends=backends, kind="uhf", e_ss=e_ss, e_os=e_os,
    )


def df_mp2_from_tensors(B, eps_occ, eps_vir, *, dtype=None, backend=None, max_memory=None,
                        pair_energies=False) -> DFMP2Result:
    """DF-MP2 energy from density-fitted integrals ``B[i, a, Q]`` (the ``energy`` stage of :func:`df_mp2`).

    Parameters
    ----------
    B : (nocc, nvir, naux) tensor or ndarray
        ``(ia|jb) = sum_Q B[i,a,Q] B[j,b,Q]``; float64, float32 or bfloat16.
    eps_occ : (nocc,) tensor or ndarray
        Occupied orbital energies.
    eps_vir : (nvir,) tensor or ndarray
        Virtual orbital energies, all above ``eps_occ.max()``.
    dtype : torch.dtype, optional
        Cast ``B`` to this dtype first (default: keep it).
    backend, max_memory, pair_energies
        As in :func:`df_mp2` (``max_memory`` default 512 MiB).

    Returns
    -------
    DFMP2Result
        ``e_tot``/``e_hf``/``nao`` are None; ``timings``/``backends`` hold
        the ``energy`` stage.

    Raises
    ------
    ValueError
        A wrong-shaped argument (named), empty dimensions, virtual energies
        not above the occupied ones.
    TypeError
        Non-tensor arguments or unsupported dtypes.

    Examples
    --------
    >>> import torch, trnsci.chem
    >>> g = torch.Generator().manual_seed(0)
    >>> B = 0.1 * torch.randn(3, 5, 8, dtype=torch.float64, generator=g)
    >>> r = trnsci.chem.df_mp2_from_tensors(B, -1 - torch.arange(3.0).double(), 1 + torch.arange(5.0).double())
    >>> r.e_corr < 0, (r.nocc, r.nvir, r.naux)
    (True, (3, 5, 8))
    """
    where = "df_mp2_from_tensors"
    from trnsci import validate

    B = validate.tensor(B, "B", where)
    eps_occ = validate.tensor(eps_occ, "eps_occ", where)
    eps_vir = validate.tensor(eps_vir, "eps_vir", where)
    if B.ndim != 3:
        raise ValueError(f"{where}: B must be 3-D (nocc, nvir, naux), got shape {tuple(B.shape)}")
    if dtype is not None:
        B = B.to(_check_dtype(dtype, where))
    mm = _max_memory(max_memory, 512.0, where)
    timings: dict = {}
    backends: dict = {}
    t0 = time.perf_counter()
    with _backend_scope(backend):
        e, pairs = _energy(B, eps_occ, eps_vir, mm, timings, backends, _Progress(False, ""))
    timings["total"] = time.perf_counter() - t0
    nocc, nvir, naux = B.shape
    return DFMP2Result(e_corr=e, naux=naux, nocc=nocc, nvir=nvir, dtype=B.dtype, timings=timings,
                       backends=backends, pair_energies=pairs if pair_energies else None)


# The density-fitted SCF lives in its own module (it uses the helpers above).
from trnsci.chem_scf import SCF_STAGES, ConvergenceWarning, SCFResult, scf  # noqa: E402, F401
