"""Facts of the NeuronCore that host code needs: which dtypes the engines compute in.

The Tensor Engine (the 128x128 systolic array behind ``nc_matmul``)
multiplies fp8, bf16, fp16 and fp32 operands (fp32 at a quarter of the bf16
rate) and accumulates in fp32 in PSUM. It has no float64, no complex and no
integer arithmetic: a float64 or complex call has to run on torch (or be
emulated in software, which no trnsci kernel does).

:func:`why_not_dtype` words that for a plan or a ``TRNSCI_REQUIRE_NKI``
error, so every library says it the same way.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["TENSOR_ENGINE_DTYPES", "dtype_name", "why_not_dtype"]

#: Operand dtypes ``nc_matmul`` accepts (torch names); results accumulate in fp32.
TENSOR_ENGINE_DTYPES = tuple(
    d for d in (torch.float32, torch.bfloat16, torch.float16,
                getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None))
    if d is not None
)


def dtype_name(dtype) -> str:
    """``torch.float32`` -> ``"float32"``."""
    return str(dtype).replace("torch.", "")


def why_not_dtype(dtype, supported: Iterable, what: str = "the NKI kernel") -> str:
    """Why a kernel that takes ``supported`` dtypes cannot take ``dtype``, in one line.

    Examples
    --------
    >>> import torch
    >>> from trnsci.nki.hw import why_not_dtype
    >>> why_not_dtype(torch.float64, (torch.float32, torch.bfloat16))
    'dtype float64: the NKI kernel takes float32 or bfloat16 (the Tensor Engine has no float64 arithmetic)'
    """
    names = [dtype_name(d) for d in supported]
    takes = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    name = dtype_name(dtype)
    if dtype is not None and getattr(dtype, "is_complex", False):
        hw = " (the Tensor Engine has no complex arithmetic)"
    elif dtype == torch.float64:
        hw = " (the Tensor Engine has no float64 arithmetic)"
    elif dtype is not None and not getattr(dtype, "is_floating_point", True):
        hw = " (the Tensor Engine has no integer arithmetic)"
    else:
        hw = ""
    return f"dtype {name}: {what} takes {takes}{hw}"
