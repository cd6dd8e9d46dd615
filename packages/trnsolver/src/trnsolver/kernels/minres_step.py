"""One MINRES iteration (Paige-Saunders, unpreconditioned) on the device, dense symmetric ``A``.

The Lanczos step (one matvec, two dots), the Givens rotation that updates the
least-squares problem, and the ``w``/``x`` updates all run in the kernel; the
recurrence's scalars (``beta``, ``dbar``, ``epsln``, ``phibar``, ``cs``,
``sn``, ...) live in a ``[128, 8]`` tile replicated on every partition and
pass from launch to launch in HBM. The host reads ``(alfa, beta, phibar)``
to apply the torch path's rule (stop on the estimate ``phibar / beta1``,
confirmed by the true residual). Layout and building blocks are
:mod:`trnsolver.kernels.cg_step`'s.

Dimensions
----------
``a`` : ``[n, n]`` float32 (``A^T``; ``A`` symmetric).
``x, r1, r2, w, w2`` : ``[n, 1]`` float32 (``y = r2`` without a preconditioner).
``sc`` : ``[128, 8]`` float32 = ``(oldb, beta, dbar, epsln, phibar, cs, sn, first)``.
Outputs: ``x', r1' = r2, r2' = y, w', w2' = w``, ``sc'``, ``stats`` ``[1, 3]`` =
``(alfa, beta', phibar')``.

Pseudocode
----------
All scalars on every partition:

    v = r2 / beta;  y = A v - (beta / (oldb + first)) (1 - first) r1
    alfa = v.y;  y -= (alfa / beta) r2;  beta' = sqrt(y.y) (0 when y.y = 0)
    delta = cs dbar + sn alfa;  gbar = sn dbar - cs alfa;  epsln' = sn beta';  dbar' = -cs beta'
    gamma = max(sqrt(gbar^2 + beta'^2), eps32);  cs' = gbar / gamma;  sn' = beta' / gamma
    phi = cs' phibar;  phibar' = sn' phibar
    w' = (v - epsln w2 - delta w) / gamma;  x' = x + phi w'

Closed forms (nt = ceil(n / 128))
---------------------------------
    HBM read  = 4 (n^2 + 5 n + 8 * 128)      HBM write = 4 (5 n + 8 * 128 + 3)
    DMA       = nt^2 + 10 nt + 3              Tensor = nt^2 + 2
    Scalar    = 2                             (two sqrt)
    Vector    = 51 + nt
"""

from __future__ import annotations

import numpy as np

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, tile
from trnsolver.kernels.cg_step import _load_vec, _store_vec

EPS32 = float(np.finfo(np.float32).eps)
TINY = 2.0 ** -100  # sqrt's argument floor


def minres_step_counts(n: int) -> dict:
    """The closed forms above."""
    nt = cdiv(n, PMAX)
    return {
        "kernel": "minres_step_kernel",
        "hbm_read_bytes": 4 * (n * n + 5 * n + 8 * PMAX),
        "hbm_write_bytes": 4 * (5 * n + 8 * PMAX + 3),
        "dma": nt * nt + 10 * nt + 3,
        "tensor": nt * nt + 2,
        "scalar": 2,
        "vector": 51 + nt,
    }


