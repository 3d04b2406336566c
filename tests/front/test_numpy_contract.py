"""The numpy contract at the edges: Python scalars (NEP 50), non-native byte order, ndarray
subclasses, `dtype=` against `out=`, `np.asarray(tensor)` and numpy's ufuncs on Tensors.
Generated from the operator table wherever a rule holds for every operator (binary operators:
`len(op.inputs) == 2`); outputs poisoned first, bit for bit against `dmlgpu.table.reference`."""
import operator

import numpy as np
import pytest

import dmlgpu
from dmlgpu import DataType, Tensor, ValidationError, testing
from dmlgpu.table.operators import OPERATORS

from conftest import poisoned

BINARY = [op for op in OPERATORS if len(op.inputs) == 2]
UNARY = [op for op in OPERATORS if len(op.inputs) == 1]
UFUNC_OPS = [op for op in OPERATORS if op.numpy_ufunc]
PYTHON_OPS = [op for op in OPERATORS if op.python_operator]
INTS = [t for t in DataType if t.bits >= 8 and not t.is_float]
FLOATS = [t for t in DataType if t.bits >= 8 and t.is_float]


def _ids(value):
    return getattr(value, "short", None) or getattr(value, "name", None) or str(value)


def _values(data_type):
    """Python scalars that fit `data_type`: its extremes, 0, 1 and -1 where signed, a bool."""
    if data_type.is_float:
        info = np.finfo(data_type.numpy)
        return [0, 1, -3, 1.5, -0.0, float("nan"), float("inf"), -float("inf"), float(info.max),
                2**10]
    info = np.iinfo(data_type.numpy)
    return [0, 1, int(info.max), int(info.min), True, False] + ([-1] if info.min else [])


def _out_of_range(data_type):
    """Python scalars that must be rejected with `data_type`."""
    if data_type.is_float:
        big = float(np.finfo(data_type.numpy).max)
        return [10**400, big * 4 if np.isfinite(big * 4) else 10**309, True]
    info = np.iinfo(data_type.numpy)
    return [int(info.max) + 1, int(info.min) - 1, 1.0, 1.5, float("nan")]


def _scalar_cases(values):
    for op in BINARY:
        for data_type in INTS + FLOATS:
            if data_type not in op.newest.input_types:
                continue
            for value in values(data_type):
                yield pytest.param(op, data_type, value, id=f"{op.short}-{data_type.name.lower()}-{value!r}")


@pytest.mark.parametrize("op, data_type, value", list(_scalar_cases(_values)))
@pytest.mark.parametrize("side", [0, 1], ids=["scalar-left", "scalar-right"])
def test_python_scalars_take_the_other_operand_s_type(rng, op, data_type, value, side):
    x = testing.sample(data_type, (3, 5), rng)
    operands = [value, x] if side == 0 else [x, value]
    expected = testing.reference(op, [np.array(v, data_type.numpy) if v is value else v for v in operands],
                                 data_type)
    got = testing.front_end(op, operands, data_type)
    assert testing.same_bits(got, expected)
    out = poisoned((3, 5), data_type.numpy)
    assert testing.front_end(op, operands, data_type, out=out) is out and testing.same_bits(out, expected)
    t = Tensor.from_numpy(x)
    tensor_operands = [value, t] if side == 0 else [t, value]
    got = testing.front_end(op, tensor_operands, data_type)
    assert isinstance(got, Tensor) and testing.same_bits(got.numpy(), expected)


@pytest.mark.parametrize("op, data_type, value", list(_scalar_cases(_out_of_range)))
def test_python_scalars_out_of_range_are_rejected_before_any_work(rng, op, data_type, value):
    x = testing.sample(data_type, (4,), rng)
    out = poisoned((4,), data_type.numpy)
    before = out.copy()
    for operands in ([x, value], [value, x]):
        with pytest.raises(ValidationError) as info:
            testing.front_end(op, operands, data_type, out=out)
        assert info.value.operator == op.dml_name and info.value.field == "value"
        assert data_type.name in str(info.value)
        assert testing.same_bits(out, before), "a rejected call wrote"
        t_out = Tensor.from_numpy(before)
        with pytest.raises(ValidationError):
            testing.front_end(op, [Tensor.from_numpy(x) if o is x else o for o in operands], data_type,
                              out=t_out)
        assert testing.same_bits(t_out.numpy(), before)


