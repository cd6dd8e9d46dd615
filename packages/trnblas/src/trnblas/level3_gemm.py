"""BLAS level 3, GEMM family: ``gemm``, ``batched_gemm``, ``strided_batched_gemm``, ``gemm_ex``, ``geam``, ``dgmm``.

Ops (torch lowerings here, NKI lowerings in :mod:`trnblas._nki.level3`):

=================  ============================================================
``GEMM``           ``(alpha, A, B, beta, C, transA, transB)``, 2-D ``A``/``B``
                   (not yet transposed), ``C`` an ``(m, n)`` tensor or None
``BATCHED_GEMM``   the same with 3-D ``A``, ``B``, ``C`` (batch first)
``GEMM_EX``        ``(..., compute_dtype)``: inputs kept in their dtype
``GEMM_FP64``      ``GEMM``'s arguments, float64 2-D: ``gemm(..., precision="fp64")``
                   (the kernel path slices the operands, :mod:`trnblas._nki.level3_ozaki`)
=================  ============================================================

Every lowering returns a new tensor; the public layer handles ``out=``,
quick returns (``alpha == 0``, empty shapes) and NumPy conversion.
"""

from __future__ import annotations

import math

import torch

from trnblas import _host
from trnsci import linalg as la
from trnsci import routes, validate
from trnsci.dispatch import Op
from trnsci.settled import call, public, settles

__all__ = ["gemm", "batched_gemm", "strided_batched_gemm", "gemm_ex", "geam", "dgmm",
           "GEMM", "BATCHED_GEMM", "GEMM_EX", "GEMM_FP64", "GEAM", "DGMM"]

# ===================================================================== ops

def _cplx(t: torch.Tensor) -> int:
    return 4 if t.is_complex() else 1  # a complex multiply-add is four real ones


def _gemm_flops(alpha, A, B, beta, C, transA, transB, *rest):
    m, k = la.op_shape(A, transA)
    n = la.op_shape(B, transB)[1]
    batch = A.shape[0] if A.dim() == 3 else 1
    return 2 * m * n * k * batch * _cplx(A)


def _gemm_describe(alpha, A, B, beta, C, transA, transB, *rest):
    m, k = la.op_shape(A, transA)
    n = la.op_shape(B, transB)[1]
    head = f"batch ({A.shape[0]},) x " if A.dim() == 3 else ""
    return f"{head}op(A) {m}x{k} @ op(B) {k}x{n} -> {m}x{n}   (transA={transA!r}, transB={transB!r})"


def _gemm_fake(alpha, A, B, beta, C, transA, transB):
    m = A.shape[-1] if transA != "N" else A.shape[-2]
    n = B.shape[-2] if transB != "N" else B.shape[-1]
    return A.new_empty((*A.shape[:-2], m, n))


GEMM = Op(
    "trnblas.gemm", "flops", 2 * 512**3, size=_gemm_flops, describe=_gemm_describe,
    doc="C = alpha op(A) op(B) + beta C for one matrix; flops = 2 m n k",
    schema="(Scalar alpha, Tensor A, Tensor B, Scalar beta, Tensor? C, str transA, str transB) -> Tensor",
    fake=_gemm_fake,
    half="float32",  # bf16/fp16 computed in float32, rounded once, by the core (trnsci.precision)
)
BATCHED_GEMM = Op(
    "trnblas.batched_gemm", "flops", 2 * 256**3, size=_gemm_flops, describe=_gemm_describe,
    doc="a stack of GEMMs with equal shapes; flops = 2 m n k batch",
    schema="(Scalar alpha, Tensor A, Tensor B, Scalar beta, Tensor? C, str transA, str transB) -> Tensor",
    fake=_gemm_fake,
    half="float32",  # bf16/fp16 computed in float32, rounded once, by the core (trnsci.precision)
)
GEMM_EX = Op(
    "trnblas.gemm_ex", "flops", 2 * 512**3, size=_gemm_flops, describe=_gemm_describe,
    doc="one GEMM with inputs in one dtype and products accumulated in compute_dtype; flops = 2 m n k",
    schema="(Scalar alpha, Tensor A, Tensor B, Scalar beta, Tensor? C, str transA, str transB, "
           "ScalarType compute_dtype) -> Tensor",
    fake=lambda alpha, A, B, beta, C, transA, transB, compute_dtype: _gemm_fake(
        alpha, A, B, beta, C, transA, transB).to(compute_dtype),
)
GEMM_FP64 = Op(
    "trnblas.gemm_fp64", "flops", 2 * 512**3, size=_gemm_flops, describe=_gemm_describe,
    doc="one float64 GEMM at float64 accuracy (precision='fp64'); flops = 2 m n k of the float64 product",
    schema="(Scalar alpha, Tensor A, Tensor B, Scalar beta, Tensor? C, str transA, str transB) -> Tensor",
    fake=_gemm_fake,
)

