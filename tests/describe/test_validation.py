"""validate(): the full accept/reject matrix from the tables, and one test per rule checking
that the message names operator, tensor, field, value and what is allowed."""
import pytest

import dmlgpu
from dmlgpu import DataType, FeatureLevel, TensorDesc, ValidationError, validate
from dmlgpu.describe.operator_descs import DESC_CLASSES
from dmlgpu.table.operators import BIT_COUNT, BIT_NOT, BIT_XOR, OPERATORS, SIGN

L = FeatureLevel


def make(op, in_type, out_type, sizes, in_strides=None, out_strides=None, **out_fields):
    inputs = [TensorDesc(in_type, sizes, in_strides) for _ in op.inputs]
    return DESC_CLASSES[op.name](*inputs, TensorDesc(out_type, sizes, out_strides, **out_fields))


def outcome(call):
    try:
        call()
        return True
    except ValidationError:
        return False


def _roles(op):
    """(role, in type -> (in, out) types): which tensor the matrix varies."""
    if op.same_type:
        return [("all", lambda t: (t, t))]
    return [("input", lambda t: (t, DataType.UINT8)), ("output", lambda t: (DataType.UINT32, t))]


MATRIX = [(op, level, role, pick) for op in OPERATORS for level in FeatureLevel
          for role, pick in _roles(op)]


@pytest.mark.parametrize("op, level, role, pick", MATRIX,
                         ids=[f"{op.short}-{lv.name[6:]}-{role}" for op, lv, role, _ in MATRIX])
def test_validation_matrix(op, level, role, pick):
    """Every data type x dimension count 0..9 is accepted exactly when the table allows it."""
    row = op.support_at(level)
    wrong = []
    for data_type in DataType:
        in_type, out_type = pick(data_type)
        for dims in range(0, 10):
            sizes = [2] * dims
            expected = (row is not None and dims in row.dims and in_type in row.input_types
                        and out_type in row.output_types)
            got = outcome(lambda: validate(make(op, in_type, out_type, sizes), level))
            if got != expected:
                wrong.append(f"{data_type.name} x {dims} dims: {'accepted' if got else 'rejected'}")
    assert not wrong, wrong


def rejects(desc, level=None, **expected):
    with pytest.raises(ValidationError) as info:
        validate(desc, level)
    error = info.value
    for name, value in expected.items():
        if name == "text":
            for piece in value:
                assert piece in str(error), (piece, str(error))
        else:
            assert getattr(error, name) == value, (name, getattr(error, name), str(error))
    return error


U8, U32 = DataType.UINT8, DataType.UINT32


def test_rule_operator_not_yet_introduced():
    rejects(make(BIT_NOT, U8, U8, [4]), L.LEVEL_2_1, operator="DML_OPERATOR_ELEMENT_WISE_BIT_NOT",
            tensor=None, field="feature_level", value=L.LEVEL_2_1,
            text=["introduced in DML_FEATURE_LEVEL_3_0"])


def test_rule_data_type_per_level():
    rejects(make(BIT_NOT, DataType.INT8, DataType.INT8, [4]), L.LEVEL_3_0, tensor="InputTensor",
            field="DataType", value=DataType.INT8,
            text=["InputTensor.DataType is INT8", "allowed at DML_FEATURE_LEVEL_3_0: UINT32, UINT16, UINT8"])


def test_rule_sign_has_no_float64_at_any_level():
    for level in FeatureLevel:
        rejects(make(SIGN, DataType.FLOAT64, DataType.FLOAT64, [1, 1, 1, 4]), level)


def test_rule_dimension_count_per_level():
    rejects(make(SIGN, DataType.FLOAT32, DataType.FLOAT32, [2, 3, 4]), L.LEVEL_2_1,
            field="DimensionCount", value=3, text=["exactly 4"])
    rejects(make(BIT_XOR, U8, U8, [1] * 9), field="DimensionCount", value=9, text=["1 to 8"])


def test_rule_sizes_positive_32bit():
    rejects(make(BIT_NOT, U8, U8, [2, 0]), field="Sizes", value=(2, 0), text=["from 1 to 2^32-1"])
    rejects(make(BIT_NOT, U8, U8, [2**32]), field="Sizes")
    rejects(make(BIT_NOT, U8, U8, [2.0]), field="Sizes")
    rejects(make(BIT_NOT, U8, U8, [True]), field="Sizes")


