"""Bad input to every public function, generated from the signatures (issue 19).

For each public name of the core and the six libraries (``__all__``), the
test builds a call from ``inspect.signature``: tiny valid values for the
required parameters, chosen by parameter name from the candidates below (the
first combination that runs is the *base* call), then one bad value at a time
for every parameter -- wrong types, integers beyond int64, negative sizes,
bools where tensors go, strings, NumPy arrays where ints go, NaN, ... .

Every exception raised must be a ``TypeError`` or ``ValueError`` (NumPy's
``LinAlgError`` and its subclasses are ``ValueError``\\ s); never an
``AttributeError``, ``AssertionError``, ``OverflowError``, ``KeyError``,
``IndexError``, ``ZeroDivisionError`` or a ``RuntimeError`` from torch (an
``ImportError`` naming the ``pip install`` of a missing optional part is fine), and
no call may hang (each has a 10 s alarm; they take milliseconds). When the base call ran, the message
must name the function (or the operation a ``plan_*``/``*_into`` function
plans or fills, or the function an alias points to) and the argument that was
changed, as whole words (the check is skipped for ``*args`` parameters, whose
elements have no name of their own).

The public methods and arithmetic operators of the objects the public
functions return (sparse matrices, generators, plans, ``ComplexTensor``) are
swept the same way (operators need not name an argument, methods only the
argument: ``A.matvec(x)`` speaks as ``spmv``; indexing is left out, where
``IndexError`` is Python's protocol). Nothing here lists calls by
hand: a new public function or method is covered as soon as it exists.
``Op`` is left out -- constructing one registers an operation globally -- and
so are the context managers (``use_*``: calling one only builds a generator
object). Global settings touched by ``set_*`` are restored afterwards. The
whole sweep (~11,500 calls) takes a few seconds.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import math
import re
import signal
import threading
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import trnblas
import trnfft
import trnrand
import trnsci
import trnsolver
import trnsparse
import trntensor

MODULES = [trnsci, trnblas, trnfft, trnsparse, trnsolver, trnrand, trntensor]
SKIP = {"Op"}  # registers an operation in the global registry
OK_TYPES = (TypeError, ValueError)  # LinAlgError, ConvergenceError: ValueError subclasses
MAX_BAD_PER_PARAM = 13
N = 4  # every base tensor is 4 x 4 / length 4 (float64)
HANG_SECONDS = 10.0  # every call takes milliseconds; 10 s leaves room for a loaded CI machine


def _spd():
    X = torch.arange(16, dtype=torch.float64).reshape(N, N) / 16
    return X @ X.T + N * torch.eye(N, dtype=torch.float64)


def _candidates():
    """Valid values by parameter name, most common first (built once, small)."""
    A = _spd()
    v = torch.linspace(1, 2, N, dtype=torch.float64)
    csr = trnsparse.from_dense(A)
    bsr = trnsparse.BSRMatrix.from_dense(A, block_size=2)
    T3 = torch.arange(60, dtype=torch.float64).reshape(3, 4, 5).sin()
    cp = trntensor.cp_decompose(T3, 2, max_iter=2)
    tk = trntensor.tucker_decompose(T3, (2, 2, 2))
    tt = trntensor.tt_decompose(T3, max_rank=2)
    sig = torch.linspace(0, 1, 32, dtype=torch.float64).sin()
    spec = trnfft.stft(sig, 8)
    mask = trnsparse.local_window_mask(N, 1, block_size=2)
    QKV = torch.linspace(0, 1, 2 * N, dtype=torch.float32).reshape(N, 2)
    A3 = torch.stack([A, A])
    B_ovq = torch.linspace(0, 1, 12, dtype=torch.float64).reshape(2, 2, 3)  # (nocc, nvir, naux)
    return {
        "A": [A, csr, bsr, A3], "B": [A, B_ovq, csr, A3],
        "C": [A], "x": [v, sig, A], "y": [v], "b": [v, A, 1.0], "a": [A, 1.0],
        "alpha": [1.0], "beta": [1.0], "c": [0.6], "s": [0.8],
        "input": [sig, spec, A], "n_fft": [8], "n": [N], "m": [N], "d": [1.0],
        "subscripts": ["ij,jk->ik"], "operands": [(A, A)], "contractions": [(("ij,jk->ik", A, A),)],
        "size": [(3,)], "shape": [(N, N), 2.0, (8,)], "tensors": [(A,)],
        "values": [torch.ones(1, dtype=torch.float64)], "col_indices": [torch.tensor([0])],
        "row_ptrs": [torch.tensor([0, 1, 1, 1, 1])], "row_indices": [torch.tensor([0])],
        "col_ptrs": [torch.tensor([0, 1, 1, 1, 1])], "blocks": [torch.ones(1, 2, 2, dtype=torch.float64),
                                                          torch.zeros(1, 128, 128, dtype=torch.float64)],
        "block_col_indices": [torch.tensor([0])], "block_row_ptrs": [torch.tensor([0, 1, 1]), torch.tensor([0, 1])],
        "block_size": [2], "tensor": [T3], "rank": [2], "ranks": [(2, 2, 2)],
        "factors": [cp[0], tk[1]], "weights": [cp[1]], "core": [tk[0]], "cores": [tt],
        "probs": [torch.tensor([0.2, 0.8])], "num_samples": [2], "counter": [torch.zeros(1, 4, dtype=torch.int64)],
        "key": [torch.zeros(1, 2, dtype=torch.int64), 0], "buf": [torch.empty(N)], "n_points": [4], "n_dims": [2],
        "Q": [QKV, v, A], "K": [QKV, 3], "V": [QKV], "mask": [mask], "mask_bsr": [mask], "P": [A],
        "diagonal_integrals": [v], "diag_integrals": [v], "threshold": [1e-10],
        "lam_min": [1.0], "lam_max": [8.0], "omega": [0.5], "A_pattern": [csr], "X": [A], "Y": [A],
        "c_and_lower": [trnsolver.cho_factor(A)], "lu_and_piv": [trnsolver.lu_factor(A)],
        "eri3": [torch.linspace(0, 1, 48, dtype=torch.float64).reshape(N, N, 3)],  # (nao, nao, naux)
        "C_occ": [A[:, :2]], "C_vir": [A[:, 2:]], "eps_occ": [torch.tensor([-1.0, -0.9], dtype=torch.float64)],
        "eps_vir": [torch.tensor([1.0, 1.1], dtype=torch.float64)], "real": [v], "imag": [v],
        "op": ["trnblas.gemm"], "op_name": ["gemm"], "name": ["torch"], "mode": ["fast", True],
        "fn": [trnblas.gemm], "args": [(A, A), (1.0, A, A)], "generator": [trnrand.Generator(0)], "seed": [0],
        "t": [A.to_sparse_csr()], "sp_matrix": [sp.csr_array(A.numpy())], "seq_len": [8], "window": [2],
        "df": [3.0], "p": [0.5], "lam": [1.0], "kind": ["fft"], "dtype": [torch.float64],
        "apply": [lambda r: r], "v0": [v], "mf": [None], "message": ["m"], "position": [0],
        "perm": [(1, 0)], "axes": [(0,)],
    }


BAD = [
    ("str", "x"), ("huge", 2**70), ("neg", -1), ("neg_huge", -(2**70)), ("bool", True), ("float", 1.5),
    ("array", np.ones(3)), ("object", object()), ("nan", float("nan")),
    ("bool_tensor", torch.ones(2, dtype=torch.bool)),
    ("complex", 1j), ("list", [1, "a"]), ("zero_d", torch.tensor(1.0)),
]


class _Hang(Exception):
    pass


@contextlib.contextmanager
def _alarm(seconds):
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return

    def on_alarm(signum, frame):
        raise _Hang()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _call(fn, pos, var, kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with _alarm(HANG_SECONDS):
            r = fn(*pos, *var, **kw)
            if inspect.isgenerator(r):
                r.close()
            return r


def _names(msg, word):
    """``word`` occurs in ``msg`` as a whole identifier (``A`` in "A must be", not in "Accepts")."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", msg) is not None


