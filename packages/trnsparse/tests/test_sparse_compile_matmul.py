"""``A @ x`` and ``x @ A`` on a trnsparse matrix inside ``torch.compile(fullgraph=True)``.

The products run the public ``spmv``/``spmm`` (``bsr_spmm`` for BSR), so a compiled program holds their
torch operators and no graph break. References: SciPy's ``csr_matrix @ x`` for values, NumPy's closed
forms for the gradients (``loss = sum(w * out)``: for ``A @ x`` d x = D^T w and d D = w x^T, for
``x @ A`` d x = w D^T and d D = x^T w, sampled on A's stored entries), and the eager program.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnsparse

sp = pytest.importorskip("scipy.sparse")

F64 = torch.float64
M, N, K, B = 7, 9, 3, 4  # ragged: neither 7 nor 9 is a multiple of the BSR block size 4

#: op name expected in the compiled graph, per format and operand rank
_OPS = {("csr", 1): "torch.ops.trnsparse.spmv", ("csr", 2): "torch.ops.trnsparse.spmm",
        ("bsr", 1): "torch.ops.trnsparse.bsr_spmm", ("bsr", 2): "torch.ops.trnsparse.bsr_spmm"}

#: product name -> (operand shape, product)
_PRODUCTS = {"A@x": ((N,), lambda A, v: A @ v), "A@X": ((N, K), lambda A, v: A @ v),
             "x@A": ((M,), lambda A, v: v @ A), "X@A": ((K, M), lambda A, v: v @ A)}


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _dense():
    D = torch.randn(M, N, generator=_g(1), dtype=F64) * (torch.rand(M, N, generator=_g(2)) < 0.35)
    D[2] = 0.0  # an empty row
    return D


def _matrix(fmt, D, grad=False):
    """A trnsparse matrix of ``D`` built from its arrays, its values a leaf that may require grad."""
    C = trnsparse.from_dense(D)
    if fmt == "csr":
        v = C.values.clone().requires_grad_(grad)
        return trnsparse.CSRMatrix(v, C.col_indices, C.row_ptrs, C.shape), v
    S = C.to_bsr(B)
    v = S.blocks.clone().requires_grad_(grad)
    return trnsparse.BSRMatrix(v, S.block_col_indices, S.block_row_ptrs, S.shape, B), v


def _on_pattern(A, G):
    """The dense gradient ``G`` (NumPy, M x N) at A's stored entries, in A's value layout."""
    if A.format == "csr":
        rows = np.repeat(np.arange(M), np.diff(A.row_ptrs.numpy()))
        return G[rows, A.col_indices.numpy()]
    Gp = np.zeros((-(-M // B) * B, -(-N // B) * B))
    Gp[:M, :N] = G  # the tiles' padding is no entry of A: zero gradient
    brow = np.repeat(np.arange(A.n_block_rows), np.diff(A.block_row_ptrs.numpy()))
    return np.stack([Gp[r * B:(r + 1) * B, c * B:(c + 1) * B] for r, c in zip(brow, A.block_col_indices.numpy())])


def _reference(D, name, v, w):
    """SciPy's product and NumPy's gradients of ``sum(w * product)`` (d operand, dense d D)."""
    S, Dn, vn, wn = sp.csr_matrix(D.numpy()), D.numpy(), v.numpy(), w.numpy()
    if name.startswith("A"):
        out = S @ vn
        gv = Dn.T @ wn
        gD = np.outer(wn, vn) if vn.ndim == 1 else wn @ vn.T
    else:
        out = np.asarray((S.T @ vn.T).T)  # v @ A through SciPy's CSR product
        gv = wn @ Dn.T
        gD = np.outer(vn, wn) if vn.ndim == 1 else vn.T @ wn
    return out, gv, gD


@pytest.mark.parametrize("fmt", ["csr", "bsr"])
@pytest.mark.parametrize("name", list(_PRODUCTS))
def test_product_compiles_without_a_graph_break(fmt, name):
    shape, f = _PRODUCTS[name]
    A, _ = _matrix(fmt, _dense())
    v = torch.randn(*shape, generator=_g(3), dtype=F64)
    f(A, v)  # eager first: the host paths cache their int32 indices on A, which a trace must not read
    torch._dynamo.reset()
    explained = torch._dynamo.explain(f)(A, v)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert _OPS[fmt, len(shape)] in "".join(g.code for g in explained.graphs)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("fmt", ["csr", "bsr"])
@pytest.mark.parametrize("name", list(_PRODUCTS))
def test_compiled_product_matches_scipy_and_eager_with_gradients(backend, fmt, name):
    shape, f = _PRODUCTS[name]
    D = _dense()
    v0 = torch.randn(*shape, generator=_g(3), dtype=F64)
    w = torch.randn(*((M,) if name == "A@x" else (N,) if name == "x@A" else (M, K) if name == "A@X"
                      else (K, N)), generator=_g(4), dtype=F64)
    out_ref, gv_ref, gD_ref = _reference(D, name, v0, w)

    def loss(A, v):
        return (w * f(A, v)).sum()

    def run(fn):
        A, vals = _matrix(fmt, D, grad=True)
        v = v0.clone().requires_grad_()
        out = f(A, v) if fn is None else None
        value = (fn or loss)(A, v)
        gv, gA = torch.autograd.grad(value, [v, vals])
        return out, value.detach(), gv, gA, A

    eager_out, eager_value, eager_gv, eager_gA, A = run(None)
    torch._dynamo.reset()
    compiled = torch.compile(loss, fullgraph=True, backend=backend)
    _, value, gv, gA, _ = run(compiled)
    # float64, at most 9 terms a sum: SciPy and NumPy agree with torch to a few ulps of the results' scale
    np.testing.assert_allclose(eager_out.detach().numpy(), out_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(eager_gv.numpy(), gv_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(eager_gA.numpy(), _on_pattern(A, gD_ref), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gv.numpy(), gv_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gA.numpy(), _on_pattern(A, gD_ref), rtol=1e-12, atol=1e-12)
    # the compiled program against the eager one: inductor may reassociate the sums (a few ulps)
    torch.testing.assert_close(value, eager_value, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gv, eager_gv, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gA, eager_gA, rtol=1e-12, atol=1e-12)
    torch._dynamo.reset()
    got = torch.compile(f, fullgraph=True, backend=backend)(A, v0)
    np.testing.assert_allclose(got.detach().numpy(), out_ref, rtol=1e-12, atol=1e-12)


def test_matrix_as_argument_and_as_closure_constant():
    D = _dense()
    A, _ = _matrix("csr", D)
    x = torch.randn(N, generator=_g(5), dtype=F64)
    y = torch.randn(M, generator=_g(6), dtype=F64)
    S = sp.csr_matrix(D.numpy())

    def as_argument(A, x, y):
        return torch.sin(A @ x) + (y @ A).sum()

    def closing_over(x, y):
        return torch.sin(A @ x) + (y @ A).sum()

    want = np.sin(S @ x.numpy()) + (S.T @ y.numpy()).sum()
    for fn, args in ((as_argument, (A, x, y)), (closing_over, (x, y))):
        torch._dynamo.reset()
        explained = torch._dynamo.explain(fn)(*args)
        assert explained.graph_break_count == 0, explained.break_reasons
        torch._dynamo.reset()
        got = torch.compile(fn, fullgraph=True, backend="eager")(*args)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)  # float64 rounding only
    # a second matrix of the same pattern through the compiled argument form: its own values, not the first's
    compiled = torch.compile(as_argument, fullgraph=True, backend="eager")
    A2 = trnsparse.CSRMatrix(A.values * 2.0, A.col_indices, A.row_ptrs, A.shape)
    np.testing.assert_allclose(compiled(A2, x, y).numpy(), np.sin(2 * (S @ x.numpy())) + 2 * (S.T @ y.numpy()).sum(),
                               rtol=1e-12, atol=1e-12)


def test_square_matrix_products_keep_their_order():
    # a square, non-symmetric A: A @ x and x @ A have the same shapes, so only the values tell the orders apart
    D = torch.randn(N, N, generator=_g(9), dtype=F64) * (torch.rand(N, N, generator=_g(10)) < 0.4)
    D[0, 1], D[1, 0] = 1.0, -2.0
    A = trnsparse.from_dense(D)
    S = sp.csr_matrix(D.numpy())
    x = torch.randn(N, generator=_g(11), dtype=F64)
    torch._dynamo.reset()
    got = torch.compile(lambda A, x: torch.stack([A @ x, x @ A, x.matmul(A), torch.matmul(A, x)]),
                        fullgraph=True, backend="eager")(A, x)
    want = np.stack([S @ x.numpy(), S.T @ x.numpy(), S.T @ x.numpy(), S @ x.numpy()])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)  # float64 rounding only


def test_torch_matmul_forms_and_other_torch_functions():
    D = _dense()
    A, _ = _matrix("csr", D)
    x = torch.randn(N, generator=_g(7), dtype=F64)
    y = torch.randn(M, generator=_g(8), dtype=F64)
    S = sp.csr_matrix(D.numpy())
    for got, want in ((torch.matmul(A, x), S @ x.numpy()), (torch.matmul(y, A), S.T @ y.numpy()),
                      (y.matmul(A), S.T @ y.numpy()), (y @ A, S.T @ y.numpy())):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(TypeError):
        torch.add(y, A)  # no other torch function takes a sparse matrix
    with pytest.raises(ValueError, match="x @ A: x must be 1-D or 2-D"):
        torch.ones(2, 2, 2, dtype=F64) @ A
