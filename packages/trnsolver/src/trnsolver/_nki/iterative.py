"""NKI lowerings of :mod:`trnsolver.iterative`: CG, BiCGSTAB, MINRES and GMRES with their iterations on the device.

``cg`` with a dense real float32 ``A``, without a preconditioner or with
:func:`trnsolver.jacobi_preconditioner`'s (``z = r / diag(A)`` in the kernel): one
:func:`~trnsolver.kernels.cg_step.cg_step_kernel` launch per iteration. The
matvec (``A`` streamed from HBM through the Tensor Engine), the dot products
(all-reduced over partitions by a ones matmul) and the ``x``/``r``/``p``
updates (Vector Engine) run in the kernel; ``x, r, p`` and ``r^T r`` pass
from one launch to the next in HBM, and only ``||r||^2`` and ``p^T A p``
come back to the host, which applies SciPy's stopping rule exactly as the
torch path does (same iteration count up to float32 rounding of the dots).
A nonzero ``x0`` gets its starting residual ``b - A x0`` from the GEMM
kernel. The host reads ``x`` each iteration only when a ``callback`` asks
for it. The true residual checked once at the end (``_finish``) is the
torch matvec.

``bicgstab`` (dense float32 ``A``, no preconditioner): one
:func:`~trnsolver.kernels.bicgstab_step.bicgstab_step_kernel` launch per
iteration, both matvecs and all five dots inside; the kernel returns the
iterate for both of SciPy's exits (on ``||s||`` and on ``||r||``) and the host
picks the one its rule takes.

``minres`` (dense float32 ``A``, no preconditioner): one
:func:`~trnsolver.kernels.minres_step.minres_step_kernel` launch per
iteration -- the Lanczos step, the Givens rotation and the ``w``/``x``
updates in the kernel, its scalars replicated on every partition; the
host confirms a converged estimate with the true residual from the GEMM
kernel, as the torch path does with its matvec. On device tensors the
scalars stay on the device and the host reads once per ``CHECK_EVERY``
iterations (:func:`_minres_resident`).

``gmres`` (dense float32 ``A``, no preconditioner, ``restart <= 127``): one
:func:`~trnsolver.kernels.gmres_arnoldi.gmres_arnoldi_kernel` launch per
inner iteration (matvec and CGS2 projections against the basis, which
stays in HBM); the Hessenberg column's Givens rotations and the small
triangular solve on the host; ``x += V y`` and each restart's residual on
the GEMM kernel. On device tensors the rotations and the triangular solve
stay on the device and the host reads once per ``CHECK_EVERY`` inner
iterations (:func:`_gmres_resident`).

``cg`` with a sparse float32 ``A`` that offers a device SpMV through the
``__trnsci_spmv__`` seam (trnsparse's ``CSRMatrix``; see
:class:`trnsolver.iterative.SparseMatvec`), without a preconditioner: two
launches per iteration -- the matrix's SpMV kernel (``csr_spmv_kernel`` on the
layout cached on the matrix) for ``A p``, then
:func:`~trnsolver.kernels.cg_update.cg_update_kernel` for the dots and the
``x``/``r``/``p`` updates; the host reads ``(r^T r, p^T A p)`` only and applies
the same stopping rule. A nonzero ``x0`` gets ``b - A x0`` from one SpMV launch.
The plan lists one iteration's launches and their summed closed forms.
``bicgstab`` on such a matrix: SpMV ``v = A p``,
:func:`~trnsolver.kernels.bicgstab_half.bicgstab_half_kernel` (the host reads
``||s||`` for SciPy's mid-iteration exit), SpMV ``t = A s``,
:func:`~trnsolver.kernels.bicgstab_finish.bicgstab_finish_kernel` (which also
forms the next ``rho`` and ``p``).

Not on the device yet (torch path, the plan says so): other preconditioners,
sparse ``A`` for minres/gmres, and operator/callable ``A``. Their
device composition would be the same pattern -- the SpMV seam or the dense
kernels' matvec, Vector-Engine axpys, partition all-reduces for the dots, and
only the scalars that decide convergence (plus GMRES's small Hessenberg
solve) on the host.
"""

from __future__ import annotations

import math

import torch

import trnblas
from trnsci import nki
from trnsolver._nki.common import _trnblas
from trnsolver.iterative import (
    BICGSTAB,
    CG,
    GMRES,
    MINRES,
    DenseMatvec,
    DiagonalPrecond,
    SparseMatvec,
    _end_block,
    _not_finite,
    threshold,
)
from trnsolver.kernels.bicgstab_finish import bicgstab_finish_counts, bicgstab_finish_kernel
from trnsolver.kernels.bicgstab_half import bicgstab_half_counts, bicgstab_half_kernel
from trnsolver.kernels.bicgstab_step import bicgstab_step_kernel
from trnsolver.kernels.cg_step import cg_step_kernel
from trnsolver.kernels.cg_update import MAX_N as UPDATE_MAX_N
from trnsolver.kernels.cg_update import cg_update_counts, cg_update_kernel
from trnsolver.kernels.gmres_arnoldi import MAX_K, gmres_arnoldi_kernel
from trnsolver.kernels.minres_step import minres_step_kernel

