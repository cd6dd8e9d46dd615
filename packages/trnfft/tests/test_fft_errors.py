"""Walk trnfft.__all__ with bad inputs: a correct result or a TypeError/ValueError naming the
argument -- never another exception -- and inputs never modified. Plus the docstring examples."""

import doctest
import math

import numpy as np
import pytest
import torch

import trnfft

ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
N_D = ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"]
TRANSFORMS = ONE_D + N_D


def call_ok_or_clean_error(fn, *args, **kwargs):
    """Run; return the result, or the TypeError/ValueError (any other exception fails the test)."""
    try:
        return fn(*args, **kwargs)
    except (TypeError, ValueError) as e:
        assert str(e), "empty error message"
        return e


BAD_VALUES = [None, "abc", 3, [1.0, 2.0], object(),
              torch.arange(8), torch.ones(8, dtype=torch.bool), np.arange(8), np.array(["a", "b"])]


@pytest.mark.parametrize("name", TRANSFORMS)
def test_bad_input_kinds_and_dtypes(name):
    fn = getattr(trnfft, name)
    for bad in BAD_VALUES:
        with pytest.raises(TypeError, match=name):
            fn(bad)


@pytest.mark.parametrize("name", ONE_D)
def test_bad_keywords_1d(name):
    fn = getattr(trnfft, name)
    x = torch.randn(3, 8)
    before = x.clone()
    for kw, exc, word in [({"n": 0}, ValueError, "n"), ({"n": -4}, ValueError, "n"), ({"n": 2.5}, TypeError, "n"),
                          ({"n": True}, TypeError, "n"), ({"dim": 2}, ValueError, "dim"),
                          ({"dim": -3}, ValueError, "dim"), ({"dim": 1.0}, TypeError, "dim"),
                          ({"axis": 5}, ValueError, "dim"), ({"norm": "bad"}, ValueError, "norm"),
                          ({"norm": 1}, ValueError, "norm"), ({"precision": "quad"}, ValueError, "precision"),
                          ({"n": 2**70}, ValueError, "n")]:  # torch itself would say "Overflow ... long long"
        with pytest.raises(exc, match=word):
            fn(x, **kw)
    with pytest.raises(ValueError, match="dim"):
        fn(torch.tensor(1.0))  # 0-d: no axis to transform
    with pytest.raises(ValueError):
        fn(torch.zeros(3, 0))  # empty transform axis without n
    if name in ("irfft", "hfft"):
        with pytest.raises(ValueError, match="n"):
            fn(torch.ones(1, dtype=torch.complex64))  # default n = 2*(1-1) = 0
    if name in ("rfft", "ihfft"):
        with pytest.raises(TypeError, match="real"):
            fn(torch.ones(4, dtype=torch.complex64))
    assert torch.equal(x, before)


@pytest.mark.parametrize("name", N_D)
def test_bad_keywords_nd(name):
    fn = getattr(trnfft, name)
    x = torch.randn(3, 4, 6)
    before = x.clone()
    for kw, exc, word in [({"s": (0, 4)}, ValueError, "s"), ({"s": 4}, TypeError, "s"),
                          ({"s": (4, 2.0)}, TypeError, "s"), ({"dim": (0, 3)}, ValueError, "dim"),
                          ({"dim": (1, 1)}, ValueError, "dim"), ({"dim": "ab"}, TypeError, "dim"),
                          ({"s": (4, 4, 4), "dim": (0, 1)}, ValueError, "s"), ({"norm": "x"}, ValueError, "norm"),
                          ({"dim": (0,), "axes": (1,)}, TypeError, "axes"),
                          ({"s": (4, -1)}, ValueError, "s"),  # torch would read -1 as "keep"; NumPy refuses
                          ({"s": [2**70, 4]}, ValueError, "s")]:
        with pytest.raises(exc, match=word):
            fn(x, **kw)
    if name.startswith(("rfft", "irfft")):
        with pytest.raises(ValueError, match="dim"):
            fn(x, dim=())  # a real-input/real-output transform needs an axis for the half spectrum
    if name.endswith("2"):
        with pytest.raises(ValueError, match="dimensions"):
            fn(torch.ones(4))
    assert torch.equal(x, before)


