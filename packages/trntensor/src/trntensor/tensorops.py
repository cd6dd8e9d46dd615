"""cuTENSOR's operations besides contraction: :func:`permute`, :func:`elementwise`, :func:`reduce`.

Each is an :class:`~trnsci.dispatch.Op` (``trntensor.permute``,
``trntensor.elementwise``, ``trntensor.reduce``; size = elements moved)
with a torch lowering here and an NKI lowering in :mod:`trntensor._nki.tensorops`
(transpose, elementwise and row-reduction kernels, float32/bfloat16/float16,
fp32 inside). The public functions validate and canonicalize; the lowerings
compute.
"""

from __future__ import annotations

import math

import torch

from trnsci import validate
from trnsci.dispatch import Op

__all__ = ["permute", "elementwise", "reduce", "PERMUTE", "ELEMENTWISE", "REDUCE", "UNARY_OPS", "BINARY_OPS",
           "REDUCE_OPS"]

# Thresholds: elements; placeholders until calibrated on hardware. These ops move a few bytes per element,
# so only large tensors can pay for a launch: 2^22 elements, 16 MiB of float32
# (docs/perf-notes.md#design-launch-placeholders).
_THRESHOLD = 2**22


def _numel(t):
    return t.numel() if t is not None else 0


PERMUTE = Op(
    "trntensor.permute", "elements", _THRESHOLD,
    size=lambda A, perm, alpha: A.numel(),
    describe=lambda A, perm, alpha: f"{tuple(A.shape)} permuted {tuple(perm)}, alpha={alpha}",
    doc="alpha * A.permute(perm), contiguous; size = elements of A",
    schema="(Tensor A, int[] perm, Scalar alpha) -> Tensor",
    fake=lambda A, perm, alpha: A.new_empty([A.shape[p] for p in perm],
                                            dtype=torch.result_type(A, alpha) if alpha != 1 else A.dtype),
)

ELEMENTWISE = Op(
    "trntensor.elementwise", "elements", _THRESHOLD,
    size=lambda ops, coef, names, shape, dtype: math.prod(shape),
    dtype=lambda ops, coef, names, shape, dtype: dtype,
    describe=lambda ops, coef, names, shape, dtype: (
        f"{' , '.join(str(tuple(x.shape)) for x in ops if x is not None)} -> {tuple(shape)}; "
        f"ops {names}, alpha/beta/gamma {coef}"),
    doc="op_abc(op_ab(alpha op_a(A), beta op_b(B)), gamma op_c(C)); size = elements of the result",
    schema="(Tensor A, Tensor? B, Tensor? C, Scalar[] coef, str[] names, SymInt[] shape, ScalarType dtype) -> Tensor",
    fake=lambda A, B, C, coef, names, shape, dtype: A.new_empty(shape, dtype=dtype),
)
# the operands cross the operator one by one (autograd follows Tensor and Tensor? arguments)
ELEMENTWISE.boundary(lambda ops, coef, names, shape, dtype: (*ops, list(coef), list(names), list(shape), dtype),
                     lambda A, B, C, coef, names, shape, dtype: ((A, B, C), coef, names, shape, dtype))

REDUCE = Op(
    "trntensor.reduce", "elements", _THRESHOLD,
    size=lambda A, axes, op, alpha, beta, C: A.numel(),
    describe=lambda A, axes, op, alpha, beta, C: f"{op} of {tuple(A.shape)} over axes {axes}",
    doc="alpha * reduce_op(A, axes) + beta * C; size = elements of A",
    schema="(Tensor A, int[] axes, str op, Scalar alpha, Scalar beta, Tensor? C) -> Tensor",
)

#: unary operators (cuTENSOR's CUTENSOR_OP_*): name -> torch function
UNARY_OPS = {
    "identity": lambda x: x, "sqrt": torch.sqrt, "relu": torch.relu, "conj": lambda x: x.conj().resolve_conj(),
    "rcp": torch.reciprocal, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "exp": torch.exp, "log": torch.log,
    "abs": torch.abs, "neg": torch.neg, "sin": torch.sin, "cos": torch.cos,
}
#: binary operators: name -> torch function
BINARY_OPS = {"add": torch.add, "mul": torch.mul, "max": torch.maximum, "min": torch.minimum}
REDUCE_OPS = ("sum", "max", "min", "prod")

_UNARY = validate.Options({k: (k,) for k in UNARY_OPS} | {"rcp": ("rcp", "reciprocal"), "neg": ("neg", "negative")})
_BINARY = validate.Options({"add": ("add",), "mul": ("mul", "multiply"), "max": ("max", "maximum"),
                            "min": ("min", "minimum")})
