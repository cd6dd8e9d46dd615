"""Hardware targets, per-call counters and the cost model (a timeline).

Counters are exact (instructions per engine, HBM bytes, DMA transfers,
peak on-chip bytes, matmul flops).  Times are *modeled* from AWS's
documented figures; they are for design decisions, never measurements.
Every figure below names its source in ``aws-neuron/aws-neuron-sdk``
(ARCH1 = ``nki/guides/architecture/trainium_inferentia2_arch.rst``,
ARCH2 = ``nki/guides/architecture/trainium2_arch.rst``, BWG =
``nki/deep-dives/nki-dma-bandwidth-guide.rst``, DMAO =
``nki/get-started/about/nki-dma-overview.rst``).

Cycles per instruction come from the cost table (:mod:`._cost`, read through
``_table.INSTRUCTIONS[name].cost``).  The timeline schedules every
instruction and DMA transfer in program order:

* Compute engines (Tensor, Vector, Scalar, GpSimd) run their own
  instructions in order; an instruction starts when its engine is free and
  the tiles it reads are written.  Reading a tile written by the *previous
  instructions of the same engine* costs ``DEP_STALL_CYCLES`` (100) more
  (ARCH1 "Vector Engine / Cost Model": "every instruction depending on the
  output tile of the previous instruction ... add a static instruction
  overhead of 100 engine cycles"; ARCH1 "Scalar Engine / Performance
  Consideration" carries it to ScalarE; GpSimd has no rule and gets the same;
  the Tensor Engine accumulates in PSUM without it).  Waiting on another
  engine's (or a DMA's) output costs ``ACCESS_CYCLES`` (60) of the waiting
  engine (ARCH1 "Data Movement / Tensor access overhead": ~60 cycles to
  start a tensor access, hidden only when the engine has other work).
  Dependencies are read-after-write per allocation (a tile and all its
  views); buffer reuse (write-after-read) is assumed to be covered by the
  compiler's multi-buffering.  trn2's guide restates neither figure: the
  trn1 cycle counts are applied at trn2's clocks.
* DMA: each transfer (one ``dma_copy`` / load / store) waits for its source
  tile, pays ``DMA_LATENCY_S`` (1.3 us, BWG "~1300 ns cross-engine"
  semaphore-to-start) on one of ``DMA_QUEUES`` (16) queues, and streams its
  bytes at ``rate x efficiency(bytes per partition) x min(16, P) / 16``; the
  streams of all queues share the aggregate rate.  ``rate`` is the
  aggregate DMA bandwidth of BWG / DMAO (17 B/ns x 16 = 272 GB/s trn1,
  23 B/ns x 16 = 368 GB/s trn2); ARCH1 "Data Movement" says 16 x 27 GiB/s
  (464 GB/s) and DMAO's prose 27.2 GB/s per engine for v2 and v3 alike:
  those are per-engine link peaks, while BWG/DMAO's table is the one that
  distinguishes the generations and is labelled the aggregate, so it is the
  one used (it also stays under each core's HBM share, 820/2 GB/s trn1,
  2.9T/8 trn2).  ``efficiency`` is :data:`DMA_EFFICIENCY`, digitized from
  DMAO's figure "DMA Throughput varying Bytes per Partition for p_dim = 128"
  (``nki/img/overviews/nki-dma-intro-1.jpg``, relative to its 32 KiB point;
  the figure has no y scale, so the curve is used for its shape only),
  which agrees with BWG's bands (< 256 B severely overhead-bound, 256 B - 2
  KiB below peak, ~4 KiB saturating).  The figure names no generation; it is
  applied to both.  Fewer than 16 partitions use fewer DMA engines (BWG
  "Use full partitions").

Each of these figures is a field of :class:`Target` (``dep_stall_cycles``,
``access_cycles``, ``dma_latency_s``, ``dma_queues``, ``dma_efficiency``);
the module constants are their documented defaults.

``modeled_time_s`` is the timeline's end.  ``modeled_time_lower_s``: every
engine and the DMA stream busy all the time, nothing waits (max of busy
times).  ``modeled_time_upper_s``: nothing overlaps (each instruction and
transfer after the previous, paying its stall / latency).
lower <= modeled_time_s <= upper.
"""

