"""Array-level CSR/COO primitives on plain tensors, shared by the formats, the torch lowerings and the NKI
lowerings.

Nothing here validates: callers pass index arrays they built or checked. On the CPU, for the dtypes
SciPy's compiled sparse kernels handle (float32/64, complex64/128) and when no autograd graph is being
recorded, the work runs in SciPy's ``sparsetools`` on zero-copy NumPy views of the tensors, the faster
kernels on the CPU (docs/perf-notes.md#design-sparse-host). Every other case (another device, autograd,
bf16) runs pure torch. The measured CPU routes built on these (SpMV, SpMM) are in ``_host.py``.
"""

from __future__ import annotations

import numpy as np
import torch

from trnsci.dispatch import traceable_as

try:  # SciPy is optional at run time: without it everything runs in torch.
    from scipy.sparse import _sparsetools as sparsetools
except ImportError:  # pragma: no cover - scipy is in the dev extra
    sparsetools = None

HOST_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)


def host_ok(*tensors: torch.Tensor | None) -> bool:
    """True when SciPy's compiled kernels may run on these tensors."""
    if sparsetools is None or torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
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
        sparsetools.csr_tocsc(m, n, np_view(row_ptrs), np_view(col_indices), np_view(values), indptr, indices, data)
        return torch.from_numpy(data), torch.from_numpy(indices), torch.from_numpy(indptr)
    rows = row_indices(row_ptrs, nnz)
    key = col_indices * max(m, 1) + rows
    order = torch.argsort(key, stable=True)
    return values[order], rows[order], ptrs_from_sorted(col_indices[order], n)


def csr_to_dense(values, col_indices, row_ptrs, shape):
    """The dense (m, n) matrix of CSR arrays (entries at a repeated position summed)."""
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
        nnz_c = sparsetools.csr_matmat_maxnnz(m, n, a_p, a_c, b_p, b_c)
        if nnz_c >= 2**31 - 1 and idx is np.int32:
            idx = np.int64
            a_p, a_c, b_p, b_c = (x.astype(idx) for x in (a_p, a_c, b_p, b_c))
        cp = np.empty(m + 1, dtype=idx)
        cc = np.empty(nnz_c, dtype=idx)
        cv = np.empty(nnz_c, dtype=np_view(va).dtype)
        sparsetools.csr_matmat(m, n, a_p, a_c, np_view(va), b_p, b_c, np_view(vb), cp, cc, cv)
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
    sparsetools.csr_plus_csr(m, n, a_p, a_c, np.ones(na, np.int8), b_p, b_c, np.full(nb, 2, np.int8), cp,
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
    sparsetools.csr_plus_csr(m, n, a_p, a_c, a * alpha if alpha != 1 else a, b_p, b_c, b * beta if beta != 1 else b,
                     cp, cj, cx)
    if int(cp[-1]) != n_union:
        # entries summed to zero and were dropped: merge codes (A 1, B 2), then place the values by them
        code = np.empty(na + nb, np.int8)
        sparsetools.csr_plus_csr(m, n, a_p, a_c, np.ones(na, np.int8), b_p, b_c, np.full(nb, 2, np.int8), cp, cj, code)
        code = code[:int(cp[-1])]
        cx = np.zeros(code.size, dtype=a.dtype)
        cx[code != 2] = a * alpha if alpha != 1 else a
        cx[code >= 2] += b * beta if beta != 1 else b
    k = int(cp[-1])
    return (torch.from_numpy(cx[:k]), torch.from_numpy(cj[:k]), torch.from_numpy(cp))