GEAM = Op(
    "trnblas.geam", "elements", 2 ** 22, size=lambda al, A, *r: A.numel(),
    describe=lambda al, A, be, B, tA, tB: f"op(A) {'x'.join(map(str, la.op_shape(A, tA)))} (transA={tA!r}), "
                                          f"B {'unread' if B is None else f'transB={tB!r}'}",
    doc="alpha op(A) + beta op(B) (B None: beta == 0, unread); elements = m n",
    schema="(Scalar alpha, Tensor A, Scalar beta, Tensor? B, str tA, str tB) -> Tensor",
    fake=lambda al, A, be, B, tA, tB: A.new_empty(la.op_shape(A, tA)),
    half="float32",  # bf16/fp16 computed in float32, rounded once, by the core (trnsci.precision)
)
DGMM = Op(
    "trnblas.dgmm", "elements", 2 ** 22, size=lambda A, x, side: A.numel(),
    describe=lambda A, x, side: f"A {A.shape[0]}x{A.shape[1]} scaled by x on the {'left' if side == 'L' else 'right'}",
    doc="diag(x) A or A diag(x); elements = m n",
    schema="(Tensor A, Tensor x, str side) -> Tensor",
    fake=lambda A, x, side: torch.empty_like(A),
    half="float32",  # bf16/fp16 computed in float32, rounded once, by the core (trnsci.precision)
)


@GEAM.lowering("torch")
def _geam_torch(alpha, A, beta, B, tA, tB):
    R = torch.mul(A if tA == "N" else la.op(A, tA), alpha)  # one new tensor, B added into it
    if B is not None:
        R.add_(B if tB == "N" else la.op(B, tB), alpha=beta)
    return R.contiguous()  # a transposed op(A) gives a transposed layout


@DGMM.lowering("torch")
def _dgmm_torch(A, x, side):
    return A * (x.unsqueeze(1) if side == "L" else x)


def _product(mm, addmm, alpha, a, b, beta, C):
    """``alpha a @ b + beta C`` with torch's fused kernels; ``C`` unread when ``beta == 0``."""
    if C is None or beta == 0:
        R = mm(a, b)
        if alpha != 1:
            R.mul_(alpha)
        return R
    return addmm(C, a, b, beta=beta, alpha=alpha)


@GEMM.lowering("torch")
def _gemm_torch(alpha, A, B, beta, C, transA, transB):
    a = A if transA == "N" else la.op(A, transA)
    b = B if transB == "N" else la.op(B, transB)
    if C is None or beta == 0:  # _product inlined: this is the hottest path of the library
        # torch.mm, NumPy's matmul or SciPy's ?gemm: whichever measured faster for this class here (trnblas._host)
        route = _host.gemm_route(a, b)
        if route != "torch":
            return _host.gemm_host(route, alpha, a, b)
        R = torch.mm(a, b)
        if alpha != 1:
            R.mul_(alpha)
        return R
    return torch.addmm(C, a, b, beta=beta, alpha=alpha)


@settles(_gemm_torch)
def _(alpha, A, B, beta, C, transA, transB):
    if transA != "N" or transB != "N":
        # a real transpose: torch.mm of the transposed views, under the same condition as below
        if (A.is_complex() or not (C is None or beta == 0) or alpha != 1
                or _host.gemm_route(la.op(A, transA), la.op(B, transB)) != "torch"):
            return None
        return _MM_T.get((transA, transB))
    if C is None or beta == 0:
        # torch.mm directly only where the measured host route of this class is torch (trnblas._host);
        # otherwise the settled route runs the lowering, which asks the route on every call
        return (torch.mm, (1, 2)) if alpha == 1 and _host.gemm_route(A, B) == "torch" else None
    return _addmm


def _mm_nt(alpha, A, B, beta, C, transA, transB):
    return torch.mm(A, B.mT)


def _mm_tn(alpha, A, B, beta, C, transA, transB):
    return torch.mm(A.mT, B)


def _mm_tt(alpha, A, B, beta, C, transA, transB):
    return torch.mm(A.mT, B.mT)


#: real GEMM with transposes, alpha 1, no C: what _gemm_torch computes ("C" is "T" for real dtypes)
_MM_T = {(a, b): f for f, pairs in ((_mm_nt, (("N", "T"), ("N", "C"))), (_mm_tn, (("T", "N"), ("C", "N"))),
                                    (_mm_tt, (("T", "T"), ("T", "C"), ("C", "T"), ("C", "C"))))
         for a, b in pairs}


def _addmm(alpha, A, B, beta, C, transA, transB):
    return torch.addmm(C, A, B, beta=beta, alpha=alpha)


def _gemm_backward(op, inputs, output, g, needs):
    """d/dA, d/dB, d/dC of ``alpha op(A) op(B) + beta C`` as two ``op`` calls (GEMMs) and a scale.

    With ``a = op(A)``: ``grad a = conj(alpha) g op(B)^H`` and ``grad b = conj(alpha) op(A)^H g``;
    ``grad A`` is ``grad a`` put back through ``op`` (transposed for "T", conjugate-transposed for "C");
    ``grad C = conj(beta) g``.
    """
    alpha, A, B, beta, C, tA, tB = inputs
    cplx = A.is_complex()
    h = "C" if cplx else "T"
    ca = alpha.conjugate() if cplx else alpha
    a = A if tA == "N" else la.op(A, tA)
    b = B if tB == "N" else la.op(B, tB)
    gA = gB = gC = None
    if needs[1]:
        ga = op(ca, g, b.contiguous(), 0.0, None, "N", h)
        gA = ga if tA == "N" else (ga.mT if tA == "T" else ga.mH)
    if needs[2]:
        gb = op(ca, a.contiguous(), g, 0.0, None, h, "N")
        gB = gb if tB == "N" else (gb.mT if tB == "T" else gb.mH)
    if C is not None and needs[4]:
        gC = g * (beta.conjugate() if cplx else beta)
    return None, gA, gB, None, gC, None, None


_GEMM_GRAD = ("dA = conj(alpha) g op(B)^H put back through op(A); dB = conj(alpha) op(A)^H g put back "
              "through op(B); dC = conj(beta) g")
