"""When an NKI kernel is worth running: thresholds, decisions, operations.

One registry serves all six libraries. Each operation registers the size
metric it is judged by (FLOPs for a GEMM, points for an FFT, ...) and the
smallest size at which its kernel beats the torch fallback on a NeuronCore.
Under backend ``"auto"`` an operation below its threshold runs on torch: on
trn1 a dispatch costs about a millisecond of host/XLA overhead, which small
problems never win back.

Where a threshold comes from, strongest first:

1. ``TRNSCI_MIN_NKI_<OP>`` in the environment, ``<OP>`` being the op name in
   upper case with dots as underscores (``TRNSCI_MIN_NKI_TRNBLAS_GEMM``);
2. the calibration file written by ``trnsci calibrate`` (path from
   ``TRNSCI_CALIBRATION_FILE``, else ``$XDG_CONFIG_HOME/trnsci/calibration.json``,
   else ``~/.config/trnsci/calibration.json``);
3. the default registered with the operation.

:func:`decide` turns the backend setting, the hardware present, the dtype
and the size into a :class:`Decision` that says which backend runs and why.
:class:`Op` is one operation with a torch lowering and an NKI lowering
(which also serves the simulator); calling it validates nothing -- the
public function does that -- and runs the chosen lowering, falling back to
torch when a kernel fails (one :class:`NkiFallbackWarning` per distinct
cause) or raising when ``TRNSCI_REQUIRE_NKI=1``.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
import os
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from trnsci import _env
from trnsci import backend as _backend


class NkiFallbackWarning(RuntimeWarning):
    """An NKI kernel failed and the torch fallback produced the result."""


class NkiRequiredError(RuntimeError):
    """``TRNSCI_REQUIRE_NKI=1`` is set and an operation would not run a kernel."""


# ------------------------------------------------------------------ registry

@dataclass(frozen=True)
class Threshold:
    """A registered operation: its size metric and default NKI threshold."""

    op: str
    metric: str
    default: float
    doc: str = ""
    probe: Callable | None = field(default=None, compare=False)


_REGISTRY: dict[str, Threshold] = {}
_lock = threading.Lock()


def register(op: str, metric: str, default: float, doc: str = "", probe: Callable | None = None) -> Threshold:
    """Register (or re-register with the same values) an operation's threshold.

    ``probe``, if given, is ``probe(n) -> (size, torch_thunk, nki_thunk)``
    for a problem of scale ``n``; ``trnsci calibrate`` times both thunks to
    find the break-even size on real hardware.
    """
    if "." not in op:
        raise ValueError(f"op must be '<library>.<name>', got {op!r}")
    entry = Threshold(op, metric, float(default), doc, probe)
    with _lock:
        old = _REGISTRY.get(op)
        if old is not None and (old.metric, old.default) != (entry.metric, entry.default):
            raise ValueError(f"op {op!r} is already registered with metric {old.metric!r}, default {old.default}")
        _REGISTRY[op] = entry
    return entry


def registry() -> dict[str, Threshold]:
    """A copy of the registry, op name -> :class:`Threshold`."""
    with _lock:
        return dict(_REGISTRY)


def env_var(op: str) -> str:
    """The environment variable that overrides ``op``'s threshold."""
    return "TRNSCI_MIN_NKI_" + op.upper().replace(".", "_")


def calibration_path() -> Path:
    """Where ``trnsci calibrate`` writes and dispatch reads calibrated thresholds."""
    explicit = os.environ.get("TRNSCI_CALIBRATION_FILE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "trnsci" / "calibration.json"


_cal_cache: dict[str, Any] = {"key": None, "data": {}}


def load_calibration(path: Path | None = None) -> dict[str, float]:
    """The calibrated thresholds (op -> size), ``{}`` when there is no file.

    A malformed file is an error naming the file rather than silently ignored.
    """
    path = path or calibration_path()
    try:
        stat = path.stat()
    except FileNotFoundError:
        return {}
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if _cal_cache["key"] == key:
        return _cal_cache["data"]
    try:
        raw = json.loads(path.read_text())
        data = {str(k): float(v) for k, v in raw.get("thresholds", {}).items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f"calibration file {path} is malformed: {exc}") from None
    _cal_cache.update(key=key, data=data)
    return data


def write_calibration(thresholds: dict[str, float], path: Path | None = None, **meta: Any) -> Path:
    """Write ``{"thresholds": {...}, **meta}`` as JSON; returns the path.

    A ``"routes"`` section already in the file (:mod:`trnsci.routes`) is kept.
    """
    unknown = sorted(set(thresholds) - set(registry()))
    if unknown:
        raise ValueError(f"thresholds name unregistered ops: {', '.join(unknown)}")
    path = path or calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"thresholds": {k: float(v) for k, v in sorted(thresholds.items())}, **meta}
    try:  # measured routes (trnsci.routes) share the file: keep them
        old = json.loads(path.read_text()).get("routes")
    except (OSError, ValueError, AttributeError):
        old = None
    if isinstance(old, dict):
        doc["routes"] = old
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)
    return path


def threshold(op: str) -> tuple[float, str]:
    """``(value, origin)`` for ``op``; origin is ``env:<VAR>``, ``calibration:<path>`` or ``default``."""
    entry = _entry(op)
    var = env_var(op)
    raw = os.environ.get(var, "").strip()
    if raw:
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"environment variable {var} must be a number, got {raw!r}") from None
        if math.isnan(value) or value < 0:
            raise ValueError(f"environment variable {var} must be >= 0, got {raw!r}")
        return value, f"env:{var}"
    cal = load_calibration()
    if op in cal:
        return cal[op], f"calibration:{calibration_path()}"
    return entry.default, "default"


def _entry(op: str) -> Threshold:
    try:
        return _REGISTRY[op]
    except KeyError:
        raise ValueError(f"unknown operation {op!r}; registered: {', '.join(sorted(_REGISTRY)) or 'none'}") from None


# ------------------------------------------------------------------ decisions

def require_nki() -> bool:
    """True when ``TRNSCI_REQUIRE_NKI`` asks that every fallback be an error."""
    return _env.flag("TRNSCI_REQUIRE_NKI")


_nki_module = None


def _device_available() -> bool:
    global _nki_module
    if _nki_module is None:  # imported late: the kernel layer imports this module's users
        from trnsci import nki as _nki_module
    # the real toolchain, or a test stand-in device active (trnsci.runtime)
    return (_nki_module.HAS_NKI or _nki_module.standin_active) and _nki_module.has_neuron_device()


def _settled_on_torch(name: str) -> bool:
    """True when the rule (:func:`_decide`) answers "torch", raising nothing, whatever the call's arguments.

    That is backend ``"torch"``, or ``"auto"`` on a machine without a
    NeuronCore while ``TRNSCI_REQUIRE_NKI`` is unset -- every call on a CPU
    machine. :meth:`Op.__call__` checks this first and runs the torch
    lowering without working out the size, dtype or kernel support, which
    the answer cannot depend on. Read afresh on every call: a change of
    backend, environment or (in tests) device takes effect at once.
    """
    return name == "torch" or (name == "auto" and not _device_available() and not _env.flag("TRNSCI_REQUIRE_NKI"))


def kernels_possible(library: str, name: str | None = None) -> bool:
    """Whether an op of ``library`` may run an NKI kernel under backend ``name`` (its setting now if None).

    The rule every :class:`Op` call applies before it weighs sizes and
    dtypes: backend ``"nki"`` or ``"simulator"``, or ``"auto"`` where a
    NeuronCore and the toolchain (or the stand-in device) are present. Code
    that composes another library's public functions asks it to skip their
    public layer when they would run torch anyway.
    """
    if name is None:
        probe = _library_probes.get(library)
        if probe is None:
            torch_only(library)  # makes (and registers) the library's probe
            probe = _library_probes[library]
        if probe():  # every call of the library runs torch now: no kernel (the usual state, one frame)
            return False
        name = _backend.resolve(library).name
    return name in ("nki", "simulator") or (name == "auto" and _device_available())


