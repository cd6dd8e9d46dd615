"""Benchmark cases for ``trnsci bench``: trnsolver against scipy.linalg,
torch.linalg and scipy.sparse.linalg on the same inputs (see :mod:`trnsci.bench`)."""

from __future__ import annotations

import numpy as np
import scipy.linalg as sl
import scipy.sparse as sp
import scipy.sparse.linalg as spl
import torch

import trnsolver
from trnsci.bench import Case, why


def _sym(n, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, n, generator=g, dtype=dtype)
    return X + X.T


def poisson2d(m: int) -> sp.csr_matrix:
    """The 5-point Laplacian on an m x m grid (n = m^2 unknowns), Dirichlet boundaries."""
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    return (sp.kron(sp.eye(m), T) + sp.kron(T, sp.eye(m))).tocsr()


_SMALL = why("trnsolver-small", "The measured route's call plus trnsolver's ~8-10 us of checks and dispatch, which "
             "weigh most at n = 64; at 2 threads OpenMP/MKL barrier waits decide the ratio")
_TWO_THREADS = why("trnsolver-two-threads", "At 2 threads torch's OpenMP/MKL calls wait at their barrier whenever "
                   "another thread holds a core: the ratio is the load of its moment")


def _note(case: str, n: int) -> str:
    if n > 64:  # within target at one thread in every run here
        return _TWO_THREADS
    return _SMALL if case.startswith(("cholesky", "eigh")) else ""


def _dense_cases(sizes):
    for n in sizes:
        for dt in (torch.float32, torch.float64):
            A = _sym(n, dt, n)
            An = A.numpy()
            tag = f"{n} {str(dt)[6:]}"
            yield Case("trnsolver", f"eigh {tag}", lambda A=A: trnsolver.eigh(A),
                       "scipy eigh", lambda An=An: sl.eigh(An), note=_note("eigh", n))
            yield Case("trnsolver", f"eigh {tag}", lambda A=A: trnsolver.eigh(A),
                       "torch eigh", lambda A=A: torch.linalg.eigh(A), note=_note("eigh", n))
            S = A @ A.T / n + torch.eye(n, dtype=dt)
            Sn = S.numpy()
            yield Case("trnsolver", f"cholesky {tag}", lambda S=S: trnsolver.cholesky(S),
                       "scipy cholesky", lambda Sn=Sn: sl.cholesky(Sn, lower=True), note=_note("cholesky", n))
            b = torch.ones(n, dtype=dt)
            bn = b.numpy()
            yield Case("trnsolver", f"solve {tag}", lambda A=A, b=b: trnsolver.solve(A, b),
                       "scipy solve", lambda An=An, bn=bn: sl.solve(An, bn), note=_TWO_THREADS)


_KRYLOV = why("trnsolver-krylov", "The loop is a measured route (NumPy views, SciPy's sparsetools A x) with SciPy's "
               "stopping rule; a spread above 50% is the load of other processes")


def _krylov_cases(m):
    A = poisson2d(m)
    b = np.ones(A.shape[0])
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr).long(), torch.from_numpy(A.indices).long(),
                                 torch.from_numpy(A.data), A.shape, check_invariants=True)
    bt = torch.from_numpy(b)
    yield Case("trnsolver", f"cg poisson {m}^2", lambda: trnsolver.cg(At, bt, tol=1e-6, maxiter=5000),
               "scipy cg", lambda: spl.cg(A, b, rtol=1e-6, maxiter=5000), note=_KRYLOV)
    # an ILU-type preconditioner object: SciPy's spilu with ILU(0)-like fill (not symmetric, so
    # it pairs with BiCGSTAB/GMRES; CG needs a symmetric M such as trnsparse's ic0)
    ilu = spl.spilu(A.tocsc(), drop_tol=1e-2, fill_factor=1.0)
    Mop = spl.LinearOperator(A.shape, ilu.solve)
    yield Case("trnsolver", f"bicgstab poisson {m}^2", lambda: trnsolver.bicgstab(At, bt, tol=1e-6, maxiter=5000),
               "scipy bicgstab", lambda: spl.bicgstab(A, b, rtol=1e-6, maxiter=5000),
               note=_KRYLOV)
    yield Case("trnsolver", f"bicgstab+ilu poisson {m}^2",
               lambda: trnsolver.bicgstab(At, bt, tol=1e-6, maxiter=5000, M=ilu),
               "scipy bicgstab+ilu", lambda: spl.bicgstab(A, b, rtol=1e-6, maxiter=5000, M=Mop),
               note=_KRYLOV)
    yield Case("trnsolver", f"gmres+ilu poisson {m}^2",
               lambda: trnsolver.gmres(At, bt, tol=1e-6, maxiter=500, M=ilu),
               "scipy gmres+ilu", lambda: spl.gmres(A, b, rtol=1e-6, maxiter=500, M=Mop),
               note=why("trnsolver-gmres", "The Hessenberg updates run on NumPy scalars but the Arnoldi GEMVs are "
                        "still torch calls; at 2 threads OpenMP barrier waits decide the ratio"))


def cases(quick: bool = True):
    """Yield the comparison cases (smaller sizes when ``quick``)."""
    yield from _dense_cases((64, 256) if quick else (64, 256, 512, 1024, 2048))
    yield from _krylov_cases(32 if quick else 256)


def accuracy(quick: bool = True):
    """Error-vs-size points for ``trnsci bench``: ``(op, implementation, n, error)``.

    ``eigh``: eigenvalue error ``max|w - w_ref| / max|w_ref|`` against
    scipy.linalg.eigh of the same symmetric matrix in float64; ``solve``:
    normwise backward error ``||A x - b|| / (||A|| ||x||)`` in float64.
    trnsolver in float32 and float64, torch.linalg float32 alongside.
    """
    sizes = (32, 64, 128) if quick else (32, 64, 128, 256, 512, 1024)
    for n in sizes:
        A = _sym(n, torch.float64, n)
        An = A.numpy()
        w_ref = sl.eigh(An, eigvals_only=True)
        scale = np.abs(w_ref).max()
        b = np.random.default_rng(n).standard_normal(n)
        for dt, name in ((torch.float32, "float32"), (torch.float64, "float64")):
            w = trnsolver.eigh(A.to(dt))[0].double().numpy()
            yield "eigh", f"trnsolver {name}", n, float(np.abs(np.sort(w) - w_ref).max() / scale)
            x = trnsolver.solve(A.to(dt), torch.from_numpy(b).to(dt)).double().numpy()
            yield "solve", f"trnsolver {name}", n, float(np.linalg.norm(An @ x - b) /
                                                         (np.linalg.norm(An, 2) * np.linalg.norm(x)))
        w = torch.linalg.eigvalsh(A.float()).double().numpy()
        yield "eigh", "torch.linalg float32", n, float(np.abs(np.sort(w) - w_ref).max() / scale)
        x = torch.linalg.solve(A.float(), torch.from_numpy(b).float()).double().numpy()
        yield "solve", "torch.linalg float32", n, float(np.linalg.norm(An @ x - b) /
                                                        (np.linalg.norm(An, 2) * np.linalg.norm(x)))
