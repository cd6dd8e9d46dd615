"""One sweep of parallel (Brent-Luk round-robin) Jacobi on one tile.

Dimensions (HBM, float32)
-------------------------
``a``      : ``[n, n]`` symmetric, ``n`` even, ``2 <= n <= 128``; rows on the
             partition dim.
``vt``     : ``[n, n]`` the transposed eigenvector estimate ``V^T`` (rows on
             the partition dim); the kernel returns ``J^T V^T = (V J)^T``.
``eye``    : ``[n, n]`` the identity (a constant table).
``pairs``  : ``[n, 2 (n-1)]`` the sweep's schedule as (partner, sign)
             columns per round (:func:`partner_table`); round ``r`` is the
             signed partner matrix ``S_r`` with ``S_r[p, q] = +1`` and
             ``S_r[q, p] = -1`` for each of its ``n/2`` pairs ``(p, q)``
             (``p`` the round-robin "top" index), zeros elsewhere (see
             :func:`schedule`), rebuilt on chip as ``S_r = [iota == partner] sign``
             and ``|S_r|`` by the Scalar Engine's abs.

Outputs: ``a_out = G^T a G`` and ``vt_out = G^T vt`` with ``G`` the product
of the sweep's ``n - 1`` round rotations, and ``norms`` ``[1, 2]`` =
``(off(a_out)^2, ||a_out||_F^2)``, so the host decides whether to sweep again
without reading ``a_out``.

Pseudocode
----------
One round (the n/2 rotations commute: they touch disjoint row/column pairs):

Cross-partition data movement on a NeuronCore goes through the Tensor Engine
(or DMA), so the round is built from masks and matmuls:

1. ``S = [iota == partner] * sign`` (one Vector instruction from the
   round's (partner, sign) columns; ``sg`` = the sign column, +1 on top
   rows, -1 on bottom), ``|S|`` (Scalar abs),
   ``d = rowsum(a * I)``, ``o = rowsum(a * |S|)`` (Vector), so row ``i``
   holds ``a_ii`` and ``a_{i, partner(i)}``.
2. ``[d', o'] = |S|^T [d, o]`` (one ``[n, 2]`` matmul): the partner's values.
3. Per row, on ``[n, 1]`` columns: ``x = sg (d' - d) = a_qq - a_pp`` and
   ``y = o + o' = a_pq + a_qp`` -- the same bits on both rows of a pair --
   ``t = sgn(x) y / (|x| + sqrt(x^2 + y^2 + 2^-100))`` (Rutishauser's
   ``t = sign(th) / (|th| + sqrt(1 + th^2))`` with ``th = x / y`` multiplied
   through by ``|y|``, so ``y = 0`` gives ``t = 0`` and nothing divides by
   zero; ``sgn(0) = +1``), ``c = rsqrt(1 + t^2)``, ``s = t c``. Only
   ``reciprocal``/``sqrt``/``rsqrt`` on arguments inside their activation
   ranges (``>= 2^-100``, ``>= 1``).
4. ``J = c I + s S`` (``J[p,p] = J[q,q] = c``, ``J[p,q] = s``, ``J[q,p] = -s``).
5. ``U = a^T J`` (= ``a J``), ``a <- U^T J = J^T a J``, ``vt <- J^T vt``: three
   ``n x n x n`` matmuls, each copied PSUM -> SBUF.

Closed forms per sweep (R = n - 1 rounds, n the padded even size)
----------------------------------------------------------------
    HBM read  = 4 (3 n^2 + 2 R n)          (a, vt, eye once; one (partner, sign) pair of columns a round)
    HBM write = 4 (2 n^2 + 2)
    DMA       = 3 + R + 3
    Tensor Engine = 4 R + 1               (pair gather + 3 updates per round; norms)
    Scalar Engine = 5 R + 4               (|S|, sqrt, |x|, rsqrt, s; 2 squares with reduce, 2 each)
    Vector Engine = 22 R + 5
    GpSimd        = 1                     (iota)
The Tensor Engine does 3 n^3 of the 3 n^3 + O(n^2) multiply-adds of a round;
the [n, 1] column work is short (cost ~ n elements per instruction).
"""

from __future__ import annotations

import numpy as np

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX

MAX_N = PMAX  # one tile: the partition dim
TINY = 2.0 ** -100  # keeps sqrt's argument inside its activation range when x = y = 0


