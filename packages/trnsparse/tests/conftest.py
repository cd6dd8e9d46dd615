"""Fixtures for the trnsparse tests."""

from __future__ import annotations

import warnings

import pytest

warnings.filterwarnings("ignore", message=".*Sparse.*beta state.*")
warnings.filterwarnings("ignore", message=".*Sparse invariant checks.*")

@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Small tensors: torch's thread pool only adds contention on a shared machine (results are unchanged)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
