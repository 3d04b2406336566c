"""The low-level API: buffers, compiled operators, bindings at offsets, hazard rules, and guard
bytes around every output range (nothing outside a bound output range may change)."""
import numpy as np
import pytest

import dmlgpu
from dmlgpu import Binding, DataType, TensorDesc, ValidationError, testing
from dmlgpu.describe.operator_descs import DESC_CLASSES
from dmlgpu.table.operators import OPERATORS

GUARD = 0x5A


def guarded(device, nbytes, offset=64, after=64):
    """A buffer of guard bytes with room for `nbytes` at `offset`."""
    buffer = device.allocate(offset + nbytes + after)
    buffer.write(np.full(buffer.size_in_bytes, GUARD, np.uint8))
    return buffer


def assert_guards(buffer, start, end):
    data = buffer.read()
    assert (data[:start] == GUARD).all() and (data[end:] == GUARD).all(), "bytes outside the range changed"


def test_buffer_round_trip(device, rng):
    data = rng.integers(0, 256, 1000, dtype=np.uint8)
    buffer = device.upload(data[:999])
    assert buffer.size_in_bytes == 1000  # rounded up to 4 bytes, like every DirectML buffer
    buffer.write(data)
    assert (buffer.read() == data).all()
    buffer.write(np.array([1, 2, 3], np.uint8), offset=997)
    assert buffer.read(995).tolist() == [data[995], data[996], 1, 2, 3]
    assert (device.allocate(40).read() == 0).all()
    with pytest.raises(ValidationError):
        buffer.read(999, 2)
    with pytest.raises(ValidationError):
        buffer.write(np.zeros(2, np.uint8), offset=999)
    with pytest.raises(ValidationError):
        device.allocate(0)
    buffer.release()
    with pytest.raises(ValidationError):
        buffer.read()


@pytest.mark.parametrize("op, in_type, out_type", testing.all_cases(),
                         ids=[f"{op.short}-{i.name.lower()}-{o.name.lower()}" for op, i, o in testing.all_cases()])
@pytest.mark.parametrize("count", [1, 7, 33])
def test_execute_at_offsets_with_guard_bytes(device, rng, op, in_type, out_type, count):
    arrays = [testing.sample(in_type, (count,), rng) for _ in op.inputs]
    descs = [TensorDesc(in_type, [count]) for _ in op.inputs] + [TensorDesc(out_type, [count])]
    compiled = device.create_operator(DESC_CLASSES[op.name](*descs))
    # All inputs in one buffer at different 16-aligned offsets; output in a guarded buffer.
    source = device.allocate(48 + 512 * len(arrays))
    inputs = []
    for k, a in enumerate(arrays):
        source.write(a, offset=48 + 512 * k)
        inputs.append(Binding(source, 48 + 512 * k, descs[k].total_size))
    size = descs[-1].total_size
    out = guarded(device, size, offset=32)
    compiled.execute(inputs, [Binding(out, 32, size)])
    nbytes = count * out_type.size
    got = out.read(32, nbytes).view(out_type.numpy)
    assert testing.same_bits(got, testing.reference(op, arrays, out_type))
    assert_guards(out, 32, 32 + nbytes)  # the 4-byte-rounding padding keeps its bytes too


IN_PLACE_CASES = [(op, t) for op in OPERATORS if op.in_place for t in testing.one_type_per_width(
    op, (DataType.UINT8, DataType.INT16, DataType.FLOAT32, DataType.INT64))]


@pytest.mark.parametrize("op, data_type", IN_PLACE_CASES,
                         ids=[f"{op.short}-{t.name.lower()}" for op, t in IN_PLACE_CASES])
def test_in_place_binding(device, rng, op, data_type):
    arrays = [testing.sample(data_type, (37,), rng) for _ in op.inputs]
    desc = TensorDesc(data_type, [37])
    compiled = device.create_operator(DESC_CLASSES[op.name](*[desc] * (len(arrays) + 1)))
    buffers = [device.upload(a) for a in arrays]
    binding = Binding(buffers[0], 0, desc.total_size)
    compiled.execute([binding] + [Binding(b) for b in buffers[1:]], [binding])
    got = buffers[0].read(0, 37 * data_type.size).view(data_type.numpy)
    assert testing.same_bits(got, testing.reference(op, arrays, data_type))


def _not_u8(device, n=64):
    desc = TensorDesc(DataType.UINT8, [n])
    return device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc)), desc


