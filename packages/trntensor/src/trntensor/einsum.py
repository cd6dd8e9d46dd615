"""Einstein summation: :func:`einsum`, :func:`multi_einsum`, :func:`tensordot`.

Each call is planned once per signature (:mod:`trntensor.plan`, cached) and
run step by step: every pairwise step is a permute + reshape into a GEMM or
batched GEMM (TTGT), run by :func:`trnblas.gemm` / :func:`trnblas.batched_gemm`
when large enough to reach their kernels, a broadcast multiply when no index
is summed, or a sum.
"""

from __future__ import annotations

import math
import string

import numpy as np
import torch

import trnblas
from trnsci import hostblas, validate
from trnsci.dispatch import Op

from . import _host
from . import plan as P

__all__ = ["einsum", "multi_einsum", "tensordot", "EINSUM"]

# The einsum Op: its size is the planned path's flops. It has no kernel of its own -- its GEMM-shaped
# steps reach trnblas's kernels through trnblas's public API (ContractionStep.plan says which) -- so
# the threshold is never consulted; it is trnblas.gemm's default (2*512^3), uncalibrated: no hardware here.
EINSUM = Op(
    "trntensor.einsum", "flops", 2 * 512**3,
    size=lambda plan, *rest: plan.flops,
    dtype=lambda plan, operands, alpha, beta, C, compute_dtype, *rest: compute_dtype,
    describe=lambda plan, *rest: f"{plan.subscripts}  shapes {list(plan.shapes)}  ({plan.precision})",
    doc="alpha * einsum(subscripts, *operands) + beta * out along the planned pairwise path; flops = the path's",
    schema="(str subscripts, str optimize, Tensor[] operands, Scalar alpha, Scalar beta, Tensor? C, "
           "ScalarType compute_dtype, ScalarType result_dtype, str precision, bool? autotune) -> Tensor",
    fake=lambda subscripts, optimize, operands, alpha, beta, C, compute_dtype, result_dtype, precision, autotune:
        operands[0].new_empty(_plan_of(subscripts, optimize, operands, result_dtype, precision)._exec[4],
                              dtype=result_dtype),
)


def _plan_of(subscripts, optimize, operands, result_dtype, precision):
    """The (cached) plan of the operator's arguments: the plan crosses the operator as its canonical
    subscripts and path option, the shapes and dtypes being the operands'."""
    return P._plan(subscripts, tuple(tuple(x.shape) for x in operands), result_dtype, operands[0].device, precision,
                   optimize, None, "einsum")


def _to_operator(plan, operands, alpha, beta, C, compute_dtype, result_dtype, precision, autotune=None):
    return (plan.subscripts, plan.optimize, list(operands), alpha, beta, C, compute_dtype, result_dtype, precision,
            autotune)


def _to_lowering(subscripts, optimize, operands, alpha, beta, C, compute_dtype, result_dtype, precision, autotune):
    plan = _plan_of(subscripts, optimize, operands, result_dtype, precision)
    return plan, tuple(operands), alpha, beta, C, compute_dtype, result_dtype, precision, autotune


EINSUM.boundary(_to_operator, _to_lowering)
P._ABOVE["einsum"] = EINSUM  # the decision trntensor.plan_contraction reports


# ------------------------------------------------------------------ execution (no validation)

# every numpy.matmul of a route goes through trnsci.hostblas: OpenBLAS at one thread beside torch's threads
_np_matmul = hostblas.serial(np.matmul)


def _blas_view(x):
    """``x`` as a NumPy array NumPy's matmul hands to BLAS (one unit stride per matrix; else a copy).

    numpy.matmul calls BLAS only for matrices with one unit stride and the
    other at least the row length; any other layout (a diagonal view, a
    slice with a step, a broadcast) would take its unblocked loop.
    """
    st, sh = x.stride(), x.shape
    if not ((st[-1] == 1 and st[-2] >= sh[-1]) or (st[-2] == 1 and st[-1] >= sh[-2])):
        x = x.contiguous()
    return x.numpy()


def _np_gemm(a, b):
    """``a @ b`` (2-D or 3-D CPU tensors) by numpy.matmul on zero-copy views; the result shares NumPy's memory."""
    return torch.from_numpy(_np_matmul(_blas_view(a), _blas_view(b)))


def _mm(a, b, blas):
    if blas:
        return trnblas.gemm(1.0, a, b)
    return torch.mm(a, b)


def _bmm(a, b, blas):
    if blas:
        return trnblas.batched_gemm(1.0, a, b)
    return torch.bmm(a, b)


_TRACED = "traced"  # _pair's ``kernels`` under torch.compile: every GEMM step through trnblas


