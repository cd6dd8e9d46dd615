"""One sweep of one-sided (Hestenes) Jacobi SVD on a tile, with the eigh kernel's round-robin rotations.

One-sided Jacobi orthogonalizes the columns of ``U`` (initially ``A``) by
plane rotations ``U <- U J``, ``V <- V J``; at convergence the column norms
are the singular values, ``U`` normalized gives the left vectors and ``V``
the right ones. Each rotation is the symmetric Jacobi rotation of the 2x2
Gram block ``[[alpha, gamma], [gamma, beta]] = [[|u_p|^2, u_p.u_q],
[u_p.u_q, |u_q|^2]]`` -- exactly the ``(t, c, s)`` of
:mod:`trnsolver.kernels.eigh_sweep` (same Brent-Luk schedule from
:func:`~trnsolver.kernels.eigh_sweep.schedule`, same ``J = c I + s S`` build) --
but the Gram entries are recomputed from the current columns every round,
never from an updated ``A^T A``, so small singular values keep their
relative accuracy.

Dimensions (HBM, float32)
-------------------------
``ut``    : ``[n, m]`` ``U^T`` (partition ``i`` = column ``i`` of ``U``), ``n`` even,
            ``2 <= n <= 128``, ``1 <= m <=`` :data:`MAX_M`.
``vt``    : ``[n, n]`` ``V^T``.
``eye``   : ``[n, n]`` the identity.   ``pairs`` : ``[n, 2 (n-1)]`` the schedule as
            (partner, sign) columns per round
            (:func:`~trnsolver.kernels.eigh_sweep.partner_table`); the kernel
            builds ``S_r = [q == partner] sign`` and ``|S_r|`` on chip.
Outputs: ``ut_out = J^T ut``, ``vt_out = J^T vt`` (``J`` the sweep's product),
``conv`` ``[n, 1]``: per partition the largest ``gamma^2 / (alpha beta + 2^-100)``
met in the sweep (the host stops when its maximum is below ``tol^2``);
``norms`` ``[n, 1]``: ``|u_i|^2`` after the sweep (``sigma_i^2`` at convergence).

Pseudocode
----------
One round (R = n - 1 per sweep; nc = ceil(m / 512) column chunks):

    S = [iota == partner] sign (Vector), |S| (Scalar)     (one [n, 2] DMA)
    per chunk: partner rows  Up = |S|^T Ut               (Tensor), copy    (Vector)
               alpha_i parts = rowsum(Ut^2)              (Scalar, activation_reduce)
               gamma_i parts = rowsum(Ut * Up)           (Vector x2)
    alpha, gamma = rowsum of the parts                   (Vector x2)
    alpha_partner = |S|^T alpha                           (Tensor)
    x = sg (alpha_partner - alpha), y = 2 gamma, then t, c, s as in the eigh kernel
    conv = max(conv, gamma^2 / (alpha alpha_partner + 2^-100))
    J = c I + s S;  Ut <- J^T Ut (per chunk: Tensor + copy);  Vt <- J^T Vt

Closed forms per sweep
----------------------
    HBM read  = 4 (n m + 2 n^2 + 2 R n)      HBM write = 4 (n m + n^2 + 2 n)
    DMA       = 3 + R + 4
    Tensor    = R (2 nc + 2)
    Scalar    = R (5 + 2 nc) + 2 nc           (|S|, sqrt, |x|, rsqrt, s; 2 per activation_reduce;
                                               the final column norms)
    Vector    = 4 + R (22 + 4 nc)             GpSimd = 1 (iota)
"""

from __future__ import annotations

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PSUM_FMAX, cdiv, tile

MAX_N = 128
#: Longest column (rows of A) the SBUF plan holds: Ut, its partner copy and a work tile.
MAX_M = 4096
TINY = 2.0 ** -100


