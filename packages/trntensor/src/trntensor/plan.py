"""Contraction planning: the pairwise path, its cost and each step's strategy.

Planning is separate from execution, as in opt_einsum:
:func:`plan_contraction` returns a :class:`ContractionPlan` that says what
:func:`trntensor.einsum` will run -- the order of pairwise contractions, each
step's strategy (GEMM, batched GEMM, elementwise, reduction) and its cost
-- without running it. :func:`contract_path` gives the same in opt_einsum's
``(path, info)`` form. Plans are cached (see :func:`plan_cache_info`).

Cost model
----------
A pairwise step touching the set of indices ``I`` (the union of both
operands' indices) costs ``prod(size[i] for i in I)`` multiply-adds when it
sums over at least one index, counted as **2 flops each** -- the ``2*M*N*K``
(times batch) of a GEMM -- and ``1`` flop per output element when it sums
over nothing (elementwise products, outer products). This is the count
opt_einsum reports, so paths compare directly. A one-operand step (a trace,
a sum) costs one flop per input element (opt_einsum counts two).

Indices held by one operand only and absent from the output are summed
first, one step per operand (path entry ``(i,)``, strategy
``"reduction"``); the path search (:mod:`trntensor.paths`, pure functions
in a registry) then orders the pairwise steps of what is left.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field, replace

import torch

from trnsci import backend as _backend
from trnsci import dispatch as _dispatch
from trnsci import validate

from . import _host, _parse
from . import paths as _paths
from ._plan_cache import _CACHE_MAX, _cache, _lock, _stats

__all__ = ["ContractionPlan", "ContractionStep", "plan_contraction", "contract_path", "estimate_flops"]

#: What :func:`plan_contraction` asks of the modules built on this one, handed in when they are imported:
#: ``"einsum"``, the Op whose decision a plan carries (``trntensor.einsum.EINSUM``), and ``"device_active"`` /
#: ``"device_annotate"``, einsum's device path that lists a plan's launches (``trntensor._nki.einsum_device``).
_ABOVE: dict = {}

_OPTIMIZE = validate.Options({
    "auto": ("auto", True), "optimal": ("optimal", "dp"), "exhaustive": ("exhaustive",), "greedy": ("greedy",),
    "none": ("none", False),
})
_PRECISION = validate.Options({"fast": ("fast",), "sr": ("sr", "stochastic"), "kahan": ("kahan",),
                               "dd": ("dd", "double-double")})
#: Flops from which an einsum GEMM step goes through trnblas under backend "auto" with a NeuronCore,
#: where trnblas's public layer costs at most ~5% of the step (docs/perf-notes.md#design-gemm-step).
VIA_TRNBLAS = _dispatch.register(
    "trntensor.gemm_step", "flops", 2 * 192**3,
    "flops of an einsum GEMM step from which it calls trnblas (backend 'auto' with a NeuronCore)")
_BLAS_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
#: The compute dtype of precision="sr" (float32 accumulation, as in PSUM) per operand dtype.
_SR = {torch.float16: torch.float32, torch.bfloat16: torch.float32}
#: The compute dtype of precision="kahan" (float64 accumulation) per operand dtype.
_HIGH = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.float32: torch.float64,
         torch.float64: torch.float64, torch.complex64: torch.complex128, torch.complex128: torch.complex128}


def _compute_dtype(dtype, precision):
    """The dtype the steps run in: the operands' (``"fast"``), float32 for half dtypes (``"sr"``),
    widened (``"kahan"``), float64 (``"dd"``)."""
    if dtype is None:
        dtype = torch.get_default_dtype()
    if precision == "sr":
        return _SR.get(dtype, dtype)
    if precision == "kahan":
        return _HIGH.get(dtype, dtype)
    if precision == "dd":
        return torch.float64
    return dtype


def kernels_possible(name=None) -> bool:
    """Whether trnblas could run a GEMM on an NKI kernel under its backend setting ``name`` (now if None)."""
    return _dispatch.kernels_possible("trnblas", name)


def via_trnblas(flops, dtype, batched, name=None) -> bool:
    """Whether a GEMM step goes through trnblas's public API -- the one rule execution and plans share.

    Only where trnblas could pick one of its kernels: under trnblas's
    backend "nki"/"simulator" always (trnblas's decision then holds for
    every GEMM step), under "auto" on a machine with a NeuronCore from
    ``2*192^3`` flops (its validation overhead is then <= 5%,
    docs/perf-notes.md#design-gemm-step) or
    from trnblas's own threshold if lowered below that. Under "torch", or
    "auto" without a NeuronCore, trnblas would pick torch: the step calls
    torch.mm/bmm itself (or numpy.matmul, see :func:`set_autotune`).
    """
    if dtype not in _BLAS_DTYPES:
        return False
    if name is None:
        name = _backend.resolve("trnblas").name
    if not _dispatch.kernels_possible("trnblas", name):
        return False
    if name == "auto":  # with a NeuronCore: from this op's threshold, or trnblas's own if lowered below it
        return flops >= min(_dispatch.threshold("trntensor.gemm_step")[0],
                            _dispatch.threshold("trnblas.batched_gemm" if batched else "trnblas.gemm")[0])
    return True


def gemm_plan(strategy, dims, dtype):
    """trnblas's own :class:`~trnsci.dispatch.Plan` of a GEMM step (shapes on the meta device)."""
    from trnblas.level3 import BATCHED_GEMM, GEMM

    Bn, M, N, K = dims
    lead = (Bn,) if strategy == "batched_gemm" else ()
    A = torch.empty((*lead, M, K), dtype=dtype, device="meta")
    B = torch.empty((*lead, K, N), dtype=dtype, device="meta")
    return (BATCHED_GEMM if lead else GEMM).plan(1.0, A, B, 0.0, None, "N", "N")


# ------------------------------------------------------------------ plan objects

class PlanBackend(_backend.BackendName):
    """:attr:`ContractionPlan.backend`: a :class:`trnsci.backend.BackendName` (``"torch"`` equals
    ``"pytorch"``) that prints as the published trntensor printed it.

    ``str()``/``print``/f-strings give the published name where there is one (``"pytorch"`` for a
    host route, as the published DF-MP2 tutorial shows); ``repr``, hashing and serialization keep
    the suite's name (``"torch"``); a kernel backend (``"nki"``, ``"simulator"``) prints as itself.
    """

    __slots__ = ()

    def __eq__(self, other):  # the suite's name and the published alias, as BackendName (not the printed name)
        return _backend.BackendName(str.__str__(self)).__eq__(other)

    __hash__ = str.__hash__

    def __str__(self) -> str:
        mine = str.__str__(self)
        return _backend.published_name(mine) or mine

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)



