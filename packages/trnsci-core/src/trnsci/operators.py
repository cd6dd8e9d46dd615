"""trnsci operations as torch operators: ``torch.ops.<library>.<name>``.

An :class:`~trnsci.dispatch.Op` declared with a ``schema`` is also a torch
operator, defined with :mod:`torch.library` in its library's namespace
(``torch.ops.trnblas.gemm``, ``torch.ops.trnfft.fft``, ...):

* its default implementation (``CompositeExplicitAutograd``) is the Op's one
  decision, :meth:`Op.run <trnsci.dispatch.Op.run>`: the torch lowering, or
  the NKI lowering under backend ``"simulator"``/``"nki"`` with the torch
  fallback;
* its fake implementation (``meta`` tensors, FakeTensor under
  torch.compile) is the Op's declared ``fake``, else the torch lowering run
  on the fake tensors;
* an Op declared ``differentiable=False`` (a random draw) marks its outputs
  non-differentiable;
* otherwise its autograd formula is the Op's declared :meth:`Op.backward
  <trnsci.dispatch.Op.backward>` (built from forward Op calls, so a backward
  runs kernels wherever the forward does), else a vjp through the torch
  lowering;
* a device's implementation is registered for its dispatch key with
  :meth:`Op.register_device <trnsci.dispatch.Op.register_device>`
  (``"PrivateUse1"``, ``"XLA"``).

Eager calls on CPU tensors take the operator only when something needs it
(:meth:`Op.__call__ <trnsci.dispatch.Op>`): a kernel backend with inputs
requiring grad, meta/fake/non-CPU inputs, or torch.compile tracing. The
torch fast path never enters the dispatcher.
"""

from __future__ import annotations

import torch

from trnsci import dispatch

__all__ = ["define", "call", "vjp", "register_device", "namespaces", "operators", "autograd_table"]

_libraries: dict[str, torch.library.Library] = {}
_names: dict[str, tuple[str, ...]] = {}  # op name -> the schema's argument names, in order


def namespaces() -> list[str]:
    """The torch.ops namespaces trnsci defined operators in (one per library)."""
    return sorted(_libraries)


def operators() -> dict[str, object]:
    """Op name -> its torch operator (``OpOverload``), for every Op declared with a schema."""
    return {name: op.operator for name, op in dispatch.ops().items() if op.operator is not None}


def _library(ns: str) -> torch.library.Library:
    lib = _libraries.get(ns)
    if lib is None:
        lib = _libraries[ns] = torch.library.Library(ns, "FRAGMENT")
    return lib


def _split(name: str) -> tuple[str, str]:
    ns, rest = name.split(".", 1)
    return ns, rest.replace(".", "_")


def define(op) -> None:
    """Define ``op``'s torch operator from its schema (see the module docstring)."""
    dispatch._hook_dynamo()
    ns, name = _split(op.name)
    lib = _library(ns)
    lib.define(name + op.schema)
    qualname = f"{ns}::{name}"

    def impl(*args):
        args = _canon(args)
        # below autograd, but a lowering's worker threads would still see the inputs' requires_grad: detached
        low = tuple(_detach(a) for a in args)
        out = op.run(*_lowering_args(op, low))
        if op._result is not None:
            out = op._result(out, *low)
        return _fresh(out, args)

    def fake(*args):
        args = _canon(args)
        if op._fake is not None:
            return _fresh(op._fake(*args), args, fake=True)
        if op._torch is None:
            raise NotImplementedError(f"{op.name}: no torch lowering registered")
        return _fresh(op._torch(*_lowering_args(op, args)), args, fake=True)

    lib.impl(name, impl, "CompositeExplicitAutograd")
    torch.library.register_fake(qualname, fake, lib=lib)
    overload = getattr(getattr(torch.ops, ns), name).default
    arguments = overload._schema.arguments
    # keyword-only, mutated or aliased arguments: torch's registration (and its errors)
    if _SHARED and not any(a.kwarg_only or a.alias_info is not None for a in (*arguments, *overload._schema.returns)):
        lib.impl(name, _Kernel(op, overload), "Autograd", with_keyset=True)
    else:  # torch's own registration (an autograd.Function class per operator)
        torch.library.register_autograd(
            qualname, lambda ctx, *grads: _backward(op, ctx, tuple(ctx.needs_input_grad), grads),
            setup_context=lambda ctx, inputs, output: _setup_context(op, ctx, inputs, output), lib=lib)
    op._operator = overload
    _names[op.name] = tuple(a.name for a in arguments)
    op._arity = len(arguments)


