"""Strided gather kernel: a strided view (diagonal, stepped slice) made contiguous by DMA access patterns.

``out[i0, .., ik] = x[offset + i0*st0 + .. + ik*stk]``: the view a torch
tensor with strides ``st`` describes over its storage. einsum's diagonals
(``"ii->i"``, ``"iij->ij"``: strides summed over the repeated letter) and
:func:`trntensor.permute` of a strided view use it; the DMA engines read the
elements where they are, no compute engine is involved.

Dimensions
----------
``x`` : 1-D HBM tensor (the storage span of the view), any dtype.
Constants ``shape`` (1 to 4 extents, all >= 1), ``strides`` (>= 0, in
elements), ``offset``. Output ``out`` : ``shape``, contiguous, ``x``'s dtype.

Tiling
------
The output's first axis goes on the partitions (``tr = ceil(shape[0]/128)``
row tiles), the rest on the free dim (``F = prod(shape[1:])`` elements per
partition, ``F <= FMAX`` -- the lowering checks): per tile one DMA reads the
access pattern ``[[st0, rows], [st1, n1], .., [stk, nk]]`` into SBUF, one
DMA writes the rows out.

Pseudocode
----------
    for each row tile r0:  out[r0:r0+rows, ...] = x.ap([[st0, rows], ...], offset + r0*st0)

Closed forms (s = bytes per element, U = prod(shape))
-----------------------------------------------------
    HBM bytes read = HBM bytes written = s * U
    DMA transfers = 2 * tr;  no Tensor/Vector/Scalar instructions
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

FMAX = 8192  # free elements per partition of one tile (32 KiB of fp32)
MAX_RANK = 4  # the access pattern has one more pair (5 is the hardware's limit)


def fits(shape):
    """True when the kernel takes a view of this shape (rank 1-4, rows of at most FMAX elements)."""
    if not 1 <= len(shape) <= MAX_RANK or min(shape) < 1:
        return False
    f = 1
    for n in shape[1:]:
        f *= n
    return f <= FMAX


def gather_counts(shape, itemsize):
    """The closed forms above as a dict (what the emulator must count)."""
    u = 1
    for n in shape:
        u *= n
    tr = cdiv(shape[0], PMAX)
    return {"hbm_read_bytes": itemsize * u, "hbm_write_bytes": itemsize * u, "dma": 2 * tr, "tensor": 0,
            "vector": 0, "scalar": 0}


@nki.jit
def gather_kernel(x, shape, strides, offset):
    """The strided view ``(shape, strides, offset)`` of the 1-D ``x``, contiguous."""
    shape = tuple(shape)
    f = 1
    for n in shape[1:]:
        f *= n
    out = nl.ndarray(shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out2 = out.reshape((shape[0], f))
    rest = [[strides[k], shape[k]] for k in range(1, len(shape))] or [[1, 1]]
    for rt in nl.static_range(ntiles(shape[0], PMAX)):
        r0, rows = tile(rt, shape[0], PMAX)
        t = nl.ndarray((PMAX, f), dtype=x.dtype, buffer=nl.sbuf, name="gathered")
        nisa.dma_copy(dst=t[0:rows, 0:f], src=x.ap(pattern=[[strides[0], rows]] + rest,
                                                   offset=offset + r0 * strides[0]))
        nisa.dma_copy(dst=out2[r0:r0 + rows, 0:f], src=t[0:rows, 0:f])
        del t
    return out