import bisect
import math
from dataclasses import dataclass, field

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")
KIB = 1024

DMA_LATENCY_S = 1.3e-6
DMA_QUEUES = 16
DMA_ENGINES = 16
MIN_INSTR_CYCLES = 64
DEP_STALL_CYCLES = {"vector": 100, "scalar": 100, "gpsimd": 100, "tensor": 0}
ACCESS_CYCLES = 60

#: (bytes per partition, fraction of peak DMA throughput) read off DMAO's figure
#: (p_dim = 128; point heights over the 32 KiB point's).  Linear in bytes between
#: points, proportional below 32 B, 1.0 from 32 KiB.
DMA_EFFICIENCY = (
    (32, 0.017), (64, 0.028), (128, 0.053), (256, 0.105), (512, 0.209), (1024, 0.425),
    (2048, 0.814), (4096, 0.967), (8192, 0.983), (16384, 0.992), (32768, 1.0),
)
_EFF_X = [b for b, _ in DMA_EFFICIENCY]


def dma_efficiency(bytes_per_partition, curve=DMA_EFFICIENCY):
    """Fraction of the peak DMA rate a transfer of this many bytes per partition reaches."""
    b = float(bytes_per_partition)
    xs = _EFF_X if curve is DMA_EFFICIENCY else [x for x, _ in curve]
    if b <= 0:
        return curve[0][1]
    if b <= xs[0]:
        return curve[0][1] * b / xs[0]
    if b >= xs[-1]:
        return curve[-1][1]
    i = bisect.bisect_right(xs, b)
    (x0, y0), (x1, y1) = curve[i - 1], curve[i]
    return y0 + (y1 - y0) * (b - x0) / (x1 - x0)


@dataclass(frozen=True)
class Target:
    name: str
    sbuf_bytes_per_partition: int
    psum_bytes_per_partition: int
    psum_banks: int
    te_flops_bf16: float
    te_flops_fp32: float
    clock_hz: dict
    dma_bytes_per_s: float
    # timeline figures (module doc); trn2's guide restates none of them, so both targets carry trn1's
    dep_stall_cycles: tuple = tuple(DEP_STALL_CYCLES.items())
    access_cycles: int = ACCESS_CYCLES
    dma_latency_s: float = DMA_LATENCY_S
    dma_queues: int = DMA_QUEUES
    dma_efficiency: tuple = DMA_EFFICIENCY

    @property
    def psum_bank_bytes(self):
        return self.psum_bytes_per_partition // self.psum_banks


TARGETS = {
    "trn1": Target(
        "trn1",
        192 * KIB,
        16 * KIB,
        8,
        92e12,
        23e12,
        {"tensor": 2.8e9, "vector": 1.12e9, "scalar": 1.4e9, "gpsimd": 1.4e9},
        # clocks: ARCH1 engine table; DMA: BWG/DMAO aggregate 17 B/ns x 16, under the
        # core's HBM share 820/2 GB/s (ARCH1 device: 820 GB/s, 2 cores)
        min(272e9, 820e9 / 2),
    ),
    "trn2": Target(
        "trn2",
        224 * KIB,
        16 * KIB,
        8,
        79e12,
        20e12,
        {"tensor": 2.4e9, "vector": 0.96e9, "scalar": 1.2e9, "gpsimd": 1.2e9},
        # clocks: ARCH2 engine table; DMA: BWG/DMAO aggregate 23 B/ns x 16 = 368 GB/s,
        # bounded by the core's HBM share 2.9T/8 = 362.5 GB/s (NKI.md; ARCH2 rounds to 3 TB/s)
        min(368e9, 2.9e12 / 8),
    ),
}


def get_target(name):
    from .errors import EmulatorError

    if isinstance(name, Target):
        return name
    try:
        return TARGETS[name]
    except KeyError:
        raise EmulatorError(f"unknown target {name!r}; expected one of {sorted(TARGETS)}") from None