_REDUCE = validate.Options({"sum": ("sum", "add"), "max": ("max",), "min": ("min",), "prod": ("prod", "mul")})


def _real_coef(x, name, where, dt):
    x = validate.scalar(x, name, where)
    if isinstance(x, complex) and not dt.is_complex:
        raise TypeError(f"{where}: {name}={x!r} is complex but the operands are real")
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError(f"{where}: {name} must be finite, got {x!r}")
    return x


def _operand(x, name, where):
    t = validate.tensor(x, name, where)
    if t.dtype == torch.bool:
        raise TypeError(f"{where}: {name} has dtype bool; pass integer, float or complex tensors")
    return t


# ------------------------------------------------------------------ permute

@PERMUTE.lowering("torch")
def _permute_torch(A, perm, alpha):
    R = A.permute(perm)
    R = R * alpha if alpha != 1 else R.clone()
    return R.contiguous()


@validate.numpy_io
def permute(A, perm, alpha=1.0):
    """``alpha * A`` with its axes permuted, as a new contiguous tensor (cuTENSOR's permutation).

    Parameters
    ----------
    A : tensor or array
        Any dtype but bool.
    perm : sequence of int
        A permutation of ``range(A.ndim)`` (negative axes allowed): result
        axis ``k`` is ``A``'s axis ``perm[k]``, as ``numpy.transpose``.
    alpha : number
        Scale factor (default 1). With an integer ``A`` and a float
        ``alpha`` the result is floating (torch's promotion).

    Returns
    -------
    tensor
        ``alpha * A.permute(perm)``, contiguous, never a view of ``A``.

    Notes
    -----
    Backend ``"nki"``/``"simulator"``: float32/bfloat16/float16 run as one
    or more batched transposes on the Tensor Engine
    (:mod:`trntensor.kernels.transpose`; a transpose of two groups of axes
    is one pass), in fp32, rounded once to ``A``'s dtype.

    Examples
    --------
    >>> import torch, trntensor
    >>> A = torch.arange(6.0).reshape(2, 3)
    >>> trntensor.permute(A, (1, 0), alpha=2.0)
    tensor([[ 0.,  6.],
            [ 2.,  8.],
            [ 4., 10.]])
    """
    where = "permute"
    A = _operand(A, "A", where)
    seq = validate.int_sequence(perm, "perm", where)
    if len(seq) != A.dim():
        raise ValueError(f"{where}: perm {tuple(seq)} must name each of A's {A.dim()} axes once "
                         f"(A has shape {tuple(A.shape)})")
    p = validate.axes(tuple(seq), A.dim(), "perm", where)
    alpha = _real_coef(alpha, "alpha", where, A.dtype)
    return PERMUTE(A, p, alpha)


# ------------------------------------------------------------------ elementwise

@ELEMENTWISE.lowering("torch")
def _elementwise_torch(ops, coef, names, shape, dtype):
    """``ops``: (A, B, C) views broadcastable to ``shape`` (B, C may be None); ``coef``: (alpha, beta, gamma);
    ``names``: (op_a, op_b, op_c, op_ab, op_abc); ``dtype``: the result dtype."""
    A, B, C = ops
    op_a, op_b, op_c, op_ab, op_abc = names

    def term(x, op, s):
        x = UNARY_OPS[op](x.to(dtype) if x.dtype != dtype else x)
        return x * s if s != 1 else x

    R = term(A, op_a, coef[0])
    if B is not None:
        R = BINARY_OPS[op_ab](R, term(B, op_b, coef[1]))
    if C is not None:
        R = BINARY_OPS[op_abc](R, term(C, op_c, coef[2]))
    if R.dtype != dtype:
        R = R.to(dtype)
    if tuple(R.shape) != tuple(shape):
        R = R.expand(shape)
    R = R.contiguous()
    # identity ops on an operand already in the result's layout: never return its memory (a traced
    # tensor -- fake, functional -- has no data pointer: compared by identity)
    if R.device.type != "meta" and any(x is not None and (x is R or (type(R) is torch.Tensor and x.untyped_storage()
                                       .data_ptr() == R.untyped_storage().data_ptr())) for x in ops):
        R = R.clone()
    return R


