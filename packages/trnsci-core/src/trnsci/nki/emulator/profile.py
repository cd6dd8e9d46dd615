"""Hardware targets, per-call counters and the cost model.

Counters are exact (instructions per engine, HBM bytes, DMA transfers,
peak on-chip bytes, matmul flops).  Times are *modeled* from the public
figures in NKI.md and the cycle rules of thumb below; they are for design
decisions, never measurements.

The cycles of each instruction come from the instruction table
(``_table.INSTRUCTIONS[name].cost``, declared next to each instruction in
``_isa.py``); :meth:`Counters.issue` records them.  The rules encoded there
(N = elements per partition of the instruction's main operand):

* Vector: one-input op N, tensor_tensor 2N, reciprocal 8N; min 64 per instr.
* Scalar: activation N; min 64.
* GpSimd: iota 150 + N; other ops N; min 64.
* Tensor: matmul max(min(64, M), N) cycles for bf16/fp16 inputs, 4x that
  when an operand is fp32 (M = stationary free size, N = moving free size).
  A Tensor Engine transpose of a [P, F] tile costs like a matmul with
  M = F, N = P.
* DMA: each transfer moves max(bytes per partition, 256) bytes per
  partition at the per-core DMA rate (bounded by the core's share of HBM
  bandwidth) and pays ~1.3 us fixed latency.

``modeled_time_lower_s``: engines overlap perfectly and 16 DMA queues hide
the fixed latency in parallel: max(per-engine busy time, DMA bytes/rate +
transfers * 1.3 us / 16).  ``modeled_time_upper_s``: nothing overlaps:
sum of engine times + DMA bytes/rate + transfers * 1.3 us.
"""

from dataclasses import dataclass, field

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")
KIB = 1024

DMA_LATENCY_S = 1.3e-6
DMA_QUEUES = 16
DMA_MIN_BYTES_PER_PARTITION = 256
MIN_INSTR_CYCLES = 64


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
        # per-core DMA ~272 GB/s; the core's HBM share is 820/2 = 410 GB/s
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
        # per-core DMA ~368 GB/s; the core's HBM share is 2.9T/8 = 362.5 GB/s
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
    """Mutable per-call tallies filled in by the ops."""

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
    )

    def __init__(self):
        self.instructions = dict.fromkeys(ENGINES, 0)
        self.cycles = dict.fromkeys(ENGINES[:-1], 0)
        self.hbm_read_bytes = 0
        self.hbm_write_bytes = 0
        self.dma_transfers = 0
        self.dma_effective_bytes = 0
        self.flops_lowp = 0
        self.flops_fp32 = 0
        self.by_instruction = {}

    def issue(self, instr, engine, cycles):
        """Count one ``instr`` on ``engine``; cycles come from the instruction table
        (``_table.INSTRUCTIONS[instr].cycles``), DMA time from :meth:`dma`."""
        key = (instr, engine)
        self.by_instruction[key] = self.by_instruction.get(key, 0) + 1
        if engine == "dma":
            return
        self.instructions[engine] += 1
        self.cycles[engine] += max(MIN_INSTR_CYCLES, int(cycles))

    def dma(self, partitions, nbytes, hbm_read=0, hbm_write=0, instr="nisa.dma_copy"):
        key = (instr, "dma")
        self.by_instruction[key] = self.by_instruction.get(key, 0) + 1
        self.instructions["dma"] += 1
        self.dma_transfers += 1
        partitions = max(1, int(partitions))
        per_part = nbytes / partitions
        self.dma_effective_bytes += partitions * max(per_part, DMA_MIN_BYTES_PER_PARTITION)
        self.hbm_read_bytes += int(hbm_read)
        self.hbm_write_bytes += int(hbm_write)


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
    modeled_time_lower_s, modeled_time_upper_s : float
        Modeled kernel time with perfect / no engine overlap.
    engine_time_s : dict
        Modeled busy time per engine (the DMA entry includes latency hidden
        across queues, as in the lower bound).
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
        """Ideal Tensor Engine time / modeled lower-bound kernel time (modeled)."""
        if self.modeled_time_lower_s <= 0:
            return 0.0
        return self.ideal_tensor_time_s() / self.modeled_time_lower_s

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
            f"  modeled time       {self.modeled_time_lower_s * 1e6:>10.2f} us (overlap) .. "
            f"{self.modeled_time_upper_s * 1e6:.2f} us (serial)  [modeled]",
            "  modeled busy       " + "  ".join(f"{k}={v * 1e6:.2f}us" for k, v in self.engine_time_s.items()),
            f"  TE utilization     {self.tensor_engine_utilization():>13.1%}  [modeled]",
        ]
        return "\n".join(rows)


def build_profile(counters, target, peak_sbuf, peak_psum):
    """Turn raw counters into a KernelProfile with modeled times for target."""
    t = get_target(target)
    engine_time = {e: counters.cycles[e] / t.clock_hz[e] for e in counters.cycles}
    dma_stream = counters.dma_effective_bytes / t.dma_bytes_per_s
    dma_lower = dma_stream + counters.dma_transfers * DMA_LATENCY_S / DMA_QUEUES
    dma_upper = dma_stream + counters.dma_transfers * DMA_LATENCY_S
    engine_time["dma"] = dma_lower
    lower = max(engine_time.values()) if engine_time else 0.0
    upper = sum(v for k, v in engine_time.items() if k != "dma") + dma_upper
    return KernelProfile(
        target=t.name,
        instructions=dict(counters.instructions),
        hbm_read_bytes=counters.hbm_read_bytes,
        hbm_write_bytes=counters.hbm_write_bytes,
        dma_transfers=counters.dma_transfers,
        peak_sbuf_bytes=peak_sbuf,
        peak_psum_bytes=peak_psum,
        flops=counters.flops_lowp + counters.flops_fp32,
        modeled_time_lower_s=lower,
        modeled_time_upper_s=upper,
        engine_time_s=engine_time,
        flops_fp32=counters.flops_fp32,
        flops_bf16=counters.flops_lowp,
        by_instruction={f"{k[0]}@{k[1]}": v for k, v in sorted(counters.by_instruction.items())},
    )
