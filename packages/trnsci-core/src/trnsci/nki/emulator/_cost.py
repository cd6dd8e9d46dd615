"""The cost table: cycles per instruction, each rule citing the AWS document it follows.

:data:`COSTS` maps an instruction name to ``{engine: Rule}``.  The
instruction registry (:func:`._table.instruction`) takes its ``cost`` from
here, so the counters and the profile's timeline read one table.  A rule is
called as ``rule(n, args=..., target=..., engine=..., **extra)``: ``n`` is
the elements per partition of the instruction's main operand (what the body
passes to ``call.issue``), ``args`` the bound arguments of the call (tiles,
ops, constants), ``target`` ``"trn1"`` / ``"trn2"``.  Every result is then
raised to ``MIN_II`` (64 cycles, "the minimum instruction initiation
interval for small input tiles", defined in the same source).

Sources (all in the repository ``aws-neuron/aws-neuron-sdk``):

* **ISA** -- ``nki/api/nki/isa/__init__.py`` at commit ``1db4d74e``
  (2025-10-17, NKI of SDK 2.26), the last revision whose docstrings carry an
  "Estimated instruction cost" section per instruction (identical to
  ``general/nki/api/nki/isa/__init__.py`` of release 2.26.0, ``0521004c``).
  Cited as ``ISA <instruction>``.  Later revisions dropped the sections.
* **ARCH1** -- ``nki/guides/architecture/trainium_inferentia2_arch.rst``
  (NeuronCore-v2, trn1): sections "Tensor Engine / Performance
  Consideration", "Vector Engine / Cost Model", "Scalar Engine /
  Performance Consideration", "GpSimd Engine / Cost Model", "Data Movement".
* **ARCH2** -- ``nki/guides/architecture/trainium2_arch.rst``
  (NeuronCore-v3, trn2): "Vector Engine Performance Mode".
* **SHARED** -- ``nki/api/nki.api.shared.rst``, "NKI Engine Selection for
  Operators Supported on Multiple Engines".

Where the sources disagree the rule says which one it follows and why
(``note``).  Rules marked ``documented=False`` have no published formula;
they keep the emulator's earlier rule of thumb and say so.
"""

from dataclasses import dataclass

MIN_II = 64
GPSIMD_START = 150  # ISA affine_select: "instruction startup overhead on GpSimdE, roughly 150 engine cycles"

ISA = "nki/api/nki/isa/__init__.py @1db4d74e (SDK 2.26)"
ARCH1 = "nki/guides/architecture/trainium_inferentia2_arch.rst"
ARCH2 = "nki/guides/architecture/trainium2_arch.rst"
SHARED = "nki/api/nki.api.shared.rst"


@dataclass(frozen=True)
class Rule:
    """One cost rule: ``fn(n, args, target)`` -> cycles, with its formula and source."""

    fn: object
    formula: str
    source: str
    note: str = ""
    documented: bool = True

    def __call__(self, n, args=None, target="trn1", **kw):
        return self.fn(int(n), args or {}, target, **kw)


# ----------------------------------------------------------------- predicates
def _tile(a, name):
    from .memory import Tensor

    t = a.get(name)
    return t if isinstance(t, Tensor) else None


def _mem(t):
    return None if t is None else t.buffer.name


def _dt(t):
    return None if t is None else str(t.dtype)


_HALF = ("bfloat16", "float16")


def _contig_inner(t):
    """Unit stride along the innermost free dimension (ARCH2 condition 1c)."""
    return t is not None and (len(t.shape) < 2 or t.shape[-1] == 1 or t.strides[-1] == 1)


def _opname(op):
    return getattr(op, "name", None)


# ----------------------------------------------------------------- the rules
def _n(n, a, tgt, **_):
    return n


def _2n(n, a, tgt, **_):
    return 2 * n


def _8n(n, a, tgt, **_):
    return 8 * n


def _gpsimd_start(n, a, tgt, **_):
    return GPSIMD_START + n


def _matmul(n, a, tgt, m=128, lowp=False, **_):
    return max(min(64, m), n) * (1 if lowp else 4)


