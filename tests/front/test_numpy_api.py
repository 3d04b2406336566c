"""The numpy front end's contract: argument checking (before any work), broadcasting, views,
`out` handling, dimension fitting per feature level, and work split to fit device limits."""
import numpy as np
import pytest

import dmlgpu
from dmlgpu import DataType, FeatureLevel, ValidationError, testing
from dmlgpu.table import reference
from dmlgpu.front.numpy_api import FUNCTIONS
from dmlgpu.table.operators import OPERATORS
from dmlgpu.table.reference import REFERENCES

from conftest import poisoned


def test_results_and_scalars():
    assert dmlgpu.bit_not(np.uint8(5)) == 250 and isinstance(dmlgpu.bit_not(np.uint8(5)), np.uint8)
    zero_d = np.array(7, np.int16)
    assert isinstance(dmlgpu.sign(zero_d), np.int16)
    out = np.empty((), np.int16)
    assert dmlgpu.sign(zero_d, out) is out and out == 1


@pytest.mark.parametrize("bad, text", [
    ([1, 2, 3], "InputTensor.type is 'list'"),
    (np.array([True]), "InputTensor.dtype is dtype('bool')"),
    (np.array([1j]), "InputTensor.dtype"),
    (np.array(["a"]), "InputTensor.dtype"),
    (np.array([1], dtype=object), "InputTensor.dtype"),
])
def test_unsupported_inputs(bad, text):
    with pytest.raises(ValidationError) as info:
        dmlgpu.bit_not(bad)
    assert text in str(info.value)


def test_levels_bend_shapes_never_types():
    x = np.array([-2.0, 0.0, 3.0], np.float32)
    assert dmlgpu.sign(x, feature_level=FeatureLevel.LEVEL_2_0).tolist() == [-1, 0, 1]  # 4-D inside
    with pytest.raises(ValidationError, match="DataType is INT8; allowed at DML_FEATURE_LEVEL_2_0"):
        dmlgpu.sign(np.array([1], np.int8), feature_level=FeatureLevel.LEVEL_2_0)
    with pytest.raises(ValidationError, match="introduced in DML_FEATURE_LEVEL_3_0"):
        dmlgpu.bit_not(np.array([1], np.uint8), feature_level=FeatureLevel.LEVEL_2_1)
    with pytest.raises(ValidationError, match="allowed at DML_FEATURE_LEVEL_3_0: UINT32, UINT16, UINT8"):
        dmlgpu.bit_xor(np.array([1], np.int32), np.array([1], np.int32), feature_level=0x3000)
    for level in FeatureLevel:
        with pytest.raises(ValidationError):
            dmlgpu.sign(np.array([1.0]), feature_level=level)  # FLOAT64 SIGN never exists
    with pytest.raises(ValidationError, match="feature_level"):
        dmlgpu.bit_not(np.array([1], np.uint8), feature_level="6_4")


def test_out_rules():
    x = np.arange(6, dtype=np.uint8).reshape(2, 3)
    with pytest.raises(ValidationError, match=r"out.dtype is dtype\('uint16'\)"):
        dmlgpu.bit_not(x, np.empty((2, 3), np.uint16))
    with pytest.raises(ValidationError, match=r"out.shape is \(3, 2\)"):
        dmlgpu.bit_not(x, np.empty((3, 2), np.uint8))
    with pytest.raises(ValidationError, match="out is 'list'"):
        dmlgpu.bit_not(x, [0] * 6)
    frozen = np.empty((2, 3), np.uint8)
    frozen.flags.writeable = False
    with pytest.raises(ValidationError, match="read-only"):
        dmlgpu.bit_not(x, frozen)
    big = np.arange(12, dtype=np.uint8)
    before = big.copy()
    with pytest.raises(ValidationError, match="partially overlapping"):
        dmlgpu.bit_not(big[:6], out=big[3:9])
    assert (big == before).all(), "a rejected call wrote"
    with pytest.raises(ValidationError, match="does not support in-place"):
        dmlgpu.bit_count(x, out=x)
    with pytest.raises(ValidationError, match="OutputTensor.DataType is UINT16; allowed: UINT32, UINT8"):
        dmlgpu.bit_count(x, out=np.empty((2, 3), np.uint16))
    with pytest.raises(ValidationError, match="out.dtype is dtype\\('uint32'\\); allowed: uint8"):
        dmlgpu.bit_count(x, out=np.empty((2, 3), np.uint32), dtype=np.dtype(np.uint8))
    counted = dmlgpu.bit_count(x, out=np.empty((2, 3), np.uint32))  # out.dtype decides
    assert counted.dtype == np.uint32 and counted.tolist() == [[0, 1, 1], [2, 1, 2]]
    with pytest.raises(ValidationError, match="OutputTensor.DataType is INT32"):
        dmlgpu.bit_count(x, dtype=np.int32)


