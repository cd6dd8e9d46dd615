"""Host (CPU) array kernels shared by the formats and the ops.

Everything here takes plain tensors and does no validation. On CPU, for
the dtypes SciPy's compiled sparse kernels handle (float32/64,
complex64/128) and when no autograd graph is being recorded, the work runs
in SciPy's ``sparsetools`` on zero-copy NumPy views of the tensors, the
faster kernels on the CPU (docs/perf-notes.md#design-sparse-host). Every
other case (another device, autograd, bf16) runs pure torch.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from trnsci import routes as _routes
from trnsci.dispatch import traceable_as

try:  # SciPy is optional at run time: without it everything runs in torch.
    from scipy.sparse import _sparsetools as _st
except ImportError:  # pragma: no cover - scipy is in the dev extra
    _st = None

HOST_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)


def host_ok(*tensors: torch.Tensor | None) -> bool:
    """True when SciPy's compiled kernels may run on these tensors."""
    if _st is None or torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        return False
    for t in tensors:
        if t is None:
            continue
        if type(t) is not torch.Tensor or t.device.type != "cpu":  # a subclass (fake, functional): torch
            return False
        if t.is_floating_point() or t.is_complex():
            if t.dtype not in HOST_DTYPES:
                return False
    return True


# torch.compile traces the torch path: SciPy's kernels (and the matrix's cached int32 index arrays, whose
# version counters a trace cannot read) are no part of a graph; the eager test above costs nothing more
traceable_as(host_ok, lambda *tensors: False)


def np_view(t: torch.Tensor) -> np.ndarray:
    """A NumPy view of a CPU tensor (contiguous copy only when needed)."""
    return t.detach().resolve_conj().resolve_neg().contiguous().numpy()


def row_indices(row_ptrs: torch.Tensor, nnz: int) -> torch.Tensor:
    """The row index of every stored entry of a CSR matrix (int64)."""
    m = row_ptrs.numel() - 1
    counts = row_ptrs[1:] - row_ptrs[:-1]
    return torch.repeat_interleave(torch.arange(m, device=row_ptrs.device), counts, output_size=nnz)


def ptrs_from_sorted(idx: torch.Tensor, n: int) -> torch.Tensor:
    """Compressed pointers (n+1,) for a sorted index array."""
    ptr = torch.zeros(n + 1, dtype=torch.int64, device=idx.device)
    if idx.numel():
        ptr[1:] = torch.cumsum(torch.bincount(idx, minlength=n), 0)
    return ptr


def coo_canonical(values, rows, cols, shape):
    """Sort row-major and sum duplicates: (values, rows, cols) canonical."""
    m, n = shape
    if values.numel() == 0:
        return values, rows, cols
    key = rows * n + cols
    if bool((key[1:] > key[:-1]).all()):
        return values, rows, cols
    if host_ok(values):
        # NumPy's stable argsort on int64, the faster one on CPU (docs/perf-notes.md#design-spgemm).
        kn = np_view(key)
        order = np.argsort(kn, kind="stable")
        ks = kn[order]
        vs = np_view(values)[order]
        if ks.size > 1 and not (ks[1:] > ks[:-1]).all():
            starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
            vs = np.add.reduceat(vs, starts)
            ks = ks[starts]
        kt = torch.from_numpy(np.ascontiguousarray(ks))
        return torch.from_numpy(np.ascontiguousarray(vs)), kt // n, kt % n
    ks, order = torch.sort(key, stable=True)
    vs = values[order]
    uniq, inverse = torch.unique_consecutive(ks, return_inverse=True)
    if uniq.numel() != ks.numel():
        vs = torch.zeros(uniq.numel(), dtype=values.dtype, device=values.device).index_add(0, inverse, vs)
    return vs, uniq // n, uniq % n


def csr_is_canonical(col_indices, row_ptrs, nnz) -> bool:
    """Column indices strictly increasing inside every row."""
    if nnz < 2:
        return True
    inc = col_indices[1:] > col_indices[:-1]
    # a row boundary lies between entries p-1 and p for p in row_ptrs[1:-1]
    starts = row_ptrs[1:-1]
    starts = starts[(starts > 0) & (starts < nnz)]
    ok = inc.clone()
    ok[starts - 1] = True
    return bool(ok.all())


def csr_transpose(values, col_indices, row_ptrs, shape):
    """CSR of A -> CSR of A^T (i.e. CSC of A); canonical in, canonical out."""
    m, n = shape
    nnz = values.numel()
    if host_ok(values):
        indptr = np.empty(n + 1, dtype=np.int64)
        indices = np.empty(nnz, dtype=np.int64)
        data = np.empty(nnz, dtype=np_view(values).dtype)
        _st.csr_tocsc(m, n, np_view(row_ptrs), np_view(col_indices), np_view(values), indptr, indices, data)
        return torch.from_numpy(data), torch.from_numpy(indices), torch.from_numpy(indptr)
    rows = row_indices(row_ptrs, nnz)
    key = col_indices * max(m, 1) + rows
    order = torch.argsort(key, stable=True)
    return values[order], rows[order], ptrs_from_sorted(col_indices[order], n)