def _parse_subscripts(subscripts, ts, where):
    """Per operand, its view aligned to the output modes (broadcast modes as size 1); the output shape."""
    if type(subscripts) is not str:
        raise TypeError(f"{where}: subscripts must be a str such as 'ab,ba->ab', got {type(subscripts).__name__}")
    s = subscripts.replace(" ", "")
    if s.count("->") != 1:
        raise ValueError(f"{where}: subscripts {subscripts!r} must have one '->' and the output's modes")
    lhs, out = s.split("->")
    terms = lhs.split(",")
    if len(terms) != len(ts):
        raise ValueError(f"{where}: subscripts {subscripts!r} name {len(terms)} operand(s) but "
                         f"{len(ts)} were given")
    for t in terms + [out]:
        for ch in t:
            if not ch.isascii() or not ch.isalpha():
                raise ValueError(f"{where}: subscripts {subscripts!r}: invalid mode {ch!r} (letters a-z, A-Z)")
        if len(set(t)) != len(t):
            raise ValueError(f"{where}: subscripts {subscripts!r}: mode repeated within {t!r}")
    sizes = {}
    names = ("A", "B", "C")
    for k, (t, x) in enumerate(zip(terms, ts)):
        if len(t) != x.dim():
            raise ValueError(f"{where}: subscripts term {t!r} has {len(t)} modes but {names[k]} has "
                             f"{x.dim()} dimensions")
        for ch, n in zip(t, x.shape):
            if ch not in out:
                raise ValueError(f"{where}: mode {ch!r} of {names[k]} is not in the output {out!r} "
                                 "(elementwise sums nothing; use einsum or reduce)")
            if sizes.setdefault(ch, n) != n:
                raise ValueError(f"{where}: mode {ch!r} has size {sizes[ch]} and {n}")
    missing = [ch for ch in out if ch not in sizes]
    if missing:
        raise ValueError(f"{where}: output mode {missing[0]!r} is in no operand")
    shape = tuple(sizes[ch] for ch in out)
    views = []
    for t, x in zip(terms, ts):
        v = x.permute(tuple(sorted(range(len(t)), key=lambda d: out.index(t[d]))))
        present = sorted(t, key=out.index)
        views.append(v.reshape(tuple(sizes[ch] if ch in present else 1 for ch in out)))
    return views, shape


