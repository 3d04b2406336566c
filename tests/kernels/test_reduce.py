"""REDUCE, generated from its row: every (function, input type, output type) dmlgpu computes at the
newest level (floats included), over several axis sets and layouts, bit for bit against
dmlgpu.table.reference.reduce (floats: the exact result rounded once), outputs poisoned first;
walks long enough for two dispatches; the same bits on every run; IEEE's special values; the front
end against numpy where their meanings agree; validation. (Accuracy against numpy's own float32
results over sizes up to 10^7: test_reduce_accuracy.py.)"""
import math

import numpy as np
import pytest
from conftest import POISON

import dmlgpu
from dmlgpu import Binding, DataType, FeatureLevel, TensorDesc, ValidationError, testing
from dmlgpu.describe.operator_descs import ReduceOperatorDesc
from dmlgpu.kernels import compiled_selection
from dmlgpu.table.operators import REDUCE, ReduceFunction
from dmlgpu.table.reference import order_key, reduce as reference_reduce

F = ReduceFunction
CASES = REDUCE.computed_cases()
AXES = [((2, 3, 5), (0, 2)), ((4, 7), (1,)), ((3, 1, 4, 2), (0, 1, 2, 3)), ((5,), (0,)), ((2, 3, 2, 3), (1, 3))]


def _id(case):
    function, in_type, out_type = case
    return f"{function.name.lower()}-{in_type.name.lower()}-{out_type.name.lower()}"


def _run(device, x, function, axes, out_type, in_strides=None, source=None):
    """Execute REDUCE on `x` (or on `source`'s bytes viewed through `in_strides`), output poisoned."""
    data_type = DataType.from_numpy(x.dtype)
    out_shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    in_desc = TensorDesc(data_type, x.shape, in_strides)
    out_desc = TensorDesc(out_type, out_shape)
    op = device.create_operator(ReduceOperatorDesc(in_desc, out_desc, function, axes))
    in_buffer = device.upload(x if source is None else source)
    nbytes = out_desc.total_size
    out_buffer = device.upload(np.full(nbytes, POISON, np.uint8))
    op.execute([Binding(in_buffer)], [Binding(out_buffer)])
    count = int(np.prod(out_shape))
    return out_buffer.read()[:count * out_type.size].view(out_type.numpy).reshape(out_shape)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_matches_reference(device, case, rng):
    function, in_type, out_type = case
    for shape, axes in AXES[:3] if in_type.bits >= 32 else AXES[:2]:
        x = testing.sample(in_type, shape, rng)
        got = _run(device, x, function, axes, out_type)
        expected = reference_reduce(x, function, axes, out_type.numpy)
        assert testing.same_bits(got, expected), (shape, axes)


@pytest.mark.parametrize("function", [F.SUM, F.MIN, F.ARGMAX, F.MULTIPLY, F.L1, F.SUM_SQUARE])
def test_strided_and_broadcast_input(device, function, rng):
    base = rng.integers(-50, 50, size=(6, 8)).astype(np.int32)
    x = np.lib.stride_tricks.as_strided(base, (3, 4, 2), (2 * 8 * 4, 4 * 2, 0))  # rows 0,2,4; cols even; broadcast
    out_type = DataType.UINT32 if function in REDUCE.index_functions else DataType.INT32
    got = _run(device, np.ascontiguousarray(x), function, (1, 2), out_type, in_strides=(16, 2, 0), source=base)
    assert testing.same_bits(got, reference_reduce(np.ascontiguousarray(x), function, (1, 2), out_type.numpy))


def test_first_index_of_ties_and_wrapping_sums(device):
    x = np.array([[3, 7, 7, 1, 1, 7]], np.uint32)
    assert _run(device, x, F.ARGMAX, (1,), DataType.UINT32).item() == 1
    assert _run(device, x, F.ARGMIN, (1,), DataType.UINT64).item() == 3
    big = np.array([[0xFFFFFFFF, 2]], np.uint32)
    assert _run(device, big, F.SUM, (1,), DataType.UINT32).item() == 1
    wide = np.array([[2**63, 2**63, 5]], np.uint64)
    assert _run(device, wide, F.SUM, (1,), DataType.UINT64).item() == 5
    assert _run(device, np.array([[-2**31, -1]], np.int32), F.L1, (1,), DataType.INT32).item() == -2**31 + 1


def test_directml_examples(device):
    x = np.array([[1, 2, 3], [3, 0, 4], [2, 4, 2]], np.int32)
    assert _run(device, x, F.SUM, (0,), DataType.INT32).tolist() == [[6, 6, 9]]
    assert _run(device, x, F.SUM, (1,), DataType.INT32).tolist() == [[6], [7], [8]]
    assert _run(device, x, F.SUM, (0, 1), DataType.INT32).tolist() == [[21]]


@pytest.mark.parametrize("name", ["sum", "min", "max", "argmin", "argmax", "prod"])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, True), (-1, False), ((0, 2), False), ((0, 2), True)])
def test_front_end_matches_numpy(name, axis, keepdims, rng):
    x = rng.integers(-3, 4, size=(3, 4, 5)).astype(np.int64)
    got = getattr(dmlgpu, name)(x, axis=axis, keepdims=keepdims)
    if name.startswith("arg") and isinstance(axis, tuple):
        moved = np.moveaxis(x, axis, (-2, -1)).reshape(4, -1)
        expected = getattr(np, name)(moved, axis=-1).reshape(1, 4, 1) if keepdims else \
            getattr(np, name)(moved, axis=-1)
    else:
        expected = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    assert got.dtype == expected.dtype and got.shape == expected.shape and np.array_equal(got, expected)
    tensor = getattr(dmlgpu, name)(dmlgpu.Tensor.from_numpy(x), axis=axis, keepdims=keepdims)
    assert isinstance(tensor, dmlgpu.Tensor) and np.array_equal(tensor.numpy(), expected)


def test_front_end_on_views():
    x = np.arange(4 * 6, dtype=np.uint32).reshape(4, 6)
    t = dmlgpu.Tensor.from_numpy(x)
    assert np.array_equal(dmlgpu.max(t.T, axis=1).numpy(), x.T.max(axis=1))
    assert np.array_equal(dmlgpu.sum(t[1:, 1::2], axis=0).numpy(), x[1:, 1::2].sum(axis=0, dtype=np.uint32))


def test_float_min_max_order_by_encoding():
    x = np.array([1.0, -0.0, 0.0, -np.inf, np.inf, -2.5], np.float32)
    assert dmlgpu.argmin(x) == 3 and dmlgpu.argmax(x) == 4
    assert testing.same_bits(dmlgpu.min(x[1:3]), np.float32(-0.0))


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in (F.MIN, F.MAX)], ids=_id)
def test_min_max_at_the_end_of_their_order(device, case, rng):
    """MIN and MAX start from the value that comes last in their order (reduce_acc.glsl
    acc_identity: MIN the largest key, MAX the least): walks of nothing but that value (the
    integers' extremes, FLOAT +NaN of every mantissa bit for MIN and the all-ones -NaN for MAX),
    and of it with its neighbour in the order at one place, give the reference's bits."""
    function, in_type, out_type = case
    edges = testing.edge_bits(in_type).view(in_type.numpy)
    ordered = edges[np.argsort(order_key(edges), kind="stable")]
    last, neighbour = (ordered[-1], ordered[-2]) if function is F.MIN else (ordered[0], ordered[1])
    for shape, axes in AXES[:2]:
        bits = f"u{in_type.size}"
        x = np.full(shape, last, in_type.numpy)
        want = reference_reduce(x, function, axes, out_type.numpy)
        assert np.all(want.view(bits) == last.view(bits))  # (the walk's one value)
        assert testing.same_bits(_run(device, x, function, axes, out_type), want), (shape, axes)
        flat = x.reshape(-1)
        flat[rng.integers(flat.size)] = neighbour
        got = _run(device, x, function, axes, out_type)
        assert testing.same_bits(got, reference_reduce(x, function, axes, out_type.numpy)), (shape, axes)
        assert np.any(got.view(bits) == neighbour.view(bits))  # (the neighbour won where it was)