def csr_to_dense(values, col_indices, row_ptrs, shape):
    m, n = shape
    out = torch.zeros(m, n, dtype=values.dtype, device=values.device)
    if values.numel():
        rows = row_indices(row_ptrs, values.numel())
        out.index_put_((rows, col_indices), values, accumulate=True)
    return out


def dense_to_csr(A, threshold):
    """(values, col_indices, row_ptrs) of the entries with not |a| <= threshold (NaN kept)."""
    m, n = A.shape
    if host_ok(A) and not A.requires_grad:
        a = np_view(A)
        mask = a != 0 if threshold == 0 else ~(np.abs(a) <= threshold)
        counts = np.count_nonzero(mask, axis=1)
        idx = np.flatnonzero(mask)
        ptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        vals = a.reshape(-1)[idx]
        cols = idx % n if n else idx
        return torch.from_numpy(np.ascontiguousarray(vals)), torch.from_numpy(cols.astype(np.int64, copy=False)), \
            torch.from_numpy(ptr)
    mask = A != 0 if threshold == 0 else ~(A.abs() <= threshold)
    idx = torch.nonzero(mask.reshape(-1)).reshape(-1)
    counts = mask.sum(1)
    ptr = torch.zeros(m + 1, dtype=torch.int64, device=A.device)
    ptr[1:] = torch.cumsum(counts, 0)
    return A.reshape(-1)[idx], idx % max(n, 1), ptr


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
            _st.csr_matvec(m, n, ptrs, cols, vals, np_view(x2), y)
            return torch.from_numpy(y)
        return run
    k = x.shape[1]

    def run_k(x2):
        y = np.zeros((m, k), dtype=dt)
        _st.csr_matvecs(m, n, k, ptrs, cols, vals, np_view(x2).ravel(), y.ravel())
        return torch.from_numpy(y)
    return run_k


def _sparsetools_spmv(values, col_indices, row_ptrs, shape, x):
    m, n = shape
    xv = np_view(x)
    if x.dim() == 1:
        y = np.zeros(m, dtype=xv.dtype)
        _st.csr_matvec(m, n, np_view(row_ptrs), np_view(col_indices), np_view(values), xv, y)
    else:
        k = x.shape[1]
        y = np.zeros((m, k), dtype=xv.dtype)
        _st.csr_matvecs(m, n, k, np_view(row_ptrs), np_view(col_indices), np_view(values), xv.ravel(), y.ravel())
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


def _bucket(v: int) -> int:
    return 1 << max(0, (int(v) - 1).bit_length())


