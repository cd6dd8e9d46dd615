"""The emulator rejects what NKI 0.6 hardware / compiler rejects (one test per rule).

Each rule cites its source in aws-neuron/aws-neuron-sdk: the isa stub
(``nki/api/nki/isa/__init__.py``), the shared tables (``nki/api/nki.api.shared.rst``),
the release notes' Known Issues (``release-notes/components/nki.rst``) or the
migration guide (``nki/migration/index.rst``).
"""

import math

import numpy as np
import pytest

from trnsci.nki.emulator import nisa, nl, profile, simulate
from trnsci.nki.emulator.errors import NkiValidationError

F32 = np.float32


def _raises(body, *arrays, match, target="trn1"):
    with pytest.raises(NkiValidationError, match=match):
        profile(body, *arrays, target=target)


def _ok(body, *arrays, target="trn1"):
    return profile(body, *arrays, target=target)


def _sb(shape, dtype=nl.float32, value=None):
    t = nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf)
    if value is not None:
        nisa.memset(t, value)
    return t


def _ps(shape, value=None, dtype=nl.float32):
    t = nl.ndarray(shape, dtype=dtype, buffer=nl.psum)
    if value is not None:
        nisa.memset(t, value)
    return t


# ------------------------------------------------------- nl known issues


def test_nl_binary_ops_do_not_broadcast():  # Known Issues: Broadcasting
    def k():
        nl.add(_sb((4, 8), value=1.0), _sb((4, 1), value=1.0))

    _raises(k, match=r"nl.add: .*do not broadcast")


def test_nl_binary_same_shapes_and_scalars_work():
    def k(a):
        x = nl.load(a)
        y = nl.add(nl.multiply(x, x), 1.0)  # tensor_tensor, then tensor_scalar
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, y)
        return out

    a = np.arange(8, dtype=F32).reshape(2, 4)
    out, prof = _ok(k, a)
    np.testing.assert_array_equal(out, a * a + 1)
    assert prof.by_instruction == {"nisa.dma_copy@dma": 2, "nisa.tensor_scalar@vector": 1,
                                   "nisa.tensor_tensor@vector": 1}


@pytest.mark.parametrize("fn, match", [
    (lambda x: nl.divide(x, x), "nl.divide: .*reciprocal"),
    (lambda x: nl.mod(x, x), "nl.mod: .*not supported"),
    (lambda x: nl.fmod(x, x), "nl.fmod: .*not supported"),
    (lambda x: nl.power(x, 2.0), r"nl.power\(tile, scalar\) is not supported"),
    (lambda x: x / x, "nl.divide"),
])
def test_nl_known_issue_math_fails(fn, match):  # Known Issues: Math Operations
    _raises(lambda: fn(_sb((2, 2), value=2.0)), match=match)


def test_nl_matmul_needs_transpose_x():  # Known Issues: Matrix Operations
    _raises(lambda: nl.matmul(_sb((4, 4), value=1.0), _sb((4, 4), value=1.0)), match="transpose_x=True")


def test_nl_store_psum_rejected():  # Known Issues: Data Movement
    def k(a):
        nl.store(a, _ps((2, 2), value=0.0))

    _raises(k, np.zeros((2, 2), F32), match="cannot store PSUM tile")


# ------------------------------------------------------- tensor_tensor / GpSimd


def test_tensor_tensor_both_inputs_in_psum_rejected():
    def k():
        nisa.tensor_tensor(_sb((2, 4)), _ps((2, 4), value=1.0), _ps((2, 4), value=2.0), op=nl.add)

    _raises(k, match="'data1' and 'data2' cannot both be in PSUM")


def test_tensor_tensor_one_psum_input_allowed():
    def k():
        d = _sb((2, 4))
        nisa.tensor_tensor(d, _ps((2, 4), value=1.0), _sb((2, 4), value=2.0), op=nl.add)

    _ok(k)


def test_gpsimd_cannot_touch_psum():
    def k():
        nisa.tensor_copy(_sb((2, 4)), _ps((2, 4), value=1.0), engine=nisa.engine.gpsimd)

    _raises(k, match="'src' .* is in PSUM, which the GpSimd engine cannot access")


def test_gpsimd_power_rejects_psum():
    def k():
        nisa.tensor_tensor(_ps((2, 4)), _sb((2, 4), value=2.0), _sb((2, 4), value=3.0), op=nl.power)

    _raises(k, match="'dst' .* GpSimd engine cannot access")


def test_iota_dst_must_be_sbuf():
    _raises(lambda: nisa.iota(_ps((2, 4)), [[1, 4]]), match="'dst' .* is in PSUM; it must be in SBUF")