def torch_probe(library: str | None) -> Callable[[], bool]:
    """A function of no arguments: True when a call of one of ``library``'s ops would now run
    its torch lowering whatever its arguments, and no :func:`plan_call` is collecting.

    The same answer as ``_settled_on_torch(backend.resolve(library).name)``
    (and not planning), read afresh on every call. The usual state -- no
    block, API setting or environment variable naming a backend,
    ``TRNSCI_REQUIRE_NKI`` unset, no Neuron SDK -- is recognised by presence
    probes and no parsing (one context variable while no backend was ever
    set in this context, else the four; then three environment variables;
    docs/perf-notes.md#design-fast-paths); anything else takes the full
    resolution. :meth:`Op.__call__` starts with it, and a library's public
    function may call ``OP.on_torch()`` to take its own inlined torch route
    for the default arguments.
    """
    variables, env_names = _backend.scope(library)
    getters = tuple(v.get for v in variables)
    keys = _env.raw_keys((*env_names, "TRNSCI_REQUIRE_NKI"))
    planning = _planning.get

    def full() -> bool:
        return planning() is None and _settled_on_torch(_backend.resolve(library).name)

    if keys is None or len(getters) != 4:  # not POSIX, or the suite scope: the full reading
        return full
    g0, g1, g2, g3 = getters
    k0, k1, k2 = keys
    environ = _env._data
    untouched = _backend.touched().get

    benign = _benign_seen.get
    getenv = environ.get

    def probe() -> bool:
        if untouched() is None or (g0() is None and g1() is None and g2() is None and g3() is None):
            # a set variable: its parse remembered by _benign_env, looked up here first (one frame fewer)
            if ((k0 not in environ and k1 not in environ and k2 not in environ)
                    or benign(raw := (getenv(k0), getenv(k1), getenv(k2))) or _benign_env(*raw)):
                nk = _nki_module
                if nk is None:  # not loaded yet (backend "torch" never asks for a device): load it once
                    _device_available()
                    nk = _nki_module
                if not nk.HAS_NKI and not nk.standin_active:  # "torch"/"auto", no NeuronCore possible
                    return planning() is None
        return full()

    # The usual state as parts and a test: trnsci.settled's wrappers write the same test out (one frame
    # fewer than calling the probe); when it is true the probe answers True, when false they ask the probe.
    # (plan_call sets the "touched" variable too: no plan is being collected while it is unset)
    def usual() -> bool:
        return (untouched() is None and k0 not in environ and k1 not in environ and k2 not in environ
                and (nk := _nki_module) is not None and not nk.HAS_NKI and not nk.standin_active)

    probe.usual = usual
    probe.usual_parts = (untouched, k0, k1, k2, environ)
    return probe


_library_probes: dict[str | None, Callable[[], bool]] = {}


def torch_only(library: str | None) -> bool:
    """True when every call of ``library``'s ops now runs its torch lowering whatever its arguments (the
    answer of :func:`torch_probe`, read afresh; False under torch.compile, where calls are operators).

    For a library's decision that is not one Op call -- whether a multi-step call takes its device path,
    which form of a matrix a kernel would need -- so that the rule stays here."""
    probe = _library_probes.get(library)
    if probe is None:
        probe = _library_probes.setdefault(library, torch_probe(library))
        traceable_as(probe, _never)
    return probe()


_benign_seen: dict[tuple, bool] = {}


def _benign_env(lib: bytes | None, suite: bytes | None, require: bytes | None) -> bool:
    """True when the raw values of ``TRN<LIB>_BACKEND``, ``TRNSCI_BACKEND`` and ``TRNSCI_REQUIRE_NKI``
    can only resolve to the torch answer on a machine without the Neuron SDK: each backend variable
    unset, blank (a shell's ``VAR=``: unset) or naming "torch" or "auto" (any case, spaces ignored; an
    alias of either), and REQUIRE_NKI unset or not a true value.

    The values are still read on every call (a change to ``os.environ`` takes effect at once); only their
    parsing is remembered, so a documented setting keeps the fast path of :func:`torch_probe`.
    """
    key = (lib, suite, require)
    hit = _benign_seen.get(key)
    if hit is None:
        def name(raw):
            v = os.fsdecode(raw).strip().lower() if raw is not None else ""
            return _backend.ALIASES.get(v, v)

        hit = (name(lib) in ("", "torch", "auto") and name(suite) in ("", "torch", "auto")
               and (require is None or os.fsdecode(require).strip().lower() not in _env._TRUE))
        if len(_benign_seen) > 64:
            _benign_seen.clear()
        _benign_seen[key] = hit
    return hit


class _Settled(dict):
    """:attr:`Op.settled`: ``clear()`` also empties every table of routes (a ``dict`` value) it holds,
    and advances ``epoch`` (routes kept on owner objects, :mod:`trnsci.settled`, carry the epoch they
    were settled in and are used only while it is current).

    A public function wrapped by :mod:`trnsci.settled` keeps a direct reference to its own table
    (one dictionary lookup per call instead of two); emptying the table in place is what makes
    ``OP.settled.clear()`` -- a lowering replaced, a route choice changed -- reach those references.
    """

    __slots__ = ("epoch",)

    def __init__(self) -> None:
        super().__init__()
        self.epoch = 0

    def clear(self) -> None:
        self.epoch += 1
        for v in list(self.values()):
            if type(v) is dict:
                v.clear()
        super().clear()


class Decision(NamedTuple):
    """Which backend runs an operation, and why.

    ``backend`` is ``"torch"``, ``"nki"`` or ``"simulator"``; ``requested``
    the effective setting (name and origin); ``size`` the value of the op's
    metric; ``threshold`` the NKI threshold that applied (``None`` when the
    size did not matter). A named tuple: immutable, and cheap to make on
    every call.
    """

    op: str
    backend: str
    reason: str
    requested: _backend.Setting
    size: float | None = None
    threshold: float | None = None

    def __str__(self) -> str:
        return f"{self.op}: {self.backend} ({self.reason})"


def decide(op: str, size: float | None = None, *, supported: bool = True, why_not: str = "") -> Decision:
    """Choose the backend for one call of ``op`` from its size and whether the kernel can take it.

    Libraries do not call this: :meth:`Op.decide` works out ``size`` and
    ``supported`` from the call's arguments and the declarations on the op.
    This function is the rule both follow.

    Parameters
    ----------
    op : str
        A registered operation name, e.g. ``"trnblas.gemm"``.
    size : float, optional
        The op's metric for this call (see :func:`registry`).
    supported : bool
        False when the kernel cannot take this call (dtype, layout, ...);
        ``why_not`` says why. Such a call runs on torch -- or raises
        :class:`NkiRequiredError` when ``TRNSCI_REQUIRE_NKI=1`` and an NKI
        backend was asked for.

    Raises
    ------
    RuntimeError
        Backend ``"nki"`` on a machine without a NeuronCore.
    NkiRequiredError
        ``TRNSCI_REQUIRE_NKI=1`` and no kernel would run.
    """
    from trnsci import validate  # torch-free import of this module: load the checks on first use

    if not isinstance(op, str):
        raise TypeError(f"decide: op must be an operation name (str), got {type(op).__name__}")
    if size is not None:
        size = validate.scalar(size, "size", "decide", complex_ok=False)
        if size != size:
            raise ValueError("decide: size must be a number, got NaN")
    supported = validate.flag(supported, "supported", "decide")
    if not isinstance(why_not, str):
        raise TypeError(f"decide: why_not must be a str, got {type(why_not).__name__}")
    entry = _REGISTRY.get(op)
    if entry is None:
        try:
            entry = _entry(op)
        except ValueError as e:
            raise ValueError(f"decide: op: {e}") from None
    setting = _backend.resolve(_library_of(op))
    return _decide(entry, setting, size, None if supported else (lambda: why_not))