def _spmv_route(values, col_indices, row_ptrs, shape, x) -> str:
    k = 1 if x.dim() == 1 else x.shape[1]
    nnz = values.numel()
    key = (x.dim(), _bucket(shape[0]), _bucket(shape[1]), _bucket(nnz), _bucket(k), values.dtype,
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


def spgemm(a, b, shape_a, shape_b):
    """CSR x CSR -> canonical CSR (values, col_indices, row_ptrs)."""
    (va, ca, pa), (vb, cb, pb) = a, b
    m, k = shape_a
    n = shape_b[1]
    if host_ok(va, vb) and va.dtype == vb.dtype:
        # SciPy's SMMP kernel; 32-bit indices when they fit (faster: docs/perf-notes.md#design-spgemm),
        # columns left unsorted.
        idx = np.int32 if max(m, k, n, va.numel(), vb.numel()) < 2**31 - 1 else np.int64
        a_p, a_c, b_p, b_c = (np_view(t).astype(idx, copy=False) for t in (pa, ca, pb, cb))
        nnz_c = _st.csr_matmat_maxnnz(m, n, a_p, a_c, b_p, b_c)
        if nnz_c >= 2**31 - 1 and idx is np.int32:
            idx = np.int64
            a_p, a_c, b_p, b_c = (x.astype(idx) for x in (a_p, a_c, b_p, b_c))
        cp = np.empty(m + 1, dtype=idx)
        cc = np.empty(nnz_c, dtype=idx)
        cv = np.empty(nnz_c, dtype=np_view(va).dtype)
        _st.csr_matmat(m, n, a_p, a_c, np_view(va), b_p, b_c, np_view(vb), cp, cc, cv)
        nnz = int(cp[-1])
        # int32 results stay int32 (CSRMatrix._make widens them only when read as col_indices/row_ptrs)
        cc_t, cp_t = torch.from_numpy(cc[:nnz]), torch.from_numpy(cp)
        if idx is np.int64:
            cc_t, cp_t = cc_t.to(torch.int64), cp_t.to(torch.int64)
        return torch.from_numpy(cv[:nnz]), cc_t, cp_t, False
    # torch route: expand every product a_ik * b_kj, then sum duplicates.
    rows_a = row_indices(pa, va.numel())
    cnt = (pb[1:] - pb[:-1])[ca]  # products per stored a entry
    total = int(cnt.sum())
    rep = torch.repeat_interleave(torch.arange(va.numel(), device=va.device), cnt, output_size=total)
    starts = torch.repeat_interleave(pb[ca], cnt, output_size=total)
    offs = torch.arange(total, device=va.device) - torch.repeat_interleave(
        torch.cumsum(cnt, 0) - cnt, cnt, output_size=total)
    pos = starts + offs
    vals = va[rep] * vb[pos]
    vals, rows, cols = coo_canonical(vals, rows_a[rep], cb[pos], (m, n))
    return vals, cols, ptrs_from_sorted(rows, m), True


def _canonical_csr(cols: np.ndarray, ptrs: np.ndarray) -> bool:
    """Columns strictly increasing inside every row (sorted, no duplicates)."""
    if cols.size < 2:
        return True
    inc = cols[1:] > cols[:-1]
    starts = ptrs[1:-1]
    starts = starts[(starts > 0) & (starts < cols.size)]
    inc[starts - 1] = True  # a row's first entry may be smaller than the previous row's last
    return bool(inc.all())


def _index_dtype(*arrays):
    return np.int32 if all(a.dtype == np.int32 for a in arrays) else np.int64


def union_nnz(ca, pa, cb, pb, shape) -> int:
    """The number of positions stored in A or B (canonical CSR index arrays): SciPy's linear merge
    on one-byte codes (1 for A, 2 for B; a sum is never zero, so nothing is dropped)."""
    m, n = shape
    a_c, a_p, b_c, b_p = (np_view(t) for t in (ca, pa, cb, pb))
    idx = _index_dtype(a_c, a_p, b_c, b_p)
    a_c, a_p, b_c, b_p = (x.astype(idx, copy=False) for x in (a_c, a_p, b_c, b_p))
    na, nb = a_c.size, b_c.size
    cp = np.empty(m + 1, idx)
    _st.csr_plus_csr(m, n, a_p, a_c, np.ones(na, np.int8), b_p, b_c, np.full(nb, 2, np.int8), cp,
                     np.empty(na + nb, idx), np.empty(na + nb, np.int8))
    return int(cp[-1])


def union_add(va, ca, pa, vb, cb, pb, shape, alpha, beta, n_union=None, canonical=False):
    """``alpha A + beta B`` on the union pattern by SciPy's linear merge, or None when an operand is not
    canonical (the caller sorts instead).

    Both operands canonical (sorted, no duplicates). SciPy's merge (``csr_plus_csr``) runs on the
    scaled values, int32 indices when given (half the bytes); it drops a position whose sum is exactly
    zero, so its result is the union only when its size is the union's, ``n_union`` (computed here
    when not given: :func:`union_nnz`, a second merge on one-byte codes; callers cache it per
    pattern pair). Otherwise -- an explicit zero or a cancellation -- the codes place the values
    (zeros kept, as in the sorting path). Indices come back int32 when both operands' are.
    ``canonical=True``: the caller knows both are canonical (not checked again)."""
    m, n = shape
    a_c, a_p, b_c, b_p = (np_view(t) for t in (ca, pa, cb, pb))
    if not canonical and not (_canonical_csr(a_c, a_p) and _canonical_csr(b_c, b_p)):
        return None
    idx = _index_dtype(a_c, a_p, b_c, b_p)
    a_c, a_p, b_c, b_p = (x.astype(idx, copy=False) for x in (a_c, a_p, b_c, b_p))
    a, b = np_view(va), np_view(vb)
    na, nb = a.size, b.size
    if n_union is None:
        n_union = union_nnz(ca, pa, cb, pb, shape)
    cp = np.empty(m + 1, idx)
    cj = np.empty(na + nb, idx)
    cx = np.empty(na + nb, a.dtype)
    _st.csr_plus_csr(m, n, a_p, a_c, a * alpha if alpha != 1 else a, b_p, b_c, b * beta if beta != 1 else b,
                     cp, cj, cx)
    if int(cp[-1]) != n_union:
        # entries summed to zero and were dropped: merge codes (A 1, B 2), then place the values by them
        code = np.empty(na + nb, np.int8)
        _st.csr_plus_csr(m, n, a_p, a_c, np.ones(na, np.int8), b_p, b_c, np.full(nb, 2, np.int8), cp, cj, code)
        code = code[:int(cp[-1])]
        cx = np.zeros(code.size, dtype=a.dtype)
        cx[code != 2] = a * alpha if alpha != 1 else a
        cx[code >= 2] += b * beta if beta != 1 else b
    k = int(cp[-1])
    return (torch.from_numpy(cx[:k]), torch.from_numpy(cj[:k]), torch.from_numpy(cp))
