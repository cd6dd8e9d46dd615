"""One definition per instruction: engines, operand memories, dtypes, targets, cost.

Every ``nisa`` instruction is registered with :func:`instruction`, which records
an :class:`Instruction` in :data:`INSTRUCTIONS` and wraps the implementation so
that the declared rules are checked before the body runs:

* ``memory``: operand name -> memories it may live in (``"sbuf"``, ``"psum"``,
  ``"hbm"``, joined with ``|``; add ``"scalar"`` when a compile-time scalar is
  allowed).  A tile in any other memory is rejected, naming the operand.
* ``dtypes``: operand name -> a dtype class (``"float"``, ``"int"``,
  ``"float32"``, ``"uint32"``, ``"uint8|uint16|uint32"``, ...).
* ``engines``: the engines the instruction may run on; the body picks one and
  calls :func:`issue`, which rejects GpSimd touching PSUM, engines the target
  lacks (``engine_targets``) and counts the instruction with the cycle cost
  from ``cost`` -- the same table the profile's time model reads.  The cost
  rules live in :mod:`._cost` (``COSTS``, each citing its AWS source); the
  ``cost=`` given here is the fallback for a name the table lacks.
* ``targets``: the NeuronCore generations that have the instruction
  (``trn1`` = NeuronCore-v2 = gen2, ``trn2`` = NeuronCore-v3 = gen3).
* ``removed``: keyword arguments an older release had, with the replacement
  named in the error.

Adding an instruction is one decorated function (and one test).
"""

import functools
import inspect
from dataclasses import dataclass, field

import numpy as np

from . import dtypes as dt
from ._cost import cost_for
from .errors import NkiValidationError, NotEmulatedError

MIN_INSTR_CYCLES = 64
ALL_TARGETS = ("trn1", "trn2")
TARGET_GEN = {"trn1": "NeuronCore-v2 (trn1)", "trn2": "NeuronCore-v3 (trn2)", "trn3": "NeuronCore-v4 (trn3)"}


# ---------------------------------------------------------------- cost rules
# N = elements per partition of the instruction's main operand (NKI.md rules
# of thumb; "NKI Engine Selection" in nki.api.shared.rst for reciprocal).


def cost_n(n, **_):
    return n


def cost_2n(n, **_):
    return 2 * n


def cost_8n(n, **_):
    return 8 * n


def cost_iota(n, **_):
    return 150 + n


def cost_matmul(n, m=128, lowp=False, **_):
    """max(min(64, M), N) for bf16/fp16/fp8 operands, 4x for fp32."""
    return max(min(64, m), n) * (1 if lowp else 4)


def cost_dma(n, **_):
    return 0  # DMA time comes from bytes and transfers (profile.Counters.dma)


@dataclass
class Instruction:
    """The rules of one instruction (see the module docstring)."""

    name: str
    engines: tuple
    cost: object = cost_n
    memory: dict = field(default_factory=dict)
    dtypes: dict = field(default_factory=dict)
    targets: tuple = ALL_TARGETS
    engine_targets: dict = field(default_factory=dict)
    removed: dict = field(default_factory=dict)
    source: str = "nki/api/nki/isa/__init__.py"
    emulated: bool = True

    def cycles(self, engine, n, **kw):
        """Cycles of one instruction on ``engine``: the cost rule, at least MIN_II (64).

        ``kw`` carries what the rule may look at (``args``: the bound call
        arguments, ``target``, plus what the body passed to ``issue``).
        """
        if engine == "dma":
            return 0
        cost = self.cost
        if isinstance(cost, dict):
            cost = cost[engine] if engine in cost else next(iter(cost.values()))
        return max(MIN_INSTR_CYCLES, int(round(cost(int(n), **kw))))


INSTRUCTIONS = {}


def _is_tile(x):
    from .memory import Tensor

    return isinstance(x, Tensor)


def _is_scalar(x):
    return isinstance(x, (bool, int, float, np.integer, np.floating))


def _mem_name(t):
    b = t.buffer.name
    return "hbm" if b in ("hbm", "shared_hbm", "private_hbm") else b


_DTYPE_CLASSES = {
    "float": dt.is_float,
    "int": dt.is_int,
    "any": lambda d: True,
}


def dtype_ok(d, rule):
    for part in rule.split("|"):
        f = _DTYPE_CLASSES.get(part)
        if f is not None:
            if f(d):
                return True
        elif str(d) == part:
            return True
    return False


def current_target():
    from .memory import current

    return current().target.name


class Call:
    """The bound arguments of one instruction call plus helpers for the body."""

    __slots__ = ("spec", "args", "ctx")

    def __init__(self, spec, args, ctx):
        self.spec = spec
        self.args = args
        self.ctx = ctx

    @property
    def target(self):
        return self.ctx.target.name

    def fail(self, message):
        raise NkiValidationError(f"{self.spec.name}: {message}")

    def issue(self, engine, n, tiles=None, **kw):
        """Check the engine choice and count one instruction on it."""
        spec = self.spec
        if engine not in spec.engines:
            self.fail(
                f"cannot run on the {engine} engine; it runs on " + " / ".join(spec.engines) + f" ({spec.source})"
            )
        allowed = spec.engine_targets.get(engine)
        if allowed is not None and self.target not in allowed:
            self.fail(f"the {engine} engine cannot run this instruction on {TARGET_GEN[self.target]} ({spec.source})")
        if engine == "gpsimd":
            names = tiles if tiles is not None else list(spec.memory)
            for name in names:
                t = self.args.get(name)
                if _is_tile(t) and t.buffer.name == "psum":
                    self.fail(
                        f"operand '{name}' ('{t.name}') is in PSUM, which the GpSimd engine cannot access "
                        "(architecture guide: GpSimd reads and writes SBUF only)"
                    )
        cycles = spec.cycles(engine, n, args=self.args, target=self.target, **kw)
        self.ctx.counters.issue(spec.name, engine, cycles)


