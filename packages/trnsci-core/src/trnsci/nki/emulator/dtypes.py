"""NKI dtypes and the numerics of the Vector/Scalar engines.

Arithmetic on the Vector and Scalar engines runs in fp32: each input is
converted to fp32, the operation runs in fp32, and the result is cast to the
output dtype (round to nearest even; integer outputs saturate and NaN maps to
0).  Bitwise operations and shifts work on the raw bits instead.
"""

import ml_dtypes
import numpy as np

from .errors import EmulatorError

float32 = np.dtype(np.float32)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float16 = np.dtype(np.float16)
int32 = np.dtype(np.int32)
uint32 = np.dtype(np.uint32)
int16 = np.dtype(np.int16)
uint16 = np.dtype(np.uint16)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)
bool_ = uint8  # comparison masks; NKI's bool_ is one byte per element
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)

FP8_DTYPES = (float8_e4m3, float8_e5m2, float8_e4m3fn)
FLOAT_DTYPES = (float32, bfloat16, float16) + FP8_DTYPES
INT_DTYPES = (int32, uint32, int16, uint16, int8, uint8)
SUPPORTED = FLOAT_DTYPES + INT_DTYPES

_BY_NAME = {str(d): d for d in SUPPORTED}
_BY_NAME.update({"bf16": bfloat16, "fp32": float32, "fp16": float16, "bool": uint8})

# NKI 0.6 dtypes the emulator has no storage format for (yet).
NOT_EMULATED = {
    "tfloat32": "tfloat32 (1S,8E,10M) has no NumPy storage type; use float32",
    "float8_e5m2_x4": "x4-packed types are for nc_matmul_mx on NeuronCore-v4 (trn3)",
    "float8_e4m3fn_x4": "x4-packed types are for nc_matmul_mx on NeuronCore-v4 (trn3)",
    "float4_e2m1fn_x4": "x4-packed types are for nc_matmul_mx on NeuronCore-v4 (trn3)",
    "float8_e8m0fnu": "the MX scale type is for nc_matmul_mx / quantize_mx on NeuronCore-v4 (trn3)",
}

# Integer sentinel for fresh allocations: every byte 0xA5 (uint32 0xA5A5A5A5).
INT_SENTINEL_BYTE = 0xA5

_UNSIGNED = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32)}


def normalize(dtype, op="dtype", operand="dtype"):
    """Return the NumPy dtype for an NKI dtype spec, or raise EmulatorError."""
    if dtype is None:
        return None
    if dtype is bool:
        return uint8
    if isinstance(dtype, str) and dtype in NOT_EMULATED:
        raise EmulatorError(f"{op}: dtype {dtype} for '{operand}' is not emulated yet: {NOT_EMULATED[dtype]}")
    try:
        if isinstance(dtype, str):
            d = _BY_NAME[dtype]
        else:
            name = getattr(dtype, "name", None)
            if name is None or not hasattr(dtype, "itemsize"):
                # torch dtypes and python types
                s = str(dtype).replace("torch.", "")
                d = _BY_NAME[s] if s in _BY_NAME else np.dtype(dtype)
            else:
                d = np.dtype(dtype)
    except (KeyError, TypeError):
        raise EmulatorError(f"{op}: unsupported dtype {dtype!r} for '{operand}'") from None
    if d not in SUPPORTED:
        raise EmulatorError(
            f"{op}: unsupported dtype {d} for '{operand}'; NKI supports " + ", ".join(str(x) for x in SUPPORTED)
        )
    return d


def is_float(d):
    return d in FLOAT_DTYPES


def is_int(d):
    return d in INT_DTYPES


def unsigned_of(d):
    return _UNSIGNED[d.itemsize]


def is_fp32(d):
    return d == float32


def is_int32(d):
    return d in (int32, uint32)


def fill_sentinel(arr):
    """Fill a fresh allocation with NaN (floats) or 0xA5 bytes (integers)."""
    if arr.dtype in FLOAT_DTYPES:
        arr.fill(np.nan)
    else:
        arr.view(np.uint8).fill(INT_SENTINEL_BYTE)


def to_fp32(a):
    """Engine input conversion: any supported dtype -> fp32 (RNE for wide ints)."""
    if isinstance(a, np.ndarray):
        if a.dtype == float32:
            return a
        return a.astype(np.float32)
    return np.float32(a)


def from_fp32(x, d):
    """Engine output conversion: fp32 -> d, RNE, saturating for integers."""
    if d == float32:
        return np.asarray(x, dtype=np.float32)
    if d in FLOAT_DTYPES:
        return np.asarray(x, dtype=np.float32).astype(d)
    info = np.iinfo(d)
    x64 = np.rint(np.asarray(x, dtype=np.float64))
    x64 = np.nan_to_num(x64, nan=0.0, posinf=info.max, neginf=info.min)
    np.clip(x64, info.min, info.max, out=x64)
    return x64.astype(d)


def convert(a, d):
    """Value conversion between supported dtypes as the engines do it.

    Same dtype: exact copy of the bits.  Otherwise through fp32.
    """
    if a.dtype == d:
        return a
    if is_float(a.dtype) and is_float(d):
        return np.asarray(a, dtype=np.float32).astype(d) if d != float32 else a.astype(np.float32)
    return from_fp32(to_fp32(a), d)


def promote(a, b):
    """Result dtype of a binary op on two tiles (NKI-like rules).

    Equal dtypes keep their dtype.  Any float operand: the wider float
    (bf16 with fp16 -> fp32).  Two integers of the same signedness: the wider.
    A signed integer wider than the unsigned one: the signed type.  Otherwise
    (e.g. int32 with uint32): fp32.
    """
    if a == b:
        return a
    fa, fb = is_float(a), is_float(b)
    if fa or fb:
        if fa and fb:
            if float32 in (a, b) or {a, b} == {bfloat16, float16}:
                return float32
        return a if fa and not fb else b if fb and not fa else float32
    sa, sb = a.kind == "i", b.kind == "i"
    if sa == sb:
        return a if a.itemsize >= b.itemsize else b
    signed, unsigned = (a, b) if sa else (b, a)
    if signed.itemsize > unsigned.itemsize:
        return signed
    return float32