@pytest.mark.parametrize("bad, field", [
    (dict(function=99), "Function"),
    (dict(function=True), "Function"),
    (dict(axes=()), "Axes"),
    (dict(axes=(0, 0)), "Axes"),
    (dict(axes=(3,)), "Axes"),
    (dict(out_sizes=(2, 1, 5)), "Sizes"),
    (dict(out_type=DataType.INT16), "DataType"),
    (dict(in_type=DataType.FLOAT32, out_type=DataType.FLOAT16), "DataType"),  # the output type is the input's
    (dict(function=F.AVERAGE), "DataType"),  # AVERAGE (L2, LOG_SUM, LOG_SUM_EXP) take floats only
    (dict(in_type=DataType.INT8, out_type=DataType.INT8), "DataType"),  # SUM has no INT8 in DirectML
    (dict(level=FeatureLevel.LEVEL_3_0, in_type=DataType.INT64, out_type=DataType.INT64), "DataType"),
])
def test_validation(device, bad, field):
    in_type, out_type = bad.get("in_type", DataType.INT32), bad.get("out_type", DataType.INT32)
    desc = ReduceOperatorDesc(TensorDesc(in_type, (2, 3, 5)), TensorDesc(out_type, bad.get("out_sizes", (2, 1, 1))),
                              bad.get("function", F.SUM), bad.get("axes", (1, 2)))
    with pytest.raises(ValidationError) as info:
        dmlgpu.validate(desc, bad.get("level"))
    assert info.value.field == field and "REDUCE" in str(info.value)


def test_front_end_validation():
    with pytest.raises(ValidationError):
        dmlgpu.mean(np.zeros(3, np.int32))  # AVERAGE takes floats (numpy's mean gives float64)
    with pytest.raises(ValidationError) as caught:
        dmlgpu.norm(np.zeros(3, np.float32), ord=3)
    assert caught.value.field == "ord"
    with pytest.raises(ValidationError):
        dmlgpu.sum(np.zeros(3, np.int32), axis=1)
    with pytest.raises(ValidationError):
        dmlgpu.max(np.zeros(3, np.int32), axis=(0, 0))


def test_in_a_command_list_after_an_element_wise_operator(device, rng):
    """REDUCE recorded behind BIT_XOR in one command list: the barrier between them holds."""
    from dmlgpu.describe.operator_descs import ElementWiseBitXorOperatorDesc
    x = rng.integers(0, 2**32, size=(8, 16), dtype=np.uint32)
    y = rng.integers(0, 2**32, size=(8, 16), dtype=np.uint32)
    plain = TensorDesc(DataType.UINT32, x.shape)
    xor = device.create_operator(ElementWiseBitXorOperatorDesc(plain, plain, plain))
    total = device.create_operator(ReduceOperatorDesc(plain, TensorDesc(DataType.UINT32, (8, 1)), F.SUM, (1,)))
    a, b, c = device.upload(x), device.upload(y), device.allocate(x.nbytes)
    out = device.upload(np.full(32, POISON, np.uint8))
    commands = dmlgpu.CommandList(device)
    commands.record(xor, [Binding(a), Binding(b)], [Binding(c)])
    commands.record(total, [Binding(c)], [Binding(out)])
    commands.execute()
    expected = reference_reduce(x ^ y, F.SUM, (1,), np.uint32)
    assert testing.same_bits(out.read().view(np.uint32).reshape(8, 1), expected)


def test_directml_example_on_floats(device):
    """DML_REDUCE_OPERATOR_DESC's own example is FLOAT32."""
    x = np.array([[1, 2, 3], [3, 0, 4], [2, 4, 2]], np.float32)
    assert _run(device, x, F.SUM, (0,), DataType.FLOAT32).tolist() == [[6, 6, 9]]
    assert dmlgpu.sum(x, axis=0, keepdims=True).tolist() == [[6, 6, 9]]


#: Walks of two dispatches (chunk states merged by a second) on every device, odd sizes.
LONG = [((1, 300_001), (1,)), ((3, 40_001), (1,)), ((70_001, 2), (0,))]


@pytest.mark.parametrize("function", [F.SUM, F.L2, F.LOG_SUM_EXP, F.MULTIPLY, F.ARGMIN, F.MAX], ids=lambda f: f.name)
@pytest.mark.parametrize("shape, axes", LONG, ids=lambda v: str(v))
def test_long_walks_match_the_reference(device, rng, function, shape, axes):
    x = rng.normal(1.0, 0.01 if function is F.MULTIPLY else 3.0, size=shape).astype(np.float32)
    x.reshape(-1)[rng.integers(0, x.size, 8)] = x.reshape(-1)[5]  # ties
    out_type = DataType.UINT32 if function in REDUCE.index_functions else DataType.FLOAT32
    compiled = device.create_operator(ReduceOperatorDesc(
        TensorDesc(DataType.FLOAT32, shape), TensorDesc(out_type, tuple(1 if d in axes else n for d, n in
                                                                         enumerate(shape))), function, axes))
    assert compiled.shape.chunks > 1  # the second dispatch runs
    got = _run(device, x, function, axes, out_type)
    assert testing.same_bits(got, reference_reduce(x, function, axes, out_type.numpy))


@pytest.mark.parametrize("function, dtype", [(F.SUM, np.float32), (F.SUM, np.float16)],  # (|x|, x^2: the subnormal test's)
                         ids=lambda v: getattr(v, "name", None) or np.dtype(v).name)
def test_gpu_wide_loads_give_the_same_bits(device, rng, monkeypatch, function, dtype):
    """Float sums with eight blocks' loads in flight (judged once, at the end), and in workgroups
    of 128 lanes, on this device: the reference's bits every time, along rows and down columns
    (a strided walk, a lane per chunk); a huge and an infinite term among them. FLOAT16 blocks
    are converted into the same loops (a NaN among them; down columns FLOAT16 sums in fixed point)."""
    from dmlgpu.kernels import compiled_selection
    x = rng.normal(0, 3, size=(2, 200_003)).astype(dtype)
    x[1, 150_017] = 3e30 if dtype == np.float32 else np.nan
    x[0, 1_234] = -np.inf  # (a triple sum taking it as a term would give NaN)
    cases = [(x, (1,)), (np.ascontiguousarray(x.T), (0,))]
    # (The GPUs' own pair, wide loads in workgroups of 128, runs in the GPU runs of this file; on
    # lavapipe that pipeline takes about 30 s to build, so here each is tested apart, beside the
    # device's own: a block at a time in workgroups of 64 on lavapipe.)
    for wide, group in ((True, 64), (False, compiled_selection.REDUCE_GROUP[False])):
        monkeypatch.setitem(compiled_selection.WIDE_LOADS, device.is_cpu, wide)
        monkeypatch.setitem(compiled_selection.REDUCE_GROUP, device.is_cpu, group)
        for data, axes in cases:
            compiled, got = _compiled_float_run(device, data, function, axes)
            assert compiled.shape.lanes == (1 if axes == (0,) else group)
            assert testing.same_bits(got, reference_reduce(data, function, axes)), (wide, axes)


def _compiled_float_run(device, data, function, axes):
    """REDUCE of float `data` over `axes` (its type in and out), compiled anew (not the memo's
    operator: the tables a test patched apply) and run once into a poisoned output: (the compiled
    operator, the result)."""
    from dmlgpu.kernels import compiled_selection
    out_shape = tuple(1 if d in axes else n for d, n in enumerate(data.shape))
    data_type = DataType.from_numpy(data.dtype)
    desc = ReduceOperatorDesc(TensorDesc(data_type, data.shape), TensorDesc(data_type, out_shape), function, axes)
    compiled = compiled_selection.CompiledSelection(device, desc, FeatureLevel.newest())
    nbytes = data.itemsize * math.prod(out_shape)
    source, out = device.upload(data), device.upload(np.full(max(16, nbytes), POISON, np.uint8))
    compiled.execute([Binding(source)], [Binding(out)])
    return compiled, out.read()[:nbytes].view(data.dtype).reshape(out_shape)


