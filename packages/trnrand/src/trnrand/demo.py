"""trnrand's part of ``trnsci demo``: its NKI kernels at small, ragged sizes (:func:`kernel_cases`).

Run with ``trnsci demo --kernels-only``; every case goes through trnrand's
public functions, once on the torch path and once with backend
``"simulator"`` (the kernel on the NumPy NKI emulator). Each call makes
its own :class:`trnrand.Generator`, so both runs draw the same stream
positions.
"""

from __future__ import annotations

import torch

from trnsci.demo import KernelCase

__all__ = ["kernel_cases"]


def kernel_cases() -> list[KernelCase]:
    """trnrand's demo kernels: Philox uniforms, Box-Muller normals, Sobol' points.

    Sizes are ragged (not multiples of the 4-word Philox block or the
    128-partition tile), and the float64 uniform and the normals start at
    an odd stream word inside a block (``Generator(offset=...)``), so the
    kernels' partial head and tail blocks and the normals' odd pairing are
    covered.

    * Uniforms (float32 and float64) and Sobol' points are integer
      arithmetic mapped exactly to floats: the kernel's result must be
      bit-identical to the torch path's (tolerance 0, compared with
      ``torch.equal``).
    * Normals: the Box-Muller map evaluates ``log``, ``sqrt`` and ``sin``
      in float32 on different engines (the Scalar Engine's activation
      functions vs torch's), which may differ by an ulp or two of each
      sample; an ulp of ``max|z|`` (~3.5 for 999 samples) is 2**-23 ~ 1.2e-7
      on the ``max(1, max|z|)`` scale, so 8e-6 (the absolute bound of
      trnrand's own kernel tests, on ``|z| <= 6``) allows ~60 ulp for the
      hardware's activation tables while any wrong pairing or stream
      position (an O(1) error) fails.

    Examples
    --------
    >>> from trnsci.demo import run_kernel_case
    >>> from trnrand.demo import kernel_cases
    >>> case = kernel_cases()[0]
    >>> case.name
    'uniform philox'
    >>> r = run_kernel_case(case)
    >>> r["ok"], r["kernels"]
    (True, ['philox_kernel'])
    """
    import trnrand

    def gen(offset=0, subsequence=0):
        return trnrand.Generator(seed=2024, offset=offset, subsequence=subsequence)

    return [
        KernelCase("trnrand", "uniform philox", "1000 float32, seed 2024",
                   lambda: trnrand.uniform(1000, generator=gen()), 0.0, ("philox_kernel",)),
        KernelCase("trnrand", "uniform f64", "37x29 float64 in [-2, 3), word 3 of subseq 1",
                   lambda: trnrand.uniform(37, 29, low=-2.0, high=3.0, dtype=torch.float64,
                                           generator=gen(3, 1)),
                   0.0, ("philox_kernel",)),
        KernelCase("trnrand", "normal", "999 float32 (Box-Muller), from word 5",
                   lambda: trnrand.normal(999, generator=gen(5)), 8e-6, ("normal_kernel",)),
        KernelCase("trnrand", "bernoulli", "1031 bool, p=0.3, from word 1",
                   lambda: trnrand.bernoulli(1031, p=0.3, dtype=torch.bool, generator=gen(1)), 0.0,
                   ("philox_transform_kernel",)),
        KernelCase("trnrand", "randint", "1031 in [-5, 1000), from word 3",
                   lambda: trnrand.randint(1031, low=-5, high=1000, generator=gen(3)), 0.0,
                   ("philox_transform_kernel",)),
        # Ln on the Scalar Engine: ulps of log(u) on |x| <= 16.6 / rate, as for the normals
        KernelCase("trnrand", "exponential", "1031 float32, rate 2.5",
                   lambda: trnrand.exponential(1031, rate=2.5, generator=gen()), 8e-6, ("philox_transform_kernel",)),
        # fp32 AS 241 quantile vs the torch path's float64 ndtri: a few ulp (tested at 1e-6 relative)
        KernelCase("trnrand", "truncated normal", "1031 float32 on [-2, 2]",
                   lambda: trnrand.truncated_normal(1031, generator=gen(1)), 2e-6, ("philox_transform_kernel",)),
        KernelCase("trnrand", "categorical", "1031 of 5 categories",
                   lambda: trnrand.categorical(torch.tensor([0.05, 0.3, 0.0, 0.15, 0.5]), 1031, generator=gen(5)),
                   0.0, ("discrete_kernel",)),
        KernelCase("trnrand", "poisson", "1031 int64, lam 4.5 (inversion)",
                   lambda: trnrand.poisson(1031, lam=4.5, dtype=torch.int64, generator=gen(2)), 0.0,
                   ("discrete_kernel",)),
        KernelCase("trnrand", "binomial", "1031 int64, n=40, p=0.7 (inversion)",
                   lambda: trnrand.binomial(1031, n=40, p=0.7, generator=gen(1)), 0.0, ("discrete_kernel",)),
        # fp32 sums of exact digits vs the torch path's float64 sum rounded once: a few ulp of 1 (tested: 4 ulp)
        KernelCase("trnrand", "halton", "1031x5 float32, unscrambled, skip 3",
                   lambda: trnrand.halton(1031, 5, skip=3), 3e-7, ("halton_kernel",)),
        # exact strata, fp32 positions (rank + u) / n: a few ulp of 1 (tested: 4 ulp)
        KernelCase("trnrand", "latin hypercube", "300x4 float32, strength 1",
                   lambda: trnrand.latin_hypercube(300, 4, generator=gen()), 3e-7, ("lhs_kernel",)),
        KernelCase("trnrand", "philox4x32", "393 explicit counters, per-row keys",
                   lambda: trnrand.philox4x32(torch.arange(393 * 4).reshape(393, 4),
                                              torch.arange(393 * 2).reshape(393, 2) * 7919),
                   0.0, ("philox_block_kernel",)),
        KernelCase("trnrand", "sobol", "300x7 float32, scrambled, skip 5",
                   lambda: trnrand.sobol(300, 7, seed=9, skip=5), 0.0, ("sobol_kernel",)),
        KernelCase("trnrand", "sobol f64", "257x21 float64, unscrambled",
                   lambda: trnrand.sobol(257, 21, scramble=False, dtype=torch.float64), 0.0, ("sobol_kernel",)),
    ]