def _decide(entry: Threshold, setting: _backend.Setting, size: float | Callable[[], float | None] | None,
            why_not: Callable[[], str | None] | None,
            residency: Callable[[], str | None] | None = None) -> Decision:
    """The decision rule. ``why_not()`` (called at most once, only when a kernel
    could otherwise run) returns None when the kernel can take the call.

    ``residency()`` (called only under ``"auto"`` when a kernel could run)
    names the device type when every operand already lives on a NeuronCore's
    device: such a call has no host transfer to amortize, so the threshold
    -- the size at which a kernel wins back moving its operands -- does not
    apply and the kernel runs.

    ``size`` may be a function of no arguments: it is then called only when
    the threshold is consulted, and the decisions that do not depend on the
    size carry ``size=None`` (:meth:`Op.decide` fills it in for reports).
    """
    op = entry.op
    name = setting.name
    if name == "torch":
        return Decision(op, "torch", _where(setting), setting, None if callable(size) else size)
    if name == "nki" and not _device_available():
        raise RuntimeError(
            f"{op}: {_where(setting)}, but this machine has no NeuronCore with the Neuron SDK "
            "(use 'auto' to fall back to torch, or 'simulator' to run the kernel on the CPU)"
        )
    lazy = callable(size)
    if name == "auto" and not _device_available():
        if require_nki():
            raise NkiRequiredError(f"{op}: TRNSCI_REQUIRE_NKI=1 but backend 'auto' found no NeuronCore")
        return Decision(op, "torch", _where(setting) + "; no NeuronCore on this machine", setting,
                        None if lazy else size)
    reason = why_not() if why_not is not None else None
    if reason is not None:
        if require_nki():
            raise NkiRequiredError(f"{op}: TRNSCI_REQUIRE_NKI=1 but the kernel cannot run this call: {reason}")
        return Decision(op, "torch", f"{_where(setting)}; kernel unsupported: {reason}", setting,
                        None if lazy else size)
    if name != "auto":  # "nki" (device checked above) or "simulator"
        return Decision(op, name, _where(setting), setting, None if lazy else size)
    # --- device runtime: resident operands have no transfer to amortize
    where = residency() if residency is not None else None
    if where is not None:
        return Decision(op, "nki", f"{_where(setting)}; operands resident on '{where}': no host transfer to "
                                   "amortize, threshold not applied", setting, None if lazy else size)
    # --- end device runtime
    if lazy:
        size = size()
    thr, origin = threshold(op)
    if size is not None and size < thr:
        reason = f"{_where(setting)}; {entry.metric}={size:g} below threshold {thr:g} ({origin})"
        return Decision(op, "torch", reason, setting, size, thr)
    shown = "unknown" if size is None else f"{size:g}"
    reason = f"{_where(setting)}; {entry.metric}={shown} >= threshold {thr:g} ({origin})"
    return Decision(op, "nki", reason, setting, size, thr)


_where_cache: dict[tuple[str, str], str] = {}
_library_cache: dict[str, str | None] = {}


def _where(setting: _backend.Setting) -> str:
    key = (setting.name, setting.origin)  # hashing a dataclass costs more than a tuple
    text = _where_cache.get(key)
    if text is None:
        text = _where_cache[key] = f"backend {setting.name!r} from {setting.origin}"
    return text


def _library_of(op: str) -> str | None:
    lib = _library_cache.get(op, 0)
    if lib == 0:
        head = op.split(".", 1)[0]
        lib = _library_cache[op] = head if head in _backend.LIBRARIES else None
    return lib


# ------------------------------------------------------------------ fallback

_warned: set[tuple[str, str, str]] = set()
_OUR_PACKAGES = ("trnsci", *_backend.LIBRARIES)


