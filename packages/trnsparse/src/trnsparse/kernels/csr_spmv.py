"""CSR SpMV / SpMM kernel with x on chip: ``y[M, N] = A @ x`` on a column-blocked ELL-128 layout.

Why this kernel and not a gather from HBM: an indirect DMA moves one HBM row
per partition, so gathering x from HBM is one 4-byte element per partition
per descriptor -- overhead-bound (the cost model's fixed DMA latency per
transfer, ``DMA_LATENCY_S``: modeled) and 12 bytes per
stored entry. Here x is read from HBM once per call (4 n bytes), replicated
on the 128 partitions by the Tensor Engine (``ones[1, 128]^T @ x_row``), and
gathered on chip by GpSimd (``nc_n_gather``); A streams in as dense
``[128, G*w]`` tiles, one DMA per group of slices, read once per panel of
up to 4 columns of x (each column's x block is replicated and gathered
separately). :mod:`.csr_spmm` (B rows gathered from HBM) takes only what
this kernel cannot hold: more than 8192 x 128 / min(N, 4) rows.

Dimensions (HBM), built once per matrix by :func:`trnsparse.layouts.build_ell`, cached on it
------------------------------------------------------------------------------------------
``vals``   : ``[slots]`` fp32 -- values in slot order (zero padding). A group
             ``(s0, pc, G, w, off)`` is ``[pc, G, w]`` at ``off``: partition p,
             sub-slice g holds row ``128 (s0 + g) + p``. A long slice
             ``(pc, w, off, toff, chunks)`` is ``[pc, w]``: one piece (at most K
             entries of a long row) per partition.
``cols``   : ``[slots]`` uint32 -- column inside the block; padding holds ``xc``
             (the block width), which points at a zero appended on chip.
``target`` : ``[L, 2]`` fp32 -- per long piece ``(row % 128, row // 128)`` (L >= 1).
``x``      : ``[K, N]``, A's dtype. fp32, or bf16/fp16 natively: x is then
             replicated by bf16-class matmuls (exact: ``1 * x`` into fp32 PSUM,
             a quarter of the fp32 matmul time), products and sums in fp32.
Output ``y`` : ``[M, N]`` float32. Compile-time: ``blocks`` (the layout's
``(c0, xc, groups, longs)`` per column block: at most 16384 columns for
N = 1, 4096 for N = 2..4, so that N replicated blocks fit SBUF).

Pseudocode
----------
::

    for each panel of q <= 4 columns of x:
     Y[128, S, q] = 0                             # y on chip: slice s, partition p = row 128 s + p
     for each column block (c0, xc):
        for each column c: X_c[128, xc + 1] = ones^T @ x[c0 : c0 + xc, c]; X_c[:, xc] = 0
                                                  # 1 DMA, a matmul + copy per 512 columns (copies
                                                  # alternating Vector / Scalar), 1 memset
        for each group (s0, pc, G, w):
            V, C = vals[group], cols[group]       # 2 DMAs, [pc, G, w]
            for each column c:
                P = V * gather(X_c, C)            # nc_n_gather (GpSimd), tensor_tensor
                Y[:pc, s0 : s0 + G, c] += sum_w P # tensor_reduce, tensor_tensor
        for each long slice (pieces of rows longer than K):
            V, C, T = ...                         # 3 DMAs
            E = (iota_128 == T[:, 0])
            part_c = sum_w V * gather(X_c, C)     # [pc, 1] per column
            for each 512-slice chunk: F = iota_chunk (one per chunk); for each column c:
                Y[:, chunk, c] += E^T @ ((F == T[:, 1]) * part_c)   # one-hot matmul
     y[:, panel] = Y                              # one DMA (+ one for a ragged last slice)

Closed forms (N columns in P = ceil(N / 4) panels; nb column blocks of
widths xc_c, rep = sum_c ceil(xc_c / 512); groups (pc, G, w); long slices
(pc, w, chunks), nch chunks in all; slots = sum pc G w + sum pc w; L long
pieces; Sf = M // 128)
--------------------------------------------------------------------
    HBM bytes read    = s*K*N + P*((s + 4)*slots + 8*L)     (s = 4, or 2 for bf16/fp16 A and x)
    HBM bytes written = 4*M*N
    DMA transfers     = N*nb + P*(2*#groups + 3*#long + [Sf > 0] + [M % 128 > 0])
    Tensor (nc_matmul) = N*(rep + nch)
    Vector            = 1 + P*(1 + #long) + N*(rep_v + nb + 3*#groups + 2*#long + 2*nch)
    Scalar            = N*(rep - rep_v)   (rep_v = sum_c ceil(ceil(xc_c / 512) / 2): the
                        replication copies alternate Vector / Scalar, which balances them)
    GpSimd            = N*(#groups + #long) + P*nch + [#long > 0]
    matmul flops      = 256*K*N + 256*N*sum_long sum_chunks pc*sc

The HBM floor of SpMV is ``8*nnz + 4*(K + M)``; this kernel's excess is the
ELL padding (``8*(slots - nnz)``) and 8 bytes per long piece.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import cdiv, ntiles, tile, tiles

TB = 128
TN = 512
NPAN = 4  # columns of x per panel: their replicated blocks share SBUF (4 x 16 KiB at 4096 columns)


def csr_spmv_counts(M, K, blocks, N=1, itemsize=4):
    """The closed forms above as a dict (``blocks`` as the kernel takes them; N columns of x;
    ``itemsize`` of A's values and x: 4, or 2 for bfloat16/float16)."""
    groups = [g for b in blocks for g in b[2]]
    longs = [q for b in blocks for q in b[3]]
    slots = sum(pc * G * w for _, pc, G, w, _ in groups) + sum(pc * w for pc, w, *_ in longs)
    L = sum(q[0] for q in longs)
    rep = sum(cdiv(b[1], TN) for b in blocks)
    rep_v = sum(cdiv(cdiv(b[1], TN), 2) for b in blocks)  # the replication copies on the Vector Engine
    nch = sum(len(q[4]) for q in longs)
    P = cdiv(N, NPAN)
    nb, ng, nl_ = len(blocks), len(groups), len(longs)
    return {
        "hbm_read_bytes": itemsize * K * N + P * ((itemsize + 4) * slots + 8 * L),
        "hbm_write_bytes": 4 * M * N,
        "dma": N * nb + P * (2 * ng + 3 * nl_ + (M // TB > 0) + (M % TB > 0)),
        "tensor": N * (rep + nch),
        "vector": 1 + P * (1 + nl_) + N * (rep_v + nb + 3 * ng + 2 * nl_ + 2 * nch),
        "scalar": N * (rep - rep_v),
        "gpsimd": N * (ng + nl_) + P * nch + (nl_ > 0),
        "flops": 256 * K * N + 256 * N * sum(q[0] * sc for q in longs for _, sc in q[4]),
    }


def _load_block(vals, cols, pc, G, w, off, name):
    """A's values ``[pc, G, w]`` and block-local columns ``[pc, G*w]`` (uint32): 2 DMAs."""
    av = nl.ndarray((pc, G, w), dtype=vals.dtype, buffer=nl.sbuf, name=f"{name}_v")
    nisa.dma_copy(dst=av, src=vals.ap(pattern=[[G * w, pc], [w, G], [1, w]], offset=off))
    ac = nl.ndarray((pc, G * w), dtype=nl.uint32, buffer=nl.sbuf, name=f"{name}_c")
    nisa.dma_copy(dst=ac, src=cols.ap(pattern=[[G * w, pc], [1, G * w]], offset=off))
    return av, ac


def _dot(av, ac, xrep, pc, G, w, name):
    """``sum_j A * X[cols]`` over the last axis of a [pc, G, w] block -> [pc, G] (fp32)."""
    g = nl.ndarray((pc, G, w), dtype=nl.float32, buffer=nl.sbuf, name=f"{name}_x")
    nisa.nc_n_gather(g, xrep[0:pc, :], ac)
    prod = nl.ndarray((pc, G, w), dtype=nl.float32, buffer=nl.sbuf, name=f"{name}_p")
    nisa.tensor_tensor(prod, av, g, nl.multiply)
    red = nl.ndarray((pc, G), dtype=nl.float32, buffer=nl.sbuf, name=f"{name}_r")
    nisa.tensor_reduce(red, nl.add, prod, axis=2)
    return red


def col_panels(N):
    """``(n0, width)`` of the column panels of x: at most :data:`NPAN` columns each."""
    return list(tiles(N, NPAN))


@nki.jit
def csr_spmv_kernel(vals, cols, target, x, blocks=(), M=0):
    """``y = A @ x`` for A in the column-blocked ELL layout (module docstring) -> y [M, N] fp32."""
    K, N = x.shape
    S = cdiv(M, TB)
    Sf = M // TB
    y = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    ones = nl.ndarray((1, TB), dtype=x.dtype, buffer=nl.sbuf, name="ones")  # fp32 pairs only with fp32
    nisa.memset(ones, 1.0)
    any_long = any(b[3] for b in blocks)
    if any_long:
        io = nl.ndarray((TB, TB), dtype=nl.float32, buffer=nl.sbuf, name="iota_p")
        nisa.iota(io, [[1, TB]], offset=0, channel_multiplier=0)
    for n0, q in col_panels(N):
        Y = nl.ndarray((TB, S, q), dtype=nl.float32, buffer=nl.sbuf, name="y_tile")
        nisa.memset(Y, 0.0)
        for bi in nl.static_range(len(blocks)):
            c0, xc, groups, longs = blocks[bi]
            # each column's x block, replicated on every partition (+ a zero the padding slots point at)
            xreps = []
            for c in nl.static_range(q):
                xrow = nl.ndarray((1, xc), dtype=x.dtype, buffer=nl.sbuf, name="x_row")
                nisa.dma_copy(dst=xrow, src=x.ap(pattern=[[1, 1], [N, xc]], offset=c0 * N + n0 + c))
                xrep = nl.ndarray((TB, xc + 1), dtype=nl.float32, buffer=nl.sbuf, name=f"x_rep{c}")
                for t in nl.static_range(ntiles(xc, TN)):
                    t0, tw = tile(t, xc, TN)
                    ps = nl.ndarray((TB, tw), dtype=nl.float32, buffer=nl.psum, name="x_bcast")
                    nisa.nc_matmul(ps, ones, xrow[:, t0:t0 + tw])
                    if t % 2 == 0:  # PSUM -> SBUF copies alternate between the Vector and Scalar Engines
                        nisa.tensor_copy(xrep[:, t0:t0 + tw], ps)
                    else:
                        nisa.activation(xrep[:, t0:t0 + tw], nl.copy, ps)
                del xrow  # the row copy is dead once replicated
                nisa.memset(xrep[:, xc:xc + 1], 0.0)
                xreps.append(xrep)
            for gi in nl.static_range(len(groups)):
                s0, pc, G, w, off = groups[gi]
                av, ac = _load_block(vals, cols, pc, G, w, off, "ell")
                for c in nl.static_range(q):
                    red = _dot(av, ac, xreps[c], pc, G, w, "ell")
                    nisa.tensor_tensor(Y[0:pc, s0:s0 + G, c], Y[0:pc, s0:s0 + G, c], red, nl.add)
            for li in nl.static_range(len(longs)):
                pc, w, off, toff, chunks = longs[li]
                av, ac = _load_block(vals, cols, pc, 1, w, off, "long")
                tg = nl.ndarray((pc, 2), dtype=nl.float32, buffer=nl.sbuf, name="target")
                nisa.dma_copy(dst=tg, src=target.ap(pattern=[[2, pc], [1, 2]], offset=2 * toff))
                E = nl.ndarray((pc, TB), dtype=nl.float32, buffer=nl.sbuf, name="onehot_p")
                nisa.tensor_scalar(E, io[0:pc, :], nl.equal, tg[:, 0:1])
                parts = [_dot(av, ac, xreps[c], pc, 1, w, "long") for c in nl.static_range(q)]
                for s0, sc in chunks:
                    F = nl.ndarray((pc, sc), dtype=nl.float32, buffer=nl.sbuf, name="iota_s")
                    nisa.iota(F, [[1, sc]], offset=s0, channel_multiplier=0)
                    for c in nl.static_range(q):
                        Fp = nl.ndarray((pc, sc), dtype=nl.float32, buffer=nl.sbuf, name="onehot_s")
                        nisa.tensor_scalar(Fp, F, nl.equal, tg[:, 1:2], op1=nl.multiply, operand1=parts[c])
                        ps = nl.ndarray((TB, sc), dtype=nl.float32, buffer=nl.psum, name="y_add")
                        nisa.nc_matmul(ps, E, Fp)
                        nisa.tensor_tensor(Y[:, s0:s0 + sc, c], Y[:, s0:s0 + sc, c], ps, nl.add)
            del xreps, xrep
        if Sf:
            nisa.dma_copy(dst=y.ap(pattern=[[N, TB], [TB * N, Sf], [1, q]], offset=n0), src=Y[:, 0:Sf, :])
        if M % TB:
            r = M % TB
            nisa.dma_copy(dst=y.ap(pattern=[[N, r], [1, q]], offset=TB * Sf * N + n0), src=Y[0:r, Sf, :])
        del Y
    return y
