"""Block-sparse attention forward: ``O = softmax(scale * Q K^T, over the stored tiles) V``.

Dimensions (HBM), per head g of G
---------------------------------
``q_t`` : ``[G, d, Sq]`` -- Q transposed: d (the contraction of Q K^T) on partitions.
``k_t`` : ``[G, d, Sk]`` -- K transposed, d on partitions.
``v``   : ``[G, Sk, dv]`` -- the key index (the contraction of P V) on partitions.
float32, any ``d`` and ``dv`` (see "K tiles" below; :func:`fits` bounds the
SBUF they take). Output ``o`` : ``[G, Sq, dv]`` float32.
Compile-time: ``row_ptrs``/``cols`` (the 128x128 tile pattern), ``scale``
and ``causal`` (keep key c for query r only when c <= r).

Online softmax, one query block row at a time (flash-attention style)
--------------------------------------------------------------------
For each stored tile (r, c) of the row, with ``m`` the running row max,
``l`` the running row sum and ``acc`` the unnormalized output (SBUF):

1. ``S = q_t[:, rows]^T @ k_t[:, cols]`` -- ``KT = ceil(d / 128)``
   ``nc_matmul`` accumulating into one PSUM tile ``[mm, nn]`` (one per
   128-row slice of d); ``S * scale`` to SBUF (``tensor_scalar``).
2. causal tiles that cross the diagonal: ``affine_select`` keeps
   ``(m0 + p) - (c0 + j) >= 0`` and writes -1e30 elsewhere. Tiles wholly
   above the diagonal are skipped at compile time; with equal row and
   column tiling every tile that runs has an allowed key in every row.
3. ``tmax = rowmax(S)`` (``tensor_reduce``); ``m_new = max(m, tmax)``
   (``tensor_tensor``); ``-m_new`` as a (P, 1) column (``tensor_scalar``).
4. ``P = exp(S - m_new)`` and its row sums in one ``activation_reduce``
   with ``bias=-m_new`` (nl ops do not broadcast: the (P, 1) bias does the
   row-wise shift); ``corr = exp(m - m_new)`` (``activation``, same bias).
5. ``P^T`` by the Tensor Engine (``nc_transpose`` to PSUM, copy to SBUF),
   then ``P @ V_tile`` in ``NV = ceil(dv / 512)`` column slices
   (``nc_matmul``, one PSUM bank ``[mm, <=512]`` each).
6. ``l = l * corr + rowsum`` and, per column slice,
   ``acc = acc * corr + P V`` -- one ``scalar_tensor_tensor`` each (corr is
   the (P, 1) operand).

K tiles
-------
d (the contraction of ``Q K^T``) is split into ``KT`` slices of at most
128 partitions: the block row's Q slices are loaded once (``KT`` DMAs), each
stored tile loads its ``KT`` K slices, and the ``KT`` products accumulate in
PSUM, so the scores are rounded once, as for ``d <= 128``. The value
columns are split into ``NV`` slices of one PSUM bank (512 fp32) each; the
running ``acc`` stays whole in SBUF.

Pseudocode
----------
::

    for g, block row r (rows m0 .. m0+mm):
        Q_k = q_t[g, k-th 128 rows of d, rows]            for k < KT
        for stored tile c of row r (keys c0 .. c0+nn):
            S = sum_k Q_k^T @ K_k[c]  (PSUM)   ;  S *= scale ; causal mask
            m_new = max(m, rowmax S) ; P = exp(S - m_new) ; rowsum
            P^T = transpose(P)
            for each 512-column slice v of dv:
                acc[:, v] = acc[:, v] * exp(m - m_new) + P^T^T @ V[c, v]
            l = l * exp(m - m_new) + rowsum ; m = m_new
        o[g, rows] = acc / l

At the end of the row ``o = acc * (1 / l)`` (``reciprocal`` + ``tensor_scalar``)
and one store. The first tile of a row initializes ``m``, ``l``, ``acc``
directly. A block row with no tile stores zeros. No score matrix ever goes
to HBM: HBM traffic is Q, the K/V tiles of the stored pattern, and O.

Dimensions
----------
G heads; Sq queries, Sk keys; d = head_dim (any; KT = ceil(d/128) K tiles);
dv value columns (any; NV = ceil(dv/512) PSUM slices); tiles 128 x 128.

Closed forms: see :func:`attention_counts` (it walks the same static
pattern): per head, HBM bytes read = 4*(d*sum_R mm_r + sum_t nn_t*(d + dv)),
written = 4*Sq*dv; nc_matmul + nc_transpose = KT + 1 + NV per tile run;
DMAs = KT + 1 per non-empty block row (Q slices, the store), KT + 1 per tile
run (K slices, V), 1 per empty block row.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PSUM_FMAX, cdiv, sbuf_budget, tile

TB = 128
TN = PSUM_FMAX  # value columns per PSUM bank (fp32)
NEG = -1.0e30  # "minus infinity" that keeps exp() and max() finite


def _tiles(Sq, Sk, row_ptrs, cols, causal):
    """[(r, m0, mm, [(c0, nn, diag), ...]), ...]: the tiles the kernel runs, per block row."""
    out = []
    for r in range(len(row_ptrs) - 1):
        m0, mm = tile(r, Sq, TB)
        ts = []
        for i in range(row_ptrs[r], row_ptrs[r + 1]):
            c0, nn = tile(int(cols[i]), Sk, TB)
            if causal and c0 > m0 + mm - 1:
                continue  # wholly above the diagonal
            ts.append((i, c0, nn, causal and c0 + nn - 1 > m0))
        out.append((r, m0, mm, ts))
    return out


def fits(d, dv):
    """Whether one block row's working set fits SBUF (trn1) per partition.

    Q slices and K slices take 4*128 bytes each (KT of each), acc, the V
    tile, the output tile and the P V read-outs 4*dv each, the score, P
    and P^T tiles 4*128 each; 8 KiB stay for the (P, 1) columns.
    """
    kt = cdiv(d, TB)
    return 2 * kt * 4 * TB + 4 * 4 * dv + 3 * 4 * TB <= sbuf_budget(reserve=8 * 1024)


def attention_counts(G, Sq, Sk, d, dv, row_ptrs, cols, causal):
    """HBM bytes and instruction counts of one kernel run (walks the static pattern)."""
    rd = wr = dma = ten = vec = sca = gps = 0
    kt, nv = cdiv(d, TB), cdiv(dv, TN)
    for _r, _m0, mm, ts in _tiles(Sq, Sk, row_ptrs, cols, causal):
        wr += 4 * mm * dv
        dma += 1
        if not ts:
            vec += 1  # memset of the zero tile
            continue
        rd += 4 * d * mm
        dma += kt
        for j, (_i, _c0, nn, diag) in enumerate(ts):
            rd += 4 * nn * (d + dv)
            dma += kt + 1
            ten += kt + 1 + nv  # S (KT accumulating), P^T, P V (NV slices)
            vec += 1 + 1 + 1  # scale to SBUF, row max, -m
            sca += 2  # exp with row sums (plus the read-out)
            gps += 1 if diag else 0
            vec += 1  # P^T PSUM -> SBUF
            if j:
                vec += 1 + 1 + nv  # max(m, tmax); l update; acc update per slice
                sca += 1  # corr
                vec += 1  # m <- m_new
            else:
                vec += nv  # acc <- P V, per slice
        vec += 2  # reciprocal, final scale
    return {"hbm_read_bytes": G * rd, "hbm_write_bytes": G * wr, "tensor": G * ten, "vector": G * vec,
            "scalar": G * sca, "gpsimd": G * gps, "dma": G * dma}


@nki.jit
def attention_kernel(q_t, k_t, v, row_ptrs=(), cols=(), scale=1.0, causal=False):
    """Block-sparse attention over the stored 128x128 tiles -> O [G, Sq, dv] fp32."""
    G, d, Sq = q_t.shape
    Sk, dv = v.shape[1], v.shape[2]
    kt_n, nv = cdiv(d, TB), cdiv(dv, TN)
    o = nl.ndarray((G, Sq, dv), dtype=nl.float32, buffer=nl.shared_hbm)
    plan = _tiles(Sq, Sk, row_ptrs, cols, causal)
    for g in nl.static_range(G):
        for _r, m0, mm, ts in plan:
            if not ts:
                z = nl.ndarray((mm, dv), dtype=nl.float32, buffer=nl.sbuf, name="zero")
                nisa.memset(z, 0.0)
                nl.store(o[g, m0:m0 + mm, :], value=z)
                continue
            qts = []  # the block row's Q^T, one slice of <= 128 rows of d each
            for k in nl.static_range(kt_n):
                k0, kk = tile(k, d, TB)
                qt = nl.ndarray((kk, mm), dtype=nl.float32, buffer=nl.sbuf, name=f"q_t{k}")
                nisa.dma_copy(dst=qt, src=q_t[g, k0:k0 + kk, m0:m0 + mm])
                qts.append(qt)
            m = None  # the running row max: the first tile's max tile, updated in place
            lsum = nl.ndarray((mm, 1), dtype=nl.float32, buffer=nl.sbuf, name="row_sum")
            acc = nl.ndarray((mm, dv), dtype=nl.float32, buffer=nl.sbuf, name="acc")
            for j, (_i, c0, nn, diag) in enumerate(ts):
                sp = nl.ndarray((mm, nn), dtype=nl.float32, buffer=nl.psum, name="scores")
                for k in nl.static_range(kt_n):  # S accumulates over the K slices of d in PSUM
                    k0, kk = tile(k, d, TB)
                    kt = nl.ndarray((kk, nn), dtype=nl.float32, buffer=nl.sbuf, name="k_t")
                    nisa.dma_copy(dst=kt, src=k_t[g, k0:k0 + kk, c0:c0 + nn])
                    nisa.nc_matmul(sp, qts[k], kt)
                vt = nl.ndarray((nn, dv), dtype=nl.float32, buffer=nl.sbuf, name="v_tile")
                nisa.dma_copy(dst=vt, src=v[g, c0:c0 + nn, :])
                s = nl.ndarray((mm, nn), dtype=nl.float32, buffer=nl.sbuf, name="s")
                nisa.tensor_scalar(s, sp, nl.multiply, scale)
                if diag:  # keep key c0 + jj for query m0 + p when (m0 + p) - (c0 + jj) >= 0
                    nisa.affine_select(s, [[-1, nn]], 1, s, NEG, cmp_op=nl.greater_equal, offset=m0 - c0)
                tmax = nl.ndarray((mm, 1), dtype=nl.float32, buffer=nl.sbuf, name="tile_max")
                nisa.tensor_reduce(tmax, nl.maximum, s, axis=1, keepdims=True)
                mnew = tmax
                if j:
                    mnew = nl.ndarray((mm, 1), dtype=nl.float32, buffer=nl.sbuf, name="new_max")
                    nisa.tensor_tensor(mnew, m, tmax, nl.maximum)
                negm = nl.ndarray((mm, 1), dtype=nl.float32, buffer=nl.sbuf, name="neg_max")
                nisa.tensor_scalar(negm, mnew, nl.multiply, -1.0)
                p = nl.ndarray((mm, nn), dtype=nl.float32, buffer=nl.sbuf, name="p")
                psum_row = lsum if not j else nl.ndarray((mm, 1), dtype=nl.float32, buffer=nl.sbuf, name="t_sum")
                nisa.activation_reduce(p, nl.exp, s, reduce_op=nl.add, reduce_res=psum_row, bias=negm)
                ptp = nl.ndarray((nn, mm), dtype=nl.float32, buffer=nl.psum, name="p_t_psum")
                nisa.nc_transpose(ptp, p)
                pt = nl.ndarray((nn, mm), dtype=nl.float32, buffer=nl.sbuf, name="p_t")
                nisa.tensor_copy(pt, ptp)
                corr = None
                if j:
                    corr = nl.ndarray((mm, 1), dtype=nl.float32, buffer=nl.sbuf, name="corr")
                    nisa.activation(corr, nl.exp, m, bias=negm)
                    nisa.scalar_tensor_tensor(lsum, data=lsum, op0=nl.multiply, operand0=corr, op1=nl.add,
                                              operand1=psum_row)
                for t in nl.static_range(nv):  # P V, one PSUM bank of value columns at a time
                    j0, w = tile(t, dv, TN)
                    pv = nl.ndarray((mm, w), dtype=nl.float32, buffer=nl.psum, name="pv")
                    nisa.nc_matmul(pv, pt, vt[:, j0:j0 + w])
                    if j:
                        nisa.scalar_tensor_tensor(acc[:, j0:j0 + w], data=acc[:, j0:j0 + w], op0=nl.multiply,
                                                  operand0=corr, op1=nl.add, operand1=pv)
                    else:
                        nisa.tensor_copy(acc[:, j0:j0 + w], pv)
                if j:
                    nisa.tensor_copy(m, mnew)
                else:
                    m = tmax
            inv = nl.ndarray((mm, 1), dtype=nl.float32, buffer=nl.sbuf, name="inv_sum")
            nisa.reciprocal(inv, lsum)
            res = nl.ndarray((mm, dv), dtype=nl.float32, buffer=nl.sbuf, name="out_tile")
            nisa.tensor_scalar(res, acc, nl.multiply, inv)
            nl.store(o[g, m0:m0 + mm, :], value=res)
    return o