def _pe_transpose(n, a, tgt, m=128, **_):
    # n = P (partitions of data), m = F (free elements of data)
    return max(n, min(64, m))


def _vector_perf_mode(n, a, tgt, src="src"):
    """tensor_copy / tensor_scalar on the Vector Engine, with trn2's bf16/fp16 performance mode."""
    if tgt != "trn2":
        return n
    s, d = _tile(a, src), _tile(a, "dst")
    if s is None or d is None or _dt(s) not in _HALF or _dt(d) not in _HALF:
        return n
    both_sbuf = _mem(s) == "sbuf" and _mem(d) == "sbuf"
    contig = _contig_inner(s) and _contig_inner(d)
    if both_sbuf and contig:
        return n / 4
    if both_sbuf or contig:  # 1a+1b without 1c, or 1b+1c with one side in PSUM
        return n / 2
    return n


def _tensor_copy_vector(n, a, tgt, **_):
    return _vector_perf_mode(n, a, tgt, "src")


def _tensor_scalar_vector(n, a, tgt, recip=False, **_):
    if recip:
        return 8 * n
    return _vector_perf_mode(n, a, tgt, "data")


def _memset(n, a, tgt, **_):
    v = a.get("value")
    d = _tile(a, "dst")
    if d is not None and _dt(d) in _HALF and v is not None and float(v) == 0.0:
        return n / 2
    return n


def _copy_predicated(n, a, tgt, **_):
    s, d = _tile(a, "src"), _tile(a, "dst")
    return 2 * n if _mem(s) == "sbuf" and _mem(d) == "sbuf" else n


def _tensor_tensor_vector(n, a, tgt, **_):
    x, y, d = _tile(a, "data1"), _tile(a, "data2"), _tile(a, "dst")
    mems = {_mem(x), _mem(y)}
    if mems == {"sbuf", "psum"}:
        return n
    if (tgt == "trn2" and mems == {"sbuf"} and _opname(a.get("op")) in ("add", "multiply", "subtract")
            and all(_dt(t) == "bfloat16" for t in (x, y, d)) and _contig_inner(x) and _contig_inner(y)):
        return n
    return 2 * n


def _scalar_tensor_tensor(n, a, tgt, **_):
    x, y = _tile(a, "data"), _tile(a, "operand1")
    if (_dt(x) == "bfloat16" and _dt(y) == "bfloat16" and _opname(a.get("op0")) == "subtract"
            and _opname(a.get("op1")) == "multiply" and n % 2 == 0):
        return n
    return 2 * n


def _tensor_reduce(n, a, tgt, **_):
    x, d = _tile(a, "data"), _tile(a, "dst")
    if _dt(x) == "bfloat16" and _dt(d) == "bfloat16" and _opname(a.get("op")) in ("add", "maximum"):
        return n / 2
    return n


def _tensor_scalar_reduce(n, a, tgt, **_):
    return max(MIN_II, n) + MIN_II


def _bn_aggr(n, a, tgt, **_):
    return 13 * (n / 3)


def _local_gather(n, a, tgt, **_):
    # n = num_valid_indices * num_elem_per_idx (the body's count)
    e = max(1, int(a.get("num_elem_per_idx") or 1))
    s = _tile(a, "src_buffer")
    size = s.dtype.itemsize if s is not None else 4
    t = 4
    c = ((28 + t * e) / (t * e)) / min(4 / size, e)
    return GPSIMD_START + n / c


def _dma(n, a, tgt, **_):
    return 0  # DMA time comes from bytes and transfers (profile timeline)


def _r(fn, formula, source, note="", documented=True):
    return Rule(fn, formula, source, note, documented)


_UNDOC = "no published formula; the emulator's rule of thumb"
_PERF_MODE = (f"{ARCH2} 'Vector Engine Performance Mode': trn2 only, bf16/fp16 input and output: N/4 both in "
              "SBUF with unit inner stride, N/2 if only one of the two conditions holds")

