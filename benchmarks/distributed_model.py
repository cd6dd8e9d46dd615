"""Modeled strong scaling of the distributed algorithms on trn1 (32 NeuronCores per node, 1-16 nodes over EFA).

Every number printed here is *modeled*, from the communication-volume
formulas of trnsci.distributed / trnblas / trnfft / trnsci.chem_distributed
and the hardware figures below -- nothing was run on Trainium.

    python benchmarks/distributed_model.py [--plot docs/img/distributed_scaling.png]

Model: time(P) = compute / P  +  sum over collectives of (latency + bytes
a rank sends on its slowest link / that link's bandwidth).  A rank's
all-to-all bytes are spread evenly over its peers, so the fraction
``(P - Pn) / (P - 1)`` leaves the node (``Pn`` = ranks per node); those
bytes share the node's EFA bandwidth with the other ``Pn`` ranks.
"""

from __future__ import annotations

import argparse
import math

# ---- hardware (per NeuronCore unless said); sources in docs/distributed.md
F32_MATMUL = 23e12 * 0.5   # FP32 Tensor Engine 23 TFLOPS (NKI.md) at an assumed 50 % of peak
HBM = 820e9 / 2            # HBM 820 GB/s per trn1 chip, 2 cores per chip (NKI.md)
LINK = 50e9                # NeuronLink-v2 share per core: ASSUMED (no per-link figure in our sources)
EFA_NODE = 800e9 / 8       # trn1.32xlarge EFA 800 Gbit/s per node (Neuron trn1 architecture page)
CORES_PER_NODE = 32
LAT_IN, LAT_EFA = 10e-6, 30e-6  # per collective step: ASSUMED


def comm_time(bytes_per_rank: float, P: int, peers: int | None = None, steps: int = 1) -> float:
    """Seconds for a rank to send ``bytes_per_rank`` to ``peers`` ranks (default all) in ``steps`` collectives."""
    if P == 1 or bytes_per_rank == 0:
        return 0.0
    peers = P - 1 if peers is None else peers
    pn = min(P, CORES_PER_NODE)
    off = max(0.0, (peers - (pn - 1)) / peers) if peers else 0.0  # share of peers on other nodes
    t_in = bytes_per_rank * (1 - off) / LINK
    t_out = bytes_per_rank * off / (EFA_NODE / pn)
    return max(t_in, t_out) + steps * (LAT_EFA if off > 0 else LAT_IN)


def grid(P: int) -> tuple[int, int]:
    pr = int(math.isqrt(P))
    while P % pr:
        pr -= 1
    return pr, P // pr


def gemm(n: int, P: int, itemsize: int = 4) -> dict:
    comp = 2 * n**3 / (P * F32_MATMUL)
    row = comm_time((P - 1) / P * n * n * itemsize, P)  # all-gather of B
    pr, pc = grid(P)
    # SUMMA: row broadcasts among pc ranks, column broadcasts among pr ranks, one per k-panel
    words = n * n * ((pc - 1) + (pr - 1)) / P
    summa = comm_time(words * itemsize, P, peers=pr + pc - 2 or None, steps=max(pr, pc)) if P > 1 else 0.0
    return {"compute": comp, "row": comp + row, "summa": comp + summa}


def fft3(n: int, P: int, itemsize: int = 8) -> dict:
    # three axis passes, each reading and writing the whole array once from HBM (bandwidth-bound)
    comp = 3 * 2 * n**3 * itemsize / (P * HBM)
    vol = n**3 * itemsize / P
    slab = comp + comm_time(vol * (P - 1) / P, P) if P <= n else math.inf
    pr, pc = grid(P)
    pencil = comp + (comm_time(vol * (pc - 1) / pc, P, peers=pc - 1 or None) if pc > 1 else 0.0) \
        + (comm_time(vol * (pr - 1) / pr, P, peers=pr - 1 or None) if pr > 1 else 0.0) \
        if P <= n * n else math.inf
    return {"compute": comp, "slab": slab, "pencil": pencil}


def dfmp2(nocc: int, nvir: int, naux: int, nao: int, P: int, itemsize: int = 4) -> dict:
    ao2mo = 2 * nocc * nao * naux * (nao + nvir)
    fit = nocc * nvir * naux**2
    energy = nocc * (nocc + 1) / 2 * 2 * nvir**2 * naux
    Pe = min(P, nocc)  # occupied blocks: ranks beyond nocc have no rows
    comp = ao2mo / (P * F32_MATMUL) + (fit + energy) / (Pe * F32_MATMUL)
    transpose = nocc * nvir * naux * itemsize * (P - 1) / P**2
    ring = (P // 2) * (nocc / Pe) * nvir * naux * itemsize
    pairs = 2 * nocc * nocc * 8
    t = comp + comm_time(transpose, P) + (comm_time(ring, P, peers=1, steps=P // 2) if P > 1 else 0) \
        + comm_time(pairs, P)
    return {"compute": comp, "total": t}


PS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
CASES = {
    "GEMM n=16384 fp32": lambda P: gemm(16384, P),
    "GEMM n=4096 fp32": lambda P: gemm(4096, P),
    "FFT 1024^3 c64": lambda P: fft3(1024, P),
    "FFT 256^3 c64": lambda P: fft3(256, P),
    "DF-MP2 benzene/cc-pVTZ": lambda P: dfmp2(21, 243, 666, 264, P),
    "DF-MP2 benzene dimer/cc-pVTZ": lambda P: dfmp2(42, 486, 1332, 528, P),
}


def table() -> str:
    lines = ["| case | route | " + " | ".join(f"P={p}" for p in PS) + " |",
             "|---|---|" + "---|" * len(PS)]
    for name, fn in CASES.items():
        rows = fn(1)
        for route in rows:
            if route == "compute":
                continue
            base = fn(1)[route]
            cells = []
            for p in PS:
                t = fn(p)[route]
                cells.append("-" if math.isinf(t) else f"{base / t:.1f}x")
            lines.append(f"| {name} | {route} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    groups = [("GEMM", ["GEMM n=16384 fp32", "GEMM n=4096 fp32"]), ("3-D FFT", ["FFT 1024^3 c64", "FFT 256^3 c64"]),
              ("DF-MP2", ["DF-MP2 benzene/cc-pVTZ", "DF-MP2 benzene dimer/cc-pVTZ"])]
    for ax, (title, names) in zip(axes, groups):
        for name in names:
            for route, t1 in CASES[name](1).items():
                if route == "compute":
                    continue
                sp = [t1 / CASES[name](p)[route] if not math.isinf(CASES[name](p)[route]) else float("nan")
                      for p in PS]
                ax.plot(PS, sp, marker="o", ms=3, label=f"{name.split(' ', 1)[1]} {route}")
        ax.plot(PS, PS, color="grey", lw=0.6, ls=":")
        ax.axvline(CORES_PER_NODE, color="grey", lw=0.6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_title(f"{title} (modeled)")
        ax.set_xlabel("NeuronCores (32 per trn1 node)")
        ax.legend(fontsize=6)
    axes[0].set_ylabel("speed-up over 1 core")
    fig.tight_layout()
    fig.savefig(path, dpi=80)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot", default=None)
    a = ap.parse_args()
    print(table())
    if a.plot:
        plot(a.plot)
