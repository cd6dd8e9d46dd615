"""trnsci.validate axis/alias/positive-int helpers (moved from trnfft): NumPy's rules for
axes (negative counted from the end, out of range and repeats rejected), keyword aliases,
and positive ints -- bools and non-integers are TypeErrors naming the argument."""

import numpy as np
import pytest

from trnsci import validate


def test_alias():
    assert validate.alias("f", "dim", None, "axis", None, -1) == -1
    assert validate.alias("f", "dim", 2, "axis", None, -1) == 2
    assert validate.alias("f", "dim", None, "axis", 0, -1) == 0
    with pytest.raises(TypeError, match="f: give dim or axis, not both"):
        validate.alias("f", "dim", 1, "axis", 1)


@pytest.mark.parametrize("d,nd,want", [(0, 1, 0), (-1, 3, 2), (2, 3, 2), (np.int64(-2), 2, 0)])
def test_axis_normalizes(d, nd, want):
    got = validate.axis(d, nd, "dim", "f")
    assert got == want and type(got) is int


@pytest.mark.parametrize("d,exc,msg", [(3, ValueError, "dim=3 is out of range"), (-4, ValueError, "out of range"),
                                       (True, TypeError, "dim must be an int"), (1.0, TypeError, "dim must be an int"),
                                       ("0", TypeError, "dim must be an int")])
def test_axis_rejects(d, exc, msg):
    with pytest.raises(exc, match=msg):
        validate.axis(d, 3, "dim", "f")


def test_axes():
    assert validate.axes((0, -1), 3, "dim") == (0, 2)
    assert validate.axes(-1, 3, "dim") == (2,)
    assert validate.axes([], 3, "dim") == ()
    with pytest.raises(ValueError, match="must not repeat an axis"):
        validate.axes((0, -3), 3, "dim", "f")
    with pytest.raises(TypeError, match="dim must be a sequence of ints"):
        validate.axes("01", 3, "dim", "f")
    with pytest.raises(TypeError, match="dim must be a sequence"):
        validate.axes(None, 3, "dim", "f")


def test_positive_int_and_ints():
    assert validate.positive_int(np.int32(5), "n") == 5
    with pytest.raises(ValueError, match="f: n must be positive, got 0"):
        validate.positive_int(0, "n", "f")
    with pytest.raises(TypeError, match="n must be an int, got bool"):
        validate.positive_int(True, "n", "f")
    with pytest.raises(TypeError, match="n must be an int, got float"):
        validate.positive_int(2.0, "n", "f")
    assert validate.positive_ints([3, np.int64(4)], "s") == (3, 4)
    with pytest.raises(ValueError, match="s entries must be positive"):
        validate.positive_ints((3, -1), "s", "f")
    with pytest.raises(TypeError, match="s entries must be an int"):
        validate.positive_ints((3, 1.5), "s", "f")
    with pytest.raises(TypeError, match="s must be a sequence of ints"):
        validate.positive_ints(4, "s", "f")
