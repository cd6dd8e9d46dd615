"""LU panel with partial pivoting (``getf2`` of one block column) on the Vector Engine.

The blocked LU of :mod:`trnsolver._nki_lu` hands each block column to this
kernel, transposed, so that a column of ``A`` is one partition's free
dimension: the pivot search along a column is then a per-partition
``max8`` / ``nc_find_index8`` (the Vector Engine's top-8 search), the row
interchange is two free-dim columns swapped in every partition -- one of
them addressed by the search's runtime index (a dynamic ``select`` on the
free dimension) -- and cross-partition traffic is only the rank-1 update's
broadcast of the multipliers through the Tensor Engine (a ``K = 1`` matmul
with a ones row).

Dimensions
----------
``pt`` : ``[b, w]`` float32 in HBM, ``1 <= b <= 128``, ``b <= w <=``
         :data:`MAX_W`: the panel ``A[k0:, k0:k0+b]`` transposed -- partition
         ``c`` holds column ``c`` of the panel, free index ``r`` its row.
Outputs: ``lu_t`` ``[b, w]`` the factored panel, transposed (unit-lower
``L`` below the diagonal of each column, ``U`` on and above it, rows already
swapped); ``piv`` ``[b, 1]`` uint32, ``piv[j] = p_j - j`` with ``p_j`` the
(0-based, panel-relative) row swapped with row ``j`` at step ``j`` -- LAPACK's
``ipiv`` less ``j`` (the search's own index output, stored as is).

Pseudocode
----------
Step ``j = 0 .. b-1``; ``L_j = w - j`` live rows, window ``[j, w)``:

    a      = |P[j, j : j+max(L_j, 8)]|                 Scalar (zero padding past w)
    m8     = max8(a);  q = nc_find_index8(a, m8)[0]     Vector: first index of the largest
    vp = P[:, j+q];  P[:, j+q] = P[:, j];  P[:, j] = vp   the swap: three [b, 1] Vector copies,
                                                         column j+q addressed at run time
    if L_j > 1:
        s = P[j, j] + (P[j, j] == 0);  P[j, j+1:] *= 1/s   multipliers (a zero pivot leaves the
                                                            all-zero column alone; info is read
                                                            from U's diagonal on the host)
        if j < b-1:
            u   = P[:, j] * (-[c > j])                  Vector
            P[:, j+1:] += u * (ones[j]^T P[j, j+1:])    ceil((L_j-1)/512) K=1 matmuls + Vector
Ties in the search resolve to the first (lowest) row, as LAPACK's ``i?amax``.

Closed forms (m_j = ceil((L_j - 1) / 512) when L_j > 1 and j < b-1, else 0)
---------------------------------------------------------------------------
    HBM read  = 4 b w                       HBM write = 4 b w + 4 b
    DMA       = 3
    Tensor    = sum_j m_j
    Scalar    = b
    Vector    = 3 + sum_j (5 + 3 [L_j > 1] + [m_j > 0] (1 + m_j))
    GpSimd    = 1                           (one iota)
The O(w b^2) work is the rank-1 updates: one ``[b, L_j - 1]`` Vector
instruction per step (plus its matmul), everything else is ``[1, L_j]`` or
``[b, 1]``. SBUF per partition: 4 (2 w + 2 * 8 + b + 4) bytes + 2 KiB of
PSUM; :data:`MAX_W` keeps it inside trn1's 192 KiB.
"""

from __future__ import annotations

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PSUM_FMAX, cdiv, tile

MAX_B = 128
#: Longest panel (rows) the SBUF plan holds (the panel and |column| rows: two [b, w + 8] tiles).
MAX_W = 4096
PAD = 8  # max8 / nc_find_index8 search at least 8 elements


def fits(w: int, b: int) -> bool:
    return 1 <= b <= MAX_B and b <= w <= MAX_W


def lu_panel_counts(w: int, b: int) -> dict:
    """The closed forms above for one ``[b, w]`` transposed panel."""
    tensor = vector = 0
    for j in range(b):
        L = w - j
        mj = cdiv(L - 1, PSUM_FMAX) if (L > 1 and j < b - 1) else 0
        tensor += mj
        vector += 5 + (3 if L > 1 else 0) + ((1 + mj) if mj else 0)
    return {
        "kernel": "lu_panel_kernel",
        "hbm_read_bytes": 4 * b * w,
        "hbm_write_bytes": 4 * b * w + 4 * b,
        "dma": 3,
        "tensor": tensor,
        "scalar": b,
        "vector": 3 + vector,
        "gpsimd": 1,
    }


