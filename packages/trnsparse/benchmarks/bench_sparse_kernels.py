"""trnsparse kernels: emulator counters (exact) and modeled times.

Run: ``pytest packages/trnsparse/benchmarks/bench_sparse_kernels.py --benchmark-enable --benchmark-only``
or ``python packages/trnsparse/benchmarks/bench_sparse_kernels.py`` for the table.
Modeled times come from the emulator's cost model: they are "modeled", not measured
on a NeuronCore. BSR SpMM is set against trnblas's dense GEMM kernel on the same
product (the crossover by block density), block-sparse attention against the same
kernel with every tile stored (dense attention) by window size. CSR SpMV runs
on a 2-D Poisson matrix (256^2 grid) and a random 1%-dense 16384^2 matrix, with
the x-resident kernel (csr_spmv_kernel) and the HBM-gather kernel (csr_spmm_kernel
with one column) side by side; ``spmv_table()`` sets their HBM bytes against the
floor ``(s + 4) nnz + s (n + m)`` (s = bytes per value: 4, or 2 for the bf16
rows) on trn1 and trn2; ``csr_other_table()`` does the same for SDDMM on a CSR
pattern (floor ``8 nnz + 4 k (m + n)``) and the block-triangular solve (floor
``8 nnz + 8 n k``: the triangle, B and X once).
"""

import numpy as np
import pytest

from trnblas.kernels.gemm import gemm_kernel
from trnsci import nki
from trnsparse.kernels.attention import attention_kernel
from trnsparse.kernels.bsr_spmm import bsr_spmm_kernel
from trnsparse.kernels.csr_sddmm import csr_sddmm_kernel
from trnsparse.kernels.csr_spmm import csr_spmm_kernel
from trnsparse.kernels.csr_spmv import csr_spmv_kernel
from trnsparse.kernels.csr_spsv import csr_spsv_kernel
from trnsparse.kernels.screened_spmm import screened_spmm_kernel

N_BSR, K_BSR = 1024, 256
SEQ, D_HEAD = 1024, 64


def _bsr_case(density, seed=0):
    rng = np.random.default_rng(seed)
    nb = N_BSR // 128
    keep = rng.random((nb, nb)) < density  # p = probability a tile is stored, plus the diagonal tiles
    np.fill_diagonal(keep, True)
    rows, cols = np.nonzero(keep)
    blocks_t = rng.standard_normal((len(rows), 128, 128)).astype(np.float32)
    ptrs = tuple(int(x) for x in np.concatenate([[0], np.cumsum(keep.sum(1))]))
    B = rng.standard_normal((N_BSR, K_BSR)).astype(np.float32)
    kw = {"row_ptrs": ptrs, "M": N_BSR, "cols": tuple(int(c) for c in cols)}  # as the lowering calls it
    return (blocks_t, cols.astype(np.int32)[None, :].copy(), B), kw, keep.mean()