def _user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the first frame outside trnsci's packages.

    Counted for a ``warnings.warn`` call made directly in the caller of this
    function; the user's line is wherever the public function was called,
    however many library frames (NumPy wrappers, helpers, ``Op`` hops) lie
    between.
    """
    frame = sys._getframe(1)  # the function that will call warnings.warn: stacklevel 1
    level = 1
    while frame is not None:
        mod = frame.f_globals.get("__name__", "")
        if mod.split(".", 1)[0] not in _OUR_PACKAGES:
            return level
        frame = frame.f_back
        level += 1
    return level


def fallback(op: str, exc: BaseException) -> None:
    """Handle a kernel failure: raise under REQUIRE_NKI, else warn once per cause.

    A cause is the operation, the exception type and its message. The
    :class:`NkiFallbackWarning` points at the user's line (the first frame
    outside trnsci and its libraries).
    """
    if require_nki():
        raise NkiRequiredError(
            f"{op}: NKI kernel failed and TRNSCI_REQUIRE_NKI=1: {type(exc).__name__}: {exc}"
        ) from exc
    cause = (op, type(exc).__name__, str(exc))
    with _lock:
        if cause in _warned:
            return
        _warned.add(cause)
    warnings.warn(
        f"{op}: NKI kernel failed ({type(exc).__name__}: {exc}); the torch fallback computed the result",
        NkiFallbackWarning,
        stacklevel=_user_stacklevel(),
    )


# ------------------------------------------------------------------ operations

@dataclass
class Lowering:
    """One backend's implementation of an :class:`Op`, with what the kernel can take.

    Attributes
    ----------
    fn : callable
        The implementation; it takes the op's (canonical) arguments.
    dtypes : tuple of torch.dtype or None
        NKI lowerings: the dtypes the kernel takes, checked against the
        op's dtype for the call (see :class:`Op`'s ``dtype=``).
    supports : callable or None
        NKI lowerings: ``supports(*args, **kwargs) -> None | str``; a string
        says why the kernel cannot take this call (a shape beyond SBUF, an
        unsupported option).
    counts : callable or None
        NKI lowerings: ``counts(*args, **kwargs) -> dict | None``, the
        kernel's closed-form figures for this call: ``"kernel"`` (its
        name), ``"hbm_read_bytes"``, ``"hbm_write_bytes"`` and instruction
        counts per engine (``"tensor"``, ``"vector"``, ``"dma"``, ...), the
        same keys as the emulator's profile. None when no closed form
        applies (e.g. the host splits the call into several kernel runs).
    kernels : tuple of str, callable or None
        NKI lowerings: the names of the kernels a call launches, each once,
        in the order of its first launch -- a tuple, or ``kernels(*args,
        **kwargs) -> tuple`` when they depend on the call (a shape past one
        tile, a GEMM step through trnblas). For a lowering whose number of
        launches depends on the data (sweeps, iterations), where ``counts``
        has no closed form: the names come from ``counts`` when it gives
        figures, else from ``kernels``.
    """

    fn: Callable
    dtypes: tuple | None = None
    supports: Callable[..., str | None] | None = None
    counts: Callable[..., dict | None] | None = None
    kernels: tuple | Callable[..., tuple] | None = None


def _first_tensor_dtype(*args, **kwargs):
    for a in args:
        dt = getattr(a, "dtype", None)
        if dt is not None and hasattr(a, "shape"):
            return dt
    for a in kwargs.values():
        dt = getattr(a, "dtype", None)
        if dt is not None and hasattr(a, "shape"):
            return dt
    return None


class Op:
    """One operation, defined once: its size, its lowerings, and the one decision between them.

    Parameters
    ----------
    name : str
        ``"<library>.<op>"``, e.g. ``"trnblas.gemm"``; the library part picks
        the backend scope (``trnblas.use_backend``).
    metric : str
        What ``size`` measures: ``"flops"``, ``"points"`` (an FFT), ``"nnz"``
        (a sparse op), ``"samples"`` (an RNG), ...
    threshold : float
        The default smallest size at which the kernel beats torch under
        backend ``"auto"`` (see :func:`threshold` for overrides).
    size : callable, optional
        ``size(*args, **kwargs) -> float``: the metric for one call, from
        the same arguments the lowerings take. Without it the size is
        unknown (thresholds then never send a call to torch).
    dtype : callable, optional
        ``dtype(*args, **kwargs) -> torch.dtype``: the dtype checked
        against the NKI lowering's ``dtypes``. Default: the dtype of the
        first tensor argument.
    describe : callable, optional
        ``describe(*args, **kwargs) -> str``: the problem in words for
        :class:`Plan` (``"op(A) 64x32 @ op(B) 32x16 -> 64x16"``).
    doc, probe
        As :func:`register`.
    steps : callable, optional
        For a composition -- an op with no kernel of its own whose torch
        lowering calls other ops (a decomposition's GEMMs and SVDs through
        trnblas and trnsolver) -- ``steps(*args, **kwargs) -> [Plan, ...]``:
        the plans of those calls (each made by its own op's decision, as
        the call will make it), in the order they first run. A plan that
        decides torch for the op itself then names their kernels and the
        backend they run on.
    half : str or trnsci.precision.Promote, optional
        ``"float32"``: bfloat16/float16 calls (the call's ``dtype``) run the
        torch lowering on float32 copies of their half tensors (and
        protocol objects: sparse matrices) and get the float32 results
        rounded once to the input dtype; integer, bool and complex results
        are returned as computed (:mod:`trnsci.precision`).
        ``precision.promote("float32")``: the same upcast, the results kept
        in float32/complex64 (type promotion, as ``numpy.fft`` gives
        float16 data). An NKI lowering whose ``dtypes`` list the half dtype takes it
        as given. Default None: the lowerings take what they are given.

    Notes
    -----
    ``@op.lowering("torch")`` and ``@op.lowering("nki", dtypes=...,
    supports=..., counts=...)`` attach the implementations; the NKI lowering
    also serves ``"simulator"`` (it calls :func:`trnsci.nki.run`, which
    reads the target from the context). Every lowering takes the same
    arguments. ``op(*args, **kwargs)`` -- no keyword is reserved -- runs
    :meth:`decide` and then the chosen lowering; :meth:`plan` runs the same
    :meth:`decide` and reports. A kernel that raises falls back to torch
    (one :class:`NkiFallbackWarning` per cause, or :class:`NkiRequiredError`
    under ``TRNSCI_REQUIRE_NKI=1``).

    Examples
    --------
    >>> import torch, trnsci
    >>> from trnsci.dispatch import Op
    >>> SCALE = Op("example.scale", "elements", 1e6, size=lambda x, a: x.numel())
    >>> @SCALE.lowering("torch")
    ... def _scale_torch(x, a):
    ...     return x * a
    >>> SCALE(torch.ones(3), 2.0).tolist()
    [2.0, 2.0, 2.0]
    >>> SCALE.plan(torch.ones(3), 2.0).backend
    'torch'
    """

    def __init__(self, name: str, metric: str, threshold: float, *, size: Callable[..., float] | None = None,
                 dtype: Callable | None = None, describe: Callable[..., str] | None = None,
                 doc: str = "", probe: Callable | None = None, schema: str | None = None,
                 fake: Callable | None = None, steps: Callable[..., list] | None = None,
                 to_operator: Callable | None = None, from_operator: Callable | None = None,
                 differentiable: bool = True, half: Any = None):
        self.name = name
        self.half = half
        """The dtype bfloat16/float16 calls compute in (``"float32"``: results rounded back;
        ``precision.promote("float32")``: results kept), applied by the core around the torch lowering
        (:mod:`trnsci.precision`); None: the lowerings take what they are given."""
        if half is not None:
            from trnsci import precision

            precision.compute_dtype(half, f"{name}: half")
        self.metric = metric
        self._entry = register(name, metric, threshold, doc, probe)
        self._size = size
        self._dtype = dtype or _first_tensor_dtype
        self._describe = describe
        self._steps = steps
        self._library = _library_of(name)
        self._lowerings: dict[str, Lowering] = {}
        self._torch: Callable | None = None
        self.settled: dict = _Settled()
        """Settled torch routes of the library's public layer: a public function -> its table of
        routes (:mod:`trnsci.settled`). Emptied when a lowering changes."""
        self.on_torch: Callable[[], bool] = torch_probe(self._library)
        """``OP.on_torch()``: True when a call now runs the torch lowering whatever its
        arguments (see :func:`torch_probe`)."""
        if _dynamo_hooked[0] is None and "torch" in sys.modules:
            _hook_dynamo()
        traceable_as(self.on_torch, _never)  # under torch.compile every call takes the operator path
        self.schema = schema
        """The torch operator's schema (``"(Tensor A, float alpha) -> Tensor"``), or None: no operator."""
        self._fake = fake
        self._to_operator = to_operator
        """``to_operator(*args, **kwargs) -> tuple``: the operator's arguments from the lowering's, for an op
        whose lowering takes what a schema cannot carry (a generator's 64-bit key and 66-bit position cross
        as an integer tensor); ``from_operator(*operator_args) -> tuple`` is its inverse, run inside the
        operator's implementation. The fake implementation takes the operator's arguments."""
        self._from_operator = from_operator
        self._result = None
        """``result(out, *operator_args)``: the operator's outputs from the lowering's result, for a lowering
        that returns host values (an iteration count, a list); set with :meth:`boundary`."""
        self.differentiable = differentiable
        """False for an operation without a derivative (a random draw): its operator marks the outputs
        non-differentiable and its backward returns no gradients."""
        self._backward: Callable | None = None
        self._backward_doc = ("", "")
        self._operator = None
        self._arity = -1  # the operator's number of arguments (set with it)
        with _lock:
            _OPS[name] = self
        if schema is not None:
            from trnsci import operators

            operators.define(self)

    # ----------------------------------------------------------- declaring

    def lowering(self, backend: str, *, dtypes=None, supports: Callable[..., str | None] | None = None,
                 counts: Callable[..., dict | None] | None = None, kernels=None):
        """Decorator attaching the ``"torch"`` or ``"nki"`` implementation.

        ``dtypes``, ``supports``, ``counts`` and ``kernels`` belong to the NKI
        lowering (see :class:`Lowering`). Registering a second lowering for one
        backend is a ``ValueError``; tests swap lowerings with
        :meth:`override`.
        """
        if backend not in ("torch", "nki"):
            raise ValueError(f"lowering backend must be 'torch' or 'nki', got {backend!r}")
        if backend == "torch" and (dtypes is not None or supports is not None or counts is not None
                                   or kernels is not None):
            raise ValueError(f"{self.name}: dtypes/supports/counts/kernels describe the NKI lowering, "
                             "not the torch one")

        def register_lowering(fn: Callable) -> Callable:
            if backend in self._lowerings:
                raise ValueError(f"{self.name}: a {backend!r} lowering is already registered "
                                 f"({getattr(self._lowerings[backend].fn, '__qualname__', '?')}); "
                                 "use Op.override to replace it in a test")
            self._set(backend, Lowering(fn, tuple(dtypes) if dtypes is not None else None, supports, counts,
                                        tuple(kernels) if isinstance(kernels, (list, tuple)) else kernels))
            return fn

        return register_lowering

    def _set(self, backend: str, low: Lowering | None) -> None:
        if low is None:
            self._lowerings.pop(backend, None)
        else:
            self._lowerings[backend] = low
        t = self._lowerings.get("torch")
        self._torch = t.fn if t is not None else None
        if self._torch is not None and self.half is not None:
            from trnsci import precision

            self._torch = precision.around(self._torch, self.half, self._dtype)
        self.settled.clear()

    @contextlib.contextmanager
    def override(self, backend: str, fn: Callable | None, **declarations):
        """Replace (``fn``) or remove (``None``) one lowering inside a ``with`` block.

        For tests: a spy, a deliberately broken kernel, or no kernel at all.
        ``declarations`` (``dtypes=``, ``supports=``, ``counts=``, ``kernels=``) default to
        the replaced lowering's. The original is restored on exit.

        >>> from trnblas.level3 import GEMM
        >>> with GEMM.override("nki", None):
        ...     GEMM.has_kernel
        False
        """
        if backend not in ("torch", "nki"):
            raise ValueError(f"lowering backend must be 'torch' or 'nki', got {backend!r}")
        old = self._lowerings.get(backend)
        if fn is None:
            new = None
        else:
            base = old or Lowering(fn)
            new = Lowering(fn, declarations.get("dtypes", base.dtypes), declarations.get("supports", base.supports),
                           declarations.get("counts", base.counts), declarations.get("kernels", base.kernels))
        self._set(backend, new)
        try:
            yield self
        finally:
            self._set(backend, old)

    @property
    def has_kernel(self) -> bool:
        return "nki" in self._lowerings

    def lowering_for(self, backend: str) -> Lowering | None:
        """The :class:`Lowering` registered for ``"torch"`` or ``"nki"`` (None if none)."""
        return self._lowerings.get(backend)

    # ----------------------------------------------------------- deciding

    def size(self, *args, **kwargs) -> float | None:
        """The op's metric for this call (None without a ``size`` function)."""
        return None if self._size is None else self._size(*args, **kwargs)

    def why_not(self, *args, **kwargs) -> str | None:
        """None when the NKI lowering can take this call, else why not (no kernel, dtype, ``supports``)."""
        low = self._lowerings.get("nki")
        if low is None:
            return "no NKI kernel for this operation yet"
        if low.dtypes is not None:
            dt = self._dtype(*args, **kwargs)
            if dt not in low.dtypes:
                from trnsci.nki import hw

                return hw.why_not_dtype(dt, low.dtypes)
        if low.supports is not None:
            reason = low.supports(*args, **kwargs)
            if reason:
                return reason
        if self._operator is None and _grad_mode_on() and _requires_grad(args, kwargs):
            # a kernel's output would carry no gradient: without a torch operator (whose autograd
            # formula covers the kernel) the call runs the torch lowering, which is differentiable
            return "autograd: no torch operator with a backward for this op yet (the torch path is differentiable)"
        return None

    def decide(self, *args, **kwargs) -> Decision:
        """Which backend runs this call and why -- the one rule :meth:`__call__` and :meth:`plan` share.

        The returned :class:`Decision` always carries the call's size (when
        the op declares a size function), whether or not the rule needed it.
        """
        d = self._decide(args, kwargs)
        if d.size is None and self._size is not None:
            d = d._replace(size=self._size(*args, **kwargs))
        return d

    def _decide(self, args: tuple, kwargs: dict) -> Decision:
        """:func:`_decide` for this call; the size is worked out only if the threshold is consulted."""
        setting = _backend.resolve(self._library)
        size_fn = self._size
        size = None if size_fn is None else (lambda: size_fn(*args, **kwargs))
        return _decide(self._entry, setting, size, lambda: self.why_not(*args, **kwargs),
                       lambda: _residency(args, kwargs))

    def plan(self, *args, **kwargs) -> Plan:
        """What :meth:`__call__` would do with these arguments, as a printable :class:`Plan`."""
        if self._operator is not None and _grad_mode_on():
            # a call with inputs that require grad goes through the torch operator, whose implementation
            # decides with autograd below it (grad mode off): the plan decides as that implementation will
            import torch

            with torch.no_grad():
                return self.plan(*args, **kwargs)
        d = self.decide(*args, **kwargs)
        kernel = None
        names: tuple = ()
        low = self._lowerings.get("nki")
        if d.backend != "torch" and low is not None:
            if low.counts is not None:
                figures = low.counts(*args, **kwargs)
                if figures is not None:
                    figures = dict(figures)
                    kernel = {"name": figures.pop("kernel", None), **figures}
            names = _kernel_names(low, kernel, args, kwargs)
        backend, reason = d.backend, d.reason
        if d.backend == "torch" and self._steps is not None:  # a composition: its steps' kernels
            ran = [p for p in self._steps(*args, **kwargs) if p.kernels]
            if ran:
                names = tuple(dict.fromkeys(k for p in ran for k in p.kernels))
                backend = ran[0].backend
                reason = (f"{d.reason}; its steps run kernels by their own ops' decisions: "
                          + ", ".join(dict.fromkeys(f"{p.op} ({p.backend})" for p in ran)))
        desc = self._describe(*args, **kwargs) if self._describe is not None else ""
        dt = self._dtype(*args, **kwargs)
        moved = None
        if backend == "nki":  # host operands go to the device once (trnsci.runtime)
            from trnsci import runtime

            moved = runtime.transfer_bytes(args, kwargs)
        return Plan(self.name, backend, reason, self.metric, d.size, d.threshold, dt, desc, kernel, d, moved,
                    names)

    # ----------------------------------------------------------- running

    def __call__(self, *args, **kwargs):
        # The common case first, and cheaply: when the answer cannot depend on
        # the arguments (backend "torch"; "auto" without a NeuronCore) and no
        # plan_call is collecting, run the torch lowering without computing the
        # size, dtype or kernel support -- also for inputs that require grad (the
        # torch lowering is differentiable) and for meta/fake tensors (it is the
        # fake implementation as well). Under torch.compile the probe reads False
        # (trnsci.operators) and the call becomes the torch operator. Everything
        # else goes through the full rule, which plan() shares.
        if self.on_torch() and self._torch is not None:
            return self._torch(*args, **kwargs)
        if _compiling():
            return self._traced(args, kwargs)
        if self._operator is not None and _planning.get() is None:
            if _needs_operator(args, kwargs):
                return self.operator_call(*args, **kwargs)
            if self._result is not None:  # tensors may hide in the lowering's objects (a matrix in a matvec)
                crossed = self._to_operator(*args, **kwargs)
                if crossed is not None and _needs_operator(crossed, {}):
                    return self._operator(*crossed)
        return self.run(*args, **kwargs)

    def _traced(self, args: tuple, kwargs: dict):
        """A call seen by torch.compile: the torch operator, or (an Op without one) the torch lowering inline."""
        if self._operator is not None:
            if self._to_operator is None:
                return self.operator_call(*args, **kwargs)
            crossed = self._to_operator(*args, **kwargs)
            if crossed is not None:
                return self._operator(*crossed)
        if self._torch is None:
            raise NotImplementedError(f"{self.name}: no torch lowering registered")
        return self._torch(*args, **kwargs)

    def operator_call(self, *args, **kwargs):
        """``torch.ops.<library>.<name>(...)`` on the lowering's arguments (see :mod:`trnsci.operators`)."""
        if self._to_operator is not None:
            crossed = self._to_operator(*args, **kwargs)
            if crossed is None:  # this call's arguments cross no schema: the plain Op
                return self.run(*args, **kwargs)
            return self._operator(*crossed)
        if not kwargs and len(args) <= self._arity:
            return self._operator(*args)
        from trnsci import operators

        return operators.call(self, args, kwargs)

    @property
    def operator(self):
        """The torch operator (``torch.ops.<library>.<name>.default``), None for an Op without a schema."""
        return self._operator

    def backward(self, fn: Callable | None = None, *, formula: str = "", runs: str = ""):
        """Decorator declaring the derivative: ``fn(inputs, output, grad, needs) -> grads``.

        ``inputs`` are the lowering's arguments as the operator got them,
        ``output`` its result, ``grad`` the incoming gradient (a tuple for
        an op returning several tensors) and ``needs`` one bool per input
        (its gradient is wanted); ``fn`` returns one entry per input
        (None where there is none), built from forward :class:`Op` calls so
        that the backward runs kernels as the forward does. Without it the
        backward is a vjp through the torch lowering. ``formula`` and
        ``runs`` (which ops the backward calls) go to the generated table of
        :func:`trnsci.operators.autograd_table`.
        """
        if fn is None:
            return lambda f: self.backward(f, formula=formula, runs=runs)
        self._backward = fn
        self._backward_doc = (formula, runs)
        return fn

    def not_differentiable(self, why: str) -> None:
        """Declare that the operation has no derivative (``why`` says so in the generated table).

        A backward pass that reaches the operator raises a ``RuntimeError``
        naming it, as torch does for its own functions without a derivative;
        outputs that are not floating (an index) never ask for one.
        """
        name = self.name

        def no_derivative(inputs, output, grad, needs):
            raise RuntimeError(f"{name} is not differentiable ({why})")

        self._backward = no_derivative
        self._backward_doc = (f"none: {why}", "")

    def boundary(self, to_operator: Callable, from_operator: Callable, result: Callable | None = None) -> None:
        """Declare how a call's arguments cross the torch operator's boundary after the Op is made (the
        ``to_operator``/``from_operator`` arguments of the constructor): ``to_operator(*args, **kwargs)``
        gives the operator's arguments from the lowering's, ``from_operator(*op_args)`` the lowering's
        back (what the operator's implementation runs). The fake implementation and the backward take
        the operator's arguments.

        ``to_operator`` may return None: that call's arguments cross no schema (a callable operator, a
        callback) and it runs as a plain Op (inside torch.compile, its torch lowering inline).
        ``result(out, *op_args)``, if given, turns the lowering's result into the operator's outputs
        (tensors; an iteration count as a 0-d tensor); the caller of the Op then gets either form."""
        self._to_operator = to_operator
        self._from_operator = from_operator
        self._result = result

    def register_device(self, dispatch_key: str, fn: Callable) -> None:
        """The device hook: ``fn`` (the lowering's arguments) implements the operator for ``dispatch_key``
        (``"PrivateUse1"``, ``"XLA"``); the operator's default implementation stays the one decision."""
        from trnsci import operators

        operators.register_device(self, dispatch_key, fn)

    def run(self, *args, **kwargs):
        """The one decision and its lowering, without the operator: what the operator's implementation runs."""
        if self.on_torch() and self._torch is not None:
            return self._torch(*args, **kwargs)
        if _planning.get() is not None:
            raise _Planned(self.plan(*args, **kwargs))
        decision = self._decide(args, kwargs)
        if decision.backend == "torch":
            if self._torch is None:
                raise NotImplementedError(f"{self.name}: no torch lowering registered")
            return self._torch(*args, **kwargs)
        return self.execute(decision, *args, **kwargs)

    def execute(self, decision: Decision, *args, **kwargs):
        """Run the lowering ``decision`` chose (torch fallback on a kernel failure)."""
        torch_impl = self._torch
        if decision.backend == "torch":
            return torch_impl(*args, **kwargs)
        from trnsci import nki

        try:
            with nki.target(decision.backend):
                return self._lowerings["nki"].fn(*args, **kwargs)
        except (KeyboardInterrupt, NkiRequiredError):
            raise
        except Exception as exc:  # a kernel failure: never a wrong answer
            fallback(self.name, exc)
            return torch_impl(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Op({self.name!r}, metric={self.metric!r}, lowerings={sorted(self._lowerings)})"


_OPS: dict[str, Op] = {}


def _kernel_names(low: Lowering, kernel: dict | None, args: tuple, kwargs: dict) -> tuple:
    """The kernels an NKI lowering launches for a call, each once, in the order of its first launch:
    the launches its closed-form figures name, else its ``kernels`` declaration."""
    names = kernel.get("kernels") or ([kernel["name"]] if kernel.get("name") else []) if kernel is not None else ()
    declared = low.kernels
    if not names and declared is not None:
        names = declared(*args, **kwargs) if callable(declared) else declared
    return tuple(dict.fromkeys(names))


def _residency(args: tuple, kwargs: dict) -> str | None:
    """The device type when a call's operands all live on a NeuronCore's device (:mod:`trnsci.runtime`)."""
    from trnsci import runtime

    return runtime.residency(args, kwargs)


def _grad_mode_on() -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and torch.is_grad_enabled()


def _requires_grad(args: tuple, kwargs: dict) -> bool:
    """True when a tensor argument (or one inside a list/tuple argument) requires grad."""
    for a in (*args, *kwargs.values()):
        if getattr(a, "requires_grad", False) is True:
            return True
        if isinstance(a, (list, tuple)) and _requires_grad(tuple(a), {}):
            return True
    return False


def _never() -> bool:
    """What :func:`torch_probe`'s probes read as under torch.compile: the operator path, never the inline one."""
    return False


def _compiling() -> bool:
    """True while torch.compile (Dynamo) or torch.export traces; read only off the torch fast path."""
    ic = _is_compiling
    if ic is None:
        return False
    return ic()


_is_compiling = None  # torch.compiler.is_compiling once torch is loaded (this module imports without torch)


def _needs_operator(args: tuple, kwargs: dict) -> bool:
    """True when a call that is not on the torch fast path must go through the torch operator:
    an input requires grad (a kernel's output carries no gradient otherwise), or is a meta or fake
    tensor (the operator's fake implementation). A call on tensors resident on a device runs the one
    decision directly -- what the operator's implementation would run -- so host-side arguments
    that no schema carries (a matrix's cached layouts) keep the resident tables in use."""
    import torch

    grad = torch.is_grad_enabled()
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            if (grad and a.requires_grad) or a.is_meta or _is_fake(a):
                return True
        elif isinstance(a, (list, tuple)):
            if _needs_operator(tuple(a), {}):
                return True
    return False


def _is_fake(t) -> bool:
    if type(t) is sys.modules["torch"].Tensor:
        return False
    fake = sys.modules.get("torch._subclasses.fake_tensor")
    return fake is not None and isinstance(t, fake.FakeTensor)


_traceable: list[tuple[Callable, Callable]] = []
_dynamo_registered: set[int] = set()


def traceable_as(original: Callable, traced: Callable) -> None:
    """Have torch.compile trace ``traced`` wherever it meets ``original`` (same arguments, same result).

    For fast paths Dynamo cannot (or should not) trace: a public function's
    settled wrapper traces as its full form, an Op's torch probe as False.
    Registered with Dynamo when it is imported (now, or later through an
    import hook), so importing trnsci does not import Dynamo.
    """
    _traceable.append((original, traced))
    if "torch._dynamo" in sys.modules and _dynamo_hooked[0] == "loaded":
        _register_traceable()


_dynamo_hooked = [None]


def argument_errors(traced: Callable) -> Callable:
    """``traced`` -- the form torch.compile traces of a public function -- with its argument errors
    leaving a ``fullgraph`` compilation as themselves.

    Dynamo turns an exception raised by traced code into a graph break, and under
    ``torch.compile(..., fullgraph=True)`` (or ``torch.export``) into ``Unsupported: Observed
    exception``. A ``TypeError``/``ValueError`` (or subclass) raised by the public function's checks
    while tracing is instead raised to the caller of the compiled function: an instance of a class
    derived from the eager exception's class (``isinstance`` holds, the message is the eager one,
    followed by Dynamo's "from user code" lines). Without ``fullgraph`` the error is a graph break,
    and the frame runs eagerly and raises the eager exception itself. Eager calls never reach this.
    """
    def guarded(*args, **kwargs):
        try:
            return traced(*args, **kwargs)
        except (TypeError, ValueError) as e:
            _escape(type(e), e.args)
            raise

    guarded.__name__ = getattr(traced, "__name__", "guarded")
    guarded.__qualname__ = getattr(traced, "__qualname__", guarded.__name__)
    return guarded


def _trace_public(module) -> None:
    """Every public function of ``module`` (its ``__all__``) that has no traced form yet traces as itself
    under :func:`argument_errors` (a copy of the function: the original is what Dynamo replaces)."""
    import types

    if module is None:
        return
    have = {id(o) for o, _ in _traceable} | _dynamo_registered
    for name in getattr(module, "__all__", ()):
        fn = getattr(module, name, None)
        if type(fn) is not types.FunctionType or id(fn) in have:
            continue
        copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        copy.__kwdefaults__ = fn.__kwdefaults__
        copy.__qualname__ = fn.__qualname__
        traceable_as(fn, argument_errors(copy))
        have.add(id(fn))


_escape_classes: dict[type, type] = {}


def _escaping(exc_type: type) -> type:
    """``exc_type`` made a Dynamo ``UserError`` too: the one kind of error Dynamo lets out of a fullgraph
    compilation as it is."""
    cls = _escape_classes.get(exc_type)
    if cls is None:
        from torch._dynamo.exc import UserError, UserErrorType

        def __init__(self, *args):
            UserError.__init__(self, UserErrorType.INVALID_INPUT, str(args[0]) if args else "")
            self.args = args

        cls = type(exc_type.__name__, (exc_type, UserError),
                   {"__init__": __init__, "__module__": exc_type.__module__, "__qualname__": exc_type.__qualname__,
                    "__str__": exc_type.__str__})
        _escape_classes[exc_type] = cls
    return cls


def _escape(exc_type: type, args: tuple) -> None:
    """Called by Dynamo while tracing (a constant-folded call, run for real): under ``fullgraph``, raise
    the argument error as an escaping one (:func:`argument_errors`); otherwise return, and the traced
    code re-raises it (a graph break)."""
    from torch._dynamo.symbolic_convert import InstructionTranslator

    tx = InstructionTranslator.current_tx()
    if tx is None or not (getattr(tx, "one_graph", False) or getattr(tx, "error_on_graph_break", False)):
        return None
    try:
        err = _escaping(exc_type)(*args)
    except Exception:  # noqa: BLE001 (an exception class that cannot be derived: the graph break instead)
        return None
    raise err


_escape._dynamo_marked_constant = True  # torch._dynamo.assume_constant_result's mark: Dynamo runs it for real


def _register_traceable() -> None:
    from torch._dynamo.decorators import substitute_in_graph

    _dynamo_reverse_matmul()
    while _traceable:
        original, traced = _traceable.pop()
        if id(original) in _dynamo_registered:
            continue
        _dynamo_registered.add(id(original))
        substitute_in_graph(original, skip_signature_check=True)(traced)


def _dynamo_reverse_matmul() -> None:
    """Let Dynamo trace ``A @ x`` for an object ``A`` that defines ``__torch_function__`` (a trnsparse matrix).

    Dynamo hands a binary operator on a tensor and such an object to the object's ``__torch_function__``,
    the object second: ``obj - t`` arrives as ``Tensor.__rsub__(t, obj)``, from its table of reversed tensor
    methods. That table has no entry for ``@`` (``1 @ t`` has no meaning), so ``obj @ t`` arrived as
    ``Tensor.matmul(t, obj)``: indistinguishable from ``t @ obj``. The entry added here makes it
    ``Tensor.__rmatmul__(t, obj)``, which is what Python itself would call for a tensor on the right. A
    Dynamo without the table (another torch) is left as it is."""
    import operator

    import torch

    try:
        from torch._dynamo.variables import builtin
    except ImportError:
        return
    table = getattr(builtin, "BUILTIN_TO_TENSOR_RFN_MAP", None)
    if isinstance(table, dict):
        table.setdefault(operator.matmul, torch.Tensor.__rmatmul__)
        _reverse_matmul[0] = table[operator.matmul] is torch.Tensor.__rmatmul__


#: whether Dynamo traces ``obj @ t`` as ``Tensor.__rmatmul__(t, obj)`` (see :func:`_dynamo_reverse_matmul`)
_reverse_matmul = [False]


def dynamo_orders_matmul() -> bool:
    """True when Dynamo, if loaded, tells ``obj @ t`` from ``t @ obj`` in an object's ``__torch_function__``
    (``Tensor.__rmatmul__(t, obj)`` against ``Tensor.matmul(t, obj)``); read by code that Dynamo traces."""
    return _reverse_matmul[0]


class _DynamoHook:
    """A ``sys.meta_path`` finder that registers :func:`traceable_as` substitutions once Dynamo is imported."""

    @staticmethod
    def find_spec(name, path, target=None):
        if name != "torch._dynamo":
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module):
            run(module)
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(_DynamoHook)
            _dynamo_hooked[0] = "loaded"
            _register_traceable()

        loader.exec_module = exec_module
        return spec


def _hook_dynamo() -> None:
    """Called once torch is imported (by :mod:`trnsci.operators`)."""
    global _is_compiling
    import torch

    _is_compiling = torch.compiler.is_compiling
    if _dynamo_hooked[0] is not None:
        return
    if "torch._dynamo" in sys.modules:
        _dynamo_hooked[0] = "loaded"
        _register_traceable()
    else:
        _dynamo_hooked[0] = "hooked"
        sys.meta_path.insert(0, _DynamoHook)


def load_lowerings(library: str) -> bool:
    """Import ``<library>._nki``, where every NKI lowering of a library registers itself.

    Each library's ``__init__`` calls this last, after its public functions
    (and their Ops) exist. A kernel module that fails to import must not take
    the torch path down: it warns once (``RuntimeWarning``) and every op of
    the library runs on torch -- or, under ``TRNSCI_REQUIRE_NKI=1``, raises
    :class:`NkiRequiredError`. Returns True when the lowerings registered.
    """
    import importlib

    _trace_public(sys.modules.get(library))
    try:
        importlib.import_module(f"{library}._nki")
    except Exception as exc:
        if require_nki():
            raise NkiRequiredError(f"{library}: NKI lowerings failed to import: {exc}") from exc
        warnings.warn(f"{library}: NKI lowerings not registered ({type(exc).__name__}: {exc}); "
                      "every operation runs on torch", RuntimeWarning, stacklevel=3)
        return False
    return True


def ops(library: str | None = None) -> dict[str, Op]:
    """Every :class:`Op` created so far (name -> Op), optionally of one library."""
    with _lock:
        items = dict(_OPS)
    if library is None:
        return items
    return {k: v for k, v in items.items() if k.split(".", 1)[0] == library}


# ------------------------------------------------------------------ plans

@dataclass(frozen=True)
class Plan:
    """What one call would run, and why -- printable, in the manner of opt_einsum's ``PathInfo``.

    Attributes
    ----------
    op : str or None
        The dispatched operation (``"trnblas.gemm"``); None when the call
        dispatches nothing (a quick return, or a function with no ``Op``).
    backend : str
        ``"torch"``, ``"nki"`` or ``"simulator"``.
    reason : str
        Why, in words (backend setting and its origin, kernel support,
        size against threshold).
    metric : str
        The op's size metric (``"flops"``, ``"points"``, ``"nnz"``, ...).
    size : float or None
        Its value for this call; also readable under the metric's name
        (``plan.flops``, ``plan.points``, ...).
    threshold : float or None
        The NKI threshold that applied (None when the size did not matter).
    dtype : torch.dtype or None
    description : str
        The problem in words (shapes and options), when the op describes it.
    kernel : dict or None
        When a kernel would run and has a closed form: ``{"name": ...,
        "hbm_read_bytes": ..., "hbm_write_bytes": ..., "tensor": ..., ...}``
        -- the figures the emulator's counters reproduce exactly. A call
        that launches several kernels in a fixed order may list them as
        ``"kernels": [name, ...]``; the figures are then their sums.
    decision : Decision or None
    transfer_bytes : int or None
        Under backend ``"nki"``: the bytes of host operands moved to the
        device for the call (the results come back to the host as well); 0
        when every operand already lives there. None when no kernel would
        run on a device.
    kernels : tuple of str
        The kernels the call launches, each named once, in the order of its
        first launch (how often each runs may depend on the data: sweeps,
        iterations); ``()`` when no kernel runs (backend ``"torch"``, or a
        call that plans as host-only).
    """

    op: str | None
    backend: str
    reason: str
    metric: str = ""
    size: float | None = None
    threshold: float | None = None
    dtype: Any = None
    description: str = ""
    kernel: dict | None = None
    decision: Decision | None = None
    transfer_bytes: int | None = None
    kernels: tuple = ()

    def __getattr__(self, name: str):
        if name != "metric" and name == self.__dict__.get("metric"):
            return self.size
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")

    def __str__(self) -> str:
        thr = "(not consulted)" if self.threshold is None else f"{self.threshold:,.0f}"
        size = "unknown" if self.size is None else f"{self.size:,.0f}"
        rows = [("operation", self.op or "(none dispatched)")]
        if self.description:
            rows.append(("shapes", self.description))
        if self.dtype is not None:
            rows.append(("dtype", str(self.dtype).replace("torch.", "")))
        if self.op is not None:
            rows += [(self.metric or "size", size), ("threshold", thr)]
        rows += [("backend", self.backend), ("reason", self.reason)]
        if self.transfer_bytes is not None:
            rows.append(("transfer", f"{self.transfer_bytes:,} B of host operands to the device"
                         + (" and the results back" if self.transfer_bytes else " (operands resident)")))
        if self.kernels and not (self.kernel and self.kernel.get("name")):
            rows.append(("kernels", ", ".join(self.kernels)))
        if self.kernel:
            k = self.kernel
            if k.get("kernels"):  # several launches: their order, then the summed figures
                rows.append(("launches", " -> ".join(k["kernels"])))
            counts = ", ".join(f"{key} {v:,}" for key, v in k.items()
                               if key not in ("name", "kernels", "hbm_read_bytes", "hbm_write_bytes", "flops"))
            rows.append(("kernel", f"{k.get('name')}: HBM read {k.get('hbm_read_bytes', 0):,} B, "
                                   f"write {k.get('hbm_write_bytes', 0):,} B; {counts} (closed form)"))
        width = max(len(r[0]) for r in rows)
        return "\n".join(f"{key:>{width}}: {v}" for key, v in rows)


class _Planned(Exception):
    def __init__(self, plan: Plan):
        super().__init__(plan.op)
        self.plan = plan


_planning: contextvars.ContextVar[bool | None] = contextvars.ContextVar("trnsci_planning", default=None)


def plan_call(fn: Callable, *args, **kwargs) -> Plan:
    """Plan a call of a public function: validate as the call would, then report its first :class:`Op`.

    ``fn(*args, **kwargs)`` runs up to the first dispatched operation, which
    is planned (:meth:`Op.plan`) instead of run; nothing is computed. A call
    that reaches no operation (a quick return such as ``alpha == 0``, or a
    function that always runs on torch) plans as ``op=None``, ``"torch"``.
    Invalid arguments raise exactly as the call would.

    Examples
    --------
    >>> import torch, trnblas
    >>> from trnsci.dispatch import plan_call
    >>> with trnblas.use_backend("torch"):
    ...     p = plan_call(trnblas.gemm, 1.0, torch.ones(4, 3), torch.ones(3, 2))
    >>> p.op, p.backend, p.flops
    ('trnblas.gemm', 'torch', 48)
    """
    if not callable(fn):
        raise TypeError(f"plan_call: fn must be a trnsci function to plan, got {type(fn).__name__}")
    token = _planning.set(True)
    touched = _backend.touched().set(True)  # off the probes' usual state (torch_probe) while planning
    try:
        fn(*args, **kwargs)
    except _Planned as planned:
        return planned.plan
    finally:
        _backend.touched().reset(touched)
        _planning.reset(token)
    name = getattr(fn, "__qualname__", repr(fn))
    return Plan(None, "torch", f"{name} dispatches no operation for these arguments "
                               "(a quick return, or a function that always runs on torch)")


#: Public names a library's ``plan`` refuses: configuration (planning runs a call up to its first
#: operation, so these would change a setting) and the planners themselves.
_NOT_PLANNED_PREFIXES = ("set_", "get_", "use_", "reset_", "clear_", "plan")


def plan_function(library: str, op_name: str, *args, exclude: tuple = (), **kwargs) -> Plan:
    """``plan_call`` of ``library``'s public function named ``op_name``: what each library's ``plan`` does.

    ``op_name`` is a name in ``library.__all__``, with or without the
    ``"<library>."`` prefix; ``args``/``kwargs`` are that function's own
    arguments, validated as the call would validate them. Configuration
    (``set_*``, ``use_*``, ...), the planners, non-callables and
    ``exclude`` are refused with a ``ValueError`` naming ``op_name``.
    """
    import importlib

    lib = importlib.import_module(library)
    key = op_name[len(library) + 1:] if isinstance(op_name, str) and op_name.startswith(library + ".") else op_name
    fn = getattr(lib, key, None) if isinstance(key, str) and key in lib.__all__ else None
    if (fn is None or not callable(fn) or key.startswith(_NOT_PLANNED_PREFIXES) or key in exclude
            or (isinstance(fn, type) and issubclass(fn, BaseException))):
        if not isinstance(op_name, str):
            raise TypeError(f"plan: op_name must be the name of a public {library} function (str), "
                            f"got {type(op_name).__name__}")
        raise ValueError(f"plan: op_name must name a public {library} function that computes (e.g. "
                         f"{_example(lib)!r}), got {op_name!r}")
    return plan_call(fn, *args, **kwargs)


def _example(lib) -> str:
    """The first public function of ``lib`` (a module) that is also the name of one of its ops."""
    names = sorted({op.name.split(".", 1)[1] for op in ops(lib.__name__).values()} & set(lib.__all__))
    return names[0] if names else lib.__all__[-1]