F32 = torch.float32


def _start(b, x0, tol, atol, matvec, shape, resident=False):
    """What every Krylov lowering starts from, in float32 of ``shape`` (``(n,)`` or ``(n, 1)``).

    Returns ``(x, r, stop, scale, hist, done)``: ``x0`` (zeros when None), ``r = b - A x0``
    (``b`` itself when ``x0`` is None, no product), the stopping threshold ``max(tol ||b||, atol)``,
    the scale of the residual history (``||b||``, or 1 for ``b = 0``), the history's first entry,
    and whether that residual already meets the threshold -- the torch path's rule.
    ``resident=True`` on device tensors: the history's entry and ``done`` stay device tensors.
    """
    _, stop, scale = threshold(b, tol, atol)
    b32 = b.to(F32).reshape(shape)
    if x0 is None:
        x, r = torch.zeros(shape, dtype=F32, device=b.device), b32.clone()
    else:
        x = x0.to(F32).reshape(shape).clone()
        r = b32 - matvec(x)
    if resident and not b.is_cpu:  # on a device: the start's residual stays there (read with the first block)
        rn = torch.linalg.vector_norm(r)
        return x, r, stop, scale, [rn / scale], (rn < stop) | (rn == 0)
    rn = float(torch.linalg.vector_norm(r))
    return x, r, stop, scale, [rn / scale], rn < stop or rn == 0.0


def _gemm_with(A):
    """``x -> A x`` on trnblas's GEMM kernel (float32 ``A`` made contiguous once)."""
    A = A.to(F32).contiguous()

    def Ax(x):
        with _trnblas():
            return trnblas.gemm(1.0, A, x)

    return Ax


def _sparse_cg_supports(matvec, b, precond):
    if precond is not None:
        return "a preconditioner M with a sparse A: the sparse device CG is unpreconditioned"
    if b.dtype != F32:
        return "b is not real float32"
    if b.shape[0] > UPDATE_MAX_N:
        return f"n = {b.shape[0]} > {UPDATE_MAX_N}: cg_update_kernel holds its vectors in one SBUF tile each"
    dev = matvec.device()
    if isinstance(dev, str):
        return f"the sparse A has no device SpMV: {dev}"
    return None


def _cg_supports(matvec, b, x0, tol, atol, maxiter, precond, callback=None):
    if isinstance(matvec, SparseMatvec):
        return _sparse_cg_supports(matvec, b, precond)
    if not isinstance(matvec, DenseMatvec):
        return "A is not a dense matrix (sparse, operator or callable): the kernel streams a dense A"
    if precond is not None and not isinstance(precond, DiagonalPrecond):
        return "a preconditioner M other than jacobi_preconditioner's: the device path applies only that one"
    if matvec.matrix.dtype != F32 or b.is_complex():
        return "A is not real float32"
    if b.numel() == 0:
        return "empty system"
    return None


def _cg_counts(*args, **kwargs):
    """None: one launch per iteration, and the iterations depend on the data (one
    launch's closed form is :func:`~trnsolver.kernels.cg_step.cg_step_counts`)."""
    return None


def _sparse_cg_counts(matvec, b, x0, tol, atol, maxiter, precond, callback=None):
    """A sparse ``A``: ONE iteration's launches (SpMV, then the vector update) and their summed
    closed forms; a solve runs this pair once per iteration (plus one SpMV first for a nonzero ``x0``)."""
    if not isinstance(matvec, SparseMatvec):
        return None
    parts = [matvec.device().counts(), cg_update_counts(b.shape[0])]
    total: dict = {"kernel": "cg iteration: " + " -> ".join(p["kernel"] for p in parts),
                   "kernels": [p["kernel"] for p in parts]}
    for p in parts:
        for k, v in p.items():
            if k != "kernel":
                total[k] = total.get(k, 0) + v
    return total


def _first_product(x0) -> tuple:
    """``r = b - A x0`` on the GEMM kernel first when ``x0`` is given (:func:`_start`)."""
    return ("gemm_kernel",) if x0 is not None else ()


def _cg_kernels(matvec, b, x0, tol, atol, maxiter, precond, callback=None):
    if isinstance(matvec, SparseMatvec):
        return _sparse_cg_counts(matvec, b, x0, tol, atol, maxiter, precond)["kernels"]
    return (*_first_product(x0), "cg_step_kernel")


