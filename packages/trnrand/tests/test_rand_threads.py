"""trnrand's host paths do not depend on torch's thread count, and leave it as they found it."""

import threading

import pytest
import torch

import trnrand
from trnrand._philox import _OneTorchThread
from trnsci.testing import torch_threads


@pytest.fixture
def two_threads():
    with torch_threads(2):
        yield


def test_float64_normals_same_bits_at_one_and_two_threads(two_threads):
    # the Box-Muller sin runs inside _OneTorchThread at two threads: same numbers, count restored
    a = trnrand.normal(5000, dtype=torch.float64, generator=trnrand.Generator(seed=9, offset=3))
    assert torch.get_num_threads() == 2
    torch.set_num_threads(1)
    b = trnrand.normal(5000, dtype=torch.float64, generator=trnrand.Generator(seed=9, offset=3))
    assert torch.equal(a, b)


def test_one_torch_thread_nests_restores_and_survives_errors(two_threads):
    with _OneTorchThread():
        assert torch.get_num_threads() == 1
        with _OneTorchThread():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1  # the inner exit does not restore early
    assert torch.get_num_threads() == 2
    with pytest.raises(ValueError, match="inside"), _OneTorchThread():
        raise ValueError("inside")
    assert torch.get_num_threads() == 2


def test_one_torch_thread_concurrent_draws_restore_the_count(two_threads):
    # overlapping windows from several threads: the last one out restores 2, never a saved 1
    errors = []

    def draw():
        try:
            for _ in range(20):
                trnrand.normal(3000, dtype=torch.float64, generator=trnrand.Generator(seed=1))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=draw) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and torch.get_num_threads() == 2
