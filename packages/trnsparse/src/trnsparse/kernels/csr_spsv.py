"""Sparse triangular solve, block triangular on the Tensor Engine: ``L X = B`` (L lower, 128-row blocks).

The host turns every ``spsv``/``spsm`` into a lower solve and lays it out
once per matrix (:mod:`trnsparse._nki.ops_tri`): per 128-row block ``t`` the inverse
of its dense diagonal tile (transposed, ``linv_t[t]``) and the entries left
of it as an ELL block ``[pc, w_t]``.

Dimensions
----------
``linv_t`` : ``[nbk, 128, 128]`` fp32 -- ``inv(L_tt)^T``.
``vals``   : ``[slots]`` fp32, ``cols`` : ``[slots]`` int32 -- the ELL blocks
             (block t at ``off_t``, row-major ``[pc, w]``; padding columns hold
             ``n``, which the gather skips).
``b``      : ``[n, N]`` fp32.
Output ``x`` : ``[n, N]`` float32. Compile-time: ``blocks``, ``(pc, w, full,
off)`` per block (``full``: the shortest row; slots ``j < full`` have no
padding).

Pseudocode
----------
::

    for each block t (rows 128 t .. 128 t + pc):
        Li = linv_t[t][:pc, :pc]; V, C = vals[t], cols[t]        # 1 + 2 DMAs
        for each panel of <= 512 columns:
            R = b[rows, panel]                                  # 1 DMA
            for j < w: G = x[C[:, j], panel]                    # gather solved rows (earlier blocks)
                       acc (+)= V[:, j] * G                     # Vector FMA
            R = R - acc
            x[rows, panel] = Li^T-stationary matmul: inv(L_tt) @ R   # nc_matmul into PSUM, copy, store

The solution rows of earlier blocks are read back from the output in HBM
(a read-after-write the kernel orders by program order: block t's gathers
come after the stores of blocks < t).

Closed forms (per block pc, w, full; P = ceil(N / 512) panels; nnz_off the
entries left of the diagonal tiles; slots = sum pc w)
--------------------------------------------------------------
    HBM bytes read    = 4*sum(pc^2) + 8*slots + 4*n*N + 4*N*nnz_off
    HBM bytes written = 4*n*N
    DMA transfers     = sum(1 + 2*[w > 0] + P*(2 + w))
    Tensor (nc_matmul) = P * #blocks
    Vector            = sum(P*((w - full) + w + [w > 0] + 1))
    matmul flops      = 2*N*sum(pc^2)
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import cdiv, ntiles, tile

TB = 128
TN = 512


def csr_spsv_counts(n, N, nnz_off, blocks):
    """The closed forms above as a dict."""
    P = cdiv(N, TN)
    return {
        "hbm_read_bytes": 4 * sum(pc * pc for pc, *_ in blocks) + 8 * sum(pc * w for pc, w, *_ in blocks)
                          + 4 * n * N + 4 * N * nnz_off,
        "hbm_write_bytes": 4 * n * N,
        "dma": sum(1 + 2 * (w > 0) + P * (2 + w) for pc, w, full, off in blocks),
        "tensor": P * len(blocks),
        "vector": sum(P * ((w - full) + w + (w > 0) + 1) for pc, w, full, off in blocks),
        "flops": 2 * N * sum(pc * pc for pc, *_ in blocks),
    }


@nki.jit
def csr_spsv_kernel(linv_t, vals, cols, b, blocks=()):
    """Solve ``L X = b`` block by block (module docstring) -> X [n, N] fp32."""
    n, N = b.shape
    x = nl.ndarray((n, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for t in nl.static_range(len(blocks)):
        pc, w, full, off = blocks[t]
        r0 = t * TB
        li = nl.ndarray((pc, pc), dtype=nl.float32, buffer=nl.sbuf, name="linv")
        nisa.dma_copy(dst=li, src=linv_t[t, 0:pc, 0:pc])
        if w:
            av = nl.ndarray((pc, w), dtype=vals.dtype, buffer=nl.sbuf, name="off_vals")
            nisa.dma_copy(dst=av, src=vals.ap(pattern=[[w, pc], [1, w]], offset=off))
            ac = nl.ndarray((pc, w), dtype=nl.int32, buffer=nl.sbuf, name="off_cols")
            nisa.dma_copy(dst=ac, src=cols.ap(pattern=[[w, pc], [1, w]], offset=off))
        for pn in nl.static_range(ntiles(N, TN)):
            n0, npw = tile(pn, N, TN)
            rhs = nl.ndarray((pc, npw), dtype=nl.float32, buffer=nl.sbuf, name="rhs")
            nisa.dma_copy(dst=rhs, src=b[r0:r0 + pc, n0:n0 + npw])
            if w:
                acc = nl.ndarray((pc, npw), dtype=nl.float32, buffer=nl.sbuf, name="acc")
                for j in nl.static_range(w):
                    g = nl.ndarray((pc, npw), dtype=nl.float32, buffer=nl.sbuf, name="x_rows")
                    if j >= full:
                        nisa.memset(g, 0.0)
                    nisa.dma_copy(dst=g,
                                  src=x.ap(pattern=[[N, pc], [1, npw]], offset=n0, vector_offset=ac[:, j:j + 1],
                                           indirect_dim=0),
                                  oob_mode=nisa.oob_mode.skip)
                    if j == 0:
                        nisa.tensor_scalar(acc, g, nl.multiply, av[:, 0:1])
                    else:
                        nisa.scalar_tensor_tensor(acc, g, nl.multiply, av[:, j:j + 1], nl.add, acc)
                nisa.tensor_tensor(rhs, rhs, acc, nl.subtract)
            ps = nl.ndarray((pc, npw), dtype=nl.float32, buffer=nl.psum, name="solve")
            nisa.nc_matmul(ps, li, rhs)
            res = nl.ndarray((pc, npw), dtype=nl.float32, buffer=nl.sbuf, name="x_tile")
            nisa.tensor_copy(res, ps)
            nisa.dma_copy(dst=x[r0:r0 + pc, n0:n0 + npw], src=res)
    return x