@CG.lowering("nki", dtypes=(F32,), supports=_cg_supports, counts=_sparse_cg_counts, kernels=_cg_kernels)
def _cg_nki(matvec, b, x0, tol, atol, maxiter, precond, callback=None):
    if isinstance(matvec, SparseMatvec):
        return _sparse_cg(matvec.device(), b, x0, tol, atol, maxiter, callback)
    n = b.shape[0]
    a = matvec.matrix.mT.to(F32).contiguous()  # the kernel multiplies by its argument's transpose
    x, r, stop, scale, hist, done = _start(b, x0, tol, atol, _gemm_with(matvec.matrix), (n, 1), resident=True)
    if done is True:
        return x.reshape(n).to(b.dtype), 0, hist
    p = torch.zeros(n, 1, dtype=F32, device=b.device)
    rz = torch.ones(128, 1, dtype=F32, device=b.device)
    extra = () if precond is None else (precond.inv_d.to(F32).reshape(n, 1).contiguous(),)

    def step(x, r, p, rz):
        return nki.run(cg_step_kernel, a, x, r, p, rz, *extra, out_dtype=F32)

    return _cg_iterate(step, (x, r, p, rz), b, maxiter, stop, scale, hist, callback, done)


#: Iterations between two convergence reads of the kernel CG loop on device tensors.
CHECK_EVERY = 8


def _cg_iterate_resident(step, state, b, maxiter, stop, scale, hist, callback, done, check_every=CHECK_EVERY):
    """:func:`_cg_iterate` on device tensors: ``stats`` stay on the device; a converged (or broken-down)
    state is frozen there (``torch.where``), and the host reads the stopping flags, the iteration count
    and the block's residual history once every ``check_every`` iterations."""
    n = b.shape[0]
    dev = b.device
    active = ~torch.as_tensor(done, dtype=torch.bool, device=dev)
    its = torch.zeros((), dtype=F32, device=dev)
    bad = torch.zeros((), dtype=torch.bool, device=dev)
    got: list = []
    it = iters = 0
    while it < maxiter:
        for _ in range(min(check_every, maxiter - it)):
            it += 1
            was = active
            *new, stats = step(*state)
            rn2, pap = stats[0, 0], stats[0, 1]
            bad = bad | (active & ~torch.isfinite(pap))
            active = active & torch.isfinite(pap) & (pap != 0)
            state = tuple(torch.where(active, a, o) for a, o in zip(new, state))
            rn = torch.sqrt(torch.clamp(rn2, min=0.0))
            hist.append(torch.where(active, rn / scale, torch.full_like(rn, math.nan)))
            its = its + was.to(F32)
            if callback is not None:
                callback(state[0].reshape(n).to(b.dtype))
            active = active & ~((rn < stop) | (rn == 0))
        running, iters = _end_block("cg", "p^H A p", (active, its, bad), hist[len(got):], got, F32, dev)
        if not running:
            break
    return state[0].reshape(n).to(b.dtype), iters, [v for v in got if v == v][: iters + 1]


def _cg_iterate(step, state, b, maxiter, stop, scale, hist, callback, done=False):
    """The host's part of CG on the device: launch ``step(x, r, p, rz) -> (x', r', p', rz', stats)``
    once per iteration, read ``stats = (r^T r, p^T A p)`` and stop by the torch path's rule
    (:func:`_cg_iterate_resident` on device tensors)."""
    if not b.is_cpu:
        return _cg_iterate_resident(step, state, b, maxiter, stop, scale, hist, callback, done)
    n = b.shape[0]
    it = 0
    for it in range(1, maxiter + 1):  # noqa: B007 (it is returned)
        *new, stats = step(*state)
        rn2, pap = float(stats[0, 0]), float(stats[0, 1])
        if not math.isfinite(pap):
            raise _not_finite("cg", "p^H A p", it)
        if pap == 0.0:  # the step would divide by zero: keep the previous iterate (as the torch path)
            break
        state = tuple(new)
        rn = math.sqrt(max(rn2, 0.0))
        hist.append(rn / scale)
        if callback is not None:
            callback(state[0].reshape(n).to(b.dtype))
        if rn < stop or rn == 0.0:
            break
    return state[0].reshape(n).to(b.dtype), it, hist


def _sparse_cg(spmv, b, x0, tol, atol, maxiter, callback):
    """CG on a sparse ``A``: per iteration one SpMV launch (``spmv.run``, the matrix's kernel on
    its cached device layout) and one :func:`~trnsolver.kernels.cg_update.cg_update_kernel`
    launch; the host reads ``(r^T r, p^T A p)`` and stops as the torch path does."""
    n = b.shape[0]

    def mv(u):  # vectors are [n] (the update kernel's layout); the SpMV takes and returns [n, 1] views
        return spmv.run(u.reshape(n, 1)).reshape(n)

    x, r, stop, scale, hist, done = _start(b, x0, tol, atol, mv, (n,))
    if done:
        return x.to(b.dtype), 0, hist
    p = r.clone()  # the first direction is z = r (beta = 0)
    rz = torch.full((128, 1), float((r * r).sum()), dtype=F32)

    def step(x, r, p, rz):
        return nki.run(cg_update_kernel, x, r, p, mv(p), rz, out_dtype=F32)

    return _cg_iterate(step, (x, r, p, rz), b, maxiter, stop, scale, hist, callback)