GEMM.backward(lambda inputs, output, g, needs: _gemm_backward(GEMM, inputs, output, g, needs),
              formula=_GEMM_GRAD, runs="two `trnblas.gemm` calls")
BATCHED_GEMM.backward(lambda inputs, output, g, needs: _gemm_backward(BATCHED_GEMM, inputs, output, g, needs),
                      formula=_GEMM_GRAD, runs="two `trnblas.batched_gemm` calls")
GEMM_FP64.backward(lambda inputs, output, g, needs: _gemm_backward(GEMM_FP64, inputs, output, g, needs),
                   formula=_GEMM_GRAD, runs="two `trnblas.gemm_fp64` calls")



def _geam_backward(inputs, output, g, needs):
    # R = alpha op(A) + beta op(B): grad op(A) = conj(alpha) g, put back through op as one geam
    # (op_T(conj(alpha) g) for "T"; (conj(alpha) g)^H = alpha g^H for "C")
    alpha, A, beta, B, tA, tB = inputs

    def back(s, t):
        return GEAM(s if t == "C" or not isinstance(s, complex) else s.conjugate(), g, 0.0, None, t, "N")

    gA = back(alpha, tA) if needs[1] else None
    gB = back(beta, tB) if B is not None and needs[3] else None
    return None, gA, None, gB, None, None


def _dgmm_backward(inputs, output, g, needs):
    # R = diag(x) A (side "L") or A diag(x): grad A = the same scaling of g by conj(x); grad x = the
    # row (column) sums of g conj(A)
    A, x, side = inputs
    gA = DGMM(g, x.conj().resolve_conj() if x.is_complex() else x, side) if needs[0] else None
    gx = None
    if needs[1]:
        gx = (g * (A.conj() if A.is_complex() else A)).sum(1 if side == "L" else 0)
    return gA, gx, None


GEAM.backward(_geam_backward, formula="dA = conj(alpha) g put back through op(A); dB = conj(beta) g put back "
              "through op(B)", runs="one `trnblas.geam` call per operand")
DGMM.backward(_dgmm_backward, formula="dA = diag(conj(x)) g (or g diag(conj(x))); dx = row (column) sums of "
              "g conj(A)", runs="one `trnblas.dgmm` call and a torch sum")

# a settled route that calls torch.mm embodies a host-route choice: dropped whenever the choices may change
routes.on_change(lambda: GEMM.settled.clear())


@BATCHED_GEMM.lowering("torch")
def _batched_gemm_torch(alpha, A, B, beta, C, transA, transB):
    return _product(torch.bmm, torch.baddbmm, alpha, la.op(A, transA), la.op(B, transB), beta, C)


@settles(_batched_gemm_torch)
def _(alpha, A, B, beta, C, transA, transB):
    if transA != "N" or transB != "N":
        return None
    if C is None or beta == 0:
        return (torch.bmm, (1, 2)) if alpha == 1 else None
    return _baddbmm


def _baddbmm(alpha, A, B, beta, C, transA, transB):
    return torch.baddbmm(C, A, B, beta=beta, alpha=alpha)


@GEMM_FP64.lowering("torch")
def _gemm_fp64_torch(alpha, A, B, beta, C, transA, transB):
    """The float64 GEMM itself."""
    return _gemm_torch(alpha, A, B, beta, C, transA, transB)


@GEMM_EX.lowering("torch")
def _gemm_ex_torch(alpha, A, B, beta, C, transA, transB, compute_dtype):
    A, B = A.to(compute_dtype), B.to(compute_dtype)
    C = None if C is None else C.to(compute_dtype)
    return _gemm_torch(alpha, A, B, beta, C, transA, transB)


# ===================================================================== helpers

def _scaled(beta, C, shape, dtype, device) -> torch.Tensor:
    """``beta * C`` (broadcast to ``shape``) without reading ``C`` when ``beta == 0``."""
    if C is None or beta == 0:
        return torch.zeros(shape, dtype=dtype, device=device)
    if beta == 1:
        return C.expand(shape).clone()
    return torch.mul(C.expand(shape), beta)


def _gemm_operands(where, A, B, C, transA, transB, dtypes):
    """Validate the GEMM operands; return canonical ``(A, B, C, tA, tB, m, n, k)``."""
    A = validate.tensor(A, "A", where, dtypes)
    B = validate.tensor(B, "B", where, dtypes)
    if A.dim() < 2:
        raise ValueError(f"{where}: A must be a matrix (at least 2-D), got shape {tuple(A.shape)}")
    if B.dim() < 2:
        raise ValueError(f"{where}: B must be a matrix (at least 2-D), got shape {tuple(B.shape)}")
    if C is not None:
        C = validate.tensor(C, "C", where, dtypes)
    validate.agree3(where, A, B, C)
    tA, tB = _trans_codes(where, transA, transB, A.dtype)
    m, n, k = _op_dims(where, A, B, tA, tB)
    return A, B, C, tA, tB, m, n, k


def _trans_codes(where, transA, transB, dtype):
    """``(tA, tB)``: the ``trans`` arguments as ``"N"``/``"T"``/``"C"``, ``"C"`` read as ``"T"`` for real data."""
    # The default (False) needs no parsing; anything else goes through la.trans.
    tA = "N" if transA is False else la.trans(transA, "transA", where)
    tB = "N" if transB is False else la.trans(transB, "transB", where)
    if (tA == "C" or tB == "C") and not dtype.is_complex:
        tA = "T" if tA == "C" else tA
        tB = "T" if tB == "C" else tB
    return tA, tB