@dataclass(frozen=True)
class ContractionStep:
    """One pairwise (or single-operand) step of a :class:`ContractionPlan`.

    ``operands`` are positions in the current operand list (opt_einsum's
    path format: the inputs are removed and the result appended);
    ``subscripts`` is the step as an einsum string; ``strategy`` one of
    ``"gemm"``, ``"batched_gemm"``, ``"elementwise"``, ``"reduction"``;
    ``flops`` the step's cost (module docstring); ``size`` the number of
    elements of its result; ``shape`` its shape; ``dims`` the GEMM extents
    ``(batch, M, N, K)``; ``dtype`` the dtype the step computes in.

    ``backend`` and ``reason`` say what runs the step and why, by the same
    rule the call applies, under the backend setting in effect when
    :func:`plan_contraction` made the plan: a GEMM step that goes through
    trnblas reports trnblas's own decision (:attr:`plan`, its
    :class:`~trnsci.dispatch.Plan`, with the kernel's closed-form figures
    when a kernel would run); every other step runs on torch.
    """

    operands: tuple[int, ...]
    subscripts: str
    strategy: str
    flops: int
    size: int
    shape: tuple[int, ...] = ()
    dims: tuple[int, int, int, int] = (1, 1, 1, 1)
    dtype: torch.dtype | None = None
    decision: tuple | None = field(default=None, repr=False, compare=False)

    def _decided(self, route=None) -> ContractionStep:
        """This step with its decision (plan, backend, reason) taken under the current setting.

        ``route`` is the GEMM-step route of a CPU step (:func:`trntensor._host._route_notes`):
        ``(use_numpy, note)``, or None when the step is no route.
        """
        p = self._blas_plan()
        backend, reason = "torch" if p is None else p.backend, self._reason(p)
        if route is not None:
            use_numpy, note = route
            if use_numpy:
                p, backend, reason = None, "numpy", f"numpy.matmul {self._dims()}: {note}"
            else:
                reason = f"{reason}; {note}"
        return replace(self, decision=(p, backend, reason))

    def _dims(self) -> str:
        Bn, M, N, K = self.dims
        return f"M={M} N={N} K={K}" + (f" batch={Bn}" if self.strategy == "batched_gemm" else "")

    def _blas_plan(self):
        if self.strategy in ("gemm", "batched_gemm") and via_trnblas(self.flops, self.dtype,
                                                                     self.strategy == "batched_gemm"):
            return gemm_plan(self.strategy, self.dims, self.dtype)
        return None

    @property
    def plan(self):
        """trnblas's plan of this step when it goes through trnblas, else None."""
        return self.decision[0] if self.decision is not None else self._blas_plan()

    @property
    def backend(self) -> str:
        """``"torch"``, ``"numpy"`` (numpy.matmul, by its measured route), ``"nki"`` or ``"simulator"``
        (a :class:`trnsci.backend.BackendName`: the host routes also equal the published ``"pytorch"``)."""
        from trnsci.backend import BackendName

        if self.decision is not None:
            return BackendName(self.decision[1])
        p = self.plan
        return BackendName("torch" if p is None else p.backend)

    @property
    def reason(self) -> str:
        """Why, in words (for a trnblas step, trnblas's reason)."""
        return self.decision[2] if self.decision is not None else self._reason(self.plan)

    def _reason(self, p) -> str:
        if self.strategy in ("gemm", "batched_gemm"):
            dims = self._dims()
            if p is not None:
                return f"{p.op} {dims}: {p.reason}"
            fn = "torch.mm" if self.strategy == "gemm" else "torch.bmm"
            if self.dtype not in _BLAS_DTYPES:
                return f"{fn} {dims}: dtype {self.dtype} is not a BLAS dtype"
            name = _backend.resolve("trnblas").name
            if name == "torch":
                return f"{fn} {dims}: trnblas's backend is 'torch'"
            if not _dispatch.kernels_possible("trnblas", name):
                return f"{fn} {dims}: trnblas would pick torch (backend 'auto', no NeuronCore)"
            return f"{fn} {dims}: under the trntensor.gemm_step and trnblas thresholds (backend {name!r})"
        if self.strategy == "elementwise":
            return "broadcast multiply: no index summed" if self.operands != (0,) else \
                "a view: transpose/diagonal only"
        return "sum over the summed indices"