# ------------------------------------------------------------------ BiCGSTAB


def _bicgstab_supports(matvec, b, x0, tol, atol, maxiter, precond, callback=None):
    if precond is not None:
        return "a preconditioner M: the device BiCGSTAB is unpreconditioned"
    return _cg_supports(matvec, b, x0, tol, atol, maxiter, None, callback)


def _dense_only_supports(matvec, b, x0, tol, atol, maxiter, precond, callback=None, *rest):
    if isinstance(matvec, SparseMatvec):
        return "a sparse A: the device path on the SpMV seam is CG's and BiCGSTAB's only"
    return _bicgstab_supports(matvec, b, x0, tol, atol, maxiter, precond, callback)


def _sparse_bicgstab_counts(matvec, b, x0, tol, atol, maxiter, precond, callback=None):
    """A sparse ``A``: ONE full iteration's four launches (SpMV, half step, SpMV, finish) and their
    summed closed forms (an exit on ``||s||`` skips the second SpMV and the finish)."""
    if not isinstance(matvec, SparseMatvec):
        return None
    sp = matvec.device().counts()
    n = b.shape[0]
    parts = [sp, bicgstab_half_counts(n), sp, bicgstab_finish_counts(n)]
    total: dict = {"kernel": "bicgstab iteration: " + " -> ".join(p["kernel"] for p in parts),
                   "kernels": [p["kernel"] for p in parts]}
    for p in parts:
        for k, v in p.items():
            if k != "kernel":
                total[k] = total.get(k, 0) + v
    return total


def _sparse_bicgstab(spmv, b, x0, tol, atol, maxiter, callback):
    """BiCGSTAB on a sparse ``A``: per iteration SpMV ``v = A p``,
    :func:`~trnsolver.kernels.bicgstab_half.bicgstab_half_kernel` (host reads ``rhat.v`` and
    ``||s||^2``), SpMV ``t = A s``, :func:`~trnsolver.kernels.bicgstab_finish.bicgstab_finish_kernel`
    (host reads ``||r||^2``, ``omega`` and the next ``rho``); the torch path's stopping rule."""
    n = b.shape[0]

    def mv(u):
        return spmv.run(u.reshape(n, 1)).reshape(n)

    x, r, stop, scale, hist, done = _start(b, x0, tol, atol, mv, (n,))
    if done:
        return x.to(b.dtype), 0, hist
    rhat, p = r.clone(), r.clone()  # the first direction is r (beta = 0)
    v = torch.zeros(n, dtype=F32)
    rho_f = float((r * r).sum())
    rho = torch.full((128, 1), rho_f, dtype=F32)
    it = 0
    for it in range(1, maxiter + 1):  # noqa: B007 (it is returned)
        if rho_f == 0.0:
            break
        v = mv(p)
        s, xh, alpha, st = nki.run(bicgstab_half_kernel, x, r, p, v, rhat, rho, out_dtype=F32)
        den, sn2 = float(st[0, 0]), float(st[0, 1])
        if not math.isfinite(den):
            raise _not_finite("bicgstab", "rhat^H A p", it)
        if den == 0.0:
            break
        sn = math.sqrt(max(sn2, 0.0))
        if sn < stop or sn == 0.0:
            x = xh
            hist.append(sn / scale)
            if callback is not None:
                callback(x.to(b.dtype))
            break
        t = mv(s)
        x, r, pn, rhon, st = nki.run(bicgstab_finish_kernel, xh, s, t, rhat, p, v, rho, alpha, out_dtype=F32)
        rn2, omega, rho_f = (float(z) for z in st[0])
        p, rho = pn, rhon
        rn = math.sqrt(max(rn2, 0.0))
        hist.append(rn / scale)
        if callback is not None:
            callback(x.to(b.dtype))
        if rn < stop or rn == 0.0 or omega == 0.0:
            break
    return x.to(b.dtype), it, hist


def _bicgstab_kernels(matvec, b, x0, tol, atol, maxiter, precond, callback=None):
    if isinstance(matvec, SparseMatvec):
        return _sparse_bicgstab_counts(matvec, b, x0, tol, atol, maxiter, precond)["kernels"]
    return (*_first_product(x0), "bicgstab_step_kernel")


@BICGSTAB.lowering("nki", dtypes=(F32,), supports=_bicgstab_supports, counts=_sparse_bicgstab_counts,
                   kernels=_bicgstab_kernels)