def _op_dims(where, A, B, tA, tB):
    """``(m, n, k)`` of ``op(A) @ op(B)`` on the last two dimensions; a mismatch error naming both when the
    inner dimensions differ."""
    sa, sb = A.shape, B.shape
    m, k = (sa[-2], sa[-1]) if tA == "N" else (sa[-1], sa[-2])
    k2, n = (sb[-2], sb[-1]) if tB == "N" else (sb[-1], sb[-2])
    if k != k2:
        raise validate.mismatch(
            where, f"op(A) is {m}x{k} (transA={tA!r}) and op(B) is {k2}x{n} (transB={tB!r}); "
            f"their inner dimensions {k} and {k2} differ", A=A, B=B,
        )
    return m, n, k


def _gemm_layout(where, alpha, A, B, beta, C, m, n, k):
    """The result's layout for canonical operands, ``C`` checked against it: ``(shape, None, empty)`` for a
    2-D call, else ``(shape, (A3, B3, C3), empty)`` with the operands broadcast and flattened to one batch
    axis (``C3`` None when ``beta == 0``); ``empty``: nothing to multiply, the result is ``beta C``."""
    if A.dim() == 2 and B.dim() == 2:
        if C is not None and (C.dim() != 2 or C.shape[0] != m or C.shape[1] != n):
            raise validate.mismatch(where, f"C must have shape ({m}, {n}) = (rows of op(A), columns of op(B))",
                                    A=A, B=B, C=C)
        return (m, n), None, alpha == 0 or k == 0 or m == 0 or n == 0
    try:
        batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    except RuntimeError:
        raise validate.mismatch(where, "the batch dimensions of A and B do not broadcast", A=A, B=B) from None
    shape = (*batch, m, n)
    if C is not None:
        try:
            ok_c = C.dim() >= 2 and C.shape[-2:] == (m, n) and torch.broadcast_shapes(C.shape, shape) == shape
        except RuntimeError:
            ok_c = False
        if not ok_c:
            raise validate.mismatch(where, f"C must have shape {shape} (leading dimensions may broadcast)",
                                    A=A, B=B, C=C)
    count = math.prod(batch)
    if alpha == 0 or k == 0 or m == 0 or n == 0 or count == 0:
        return shape, None, True
    A3 = A.expand(*batch, *A.shape[-2:]).reshape(count, *A.shape[-2:])
    B3 = B.expand(*batch, *B.shape[-2:]).reshape(count, *B.shape[-2:])
    C3 = None if C is None or beta == 0 else C.expand(shape).reshape(count, m, n)
    return shape, (A3, B3, C3), False


def _run_gemm(where, alpha, A, B, beta, C, tA, tB, m, n, k):
    """GEMM on canonical operands: quick returns, batch broadcasting, the Op call."""
    shape, flat, empty = _gemm_layout(where, alpha, A, B, beta, C, m, n, k)
    if empty:
        return _scaled(beta, C, shape, A.dtype, A.device)
    if flat is None:
        return call(GEMM, alpha, A, B, beta, C if beta != 0 else None, tA, tB)
    A3, B3, C3 = flat
    return _batched(alpha, A3, B3, beta, C3, tA, tB, m, n, k).reshape(shape)


def _batched(alpha, A3, B3, beta, C3, tA, tB, m, n, k):
    return call(BATCHED_GEMM, alpha, A3, B3, beta, C3 if beta != 0 else None, tA, tB)


def _scalars(where, alpha, beta, dtype, real=False):
    if type(alpha) is float and type(beta) is float:  # the common case: nothing to check or convert
        return alpha, beta
    return (validate.scalar(alpha, "alpha", where, complex_ok=dtype.is_complex and not real),
            validate.scalar(beta, "beta", where, complex_ok=dtype.is_complex and not real))


# ===================================================================== GEMM family