@dataclass
class ContractionPlan:
    """What :func:`trntensor.einsum` runs for one call signature.

    Attributes
    ----------
    subscripts : str
        The canonical einsum string (explicit output, ellipses expanded).
    path : list of tuple of int
        Pairwise path in opt_einsum's format.
    steps : list of ContractionStep
    flops : int
        Sum of the steps' flops (2 per multiply-add, see module docs).
    naive_flops : int
        Cost of one single contraction over all indices at once.
    largest_intermediate : int
        Elements of the largest step result (the peak intermediate).
    kind : str
        The strategy of the plan's one step (``"gemm"``, ``"batched_gemm"``,
        ``"elementwise"``, ``"reduction"``) when it has one step, else
        ``"path"``.
    backend : str
        The backend of every step, or the distinct ones joined by ``"+"``
        (``"torch"`` also compares equal to the published ``"pytorch"``).
    strategy, contraction_indices, batch_indices, output_indices, transA, transB, contraction_path, estimated_flops
        The published trntensor's names and values, kept readable (see
        the properties): ``strategy`` is ``"matmul"``, ``"bmm"``,
        ``"torch"`` or ``"path"``; ``estimated_flops`` counts multiply-adds,
        as :func:`estimate_flops`.
    optimize, precision : str
        The optimizer that chose the path and the precision mode.
    op_plan : trnsci.dispatch.Plan or None
        The ``trntensor.einsum`` Op's own decision for the call (set by
        :func:`plan_contraction`): it has no kernel, so its backend is torch
        and the kernels are the steps' (see :attr:`ContractionStep.plan`).
    """

    subscripts: str
    path: list
    steps: list
    flops: int
    naive_flops: int
    largest_intermediate: int
    optimize: str
    precision: str
    shapes: tuple = ()
    dtype: torch.dtype | None = None
    kind: str = "path"
    op_plan: object = field(default=None, repr=False, compare=False)
    _exec: tuple = field(default=(), repr=False, compare=False)
    #: per torch thread count, the GEMM steps' settled routes (:func:`_settle`), shared by copies of the plan
    _tune: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def backend(self) -> str:
        """The backend of every step (e.g. ``"torch"``), or the distinct ones joined by ``"+"``.

        A :class:`PlanBackend`: ``"torch"`` also equals the published
        trntensor's ``"pytorch"``, and prints as it (the published DF-MP2
        tutorial's ``print(plan.strategy, plan.backend, plan.estimated_flops)``).
        """
        seen = sorted({str(s.backend) for s in self.steps}) or ["torch"]
        return PlanBackend("+".join(seen))

    # ---- the published trntensor's ContractionPlan fields, derived from this plan

    def _terms(self):
        ins, out = self.subscripts.split("->")
        return ins.split(","), out

    @property
    def strategy(self) -> str:
        """The published strategy: ``"matmul"`` (one GEMM), ``"bmm"`` (one batched GEMM),
        ``"torch"`` (one operand, or two without a GEMM) or ``"path"`` (three or more operands)."""
        n = len(self._terms()[0])
        if n >= 3:
            return "path"
        pair = [s for s in self.steps if len(s.operands) == 2]
        kind = pair[0].strategy if n == 2 and pair else self.kind
        return {"gemm": "matmul", "batched_gemm": "bmm"}.get(kind, "torch")

    @property
    def contraction_indices(self) -> list:
        """Indices summed over (in the inputs, not in the output), in order of first appearance."""
        terms, out = self._terms()
        return [ch for ch in dict.fromkeys("".join(terms)) if ch not in out]

    @property
    def batch_indices(self) -> list:
        """Indices in two or more operands and in the output."""
        terms, out = self._terms()
        return [ch for ch in dict.fromkeys("".join(terms)) if ch in out and sum(ch in t for t in terms) >= 2]

    @property
    def output_indices(self) -> list:
        """The output's indices, in order."""
        return list(self._terms()[1])

    def _trans(self):
        terms, out = self._terms()
        if len(terms) != 2 or self.strategy != "matmul" or any(len(t) != 2 for t in terms):
            return False, False
        shared = [ch for ch in terms[0] if ch in terms[1] and ch not in out]
        if len(shared) != 1:
            return False, False
        c = shared[0]
        return terms[0].index(c) == 0, terms[1].index(c) == 1

    @property
    def transA(self) -> bool:  # noqa: N802 -- the published name
        """Published: the first operand is used transposed (its summed index comes first); matmul plans only."""
        return self._trans()[0]

    @property
    def transB(self) -> bool:  # noqa: N802 -- the published name
        """Published: the second operand is used transposed (its summed index comes last); matmul plans only."""
        return self._trans()[1]

    @property
    def contraction_path(self) -> list:
        """Published: the pairwise path for ``"path"`` plans (opt_einsum's format), else ``[]``."""
        return list(self.path) if self.strategy == "path" else []

    @property
    def estimated_flops(self) -> int:
        """Published: multiply-adds of one loop nest over every index (``M*K*N`` for a GEMM),
        as :func:`estimate_flops`; :attr:`flops` is the path's cost at 2 flops per multiply-add."""
        terms, _ = self._terms()
        sizes = {}
        for t, shape in zip(terms, self.shapes):
            for ch, d in zip(t, shape):
                sizes[ch] = max(sizes.get(ch, 1), d) if d != 1 else sizes.get(ch, 1)
        return math.prod(sizes.values())

    @property
    def speedup(self) -> float:
        """``naive_flops / flops``."""
        return self.naive_flops / max(self.flops, 1)

    def __str__(self) -> str:
        lines = [
            f"  Complete contraction:  {self.subscripts}",
            f"         Naive FLOP count:  {self.naive_flops:.4g}",
            f"     Optimized FLOP count:  {self.flops:.4g}",
            f"      Theoretical speedup:  {self.speedup:.4g}",
            f"     Largest intermediate:  {self.largest_intermediate:.4g} elements",
            f"       Optimizer / precision:  {self.optimize} / {self.precision}",
            "-" * 96,
            f"{'step':>4}  {'path':<8} {'subscripts':<28} {'strategy':<13} {'flops':>10}  {'backend':<7} reason",
            "-" * 96,
        ]
        for k, s in enumerate(self.steps):
            lines.append(
                f"{k:>4}  {str(s.operands):<8} {s.subscripts:<28} {s.strategy:<13} {s.flops:>10.4g}  "
                f"{s.backend:<7} {s.reason}"
            )
        return "\n".join(lines)