def _bicgstab_nki(matvec, b, x0, tol, atol, maxiter, precond, callback=None):
    """One :func:`~trnsolver.kernels.bicgstab_step.bicgstab_step_kernel` launch per iteration;
    the host reads ``(rho, rhat.v, ||s||^2, ||r||^2, omega)`` and stops as the torch path does."""
    if isinstance(matvec, SparseMatvec):
        return _sparse_bicgstab(matvec.device(), b, x0, tol, atol, maxiter, callback)
    n = b.shape[0]
    a = matvec.matrix.mT.to(F32).contiguous()
    if not b.is_cpu:
        return _bicgstab_resident(a, matvec, b, x0, tol, atol, maxiter, callback)
    x, r, stop, scale, hist, done = _start(b, x0, tol, atol, _gemm_with(matvec.matrix), (n, 1))
    if done:
        return x.reshape(n).to(b.dtype), 0, hist
    rhat = r.clone()
    p = torch.zeros(n, 1, dtype=F32)
    v = torch.zeros(n, 1, dtype=F32)
    sc = torch.ones(128, 3, dtype=F32)
    it = 0
    for it in range(1, maxiter + 1):  # noqa: B007 (it is returned)
        xf, xh, rn_, pn, vn, scn, st = nki.run(bicgstab_step_kernel, a, x, r, rhat, p, v, sc, out_dtype=F32)
        rho, den, sn2, rn2, omega = (float(z) for z in st[0])
        if rho == 0.0:
            break
        if not math.isfinite(den):
            raise _not_finite("bicgstab", "rhat^H A p", it)
        if den == 0.0:
            break
        sn = math.sqrt(max(sn2, 0.0))
        if sn < stop or sn == 0.0:
            x = xh
            hist.append(sn / scale)
            if callback is not None:
                callback(x.reshape(n).to(b.dtype))
            break
        x, r, p, v, sc = xf, rn_, pn, vn, scn
        rn = math.sqrt(max(rn2, 0.0))
        hist.append(rn / scale)
        if callback is not None:
            callback(x.reshape(n).to(b.dtype))
        if rn < stop or rn == 0.0 or omega == 0.0:
            break
    return x.reshape(n).to(b.dtype), it, hist


def _bicgstab_resident(a, matvec, b, x0, tol, atol, maxiter, callback, check_every=CHECK_EVERY):
    """:func:`_bicgstab_nki` on device tensors: the step's five scalars stay on the device. Each exit of
    the host loop (``rho = 0``, ``rhat.v = 0``, ``||s||`` or ``||r||`` below the threshold, ``omega = 0``)
    freezes the state there (``torch.where``: the ``||s||`` exit takes ``x_half``), and the host reads the
    stopping flags, the iteration count and the block's history once every ``check_every`` iterations,
    as :func:`_cg_iterate_resident` does; the iterates and the count equal the host loop's."""
    n = b.shape[0]
    dev = b.device
    x, r, stop, scale, hist, done = _start(b, x0, tol, atol, _gemm_with(matvec.matrix), (n, 1), resident=True)
    rhat = r.clone()
    p = torch.zeros(n, 1, dtype=F32, device=dev)
    v = torch.zeros(n, 1, dtype=F32, device=dev)
    sc = torch.ones(128, 3, dtype=F32, device=dev)
    active = ~torch.as_tensor(done, dtype=torch.bool, device=dev)
    its = torch.zeros((), dtype=F32, device=dev)
    bad = torch.zeros((), dtype=torch.bool, device=dev)
    nan = torch.full((), math.nan, dtype=F32, device=dev)
    got: list = []
    it = iters = 0
    while it < maxiter:
        for _ in range(min(check_every, maxiter - it)):
            it += 1
            xf, xh, rn_, pn, vn, scn, st = nki.run(bicgstab_step_kernel, a, x, r, rhat, p, v, sc, out_dtype=F32)
            rho, den, sn2, rn2, omega = st[0].unbind(0)
            its = its + active.to(F32)
            go = active & (rho != 0)
            bad = bad | (go & ~torch.isfinite(den))
            go = go & torch.isfinite(den) & (den != 0)
            sn = torch.sqrt(torch.clamp(sn2, min=0.0))
            half = go & ((sn < stop) | (sn == 0))
            full = go & ~half
            x = torch.where(half, xh, torch.where(full, xf, x))
            r, p, v, sc = (torch.where(full, new, old) for new, old in ((rn_, r), (pn, p), (vn, v), (scn, sc)))
            rn = torch.sqrt(torch.clamp(rn2, min=0.0))
            hist.append(torch.where(half, sn / scale, torch.where(full, rn / scale, nan)))
            if callback is not None:
                callback(x.reshape(n).to(b.dtype))
            active = full & ~((rn < stop) | (rn == 0) | (omega == 0))
        running, iters = _end_block("bicgstab", "rhat^H A p", (active, its, bad), hist[len(got):], got, F32, dev)
        if not running:
            break
    return x.reshape(n).to(b.dtype), iters, [h for h in got if h == h]


# ------------------------------------------------------------------ MINRES


def _minres_kernels(matvec, b, x0, tol, atol, maxiter, precond, callback=None, shift=0.0):
    """The step kernel; the GEMM kernel confirms a converged estimate (and forms ``b - A x0`` first)."""
    return (*_first_product(x0), "minres_step_kernel", "gemm_kernel")