@nki.jit
def minres_step_kernel(a, x, r1, r2, w, w2, sc):
    """One MINRES iteration: ``(x', r1', r2', w', w2', sc', stats)``; see the module docstring."""
    n = a.shape[0]
    nt = cdiv(n, PMAX)
    f32 = nl.float32
    outs = [nl.ndarray((n, 1), dtype=f32, buffer=nl.shared_hbm) for _ in range(5)]
    sc_out = nl.ndarray((PMAX, 8), dtype=f32, buffer=nl.shared_hbm)
    stats = nl.ndarray((1, 3), dtype=f32, buffer=nl.shared_hbm)

    def vec(name):
        return nl.ndarray((PMAX, nt), dtype=f32, buffer=nl.sbuf, name=name)

    def col(name):
        return nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name=name)

    X, R1, R2, W, W2 = vec("x"), vec("r1"), vec("r2"), vec("w"), vec("w2")
    V, Y, WN, work = vec("v"), vec("y"), vec("w_new"), vec("work")
    for t_, src in ((X, x), (R1, r1), (R2, r2), (W, w), (W2, w2)):
        nisa.memset(t_, 0.0)
        _load_vec(t_, src, n, nt)
    nisa.memset(Y, 0.0)
    S = nl.ndarray((PMAX, 8), dtype=f32, buffer=nl.sbuf, name="state")
    nisa.dma_copy(dst=S, src=sc)
    ones = nl.ndarray((PMAX, PMAX), dtype=f32, buffer=nl.sbuf, name="ones")
    nisa.memset(ones, 1.0)
    tiny = col("tiny")
    nisa.memset(tiny, TINY)
    oldb, beta, dbar, epsln, phibar, cs, sn, first = (S[0:PMAX, i:i + 1] for i in range(8))

    def allreduce(dst, u, v_, name):
        part = col(name + "_part")
        nisa.tensor_tensor(work, u, v_, nl.multiply)
        nisa.tensor_reduce(part, nl.add, work, axis=1)
        ps = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.psum, name=name + "_ps")
        nisa.nc_matmul(ps, ones, part)
        nisa.tensor_copy(dst, ps)

    rb, coef, alfa, t1, yy, nz, bnew, delta, gbar, gam, rg, phi = (
        col(nm) for nm in ("inv_beta", "coef", "alfa", "tmp", "yy", "nonzero", "beta_new", "delta", "gbar",
                           "gamma", "inv_gamma", "phi"))
    # v = r2 / beta
    nisa.reciprocal(rb, beta)
    nisa.tensor_scalar(V, R2, nl.multiply, rb)
    # y = A v
    for i in nl.static_range(nt):
        i0, ri = tile(i, n, PMAX)
        ps = nl.ndarray((ri, 1), dtype=f32, buffer=nl.psum, name="Av_ps")
        for k in nl.static_range(nt):
            k0, rk = tile(k, n, PMAX)
            blk = nl.ndarray((rk, ri), dtype=f32, buffer=nl.sbuf, name="a_block")
            nisa.dma_copy(dst=blk, src=a[k0:k0 + rk, i0:i0 + ri])
            nisa.nc_matmul(ps, blk, V[0:rk, k:k + 1])
        nisa.tensor_copy(Y[0:ri, i:i + 1], ps)
    # y -= (beta / (oldb + first)) (1 - first) r1
    nisa.tensor_tensor(t1, oldb, first, nl.add)
    nisa.reciprocal(coef, t1)
    nisa.tensor_tensor(coef, coef, beta, nl.multiply)
    nisa.tensor_scalar(t1, first, nl.multiply, -1.0, op1=nl.add, operand1=1.0)
    nisa.tensor_tensor(coef, coef, t1, nl.multiply)
    nisa.scalar_tensor_tensor(dst=Y, data=R1, op0=nl.multiply, operand0=coef, op1=nl.subtract, operand1=Y,
                              reverse1=True)
    allreduce(alfa, V, Y, "alfa")
    # y -= (alfa / beta) r2
    nisa.tensor_tensor(t1, alfa, rb, nl.multiply)
    nisa.scalar_tensor_tensor(dst=Y, data=R2, op0=nl.multiply, operand0=t1, op1=nl.subtract, operand1=Y,
                              reverse1=True)
    # beta' = sqrt(y.y), exactly 0 when y.y = 0
    allreduce(yy, Y, Y, "yy")
    nisa.activation(bnew, op=nl.sqrt, data=yy, bias=tiny)
    nisa.tensor_scalar(nz, yy, nl.greater, 0.0)
    nisa.tensor_tensor(bnew, bnew, nz, nl.multiply)
    # the Givens rotation
    nisa.tensor_tensor(delta, cs, dbar, nl.multiply)
    nisa.scalar_tensor_tensor(dst=delta, data=sn, op0=nl.multiply, operand0=alfa, op1=nl.add, operand1=delta)
    nisa.tensor_tensor(gbar, sn, dbar, nl.multiply)
    nisa.scalar_tensor_tensor(dst=gbar, data=cs, op0=nl.multiply, operand0=alfa, op1=nl.subtract, operand1=gbar,
                              reverse1=True)
    oldeps = col("oldeps")
    nisa.tensor_copy(oldeps, epsln)
    nisa.tensor_copy(oldb, beta)
    nisa.tensor_tensor(epsln, sn, bnew, nl.multiply)
    nisa.scalar_tensor_tensor(dst=dbar, data=cs, op0=nl.multiply, operand0=-1.0, op1=nl.multiply, operand1=bnew)
    nisa.tensor_copy(beta, bnew)
    nisa.tensor_tensor(t1, gbar, gbar, nl.multiply)
    nisa.scalar_tensor_tensor(dst=t1, data=bnew, op0=nl.multiply, operand0=bnew, op1=nl.add, operand1=t1)
    nisa.activation(gam, op=nl.sqrt, data=t1, bias=tiny)
    nisa.tensor_scalar(gam, gam, nl.maximum, EPS32)
    nisa.reciprocal(rg, gam)
    nisa.tensor_tensor(cs, gbar, rg, nl.multiply)
    nisa.tensor_tensor(sn, bnew, rg, nl.multiply)
    nisa.tensor_tensor(phi, cs, phibar, nl.multiply)
    nisa.tensor_tensor(phibar, sn, phibar, nl.multiply)
    nisa.memset(first, 0.0)
    # w' = (v - oldeps w2 - delta w) / gamma ; x += phi w'
    nisa.scalar_tensor_tensor(dst=WN, data=W2, op0=nl.multiply, operand0=oldeps, op1=nl.subtract, operand1=V,
                              reverse1=True)
    nisa.scalar_tensor_tensor(dst=WN, data=W, op0=nl.multiply, operand0=delta, op1=nl.subtract, operand1=WN,
                              reverse1=True)
    nisa.tensor_scalar(WN, WN, nl.multiply, rg)
    nisa.scalar_tensor_tensor(dst=X, data=WN, op0=nl.multiply, operand0=phi, op1=nl.add, operand1=X)
    st = nl.ndarray((1, 3), dtype=f32, buffer=nl.sbuf, name="stats")
    for i, c in enumerate((alfa, bnew, phibar)):
        nisa.tensor_copy(st[0:1, i:i + 1], c[0:1, 0:1])
    for dst, src in zip(outs, (X, R2, Y, WN, W)):
        _store_vec(dst, src, n, nt)
    nisa.dma_copy(dst=sc_out, src=S)
    nisa.dma_copy(dst=stats, src=st)
    return (*outs, sc_out, stats)