def _setup_context(op, ctx, inputs, output) -> None:
    """Save what ``op``'s backward needs (the inputs and outputs), or mark a non-differentiable op's outputs."""
    tensors, spec = _pack(inputs)
    outs, out_spec = _pack(output if isinstance(output, (tuple, list)) else (output,))
    if not op.differentiable:
        ctx.mark_non_differentiable(*(o for o in outs if isinstance(o, torch.Tensor)))
        ctx.trnsci = len(inputs)
        return
    ctx.save_for_backward(*tensors, *outs)
    ctx.trnsci = (spec, len(tensors), out_spec, isinstance(output, (tuple, list)))


def _backward(op, ctx, needs: tuple, grads: tuple) -> tuple:
    """``op``'s gradients, one per operator input (a list for a ``Tensor[]`` input), from the output ones."""
    if not op.differentiable:
        return tuple(None for _ in range(ctx.trnsci))
    spec, n, out_spec, several = ctx.trnsci
    saved = ctx.saved_tensors
    inputs = _canon(_unpack(saved[:n], spec))
    outs = _unpack(saved[n:], out_spec)
    output = tuple(outs) if several else outs[0]
    grad = tuple(grads) if several else grads[0]
    if op._backward is not None:
        got = op._backward(tuple(inputs), output, grad, needs)
    else:
        got = vjp(op, tuple(inputs), grad)
    got = tuple(got)
    if len(got) != len(inputs):
        raise RuntimeError(f"{op.name}: the backward returned {len(got)} gradients for {len(inputs)} inputs")
    # a list input (Tensor[]) takes a list of gradients, one per entry
    return tuple(g if sp is _TENSOR else None if sp[0] is _CONST else [None] * len(sp) if g is None else list(g)
                 for sp, g in zip(spec, got))


# Every operator's Autograd kernel runs one shared autograd.Function class, where
# torch.library.register_autograd builds a class and a dataclass per operator (docs/operators.md). It does
# what torch's kernel does: with grad mode on and an input requiring grad, the forward redispatches below
# autograd and saves for the backward; a Tensor[] input or output crosses the Function as its entries, so
# each entry has its gradient; otherwise the call redispatches below autograd.
_C = torch._C
_SHARED = (hasattr(_C, "_AutoDispatchBelowAutograd") and hasattr(_C, "_after_autograd_keyset")
           and hasattr(_C, "_any_requires_grad") and hasattr(torch._ops.OpOverload, "redispatch")
           and "with_keyset" in torch.library.Library.impl.__code__.co_varnames)


class _Kernel:
    """``op``'s Autograd kernel (registered with the dispatch keyset, as torch's is)."""

    __slots__ = ("op", "overload", "defaults", "lists")

    def __init__(self, op, overload):
        self.op = op
        self.overload = overload
        schema = overload._schema
        # the dispatcher drops trailing arguments equal to their defaults: the backward sees them all
        self.defaults = tuple(a.default_value if a.has_default_value() else None for a in schema.arguments)
        self.lists = any(_is_list(a.type) for a in (*schema.arguments, *schema.returns))

    def __call__(self, keyset, *args):
        if _C.is_grad_enabled() and _C._any_requires_grad(*args):
            if not self.lists:
                return TrnsciOperator.apply(*args, _Call(self, keyset, None))
            flat, spec = _flatten(args)
            call = _Call(self, keyset, spec)
            out = TrnsciOperator.apply(*flat, call)
            out = _unflatten(out, call.out_spec)
            return tuple(out) if call.several else out[0]
        with _C._AutoDispatchBelowAutograd():
            return self.overload.redispatch(keyset & _C._after_autograd_keyset, *args)


class _Call:
    """One call's kernel, dispatch keyset and ``Tensor[]`` layout (inputs, and outputs once run)."""

    __slots__ = ("kernel", "keyset", "spec", "out_spec", "several")

    def __init__(self, kernel, keyset, spec):
        self.kernel, self.keyset, self.spec = kernel, keyset, spec
        self.out_spec, self.several = None, False


