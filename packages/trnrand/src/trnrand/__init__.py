"""trnrand: cuRAND for AWS Trainium -- counter-based random numbers (Philox4x32-10) and quasi-random sequences.

Every number comes from one stream definition (Philox4x32-10 keyed by the
seed, counter = (word index // 4, subsequence)), so the same seed,
subsequence and offset give the same bits on every backend and device.
"""

from trnsci.backend import bind as _bind
from trnsci.dispatch import load_lowerings as _load_lowerings
from trnsci.libinfo import library_version as _library_version

from .distributions import (
    bernoulli,
    beta,
    binomial,
    categorical,
    chi_squared,
    exponential,
    exponential_into,
    gamma,
    geometric,
    lognormal,
    multinomial,
    normal,
    normal_into,
    poisson,
    randint,
    randperm,
    standard_normal,
    student_t,
    truncated_normal,
    uniform,
    uniform_into,
)
from .generator import Generator, get_default_generator, manual_seed
from .philox import philox4x32
from .plan import plan
from .program import GeneratorProgram
from .quasi import halton, latin_hypercube, sobol
from .threefry import threefry4x32, threefry_stream_normal, threefry_stream_uniform

__version__ = _library_version("trnrand")
set_backend, get_backend, use_backend = _bind("trnrand")

__all__ = [
    "__version__",
    "set_backend",
    "get_backend",
    "use_backend",
    "HAS_NKI",
    # generator
    "Generator",
    "GeneratorProgram",
    "manual_seed",
    "get_default_generator",
    "philox4x32",
    "threefry4x32",
    "threefry_stream_uniform",
    "threefry_stream_normal",
    # distributions
    "uniform",
    "normal",
    "standard_normal",
    "lognormal",
    "exponential",
    "gamma",
    "beta",
    "chi_squared",
    "student_t",
    "truncated_normal",
    "poisson",
    "bernoulli",
    "binomial",
    "geometric",
    "randint",
    "randperm",
    "multinomial",
    "categorical",
    "uniform_into",
    "normal_into",
    "exponential_into",
    # quasi-random
    "sobol",
    "halton",
    "latin_hypercube",
    # planning
    "plan",
]

# The NKI lowerings live in the package trnrand._nki (one module per family) and register on the Ops above;
# imported last (a broken kernel module warns and leaves the torch path running).
_load_lowerings("trnrand")
from trnsci.nki import HAS_NKI  # noqa: E402  published name: True when the Neuron SDK's NKI is importable