@public(GEMM, "scalar tensor tensor scalar tensor? flag flag")
def gemm(alpha, A, B, beta=0.0, C=None, transA=False, transB=False, *, out=None, precision=None):
    """General matrix multiply: ``alpha * op(A) @ op(B) + beta * C``.

    Parameters
    ----------
    alpha, beta : number
        Scalars; complex only for complex data. ``beta == 0`` never reads
        ``C`` (NaN or Inf in ``C`` does not reach the result), and
        ``alpha == 0`` (or ``k == 0``) returns ``beta * C`` without reading
        ``A`` or ``B``.
    A : tensor, shape (..., m, k) or (..., k, m) if transposed
    B : tensor, shape (..., k, n) or (..., n, k) if transposed
        Leading (batch) dimensions of ``A`` and ``B`` broadcast against each
        other, as in :func:`torch.matmul`.
    C : tensor, shape (..., m, n), optional
        Added after scaling by ``beta``; its leading dimensions may
        broadcast to the result's. Not modified.
    transA, transB : bool or {"N", "T", "C"}
        ``op(X)`` is ``X`` (``False``/``"N"``), its transpose
        (``True``/``"T"``) or its conjugate transpose (``"C"``, the same as
        ``"T"`` for real data). Case-insensitive.
    out : tensor, optional
        Receives the result (same shape, dtype and device) and is returned.
    precision : {None, "default", "fp64"}, optional
        ``"fp64"``: float64 accuracy whatever runs it (real data only; the
        operands are taken as float64 and the result is cast once to their
        dtype). On torch that is the float64 GEMM; on the kernel path
        (backends ``"nki"``/``"simulator"``, op ``trnblas.gemm_fp64``) the
        float32 GEMM kernel multiplies integer slices of the operands
        exactly and the host adds the slice products in float64 (the
        Ozaki scheme, :mod:`trnblas._nki.level3_ozaki`): with ``s = floor((24 -
        ceil(log2 k)) / 2)`` bits per slice and ``S`` slices
        (``S s >= 53 + ceil(log2(8 S + 16))``; ``S = 7`` for ``17 <= k <= 64``),
        ``S`` kernel launches and ``S (S + 1) / 2`` slice products, and per
        entry ``|C_ij - c_ij| <= |alpha| eps k max_l |a_il| max_l |b_lj| +
        2^-52 |beta C0_ij|`` with ``eps = (8 S + 16) 2^(-S s) + 4 S (S + 1)
        2^-53 + 2^-52`` (below ``2^-44`` for ``k <= 1024``). Non-finite
        operands run the float64 GEMM on the host. ``None``/``"default"``:
        the input dtype's own path (below).

    Returns
    -------
    tensor, shape (..., m, n)
        A new tensor (or ``out``) of the inputs' dtype on their device.

    Raises
    ------
    TypeError
        ``A``, ``B`` or ``C`` is not a tensor/array, has an integer or bool
        dtype, or the dtypes differ; ``alpha``/``beta`` is complex for real
        data; ``precision`` is not a string, or is ``"fp64"`` with complex
        data.
    ValueError
        Shapes do not agree (the message names both arguments and their
        shapes), tensors live on different devices, a ``trans`` value is
        not one of the spellings above, or ``precision`` is not one of its
        values.

    Notes
    -----
    dtypes: float32, float64, complex64, complex128, and bfloat16/float16
    (computed in float32 and rounded once to the input dtype: each entry
    within one rounding, 2^-8 relative for bf16 and 2^-11 for fp16, plus
    ``(k + 2) 2^-24 sum_l |a_il b_lj|``; see :func:`gemm_ex` for explicit
    mixed precision). 2-D calls run the ``trnblas.gemm`` operation, batched
    calls ``trnblas.batched_gemm``; the NKI kernels take float32/bfloat16
    and complex64 (one real GEMM on split parts); other dtypes run on torch
    whatever the backend (see :func:`plan_gemm`).

    Examples
    --------
    >>> import torch, trnblas
    >>> A, B = torch.ones(2, 3), torch.ones(3, 4)
    >>> trnblas.gemm(2.0, A, B).tolist()[0]
    [6.0, 6.0, 6.0, 6.0]
    >>> trnblas.gemm(1.0, A, torch.ones(4, 3), transB="T").shape
    torch.Size([2, 4])
    """
    where = "gemm"
    fp64 = precision is not None and _fp64(precision, where)
    A, B, C, tA, tB, m, n, k = _gemm_operands(where, A, B, C, transA, transB, validate.ALL_FLOAT_DTYPES)
    alpha, beta = _scalars(where, alpha, beta, A.dtype)
    if fp64:
        return validate.finish(_run_gemm_fp64(where, alpha, A, B, beta, C, tA, tB, m, n, k), out, where)
    return validate.finish(_run_gemm(where, alpha, A, B, beta, C, tA, tB, m, n, k), out, where)


def _fp64(precision, where) -> bool:
    """True for ``"fp64"``, False for ``"default"``; a clear error otherwise."""
    if not isinstance(precision, str):
        raise TypeError(f"{where}: precision must be None, 'default' or 'fp64', got {type(precision).__name__}")
    if precision not in ("default", "fp64"):
        raise ValueError(f"{where}: precision must be None, 'default' or 'fp64', got {precision!r}")
    return precision == "fp64"


def _run_gemm_fp64(where, alpha, A, B, beta, C, tA, tB, m, n, k):
    """``precision="fp64"``: the operands as float64 through ``GEMM_FP64`` (one call per batch matrix)."""
    if A.dtype.is_complex:
        raise TypeError(f"{where}: precision='fp64' takes real operands, got A of dtype {A.dtype}")
    dtype = A.dtype
    f64 = torch.float64
    A, B = A.to(f64), B.to(f64)
    C = None if C is None else C.to(f64)
    shape, flat, empty = _gemm_layout(where, alpha, A, B, beta, C, m, n, k)
    if empty:
        return _scaled(beta, C, shape, f64, A.device).to(dtype)
    if flat is None:
        return call(GEMM_FP64, alpha, A, B, beta, C if beta != 0 else None, tA, tB).to(dtype)
    A3, B3, C3 = flat
    R = torch.stack([call(GEMM_FP64, alpha, A3[i], B3[i], beta, None if C3 is None else C3[i], tA, tB)
                     for i in range(A3.shape[0])])
    return R.reshape(shape).to(dtype)


def _stack(x, name: str, where: str, dtypes, allow_2d: bool = False) -> torch.Tensor:
    """A 3-D tensor, or a list/tuple of equally shaped matrices stacked into one."""
    if isinstance(x, (list, tuple)):
        if not x:
            raise ValueError(f"{where}: {name} must hold at least one matrix when given as a list")
        mats = [validate.tensor(t, f"{name}[{i}]", where, dtypes) for i, t in enumerate(x)]
        first = mats[0]
        for i, t in enumerate(mats):
            if t.dim() != 2:
                raise ValueError(f"{where}: {name}[{i}] must be 2-D, got shape {tuple(t.shape)}")
            if t.shape != first.shape:
                raise ValueError(
                    f"{where}: {name}[{i}] has shape {tuple(t.shape)} but {name}[0] has {tuple(first.shape)}; "
                    "batched matrices must share one shape"
                )
            if t.dtype is not first.dtype or t.device != first.device:
                validate.agree(where, **{f"{name}[0]": first, f"{name}[{i}]": t})
        return torch.stack(mats)
    t = validate.tensor(x, name, where, dtypes)
    if allow_2d and t.dim() == 2:
        return t
    if t.dim() != 3:
        what = "2-D or 3-D (batch, rows, cols)" if allow_2d else "3-D (batch, rows, cols) or a list of matrices"
        raise ValueError(f"{where}: {name} must be {what}, got shape {tuple(t.shape)}")
    return t


