"""The kernel layer: AWS's NKI when it is installed, else trnsci's emulator.

Kernels import through this module and never name a toolchain directly::

    from trnsci.nki import nki, nl, nisa

``SOURCE`` says which one was taken: ``"neuron"`` (AWS's ``nki`` package,
NKI 0.6 or 0.7 = Neuron SDK 2.32 / 2.33, imported as ``import nki``,
``import nki.language as nl``, ``import nki.isa as nisa``; a newer one is
used with a warning) or ``"emulator"`` (:mod:`trnsci.nki.emulator`, NumPy,
which models NKI 0.7 and runs 0.6 kernels unchanged). An older ``nki``
is not used (its API differs from the one the kernels are written for), and
the legacy ``neuronxcc.nki`` namespace is never imported: NKI >= 0.4 rejects
it inside kernels. ``TRNSCI_NKI=emulator`` forces the emulator even where
the real package is installed.

:func:`run` executes a kernel on torch tensors for the backend the current
operation chose (``"nki"``: on a NeuronCore, through TorchNeuron's ``neuron``
device or torch-xla, on the tensors where they live -- :mod:`trnsci.runtime`;
``"simulator"``: on the CPU) and hands results back on the caller's device. :func:`capture` records
every kernel run inside a block, so a test can prove that a kernel -- not
the torch fallback -- produced a result. :func:`simulate` runs any kernel
on the CPU like AWS's ``nki.simulate``, and :func:`install_as_nki` makes
``import nki`` resolve to the emulator so that unmodified NKI 0.6 kernel
files run (also ``python -m trnsci.nki file.py``).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "nki", "nl", "nisa", "SOURCE", "HAS_NKI", "EMULATOR_ERROR",
    "has_neuron_device", "run", "profile", "capture", "KernelRun",
    "simulate", "install_as_nki", "uninstall_nki",
    "kernel_name", "standin_active", "set_standin",
]


MIN_NKI_VERSION = (0, 6)
#: AWS toolchains the kernels are written for and the emulator models (NKI 0.6 = Neuron 2.32, 0.7 = 2.33)
SUPPORTED_NKI_VERSIONS = ((0, 6), (0, 7))


def _version_tuple(v):
    parts = []
    for p in str(v).split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _load_toolchain():
    """Return (source, nki, nl, nisa, error): AWS's nki >= 0.6 if it imports, else the emulator."""
    if os.environ.get("TRNSCI_NKI", "").strip().lower() != "emulator":
        try:
            mod = importlib.import_module("nki")
            lang = importlib.import_module("nki.language")
            isa = importlib.import_module("nki.isa")
        except Exception:  # placeholders on PyPI raise ImportError; be broad
            mod = None
        if mod is not None and getattr(mod, "__trnsci_emulator__", False):
            mod = None  # our own emulator registered as `nki` by install_as_nki
        if mod is not None:
            version = getattr(mod, "__version__", None)
            if version is not None and _version_tuple(version) >= MIN_NKI_VERSION:
                if _version_tuple(version) > SUPPORTED_NKI_VERSIONS[-1]:
                    import warnings

                    warnings.warn(
                        f"trnsci.nki: nki {version} is newer than the releases the kernels are written for "
                        f"({', '.join('.'.join(map(str, v)) for v in SUPPORTED_NKI_VERSIONS)}); using it",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                return "neuron", mod, lang, isa, None
            import warnings

            warnings.warn(
                f"trnsci.nki: the installed nki ({version or 'unknown version'}) is older than "
                f"{'.'.join(map(str, MIN_NKI_VERSION))}; using the emulator instead",
                RuntimeWarning,
                stacklevel=2,
            )
    try:
        from trnsci.nki import emulator

        return "emulator", emulator.nki, emulator.nl, emulator.nisa, None
    except (ImportError, AttributeError) as exc:  # ships with trnsci: a broken install
        return "emulator", _Missing(exc), _Missing(exc), _Missing(exc), exc


class _Missing:
    """Stand-in that lets kernel modules import while the emulator cannot.

    ``nki.jit`` passes functions through so that the libraries still import
    (their torch paths work); anything else says why kernels are unavailable.
    """

    def __init__(self, exc: BaseException):
        self._exc = exc

    def jit(self, fn=None, **_):
        return fn if fn is not None else (lambda f: f)

    def __getattr__(self, name):
        raise RuntimeError(f"NKI emulator not available ({self._exc}); kernels cannot run here")


SOURCE, nki, nl, nisa, EMULATOR_ERROR = _load_toolchain()
HAS_NKI = SOURCE == "neuron"

#: True while a test stand-in device (:func:`trnsci.testing.neuron_device`) is active: the dispatch then
#: treats this process as one where kernels can launch. Read it; change it through :func:`set_standin`
#: (which :mod:`trnsci.runtime` calls), never by assignment.
standin_active = False


def set_standin(active: bool | None) -> None:
    """Tell the kernel layer whether a stand-in device is active (:data:`standin_active`); called by
    :mod:`trnsci.runtime` when a stand-in is entered or left."""
    global standin_active
    standin_active = bool(active)


_device_cache: bool | None = None


def has_neuron_device() -> bool:
    """True when this process can run kernels on a NeuronCore.

    Needs the real NKI toolchain, ``torch_neuronx`` (which brings the XLA
    device), and a Neuron device node. The answer is cached.
    """
    global _device_cache
    if standin_active:  # a test stand-in device (trnsci.runtime)
        return True
    if _device_cache is None:
        ok = HAS_NKI and os.path.exists("/dev/neuron0")
        if ok:
            try:
                importlib.import_module("torch_neuronx")
            except Exception:
                ok = False
        _device_cache = ok
    return _device_cache


# ---------------------------------------------------------------- recording

@dataclass
class KernelRun:
    """One kernel execution: its name, where it ran, and (emulator) its profile."""

    kernel: str
    backend: str
    profile: Any = None


_runs: contextvars.ContextVar[list | None] = contextvars.ContextVar("trnsci_kernel_runs", default=None)
_target: contextvars.ContextVar[str | None] = contextvars.ContextVar("trnsci_kernel_target", default=None)


@contextlib.contextmanager
def capture() -> Iterator[list[KernelRun]]:
    """Collect a :class:`KernelRun` for every kernel run inside the block.

    Blocks nest: the runs of an inner block also reach every enclosing block (on the inner block's exit).
    """
    outer = _runs.get()
    runs: list[KernelRun] = []
    token = _runs.set(runs)
    try:
        yield runs
    finally:
        _runs.reset(token)
        if outer is not None:
            outer.extend(runs)


@contextlib.contextmanager
def target(backend: str) -> Iterator[None]:
    """Make :func:`run` default to ``backend`` ("nki" or "simulator") in a block.

    :class:`trnsci.dispatch.Op` sets this around an NKI lowering so that
    lowerings need not thread the backend through their arguments.
    """
    token = _target.set(backend)
    try:
        yield
    finally:
        _target.reset(token)


def kernel_name(kernel: Callable) -> str:
    """The name a kernel is counted and reported under (:class:`KernelRun`, ``Plan.kernels``): the qualified
    name of the function under its ``nki.jit`` wrapper."""
    fn = getattr(kernel, "func", None) or getattr(kernel, "__wrapped__", None) or kernel
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(kernel))


