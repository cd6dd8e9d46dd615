"""Householder QR of one panel (``geqr2``) on the Vector/Scalar Engines.

The blocked QR of :mod:`trnsolver._nki_qr` hands each block column to this
kernel transposed (partition ``c`` = column ``c`` of the panel, free index =
row), so a column's norm is one per-partition ``activation_reduce`` and the
reflector reaches the other columns through ``K = 1`` matmuls with a ones
row. The trailing matrix is updated outside, in compact WY form, on the
GEMM/TRSM kernels.

Dimensions
----------
``pt`` : ``[b, w]`` float32 in HBM, ``1 <= b <= 128``, ``b <= w <=`` :data:`MAX_W`.
Outputs: ``qr_t`` ``[b, w]``: row ``j`` holds ``R[0:j+1, j]`` (free ``0..j``)
and the reflector ``v_j`` below the diagonal (free ``j+1..w-1``, ``v_j[j] = 1``
implied), as LAPACK stores them; ``tau`` ``[b, 1]``.

Reflector of step ``j`` (x = column j from row j, alpha = x_0, nu = ||x||_2)
---------------------------------------------------------------------------
    s = sign(alpha) (+1 at 0), beta = -s nu, v = [1, x_1: / (alpha - beta)],
    tau = (beta - alpha) / beta = 1 + |alpha| / nu,   H = I - tau v v^T.
A zero column (nu = 0) takes ``tau = 2``, ``v = e_0``, ``beta = 0``: still an
orthogonal reflection (LAPACK uses ``H = I`` there), so ``tau`` is never 0 and
``T^{-1} = diag(1/tau) + striu(V^T V)`` of the compact WY form always exists.
Every division is a ``reciprocal`` of a value >= the column's norm (or 1).

Pseudocode
----------
Step j = 0 .. b-1, L = w - j; partition j unless marked:

    nu^2 = sum x^2 (Scalar, activation_reduce);  nu = sqrt(nu^2 + 2^-100) (Scalar)
    z = [nu^2 == 0], nu *= 1 - z, s, |alpha|, 1/(|alpha| + nu + z), 1/(nu + z), tau    Vector (14 ops)
    P[j, j+1:] *= s/(|alpha| + nu + z);  P[j, j] = -s nu                 Vector (3 ops)
    if j < b-1:
        v = [1, P[j, j+1:]], tv = tau v                                  Vector (3 ops)
        per 512-column chunk: Vb = ones[j]^T v (PSUM), d parts = rowsum(P[:, j:] * Vb)   matmul + 2 Vector
        d = sum of the parts * (-[c > j])                                Vector (2 ops)
        per chunk: TVb = ones[j]^T tv (PSUM), P[:, j:] += d * TVb         matmul + Vector
                                             (A[:, c] -= tau v v^T A[:, c] for c > j; the broadcasts
                                              are read from PSUM, never copied)

Closed forms (n_j = ceil(L_j / 512), only for j < b-1)
------------------------------------------------------
    HBM read  = 4 b w                 HBM write = 4 b w + 4 b        DMA = 3
    Scalar    = 3 b (activation_reduce issues two: the pass and its read-out)    GpSimd = 1 (iota)
    Tensor    = sum_{j<b-1} 2 n_j
    Vector    = 3 + 16 b + sum_{j<b-1} (5 + 3 n_j) - [w == b]   (no v-scaling when L_{b-1} = 1)
"""

from __future__ import annotations

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PSUM_FMAX, cdiv, tile

MAX_B = 128
TINY = 2.0 ** -100  # sqrt's argument floor (its activation range starts at ~1.2e-35)
#: Longest panel (rows) the SBUF plan holds: four [b, w] float32 tiles.
MAX_W = 4096


def fits(w: int, b: int) -> bool:
    return 1 <= b <= MAX_B and b <= w <= MAX_W


def qr_panel_counts(w: int, b: int) -> dict:
    """The closed forms above for one ``[b, w]`` transposed panel."""
    tensor = vector = 0
    for j in range(b - 1):
        nj = cdiv(w - j, PSUM_FMAX)
        tensor += 2 * nj
        vector += 5 + 3 * nj
    return {
        "kernel": "qr_panel_kernel",
        "hbm_read_bytes": 4 * b * w,
        "hbm_write_bytes": 4 * b * w + 4 * b,
        "dma": 3,
        "tensor": tensor,
        "scalar": 3 * b,
        "vector": 3 + 16 * b + vector - (1 if w == b else 0),
        "gpsimd": 1,
    }