@pytest.mark.parametrize("function", [F.SUM, F.AVERAGE, F.L1, F.LOG_SUM, F.SUM_SQUARE], ids=lambda f: f.name)
def test_subnormal_terms_where_the_device_flushes_them(device, rng, monkeypatch, function):
    """Float sums whose terms are subnormal, a few among normal ones that cancel, or all of them,
    with the fast loops told that the device flushes subnormals (shaders/reduce.comp FLUSHES, set
    on NVIDIA's GPUs): a lane that meets one adds its terms from their bits, and the result, in
    the subnormal range too, is the reference's bits. Along rows (contiguous walks, lanes sharing
    a chunk) and down columns (strided walks, a lane per chunk); with the device's own loads and
    with eight blocks in flight."""
    from dmlgpu.kernels import compiled_selection
    tiny = np.finfo(np.float32).tiny
    n = 40_003
    x = np.empty((4, n), np.float32)
    x[0] = rng.integers(1, 1 << 23, n).astype(np.uint32).view(np.float32) * rng.choice([-1, 1], n)  # all subnormal
    half = rng.normal(0, 1, n // 2).astype(np.float32)
    x[1] = np.concatenate([half, [3 * tiny / 8], -half[::-1]])  # normal terms that cancel, and one subnormal
    x[2] = rng.normal(0, 1, n).astype(np.float32)  # normal terms only: the fast loops' bits
    x[3] = (rng.integers(1, 16, n) * rng.choice([-1, 1], n)).astype(np.float32) * np.float32(2.0 ** -149)
    if function in (F.L1, F.LOG_SUM):
        x = np.abs(x)
    monkeypatch.setattr(compiled_selection, "flushes_subnormals", lambda device: True)
    cases = [(x, (1,)), (np.ascontiguousarray(x.T), (0,))]
    # (The other loads, too, for the fast loops' kinds of term x and x^2; |x| (L1) differs from x
    # only where abs() flushes, which no CPU driver does: the GPU runs of this file take it. AVERAGE
    # and LOG_SUM differ from SUM after the loops. On lavapipe a pipeline with eight blocks in
    # flight takes about 30 s to build.)
    loads = ((compiled_selection.WIDE_LOADS[device.is_cpu], compiled_selection.REDUCE_GROUP[device.is_cpu]),
             (not compiled_selection.WIDE_LOADS[device.is_cpu], 64))
    every = function in (F.SUM, F.SUM_SQUARE) or (function is F.L1 and not device.is_cpu)
    for wide, group in loads if every else loads[:1]:
        monkeypatch.setitem(compiled_selection.WIDE_LOADS, device.is_cpu, wide)
        monkeypatch.setitem(compiled_selection.REDUCE_GROUP, device.is_cpu, group)
        for data, axes in cases:
            _, got = _compiled_float_run(device, data, function, axes)
            want = reference_reduce(data, function, axes)
            assert testing.same_bits(got, want), (wide, axes, got, want)
    if function in (F.SUM, F.AVERAGE, F.L1):  # the data reach the subnormal range's results
        assert np.any((want != 0) & (np.abs(want) < tiny))


def _float16_edges(rng, rows: int, columns: int) -> np.ndarray:
    """FLOAT16 columns of edge values: random encodings (infinities, NaNs, subnormals, both zeros),
    -0.0 alone, +0.0 and -0.0, sums past 65,504 (to infinity) and just under 65,520, terms that
    cancel to one subnormal, sums beside a tie of the result (1 + 2^-11 + 2^-24, 2048 + 1 - 2^-24),
    +inf with -inf, normal data."""
    x = rng.normal(0, 3, (rows, columns)).astype(np.float16)
    x[:, 0] = rng.integers(0, 1 << 16, rows, dtype=np.uint16).view(np.float16)
    x[:, 1] = -0.0
    x[:, 2] = np.where(np.arange(rows) % 2 == 0, -0.0, 0.0)
    x[:, 3] = 65504
    x[:, 4] = 0
    x[:2, 4] = [65504, 15]  # 65,519: the largest half below
    half = rng.normal(0, 100, rows // 2).astype(np.float16)
    x[:, 5] = np.concatenate([half, -half[::-1], [2 ** -24] * (rows % 2)])
    x[:, 6], x[:, 7] = 0, 0
    x[:3, 6] = [1.0, 2 ** -11, 2 ** -24]
    x[:3, 7] = [2048, 1, -2 ** -24]
    x[:, 8] = 1
    x[:2, 8] = [np.inf, -np.inf]
    return x


@pytest.mark.parametrize("function", [F.SUM, F.AVERAGE, F.L1, F.LOG_SUM], ids=lambda f: f.name)
def test_float16_sums_in_fixed_point(device, rng, function):
    """A FLOAT16 SUM, AVERAGE, L1 or LOG_SUM walking across sums exactly in fixed point (96-bit
    integers of 2^-24: shaders/include/reduce_acc.glsl acc_fixed), the other walks in triples:
    both the reference's bits (the correctly rounded value) on edge columns (_float16_edges),
    walks of 3 to 3,001 rows; IEEE's NaN and infinities; a sum of -0.0s alone is -0.0."""
    for rows in (3, 4, 17, 64, 3_001):
        x = _float16_edges(rng, rows, 40)
        if function is F.LOG_SUM:
            x = np.abs(x)
        for data, axes in ((x, (0,)), (np.ascontiguousarray(x.T), (1,))):
            out_shape = tuple(1 if d in axes else n for d, n in enumerate(data.shape))
            desc = ReduceOperatorDesc(TensorDesc(DataType.FLOAT16, data.shape), TensorDesc(DataType.FLOAT16, out_shape),
                                      function, axes)
            compiled = device.create_operator(desc)
            assert compiled.fixed_sums == (axes == (0,)), (rows, axes)
            got = _run(device, data, function, axes, DataType.FLOAT16)
            want = reference_reduce(data, function, axes, np.float16)
            assert testing.same_bits(got, want), (rows, axes, np.flatnonzero(got.view(np.uint16) != want.view(np.uint16)))
    if function is F.SUM:
        assert np.signbit(want.reshape(-1)[1]) and want.reshape(-1)[1] == 0  # (-0.0s alone)
        assert np.isinf(want.reshape(-1)[3]) and want.reshape(-1)[4] == 65504


@pytest.mark.parametrize("function, dtype", [(F.SUM, np.float32), (F.L2, np.float32), (F.AVERAGE, np.float16),
                                             (F.MAX, np.float32), (F.ARGMIN, np.int8), (F.SUM, np.int64),
                                             (F.MULTIPLY, np.float32), (F.LOG_SUM_EXP, np.float32)],
                         ids=lambda v: getattr(v, "name", None) or np.dtype(v).name)
def test_leading_axis_walks_across(device, rng, function, dtype):
    """A reduction over the leading axis walks with a stride: each lane takes a chunk of one
    column, adjacent lanes adjacent columns (compiled_selection.walks_across), in chunks merged
    by a second dispatch; packed and padded rows, odd sizes, a huge and an infinite term in
    some columns: the reference's bits."""
    shape = (3_001, 37)
    if np.dtype(dtype).kind == "f":
        x = rng.normal(1.0, 0.01 if function is F.MULTIPLY else 3.0, size=shape).astype(dtype)
        if function not in (F.MULTIPLY, F.LOG_SUM_EXP) and dtype == np.float32:
            x[2_000, 3], x[17, 30] = 3e30, -np.inf
    else:
        x = rng.integers(-100, 100, size=shape).astype(dtype)
    out_type = DataType.UINT32 if function in REDUCE.index_functions else DataType.from_numpy(x.dtype)
    out_shape = (1, shape[1])
    for pad in (0, 3):  # rows of 37 elements packed, or 40 apart
        padded = np.zeros((shape[0], shape[1] + pad), x.dtype)
        padded[:, :shape[1]] = x
        in_desc = TensorDesc(DataType.from_numpy(x.dtype), shape, (shape[1] + pad, 1))
        compiled = device.create_operator(ReduceOperatorDesc(in_desc, TensorDesc(out_type, out_shape), function, (0,)))
        assert compiled.shape.lanes == 1 and compiled.shape.chunks > 1
        got = _run(device, x, function, (0,), out_type, in_strides=(shape[1] + pad, 1), source=padded)
        assert testing.same_bits(got, reference_reduce(x, function, (0,), out_type.numpy)), pad


def test_which_walks_go_across():
    """walks_across: one walked axis with a stride, the innermost kept axis of more than one
    element at stride 1 (size-1 axes skipped); anything else keeps lanes sharing a chunk."""
    from dmlgpu.kernels.compiled_selection import walks_across
    assert walks_across((1000, 64), (64, 1), (0,))
    assert walks_across((8, 1000, 64, 1), (64000, 64, 1, 1), (1,))  # (the size-1 axis skipped)
    assert walks_across((1000, 64), (0, 1), (0,))  # a broadcast walk
    assert not walks_across((64, 1000), (1000, 1), (1,))  # contiguous walk
    assert not walks_across((1000, 64), (1, 1000), (0,))  # columns apart: a transposed view
    assert not walks_across((10, 10, 64), (640, 64, 1), (0, 1))  # two walked axes
    assert not walks_across((1000, 1), (1, 1), (0,))  # no kept axis of more than one element


@pytest.mark.parametrize("function, dtype", [(F.SUM, np.float32), (F.L2, np.float16), (F.ARGMAX, np.float32),
                                             (F.MIN, np.int64), (F.SUM, np.uint32), (F.LOG_SUM_EXP, np.float32),
                                             (F.SUM, np.float16), (F.L1, np.float16)],
                         ids=lambda v: getattr(v, "name", None) or np.dtype(v).name)
def test_short_walks_give_the_reference(device, rng, monkeypatch, function, dtype):
    """Many output elements of a short walk across (GPUs: the short-walk pipeline, several
    output elements' loads first, then each added in the order of one lane), here on this
    device: walks of 1 to 17 elements over the leading axis, packed and padded rows, a huge and
    an infinite term: the reference's bits, and every output element written."""
    from dmlgpu.kernels import compiled_selection
    general = compiled_selection.short_walk
    monkeypatch.setattr(compiled_selection, "short_walk",
                        lambda shape, walked, across, is_cpu, arithmetic: general(shape, walked, across, False))
    for walk in (1, 3, 4, 5, 8, 9, 16, 17, 32, 33, 70):
        shape = (walk, 1_001)
        if function is F.LOG_SUM_EXP:  # (results far from 0: see the note on LOG_SUM_EXP in benchmarks/NOTES.md)
            x = rng.normal(5, 3, size=shape).astype(dtype)
        elif np.dtype(dtype).kind == "f":
            x = rng.normal(0, 3, size=shape).astype(dtype)
            if dtype == np.float32:
                x[walk - 1, 5], x[0, 7] = 3e30, -np.inf
            elif function in (F.SUM, F.L1):  # (fixed point: an infinity, a NaN, the largest half)
                x[walk - 1, 5], x[0, 7], x[0, 9] = -np.inf, np.nan, 65504
        else:
            x = rng.integers(-100 if np.dtype(dtype).kind == "i" else 0, 200, size=shape).astype(dtype)
        out_type = DataType.UINT32 if function in REDUCE.index_functions else DataType.from_numpy(x.dtype)
        for pad in (0, 3):
            padded = np.zeros((walk, shape[1] + pad), x.dtype)
            padded[:, :shape[1]] = x
            in_desc = TensorDesc(DataType.from_numpy(x.dtype), shape, (shape[1] + pad, 1))
            desc = ReduceOperatorDesc(in_desc, TensorDesc(out_type, (1, shape[1])), function, (0,))
            compiled = compiled_selection.CompiledSelection(device, desc, FeatureLevel.newest())  # (not the memo's)
            assert compiled.short_walk == (4 if walk <= 4 else 32)
            source = device.upload(padded)
            out = device.upload(np.full(max(16, out_type.size * shape[1]), POISON, np.uint8))
            compiled.execute([Binding(source)], [Binding(out)])
            got = out.read()[:shape[1] * out_type.size].view(out_type.numpy).reshape(1, shape[1])
            assert testing.same_bits(got, reference_reduce(x, function, (0,), out_type.numpy)), (walk, pad)


def _grouped_walk(device, x, function, axis, pad, out_row, out_type):
    """A REDUCE of `x` over `axis` compiled as a test's own (not the memo's), its input's rows
    `pad` elements longer than they are and, with `out_row`, its output's rows (of 12
    elements, 3 of them) that many apart: (compiled operator, input padded, output desc)."""
    from dmlgpu.kernels import compiled_selection
    shape = x.shape
    padded = np.zeros(shape[:-1] + (shape[-1] + pad,), x.dtype)
    padded[..., :shape[-1]] = x
    strides = np.array(padded.strides) // x.itemsize
    in_desc = TensorDesc(DataType.from_numpy(x.dtype), shape, tuple(int(v) for v in strides))
    out_shape = tuple(1 if d == axis else n for d, n in enumerate(shape))
    out_desc = TensorDesc(out_type, out_shape, None if out_row is None else (out_row, out_row, 1))
    desc = ReduceOperatorDesc(in_desc, out_desc, function, (axis,))
    return compiled_selection.CompiledSelection(device, desc, FeatureLevel.newest()), padded, out_desc


def _check_grouped_walk(device, compiled, x, padded, out_desc, function, axis, out_row, case):
    """Runs `compiled` on `padded` into a poisoned output: the reference's bits in every output
    element, and nothing written between the output's rows or after it."""
    out_type = out_desc.data_type
    nbytes = out_desc.total_size
    out = device.upload(np.full(nbytes + 16, POISON, np.uint8))
    compiled.execute([Binding(device.upload(padded))], [Binding(out)])
    raw = out.read()[:nbytes].view(out_type.numpy)
    want = reference_reduce(x, function, (axis,), out_type.numpy)
    if out_row is None:
        got = raw.reshape(want.shape)
    else:
        got = np.lib.stride_tricks.as_strided(raw, want.shape, tuple(v * out_type.size for v in out_desc.strides))
        gaps = np.ones(raw.size, bool)
        gaps[[i * out_row + j for i in range(3) for j in range(12)]] = False
        assert np.all(raw[gaps].view(np.uint8) == POISON), case  # (nothing written between the rows)
    assert np.all(out.read()[nbytes:] == POISON), case
    assert testing.same_bits(got, want), case


@pytest.mark.parametrize("function, dtype", [(F.MAX, np.float32), (F.SUM, np.int32), (F.ARGMIN, np.uint32)],
                         ids=lambda v: getattr(v, "name", None) or np.dtype(v).name)
def test_short_walks_in_quads_give_the_reference(device, rng, monkeypatch, function, dtype):
    """Short walks across whose output elements come in quads (GPUs: shaders/reduce.comp
    short_quads, four adjacent output elements from one 16-byte load a row: two quads an
    invocation, or one), here on this device: walks of 1 to 33 elements over the leading axis and the
    middle one of three, rows aligned (a stride a multiple of 4) and not, an output not on 16
    bytes, a huge, an infinite and a NaN term in some quads and not in their neighbours: the
    reference's bits, and every output element written. Past QUAD_WALK rows these functions take
    one output element an invocation (short_units in rounds), checked the same way."""
    from dmlgpu.kernels.short_walks import QUAD_WALK
    from dmlgpu.kernels import compiled_selection
    general = compiled_selection.short_walk
    monkeypatch.setattr(compiled_selection, "short_walk",
                        lambda shape, walked, across, is_cpu, arithmetic: general(shape, walked, across, False, arithmetic))
    out_type = DataType.UINT32 if function in REDUCE.index_functions else DataType.from_numpy(np.dtype(dtype))
    for walk in (1, 2, 3, 4, 5, 8, 9, 16, 17, 33):
        for shape, axis, pad, out_row in (((walk, 1_024), 0, 0, None), ((walk, 1_024), 0, 4, None),
                                          ((walk, 1_024), 0, 3, None), ((3, walk, 12), 1, 0, None),
                                          ((3, walk, 12), 1, 0, 13)):  # (output rows 13 apart: quads not on 16 bytes)
            if np.dtype(dtype).kind == "f":
                x = rng.normal(0, 3, size=shape).astype(dtype)
                flat = x.reshape(-1)
                flat[[41 % flat.size, 402 % flat.size, 555 % flat.size]] = (3e30, -np.inf, np.nan)
            else:
                x = rng.integers(0, 200, size=shape).astype(dtype)
            compiled, padded, out_desc = _grouped_walk(device, x, function, axis, pad, out_row, out_type)
            assert compiled.short_quads == (walk <= QUAD_WALK), (walk, shape)
            assert compiled.short_walk == next(w for w in (4, 8, 16, 32) if walk <= w or w == 32), (walk, shape)
            _check_grouped_walk(device, compiled, x, padded, out_desc, function, axis, out_row, (walk, shape, pad, out_row))


@pytest.mark.parametrize("function, dtype", [(F.MAX, np.int16), (F.MIN, np.uint8), (F.MAX, np.int8),
                                             (F.MIN, np.uint16), (F.ARGMAX, np.int16), (F.ARGMIN, np.uint8),
                                             (F.SUM, np.float16), (F.MAX, np.float16), (F.MULTIPLY, np.float16),
                                             (F.AVERAGE, np.float16), (F.ARGMIN, (np.int8, np.int64)),
                                             (F.ARGMAX, (np.float16, np.uint64))],
                         ids=lambda v: getattr(v, "name", None) or "-".join(np.dtype(t).name for t in np.atleast_1d(v)))
def test_short_walks_in_words_give_the_reference(device, rng, monkeypatch, function, dtype):
    """Short walks across over 8/16-bit elements whose output elements fill words (GPUs:
    shaders/reduce.comp short_words, a word's output elements an invocation), here on this device:
    walks of 1 to 33 elements over the leading axis and the middle one of three; rows starting
    a word (a stride a multiple of the word's elements) and not; an output whose rows start
    mid-word (stored element by element, other rows' elements in the same words kept); 32- and
    64-bit indices; extreme values and, for floats, an infinity and a NaN in some words and not
    in their neighbours: the reference's bits, every output element written, nothing else."""
    from dmlgpu.kernels import compiled_selection
    from dmlgpu.kernels.short_walks import WORD_WALK
    general = compiled_selection.short_walk
    monkeypatch.setattr(compiled_selection, "short_walk",
                        lambda shape, walked, across, is_cpu, arithmetic: general(shape, walked, across, False, arithmetic))
    dtype, index_type = dtype if isinstance(dtype, tuple) else (dtype, np.uint32)  # (ARG*: the output's type)
    dt = np.dtype(dtype)
    g = 4 // dt.itemsize
    out_type = DataType.from_numpy(np.dtype(index_type)) if function in REDUCE.index_functions else DataType.from_numpy(dt)
    arithmetic = dt.kind == "f" and function not in (F.MIN, F.MAX, F.ARGMIN, F.ARGMAX)
    for walk in (1, 2, 3, 4, 5, 8, 9, 17, 33):
        if arithmetic and walk > 4:
            continue  # (float arithmetic takes the general pipeline past 4 rows)
        for shape, axis, pad, out_row in (((walk, 64), 0, 0, None), ((walk, 64), 0, 1, None),
                                          ((3, walk, 12), 1, 0, None), ((3, walk, 12), 1, 1, None),
                                          ((3, walk, 12), 1, 0, 13)):  # (pad 1: rows start mid-word; 13: so do outputs)
            if dt.kind == "f":
                x = rng.normal(0, 3, size=shape).astype(dtype)
                flat = x.reshape(-1)
                flat[[41 % flat.size, 102 % flat.size, 155 % flat.size]] = (6e4, -np.inf, np.nan)
            else:
                info = np.iinfo(dt)
                x = rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)
                x.reshape(-1)[[3, 17 % x.size]] = (info.min, info.max)
            if function is F.MULTIPLY:
                x = rng.integers(0, 3, size=shape).astype(dtype)
            compiled, padded, out_desc = _grouped_walk(device, x, function, axis, pad, out_row, out_type)
            if g == 2 and walk > WORD_WALK:  # (16-bit: one output element an invocation past WORD_WALK)
                assert compiled.short_words == 0 and compiled.short_walk == 32, (walk, shape)
            else:
                assert compiled.short_words == g, (walk, shape)
                assert compiled.short_walk == (4 if walk <= 4 else WORD_WALK if g == 2 else 32), (walk, shape)
            _check_grouped_walk(device, compiled, x, padded, out_desc, function, axis, out_row, (walk, shape, pad, out_row))


def test_which_layouts_take_quads():
    """quad_layout: 32-bit elements whose innermost kept dimension of more than one element has
    input and output stride 1 and a multiple of 4 elements; short_quads: not the float sums', and
    past QUAD_WALK rows only the quick sums' (in rounds)."""
    from dmlgpu.kernels.compiled_selection import selection_params
    from dmlgpu.kernels.short_walks import QUAD_WALK, SHORT_WALKS, quad_layout, short_quads
    from dmlgpu.describe.validation import checked_attributes

    def quads(shape, strides, axis, dtype=DataType.FLOAT32, out_strides=None):
        out_shape = tuple(1 if d == axis else n for d, n in enumerate(shape))
        desc = ReduceOperatorDesc(TensorDesc(dtype, shape, strides), TensorDesc(dtype, out_shape, out_strides),
                                  F.SUM, (axis,))
        words, _ = selection_params(desc.OPERATOR, checked_attributes(desc, FeatureLevel.newest()), desc.tensor_descs())
        return quad_layout(words, dtype.size)

    assert quads((4, 1024), None, 0) and quads((4, 1024), (1027, 1), 0) and quads((3, 5, 12), None, 1)
    assert quads((4, 1, 8), (8, 8, 1), 0)  # (a kept dimension of one element is passed over)
    assert not quads((4, 1022), None, 0)  # not a multiple of 4
    assert not quads((4, 1024), None, 0, DataType.FLOAT16) and not quads((4, 1024), None, 0, DataType.INT64)
    assert not quads((4, 1024), (1, 4), 0)  # the kept dimension strided
    assert not quads((4, 8), None, 0, out_strides=(16, 2))  # the output strided
    four, rounds = SHORT_WALKS
    half = QUAD_WALK // 2
    assert [short_quads(s, w, True, False) for s, w in ((0, 2), (four, 3), (rounds, 5), (rounds, half),
                                                       (rounds, half + 1), (rounds, QUAD_WALK),
                                                       (rounds, QUAD_WALK + 1), (rounds, 1_000))] \
        == [0, four, half, half, QUAD_WALK, QUAD_WALK, 0, 0]  # (past QUAD_WALK: one output element an invocation)
    assert short_quads(four, 3, True, True) == 0  # float sums
    assert [short_quads(s, w, True, False, True) for s, w in ((four, 3), (rounds, half), (rounds, half + 1),
                                                             (rounds, 100))] \
        == [four, half, rounds, rounds]  # quick float sums: rounds past QUAD_WALK / 2
    assert short_quads(four, 3, False, False) == 0  # not the layout


def test_which_layouts_take_words():
    """word_layout: 8- and 16-bit elements whose innermost kept dimension of more than one
    element has input and output stride 1 and a multiple of a word's elements (4 or 2)."""
    from dmlgpu.kernels.compiled_selection import selection_params
    from dmlgpu.kernels.short_walks import word_layout
    from dmlgpu.describe.validation import checked_attributes

    def words(shape, strides, axis, dtype, out_strides=None):
        out_shape = tuple(1 if d == axis else n for d, n in enumerate(shape))
        desc = ReduceOperatorDesc(TensorDesc(dtype, shape, strides), TensorDesc(dtype, out_shape, out_strides),
                                  F.MAX, (axis,))
        params, _ = selection_params(desc.OPERATOR, checked_attributes(desc, FeatureLevel.newest()), desc.tensor_descs())
        return word_layout(params, dtype.size)

    assert words((4, 6), None, 0, DataType.INT16) and words((4, 8), None, 0, DataType.UINT8)
    assert words((4, 6), (7, 1), 0, DataType.FLOAT16)  # (rows apart by an odd stride: loaded element by element)
    assert words((3, 5, 8), None, 1, DataType.INT8) and words((4, 1, 2), (2, 2, 1), 0, DataType.UINT16)
    assert not words((4, 6), None, 0, DataType.UINT8)  # not a multiple of a word's 4
    assert not words((4, 7), None, 0, DataType.INT16)  # nor of 2
    assert not words((4, 8), None, 0, DataType.INT32) and not words((4, 8), None, 0, DataType.INT64)
    assert not words((4, 8), (1, 4), 0, DataType.INT16)  # the kept dimension strided
    assert not words((4, 8), None, 0, DataType.INT16, out_strides=(16, 2))  # the output strided
    from dmlgpu.kernels.short_walks import SHORT_WALKS, WORD_WALK, short_words
    four, rounds = SHORT_WALKS
    assert [short_words(s, w, True, 1) for s, w in ((0, 2), (four, 3), (rounds, 5), (rounds, 1_000))] == \
        [(0, 0), (4, four), (4, rounds), (4, rounds)]  # 8-bit: words at any length
    assert [short_words(s, w, True, 2) for s, w in ((four, 3), (rounds, 5), (rounds, WORD_WALK), (rounds, WORD_WALK + 1))] \
        == [(2, four), (2, WORD_WALK), (2, WORD_WALK), (0, rounds)]  # 16-bit: to WORD_WALK, every load first
    assert short_words(four, 3, False, 2) == (0, four) and short_words(four, 3, True, 4) == (0, four)


def test_which_cuts_take_the_short_walk_pipeline():
    """short_walk: on a GPU, a walk across with one lane and one chunk an output element: walks
    of at most 4 elements take the pipeline of 4, longer ones (any length) the one in rounds of
    32 loads; float arithmetic only the first. CPU drivers, contiguous walks and cuts of several
    lanes or chunks an output element keep the general pipeline."""
    from dmlgpu.kernels.compiled_selection import reduce_shape, short_walk
    many = 1 << 22
    assert [short_walk(reduce_shape(many, w, False, True), w, True, False) for w in (2, 4, 5, 16, 17, 33, 1000)] == \
        [4, 4, 32, 32, 32, 32, 32]
    assert short_walk(reduce_shape(many, 16, True, True), 16, True, True) == 0  # a CPU driver
    assert short_walk(reduce_shape(many, 16, False, False), 16, False, False) == 0  # contiguous rows
    assert short_walk(reduce_shape(1, 16, False, True), 16, True, False) == 32
    assert short_walk(reduce_shape(16, 1 << 20, False, True), 1 << 20, True, False) == 0  # several chunks each
    assert [short_walk(reduce_shape(many, w, False, True), w, True, False, True) for w in (3, 4, 5)] == [4, 4, 0]
    from dmlgpu.kernels.short_walks import quick_sums  # (float arithmetic but these: every walk)
    assert [quick_sums(f, 32, 32, True) for f in (F.SUM, F.L1, F.AVERAGE, F.SUM_SQUARE, F.MAX)] == \
        [True, True, False, False, False]
    assert not quick_sums(F.SUM, 16, 16, True) and not quick_sums(F.SUM, 32, 32, False)


def test_quick_sums_stop_at_quick_walk(device, monkeypatch):
    """Past QUICK_WALK elements a FLOAT32 SUM over a leading axis keeps the general pipeline (on
    an H200 it beat the quick passes from 256 rows), and up to it takes the quick passes."""
    from dmlgpu.kernels import compiled_selection
    from dmlgpu.kernels.short_walks import QUICK_WALK
    general = compiled_selection.short_walk
    monkeypatch.setattr(compiled_selection, "short_walk",
                        lambda shape, walked, across, is_cpu, arithmetic: general(shape, walked, across, False, arithmetic))
    for walk, quick in ((QUICK_WALK, True), (QUICK_WALK + 1, False)):
        columns = 1 << 20  # (enough output elements for one lane each on a GPU too; nothing runs)
        desc = ReduceOperatorDesc(TensorDesc(DataType.FLOAT32, (walk, columns)),
                                  TensorDesc(DataType.FLOAT32, (1, columns)), F.SUM, (0,))
        compiled = compiled_selection.CompiledSelection(device, desc, FeatureLevel.newest())
        assert (compiled.quick, bool(compiled.short_walk)) == (quick, quick), walk


@pytest.mark.parametrize("function, dtype", [(F.SUM, np.int32), (F.LOG_SUM_EXP, np.float16), (F.MAX, np.float32),
                                             (F.ARGMIN, np.uint8), (F.AVERAGE, np.float32), (F.MIN, np.int64)],
                         ids=lambda v: getattr(v, "name", None) or np.dtype(v).name)
def test_wider_workgroups_give_the_reference(device, rng, monkeypatch, function, dtype):
    """REDUCE as GPUs run it (compiled_selection.REDUCE_GROUP: wider workgroups, more lanes a
    chunk, fewer chunk states; WIDE_LOADS: several blocks' loads in flight), here on this
    device: chunked walks along either axis (down the columns: strided, a lane a chunk) match
    the reference bit for bit."""
    from dmlgpu.kernels import compiled_selection
    group = compiled_selection.REDUCE_GROUP[False]  # a GPU's
    monkeypatch.setitem(compiled_selection.REDUCE_GROUP, device.is_cpu, group)
    monkeypatch.setitem(compiled_selection.WIDE_LOADS, device.is_cpu, compiled_selection.WIDE_LOADS[False])
    x = (rng.normal(0, 2, size=(3, 40_001)) if np.dtype(dtype).kind == "f"
         else rng.integers(-100 if np.dtype(dtype).kind == "i" else 0, 200, size=(3, 40_001))).astype(dtype)
    for axes, shape in (((1,), (3, 40_001)), ((0,), (400, 300))):
        data = x.reshape(-1)[:math.prod(shape)].reshape(shape)
        out_type = DataType.UINT32 if function is F.ARGMIN else DataType.from_numpy(data.dtype)
        out_shape = tuple(1 if d in axes else n for d, n in enumerate(shape))
        desc = ReduceOperatorDesc(TensorDesc(DataType.from_numpy(data.dtype), shape), TensorDesc(out_type, out_shape),
                                  function, axes)
        compiled = compiled_selection.CompiledSelection(device, desc, FeatureLevel.newest())  # (not the memo's)
        assert compiled.shape.lanes == group or axes == (0,)
        source = device.upload(data)
        out = device.upload(np.full(max(4, out_type.size) * math.prod(out_shape), POISON, np.uint8))
        compiled.execute([Binding(source)], [Binding(out)])
        got = out.read()[:math.prod(out_shape) * out_type.size].view(out_type.numpy).reshape(out_shape)
        assert testing.same_bits(got, reference_reduce(data, function, axes, out_type.numpy))


def test_the_same_bits_on_every_run_whatever_runs_beside(device, rng):
    """A fixed order: repeated, and interleaved with other work queued on the device, a float
    sum of cancelling terms gives one bit pattern."""
    x = np.concatenate([rng.normal(0, 1e6, 50_000), rng.normal(0, 1, 50_000)]).astype(np.float32)
    x = np.concatenate([x, -x[:50_000]])
    rng.shuffle(x)
    t = dmlgpu.Tensor.from_numpy(x)
    first = dmlgpu.sum(t).numpy()
    noise = dmlgpu.Tensor.from_numpy(rng.integers(0, 2**32, 1 << 20, dtype=np.uint32))
    for i in range(6):
        if i % 2:
            noise = noise ^ np.uint32(i)  # queued beside
        assert testing.same_bits(dmlgpu.sum(t).numpy(), first)
    assert testing.same_bits(first, reference_reduce(x, F.SUM, (0,)).reshape(()))


F32, F16 = np.float32, np.float16
NAN, INF = np.nan, np.inf


@pytest.mark.parametrize("function, values, dtype, expected", [
    (F.SUM, [1.0, NAN, 2.0], F32, NAN),
    (F.SUM, [INF, 1.0, -INF], F32, NAN),
    (F.SUM, [INF, 1.0, 3e38], F32, INF),
    (F.SUM, [3e38, 3e38, -3e38], F32, 3e38),  # no partial sum overflows
    (F.SUM, [-0.0, -0.0], F32, -0.0),
    (F.SUM, [-0.0, 0.0], F32, 0.0),
    (F.SUM, [1e-45, 1e-45, 3e-45], F32, 5.6e-45),  # subnormals add exactly
    (F.SUM, [1.0, 1e-45, -1.0], F32, 1e-45),  # and are kept beside normal terms that cancel
    (F.SUM, [-3e-39, 1e-39, -1e-45], F32, -2e-39),
    (F.AVERAGE, [3e-45, 0.0], F32, 1.4e-45),  # 1.5 units of 2^-149: a tie, to even (2^-148)
    (F.AVERAGE, [1e-38, 2e-38, 3e-38, 1e-45], F32, 1.5e-38),
    (F.L1, [-1e-45, 1e-45], F32, 2.8e-45),
    (F.MULTIPLY, [1e-20, 1e-20, 1e-5], F32, 1e-45),  # a product in the subnormal range
    (F.MULTIPLY, [3e-39, 0.5], F32, 1.5e-39),
    (F.SUM, [60000.0, 60000.0, -60000.0], F16, 60000.0),  # FLOAT16 accumulates in float32
    (F.SUM, [60000.0, 6000.0], F16, INF),  # and rounds once: to inf
    (F.AVERAGE, [3e38, 3e38], F32, 3e38),
    (F.L2, [3e30, 4e30], F32, 5e30),  # squares past the float range
    (F.L2, [-0.0], F32, 0.0),
    (F.LOG_SUM, [1.0, -3.0], F32, NAN),
    (F.LOG_SUM, [0.0, -0.0], F32, -INF),
    (F.LOG_SUM_EXP, [-INF, -INF], F32, -INF),
    (F.LOG_SUM_EXP, [-INF, 0.0], F32, 0.0),
    (F.LOG_SUM_EXP, [1.0, INF, NAN], F32, NAN),
    (F.LOG_SUM_EXP, [1000.0, 1000.0], F32, 1000.6931),  # max-shifted: no overflow
    (F.MULTIPLY, [INF, 0.0], F32, NAN),
    (F.MULTIPLY, [-2.0, 0.0, 3.0], F32, -0.0),
    (F.MULTIPLY, [1e30, 1e30, 1e-30, 1e-30], F32, 1.0),  # no partial product overflows
    (F.MULTIPLY, [300.0, 300.0], F16, INF),
], ids=lambda v: str(v) if not isinstance(v, list) else None)
def test_special_values(device, function, values, dtype, expected):
    x = np.array(values, dtype)
    got = _run(device, x, function, (0,), DataType.from_numpy(x.dtype)).reshape(())
    want = np.array(expected, dtype)
    if np.isnan(want) or np.isinf(want) or want == 0:
        assert (np.isnan(got) and np.isnan(want)) or testing.same_bits(got, want), (got, want)
    else:
        assert np.isclose(got, want, rtol=1e-6, atol=0), (got, want)
    assert testing.same_bits(got, reference_reduce(x, function, (0,)).reshape(()))


@pytest.mark.parametrize("function", [F.SUM, F.L1], ids=lambda f: f.name)
def test_a_sum_beside_a_tie_rounds_to_its_side(device, function):
    """Sums whose exact value lies just beside a tie of float32's precision (1 + 2^-24 + 2^-60:
    the rounding error of 1 + 2^-24 is kept in one float and what lies below it in another) round
    to the side the exact value lies on, and an exact tie to even: alone, spread over a long walk
    of zeros (lanes and chunks merged) and down a column (a walk across); a subnormal term beside
    normal ones likewise."""
    from fractions import Fraction
    t = 2.0 ** -24
    rows = [[1.0, t, 2.0 ** -60], [1.0, t, -2.0 ** -60], [-1.0, -t, -2.0 ** -60], [1.0, t], [1.0 + 2 * t, t],
            [1.0, t, 2.0 ** -100, 2.0 ** -110], [4.0, 4 * t, 1e-42], [3.0, -1.0, 3 * t, 2.0 ** -140]]
    for values in rows:
        x = np.array(values, np.float32)
        terms = np.abs(x) if function is F.L1 else x
        exact = sum(Fraction(float(v)) for v in terms)
        want = np.float32(float(exact))  # (the Fraction's float is correctly rounded; float32's from it may not be:)
        lo, hi = np.nextafter(want, np.float32(-np.inf)), np.nextafter(want, np.float32(np.inf))
        want = min((want, lo, hi), key=lambda c: (abs(Fraction(float(c)) - exact), int(c.view(np.uint32)) & 1))
        long = np.zeros(200_003, np.float32)
        long[[5, 100_000, 200_002, 77][:len(x)]] = x
        for data, axes in ((x, (0,)), (long, (0,)), (np.ascontiguousarray(np.tile(x[:, None], (1, 8))), (0,))):
            got = _run(device, data, function, axes, DataType.FLOAT32).reshape(-1)
            assert testing.same_bits(got, np.full(got.shape, want, np.float32)), (values, data.shape, got[0], want)
            assert testing.same_bits(got, reference_reduce(data, function, axes).reshape(-1))


@pytest.mark.parametrize("function", [F.SUM, F.L1], ids=lambda f: f.name)
def test_quick_sums_of_short_walks_prove_or_give_up(device, rng, monkeypatch, function):
    """FLOAT32 SUM and L1 over short walks across (GPUs: shaders/reduce.comp QUICK_SUMS, one TwoSum
    a term, the result proved or handed to the triples), here on this device with the short-walk
    pipelines forced: each column a case that the proof must give up on or get right (exact
    ties and values just beside them, a power of two's smaller gap below it, cancellation, terms of
    2^62 and more, subnormal terms and results, zeros of both signs, infinities, NaN) and random
    columns near midpoints; walks of 1 to 40 (the pipeline of 4, rounds of 32 loads and more; in
    quads, four columns from one load a row, where the width allows): the reference's bits."""
    from dmlgpu.kernels import compiled_selection
    general = compiled_selection.short_walk
    monkeypatch.setattr(compiled_selection, "short_walk",
                        lambda shape, walked, across, is_cpu, arithmetic: general(shape, walked, across, False, arithmetic))
    t = 2.0 ** -24
    fixed = [[1.0, t], [1.0 + 2 * t, t], [1.0, t, 2.0 ** -60], [1.0, t, -2.0 ** -60], [-1.0, -t, 2.0 ** -60],
             [1.0, -t / 2], [1.0, -t / 2, -2.0 ** -60], [1.0, -t / 2, 2.0 ** -60], [2.0, -t, -t / 4],
             [1e8, 1.0, -1e8], [3e30, 1.0, -3e30], [2.0 ** 62, -(2.0 ** 62), 1.0], [2.0 ** 61, 2.0 ** 61, 1.0],
             [1e-40, 2e-40], [1e-38, -0.99e-38], [2.0 ** -100, 1.5 * 2.0 ** -126], [1e-45, 1.0, -1.0],
             [0.0, 0.0], [-0.0, -0.0, -0.0], [-0.0, 0.0], [5.0, -5.0], [np.inf, 1.0], [-np.inf, np.inf],
             [np.nan, 1.0], [1.0, 2.0, 3.0, 4.0, 5.0], [0.1, 0.2, 0.3, -0.6]]
    for walk, quads in ((1, False), (2, True), (3, False), (4, True), (5, False), (7, True), (16, True), (17, False),
                        (40, True)):
        columns = [c for c in fixed if len(c) <= walk]
        width = len(columns) + 600
        width += -width % 4 if quads else int(width % 4 == 0)  # (quads: a multiple of 4 columns)
        x = np.full((walk, width), -0.0, np.float32)  # (-0.0 pads: it changes no sum)
        for j, c in enumerate(columns):
            x[:len(c), j] = c
        near = x[:, len(columns):]  # a random float, half its ulp, and what lies below or cancels
        near[:] = rng.normal(0, 1, near.shape).astype(np.float32) * np.float32(2.0) ** rng.integers(-20, 20, near.shape)
        if walk >= 3:
            head = near[0]
            half = (np.spacing(np.abs(head)) / 2).astype(np.float32)
            near[1] = np.where(rng.random(head.shape) < 0.5, half, -half)
            near[2] = np.where(rng.random(head.shape) < 0.3, 0, half * np.float32(2.0) ** rng.integers(-40, -1, head.shape)
                               * rng.choice(np.float32([-1, 1]), head.shape))
            if walk > 4:
                near[3::2] = near[4::2][:near[3::2].shape[0]] if walk % 2 else 0  # (some cancel, some do not)
        in_desc = TensorDesc(DataType.FLOAT32, x.shape)
        desc = ReduceOperatorDesc(in_desc, TensorDesc(DataType.FLOAT32, (1, x.shape[1])), function, (0,))
        compiled = compiled_selection.CompiledSelection(device, desc, FeatureLevel.newest())  # (not the memo's)
        assert compiled.short_quads == quads, walk
        assert compiled.short_walk == next(w for w in ((4, 8, 32) if quads else (4, 32)) if walk <= w or w == 32)
        assert compiled.quick
        out = device.upload(np.full(4 * x.shape[1], POISON, np.uint8))
        compiled.execute([Binding(device.upload(x))], [Binding(out)])
        got = out.read().view(np.float32).reshape(1, -1)
        want = reference_reduce(x, function, (0,), np.float32)
        bad = np.flatnonzero(~np.array([testing.same_bits(g, w) for g, w in zip(got[0], want[0])]))
        assert bad.size == 0, (walk, [(x[:, j].tolist(), got[0, j], want[0, j]) for j in bad[:3]])


def test_numpy_and_scipy_names(rng):
    """mean, norm (ord 1, 2), logsumexp against numpy in float64 (rounded once to float32), on
    numpy data and Tensors, with axes and keepdims."""
    x = rng.normal(0, 2, size=(5, 7, 3)).astype(np.float32)
    wide = x.astype(np.float64)
    top = wide.max(axis=(0, 2), keepdims=True)
    checks = [(dmlgpu.mean, {}, wide.mean(axis=(0, 2), keepdims=True)),
              (dmlgpu.norm, {"ord": 1}, np.abs(wide).sum(axis=(0, 2), keepdims=True)),
              (dmlgpu.norm, {}, np.sqrt((wide * wide).sum(axis=(0, 2), keepdims=True))),
              (dmlgpu.logsumexp, {}, top + np.log(np.exp(wide - top).sum(axis=(0, 2), keepdims=True)))]
    for function, kwargs, expected in checks:
        got = function(x, axis=(0, 2), keepdims=True, **kwargs)
        assert got.dtype == np.float32 and got.shape == (1, 7, 1)
        assert np.allclose(got, expected, rtol=1e-6, atol=0)
        tensor = function(dmlgpu.Tensor.from_numpy(x), axis=(0, 2), keepdims=True, **kwargs)
        assert testing.same_bits(tensor.numpy(), got)
    assert dmlgpu.norm(x).shape == () and np.isclose(dmlgpu.norm(x), np.linalg.norm(wide), rtol=1e-6)


def test_log_sum_exp_where_the_result_cancels_its_largest_element(device, rng):
    """LOG_SUM_EXP = m + log(sum(exp(x - m))): where the result is small beside m (the log
    cancels it), exp's and log's pairs must hold about 2^-46 of their values, not 2^-35
    (shaders/include/compensated.glsl): 60,000 short walks of normal(0, 3) data, among them
    [-0.586, -4.17, -0.849] (whose LOG_SUM_EXP, -3.6e-5, came out 3 units in the last place off
    with the shorter pairs), give the reference's bits (correctly rounded)."""
    for walk in (3, 5):
        x = rng.normal(0, 3, size=(walk, 30_000)).astype(np.float32)
        if walk == 3:
            x[:, 0] = np.array([-0.5857306718826294, -4.167263031005859, -0.8491688966751099], np.float32)
        got = _run(device, x, F.LOG_SUM_EXP, (0,), DataType.FLOAT32)
        assert testing.same_bits(got, reference_reduce(x, F.LOG_SUM_EXP, (0,), np.float32)), walk


@pytest.mark.parametrize("function", [F.SUM, F.L2, F.ARGMAX, F.MULTIPLY], ids=lambda f: f.name)
@pytest.mark.parametrize("shape, axes", [((1, 300_001), (1,)), ((3, 40_001), (1,)), ((4_001, 2), (0,))],
                         ids=lambda v: str(v))
def test_the_last_workgroup_merges_as_a_second_dispatch_would(device, rng, function, shape, axes, monkeypatch):
    """REDUCE_MERGE_LAST (the first dispatch's last workgroup merges the chunk states) against
    the two dispatches, run after run: the same bits, and its count back at 0 after each run (a
    double sum's first loop on its own: test_float32_sums_in_doubles_whose_first_loop_runs_on_its_own)."""
    monkeypatch.setattr(compiled_selection, "DOUBLE_FIRST_WALK", 1 << 62)
    x = rng.normal(1.0, 0.01 if function is F.MULTIPLY else 3.0, size=shape).astype(np.float32)
    out_type = DataType.UINT32 if function in REDUCE.index_functions else DataType.FLOAT32
    out_shape = tuple(1 if d in axes else n for d, n in enumerate(shape))
    desc = ReduceOperatorDesc(TensorDesc(DataType.FLOAT32, shape), TensorDesc(out_type, out_shape), function, axes)
    fused = compiled_selection.CompiledSelection(device, desc, FeatureLevel.newest())
    two = compiled_selection.CompiledSelection(device, desc, FeatureLevel.newest())
    two._passes = two.upload(two.reduce_passes(two.shape))
    assert [len(c._passes.passes) for c in (fused, two)] == [1, 2]
    assert fused._passes.passes[0][3] and fused.state_bytes == two.state_bytes + compiled_selection.STATE_BYTES
    source = device.upload(x)
    size = 4 * int(np.prod(out_shape))
    results = []
    for compiled in (two, fused, fused, fused):
        out = device.upload(np.full(size, POISON, np.uint8))
        compiled.execute([Binding(source)], [Binding(out)])
        results.append(out.read()[:size].view(out_type.numpy))
        states = fused._states.read().view(np.uint32) if fused._states is not None else None
        if compiled is fused:
            assert states[-8] == 0  # the count, reset by the merging workgroup
    for got in results[1:]:
        assert testing.same_bits(got, results[0])
    assert testing.same_bits(results[0], reference_reduce(x, function, axes, out_type.numpy).reshape(-1))


def test_a_two_dispatch_reduce_in_a_command_list(device, rng):
    """A REDUCE of two dispatches recorded behind its producer and replayed: the list puts its
    barriers between the producer, the chunk states and their merge."""
    from dmlgpu.describe.operator_descs import ElementWiseBitXorOperatorDesc
    n = 300_001
    x = rng.normal(0, 1, n).astype(np.float32)
    mask = np.zeros(n, np.uint32)
    mask[::3] = 0x80000000  # flips signs
    plain, bits = TensorDesc(DataType.FLOAT32, (n,)), TensorDesc(DataType.UINT32, (n,))
    xor = device.create_operator(ElementWiseBitXorOperatorDesc(bits, bits, bits))
    total = device.create_operator(ReduceOperatorDesc(plain, TensorDesc(DataType.FLOAT32, (1,)), F.SUM, (0,)))
    assert total.shape.chunks > 1
    a, b, c = device.upload(x), device.upload(mask), device.allocate(x.nbytes)
    out = device.upload(np.full(16, POISON, np.uint8))
    commands = dmlgpu.CommandList(device)
    commands.record(xor, [Binding(a), Binding(b)], [Binding(c)])
    commands.record(total, [Binding(c)], [Binding(out)])
    expected = reference_reduce((x.view(np.uint32) ^ mask).view(np.float32), F.SUM, (0,))
    for _ in range(2):
        commands.execute()
        assert testing.same_bits(out.read()[:4].view(np.float32), expected.reshape(1))


def _double_sum_cases(rng):
    """FLOAT32 data for the double sums: sums they prove, and sums they must give up on (an exact
    zero from cancellation, a tie, a result near the subnormals), with the values IEEE fixes."""
    a = (rng.standard_normal(50_000) * 1e20).astype(np.float32)
    t = np.float32(2.0 ** -24)
    return {
        "normal": rng.standard_normal(200_003).astype(np.float32),
        "cancels to zero": np.concatenate([a, -a]),
        "cancels to one": np.concatenate([a, np.float32([1.0]), -a]),
        "tie": np.concatenate([np.float32([1.0, t]), np.zeros(70_001, np.float32)]),
        "beside a tie": np.concatenate([np.float32([1.0, t, 2.0 ** -60]), np.zeros(70_001, np.float32)]),
        "huge and small": np.tile(np.float32([1e30, 1.0, -1e30]), 30_000),
        "subnormal": np.full(100_000, 1e-45, np.float32),
        "subnormal and normal": np.concatenate([np.full(1_000, 1e-45, np.float32), np.float32([2.0 ** -120])]),
        "negative zeros": np.full(10_000, -0.0, np.float32),
        "overflow": np.full(100_000, 3e38, np.float32),
        "beside the overflow": np.tile(np.float32([3.4028235e38, 1e31, -1e31]), 10_000),
        "inf": np.tile(np.float32([1.0, np.inf, 2.0]), 10_000),
        "inf - inf": np.tile(np.float32([1.0, np.inf, -np.inf]), 10_000),
        "nan": np.tile(np.float32([1.0, np.nan, 2.0]), 10_000),
        "three": np.float32([3.0, -1.0, 3 * t]),
    }


@pytest.mark.parametrize("function", [F.SUM, F.L1], ids=lambda f: f.name)
def test_float32_sums_in_doubles_give_the_triples_bits(device, function, rng):
    """Where a CPU driver has 64-bit floats, FLOAT32 SUM and L1 run in doubles (each result proved
    correctly rounded, else computed again by the triples in the same dispatch): the reference's
    bits in every case, and the triples' (the same sum compiled with the device's "float64" off),
    over a whole array (lanes and chunks merged in the dispatch) and over one axis."""
    if not (device.is_cpu and device.properties["float64"]):
        pytest.skip("the double sums run on CPU drivers with 64-bit floats")
    for name, x in _double_sum_cases(rng).items():
        for data, axes in ((x, (0,)), (x[: x.size // 2 * 2].reshape(2, -1), (1,))):
            in_desc = TensorDesc(DataType.FLOAT32, data.shape)
            out_shape = tuple(1 if d in axes else s for d, s in enumerate(data.shape))
            compiled = device.create_operator(ReduceOperatorDesc(in_desc, TensorDesc(DataType.FLOAT32, out_shape),
                                                                 function, axes))
            assert compiled.doubles, (name, data.shape)
            got = _run(device, data, function, axes, DataType.FLOAT32)
            assert testing.same_bits(got, reference_reduce(data, function, axes)), (name, data.shape, got)
            device.properties["float64"] = False
            try:  # (strides given: a descriptor the device compiles anew, in triples)
                triples = _run(device, data, function, axes, DataType.FLOAT32,
                               in_strides=tuple(int(s) // 4 for s in data.strides))
            finally:
                device.properties["float64"] = True
            assert testing.same_bits(got, triples), (name, data.shape, got, triples)


@pytest.mark.parametrize("function", [F.SUM, F.L1], ids=lambda f: f.name)
def test_float32_sums_in_doubles_whose_first_loop_runs_on_its_own(device, function, rng):
    """Past DOUBLE_FIRST_WALK elements a walk's double sums run their first loop in a dispatch of
    its own (each lane's s, m and stopping block written, the dispatch after reading them): the
    reference's bits (one case run after run) for every kind of state a lane can carry, its values at the start
    and at the end of a walk (lanes' runs, their leftover blocks and a last partial block), over
    a whole array and over one axis whose second row starts off a 16-byte block."""
    if not (device.is_cpu and device.properties["float64"]):
        pytest.skip("the double sums run on CPU drivers with 64-bit floats")
    walk = compiled_selection.DOUBLE_FIRST_WALK + 4 * 64 * 3 + 3
    kept = ("normal", "cancels to zero", "cancels to one", "tie", "huge and small", "subnormal", "overflow",
            "inf - inf", "nan")  # (every kind of state a lane can carry; all cases: the test above)
    if function is F.L1:  # (the same code but for the terms' magnitudes: the lanes' kinds of term)
        kept = ("normal", "huge and small", "inf - inf", "nan")
    for name, case in ((n, c) for n, c in _double_sum_cases(rng).items() if n in kept):
        pad = np.zeros(max(0, walk - case.size), np.float32)
        for x in (np.concatenate([case, pad]), np.concatenate([pad, case])):
            for data, axes in ((x, (0,)), (np.concatenate([x, x[::-1]]).reshape(2, -1), (1,))):
                in_desc = TensorDesc(DataType.FLOAT32, data.shape)
                out_shape = tuple(1 if d in axes else s for d, s in enumerate(data.shape))
                compiled = device.create_operator(ReduceOperatorDesc(in_desc, TensorDesc(DataType.FLOAT32, out_shape),
                                                                     function, axes))
                assert compiled.doubles and compiled.double_first, (name, data.shape)
                expected = reference_reduce(data, function, axes)
                for _ in range(2 if name == "normal" else 1):  # (run after run: the same operator)
                    got = _run(device, data, function, axes, DataType.FLOAT32)
                    assert testing.same_bits(got, expected), (name, data.shape, got)


def test_the_device_says_whether_it_has_64_bit_floats(device):
    """`Device.properties["float64"]`: VkPhysicalDeviceFeatures.shaderFloat64, enabled on the
    device where it is there (the double sums need it); lavapipe has it."""
    assert isinstance(device.properties["float64"], bool)
    if "llvmpipe" in device.name:
        assert device.properties["float64"]