def _engine_arg(spec, value):
    """Map an nisa.engine member to an engine name (None for unknown)."""
    from ._isa import engine as engine_enum

    if value is None or value is engine_enum.unknown:
        return None
    if isinstance(value, engine_enum):
        return value.name
    raise NkiValidationError(
        f"{spec.name}: 'engine' must be an nisa.engine member (nisa.engine.vector, ...), got {value!r}; "
        "raw strings and integers are not accepted since NKI 0.3"
    )


def instruction(name, engines, cost=cost_n, memory=None, dtypes=None, targets=ALL_TARGETS,
                engine_targets=None, removed=None, source=None, emulated=True):
    """Register ``fn`` as instruction ``name`` with its rules (see module doc)."""

    def deco(fn):
        spec = Instruction(
            name=name,
            engines=tuple(engines),
            cost=cost_for(name, cost),
            memory=dict(memory or {}),
            dtypes=dict(dtypes or {}),
            targets=tuple(targets),
            engine_targets=dict(engine_targets or {}),
            removed=dict(removed or {}),
            source=source or f"nki/api/nki/isa/__init__.py ({name})",
            emulated=emulated,
        )
        full = inspect.signature(fn)
        sig = full.replace(parameters=list(full.parameters.values())[1:])  # drop the leading ``call``

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            from .memory import current

            ctx = current(name)
            for k in kwargs:
                if k in spec.removed:
                    raise NkiValidationError(f"{name}: parameter '{k}' was removed; {spec.removed[k]}")
                if k == "mask":
                    raise NkiValidationError(
                        f"{name}: the 'mask' parameter was removed in NKI 0.2; slice the operands to the "
                        "valid region, or select with nisa.affine_select / nisa.tensor_copy_predicated"
                    )
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as e:
                raise TypeError(f"{name}: {e}") from None
            bound.apply_defaults()
            a = bound.arguments
            if not spec.emulated:
                raise NotEmulatedError(f"{name} is not emulated yet ({spec.source})")
            if ctx.target.name not in spec.targets:
                raise NkiValidationError(
                    f"{name}: not available on {TARGET_GEN[ctx.target.name]}; available on "
                    + ", ".join(TARGET_GEN.get(t, t) for t in spec.targets)
                )
            for op, rule in spec.memory.items():
                _check_memory(spec, op, a.get(op), rule)
            for op, rule in spec.dtypes.items():
                v = a.get(op)
                if _is_tile(v) and not dtype_ok(v.dtype, rule):
                    want = rule.replace("|", " or ")
                    raise NkiValidationError(
                        f"{name}: operand '{op}' ('{v.name}') has dtype {v.dtype}; it must be {want}"
                    )
            if "engine" in a:
                a["engine"] = _engine_arg(spec, a["engine"])
            call = Call(spec, a, ctx)
            counters = ctx.counters
            counters.begin()
            try:
                return fn(call, **a)
            finally:
                counters.end()

        wrapper.__signature__ = sig
        wrapper.spec = spec
        INSTRUCTIONS[name] = spec
        return wrapper

    return deco


def _check_memory(spec, op, v, rule):
    allowed = rule.split("|")
    if v is None:
        return
    if _is_tile(v):
        m = _mem_name(v)
        if m not in allowed:
            where = " or ".join(x.upper() for x in allowed if x != "scalar")
            hint = ""
            if m == "psum" and spec.engines == ("dma",):
                hint = ", which DMA cannot access (copy through SBUF with nisa.tensor_copy)"
            elif m == "hbm":
                hint = "; compute instructions access SBUF/PSUM only (load HBM data into SBUF first)"
            raise NkiValidationError(
                f"{spec.name}: operand '{op}' ('{v.name}') is in {m.upper()}{hint}; it must be in {where}"
            )
        if m != "hbm":
            if v.ndim < 2:
                raise NkiValidationError(
                    f"{spec.name}: operand '{op}' ('{v.name}') has rank {v.ndim} (shape {v.shape}); "
                    "SBUF/PSUM tiles must be at least 2-D"
                )
            if v.shape[0] > 128:
                raise NkiValidationError(
                    f"{spec.name}: number of partitions {v.shape[0]} exceeds architecture limitation of 128 "
                    f"(operand '{op}')"
                )
        return
    if _is_scalar(v):
        if "scalar" not in allowed:
            raise NkiValidationError(f"{spec.name}: operand '{op}' must be a tile, got the scalar {v!r}")
        return
    if isinstance(v, np.ndarray):
        raise NkiValidationError(
            f"{spec.name}: operand '{op}' is a NumPy array; only kernel arguments (HBM) and tiles are valid"
        )
    # other objects (access patterns, registers) are checked by the body


def not_emulated(name, signature_fn, reason, targets=ALL_TARGETS, engines=("vector",), source=None):
    """Register an instruction that exists in NKI 0.6 but is not emulated."""
    spec = Instruction(name=name, engines=engines, targets=targets, emulated=False,
                       source=source or f"nki/api/nki/isa/__init__.py ({name}); {reason}")

    @functools.wraps(signature_fn)
    def wrapper(*args, **kwargs):
        tgt = None
        try:
            tgt = current_target()
        except NkiValidationError:
            pass
        if tgt is not None and tgt not in targets:
            raise NkiValidationError(
                f"{name}: not available on {TARGET_GEN[tgt]}; available on "
                + ", ".join(TARGET_GEN.get(t, t) for t in targets)
            )
        raise NotEmulatedError(f"{name} is not emulated yet: {reason}")

    wrapper.spec = spec
    INSTRUCTIONS[name] = spec
    return wrapper
