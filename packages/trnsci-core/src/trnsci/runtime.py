"""Which Trainium runtime this process has, and how a kernel reaches tensors that live on it.

AWS ships two PyTorch stacks for Trainium:

``"torchneuron"``
    PyTorch >= 2.10 with ``torch-neuronx`` >= 2.10: a native PrivateUse1
    backend, device ``"neuron"``, eager execution and
    ``torch.compile(backend="neuron")``. NKI kernels are ``@nki.jit``
    functions called on ``neuron`` tensors (``nki.jit`` sees torch tensors and
    takes its PyTorch integration); ``torch_neuronx.nki_op`` registers them
    as operators.
``"torch-xla"``
    PyTorch 2.9 with ``torch-neuronx`` 2.9 and ``torch-xla`` 2.9 (the last
    PyTorch/XLA line for Neuron, on Neuron SDK 2.31 and so NKI 0.5): tensors
    on the XLA device; an ``@nki.jit`` kernel called on XLA tensors becomes a
    custom call in the lazy graph.
``"none"``
    Neither: every operation runs on torch (or the emulator under backend
    ``"simulator"``).

:func:`detect` says which one is present, which NKI (version and source)
the kernels would be built with, and why kernels will or will not run.
:func:`resident` tells whether a tensor lives on the runtime's device, and
:func:`launch` runs a kernel on such tensors where they are, returning
device tensors: in steady state nothing is copied to the host. A CPU
tensor under backend ``"nki"`` is moved to the device once, and the result
back once (:func:`transfer_bytes` is that cost, shown in plans).

Tests install a stand-in (:func:`trnsci.testing.neuron_device`): a
``neuron`` device over CPU storage whose kernel launches run the emulator;
while it is active :func:`detect` reports it and kernels launch through it.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import importlib.metadata as _md
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Runtime", "detect", "resident", "resident_device", "launch", "transfer_bytes", "constant", "sync",
           "SUPPORTED_NKI", "DEVICE_TYPES"]

#: The NKI releases trnsci's kernels are written for: 0.6 (Neuron SDK 2.32, the API the
#: emulator models) and 0.7 (Neuron SDK 2.33). 0.7 specializes kernels by tracing them with
#: Python; the kernels use no dynamic loop (``nl.dynamic_range``, ``while`` on a register),
#: which is what 0.7 removed, so they build unchanged.
SUPPORTED_NKI = ((0, 6), (0, 7))

#: The device types of the two runtimes: TorchNeuron's PrivateUse1 ``neuron`` and torch-xla's ``xla``.
DEVICE_TYPES = ("neuron", "xla")


@dataclass(frozen=True)
class Runtime:
    """What :func:`detect` found.

    Attributes
    ----------
    name : {"torchneuron", "torch-xla", "none"}
    device_type : {"neuron", "xla"} or None
        The device tensors live on under this runtime.
    torch_neuronx, torch_xla : str or None
        Installed versions.
    nki_version : str or None
        The version of AWS's ``nki`` package, or of the NKI release the
        emulator models when kernels are built on the emulator.
    nki_source : {"neuron", "emulator"}
        Where ``trnsci.nki`` took ``nki``/``nl``/``nisa`` from.
    neuron_core : bool
        A Neuron device node (``/dev/neuron0``) is present.
    standin : str or None
        The test stand-in in use (``"neuron stand-in"``), else None.
    launches : bool
        Kernels launch on this runtime's device.
    reason : str
        Why kernels will or will not run, in one sentence.
    """

    name: str
    device_type: str | None
    torch_neuronx: str | None
    torch_xla: str | None
    nki_version: str | None
    nki_source: str
    neuron_core: bool
    standin: str | None
    launches: bool
    reason: str

    def lines(self) -> list[str]:
        """The findings as ``(label, value)`` text lines, for ``trnsci info``."""
        label = {"torchneuron": "TorchNeuron (device 'neuron')", "torch-xla": "torch-xla (device 'xla')",
                 "none": "none"}[self.name]
        if self.standin:
            label += f" -- {self.standin}"
        nki = f"{self.nki_version or 'unknown'} ({self.nki_source})"
        return [
            f"  runtime         {label}",
            f"  torch-neuronx   {self.torch_neuronx or 'not installed'}",
            f"  torch-xla       {self.torch_xla or 'not installed'}",
            f"  NKI             {nki}; kernels support "
            + ", ".join(".".join(map(str, v)) for v in SUPPORTED_NKI),
            f"  NeuronCore      {'present' if self.neuron_core else 'absent'}",
            f"  kernels         {'run on the device' if self.launches else 'do not run on a device'}: {self.reason}",
        ]


# ---------------------------------------------------------------- stand-in hooks

@dataclass
class _Standin:
    """A test device registered by :mod:`trnsci._standin`: its device type and kernel launcher."""

    name: str
    device_type: str
    launch: Callable[..., Any]


_standin: _Standin | None = None
_cache: Runtime | None = None


def _set_standin(standin: _Standin | None) -> None:
    """Activate (or with None deactivate) a stand-in device; :func:`detect` answers afresh."""
    global _standin, _cache
    _standin = standin
    _cache = None
    from trnsci import nki

    nki.set_standin(standin is not None or None)


# ---------------------------------------------------------------- detection

def _version(dist: str) -> str | None:
    try:
        return _md.version(dist)
    except _md.PackageNotFoundError:
        return None


def _major_minor(v: str | None) -> tuple[int, int]:
    if not v:
        return (0, 0)
    parts = []
    for p in v.split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple((parts + [0, 0])[:2])


def _nki_facts() -> tuple[str | None, str]:
    from trnsci import nki

    if nki.SOURCE == "neuron":
        return str(getattr(nki.nki, "__version__", None) or _version("nki") or "unknown"), "neuron"
    installed = _version("nki")
    modeled = "0.6.0 modeled"
    if installed:
        modeled += f"; AWS's nki {installed} is installed but not used"
    return modeled, "emulator"


def _device_node() -> bool:
    return os.path.exists("/dev/neuron0")


def _privateuse1_name() -> str | None:
    """The name PrivateUse1 is registered under -- unless the test stand-in registered it."""
    import sys

    st = sys.modules.get("trnsci._standin")
    if st is not None and st.installed():
        return None
    try:
        import torch

        return torch._C._get_privateuse1_backend_name()
    except Exception:  # pragma: no cover - very old torch
        return None


def detect(refresh: bool = False) -> Runtime:
    """The runtime of this process (cached; ``refresh=True`` looks again).

    Looks at installed distributions and module specs first, and imports
    ``torch_neuronx`` / ``torch_xla`` only when they are installed.
    """
    global _cache
    if _cache is not None and not refresh:
        return _cache
    from trnsci import nki

    neuronx = _version("torch-neuronx")
    xla = _version("torch-xla") or _version("torch_xla")
    nki_version, nki_source = _nki_facts()
    core = _device_node()
    st = _standin
    if st is not None:
        name = "torchneuron" if st.device_type == "neuron" else "torch-xla"
        rt = Runtime(name, st.device_type, neuronx, xla, nki_version, nki_source, core, st.name, True,
                     f"the {st.name} launches kernels through the NKI emulator on resident tensors")
        _cache = rt
        return rt
    import torch

    torch_mm = _major_minor(torch.__version__)
    # torch-neuronx's own version tells the line (2.9 = torch-xla, >= 2.10 = TorchNeuron); torch's only when
    # torch-xla is absent
    if neuronx is not None and (_major_minor(neuronx) >= (2, 10) or _privateuse1_name() == "neuron"
                                or (xla is None and torch_mm >= (2, 10))):
        name, device = "torchneuron", "neuron"
    elif xla is not None:
        name, device = "torch-xla", "xla"
    else:
        name, device = "none", None
    launches = False
    why = []  # every reason kernels cannot launch, in the order a user would fix them
    if name == "none":
        why.append("neither torch-neuronx (TorchNeuron, PyTorch >= 2.10) nor torch-xla is installed")
    if nki_source != "neuron":
        have = _version("nki")
        if have and _major_minor(have) < SUPPORTED_NKI[0]:
            why.append(f"AWS's nki {have} is older than {'.'.join(map(str, SUPPORTED_NKI[0]))}"
                       + (" (torch-neuronx 2.9 / torch-xla is pinned to Neuron 2.31, NKI 0.5)"
                          if name == "torch-xla" else ""))
        elif os.environ.get("TRNSCI_NKI", "").strip().lower() == "emulator" and have:
            why.append("TRNSCI_NKI=emulator forces the emulator")
        else:
            why.append("AWS's nki package is not installed (kernels build on the emulator, CPU only)")
    if name == "torch-xla" and neuronx is None:
        why.append("torch-xla without torch-neuronx has no NeuronCore device (a CPU/GPU PJRT device)")
    if name != "none" and not core:
        why.append("no Neuron device node (/dev/neuron0) on this machine")
    if why:
        reason = "; ".join(why)
    else:
        launches = nki.has_neuron_device()
        if not launches:
            reason = "torch-neuronx does not import"
        elif _major_minor(nki_version) > SUPPORTED_NKI[-1]:
            reason = (f"NKI {nki_version} is newer than the releases the kernels were checked against; "
                      "kernels launch, and a failure falls back to torch on the device")
        else:
            reason = ("kernels launch on resident tensors (@nki.jit on "
                      + ("'neuron' tensors)" if name == "torchneuron" else "XLA tensors)"))
    rt = Runtime(name, device, neuronx, xla, nki_version, nki_source, core, None, launches, reason)
    _cache = rt
    return rt


# ---------------------------------------------------------------- residency and launches

def resident_device(t) -> str | None:
    """The device type (``"neuron"``/``"xla"``) when ``t`` is a tensor on a NeuronCore's device, else None."""
    dev = getattr(t, "device", None)
    kind = getattr(dev, "type", None)
    return kind if kind in DEVICE_TYPES else None


