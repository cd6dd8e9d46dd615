"""TRSM kernel: blocked forward substitution ``L X = R`` on the Tensor Engine.

Every TRSM variant (side, uplo, trans, unit diagonal) is reduced on the
host to one lower-triangular, left, no-transpose solve (see
:mod:`trnblas._nki`). The host also inverts the 128x128 diagonal blocks
``L_bb`` (in float64; O(n * 128^2) work against the solve's O(n^2 r)), so
the kernel is nothing but matmuls: the Tensor Engine has no divide, and a
row-by-row substitution on the Vector engine would serialize 128 dependent
steps per block.

Dimensions
----------
``w`` : ``[n, n]`` float32, ``w = L^T`` except that diagonal block ``b`` holds
        ``inv(L_bb)^T``. Rows are the partition dim: ``w[c-block, b-block]``
        = ``L_bc^T`` is directly the stationary operand of ``L_bc @ X_c``.
``r`` : ``[n, nrhs]`` float32 right-hand side (already scaled by alpha).
Output ``x`` : ``[n, nrhs]`` float32.

Pseudocode
----------
Left-looking, one dispatch. For each chunk of <= 512 right-hand-side columns, and each row block
``b = 0..nb-1`` in order (a true dependency: ``nl.static_range``):

    acc   = sum_{c < b} L_bc X_c           (b matmuls accumulated in PSUM)
    R_b   = r_b - acc                      (Vector engine, reads PSUM)
    X_b   = inv(L_bb) R_b                  (one matmul)

``X_b`` stays in SBUF (moving operand of every later block) and is stored.

Closed forms (nb = ceil(n/128), n_b = rows of block b, nrc = ceil(nrhs/512))
---------------------------------------------------------------------------
    HBM bytes read    = 4 * (nrc * sum_{c <= b} n_c n_b + n*nrhs)
                        (n = 128 q: 4 * (nrc * 128^2 q(q+1)/2 + n*nrhs))
    HBM bytes written = 4 * n*nrhs
    Tensor Engine instructions = nrc * nb(nb+1)/2
    Vector instructions = nrc * (nb - 1 + nb)   (subtractions, PSUM->SBUF copies)
SBUF holds ``X`` for one column chunk: nb * 2 KiB per partition (n <= 8192).
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import cdiv, ntiles, tile, tiles

TB = 128  # row block = partition count = stationary width
TR = 512  # right-hand-side columns per PSUM bank




MAX_N = 8192  # X for one 512-column chunk: nb * 2 KiB per partition of SBUF


def fits(n):
    """True when the kernel's SBUF plan holds an n x n solve."""
    return n <= MAX_N


def trsm_counts(n, nrhs):
    """The closed forms above as a dict (what the emulator must count)."""
    nb, nrc = cdiv(n, TB), cdiv(nrhs, TR)
    sizes = [s for _, s in tiles(n, TB)]
    tri = sum(sizes[c] * sizes[b] for b in range(nb) for c in range(b + 1))
    return {
        "hbm_read_bytes": 4 * (nrc * tri + n * nrhs),
        "hbm_write_bytes": 4 * n * nrhs,
        "tensor": nrc * nb * (nb + 1) // 2,
        "vector": nrc * (2 * nb - 1),
    }


@nki.jit
def trsm_kernel(w, r):
    """Solve ``L X = r`` given ``w`` (L^T with inverted-transposed diagonal blocks): -> X [n, nrhs] fp32."""
    n, nrhs = r.shape
    nb = cdiv(n, TB)
    x = nl.ndarray((n, nrhs), dtype=nl.float32, buffer=nl.shared_hbm)
    for rc in nl.static_range(ntiles(nrhs, TR)):
        c0, cw = tile(rc, nrhs, TR)
        xs = nl.ndarray((TB, nb * cw), dtype=nl.float32, buffer=nl.sbuf, name="x_blocks")
        for b in nl.static_range(nb):
            b0, bb = tile(b, n, TB)
            rb = nl.load(r[b0:b0 + bb, c0:c0 + cw])
            if b > 0:
                acc = nl.ndarray((bb, cw), dtype=nl.float32, buffer=nl.psum, name="update")
                for cb in nl.static_range(b):
                    q0, _ = tile(cb, n, TB)  # block cb < b is full: only the last block can be ragged
                    wt = nl.load(w[q0:q0 + TB, b0:b0 + bb])
                    nisa.nc_matmul(acc, wt, xs[0:TB, cb * cw:(cb + 1) * cw])
                rs = nl.ndarray((bb, cw), dtype=nl.float32, buffer=nl.sbuf, name="residual")
                nisa.tensor_tensor(rs, rb, acc, nl.subtract)
            else:
                rs = rb
            dinv = nl.load(w[b0:b0 + bb, b0:b0 + bb])
            px = nl.ndarray((bb, cw), dtype=nl.float32, buffer=nl.psum, name="x_block")
            nisa.nc_matmul(px, dinv, rs)
            nisa.tensor_copy(xs[0:bb, b * cw:(b + 1) * cw], px)
            nl.store(x[b0:b0 + bb, c0:c0 + cw], value=xs[0:bb, b * cw:(b + 1) * cw])
    return x