def test_scalar_messages_say_what_is_allowed():
    x = np.zeros(3, np.uint8)
    with pytest.raises(ValidationError, match=r"BTensor.value is 300; allowed: a Python int from 0 to 255 \(UINT8"):
        dmlgpu.bit_xor(x, 300)
    with pytest.raises(ValidationError, match=r"ATensor.value is -1; allowed: a Python int from 0 to 255"):
        dmlgpu.bit_xor(-1, x)
    with pytest.raises(ValidationError, match=r"BTensor.value is 1.5; allowed: a Python int; a float only"):
        dmlgpu.bit_xor(x, 1.5)
    with pytest.raises(ValidationError, match="a bool only with an integer data type"):
        dmlgpu.bit_xor(np.zeros(3, np.float32), True)
    with pytest.raises(ValidationError, match=r"within \+/-65504"):
        dmlgpu.bit_xor(np.zeros(3, np.float16), 70000)


@pytest.mark.parametrize("op", BINARY, ids=_ids)
def test_two_python_scalars_are_rejected(op):
    for a, b in ((1, 2), (1.5, 2), (True, 0)):
        with pytest.raises(ValidationError, match="takes its data type from an array or Tensor operand"):
            getattr(dmlgpu, op.short)(a, b)


@pytest.mark.parametrize("op", UNARY, ids=_ids)
def test_unary_operators_take_no_python_scalar(op):
    with pytest.raises(ValidationError, match=r"InputTensor.type is 'int'"):
        getattr(dmlgpu, op.short)(5)


@pytest.mark.parametrize("op", BINARY, ids=_ids)
def test_numpy_scalars_keep_their_own_type(op):
    x = np.zeros(3, np.uint8)
    with pytest.raises(ValidationError, match="BTensor.DataType is UINT16"):
        getattr(dmlgpu, op.short)(x, np.uint16(1))


def test_scalar_with_an_unsupported_array_names_the_array():
    with pytest.raises(ValidationError, match=r"ATensor.dtype is dtype\('bool'\)"):
        dmlgpu.bit_xor(np.array([True]), 1)


@pytest.mark.parametrize("op", PYTHON_OPS, ids=_ids)
def test_python_operators_take_scalars_on_either_side(rng, op):
    data_type = DataType.UINT16
    x = testing.sample(data_type, (2, 3), rng)
    t = Tensor.from_numpy(x)
    function = getattr(operator, f"__{op.python_operator}__")
    if len(op.inputs) == 1:
        assert testing.same_bits(function(t).numpy(), testing.reference(op, [x], data_type))
        return
    seven = np.array(7, data_type.numpy)
    assert testing.same_bits(function(t, 7).numpy(), testing.reference(op, [x, seven], data_type))
    assert testing.same_bits(function(7, t).numpy(), testing.reference(op, [seven, x], data_type))
    in_place = getattr(operator, f"__i{op.python_operator}__")
    buffer = t.buffer
    t = in_place(t, 7)
    assert t.buffer is buffer and testing.same_bits(t.numpy(), testing.reference(op, [x, seven], data_type))
    with pytest.raises(ValidationError, match="from 0 to 65535"):
        function(t, 1 << 16)


# -- byte order -------------------------------------------------------------------------------
def _byte_order_cases():
    for op, in_type, out_type in testing.all_cases():
        if in_type.size > 1:
            yield pytest.param(op, in_type, out_type, id=f"{op.short}-{in_type.name.lower()}-{out_type.name.lower()}")