def _who(qual, fn):
    """Names a message may give the function by: its public name, the name of the object (an alias
    such as ``dotu = dot``), and the operation a ``plan_*`` / ``*_into`` function plans or fills."""
    name = qual.split(".")[-1]
    names = {name, getattr(fn, "__name__", name), qual.split(".")[-2]}  # a method may say its class
    names |= {n[len("plan_"):] for n in names if n.startswith("plan_")}
    names |= {n[: -len("_into")] for n in names if n.endswith("_into")}
    return names


def _layout(sig):
    """(positional names, var-positional name, keyword-only names) of a signature."""
    pos, var, kwonly = [], None, []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            pos.append(p)
        elif p.kind is p.VAR_POSITIONAL:
            var = p
        elif p.kind is p.KEYWORD_ONLY:
            kwonly.append(p)
    return pos, var, kwonly


def _split(pos, var, kwonly, values):
    """Arguments for a call: positional ones up to the var-positional, the rest by keyword."""
    args = []
    for p in pos:
        if p.name not in values:
            break
        args.append(values[p.name])
    if var is None:
        kw = {p.name: values[p.name] for p in pos[len(args):] if p.name in values}
    else:
        kw = {}
    kw.update({p.name: values[p.name] for p in kwonly if p.name in values})
    star = values.get(var.name, ()) if var is not None else ()
    return args, star, kw


