"""DF-MP2: trnsci.chem.df_mp2 against PySCF's DFMP2, whole pipeline and energy step.

pytest-benchmark (``pytest benchmarks/bench_chem.py --benchmark-enable``):
water/cc-pVDZ, both codes on the same mean field.

Side by side, per stage (``python benchmarks/bench_chem.py benzene cc-pvdz
[repeats] [--profile]``): converges the RHF once, then alternates PySCF
``DFMP2(mf).kernel()`` (integrals included), ``trnsci.chem.df_mp2(mf)`` and
PySCF's energy step alone (``pyscf.mp.dfmp2.kernel`` on prebuilt integrals),
each PySCF step also with ``with_t2=False`` (its default keeps the
amplitudes), ``repeats`` times with short pauses, and prints the best of each. Best-of-N
because the machine may be shared; the load average is printed with it.
"""

from __future__ import annotations

import sys
import time

import pytest

from trnsci import chem
from trnsci.chem_demo import MOLECULES, _rhf


@pytest.fixture(scope="module")
def water_mf():
    pytest.importorskip("pyscf")
    from pyscf import gto

    return _rhf(gto.M(atom=MOLECULES["h2o"], basis="cc-pvdz", verbose=0))


def test_bench_dfmp2_water_trnsci(benchmark, water_mf):
    benchmark.group = "dfmp2 water/cc-pVDZ"
    r = benchmark(chem.df_mp2, water_mf, progress=False)
    assert r.e_corr < 0


def test_bench_dfmp2_water_pyscf(benchmark, water_mf):
    from pyscf.mp.dfmp2 import DFMP2

    benchmark.group = "dfmp2 water/cc-pVDZ"
    e = benchmark(lambda: DFMP2(water_mf).kernel()[0])
    assert e < 0


def side_by_side(name: str, basis: str, repeats: int = 3) -> dict:
    from pyscf import gto
    from pyscf.mp import dfmp2

    mf = _rhf(gto.M(atom=MOLECULES[name], basis=basis, verbose=0))
    m = dfmp2.DFMP2(mf)
    eris = m.ao2mo()
    best: dict[str, float] = {}

    def keep(key, value):
        best[key] = min(best.get(key, float("inf")), value)

    for _ in range(repeats):
        time.sleep(0.3)
        t0 = time.perf_counter()
        e_ref = float(dfmp2.DFMP2(mf).kernel()[0])
        keep("pyscf whole", time.perf_counter() - t0)
        time.sleep(0.3)
        r = chem.df_mp2(mf, progress=False)
        keep("trnsci whole", r.timings["total"])
        for stage in chem.STAGES:
            keep(f"trnsci {stage}", r.timings[stage])
        time.sleep(0.3)
        t0 = time.perf_counter()
        dfmp2.kernel(m, eris=eris)
        keep("pyscf energy", time.perf_counter() - t0)
        # PySCF keeps the t2 amplitudes by default; without them it does less work
        time.sleep(0.3)
        t0 = time.perf_counter()
        dfmp2.DFMP2(mf).kernel(with_t2=False)
        keep("pyscf whole no-t2", time.perf_counter() - t0)
        time.sleep(0.3)
        t0 = time.perf_counter()
        dfmp2.kernel(m, eris=eris, with_t2=False)
        keep("pyscf energy no-t2", time.perf_counter() - t0)
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[0]
    return {"molecule": name, "basis": basis, "nao": r.nao, "naux": r.naux, "nocc": r.nocc, "nvir": r.nvir,
            "dE": r.e_corr - e_ref, "load": load, "best": best}


def main(argv: list[str]) -> int:
    pos = [a for a in argv if not a.startswith("--")]
    name, basis = (pos + ["benzene", "cc-pvdz"][len(pos):])[:2]
    repeats = int(pos[2]) if len(pos) > 2 else 3
    if "--profile" in argv:
        import cProfile
        import pstats

        from pyscf import gto

        mf = _rhf(gto.M(atom=MOLECULES[name], basis=basis, verbose=0))
        chem.df_mp2(mf, progress=False)  # warm-up (imports)
        cProfile.runctx("chem.df_mp2(mf, progress=False)", globals(), {"mf": mf, "chem": chem}, "/tmp/dfmp2.prof")
        pstats.Stats("/tmp/dfmp2.prof").sort_stats("tottime").print_stats(15)
        return 0
    res = side_by_side(name, basis, repeats)
    print(f"{name}/{basis}: nao={res['nao']} naux={res['naux']} nocc={res['nocc']} nvir={res['nvir']} "
          f"dE={res['dE']:.1e} Eh, best of {repeats}, load average {res['load']}")
    for key, value in res["best"].items():
        print(f"  {key:<16} {value:8.3f} s")
    b = res["best"]
    print(f"  ratio whole trnsci/PySCF {b['trnsci whole'] / b['pyscf whole']:.2f} "
          f"(no-t2 {b['trnsci whole'] / b['pyscf whole no-t2']:.2f}), "
          f"energy {b['trnsci energy'] / b['pyscf energy']:.2f} "
          f"(no-t2 {b['trnsci energy'] / b['pyscf energy no-t2']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
