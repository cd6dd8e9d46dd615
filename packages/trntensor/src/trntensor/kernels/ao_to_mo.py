"""Fused AO->MO kernel: ``B[a, P, i] = sum_n C_vir[n, a] sum_m eri3[m, n, P] C_occ[m, i]``.

Both contractions run on the Tensor Engine; the half-transformed
intermediate ``X[n, P, i] = sum_m eri3[m, n, P] C_occ[m, i]`` goes from
PSUM to an SBUF tile and is consumed there: it is never written to HBM.

Dimensions (HBM, float32)
-------------------------
``eri3``  : ``[nao, nao * naux]`` -- ``eri3[m, n*naux + P]``; ``m`` (the first
            contraction index) is the partition dim of every eri3 tile.
``c_occ`` : ``[nao, nocc]``, ``c_vir`` : ``[nao, nvir]`` (AO index on partitions).
Output ``B`` : ``[nvir, naux * nocc]`` float32, ``B[a, P*nocc + i]``; the host
permutes it to ``[nocc, nvir, naux]``.

Why this layout
---------------
A matmul's output partition dim is its stationary operand's free dim, and
the second contraction (over ``n``) needs ``n`` on the partitions. So the
first matmul takes the eri3 slice ``[m, n]`` at one ``P`` as its stationary
operand (free dim ``n``) and ``C_occ[m, i-chunk]`` as the moving one:
``X[n, (P, i)]`` lands in PSUM with ``n`` on partitions, ``(P, i)`` on the
free dim, ready to be the second matmul's moving operand against the
stationary ``C_vir[n, a-tile]``.

Tiling (TK = 128 partitions, a-tiles aw <= 128 stationary free, W <= 512 moving free)
---------------------------------------------------------------------------
Columns of ``X`` and ``B`` are chunks of ``pb`` auxiliary functions times
``ci`` occupied orbitals, ``W = pb * ci <= 512`` (:func:`chunking`: the
widest chunk whose ``X`` -- all ``tn = ceil(nao/128)`` row tiles of it, ``4 tn
W`` bytes per partition -- fits the SBUF budget with the other tiles; ``aw =
min(128, nvir, W)`` virtuals per a-tile. The only size ceiling is memory: a
huge ``nao`` just narrows the chunk and the a-tile).

Pseudocode
----------
For each i-chunk (``ti = ceil(nocc/ci)``), c_occ's columns are loaded
(``tn`` row tiles); for each P-block (``tp = ceil(naux/pb)``):

1. for each n-tile ``nt``: a PSUM tile ``[nn, W]``; for each m-tile ``mt``
   one DMA of ``eri3[m-tile, n-tile, P-block]`` (``[mm, nn * pb]``) and ``pb``
   matmuls ``acc[:, p*ci:(p+1)*ci] += eri3[m-tile, n-tile, p]^T-stationary x
   c_occ[m-tile, i-chunk]`` (K-tiling over ``m`` accumulates in PSUM); one
   Vector copy PSUM -> the SBUF-resident ``X[:, nt*W:(nt+1)*W]``.
2. for each a-tile: one DMA of ``c_vir[:, a-tile]`` (``tn`` row tiles in one
   transfer each), a PSUM tile ``[aa, W]`` accumulating ``tn`` matmuls
   (stationary ``c_vir[n-tile, a-tile]``, moving ``X[n-tile, chunk]``), one
   Vector copy to SBUF and one store into ``B[a-tile, P-block, i-chunk]``.

Ragged edges (``nao``, ``nvir``, ``nocc``, ``naux`` not multiples of the
tiles) are static slices of smaller extent.

Closed forms (tm = tn = ceil(nao/128), ta = ceil(nvir/aw), ti = ceil(nocc/ci),
tp = ceil(naux/pb), chunks = ti * tp)
-----------------------------------------------------------------------
    HBM bytes read    = 4 * (ti * nao^2 * naux          eri3, once per i-chunk
                             + nao * nocc               c_occ, once
                             + chunks * nao * nvir)     c_vir, once per chunk
    HBM bytes written = 4 * nocc * nvir * naux          B only: X never leaves chip
    Tensor Engine instructions = ti * naux * tn^2 + chunks * ta * tn
    Vector instructions (PSUM -> SBUF copies) = chunks * (tn + ta)
    DMA transfers = ti * tn + chunks * (tn^2 + ta * tn + ta)
    matmul flops = 2 nocc nao^2 naux + 2 nocc nvir nao naux

The unfused two-GEMM path writes and re-reads the intermediate:
``+ 8 nocc nao naux`` HBM bytes. The first half's matmuls have moving free
size ``ci`` (``nocc`` when it is small): the Tensor Engine is busy
``max(64, ci)`` cycles each (modeled), the price of never transposing X.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, PSUM_FMAX, cdiv, ntiles, sbuf_budget, tile

TK = PMAX  # contraction tile (partition dim)
TA = 128  # a-tile: stationary free size
SBUF_BUDGET = sbuf_budget(reserve=12 * 1024)  # bytes per partition for the tiles below


def _sbuf_bytes(nao, ci, pb, aw):
    """Bytes per partition of the kernel's live SBUF tiles for chunk ``pb x ci``, a-tiles of ``aw`` (fp32)."""
    tn = cdiv(nao, TK)
    w = ci * pb
    return 4 * (tn * w  # X, all n row tiles of one chunk
                + tn * ci  # c_occ columns of the i-chunk
                + 2 * TK * pb  # eri3 tile (and the next one)
                + tn * aw  # c_vir columns of one a-tile
                + w)  # output tile