# ------------------------------------------------------------ conversions

def _torch():
    import torch

    return torch


def to_numpy(t) -> np.ndarray:
    """A torch tensor as a NumPy array on the host (bfloat16 via ml_dtypes)."""
    torch = _torch()
    if isinstance(t, np.ndarray):
        return t
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.contiguous().numpy()


def from_numpy(a: np.ndarray, *, device=None, dtype=None):
    """A NumPy array as a torch tensor on ``device``, cast to ``dtype`` if given."""
    torch = _torch()
    a = np.asarray(a)
    if a.dtype.name == "bfloat16":
        t = torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(a).copy())
    if dtype is not None and t.is_floating_point() and t.dtype != dtype:
        t = t.to(dtype)
    if device is not None and t.device != torch.device(device):
        t = t.to(device)
    return t


def run(kernel: Callable, *tensors, backend: str | None = None, out_dtype=None, **constants):
    """Run an NKI kernel on torch tensors and return torch tensors.

    Parameters
    ----------
    kernel
        A function decorated with ``nki.jit`` (through this module's ``nki``).
    *tensors
        torch tensors (or NumPy arrays); they become the kernel's HBM inputs.
    backend : {"simulator", "nki"}, optional
        Where to run. Defaults to the backend chosen by the enclosing
        operation (see :func:`target`), else ``"simulator"``.
    out_dtype : torch.dtype, optional
        Floating results are cast to this dtype; by default to the dtype of
        the first floating input. Integer results keep their dtype.
    **constants
        Compile-time constants passed to the kernel unchanged.

    Returns
    -------
    A tensor, or a tuple of tensors when the kernel returns several: on the
    device when any tensor input lives there, else on the first tensor input's.
    """
    torch = _torch()
    backend = backend or _target.get() or "simulator"
    if backend not in ("simulator", "nki"):
        raise ValueError(f"backend must be 'simulator' or 'nki', got {backend!r}")
    ref = next((t for t in tensors if isinstance(t, torch.Tensor)), None)
    device = ref.device if ref is not None else None
    if out_dtype is None:
        out_dtype = next((t.dtype for t in tensors if isinstance(t, torch.Tensor) and t.is_floating_point()), None)
    name = kernel_name(kernel)
    prof = None
    if backend == "nki":
        # --- device runtime: the kernel runs where its operands live (trnsci.runtime);
        # results of resident operands stay on the device, host operands go there and back once
        if not has_neuron_device():
            raise RuntimeError("backend 'nki' needs a NeuronCore and the Neuron SDK; none is present here")
        from trnsci import runtime as _runtime

        outs = _runtime.launch(kernel, tensors, constants)
        outs_t = outs if isinstance(outs, tuple) else (outs,)
        results = tuple(r.to(out_dtype) if out_dtype is not None and r.is_floating_point() and r.dtype != out_dtype
                        else r for r in outs_t)
        # back to the host only when no operand lives on the device (a host-built index table first in the
        # argument list does not send a resident call's result to the host)
        if device is not None and not any(_runtime.resident_device(t) for t in tensors if isinstance(t, torch.Tensor)):
            results = tuple(r.to(device) for r in results)
        # --- end device runtime
    else:
        arrays = [to_numpy(t) if isinstance(t, (torch.Tensor, np.ndarray)) else t for t in tensors]
        if SOURCE == "neuron":
            outs = nki.simulate(kernel)(*arrays, **constants)
        else:
            if EMULATOR_ERROR is not None:
                raise RuntimeError(f"NKI emulator not available: {EMULATOR_ERROR}")
            from trnsci.nki import emulator

            outs, prof = emulator.profile(kernel, *arrays, **constants)
        outs_t = outs if isinstance(outs, tuple) else (outs,)
        results = tuple(from_numpy(o, device=device, dtype=out_dtype) for o in outs_t)
    runs = _runs.get()
    if runs is not None:
        runs.append(KernelRun(name, backend, prof))
    return results if isinstance(outs, tuple) else results[0]


