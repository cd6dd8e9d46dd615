"""CSR SpMV / SpMM kernel on the SELL-128-sigma layout, B rows gathered from HBM: ``C[M, N] = A @ B``.

The lowering runs it only when y's panel cannot stay on chip for
:mod:`.csr_spmv` (which reads x once and gathers on chip; an indirect-DMA
gather of one B row per partition per slot is the slower route whenever
both apply -- docs/trnsparse.md has the figures). Nothing is densified.

Dimensions (HBM), built once per matrix by :mod:`trnsparse.layouts` and cached on it
----------------------------------------------------------------------------------
``vals`` : ``[slots]`` -- A's values in slot order: slice ``s`` is a
           row-major ``[pc_s, w_s]`` block at offset ``off_s`` (one piece of a
           row per partition), zero-padded.
``cols`` : ``[slots]`` int32 -- the column of each slot; padding holds ``K``
           (one past B's last row), which the gather skips.
``orow`` : ``[M]`` int32 -- per slice, the output row of each of its ``R_s`` rows.
``rloc`` : ``[L]`` float32 -- per *split* slice (a row cut into several
           pieces), the slice-local row of each partition (``L`` >= 1; unused
           otherwise).
``b``    : ``[K, N]`` -- the dense operand (a vector is ``[K, 1]``).
fp32. Output ``c`` : ``[M, N]`` float32.
Compile-time: ``slices``, a tuple of ``(pc, w, R, full, off, ooff, loff)``
per slice (``full``: slots ``j < full`` have no padding in any partition;
``loff = -1``: no split row in the slice).

Pseudocode
----------
::

    for each slice s:                         # pc <= 128 pieces on the partitions
        A_v, A_c = vals[s], cols[s]           # 2 DMAs, [pc, w]
        o = orow[s]                           # 1 DMA, [R, 1]
        if split: l = rloc[s]; S = (iota_free(R) == l)     # one-hot [pc, R]
        for each panel of <= 512 columns of B:
            N == 1:  G[:, j] = b[A_c[:, j]]  for j < w      # w indirect-DMA gathers
                     part = sum_j A_v * G                   # tensor_tensor + tensor_reduce
            N > 1:   for j < w: G = b[A_c[:, j], panel]     # gather a B row per partition
                                part (+)= A_v[:, j] * G     # one Vector FMA per slot
            if split: part = S^T @ part       # Tensor Engine sums a row's pieces (PSUM)
            c[o, panel] = part                # indirect-DMA scatter of the slice's rows

Gathers use ``b.ap(pattern, vector_offset=A_c[:, j], indirect_dim=0)`` with
``oob_mode.skip``: padding slots read nothing (their tile is memset to 0
first, only for slots ``j >= full``). Rows are written once each by the
scatter, empty rows included (a piece of length 0 stores a memset zero).

Closed forms (s = 4 bytes, per slice pc, w, R, full, split; P = ceil(N/512)
panels of width npw; nnz stored entries; all sums over slices)
------------------------------------------------------------------------
    HBM bytes read    = 8*sum(pc*w) + 4*M + 4*sum_split(pc) + 4*N*nnz
    HBM bytes written = 4*M*N
    DMA transfers     = sum(2*[w>0] + 1 + split) + P*sum(w + 1)
    Tensor (nc_matmul) = P * #split     (matmul flops 2*N*sum_split(pc*R); the SpMM
                                         work itself, 2*nnz*N, runs on the Vector Engine)
    GpSimd (iota)      = #split
    Vector, N == 1:    sum([w>full] + 2*[w>0] + [w==0]) + 2*#split
            N > 1:     sum(P*(w - full) + P*w + P*[w==0]) + #split*(1 + P)
                       (memsets of padded slots, FMAs, zero pieces, S and PSUM copies)

The HBM floor of any SpMV is ``8*nnz + 4*(K + M)`` (values and indices once,
x and y once); this kernel reads x once per stored entry (the gather),
``12*nnz`` plus padding and the row map -- see docs/trnsparse.md for the
measured ratios.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import cdiv, tile

TB = 128
TN = 512  # columns per panel: one PSUM bank (the split-row combine) and one Vector pass


def panels(N):
    for pn in nl.static_range(cdiv(N, TN)):
        yield tile(pn, N, TN)


def csr_spmm_counts(M, N, nnz, slices):
    """The closed forms above as a dict."""
    P = cdiv(N, TN)
    slots = sum(pc * w for pc, w, *_ in slices)
    nsplit = sum(1 for s in slices if s[6] >= 0)
    split_pc = sum(s[0] for s in slices if s[6] >= 0)
    dma = sum(2 * (w > 0) + 1 + (lo >= 0) + P * (w + 1) for pc, w, R, full, off, oo, lo in slices)
    if N == 1:
        vec = sum((w > full) + 2 * (w > 0) + (w == 0) for pc, w, R, full, *_ in slices) + 2 * nsplit
    else:
        vec = sum(P * (w - full) + P * w + P * (w == 0) for pc, w, R, full, *_ in slices) + nsplit * (1 + P)
    return {
        "hbm_read_bytes": 8 * slots + 4 * M + 4 * split_pc + 4 * N * nnz,
        "hbm_write_bytes": 4 * M * N,
        "dma": dma,
        "tensor": P * nsplit,
        "gpsimd": nsplit,
        "vector": vec,
        "flops": 2 * N * sum(s[0] * s[2] for s in slices if s[6] >= 0),  # the combine matmuls
    }


def _load_block(src, off, pc, w, dtype, name):
    t = nl.ndarray((pc, w), dtype=dtype, buffer=nl.sbuf, name=name)
    nisa.dma_copy(dst=t, src=src.ap(pattern=[[w, pc], [1, w]], offset=off))
    return t


@nki.jit
def csr_spmm_kernel(vals, cols, orow, rloc, b, slices=()):
    """``C = A @ b`` for A in the SELL layout (see the module docstring) -> C [M, N] fp32."""
    K, N = b.shape
    M = orow.shape[0]
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for si in nl.static_range(len(slices)):
        pc, w, R, full, off, ooff, loff = slices[si]
        split = loff >= 0
        if w:
            av = _load_block(vals, off, pc, w, vals.dtype, "a_vals")
            ac = _load_block(cols, off, pc, w, nl.int32, "a_cols")
        ot = nl.ndarray((R, 1), dtype=nl.int32, buffer=nl.sbuf, name="orow")
        nisa.dma_copy(dst=ot, src=orow.ap(pattern=[[1, R], [1, 1]], offset=ooff))
        if split:
            lt = nl.ndarray((pc, 1), dtype=nl.float32, buffer=nl.sbuf, name="rloc")
            nisa.dma_copy(dst=lt, src=rloc.ap(pattern=[[1, pc], [1, 1]], offset=loff))
            io = nl.ndarray((pc, R), dtype=nl.float32, buffer=nl.sbuf, name="iota")
            nisa.iota(io, [[1, R]], offset=0, channel_multiplier=0)
            onehot = nl.ndarray((pc, R), dtype=nl.float32, buffer=nl.sbuf, name="onehot")
            nisa.tensor_scalar(onehot, io, nl.equal, lt)
        for n0, npw in panels(N):
            part = nl.ndarray((pc, npw), dtype=nl.float32, buffer=nl.sbuf, name="part")
            if w == 0:
                nisa.memset(part, 0.0)
            elif N == 1:
                g = nl.ndarray((pc, w), dtype=b.dtype, buffer=nl.sbuf, name="x_gath")
                if w > full:
                    nisa.memset(g, 0.0)
                for j in nl.static_range(w):
                    nisa.dma_copy(dst=g[:, j:j + 1],
                                  src=b.ap(pattern=[[N, pc], [1, 1]], offset=0, vector_offset=ac[:, j:j + 1],
                                           indirect_dim=0),
                                  oob_mode=nisa.oob_mode.skip)
                prod = nl.ndarray((pc, w), dtype=nl.float32, buffer=nl.sbuf, name="prod")
                nisa.tensor_tensor(prod, av, g, nl.multiply)
                nisa.tensor_reduce(part, nl.add, prod, axis=1, keepdims=True)
            else:
                for j in nl.static_range(w):
                    g = nl.ndarray((pc, npw), dtype=b.dtype, buffer=nl.sbuf, name="b_rows")
                    if j >= full:
                        nisa.memset(g, 0.0)
                    nisa.dma_copy(dst=g,
                                  src=b.ap(pattern=[[N, pc], [1, npw]], offset=n0, vector_offset=ac[:, j:j + 1],
                                           indirect_dim=0),
                                  oob_mode=nisa.oob_mode.skip)
                    if j == 0:
                        nisa.tensor_scalar(part, g, nl.multiply, av[:, 0:1])
                    else:
                        nisa.scalar_tensor_tensor(part, g, nl.multiply, av[:, j:j + 1], nl.add, part)
            res = part
            if split:
                acc = nl.ndarray((R, npw), dtype=nl.float32, buffer=nl.psum, name="acc")
                nisa.nc_matmul(acc, onehot, part)
                res = nl.ndarray((R, npw), dtype=nl.float32, buffer=nl.sbuf, name="rows")
                nisa.tensor_copy(res, acc)
            nisa.dma_copy(dst=c.ap(pattern=[[N, R], [1, npw]], offset=n0, vector_offset=ot, indirect_dim=0),
                          src=res)
    return c