def _base(fn, cands):
    """The first combination of candidate values for the required parameters that runs, or None."""
    pos, var, kwonly = _layout(inspect.signature(fn))
    required = [p for p in pos + kwonly if p.default is inspect.Parameter.empty]
    if var is not None:
        required.append(var)
    options = [cands.get(p.name, [None]) for p in required]
    for combo in itertools.islice(itertools.product(*options), 40):
        values = dict(zip((p.name for p in required), combo))
        try:
            _call(fn, *_split(pos, var, kwonly, values))
            return values
        except _Hang:
            return None
        except Exception:  # noqa: BLE001 (any failure: try the next combination)
            continue
    return None


def _public():
    for mod in MODULES:
        for name in mod.__all__:
            obj = getattr(mod, name)
            if name in SKIP or name.startswith("use_") or not callable(obj):
                continue
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                continue
            try:
                inspect.signature(obj)
            except (TypeError, ValueError):
                continue
            yield f"{mod.__name__}.{name}", obj


@contextlib.contextmanager
def _restored_settings():
    saved = (trnfft.get_precision(), trntensor.get_autotune(), trnrand.generator._default_generator)
    try:
        yield
    finally:
        trnsci.reset_backend()
        trnfft.set_precision(saved[0])
        trntensor.set_autotune(saved[1])
        trnrand.generator._default_generator = saved[2]


_OPERATORS = ("__matmul__", "__rmatmul__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
              "__rmul__", "__truediv__", "__rtruediv__")


def _methods(cands):
    """Public methods and arithmetic operators of the public classes' objects (as public functions
    return them). Indexing (``__getitem__``) is left out: ``IndexError`` is Python's protocol there."""
    A = _spd()
    csr = cands["A"][1]
    objs = {"trnsparse.CSRMatrix": csr, "trnsparse.CSCMatrix": csr.to_csc(), "trnsparse.COOMatrix": csr.to_coo(),
            "trnsparse.BSRMatrix": cands["A"][2], "trnsparse.Preconditioner": trnsparse.jacobi(csr),
            "trnrand.Generator": trnrand.Generator(0),
            "trnfft.ComplexTensor": trnfft.ComplexTensor(torch.ones(N), torch.ones(N)),
            "trnfft.FFTPlan": trnfft.create_plan((8,)),
            "trntensor.ContractionPlan": trntensor.plan_contraction("ij,jk->ik", A, A)}
    for cname, obj in objs.items():
        for mname, m in inspect.getmembers(obj, predicate=callable):
            if mname.startswith("_") and mname not in _OPERATORS:
                continue
            try:
                inspect.signature(m)
            except (TypeError, ValueError):
                continue
            yield f"{cname}.{mname}", m


def _targets(cands):
    """(name, callable, kind): the public functions, then the methods and operators."""
    for qual, fn in _public():
        yield qual, fn, "function"
    for qual, fn in _methods(cands):
        yield qual, fn, "operator" if qual.endswith("__") else "method"


def _sweep():
    cands = _candidates()
    wrong, unnamed, calls, bases = [], [], 0, 0
    for qual, fn, kind in _targets(cands):
        pos, var, kwonly = _layout(inspect.signature(fn))
        who = _who(qual, fn)
        base = _base(fn, cands)
        ran = base is not None
        bases += ran
        values0 = dict(base or {p.name: cands.get(p.name, [None])[0] for p in pos + kwonly
                                 if p.default is inspect.Parameter.empty})
        params = pos + kwonly + ([var] if var is not None else [])
        for p in params:
            for label, bad in BAD[:MAX_BAD_PER_PARAM] if p.kind is not p.VAR_POSITIONAL else BAD[:4]:
                values = dict(values0)
                if var is not None and p.kind is not p.VAR_POSITIONAL and p.name not in values:
                    continue  # a defaulted positional behind *args cannot be passed alone
                values[p.name] = (bad,) if p is var else bad
                calls += 1
                try:
                    _call(fn, *_split(pos, var, kwonly, values))
                except _Hang:
                    wrong.append(f"{qual}({p.name}={label}): no answer within {HANG_SECONDS:g} s")
                except ImportError as e:  # an optional part not installed (e.g. trnsci[chem]): documented
                    if "pip install" not in str(e):
                        wrong.append(f"{qual}({p.name}={label}): ImportError without the fix: {e}")
                except OK_TYPES as e:
                    msg = str(e)
                    # ``A @ x`` has no argument name to give; a method may speak as the public
                    # function it runs (``A.matvec(x)`` -> "spmv: x ..."), so only the argument counts
                    named = _names(msg, p.name) and (kind == "method" or any(_names(msg, w) for w in who))
                    if ran and p is not var and kind != "operator" and not named:
                        unnamed.append(f"{qual}({p.name}={label}): {type(e).__name__}: {msg[:160]}")
                except Exception as e:  # noqa: BLE001 (the point of the test)
                    wrong.append(f"{qual}({p.name}={label}): {type(e).__name__}: {str(e)[:160]}")
    return wrong, unnamed, calls, bases


