"""The measured CPU routes of trnsparse's torch lowerings, on :mod:`trnsci.routes`.

``A @ x`` for a CSR ``A`` on the host runs SciPy's ``sparsetools`` (the default) or torch's CSR product,
whichever measured faster on this machine for the shape class (docs/perf-notes.md#design-spmv); the
array-level primitives they build on are in :mod:`trnsparse.arrays`.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from trnsci import routes as _routes

from .arrays import host_ok, np_view, row_indices, sparsetools


def spmv(values, col_indices, row_ptrs, shape, x):
    """A @ x for a CSR A and a dense 1-D or 2-D x (no scaling)."""
    m, n = shape
    if x.dim() == 1:
        k = None
    else:
        k = x.shape[1]
    if host_ok(values, x) and values.dtype == x.dtype:
        if _spmv_route(values, col_indices, row_ptrs, shape, x) == "torch_csr":
            return _torch_csr(values, col_indices, row_ptrs, shape, x)
        return _sparsetools_spmv(values, col_indices, row_ptrs, shape, x)
    if values.numel() == 0 or m == 0 or n == 0:
        shape_out = (m,) if k is None else (m, k)
        z = torch.zeros(shape_out, dtype=torch.promote_types(values.dtype, x.dtype), device=x.device)
        return z + 0 * x.sum() if x.requires_grad else z
    # torch route: gather-multiply then a segment sum over rows (autograd-friendly for values and x).
    rows = row_indices(row_ptrs, values.numel())
    if k is None:
        prod = values * x[col_indices]
        return torch.zeros(m, dtype=prod.dtype, device=x.device).index_add(0, rows, prod)
    prod = values[:, None] * x[col_indices]
    return torch.zeros(m, k, dtype=prod.dtype, device=x.device).index_add(0, rows, prod)


def spmv_runner(values, col_indices, row_ptrs, shape, x):
    """A callable ``run(x2)`` computing ``A @ x2`` by the route :func:`spmv` takes for ``x``, with the
    per-call work done once (NumPy views, or torch's CSR tensor), for any ``x2`` of ``x``'s dtype,
    shape and device -- or None when ``x`` does not take a measured host route.

    ``run`` reads the arrays given here: the caller drops it when they change."""
    if not (host_ok(values, x) and values.dtype == x.dtype):
        return None
    return _runner(_spmv_route(values, col_indices, row_ptrs, shape, x), values, col_indices, row_ptrs, shape, x)


def _runner(route, values, col_indices, row_ptrs, shape, x):
    if route == "torch_csr":
        return _csr_tensor(values, col_indices, row_ptrs, shape).matmul
    m, n = shape
    vals, cols, ptrs = np_view(values), np_view(col_indices), np_view(row_ptrs)
    dt = vals.dtype
    if x.dim() == 1:
        def run(x2):
            y = np.zeros(m, dtype=dt)
            sparsetools.csr_matvec(m, n, ptrs, cols, vals, np_view(x2), y)
            return torch.from_numpy(y)
        return run
    k = x.shape[1]

    def run_k(x2):
        y = np.zeros((m, k), dtype=dt)
        sparsetools.csr_matvecs(m, n, k, ptrs, cols, vals, np_view(x2).ravel(), y.ravel())
        return torch.from_numpy(y)
    return run_k


def _sparsetools_spmv(values, col_indices, row_ptrs, shape, x):
    m, n = shape
    xv = np_view(x)
    if x.dim() == 1:
        y = np.zeros(m, dtype=xv.dtype)
        sparsetools.csr_matvec(m, n, np_view(row_ptrs), np_view(col_indices), np_view(values), xv, y)
    else:
        k = x.shape[1]
        y = np.zeros((m, k), dtype=xv.dtype)
        sparsetools.csr_matvecs(m, n, k, np_view(row_ptrs), np_view(col_indices), np_view(values), xv.ravel(),
                                y.ravel())
    return torch.from_numpy(y)


def _torch_csr(values, col_indices, row_ptrs, shape, x):
    """torch's CSR product (MKL sparse BLAS in the CPU wheels)."""
    return _csr_tensor(values, col_indices, row_ptrs, shape) @ x


def _csr_tensor(values, col_indices, row_ptrs, shape):
    """A torch sparse CSR tensor on these arrays (no copy when the index dtypes agree)."""
    if not _csr_warned:  # torch warns once per process that CSR tensors are "beta": not the caller's concern
        import warnings

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            _csr_warned.append(True)
            return _csr_tensor(values, col_indices, row_ptrs, shape)
    return torch.sparse_csr_tensor(row_ptrs, col_indices.to(row_ptrs.dtype), values, size=tuple(shape),
                                   check_invariants=False)


_csr_warned: list = []


# Measured routes (trnsci.routes) for A @ x on the host: SciPy's sparsetools (the default) or torch's
# CSR product, whichever is faster on this machine for the shape class (docs/perf-notes.md#design-spmv).
SPMV_MEASURE_MIN_WORK = 1 << 16  # nnz * k below this: sparsetools, untimed
_SPMV_WARMUP = 3  # extra calls of each candidate before a measurement (see _spmv_route)
_spmv_routes = _routes.Memo()  # (shape class, threads) -> route, emptied with the choices


def bucket(v: int) -> int:
    """The size class of ``v >= 1``: the power of two at or above it."""
    return 1 << max(0, (int(v) - 1).bit_length())


def _spmv_route(values, col_indices, row_ptrs, shape, x) -> str:
    k = 1 if x.dim() == 1 else x.shape[1]
    nnz = values.numel()
    key = (x.dim(), bucket(shape[0]), bucket(shape[1]), bucket(nnz), bucket(k), values.dtype,
           torch.get_num_threads())
    hit = _spmv_routes.get(key)
    if hit is not None:
        return hit
    from trnsci import routes

    # each candidate timed as a settled call runs it: its per-matrix work (NumPy views, torch's CSR
    # tensor) done before the clock starts
    names = ("sparsetools", "torch_csr") if values.dtype in (torch.float32, torch.float64) else ("sparsetools",)
    runners = {name: _runner(name, values, col_indices, row_ptrs, shape, x) for name in names}
    cands = {name: functools.partial(r, x) for name, r in runners.items()}
    cls = ("spmv" if x.dim() == 1 else "spmm", *key[1:5], str(values.dtype).replace("torch.", ""))
    worth = nnz * k >= SPMV_MEASURE_MIN_WORK
    if worth and len(cands) > 1 and routes.current_mode() == "measure" and routes.lookup("trnsparse.spmm", cls) is None:
        # torch's first products of a new shape are slower than later ones: warm both candidates up
        # before timing them (docs/perf-notes.md#design-spmv)
        for _ in range(_SPMV_WARMUP):
            for fn in cands.values():
                fn()
    # robust with more than one thread: a round in which torch's OpenMP product waited at a barrier
    # for a busy core keeps the single-threaded sparsetools (with one thread a slow round is a
    # preemption, as likely to hit either candidate: not evidence)
    c = routes.choose("trnsparse.spmm", cls, cands, default="sparsetools", worth_timing=worth, robust=key[-1] > 1)
    return _spmv_routes.remember(key, c.route)


#: Bumped whenever the routes may have changed: a runner settled under another generation is stale.
generation = [0]


def _forget_routes():
    generation[0] += 1


_routes.on_change(_forget_routes)