@validate.numpy_io
def elementwise(A, B=None, C=None, *, alpha=1, beta=1, gamma=1, op_a="identity", op_b="identity",
                op_c="identity", op_ab="add", op_abc="add", subscripts=None):
    """cuTENSOR's elementwise binary/trinary operation: ``op_abc(op_ab(alpha op_a(A), beta op_b(B)), gamma op_c(C))``.

    Parameters
    ----------
    A : tensor or array
    B, C : tensor or array, optional
        Left out, their terms are left out (``B=None, C`` given:
        ``op_abc(alpha op_a(A), gamma op_c(C))``).
    alpha, beta, gamma : number
        Scale factors, applied after the unary operators (as cuTENSOR).
    op_a, op_b, op_c : str
        Unary operators: ``"identity"``, ``"sqrt"``, ``"relu"``, ``"conj"``,
        ``"rcp"`` (reciprocal), ``"sigmoid"``, ``"tanh"``, ``"exp"``,
        ``"log"``, ``"abs"``, ``"neg"``, ``"sin"``, ``"cos"``.
    op_ab, op_abc : str
        Binary operators: ``"add"``, ``"mul"``, ``"max"``, ``"min"``.
    subscripts : str, optional
        Modes of each given operand and of the result, ``"ab,ba->ab"``:
        operands are permuted into the result's layout (cuTENSOR's fused
        permutation) and broadcast along the result's modes they lack; a
        mode may not repeat within a term nor be missing from the result.
        Default: the operands broadcast together as in NumPy.

    Returns
    -------
    tensor
        A new contiguous tensor of the operands' promoted dtype (floating if
        a unary operator needs it, e.g. ``sqrt`` of integers).

    Raises
    ------
    ValueError
        Unknown operator, shapes that do not broadcast, malformed
        subscripts (the message names the mode).
    TypeError
        Non-tensors, bool tensors, ``max``/``min`` of complex data, complex
        scale factors with real data.

    Notes
    -----
    Backend ``"nki"``/``"simulator"``: float32/bfloat16/float16 operands of
    one dtype run the elementwise kernel
    (:mod:`trntensor.kernels.elementwise`: Scalar-Engine activations,
    Vector-Engine arithmetic, fp32 inside), after transpose kernels for an
    operand whose layout differs from the result's and the gather kernel
    for a broadcast one. The Scalar Engine's
    activations have documented input ranges (sqrt ``[2^-116, 2^118]``, log
    ``[2^-64, 2^64]``, sin ``[-pi, pi]``, cos -- computed as ``sin(pi/2 -
    x)`` -- ``[-pi/2, 3 pi/2]``): operands outside them run on torch, and
    the plan says so.

    Examples
    --------
    >>> import torch, trntensor
    >>> A, B = torch.tensor([[1.0, 4.0], [9.0, 16.0]]), torch.ones(2, 2)
    >>> trntensor.elementwise(A, B, op_a="sqrt", beta=10.0, subscripts="ab,ba->ab")
    tensor([[11., 12.],
            [13., 14.]])
    >>> trntensor.elementwise(A, C=torch.full((2, 2), 5.0), op_abc="min")
    tensor([[1., 4.],
            [5., 5.]])
    """
    where = "elementwise"
    named = (("A", A), ("B", B), ("C", C))
    ts = [_operand(x, n, where) if x is not None or n == "A" else None for n, x in named]
    given = [t for t in ts if t is not None]
    dev = given[0].device
    for t in given[1:]:
        if t.device != dev:
            validate.same_device(where, **{k: x for k, x in zip("ABC", ts) if x is not None})
    names = (_UNARY(op_a, "op_a", where), _UNARY(op_b, "op_b", where), _UNARY(op_c, "op_c", where),
             _BINARY(op_ab, "op_ab", where), _BINARY(op_abc, "op_abc", where))
    dt = given[0].dtype
    for t in given[1:]:
        dt = torch.promote_types(dt, t.dtype)
    used = [names[0]] + [names[k] for k in (1, 2) if ts[k] is not None]
    if not (dt.is_floating_point or dt.is_complex) and any(u not in ("identity", "conj", "relu", "abs", "neg")
                                                             for u in used):
        dt = torch.get_default_dtype()  # sqrt, exp, ... of integers are floating
    binops = ([names[3]] if ts[1] is not None else []) + ([names[4]] if ts[2] is not None else [])
    if dt.is_complex and any(b in ("max", "min") for b in binops):
        raise TypeError(f"{where}: op_ab/op_abc 'max'/'min' need real operands, got {str(dt)[6:]}")
    if dt.is_complex and "relu" in used:
        raise TypeError(f"{where}: 'relu' needs real operands, got {str(dt)[6:]}")
    coef = tuple(_real_coef(x, n, where, dt) for n, x in (("alpha", alpha), ("beta", beta), ("gamma", gamma)))
    if subscripts is not None:
        views, shape = _parse_subscripts(subscripts, given, where)
        it = iter(views)
        ops = tuple(next(it) if t is not None else None for t in ts)
    else:
        shape = tuple(given[0].shape)
        for n, t in zip("ABC", ts):
            if t is None:
                continue
            try:
                shape = tuple(torch.broadcast_shapes(shape, t.shape))
            except RuntimeError:
                raise ValueError(f"{where}: {n}'s shape {tuple(t.shape)} does not broadcast with the other "
                                 f"operands' {shape}") from None
        ops = tuple(ts)
    return ELEMENTWISE(ops, coef, names, shape, dt)


# ------------------------------------------------------------------ reduce

@REDUCE.lowering("torch")
def _reduce_torch(A, axes, op, alpha, beta, C):
    if not axes:
        R = A.clone()
    elif op == "sum":
        R = A.sum(axes)
    elif op == "max":
        R = A.amax(axes)
    elif op == "min":
        R = A.amin(axes)
    else:
        kept = [d for d in range(A.dim()) if d not in axes]
        X = A.permute(kept + list(axes))
        R = X.reshape(*X.shape[:len(kept)], -1).prod(-1)
    if alpha != 1:
        R = R * alpha
    if C is not None:
        R = R + (C * beta if beta != 1 else C)
    return R.contiguous()


