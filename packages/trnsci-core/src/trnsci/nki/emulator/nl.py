"""Emulated ``nki.language``: exactly NKI 0.6's names, plus NKI 0.7's tiled/blocked layout APIs.

The implementation lives in :mod:`._lang` (wrappers) and :mod:`._ops`
(operators); this module only re-exports the public names, so emulator
internals never appear in ``nl``.  Names a kernel may still use from older
releases (``nl.arange``, ``nl.mgrid``, ``nl.par_dim``, ...) raise an error
naming the replacement.  The exported names and signatures are held against
``tests/emulator/nki_0_6_manifest.json``; the 0.7 additions are listed in
``_nl07.NAMES_0_7``.
"""

from . import _lang
from ._lang import (  # noqa: F401
    abs,
    add,
    affine_range,
    arctan,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    copy,
    device_print,
    divide,
    ds,
    dynamic_range,
    equal,
    erf,
    erf_dx,
    exp,
    fmod,
    fori_loop,
    gelu,
    gelu_apprx_sigmoid,
    gelu_apprx_sigmoid_dx,
    gelu_apprx_tanh,
    gelu_dx,
    greater,
    greater_equal,
    hbm,
    invert,
    left_shift,
    less,
    less_equal,
    load,
    log,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mish,
    mod,
    multiply,
    ndarray,
    no_reorder,
    not_equal,
    num_programs,
    power,
    private_hbm,
    prod,
    program_id,
    program_ndim,
    psum,
    rand,
    random_seed,
    reciprocal,
    relu,
    right_shift,
    rms_norm,
    rsqrt,
    sbuf,
    sequential_range,
    shared_constant,
    shared_hbm,
    shared_identity_matrix,
    sigmoid,
    sign,
    silu,
    silu_dx,
    sin,
    softmax,
    softplus,
    sqrt,
    square,
    static_range,
    store,
    subtract,
    sum,
    tanh,
    tile_size,
    transpose,
    while_loop,
    zeros,
)
from ._nl06 import (  # noqa: F401
    DType,
    MemoryRegion,
    NKIObject,
    NkiTensor,
    abs_max,
    abs_min,
    all,
    average,
    broadcast_to,
    bypass,
    ceil,
    cos,
    dropout,
    empty_like,
    expand_dims,
    float8_e8m0fnu,
    floor,
    full,
    gather_flattened,
    is_hbm,
    is_on_chip,
    is_psum,
    is_sbuf,
    load_transpose2d,
    negative,
    ones,
    prelu,
    tan,
    trunc,
    var,
    where,
    zeros_like,
)
from .dtypes import (  # noqa: F401
    bfloat16,
    bool_,
    float8_e4m3,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    int8,
    int16,
    int32,
    uint8,
    uint16,
    uint32,
)

# dtypes of NKI 0.6 without an emulator storage type: using them raises "not emulated yet"
tfloat32 = "tfloat32"
float8_e5m2_x4 = "float8_e5m2_x4"
float8_e4m3fn_x4 = "float8_e4m3fn_x4"
float4_e2m1fn_x4 = "float4_e2m1fn_x4"


# NKI 0.7 (Neuron 2.33) additions: the tiled / blocked layout APIs (see _nl07.py)
from ._nl07 import NkiBlockGrid, NkiGrid, NkiTileGrid, alloc_blocks, alloc_tiles, blocks, tiles  # noqa: E402,F401


def __getattr__(name):
    if name in _lang.REMOVED:
        _lang.removed(name)
    raise AttributeError(f"nki.language (emulated NKI 0.6/0.7) has no attribute {name!r}")


__all__ = sorted(n for n in dir() if not n.startswith("_") and n != "annotations")