def _batched_public(where, alpha, A, B, beta, C, transA, transB, broadcast: bool):
    A = _stack(A, "A", where, validate.ALL_FLOAT_DTYPES, broadcast)
    B = _stack(B, "B", where, validate.ALL_FLOAT_DTYPES, broadcast)
    if broadcast and A.dim() == 2:
        A = A.unsqueeze(0)
    if broadcast and B.dim() == 2:
        B = B.unsqueeze(0)
    if C is not None:
        C = _stack(C, "C", where, validate.ALL_FLOAT_DTYPES, broadcast)
        if broadcast and C.dim() == 2:
            C = C.unsqueeze(0)
    validate.agree(where, A=A, B=B, C=C)
    tA, tB = _trans_codes(where, transA, transB, A.dtype)
    alpha, beta = _scalars(where, alpha, beta, A.dtype)
    m, n, k = _op_dims(where, A, B, tA, tB)
    counts = [t.shape[0] for t in (A, B, C) if t is not None]
    if broadcast:
        big = max(counts)
        if any(b not in (1, big) for b in counts):
            raise validate.mismatch(where, "batch counts differ (a batch of 1, i.e. stride 0, broadcasts)",
                                    **{k_: t for k_, t in (("A", A), ("B", B), ("C", C)) if t is not None})
        count = big
        A = A.expand(count, *A.shape[1:])
        B = B.expand(count, *B.shape[1:])
        if C is not None:
            C = C.expand(count, *C.shape[1:])
    else:
        count = A.shape[0]
        if any(b != count for b in counts):
            raise validate.mismatch(where, "batch counts differ",
                                    **{k_: t for k_, t in (("A", A), ("B", B), ("C", C)) if t is not None})
    if C is not None and C.shape[1:] != (m, n):
        raise validate.mismatch(where, f"C must have shape ({count}, {m}, {n})", A=A, B=B, C=C)
    if alpha == 0 or k == 0 or m == 0 or n == 0 or count == 0:
        return _scaled(beta, C, (count, m, n), A.dtype, A.device)
    return _batched(alpha, A, B, beta, C, tA, tB, m, n, k)


@public(BATCHED_GEMM, "scalar tensor tensor scalar tensor? flag flag")  # lists of matrices run in full
def batched_gemm(alpha, A, B, beta=0.0, C=None, transA=False, transB=False, *, out=None):
    """A batch of GEMMs with one shape: ``R[i] = alpha op(A[i]) op(B[i]) + beta C[i]``.

    The counterpart of ``cublas<t>gemmBatched``.

    Parameters
    ----------
    alpha, beta : number
        As in :func:`gemm` (``beta == 0`` never reads ``C``; ``alpha == 0``
        never reads ``A``/``B``).
    A : tensor (batch, m, k), or a list/tuple of ``batch`` equally shaped matrices
    B : tensor (batch, k, n), or a list/tuple of matrices
    C : tensor (batch, m, n), or a list/tuple of matrices, optional
    transA, transB : bool or {"N", "T", "C"}
        Applied to every matrix of the batch.
    out : tensor, optional
        Receives the ``(batch, m, n)`` result and is returned.

    Returns
    -------
    tensor, shape (batch, m, n)
        A new tensor (lists in, a stacked tensor out).

    Raises
    ------
    TypeError
        Non-tensor entries, integer/bool dtypes, differing dtypes.
    ValueError
        Batch counts differ, list entries differ in shape, matrix shapes do
        not agree, devices differ, or an unknown ``trans`` value.

    Notes
    -----
    Runs the ``trnblas.batched_gemm`` operation (NKI kernel for
    float32/bfloat16). Batch counts must match exactly; for stride-0
    (broadcast) operands use :func:`strided_batched_gemm` or :func:`gemm`.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.batched_gemm(1.0, torch.ones(5, 2, 3), torch.ones(5, 3, 4)).shape
    torch.Size([5, 2, 4])
    """
    where = "batched_gemm"
    R = _batched_public(where, alpha, A, B, beta, C, transA, transB, broadcast=False)
    return validate.finish(R, out, where)