@validate.numpy_io
def reduce(A, axes=None, op="sum", alpha=1, beta=0, C=None):
    """cuTENSOR's reduction: ``alpha * op(A over axes) + beta * C``.

    Parameters
    ----------
    A : tensor or array
        Any dtype but bool.
    axes : int or sequence of int, optional
        The axes reduced (negative allowed); None: all of them, ``()``:
        none (``alpha * A + beta * C``).
    op : {"sum", "max", "min", "prod"}
    alpha, beta : number
        Scale factors. ``beta == 0`` never reads ``C`` (NaN there does not
        propagate).
    C : tensor or array, optional
        Of the result's shape (``A``'s with ``axes`` removed); required when
        ``beta != 0``.

    Returns
    -------
    tensor
        A new tensor of the result's shape (torch's dtype for the reduction:
        ``sum``/``prod`` of integers are int64).

    Raises
    ------
    ValueError
        Repeated or out-of-range axes, ``max``/``min`` over an empty extent,
        ``beta != 0`` without ``C``, ``C`` of the wrong shape.
    TypeError
        Non-tensors, bool tensors, ``max``/``min`` of complex data.

    Notes
    -----
    Backend ``"nki"``/``"simulator"``: float32/bfloat16/float16 run the
    row-reduction kernel (:mod:`trntensor.kernels.reduce`; Vector Engine,
    fp32 inside) on ``A`` viewed as ``[kept, reduced]``; when the reduced
    axes are not the trailing ones, transpose kernels bring them there first
    (a reduction over the partition dim by transposition).

    Examples
    --------
    >>> import torch, trntensor
    >>> A = torch.arange(6.0).reshape(2, 3)
    >>> trntensor.reduce(A, 1)
    tensor([ 3., 12.])
    >>> trntensor.reduce(A, 0, op="max", beta=1.0, C=torch.ones(3))
    tensor([4., 5., 6.])
    """
    where = "reduce"
    A = _operand(A, "A", where)
    ax = tuple(range(A.dim())) if axes is None else validate.axes(axes, A.dim(), "axes", where)
    code = _REDUCE(op, "op", where)
    if code in ("max", "min"):
        if A.dtype.is_complex:
            raise TypeError(f"{where}: op={op!r} needs real data, got {str(A.dtype)[6:]}")
        if any(A.shape[d] == 0 for d in ax):
            raise ValueError(f"{where}: op={op!r} over an empty axis has no identity (A's shape {tuple(A.shape)})")
    alpha = _real_coef(alpha, "alpha", where, A.dtype)
    beta = _real_coef(beta, "beta", where, A.dtype)
    shape = tuple(n for d, n in enumerate(A.shape) if d not in ax)
    Ct = None
    if beta != 0:
        if C is None:
            raise ValueError(f"{where}: beta={beta} needs C (the tensor it scales)")
        Ct = _operand(C, "C", where)
        validate.shape(Ct, "C", shape, where)
        validate.same_device(where, A=A, C=Ct)
    elif C is not None:
        _operand(C, "C", where)
    return REDUCE(A, tuple(sorted(ax)), code, alpha, beta, Ct)


# ------------------------------------------------------------------ derivatives (torch.ops.trntensor.*)

def _permute_backward(inputs, output, g, needs):
    # R = alpha A.permute(perm): grad A = conj(alpha) g permuted back (the inverse permutation)
    A, perm, alpha = inputs
    if not needs[0]:
        return None, None, None
    inv = [0] * len(perm)
    for k, p in enumerate(perm):
        inv[p] = k
    gA = PERMUTE(g, tuple(inv), alpha.conjugate() if isinstance(alpha, complex) else alpha)
    return gA.to(A.dtype) if gA.dtype != A.dtype else gA, None, None


def _reduce_backward(inputs, output, g, needs):
    # sum: grad A = conj(alpha) g broadcast over the reduced axes (one elementwise operation);
    # max/min/prod: the vjp of the torch lowering; grad C = conj(beta) g
    A, axes, op, alpha, beta, C = inputs
    if op != "sum" or A.is_complex() or A.dtype != g.dtype:
        from trnsci import operators

        return operators.vjp(REDUCE, inputs, g)
    gA = gC = None
    if needs[0]:
        view = g.reshape([1 if d in axes else n for d, n in enumerate(A.shape)]) if axes else g
        gA = ELEMENTWISE((view, None, None), (alpha, 1, 1), ("identity",) * 3 + ("add", "add"), tuple(A.shape),
                         A.dtype)
    if C is not None and needs[5]:
        gC = g * beta if beta != 1 else g
    return gA, None, None, None, None, gC


PERMUTE.backward(_permute_backward, formula="dA = conj(alpha) g permuted back", runs="one `trntensor.permute` call")
REDUCE.backward(_reduce_backward, formula="sum: dA = conj(alpha) g broadcast over the reduced axes, dC = "
                "conj(beta) g; max/min/prod: the vjp of the torch lowering",
                runs="torch for max/min/prod; for a sum one `trntensor.elementwise` call (kernels under a kernel "
                     "backend, as in the forward)")
