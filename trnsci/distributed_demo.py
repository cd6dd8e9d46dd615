"""The distributed demo: DF-MP2, a 3-D FFT and a GEMM on every rank of a torch.distributed job, timed per rank.

Run it with torchrun (one process per NeuronCore or CPU core)::

    torchrun --nproc-per-node 2 -m trnsci.distributed_demo --what mp2,fft,gemm

or without torchrun, ranks spawned on this machine (gloo on 127.0.0.1)::

    python -m trnsci.distributed_demo --nproc 2

Each rank prints its own seconds and the bytes it sent per step; with
``--nproc 1`` (or a one-process torchrun) the plain one-process calls are
timed too, for the speed-up.  ``--json FILE`` writes every rank's figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time

import numpy as np
import torch

from trnsci import distributed as D

MOLECULES = ("h2o", "benzene", "benzene-dimer")


def _atoms(name: str):
    if name == "h2o":
        return "O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692"
    ring = []
    for z in ((0.0,) if name == "benzene" else (0.0, 3.7)):  # the dimer: two rings stacked 3.7 A apart
        for k in range(6):
            a = math.pi / 3 * k
            ring.append(("C", (1.39 * math.cos(a), 1.39 * math.sin(a), z)))
            ring.append(("H", (2.48 * math.cos(a), 2.48 * math.sin(a), z)))
    return ring


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trnsci demo --distributed", description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, default=2, help="ranks to spawn when not under torchrun (default 2)")
    p.add_argument("--what", default="mp2,fft,gemm", help="comma list of mp2, fft, gemm")
    p.add_argument("--mol", default="h2o", choices=MOLECULES)
    p.add_argument("--basis", default="cc-pvdz")
    p.add_argument("--fft", type=int, default=64, help="edge of the complex64 cube (default 64)")
    p.add_argument("--gemm", type=int, default=1024, help="edge of the float32 GEMM (default 1024)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs of FFT and GEMM (best kept)")
    p.add_argument("--json", default=None, help="write every rank's figures here")
    return p


PARTS = ("mp2", "fft", "gemm")


def _parts(p: argparse.ArgumentParser, args) -> set:
    """The requested parts, checked before any rank starts: an unknown name or a missing PySCF is a usage error."""
    what = {w.strip() for w in args.what.split(",") if w.strip()}
    bad = sorted(what - set(PARTS))
    if bad or not what:
        p.error(f"--what: unknown part(s) {', '.join(bad) or '(none given)'}; choose from {', '.join(PARTS)}")
    for name in ("gemm", "fft", "repeat", "nproc"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be a positive integer, got {getattr(args, name)}")
    if "mp2" in what and importlib.util.find_spec("pyscf") is None:
        p.error("--what mp2 needs PySCF for the integrals: pip install pyscf "
                "(or leave mp2 out: --what fft,gemm)")
    return what


def _bytes(n: int) -> str:
    """Bytes for a person: MiB from 1 MiB up, else KiB or B (a small run must not print 0.0 MiB)."""
    if n >= 2**20:
        return f"{n / 2**20:.1f} MiB"
    return f"{n / 2**10:.1f} KiB" if n >= 2**10 else f"{n} B"


def _best(fn, repeat: int):
    """``(best wall seconds, CPU seconds of that run, result)`` over ``repeat`` runs started together."""
    best, cpu, out = math.inf, math.inf, None
    for _ in range(max(1, repeat)):
        D.all_reduce(torch.zeros(1), kind="barrier")  # start together
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        t, c = time.perf_counter() - t0, time.process_time() - c0
        if t < best:
            best, cpu = t, c
    return best, cpu, out


def _mean_field(mol):
    """RHF on rank 0 (density-fitted, for speed), its orbitals broadcast: the other ranks skip the SCF."""
    import torch.distributed as dist
    from pyscf import scf

    r = dist.get_rank()
    nao = mol.nao_nr()
    mf = scf.RHF(mol)
    arrays = torch.zeros(nao * nao + 2 * nao + 1, dtype=torch.float64)
    if r == 0:
        ref = scf.RHF(mol).density_fit().run(conv_tol=1e-9)
        if not ref.converged:
            raise RuntimeError("distributed_demo: the SCF did not converge")
        arrays = torch.from_numpy(np.concatenate([ref.mo_coeff.ravel(), ref.mo_energy, ref.mo_occ, [ref.e_tot]]))
    D.broadcast(arrays, 0, timeout=max(D.DEFAULT_TIMEOUT, 3600.0))  # the others wait out rank 0's SCF
    a = arrays.numpy()
    mf.mo_coeff = a[:nao * nao].reshape(nao, nao).copy()
    mf.mo_energy = a[nao * nao:nao * nao + nao].copy()
    mf.mo_occ = a[nao * nao + nao:nao * nao + 2 * nao].copy()
    mf.e_tot, mf.converged = float(a[-1]), True
    return mf


def run(args) -> dict:
    """Every requested part on this rank; returns this rank's figures."""
    import torch.distributed as dist
    from torch.distributed.tensor import Shard

    P, r = dist.get_world_size(), dist.get_rank()
    what = _parts(parser(), args)
    out: dict = {"rank": r, "ranks": P, "threads": torch.get_num_threads()}
    if "gemm" in what:
        import trnblas
        from trnblas import distributed as TD

        n = args.gemm
        m1 = D.mesh()
        g = torch.Generator().manual_seed(0)
        A = torch.randn(n, n, generator=g) if r == 0 else None
        B = torch.randn(n, n, generator=g) if r == 0 else None
        a, b = D.distribute(A, m1, [Shard(0)]), D.distribute(B, m1, [Shard(0)])
        with D.counting() as t:
            sec, cpu, _ = _best(lambda: TD.gemm(1.0, a, b), args.repeat)
        out["gemm"] = {"n": n, "seconds": sec, "cpu_seconds": cpu, "algorithm": TD.choose_gemm(n, n, n, P)[0],
                       "bytes_per_run": t.bytes // max(1, args.repeat), "by_kind": t.by_kind}
        if P == 1:
            out["gemm"]["one_process_seconds"] = _best(lambda: trnblas.gemm(1.0, A, B), args.repeat)[0]
    if "fft" in what:
        import trnfft
        from trnfft import distributed as FD

        n = args.fft
        m1 = D.mesh()
        X = torch.randn(n, n, n, dtype=torch.complex64, generator=torch.Generator().manual_seed(1)) \
            if r == 0 else None
        x = D.distribute(X, m1, [Shard(0)])
        with D.counting() as t:
            sec, cpu, _ = _best(lambda: FD.fftn(x, out_layout="transposed"), args.repeat)
        out["fft"] = {"n": n, "seconds": sec, "cpu_seconds": cpu, "layout": "slab, transposed out",
                      "bytes_per_run": t.by_kind.get("redistribute", 0) // max(1, args.repeat)}
        if P == 1:
            out["fft"]["one_process_seconds"] = _best(lambda: trnfft.fftn(X), args.repeat)[0]
    if "mp2" in what:
        from pyscf import df, gto

        from trnsci import chem

        mol = gto.M(atom=_atoms(args.mol), basis=args.basis, verbose=0)
        t0 = time.perf_counter()
        mf = _mean_field(mol)
        scf_s = time.perf_counter() - t0
        aux = df.make_auxbasis(mol, mp2fit=True)
        D.all_reduce(torch.zeros(1), kind="barrier")
        c0 = time.process_time()
        res = chem.df_mp2(mf, auxbasis=aux, process_group=dist.group.WORLD)
        cpu = time.process_time() - c0
        out["mp2"] = {"molecule": args.mol, "basis": args.basis, "nao": res.nao, "naux": res.naux,
                      "nocc": res.nocc, "nvir": res.nvir, "e_corr": res.e_corr, "scf_seconds_rank0": scf_s,
                      "seconds": res.timings["total"], "cpu_seconds": cpu, "timings": res.timings,
                      "bytes": res.bytes_sent, "naux_per_rank": res.naux_per_rank}
        if P == 1:
            t0 = time.perf_counter()
            one = chem.df_mp2(mf, auxbasis=aux, progress=False)
            out["mp2"]["one_process_seconds"] = time.perf_counter() - t0
            out["mp2"]["one_process_e_corr"] = one.e_corr
    return out


def _format(res: dict) -> str:
    lines = [f"rank {res['rank']}/{res['ranks']} ({res['threads']} thread(s))"]
    if "gemm" in res:
        g = res["gemm"]
        lines.append(f"  gemm {g['n']}^2 float32 ({g['algorithm']}): {g['seconds']:.3f} s "
                     f"(cpu {g['cpu_seconds']:.3f}), "
                     f"sent {_bytes(g['bytes_per_run'])}" +
                     (f"; one process {g['one_process_seconds']:.3f} s" if "one_process_seconds" in g else ""))
    if "fft" in res:
        f = res["fft"]
        lines.append(f"  fftn {f['n']}^3 complex64 ({f['layout']}): {f['seconds']:.3f} s "
                     f"(cpu {f['cpu_seconds']:.3f}), "
                     f"sent {_bytes(f['bytes_per_run'])}" +
                     (f"; one process {f['one_process_seconds']:.3f} s" if "one_process_seconds" in f else ""))
    if "mp2" in res:
        m = res["mp2"]
        stages = ", ".join(f"{k} {v:.2f}" for k, v in m["timings"].items() if k != "total")
        lines.append(f"  DF-MP2 {m['molecule']}/{m['basis']} (nao {m['nao']}, naux {m['naux']}, nocc "
                     f"{m['nocc']}): E_corr {m['e_corr']:.10f} Eh in {m['seconds']:.2f} s "
                     f"(cpu {m['cpu_seconds']:.2f}) [{stages}], "
                     f"sent {sum(m['bytes'].values()) / 2**20:.2f} MiB" +
                     (f"; one process {m['one_process_seconds']:.2f} s" if "one_process_seconds" in m else ""))
    return "\n".join(lines)


def _rank_entry(argv):
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    return run(parser().parse_args(argv))


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    args = p.parse_args(argv)
    _parts(p, args)
    if "WORLD_SIZE" in os.environ and "RANK" in os.environ:  # under torchrun
        import torch.distributed as dist

        D.init()
        res = run(args)
        gathered = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, res)
        if dist.get_rank() == 0:
            print("\n".join(_format(x) for x in gathered))
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(gathered, f, indent=1, default=str)
        dist.destroy_process_group()
        return 0
    from trnsci.distributed_demo import _rank_entry as entry  # by its module name, also when run as __main__

    results = D.spawn(entry, args.nproc, args=(argv,), timeout=3600, collective_timeout=600)
    print("\n".join(_format(x) for x in results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