@MINRES.lowering("nki", dtypes=(F32,), supports=_dense_only_supports, counts=_cg_counts, kernels=_minres_kernels)
def _minres_nki(matvec, b, x0, tol, atol, maxiter, precond, callback=None, shift=0.0):
    """One :func:`~trnsolver.kernels.minres_step.minres_step_kernel` launch per iteration; the
    host reads ``(alfa, beta, phibar)`` and, when the estimate meets the tolerance, confirms it
    with the true residual ``b - A x`` from the GEMM kernel -- the torch path's rule."""
    n = b.shape[0]
    A = matvec.matrix.to(F32).contiguous()
    a = A.mT.contiguous()
    b32 = b.to(F32).reshape(n, 1)
    Ax = _gemm_with(A)

    def residual(x):
        return b32 - Ax(x)

    if not b.is_cpu:
        return _minres_resident(a, Ax, b, x0, tol, atol, maxiter, callback)
    x, r1, stop, scale, hist, done = _start(b, x0, tol, atol, Ax, (n, 1))
    rn = hist[0] * scale
    if done:
        return x.reshape(n).to(b.dtype), 0, hist
    beta1 = math.sqrt(max(float((r1 * r1).sum()), 0.0))
    if beta1 == 0.0:
        return x.reshape(n).to(b.dtype), 0, hist
    sc = torch.zeros(128, 8, dtype=F32)
    sc[:, 1] = beta1   # beta
    sc[:, 4] = beta1   # phibar
    sc[:, 5] = -1.0    # cs
    sc[:, 7] = 1.0     # first iteration
    r2 = r1.clone()
    w = torch.zeros(n, 1, dtype=F32)
    w2 = torch.zeros(n, 1, dtype=F32)
    it = 0
    for it in range(1, maxiter + 1):  # noqa: B007 (it is returned)
        x, r1, r2, w, w2, sc, st = nki.run(minres_step_kernel, a, x, r1, r2, w, w2, sc, out_dtype=F32)
        alfa, beta, phibar = (float(z) for z in st[0])
        if not math.isfinite(alfa):
            raise _not_finite("minres", "v^H A v", it)
        est = phibar / beta1 * scale
        hist.append(phibar / beta1 * (rn / scale))
        if callback is not None:
            callback(x.reshape(n).to(b.dtype))
        if est < stop or beta == 0.0:
            true = float(torch.linalg.vector_norm(residual(x)))
            hist[-1] = true / scale
            if true < stop or true == 0.0 or beta == 0.0:
                break
    return x.reshape(n).to(b.dtype), it, hist


def _minres_resident(a, Ax, b, x0, tol, atol, maxiter, callback, check_every=CHECK_EVERY):
    """:func:`_minres_nki` on device tensors: the step's scalars stay on the device. An estimate below the
    threshold (or ``beta = 0``) freezes the state there (``torch.where``); the host reads the flags, the
    iteration count and the block's history once every ``check_every`` iterations, and confirms a frozen
    state with the true residual (one more read), resuming when it misses -- the host loop's rule, so the
    iterates and the count equal the host loop's."""
    n = b.shape[0]
    dev = b.device
    b32 = b.to(F32).reshape(n, 1)
    x, r1, stop, scale, hist, done = _start(b, x0, tol, atol, Ax, (n, 1), resident=True)
    rn = hist[0] * scale
    beta1 = torch.sqrt(torch.clamp((r1 * r1).sum(), min=0.0))
    active = ~(done | (beta1 == 0))
    b1 = torch.where(beta1 != 0, beta1, torch.ones_like(beta1))
    sc = torch.zeros(128, 8, dtype=F32, device=dev)
    sc[:, 1] = beta1   # beta
    sc[:, 4] = beta1   # phibar
    sc[:, 5] = -1.0    # cs
    sc[:, 7] = 1.0     # first iteration
    r2 = r1.clone()
    w = torch.zeros(n, 1, dtype=F32, device=dev)
    w2 = torch.zeros(n, 1, dtype=F32, device=dev)
    its = torch.zeros((), dtype=F32, device=dev)
    bad = torch.zeros((), dtype=torch.bool, device=dev)
    held = torch.zeros((), dtype=torch.bool, device=dev)
    nan = torch.full((), math.nan, dtype=F32, device=dev)
    beta = beta1
    got: list = []
    iters = 0
    while iters < maxiter:
        for _ in range(min(check_every, maxiter - iters)):
            *new, st = nki.run(minres_step_kernel, a, x, r1, r2, w, w2, sc, out_dtype=F32)
            alfa, nbeta, phibar = st[0].unbind(0)
            its = its + active.to(F32)
            bad = bad | (active & ~torch.isfinite(alfa))
            ok = active & torch.isfinite(alfa)
            x, r1, r2, w, w2, sc = (torch.where(ok, u, o) for u, o in zip(new, (x, r1, r2, w, w2, sc)))
            beta = torch.where(ok, nbeta, beta)
            hist.append(torch.where(ok, phibar / b1 * (rn / scale), nan))
            if callback is not None:
                callback(x.reshape(n).to(b.dtype))
            hit = ok & ((phibar / b1 * scale < stop) | (nbeta == 0))
            held = held | hit
            active = ok & ~hit
        running, iters, frozen = _end_block("minres", "v^H A v", (active, its, bad, held), hist[len(got):], got,
                                            F32, dev)
        if frozen:  # the host loop's confirmation: the true residual (one more read)
            true = torch.linalg.vector_norm(b32 - Ax(x))
            rel, met = torch.stack([true / scale, ((true < stop) | (true == 0) | (beta == 0)).to(F32)]).tolist()
            got[max(i for i, h in enumerate(got) if h == h)] = rel
            if met:
                break
            active = torch.ones((), dtype=torch.bool, device=dev)
            held = torch.zeros((), dtype=torch.bool, device=dev)
        elif not running:
            break
    return x.reshape(n).to(b.dtype), iters, [h for h in got if h == h]


