"""NKI kernels of trnblas, one per module (NKI source only; host code lives in :mod:`trnblas._nki`).

* :mod:`.gemm`          -- ``gemm_kernel``: C = A @ B, B panel resident in SBUF, K accumulated in PSUM
* :mod:`.batched_gemm`  -- ``batched_gemm_kernel``: the same for a batch, batch loop inside the kernel
* :mod:`.syrk`          -- ``syrk_kernel``: C = X^T X, only the tiles of one triangle
* :mod:`.trsm`          -- ``trsm_kernel``: blocked lower-triangular solve, inverse diagonal blocks on the Tensor Engine
* :mod:`.mp2_energy`    -- ``mp2_energy_kernel``: fused DF-MP2 pair energies, T never leaves PSUM/SBUF

Every module documents its layouts, tiling and the closed-form HBM bytes
and Tensor Engine instruction counts that the tests check against the
emulator's counters.
"""
