"""Batched transpose kernel: ``out[b, n, m] = alpha * x[b, m, n]`` on the Tensor Engine.

One pass of :func:`trntensor.permute`: the host collapses a permutation to
runs of axes and writes it as a few such passes (:func:`transpose_passes`);
einsum's permutation steps use the same passes.

Dimensions
----------
``x`` : ``[B, M, N]`` in HBM, float32, bfloat16 or float16 (any ``B, M, N >= 1``).
Constant ``alpha`` (float). Output ``out`` : ``[B, N, M]`` in ``x``'s dtype.
SBUF/PSUM tiles are float32 (the DMA converts on the way in and out), so
half-precision inputs are transposed and scaled in fp32 and rounded once.

Tiling
------
Rows ``m`` of a transpose go on the partitions (``mm <= 128``), ``g``
batches times ``nn`` columns on the free dim, where ``nn = min(N, 128)`` and
``g = 128 // N`` batches are packed side by side when ``N < 128`` (else
``g = 1``): a ``[mm, g*nn]`` block transposed is ``[g*nn, mm]`` -- rows
``(b, n)``, the layout of ``out[b0:b0+g, n0:n0+nn, m0:m0+mm]``.

DMA transfers are made wide (small ones are overhead-bound): a *strip*
load reads ``[mm, up to 4 blocks]`` (up to 2 KiB per partition in fp32) and
each block's transpose lands in a PSUM tile ``[g*nn, up to 4 m-tiles]``
(one 2 KiB bank), so one Vector copy and one store move 4 m-tiles at once.
With ``tb = ceil(B/g)``, ``tm = ceil(M/128)``, ``tn = ceil(N/nn)`` blocks,
``mS = ceil(tm/4)`` m-supertiles and ``nS = ceil(tn/4)`` strips::

    for each batch group, m-supertile (4 m-tiles), strip (4 n-blocks):
        for each m-tile:   dma_copy strip x[b, m-tile, strip] -> SBUF [mm, <=4 nn]
                           nc_transpose each block -> its PSUM tile, columns of this m-tile
        for each n-block:  tensor_copy / tensor_scalar(multiply alpha) PSUM -> SBUF  (Vector)
                           dma_copy -> out[b, n-block, m-supertile]

Pseudocode
----------
    out[b, n0:n0+nn, m0:m0+mm] = alpha * x[b, m0:m0+mm, n0:n0+nn].T   for every block

Closed forms (s = bytes per element of x)
-----------------------------------------
    HBM bytes read    = s * B * M * N
    HBM bytes written = s * B * M * N
    Tensor Engine instructions = tb * tm * tn          (one transpose per block)
    Vector instructions        = tb * mS * tn          (PSUM -> SBUF, alpha folded in)
    DMA transfers              = tb * (nS * tm + mS * tn)

The Tensor Engine transpose is not bit-accurate for NaN/Inf on trn1: the
lowering sends tensors holding them to torch (its ``supports`` says so).
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

TP = PMAX  # rows per transpose (partitions) and the transposed block's partitions
SUPER = 4  # n-blocks per strip load, m-tiles per PSUM tile / store (4 x 128 fp32 = one 2 KiB bank)


def grouping(B, M, N):
    """``(g, nn)``: batches packed per tile and columns per tile."""
    if N >= TP:
        return 1, TP
    return max(1, min(B, TP // N)), N


def transpose_counts(B, M, N, itemsize):
    """The closed forms above as a dict (what the emulator must count)."""
    g, nn = grouping(B, M, N)
    tb, tm, tn = cdiv(B, g), cdiv(M, TP), cdiv(N, nn)
    ms, ns = cdiv(tm, SUPER), cdiv(tn, SUPER)
    nbytes = itemsize * B * M * N
    return {"hbm_read_bytes": nbytes, "hbm_write_bytes": nbytes, "tensor": tb * tm * tn, "vector": tb * ms * tn,
            "dma": tb * (ns * tm + ms * tn)}


@nki.jit
def transpose_kernel(x, alpha):
    """``alpha * x.transpose(1, 2)`` for x ``[B, M, N]`` -> ``[B, N, M]`` (x's dtype)."""
    B, M, N = x.shape
    g, nn_max = grouping(B, M, N)
    tm, tn = cdiv(M, TP), cdiv(N, nn_max)
    out = nl.ndarray((B, N, M), dtype=x.dtype, buffer=nl.shared_hbm)
    for bt in nl.static_range(ntiles(B, g)):
        b0, bb = tile(bt, B, g)
        for ms in nl.static_range(cdiv(tm, SUPER)):
            sm0, smm = tile(ms, M, SUPER * TP)
            for ns in nl.static_range(ntiles(tn, SUPER)):
                j0, nj = tile(ns, tn, SUPER)  # the strip's n-blocks j0 .. j0 + nj - 1
                blocks = [tile(j, N, nn_max) for j in range(j0, j0 + nj)]  # (n0, nn) of each
                sn0 = blocks[0][0]
                snn = blocks[-1][0] + blocks[-1][1] - sn0
                acc = [nl.ndarray((bb * nn, smm), dtype=nl.float32, buffer=nl.psum, name=f"xt_psum{k}")
                       for k, (_, nn) in enumerate(blocks)]
                for mt in nl.static_range(cdiv(smm, TP)):
                    m0, mm = tile(mt, M, TP, sm0)
                    t = nl.ndarray((TP, SUPER * TP), dtype=nl.float32, buffer=nl.sbuf, name="x_strip")
                    if g == 1:
                        nisa.dma_copy(dst=t[0:mm, 0:snn], src=x[b0, m0:m0 + mm, sn0:sn0 + snn])
                    else:  # g batches of all N columns side by side: rows m, columns (b, n)
                        nisa.dma_copy(dst=t[0:mm, 0:bb * N], src=x[b0:b0 + bb, m0:m0 + mm, 0:N].permute((1, 0, 2)))
                    for k, (n0, nn) in enumerate(blocks):
                        c0 = n0 - sn0
                        nisa.nc_transpose(dst=acc[k][0:bb * nn, m0 - sm0:m0 - sm0 + mm],
                                          data=t[0:mm, c0:c0 + bb * nn])
                    del t
                for k, (n0, nn) in enumerate(blocks):
                    r = nl.ndarray((bb * nn, smm), dtype=nl.float32, buffer=nl.sbuf, name="xt_tile")
                    if alpha == 1.0:
                        nisa.tensor_copy(dst=r, src=acc[k])
                    else:
                        nisa.tensor_scalar(dst=r, data=acc[k], op0=nl.multiply, operand0=alpha)
                    nisa.dma_copy(dst=out[b0:b0 + bb, n0:n0 + nn, sm0:sm0 + smm], src=r)
                    del r
                del acc
    return out


def transpose_passes(shape, perm):
    """A permutation of a contiguous tensor as batched-transpose passes.

    ``shape``/``perm`` as for ``x.permute(perm)``. Size-1 axes are dropped
    and axes adjacent in both input and output merged; then, position by
    position, the axis wanted there is brought forward by one pass
    ``[B, M, N] -> [B, N, M]`` (``B``: the axes already in place, ``M``:
    those before the wanted one, ``N``: it and the rest) -- at most
    ``rank - 1`` passes, one for a transpose of two groups of axes.
    Returns a list of ``(B, M, N)``; empty when no data moves.
    """
    keep = [a for a in perm if shape[a] != 1]
    # merge runs of axes consecutive in the input that stay consecutive in the output
    groups = []
    for a in keep:
        if groups and groups[-1][-1] + 1 == a:
            groups[-1].append(a)
        else:
            groups.append([a])
    order = sorted(range(len(groups)), key=lambda k: groups[k][0])  # input order of the output groups
    size = [1] * len(groups)
    for k, grp in enumerate(groups):
        for a in grp:
            size[k] *= shape[a]
    cur = list(order)  # current layout: output-group ids in memory order
    passes = []
    for i in range(len(groups)):
        q = cur.index(i)
        if q == i:
            continue
        bsz = mid = rest = 1
        for k in cur[:i]:
            bsz *= size[k]
        for k in cur[i:q]:
            mid *= size[k]
        for k in cur[q:]:
            rest *= size[k]
        passes.append((bsz, mid, rest))
        cur = cur[:i] + cur[q:] + cur[i:q]
    return passes