def test_every_public_function_refuses_bad_input_with_type_or_value_error():
    with _restored_settings(), torch.no_grad():
        wrong, unnamed, calls, bases = _sweep()
    n_fns = sum(1 for _ in _public())
    assert n_fns > 200 and calls > 10000  # the sweep really covers the suite
    assert bases >= 0.85 * n_fns, f"only {bases} of {n_fns} functions got a running base call"
    assert not wrong, f"{len(wrong)} of {calls} calls raised the wrong kind of error:\n" + "\n".join(wrong)
    assert not unnamed, (f"{len(unnamed)} of {calls} errors do not name the argument:\n" + "\n".join(unnamed))


@pytest.mark.parametrize("call, exc, pattern", [
    # the specific cases of issue 19, kept as named regressions
    (lambda: trntensor.einsum("ij,jk->ik", _spd(), _spd(), alpha=2**70), None, None),
    (lambda: trnsci.decide("trnblas.gemm", 10.0, supported=torch.ones(2)), TypeError, "decide: supported"),
    (lambda: trnsci.decide("trnblas.gemm", size="x"), TypeError, "decide: size"),
    (lambda: trnsparse.BSRMatrix.from_dense(_spd(), block_size=2**70), ValueError, "block_size must be at most"),
    (lambda: trnsparse.eye_sparse(2**70), ValueError, "eye_sparse: n must be at most 2\\*\\*63 - 1"),
    (lambda: trnsparse.random_sparse(2**70, 3, 0.1), ValueError, "random_sparse: m must be at most"),
    (lambda: trnsparse.random_sparse(3, 3, 0.1, seed=2**70), ValueError, "random_sparse: seed must be at most"),
    (lambda: trntensor.cp_decompose(torch.ones(2, 2, 2), rank=2**70), ValueError, "cp_decompose: rank"),
    (lambda: trntensor.cp_decompose(torch.ones(2, 2, 2), rank=1, seed=2**70), ValueError, "cp_decompose: seed"),
    (lambda: trnsparse.spmm(trnsparse.from_dense(_spd()), torch.ones(3, 2, dtype=torch.float64)), ValueError,
     "spmm: B must have 4 rows"),
    (lambda: trntensor.tensordot(torch.tensor(1.0), _spd(), dims=1), ValueError, "tensordot: .* a has only 0"),
    (lambda: trntensor.tensordot(torch.ones(2, 2, dtype=torch.bool), _spd(), 1), TypeError, "tensordot: a has dtype"),
    (lambda: trntensor.estimate_flops("ij,jk->ik", _spd(), torch.ones(3, 2)), ValueError, "^estimate_flops:"),
    (lambda: trnfft.stft(torch.zeros(0), n_fft=8), ValueError, "stft: the signal is empty"),
    (lambda: trnsparse.eye_sparse(3, dtype=sp.eye(3)), TypeError, "eye_sparse: dtype"),
    (lambda: trnsparse.random_sparse(3, 3, 0.5, dtype=sp.eye(3)), TypeError, "random_sparse: dtype"),
    (lambda: trntensor.tucker_decompose(torch.ones(2, 2), (1, 1), tol=-1), ValueError, "tucker_decompose: tol"),
    (lambda: trnrand.Generator(partition_size=2**70), ValueError, "Generator: partition_size must be at most"),
    (lambda: trnfft.fftfreq(8, dtype=np.ones(3)), TypeError, "fftfreq: dtype"),
    # big-endian input is converted, but an out= the result cannot be written through is refused
    (lambda: trnblas.gemm(1.0, np.eye(3), np.eye(3), out=np.zeros((3, 3), ">f8")), ValueError, "native byte order"),
])
def test_issue_19_error_messages(call, exc, pattern):
    if exc is None:  # accepted: 2**70 is a valid (float) scale factor
        R = call()
        assert math.isfinite(float(R.abs().max())) and float(R.abs().max()) > 1e20
        return
    with pytest.raises(exc, match=pattern):
        call()
