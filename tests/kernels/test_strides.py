"""Strided tensors through the low-level API: broadcast (zero strides) on one or both inputs,
padded rows, permuted (NHWC) layouts, and strided outputs of every width, whose gaps must keep
their bytes even where neighbouring elements share a 32-bit word."""
import numpy as np
import pytest

from dmlgpu import Binding, DataType, TensorDesc, ValidationError, testing
from dmlgpu.describe.operator_descs import DESC_CLASSES
from dmlgpu.table.operators import OPERATORS
from dmlgpu.describe.tensor_desc import calc_buffer_tensor_size

from test_bindings import GUARD, assert_guards, guarded

SIZES = (2, 3, 5)
PATTERNS = {  # name -> strides (None = packed) for an input of SIZES
    "packed": None,
    "broadcast-rows": (0, 5, 1),
    "broadcast-all": (0, 0, 0),
    "padded": (24, 8, 1),
    "permuted": (1, 10, 2),      # sizes in NCW order, memory in NWC order
    "column": (15, 1, 3),
}
OUT_PATTERNS = {"packed": None, "padded": (40, 11, 2), "permuted": (1, 2, 6)}


def gather(data_type, raw, sizes, strides):
    """Logical elements of a strided tensor over raw bits (numpy's view of DirectML strides)."""
    flat = raw.view(data_type.numpy)
    strides = strides or tuple(int(np.prod(sizes[i + 1:])) for i in range(len(sizes)))
    return np.lib.stride_tricks.as_strided(flat, sizes, [s * flat.itemsize for s in strides]).copy()