# ------------------------------------------------------------------ optimizers

def _prod(sizes, letters) -> int:
    p = 1
    for ch in letters:
        p *= sizes[ch]
    return p


def _step_cost(touched: frozenset, removed: bool, sizes) -> int:
    return _prod(sizes, touched) * (2 if removed else 1)


# ------------------------------------------------------------------ building a plan

def _gemm_step(ta, tb, keep, sizes):
    """Executable recipe for one pairwise step (TTGT: transpose-transpose-GEMM-transpose).

    Returns ``(recipe, result_term, strategy, flops)``.
    """
    sa = tuple(k for k, ch in enumerate(ta) if ch not in tb and ch not in keep)
    sb = tuple(k for k, ch in enumerate(tb) if ch not in ta and ch not in keep)
    ra = "".join(ch for ch in ta if ch in tb or ch in keep)
    rb = "".join(ch for ch in tb if ch in ta or ch in keep)
    batch = "".join(ch for ch in ra if ch in rb and ch in keep)
    ksum = "".join(ch for ch in ra if ch in rb and ch not in keep)
    m = "".join(ch for ch in ra if ch not in rb)
    nn = "".join(ch for ch in rb if ch not in ra)
    res = batch + m + nn
    touched = set(ta) | set(tb)
    flops = _step_cost(frozenset(touched), bool(touched - set(res)), sizes)
    B, M, N, K = (_prod(sizes, x) for x in (batch, m, nn, ksum))
    res_shape = tuple(sizes[ch] for ch in res)
    if not ksum:
        # elementwise / outer product: broadcast multiply, no GEMM
        pa = tuple(ra.index(ch) for ch in batch + m)
        pb = tuple(rb.index(ch) for ch in batch + nn)
        va = tuple(sizes[ch] for ch in batch + m) + (1,) * len(nn)
        vb = tuple(sizes[ch] for ch in batch) + (1,) * len(m) + tuple(sizes[ch] for ch in nn)
        return ("ew", sa, sb, *_lean(ra, rb, pa, pb, va, vb, sizes), None, (B, M, N, K)), res, "elementwise", flops
    pa = tuple(ra.index(ch) for ch in batch + m + ksum)
    pb = tuple(rb.index(ch) for ch in batch + ksum + nn)
    strategy = "batched_gemm" if batch else "gemm"
    if batch:
        va, vb = (B, M, K), (B, K, N)
    else:
        va, vb = (M, K), (K, N)
    rs = res_shape if res_shape != (va[:-2] + (M, N)) else None
    return ("mm", sa, sb, *_lean(ra, rb, pa, pb, va, vb, sizes), rs, (B, M, N, K)), res, strategy, flops


def _lean(ra, rb, pa, pb, va, vb, sizes):
    """Drop identity permutations and no-op reshapes (None), so execution skips them."""
    out = []
    for r, p, v in ((ra, pa, va), (rb, pb, vb)):
        permuted = tuple(sizes[r[k]] for k in p)
        out.append((None if p == tuple(range(len(p))) else p, None if permuted == tuple(v) else v))
    (pa, va), (pb, vb) = out
    return pa, pb, va, vb