BINARY = [op for op in OPERATORS if len(op.inputs) == 2]


@pytest.mark.parametrize("op", BINARY, ids=lambda op: op.short)
def test_binary_rules(op):
    a = np.zeros(3, np.uint8)
    with pytest.raises(ValidationError, match="BTensor.DataType is UINT16; must equal ATensor.DataType"):
        FUNCTIONS[op.short](a, np.zeros(3, np.uint16))
    with pytest.raises(ValidationError, match=r"BTensor.shape is \(4,\); must broadcast"):
        FUNCTIONS[op.short](a, np.zeros(4, np.uint8))


BROADCAST_CASES = [(op, t) for op in BINARY for t in testing.one_type_per_width(
    op, (DataType.UINT8, DataType.INT16, DataType.UINT64), widths=(8, 16, 64))]


@pytest.mark.parametrize("a_shape, b_shape", [
    ((3, 4, 5), (5,)), ((3, 4, 5, 6), (4, 5, 6)), ((1, 5), (4, 1)), ((2, 1, 3), (1, 4, 1)), ((), (4,)),
])
@pytest.mark.parametrize("op, data_type", BROADCAST_CASES,
                         ids=[f"{op.short}-{t.name.lower()}" for op, t in BROADCAST_CASES])
def test_broadcasting(rng, op, data_type, a_shape, b_shape):
    a, b = testing.sample(data_type, a_shape, rng), testing.sample(data_type, b_shape, rng)
    function, expected = FUNCTIONS[op.short], REFERENCES[op.short]
    assert testing.same_bits(function(a, b), expected(a, b))
    assert testing.same_bits(function(b, a), expected(b, a))


@pytest.mark.parametrize("op", BINARY, ids=lambda op: op.short)
def test_in_place_with_broadcast_operand(rng, op):
    a = testing.sample(DataType.UINT32, (4, 5), rng)
    b = testing.sample(DataType.UINT32, (5,), rng)
    expected = REFERENCES[op.short](a, b)
    assert FUNCTIONS[op.short](a, b, out=a) is a and testing.same_bits(a, expected)


VIEWS = {
    "slice": lambda x: x[1:, ::2],
    "transpose": lambda x: x.T,
    "reversed": lambda x: x[::-1],
    "column": lambda x: x[:, 3],
    "broadcast_to": lambda x: np.broadcast_to(x[:1], x.shape),
    "sparse": lambda x: x[::7, ::5],
}


@pytest.mark.parametrize("view", VIEWS, ids=list(VIEWS))
@pytest.mark.parametrize("op, in_type, out_type", [(op, i, o) for op, i, o in testing.all_cases()
                                                   if i in testing.one_type_per_width(
                                                       op, (DataType.UINT8, DataType.FLOAT16, DataType.INT64),
                                                       widths=(8, 16, 64))],
                         ids=lambda c: getattr(c, "short", getattr(c, "name", str(c))).lower())
def test_views_as_inputs_and_out(rng, view, op, in_type, out_type):
    bases = [testing.sample(in_type, (9, 10), rng) for _ in op.inputs]
    arrays = [VIEWS[view](b) for b in bases]
    expected = testing.reference(op, arrays, out_type)
    assert testing.same_bits(testing.front_end(op, arrays, out_type), expected)
    out_base = poisoned((10, 9) if view == "transpose" else (9, 10), out_type.numpy)
    out = VIEWS[view if view not in ("broadcast_to",) else "slice"](out_base)
    if out.shape == expected.shape:
        before = out_base.copy()
        testing.front_end(op, arrays, out_type, out=out)
        assert testing.same_bits(out, expected)
        untouched = np.ones(out_base.shape, bool)
        VIEWS[view if view != "broadcast_to" else "slice"](untouched)[...] = False
        assert testing.same_bits(out_base[untouched], before[untouched]), "bytes outside out changed"


def test_in_place_on_a_view(rng):
    base = testing.sample(DataType.INT8, (6, 8), rng)
    view = base[:, 1::2]
    expected, rest = reference.sign(view), base[:, ::2].copy()
    assert dmlgpu.sign(view, out=view) is view
    assert testing.same_bits(view, expected) and testing.same_bits(base[:, ::2], rest)


def test_more_than_eight_dimensions(rng):
    x = testing.sample(DataType.UINT16, (2,) * 12, rng)
    assert testing.same_bits(dmlgpu.bit_not(x), reference.bit_not(x))
    a = testing.sample(DataType.UINT8, (2, 1) * 5, rng)
    b = testing.sample(DataType.UINT8, (1, 2) * 5, rng)  # broadcasts in 10 dims that cannot merge
    with pytest.raises(ValidationError, match="DimensionCount is 10; allowed: 8 after merging"):
        dmlgpu.bit_xor(a, b)


