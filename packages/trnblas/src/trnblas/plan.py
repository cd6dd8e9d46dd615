"""Ask which backend would run a BLAS call, and why, without running it.

Every planner here is a thin use of :func:`trnsci.dispatch.plan_call`: it
runs the public function's own validation and canonicalization up to the
:class:`~trnsci.dispatch.Op` it would dispatch, and returns that op's
:class:`~trnsci.dispatch.Plan` -- the same decision the call makes, by
construction. A plan prints as a short report in the manner of
opt_einsum's ``PathInfo``::

    >>> import torch, trnblas
    >>> with trnblas.use_backend("torch"):
    ...     print(trnblas.plan_gemm(torch.ones(64, 32), torch.ones(32, 16)))
    operation: trnblas.gemm
       shapes: op(A) 64x32 @ op(B) 32x16 -> 64x16   (transA='N', transB='N')
        dtype: float32
        flops: 65,536
    threshold: (not consulted)
      backend: torch
       reason: backend 'torch' from ...
"""

from __future__ import annotations

from trnblas import chem as _chem
from trnblas import level1 as _l1
from trnblas import level2 as _l2
from trnblas import level3 as _l3
from trnsci.dispatch import Plan, plan_call

__all__ = ["BlasPlan", "plan", "plan_gemm", "plan_batched_gemm", "plan_syrk", "plan_trsm"]

#: The generic plan object (kept under its old name).
BlasPlan = Plan


def plan_gemm(A, B, transA=False, transB=False, *, precision=None) -> Plan:
    """The backend :func:`trnblas.gemm` would use for ``op(A) @ op(B)``, and why.

    Parameters
    ----------
    A, B : tensor or ndarray
        The operands as they would be passed to :func:`trnblas.gemm` (only
        shapes, dtypes and devices are looked at). Leading batch dimensions
        plan a ``trnblas.batched_gemm``.
    transA, transB : bool or {"N", "T", "C"}
    precision : {None, "default", "fp64"}, optional
        As :func:`trnblas.gemm`; ``"fp64"`` plans the ``trnblas.gemm_fp64``
        op, whose kernel figures list its launches (one per slice) and name
        the slicing.

    Returns
    -------
    trnsci.dispatch.Plan
        ``op``, ``backend``, ``reason``, ``flops``, ``dtype``,
        ``description``, and ``kernel`` (closed-form figures) when a kernel
        would run.

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
    if precision is None:
        return plan_call(_l3.gemm, 1.0, A, B, transA=transA, transB=transB)
    return plan_call(_l3.gemm, 1.0, A, B, transA=transA, transB=transB, precision=precision)


def plan_batched_gemm(A, B, transA=False, transB=False) -> Plan:
    """The backend :func:`trnblas.batched_gemm` would use; ``A``, ``B`` 3-D (batch first) or lists."""
    return plan_call(_l3.batched_gemm, 1.0, A, B, transA=transA, transB=transB)


def plan_syrk(A, trans=False, uplo="upper") -> Plan:
    """The backend :func:`trnblas.syrk` would use for ``A`` (``n x k``, or ``k x n`` if trans), and why."""
    return plan_call(_l3.syrk, 1.0, A, trans=trans, uplo=uplo)


def plan_trsm(A, B, side="left", uplo="upper", trans=False, diag="nonunit") -> Plan:
    """The backend :func:`trnblas.trsm` would use, and why."""
    return plan_call(_l3.trsm, 1.0, A, B, side=side, uplo=uplo, trans=trans, diag=diag)


_PLANNERS = {
    "gemm": plan_gemm,
    "batched_gemm": plan_batched_gemm,
    "syrk": plan_syrk,
    "trsm": plan_trsm,
    # ops whose planner takes the public function's own arguments
    "gemm_ex": lambda *a, **k: plan_call(_l3.gemm_ex, *a, **k),
    "mp2_energy": lambda *a, **k: plan_call(_chem.mp2_energy, *a, **k),
}


def plan(op_name: str, *args, **kwargs) -> Plan:
    """Plan any trnblas operation that has a kernel: ``plan("syrk", A, uplo="lower")``.

    Parameters
    ----------
    op_name : str
        ``"gemm"``, ``"batched_gemm"``, ``"syrk"``, ``"trsm"``, or the name of
        any other public trnblas routine (``"axpy"``, ``"nrm2"``, ``"gemv"``,
        ``"syr2k"``, ...), with or without the ``"trnblas."`` prefix.
    *args, **kwargs
        For ``gemm``, ``batched_gemm``, ``syrk``, ``trsm``: the arguments of
        :func:`plan_gemm`, :func:`plan_batched_gemm`, :func:`plan_syrk`,
        :func:`plan_trsm` (operands and options, no scalars). For every
        other routine: the public function's own arguments (the call is
        validated, and planned, exactly as it would run).

    Raises
    ------
    ValueError
        Unknown ``op_name``.

    Examples
    --------
    >>> import torch, trnblas
    >>> with trnblas.use_backend("simulator"):
    ...     p = trnblas.plan("trsm", torch.eye(3, dtype=torch.float64), torch.ones(3, 1, dtype=torch.float64))
    >>> p.backend, p.flops
    ('torch', 9)
    >>> print(p.reason)
    backend 'simulator' from ...; kernel unsupported: dtype float64: the NKI kernel takes float32, ... (...)
    """
    key = op_name[len("trnblas."):] if isinstance(op_name, str) and op_name.startswith("trnblas.") else op_name
    try:
        planner = _PLANNERS[key]
    except (KeyError, TypeError):
        planner = None
    if planner is None:
        fn = _ROUTINES.get(key) if isinstance(key, str) else None
        if fn is None:
            raise ValueError(f"plan: op_name must be one of {', '.join(map(repr, _PLANNERS))} or a trnblas "
                             f"routine name; got {op_name!r}") from None
        return plan_call(fn, *args, **kwargs)
    return planner(*args, **kwargs)


#: The public routines ``plan`` plans by name, from the family modules (lower case: the Ops are upper case):
#: every one but ``rotg`` (scalars only) and the chemistry drivers ``df_factors``/``dfmp2``.
_ROUTINES = {name: getattr(mod, name) for mod in (_l1, _l2, _l3, _chem) for name in mod.__all__
             if name.islower() and name not in ("df_factors", "dfmp2", "rotg")}
