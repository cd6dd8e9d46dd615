"""The public surface: published names/signatures, docstring examples, and a
walk over ``trnsolver.__all__`` with bad inputs (each must give a correct
result or a TypeError/ValueError naming the argument; inputs never modified)."""

from __future__ import annotations

import doctest
import inspect

import numpy as np
import pytest
import torch

import trnsolver

PUBLISHED = ["eigh", "eigh_generalized", "cholesky", "lu", "qr", "solve", "solve_spd", "inv_spd",
             "inv_sqrt_spd", "inv_sqrt_spd_ns", "cg", "gmres", "jacobi_preconditioner", "pinv", "svd",
             "block_jacobi_preconditioner", "ssor_preconditioner", "set_backend", "get_backend", "schur", "HAS_NKI"]


def test_published_names_and_signatures():
    for name in PUBLISHED:
        assert name in trnsolver.__all__, name
    p = lambda f: list(inspect.signature(getattr(trnsolver, f)).parameters)  # noqa: E731
    assert p("cg")[:6] == ["A", "b", "x0", "tol", "maxiter", "M"]
    assert p("gmres")[:6] == ["A", "b", "x0", "tol", "maxiter", "restart"]
    assert p("cholesky")[:2] == ["A", "upper"]
    assert p("solve_spd")[:3] == ["A", "B", "iterative_refinement"]
    assert p("svd")[:2] == ["A", "full_matrices"]
    assert p("eigh")[:3] == ["A", "max_sweeps", "tol"]
    assert p("eigh_generalized")[:2] == ["A", "B"]
    assert "max_iters" in p("inv_sqrt_spd_ns") and "tol" in p("inv_sqrt_spd_ns")
    assert p("block_jacobi_preconditioner") == ["A", "block_size"]
    assert p("ssor_preconditioner") == ["A", "omega"]
    assert p("pinv")[:2] == ["A", "rcond"]
    assert p("schur") == ["a", "output", "lwork", "overwrite_a", "sort", "check_finite"]  # scipy.linalg.schur's


@pytest.mark.parametrize("name", [n for n in trnsolver.__all__ if callable(getattr(trnsolver, n))])
def test_docstring_examples_run(name):
    obj = getattr(trnsolver, name)
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for t in finder.find(obj, name, globs={}):
        runner.run(t)
    assert runner.failures == 0, name


SPD = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
VEC = torch.tensor([1.0, 2.0], dtype=torch.float64)

# one good call per public function; the walker perturbs one argument at a time
GOOD = {
    "eigh": (SPD,), "eigvalsh": (SPD,), "eigh_generalized": (SPD, SPD), "cholesky": (SPD,),
    "cho_factor": (SPD,), "lu": (SPD,), "lu_factor": (SPD,), "qr": (SPD,), "svd": (SPD,), "pinv": (SPD,),
    "solve": (SPD, VEC), "solve_spd": (SPD, VEC), "lstsq": (SPD, VEC), "inv": (SPD,), "inv_spd": (SPD,),
    "det": (SPD,), "slogdet": (SPD,), "inv_sqrt_spd": (SPD,), "inv_sqrt_spd_ns": (SPD,),
    "cg": (SPD, VEC), "gmres": (SPD, VEC), "bicgstab": (SPD, VEC), "minres": (SPD, VEC),
    "cho_solve": ((SPD, True), VEC),
    "lu_solve": ((SPD, torch.zeros(2, dtype=torch.int32)), VEC),
    "schur": (SPD,), "jacobi_preconditioner": (SPD,), "block_jacobi_preconditioner": (SPD,),
    "ssor_preconditioner": (SPD,),
}
NAMES = {"cho_solve": ("c", "b"), "schur": ("a",), "lu_solve": ("lu", "b"),
         "eigh_generalized": ("A", "B"), "solve": ("A", "B"), "solve_spd": ("A", "B"), "lstsq": ("A", "B"),
         "cg": ("A", "b"), "gmres": ("A", "b"), "bicgstab": ("A", "b"), "minres": ("A", "b")}

BAD = {
    "None": None, "str": "abc", "list": [[1.0, 2.0], [3.0, 4.0]],
    "int": torch.ones(2, 2, dtype=torch.int64), "bool": torch.ones(2, 2, dtype=torch.bool),
    "rank0": torch.tensor(1.0, dtype=torch.float64), "rank1_3": torch.ones(3, dtype=torch.float64),
    "nonsquare": torch.ones(2, 3, dtype=torch.float64), "wrong_n": torch.eye(3, dtype=torch.float64),
    "nan": torch.tensor([[float("nan"), 0.0], [0.0, 1.0]], dtype=torch.float64),
    "f32": SPD.float(),
}


def test_all_is_covered_by_the_walker():
    fns = {n for n in trnsolver.__all__ if inspect.isfunction(getattr(trnsolver, n))}
    fns -= {"set_backend", "get_backend", "use_backend"}
    fns -= {"plan"}  # takes an op's name, not matrices: its bad input is tested in tests/test_core_plan_call.py
    assert fns <= set(GOOD), fns - set(GOOD)


@pytest.mark.parametrize("name", sorted(GOOD))
@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.filterwarnings("ignore::trnsolver.ConvergenceWarning")
def test_bad_inputs(name, bad):
    fn = getattr(trnsolver, name)
    good = GOOD[name]
    argnames = NAMES.get(name, ("A", "B"))
    for pos in range(len(good)):
        args = list(good)
        args[pos] = BAD[bad]
        before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        try:
            fn(*args)
        except (TypeError, ValueError) as e:
            msg = str(e)
            assert name in msg or argnames[pos] in msg, (name, bad, msg)
            assert argnames[pos] in msg or "singular" in msg or "definite" in msg or "converge" in msg, msg
        for a, b in zip(args, before):
            if isinstance(a, torch.Tensor):
                assert torch.equal(a, b) or (a.isnan().any() and torch.equal(a.isnan(), b.isnan()))


def test_bad_keywords_named():
    with pytest.raises(TypeError, match="upper"):
        trnsolver.cholesky(SPD, upper="yes")
    with pytest.raises(ValueError, match="on_fail"):
        trnsolver.cg(SPD, VEC, on_fail="ignore")
    with pytest.raises(ValueError, match="tol"):
        trnsolver.cg(SPD, VEC, tol=-1.0)
    with pytest.raises(TypeError, match="maxiter"):
        trnsolver.cg(SPD, VEC, maxiter=1.5)
    with pytest.raises(ValueError, match="min_eig"):
        trnsolver.inv_sqrt_spd(SPD, min_eig=0.0)
    with pytest.raises(ValueError, match="mode"):
        trnsolver.qr(SPD, mode="bogus")
    with pytest.raises(ValueError, match="trans"):
        trnsolver.lu_solve(trnsolver.lu_factor(SPD), VEC, trans=5)
    with pytest.raises(TypeError, match="dtype"):
        trnsolver.solve(SPD, VEC.float())


def test_numpy_in_numpy_out():
    w, V = trnsolver.eigh(SPD.numpy())
    assert isinstance(w, np.ndarray) and isinstance(V, np.ndarray)
    x, it, rr = trnsolver.cg(SPD.numpy(), VEC.numpy())
    assert isinstance(x, np.ndarray) and isinstance(it, int) and isinstance(rr, float)