class TrnsciOperator(torch.autograd.Function):
    """The forward and backward of every trnsci operator with inputs requiring grad (see :class:`_Kernel`)."""

    @staticmethod
    def forward(ctx, *args):
        call = args[-1]
        args = args[:-1]
        kernel = call.kernel
        if call.spec is not None:
            args = tuple(_unflatten(args, call.spec))
        with _C._AutoDispatchBelowAutograd():
            result = kernel.overload.redispatch(call.keyset & _C._after_autograd_keyset, *args)
            if len(args) < len(kernel.defaults):
                args = (*args, *kernel.defaults[len(args):])
            _setup_context(kernel.op, ctx, args, result)
        ctx.trnsci_call = call
        if call.spec is None:
            return result
        call.several = isinstance(result, tuple)
        flat, call.out_spec = _flatten(result if call.several else (result,))
        return tuple(flat)

    @staticmethod
    def backward(ctx, *grads):
        call = ctx.trnsci_call
        needs = ctx.needs_input_grad[:-1]
        if call.spec is None:  # one gradient per argument the call passed (not the defaults filled in)
            return (*_backward(call.kernel.op, ctx, tuple(needs), grads)[:len(needs)], None)
        needs = tuple(_unflatten(needs, call.spec))
        got = _backward(call.kernel.op, ctx, needs, tuple(_unflatten(grads, call.out_spec)))
        flat = []
        for g, n in zip(got, call.spec):
            if n < 0:
                flat.append(g)
            elif g is None:
                flat.extend([None] * n)
            elif len(g) != n:
                raise RuntimeError(f"{call.kernel.op.name}: {len(g)} gradients for a list of {n} tensors")
            else:
                flat.extend(g)
        return (*flat, None)


def _is_list(t) -> bool:
    """A ``Tensor[]``/``Tensor?[]`` (or optional such) argument or return type."""
    if isinstance(t, _C.OptionalType):
        t = t.getElementType()
    if not isinstance(t, _C.ListType):
        return False
    t = t.getElementType()
    return t == _C.TensorType.get() or t == _C.OptionalType(_C.TensorType.get())


def _flatten(items) -> tuple[list, tuple]:
    """``items`` with each list of tensors spliced in, and each item's length (-1: not such a list)."""
    flat, spec = [], []
    for a in items:
        if type(a) is list and all(isinstance(t, torch.Tensor) for t in a):
            flat.extend(a)
            spec.append(len(a))
        else:
            flat.append(a)
            spec.append(-1)
    return flat, tuple(spec)


def _unflatten(flat, spec) -> list:
    it = iter(flat)
    return [next(it) if n < 0 else [next(it) for _ in range(n)] for n in spec]


def register_device(op, dispatch_key: str, fn) -> None:
    """Implement ``op``'s operator for ``dispatch_key`` with ``fn`` (the lowering's arguments)."""
    if op.operator is None:
        raise ValueError(f"{op.name}: no torch operator (declare the Op with a schema first)")
    ns, name = _split(op.name)
    _library(ns).impl(name, fn, dispatch_key)


def call(op, args: tuple, kwargs: dict):
    """``op``'s torch operator on the lowering's arguments (keywords bound by the schema's names)."""
    if op.operator is None:
        raise ValueError(f"{op.name}: no torch operator (declare the Op with a schema first)")
    if op._to_operator is not None:
        crossed = op._to_operator(*args, **kwargs)
        if crossed is None:
            raise ValueError(f"{op.name}: these arguments cross no operator schema (call the Op)")
        return op.operator(*crossed)
    names = _names[op.name]
    if len(args) > len(names):  # arguments past the schema's are host-side (a cache's owner): not passed
        args = args[:len(names)]
    if kwargs:
        kwargs = {k: a for k, a in kwargs.items() if k in names}
        args = list(args)
        for nm in names[len(args):]:
            if nm not in kwargs:
                break
            args.append(kwargs[nm])
        extra = set(kwargs) - set(names[:len(args)])
        if extra:
            raise TypeError(f"{op.name}: unexpected keyword arguments {sorted(extra)}")
    return op.operator(*args)


def _pack(items) -> tuple[list, tuple]:
    """The tensors among ``items`` -- also inside a list (``Tensor[]``, ``Tensor?[]``) -- and how to put
    them back (:func:`_unpack`): saved for the backward, the rest kept as constants."""
    tensors, spec = [], []
    for a in items:
        if isinstance(a, torch.Tensor):
            tensors.append(a)
            spec.append(_TENSOR)
        elif isinstance(a, (list, tuple)) and a and all(t is None or isinstance(t, torch.Tensor) for t in a):
            present = tuple(t is not None for t in a)
            tensors.extend(t for t in a if t is not None)
            spec.append(present)
        else:
            spec.append((_CONST, a))
    return tensors, tuple(spec)


_TENSOR = "tensor"
_CONST = "const"