@validate.numpy_io
def strided_batched_gemm(alpha, A, B, beta=0.0, C=None, transA=False, transB=False, *, out=None):
    """``cublas<t>gemmStridedBatched``: a batch of GEMMs on strided 3-D tensors.

    Parameters
    ----------
    alpha, beta : number
        As in :func:`gemm`.
    A : tensor, shape (batch, m, k) or (m, k)
    B : tensor, shape (batch, k, n) or (k, n)
    C : tensor, shape (batch, m, n) or (m, n), optional
        A 2-D operand, or a 3-D operand with batch 1, is shared by every
        product (cuBLAS ``strideA = 0``).
    transA, transB : bool or {"N", "T", "C"}
    out : tensor, optional

    Returns
    -------
    tensor, shape (batch, m, n)

    Raises
    ------
    TypeError, ValueError
        As :func:`batched_gemm`; batch counts must be equal or 1.

    Notes
    -----
    cuBLAS describes operand ``i`` as the column-major ``m x k`` matrix at
    ``A + i * strideA`` with leading dimension ``lda``. A torch tensor
    carries those numbers in its strides, so no stride arguments are needed:

    ======================  ==========================================================
    cuBLAS                  trnblas
    ======================  ==========================================================
    ``strideA``             ``A.stride(0)`` (0 for a shared operand: ``A.expand(batch, m, k)``)
    ``lda`` (column-major)  ``A.stride(2)`` with ``A.stride(1) == 1``, i.e.
                            ``torch.as_strided(buf, (batch, m, k), (strideA, 1, lda))``
    ``batchCount``          ``A.shape[0]`` (or ``B.shape[0]``/``C.shape[0]``)
    ``m, n, k``             from the shapes of ``op(A)`` and ``op(B)``
    ======================  ==========================================================

    Any strides work, including overlapping stride-0 views; no operand is
    copied unless torch must materialize a view.

    Examples
    --------
    >>> import torch, trnblas
    >>> A = torch.ones(3, 4)                      # shared: strideA = 0
    >>> trnblas.strided_batched_gemm(1.0, A, torch.ones(8, 4, 2)).shape
    torch.Size([8, 3, 2])
    """
    where = "strided_batched_gemm"
    for name, x in (("A", A), ("B", B), ("C", C)):
        if isinstance(x, (list, tuple)):
            raise TypeError(f"{where}: {name} must be a 2-D or 3-D tensor, got a {type(x).__name__} "
                            "(use batched_gemm for lists of matrices)")
    R = _batched_public(where, alpha, A, B, beta, C, transA, transB, broadcast=True)
    return validate.finish(R, out, where)


@validate.numpy_io
def gemm_ex(alpha, A, B, beta=0.0, C=None, transA=False, transB=False, *,
            compute_dtype=torch.float32, out_dtype=None, out=None):
    """GEMM with explicit precisions (``cublasGemmEx``).

    Parameters
    ----------
    alpha, beta, transA, transB
        As in :func:`gemm`.
    A, B : tensor, shape (..., m, k) and (..., k, n)
        One dtype for both: bfloat16, float16, float32, float64, complex64
        or complex128.
    C : tensor, optional
        Any of those dtypes (it may differ from ``A``'s), same device.
    compute_dtype : torch.dtype
        The precision of the products and sums: float32 (default), float64,
        or complex64/complex128 for complex inputs. Inputs are converted to
        it before multiplying, so low-precision inputs accumulate in at
        least float32.
    out_dtype : torch.dtype, optional
        dtype of the result. Default: ``C.dtype`` when ``C`` is given, else
        the dtype of ``A`` -- like cuBLAS, where the C matrix's type is the
        output type.
    out : tensor, optional
        Receives the result; its dtype must be the output dtype.

    Returns
    -------
    tensor, shape (..., m, n), dtype ``out_dtype``

    Raises
    ------
    TypeError
        Unsupported dtypes; ``A`` and ``B`` differ in dtype; a real compute
        dtype for complex inputs or the reverse.
    ValueError
        As :func:`gemm`.

    Notes
    -----
    The inputs are widened (or, if you ask for it explicitly, narrowed) to
    ``compute_dtype``; the product then runs as a :func:`gemm` in that dtype
    -- on the NKI kernel when ``compute_dtype`` is float32 and the backend
    and size say so -- and the result is rounded to the output dtype.

    Examples
    --------
    >>> import torch, trnblas
    >>> A = torch.ones(2, 3, dtype=torch.bfloat16)
    >>> trnblas.gemm_ex(1.0, A, A, transB=True, out_dtype=torch.float32).dtype
    torch.float32
    """
    where = "gemm_ex"
    A = validate.tensor(A, "A", where, validate.ALL_FLOAT_DTYPES)
    B = validate.tensor(B, "B", where, validate.ALL_FLOAT_DTYPES)
    if B.dtype is not A.dtype:

        validate.same_dtype(where, A=A, B=B)
    if C is not None:
        C = validate.tensor(C, "C", where, validate.ALL_FLOAT_DTYPES)
        if C.is_complex() != A.is_complex():
            raise TypeError(f"{where}: C has dtype {C.dtype} but A has {A.dtype}; both must be real or both complex")
    validate.same_device(where, A=A, B=B, C=C)
    if not isinstance(compute_dtype, torch.dtype) or compute_dtype not in validate.BLAS_DTYPES:
        raise TypeError(f"{where}: compute_dtype must be one of torch.float32, torch.float64, torch.complex64, "
                        f"torch.complex128; got {compute_dtype!r}")
    if compute_dtype.is_complex != A.is_complex():
        raise TypeError(f"{where}: compute_dtype {compute_dtype} does not match the "
                        f"{'complex' if A.is_complex() else 'real'} inputs (A has dtype {A.dtype})")
    if out_dtype is None:
        out_dtype = C.dtype if C is not None else A.dtype
    elif not isinstance(out_dtype, torch.dtype) or out_dtype not in validate.ALL_FLOAT_DTYPES:
        raise TypeError(f"{where}: out_dtype must be a floating or complex torch.dtype, got {out_dtype!r}")
    elif out_dtype.is_complex != A.is_complex():
        raise TypeError(f"{where}: out_dtype {out_dtype} does not match the inputs (A has dtype {A.dtype})")
    alpha, beta = _scalars(where, alpha, beta, compute_dtype)
    A, B, _, tA, tB, m, n, k = _gemm_operands(where, A, B, None, transA, transB, validate.ALL_FLOAT_DTYPES)
    if C is not None:
        _check_c_shape(where, A, B, C, m, n)
    Cw = C if C is not None and beta != 0 else None
    if A.dim() == 2 and B.dim() == 2 and alpha != 0 and m and n and k:
        # One matrix: the inputs stay in their dtype up to the lowering, so
        # the Tensor Engine can take bf16 operands and accumulate in fp32.
        R = GEMM_EX(alpha, A, B, beta, Cw, tA, tB, compute_dtype)
    else:  # batches and quick returns: widen, then the general path
        Aw, Bw = A.to(compute_dtype), B.to(compute_dtype)
        Cw = None if Cw is None else Cw.to(compute_dtype)
        R = _run_gemm(where, alpha, Aw, Bw, beta, Cw, tA, tB, m, n, k)
    return validate.finish(R.to(out_dtype), out, where)


