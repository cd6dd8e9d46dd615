"""A stand-in ``neuron`` device for tests: TorchNeuron's device type over CPU memory.

Built the way PyTorch tests Python backends for the PrivateUse1 key
(``torch.utils.backend_registration._setup_privateuseone_for_python_backend``
renames the key to ``"neuron"`` and registers the device module, hooks and
guard; ``torch.library`` implementations for that key make the tensors).
A ``neuron`` tensor here is a wrapper whose device memory is a CPU tensor:
every ATen operator on it runs on that CPU tensor and returns ``neuron``
tensors (``__torch_dispatch__``), so code that keeps its data on the device
sees device tensors throughout, and code that mixes a ``neuron`` tensor with
a host tensor of one or more dimensions gets the error a real device gives.

Counted, per :class:`Device` (what :func:`trnsci.testing.neuron_device` yields):

``host_transfers``
    copies between the device and the host: ``.to("neuron")`` of a CPU
    tensor, ``.cpu()``/``.to("cpu")``, ``copy_`` across the two, and reading
    a value on the host (``.item()``, ``float(t)``, ``bool(t)``).
``launches``
    kernels run on device tensors (through the NKI emulator, standing in for
    ``@nki.jit`` called on ``neuron`` tensors).

The renaming of PrivateUse1 lasts for the process; the counters and the
runtime's view of the device (:mod:`trnsci.runtime`) only inside
:func:`device`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
from torch.utils._pytree import tree_map

from trnsci import backend as _backend

__all__ = ["Device", "device", "installed"]

NAME = "neuron"
_lock = threading.Lock()
_installed = False
_active: list[Device] = []
_lib = None  # the torch.library registrations (kept alive)


class Device:
    """The stand-in device inside a :func:`device` block, with its counters."""

    def __init__(self):
        self.host_transfers = 0
        self.launches = 0
        self.kernels: list[str] = []
        self.transfer_sites: list[str] = []  # file:line (function) of each host transfer, for messages
        self.type = NAME
        self.device = torch.device(NAME)

    def reset(self) -> None:
        """Zero the counters (after warm-up)."""
        self.host_transfers = 0
        self.launches = 0
        self.kernels = []
        self.transfer_sites = []

    def __repr__(self) -> str:
        return f"<neuron stand-in: host_transfers={self.host_transfers}, launches={self.launches}>"


def _count_transfer() -> None:
    if not _active:
        return
    site = _caller()
    for d in _active:
        d.host_transfers += 1
        d.transfer_sites.append(site)


def _caller() -> str:
    """``file:line`` of the first frame outside torch and this module: who asked for the transfer."""
    import sys

    f = sys._getframe(2)
    while f is not None:
        name = f.f_globals.get("__name__", "")
        if not (name.startswith("torch") or name == __name__):
            return f"{f.f_code.co_filename.rsplit('/', 1)[-1]}:{f.f_lineno} ({f.f_code.co_name})"
        f = f.f_back
    return "?"


def _count_launch(name: str) -> None:
    for d in _active:
        d.launches += 1
        d.kernels.append(name)


class NeuronTensor(torch.Tensor):
    """A tensor on the stand-in ``neuron`` device; its memory is the CPU tensor ``raw``."""

    raw: torch.Tensor

    @staticmethod
    def __new__(cls, raw: torch.Tensor):
        t = torch.Tensor._make_wrapper_subclass(
            cls, raw.shape, strides=raw.stride(), storage_offset=raw.storage_offset(), dtype=raw.dtype,
            layout=raw.layout, device=torch.device(NAME), requires_grad=False)
        t.raw = raw
        return t

    def __repr__(self, *, tensor_contents=None):
        _count_transfer()  # printing reads the values on the host
        return f"tensor({self.raw.tolist()!r}, device='{NAME}', dtype={self.dtype})"

    def tolist(self):
        _count_transfer()  # the values, read on the host
        return self.raw.tolist()

    __torch_function__ = torch._C._disabled_torch_function_impl

    # a traceable wrapper subclass: Dynamo and AOTAutograd see through it to ``raw`` (torch.compile)
    def __tensor_flatten__(self):
        return ["raw"], None

    @staticmethod
    def __tensor_unflatten__(inner, ctx, outer_size, outer_stride):
        return NeuronTensor(inner["raw"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        return _dispatch(func, args, kwargs)


aten = torch.ops.aten


def _is_dev(x) -> bool:
    return isinstance(x, NeuronTensor)


def _raw(x):
    """The device memory behind ``x`` as an operand: a lazy conjugate or negative view (``u.conj()``) is
    resolved, since the handler runs below the dispatch keys that would honour those bits."""
    r = x.raw
    if r.is_conj():
        r = r.resolve_conj()
    if r.is_neg():
        r = r.resolve_neg()
    return r


def _wrap(x):
    return NeuronTensor(x) if isinstance(x, torch.Tensor) and not isinstance(x, NeuronTensor) else x


def _to_cpu_device(v):
    if isinstance(v, torch.device) and v.type == NAME:
        return torch.device("cpu")
    if isinstance(v, str) and v.split(":")[0] == NAME:
        return "cpu"
    return v


#: Operators whose output shape depends on the values: on a real device each one synchronizes the host.
_SYNCING = {aten.nonzero.default, aten.masked_select.default, aten._unique2.default,
            aten.unique_consecutive.default, aten.unique_dim.default, aten.repeat_interleave.Tensor}


def _trnsci_op(func):
    """The :class:`~trnsci.dispatch.Op` behind one of trnsci's torch operators, else None."""
    if getattr(func, "namespace", None) not in _backend.LIBRARIES:
        return None
    from trnsci import dispatch

    for op in dispatch.ops(func.namespace).values():
        if op.operator is func:
            return op
    return None


