"""Density-fitted Hartree-Fock (RHF/UHF) on the suite: :func:`trnsci.chem.scf`.

PySCF supplies the one-electron integrals, the initial guess and, once, the
density-fitting integrals; everything in the SCF cycle is the suite's.

Stages (keys of :attr:`SCFResult.timings` and ``.backends``):

``int1e``
    Overlap ``S``, core Hamiltonian ``h`` and the initial density (PySCF).
``metric``
    The auxiliary Coulomb metric ``J_PQ = (P|Q)`` (PySCF's ``int2c2e``) and
    its Cholesky factor ``J = L L^T`` (:func:`trnsolver.cholesky`); when
    ``J`` is not numerically positive definite, ``J^{-1/2}`` from
    :func:`trnsolver.eigh` without eigenvalues ``<= 1e-10``.
``int3c``
    Three-centre integrals ``(mn|P)`` of blocks of auxiliary shells sized to
    ``max_memory`` (PySCF's ``int3c2e``, packed ``m >= n``).
``fit``
    ``L^{-1} (P|mn)`` by one triangular solve (:func:`trnblas.trsm`): the
    fitted integrals ``b^P_mn`` with ``(mn|ls) ~= sum_P b^P_mn b^P_ls``.
``jk``
    Per cycle: ``J_mn = sum_P b^P_mn (sum_ls b^P_ls D_ls)`` (two GEMMs on
    the packed integrals) and, per spin with occupied orbitals ``C``,
    ``K = sum_P (b^P C)(b^P C)^T`` (one GEMM ``C^T b`` and one SYRK).
``refine``
    Device path only (backend ``"nki"``/``"simulator"``, where ``jk`` runs
    trnblas's float32 kernels): the float64 host J/K builds after the
    float32 cycles have converged to ``DEVICE_CONV_TOL``/``_GRAD`` -- one
    more diagonalisation and energy (``precision="default"``), or float64
    cycles to ``conv_tol`` (``precision="fp64"``).
``diag``
    Per cycle: DIIS extrapolation of the Fock matrix (Pulay's commutator
    error ``F D S - S D F``), ``F' = X^T F X`` with ``X = L_S^{-T}``
    (GEMMs), :func:`trnsolver.eigh`, ``C = X C'``.

The iteration follows PySCF's ``hf.kernel`` step for step: diagonalise the
(extrapolated) Fock matrix, occupy by aufbau, build J/K and the energy, test
``|dE| < conv_tol`` and ``|g| < conv_tol_grad`` (default ``sqrt(conv_tol)``)
with ``g`` the occupied-virtual Fock block, and after convergence one more
diagonalisation of the un-extrapolated Fock matrix.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import numbers
import sys
import time
import warnings
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import torch

from trnsci.iterative import ConvergenceWarning

__all__ = ["SCFResult", "scf", "SCF_STAGES", "ConvergenceWarning"]

#: Stage names (keys of ``SCFResult.timings``), in pipeline order.
SCF_STAGES = ("int1e", "metric", "int3c", "fit", "jk", "refine", "diag")

_GUESSES = ("minao", "atom", "huckel", "1e", "hcore", "sap")
_KINDS = ("auto", "rhf", "uhf")
_PRECISIONS = ("default", "fp64")

#: Device path: the float32-kernel cycles stop at |dE| below this (Eh) ...
DEVICE_CONV_TOL = 1e-6
#: ... and an orbital-gradient norm below this; float64 host refinement follows.
DEVICE_CONV_TOL_GRAD = 1e-4


@dataclass
class SCFResult:
    """The outcome of :func:`scf`.

    Attributes
    ----------
    e_tot : float
        Total Hartree-Fock energy (Eh), nuclear repulsion included.
    converged : bool
    kind : str
        ``"rhf"`` or ``"uhf"``.
    mo_energy, mo_coeff, mo_occ : ndarray
        As PySCF's: ``(nmo,)``, ``(nao, nmo)``, ``(nmo,)`` for RHF; a
        leading spin axis of 2 for UHF.
    mol : pyscf.gto.Mole
    auxbasis : object
        The fitting basis (PySCF's JK-fit default when none is given).
    auxmol : pyscf.gto.Mole
        The built auxiliary molecule.
    nao, naux : int
    cycles : int
        SCF iterations run.
    grad_norm : float
        Norm of the orbital gradient at the end.
    timings, backends : dict
        Seconds and where each stage ran (:data:`SCF_STAGES`, and ``total``).
    precision : str
    history : list of dict
        Per cycle: ``cycle``, ``e_tot``, ``delta_e``, ``grad_norm``.
    ranks : int
        Processes that computed it.
    bytes_sent : dict or None
        With ``process_group``: bytes this rank sent per step.
    """

    e_tot: float
    converged: bool
    kind: str
    mo_energy: np.ndarray
    mo_coeff: np.ndarray
    mo_occ: np.ndarray
    mol: object = None
    auxbasis: object = None
    auxmol: object = None
    nao: int = 0
    naux: int = 0
    cycles: int = 0
    grad_norm: float = float("nan")
    timings: dict = field(default_factory=dict)
    backends: dict = field(default_factory=dict)
    precision: str = "default"
    history: list = field(default_factory=list)
    ranks: int = 1
    bytes_sent: dict | None = None
    max_memory: float = 4000.0
    _cderi: np.ndarray | None = field(default=None, repr=False)

    @property
    def with_df(self):
        """What PySCF's density-fitted mean fields carry: ``auxbasis``, ``auxmol`` and the fitted ``_cderi``
        ``(naux, nao (nao + 1) / 2)`` -- so :func:`trnsci.chem.df_mp2` reuses them."""
        return SimpleNamespace(auxbasis=self.auxbasis, auxmol=self.auxmol, _cderi=self._cderi)

    @property
    def e_nuc(self) -> float:
        return float(self.mol.energy_nuc())

    def to_pyscf(self):
        """A PySCF density-fitted ``RHF``/``UHF`` holding these orbitals, energy and fitted integrals.

        PySCF's post-HF methods then start from it (``pyscf.mp.dfmp2.DFMP2``,
        ``pyscf.mp.dfump2.DFUMP2``, ``mf.nuc_grad_method()``, ...); its
        ``with_df`` reuses the fitted integrals without recomputing them.
        """
        from pyscf import scf as pscf

        mf = (pscf.RHF if self.kind == "rhf" else pscf.UHF)(self.mol).density_fit(auxbasis=self.auxbasis)
        mf.with_df.auxmol = self.auxmol
        mf.with_df._cderi = self._cderi
        mf.max_memory = self.max_memory
        mf.mo_energy, mf.mo_coeff, mf.mo_occ = self.mo_energy, self.mo_coeff, self.mo_occ
        mf.e_tot, mf.converged = self.e_tot, self.converged
        return mf

    def __str__(self) -> str:
        head = (f"DF-{self.kind.upper()} E_tot = {self.e_tot:.12f} Eh, "
                f"{'converged' if self.converged else 'NOT converged'} in {self.cycles} cycles")
        stages = ", ".join(f"{k} {v:.3f} s ({self.backends.get(k, '?')})"
                           for k, v in self.timings.items() if k != "total")
        return f"{head}\n  nao={self.nao} naux={self.naux}\n  {stages}"


# ------------------------------------------------------------------ checks

def _check_mol(mol, where):
    _, gto, _ = C._pyscf()
    if not isinstance(mol, gto.Mole):
        raise TypeError(f"{where}: mol must be a pyscf.gto.Mole (e.g. gto.M(atom=..., basis=...)), "
                        f"got {type(mol).__name__}")
    if getattr(mol, "_built", True) is False or mol.nbas == 0:
        raise ValueError(f"{where}: mol has no basis functions; build it with a basis PySCF has (mol.build())")
    if getattr(mol, "cart", False):
        raise ValueError(f"{where}: mol.cart=True (Cartesian basis functions) is not supported")
    return mol


def _check_kind(kind, mol, where):
    if not isinstance(kind, str) or kind.lower() not in _KINDS:
        raise ValueError(f"{where}: kind must be one of {_KINDS}, got {kind!r}")
    kind = kind.lower()
    if kind == "auto":
        return "rhf" if mol.spin == 0 else "uhf"
    if kind == "rhf":
        if mol.nelectron % 2:
            raise ValueError(f"{where}: kind='rhf' needs an even number of electrons, the molecule has "
                             f"{mol.nelectron} (charge {mol.charge}); use kind='uhf' (or 'auto')")
        if mol.spin != 0:
            raise ValueError(f"{where}: kind='rhf' needs a singlet (mol.spin=0), got mol.spin={mol.spin}; "
                             "use kind='uhf'")
    return kind


def _positive(x, name, where, integer=False, allow_zero=False):
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral if integer else numbers.Real):
        raise TypeError(f"{where}: {name} must be {'an int' if integer else 'a number'}, got {type(x).__name__}")
    if not (x >= 0 if allow_zero else x > 0) or (not integer and not math.isfinite(x)):
        raise ValueError(f"{where}: {name} must be {'non-negative' if allow_zero else 'positive'}, got {x!r}")
    return x


def _check_precision(precision, where):
    if precision not in _PRECISIONS:
        raise ValueError(f"{where}: precision must be one of {_PRECISIONS}, got {precision!r}")
    return precision


# ------------------------------------------------------------------ integrals

def _fitted_integrals(mol, auxmol, max_memory_mb, timings, backends, aux_range=None):
    """Packed fitted integrals ``b (naux, npair)``, ``b^P_mn = sum_Q [L^{-1}]_PQ (Q|mn)``.

    ``aux_range=(s0, s1, p0, p1)`` limits the rows to one rank's auxiliary shells
    (the metric's factor is then applied by the caller's all-gather; see
    :mod:`trnsci.chem_distributed`): the raw ``(P|mn)`` rows are returned.
    """
    import trnblas

    nao = mol.nao_nr()
    npair = nao * (nao + 1) // 2
    naux = auxmol.nao_nr()
    with C._stage("metric", timings, backends):
        j2c = torch.from_numpy(auxmol.intor("int2c2e", hermi=1))
        kind, M, where = C._factor_metric(j2c)
    if backends["metric"] == "torch":
        backends["metric"] = where
    s_lo, s_hi = (0, auxmol.nbas) if aux_range is None else aux_range[:2]
    p_lo = 0 if aux_range is None else aux_range[2]
    p_hi = naux if aux_range is None else aux_range[3]
    raw = np.empty((p_hi - p_lo, npair))
    budget = max_memory_mb * 2**20 - 8 * (2 * naux * npair)
    max_aux = max(1, int(budget / (8 * 2 * npair))) if math.isfinite(budget) else naux
    read = C._int3c_reader(mol, auxmol)
    loc = auxmol.ao_loc_nr()
    sub = SimpleNamespace(nbas=s_hi - s_lo, ao_loc_nr=lambda: loc[s_lo:s_hi + 1] - loc[s_lo])
    for s0, s1, q0, q1 in C._aux_blocks(sub, max_aux):
        with C._stage("int3c", timings, backends, "pyscf"):
            raw[q0:q1] = read(s_lo + s0, s_lo + s1).T
    if aux_range is not None:
        return raw, (kind, M)
    with C._stage("fit", timings, backends):
        b = _apply_fit(kind, M, torch.from_numpy(raw), trnblas)
    return np.ascontiguousarray(b.numpy()), (kind, M)


def _apply_fit(kind, M, raw, trnblas):
    if kind == "cd":  # L b = raw
        return trnblas.trsm(1.0, M, raw, side="left", uplo="lower")
    return trnblas.gemm(1.0, M, raw, transA=True)


# ------------------------------------------------------------------ J and K

class _JK:
    """J and K builders over the fitted integrals (packed for J, ``(nao, naux, nao)`` for K).

    ``device=True``: the GEMMs/SYRK take float32 operands, so on backend
    ``"nki"``/``"simulator"`` they run on trnblas's kernels (float64 operands
    always run on the host); results come back as float64.
    """

    def __init__(self, cderi: np.ndarray, nao: int, max_memory_mb: float, device: bool = False, target=None):
        _, _, lib = C._pyscf()
        self.target = target  # torch.device the float32 factors live on (scf(device=...)), or None
        self.nao = nao
        self.packed = torch.from_numpy(cderi)  # (naux, npair)
        self.naux = cderi.shape[0]
        self.tril = torch.tril_indices(nao, nao)
        self.diag_mask = (self.tril[0] == self.tril[1])
        need = 8 * self.naux * nao * nao
        self.max_memory = max_memory_mb
        self.full = None
        if need <= max_memory_mb * 2**20 - cderi.nbytes:
            u = torch.from_numpy(lib.unpack_tril(cderi))  # (naux, nao, nao), symmetric in m, n
            self.full = u.permute(1, 0, 2).contiguous()     # (nao, naux, nao)
            del u
        self.device = False
        self._f32 = {}
        self.set_device(device)

    def set_device(self, device: bool) -> None:
        self.device = bool(device)
        if self.device and not self._f32:
            self._f32["packed"] = self._put(self.packed.float())
            if self.full is not None:
                self._f32["full"] = self._put(self.full.float())

    def _put(self, t):
        return t if self.target is None else t.to(self.target)

    def _cast(self, t):
        return self._put(t.float()) if self.device else t

    def _home(self, t):
        """A result back on the host in float64 (one transfer from a resident device)."""
        return t.cpu().double() if t.device.type != "cpu" else t.double()

    def _blocks(self):
        """``(nao, nb, nao)`` blocks of the unpacked fitted integrals."""
        if self.full is not None:
            yield self._f32["full"] if self.device else self.full
            return
        _, _, lib = C._pyscf()
        nb = max(1, int(self.max_memory * 2**20 / 3 / (8 * self.nao * self.nao)))
        for p0 in range(0, self.naux, nb):
            u = torch.from_numpy(lib.unpack_tril(self.packed[p0:p0 + nb].numpy()))
            yield self._cast(u.permute(1, 0, 2).contiguous())

    def j(self, dm: torch.Tensor) -> torch.Tensor:
        """``J[D]`` for a symmetric ``D``: ``rho = b D``, ``J = b^T rho`` on the packed triangle."""
        import trnblas

        x = dm[self.tril[0], self.tril[1]] * 2.0
        x[self.diag_mask] *= 0.5
        b = self._f32["packed"] if self.device else self.packed
        rho = trnblas.gemm(1.0, b, self._cast(x[:, None]))
        jt = self._home(trnblas.gemm(1.0, b, rho, transA=True)[:, 0])
        J = torch.zeros(self.nao, self.nao, dtype=torch.float64)
        J[self.tril[0], self.tril[1]] = jt
        J[self.tril[1], self.tril[0]] = jt
        return J

    def k(self, cpos: torch.Tensor, cneg: torch.Tensor | None = None) -> torch.Tensor:
        """``K = sum_P b^P (Cp Cp^T - Cn Cn^T) b^P`` (``D = Cp Cp^T - Cn Cn^T``)."""
        K = torch.zeros(self.nao, self.nao, dtype=torch.float64)
        for c, sign in ((cpos, 1.0), (cneg, -1.0)):
            if c is None or c.shape[1] == 0:
                continue
            c = self._cast(c)
            for L3 in self._blocks():
                if self.device:  # kernels: one GEMM and one SYRK per block
                    K += sign * self._home(_k_part(c, L3, (0, L3.shape[1]), home=False))
                    continue
                # host: auxiliary ranges spread over single-threaded workers (C._parallel), each reading
                # only its own slice of the integrals once; the parts are summed
                pieces = C._split(L3.shape[1], C._NTHREADS())
                out = [None] * len(pieces)
                C._parallel(functools.partial(_store, out, functools.partial(_k_part, c, L3), pieces),
                            range(len(pieces)))
                for o in out:
                    K += sign * o
        return K


def _k_part(c, L3, rng, home=True):
    """``sum_{P in rng} (b^P c)(b^P c)^T`` from ``L3 (nao, naux, nao)``: one GEMM ``c^T b``, one SYRK."""
    import trnblas

    nao = L3.shape[0]
    p0, p1 = rng
    Lm = L3[:, p0:p1, :].reshape(nao, (p1 - p0) * nao)  # a view: rows strided by naux*nao
    Y = trnblas.gemm(1.0, c, Lm, transA=True)  # (nocc, nb*nao): rows i of C^T b
    K = trnblas.syrk(1.0, Y.view(c.shape[1] * (p1 - p0), nao), trans=True, fill="full")
    return K.double() if home else K


def _store(out, fn, items, k):
    """``out[k] = fn(items[k])`` (a worker's share of a sum)."""
    out[k] = fn(items[k])


@contextlib.contextmanager
def _torch_one_thread():
    """torch at one thread in the block (the per-cycle ``nao x nao`` products are too small to gain)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _one_thread(fn, *args):
    """``fn(*args)`` with torch and OpenBLAS at one thread: an ``nao x nao`` eigensolve per cycle is too
    small to gain from threads, and on a shared machine their barriers cost 10-30x (docs/chem.md)."""
    from trnsci import hostblas

    n = torch.get_num_threads()
    if n == 1:
        return hostblas.call(fn, *args)
    torch.set_num_threads(1)
    try:
        return hostblas.call(fn, *args)
    finally:
        torch.set_num_threads(n)


def _device_active() -> bool:
    """True when trnblas's operations go to NKI kernels (backend "nki" or "simulator")."""
    import trnblas

    return str(trnblas.get_backend()) in ("nki", "simulator")


def _split_density(dm: torch.Tensor):
    """``(Cp, Cn)`` with ``dm = Cp Cp^T - Cn Cn^T`` (eigen-decomposition; |w| <= 1e-14 |w|max dropped)."""
    import trnsolver

    w, V = trnsolver.eigh(0.5 * (dm + dm.T))
    tol = 1e-14 * max(float(w.abs().max()), 1.0)
    pos, neg = w > tol, w < -tol
    return V[:, pos] * w[pos].sqrt(), (V[:, neg] * (-w[neg]).sqrt() if bool(neg.any()) else None)


# ------------------------------------------------------------------ DIIS

class _DIIS:
    """Pulay's DIIS on the Fock matrix with commutator errors (space of ``n`` vectors)."""

    def __init__(self, n: int = 8):
        self.n = n
        self.f: list = []
        self.e: list = []

    def update(self, f: torch.Tensor, err: torch.Tensor) -> torch.Tensor:
        self.f.append(f.clone())
        self.e.append(err.reshape(-1).clone())
        if len(self.f) > self.n:
            self.f.pop(0)
            self.e.pop(0)
        m = len(self.f)
        E = torch.stack(self.e)
        H = np.zeros((m + 1, m + 1))
        H[0, 1:] = H[1:, 0] = 1.0
        H[1:, 1:] = (E @ E.T).numpy()
        g = np.zeros(m + 1)
        g[0] = 1.0
        w, v = np.linalg.eigh(H)
        keep = np.abs(w) > 1e-14
        c = (v[:, keep] / w[keep]) @ (v[:, keep].T @ g)
        out = torch.zeros_like(f)
        for ci, fi in zip(c[1:], self.f):
            out += float(ci) * fi
        return out


# ------------------------------------------------------------------ the SCF

def _aufbau(e: torch.Tensor, n: int, value: float) -> torch.Tensor:
    occ = torch.zeros_like(e)
    occ[torch.argsort(e, stable=True)[:n]] = value
    return occ


class _Progress:
    def __init__(self, progress, label):
        self.fn = progress if callable(progress) else None
        self.tty = bool(progress) and not callable(progress) and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
        self.label = label

    def cycle(self, info):
        if self.fn is not None:
            self.fn(dict(info))
        if self.tty:
            sys.stderr.write(f"\r{self.label} cycle {info['cycle']:3d}  E = {info['e_tot']:.10f}  "
                             f"dE = {info['delta_e']:.1e}  |g| = {info['grad_norm']:.1e}   ")
            sys.stderr.flush()

    def close(self):
        if self.tty:
            sys.stderr.write("\r" + " " * 78 + "\r")
            sys.stderr.flush()


def scf(mol, *, kind="auto", auxbasis=None, conv_tol=1e-9, conv_tol_grad=None, max_cycle=100,
        init_guess="minao", level_shift=0, diis=True, diis_space=8, precision="default", backend=None,
        max_memory=None, progress=False, process_group=None, device=None) -> SCFResult:
    """Density-fitted RHF or UHF with the suite's J/K builds and diagonalisations.

    Parameters
    ----------
    mol : pyscf.gto.Mole
        Built molecule (spherical basis).
    kind : {"auto", "rhf", "uhf"}
        ``"auto"``: RHF for a singlet (``mol.spin == 0``), else UHF.
    auxbasis : str or dict, optional
        JK fitting basis; default PySCF's ``df.make_auxbasis(mol)`` (what
        ``scf.RHF(mol).density_fit()`` takes, e.g. cc-pVDZ-JKFIT).
    conv_tol : float
        Energy change below which (with the gradient test) the SCF stops.
    conv_tol_grad : float, optional
        Orbital-gradient norm bound; default ``sqrt(conv_tol)`` (PySCF's).
    max_cycle : int
    init_guess : {"minao", "atom", "huckel", "1e", "hcore", "sap"}
        PySCF's initial guess of that name.
    level_shift : float
        Shift (Eh) of the virtual orbitals during the iterations.
    diis : bool
        Pulay DIIS extrapolation of the Fock matrix (``diis_space`` vectors).
    precision : {"default", "fp64"}
        On the device path (backend ``"nki"``/``"simulator"``) the cycles
        run J/K on trnblas's float32 kernels until ``|dE| < 1e-6`` and
        ``|g| < 1e-4``, then the host refines in float64: ``"default"``
        one diagonalisation and energy (two float64 J/K builds; the energy
        is stationary, so its error is second order in the float32 one),
        ``"fp64"`` float64 cycles to ``conv_tol``. The host path is
        float64 throughout either way.
    backend : str, optional
        Backend of the suite's operations in this call.
    max_memory : float, optional
        MiB for the integrals (default ``mol.max_memory``).
    progress : bool or callable
        True: one status line per cycle on stderr when it is a terminal; a
        callable gets a dict (``cycle``, ``e_tot``, ``delta_e``, ``grad_norm``)
        after every cycle.
    process_group : torch.distributed.ProcessGroup, optional
        Split the auxiliary index among the group's ranks
        (:mod:`trnsci.chem_distributed`); every rank gets the same result.
    device : str or torch.device, optional
        A device (e.g. ``"neuron"``) to hold the fitted integrals, in
        float32, for the cycles: the J/K GEMMs and SYRK run as kernels on
        the resident factors (backend ``"auto"`` or ``"nki"``), then the
        host refines in float64 as for ``precision``. Per cycle the density
        vector and occupied orbitals go to the device and J and K come back
        (``2 + 2 * spins`` transfers); DIIS, ``eigh`` and the energy stay
        on the host. None (default) or ``"cpu"``: as without it.

    Returns
    -------
    SCFResult
        ``e_tot``, ``converged``, orbitals, timings/backends;
        ``.to_pyscf()`` gives PySCF's object.

    Raises
    ------
    TypeError
        ``mol`` is not a PySCF molecule; a non-numeric option.
    ValueError
        ``kind="rhf"`` for an odd electron count or non-singlet; an
        auxiliary basis PySCF does not have; bad option values.

    Warns
    -----
    ConvergenceWarning
        Not converged in ``max_cycle`` cycles (with the last energy and
        gradient norm); the result has ``converged=False``.

    Examples
    --------
    >>> from pyscf import gto
    >>> import trnsci.chem
    >>> mol = gto.M(atom="H 0 0 0; F 0 0 0.917", basis="cc-pvdz", verbose=0)
    >>> r = trnsci.chem.scf(mol)
    >>> r.converged, round(r.e_tot, 6)   # PySCF: scf.RHF(mol).density_fit().kernel()
    (True, -100.019401)
    """
    where = "scf"
    mol = _check_mol(mol, where)
    kind = _check_kind(kind, mol, where)
    _positive(conv_tol, "conv_tol", where)
    if conv_tol_grad is not None:
        _positive(conv_tol_grad, "conv_tol_grad", where)
    _positive(max_cycle, "max_cycle", where, integer=True, allow_zero=True)
    _positive(diis_space, "diis_space", where, integer=True)
    if isinstance(level_shift, (bool, np.bool_)) or not isinstance(level_shift, numbers.Real):
        raise TypeError(f"{where}: level_shift must be a number, got {type(level_shift).__name__}")
    if not isinstance(diis, (bool, np.bool_)):
        raise TypeError(f"{where}: diis must be True or False, got {type(diis).__name__}")
    if not isinstance(init_guess, str) or init_guess.lower() not in _GUESSES:
        raise ValueError(f"{where}: init_guess must be one of {_GUESSES}, got {init_guess!r}")
    precision = _check_precision(precision, where)
    if process_group is not None:
        import torch.distributed as dist

        if not isinstance(process_group, dist.ProcessGroup):
            raise TypeError(f"{where}: process_group must be a torch.distributed.ProcessGroup "
                            f"(e.g. dist.group.WORLD), got {type(process_group).__name__}")
        if not dist.is_initialized():
            raise ValueError(f"{where}: process_group given but torch.distributed is not initialized")
    mm = C._max_memory(max_memory, getattr(mol, "max_memory", 4000), where)
    df, _, _ = C._pyscf()
    aux = df.make_auxbasis(mol) if auxbasis is None else auxbasis
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            auxmol = df.addons.make_auxmol(mol, aux)
    except (KeyError, RuntimeError, ValueError, TypeError, OSError) as exc:
        msg = str(exc).strip().splitlines()
        raise ValueError(f"{where}: auxbasis {aux!r}: PySCF has no such basis for this molecule's elements "
                         f"({msg[0] if msg else type(exc).__name__})") from None
    if auxmol.nbas == 0:
        raise ValueError(f"{where}: auxbasis {aux!r} gives no auxiliary functions for this molecule")
    target = C._check_device(device, where)
    if target is not None and process_group is not None:
        raise ValueError(f"{where}: device= is not available with process_group yet")
    with C._backend_scope(backend):
        return _run(mol, kind, aux, auxmol, float(conv_tol),
                    float(conv_tol_grad) if conv_tol_grad is not None else math.sqrt(conv_tol),
                    int(max_cycle), init_guess.lower(), float(level_shift), bool(diis), int(diis_space),
                    precision, mm, progress, process_group, target)


def _init_density(mol, kind, key):
    from pyscf import scf as pscf

    mf = (pscf.RHF if kind == "rhf" else pscf.UHF)(mol)
    mf.verbose = 0
    dm = np.asarray(mf.get_init_guess(mol, key))
    return torch.from_numpy(np.ascontiguousarray(dm, dtype=np.float64))


def _run(mol, kind, aux, auxmol, conv_tol, conv_tol_grad, max_cycle, guess, shift, use_diis, diis_space,
         precision, mm, progress, process_group, target=None):
    t_start = time.perf_counter()
    timings: dict = {}
    backends: dict = {}
    with C._stage("int1e", timings, backends, "pyscf"):
        from pyscf.scf import hf as pyscf_hf

        S = torch.from_numpy(np.asarray(mol.intor_symmetric("int1e_ovlp"), dtype=np.float64))
        h = torch.from_numpy(np.asarray(pyscf_hf.get_hcore(mol), dtype=np.float64))
        dm = _init_density(mol, kind, guess)
        e_nuc = float(mol.energy_nuc())
    ranks = 1
    traffic = None
    counted = contextlib.ExitStack()
    if process_group is not None:
        import torch.distributed as dist

        from trnsci import distributed as D

        ranks = dist.get_world_size(process_group)
        traffic = counted.enter_context(D.counting())
    with counted:
        return _iterate(mol, kind, aux, auxmol, conv_tol, conv_tol_grad, max_cycle, guess, shift, use_diis, diis_space,
                        precision, mm, progress, process_group, t_start, timings, backends, S, h, dm, e_nuc,
                        ranks, traffic, target)


def _iterate(mol, kind, aux, auxmol, conv_tol, conv_tol_grad, max_cycle, guess, shift, use_diis, diis_space,
             precision, mm, progress, process_group, t_start, timings, backends, S, h, dm, e_nuc, ranks, traffic,
             target=None):
    import trnblas
    import trnsolver

    nao = mol.nao_nr()
    rows = None
    if process_group is not None:
        from trnsci import distributed as D
        from trnsci.chem_distributed import scf_integrals_distributed

        cderi, rows = scf_integrals_distributed(mol, auxmol, mm, timings, backends, process_group)
    else:
        cderi, _ = _fitted_integrals(mol, auxmol, mm, timings, backends)
    device = _device_active() or target is not None
    jk = _JK(cderi if rows is None else np.ascontiguousarray(cderi[rows[0]:rows[1]]), nao, mm, device=device,
             target=target)

    with C._stage("diag", timings, backends):
        Ls = trnsolver.cholesky(S)
        X = trnblas.trsm(1.0, Ls, torch.eye(nao, dtype=torch.float64), side="left", uplo="lower", trans=True)

    def eig(F):
        Fp = trnblas.gemm(1.0, X, trnblas.gemm(1.0, F, X), transA=True)
        w, V = _one_thread(trnsolver.eigh, 0.5 * (Fp + Fp.T))
        return w, trnblas.gemm(1.0, X, V)

    nalpha, nbeta = mol.nelec
    spins = 1 if kind == "rhf" else 2

    def occupy(e):
        if spins == 1:
            return _aufbau(e[0], nalpha, 2.0)[None]
        return torch.stack([_aufbau(e[0], nalpha, 1.0), _aufbau(e[1], nbeta, 1.0)])

    def density(Cs, occ):
        return torch.stack([(Cs[s][:, occ[s] > 0] * occ[s][occ[s] > 0]) @ Cs[s][:, occ[s] > 0].T
                            for s in range(spins)])

    def veff(Dm, Cs=None, occ=None):
        """``(V per spin, E_2e)``; ``Cs``/``occ`` give K from orbitals, else from a density's eigenvectors.
        On the device path the float64 host builds of the refinement are stage ``refine``."""
        with C._stage("jk" if jk.device or not device else "refine", timings, backends):
            Jm = jk.j(Dm.sum(0))
            Ks = []
            for s in range(spins):
                if Cs is not None:
                    sel = occ[s] > 0
                    cp, cn = Cs[s][:, sel] * occ[s][sel].sqrt(), None
                else:
                    cp, cn = _split_density(Dm[s])
                Ks.append(jk.k(cp, cn))
            if process_group is not None:  # this rank's auxiliary rows only: sum over ranks
                buf = torch.stack([Jm, *Ks])
                t0 = time.perf_counter()
                D.all_reduce(buf, group=process_group, kind="jk")
                timings["comm"] = timings.get("comm", 0.0) + time.perf_counter() - t0
                Jm, Ks = buf[0], list(buf[1:])
            if spins == 1:
                V = (Jm - 0.5 * Ks[0])[None]
            else:
                V = torch.stack([Jm - Ks[0], Jm - Ks[1]])
            e2 = 0.5 * float((Dm * V).sum())
        return V, e2

    def energy(Dm, e2):
        return float((Dm.sum(0) * h).sum()) + e2 + e_nuc

    def grad(Cs, occ, F):
        g2 = 0.0
        for s in range(spins):
            o, v = occ[s] > 0, occ[s] == 0
            g = Cs[s][:, v].T @ F[s] @ Cs[s][:, o]
            g2 += float((g * (2.0 if spins == 1 else 1.0)).square().sum())
        return math.sqrt(g2)

    Dm = dm[None] if spins == 1 else dm
    V, e2 = veff(Dm)
    e_tot = energy(Dm, e2)
    dis = _DIIS(diis_space) if use_diis else None
    bar = _Progress(progress, f"DF-{kind.upper()} {nao} bf")
    history = []
    converged = False
    gnorm = float("nan")
    cycle = 0
    Cs = occ = None
    # the device path iterates on float32 kernels to (DEVICE_CONV_TOL, DEVICE_CONV_TOL_GRAD), then refines on the host
    tol_e, tol_g = ((max(conv_tol, DEVICE_CONV_TOL), max(conv_tol_grad, DEVICE_CONV_TOL_GRAD)) if device
                    else (conv_tol, conv_tol_grad))
    refined = not device
    try:
        for cycle in range(1, max_cycle + 1):
            last_e = e_tot
            with C._stage("diag", timings, backends), _torch_one_thread():
                F = h[None] + V
                if dis is not None:
                    err = torch.cat([(F[s] @ Dm[s] @ S - S @ Dm[s] @ F[s]).reshape(-1) for s in range(spins)])
                    F = dis.update(F, err)
                if shift:
                    half = Dm * 0.5 if spins == 1 else Dm
                    F = F + shift * (S[None] - S[None] @ half @ S[None])
                pairs = [eig(F[s]) for s in range(spins)]
                mo_e = torch.stack([p[0] for p in pairs])
                Cs = torch.stack([p[1] for p in pairs])
                occ = occupy(mo_e)
                Dm = density(Cs, occ)
            V, e2 = veff(Dm, Cs, occ)
            e_tot = energy(Dm, e2)
            with _torch_one_thread():
                gnorm = grad(Cs, occ, h[None] + V)
            info = {"cycle": cycle, "e_tot": e_tot, "delta_e": e_tot - last_e, "grad_norm": gnorm}
            history.append(info)
            bar.cycle(info)
            if abs(e_tot - last_e) < tol_e and gnorm < tol_g:
                if refined:
                    converged = True
                    break
                # device phase done: J/K of this density in float64 on the host from here on
                jk.set_device(False)
                refined = True
                V, e2 = veff(Dm, Cs, occ)
                e_tot = energy(Dm, e2)
                gnorm = grad(Cs, occ, h[None] + V)
                if precision == "default":  # the final diagonalisation below is the one refinement step
                    converged = True
                    break
                tol_e, tol_g = conv_tol, conv_tol_grad
                dis = _DIIS(diis_space) if use_diis else None  # its Fock matrices carried float32 error
    finally:
        bar.close()
        jk.set_device(False)
    if max_cycle == 0 or Cs is None:  # orbitals of the initial Fock matrix
        with C._stage("diag", timings, backends):
            pairs = [eig((h[None] + V)[s]) for s in range(spins)]
            mo_e = torch.stack([p[0] for p in pairs])
            Cs = torch.stack([p[1] for p in pairs])
            occ = occupy(mo_e)
    if converged:  # one more diagonalisation of the un-extrapolated, unshifted Fock matrix
        last_e = e_tot
        with C._stage("diag", timings, backends):
            F = h[None] + V
            pairs = [eig(F[s]) for s in range(spins)]
            mo_e = torch.stack([p[0] for p in pairs])
            Cs = torch.stack([p[1] for p in pairs])
            occ = occupy(mo_e)
            Dm = density(Cs, occ)
        V, e2 = veff(Dm, Cs, occ)
        e_tot = energy(Dm, e2)
        gnorm = grad(Cs, occ, h[None] + V)
        converged = abs(e_tot - last_e) < 10 * conv_tol or gnorm < 3 * conv_tol_grad
    else:
        warnings.warn(f"scf: DF-{kind.upper()} did not converge in {max_cycle} cycles: last E_tot = {e_tot:.12f} Eh, "
                      f"|dE| = {abs(history[-1]['delta_e']) if history else float('nan'):.2e}, "
                      f"gradient norm = {gnorm:.2e} (conv_tol={conv_tol:g}, conv_tol_grad={conv_tol_grad:g}); "
                      "try a larger max_cycle, level_shift, or another init_guess", ConvergenceWarning, stacklevel=3)
    timings["total"] = time.perf_counter() - t_start
    for k in SCF_STAGES:
        timings.setdefault(k, 0.0)
        backends.setdefault(k, "torch" if k != "refine" else "-")
    timings = {k: timings[k] for k in (*SCF_STAGES, *(("comm",) if "comm" in timings else ()), "total")}
    backends = {k: backends[k] for k in SCF_STAGES}
    sq = (lambda t: t[0].numpy()) if spins == 1 else (lambda t: t.numpy())
    return SCFResult(
        e_tot=e_tot, converged=bool(converged), kind=kind, mo_energy=sq(mo_e), mo_coeff=sq(Cs), mo_occ=sq(occ),
        mol=mol, auxbasis=aux, auxmol=auxmol, nao=nao, naux=cderi.shape[0], cycles=cycle, grad_norm=gnorm,
        timings=timings, backends=backends, precision=precision, history=history, ranks=ranks,
        bytes_sent=None if traffic is None else dict(traffic.by_kind), max_memory=mm, _cderi=cderi,
    )


# last: trnsci.chem imports this module at its end, and this one uses chem's helpers at call time
from trnsci import chem as C  # noqa: E402