#: Steps before the last whose operand order is searched (2^this combinations at most; beyond: as listed).
_SWAP_SEARCH_MAX = 6


def _copied(recipe, terms, sizes) -> int:
    """Elements a step's recipe copies to form its GEMM operands from contiguous ones in the index orders
    ``terms``: an operand whose permutation cannot be merged into the GEMM's matrix shape as a view."""
    if recipe[0] != "mm":
        return 0
    _, sa, sb, pa, pb, va, vb = recipe[:7]
    total = 0
    for t, s, p, v in ((terms[0], sa, pa, va), (terms[1], sb, pb, vb)):
        if p is None or v is None:
            continue
        t = "".join(ch for k, ch in enumerate(t) if k not in s)
        dims = [sizes[ch] for ch in t]
        order = [k for k in p]
        # group the permuted dimensions into the target dimensions (by the product of their extents)
        pos, ok = 0, True
        for target in v:
            group, prod = [], 1
            while pos < len(order) and (prod < target or (prod == target and dims[order[pos]] == 1)):
                prod *= dims[order[pos]]
                group.append(order[pos])
                pos += 1
            big = [g for g in group if dims[g] != 1]
            if any(y != x + 1 for x, y in zip(big, big[1:])):
                ok = False
                break
        if not ok:
            total += math.prod(dims)
    return total


def _build(terms, output, sizes, broadcast, shapes, dtype, optimize, precision, memory_limit, where):
    n = len(terms)
    # per-operand preparation: squeeze broadcast size-1 dims, take diagonals of repeated letters
    prep = []
    cur = []
    for k, t in enumerate(terms):
        squeeze = broadcast[k]
        if squeeze:
            t = "".join(ch for p, ch in enumerate(t) if p not in squeeze)
        uniq = "".join(dict.fromkeys(t))
        diag = None
        if len(uniq) != len(t):
            diag = tuple(tuple(p for p, c in enumerate(t) if c == ch) for ch in uniq)
        prep.append((squeeze, diag, tuple(sizes[ch] for ch in uniq)))
        cur.append(uniq)
    naive = _prod(sizes, set("".join(cur))) * (max(n - 1, 1) + (1 if set("".join(cur)) - set(output) else 0))
    cdt = _compute_dtype(dtype, precision)
    ids = list(range(n))  # ssa ids of the current operand list
    terms_ssa = list(cur)
    steps, recipes, path = [], [], []
    total, peak = 0, 0
    # indices held by one operand only and not in the output: summed first, each operand's as one step
    # (the sums opt_einsum's dp also takes first; leaving them in would make every later step larger)
    alias = list(range(n))  # input k -> the ssa id holding it once pre-summed
    if n > 1:
        count = collections.Counter(ch for t in cur for ch in t)
        for k, t in enumerate(cur):
            dims = tuple(p for p, ch in enumerate(t) if count[ch] == 1 and ch not in output)
            if not dims:
                continue
            red = "".join(ch for ch in t if count[ch] > 1 or ch in output)
            i = ids.index(k)
            fl = _prod(sizes, t)
            steps.append(ContractionStep((i,), f"{t}->{red}", "reduction", fl, _prod(sizes, red),
                                         tuple(sizes[ch] for ch in red), dtype=cdt))
            recipes.append((i, None, False, ("sum", dims)))
            path.append((i,))
            total += fl
            peak = max(peak, _prod(sizes, red))
            del ids[i]
            alias[k] = len(terms_ssa)
            ids.append(alias[k])
            terms_ssa.append(red)
    reduced = [terms_ssa[alias[k]] for k in range(n)]
    if n == 1:
        pairs = []
    elif optimize == "none":
        pairs = [(0, 1)] + [(n + k, k + 2) for k in range(n - 2)]
    else:
        method = optimize
        if method == "auto":
            method = "optimal" if n <= _paths.AUTO_DP_MAX else "greedy"
            try:
                pairs = _paths.find_path(method, reduced, output, sizes, memory_limit,
                                         **({"budget": _paths.AUTO_DP_BUDGET} if method == "optimal" else {}))
            except _paths.BudgetExceeded:  # a network too dense to search within the bound: greedy
                pairs = _paths.find_path("greedy", reduced, output, sizes, memory_limit)
        else:
            pairs = _paths.find_path(method, reduced, output, sizes, memory_limit)
        if pairs is None:
            raise ValueError(f"{where}: memory_limit={memory_limit} admits no contraction path; raise it")
    # walk the pairs (ids 0..n-1: the inputs as pre-summed; n, n+1, ...: their results), building steps.
    # Each step may take its operands either way round: that sets the order of its result's indices
    # (the first operand's free indices first), and with it whether a later step can view that result
    # as its GEMM operand or must copy it into another order. Every combination of the steps before the
    # last is tried (up to 2^_SWAP_SEARCH_MAX) and the one copying the fewest elements kept (ties: as listed).
    def walk(swaps):
        w_ids, w_terms, w_alias = list(ids), list(terms_ssa), alias + [None] * len(pairs)
        w_steps, w_recipes, w_path, w_total, w_peak, copied = [], [], [], 0, 0, 0
        for k, (a, b) in enumerate(pairs):
            a, b = w_alias[a], w_alias[b]
            i, j = sorted((w_ids.index(a), w_ids.index(b)))
            a, b = w_ids[i], w_ids[j]  # the recipe takes the operands in list order
            ta, tb = w_terms[a], w_terms[b]
            rest = "".join(w_terms[x] for x in w_ids if x not in (a, b))
            keep = set(rest) | set(output)
            last = k == len(pairs) - 1
            swap = bool(swaps[k]) if not last else False
            recipe, res, strategy, flops = _gemm_step(tb, ta, keep, sizes) if swap else _gemm_step(ta, tb, keep, sizes)
            if last and res != output and set(res) == set(output):
                # operands the other way round may give the output order directly (no final transpose)
                r2, res2, s2, _ = _gemm_step(tb, ta, keep, sizes)
                if res2 == output:
                    recipe, res, strategy, swap = r2, res2, s2, True
            copied += _copied(recipe, (tb, ta) if swap else (ta, tb), sizes)
            size = _prod(sizes, res)
            sub = f"{tb},{ta}->{res}" if swap else f"{ta},{tb}->{res}"
            w_steps.append(ContractionStep((i, j), sub, strategy, flops, size, tuple(sizes[ch] for ch in res),
                                           recipe[-1], cdt))
            w_recipes.append((i, j, swap, recipe))
            w_path.append((i, j))
            w_total += flops
            if not last:
                w_peak = max(w_peak, size)
            del w_ids[j], w_ids[i]
            w_alias[n + k] = len(w_terms)
            w_ids.append(w_alias[n + k])
            w_terms.append(res)
        return copied, w_steps, w_recipes, w_path, w_total, w_peak, w_ids, w_terms

    free = len(pairs) - 1 if 0 < len(pairs) - 1 <= _SWAP_SEARCH_MAX else 0
    best = None
    for bits in range(1 << free):
        got = walk([(bits >> k) & 1 for k in range(len(pairs))])
        if best is None or got[0] < best[0]:
            best = got
        if best[0] == 0:
            break
    _, w_steps, w_recipes, w_path, w_total, w_peak, ids, terms_ssa = best
    steps += w_steps
    recipes += w_recipes
    path += w_path
    total += w_total
    peak = max(peak, w_peak)
    final = terms_ssa[ids[0]]
    # the last result: sum leftover indices, permute into the output order
    sumdims = tuple(p for p, ch in enumerate(final) if ch not in output)
    left = "".join(ch for ch in final if ch in output)
    perm = tuple(left.index(ch) for ch in output)
    if sumdims:
        fl = _prod(sizes, final)
        total += fl
        steps.append(ContractionStep((0,), f"{final}->{output}", "reduction", fl, _prod(sizes, output),
                                     tuple(sizes[ch] for ch in output), dtype=cdt))
    elif n == 1:
        steps.append(ContractionStep((0,), f"{final}->{output}", "elementwise", 0, _prod(sizes, output),
                                     tuple(sizes[ch] for ch in output), dtype=cdt))
    peak = max(peak, _prod(sizes, output))
    ops_str = ",".join(terms)
    canon = f"{ops_str}->{output}"
    plan = ContractionPlan(
        subscripts=canon, path=path if n > 1 else [(0,)], steps=steps, flops=total,
        naive_flops=naive, largest_intermediate=peak, optimize=optimize, precision=precision,
        shapes=shapes, dtype=dtype,
    )
    if len(steps) == 1:
        plan.kind = steps[0].strategy
    plan._exec = (tuple(prep), tuple(recipes), sumdims, perm if perm != tuple(range(len(perm))) else None,
                  tuple(sizes[ch] for ch in output))
    return plan