def schedule(n: int) -> np.ndarray:
    """The signed round-robin partner matrices of one sweep, ``[n, (n-1) n]`` float32 (n even)."""
    if n % 2 or n < 2:
        raise ValueError(f"schedule: n must be even and >= 2, got {n}")
    players = list(range(n))
    S = np.zeros((n - 1, n, n), np.float32)
    for r in range(n - 1):
        top, bot = players[: n // 2], players[n // 2:][::-1]
        S[r, top, bot] = 1.0
        S[r, bot, top] = -1.0
        players = [players[0], players[-1]] + players[1:-1]
    return np.ascontiguousarray(S.transpose(1, 0, 2).reshape(n, (n - 1) * n))


def partner_table(n: int) -> np.ndarray:
    """:func:`schedule` as ``[n, 2 (n-1)]`` float32: round ``r``'s columns ``2r, 2r+1`` hold each
    index's partner and the sign of ``S_r`` in its row (+1 top, -1 bottom) -- ``2 n`` numbers a
    round instead of ``n^2``; the sweep kernels rebuild ``|S_r|`` and ``S_r`` on chip."""
    S = schedule(n).reshape(n, n - 1, n)
    out = np.empty((n, 2 * (n - 1)), np.float32)
    out[:, 0::2] = np.abs(S).argmax(axis=2)
    out[:, 1::2] = S.sum(axis=2)
    return out


def eigh_sweep_counts(n: int) -> dict:
    """The closed forms above (n even)."""
    R = n - 1
    return {
        "kernel": "eigh_sweep_kernel",
        "hbm_read_bytes": 4 * (3 * n * n + 2 * R * n),
        "hbm_write_bytes": 4 * (2 * n * n + 2),
        "dma": 6 + R,
        "tensor": 4 * R + 1,
        "scalar": 5 * R + 4,
        "vector": 22 * R + 5,
        "gpsimd": 1,
    }


def _col(name, n):
    return nl.ndarray((n, 1), dtype=nl.float32, buffer=nl.sbuf, name=name)


@nki.jit
def eigh_sweep_kernel(a, vt, eye, pairs):
    """One Brent-Luk Jacobi sweep: ``(a_out, vt_out, norms)``; see the module docstring."""
    n = a.shape[0]
    f32 = nl.float32
    a_out = nl.ndarray((n, n), dtype=f32, buffer=nl.shared_hbm)
    vt_out = nl.ndarray((n, n), dtype=f32, buffer=nl.shared_hbm)
    norms = nl.ndarray((1, 2), dtype=f32, buffer=nl.shared_hbm)

    A = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="A")
    Vt = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="Vt")
    eye_s = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="eye")
    nisa.dma_copy(dst=A, src=a)
    nisa.dma_copy(dst=Vt, src=vt)
    nisa.dma_copy(dst=eye_s, src=eye)
    ones = _col("ones", n)
    nisa.memset(ones, 1.0)
    tiny = _col("tiny", n)
    nisa.memset(tiny, TINY)
    tmp = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="masked")

    qidx = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="column_index")
    nisa.iota(qidx, pattern=[[1, n]])
    for r in nl.static_range(n - 1):
        # the round's partner matrix, built on chip from its (partner, sign) columns
        pr = nl.ndarray((n, 2), dtype=f32, buffer=nl.sbuf, name="partner_sign")
        nisa.dma_copy(dst=pr, src=pairs[0:n, 2 * r:2 * r + 2])
        S = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="S")
        nisa.tensor_scalar(S, qidx, nl.equal, pr[0:n, 0:1], op1=nl.multiply, operand1=pr[0:n, 1:2])
        Sa = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="S_abs")
        nisa.activation(Sa, op=nl.abs, data=S)
        sg = pr[0:n, 1:2]
        # row i: [a_ii, a_{i,partner(i)}]
        do = nl.ndarray((n, 2), dtype=f32, buffer=nl.sbuf, name="diag_off")
        nisa.tensor_tensor(tmp, A, eye_s, nl.multiply)
        nisa.tensor_reduce(do[0:n, 0:1], nl.add, tmp, axis=1)
        nisa.tensor_tensor(tmp, A, Sa, nl.multiply)
        nisa.tensor_reduce(do[0:n, 1:2], nl.add, tmp, axis=1)
        # the partner's [a_jj, a_{j,i}] (|S| is a symmetric permutation)
        part = nl.ndarray((n, 2), dtype=f32, buffer=nl.psum, name="partner")
        nisa.nc_matmul(part, Sa, do)
        x = _col("x", n)
        nisa.tensor_tensor(x, part[0:n, 0:1], do[0:n, 0:1], nl.subtract)
        nisa.tensor_tensor(x, x, sg, nl.multiply)
        y = _col("y", n)
        nisa.tensor_tensor(y, part[0:n, 1:2], do[0:n, 1:2], nl.add)
        # t = sgn(x) y / (|x| + sqrt(x^2 + y^2 + tiny))
        r2 = _col("r2", n)
        nisa.tensor_tensor(r2, y, y, nl.multiply)
        nisa.scalar_tensor_tensor(dst=r2, data=x, op0=nl.multiply, operand0=x, op1=nl.add, operand1=r2)
        rad = _col("rad", n)
        nisa.activation(rad, op=nl.sqrt, data=r2, bias=tiny)
        ax = _col("ax", n)
        nisa.activation(ax, op=nl.abs, data=x)
        den = _col("den", n)
        nisa.tensor_tensor(den, ax, rad, nl.add)
        rden = _col("rden", n)
        nisa.reciprocal(rden, den)
        sgx = _col("sgx", n)
        nisa.tensor_scalar(sgx, x, nl.greater_equal, 0.0, op1=nl.multiply, operand1=2.0)
        nisa.tensor_scalar(sgx, sgx, nl.subtract, 1.0)
        t = _col("t", n)
        nisa.tensor_tensor(t, sgx, y, nl.multiply)
        nisa.tensor_tensor(t, t, rden, nl.multiply)
        # c = rsqrt(1 + t^2), s = t c
        t2 = _col("t2", n)
        nisa.tensor_tensor(t2, t, t, nl.multiply)
        c = _col("c", n)
        nisa.activation(c, op=nl.rsqrt, data=t2, bias=ones)
        s = _col("s", n)
        nisa.activation(s, op=nl.copy, data=t, scale=c)
        # J = c I + s S
        J = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="J")
        nisa.tensor_scalar(J, eye_s, nl.multiply, c)
        nisa.scalar_tensor_tensor(dst=J, data=S, op0=nl.multiply, operand0=s, op1=nl.add, operand1=J)
        # a <- J^T a J ; vt <- J^T vt
        U_ps = nl.ndarray((n, n), dtype=f32, buffer=nl.psum, name="AJ")
        nisa.nc_matmul(U_ps, A, J)
        U = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="AJ_sb")
        nisa.tensor_copy(U, U_ps)
        A_ps = nl.ndarray((n, n), dtype=f32, buffer=nl.psum, name="JtAJ")
        nisa.nc_matmul(A_ps, U, J)
        nisa.tensor_copy(A, A_ps)
        V_ps = nl.ndarray((n, n), dtype=f32, buffer=nl.psum, name="JtVt")
        nisa.nc_matmul(V_ps, J, Vt)
        nisa.tensor_copy(Vt, V_ps)

    # norms: off(A)^2 (of A minus its diagonal, no cancellation) and ||A||_F^2 per row,
    # summed over partitions by a matmul with a ones column
    sums = nl.ndarray((n, 2), dtype=f32, buffer=nl.sbuf, name="sums")
    nisa.tensor_tensor(tmp, A, eye_s, nl.multiply)
    off = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="offdiag")
    nisa.tensor_tensor(off, A, tmp, nl.subtract)
    nisa.activation_reduce(off, op=nl.square, data=off, reduce_op=nl.add, reduce_res=sums[0:n, 0:1])
    nisa.activation_reduce(tmp, op=nl.square, data=A, reduce_op=nl.add, reduce_res=sums[0:n, 1:2])
    tot_ps = nl.ndarray((1, 2), dtype=f32, buffer=nl.psum, name="norms")
    nisa.nc_matmul(tot_ps, ones, sums)
    tot = nl.ndarray((1, 2), dtype=f32, buffer=nl.sbuf, name="norms_sb")
    nisa.tensor_copy(tot, tot_ps)
    nisa.dma_copy(dst=a_out, src=A)
    nisa.dma_copy(dst=vt_out, src=Vt)
    nisa.dma_copy(dst=norms, src=tot)
    return a_out, vt_out, norms