def chunking(nao, nocc, nvir, naux):
    """``(ci, pb, aw)``: occupied orbitals and auxiliary functions per column chunk, virtuals per a-tile.

    The widest chunk ``W = ci * pb <= 512`` (and a-tile ``aw <= min(128, W)``)
    whose tiles fit :data:`SBUF_BUDGET`; ``None`` when not even one column
    fits (``nao`` beyond any SBUF).
    """
    wmax = PSUM_FMAX
    while wmax >= 1:
        ci = min(nocc, wmax)
        pb = max(1, min(naux, wmax // ci))
        aw = min(TA, nvir, wmax)
        if _sbuf_bytes(nao, ci, pb, aw) <= SBUF_BUDGET:
            return ci, pb, aw
        wmax //= 2
    return None


def ao_to_mo_counts(nao, nocc, nvir, naux):
    """The closed forms above as a dict (what the emulator must count)."""
    ci, pb, aw = chunking(nao, nocc, nvir, naux)
    tn, ta = cdiv(nao, TK), cdiv(nvir, aw)
    ti, tp = cdiv(nocc, ci), cdiv(naux, pb)
    chunks = ti * tp
    return {
        "hbm_read_bytes": 4 * (ti * nao * nao * naux + nao * nocc + chunks * nao * nvir),
        "hbm_write_bytes": 4 * nocc * nvir * naux,
        "tensor": ti * naux * tn * tn + chunks * ta * tn,
        "vector": chunks * (tn + ta),
        "dma": ti * tn + chunks * (tn * tn + ta * tn + ta),
        "flops": 2 * nocc * nao * nao * naux + 2 * nocc * nvir * nao * naux,
    }


def _load_columns(dst, src, c0, cw, width, tn, nao):
    """Columns ``[c0, c0+cw)`` of ``src`` [nao, *] into ``dst``: row tile t at ``dst[:, t*width:...]``."""
    for t in nl.static_range(tn):
        _, kk = tile(t, nao, TK)
        nisa.dma_copy(dst=dst[0:kk, t * width:t * width + cw], src=src[t * TK:t * TK + kk, c0:c0 + cw])


@nki.jit
def ao_to_mo_kernel(eri3, c_occ, c_vir):
    """``B[a, P*nocc + i]`` from eri3 ``[nao, nao*naux]``, c_occ ``[nao, nocc]``, c_vir ``[nao, nvir]`` (fp32)."""
    nao, nocc = c_occ.shape
    nvir = c_vir.shape[1]
    naux = eri3.shape[1] // nao
    ci, pb, aw = chunking(nao, nocc, nvir, naux)
    tn = cdiv(nao, TK)
    out = nl.ndarray((nvir, naux * nocc), dtype=nl.float32, buffer=nl.shared_hbm)
    e3 = eri3.reshape((nao, nao, naux))
    o3 = out.reshape((nvir, naux, nocc))
    for it in nl.static_range(ntiles(nocc, ci)):
        i0, cc = tile(it, nocc, ci)
        co = nl.ndarray((TK, tn * ci), dtype=nl.float32, buffer=nl.sbuf, name="c_occ")
        _load_columns(co, c_occ, i0, cc, ci, tn, nao)
        for pt in nl.static_range(ntiles(naux, pb)):
            p0, pp = tile(pt, naux, pb)
            w = pp * cc
            x = nl.ndarray((TK, tn * w), dtype=nl.float32, buffer=nl.sbuf, name="x_half")
            # ---- first half: X[n, (P, i)] = sum_m eri3[m, n, P] c_occ[m, i], n on partitions
            for nt in nl.static_range(tn):
                n0, nn = tile(nt, nao, TK)
                acc = nl.ndarray((nn, w), dtype=nl.float32, buffer=nl.psum, name="x_acc")
                for mt in nl.static_range(tn):
                    m0, mm = tile(mt, nao, TK)
                    e = nl.ndarray((TK, TK * pb), dtype=nl.float32, buffer=nl.sbuf, name="eri3_tile")
                    nisa.dma_copy(dst=e[0:mm, 0:nn * pp], src=e3[m0:m0 + mm, n0:n0 + nn, p0:p0 + pp])
                    ev = e[0:mm, 0:nn * pp].reshape((mm, nn, pp))
                    for p in nl.static_range(pp):
                        nisa.nc_matmul(acc[0:nn, p * cc:(p + 1) * cc], ev[0:mm, 0:nn, p],
                                       co[0:mm, mt * ci:mt * ci + cc])
                    del e, ev
                nisa.tensor_copy(x[0:nn, nt * w:(nt + 1) * w], acc)
                del acc
            # ---- second half: B[a, (P, i)] = sum_n c_vir[n, a] X[n, (P, i)]
            for at in nl.static_range(ntiles(nvir, aw)):
                a0, aa = tile(at, nvir, aw)
                cv = nl.ndarray((TK, tn * aw), dtype=nl.float32, buffer=nl.sbuf, name="c_vir")
                _load_columns(cv, c_vir, a0, aa, aw, tn, nao)
                bacc = nl.ndarray((aa, w), dtype=nl.float32, buffer=nl.psum, name="b_acc")
                for nt in nl.static_range(tn):
                    _, kk = tile(nt, nao, TK)
                    nisa.nc_matmul(bacc, cv[0:kk, nt * aw:nt * aw + aa], x[0:kk, nt * w:(nt + 1) * w])
                res = nl.ndarray((aa, w), dtype=nl.float32, buffer=nl.sbuf, name="b_tile")
                nisa.tensor_copy(res, bacc)
                nisa.dma_copy(dst=o3[a0:a0 + aa, p0:p0 + pp, i0:i0 + cc], src=res)
                del cv, bacc, res
            del x
        del co
    return out
