"""Bad input names the offending index/argument; the __all__ walker; docstring examples run."""

from __future__ import annotations

import doctest
import inspect

import numpy as np
import pytest
import torch

import trntensor

A = torch.ones(3, 4)
B = torch.ones(4, 5)


@pytest.mark.parametrize("call,pattern", [
    (lambda: trntensor.einsum("ij,jk->ik", A), r"name 2 operand\(s\) but 1"),
    (lambda: trntensor.einsum("ij->ij", A, B), r"name 1 operand\(s\) but 2"),
    (lambda: trntensor.einsum("ij,jk->ik", A, torch.ones(5, 5)), r"index 'j': 4 and 5"),
    (lambda: trntensor.einsum("ii->i", A), r"index 'i': 3 and 4"),
    (lambda: trntensor.einsum("i1,jk->ik", A, B), r"invalid index '1'"),
    (lambda: trntensor.einsum("ij,jk->i$", A, B), r"invalid index '\$'"),
    (lambda: trntensor.einsum("ij,jk->iz", A, B), r"output index 'z' does not appear"),
    (lambda: trntensor.einsum("ij,jk->ii", A, B), r"output index 'i' appears more than once"),
    (lambda: trntensor.einsum("ijk,jk->i", A, B), r"operand 0 has 2 dimension\(s\)"),
    (lambda: trntensor.einsum("ij..,jk", A, B), r"invalid index '\.'"),
    (lambda: trntensor.einsum("ij->i->j", A), r"more than one '->'"),
    (lambda: trntensor.einsum("...ij,...jk", torch.ones(2, 3, 4), torch.ones(3, 4, 5)), r"ellipsis dimension: 2 and 3"),
    (lambda: trntensor.einsum("ij,jk->ik", A, B, beta=1.0), r"beta=1.0 needs out="),
    (lambda: trntensor.einsum("ij,jk->ik", A, B, precision="quad"), r"precision must be one of"),
    (lambda: trntensor.einsum("ij", A, dtype="bf17"), r"dtype 'bf17' is not a known name"),
    (lambda: trntensor.einsum("ij,jk->ik", A, B, optimize="magic"), r"optimize must be one of"),
    (lambda: trntensor.einsum("ij", A, out=torch.ones(4, 3)), r"out must have shape \(3, 4\)"),
    (lambda: trntensor.plan_contraction("ab,bc->ac", (2, 3), (3, 4), memory_limit=0), r"memory_limit must be >= 1"),
    (lambda: trntensor.tensordot(A, B, dims=([0], [0])), r"a's axis 0 has size 3 but b's axis 0 has 4"),
    (lambda: trntensor.cp_decompose(torch.ones(3, 4), 0), r"rank must be >= 1"),
    (lambda: trntensor.tucker_decompose(torch.ones(3, 4), (4, 1)), r"ranks\[0\]=4 exceeds"),
    (lambda: trntensor.tucker_decompose(torch.ones(3, 4), (1, 1), method="svd"), r"method must be one of"),
    (lambda: trntensor.tt_decompose(torch.ones(3, 4), tol=-1.0), r"tol must be >= 0"),
    (lambda: trntensor.cp_decompose(torch.full((3, 4), float("nan")), 1), r"NaN"),
    (lambda: trntensor.ao_to_mo_transform(torch.ones(4, 4, 2), torch.ones(3, 1), torch.ones(4, 2)),
     r"C_occ must have shape \(4, \*\)"),
    (lambda: trntensor.ao_to_mo_transform(torch.ones(4, 3, 2), torch.ones(4, 1), torch.ones(4, 2)),
     r"eri3 must have shape \(4, 4, \*\)"),
    (lambda: trntensor.tt_reconstruct([torch.ones(1, 2, 2), torch.ones(3, 2, 1)]), r"cores\[1\] has left rank 3"),
])
def test_bad_input_value_error_names_it(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


@pytest.mark.parametrize("call,pattern", [
    (lambda: trntensor.einsum(3, A), r"subscripts must be a str"),
    (lambda: trntensor.einsum("ij", [[1.0]]), r"operand 0 must be a torch.Tensor"),
    (lambda: trntensor.einsum("ij", A.bool()), r"operand 0 has dtype bool"),
    (lambda: trntensor.einsum("ij", A, dtype=3), r"dtype must be a torch.dtype"),
    (lambda: trntensor.einsum("ij", A, alpha="x"), r"alpha must be a number"),
    (lambda: trntensor.ao_to_mo_transform(torch.ones(4, 4, 2), torch.ones(4, 1).double(), torch.ones(4, 2)),
     r"dtype"),
    (lambda: trntensor.cp_decompose(torch.ones(3, 4, dtype=torch.int64), 1), r"tensor has dtype int64"),
    (lambda: trntensor.multi_einsum(("ij",)), r"contraction 0 must be a tuple"),
    (lambda: trntensor.tensordot(A, B, dims=True), r"dims must be"),
])
def test_bad_input_type_error_names_it(call, pattern):
    with pytest.raises(TypeError, match=pattern):
        call()


def _arg_candidates():
    return [None, "x", 1.5, torch.ones(0), torch.ones(3, dtype=torch.int64), torch.ones(2, 2).bool(),
            torch.full((2, 2), float("nan")), np.ones((2, 2)), torch.ones(2, 3, 4)]


_SKIP = {"set_backend", "get_backend", "use_backend", "clear_plan_cache", "plan_cache_info"}


@pytest.mark.parametrize("name", [n for n in trntensor.__all__
                                  if callable(getattr(trntensor, n)) and not isinstance(getattr(trntensor, n), type)
                                  and n not in _SKIP])
def test_all_walker(name):
    """Every public function, fed wrong things, returns or raises TypeError/ValueError naming something."""
    fn = getattr(trntensor, name)
    nreq = sum(1 for p in inspect.signature(fn).parameters.values()
               if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    good = {"einsum": ("ij->i", torch.ones(2, 2)), "plan_contraction": ("ij->i", torch.ones(2, 2)),
            "contract_path": ("ij->i", torch.ones(2, 2)), "estimate_flops": ("ij->i", torch.ones(2, 2)),
            "tensordot": (torch.ones(2, 2), torch.ones(2, 2)),
            "multi_einsum": (("ij->i", torch.ones(2, 2)),)}.get(name)
    for pos in range(max(nreq, 1)):
        for bad in _arg_candidates():
            args = list(good) if good else [torch.ones(3, 3, 3)] * max(nreq, 1)
            if pos < len(args):
                args[pos] = bad
            else:
                args.append(bad)
            snapshot = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            try:
                fn(*args)
            except (TypeError, ValueError) as e:
                assert str(e), name
            for a, s in zip(args, snapshot):  # inputs are never modified
                if isinstance(a, torch.Tensor):
                    assert torch.equal(a, s) or (a.isnan().any() and s.isnan().any())


@pytest.mark.parametrize("name", [n for n in trntensor.__all__ if getattr(trntensor, n).__doc__ and n != "__version__"])
def test_docstring_examples_run(name):
    obj = getattr(trntensor, name)
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for t in finder.find(obj, name, globs={}):
        runner.run(t)
    assert runner.failures == 0, name


def test_public_functions_have_examples():
    for name in trntensor.__all__:
        obj = getattr(trntensor, name)
        if inspect.isfunction(obj) and name not in ("set_backend", "get_backend", "use_backend"):
            assert ">>>" in (obj.__doc__ or ""), name