def _unpack(tensors, spec) -> list:
    it = iter(tensors)
    out = []
    for s in spec:
        if s is _TENSOR:
            out.append(next(it))
        elif s and s[0] is _CONST:
            out.append(s[1])
        else:
            out.append(tuple(next(it) if p else None for p in s))
    return out


def _detach(a):
    if isinstance(a, torch.Tensor):
        return a.detach() if a.requires_grad else a
    if isinstance(a, tuple) and any(isinstance(t, torch.Tensor) for t in a):
        return tuple(_detach(t) for t in a)
    return a


def _lowering_args(op, args: tuple) -> tuple:
    """The lowering's arguments from the operator's (the same, unless the op declared a boundary)."""
    return args if op._from_operator is None else tuple(op._from_operator(*args))


def _canon(args) -> tuple:
    """The lowering's arguments from the operator's: a list (``int[]``, ``Tensor[]``) back to the tuple
    the lowerings take."""
    return tuple(tuple(a) if type(a) is list else a for a in args)


def _fresh(out, args, fake: bool = False):
    """``out`` with every tensor contiguous, at offset 0 and aliasing no input (an operator returns new
    tensors, and its fake implementation must promise the real one's strides: both are row-major)."""
    if isinstance(out, (tuple, list)):
        return tuple(_fresh(o, args, fake) for o in out)
    if not isinstance(out, torch.Tensor):
        return out
    if not out.is_contiguous():
        return out.contiguous()
    if out.storage_offset():  # a slice of a larger result: the fake's strides and offset are a fresh tensor's
        return out.clone()
    if fake:
        return out.clone() if out._is_view() or any(out is a for a in args) else out
    try:
        ptr = out.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return out.clone()
    for a in args:
        if isinstance(a, torch.Tensor) and (a is out or (ptr and a.untyped_storage().data_ptr() == ptr)):
            return out.clone()
    return out


def vjp(op, inputs: tuple, grad):
    """The default backward: a vjp through ``op``'s torch lowering, recomputed on the saved ``inputs``.

    Also for a declared backward (:meth:`Op.backward <trnsci.dispatch.Op.backward>`) that has a
    formula for some calls only and leaves the rest to torch's derivatives.
    """
    def leaf(a):
        if isinstance(a, torch.Tensor) and (a.is_floating_point() or a.is_complex()):
            return a.detach().requires_grad_()
        return a

    def wants(a):
        return isinstance(a, torch.Tensor) and a.requires_grad

    with torch.enable_grad():
        leaves = [tuple(leaf(t) for t in a) if isinstance(a, tuple) else leaf(a) for a in inputs]
        out = op._torch(*_lowering_args(op, tuple(leaves)))
        outs = out if isinstance(out, tuple) else (out,)
        grads = grad if isinstance(grad, tuple) else (grad,)
        pairs = [(o, g) for o, g in zip(outs, grads)
                 if isinstance(o, torch.Tensor) and o.requires_grad and g is not None]
        diff = [t for a in leaves for t in (a if isinstance(a, tuple) else (a,)) if wants(t)]
        if not pairs or not diff:
            return tuple(None for _ in inputs)
        got = iter(torch.autograd.grad([o for o, _ in pairs], diff, [g for _, g in pairs], allow_unused=True))
    return tuple(tuple(next(got) if wants(t) else None for t in a) if isinstance(a, tuple)
                 else next(got) if wants(a) else None for a in leaves)


def autograd_table() -> str:
    """The Markdown table of every operator's derivative and where its backward runs (docs/operators.md)."""
    rows = ["| operator | derivative | backward runs |", "|---|---|---|"]
    for name, op in sorted(dispatch.ops().items()):
        if op.operator is None:
            continue
        ns, nm = _split(name)
        formula, runs = op._backward_doc
        if not op.differentiable:
            formula = formula or "none: not differentiable (outputs marked non-differentiable)"
            runs = "nothing"
        elif op._backward is None:
            formula = "vjp of the torch lowering (torch's own derivatives of what it calls)"
            runs = "torch: the lowering recomputed on the saved inputs"
        elif formula.startswith("none:"):
            runs = "no backward: a backward pass reaching it raises"
        elif runs.startswith(("torch", "nothing")):  # no operation of the library in the backward
            pass
        else:
            runs = f"{runs}: kernels under a kernel backend, as in the forward"
        rows.append(f"| `torch.ops.{ns}.{nm}` | {formula} | {runs} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m trnsci.operators: print the table (after importing the libraries)
    import importlib

    for lib in ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor"):
        importlib.import_module(lib)
    print(autograd_table(), end="")
