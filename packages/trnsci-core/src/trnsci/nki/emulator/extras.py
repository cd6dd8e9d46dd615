"""Modules real NKI 0.6 kernels import from outside the ``nki.language`` / ``nki.isa`` stubs.

AWS's ``aws-neuron/nki-library`` kernels and its test harness
(``test/utils/simulation_setup.py``, which aliases these module names to
AWS's CPU simulator) use:

* ``nki.isa.constants`` -- the ``nki.isa`` enums (``from nki.isa.constants
  import oob_mode, dge_mode``);
* ``nki.dtype`` -- the dtype names, as a module (``import nki.dtype as nt``,
  ``x.astype(nt.float8_e4m3)``) and as a type annotation
  (``compute_dtype: nki.dtype = nl.bfloat16``); the harness maps it to
  ``nki.language.dtypes``;
* ``nki.typing`` -- annotation markers for kernel parameters
  (``from nki.typing import tensor`` in the SDK's average-pool example,
  ``nt.mutable_tensor`` for outputs passed in, in ``router_topk``);
* ``nki.collectives`` -- multi-core collectives (``ReplicaGroup``); the
  emulator models one NeuronCore, so calling them raises ``NotEmulatedError``.

Each is built here as a module object; :func:`trnsci.nki.install_as_nki`
registers them in ``sys.modules`` under those names.
"""

from __future__ import annotations

import types

from . import nisa, nl
from .errors import NotEmulatedError

_ENUMS = ("engine", "reduce_cmd", "dge_mode", "oob_mode", "matmul_perf_mode", "nc_version", "dma_engine")
_DTYPES = ("bool_", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32", "bfloat16",
           "tfloat32", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e5m2_x4", "float8_e4m3fn_x4",
           "float8_e8m0fnu", "float4_e2m1fn_x4")


def _module(name, doc, **attrs):
    m = types.ModuleType(name, doc)
    for k, v in attrs.items():
        setattr(m, k, v)
    m.__all__ = sorted(attrs)
    return m


isa_constants = _module(
    "nki.isa.constants", "The nki.isa enums (emulated NKI 0.6).", **{n: getattr(nisa, n) for n in _ENUMS})

dtype = _module("nki.dtype", "NKI dtype names (emulated NKI 0.6; NumPy dtypes where the emulator stores them).",
                **{n: getattr(nl, n) for n in _DTYPES})


class _Marker:
    """An annotation marker: ``tensor``, ``tensor[shape, dtype]`` (the subscript is kept, not checked)."""

    def __class_getitem__(cls, item):
        return cls


class tensor(_Marker):  # noqa: N801 (the NKI name)
    """Annotation of a kernel tensor parameter (``nki.typing.tensor``)."""


class mutable_tensor(_Marker):  # noqa: N801
    """Annotation of a tensor the kernel writes in place (``nki.typing.mutable_tensor``)."""


typing = _module("nki.typing", "NKI annotation markers (emulated NKI 0.6).", tensor=tensor,
                 mutable_tensor=mutable_tensor)


class ReplicaGroup(nl.NKIObject):
    """A group of ranks for a collective (kept as data; collectives are not emulated)."""

    __slots__ = ("groups",)

    def __init__(self, groups=None, **kwargs):
        self.groups = groups


def _collective(name):
    def fn(*args, **kwargs):
        raise NotEmulatedError(f"nki.collectives.{name} is not emulated yet: the emulator models one NeuronCore")

    fn.__name__ = fn.__qualname__ = name
    return fn


_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_v", "reduce_scatter", "all_to_all", "all_to_all_v",
                "collective_permute", "collective_permute_implicit", "collective_permute_implicit_reduce",
                "collective_permute_implicit_current_processing_rank_id", "rank_id",
                # NKI 0.7: prepare/trigger splits of the variable-length collectives (2.33 API reference)
                "all_gather_v_prepare", "all_gather_v_trigger", "all_to_all_v_prepare", "all_to_all_v_trigger")
collectives = _module("nki.collectives", "NKI collectives (multi-core; not emulated).", ReplicaGroup=ReplicaGroup,
                      **{n: _collective(n) for n in _COLLECTIVES})