def test_nan_and_inf_propagate_like_numpy():
    x = np.array([1.0, np.nan, 2.0, 3.0])
    for name in ["fft", "rfft", "ihfft"]:
        y = getattr(trnfft, name)(x)
        assert np.isnan(y).all() == np.isnan(getattr(np.fft, name)(x)).all()


def test_inputs_never_modified_across_all_modes():
    for mode in ["fast", "kahan", "double", "bf16", "bf16_refined"]:
        x = torch.randn(4, 10)
        xc = torch.randn(4, 10, dtype=torch.complex64)
        x0, xc0 = x.clone(), xc.clone()
        for name in TRANSFORMS:
            fn = getattr(trnfft, name)
            inp = x if name.startswith(("r", "ih")) else xc
            kw = {"precision": mode}
            if name in ("irfft", "hfft"):
                kw["n"] = 18
            fn(inp, **kw)
        assert torch.equal(x, x0) and torch.equal(xc, xc0)
        ct = trnfft.ComplexTensor(x.clone(), x.clone())
        trnfft.irfft(ct, precision=mode)
        assert torch.equal(ct.real, x0) and torch.equal(ct.imag, x0)


def test_other_public_functions_bad_input():
    for fn in (trnfft.fftfreq, trnfft.rfftfreq):
        for bad, exc in [(0, ValueError), (-1, ValueError), (2.5, TypeError), (None, TypeError), (True, TypeError)]:
            with pytest.raises(exc, match="n"):
                fn(bad)
        with pytest.raises(ValueError, match="d"):
            fn(4, d=0.0)
        with pytest.raises(TypeError, match="d"):
            fn(4, d="x")
        with pytest.raises(TypeError, match="dtype"):
            fn(4, dtype=torch.int32)
    for fn in (trnfft.fftshift, trnfft.ifftshift):
        with pytest.raises(TypeError, match="x"):
            fn(None)
        with pytest.raises(ValueError, match="dim"):
            fn(torch.ones(3), dim=1)
    for bad in ["abc", None, 3.5]:
        r = call_ok_or_clean_error(trnfft.create_plan, bad)
        assert isinstance(r, (TypeError, ValueError))
    for fn in (trnfft.set_precision,):
        with pytest.raises(ValueError, match="mode"):
            fn(None)
    with pytest.raises(TypeError, match="x must be"):
        trnfft.nn.ComplexLinear(3, 2)(torch.ones(3))
    with pytest.raises(ValueError, match="features"):
        trnfft.nn.ComplexLinear(3, 2)(torch.ones(4, dtype=torch.complex64))
    with pytest.raises(ValueError, match="in_features"):
        trnfft.nn.ComplexLinear(0, 2)
    with pytest.raises(TypeError, match="complex_matmul"):
        trnfft.complex_matmul("a", torch.ones(2, 2))
    assert math.isfinite(float(trnfft.fft(torch.ones(1))[0].real))


def test_docstring_examples_run():
    failures = 0
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    seen = 0
    for name in trnfft.__all__:
        obj = getattr(trnfft, name)
        if isinstance(obj, (str, bool)):
            continue
        for t in finder.find(obj, name, globs={}):
            seen += len(t.examples)
            failures += runner.run(t).failed
    assert seen > 40 and failures == 0


def test_every_public_callable_has_a_numpy_style_docstring():
    for name in trnfft.__all__:
        obj = getattr(trnfft, name)
        if callable(obj) and name not in ("set_backend", "get_backend", "use_backend"):
            assert obj.__doc__ and "Examples" in obj.__doc__, name