def _tracing(args, kwargs) -> bool:
    """Whether the device memory is fake (torch.compile propagating shapes): operators then run their
    registered fake implementations on it, as every ATen operator does."""
    from torch._subclasses.fake_tensor import is_fake

    return any(_is_dev(a) and is_fake(a.raw) for a in (*args, *kwargs.values()))


def _dispatch(func, args, kwargs):
    op = _trnsci_op(func)
    if op is not None and not _tracing(args, kwargs):
        # the operator's device implementation: its one decision on the resident tensors
        return op.run(*args, **kwargs)
    if func is aten.to.dtype_layout:  # reaches the device unexpanded inside an operator's implementation
        src, dev, dt = args[0], kwargs.get("device"), kwargs.get("dtype")
        here = NAME if _is_dev(src) else "cpu"
        if (dev is None or torch.device(dev).type == here) and dt in (None, src.dtype) and not kwargs.get("copy"):
            return src
        keep = ("dtype", "layout", "device", "pin_memory", "memory_format")
        return _dispatch(aten._to_copy.default, (src,), {k: v for k, v in kwargs.items() if k in keep})
    if func is aten._local_scalar_dense.default:  # .item(), float(t), bool(t): a read on the host
        _count_transfer()
        return func(_raw(args[0]))
    if func is aten._to_copy.default:
        src = args[0]
        dev = kwargs.get("device")
        to_host = dev is not None and torch.device(dev).type == "cpu"
        kw = dict(kwargs)
        if dev is not None:
            kw["device"] = torch.device("cpu")
        out = func(_raw(src) if _is_dev(src) else src, **kw)
        if to_host and _is_dev(src):
            _count_transfer()
            return out
        if not _is_dev(src):  # host -> device
            _count_transfer()
        return NeuronTensor(out)
    if func is aten.copy_.default:
        dst, src = args[0], args[1]
        if isinstance(src, torch.Tensor) and _is_dev(dst) != _is_dev(src):  # across device and host
            _count_transfer()
        d = dst.raw if _is_dev(dst) else dst
        d.copy_(_raw(src) if _is_dev(src) else src, *args[2:], **kwargs)
        return dst
    if func in _SYNCING:  # a result whose shape depends on the data: the host waits for the values
        _count_transfer()
    host = []

    def unwrap(x):
        if _is_dev(x):
            return _raw(x)
        if isinstance(x, torch.Tensor) and x.dim() > 0:
            host.append(x)
        return _to_cpu_device(x)

    cargs = tree_map(unwrap, args)
    ckwargs = tree_map(unwrap, kwargs)
    if host:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, {NAME}:0 and cpu! "
            f"(when checking arguments for {func})")
    out = func(*cargs, **ckwargs)
    # in-place and out= operators return one of their arguments: hand back its device tensor
    flat_in = [a for a in (*args, *kwargs.values()) if _is_dev(a)]

    def rewrap(x):
        if isinstance(x, torch.Tensor):
            for a in flat_in:
                if a.raw is x:
                    return a
            return NeuronTensor(x)
        return x

    return tree_map(rewrap, out)