def resident(*tensors) -> bool:
    """True when every tensor argument lives on a Neuron device (and there is at least one)."""
    seen = False
    for t in tensors:
        if getattr(t, "device", None) is None:
            continue
        if resident_device(t) is None:
            return False
        seen = True
    return seen


def operands(args: tuple, kwargs: dict) -> list:
    """The tensors among a call's arguments (top level, and one level into tuples and lists)."""
    import torch

    found = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            found.append(a)
        elif isinstance(a, (tuple, list)) and len(a) <= 16:
            found.extend(x for x in a if isinstance(x, torch.Tensor))
    return found


_assumed: contextvars.ContextVar[str | None] = contextvars.ContextVar("trnsci_assumed_residency", default=None)


@contextlib.contextmanager
def assume_resident(kind: str | None):
    """Inside the block, meta tensors count as resident on device type ``kind`` (None: as they are).

    For plans made on meta tensors on behalf of a call whose operands live on
    a device (trntensor plans an einsum's launches that way): each launch then
    decides as it will when it runs on the resident tensors.
    """
    token = _assumed.set(kind)
    try:
        yield
    finally:
        _assumed.reset(token)


def residency(args: tuple, kwargs: dict) -> str | None:
    """The device type when a call's tensor operands all live on a Neuron device, else None.

    A call without tensor operands (a random draw) is resident when a
    ``torch.device`` argument names a Neuron device: its result is made there.
    """
    ts = operands(args, kwargs)
    assumed = _assumed.get()
    if assumed is not None and ts and all(t.is_meta for t in ts):
        return assumed  # a plan on meta tensors standing in for resident operands (assume_resident)
    if not ts:
        import torch

        kinds = {a.type for a in (*args, *kwargs.values()) if isinstance(a, torch.device)}
        return kinds.pop() if len(kinds) == 1 and kinds <= set(DEVICE_TYPES) else None
    kinds = {resident_device(t) for t in ts}
    return kinds.pop() if len(kinds) == 1 and None not in kinds else None


