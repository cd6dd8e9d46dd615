"""bfloat16 / float16 across trnsparse's products, sums and solves: computed in float32, rounded once.

References are SciPy float64 on the stored (exactly representable) values. Bound per entry:
|r - ref| <= u |ref| + 1e-5 max|ref|, u = 2^-8 (bfloat16) or 2^-11 (float16) -- one rounding of the
float32 result to the input dtype (round to nearest: at most u/2 relative; u leaves a 2x margin) plus
the float32 computation's error over <= ~10 terms (~1e-6 of the scale).
"""

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spl
import torch

import trnsparse
from trnsci.testing import assert_plan_matches_run, kernel_ran

U = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
LOWP = list(U)


def _pair(dt, n=150):
    S64 = (sp.random(n, n, density=0.05, random_state=0, format="csr") + 4 * sp.eye(n)).tocsr()
    A = trnsparse.from_scipy(S64).to(dtype=dt)
    return A, A.to_scipy().astype(np.float64)  # the values as stored, exactly


def _check(got, ref, dt, name=""):
    assert got.dtype == dt, name
    g = got.double().numpy()
    assert np.all(np.abs(g - ref) <= U[dt] * np.abs(ref) + 1e-5 * np.abs(ref).max()), name


def _ops(A, S, x, X):
    xd, Xd = x.double().numpy(), X.double().numpy()
    T = sp.triu(S)
    return [
        ("spmv", lambda: trnsparse.spmv(A, x, alpha=2.0), 2.0 * (S @ xd)),
        ("spmm csc", lambda: trnsparse.spmm(A.to_csc(), X), S @ Xd),
        ("spmv_symmetric", lambda: trnsparse.spmv_symmetric(A, x), (T + sp.triu(S, 1).T) @ xd),
        ("spsv", lambda: trnsparse.spsv(A, x), spl.spsolve_triangular(sp.tril(S).tocsr(), xd, lower=True)),
        ("spsm upper", lambda: trnsparse.spsm(A, X, lower=False),
         spl.spsolve_triangular(T.tocsr(), Xd, lower=False)),
        ("bsr_spmm", lambda: trnsparse.bsr_spmm(A, X), S @ Xd),
        ("sddmm", lambda: trnsparse.sddmm(A, X, X.T).to_dense(),
         sp.csr_matrix(S != 0).multiply(Xd @ Xd.T).toarray()),
        ("spgemm", lambda: trnsparse.spgemm(A, A).to_dense(), (S @ S).toarray()),
        ("sparse_add", lambda: trnsparse.sparse_add(A, A, 1.0, -0.25).to_dense(), 0.75 * S.toarray()),
    ]


@pytest.mark.parametrize("dt", LOWP, ids=str)
def test_lowp_torch_path_vs_scipy(dt):
    A, S = _pair(dt)
    g = torch.Generator().manual_seed(1)
    x, X = torch.randn(150, generator=g).to(dt), torch.randn(150, 4, generator=g).to(dt)
    with trnsparse.use_backend("torch"):
        for name, fn, ref in _ops(A, S, x, X):
            _check(fn(), ref, dt, name)


@pytest.mark.parametrize("dt", LOWP, ids=str)
def test_lowp_runs_the_float32_kernels(dt):
    A, S = _pair(dt)
    g = torch.Generator().manual_seed(2)
    x, X = torch.randn(150, generator=g).to(dt), torch.randn(150, 3, generator=g).to(dt)
    with kernel_ran("csr_spmv_kernel", "csr_spmv_kernel", "csr_spsv_kernel", "csr_spmv_kernel"):
        y = trnsparse.spmv(A, x)
        Y = trnsparse.spmm(A, X)
        z = trnsparse.spsv(A, x)
        y2 = trnsparse.spmv(A, x)  # the float32 copy and its layout are reused
    _check(y, S @ x.double().numpy(), dt)
    _check(Y, S @ X.double().numpy(), dt)
    _check(z, spl.spsolve_triangular(sp.tril(S).tocsr(), x.double().numpy(), lower=True), dt)
    assert torch.equal(y, y2)
    y0 = torch.randn(150, generator=g).to(dt)
    with kernel_ran("csr_spmv_kernel"):
        y3 = trnsparse.spmv(A, x, alpha=-0.5, y=y0, beta=2.0)  # alpha/beta in fp32, one rounding
    _check(y3, -0.5 * (S @ x.double().numpy()) + 2.0 * y0.double().numpy(), dt)
    # SpMV/SpMM (<= 4 columns) take the low-precision data natively (half the bytes of A's values and x);
    # the solve runs on the cached float32 copy
    assert A.__dict__["_ell_values"][1][1].dtype == dt
    assert A.__dict__["_f32_form"][1].dtype == torch.float32


@pytest.mark.parametrize("dt", LOWP, ids=str)
def test_lowp_spmv_native_kernel_plan_is_what_ran(dt):
    A, S = _pair(dt, n=300)
    x = torch.randn(300, 2, generator=torch.Generator().manual_seed(3)).to(dt)
    with trnsparse.use_backend("simulator"):
        plan, Y, runs = assert_plan_matches_run(trnsparse.spmm, A, x)
    assert plan.kernel["name"] == "csr_spmv_kernel" and plan.dtype == dt
    st = A.__dict__["_ell_structure_4096"][1]
    L = sum(q[0] for b in st.blocks for q in b[3])
    # 2-byte values and x: (2 + 4) bytes per slot, x once in 2 bytes, 8 bytes per long piece
    assert runs[0].profile.hbm_read_bytes == 2 * 300 * 2 + 6 * st.slots + 8 * L
    _check(Y, S @ x.double().numpy(), dt)


def test_integer_and_bool_stay_type_errors():
    A, _ = _pair(torch.bfloat16)
    with pytest.raises(TypeError, match="x"):
        trnsparse.spmv(A, torch.ones(150, dtype=torch.int32))
    with pytest.raises(TypeError, match="values"):
        trnsparse.CSRMatrix(torch.ones(2, dtype=torch.bool), torch.tensor([0, 1]), torch.tensor([0, 1, 2]), (2, 2))
    with pytest.raises(TypeError, match="dtype"):
        A.to(dtype=torch.int64)
    with pytest.raises(TypeError, match="dtype"):  # bf16 matrix, float32 vector: one dtype, as for other dtypes
        trnsparse.spmv(A, torch.ones(150))
