"""The public surface: __all__ walker with bad inputs, inputs never modified, docstring examples run."""

from __future__ import annotations

import doctest
import inspect

import numpy as np
import pytest
import torch

import trnsparse

A = trnsparse.from_dense(torch.tensor([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 2.0]]))
BSR = trnsparse.BSRMatrix.from_dense(A.to_dense(), block_size=2)
V3 = torch.tensor([1.0, 2.0, 3.0])
M32 = torch.ones(3, 2)
Qa = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))

# name -> a valid positional call (every tensor argument is checked for not being modified)
GOOD = {
    "COOMatrix": (torch.ones(2), torch.tensor([0, 1]), torch.tensor([1, 0]), (2, 2)),
    "CSRMatrix": (torch.ones(2), torch.tensor([1, 0]), torch.tensor([0, 1, 2]), (2, 2)),
    "CSCMatrix": (torch.ones(2), torch.tensor([1, 0]), torch.tensor([0, 1, 2]), (2, 2)),
    "BSRMatrix": (torch.ones(1, 2, 2), torch.tensor([0]), torch.tensor([0, 1]), (2, 2), 2),
    "from_dense": (torch.eye(3),),
    "from_scipy": (A.to_scipy(),),
    "from_torch": (torch.eye(2).to_sparse_csr(),),
    "eye_sparse": (3,),
    "random_sparse": (4, 5, 0.5),
    "spmv": (A, V3),
    "spmm": (A, M32),
    "spgemm": (A, A),
    "sddmm": (A, M32, M32.T.contiguous()),
    "spsv": (A, V3),
    "spsm": (A, M32),
    "spmv_symmetric": (A, V3),
    "bsr_spmm": (BSR, M32),
    "bsr_spgemm": (BSR, BSR),
    "sparse_add": (A, A),
    "sparse_scale": (A, 2.0),
    "sparse_transpose": (A,),
    "nnz_per_row": (A,),
    "ilu0": (A,),
    "ic0": (A,),
    "jacobi": (A,),
    "cg_bsr": (BSR, V3),
    "chebyshev_bsr": (BSR, V3, 1.0, 5.0),
    "chebyshev_coeffs": (1.0, 5.0, 4),
    "richardson_bsr": (BSR, V3, 0.2),
    "power_iteration_bsr": (BSR,),
    "jacobi_preconditioner_bsr": (BSR,),
    "bsr_diagonal": (BSR,),
    "schwarz_bounds": (V3,),
    "screen_quartets": (V3,),
    "density_screen": (torch.eye(3), torch.eye(3)),
    "sparsity_stats": (torch.eye(3),),
    "screened_spmm": (torch.eye(3), V3, M32, 1e-8),
    "block_sparse_attention": (Qa, Qa, Qa, trnsparse.causal_mask(8, 4)),
    "block_sparse_attention_tiled": (Qa, Qa, Qa, trnsparse.local_window_mask(8, 1, 4)),
    "local_window_mask": (8, 1),
    "causal_mask": (8,),
}
SKIP = {"__version__", "set_backend", "get_backend", "use_backend", "HAS_NKI", "SparseMatrix", "Preconditioner"}
SKIP |= {"plan"}  # takes an op's name, not matrices: its bad input is tested in tests/test_core_plan_call.py


def test_every_public_name_is_covered():
    assert set(trnsparse.__all__) - SKIP == set(GOOD)


def _bad_values(good):
    """Replacements for one argument: None, a string, a wrong-rank / integer / bool / empty tensor."""
    out = [None, "x"]
    if isinstance(good, torch.Tensor) and good.layout != torch.strided:
        out += [good.to_dense(), good.to_dense().long().to_sparse()]
    elif isinstance(good, torch.Tensor):
        out += [good.long(), good.bool(), good.reshape(-1, 1, 1)[:0] if good.numel() else torch.ones(2, 2, 2)]
        if good.dim() >= 1:
            out.append(good[..., :0] if good.dim() > 1 else good[:0])
    if isinstance(good, trnsparse.SparseMatrix):
        out += [good.to_dense(), trnsparse.eye_sparse(5)]
    return out


@pytest.mark.parametrize("name", sorted(GOOD))
def test_walker_bad_inputs_raise_type_or_value_error_naming_the_argument(name):
    fn = getattr(trnsparse, name)
    good = GOOD[name]
    fn(*good)  # the valid call works
    params = list(inspect.signature(fn).parameters)
    for i, g in enumerate(good):
        for bad in _bad_values(g):
            args = list(good)
            args[i] = bad
            try:
                fn(*args)
            except (TypeError, ValueError) as e:
                msg = str(e)
                assert params[i] in msg or name in msg, f"{name}: argument {params[i]} -> {msg!r}"
            except Exception as e:  # pragma: no cover - the failure message is the point
                raise AssertionError(f"{name}({params[i]}={type(bad).__name__}) raised {type(e).__name__}: {e}") from e


@pytest.mark.parametrize("name", sorted(GOOD))
def test_inputs_are_never_modified(name):
    good = GOOD[name]
    snap = []
    for g in good:
        if isinstance(g, torch.Tensor):
            snap.append(g.to_dense().clone() if g.layout != torch.strided else g.clone())
        elif isinstance(g, trnsparse.SparseMatrix):
            snap.append(g.to_dense().clone())
        else:
            snap.append(None)
    getattr(trnsparse, name)(*good)
    for g, s in zip(good, snap):
        if isinstance(g, torch.Tensor):
            assert torch.equal(g.to_dense() if g.layout != torch.strided else g, s)
        elif isinstance(g, trnsparse.SparseMatrix):
            assert torch.equal(g.to_dense(), s)


def test_nan_inputs_propagate_rather_than_vanish():
    x = torch.tensor([1.0, float("nan"), 0.0])
    assert torch.isnan(trnsparse.spmv(A, x)).all()  # every row of the tridiagonal A touches x[1]
    assert not torch.isnan(trnsparse.spmv(A, torch.tensor([float("nan"), 1.0, 1.0]))[2])  # row 2 does not touch x[0]
    An = trnsparse.from_dense(torch.tensor([[float("nan"), 0.0], [0.0, 1.0]]))
    assert An.nnz == 2 and torch.isnan(An.to_dense()[0, 0])


def test_numpy_in_numpy_out():
    r = trnsparse.spmv(A, np.array([1.0, 2.0, 3.0], dtype=np.float32))
    assert isinstance(r, np.ndarray) and r.dtype == np.float32
    np.testing.assert_allclose(r, A.to_dense().numpy() @ np.array([1.0, 2.0, 3.0]), rtol=1e-6)


def _doctests():
    finder = doctest.DocTestFinder()
    seen = set()
    for name in sorted(set(trnsparse.__all__) - {"__version__", "HAS_NKI"}):
        for t in finder.find(getattr(trnsparse, name), name, globs={}):
            if t.examples and t.name not in seen:
                seen.add(t.name)
                yield t


@pytest.mark.parametrize("test", list(_doctests()), ids=lambda t: t.name)
def test_docstring_examples_run(test):
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0, test.name