def transfer_bytes(args: tuple, kwargs: dict) -> int:
    """Bytes a call moves to the device when its operands are host tensors (0 when all are resident)."""
    return sum(t.numel() * t.element_size() for t in operands(args, kwargs) if resident_device(t) is None)


def _device_for(kind: str):
    """The torch device a host operand is moved to for a launch on runtime ``kind``."""
    import torch

    if kind == "xla":
        try:
            import torch_xla

            return torch_xla.device()
        except (ImportError, AttributeError):
            return importlib.import_module("torch_xla.core.xla_model").xla_device()
    return torch.device(kind)


def launch(kernel: Callable, tensors: tuple, constants: dict):
    """Run ``kernel`` on the device its tensor operands live on; returns the kernel's outputs there.

    Resident operands are passed as they are. Host operands (backend
    ``"nki"`` on CPU tensors) are moved to the runtime's device once; the
    caller moves results back. Under TorchNeuron and torch-xla the kernel is
    called directly on the device tensors, as AWS documents for ``@nki.jit``
    (the decorator sees torch tensors and takes its PyTorch integration);
    under a test stand-in its launcher runs the kernel.
    """
    import torch

    kinds = {resident_device(t) for t in tensors if isinstance(t, torch.Tensor)}
    kinds.discard(None)
    rt = detect()
    if len(kinds) > 1:
        raise ValueError(f"kernel operands live on different devices: {sorted(kinds)}")
    kind = kinds.pop() if kinds else rt.device_type
    if kind is None:
        raise RuntimeError(f"no Trainium runtime to launch a kernel on: {rt.reason}")
    if any(isinstance(t, torch.Tensor) and resident_device(t) is None for t in tensors):
        dev = _device_for(kind)
        tensors = tuple(t.to(dev) if isinstance(t, torch.Tensor) else t for t in tensors)
    st = _standin
    if st is not None and st.device_type == kind:
        return st.launch(kernel, tensors, constants)
    if not rt.launches:
        raise RuntimeError(f"kernels cannot launch on '{kind}' tensors here: {rt.reason}")
    return kernel(*tensors, **constants)


# ---------------------------------------------------------------- constants on the device

_constants: dict = {}
_CONSTANTS_MAX = 32


def constant(key, device, build: Callable[[], Any]):
    """A host-built constant table (a DFT matrix, twiddles) on ``device``, uploaded once and kept.

    ``build()`` makes the host tensor; a CPU ``device`` returns it as built.
    On a device the upload happens on the first call for ``(key, device)``
    (warm-up) and later calls return the resident copy. Bounded: the oldest
    of more than 32 uploaded tables is dropped.
    """
    if device is None or getattr(device, "type", "cpu") == "cpu":
        return build()
    k = (key, str(device))
    t = _constants.get(k)
    if t is None:
        t = build().to(device)
        if len(_constants) >= _CONSTANTS_MAX:
            _constants.pop(next(iter(_constants)))
        _constants[k] = t
    return t


def sync(device) -> None:
    """End the pending graph on a lazy device (torch-xla's ``torch_xla.sync()``): every live tensor is
    materialized, so a loop that calls this at the end of each block of iterations traces the same graph
    for every block and compiles it once. A no-op on an eager device (CPU, TorchNeuron's ``neuron``)."""
    if getattr(device, "type", None) == "xla":
        import torch_xla

        torch_xla.sync()
