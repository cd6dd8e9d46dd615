"""CSR SpGEMM by row merge (Gustavson) on the Vector Engine: ``C = A @ B``, numeric phase.

For products whose 128 x 128 tiles would be mostly empty. The symbolic phase
(:func:`trnsparse.symbolic.rowmerge_symbolic`, on the host once per pattern
pair, cached on A) fixes C's structural pattern and, for every stored entry
``a_rk`` of A, where each entry of B's row k lands in C's row r; on chip a
row block of A (128 rows, one per partition) is merged in ``wA`` steps, step
j handling the j-th entry of every row at once.

Dimensions
----------
``a_vals`` : ``[slotsA]`` fp32 -- A by row blocks, ELL: block q is ``[pc, wA]``
             at ``offA`` (row-major; zero padding).
``a_rows`` : ``[slotsA]`` int32 -- the B row of each slot (``kB``, a zero row of
             ``b_ell``, on padding).
``b_ell``  : ``[kB + 1, wB + 1]`` fp32 -- B's rows padded to ``wB`` entries, a
             zero column appended, a zero row appended.
``inv``    : ``[sum_q pc*wA*wC]`` uint32 -- per block q, step j, row p and C slot
             s (``[pc, wA, wC]`` at ``offM``): which entry of the gathered B row
             lands in slot s of row p's C row (``wB``, the zero column, if none).
Output ``c`` : ``[slotsC]`` float32 -- C by row blocks, ELL ``[pc, wC]`` at
``offC`` (the lowering gathers its nnzC entries into CSR order).
Compile-time: ``blocks`` -- per row block ``(pc, wA, wC, offA, offM, offC)``.

Pseudocode
----------
::

    for (pc, wA, wC, offA, offM, offC) in blocks:
        AV, AR = a_vals[block], a_rows[block]          # 2 DMAs, [pc, wA]
        Acc[pc, wC] = 0                                # memset
        for j in range(wA):
            BR = b_ell[AR[:, j]]                       # indirect DMA: one B row per partition
            P = BR * AV[:, j]                          # tensor_scalar (per-partition scalar)
            M = inv[block, :, j]                       # DMA, [pc, wC]
            Acc += gather(P, M)                        # nc_n_gather (GpSimd), tensor_tensor
        c[offC : offC + pc*wC] = Acc                   # 1 DMA

Closed forms (per block: pc, wA, wC; wB = B's widest row)
---------------------------------------------------------
    HBM bytes read    = sum_q (8*pc*wA + wA*pc*(4*(wB + 1) + 4*wC))
    HBM bytes written = 4 * sum_q pc*wC
    DMA transfers     = sum_q (3 + 2*wA)
    Vector instructions = sum_q (1 + 2*wA)
    GpSimd instructions = sum_q wA

The maps dominate: ``4 pc wA wC`` bytes per block, about 4 bytes per
(A entry, C entry of its row) pair. The floor of SpGEMM's row merge is
reading A, every B row an A entry selects, and writing C.
"""

from trnsci.nki import nisa, nki, nl


def csr_spgemm_counts(blocks, wB):
    """The closed forms above as a dict (``blocks`` as the kernel takes them)."""
    return {
        "hbm_read_bytes": sum(8 * pc * wA + wA * pc * (4 * (wB + 1) + 4 * wC) for pc, wA, wC, *_ in blocks),
        "hbm_write_bytes": 4 * sum(pc * wC for pc, _, wC, *_ in blocks),
        "dma": sum(3 + 2 * wA for _, wA, *_ in blocks),
        "vector": sum(1 + 2 * wA for _, wA, *_ in blocks),
        "gpsimd": sum(wA for _, wA, *_ in blocks),
    }


@nki.jit
def csr_spgemm_kernel(a_vals, a_rows, b_ell, inv, blocks=(), slots_c=0):
    """C's rows by row merge (Gustavson), row blocks (ELL, fp32) -> c [slots_c] (module docstring)."""
    wB1 = b_ell.shape[1]
    c = nl.ndarray((slots_c,), dtype=nl.float32, buffer=nl.shared_hbm)
    for q in nl.static_range(len(blocks)):
        pc, wA, wC, offA, offM, offC = blocks[q]
        AV = nl.ndarray((pc, wA), dtype=a_vals.dtype, buffer=nl.sbuf, name="a_vals")
        nisa.dma_copy(dst=AV, src=a_vals.ap(pattern=[[wA, pc], [1, wA]], offset=offA))
        AR = nl.ndarray((pc, wA), dtype=nl.int32, buffer=nl.sbuf, name="a_rows")
        nisa.dma_copy(dst=AR, src=a_rows.ap(pattern=[[wA, pc], [1, wA]], offset=offA))
        acc = nl.ndarray((pc, wC), dtype=nl.float32, buffer=nl.sbuf, name="c_acc")
        nisa.memset(acc, 0.0)
        for j in nl.static_range(wA):
            br = nl.ndarray((pc, wB1), dtype=b_ell.dtype, buffer=nl.sbuf, name="b_rows")
            nisa.dma_copy(dst=br, src=b_ell.ap(pattern=[[wB1, pc], [1, wB1]], offset=0,
                                               vector_offset=AR[:, j:j + 1], indirect_dim=0))
            prod = nl.ndarray((pc, wB1), dtype=nl.float32, buffer=nl.sbuf, name="prod")
            nisa.tensor_scalar(prod, br, nl.multiply, AV[:, j:j + 1])
            mp = nl.ndarray((pc, wC), dtype=nl.uint32, buffer=nl.sbuf, name="map")
            nisa.dma_copy(dst=mp, src=inv.ap(pattern=[[wA * wC, pc], [1, wC]], offset=offM + j * wC))
            g = nl.ndarray((pc, wC), dtype=nl.float32, buffer=nl.sbuf, name="gathered")
            nisa.nc_n_gather(g, prod, mp)
            nisa.tensor_tensor(acc, acc, g, nl.add)
        nisa.dma_copy(dst=c.ap(pattern=[[wC, pc], [1, wC]], offset=offC), src=acc)
        del AV, AR, acc
    return c
