"""Row reduction kernel: ``out[m] = alpha * reduce_op(x[m, :]) + beta * c[m]`` on the Vector Engine.

The free-axis half of :func:`trntensor.reduce` (and of einsum's sums over an
index): the host brings the reduced axes last -- a no-op when they already
are, else one or more :mod:`~trntensor.kernels.transpose` passes on the
device -- and views the tensor as ``[M, K]``.

Dimensions
----------
``x`` : ``[M, K]`` in HBM (``M, K >= 1``), float32, bfloat16 or float16;
``c`` : ``[M]`` or None. Constants ``op`` (``"sum"``, ``"max"``, ``"min"``,
``"prod"``), ``alpha``, ``beta`` (floats). Output ``[M]`` in ``x``'s dtype;
tiles are float32 (the DMA converts), so the reduction runs in fp32 and is
rounded once.

Tiling
------
Rows on the partitions (``tm = ceil(M/128)`` row tiles of ``mm <= 128``),
columns in chunks of ``KW = 2048`` (``tk = ceil(K/KW)``; 8 KiB per
partition of SBUF per chunk).

Pseudocode
----------
Per row tile:

    acc = tensor_reduce(op, x[m-tile, chunk 0], axis=1)
    for each further chunk: part = tensor_reduce(op, chunk); acc = acc op part
    acc *= alpha                      (if alpha != 1; tensor_scalar)
    if c: acc = (c[m-tile] * beta) + acc   (one scalar_tensor_tensor)
    dma(acc -> out[m-tile])

Closed forms (s = bytes per element)
------------------------------------
    HBM bytes read    = s * M * K + [c] * s * M
    HBM bytes written = s * M
    DMA transfers     = tm * (tk + 1 + [c])
    Vector instructions = tm * (2 tk - 1 + [alpha != 1] + [c])

A full sum (``M == 1``, ``op == "sum"``, ``K >= 256``) would use one
partition; it is split instead over all 128: partition ``j`` sums columns
``[j Ks, (j+1) Ks)`` (``Ks = K // 128``, one access pattern per chunk of
``KW``, ``tk = ceil(Ks/KW)`` chunks), the ``t = K - 128 Ks`` tail columns
go to one more ``[1, t]`` tile, and the 128 partial sums are added across
partitions by one matmul with a ones vector (Tensor Engine; ``1 * inf``
stays ``inf``, so non-finite sums come out as in torch)::

    HBM bytes read    = s * (K + [c]);  written = s
    DMA transfers     = tk + [t > 0] + 1 + [c]
    Tensor instructions = 1
    Vector instructions = 1 (ones) + 2 tk - 1 + [t > 0] + 1 + [alpha != 1] + [c]
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

KW = 2048  # columns per chunk

OPS = ("sum", "max", "min", "prod")


def _alu(op):
    return {"sum": nl.add, "max": nl.maximum, "min": nl.minimum, "prod": nl.multiply}[op]


SPLIT_MIN = 2 * PMAX  # a full sum of at least this many elements is split over the partitions


def _split(M, K, op):
    return M == 1 and op == "sum" and K >= SPLIT_MIN


def reduce_counts(M, K, itemsize, has_c, alpha, op="sum"):
    """The closed forms above as a dict (what the emulator must count)."""
    c, a = (1 if has_c else 0), (1 if alpha != 1 else 0)
    if _split(M, K, op):
        tk, t = cdiv(K // PMAX, KW), (1 if K % PMAX else 0)
        return {"hbm_read_bytes": itemsize * (K + c), "hbm_write_bytes": itemsize, "dma": tk + t + 1 + c,
                "tensor": 1, "vector": 1 + 2 * tk - 1 + t + 1 + a + c}
    tm, tk = cdiv(M, PMAX), cdiv(K, KW)
    return {"hbm_read_bytes": itemsize * (M * K + (M if has_c else 0)), "hbm_write_bytes": itemsize * M,
            "dma": tm * (tk + 1 + (1 if has_c else 0)),
            "vector": tm * (2 * tk - 1 + (1 if alpha != 1 else 0) + (1 if has_c else 0))}


@nki.jit
def reduce_kernel(x, c, op, alpha, beta):
    """``alpha * op-reduction of x [M, K] over K + beta * c`` -> ``[M]`` (c may be None)."""
    M, K = x.shape
    alu = _alu(op)
    out = nl.ndarray((M,), dtype=x.dtype, buffer=nl.shared_hbm)
    out2 = out.reshape((M, 1))
    if _split(M, K, op):
        _full_sum(x, c, alpha, beta, out2)
        return out
    for mt in nl.static_range(ntiles(M, PMAX)):
        m0, mm = tile(mt, M, PMAX)
        acc = nl.ndarray((PMAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="acc")
        for kt in nl.static_range(ntiles(K, KW)):
            k0, kk = tile(kt, K, KW)
            t = nl.ndarray((PMAX, KW), dtype=nl.float32, buffer=nl.sbuf, name="x_chunk")
            nisa.dma_copy(dst=t[0:mm, 0:kk], src=x[m0:m0 + mm, k0:k0 + kk])
            if kt == 0:
                nisa.tensor_reduce(dst=acc[0:mm, 0:1], op=alu, data=t[0:mm, 0:kk], axis=1)
            else:
                part = nl.ndarray((PMAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="part")
                nisa.tensor_reduce(dst=part[0:mm, 0:1], op=alu, data=t[0:mm, 0:kk], axis=1)
                nisa.tensor_tensor(dst=acc[0:mm, 0:1], data1=acc[0:mm, 0:1], data2=part[0:mm, 0:1], op=alu)
                del part
            del t
        if alpha != 1.0:
            nisa.tensor_scalar(dst=acc[0:mm, 0:1], data=acc[0:mm, 0:1], op0=nl.multiply, operand0=alpha)
        if c is not None:
            ct = nl.ndarray((PMAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="c_tile")
            nisa.dma_copy(dst=ct[0:mm, 0:1], src=c.reshape((M, 1))[m0:m0 + mm, 0:1])
            nisa.scalar_tensor_tensor(dst=acc[0:mm, 0:1], data=ct[0:mm, 0:1], op0=nl.multiply, operand0=beta,
                                      op1=nl.add, operand1=acc[0:mm, 0:1])
            del ct
        nisa.dma_copy(dst=out2[m0:m0 + mm, 0:1], src=acc[0:mm, 0:1])
        del acc
    return out


def _full_sum(x, c, alpha, beta, out2):
    """``M == 1`` sums over all 128 partitions, then one matmul with ones across them (see above)."""
    K = x.shape[1]
    ks = K // PMAX
    ones = nl.ndarray((PMAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="ones")
    nisa.memset(dst=ones, value=1.0)
    part = nl.ndarray((PMAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="partials")
    for kt in nl.static_range(ntiles(ks, KW)):
        k0, kk = tile(kt, ks, KW)
        t = nl.ndarray((PMAX, KW), dtype=nl.float32, buffer=nl.sbuf, name="x_chunk")
        # partition j reads columns [j*ks + k0, j*ks + k0 + kk)
        nisa.dma_copy(dst=t[0:PMAX, 0:kk], src=x.ap(pattern=[[ks, PMAX], [1, kk]], offset=k0))
        if kt == 0:
            nisa.tensor_reduce(dst=part, op=nl.add, data=t[0:PMAX, 0:kk], axis=1)
        else:
            p2 = nl.ndarray((PMAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="part")
            nisa.tensor_reduce(dst=p2, op=nl.add, data=t[0:PMAX, 0:kk], axis=1)
            nisa.tensor_tensor(dst=part, data1=part, data2=p2, op=nl.add)
            del p2
        del t
    tot = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.psum, name="total")
    nisa.nc_matmul(tot, part, ones)  # part^T @ ones: the sum over the partitions
    res = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf, name="result")
    tail = K - PMAX * ks
    if tail:
        tt = nl.ndarray((1, PMAX), dtype=nl.float32, buffer=nl.sbuf, name="tail")
        nisa.dma_copy(dst=tt[0:1, 0:tail], src=x[0:1, PMAX * ks:K])
        tr = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf, name="tail_sum")
        nisa.tensor_reduce(dst=tr, op=nl.add, data=tt[0:1, 0:tail], axis=1)
        nisa.tensor_tensor(dst=res, data1=tot, data2=tr, op=nl.add)
    else:
        nisa.tensor_copy(dst=res, src=tot)
    if alpha != 1.0:
        nisa.tensor_scalar(dst=res, data=res, op0=nl.multiply, operand0=alpha)
    if c is not None:
        ct = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf, name="c_tile")
        nisa.dma_copy(dst=ct, src=c.reshape((1, 1)))
        nisa.scalar_tensor_tensor(dst=res, data=ct, op0=nl.multiply, operand0=beta, op1=nl.add, operand1=res)
    nisa.dma_copy(dst=out2[0:1, 0:1], src=res)