def profile(kernel: Callable, *arrays, target: str = "trn1", **constants):
    """Run ``kernel`` in the emulator and return ``(outputs, KernelProfile)``.

    Inputs may be NumPy arrays or torch tensors; outputs are NumPy arrays.
    Only available where kernels are built on the emulator (``SOURCE ==
    "emulator"``): AWS's simulator does not report trnsci's counters.
    """
    if SOURCE != "emulator":
        raise RuntimeError("trnsci.nki.profile needs the emulator; set TRNSCI_NKI=emulator")
    if EMULATOR_ERROR is not None:
        raise RuntimeError(f"NKI emulator not available: {EMULATOR_ERROR}")
    from trnsci.nki import emulator

    arrays = [to_numpy(a) if not isinstance(a, (int, float, tuple, str, type(None))) else a for a in arrays]
    return emulator.profile(kernel, *arrays, target=target, **constants)


def simulate(kernel: Callable, *args, **kwargs):
    """Run an NKI kernel on the CPU, as AWS's ``nki.simulate``.

    ``simulate(kernel, *arrays, **kw)`` runs it now and returns its outputs;
    ``simulate(kernel)`` returns a callable (``nki.simulate(kernel)(*arrays)``).
    NumPy inputs give NumPy outputs, torch tensors give torch tensors.  With
    AWS's NKI installed this is its ``nki.simulate``; otherwise the emulator
    (target from ``NEURON_PLATFORM_TARGET_OVERRIDE``, default trn1).
    """
    if SOURCE != "neuron" and EMULATOR_ERROR is not None:
        raise RuntimeError(f"NKI emulator not available: {EMULATOR_ERROR}")
    sim = nki.simulate(kernel)
    return sim(*args, **kwargs) if (args or kwargs) else sim


def install_as_nki(force: bool = False):
    """Register the emulator as ``nki`` (and ``nki.language``, ``nki.isa``, ...) in ``sys.modules``.

    Returns the ``nki`` module now in use; see :mod:`trnsci.nki._install`.
    """
    from trnsci.nki._install import install_as_nki as _install

    return _install(force=force)


def uninstall_nki() -> None:
    """Undo :func:`install_as_nki`."""
    from trnsci.nki._install import uninstall_nki as _uninstall

    _uninstall()
