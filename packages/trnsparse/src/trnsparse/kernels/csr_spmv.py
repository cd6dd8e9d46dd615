"""CSR SpMV kernel with x resident on chip: ``y[M] = A @ x`` on a column-blocked ELL-128 layout.

Why this kernel and not a gather from HBM: an indirect DMA moves one HBM row
per partition, so gathering x from HBM is one 4-byte element per partition
per descriptor -- overhead-bound (about 1.3 us per transfer) and 12 bytes per
stored entry. Here x is read from HBM once per call (4 n bytes), replicated
on the 128 partitions by the Tensor Engine (``ones[1, 128]^T @ x_row``), and
gathered on chip by GpSimd (``nc_n_gather``); A streams in as dense
``[128, G*w]`` tiles, one DMA per group of slices. SpMM with several columns
uses :mod:`.csr_spmm` (a B row per partition per gather is a real transfer).

Inputs (HBM), built once per matrix by :func:`trnsparse._sell.build_ell`, cached on it
--------------------------------------------------------------------------------------
``vals``   : ``[slots]`` fp32 -- values in slot order (zero padding). A group
             ``(s0, pc, G, w, off)`` is ``[pc, G, w]`` at ``off``: partition p,
             sub-slice g holds row ``128 (s0 + g) + p``. A long slice
             ``(pc, w, off, toff, chunks)`` is ``[pc, w]``: one piece (at most K
             entries of a long row) per partition.
``cols``   : ``[slots]`` uint32 -- column inside the block; padding holds ``xc``
             (the block width), which points at a zero appended on chip.
``target`` : ``[L, 2]`` fp32 -- per long piece ``(row % 128, row // 128)`` (L >= 1).
``x``      : ``[K, 1]`` fp32.
Output ``y`` : ``[M, 1]`` float32. Compile-time: ``blocks`` (the layout's
``(c0, xc, groups, longs)`` per column block of at most 16384 columns).

Pseudocode
----------
::

    Y[128, S] = 0                                 # y on chip: slice s, partition p = row 128 s + p
    for each column block (c0, xc):
        X[128, xc + 1] = ones^T @ x[c0 : c0 + xc]; X[:, xc] = 0     # 512 columns per matmul
        for each group (s0, pc, G, w):
            V, C = vals[group], cols[group]       # 2 DMAs, [pc, G, w]
            P = V * gather(X, C)                  # nc_n_gather (GpSimd), tensor_tensor
            Y[:pc, s0 : s0 + G] += sum_w P        # tensor_reduce, tensor_tensor
        for each long slice (pieces of rows longer than K):
            V, C, T = ...                         # 3 DMAs
            part = sum_w V * gather(X, C)         # [pc, 1]
            E = (iota_128 == T[:, 0]); for each 512-slice chunk:
                Y[:, chunk] += E^T @ ((iota_chunk == T[:, 1]) * part)   # one-hot matmul
    y = Y                                         # one DMA (+ one for a ragged last slice)

Closed forms (nb column blocks of widths xc_c; groups (pc, G, w); long
slices (pc, w, chunks); slots = sum pc G w + sum pc w; L long pieces;
S = ceil(M / 128); Sf = M // 128)
--------------------------------------------------------------------
    HBM bytes read    = 4*K + 8*slots + 8*L
    HBM bytes written = 4*M
    DMA transfers     = nb + 2*#groups + 3*#long + [Sf > 0] + [M % 128 > 0]
    Tensor (nc_matmul) = sum_c ceil(xc_c / 512) + sum_long #chunks
    Vector            = 2 + sum_c (ceil(xc_c / 512) + 1) + 3*#groups + sum_long (3 + 2*#chunks)
    GpSimd            = #groups + sum_long (1 + #chunks) + [#long > 0]
    matmul flops      = 256*K + 256*sum_long sum_chunks pc*sc

The HBM floor of SpMV is ``8*nnz + 4*(K + M)``; this kernel's excess is the
ELL padding (``8*(slots - nnz)``) and 8 bytes per long piece.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import cdiv

TB = 128
TN = 512


def csr_spmv_counts(M, K, blocks):
    """The closed forms above as a dict (``blocks`` as the kernel takes them)."""
    groups = [g for b in blocks for g in b[2]]
    longs = [q for b in blocks for q in b[3]]
    slots = sum(pc * G * w for _, pc, G, w, _ in groups) + sum(pc * w for pc, w, *_ in longs)
    L = sum(q[0] for q in longs)
    rep = sum(cdiv(b[1], TN) for b in blocks)
    nch = sum(len(q[4]) for q in longs)
    return {
        "hbm_read_bytes": 4 * K + 8 * slots + 8 * L,
        "hbm_write_bytes": 4 * M,
        "dma": len(blocks) + 2 * len(groups) + 3 * len(longs) + (M // TB > 0) + (M % TB > 0),
        "tensor": rep + nch,
        "vector": 2 + rep + len(blocks) + 3 * len(groups) + 3 * len(longs) + 2 * nch,
        "gpsimd": len(groups) + len(longs) + nch + (len(longs) > 0),
        "flops": 256 * K + 256 * sum(q[0] * sc for q in longs for _, sc in q[4]),
    }


def _gather_dot(vals, cols, xrep, pc, G, w, off, name):
    """``sum_j vals * X[cols]`` over the last axis of a [pc, G, w] block -> [pc, G] (fp32)."""
    av = nl.ndarray((pc, G, w), dtype=vals.dtype, buffer=nl.sbuf, name=f"{name}_v")
    nisa.dma_copy(dst=av, src=vals.ap(pattern=[[G * w, pc], [w, G], [1, w]], offset=off))
    ac = nl.ndarray((pc, G * w), dtype=nl.uint32, buffer=nl.sbuf, name=f"{name}_c")
    nisa.dma_copy(dst=ac, src=cols.ap(pattern=[[G * w, pc], [1, G * w]], offset=off))
    g = nl.ndarray((pc, G, w), dtype=nl.float32, buffer=nl.sbuf, name=f"{name}_x")
    nisa.nc_n_gather(g, xrep[0:pc, :], ac)
    prod = nl.ndarray((pc, G, w), dtype=nl.float32, buffer=nl.sbuf, name=f"{name}_p")
    nisa.tensor_tensor(prod, av, g, nl.multiply)
    red = nl.ndarray((pc, G), dtype=nl.float32, buffer=nl.sbuf, name=f"{name}_r")
    nisa.tensor_reduce(red, nl.add, prod, axis=2)
    return red


@nki.jit
def csr_spmv_kernel(vals, cols, target, x, blocks=(), M=0):
    """``y = A @ x`` for A in the column-blocked ELL layout (module docstring) -> y [M, 1] fp32."""
    S = cdiv(M, TB)
    y = nl.ndarray((M, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    Y = nl.ndarray((TB, S), dtype=nl.float32, buffer=nl.sbuf, name="y_tile")
    nisa.memset(Y, 0.0)
    ones = nl.ndarray((1, TB), dtype=nl.float32, buffer=nl.sbuf, name="ones")
    nisa.memset(ones, 1.0)
    any_long = any(b[3] for b in blocks)
    if any_long:
        io = nl.ndarray((TB, TB), dtype=nl.float32, buffer=nl.sbuf, name="iota_p")
        nisa.iota(io, [[1, TB]], offset=0, channel_multiplier=0)
    for bi in nl.static_range(len(blocks)):
        c0, xc, groups, longs = blocks[bi]
        # x block, replicated on every partition (+ a zero the padding slots point at)
        xrow = nl.ndarray((1, xc), dtype=nl.float32, buffer=nl.sbuf, name="x_row")
        nisa.dma_copy(dst=xrow, src=x.ap(pattern=[[1, 1], [1, xc]], offset=c0))
        xrep = nl.ndarray((TB, xc + 1), dtype=nl.float32, buffer=nl.sbuf, name="x_rep")
        for t in nl.static_range(cdiv(xc, TN)):
            t0 = t * TN
            tw = min(TN, xc - t0)
            ps = nl.ndarray((TB, tw), dtype=nl.float32, buffer=nl.psum, name="x_bcast")
            nisa.nc_matmul(ps, ones, xrow[:, t0:t0 + tw])
            nisa.tensor_copy(xrep[:, t0:t0 + tw], ps)
        del xrow  # the row copy is dead once replicated: SBUF holds one x block at a time
        nisa.memset(xrep[:, xc:xc + 1], 0.0)
        for gi in nl.static_range(len(groups)):
            s0, pc, G, w, off = groups[gi]
            red = _gather_dot(vals, cols, xrep, pc, G, w, off, "ell")
            nisa.tensor_tensor(Y[0:pc, s0:s0 + G], Y[0:pc, s0:s0 + G], red, nl.add)
        for li in nl.static_range(len(longs)):
            pc, w, off, toff, chunks = longs[li]
            part = _gather_dot(vals, cols, xrep, pc, 1, w, off, "long")
            tg = nl.ndarray((pc, 2), dtype=nl.float32, buffer=nl.sbuf, name="target")
            nisa.dma_copy(dst=tg, src=target.ap(pattern=[[2, pc], [1, 2]], offset=2 * toff))
            E = nl.ndarray((pc, TB), dtype=nl.float32, buffer=nl.sbuf, name="onehot_p")
            nisa.tensor_scalar(E, io[0:pc, :], nl.equal, tg[:, 0:1])
            for s0, sc in chunks:
                F = nl.ndarray((pc, sc), dtype=nl.float32, buffer=nl.sbuf, name="iota_s")
                nisa.iota(F, [[1, sc]], offset=s0, channel_multiplier=0)
                Fp = nl.ndarray((pc, sc), dtype=nl.float32, buffer=nl.sbuf, name="onehot_s")
                nisa.tensor_scalar(Fp, F, nl.equal, tg[:, 1:2], op1=nl.multiply, operand1=part)
                ps = nl.ndarray((TB, sc), dtype=nl.float32, buffer=nl.psum, name="y_add")
                nisa.nc_matmul(ps, E, Fp)
                nisa.tensor_tensor(Y[:, s0:s0 + sc], Y[:, s0:s0 + sc], ps, nl.add)
        del xrep
    Sf = M // TB
    if Sf:
        nisa.dma_copy(dst=y.ap(pattern=[[1, TB], [TB, Sf]], offset=0), src=Y[:, 0:Sf])
    if M % TB:
        r = M % TB
        nisa.dma_copy(dst=y.ap(pattern=[[1, r], [1, 1]], offset=TB * Sf), src=Y[0:r, Sf:Sf + 1])
    return y
