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
Rows ``m`` of one tile go on the partitions (``mm <= 128``), ``g`` batches
times ``nn`` columns on the free dim, where ``nn = min(N, 128)`` and
``g = 128 // N`` batches are packed side by side when ``N < 128`` (else
``g = 1``): the tile ``[mm, g*nn]`` transposed is ``[g*nn, mm]`` -- rows
``(b, n)``, exactly the layout of ``out[b0:b0+g, n0:n0+nn, m0:m0+mm]``, so
one DMA stores it. Per tile (``tb = ceil(B/g)`` batch groups, ``tm =
ceil(M/128)``, ``tn = ceil(N/nn)``; ``T = tb * tm * tn`` tiles)::

    dma_copy      x[b-group, m-tile, n-tile] (viewed [m, b, n]) -> SBUF t [mm, bb*nn]
    nc_transpose  t -> PSUM p [bb*nn, mm]                  (Tensor Engine)
    tensor_copy / tensor_scalar(multiply alpha)  p -> SBUF r  (Vector Engine)
    dma_copy      r -> out[b-group, n-tile, m-tile]

Pseudocode
----------
    for bt, mt, nt:  out[b, n0:n0+nn, m0:m0+mm] = alpha * x[b, m0:m0+mm, n0:n0+nn].T

Closed forms (s = bytes per element of x)
-----------------------------------------
    HBM bytes read    = s * B * M * N
    HBM bytes written = s * B * M * N
    Tensor Engine instructions = T       (one transpose per tile)
    Vector instructions        = T       (PSUM -> SBUF, alpha folded in)
    DMA transfers              = 2 T

The Tensor Engine transpose is not bit-accurate for NaN/Inf on trn1: the
lowering sends tensors holding them to torch (its ``supports`` says so).
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv

TP = PMAX  # rows per tile (partitions) and the transposed tile's partitions


def grouping(B, M, N):
    """``(g, nn)``: batches packed per tile and columns per tile."""
    if N >= TP:
        return 1, TP
    return max(1, min(B, TP // N)), N


def transpose_counts(B, M, N, itemsize):
    """The closed forms above as a dict (what the emulator must count)."""
    g, nn = grouping(B, M, N)
    T = cdiv(B, g) * cdiv(M, TP) * cdiv(N, nn)
    nbytes = itemsize * B * M * N
    return {"hbm_read_bytes": nbytes, "hbm_write_bytes": nbytes, "tensor": T, "vector": T, "dma": 2 * T}


@nki.jit
def transpose_kernel(x, alpha):
    """``alpha * x.transpose(1, 2)`` for x ``[B, M, N]`` -> ``[B, N, M]`` (x's dtype)."""
    B, M, N = x.shape
    g, nn_max = grouping(B, M, N)
    out = nl.ndarray((B, N, M), dtype=x.dtype, buffer=nl.shared_hbm)
    for bt in nl.static_range(cdiv(B, g)):
        b0 = bt * g
        bb = min(g, B - b0)
        for mt in nl.static_range(cdiv(M, TP)):
            m0 = mt * TP
            mm = min(TP, M - m0)
            for nt in nl.static_range(cdiv(N, nn_max)):
                n0 = nt * nn_max
                nn = min(nn_max, N - n0)
                w = bb * nn
                t = nl.ndarray((TP, TP), dtype=nl.float32, buffer=nl.sbuf, name="x_tile")
                nisa.dma_copy(dst=t[0:mm, 0:w], src=x[b0:b0 + bb, m0:m0 + mm, n0:n0 + nn].permute((1, 0, 2)))
                p = nl.ndarray((w, mm), dtype=nl.float32, buffer=nl.psum, name="xt_psum")
                nisa.nc_transpose(dst=p, data=t[0:mm, 0:w])
                r = nl.ndarray((w, mm), dtype=nl.float32, buffer=nl.sbuf, name="xt_tile")
                if alpha == 1.0:
                    nisa.tensor_copy(dst=r, src=p)
                else:
                    nisa.tensor_scalar(dst=r, data=p, op0=nl.multiply, operand0=alpha)
                nisa.dma_copy(dst=out[b0:b0 + bb, n0:n0 + nn, m0:m0 + mm], src=r)
                del t, p, r
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
