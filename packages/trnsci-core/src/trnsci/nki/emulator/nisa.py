"""Emulated ``nki.isa`` (NKI 0.6): exactly the release's names.

Instructions are implemented in :mod:`._isa`; each one's engines, operand
memories, dtypes, targets and cycle cost are declared once with
:func:`._table.instruction` (see ``INSTRUCTIONS`` there).  The exported names
and signatures are held against ``tests/emulator/nki_0_6_manifest.json``.
"""

from ._isa import (  # noqa: F401
    NkiInstruction,
    NkiValidationError,
    VirtualRegister,
    activate2,
    activation,
    activation_reduce,
    affine_select,
    bn_aggr,
    bn_stats,
    core_barrier,
    dge_mode,
    dma_compute,
    dma_copy,
    dma_engine,
    dma_transpose,
    dropout,
    engine,
    exponential,
    get_nc_sub_version,
    get_nc_version,
    gpsimd_engine,
    iota,
    local_gather,
    matmul_perf_mode,
    max8,
    memset,
    nc_find_index8,
    nc_match_replace8,
    nc_matmul,
    nc_matmul_mx,
    nc_n_gather,
    nc_stream_shuffle,
    nc_transpose,
    nc_version,
    nonzero_with_count,
    oob_mode,
    quantize_mx,
    rand2,
    rand_get_state,
    rand_set_state,
    range_select,
    reciprocal,
    reduce_cmd,
    register_alloc,
    register_load,
    register_move,
    register_store,
    rng,
    scalar_engine,
    scalar_tensor_tensor,
    select_reduce,
    sendrecv,
    sequence_bounds,
    set_rng_seed,
    tensor_copy,
    tensor_copy_predicated,
    tensor_engine,
    tensor_partition_reduce,
    tensor_reduce,
    tensor_scalar,
    tensor_scalar_cumulative,
    tensor_scalar_reduce,
    tensor_tensor,
    tensor_tensor_scan,
    topk,
    unknown_engine,
    vector_engine,
)

_REMOVED = {
    "tensor_copy_dynamic_src": "removed in NKI 0.4: use nisa.tensor_copy with src.ap(..., scalar_offset=...)",
    "tensor_copy_dynamic_dst": "removed in NKI 0.4: use nisa.tensor_copy with dst.ap(..., scalar_offset=...)",
}


def __getattr__(name):
    if name in _REMOVED:
        from .errors import RemovedAPIError

        raise RemovedAPIError(f"nki.isa has no attribute {name!r}: {_REMOVED[name]}")
    raise AttributeError(f"nki.isa (emulated NKI 0.6) has no attribute {name!r}")


__all__ = sorted(n for n in dir() if not n.startswith("_"))