@pytest.mark.parametrize("op, in_type, out_type", list(_byte_order_cases()))
def test_non_native_byte_order_keeps_values(rng, op, in_type, out_type):
    natives = [testing.sample(in_type, (4, 6), rng) for _ in op.inputs]
    swapped = [a.astype(a.dtype.newbyteorder(">")) for a in natives]
    expected = testing.reference(op, natives, out_type)
    got = testing.front_end(op, swapped, out_type)
    assert got.dtype.isnative and testing.same_bits(got, expected)
    if out_type.size > 1:  # out in big-endian order: written by value, as numpy
        out = poisoned((4, 6), out_type.numpy.newbyteorder(">"))
        assert testing.front_end(op, swapped, out_type, out=out) is out
        assert testing.same_bits(out.astype(out_type.numpy), expected)
    tensors = [Tensor.from_numpy(a) for a in swapped]
    assert all(t.dtype.isnative for t in tensors)
    assert testing.same_bits(testing.front_end(op, tensors, out_type).numpy(), expected)
    assert testing.same_bits(testing.front_end(op, [tensors[0]] + swapped[1:], out_type).numpy(), expected)


def test_non_native_in_place_and_dtype_arguments(rng):
    x = testing.sample(DataType.UINT32, (5,), rng).astype(">u4")
    expected = testing.reference(OPERATORS[0], [x.astype("<u4")], DataType.UINT32)
    assert dmlgpu.bit_not(x, out=x) is x and x.dtype == ">u4" and testing.same_bits(x.astype("<u4"), expected)
    counted = dmlgpu.bit_count(x, dtype=">u4")
    assert counted.dtype == np.uint32
    assert Tensor.empty((2,), ">i2").dtype == np.int16


# -- ndarray subclasses -----------------------------------------------------------------------
SUBCLASSES = {
    "MaskedArray": lambda a: np.ma.masked_array(a, mask=np.arange(a.size).reshape(a.shape) % 2 == 0),
    "matrix": lambda a: np.asmatrix(a.reshape(a.shape[0], -1)),
}


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("kind", SUBCLASSES)
@pytest.mark.parametrize("op", OPERATORS, ids=_ids)
def test_subclasses_that_would_lose_their_meaning_are_rejected(rng, op, kind):
    in_type, out_type = testing.case_types(op)[0]
    plain = [testing.sample(in_type, (2, 3), rng) for _ in op.inputs]
    for k in range(len(op.inputs)):
        arrays = list(plain)
        arrays[k] = SUBCLASSES[kind](plain[k])
        with pytest.raises(ValidationError, match=f"{op.inputs[k]}.type is '{kind}'") as info:
            testing.front_end(op, arrays, out_type)
        assert "np.asarray" in info.value.allowed
    out = SUBCLASSES[kind](poisoned((2, 3), out_type.numpy))
    before = np.asarray(out).copy()
    with pytest.raises(ValidationError, match=f"OutputTensor.out is '{kind}'"):
        testing.front_end(op, plain, out_type, out=out)
    assert testing.same_bits(np.asarray(out), before)
    with pytest.raises(ValidationError, match=f"array is '{kind}'"):
        Tensor.from_numpy(SUBCLASSES[kind](plain[0]))


def test_memmap_is_a_plain_array(tmp_path, rng):
    data = testing.sample(DataType.UINT16, (64,), rng)
    mapped = np.memmap(tmp_path / "data.bin", dtype=np.uint16, mode="w+", shape=(64,))
    mapped[:] = data
    assert testing.same_bits(np.asarray(dmlgpu.bit_not(mapped)), testing.reference(OPERATORS[0], [data], DataType.UINT16))
    dmlgpu.bit_not(mapped, out=mapped)
    mapped.flush()
    assert testing.same_bits(np.fromfile(tmp_path / "data.bin", np.uint16), ~data)