def test_engine_must_be_enum_member():
    _raises(lambda: nisa.tensor_copy(_sb((2, 2)), _sb((2, 2), value=1.0), engine="vector"),
            match="must be an nisa.engine member")


# ------------------------------------------------------- tensor_copy / activation per target


def test_tensor_copy_on_scalar_engine_trn1_rejected_trn2_ok():
    def k():
        nisa.tensor_copy(_sb((2, 2)), _sb((2, 2), value=1.0), engine=nisa.engine.scalar)

    _raises(k, match="Scalar Engine|scalar engine", target="trn1")
    _, prof = _ok(k, target="trn2")
    assert prof.by_instruction["nisa.tensor_copy@scalar"] == 1


def test_activation_scalar_bias_rejected_on_trn1_only():
    def k():
        nisa.activation(_sb((2, 2)), op=nl.exp, data=_sb((2, 2), value=0.0), bias=1.0)

    _raises(k, match=r"'bias' must be a \(2, 1\) tile on NeuronCore-v2", target="trn1")
    _ok(k, target="trn2")


def test_activation_vector_bias_ok_on_trn1():
    def k(a):
        x = nl.load(a)
        b = _sb((2, 1), value=1.0)
        y = _sb((2, 3))
        nisa.activation(y, op=nl.exp, data=x, bias=b, scale=2.0)
        out = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, y)
        return out

    a = np.array([[0, 0.5, -1], [1, 2, -3]], F32)
    out, _ = _ok(k, a)
    np.testing.assert_allclose(out, np.exp(2 * a + 1), rtol=1e-6)


def test_activation_reciprocal_with_bias_rejected_on_trn1():  # shared.rst, NKI Engine Selection note
    def k():
        nisa.activation(_sb((2, 2)), op=nl.reciprocal, data=_sb((2, 2), value=2.0), bias=_sb((2, 1), value=1.0))

    _raises(k, match="reciprocal does not support a bias on NeuronCore-v2")


@pytest.mark.parametrize("op", [nl.add, nl.maximum, nl.bitwise_and])
def test_activation_op_outside_table_rejected(op):
    _raises(lambda: nisa.activation(_sb((2, 2)), op=op, data=_sb((2, 2), value=1.0)),
            match="not in the activation function table")


def test_sin_on_0_to_2pi_rejected():
    def k(a):
        nisa.activation(_sb(a.shape), op=nl.sin, data=nl.load(a))

    a = np.linspace(0, 2 * math.pi, 16, endpoint=False, dtype=F32).reshape(2, 8)
    _raises(k, a, match=r"outside the valid range \[-3.14159, 3.14159\] of nl.sin .*range-reduce")


def test_sin_on_minus_pi_to_pi_matches_numpy():
    def k(a):
        y = _sb(a.shape)
        nisa.activation(y, op=nl.sin, data=nl.load(a))
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, y)
        return out

    a = np.linspace(-math.pi, math.pi, 16, dtype=F32).reshape(2, 8)
    out, _ = _ok(k, a)
    np.testing.assert_allclose(out, np.sin(a), atol=1e-6)  # fp32 evaluation of a bounded function


def test_activation_range_checked_after_scale_and_bias():
    # data in range, but data * 4 leaves [-pi, pi]
    _raises(lambda: nisa.activation(_sb((2, 2)), op=nl.sin, data=_sb((2, 2), value=1.0), scale=4.0),
            match="outside the valid range")


@pytest.mark.parametrize("op, value", [(nl.log, 0.0), (nl.sqrt, 0.0), (nl.arctan, 2.0), (nl.reciprocal, 1e-20)])
def test_activation_ranges_of_other_functions(op, value):
    _raises(lambda: nisa.activation(_sb((2, 2)), op=op, data=_sb((2, 2), value=value)),
            match="outside the valid range")


# ------------------------------------------------------- nc_matmul


def test_matmul_fp32_pairs_only_with_fp32():
    def k():
        nisa.nc_matmul(_ps((4, 4)), _sb((4, 4), nl.float32, 1.0), _sb((4, 4), nl.bfloat16, 1.0))

    _raises(k, match="if one matmul input is float32 the other must be float32")


def test_matmul_rejects_integer_operands():
    def k():
        nisa.nc_matmul(_ps((4, 4)), _sb((4, 4), nl.int32, 1), _sb((4, 4), nl.int32, 1))

    _raises(k, match="'stationary' .* has dtype int32; it must be float")