def _overload(name):
    base, ov = name.split(".")
    return getattr(getattr(aten, base), ov)


def install() -> None:
    """Register the ``neuron`` device (once per process)."""
    global _installed, _lib
    with _lock:
        if _installed:
            return
        current = torch._C._get_privateuse1_backend_name()
        if current != "privateuseone":
            if current == NAME and getattr(torch, NAME, None) is not None and not isinstance(
                    getattr(torch, NAME), _BackendModule):
                raise RuntimeError("a real 'neuron' backend (TorchNeuron) is registered in this process; "
                                   "the stand-in is for machines without one")
            if current != NAME:
                raise RuntimeError(f"PrivateUse1 is already registered as {current!r} in this process")
        from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

        if current == "privateuseone":
            _setup_privateuseone_for_python_backend(NAME, backend_module=_BackendModule())
        lib = torch.library.Library("aten", "IMPL")
        # device allocations: CPU memory, wrapped. arange's (eye's, linspace's) composite allocates an
        # empty tensor and resizes it through its out= form, which a wrapper's fixed sizes cannot follow:
        # it is a factory here too.
        for name in ("empty.memory_format", "empty_strided", "arange", "arange.start", "arange.start_step",
                     "linspace", "eye", "eye.m"):
            op = _overload(name) if "." in name else getattr(aten, name).default
            lib.impl(name, _make_factory(op), "PrivateUse1")
        lib.impl("_copy_from", _copy_from, "PrivateUse1")  # torch.tensor(data, device=...) and friends
        _lib = lib
        _installed = True


def _copy_from(src, dst, non_blocking=False):
    """``aten::_copy_from`` for the ``neuron`` key: a copy that reaches the backend below Python dispatch."""
    if _is_dev(src) != _is_dev(dst):
        _count_transfer()
    d = dst.raw if _is_dev(dst) else dst
    d.copy_(_raw(src) if _is_dev(src) else src)
    return dst


def _make_factory(op):
    def impl(*args, **kwargs):
        kw = dict(kwargs)
        kw["device"] = torch.device("cpu")
        kw.pop("pin_memory", None)
        return NeuronTensor(op(*args, **kw))
    return impl


class _BackendModule:
    """``torch.neuron`` for the stand-in: one device, available only inside a :func:`device` block.

    Outside the block the registration stays (PrivateUse1 cannot be
    unregistered) but torch sees no available accelerator, so code that asks
    ``torch.accelerator`` (torch's RNG freezing in ``opcheck``, for one)
    behaves as on a machine without the device.
    """

    def is_initialized(self) -> bool:
        return True

    def is_available(self) -> bool:
        return bool(_active)

    def get_rng_state(self, device=None) -> torch.Tensor:
        return torch.get_rng_state()  # the stand-in's tensors live in CPU memory, drawn by the CPU generator

    def set_rng_state(self, new_state, device=None) -> None:
        torch.set_rng_state(new_state)

    def current_device(self) -> int:
        return 0

    def _is_in_bad_fork(self) -> bool:
        return False

    def manual_seed_all(self, seed: int) -> None:
        pass

    def device_count(self) -> int:
        return 1

    def synchronize(self, device=None) -> None:
        pass