# ------------------------------------------------------------------ the cached plan (trntensor._plan_cache)

def _plan(subscripts, shapes, dtype, device, precision, optimize, memory_limit, where):
    """The cached plan for canonical arguments (shapes: tuple of tuples)."""
    if type(subscripts) is not str:
        raise TypeError(f"{where}: subscripts must be a str such as 'ij,jk->ik', got {type(subscripts).__name__}")
    key = (subscripts, shapes, dtype, device, precision, optimize, memory_limit)
    plan = _cache.get(key)
    if plan is not None:
        _stats["hits"] += 1
        _cache.move_to_end(key)
        return plan
    terms, output, sizes, broadcast = _parse.parse(subscripts, shapes, where)
    plan = _build(terms, output, sizes, broadcast, shapes, dtype, optimize, precision, memory_limit, where)
    with _lock:
        _stats["misses"] += 1
        _cache[key] = plan
        if len(_cache) > _CACHE_MAX:
            _cache.popitem(last=False)
    return plan


def _plan_error(subscripts, shapes, dtype, device, precision, optimize, memory_limit, where):
    """None when :func:`_plan` plans these arguments (and caches the plan), else the TypeError/ValueError it
    raises as ("TypeError" or "ValueError", message)."""
    try:
        _plan(subscripts, shapes, dtype, device, precision, optimize, memory_limit, where)
    except (TypeError, ValueError) as e:
        return ("TypeError" if isinstance(e, TypeError) else "ValueError", str(e))
    return None


