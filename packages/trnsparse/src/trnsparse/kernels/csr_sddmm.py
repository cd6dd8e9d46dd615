"""SDDMM on a CSR pattern: ``out_e = X[row_e, :] . Y[:, col_e]`` for every stored entry e.

Same SELL-128-sigma layout as :mod:`.csr_spmm` (built once per pattern and
cached on the matrix): slice ``s`` holds ``pc_s`` pieces on the partitions,
``w_s`` slots each.

Dimensions
----------
``cols`` : ``[slots]`` int32 -- the column of each slot (``n`` = padding).
``prow`` : ``[P]`` int32 -- the row of each partition of each slice, slices
           one after the other (``P = sum pc_s``).
``x``    : ``[m, k]`` fp32, ``yt`` : ``[n, k]`` fp32 (Y transposed: a column of
           Y is one contiguous row to gather).
Output ``out`` : ``[slots]`` float32 -- the sampled products in slot order
(a padding slot holds 0, or NaN where the X row is not finite); the lowering
reads only the real slots, mapping them back to CSR order (``out[pos]``).
Compile-time: ``slices`` (the layout's ``(pc, w, R, full, off, ooff, loff)``).

Pseudocode
----------
::

    for each slice s with w > 0 (partition offset p0):
        C = cols[s]                              # [pc, w] int32, 1 DMA
        r = prow[p0 : p0 + pc]                   # [pc, 1], 1 DMA
        for each k chunk (<= 512 wide):
            Xr = x[r, chunk]                     # indirect-DMA gather, [pc, kc]
            for each slot chunk (wc slots, wc * kc <= 4096):
                G[:, j, :] = yt[C[:, j], chunk]  # one indirect gather per slot (padding skipped, memset 0)
                D = sum_k G * broadcast(Xr)      # tensor_tensor + tensor_reduce -> [pc, wc]
                acc[:, slots] (+)= D             # first k chunk writes, later ones add
        out[s] = acc                             # 1 DMA, [pc, w]

Closed forms (per slice pc, w, full; kk = ceil(k / 512) k chunks of width kc,
wc = max(1, 4096 // kc) slots per chunk, nw = ceil(w / wc) slot chunks;
P = sum pc over slices with w > 0 (slices of empty rows are skipped);
slots = sum pc w; nnz stored entries; all sums over slices with w > 0)
----------------------------------------------------------------------
    HBM bytes read    = 4*slots + 4*P + 4*k*P + 4*k*nnz
    HBM bytes written = 4*slots
    DMA transfers     = sum(3 + kk + kk*w)
    Vector            = sum over slices, k chunks, slot chunks of
                        (2 + [slot chunk has padding] + [not the first k chunk])
    matmul flops      = 0 (the dot products run on the Vector Engine)

The floor of SDDMM is ``8*nnz + 4*k*(m + n)`` (indices and output once, X
and Y once); this kernel reads a column of Y per stored entry (``4 k nnz``),
as SpMM reads a row of B.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import cdiv, tiles

TB = 128
KC = 512      # k columns per chunk
WK = 4096     # slot x k elements per gathered chunk (16 KiB fp32 per partition)


def _chunks(k):
    yield from tiles(k, KC)


def _slot_chunks(w, kc):
    wc = max(1, WK // kc)
    yield from tiles(w, wc)


def csr_sddmm_counts(k, nnz, slices):
    """The closed forms above as a dict."""
    P = sum(s[0] for s in slices if s[1] > 0)
    slots = sum(s[0] * s[1] for s in slices)
    dma = vec = 0
    for _pc, w, _R, full, *_ in slices:
        if w == 0:
            continue
        kk = cdiv(k, KC)
        dma += 3 + kk + kk * w
        for ci, (_k0, kc) in enumerate(_chunks(k)):
            for j0, wc in _slot_chunks(w, kc):
                vec += 2 + (j0 + wc > full) + (ci > 0)
    return {
        "hbm_read_bytes": 4 * slots + 4 * P + 4 * k * P + 4 * k * nnz,
        "hbm_write_bytes": 4 * slots,
        "dma": dma,
        "vector": vec,
        "tensor": 0,
        "gpsimd": 0,
    }


@nki.jit
def csr_sddmm_kernel(cols, prow, x, yt, slices=()):
    """Sampled ``X @ Y`` on the SELL pattern ``slices`` -> ``[slots]`` fp32 in slot order."""
    m, k = x.shape
    slots = cols.shape[0]
    out = nl.ndarray((slots,), dtype=nl.float32, buffer=nl.shared_hbm)
    p0 = 0
    for si in nl.static_range(len(slices)):
        pc, w, R, full, off, ooff, loff = slices[si]
        if w == 0:  # a slice of empty rows: no slot to sample
            p0 += pc
            continue
        ac = nl.ndarray((pc, w), dtype=nl.int32, buffer=nl.sbuf, name="cols")
        nisa.dma_copy(dst=ac, src=cols.ap(pattern=[[w, pc], [1, w]], offset=off))
        pr = nl.ndarray((pc, 1), dtype=nl.int32, buffer=nl.sbuf, name="prow")
        nisa.dma_copy(dst=pr, src=prow.ap(pattern=[[1, pc], [1, 1]], offset=p0))
        acc = nl.ndarray((pc, w), dtype=nl.float32, buffer=nl.sbuf, name="acc")
        for ci, (k0, kc) in enumerate(_chunks(k)):
            xr = nl.ndarray((pc, 1, kc), dtype=nl.float32, buffer=nl.sbuf, name="x_rows")
            nisa.dma_copy(dst=xr, src=x.ap(pattern=[[k, pc], [1, kc]], offset=k0, vector_offset=pr, indirect_dim=0))
            for j0, wc in _slot_chunks(w, kc):
                g = nl.ndarray((pc, wc, kc), dtype=nl.float32, buffer=nl.sbuf, name="y_cols")
                if j0 + wc > full:
                    nisa.memset(g, 0.0)
                for j in nl.static_range(wc):
                    nisa.dma_copy(dst=g[:, j:j + 1, :],
                                  src=yt.ap(pattern=[[k, pc], [1, kc]], offset=k0,
                                            vector_offset=ac[:, j0 + j:j0 + j + 1], indirect_dim=0),
                                  oob_mode=nisa.oob_mode.skip)
                prod = nl.ndarray((pc, wc, kc), dtype=nl.float32, buffer=nl.sbuf, name="prod")
                nisa.tensor_tensor(prod, g, xr.broadcast(1, wc), nl.multiply)
                if ci == 0:
                    nisa.tensor_reduce(acc[:, j0:j0 + wc], nl.add, prod, axis=2)
                else:
                    part = nl.ndarray((pc, wc), dtype=nl.float32, buffer=nl.sbuf, name="part")
                    nisa.tensor_reduce(part, nl.add, prod, axis=2)
                    nisa.tensor_tensor(acc[:, j0:j0 + wc], acc[:, j0:j0 + wc], part, nl.add)
        nisa.dma_copy(dst=out.ap(pattern=[[w, pc], [1, w]], offset=off), src=acc)
        p0 += pc
    return out