def test_rule_element_count_limit():
    rejects(make(BIT_NOT, U8, U8, [2**16, 2**16]), field="Sizes", text=["at most 2^32-1 elements"])
    validate(make(BIT_NOT, U8, U8, [2**32 - 1]))


def test_rule_strides_shape_and_range():
    rejects(make(BIT_NOT, U8, U8, [2, 3], in_strides=[3]), tensor="InputTensor", field="Strides",
            text=["2 integers"])
    rejects(make(BIT_NOT, U8, U8, [2, 3], in_strides=[3, -1]), field="Strides")
    rejects(make(BIT_NOT, U8, U8, [2, 3], in_strides=[2**32, 1]), field="Strides")


def test_rule_output_may_not_broadcast_or_overlap():
    rejects(make(BIT_NOT, U8, U8, [2, 3], out_strides=[0, 1]), tensor="OutputTensor",
            field="Strides", text=["may not broadcast"])
    rejects(make(BIT_NOT, U8, U8, [2, 3], out_strides=[1, 1]), tensor="OutputTensor",
            field="Strides", text=["may not overlap"])
    validate(make(BIT_NOT, U8, U8, [2, 3], out_strides=[1, 2]))   # column-major: fine
    validate(make(BIT_NOT, U8, U8, [2, 3], out_strides=[3, 2]))   # interleaved, no overlap
    validate(make(BIT_NOT, U8, U8, [2, 3], in_strides=[0, 1]))    # inputs may broadcast


def test_rule_total_tensor_size():
    rejects(make(BIT_NOT, U8, U8, [5], total_tensor_size_in_bytes=4), tensor="OutputTensor",
            field="TotalTensorSizeInBytes", value=4, text=["at least 8"])
    rejects(make(BIT_NOT, U8, U8, [5], total_tensor_size_in_bytes=10), text=["multiple of 4"])
    validate(make(BIT_NOT, U8, U8, [5], total_tensor_size_in_bytes=64))


def test_rule_guaranteed_alignment():
    rejects(make(BIT_NOT, U32, U32, [5], guaranteed_base_offset_alignment=24),
            field="GuaranteedBaseOffsetAlignment", value=24, text=["power of two"])
    rejects(make(BIT_NOT, U32, U32, [5], guaranteed_base_offset_alignment=2),
            field="GuaranteedBaseOffsetAlignment", text=[">= the element size (4)"])
    validate(make(BIT_NOT, U32, U32, [5], guaranteed_base_offset_alignment=256))


def test_rule_tensors_agree():
    a, b = TensorDesc(U8, [2, 3]), TensorDesc(U8, [3, 2])
    rejects(dmlgpu.ElementWiseBitXorOperatorDesc(a, b, a), tensor="BTensor", field="Sizes",
            text=["must equal ATensor.Sizes (2, 3)"])
    rejects(dmlgpu.ElementWiseBitXorOperatorDesc(a, TensorDesc(U8, [2, 3, 1]), a),
            tensor="BTensor", field="DimensionCount")
    rejects(dmlgpu.ElementWiseBitNotOperatorDesc(a, TensorDesc(DataType.UINT16, [2, 3])),
            tensor="OutputTensor", field="DataType", text=["must equal InputTensor.DataType (UINT8)"])


def test_rule_bit_count_output_types():
    rejects(make(BIT_COUNT, U32, DataType.UINT16, [4]), tensor="OutputTensor", field="DataType",
            text=["UINT32, UINT8"])
    validate(make(BIT_COUNT, DataType.FLOAT64, U8, [4]))


def test_rule_argument_types():
    rejects("not a desc", field="operator_desc", operator="dmlgpu")
    rejects(dmlgpu.ElementWiseBitNotOperatorDesc("x", TensorDesc(U8, [4])), tensor="InputTensor",
            field="Type")
    rejects(make(BIT_NOT, U8, U8, [4]), 0x4200, field="feature_level", value=0x4200)
    rejects(dmlgpu.ElementWiseBitNotOperatorDesc(TensorDesc(99, [4]), TensorDesc(U8, [4])),
            field="DataType", value=99)
    assert validate(make(BIT_NOT, U8, U8, [4]), 0x3000) is BIT_NOT  # plain values work


def test_validation_error_is_a_value_error():
    assert issubclass(ValidationError, ValueError)
