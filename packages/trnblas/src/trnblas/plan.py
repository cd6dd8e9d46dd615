"""Ask which backend would run a BLAS call, and why, without running it.

:func:`plan_gemm` (and the general :func:`plan`) apply the same validation
and canonicalization as the public functions and then ask
:mod:`trnsci.dispatch` for its decision. The result, a :class:`BlasPlan`,
prints as a short report in the manner of opt_einsum's ``PathInfo``::

    >>> import torch, trnblas
    >>> print(trnblas.plan_gemm(torch.ones(64, 32), torch.ones(32, 16)))   # doctest: +SKIP
      operation: trnblas.gemm
         shapes: op(A) 64x32 @ op(B) 32x16 -> 64x16   (transA='N', transB='N')
          dtype: float32
          flops: 65,536
      threshold: (not consulted)
        backend: torch
         reason: backend 'auto' from default; no NeuronCore on this machine
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from trnblas import _common as c
from trnblas import level3 as _l3
from trnsci.dispatch import Decision

__all__ = ["BlasPlan", "plan", "plan_gemm", "plan_batched_gemm", "plan_syrk", "plan_trsm"]


@dataclass(frozen=True)
class BlasPlan:
    """What a BLAS call would do: the operation, its size, the chosen backend and why.

    Attributes
    ----------
    op : str
        The dispatch operation, e.g. ``"trnblas.gemm"``.
    backend : str
        ``"torch"``, ``"nki"`` or ``"simulator"``.
    reason : str
        Why, in words (backend setting and its origin, dtype support, size
        against threshold).
    flops : int
        The operation's size metric (``2 m n k`` per GEMM, ``n^2 k`` for
        syrk, ``m^2 n`` or ``m n^2`` for trsm; x4 for complex data).
    shapes : str
        The problem in words, e.g. ``"op(A) 64x32 @ op(B) 32x16 -> 64x16"``.
    dtype : torch.dtype
    decision : trnsci.dispatch.Decision
        The full decision (setting, threshold that applied).
    kernel : dict or None
        When a kernel would run: its name and the closed-form counts from
        its docstring (``hbm_read_bytes``, ``hbm_write_bytes``, ``tensor``
        instructions, ...), which the emulator reproduces exactly.
    """

    op: str
    backend: str
    reason: str
    flops: int
    shapes: str
    dtype: torch.dtype
    decision: Decision
    kernel: dict | None = None

    @property
    def threshold(self) -> float | None:
        return self.decision.threshold

    def __str__(self) -> str:
        thr = "(not consulted)" if self.threshold is None else f"{self.threshold:,.0f}"
        rows = [
            ("operation", self.op),
            ("shapes", self.shapes),
            ("dtype", str(self.dtype).replace("torch.", "")),
            ("flops", f"{self.flops:,}"),
            ("threshold", thr),
            ("backend", self.backend),
            ("reason", self.reason),
        ]
        if self.kernel:
            k = self.kernel
            rows.append(("kernel", f"{k['name']}: HBM read {k['hbm_read_bytes']:,} B, "
                                   f"write {k['hbm_write_bytes']:,} B, "
                                   f"{k['tensor']:,} Tensor Engine instructions (closed form)"))
        return "\n".join(f"{k:>11}: {v}" for k, v in rows)


def _make(op, flops: int, shapes: str, dtype: torch.dtype, supported_dtypes, kernel_note: str,
          counts=None) -> BlasPlan:
    """Decide; ``counts() -> (kernel name, closed-form dict)`` describes the kernel if one would run."""
    ok = dtype in supported_dtypes
    why = "" if ok else f"dtype {str(dtype).replace('torch.', '')}: {kernel_note}"
    d = op.plan(flops, supported=ok, why_not=why)
    kernel = None
    if d.backend != "torch" and counts is not None:
        name, figures = counts()
        if figures is not None:
            kernel = {"name": name, **figures}
    return BlasPlan(op.name, d.backend, d.reason, int(flops), shapes, dtype, d, kernel)


def _gemm_figures(m, n, k, itemsize, batch=1):
    from trnblas.kernels.gemm import gemm_counts, max_k

    if k > max_k(itemsize):  # the host splits K; each chunk is one kernel call
        return None
    return {key: batch * v for key, v in gemm_counts(m, n, k, itemsize).items()}


def plan_gemm(A, B, transA=False, transB=False) -> BlasPlan:
    """The backend :func:`trnblas.gemm` would use for ``op(A) @ op(B)``, and why.

    Parameters
    ----------
    A, B : tensor or ndarray
        The operands as they would be passed to :func:`trnblas.gemm` (only
        shapes, dtypes and devices are looked at). Leading batch dimensions
        plan a ``trnblas.batched_gemm``.
    transA, transB : bool or {"N", "T", "C"}

    Returns
    -------
    BlasPlan

    Raises
    ------
    TypeError, ValueError
        As :func:`trnblas.gemm`.

    Examples
    --------
    >>> import torch, trnblas
    >>> with trnblas.use_backend("torch"):
    ...     trnblas.plan_gemm(torch.ones(8, 8), torch.ones(8, 8)).backend
    'torch'
    """
    where = "plan_gemm"
    A, B, _, tA, tB, m, n, k = _l3._gemm_operands(where, A, B, None, transA, transB, c.ALL_FLOAT_DTYPES)
    cplx = 4 if A.is_complex() else 1
    desc = f"op(A) {m}x{k} @ op(B) {k}x{n} -> {m}x{n}   (transA={tA!r}, transB={tB!r})"
    size = A.element_size()
    if A.dim() == 2 and B.dim() == 2:
        return _make(_l3.GEMM, 2 * m * n * k * cplx, desc, A.dtype, c.KERNEL_DTYPES, _KERNEL_NOTE,
                     lambda: ("gemm_kernel", _gemm_figures(m, n, k, size)))
    try:
        batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    except RuntimeError:
        raise c.mismatch(where, "the batch dimensions of A and B do not broadcast", A=A, B=B) from None
    count = math.prod(batch)
    desc = f"batch {tuple(batch)} x " + desc
    return _make(_l3.BATCHED_GEMM, 2 * m * n * k * count * cplx, desc, A.dtype, c.KERNEL_DTYPES, _KERNEL_NOTE,
                 lambda: ("batched_gemm_kernel", _gemm_figures(m, n, k, size, count)))


_KERNEL_NOTE = "the NKI kernel takes float32 or bfloat16 (no fp64/complex on the Tensor Engine)"


def plan_batched_gemm(A, B, transA=False, transB=False) -> BlasPlan:
    """The backend :func:`trnblas.batched_gemm` would use; ``A``, ``B`` 3-D (batch first)."""
    where = "plan_batched_gemm"
    A = c.tensor(A, "A", where, c.ALL_FLOAT_DTYPES)
    B = c.tensor(B, "B", where, c.ALL_FLOAT_DTYPES)
    for name, t in (("A", A), ("B", B)):
        if t.dim() != 3:
            raise ValueError(f"{where}: {name} must be 3-D (batch, rows, cols), got shape {tuple(t.shape)}")
    if A.shape[0] != B.shape[0]:
        raise c.mismatch(where, "batch counts differ", A=A, B=B)
    return plan_gemm(A, B, transA, transB)


def plan_syrk(A, trans=False, uplo="upper") -> BlasPlan:
    """The backend :func:`trnblas.syrk` would use for ``A`` (``n x k``, or ``k x n`` if trans), and why."""
    where = "plan_syrk"
    A, _, _, t, u, n, k = _l3._rank_k_operands(where, A, None, None, trans, uplo, ("N", "T"))
    flops = n * n * k * (4 if A.is_complex() else 1)
    desc = f"{n}x{n} triangle {u!r} of op(A) op(A)^T, op(A) {n}x{k}   (trans={t!r})"
    def figures():
        from trnblas.kernels.syrk import fits, syrk_counts

        if not fits(k, n, A.element_size()):
            return "gemm_kernel", _gemm_figures(n, n, k, A.element_size())
        return "syrk_kernel", syrk_counts(n, k, A.element_size(), u == "U")

    return _make(_l3.SYRK, flops, desc, A.dtype, c.KERNEL_DTYPES, _KERNEL_NOTE, figures)


def plan_trsm(A, B, side="left", uplo="upper", trans=False, diag="nonunit") -> BlasPlan:
    """The backend :func:`trnblas.trsm` would use, and why."""
    where = "plan_trsm"
    _, A, B, s, u, t, d, m, n = _l3._tri_operands(where, 1.0, A, B, side, uplo, trans, diag)
    flops = (m * m * n if s == "L" else m * n * n) * (4 if A.is_complex() else 1)
    desc = f"solve op(A) X = B, B {m}x{n}   (side={s!r}, uplo={u!r}, trans={t!r}, diag={d!r})"
    def figures():
        from trnblas.kernels.trsm import fits, trsm_counts

        order, nrhs = (m, n) if s == "L" else (n, m)
        return "trsm_kernel", trsm_counts(order, nrhs) if fits(order) else None

    return _make(_l3.TRSM, flops, desc, A.dtype, (torch.float32,), "the NKI trsm kernel takes float32", figures)


_PLANNERS = {
    "gemm": plan_gemm,
    "batched_gemm": plan_batched_gemm,
    "syrk": plan_syrk,
    "trsm": plan_trsm,
}


def plan(op_name: str, *args, **kwargs) -> BlasPlan:
    """Plan any BLAS operation that has a kernel: ``plan("syrk", A, uplo="lower")``.

    Parameters
    ----------
    op_name : {"gemm", "batched_gemm", "syrk", "trsm"}
        With or without the ``"trnblas."`` prefix.
    *args, **kwargs
        The operands and options of that planner (:func:`plan_gemm`,
        :func:`plan_batched_gemm`, :func:`plan_syrk`, :func:`plan_trsm`).

    Raises
    ------
    ValueError
        Unknown ``op_name``.
    """
    key = op_name[len("trnblas."):] if isinstance(op_name, str) and op_name.startswith("trnblas.") else op_name
    try:
        planner = _PLANNERS[key]
    except (KeyError, TypeError):
        raise ValueError(f"plan: op_name must be one of {', '.join(map(repr, _PLANNERS))}; got {op_name!r}") from None
    return planner(*args, **kwargs)