def _plan_constant(subscripts, shapes, dtype, device, precision, optimize, memory_limit, where):
    return _plan(subscripts, shapes, dtype, device, precision, optimize, memory_limit, where)


# torch.compile runs _plan_error and _plan_constant at trace time and keeps their results as constants of
# the graph (torch._dynamo.assume_constant_result's mark, set without importing Dynamo): their arguments are
# the subscripts, shapes, dtype and options the graph is specialized on anyway. A bad argument's error is
# returned, not raised, and raised by the traced code: an exception inside a constant-folded call would
# surface as Dynamo's InternalTorchDynamoError instead of the error the eager call raises.
_plan_error._dynamo_marked_constant = True
_plan_constant._dynamo_marked_constant = True


def _plan_traced(subscripts, shapes, dtype, device, precision, optimize, memory_limit, where):
    err = _plan_error(subscripts, shapes, dtype, device, precision, optimize, memory_limit, where)
    if err is not None:
        raise (TypeError if err[0] == "TypeError" else ValueError)(err[1])
    return _plan_constant(subscripts, shapes, dtype, device, precision, optimize, memory_limit, where)


_dispatch.traceable_as(_plan, _plan_traced)


# ------------------------------------------------------------------ public planning API

def _shapes_of(operands, where):
    """Shapes (tuples) from tensors/arrays or shape tuples."""
    shapes = []
    dtypes = []
    device = None
    for k, op in enumerate(operands):
        if isinstance(op, (tuple, list)) and all(isinstance(d, int) and not isinstance(d, bool) for d in op):
            if any(d < 0 for d in op):
                raise ValueError(f"{where}: operand {k}'s shape {tuple(op)} has a negative extent")
            shapes.append(tuple(op))
            continue
        t = validate.tensor(op, f"operand {k}", where)
        shapes.append(tuple(t.shape))
        dtypes.append(t.dtype)
        device = t.device if device is None else device
    dtype = None
    if dtypes:
        dtype = dtypes[0]
        for d in dtypes[1:]:
            dtype = torch.promote_types(dtype, d)
    return tuple(shapes), dtype, device


def _memory_limit(memory_limit, where):
    if memory_limit is None:
        return None
    if isinstance(memory_limit, str) and memory_limit == "max_input":
        return "max_input"
    return validate.integer(memory_limit, "memory_limit", where, minimum=1)


def plan_contraction(subscripts, *operands, optimize="auto", precision="fast", memory_limit=None, autotune=None):
    """Plan an einsum without running it.

    Parameters
    ----------
    subscripts : str
        As for :func:`trntensor.einsum`.
    *operands : tensors, arrays or shape tuples
        Only shapes (and dtypes, for the cache key) are read.
    optimize : {"auto", "optimal", "exhaustive", "greedy", "none"} or bool
        ``"optimal"`` (alias ``"dp"``): dynamic programming over connected
        operand subsets with a cost cap (:mod:`trntensor.paths`): the
        cheapest order that never multiplies unrelated operands, under the
        cost model of the module docs (opt_einsum's ``dp`` space). First
        plan at 20 operands: ~0.01-0.6 s for degree-3 networks, up to ~8 s
        for dense degree-4 ones (docs/trntensor.md); plans are cached.
        ``"exhaustive"``: every split (``3^n``), outer products included
        (up to ~10 operands). ``"greedy"``: the pair that shrinks memory
        most, O(n^3). ``"auto"`` (or ``True``): optimal up to 20 operands
        (greedy if its search exceeds ``trntensor.paths.AUTO_DP_BUDGET``
        candidate pairs, ~10 s), else greedy. ``"none"`` (or ``False``): left to right. With every
        method, an index held by one operand only and absent from the
        output is summed first, as a step of its own.
    precision : {"fast", "sr", "kahan", "dd"}
        Recorded in the plan (it does not change the path).
    memory_limit : int or "max_input", optional
        Largest intermediate allowed, in elements (``"max_input"``: the
        largest operand's size). Paths over it are skipped.
    autotune : bool, optional
        As for :func:`trntensor.einsum` (None: :func:`get_autotune`'s
        setting); the plan reports the route of the next such call.

    Returns
    -------
    ContractionPlan
        Printable (``print(plan)``) in the manner of opt_einsum's PathInfo.
        Each step's ``backend``/``reason`` is what the next
        :func:`trntensor.einsum` call with these operands runs, decided
        under the backend setting in effect now: a GEMM step through
        trnblas reports trnblas's own decision; a CPU GEMM step whose
        measured route (:mod:`trnsci.routes`) is ``numpy.matmul`` has
        backend ``"numpy"``; the reason gives the route and the times
        that chose it, or says the next call measures it (see
        :func:`set_autotune`).

    Raises
    ------
    ValueError
        Malformed subscripts, operand count or size mismatches (the message
        names the index), an unknown option, or a memory limit no path meets.
    TypeError
        Operands that are neither tensors, arrays nor shape tuples.

    Examples
    --------
    >>> import trntensor
    >>> p = trntensor.plan_contraction("ij,jk,kl->il", (10, 20), (20, 30), (30, 5))
    >>> p.path, p.flops
    ([(1, 2), (0, 1)], 8000)
    >>> [s.strategy for s in p.steps]
    ['gemm', 'gemm']
    """
    return _plan_contraction(subscripts, operands, optimize, precision, memory_limit, autotune, "plan_contraction")


