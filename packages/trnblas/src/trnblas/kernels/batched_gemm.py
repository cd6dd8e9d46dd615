"""Batched GEMM kernel: ``C[i] = A[i] @ B[i]`` for every batch entry, in one call.

Dimensions
----------
``a_t`` : ``[batch, K, M]`` (each ``A[i]`` transposed: K is the partition dim)
``b``   : ``[batch, K, N]``
Both float32 or both bfloat16. Output ``c`` : ``[batch, M, N]`` float32.

The batch loop runs inside the kernel: one dispatch for the whole batch,
whose host overhead a small GEMM could not pay for on its own
(docs/perf-notes.md#design-launch-placeholders). Each entry uses the
tiling of :mod:`trnblas.kernels.gemm` (resident B panel, A strips, K
accumulated in PSUM, static ragged edges); the iterations are independent
(``nl.affine_range``).

Pseudocode
----------
::

    for i in affine_range(batch):
        C[i] = gemm_tiles(a_t[i], b[i])      # the GEMM kernel's loops, one entry

Closed forms: ``batch`` times those of :func:`trnblas.kernels.gemm.gemm_counts`:
    HBM bytes read    = batch * b * (K*N + np*K*M)
    HBM bytes written = batch * 4 * M*N
    Tensor Engine instructions = batch * tk * tm * tn
Small matrices use the array poorly (an M, K < 128 tile leaves rows and
columns of the 128x128 array idle); packing several entries into one
block-diagonal tile is the known next step.
"""

from trnblas.kernels.gemm import gemm_counts, gemm_tiles
from trnsci.nki import nki, nl


def batched_gemm_counts(batch, M, N, K, itemsize):
    """``batch`` x the GEMM closed forms (what the emulator must count)."""
    return {k: batch * v for k, v in gemm_counts(M, N, K, itemsize).items()}


@nki.jit
def batched_gemm_kernel(a_t, b):
    """``C[i] = a_t[i].T @ b[i]``: a_t [batch, K, M], b [batch, K, N] -> C [batch, M, N] fp32."""
    batch, K, M = a_t.shape
    N = b.shape[2]
    c = nl.ndarray((batch, M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(batch):
        gemm_tiles(a_t[i], b[i], c[i])
    return c