class Counters:
    """Mutable per-call tallies filled in by the ops, plus the timeline.

    The ops call :meth:`issue` (compute) and :meth:`dma` (transfers); the
    tensor layer reports every tile read / write with :meth:`touch`, and the
    instruction wrapper brackets each instruction with :meth:`begin` /
    :meth:`end` so the reads and writes of one instruction go with the
    instructions it issued.
    """

    __slots__ = (
        "instructions",
        "cycles",
        "hbm_read_bytes",
        "hbm_write_bytes",
        "dma_transfers",
        "dma_effective_bytes",
        "flops_lowp",
        "flops_fp32",
        "by_instruction",
        "target",
        "_depth",
        "_reads",
        "_writes",
        "_events",
        "_free",
        "_last_write",
        "_dma_free",
        "_queues",
        "_end",
        "_stall",
        "_dma_stream",
        "_serial",
        "_dep_stall",
        "step",
    )

    def __init__(self, target="trn1"):
        self.instructions = dict.fromkeys(ENGINES, 0)
        self.cycles = dict.fromkeys(ENGINES[:-1], 0)
        self.hbm_read_bytes = 0
        self.hbm_write_bytes = 0
        self.dma_transfers = 0
        self.dma_effective_bytes = 0
        self.flops_lowp = 0
        self.flops_fp32 = 0
        self.by_instruction = {}
        self.target = get_target(target)
        self._depth = 0
        self._reads = set()
        self._writes = set()
        self._events = []
        self._free = dict.fromkeys(ENGINES[:-1], 0.0)
        self._last_write = {}  # id(allocation) -> (end time, engine)
        self._dma_free = []
        self._queues = [0.0] * self.target.dma_queues
        self._end = 0.0
        self._stall = dict.fromkeys(ENGINES, 0.0)
        self._dma_stream = 0.0
        self._serial = 0.0
        self._dep_stall = dict(self.target.dep_stall_cycles)
        self.step = 0  # instructions begun so far: the clock of on-chip liveness

    # ---- bookkeeping of reads / writes ----------------------------------
    def touch(self, alloc, write):
        (self._writes if write else self._reads).add(id(alloc))

    def forget(self, alloc):
        """An allocation went away: its id may be reused."""
        self._last_write.pop(id(alloc), None)

    def begin(self):
        if self._depth == 0:
            self.step += 1
            self._reads.clear()
            self._writes.clear()
            self._events = []
        self._depth += 1

    def end(self):
        self._depth -= 1
        if self._depth == 0:
            self._flush()

    def _flush(self):
        if self._events:
            self._schedule(self._events)
            self._events = []
        self._reads.clear()
        self._writes.clear()

    # ---- counting ---------------------------------------------------------
    def issue(self, instr, engine, cycles):
        """Count one ``instr`` on ``engine``; cycles come from the instruction table
        (``_table.INSTRUCTIONS[instr].cycles``), DMA time from :meth:`dma`."""
        key = (instr, engine)
        self.by_instruction[key] = self.by_instruction.get(key, 0) + 1
        if engine == "dma":
            return
        cycles = max(MIN_INSTR_CYCLES, int(cycles))
        self.instructions[engine] += 1
        self.cycles[engine] += cycles
        self._event((engine, cycles))

    def dma(self, partitions, nbytes, hbm_read=0, hbm_write=0, instr="nisa.dma_copy"):
        key = (instr, "dma")
        self.by_instruction[key] = self.by_instruction.get(key, 0) + 1
        self.instructions["dma"] += 1
        self.dma_transfers += 1
        partitions = max(1, int(partitions))
        self.dma_effective_bytes += int(nbytes)
        self.hbm_read_bytes += int(hbm_read)
        self.hbm_write_bytes += int(hbm_write)
        self._event(("dma", partitions, int(nbytes)))

    def _event(self, ev):
        if self._depth:
            self._events.append(ev)
        else:  # an op outside an instruction wrapper (nl.load / nl.store): its accesses so far are its own
            self._schedule([ev])
            self._reads.clear()
            self._writes.clear()

    # ---- the timeline -----------------------------------------------------
    def dma_seconds(self, partitions, nbytes):
        """Streaming time of one transfer (without its fixed latency)."""
        t = self.target
        per_part = nbytes / partitions
        engines = min(DMA_ENGINES, partitions)
        return nbytes / (t.dma_bytes_per_s * dma_efficiency(per_part, t.dma_efficiency) * engines / DMA_ENGINES)

    def _dma_slot(self, earliest, dur):
        """Book the shared DMA bandwidth for ``dur`` seconds from the first free gap at or after ``earliest``.

        Transfers take the bandwidth in the order they become ready, not in
        program order: a store waiting for its tile does not hold back a
        later, independent load (the compiler schedules the triggers).
        """
        busy = self._dma_free  # sorted, disjoint [start, end) intervals
        i = bisect.bisect_right(busy, (earliest, math.inf)) - 1
        t = earliest
        if i >= 0 and busy[i][1] > t:
            t = busy[i][1]
        j = i + 1
        while j < len(busy) and busy[j][0] < t + dur:
            t = max(t, busy[j][1])
            j += 1
        # insert [t, t + dur) at position j, merging with touching neighbours
        lo, hi = t, t + dur
        k = j
        if k > 0 and busy[k - 1][1] >= lo:
            k -= 1
            lo = busy[k][0]
            del busy[k]
        if k < len(busy) and busy[k][0] <= hi:
            hi = busy[k][1]
            del busy[k]
        busy.insert(k, (lo, hi))
        return t

    def _schedule(self, events):
        tgt = self.target
        clock = tgt.clock_hz
        lat = tgt.dma_latency_s
        reads = self._reads - self._writes if len(events) > 1 else self._reads
        deps = [self._last_write[r] for r in reads if r in self._last_write]
        end = 0.0
        first = True
        for ev in events:
            eng = ev[0]
            if eng == "dma":
                _, parts, nbytes = ev
                ready = max((t for t, _ in deps), default=0.0) if first else end
                q = min(range(len(self._queues)), key=self._queues.__getitem__)
                issue = max(ready, self._queues[q])
                dur = self.dma_seconds(parts, nbytes)
                start = self._dma_slot(issue + lat, dur)
                end = start + dur
                self._queues[q] = end
                self._dma_stream += dur
                self._serial += lat + dur
            else:
                _, cycles = ev
                hz = clock[eng]
                ready = 0.0
                overhead = 0.0
                if first:
                    for t_end, weng in deps:
                        extra = (self._dep_stall[eng] if weng == eng else tgt.access_cycles) / hz
                        ready = max(ready, t_end + extra)
                        overhead = max(overhead, extra)
                free = self._free[eng]
                start = max(free, ready)
                if start > free:
                    self._stall[eng] += start - free
                end = start + cycles / hz
                self._free[eng] = end
                self._serial += overhead + cycles / hz
            first = False
        for w in self._writes:
            self._last_write[w] = (end, events[-1][0])
        if end > self._end:
            self._end = end

    def finish(self):
        """Flush what is pending (a trace ended inside no instruction)."""
        self._depth = 0
        self._flush()