@nki.jit
def qr_panel_kernel(pt):
    """Householder QR of the transposed panel ``pt`` [b, w]: ``(qr_t, tau)``; see the module docstring."""
    b, w = pt.shape
    f32 = nl.float32
    qr_t = nl.ndarray((b, w), dtype=f32, buffer=nl.shared_hbm)
    tau_out = nl.ndarray((b, 1), dtype=f32, buffer=nl.shared_hbm)

    P = nl.ndarray((b, w), dtype=f32, buffer=nl.sbuf, name="panel")
    nisa.dma_copy(dst=P, src=pt)
    ones = nl.ndarray((b, b), dtype=f32, buffer=nl.sbuf, name="ones")
    nisa.memset(ones, 1.0)
    neg = nl.ndarray((b, b), dtype=f32, buffer=nl.sbuf, name="below")
    nisa.iota(neg, pattern=[[-1, b]], channel_multiplier=1)          # c - j
    nisa.tensor_scalar(neg, neg, nl.greater, 0.0, op1=nl.multiply, operand1=-1.0)

    def col(name):
        return nl.ndarray((b, 1), dtype=f32, buffer=nl.sbuf, name=name)

    nu2, nu, sg, z, nzm, aa, den, rden, nz, rnz, tau, vs, dots, tiny = (
        col(x) for x in ("norm2", "norm", "sign", "zero", "nonzero", "abs_alpha", "den", "inv_den", "norm_nz",
                         "inv_norm", "tau", "v_scale", "dots", "tiny"))
    nisa.memset(tiny, TINY)
    sq = nl.ndarray((b, w), dtype=f32, buffer=nl.sbuf, name="squares")
    vrow = nl.ndarray((b, w), dtype=f32, buffer=nl.sbuf, name="v")
    tvrow = nl.ndarray((b, w), dtype=f32, buffer=nl.sbuf, name="tau_v")
    parts = nl.ndarray((b, cdiv(w, PSUM_FMAX)), dtype=f32, buffer=nl.sbuf, name="dot_parts")

    for j in nl.static_range(b):
        L = w - j
        s = slice(j, j + 1)
        alpha = P[s, j:j + 1]
        nisa.activation_reduce(sq[s, 0:L], op=nl.square, data=P[s, j:w], reduce_op=nl.add,
                               reduce_res=nu2[s, 0:1])
        # nu = sqrt(nu^2 + TINY) keeps sqrt inside its activation range; a zero column is then
        # recognised from nu^2 itself and nu cleared to exactly 0
        nisa.activation(nu[s, 0:1], op=nl.sqrt, data=nu2[s, 0:1], bias=tiny[s, 0:1])
        nisa.tensor_scalar(nzm[s, 0:1], nu2[s, 0:1], nl.greater, 0.0)
        nisa.tensor_scalar(z[s, 0:1], nzm[s, 0:1], nl.multiply, -1.0, op1=nl.add, operand1=1.0)
        nisa.tensor_tensor(nu[s, 0:1], nu[s, 0:1], nzm[s, 0:1], nl.multiply)
        nisa.tensor_scalar(sg[s, 0:1], alpha, nl.greater_equal, 0.0, op1=nl.multiply, operand1=2.0)
        nisa.tensor_scalar(sg[s, 0:1], sg[s, 0:1], nl.subtract, 1.0)
        nisa.tensor_tensor(aa[s, 0:1], alpha, sg[s, 0:1], nl.multiply)
        nisa.tensor_tensor(den[s, 0:1], aa[s, 0:1], nu[s, 0:1], nl.add)
        nisa.tensor_tensor(den[s, 0:1], den[s, 0:1], z[s, 0:1], nl.add)
        nisa.reciprocal(rden[s, 0:1], den[s, 0:1])
        nisa.tensor_tensor(nz[s, 0:1], nu[s, 0:1], z[s, 0:1], nl.add)
        nisa.reciprocal(rnz[s, 0:1], nz[s, 0:1])
        nisa.scalar_tensor_tensor(dst=tau[s, 0:1], data=aa[s, 0:1], op0=nl.multiply, operand0=rnz[s, 0:1],
                                  op1=nl.add, operand1=z[s, 0:1])
        nisa.tensor_scalar(tau[s, 0:1], tau[s, 0:1], nl.add, 1.0)
        nisa.tensor_tensor(vs[s, 0:1], sg[s, 0:1], rden[s, 0:1], nl.multiply)
        if L > 1:
            nisa.tensor_scalar(P[s, j + 1:w], P[s, j + 1:w], nl.multiply, vs[s, 0:1])
        nisa.scalar_tensor_tensor(dst=P[s, j:j + 1], data=sg[s, 0:1], op0=nl.multiply, operand0=-1.0,
                                  op1=nl.multiply, operand1=nu[s, 0:1])
        if j < b - 1:
            nisa.memset(vrow[s, 0:1], 1.0)
            nisa.tensor_copy(vrow[s, 1:L], P[s, j + 1:w])
            nisa.tensor_scalar(tvrow[s, 0:L], vrow[s, 0:L], nl.multiply, tau[s, 0:1])
            nch = cdiv(L, PSUM_FMAX)
            # d_c = v . A[:, c] per partition c, from the broadcast v straight out of PSUM
            for c in nl.static_range(nch):
                c0, cw = tile(c, L, PSUM_FMAX)
                pv = nl.ndarray((b, cw), dtype=f32, buffer=nl.psum, name="v_ps")
                nisa.nc_matmul(pv, ones[s, 0:b], vrow[s, c0:c0 + cw])
                nisa.tensor_tensor(sq[0:b, 0:cw], P[0:b, j + c0:j + c0 + cw], pv, nl.multiply)
                nisa.tensor_reduce(parts[0:b, c:c + 1], nl.add, sq[0:b, 0:cw], axis=1)
            nisa.tensor_reduce(dots, nl.add, parts[0:b, 0:nch], axis=1)
            nisa.tensor_tensor(dots, dots, neg[0:b, j:j + 1], nl.multiply)
            # A[:, c] -= d_c tau v for c > j
            for c in nl.static_range(nch):
                c0, cw = tile(c, L, PSUM_FMAX)
                pt_ = nl.ndarray((b, cw), dtype=f32, buffer=nl.psum, name="tv_ps")
                nisa.nc_matmul(pt_, ones[s, 0:b], tvrow[s, c0:c0 + cw])
                win = P[0:b, j + c0:j + c0 + cw]
                nisa.scalar_tensor_tensor(dst=win, data=pt_, op0=nl.multiply, operand0=dots, op1=nl.add,
                                          operand1=win)

    nisa.dma_copy(dst=qr_t, src=P)
    nisa.dma_copy(dst=tau_out, src=tau)
    return qr_t, tau_out