def _pair(a, b, r, kernels=True, np_route=False):
    """One pairwise step. ``kernels``: trnblas could pick a kernel (:func:`plan.kernels_possible`);
    ``np_route``: the GEMM by numpy.matmul -- or a callable ``np_route(a, b) -> bool`` that decides it
    on the step's GEMM operands (a plan's first execution, :func:`_decider`)."""
    kind, sa, sb, pa, pb, va, vb, res_shape, (Bn, M, N, K) = r
    if sa:
        a = a.sum(sa)
    if sb:
        b = b.sum(sb)
    if pa is not None:
        a = a.permute(pa)
    if va is not None:
        a = a.reshape(va)
    if pb is not None:
        b = b.permute(pb)
    if vb is not None:
        b = b.reshape(vb)
    if kind == "ew":
        return a * b
    if np_route is not False and np_route is not True:
        np_route = np_route(a, b)
    if np_route:
        c = _np_gemm(a, b)
    else:
        batched = a.dim() == 3
        blas = kernels is _TRACED or (kernels and P.via_trnblas(2 * Bn * M * N * K, a.dtype, batched))
        c = _bmm(a, b, blas) if batched else _mm(a, b, blas)
    return c if res_shape is None else c.reshape(res_shape)


def _decider(plan, rounds, threads, use):
    """For a plan's first execution at ``threads``: per step ``k`` a callable ``(a, b) -> bool`` that
    chooses the step's route through :func:`trnsci.routes.choose` (timing torch and numpy.matmul on
    ``a``, ``b`` unless its class is decided) and writes the flag into ``use[k]``; None for a step
    that is not a route."""
    def make(k):
        def decide(a, b):
            torch_gemm = (lambda: _bmm(a, b, False)) if a.dim() == 3 else (lambda: _mm(a, b, False))
            c = _host._choose_step(plan, k, threads, rounds, {"torch": torch_gemm, "numpy": lambda: _np_gemm(a, b)})
            use[k] = c.route == "numpy"
            return use[k]
        return decide

    return [make(k) if _host._eligible(s, threads) else False for k, s in enumerate(plan.steps[: len(use)])]


def _prepare(ops, prep):
    xs = []
    for x, (squeeze, diag, ushape) in zip(ops, prep):
        if squeeze:
            x = x.squeeze(squeeze)
        if diag is not None:
            st = x.stride()
            x = x.as_strided(ushape, tuple(sum(st[p] for p in g) for g in diag), x.storage_offset())
        xs.append(x)
    return xs


def _run(exec_, ops, kernels=True, use=None):
    """The plan's steps; ``kernels``: as for :func:`_pair`; ``use``: per step, numpy.matmul for its GEMM
    (a flag, or a deciding callable: see :func:`_pair`)."""
    prep, recipes, sumdims, perm, _ = exec_
    xs = _prepare(ops, prep)
    for k, (i, j, swap, r) in enumerate(recipes):
        if j is None:  # a one-operand sum, r = ("sum", dims)
            xs.append(xs.pop(i).sum(r[1]))
            continue
        b = xs.pop(j)
        a = xs.pop(i)
        if swap:
            a, b = b, a
        xs.append(_pair(a, b, r, kernels) if use is None else _pair(a, b, r, kernels, use[k]))
    x = xs[0]
    if sumdims:
        x = x.sum(sumdims)
    if perm is not None:
        x = x.permute(perm)
    return x


# --- double-double: Ozaki splitting, exact slice contractions, error-free distillation

def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


#: At most this many slices per component of an operand: an operand whose
#: entries span more than ``_MAX_SLICES * (rho + 1)`` bits (from the largest
#: entry's leading bit to the smallest's last one) loses the bits beyond.
_MAX_SLICES = 12


def _split(x, rho):
    """Slices ``s_0 + s_1 + ...`` of ``x`` (float64) until nothing is left.

    Slice ``k`` is ``x``'s remainder rounded to a multiple of ``2^(e - rho)``
    where ``2^e`` bounds the remainder: at most ``rho + 1`` significant bits
    per entry, so products of two slices and sums of ``terms`` such products
    are exact in float64 (see :func:`_rho`).
    """
    out = []
    for _ in range(_MAX_SLICES):
        mu = float(x.abs().max()) if x.numel() else 0.0
        if mu == 0.0:
            break
        e = math.frexp(mu)[1]  # mu < 2^e
        if e + 53 - rho > 1023:  # sigma would overflow: slice a scaled copy (powers of two are exact)
            sh = e + 53 - rho - 1023
            out += [t * 2.0 ** sh for t in _split(x * 2.0 ** -sh, rho)]
            break
        sigma = 0.75 * 2.0 ** (e + 53 - rho)
        t = (x + sigma) - sigma
        out.append(t)
        x = x - t
    return out