# ------------------------------------------------------------------ GMRES


def _gmres_supports(matvec, b, x0, tol, atol, restart, maxiter, precond, callback=None):
    if max(1, min(restart, b.shape[0])) + 1 > MAX_K:
        return f"restart={restart}: the Arnoldi kernel holds at most {MAX_K - 1} basis vectors"
    return _dense_only_supports(matvec, b, x0, tol, atol, maxiter, precond, callback)


@GMRES.lowering("nki", dtypes=(F32,), supports=_gmres_supports, counts=_cg_counts,
                kernels=("gemm_kernel", "gmres_arnoldi_kernel"))
def _gmres_nki(matvec, b, x0, tol, atol, restart, maxiter, precond, callback=None):
    """One :func:`~trnsolver.kernels.gmres_arnoldi.gmres_arnoldi_kernel` launch per inner
    iteration (the basis stays in HBM); the Hessenberg column's Givens rotations and the
    small triangular solve on the host, as the torch path does them; ``x += V y`` and the
    restart residual ``b - A x`` on the GEMM kernel."""
    n = b.shape[0]
    A = matvec.matrix.to(F32).contiguous()
    a = A.mT.contiguous()
    b32 = b.to(F32).reshape(n, 1)
    x = torch.zeros(n, 1, dtype=F32, device=b.device) if x0 is None else x0.to(F32).reshape(n, 1).clone()
    _, stop, scale = threshold(b, tol, atol)
    m = max(1, min(restart, n))
    if not b.is_cpu:
        return _gmres_resident(a, A, b32, x, b, stop, scale, m, maxiter, callback)
    total = 0
    hist = []
    for _cycle in range(maxiter):
        with _trnblas():
            r = b32 - trnblas.gemm(1.0, A, x)
        beta = float(torch.linalg.vector_norm(r))
        if not hist:
            hist.append(beta / scale)
        if beta < stop or beta == 0.0:
            return x.reshape(n).to(b.dtype), total, hist
        V = torch.zeros(n, m + 1, dtype=F32, device=b.device)  # the basis stays with A; H, g on the host
        H = torch.zeros(m + 1, m, dtype=torch.float64)
        cs = torch.zeros(m, dtype=torch.float64)
        sn = torch.zeros(m, dtype=torch.float64)
        g = torch.zeros(m + 1, dtype=torch.float64)
        g[0] = beta
        V[:, 0] = r[:, 0] / beta
        k = 0
        for j in range(m):
            Vk = V[:, :j + 1].contiguous()
            vnext, h, hn_t = nki.run(gmres_arnoldi_kernel, a, Vk, Vk.mT.contiguous(), out_dtype=F32)
            total += 1
            hn = float(hn_t[0, 0])
            if not math.isfinite(hn):
                raise _not_finite("gmres", "A v", total)
            col = torch.zeros(m + 1, dtype=torch.float64)
            col[:j + 1] = h[:, 0].double().cpu()
            col[j + 1] = hn
            for i in range(j):  # apply the previous Givens rotations
                t = cs[i] * col[i] + sn[i] * col[i + 1]
                col[i + 1] = -sn[i] * col[i] + cs[i] * col[i + 1]
                col[i] = t
            aa, bb = float(col[j]), float(col[j + 1])
            den = math.hypot(aa, bb)
            if den == 0:
                cs[j], sn[j] = 1.0, 0.0
            elif aa == 0:
                cs[j], sn[j] = 0.0, 1.0
            else:
                cs[j], sn[j] = abs(aa) / den, math.copysign(1.0, aa) * bb / den
            col[j] = cs[j] * aa + sn[j] * bb
            col[j + 1] = 0
            g[j + 1] = -sn[j] * g[j]
            g[j] = cs[j] * g[j]
            H[:, j] = col
            k = j + 1
            res = abs(float(g[j + 1]))
            hist.append(res / scale)
            if hn > 0:
                V[:, j + 1] = vnext[:, 0]
            if res <= stop or hn == 0:
                break
        y = torch.linalg.solve_triangular(H[:k, :k], g[:k].unsqueeze(-1), upper=True).to(F32).to(b.device)
        with _trnblas():
            x = x + trnblas.gemm(1.0, V[:, :k].contiguous(), y.contiguous())
        if callback is not None:
            callback(x.reshape(n).to(b.dtype))
    return x.reshape(n).to(b.dtype), total, hist