def svd_sweep_counts(n: int, m: int) -> dict:
    """The closed forms above (n even)."""
    R, nc = n - 1, cdiv(m, PSUM_FMAX)
    return {
        "kernel": "svd_sweep_kernel",
        "hbm_read_bytes": 4 * (n * m + 2 * n * n + 2 * R * n),
        "hbm_write_bytes": 4 * (n * m + n * n + 2 * n),
        "dma": 7 + R,
        "tensor": R * (2 * nc + 2),
        "scalar": R * (5 + 2 * nc) + 2 * nc,
        "vector": 4 + R * (22 + 4 * nc),
        "gpsimd": 1,
    }


@nki.jit
def svd_sweep_kernel(ut, vt, eye, pairs):
    """One one-sided Jacobi sweep: ``(ut_out, vt_out, conv, norms)``; see the module docstring."""
    n, m = ut.shape
    nc = cdiv(m, PSUM_FMAX)
    f32 = nl.float32
    ut_out = nl.ndarray((n, m), dtype=f32, buffer=nl.shared_hbm)
    vt_out = nl.ndarray((n, n), dtype=f32, buffer=nl.shared_hbm)
    conv_out = nl.ndarray((n, 1), dtype=f32, buffer=nl.shared_hbm)
    norms_out = nl.ndarray((n, 1), dtype=f32, buffer=nl.shared_hbm)

    U = nl.ndarray((n, m), dtype=f32, buffer=nl.sbuf, name="Ut")
    Vt = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="Vt")
    eye_s = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="eye")
    nisa.dma_copy(dst=U, src=ut)
    nisa.dma_copy(dst=Vt, src=vt)
    nisa.dma_copy(dst=eye_s, src=eye)

    def col(name, w=1):
        return nl.ndarray((n, w), dtype=f32, buffer=nl.sbuf, name=name)

    ones, tiny, conv = col("ones"), col("tiny"), col("conv")
    nisa.memset(ones, 1.0)
    nisa.memset(tiny, TINY)
    nisa.memset(conv, 0.0)
    Up = nl.ndarray((n, m), dtype=f32, buffer=nl.sbuf, name="partner_rows")
    work = nl.ndarray((n, m), dtype=f32, buffer=nl.sbuf, name="work")
    aparts, gparts = col("alpha_parts", nc), col("gamma_parts", nc)

    qidx = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="column_index")
    nisa.iota(qidx, pattern=[[1, n]])
    for r in nl.static_range(n - 1):
        # the round's partner matrix, built on chip from its (partner, sign) columns
        pr = col("partner_sign", 2)
        nisa.dma_copy(dst=pr, src=pairs[0:n, 2 * r:2 * r + 2])
        S = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="S")
        nisa.tensor_scalar(S, qidx, nl.equal, pr[0:n, 0:1], op1=nl.multiply, operand1=pr[0:n, 1:2])
        Sa = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="S_abs")
        nisa.activation(Sa, op=nl.abs, data=S)
        sg = pr[0:n, 1:2]
        for c in nl.static_range(nc):
            c0, cw = tile(c, m, PSUM_FMAX)
            ps = nl.ndarray((n, cw), dtype=f32, buffer=nl.psum, name="partner_ps")
            nisa.nc_matmul(ps, Sa, U[0:n, c0:c0 + cw])
            nisa.tensor_copy(Up[0:n, c0:c0 + cw], ps)
            nisa.activation_reduce(work[0:n, c0:c0 + cw], op=nl.square, data=U[0:n, c0:c0 + cw],
                                   reduce_op=nl.add, reduce_res=aparts[0:n, c:c + 1])
            nisa.tensor_tensor(work[0:n, c0:c0 + cw], U[0:n, c0:c0 + cw], Up[0:n, c0:c0 + cw], nl.multiply)
            nisa.tensor_reduce(gparts[0:n, c:c + 1], nl.add, work[0:n, c0:c0 + cw], axis=1)
        alpha, gamma = col("alpha"), col("gamma")
        nisa.tensor_reduce(alpha, nl.add, aparts, axis=1)
        nisa.tensor_reduce(gamma, nl.add, gparts, axis=1)
        ap = nl.ndarray((n, 1), dtype=f32, buffer=nl.psum, name="alpha_partner")
        nisa.nc_matmul(ap, Sa, alpha)
        # the 2x2 Gram block's rotation, as in the eigh kernel (x = a_qq - a_pp, y = 2 a_pq)
        x = col("x")
        nisa.tensor_tensor(x, ap, alpha, nl.subtract)
        nisa.tensor_tensor(x, x, sg, nl.multiply)
        y = col("y")
        nisa.tensor_scalar(y, gamma, nl.multiply, 2.0)
        r2 = col("r2")
        nisa.tensor_tensor(r2, y, y, nl.multiply)
        nisa.scalar_tensor_tensor(dst=r2, data=x, op0=nl.multiply, operand0=x, op1=nl.add, operand1=r2)
        rad = col("rad")
        nisa.activation(rad, op=nl.sqrt, data=r2, bias=tiny)
        ax = col("ax")
        nisa.activation(ax, op=nl.abs, data=x)
        den = col("den")
        nisa.tensor_tensor(den, ax, rad, nl.add)
        rden = col("rden")
        nisa.reciprocal(rden, den)
        sgx = col("sgx")
        nisa.tensor_scalar(sgx, x, nl.greater_equal, 0.0, op1=nl.multiply, operand1=2.0)
        nisa.tensor_scalar(sgx, sgx, nl.subtract, 1.0)
        t = col("t")
        nisa.tensor_tensor(t, sgx, y, nl.multiply)
        nisa.tensor_tensor(t, t, rden, nl.multiply)
        t2 = col("t2")
        nisa.tensor_tensor(t2, t, t, nl.multiply)
        cc = col("c")
        nisa.activation(cc, op=nl.rsqrt, data=t2, bias=ones)
        ss = col("s")
        nisa.activation(ss, op=nl.copy, data=t, scale=cc)
        # convergence: gamma^2 / (alpha alpha_partner + tiny), running max
        ab = col("ab")
        nisa.scalar_tensor_tensor(dst=ab, data=ap, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=tiny)
        rab = col("rab")
        nisa.reciprocal(rab, ab)
        q = col("q")
        nisa.scalar_tensor_tensor(dst=q, data=gamma, op0=nl.multiply, operand0=gamma, op1=nl.multiply,
                                  operand1=rab)
        nisa.tensor_tensor(conv, conv, q, nl.maximum)
        # J = c I + s S; U <- U J, V <- V J (stored transposed: J^T Ut, J^T Vt)
        J = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="J")
        nisa.tensor_scalar(J, eye_s, nl.multiply, cc)
        nisa.scalar_tensor_tensor(dst=J, data=S, op0=nl.multiply, operand0=ss, op1=nl.add, operand1=J)
        for c in nl.static_range(nc):
            c0, cw = tile(c, m, PSUM_FMAX)
            pu = nl.ndarray((n, cw), dtype=f32, buffer=nl.psum, name="JtU")
            nisa.nc_matmul(pu, J, U[0:n, c0:c0 + cw])
            nisa.tensor_copy(U[0:n, c0:c0 + cw], pu)
        pv = nl.ndarray((n, n), dtype=f32, buffer=nl.psum, name="JtV")
        nisa.nc_matmul(pv, J, Vt)
        nisa.tensor_copy(Vt, pv)

    # the column norms^2 after the sweep (the singular values^2 at convergence)
    for c in nl.static_range(nc):
        c0, cw = tile(c, m, PSUM_FMAX)
        nisa.activation_reduce(work[0:n, c0:c0 + cw], op=nl.square, data=U[0:n, c0:c0 + cw],
                               reduce_op=nl.add, reduce_res=aparts[0:n, c:c + 1])
    norms = col("norms2")
    nisa.tensor_reduce(norms, nl.add, aparts, axis=1)
    nisa.dma_copy(dst=ut_out, src=U)
    nisa.dma_copy(dst=vt_out, src=Vt)
    nisa.dma_copy(dst=conv_out, src=conv)
    nisa.dma_copy(dst=norms_out, src=norms)
    return ut_out, vt_out, conv_out, norms_out