def run(device, rng, op, in_type, out_type, in_patterns, out_strides):
    descs, inputs, logical = [], [], []
    for k, name in enumerate(in_patterns):
        strides = PATTERNS[name]
        desc = TensorDesc(in_type, SIZES, strides)
        raw = testing.sample(in_type, (desc.total_size // in_type.size,), rng)
        buffer = device.upload(raw)
        descs.append(desc)
        inputs.append(Binding(buffer, 0, desc.total_size))
        logical.append(gather(in_type, raw, SIZES, strides))
    out_desc = TensorDesc(out_type, SIZES, out_strides)
    total = out_desc.total_size
    out = guarded(device, total, offset=16)
    compiled = device.create_operator(DESC_CLASSES[op.name](*descs, out_desc))
    compiled.execute(inputs, [Binding(out, 16, total)])
    raw_out = out.read(16, total)
    got = gather(out_type, raw_out, SIZES, out_strides)
    assert testing.same_bits(got, testing.reference(op, logical, out_type))
    # Bytes of the output range that hold no element keep the guard value.
    written = np.zeros(total, bool)
    offsets = np.lib.stride_tricks.as_strided(
        np.arange(total, dtype=np.int64), SIZES,
        [s * 8 for s in (out_strides or (15, 5, 1))]).reshape(-1) * out_type.size
    for o in offsets:
        written[o:o + out_type.size] = True
    assert (raw_out[~written] == GUARD).all(), "a gap byte between output elements changed"
    assert_guards(out, 16, 16 + total)
    return compiled


CASES = [(op, i, o) for op, i, o in testing.all_cases() if i in testing.one_type_per_width(
    op, (DataType.UINT8, DataType.INT16, DataType.FLOAT32, DataType.UINT64))]


@pytest.mark.parametrize("op, in_type, out_type", CASES,
                         ids=[f"{op.short}-{i.name.lower()}-{o.name.lower()}" for op, i, o in CASES])
@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_strided_inputs(device, rng, op, in_type, out_type, pattern):
    patterns = [pattern] + ["padded"] * (len(op.inputs) - 1)
    compiled = run(device, rng, op, in_type, out_type, patterns, None)
    if pattern != "packed":
        assert compiled.layout == "gather"  # packed output, strided inputs


@pytest.mark.parametrize("op, in_type, out_type", CASES,
                         ids=[f"{op.short}-{i.name.lower()}-{o.name.lower()}" for op, i, o in CASES])
@pytest.mark.parametrize("out_pattern", list(OUT_PATTERNS))
def test_strided_outputs(device, rng, op, in_type, out_type, out_pattern):
    compiled = run(device, rng, op, in_type, out_type, ["packed"] * len(op.inputs), OUT_PATTERNS[out_pattern])
    assert compiled.layout == ("flat" if out_pattern == "packed" else "strided")


BINARY = [op for op in OPERATORS if len(op.inputs) == 2]


@pytest.mark.parametrize("op", BINARY, ids=lambda op: op.short)
@pytest.mark.parametrize("in_type", [DataType.UINT8, DataType.UINT16])
def test_broadcast_both_inputs(device, rng, op, in_type):
    run(device, rng, op, in_type, in_type, ["broadcast-rows", "broadcast-all"], OUT_PATTERNS["padded"])


def test_total_size_larger_than_minimum(device, rng):
    desc = TensorDesc(DataType.UINT8, [5], total_tensor_size_in_bytes=64)
    assert calc_buffer_tensor_size(DataType.UINT8, [5]) == 8
    compiled = device.create_operator(DESC_CLASSES["ELEMENT_WISE_BIT_NOT"](desc, desc))
    src = device.upload(np.arange(64, dtype=np.uint8))
    out = guarded(device, 64, offset=0, after=16)
    with pytest.raises(ValidationError):
        compiled.execute([Binding(src, 0, 32)], [Binding(out, 0, 64)])  # range smaller than 64
    compiled.execute([Binding(src, 0, 64)], [Binding(out, 0, 64)])
    assert out.read(0, 5).tolist() == [255, 254, 253, 252, 251]
    assert (out.read(5, 64 + 16 - 5) == GUARD).all()


ROW_CASES = [(op, i, o) for op, i, o in testing.all_cases() if o in (i, DataType.UINT8, DataType.UINT32)]


@pytest.mark.parametrize("op, in_type, out_type", ROW_CASES,
                         ids=[f"{op.short}-{i.name.lower()}-{o.name.lower()}" for op, i, o in ROW_CASES])
@pytest.mark.parametrize("pattern", ["padded-rows", "broadcast-row", "broadcast-plane"])
def test_rows_layout(device, rng, op, in_type, out_type, pattern):
    """Rows of whole 16-byte units: padded rows and broadcast rows stay on 16-byte vectors."""
    row = 16 * max(1, 4 // min(in_type.size, out_type.size))  # a row is whole 16-byte units in and out
    sizes = (3, 2, row)
    patterns = {"padded-rows": (4 * row, 2 * row, 1), "broadcast-row": (0, 0, 1),
                "broadcast-plane": (0, row + 16 // in_type.size * 2, 1)}
    descs, inputs, logical = [], [], []
    for k in range(len(op.inputs)):
        strides = patterns[pattern] if k == len(op.inputs) - 1 else None
        desc = TensorDesc(in_type, sizes, strides)
        raw = testing.sample(in_type, (desc.total_size // in_type.size,), rng)
        inputs.append(Binding(device.upload(raw), 0, desc.total_size))
        descs.append(desc)
        logical.append(gather(in_type, raw, sizes, strides))
    out_desc = TensorDesc(out_type, sizes)
    out = guarded(device, out_desc.total_size, offset=32)
    compiled = device.create_operator(DESC_CLASSES[op.name](*descs, out_desc))
    fits = all(s * in_type.size % 16 == 0 for s in patterns[pattern][:-1])
    assert compiled.layout == ("rows" if fits else "gather")
    compiled.execute(inputs, [Binding(out, 32, out_desc.total_size)])
    got = out.read(32, out_desc.total_size).view(out_type.numpy).reshape(sizes)
    assert testing.same_bits(got, testing.reference(op, logical, out_type))
    assert_guards(out, 32, 32 + out_desc.total_size)