def test_matmul_bf16_with_fp16_allowed():
    def k():
        nisa.nc_matmul(_ps((4, 4)), _sb((4, 4), nl.bfloat16, 1.0), _sb((4, 4), nl.float16, 1.0))

    _ok(k)


def test_matmul_accumulate_true_after_memset_is_undefined():
    """isa stub note: accumulating onto a value-initialized (memset) PSUM location is undefined on v2/v3."""
    def k():
        acc = _ps((4, 4), value=0.0)
        nisa.nc_matmul(acc, _sb((4, 4), value=1.0), _sb((4, 4), value=1.0), accumulate=True)

    _raises(k, match="accumulate=True into PSUM elements .* no matmul initialized")


def test_matmul_accumulate_none_after_memset_is_accepted():
    """accumulate=None: the first matmul write overwrites, also over a memset value (isa stub)."""
    def k():
        acc = _ps((4, 4), value=0.0)
        nisa.nc_matmul(acc, _sb((4, 4), value=1.0), _sb((4, 4), value=1.0))

    _ok(k)


def test_matmul_accumulate_true_needs_matmul_initialized_psum():
    def k():
        nisa.nc_matmul(_ps((4, 4)), _sb((4, 4), value=1.0), _sb((4, 4), value=1.0), accumulate=True)

    _raises(k, match="accumulate=True into PSUM elements .* no matmul initialized")


def test_matmul_perf_mode_double_row_rejected_on_trn1():
    def k():
        nisa.nc_matmul(_ps((4, 4)), _sb((4, 4), value=1.0), _sb((4, 4), value=1.0),
                       perf_mode=nisa.matmul_perf_mode.double_row)

    _raises(k, match="double_row is not supported on NeuronCore-v2")


# ------------------------------------------------------- reductions


def test_reduction_must_be_over_trailing_free_axes():
    def k():
        nisa.tensor_reduce(_sb((2, 1, 4)), nl.add, _sb((2, 3, 4), value=1.0), axis=1, keepdims=True)

    _raises(k, match=r"must be the last contiguous free dimensions")


def test_reduction_over_partition_axis_rejected():
    _raises(lambda: nisa.tensor_reduce(_sb((1, 4)), nl.add, _sb((2, 4), value=1.0), axis=0),
            match="partition axis")


