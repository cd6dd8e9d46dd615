"""trnblas's part of ``trnsci demo``: its NKI kernels at small, ragged shapes (:func:`kernel_cases`).

The DF-MP2 demo itself belongs to the umbrella (:mod:`trnsci.chem_demo`,
run by ``trnsci demo``); :func:`main` forwards to the core's ``trnsci demo``.
:data:`MOLECULES` (the demo's geometries) lives here, on the library floor,
so the umbrella can use it; :func:`df_integrals` stays for callers of the
earlier demo and reaches the umbrella's pipeline through its entry point.
"""

from __future__ import annotations

import torch

from trnsci import plugins
from trnsci.demo import KernelCase

# Geometries in Angstrom (experimental / standard reference structures).
MOLECULES = {
    "h2o": "O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692",
    "nh3": "N 0 0 0.1162; H 0 0.9397 -0.2711; H 0.8138 -0.4699 -0.2711; H -0.8138 -0.4699 -0.2711",
    "ch4": "C 0 0 0; H 0.6291 0.6291 0.6291; H -0.6291 -0.6291 0.6291; H -0.6291 0.6291 -0.6291; "
           "H 0.6291 -0.6291 -0.6291",
    "hf": "H 0 0 0; F 0 0 0.917",
    "n2": "N 0 0 0; N 0 0 1.0977",
    "c2h4": "C 0 0 0.6695; C 0 0 -0.6695; H 0 0.9289 1.2321; H 0 -0.9289 1.2321; H 0 0.9289 -1.2321; "
            "H 0 -0.9289 -1.2321",
    "benzene": "C 0 1.3970 0; C 1.2098 0.6985 0; C 1.2098 -0.6985 0; C 0 -1.3970 0; C -1.2098 -0.6985 0; "
               "C -1.2098 0.6985 0; H 0 2.4810 0; H 2.1486 1.2405 0; H 2.1486 -1.2405 0; H 0 -2.4810 0; "
               "H -2.1486 -1.2405 0; H -2.1486 1.2405 0",
    "naphthalene": "C 0 0.7140 0; C 0 -0.7140 0; C 1.2430 1.4010 0; C -1.2430 1.4010 0; C 1.2430 -1.4010 0; "
                   "C -1.2430 -1.4010 0; C 2.4330 0.7050 0; C -2.4330 0.7050 0; C 2.4330 -0.7050 0; "
                   "C -2.4330 -0.7050 0; H 1.2440 2.4870 0; H -1.2440 2.4870 0; H 1.2440 -2.4870 0; "
                   "H -1.2440 -2.4870 0; H 3.3780 1.2450 0; H -3.3780 1.2450 0; H 3.3780 -1.2450 0; "
                   "H -3.3780 -1.2450 0",
}
MOLECULES["water"], MOLECULES["ammonia"], MOLECULES["methane"] = MOLECULES["h2o"], MOLECULES["nh3"], MOLECULES["ch4"]

__all__ = ["MOLECULES", "df_integrals", "kernel_cases", "main"]


def df_integrals(mf, auxbasis: str = "cc-pvdz-ri"):
    """``(B, eps_occ, eps_vir)`` as float64 NumPy arrays; see :func:`trnsci.chem.df_factors`.

    Needs the umbrella distribution (``pip install 'trnsci[chem]'``), found
    through its ``trnsci.workflows`` entry point.
    """
    chem = plugins.workflow("chem", "trnblas.demo.df_integrals")
    return tuple(t.numpy() for t in chem.df_factors(mf, auxbasis))


def kernel_cases() -> list[KernelCase]:
    """trnblas's demo kernels: GEMM, SYRK, TRSM and the fused DF-MP2 energy, float32.

    Shapes are deliberately not multiples of 128/512 (ragged tiles). Bounds
    are relative to ``max(1, max|torch result|)``: fp32 sums of <= 100
    products keep ~1e-6; the MP2 sum over 5^2 * 19^2 * 84 terms ~1e-5.
    """
    import trnblas

    g = torch.Generator().manual_seed(7)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float32)

    A, Bm = rnd(130, 70), rnd(70, 90)
    S = rnd(150, 40)
    L = torch.tril(rnd(96, 96)) * 0.1 + 4 * torch.eye(96)
    R = rnd(96, 50)
    Bdf = 0.05 * rnd(5, 19, 84)
    eo = -1.5 + 0.1 * torch.arange(5, dtype=torch.float32)
    ev = 0.3 + 0.2 * torch.arange(19, dtype=torch.float32)
    return [
        KernelCase("trnblas", "gemm", "130x70 @ 70x90 fp32", lambda: trnblas.gemm(1.0, A, Bm), 1e-5,
                   ("gemm_kernel",)),
        KernelCase("trnblas", "syrk", "150x40 -> 150x150 fp32", lambda: trnblas.syrk(1.0, S), 1e-5,
                   ("syrk_kernel",)),
        KernelCase("trnblas", "trsm", "96x96 \\ 96x50 fp32",
                   lambda: trnblas.trsm(1.0, L, R, uplo="lower"), 1e-5, ("trsm_kernel",)),
        KernelCase("trnblas", "mp2_energy", "nocc=5 nvir=19 naux=84 fp32",
                   lambda: trnblas.mp2_pair_energies(Bdf, eo, ev), 1e-5, ("mp2_energy_kernel",)),
    ]


def main(argv: list[str] | None = None) -> int:
    """``trnsci demo`` (kept for ``python -m trnblas.demo``)."""
    from trnsci.demo import main as demo_main

    return demo_main(argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
