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

Pseudocode (per row tile)
-------------------------
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
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv

KW = 2048  # columns per chunk

OPS = ("sum", "max", "min", "prod")


def _alu(op):
    return {"sum": nl.add, "max": nl.maximum, "min": nl.minimum, "prod": nl.multiply}[op]


def reduce_counts(M, K, itemsize, has_c, alpha):
    """The closed forms above as a dict (what the emulator must count)."""
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
    for mt in nl.static_range(cdiv(M, PMAX)):
        m0 = mt * PMAX
        mm = min(PMAX, M - m0)
        acc = nl.ndarray((PMAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="acc")
        for kt in nl.static_range(cdiv(K, KW)):
            k0 = kt * KW
            kk = min(KW, K - k0)
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