def _gmres_resident(a, A, b32, x, b, stop, scale, m, maxiter, callback, check_every=CHECK_EVERY):
    """:func:`_gmres_nki` on device tensors: the Hessenberg column, its Givens rotations (in float32)
    and the residual estimate stay on the device, and the host reads the flags, the inner-iteration
    count and the block's history once every ``check_every`` inner iterations and at a cycle's end, as
    :func:`trnsolver.iterative._gmres_device_loop` does (masked inner iterations after the stopping test
    leave the first ``k`` columns alone, so the product count equals the host loop's; the restart
    residual is read after a cycle that stopped early, tested on the device otherwise)."""
    n = b.shape[0]
    dev = b.device
    nan = torch.full((), math.nan, dtype=F32, device=dev)
    bad = torch.zeros((), dtype=torch.bool, device=dev)
    total = 0
    got: list = []
    hist: list = []
    early = False
    running = True
    for _cycle in range(maxiter):
        with _trnblas():
            r = b32 - trnblas.gemm(1.0, A, x)
        beta = torch.linalg.vector_norm(r)
        if not got and not hist:
            hist.append(beta / scale)
        if early and torch.stack([(beta < stop) | (beta == 0)]).tolist()[0]:  # the likely last cycle: a read
            return x.reshape(n).to(b.dtype), total, got
        active = ~((beta < stop) | (beta == 0))
        V = torch.zeros(n, m + 1, dtype=F32, device=dev)
        H = torch.zeros(m + 1, m, dtype=F32, device=dev)
        cs = torch.zeros(m, dtype=F32, device=dev)
        sn = torch.zeros(m, dtype=F32, device=dev)
        g = torch.zeros(m + 1, dtype=F32, device=dev)
        g[0] = beta
        V[:, 0] = r[:, 0] / torch.where(beta != 0, beta, torch.ones_like(beta))
        kk = torch.zeros((), dtype=F32, device=dev)
        k = j = 0
        while j < m:
            for j in range(j, min(j + check_every, m)):  # noqa: B020 (j carries over to the next block)
                Vk = V[:, :j + 1].contiguous()
                vnext, h, hn_t = nki.run(gmres_arnoldi_kernel, a, Vk, Vk.mT.contiguous(), out_dtype=F32)
                hn = hn_t[0, 0]
                bad = bad | (active & ~torch.isfinite(hn))
                active = active & torch.isfinite(hn)
                col = torch.cat([h[:, 0], hn.reshape(1), torch.zeros(m - j - 1, dtype=F32, device=dev)])
                for i in range(j):  # apply the previous Givens rotations
                    t = cs[i] * col[i] + sn[i] * col[i + 1]
                    col[i + 1] = -sn[i] * col[i] + cs[i] * col[i + 1]
                    col[i] = t
                aa, bb = col[j].clone(), col[j + 1].clone()
                den = torch.hypot(aa, bb)
                dz, az = den == 0, aa == 0
                safe = torch.where(dz, 1.0, den)
                c = torch.where(dz, 1.0, torch.where(az, 0.0, aa.abs() / safe))
                s_ = torch.where(dz, 0.0, torch.where(az, 1.0, torch.sign(aa) * bb / safe))
                cs[j], sn[j] = c, s_
                col[j] = c * aa + s_ * bb
                col[j + 1] = 0
                g[j + 1] = -s_ * g[j]
                g[j] = c * g[j]
                H[:, j] = col
                res = g[j + 1].abs()
                hist.append(torch.where(active, res / scale, nan))
                kk = kk + active.to(F32)
                V[:, j + 1] = torch.where(hn > 0, vnext[:, 0], 0.0)
                active = active & ~((res <= stop) | (hn == 0))
            j += 1
            running, k = _end_block("gmres", "A v", (active, kk, bad), hist, got, F32, dev, total + 1, drop_nan=True)
            hist = []
            if not running:
                break
        if k == 0:  # the restart residual met the tolerance
            return x.reshape(n).to(b.dtype), total, got
        total += k
        early = not running
        y = torch.linalg.solve_triangular(H[:k, :k], g[:k].unsqueeze(-1), upper=True)
        with _trnblas():
            x = x + trnblas.gemm(1.0, V[:, :k].contiguous(), y.contiguous())
        if callback is not None:
            callback(x.reshape(n).to(b.dtype))
    return x.reshape(n).to(b.dtype), total, got