def installed() -> bool:
    return _installed


def launch(kernel, tensors, constants):
    """Run ``kernel`` on stand-in device tensors through the NKI emulator; outputs stay on the device.

    The emulator reads the device memory (the CPU tensors behind the
    ``neuron`` tensors) in place: no host transfer is counted, as none
    happens when ``@nki.jit`` runs on resident tensors.
    """
    from trnsci import nki

    arrays = [nki.to_numpy(_raw(t)) if _is_dev(t) else t for t in tensors]
    if any(isinstance(t, torch.Tensor) and not _is_dev(t) for t in tensors):
        raise RuntimeError("a kernel operand is not on the neuron device")
    if nki.SOURCE == "neuron":
        outs = nki.nki.simulate(kernel)(*arrays, **constants)
    else:
        from trnsci.nki import emulator

        outs, _ = emulator.profile(kernel, *arrays, **constants)
    _count_launch(nki.kernel_name(kernel))
    outs_t = outs if isinstance(outs, tuple) else (outs,)
    res = tuple(NeuronTensor(nki.from_numpy(o)) for o in outs_t)
    return res if isinstance(outs, tuple) else res[0]


@contextlib.contextmanager
def device() -> Iterator[Device]:
    """The stand-in ``neuron`` device, active inside the block; yields its :class:`Device` counters."""
    from trnsci import runtime

    install()
    d = Device()
    with _lock:
        _active.append(d)
        first = len(_active) == 1
    if first:
        runtime._set_standin(runtime._Standin("neuron stand-in", NAME, launch))
    try:
        yield d
    finally:
        with _lock:
            _active.remove(d)
            last = not _active
        if last:
            runtime._set_standin(None)


# ---------------------------------------------------------------- torch-xla


class XlaDevice:
    """The XLA stand-in launcher inside :func:`xla_device`: kernels run, and the transfers they made."""

    def __init__(self):
        self.launches = 0
        self.kernels: list[str] = []
        self.launch_transfers = 0  # device-to-host transfers made by the launcher itself


def _xla_transfers() -> int:
    import torch_xla.debug.metrics as met

    data = met.metric_data("TransferFromDeviceTime")
    return 0 if data is None else data[0]


@contextlib.contextmanager
def xla_device() -> Iterator[XlaDevice]:
    """Launch the kernels of ``"nki"`` decisions on XLA tensors through the emulator (torch-xla's CPU device
    has no NeuronCore). The launcher copies operands to the host and results back, and counts the
    device-to-host transfers that costs in ``launch_transfers``, so a test can tell trnsci's own apart."""
    from trnsci import nki, runtime

    d = XlaDevice()

    def launch_xla(kernel, tensors, constants):
        t0 = _xla_transfers()
        device = next(t.device for t in tensors if isinstance(t, torch.Tensor))
        arrays = [nki.to_numpy(t) if isinstance(t, torch.Tensor) else t for t in tensors]
        from trnsci.nki import emulator

        outs, _ = emulator.profile(kernel, *arrays, **constants)
        outs_t = outs if isinstance(outs, tuple) else (outs,)
        res = tuple(nki.from_numpy(o).to(device) for o in outs_t)
        d.launches += 1
        d.kernels.append(nki.kernel_name(kernel))
        d.launch_transfers += _xla_transfers() - t0
        return res if isinstance(outs, tuple) else res[0]

    runtime._set_standin(runtime._Standin("xla stand-in", "xla", launch_xla))
    try:
        yield d
    finally:
        runtime._set_standin(None)