@dataclass
class KernelProfile:
    """What one kernel call did, counted exactly, plus a modeled time.

    Attributes
    ----------
    target : str
        "trn1" or "trn2"; capacity limits and the time model use it.
    instructions : dict
        Instructions per engine: "tensor", "vector", "scalar", "gpsimd", "dma".
    hbm_read_bytes, hbm_write_bytes : int
        Bytes DMA'd from / to HBM.
    dma_transfers : int
        DMA transfers (one per load/store/dma_copy call).
    peak_sbuf_bytes, peak_psum_bytes : int
        Peak bytes per partition over live on-chip allocations.
    flops : int
        Matmul flops, 2*K*M*N per nc_matmul / nl.matmul.
    modeled_time_s : float
        Modeled kernel time: the end of the timeline (engines in order,
        dependency stalls, DMA queues and efficiency; see the module doc).
    modeled_time_lower_s, modeled_time_upper_s : float
        Bounds on it: every engine busy all the time / nothing overlapping.
    engine_time_s : dict
        Modeled busy time per engine (DMA: its stream at the modeled
        efficiency, or its queues' latencies if longer).
    engine_stall_s : dict
        Modeled time each engine sat idle waiting for its operands.
    by_instruction : dict
        Instructions per ``"nisa.<name>@<engine>"`` (nl wrappers count as the
        nisa instructions they lower to).
    """

    target: str = "trn1"
    instructions: dict = field(default_factory=lambda: dict.fromkeys(ENGINES, 0))
    hbm_read_bytes: int = 0
    hbm_write_bytes: int = 0
    dma_transfers: int = 0
    peak_sbuf_bytes: int = 0
    peak_psum_bytes: int = 0
    flops: int = 0
    modeled_time_lower_s: float = 0.0
    modeled_time_upper_s: float = 0.0
    engine_time_s: dict = field(default_factory=dict)
    modeled_time_s: float = 0.0
    engine_stall_s: dict = field(default_factory=dict)
    flops_fp32: int = 0
    flops_bf16: int = 0
    by_instruction: dict = field(default_factory=dict)

    @property
    def hbm_bytes(self):
        return self.hbm_read_bytes + self.hbm_write_bytes

    def ideal_tensor_time_s(self):
        """Time the Tensor Engine needs for ``flops`` at its peak rate."""
        t = get_target(self.target)
        return self.flops_bf16 / t.te_flops_bf16 + self.flops_fp32 / t.te_flops_fp32

    def tensor_engine_utilization(self):
        """Ideal Tensor Engine time / modeled kernel time (modeled)."""
        if self.modeled_time_s <= 0:
            return 0.0
        return self.ideal_tensor_time_s() / self.modeled_time_s

    def __str__(self):
        rows = [
            f"KernelProfile (NKI emulator, target {self.target})",
            "  instructions       " + "  ".join(f"{k}={v}" for k, v in self.instructions.items()),
            f"  HBM read           {self.hbm_read_bytes:>14,d} B",
            f"  HBM write          {self.hbm_write_bytes:>14,d} B",
            f"  DMA transfers      {self.dma_transfers:>14,d}",
            f"  peak SBUF          {self.peak_sbuf_bytes:>14,d} B/partition",
            f"  peak PSUM          {self.peak_psum_bytes:>14,d} B/partition",
            f"  matmul flops       {self.flops:>14,d}",
            f"  modeled time       {self.modeled_time_s * 1e6:>10.2f} us (timeline; "
            f"{self.modeled_time_lower_s * 1e6:.2f} overlap .. {self.modeled_time_upper_s * 1e6:.2f} serial)  "
            "[modeled]",
            "  modeled busy       " + "  ".join(f"{k}={v * 1e6:.2f}us" for k, v in self.engine_time_s.items()),
            f"  TE utilization     {self.tensor_engine_utilization():>13.1%}  [modeled]",
        ]
        return "\n".join(rows)