def test_reduction_trailing_axes_accepted():
    def k(a):
        x = nl.load(a)
        r1, r2 = _sb((2, 3)), _sb((2, 1))
        nisa.tensor_reduce(r1, nl.add, x, axis=2)
        nisa.tensor_reduce(r2, nl.maximum, x, axis=(1, 2))
        o1 = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((2, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(o1, r1)
        nl.store(o2, r2)
        return o1, o2

    a = np.arange(24, dtype=F32).reshape(2, 3, 4)
    (o1, o2), _ = _ok(k, a)
    np.testing.assert_array_equal(o1, a.sum(axis=2))
    np.testing.assert_array_equal(o2, a.max(axis=(1, 2))[:, None])


def test_reduction_with_non_reduction_op_rejected():
    _raises(lambda: nisa.tensor_reduce(_sb((2, 1)), nl.less, _sb((2, 4), value=1.0), axis=1),
            match="not a legal reduction operator")


# ------------------------------------------------------- dtype rules


def test_memset_value_must_match_integer_dtype():  # migration 0.3: strict type matching
    _raises(lambda: nisa.memset(_sb((2, 2), nl.int32), 2.0), match="pass an integer literal")


def test_memset_int_value_into_int_dtype_ok():
    _ok(lambda: nisa.memset(_sb((2, 2), nl.int32), 2))


def test_memset_gpsimd_into_psum_rejected():
    _raises(lambda: nisa.memset(_ps((2, 2)), 0.0, engine=nisa.engine.gpsimd), match="GpSimd engine cannot access")


def test_nc_transpose_dtype_must_match():
    def k():
        nisa.nc_transpose(_ps((4, 4), dtype=nl.float32), _sb((4, 4), nl.bfloat16, 1.0))

    _raises(k, match="'dst' dtype float32 must equal 'data' dtype bfloat16")


def test_tensor_scalar_vector_operand_must_be_fp32():
    def k():
        nisa.tensor_scalar(_sb((2, 4)), _sb((2, 4), value=1.0), nl.add, _sb((2, 1), nl.bfloat16, 1.0))

    _raises(k, match="'operand0' .* must be float32")


def test_tensor_scalar_bitvec_needs_integers_and_vector_engine():
    _raises(lambda: nisa.tensor_scalar(_sb((2, 2)), _sb((2, 2), value=1.0), nl.bitwise_and, 1),
            match="bitvec operators need integer")
    _raises(lambda: nisa.tensor_scalar(_sb((2, 2), nl.int32), _sb((2, 2), nl.int32, 1), nl.bitwise_and, 1,
                                       engine=nisa.engine.gpsimd), match="Vector Engine only")


def test_tensor_scalar_gpsimd_only_for_rsqrt_and_scalar_engine_combos():
    _raises(lambda: nisa.tensor_scalar(_sb((2, 2)), _sb((2, 2), value=1.0), nl.add, 1.0,
                                       engine=nisa.engine.gpsimd), match="only allowed for op0=nl.rsqrt")
    _raises(lambda: nisa.tensor_scalar(_sb((2, 2)), _sb((2, 2), value=1.0), nl.subtract, 1.0,
                                       engine=nisa.engine.scalar), match="Scalar Engine supports only")


def test_divide_is_not_an_alu_operator():
    _raises(lambda: nisa.tensor_tensor(_sb((2, 2)), _sb((2, 2), value=1.0), _sb((2, 2), value=1.0),
                                       op=nl.divide), match="no divide")


# ------------------------------------------------------- outputs, targets, removed parameters


def test_outputs_must_be_shared_hbm():  # migration 0.3
    def k(a):
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.hbm)
        nl.store(out, nl.load(a))
        return out

    with pytest.raises(NkiValidationError, match="buffer=nl.shared_hbm"):
        simulate(k, np.zeros((2, 2), F32))


def test_get_nc_version_returns_the_enum():
    seen = {}

    def k():
        seen["v"] = nisa.get_nc_version()

    _ok(k, target="trn1")
    assert seen["v"] is nisa.nc_version.gen2
    _ok(k, target="trn2")
    assert seen["v"] is nisa.nc_version.gen3


def test_range_select_needs_trn2():
    def k():
        nisa.range_select(_sb((2, 4)), _sb((2, 4), value=1.0), nl.greater_equal, nl.less,
                          _sb((2, 1), value=0.0), _sb((2, 1), value=2.0))

    _raises(k, match="not available on NeuronCore-v2", target="trn1")
    _ok(k, target="trn2")


def test_trn3_instructions_unavailable():
    _raises(lambda: nisa.exponential(_sb((2, 2)), _sb((2, 2), value=1.0)), match="NeuronCore-v2")


def test_removed_dma_copy_parameter_names_replacement():
    def k(a):
        nisa.dma_copy(_sb((2, 2)), a, dst_rmw_op=nl.add)

    _raises(k, np.zeros((2, 2), F32), match="dst_rmw_op.*nisa.dma_compute")


def test_mask_parameter_removed():
    _raises(lambda: nisa.memset(_sb((2, 2)), 0.0, mask=None), match="'mask' parameter was removed")


def test_string_buffer_rejected():
    _raises(lambda: nl.ndarray((2, 2), dtype=nl.float32, buffer="sbuf"), match="string buffer names")


def test_tensor_copy_predicated_dtype_rules():
    def k():
        nisa.tensor_copy_predicated(_sb((2, 2)), _sb((2, 2), value=1.0), _sb((2, 2), nl.int32, 1))

    _raises(k, match="'predicate' .* must be uint8 or uint16 or uint32")


def test_dma_hwdge_rules_per_target():
    def k(a):
        t = _sb((2, 2), nl.bfloat16)
        nisa.dma_copy(t, a, dge_mode=nisa.dge_mode.hwdge)

    a = np.zeros((2, 2), F32)
    _raises(k, a, match="hardware DGE\\) needs NeuronCore-v3", target="trn1")
    _raises(k, a, match="with dge_mode=hwdge 'src' \\(float32\\) and 'dst' \\(bfloat16\\)", target="trn2")


def test_dma_priority_needs_trn3_and_enums_required():
    def k(a):
        nisa.dma_copy(_sb((2, 2)), a, priority=0)

    _raises(k, np.zeros((2, 2), F32), match="priority")

    def k2(a):
        nisa.dma_copy(_sb((2, 2)), a, dge_mode=2)

    _raises(k2, np.zeros((2, 2), F32), match="must be a nisa.dge_mode member")


def test_default_target_from_neuron_platform_target_override(monkeypatch):
    seen = []

    def k():
        seen.append(nisa.get_nc_version())

    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen3")
    simulate(k)()
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE")
    simulate(k)()
    assert seen == [nisa.nc_version.gen3, nisa.nc_version.gen2]
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")
    with pytest.raises(NkiValidationError, match="trn1 \\(gen2\\) and trn2 \\(gen3\\) only"):
        simulate(k)()