def _attention_case(window):
    rng = np.random.default_rng(1)
    nb = SEQ // 128
    ptrs, cols = [0], []
    for r in range(nb):
        cs = list(range(max(0, r - window + 1), r + 1))
        cols += cs
        ptrs.append(len(cols))
    q_t, k_t = (rng.standard_normal((1, D_HEAD, SEQ)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((1, SEQ, D_HEAD)).astype(np.float32)
    return (q_t, k_t, v), {"row_ptrs": tuple(ptrs), "cols": tuple(cols), "scale": 0.125, "causal": True}


def _poisson2d(k):
    import scipy.sparse as sp

    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    return (sp.kron(sp.eye(k), T) + sp.kron(T, sp.eye(k))).tocsr().astype(np.float32)


def _csr_matrix(which):
    import trnsparse

    if which == "poisson":
        return trnsparse.from_scipy(_poisson2d(256))
    return trnsparse.random_sparse(16384, 16384, density=0.01, seed=0)


def _spmv_case(which, kernel, N=1, bf16=False):
    """(args, kwargs, nnz, (m, n)) of one CSR case, laid out as the lowering lays it out."""
    import torch

    from trnsparse import layouts as _sell

    A = _csr_matrix(which)
    x = np.random.default_rng(3).standard_normal((A.shape[1], N)).astype(np.float32)
    if bf16:  # native bf16 A and x (torch tensors: NumPy has no bfloat16)
        A = A.to(dtype=torch.bfloat16)
        st, v = _sell.ell_layout(A, A.values, A.col_indices, A.row_ptrs, A.shape, N)
        tg = st.target if st.target.numel() else torch.zeros(1, 2)
        return ((v, st.cols, tg, torch.from_numpy(x).to(torch.bfloat16)), {"blocks": st.blocks, "M": A.shape[0]},
                A.nnz, A.shape)
    if kernel == "spmv":
        st, v = _sell.ell_layout(A, A.values, A.col_indices, A.row_ptrs, A.shape, N)
        tg = st.target.numpy() if st.target.numel() else np.zeros((1, 2), np.float32)
        return (v.numpy(), st.cols, tg, x), {"blocks": st.blocks, "M": A.shape[0]}, A.nnz, A.shape
    st, v = _sell.layout(A, A.values, A.col_indices, A.row_ptrs, A.shape)
    rl = st.rloc.numpy() if st.rloc.numel() else np.zeros(1, np.float32)
    return (v.numpy(), st.cols.numpy(), st.orow.numpy(), rl, x), {"slices": st.slices}, A.nnz, A.shape


SPMV_CASES = [  # (label, matrix, kernel, columns); "bf16" in a label: native bf16 A and x
    ("spmv poisson 256^2 x-resident", "poisson", "spmv", 1),
    ("spmv poisson 256^2 bf16 x-resident", "poisson", "spmv", 1),
    ("spmv random 16384^2 1% bf16 x-resident", "random", "spmv", 1),
    ("spmv poisson 256^2 hbm-gather", "poisson", "gather", 1),
    ("spmv random 16384^2 1% x-resident", "random", "spmv", 1),
    ("spmv random 16384^2 1% hbm-gather", "random", "gather", 1),
    ("spmm poisson 256^2 k=4 x-resident", "poisson", "spmv", 4),
    ("spmm poisson 256^2 k=4 hbm-gather", "poisson", "gather", 4),
    ("spmm random 16384^2 1% k=4 x-resident", "random", "spmv", 4),
    ("spmm poisson 256^2 k=32 x-resident", "poisson", "spmv", 32),
    ("spmm poisson 256^2 k=32 hbm-gather", "poisson", "gather", 32),
]


def spmv_table(targets=("trn1", "trn2")):
    """Per SpMV case and target: HBM bytes, the floor, their ratio, DMAs and modeled time."""
    rows = []
    for label, which, kern, N in SPMV_CASES:
        bf16 = "bf16" in label
        args, kw, nnz, (m, n) = _spmv_case(which, kern, N, bf16)
        k = csr_spmv_kernel if kern == "spmv" else csr_spmm_kernel
        s = 2 if bf16 else 4
        floor = (s + 4) * nnz + s * N * (n + m)
        for t in targets:
            _, p = nki.profile(k, *args, target=t, **kw)
            hbm = p.hbm_read_bytes + p.hbm_write_bytes
            rows.append((label, t, hbm, floor, hbm / floor, p.instructions["dma"], p.modeled_time_lower_s * 1e6,
                         p.modeled_time_upper_s * 1e6))
    return rows


def format_spmv_table(rows):
    head = (f"{'case':<38} {'target':<6} {'HBM bytes':>12} {'floor':>12} {'ratio':>6} {'DMA':>6} "
            f"{'modeled us (overlap..serial)':>30}")
    lines = [head, "-" * len(head)]
    for label, t, hbm, floor, r, dma, lo, hi in rows:
        lines.append(f"{label:<38} {t:<6} {hbm:>12,d} {floor:>12,d} {r:>6.3f} {dma:>6d} {lo:>14.1f} .. {hi:<13.1f}")
    return "\n".join(lines)


def _sddmm_spsv_case(label):
    """(kernel, args, kwargs, floor bytes) of the SDDMM / triangular-solve rows of :func:`csr_other_table`."""
    import scipy.sparse as sp
    import torch

    from trnsparse import layouts as _sell
    from trnsparse._nki import ops_tri as _tri

    S = _poisson2d(128)  # 16384 rows
    n = S.shape[0]
    rng = np.random.default_rng(4)
    if label.startswith("sddmm"):
        k = 32
        import trnsparse

        A = trnsparse.from_scipy(S)
        st = _sell.structure(A, A.col_indices, A.row_ptrs, A.shape)
        prow = _sell.partition_rows(st)
        X = rng.standard_normal((n, k)).astype(np.float32)
        Yt = rng.standard_normal((n, k)).astype(np.float32)
        return (csr_sddmm_kernel, (st.cols.numpy(), prow.numpy(), X, Yt), {"slices": st.slices},
                8 * S.nnz + 4 * k * 2 * n)
    N = 1 if label.startswith("spsv") else 8
    L = sp.tril(S).tocsr()
    st = _tri.build(torch.from_numpy(L.data), torch.from_numpy(L.indices.astype(np.int64)),
                    torch.from_numpy(L.indptr.astype(np.int64)), n, True, False, False)
    B = rng.standard_normal((n, N)).astype(np.float32)
    return (csr_spsv_kernel, (st.linv_t.numpy(), st.vals.numpy(), st.cols.numpy(), B), {"blocks": st.blocks},
            8 * L.nnz + 4 * N * 2 * n)


OTHER_CASES = ["sddmm poisson 128^2 pattern k=32", "spsv poisson 128^2 lower", "spsm poisson 128^2 lower k=8"]


def csr_other_table(targets=("trn1", "trn2")):
    """SDDMM on a CSR pattern and the block-triangular solve: HBM bytes vs the floor, modeled time."""
    rows = []
    for label in OTHER_CASES:
        k, args, kw, floor = _sddmm_spsv_case(label)
        for t in targets:
            _, p = nki.profile(k, *args, target=t, **kw)
            hbm = p.hbm_read_bytes + p.hbm_write_bytes
            rows.append((label, t, hbm, floor, hbm / floor, p.instructions["dma"], p.modeled_time_lower_s * 1e6,
                         p.modeled_time_upper_s * 1e6))
    return rows


def _cases():
    rng = np.random.default_rng(2)
    for density in (0.125, 0.25, 0.5, 1.0):
        args, kw, got = _bsr_case(density)
        yield f"bsr_spmm {N_BSR}x{N_BSR} k={K_BSR} p={density}", bsr_spmm_kernel, args, kw
    a = rng.standard_normal((N_BSR, N_BSR)).astype(np.float32)
    yield f"dense gemm {N_BSR}x{N_BSR} k={K_BSR} (trnblas)", gemm_kernel, \
        (a, rng.standard_normal((N_BSR, K_BSR)).astype(np.float32)), {}
    for w in (1, 2, 4, SEQ // 128):
        args, kw = _attention_case(w)
        yield f"attention seq={SEQ} d={D_HEAD} causal window={w}", attention_kernel, args, kw
    n = 512
    yield f"screened_spmm n={n} k=64", screened_spmm_kernel, (
        rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, 64)).astype(np.float32),
        np.arange(n, dtype=np.float32)[:, None].copy(), np.full((1, n), n / 2, np.float32)), {}
    for label, which, kern, N in SPMV_CASES:
        args, kw, _, _ = _spmv_case(which, kern, N, "bf16" in label)
        yield label, csr_spmv_kernel if kern == "spmv" else csr_spmm_kernel, args, kw


CASE_NAMES = [
    "bsr_spmm 1024x1024 k=256 p=0.125", "bsr_spmm 1024x1024 k=256 p=0.25",
    "bsr_spmm 1024x1024 k=256 p=0.5", "bsr_spmm 1024x1024 k=256 p=1.0",
    "dense gemm 1024x1024 k=256 (trnblas)",
    "attention seq=1024 d=64 causal window=1", "attention seq=1024 d=64 causal window=2",
    "attention seq=1024 d=64 causal window=4", "attention seq=1024 d=64 causal window=8",
    "screened_spmm n=512 k=64",
    *[c[0] for c in SPMV_CASES],
]  # the names _cases() yields, listed so that collection builds no arrays


def benchmark_only(name, params):
    """Plain test runs keep one case (a smoke test); see conftest.py."""
    return params.get("case") != "bsr_spmm 1024x1024 k=256 p=0.125"


def counters_table(target="trn1"):
    return [(name, nki.profile(k, *args, target=target, **kw)[1]) for name, k, args, kw in _cases()]


def format_table(rows):
    head = (f"{'case':<44} {'TE':>5} {'Vec':>5} {'Act':>5} {'DMA':>5} {'HBM read':>12} {'HBM write':>10} "
            f"{'modeled us':>11}")
    lines = [head, "-" * len(head)]
    for name, p in rows:
        lines.append(f"{name:<44} {p.instructions['tensor']:>5} {p.instructions['vector']:>5} "
                     f"{p.instructions['scalar']:>5} {p.instructions['dma']:>5} {p.hbm_read_bytes:>12,d} "
                     f"{p.hbm_write_bytes:>10,d} {p.modeled_time_lower_s * 1e6:>11.1f}")
    return "\n".join(lines)


@pytest.mark.parametrize("case", CASE_NAMES)
def test_bench_kernel_counters(benchmark, case):
    name, kernel, args, kw = next(c for c in _cases() if c[0] == case)
    _, prof = benchmark.pedantic(nki.profile, args=(kernel, *args), kwargs=kw, rounds=1, iterations=1)
    benchmark.extra_info.update(
        tensor=prof.instructions["tensor"], vector=prof.instructions["vector"], scalar=prof.instructions["scalar"],
        dma=prof.instructions["dma"], hbm_read_bytes=prof.hbm_read_bytes, hbm_write_bytes=prof.hbm_write_bytes,
        modeled_time_lower_us=round(prof.modeled_time_lower_s * 1e6, 2),
    )


if __name__ == "__main__":
    print(format_table(counters_table()))
    print()
    print(format_spmv_table(spmv_table()))
    print()
    print(format_spmv_table(csr_other_table()))
