"""Sparse add kernel, numeric phase: ``C = alpha * A + beta * B`` on the union pattern of two CSR matrices.

The symbolic phase -- the union pattern and where each of its slots finds
its A and B entry -- runs on the host once per pattern pair
(:func:`trnsparse.symbolic.add_symbolic`, cached on A). On chip the two
"scatter-adds" into C's value array are written as their inverse, two
gathers: C's slots are laid out ``[128, F]`` per chunk (partition p holds
``F`` consecutive slots), and the A entries those slots need are a short run
of A's value array per partition (the union is ordered like A, so the run is
no wider than the slots it feeds, plus any unsorted spread inside a row).

Dimensions
----------
``a``, ``b`` : ``[nnzA]``, ``[nnzB]`` -- the values of A and B in their own
               (CSR) order, fp32 (at least one element: an empty operand is
               passed as one zero).
``start``    : ``[128, 2 * Q]`` int32 -- per chunk q and partition p, where the
               run of A (column 2q) and of B (column 2q + 1) starts.
``la``, ``lb`` : ``[sum_q 128 F_q]`` uint32 -- per slot, the offset of its A / B
               entry inside the partition's run, or the run width ``W`` (a zero
               appended on chip) when the slot has none.
Output ``c`` : ``[nnzC]`` float32 in the union's (canonical CSR) order.
Compile-time: ``chunks`` -- per chunk ``(u0, F, WA, WB, n)``: first slot,
slots per partition, run widths, slots in the chunk (``n <= 128 F``);
``alpha``, ``beta`` (floats).

Pseudocode
----------
::

    S = start                                     # one DMA
    for (u0, F, WA, WB, n) in chunks:
        LA, LB = la[chunk], lb[chunk]             # 2 DMAs, [128, F] uint32
        RA[p, :WA] = a[S[p, 2q] : S[p, 2q] + WA]   # indirect DMA, one run per partition
        RB[p, :WB] = b[S[p, 2q+1] : ... + WB]     # indirect DMA
        RA[:, WA] = RB[:, WB] = 0                 # 2 memsets
        GA = gather(RA, LA); GB = gather(RB, LB)  # nc_n_gather (GpSimd) x 2
        GB = GB * beta; C = GA * alpha + GB       # tensor_scalar, scalar_tensor_tensor
        c[u0 : u0 + n] = C                        # 1 DMA (+1 for a partial last partition)

Closed forms (Q chunks; per chunk F, WA, WB, n; t = [n % F > 0] the partial
last partition)
---------------------------------------------------------------------------
    HBM bytes read    = 8*128*Q + sum_q 4*128*(WA + WB) + 8*128*F
    HBM bytes written = 4*nnzC
    DMA transfers     = 1 + sum_q (4 + [n >= F] + t)
    Vector instructions = 4*Q   (2 memsets, 2 arithmetic)
    GpSimd instructions = 2*Q   (gathers)

The floor is reading A and B once and writing C: ``4*(nnzA + nnzB + nnzC)``.
For sorted operands ``WA, WB <= F`` and the reads are at most
``16*128*sum F`` (about 16 nnzC): the position maps (8 bytes per slot) cost
as much as the values; the host merge reads the index arrays too.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX

TB = PMAX
#: Slots per partition of one chunk (C's values: 8 KiB per partition in fp32; maps, runs alike).
FC = 2048


def csr_add_counts(chunks, nnz_c):
    """The closed forms above as a dict (``chunks`` as the kernel takes them)."""
    Q = len(chunks)
    return {
        "hbm_read_bytes": 8 * TB * Q + sum(4 * TB * (wa + wb) + 8 * TB * f for _, f, wa, wb, _ in chunks),
        "hbm_write_bytes": 4 * nnz_c,
        "dma": 1 + sum(4 + (n >= f) + (n % f > 0) for _, f, _, _, n in chunks),
        "vector": 4 * Q,
        "gpsimd": 2 * Q,
    }


def _run(vals, S, col, W, name):
    """[128, W + 1]: partition p holds vals[S[p] : S[p] + W] and a zero."""
    R = nl.ndarray((TB, W + 1), dtype=vals.dtype, buffer=nl.sbuf, name=name)
    nisa.dma_copy(dst=R[:, 0:W], src=vals.ap(pattern=[[1, TB], [1, W]], offset=0,
                                             vector_offset=S[:, col:col + 1], indirect_dim=0))
    nisa.memset(R[:, W:W + 1], 0.0)
    return R


@nki.jit
def csr_add_kernel(a, b, start, la, lb, chunks=(), nnz_c=0, alpha=1.0, beta=1.0):
    """``alpha * A + beta * B`` on the union pattern -> c [nnz_c] fp32 (module docstring)."""
    Q = len(chunks)
    c = nl.ndarray((nnz_c,), dtype=nl.float32, buffer=nl.shared_hbm)
    S = nl.ndarray((TB, 2 * Q), dtype=nl.int32, buffer=nl.sbuf, name="starts")
    nisa.dma_copy(dst=S, src=start)
    m0 = 0  # offset of the chunk in la / lb
    for q in nl.static_range(Q):
        u0, F, WA, WB, n = chunks[q]
        LA = nl.ndarray((TB, F), dtype=nl.uint32, buffer=nl.sbuf, name="map_a")
        nisa.dma_copy(dst=LA, src=la.ap(pattern=[[F, TB], [1, F]], offset=m0))
        LB = nl.ndarray((TB, F), dtype=nl.uint32, buffer=nl.sbuf, name="map_b")
        nisa.dma_copy(dst=LB, src=lb.ap(pattern=[[F, TB], [1, F]], offset=m0))
        RA = _run(a, S, 2 * q, WA, "run_a")
        RB = _run(b, S, 2 * q + 1, WB, "run_b")
        GA = nl.ndarray((TB, F), dtype=nl.float32, buffer=nl.sbuf, name="g_a")
        nisa.nc_n_gather(GA, RA, LA)
        GB = nl.ndarray((TB, F), dtype=nl.float32, buffer=nl.sbuf, name="g_b")
        nisa.nc_n_gather(GB, RB, LB)
        nisa.tensor_scalar(GB, GB, nl.multiply, beta)
        C = nl.ndarray((TB, F), dtype=nl.float32, buffer=nl.sbuf, name="c_vals")
        nisa.scalar_tensor_tensor(C, GA, nl.multiply, alpha, nl.add, GB)
        full, tail = n // F, n % F
        if full:
            nisa.dma_copy(dst=c.ap(pattern=[[F, full], [1, F]], offset=u0), src=C[0:full, :])
        if tail:
            nisa.dma_copy(dst=c.ap(pattern=[[F, 1], [1, tail]], offset=u0 + full * F),
                          src=C[full:full + 1, 0:tail])
        m0 += TB * F
        del LA, LB, RA, RB, GA, GB, C
    return c