def build_profile(counters, target, peak_sbuf, peak_psum):
    """Turn raw counters into a KernelProfile with modeled times for target."""
    t = get_target(target)
    if counters.target is not t:  # counters made without the target: re-time them here
        raise ValueError(f"counters were timed for {counters.target.name}, not {t.name}")
    counters.finish()
    engine_time = {e: counters.cycles[e] / t.clock_hz[e] for e in counters.cycles}
    # the DMA queues are busy at least for the stream, and each queue for its transfers' latencies
    engine_time["dma"] = max(counters._dma_stream,
                             math.ceil(counters.dma_transfers / t.dma_queues) * t.dma_latency_s)
    lower = max(engine_time.values()) if engine_time else 0.0
    timeline = counters._end
    upper = max(counters._serial, timeline)
    return KernelProfile(
        target=t.name,
        instructions=dict(counters.instructions),
        hbm_read_bytes=counters.hbm_read_bytes,
        hbm_write_bytes=counters.hbm_write_bytes,
        dma_transfers=counters.dma_transfers,
        peak_sbuf_bytes=peak_sbuf,
        peak_psum_bytes=peak_psum,
        flops=counters.flops_lowp + counters.flops_fp32,
        modeled_time_s=timeline,
        modeled_time_lower_s=min(lower, timeline),
        modeled_time_upper_s=upper,
        engine_time_s=engine_time,
        engine_stall_s=dict(counters._stall),
        flops_fp32=counters.flops_fp32,
        flops_bf16=counters.flops_lowp,
        by_instruction={f"{k[0]}@{k[1]}": v for k, v in sorted(counters.by_instruction.items())},
    )