@nki.jit
def lu_panel_kernel(pt):
    """Factor the transposed panel ``pt`` [b, w]: ``(lu_t [b, w], piv [b, 1])``; see the module docstring."""
    b, w = pt.shape
    f32 = nl.float32
    lu_t = nl.ndarray((b, w), dtype=f32, buffer=nl.shared_hbm)
    piv = nl.ndarray((b, 1), dtype=nl.uint32, buffer=nl.shared_hbm)

    P = nl.ndarray((b, w + PAD), dtype=f32, buffer=nl.sbuf, name="panel")
    nisa.dma_copy(dst=P[0:b, 0:w], src=pt)
    nisa.memset(P[0:b, w:w + PAD], 0.0)
    ones = nl.ndarray((b, b), dtype=f32, buffer=nl.sbuf, name="ones")
    nisa.memset(ones, 1.0)
    # neg[c, j] = -1 where c > j: which partitions (columns) step j updates
    neg = nl.ndarray((b, b), dtype=f32, buffer=nl.sbuf, name="below")
    nisa.iota(neg, pattern=[[-1, b]], channel_multiplier=1)
    nisa.tensor_scalar(neg, neg, nl.greater, 0.0, op1=nl.multiply, operand1=-1.0)

    absr = nl.ndarray((b, w + PAD), dtype=f32, buffer=nl.sbuf, name="abs_col")
    m8 = nl.ndarray((b, 8), dtype=f32, buffer=nl.sbuf, name="max8")
    i8 = nl.ndarray((b, 8), dtype=nl.uint32, buffer=nl.sbuf, name="index8")
    vp = nl.ndarray((b, 1), dtype=f32, buffer=nl.sbuf, name="pivot_row_vals")
    sp = nl.ndarray((b, 1), dtype=f32, buffer=nl.sbuf, name="safe_pivot")
    rp = nl.ndarray((b, 1), dtype=f32, buffer=nl.sbuf, name="inv_pivot")
    u = nl.ndarray((b, 1), dtype=f32, buffer=nl.sbuf, name="update_scale")

    for j in nl.static_range(b):
        L = w - j
        Ls = max(L, PAD)
        # pivot search on partition j (column j of A), rows j .. w-1
        nisa.activation(absr[j:j + 1, 0:Ls], op=nl.abs, data=P[j:j + 1, j:j + Ls])
        nisa.max8(m8[j:j + 1, 0:8], absr[j:j + 1, 0:Ls])
        nisa.nc_find_index8(i8[j:j + 1, 0:8], absr[j:j + 1, 0:Ls], m8[j:j + 1, 0:8])
        # swap rows j and j+q in every column: free-dim column j+q addressed by the runtime index
        row_p = P[0:b, j:w].expand_dim(2).select(1, i8[j:j + 1, 0:1])
        nisa.tensor_copy(vp, row_p)
        nisa.tensor_copy(row_p, P[0:b, j:j + 1])
        nisa.tensor_copy(P[0:b, j:j + 1], vp)
        if L > 1:
            # multipliers l = A[j+1:, j] / A[j, j] (a zero pivot divides by 1: its column is all zero)
            pj = P[j:j + 1, j:j + 1]
            nisa.tensor_scalar(sp[j:j + 1, 0:1], pj, nl.equal, 0.0, op1=nl.add, operand1=pj)
            nisa.reciprocal(rp[j:j + 1, 0:1], sp[j:j + 1, 0:1])
            nisa.tensor_scalar(P[j:j + 1, j + 1:w], P[j:j + 1, j + 1:w], nl.multiply, rp[j:j + 1, 0:1])
            if j < b - 1:
                # rank-1 update of the columns right of j: A[r, c] -= l[r] A[j, c]
                nisa.tensor_tensor(u, P[0:b, j:j + 1], neg[0:b, j:j + 1], nl.multiply)
                for c in nl.static_range(cdiv(L - 1, PSUM_FMAX)):
                    c0, cw = tile(c, w, PSUM_FMAX, j + 1)
                    ps = nl.ndarray((b, cw), dtype=f32, buffer=nl.psum, name="bcast_l")
                    nisa.nc_matmul(ps, ones[j:j + 1, 0:b], P[j:j + 1, c0:c0 + cw])
                    nisa.scalar_tensor_tensor(dst=P[0:b, c0:c0 + cw], data=ps, op0=nl.multiply, operand0=u,
                                              op1=nl.add, operand1=P[0:b, c0:c0 + cw])

    nisa.dma_copy(dst=lu_t, src=P[0:b, 0:w])
    nisa.dma_copy(dst=piv, src=i8[0:b, 0:1])
    return lu_t, piv
