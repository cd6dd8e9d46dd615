"""einsum on the device: every data movement of a plan through an Op with a kernel.

Under trntensor's backend ``"nki"``/``"simulator"`` (or ``"auto"`` on a
NeuronCore), :func:`trntensor.einsum` at precision ``"fast"`` (and ``"sr"``,
whose steps run in float32 and whose result is then rounded stochastically) runs its plan
here instead of on torch views: diagonals (repeated letters) are gathered by
the gather kernel (:data:`~trntensor.tensorops.PERMUTE` of the strided view),
sums over an index by the row-reduction kernel (``REDUCE``), the TTGT
permutations by transpose kernels (``PERMUTE``), elementwise/outer products
and ``alpha``/``beta`` by the elementwise kernel or a K=1 GEMM, and the GEMM
steps by trnblas as before. Each Op still decides for itself (dtype, size,
SBUF plan), so a step a kernel cannot take runs on torch and says why.

:func:`annotate` plans the same sequence on meta tensors: it records each
launch's :class:`~trnsci.dispatch.Plan` in ``plan.launches`` (``[(stage,
Plan)]``, stage ``"prepare operand k"``, ``"step k"`` or ``"finish"``) and
sets each step's ``backend``/``reason`` from its launches.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from trnsci import dispatch as _dispatch
from trnsci import runtime as _runtime
from trntensor import plan as P
from trntensor.tensorops import ELEMENTWISE, PERMUTE, REDUCE

_IDENT = ("identity", "identity", "identity")


def active(precision, ops) -> bool:
    """Whether this einsum call runs on the device path (see module docs)."""
    if precision not in ("fast", "sr") or _dispatch.torch_only("trntensor") or torch.compiler.is_compiling():
        return False  # under torch.compile the GEMM steps are trnblas's operators (trntensor.einsum)
    if any(x.requires_grad for x in ops):
        return False
    return _dispatch.kernels_possible("trntensor")


def _group(shape, start, target):
    """The fewest axes from ``start`` whose extents multiply to ``target`` (prefix products only grow)."""
    n, p = 0, 1
    while p != target and start + n < len(shape):
        p *= shape[start + n]
        n += 1
    return n


def _k_first(shape, pa, batch, M):
    """The permutation of a GEMM step's left operand to ``(batch, K, M)`` from its recipe's ``(batch, M, K)``
    one ``pa`` (None: identity); ``batch`` None for an unbatched step."""
    p = tuple(range(len(shape))) if pa is None else tuple(pa)
    ext = [shape[d] for d in p]
    nb = 0 if batch is None else _group(ext, 0, batch)
    nm = _group(ext, nb, M)
    return p[:nb] + p[nb + nm:] + p[nb:nb + nm]


class _Runner:
    """Runs (``plan=False``) or plans (``plan=True``, on meta tensors) the launches of one einsum plan."""

    def __init__(self, planning):
        self.planning = planning
        self.launches = []
        self.stage = ""

    def op(self, op, *args):
        if self.planning:
            self.launches.append((self.stage, op.plan(*args)))
            return op.lowering_for("torch").fn(*args)
        return op(*args)

    def gemm(self, a, b, dims, dtype, trans_a=False):
        """``op(a) @ b`` (``op(a) = a^T`` per matrix with ``trans_a``: ``a`` is then ``[.., K, M]``)."""
        Bn, M, N, K = dims
        batched = a.dim() == 3
        # half precision: trnblas decides (its kernels take bfloat16, float16 it runs on torch and says so),
        # under the rule einsum applies to float32 (plan.via_trnblas knows only the BLAS dtypes)
        rule = torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype
        # operands resident on a device: trnblas decides (no transfer to amortize), else einsum's size rule
        blas = P.kernels_possible() and (_runtime.residency((a, b), {}) is not None
                                          or P.via_trnblas(2 * Bn * M * N * K, rule, batched))
        if self.planning:
            if blas:
                self.launches.append((self.stage, P.gemm_plan("batched_gemm" if batched else "gemm", dims, dtype)))
            else:
                self.launches.append((self.stage, _dispatch.Plan(
                    None, "torch", f"torch.{'bmm' if batched else 'mm'}: trnblas would not run a kernel")))
            a = a.mT if trans_a else a
            return torch.bmm(a, b) if batched else torch.mm(a, b)
        if blas:
            import trnblas

            return (trnblas.batched_gemm if batched else trnblas.gemm)(1.0, a, b, transA=trans_a)
        a = a.mT if trans_a else a
        return torch.bmm(a, b) if batched else torch.mm(a, b)

    # ---- pieces

    def dense(self, x, perm):
        """``x.permute(perm)`` (perm None: identity) as a contiguous tensor, by a kernel when data moves."""
        if perm is None or tuple(perm) == tuple(range(x.dim())):
            if x.is_contiguous():
                return x
            perm = tuple(range(x.dim()))
        return self.op(PERMUTE, x, tuple(perm), 1.0)

    def sum(self, x, dims):
        return self.op(REDUCE, x, tuple(sorted(dims)), "sum", 1, 0, None)

    def pair(self, a, b, r, dtype):
        kind, sa, sb, pa, pb, va, vb, res_shape, dims = r
        if sa:
            a = self.sum(a, sa)
        if sb:
            b = self.sum(b, sb)
        Bn, M, N, K = dims
        if kind == "mm":
            # the GEMM kernels take op(A)^T ([.., K, M], contraction on the partitions): lay a out that way on
            # the device (often no move at all) and pass transA, so trnblas makes no host transpose of it
            batched = (len(va) if va is not None else a.dim()) == 3
            a = self.dense(a, _k_first(a.shape, pa, Bn if batched else None, M))
            a = a.reshape((Bn, K, M) if batched else (K, M))
            b = self.dense(b, pb)
            if vb is not None:
                b = b.reshape(vb)
            c = self.gemm(a, b, dims, dtype, trans_a=True)
            return c if res_shape is None else c.reshape(res_shape)
        a = self.dense(a, pa)
        b = self.dense(b, pb)
        if va is not None:
            a = a.reshape(va)
        if vb is not None:
            b = b.reshape(vb)
        if kind == "ew":
            shape = tuple(torch.broadcast_shapes(a.shape, b.shape))
            if M == 1 and N == 1:  # a Hadamard product of equal shapes
                return self.op(ELEMENTWISE, (a.reshape(shape), b.reshape(shape), None), (1, 1, 1),
                               _IDENT + ("mul", "add"), shape, dtype)
            # an outer product per batch: a GEMM with K = 1
            if Bn == 1:
                c = self.gemm(a.reshape(1, M), b.reshape(1, N), (1, M, N, 1), dtype, trans_a=True)
            else:
                c = self.gemm(a.reshape(Bn, 1, M), b.reshape(Bn, 1, N), (Bn, M, N, 1), dtype, trans_a=True)
            return c.reshape(shape)
        c = self.gemm(a, b, dims, dtype)
        return c if res_shape is None else c.reshape(res_shape)

    def run(self, plan, ops, alpha, beta, C, dtype):
        prep, recipes, sumdims, perm, out_shape = plan._exec
        xs = []
        for k, (x, (squeeze, diag, ushape)) in enumerate(zip(ops, prep)):
            self.stage = f"prepare operand {k}"
            if squeeze:
                x = x.squeeze(squeeze)
            if diag is not None:
                st = x.stride()
                v = x.as_strided(ushape, tuple(sum(st[p] for p in g) for g in diag), x.storage_offset())
                x = self.dense(v, None)
            xs.append(x)
        for k, (i, j, swap, r) in enumerate(recipes):
            self.stage = f"step {k}"
            if j is None:  # a one-operand sum step, r = ("sum", dims)
                xs.append(self.sum(xs.pop(i), r[1]))
                continue
            b = xs.pop(j)
            a = xs.pop(i)
            if swap:
                a, b = b, a
            xs.append(self.pair(a, b, r, dtype))
        x = xs[0]
        self.stage = f"step {len(recipes)}"
        if sumdims:
            x = self.sum(x, sumdims)
        self.stage = "finish"
        x = self.dense(x, perm)
        shape = tuple(out_shape)
        if C is not None:
            x = self.op(ELEMENTWISE, (x, C, None), (alpha, beta, 1), _IDENT + ("add", "add"), shape, dtype)
        elif alpha != 1:
            x = self.op(ELEMENTWISE, (x, None, None), (alpha, 1, 1), _IDENT + ("add", "add"), shape, dtype)
        return x


def run(plan, ops, alpha, beta, C, dtype):
    """``alpha * einsum + beta * C`` of the plan, every data movement through an Op (see module docs)."""
    return _Runner(False).run(plan, ops, alpha, beta, C, dtype)


def annotate(plan, dtype, alpha=1, beta=0, resident=None):
    """``plan`` with ``launches`` and each step's backend/reason from the device path (meta tensors).

    ``resident``: the device type the call's operands live on (None: host
    operands); each launch is planned as it will decide on such operands.
    """
    dt = dtype if dtype is not None else torch.get_default_dtype()
    metas = [torch.empty(s, dtype=dt, device="meta") for s in plan.shapes]
    runner = _Runner(True)
    C = torch.empty(plan._exec[4], dtype=dt, device="meta") if beta != 0 else None
    with _runtime.assume_resident(resident):
        runner.run(plan, metas, alpha, beta, C, dt)
    steps = list(plan.steps)
    for k, st in enumerate(steps):
        mine = [p for stage, p in runner.launches if stage == f"step {k}"]
        if not mine:
            continue
        backends = sorted({p.backend for p in mine})
        reason = "; ".join(f"{p.op or 'gemm'}: {p.backend} ({p.reason})" for p in mine)
        gemm_plan = next((p for p in mine if p.op is not None and p.op.startswith("trnblas.")),
                         st.decision[0] if st.decision is not None else None)
        steps[k] = replace(st, decision=(gemm_plan, "+".join(backends), reason))
    new = replace(plan, steps=steps)
    new.launches = runner.launches
    return new


P._ABOVE.update(device_active=active, device_annotate=annotate)  # trntensor.plan_contraction lists the launches
