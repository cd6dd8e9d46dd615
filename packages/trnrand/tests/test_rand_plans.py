"""Plans equal runs for every trnrand op with a kernel, including calls the kernel cannot take."""

import pytest
import torch

import trnrand
from trnrand.distributions import BETA, GAMMA, NORMAL, STUDENT_T, UNIFORM
from trnsci.dispatch import ops, plan_call
from trnsci.testing import assert_plan_matches_run


def G(**kw):
    return trnrand.Generator(seed=31, **kw)


KERNEL_CALLS = [
    ("philox_kernel", trnrand.uniform, (300,), {"generator": G(offset=5)}),
    ("philox_kernel", trnrand.uniform, (41,), {"low": -3.0, "high": 0.5, "dtype": torch.float64, "generator": G()}),
    ("philox_kernel", trnrand.uniform_into, (torch.empty(2, 9),), {"generator": G(subsequence=4)}),
    ("normal_kernel", trnrand.normal, (129,), {"mean": 1.0, "std": 0.5, "generator": G(offset=2)}),
    ("normal_kernel", trnrand.standard_normal, (5, 7), {"generator": G()}),
    ("normal_kernel", trnrand.lognormal, (33,), {"generator": G()}),
    ("normal_kernel", trnrand.normal, (8,), {"generator": G(offset=3)}),  # odd pairing
    ("sobol_kernel", trnrand.sobol, (50, 3), {"seed": 2}),
    ("sobol_kernel", trnrand.sobol, (513, 2), {"scramble": False, "dtype": torch.float64, "skip": 1}),
    ("philox_transform_kernel", trnrand.exponential, (131,), {"rate": 3.0, "generator": G(offset=1)}),
    ("philox_transform_kernel", trnrand.bernoulli, (4, 33), {"p": 0.25, "dtype": torch.bool, "generator": G()}),
    ("philox_transform_kernel", trnrand.randint, (77,), {"low": -3, "high": 9, "generator": G(offset=3)}),
    ("philox_transform_kernel", trnrand.geometric, (77,), {"p": 0.1, "generator": G(offset=2)}),
    ("discrete_kernel", trnrand.poisson, (131,), {"lam": 2.5, "generator": G(offset=1)}),
    ("discrete_kernel", trnrand.categorical, (torch.tensor([1.0, 2.0, 0.5]), 2, 9), {"generator": G()}),
    ("philox_transform_kernel", trnrand.truncated_normal, (131,), {"low": 0.5, "high": 4.0, "generator": G(offset=1)}),
    ("halton_kernel", trnrand.halton, (300, 7), {"skip": 3}),
    ("lhs_kernel", trnrand.latin_hypercube, (131, 3), {"generator": G(offset=4)}),
    ("discrete_kernel", trnrand.multinomial, (torch.tensor([1.0, 2.0, 3.0]), 77),
     {"replacement": True, "generator": G(offset=2)}),
    ("discrete_kernel", trnrand.binomial, (131,), {"n": 40, "p": 0.7, "generator": G(offset=1)}),
    ("poisson_kernel", trnrand.poisson, (131,), {"lam": 30.0, "dtype": torch.int64, "generator": G(offset=1)}),
    ("gamma_kernel", trnrand.student_t, (131,), {"df": 3.0, "generator": G(offset=1)}),
    ("gamma_kernel", trnrand.gamma, (131,), {"shape": 0.7, "scale": 2.0, "generator": G(offset=1)}),
    ("philox_block_kernel", trnrand.philox4x32,
     (torch.zeros(3, 4, dtype=torch.int64), torch.ones(2, dtype=torch.int64)), {"rounds": 7}),
]


@pytest.mark.parametrize("kernel,fn,args,kwargs", KERNEL_CALLS, ids=lambda v: getattr(v, "__name__", None))
def test_plan_names_the_kernel_that_runs(kernel, fn, args, kwargs):
    with trnrand.use_backend("simulator"):
        plan, result, runs = assert_plan_matches_run(fn, *args, **kwargs)
    assert plan.backend == "simulator" and plan.kernel["name"] == kernel
    assert [r.kernel for r in runs] == [kernel]