def test_binding_rules(device):
    compiled, desc = _not_u8(device)
    buffer = device.allocate(256)
    other = device.allocate(256)
    cases = [
        (([Binding(buffer)], []), "outputs", "expected a list of 1"),
        (([], [Binding(buffer)]), "inputs", "expected a list of 1"),
        (([buffer], [Binding(other)]), "Binding", "dmlgpu.Binding"),
        (([Binding(buffer, 8)], [Binding(other)]), "Binding.Offset", "multiple of 16"),
        (([Binding(buffer, 16, 32)], [Binding(other)]), "Binding.SizeInBytes", "at least TotalTensorSizeInBytes (64)"),
        (([Binding(buffer, 224)], [Binding(other)]), "Binding.SizeInBytes", "within the buffer"),
        (([Binding(buffer, 0, 300)], [Binding(other)]), "Binding.SizeInBytes", "within the buffer"),
        (([Binding(buffer, 0, 64)], [Binding(buffer, 32, 64)]), "Binding", "identical range"),
        (([Binding("x")], [Binding(other)]), "Binding.Buffer", "live Buffer"),
    ]
    for (inputs, outputs), field, text in cases:
        with pytest.raises(ValidationError) as info:
            compiled.execute(inputs, outputs)
        assert info.value.field == field and text in str(info.value), str(info.value)
        assert info.value.operator == "DML_OPERATOR_ELEMENT_WISE_BIT_NOT"


def test_offset_alignment_follows_guaranteed_alignment(device):
    desc = TensorDesc(DataType.UINT32, [4], guaranteed_base_offset_alignment=64)
    compiled = device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, TensorDesc(DataType.UINT32, [4])))
    buffer = device.allocate(256)
    with pytest.raises(ValidationError, match="multiple of 64"):
        compiled.execute([Binding(buffer, 32, 16)], [Binding(buffer, 128, 16)])
    compiled.execute([Binding(buffer, 64, 16)], [Binding(buffer, 128, 16)])


def test_hazards(device, rng):
    desc = TensorDesc(DataType.UINT8, [64])
    count = device.create_operator(dmlgpu.ElementWiseBitCountOperatorDesc(desc, desc))
    buffer = device.upload(rng.integers(0, 256, 256, dtype=np.uint8))
    before = buffer.read()
    with pytest.raises(ValidationError, match="does not support in-place"):
        count.execute([Binding(buffer, 0, 64)], [Binding(buffer, 0, 64)])
    with pytest.raises(ValidationError, match="identical range"):
        count.execute([Binding(buffer, 0, 64)], [Binding(buffer, 48, 64)])
    assert (buffer.read() == before).all(), "a rejected execution wrote"
    count.execute([Binding(buffer, 0, 64)], [Binding(buffer, 64, 64)])  # adjacent: fine
    xor = device.create_operator(dmlgpu.ElementWiseBitXorOperatorDesc(desc, desc, desc))
    xor.execute([Binding(buffer, 0, 64), Binding(buffer, 32, 64)], [Binding(buffer, 128, 64)])  # inputs overlap
    # Same range but a different layout is not in-place execution: rejected.
    t = TensorDesc(DataType.UINT8, [8, 8], [1, 8])
    transposed = device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(t, TensorDesc(DataType.UINT8, [8, 8])))
    with pytest.raises(ValidationError, match="same strides"):
        transposed.execute([Binding(buffer, 0, 64)], [Binding(buffer, 0, 64)])


def test_foreign_device_buffer_rejected(device):
    compiled, _ = _not_u8(device)
    other_device = dmlgpu.Device(device.index, private=True)
    foreign = other_device.allocate(64)
    with pytest.raises(ValidationError, match="operator's device"):
        compiled.execute([Binding(foreign)], [Binding(device.allocate(64))])


def test_fresh_buffers_in_the_same_blocks_reuse_the_dispatch(device, rng):
    """Buffers made and released every call land in the same pool blocks: the operator's
    remembered dispatch serves them (rebound to the new buffers), results stay right, and a
    released buffer is still rejected though its block now holds another."""
    compiled, desc = _not_u8(device)
    device.synchronize()  # blocks freed by earlier work come back now, not between the calls
    checks = []
    check = compiled.check
    compiled.check = lambda *bindings: checks.append(1) or check(*bindings)
    for _ in range(3):
        data = rng.integers(0, 256, 64, dtype=np.uint8)
        source, out = device.upload(data), device.allocate(64)
        keys = (source.block_key, out.block_key)
        compiled.execute([Binding(source)], [Binding(out)])
        assert (out.read() == ~data).all()
        out.release()  # newest first, as the numpy front end frees: the next pair gets these blocks
        source.release()
    assert len(checks) == 1, "each call's fresh buffers were checked and prepared again"
    stale = device.upload(np.zeros(64, np.uint8))
    device.synchronize()  # its upload done: released now, not once the device is done with it
    stale.release()
    reused, out = device.allocate(64), device.allocate(64)
    assert (reused.block_key, out.block_key) == keys  # the pool hands the same blocks out again
    with pytest.raises(ValidationError, match="released buffer"):
        compiled.execute([Binding(stale)], [Binding(out)])