def _rho(terms):
    """Bits per slice so that ``terms`` products of two slices sum exactly in float64."""
    return max(6, (53 - math.ceil(math.log2(max(terms, 2)))) // 2 - 1)


def _slices(comps, rho):
    return [t for c in comps for t in _split(c, rho)]


def _distill(vs):
    """``(hi, lo)``: ``hi`` within one ulp of the exact sum of the float64 tensors ``vs``, ``hi + lo``
    within ``len(vs) 2^-93`` of it (relative, entrywise; ``<= 2^-80`` for up to 8192 slice pairs).

    Repeated TwoSum sweeps (Ogita, Rump and Oishi's VecSum) move the sum into
    the last entry and leave every rounding error, exactly, in the others;
    each sweep shrinks the others by a factor ~``len(vs) * 2^-53``. They stop
    once the others add up to at most ``2^-40`` of the last entry everywhere
    (or vanish); one more rounding then gives the result. The exact sum is
    preserved throughout, so cancellation costs sweeps, not accuracy.
    """
    V = list(vs)
    for _ in range(64):  # 2^-47 per sweep over float64's 2^2100 range: < 50 sweeps even for a zero sum
        for k in range(1, len(V)):
            V[k], V[k - 1] = _two_sum(V[k], V[k - 1])
        rest = V[:-1]
        if not rest:
            break
        R = rest[0].abs()
        for t in rest[1:]:
            R = R + t.abs()
        if bool((R <= 2.0 ** -40 * V[-1].abs()).all()):
            break
    tail = V[0] if len(V) > 1 else torch.zeros_like(V[-1])
    for t in V[1:-1]:
        tail = tail + t
    return _two_sum(V[-1], tail)


def _dd_run(exec_, ops):
    """The contraction in double-double, rounded once to float64 (see einsum Notes)."""
    prep, recipes, sumdims, perm, out_shape = exec_
    parts = [[x.to(torch.float64)] for x in _prepare(ops, prep)]
    for i, j, swap, r in recipes:
        if j is None:  # a one-operand sum: exact slice sums, distilled like the final sum below
            comps = parts.pop(i)
            vs = [x.sum(r[1]) for x in _slices(comps, _rho(math.prod(comps[0].shape[d] for d in r[1])))]
            parts.append(list(_distill(vs)) if vs else [comps[0].sum(r[1])])
            continue
        b = parts.pop(j)
        a = parts.pop(i)
        if swap:
            a, b = b, a
        Bn, M, N, K = r[-1]
        na, nb = a[0].numel(), b[0].numel()
        terms = max(1, (na // max(Bn * M * K, 1)) * (nb // max(Bn * K * N, 1)) * K)
        rho = _rho(terms)
        sb_all = _slices(b, rho)
        vs = [_pair(sa, sb, r, kernels=False) for sa in _slices(a, rho) for sb in sb_all]
        if not vs:
            raise _ZeroResult(None)
        parts.append(list(_distill(vs)))
    comps = parts[0]
    if sumdims:
        terms = math.prod(comps[0].shape[d] for d in sumdims)
        vs = [x.sum(sumdims) for x in _slices(comps, _rho(terms))]
        if not vs:
            raise _ZeroResult(None)
        comps = _distill(vs)
    hi = comps[0] if len(comps) == 1 else comps[0] + comps[1]
    return hi if perm is None else hi.permute(perm)


class _ZeroResult(Exception):
    pass


# --- stochastic rounding and the forward-error model of the precision modes

def _stochastic_round(x, dtype):
    """``x`` rounded to ``dtype`` up or down at random, unbiased: ``E[result] == x``.

    Each entry goes to one of the two ``dtype`` values around it, the
    farther one with probability ``|x - nearest| / ulp`` (so exactly
    representable entries are unchanged, ties go either way with 1/2).
    Entries whose neighbour would be infinite, and Inf/NaN, round to
    nearest. Random bits come from torch's default generator on ``x``'s
    device (``torch.manual_seed`` repeats them). ``dtype`` other than
    bfloat16/float16, or complex ``x``: plain rounding to nearest.
    """
    if dtype not in (torch.bfloat16, torch.float16) or x.is_complex() or not x.dtype.is_floating_point:
        return x.to(dtype)
    y = x.to(dtype)
    yx = y.to(x.dtype)
    away = torch.where(yx < x, torch.tensor(math.inf, dtype=dtype, device=x.device),
                       torch.tensor(-math.inf, dtype=dtype, device=x.device))
    other = torch.nextafter(y, away)  # the representable value on x's other side
    ox = other.to(x.dtype)
    p = (x - yx) / (ox - yx)  # in [0, 1/2]: both differences have x's side's sign; exact in float32
    take = (yx != x) & torch.isfinite(other) & (torch.rand(x.shape, dtype=x.dtype, device=x.device) < p)
    return torch.where(take, other, y)


#: Unit roundoff per dtype: half the spacing of the numbers in [1, 2).
_UNIT = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11, torch.float32: 2.0 ** -24,
         torch.float64: 2.0 ** -53, torch.complex64: 2.0 ** -24, torch.complex128: 2.0 ** -53}
#: The modes in order of cost: target_forward_error picks the first whose bound meets the target.
_MODES = ("fast", "sr", "kahan", "dd")


def _summed_terms(plan):
    """Products summed into each output entry: the extents of the summed indices multiplied."""
    terms, out = plan._terms()
    sizes = {}
    for t, shape in zip(terms, plan.shapes):
        for ch, n in zip(t, shape[len(shape) - len(t):] if len(t) <= len(shape) else shape):
            sizes[ch] = max(sizes.get(ch, 1), n)
    return max(1, math.prod(n for ch, n in sizes.items() if ch not in out))


def _forward_error_bound(mode, dtype, terms):
    """The relative forward error bound of one einsum at precision ``mode`` (see :func:`einsum` Notes).

    ``|computed - exact| <= bound * sum |products|`` entrywise, to first
    order in the unit roundoffs; for ``"sr"`` on bfloat16/float16 the final
    rounding error is at most one ulp and has mean zero.
    """
    u = _UNIT.get(dtype, 2.0 ** -53)
    if mode == "fast":
        return terms * u
    if mode == "sr":
        if dtype in (torch.bfloat16, torch.float16):
            return terms * _UNIT[torch.float32] + 2 * u
        return terms * u
    if mode == "kahan":
        return terms * _UNIT[torch.float64] + u
    return 2 * u  # "dd": within one ulp of the result dtype


def _choose_precision(target, dtype, terms, where):
    """The cheapest mode whose :func:`_forward_error_bound` is at most ``target``."""
    real = not dtype.is_complex
    for mode in _MODES:
        if mode == "dd" and not real:
            continue
        if _forward_error_bound(mode, dtype, terms) <= target:
            return mode
    best = _forward_error_bound("dd" if real else "kahan", dtype, terms)
    raise ValueError(f"{where}: target_forward_error={target:g} is below what any precision mode guarantees "
                     f"for {str(dtype)[6:]} results ({best:.3g}); ask for a wider dtype= or a larger target")


def _target_arg(target, precision, where):
    """``target_forward_error=``: None, or a positive finite float; exclusive with an explicit precision."""
    if target is None:
        return None
    if isinstance(target, bool) or not isinstance(target, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: target_forward_error must be a positive float or None, got {target!r}")
    t = float(target)
    if not (t > 0 and math.isfinite(t)):
        raise ValueError(f"{where}: target_forward_error must be a positive finite float, got {target!r}")
    if precision is not None:
        raise ValueError(f"{where}: give precision= or target_forward_error=, not both "
                         f"(precision={precision!r})")
    return t


@EINSUM.lowering("torch")
def _einsum_torch(plan, operands, alpha, beta, C, compute_dtype, result_dtype, precision, autotune=None):
    """The contraction of canonical arguments: ``alpha * einsum + beta * C``.

    ``plan`` is the call's :class:`ContractionPlan`; ``operands`` tensors on one
    device; ``C`` None whenever ``beta == 0``; ``precision`` "fast",
    "sr", "kahan" or "dd" (real operands); ``autotune`` as for :func:`einsum`.
    Returns a new tensor of ``result_dtype``.
    """
    plan_exec = plan._exec
    if precision == "dd" and not all(bool(torch.isfinite(x).all()) for x in operands):
        precision = "kahan"  # Inf/NaN propagate as in float64; splitting them would only add NaNs
        compute_dtype = torch.float64
        autotune = False  # "dd" plans say torch
    if precision == "dd":
        try:
            R = _dd_run(plan_exec, operands)
        except _ZeroResult:
            R = torch.zeros(plan_exec[4], dtype=torch.float64, device=operands[0].device)
    elif torch.compiler.is_compiling():
        # traced by torch.compile: every GEMM step is trnblas's operator (torch.ops.trnblas.gemm /
        # batched_gemm), whose implementation makes trnblas's decision when the graph runs
        R = _run(plan_exec, [x if x.dtype == compute_dtype else x.to(compute_dtype) for x in operands], _TRACED)
    else:
        kernels = P.kernels_possible()
        use, rounds = _host._route(plan, operands, autotune, kernels)
        ops = [x if x.dtype == compute_dtype else x.to(compute_dtype) for x in operands]
        if rounds is None:
            R = _run(plan_exec, ops, kernels, use)
        else:  # the plan's first execution at this thread count: each GEMM step chooses its route
            threads = torch.get_num_threads()
            chosen = [False] * len(plan_exec[1])
            R = _run(plan_exec, ops, kernels, _decider(plan, rounds, threads, chosen))
            _host._settle(plan, threads, chosen)
    if R.dtype != result_dtype:
        R = _stochastic_round(R, result_dtype) if precision == "sr" else R.to(result_dtype)
    if alpha != 1:
        R = R * alpha
    if C is not None:
        R = R + beta * C if beta != 1 else R + C
    return R


# ------------------------------------------------------------------ public API

def _operands(operands, where):
    ts = []
    for k, x in enumerate(operands):
        if type(x) is not torch.Tensor:
            x = validate.tensor(x, f"operand {k}", where)
        if x.dtype == torch.bool:
            raise TypeError(f"{where}: operand {k} has dtype bool; einsum takes integer, float or complex tensors")
        ts.append(x)
    return ts


#: dtype names einsum accepts as strings (the published trntensor's, plus NumPy-style spellings).
_DTYPE_NAMES = {
    "bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "f16": torch.float16,
    "float16": torch.float16, "half": torch.float16, "fp32": torch.float32, "f32": torch.float32,
    "float32": torch.float32, "float": torch.float32, "fp64": torch.float64, "f64": torch.float64,
    "float64": torch.float64, "double": torch.float64, "complex64": torch.complex64,
    "complex128": torch.complex128,
}


def _dtype_arg(dtype, where):
    """``dtype=``: a torch.dtype or one of :data:`_DTYPE_NAMES` (any case); never bool."""
    if isinstance(dtype, str):
        t = _DTYPE_NAMES.get(dtype.strip().lower())
        if t is None:
            raise ValueError(f"{where}: dtype {dtype!r} is not a known name; use a torch.dtype or one of "
                             f"{', '.join(sorted(_DTYPE_NAMES))}")
        return t
    if not isinstance(dtype, torch.dtype) or dtype == torch.bool:
        raise TypeError(f"{where}: dtype must be a torch.dtype (not bool) or a name such as 'bf16', got {dtype!r}")
    return dtype


@validate.numpy_io
def einsum(subscripts, *operands, alpha=1, beta=0, out=None, dtype=None, precision=None, optimize="auto",
           autotune=None, target_forward_error=None):
    """Einstein summation with a planned pairwise contraction order.

    ``alpha * einsum(subscripts, *operands) + beta * out``, the contraction
    being ``numpy.einsum``'s: every index letter is a dimension; indices
    absent from the output are summed.

    Parameters
    ----------
    subscripts : str
        ``"ij,jk->ik"``. Letters a-z/A-Z; spaces ignored; ``...`` broadcasts
        leading/trailing dimensions (size-1 extents broadcast, as in NumPy);
        a letter repeated within one operand takes its diagonal
        (``"ii->"`` is the trace). Without ``->`` the output holds the
        letters seen exactly once, in alphabetical order (after the
        ellipsis dimensions).
    *operands : tensors or arrays
        Any number (>= 1). Mixed dtypes are promoted as torch does
        (``torch.promote_types``); bool is rejected.
    alpha, beta : number
        Scale factors. ``beta == 0`` never reads ``out`` (NaNs there do not
        propagate); ``beta != 0`` requires ``out``.
    out : tensor, optional
        Receives the result (its shape, dtype and device must match).
    dtype : torch.dtype or str, optional
        Compute and result dtype (operands are cast to it). Default: the
        promoted dtype of the operands. Names as the published trntensor
        took them: ``"bf16"``/``"bfloat16"``, ``"fp16"``/``"float16"``,
        ``"f32"``/``"float32"``, ``"f64"``/``"float64"`` (also ``"fp32"``,
        ``"fp64"``, ``"half"``, ``"float"``, ``"double"``, ``"complex64"``,
        ``"complex128"``; any case).
    precision : {"fast", "sr", "kahan", "dd"}, optional
        ``"fast"`` (the default): the compute dtype throughout. ``"sr"``
        (alias ``"stochastic"``): bfloat16/float16 operands are contracted
        in float32 (as the Tensor Engine accumulates in PSUM) and the result
        is rounded to the result dtype stochastically
        (unbiased: the error has mean
        zero); other dtypes as ``"fast"``. ``"kahan"``: products and sums in
        float64 (complex128) whatever the input dtype, rounded once to the
        result dtype. ``"dd"``: double-double -- real operands only; see
        Notes.
    optimize : {"auto", "optimal", "greedy", "none"} or bool
        The path optimizer (:func:`trntensor.plan_contraction`).
    autotune : bool, optional
        None (default): the setting of :func:`trntensor.set_autotune` (on
        unless ``TRNTENSOR_AUTOTUNE=off``). True/on: a CPU float32/float64
        GEMM step may run on ``numpy.matmul`` instead of torch when
        :mod:`trnsci.routes` measured it faster (see Notes). False: every
        step on torch.
    target_forward_error : float, optional
        Instead of ``precision``: the relative forward error the caller
        accepts; the cheapest mode (``"fast"`` < ``"sr"`` < ``"kahan"`` <
        ``"dd"``) whose bound (Notes) meets it runs. ``ValueError`` when no
        mode does, or when ``precision`` is given as well.

    Returns
    -------
    tensor
        The result, on the operands' device (NumPy in, NumPy out). As with
        ``numpy.einsum``, a pure transpose or diagonal of one operand
        (``"ij->ji"``, ``"ii->i"``) is returned as a view of it.

    Raises
    ------
    ValueError
        Subscripts/operand count mismatch, inconsistent sizes, invalid
        characters or an output index absent from the inputs (the message
        names the index), ``beta != 0`` without ``out``, devices differ,
        a ``target_forward_error`` no mode meets.
    TypeError
        Non-tensor operands, bool dtypes, complex data with ``"dd"``.

    Notes
    -----
    Forward error bounds, with
    ``K`` the products summed into one output entry (the summed extents
    multiplied), ``u`` the unit roundoff of the result dtype (bfloat16
    2^-8, float16 2^-11, float32 2^-24, float64 2^-53), and the error
    measured against ``sum |products|`` of the entry, to first order:
    ``"fast"`` ``K u`` (Wilkinson); ``"sr"`` ``K 2^-24 + 2u`` for
    bfloat16/float16 (float32 accumulation, then one rounding of at most
    one ulp whose mean is zero), else as ``"fast"``; ``"kahan"``
    ``K 2^-53 + u``; ``"dd"`` ``2u`` (the one-ulp result below). For
    bfloat16 at K = 512: ``"fast"`` 2.0, ``"sr"`` 0.0078.

    ``"dd"``: every operand (and every intermediate, held as a float64
    pair ``hi + lo``) is split into slices whose pairwise products and
    sums are exact in float64 (the Ozaki scheme), until nothing of it is
    left; the exact slice contractions are then summed by error-free
    TwoSum sweeps until the sum has settled in one float64 (VecSum
    distillation). What holds (barring overflow and underflow, for
    operands whose entries span at most ``12 (rho + 1)`` bits, ``rho`` >=
    15 up to 2^20 summed terms; beyond, the lowest bits are dropped):

    * one pairwise step or one sum (``"i,i->"``, ``"ij,jk->ik"``,
      ``"ij->"``, ``"ii->"``): the result is within one ulp of the exact
      value, whatever the cancellation;
    * longer chains: each intermediate entry is within ``2^-80`` (relative)
      of its exact value, so a later step adds at most ``2^-80`` times the
      sum of its terms' magnitudes before the final rounding -- within one
      ulp unless the chain cancels by more than ~27 bits after an
      intermediate.

    ``alpha``/``beta`` are applied after rounding to the result dtype. Cost:
    the number of slice pairs (typically 9-25) float64 contractions, plus
    a few TwoSum passes over the result.

    Routes: each eligible GEMM step of a plan is a measured route of
    :mod:`trnsci.routes` (family ``"trntensor.gemm"``): torch
    (``torch.mm``/``bmm``, or trnblas) or ``numpy.matmul`` (NumPy's BLAS,
    on zero-copy views, through :func:`trnsci.hostblas.call`). The first
    execution of a plan at a torch thread count times both on the step's
    operands in interleaved rounds unless its shape class is already
    decided (in this process or the calibration file), and torch stays
    unless numpy.matmul is clearly faster. Eligible: CPU, float32/float64
    compute dtype, precision "fast"/"kahan", plain tensors that do not
    require grad (autograd always stays on torch), trnblas's backend
    "torch" or "auto" without a NeuronCore, and -- with more than one
    torch thread -- ``M*N*K < 2^19`` (where OpenBLAS keeps to the calling
    thread). The two libraries may round differently in the last ulps;
    use ``autotune=False`` for torch's result every time.
    :func:`trntensor.plan_contraction` shows each step's route.

    Examples
    --------
    >>> import torch, trntensor
    >>> A, B = torch.ones(2, 3), torch.ones(3, 4)
    >>> trntensor.einsum("ij,jk->ki", A, B).shape
    torch.Size([4, 2])
    >>> float(trntensor.einsum("ii", torch.eye(3)))
    3.0
    >>> trntensor.einsum("...ij,...jk", torch.ones(5, 2, 3), B).shape
    torch.Size([5, 2, 4])
    """
    where = "einsum"
    if not operands:
        raise ValueError(f"{where}: at least one operand is required")
    ts = _operands(operands, where)
    dev = ts[0].device
    dt = ts[0].dtype
    for x in ts[1:]:
        if x.device != dev:
            validate.same_device(where, **{f"operand {k}": t for k, t in enumerate(ts)})
        if x.dtype != dt:
            dt = torch.promote_types(dt, x.dtype)
    if dtype is not None:
        dt = _dtype_arg(dtype, where)
    target = _target_arg(target_forward_error, precision, where)
    prec = "fast" if precision is None else P._PRECISION(precision, "precision", where)
    opt = P._OPTIMIZE(optimize, "optimize", where)
    plan = P._plan(subscripts, tuple(tuple(x.shape) for x in ts), dt, dev, prec, opt, None, where)
    if target is not None:
        if not (dt.is_floating_point or dt.is_complex):
            raise TypeError(f"{where}: target_forward_error takes floating operands, got {str(dt)[6:]}")
        prec = _choose_precision(target, dt, _summed_terms(plan), where)
        if prec != "fast":
            plan = P._plan(subscripts, plan.shapes, dt, dev, prec, opt, None, where)
    if type(alpha) is not float:  # V.scalar's own fast path keeps plain ints; 2**70 becomes a float
        alpha = validate.scalar(alpha, "alpha", where)
    if type(beta) is not float:
        beta = validate.scalar(beta, "beta", where)
    compute = dt
    if prec == "kahan":
        compute = P._HIGH.get(dt, dt)
    elif prec == "sr":
        compute = P._SR.get(dt, dt)
    elif prec == "dd":
        if dt.is_complex or not dt.is_floating_point:
            raise TypeError(f"{where}: precision='dd' takes real floating operands, got {str(dt)[6:]}")
    C = None
    if beta != 0:
        if out is None:
            raise ValueError(f"{where}: beta={beta} needs out= (the tensor it scales)")
        C = validate.tensor(out, "out", where)
        validate.shape(C, "out", plan._exec[4], where)
    if autotune is not None and not isinstance(autotune, bool):
        raise TypeError(f"{where}: autotune must be None or a bool, got {type(autotune).__name__}")
    R = EINSUM(plan, ts, alpha, beta, C, compute, dt, prec, autotune)
    return validate.write_out(R, out, where)


def multi_einsum(*contractions, precision=None, optimize="auto", target_forward_error=None):
    """Several einsums; homogeneous ones run as one batched contraction.

    Parameters
    ----------
    *contractions : tuple ``(subscripts, *operands)``
        Contractions with the same subscripts, operand shapes, dtypes and
        device are stacked along a new batch index and run as one einsum
        (one GEMM dispatch instead of many); an operand that is the same
        tensor in every member of a group is not copied.
    precision, optimize, target_forward_error
        As for :func:`einsum`, for every contraction. With
        ``target_forward_error`` each contraction gets the cheapest mode that
        meets it for its own summed extent and dtype (a batched group shares
        them, so it shares the mode).

    Returns
    -------
    list of tensors
        One result per contraction, in order (NumPy arrays if any operand
        was one). A batched group's results are views into one tensor.

    Examples
    --------
    >>> import torch, trntensor
    >>> B = torch.randn(2, 3, 4, dtype=torch.float64)
    >>> J, K = trntensor.multi_einsum(("iaP,jbP->iajb", B, B), ("ibP,jaP->iajb", B, B))
    >>> torch.allclose(J.transpose(1, 3), K)
    True
    """
    where = "multi_einsum"
    _target_arg(target_forward_error, precision, where)
    kw = {"precision": precision, "optimize": optimize, "target_forward_error": target_forward_error}
    groups: dict = {}
    for k, c in enumerate(contractions):
        if not isinstance(c, (tuple, list)) or len(c) < 2 or not isinstance(c[0], str):
            raise TypeError(f"{where}: contraction {k} must be a tuple (subscripts, *operands)")
        ops = _operands(c[1:], f"{where}: contraction {k}")
        key = (c[0], tuple((tuple(x.shape), x.dtype, x.device) for x in ops))
        groups.setdefault(key, []).append((k, ops))
    results = [None] * len(contractions)
    numpy_in = any(isinstance(x, np.ndarray) for c in contractions for x in c[1:])
    for (sub, _), members in groups.items():
        if len(members) == 1 or "..." in sub:
            for k, ops in members:
                results[k] = einsum(sub, *ops, **kw)
            continue
        used = set(sub)
        free = [ch for ch in string.ascii_letters if ch not in used]
        z = free[0] if free else None
        if z is None:
            for k, ops in members:
                results[k] = einsum(sub, *ops, **kw)
            continue
        s = sub.replace(" ", "")
        lhs, rhs = s.split("->") if "->" in s else (s, None)
        if rhs is None:
            rhs = P.plan_contraction(sub, *members[0][1]).subscripts.split("->")[1]
        terms = lhs.split(",")
        new_ops, new_terms = [], []
        for p, t in enumerate(terms):
            first = members[0][1][p]
            if all(m[1][p] is first for m in members):
                new_ops.append(first)
                new_terms.append(t)
            else:
                new_ops.append(torch.stack([m[1][p] for m in members]))
                new_terms.append(z + t)
        R = einsum(",".join(new_terms) + "->" + z + rhs, *new_ops, **kw)
        for q, (k, _) in enumerate(members):
            results[k] = R[q]
    if numpy_in:
        results = [r.cpu().numpy() if isinstance(r, torch.Tensor) else r for r in results]
    return results


@validate.numpy_io
def tensordot(a, b, dims=2):
    """Contract the last ``dims`` axes of ``a`` with the first of ``b`` (or named axes).

    Parameters
    ----------
    a, b : tensors
    dims : int or (sequence, sequence)
        An int ``d``: the last ``d`` axes of ``a`` with the first ``d`` of
        ``b``. A pair of equally long axis lists: those axes, in order.

    Returns
    -------
    tensor
        Free axes of ``a`` then free axes of ``b`` (as
        :func:`numpy.tensordot`).

    Examples
    --------
    >>> import torch, trntensor
    >>> trntensor.tensordot(torch.ones(2, 3, 4), torch.ones(3, 4, 5)).shape
    torch.Size([2, 5])
    """
    where = "tensordot"
    a = validate.tensor(a, "a", where)
    b = validate.tensor(b, "b", where)
    for name, t in (("a", a), ("b", b)):
        if t.dtype is torch.bool:
            raise TypeError(f"{where}: {name} has dtype bool; tensordot takes integer, float or complex tensors")
    if isinstance(dims, bool):
        raise TypeError(f"{where}: dims must be an int or a pair of axis lists, got bool")
    if isinstance(dims, (int, np.integer)) or validate.int_0d(dims):
        dims = validate.integer(dims, "dims", where, minimum=0)
        for name, t in (("a", a), ("b", b)):
            if dims > t.dim():
                raise ValueError(f"{where}: dims={dims} contracts {dims} axes but {name} has only {t.dim()} "
                                 f"(shape {tuple(t.shape)})")
        ax_a = list(range(a.dim() - dims, a.dim()))
        ax_b = list(range(dims))
    elif isinstance(dims, (tuple, list)) and len(dims) == 2:
        ax_a = [dims[0]] if isinstance(dims[0], int) else list(dims[0])
        ax_b = [dims[1]] if isinstance(dims[1], int) else list(dims[1])
        if len(ax_a) != len(ax_b):
            raise ValueError(f"{where}: dims lists differ in length: {ax_a} and {ax_b}")
        for name, axes, t in (("dims[0]", ax_a, a), ("dims[1]", ax_b, b)):
            for x in axes:
                if isinstance(x, bool) or not isinstance(x, int) or not -t.dim() <= x < t.dim():
                    raise ValueError(f"{where}: {name} holds axis {x!r}, out of range for {t.dim()}-D")
        ax_a = [x % a.dim() for x in ax_a]
        ax_b = [x % b.dim() for x in ax_b]
        if len(set(ax_a)) != len(ax_a) or len(set(ax_b)) != len(ax_b):
            raise ValueError(f"{where}: repeated axis in dims {dims}")
    else:
        raise TypeError(f"{where}: dims must be an int or a pair of axis lists, got {dims!r}")
    letters = string.ascii_letters
    if a.dim() + b.dim() > len(letters):
        raise ValueError(f"{where}: too many dimensions ({a.dim() + b.dim()})")
    ta = list(letters[: a.dim()])
    tb = list(letters[a.dim(): a.dim() + b.dim()])
    for x, y in zip(ax_a, ax_b):
        if a.shape[x] != b.shape[y]:
            raise ValueError(f"{where}: a's axis {x} has size {a.shape[x]} but b's axis {y} has {b.shape[y]}")
        tb[y] = ta[x]
    outs = "".join(ch for p, ch in enumerate(ta) if p not in ax_a) + "".join(
        ch for p, ch in enumerate(tb) if p not in ax_b)
    return einsum("".join(ta) + "," + "".join(tb) + "->" + outs, a, b)