def _check_c_shape(where, A, B, C, m, n):
    batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    shape = (*batch, m, n)
    try:
        ok = C.dim() >= 2 and C.shape[-2:] == (m, n) and torch.broadcast_shapes(C.shape, shape) == shape
    except RuntimeError:
        ok = False
    if not ok or (not batch and C.dim() != 2):
        raise validate.mismatch(where, f"C must have shape {shape}", A=A, B=B, C=C)


# ===================================================================== extensions

@public(GEAM, "scalar tensor scalar tensor flag flag")
def geam(alpha, A, beta, B, transA=False, transB=False, *, out=None):
    """Matrix add with transposes (``cublas<t>geam``): ``alpha op(A) + beta op(B)``.

    Parameters
    ----------
    alpha, beta : number
        ``alpha == 0`` never reads ``A``; ``beta == 0`` never reads ``B``.
    A, B : tensor
        ``op(A)`` and ``op(B)`` must have one shape ``(m, n)``.
    transA, transB : bool or {"N", "T", "C"}
    out : tensor, optional

    Returns
    -------
    tensor, shape (m, n)

    Raises
    ------
    TypeError, ValueError
        dtypes, shapes, devices, option strings.

    Notes
    -----
    ``geam(1, A, 0, A, transA="T")`` is an out-of-place transpose, as with
    cuBLAS.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.geam(1.0, torch.ones(2, 3), 2.0, torch.ones(3, 2), transB=True).tolist()
    [[3.0, 3.0, 3.0], [3.0, 3.0, 3.0]]
    """
    where = "geam"
    A = validate.matrix(A, "A", where, validate.ALL_FLOAT_DTYPES)
    B = validate.matrix(B, "B", where, validate.ALL_FLOAT_DTYPES)
    validate.agree(where, A=A, B=B)
    tA = la.real_trans(la.trans(transA, "transA", where), A.dtype)
    tB = la.real_trans(la.trans(transB, "transB", where), A.dtype)
    alpha, beta = _scalars(where, alpha, beta, A.dtype)
    shape = la.op_shape(A, tA)
    if la.op_shape(B, tB) != shape:
        raise validate.mismatch(where, f"op(A) is {shape[0]}x{shape[1]} (transA={tA!r}) but op(B) is "
                                f"{la.op_shape(B, tB)[0]}x{la.op_shape(B, tB)[1]} (transB={tB!r})", A=A, B=B)
    if (alpha == 0 and beta == 0) or shape[0] * shape[1] == 0:
        R = torch.zeros(shape, dtype=A.dtype, device=A.device)
    elif alpha == 0:  # A unread: beta op(B)
        R = GEAM(beta, B, 0.0, None, tB, "N")
    else:  # B unread when beta == 0
        R = call(GEAM, alpha, A, beta, B if beta != 0 else None, tA, tB)
    return validate.finish(R, out, where)


@public(DGMM, "tensor tensor flag")
def dgmm(A, x, side="left", *, out=None):
    """Multiply by a diagonal matrix (``cublas<t>dgmm``): ``diag(x) A`` or ``A diag(x)``.

    Parameters
    ----------
    A : tensor, shape (m, n)
    x : tensor, shape (m,) for side="left", (n,) for side="right"
    side : {"left", "right", "L", "R"}
        ``"left"``: row ``i`` of ``A`` scaled by ``x[i]``; ``"right"``:
        column ``j`` scaled by ``x[j]``.
    out : tensor, optional

    Returns
    -------
    tensor, shape (m, n)

    Raises
    ------
    TypeError, ValueError
        dtypes, shapes, devices, option strings.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.dgmm(torch.ones(2, 2), torch.tensor([1.0, 2.0]), side="right").tolist()
    [[1.0, 2.0], [1.0, 2.0]]
    """
    where = "dgmm"
    A = validate.matrix(A, "A", where, validate.ALL_FLOAT_DTYPES)
    x = validate.vector(x, "x", where, validate.ALL_FLOAT_DTYPES)
    validate.agree(where, A=A, x=x)
    s = la.side(side, "side", where)
    want = A.shape[0] if s == "L" else A.shape[1]
    if x.shape[0] != want:
        raise validate.mismatch(where, f"side={s!r} needs x to have {want} entries "
                                f"({'rows' if s == 'L' else 'columns'} of A)", A=A, x=x)
    if A.numel() == 0:
        return validate.finish(A.clone(), out, where)
    return validate.finish(call(DGMM, A, x, s), out, where)