def test_element_count_limit_is_directml_s():
    a = np.zeros(1, np.uint8)
    huge = np.broadcast_to(np.zeros(1, np.uint8), (2**16, 2**16))  # 2^32 elements, no memory
    with pytest.raises(ValidationError, match="at most 2\\^32-1 elements"):
        dmlgpu.bit_xor(a, huge)


@pytest.mark.parametrize("limit", [16, 48, 4096])
def test_work_is_split_to_fit_buffer_limits(device, monkeypatch, rng, limit):
    """Device limits shrunk so that every splitting path runs on small arrays."""
    monkeypatch.setattr(device, "max_buffer_size", limit)
    x = testing.sample(DataType.UINT64, (5, 3, 7), rng)
    assert testing.same_bits(dmlgpu.bit_count(x), reference.bit_count(x))
    a = testing.sample(DataType.INT16, (6, 1, 33), rng)
    b = testing.sample(DataType.INT16, (4, 1), rng)
    assert testing.same_bits(dmlgpu.bit_xor(a, b), reference.bit_xor(a, b))
    t = testing.sample(DataType.FLOAT32, (40, 30), rng).T
    assert testing.same_bits(dmlgpu.sign(t), reference.sign(t))
    y = testing.sample(DataType.UINT8, (1000,), rng)
    expected = reference.bit_not(y)
    assert dmlgpu.bit_not(y, out=y) is y and testing.same_bits(y, expected)


def test_more_workgroups_than_one_dispatch_dimension_allows(device, rng):
    """A strided operator over 2^25 elements: over 65535 workgroups of 256 invocations."""
    a = testing.sample(DataType.UINT8, (2**13, 2**12), rng)
    b = testing.sample(DataType.UINT8, (2**12,), rng)
    assert testing.same_bits(dmlgpu.bit_xor(a, b), reference.bit_xor(a, b))


def test_tensor_larger_than_max_storage_buffer_range(device, rng):
    n = device.max_buffer_size + 4096 + 3
    if n > 600 * 2**20:
        pytest.skip(f"{device.name}'s buffers hold {device.max_buffer_size} bytes; too big for CI")
    x = np.frombuffer(rng.bytes(n), np.uint8)
    got = dmlgpu.bit_not(x)
    assert (got == ~x).all()


@pytest.mark.gpu
def test_two_gigaelements_and_more_than_four_gib_on_a_gpu(device, rng):
    """2^31 UINT8 elements, and an INT32 tensor over 4 GiB (more than the H200's 4 GiB
    maxStorageBufferRange, so the work is split): both bit for bit against the reference."""
    if device.is_cpu:
        pytest.skip("needs a GPU (CI's lavapipe holds 128 MiB per buffer; the split is tested above)")
    x = np.frombuffer(rng.bytes(2**31), np.uint8)
    assert (dmlgpu.bit_not(x) == ~x).all()
    del x
    y = np.frombuffer(rng.bytes(2**32 + 4096), np.int32)
    assert testing.same_bits(dmlgpu.sign(y), reference.sign(y))


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.short)
def test_repeated_calls_skip_validation_and_stay_right(monkeypatch, rng, op):
    """A call on numpy arrays of an earlier call's dtypes and shapes is not validated again
    (the first call's operator serves it), with new data each time, with and without `out`;
    what the memo cannot vouch for (`out` read-only, overlapping or in place) still meets the
    full checks."""
    function = FUNCTIONS[op.short]
    data_type = op.newest.input_types[0]
    shape = (3, 5, 7)

    def operands():
        return [testing.sample(data_type, shape, rng) for _ in op.inputs]

    out_type = op.default_output.numpy if not op.same_type else data_type.numpy
    first = operands()
    function(*first)
    function(*first, out=poisoned(shape, out_type))
    from dmlgpu.front import host_front as front_end
    monkeypatch.setattr(front_end, "resolve_feature_level",
                        lambda *args: pytest.fail("a repeated call was validated again"))
    for _ in range(2):
        arrays = operands()
        expected = REFERENCES[op.short](*arrays)
        assert testing.same_bits(function(*arrays), expected)
        out = poisoned(shape, out_type)
        assert function(*arrays, out=out) is out and testing.same_bits(out, expected)
    monkeypatch.undo()
    arrays = operands()
    frozen = poisoned(shape, out_type)
    frozen.flags.writeable = False
    with pytest.raises(ValidationError, match="read-only"):
        function(*arrays, out=frozen)
    if out_type == arrays[0].dtype:
        expected = REFERENCES[op.short](*arrays)
        if op.in_place:
            assert function(*arrays, out=arrays[0]) is arrays[0] and testing.same_bits(arrays[0], expected)
        else:
            with pytest.raises(ValidationError, match="does not support in-place"):
                function(*arrays, out=arrays[0])
