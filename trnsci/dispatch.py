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

import json
import math
import os
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
    """Write ``{"thresholds": {...}, **meta}`` as JSON; returns the path."""
    unknown = sorted(set(thresholds) - set(registry()))
    if unknown:
        raise ValueError(f"thresholds name unregistered ops: {', '.join(unknown)}")
    path = path or calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"thresholds": {k: float(v) for k, v in sorted(thresholds.items())}, **meta}
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
    return _env.get("TRNSCI_REQUIRE_NKI").lower() in ("1", "true", "yes", "on")


_nki_module = None


def _device_available() -> bool:
    global _nki_module
    if _nki_module is None:  # imported late: the kernel layer imports this module's users
        from trnsci import nki as _nki_module
    return _nki_module.HAS_NKI and _nki_module.has_neuron_device()


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
    """Choose the backend for one call of ``op``.

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
    entry = _REGISTRY.get(op) or _entry(op)
    setting = _backend.resolve(_library_of(op))
    name = setting.name
    if name == "torch":
        return Decision(op, "torch", _where(setting), setting, size)
    if name == "nki" and not _device_available():
        raise RuntimeError(
            f"{op}: {_where(setting)}, but this machine has no NeuronCore with the Neuron SDK "
            "(use 'auto' to fall back to torch, or 'simulator' to run the kernel on the CPU)"
        )
    if not supported:
        if require_nki():
            raise NkiRequiredError(f"{op}: TRNSCI_REQUIRE_NKI=1 but the kernel cannot run this call: {why_not}")
        return Decision(op, "torch", f"{_where(setting)}; kernel unsupported: {why_not}", setting, size)
    if name != "auto":  # "nki" (device checked above) or "simulator"
        return Decision(op, name, _where(setting), setting, size)
    if not _device_available():
        if require_nki():
            raise NkiRequiredError(f"{op}: TRNSCI_REQUIRE_NKI=1 but backend 'auto' found no NeuronCore")
        return Decision(op, "torch", _where(setting) + "; no NeuronCore on this machine", setting, size)
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


def fallback(op: str, exc: BaseException) -> None:
    """Handle a kernel failure: raise under REQUIRE_NKI, else warn once per cause.

    A cause is the operation, the exception type and its message.
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
        stacklevel=4,
    )


# ------------------------------------------------------------------ operations

class Op:
    """One operation, defined once, with one lowering per backend.

    ``Op("trnblas.gemm", metric="flops", threshold=2.7e8)`` registers the
    threshold. ``@op.lowering("torch")`` and ``@op.lowering("nki")`` attach
    the implementations; the NKI lowering also serves ``"simulator"`` (it
    calls :func:`trnsci.nki.run`, which reads the target from the context).
    ``op(*args, size=..., supported=..., why_not=..., **kwargs)`` decides and
    runs; ``op.plan(size)`` only decides.
    """

    def __init__(self, name: str, *, metric: str, threshold: float, doc: str = "", probe: Callable | None = None):
        self.name = name
        self.metric = metric
        register(name, metric, threshold, doc, probe)
        self._lowerings: dict[str, Callable] = {}
        self._supports: Callable[..., str | None] | None = None

    def lowering(self, backend: str, *, supports: Callable[..., str | None] | None = None):
        """Decorator attaching the ``"torch"`` or ``"nki"`` implementation.

        ``supports(*args, **kwargs)``, for the NKI lowering, returns ``None``
        when the kernel can take the call, else the reason it cannot (a
        shape that exceeds SBUF, say); such calls are planned onto torch up
        front, with that reason, instead of failing in the kernel.
        """
        if backend not in ("torch", "nki"):
            raise ValueError(f"lowering backend must be 'torch' or 'nki', got {backend!r}")

        def register_lowering(fn: Callable) -> Callable:
            self._lowerings[backend] = fn
            if backend == "nki":
                self._supports = supports
            return fn

        return register_lowering

    @property
    def has_kernel(self) -> bool:
        return "nki" in self._lowerings

    def plan(self, size: float | None = None, *, supported: bool = True, why_not: str = "") -> Decision:
        if not self.has_kernel:
            supported, why_not = False, "no NKI kernel for this operation yet"
        return decide(self.name, size, supported=supported, why_not=why_not)

    def __call__(self, *args, size: float | None = None, supported: bool = True, why_not: str = "", **kwargs):
        lowerings = self._lowerings
        if "nki" not in lowerings:
            supported, why_not = False, "no NKI kernel for this operation yet"
        decision = decide(self.name, size, supported=supported, why_not=why_not)
        if decision.backend == "torch":  # the common path, kept short: it runs on every call
            return lowerings["torch"](*args, **kwargs)
        if self._supports is not None:
            reason = self._supports(*args, **kwargs)
            if reason:
                decision = self.plan(size, supported=False, why_not=reason)
        return self.execute(decision, *args, **kwargs)

    def execute(self, decision: Decision, *args, **kwargs):
        torch_impl = self._lowerings["torch"]
        if decision.backend == "torch":
            return torch_impl(*args, **kwargs)
        from trnsci import nki

        try:
            with nki.target(decision.backend):
                return self._lowerings["nki"](*args, **kwargs)
        except (KeyboardInterrupt, NkiRequiredError):
            raise
        except Exception as exc:  # a kernel failure: never a wrong answer
            fallback(self.name, exc)
            return torch_impl(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Op({self.name!r}, metric={self.metric!r}, lowerings={sorted(self._lowerings)})"