# -- dtype= against out= ----------------------------------------------------------------------
@pytest.mark.parametrize("op", [op for op in OPERATORS if not op.same_type], ids=_ids)
def test_dtype_that_conflicts_with_out_is_rejected(rng, op):
    in_type = op.newest.input_types[0]
    x = testing.sample(in_type, (2, 3), rng)
    first, second = op.newest.output_types[:2]
    out = poisoned((2, 3), first.numpy)
    before = out.copy()
    for dtype in (second.numpy, np.dtype(second.numpy), second.numpy.name):
        with pytest.raises(ValidationError, match="out.dtype") as info:
            getattr(dmlgpu, op.short)(x, out=out, dtype=dtype)
        assert info.value.operator == op.dml_name
        assert testing.same_bits(out, before)
        with pytest.raises(ValidationError, match=f"data type {second.name}"):
            getattr(dmlgpu, op.short)(Tensor.from_numpy(x), out=Tensor.empty((2, 3), first.numpy), dtype=dtype)
    for given in (Tensor.empty((2, 3), first.numpy), poisoned((2, 3), first.numpy)):
        got = getattr(dmlgpu, op.short)(x, out=given)  # dtype left out: out's decides
        assert got is given
        got = getattr(dmlgpu, op.short)(x, out=given, dtype=first.numpy)  # agreeing: fine
        result = got.numpy() if isinstance(got, Tensor) else got
        assert testing.same_bits(result, testing.reference(op, [x], first))


# -- np.asarray and numpy's ufuncs on Tensors -------------------------------------------------
def test_asarray_of_a_tensor_raises_and_points_to_numpy():
    t = Tensor.from_numpy(np.arange(4, dtype=np.uint8))
    for convert in (np.asarray, np.array, lambda t: np.sum(t), lambda t: np.concatenate([t, t])):
        with pytest.raises(TypeError, match=r"\.numpy\(\)"):
            convert(t)


def _ufunc_cases():
    for op in UFUNC_OPS:
        for data_type in (DataType.UINT8, DataType.INT64, DataType.FLOAT32, DataType.UINT64):
            if data_type in op.newest.input_types:
                yield pytest.param(op, data_type, id=f"{op.short}-{data_type.name.lower()}")


@pytest.mark.parametrize("op, data_type", list(_ufunc_cases()))
def test_numpy_ufuncs_dispatch_through_the_table(rng, op, data_type):
    ufunc = getattr(np, op.numpy_ufunc)
    arrays = [testing.sample(data_type, (3, 4), rng) for _ in op.inputs]
    tensors = [Tensor.from_numpy(a) for a in arrays]
    expected = testing.reference(op, arrays, data_type)
    got = ufunc(*tensors)
    assert isinstance(got, Tensor) and testing.same_bits(got.numpy(), expected)
    mixed = [arrays[0]] + tensors[1:] if len(arrays) > 1 else tensors
    assert testing.same_bits(ufunc(*mixed).numpy(), expected)  # ndarray first: numpy defers to Tensor
    out = Tensor.from_numpy(poisoned((3, 4), data_type.numpy))
    assert ufunc(*tensors, out=out) is out and testing.same_bits(out.numpy(), expected)
    assert ufunc(*tensors, out=(out,)) is out
    with pytest.raises(TypeError, match="where"):
        ufunc(*tensors, where=True)
    if len(op.inputs) == 2:
        with pytest.raises(TypeError, match="reduce is not supported"):
            ufunc.reduce(tensors[0])
        assert testing.same_bits(ufunc(tensors[0], 3).numpy(),
                                 testing.reference(op, [arrays[0], np.array(3, data_type.numpy)], data_type))


def test_other_ufuncs_raise_type_error():
    t = Tensor.from_numpy(np.arange(4, dtype=np.uint8))
    names = ", ".join("numpy." + op.numpy_ufunc for op in UFUNC_OPS)
    for call in (lambda: np.add(t, t), lambda: np.sign(t), lambda: np.arange(4, dtype=np.uint8) + t):
        with pytest.raises(TypeError, match="has no dmlgpu operator") as info:
            call()
        assert names in str(info.value)
