"""trnsparse's part of ``trnsci demo``: its NKI kernels at small, ragged shapes (:func:`kernel_cases`).

Run with ``trnsci demo --kernels-only``; every case goes through trnsparse's
public functions, once on the torch path and once with backend
``"simulator"`` (the kernel on the NumPy NKI emulator).
"""

from __future__ import annotations

import torch

from trnsci.demo import KernelCase

__all__ = ["kernel_cases"]


def kernel_cases() -> list[KernelCase]:
    """trnsparse's demo kernels: BSR SpMM, BSR SDDMM, block-sparse attention, Schwarz-screened SpMM, CSR SpMV,
    SpMM, SDDMM, a triangular solve, SpGEMM (BSR, and CSR through tiles) and sparse add; float32.

    The BSR matrix is 300 x 330 in 128 x 128 tiles (a 3 x 3 tile grid whose
    last tile row and column are ragged), 5 of its 9 tiles stored. Bounds
    are relative to ``max(1, max|torch result|)``; both paths accumulate in
    float32. SpMM/SDDMM/screened outputs are dot products of <= 330 terms
    of N(0, 1) data: rounding error grows like ``sqrt(k) u |a||b|``, ~1e-7
    of the output scale (~sqrt(k)), so 1e-5 leaves a 100x margin while
    still catching any wrong tile, index or mask entry (an O(1) error).
    Attention outputs are convex combinations of V rows (|O| <= max|V|):
    the kernel's online softmax (running max and rescaling per key tile)
    reorders the fp32 exponent sums against the torch path's one-shot
    softmax, a few ulp per step; 1e-5. The triangular solve applies inverted
    128 x 128 diagonal tiles; the triangle has 4 on the diagonal and about
    four N(0, 1) entries per row below it, so cond(L_tt) is modest and the
    kernel and substitution agree far inside 1e-5 (1.1e-7 measured).

    Examples
    --------
    >>> from trnsci.demo import run_kernel_case
    >>> from trnsparse.demo import kernel_cases
    >>> case = kernel_cases()[0]
    >>> case.name
    'bsr_spmm'
    >>> r = run_kernel_case(case)
    >>> r["ok"], r["kernels"]
    (True, ['bsr_spmm_kernel'])
    """
    import trnsparse

    g = torch.Generator().manual_seed(5)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float32)

    b = 128
    keep = torch.tensor([[1, 0, 1], [0, 1, 0], [1, 0, 1]], dtype=torch.bool)  # stored tiles of the 3 x 3 grid
    m, n = 300, 330
    mask = keep.repeat_interleave(b, 0).repeat_interleave(b, 1)[:m, :n]
    A = trnsparse.BSRMatrix.from_dense(rnd(m, n) * mask, block_size=b)
    B = rnd(n, 37)
    X, Y = rnd(m, 45), rnd(45, n)
    Q, K, V = rnd(2, 300, 40), rnd(2, 300, 40), rnd(2, 300, 24)
    window = trnsparse.local_window_mask(300, window=2)
    causal = trnsparse.causal_mask(300)
    S = rnd(150, 150)
    d = torch.logspace(0, -12, 150, dtype=torch.float32)  # diagonal integrals spanning 12 decades
    R = rnd(150, 20)
    C = trnsparse.random_sparse(300, 270, density=0.03, seed=3)  # CSR, ragged, some empty rows
    xc, Bc = rnd(270), rnd(270, 9)
    Xc, Yc = rnd(300, 12), rnd(12, 270)
    L = trnsparse.from_dense(torch.tril(rnd(260, 260) * (torch.rand(260, 260, generator=g) < 0.03))
                             + 4 * torch.eye(260))  # diagonally dominant lower triangle
    bl = rnd(260, 4)
    keep2 = torch.tensor([[1, 1], [0, 0], [1, 0]], dtype=torch.bool)  # B's block row 1 empty
    A2 = trnsparse.BSRMatrix.from_dense(rnd(n, 200) * keep2.repeat_interleave(b, 0).repeat_interleave(b, 1)[:n, :200],
                                        block_size=b)
    Cd = trnsparse.random_sparse(300, 270, density=0.3, seed=4)  # CSR full enough for the tile path
    Cd2 = trnsparse.random_sparse(270, 200, density=0.3, seed=5)
    C2 = trnsparse.random_sparse(300, 270, density=0.05, seed=6)  # another pattern for sparse_add
    return [
        KernelCase("trnsparse", "bsr_spmm", "300x330 (5 of 9 tiles) @ 330x37 fp32",
                   lambda: trnsparse.bsr_spmm(A, B), 1e-5, ("bsr_spmm_kernel",)),
        KernelCase("trnsparse", "sddmm bsr", "300x45 @ 45x330 on 5 tiles fp32",
                   lambda: trnsparse.sddmm(A, X, Y).to_dense(), 1e-5, ("bsr_sddmm_kernel",)),
        KernelCase("trnsparse", "attention", "2 heads seq=300 d=40 dv=24, window 2 fp32",
                   lambda: trnsparse.block_sparse_attention(Q, K, V, window), 1e-5,
                   ("attention_kernel",)),
        KernelCase("trnsparse", "attention causal", "2 heads seq=300 d=40 dv=24, causal fp32",
                   lambda: trnsparse.block_sparse_attention(Q, K, V, causal, causal=True), 1e-5,
                   ("attention_kernel",)),
        KernelCase("trnsparse", "screened_spmm", "150x150 @ 150x20, threshold 1e-8 fp32",
                   lambda: trnsparse.screened_spmm(S, d, R, 1e-8), 1e-5, ("screened_spmm_kernel",)),
        KernelCase("trnsparse", "spmv csr", "300x270 CSR (3%) @ 270 fp32",
                   lambda: trnsparse.spmv(C, xc), 1e-5, ("csr_spmv_kernel",)),
        KernelCase("trnsparse", "spmm csr", "300x270 CSR (3%) @ 270x9 fp32",
                   lambda: trnsparse.spmm(C, Bc), 1e-5, ("csr_spmv_kernel",)),
        KernelCase("trnsparse", "sddmm csr", "300x12 @ 12x270 on a 3% CSR pattern fp32",
                   lambda: trnsparse.sddmm(C, Xc, Yc).values, 1e-5, ("csr_sddmm_kernel",)),
        KernelCase("trnsparse", "spsm", "260x260 lower CSR \\ 260x4 fp32",
                   lambda: trnsparse.spsm(L, bl), 1e-5, ("csr_spsv_kernel",)),
        KernelCase("trnsparse", "bsr_spgemm", "300x330 (5 of 9 tiles) @ 330x200 (3 of 6 tiles) fp32",
                   lambda: trnsparse.bsr_spgemm(A, A2).to_dense(), 1e-5, ("bsr_spgemm_kernel",)),
        KernelCase("trnsparse", "spgemm csr", "300x270 CSR (30%) @ 270x200 CSR (30%) through tiles fp32",
                   lambda: trnsparse.spgemm(Cd, Cd2).to_dense(), 1e-5, ("bsr_spgemm_kernel",)),
        KernelCase("trnsparse", "sparse_add", "2 A + 0.5 B, 300x270 CSR (3%) and (5%) fp32",
                   lambda: trnsparse.sparse_add(C, C2, 2.0, 0.5).to_dense(), 1e-5, ("csr_add_kernel",)),
    ]