#: instruction -> {engine: Rule}
COSTS = {
    "nisa.nc_matmul": {
        "tensor": _r(_matmul, "max(min(64, N_stationary), N_moving); x4 for fp32 operands",
                     f"ISA nc_matmul; {ARCH1} 'Tensor Engine / Performance Consideration' (MM_INIT_LATENCY 64)",
                     "average over back-to-back matmuls of one shape; fp8 double-row (trn2) not modeled"),
    },
    "nisa.nc_transpose": {
        "tensor": _r(_pe_transpose, "max(P, min(64, F))", "ISA nc_transpose",
                     "no fp32 factor: the ISA gives none for the transpose (the 4x of fp32 is an nc_matmul rule)"),
        "vector": _r(_n, "max(MIN_II, N)", "ISA nc_transpose"),
    },
    "nisa.tensor_copy": {
        "vector": _r(_tensor_copy_vector, "max(MIN_II, N); trn2 bf16/fp16: N/4 or N/2",
                     f"ISA tensor_copy; {_PERF_MODE}"),
        "scalar": _r(_n, "max(MIN_II, N)", "ISA tensor_copy"),
        "gpsimd": _r(_n, "max(MIN_II, N)", "ISA tensor_copy"),
    },
    "nisa.memset": {
        "vector": _r(_memset, "max(MIN_II, N/2) for zero into bf16/fp16, else max(MIN_II, N)", "ISA memset"),
        "gpsimd": _r(_memset, "as on the Vector Engine", "ISA memset",
                     "the ISA states Vector Engine cycles only; applied to GpSimd unchanged"),
    },
    "nisa.tensor_copy_predicated": {
        "vector": _r(_copy_predicated, "max(MIN_II, 2N) src and dst in SBUF, else max(MIN_II, N)",
                     "ISA tensor_copy_predicated"),
    },
    "nisa.tensor_tensor": {
        "vector": _r(_tensor_tensor_vector,
                     "max(MIN_II, N) one input in PSUM, the other in SBUF; max(MIN_II, N) trn2 all-bf16 SBUF "
                     "add/multiply/subtract with unit stride; else max(MIN_II, 2N)",
                     f"ISA tensor_tensor; {ARCH2} 'Vector Engine Performance Mode' item 2a",
                     "the ISA lists the all-bf16 N rule without a target; ARCH2 calls the same condition a 2x "
                     "lift of NeuronCore-v3 over v2, so it is applied on trn2 only (the target-specific source)"),
        "gpsimd": _r(_2n, "2N", "ISA tensor_tensor (Vector Engine table only)", _UNDOC, documented=False),
    },
    "nisa.tensor_scalar": {
        "vector": _r(_tensor_scalar_vector, "max(MIN_II, N); 8N with a reciprocal; trn2 bf16/fp16: N/4 or N/2",
                     f"ISA tensor_scalar; {SHARED} 'Engine Selection' (reciprocal ~8x lower on Vector); "
                     + _PERF_MODE),
        "scalar": _r(_n, "max(MIN_II, N)", "ISA tensor_scalar"),
        "gpsimd": _r(_n, "N", "ISA tensor_scalar (Vector/Scalar only)", _UNDOC, documented=False),
    },
    "nisa.scalar_tensor_tensor": {
        "vector": _r(_scalar_tensor_tensor, "N for bf16 data/operand1, op0=subtract, op1=multiply, even N; else 2N",
                     "ISA scalar_tensor_tensor"),
    },
    "nisa.reciprocal": {
        "vector": _r(_8n, "max(MIN_II, 8N)", f"ISA reciprocal; {SHARED} 'Engine Selection'"),
    },
    "nisa.activation": {
        "scalar": _r(_n, "max(MIN_II, N) (+ MIN_II for the reduce_res read-out, counted as its own instruction)",
                     f"ISA activation, activation_reduce; {ARCH1} 'Scalar Engine' (ActReadAccumulator ~64)"),
    },
    "nisa.activation_reduce": {
        "scalar": _r(_n, "max(MIN_II, N) + MIN_II (two instructions: Activate, ActReadAccumulator)",
                     f"ISA activation_reduce; {ARCH1} 'Scalar Engine'"),
    },
    "nisa.tensor_reduce": {
        "vector": _r(_tensor_reduce, "N/2 for bf16 in and out with add/maximum, else N (MIN_II floor)",
                     "ISA tensor_reduce"),
    },
    "nisa.tensor_partition_reduce": {
        "gpsimd": _r(_n, "N", f"{ARCH1} 'GpSimd Engine / Cost Model' (no rule of thumb)", _UNDOC, documented=False),
    },
    "nisa.tensor_tensor_scan": {
        "vector": _r(_2n, "max(MIN_II, 2N)", "ISA tensor_tensor_scan"),
    },
    "nisa.tensor_scalar_reduce": {
        "vector": _r(_tensor_scalar_reduce, "max(MIN_II, N) + MIN_II", "ISA tensor_scalar_reduce"),
    },
    "nisa.tensor_scalar_cumulative": {
        "vector": _r(_n, "N", "not in the ISA of SDK 2.26", _UNDOC, documented=False),
    },
    "nisa.select_reduce": {
        "vector": _r(_n, "N", "not in the ISA of SDK 2.26", _UNDOC, documented=False),
    },
    "nisa.range_select": {
        "vector": _r(_n, "max(MIN_II, N)", "ISA range_select"),
    },
    "nisa.iota": {
        "gpsimd": _r(_gpsimd_start, "150 + N", "ISA iota"),
    },
    "nisa.affine_select": {
        "gpsimd": _r(_gpsimd_start, "GPSIMD_START + N, GPSIMD_START ~150", "ISA affine_select"),
    },
    "nisa.max8": {
        "vector": _r(_n, "N", "ISA max8"),
    },
    "nisa.nc_find_index8": {
        "vector": _r(_n, "N", "ISA nc_find_index8"),
    },
    "nisa.nc_match_replace8": {
        "vector": _r(_n, "max(MIN_II, N)", "ISA nc_match_replace8",
                     "the ISA prints min(MIN_II, N), which would cap a 16k-element instruction at 64 cycles; "
                     "read as max like every other MIN_II rule"),
    },
    "nisa.nc_n_gather": {
        "gpsimd": _r(_n, "N", "not in the ISA of SDK 2.26", _UNDOC, documented=False),
    },
    "nisa.local_gather": {
        "gpsimd": _r(_local_gather, "150 + n_valid * e / C, C = ((28 + 4e) / (4e)) / min(4 / dtype_size, e)",
                     "ISA local_gather", "t = 4 as the ISA states ('subject to change')"),
    },
    "nisa.bn_stats": {
        "vector": _r(_n, "max(MIN_II, N)", "ISA bn_stats"),
    },
    "nisa.bn_aggr": {
        "vector": _r(_bn_aggr, "max(MIN_II, 13 * (N / 3))", "ISA bn_aggr"),
    },
    "nisa.nc_stream_shuffle": {
        "vector": _r(_n, "max(MIN_II, N)", "ISA nc_stream_shuffle"),
    },
    "nisa.nonzero_with_count": {
        "gpsimd": _r(_n, "N", "not in the ISA of SDK 2.26", _UNDOC, documented=False),
    },
    "nisa.sequence_bounds": {
        "gpsimd": _r(_n, "N", "not in the ISA of SDK 2.26", _UNDOC, documented=False),
    },
}

COSTS["nisa.core_barrier"] = {
    e: _r(_n, "max(MIN_II, 1)", "ISA core_barrier (semaphore update + wait; no cost given)", _UNDOC,
          documented=False) for e in ("gpsimd", "vector", "scalar", "tensor")}

for _name in ("nisa.dma_copy", "nisa.dma_transpose", "nisa.dma_compute", "nisa.sendrecv"):
    COSTS[_name] = {"dma": _r(_dma, "bytes / (rate x efficiency) + latency",
                              "see profile.py (DMA model)")}


def cost_for(name, fallback):
    """The table's rule for ``name`` (a dict by engine), else ``fallback``."""
    return COSTS.get(name, fallback)