def _plan_contraction(subscripts, operands, optimize, precision, memory_limit, autotune, where):
    """:func:`plan_contraction`, its errors naming ``where``."""
    if autotune is not None and not isinstance(autotune, bool):
        raise TypeError(f"{where}: autotune must be None or a bool, got {type(autotune).__name__}")
    shapes, dtype, device = _shapes_of(operands, where)
    opt = _OPTIMIZE(optimize, "optimize", where)
    prec = _PRECISION(precision, "precision", where)
    ml = _memory_limit(memory_limit, where)
    if ml == "max_input":
        ml = max((math.prod(s) for s in shapes), default=1)
    plan = _plan(subscripts, shapes, dtype, device, prec, opt, ml, where)
    # the cached plan is setting-free; the one returned carries the decisions made now: the einsum
    # Op's (its lowering's arguments need no tensors: size = plan.flops, dtype = the compute dtype)
    # and each step's
    dt = dtype if dtype is not None else torch.get_default_dtype()
    op_plan = _ABOVE["einsum"].plan(plan, (), 1, 0, None, _compute_dtype(dtype, prec), dt, prec, autotune)
    tensors = [x for x in operands if isinstance(x, torch.Tensor)]  # arrays become plain tensors in einsum
    notes = _host._route_notes(plan, device, tensors, autotune, prec, kernels_possible())
    plan = replace(plan, steps=[s._decided(n) for s, n in zip(plan.steps, notes)], op_plan=op_plan)
    active = _ABOVE.get("device_active")  # einsum's device path: every launch of the plan
    if active is not None and active(prec, tensors):
        return _ABOVE["device_annotate"](plan, dtype)
    plan.launches = []  # on torch: no kernel launch of trntensor's own
    return plan


def contract_path(subscripts, *operands, optimize="auto", memory_limit=None):
    """The pairwise path in opt_einsum's format, and the plan.

    Parameters
    ----------
    subscripts, *operands, optimize, memory_limit
        As for :func:`plan_contraction`.

    Returns
    -------
    path : list of tuple of int
        ``path[k]`` names the positions (in the current operand list, where
        contracted operands are removed and each result is appended) of the
        k-th contraction -- the list ``opt_einsum.contract(..., optimize=path)``
        accepts.
    plan : ContractionPlan

    Examples
    --------
    >>> import trntensor
    >>> path, plan = trntensor.contract_path("ab,bc,cd->ad", (5, 100), (100, 100), (100, 2))
    >>> path
    [(1, 2), (0, 1)]
    >>> trntensor.contract_path("abx,bc->ac", (2, 3, 50), (3, 4))[0]   # x summed first, on its own
    [(0,), (0, 1)]
    """
    plan = _plan_contraction(subscripts, operands, optimize, "fast", memory_limit, None, "contract_path")
    return list(plan.path), plan


def estimate_flops(subscripts, *operands, optimize="auto", naive=True):
    """Multiply-adds of the contraction (the published count), or (``naive=False``) the planned path's flops.

    Parameters
    ----------
    subscripts, *operands, optimize
        As for :func:`plan_contraction` (tensors, arrays or shape tuples).
    naive : bool
        True (default): the published trntensor's ``estimate_flops`` --
        the product of the extents of every distinct index, i.e. the
        multiply-adds of one loop nest over all indices: ``M*K*N`` for
        ``"ij,jk->ik"`` (no factor 2, no path). False: the planned
        pairwise path's :attr:`ContractionPlan.flops`, the count plans and
        benchmarks use (2 flops per multiply-add, opt_einsum's count).

    Returns
    -------
    int

    Notes
    -----
    Two conventions meet here, and only here: this function keeps the
    published number (multiply-adds, as its docs promised); everything
    else in the suite -- plans, ``ContractionStep.flops``, benchmarks --
    counts **2 flops per multiply-add** (``2*M*N*K`` for a GEMM). For a
    single GEMM ``estimate_flops(...) == plan_contraction(...).flops // 2``.

    Examples
    --------
    >>> import trntensor
    >>> trntensor.estimate_flops("ij,jk->ik", (4, 5), (5, 6))       # M*K*N
    120
    >>> trntensor.estimate_flops("ij,jk->ik", (4, 5), (5, 6), naive=False)   # 2*M*K*N, as plans
    240
    >>> trntensor.estimate_flops("ij,jk,kl->il", (10, 20), (20, 30), (30, 5))
    30000
    """
    where = "estimate_flops"
    if not isinstance(naive, bool):
        raise TypeError(f"{where}: naive must be a bool, got {type(naive).__name__}")
    if not naive:  # the plan's flops, with errors naming this function
        shapes, dtype, device = _shapes_of(operands, where)
        opt = _OPTIMIZE(optimize, "optimize", where)
        return _plan(subscripts, shapes, dtype, device, "fast", opt, None, where).flops
    shapes, _, _ = _shapes_of(operands, where)
    _, _, sizes, _ = _parse.parse(subscripts, shapes, where)
    return math.prod(sizes.values())