TORCH_CALLS = [  # calls the kernels cannot take: the plan says torch, with the reason
    ("float32", trnrand.normal, (8,), {"dtype": torch.float64, "generator": G()}),
    ("odd stream word", trnrand.normal, (8,), {"generator": G(offset=4 * 2**32 - 7)}),  # last pair straddles
    ("empty", trnrand.uniform, (0,), {"generator": G()}),
    ("empty", trnrand.sobol, (0, 3), {}),
    ("float32", trnrand.exponential, (8,), {"dtype": torch.float64, "generator": G()}),
    ("not a finite non-zero float32", trnrand.exponential, (8,), {"rate": 1e-300, "generator": G()}),
    ("threshold 2**32", trnrand.bernoulli, (8,), {"p": 1.0, "generator": G()}),
    ("p = 1", trnrand.geometric, (8,), {"p": 1.0, "generator": G()}),
    ("2**-16", trnrand.geometric, (8,), {"p": 1e-6, "generator": G()}),
    ("straddle", trnrand.randint, (8,), {"high": 5, "generator": G(offset=4 * 2**32 - 9)}),
    ("empty", trnrand.randint, (0,), {"high": 5, "generator": G()}),
    ("empty", trnrand.philox4x32, (torch.zeros(0, 4, dtype=torch.int64), torch.zeros(2, dtype=torch.int64)), {}),
    ("cancellation", trnrand.gamma, (8,), {"shape": 5000.0, "generator": G()}),
    ("BTRS", trnrand.binomial, (8,), {"n": 1000, "p": 0.3, "generator": G()}),
    ("without replacement", trnrand.multinomial, (torch.tensor([1.0, 2.0, 4.0]), 2), {"generator": G()}),
    ("strength 2", trnrand.latin_hypercube, (9, 2), {"strength": 2, "generator": G()}),
    ("inside a Philox block", trnrand.latin_hypercube, (8, 2), {"generator": G(offset=1)}),
    ("float32", trnrand.halton, (8, 2), {"dtype": torch.float64}),
    ("scrambled", trnrand.halton, (8, 2), {"scramble": True, "seed": 3}),
    ("no NKI kernel", trnrand.randperm, (9,), {"generator": G()}),
    ("2**16", trnrand.poisson, (8,), {"lam": 1e6, "generator": G()}),
    ("lam = 0", trnrand.poisson, (8,), {"lam": 0.0, "generator": G()}),
    ("distinct thresholds", trnrand.categorical, (torch.ones(70), 8), {"generator": G()}),
    ("float32", trnrand.truncated_normal, (8,), {"dtype": torch.float64, "generator": G()}),
    ("mass", trnrand.truncated_normal, (8,), {"low": 9.0, "high": 10.0, "generator": G()}),
]


@pytest.mark.parametrize("why,fn,args,kwargs", TORCH_CALLS, ids=lambda v: getattr(v, "__name__", None))
def test_plan_says_torch_when_the_kernel_cannot_take_the_call(why, fn, args, kwargs):
    with trnrand.use_backend("simulator"):
        plan, result, runs = assert_plan_matches_run(fn, *args, **kwargs)
    assert plan.backend == "torch" and runs == []
    assert why in plan.reason


def test_beta_plans_the_device_and_runs_two_gamma_kernels():
    # two kernel runs: the plan names the device backend without single-kernel figures
    with trnrand.use_backend("simulator"):
        plan, result, runs = assert_plan_matches_run(trnrand.beta, 77, alpha=2.0, beta=0.5, generator=G(offset=1))
    assert plan.backend == "simulator" and plan.kernel is None
    assert [r.kernel for r in runs] == ["gamma_kernel", "gamma_kernel"]


def test_planning_does_not_move_the_generator():
    g = G(offset=7)
    with trnrand.use_backend("simulator"):
        plan_call(trnrand.uniform, 100, generator=g)
        plan_call(trnrand.gamma, 10, shape=1.5, generator=g)
    assert g.position() == 7
    gs = trnrand.Generator(seed=4)
    plan_call(trnrand.sobol, 10, 2, seed=gs)
    assert gs.position() == 0


def test_plan_reports_no_single_kernel_figures_across_the_counter_word_boundary():
    # two kernel calls (the block index's low word wraps inside the draw): no single closed form to show
    g = trnrand.Generator(seed=5, offset=4 * ((1 << 32) - 1))
    with trnrand.use_backend("simulator"):
        plan = plan_call(trnrand.uniform, 12, generator=g)
    assert plan.backend == "simulator" and plan.kernel is None


def test_every_public_op_is_registered():
    names = set(ops("trnrand"))
    for op in ("uniform", "normal", "lognormal", "exponential", "gamma", "beta", "student_t", "truncated_normal",
               "poisson", "bernoulli", "binomial", "geometric", "randint", "randperm", "multinomial",
               "categorical", "sobol", "halton", "latin_hypercube", "philox4x32"):
        assert f"trnrand.{op}" in names
    assert UNIFORM.has_kernel and NORMAL.has_kernel and GAMMA.has_kernel and BETA.has_kernel
    assert STUDENT_T.has_kernel
