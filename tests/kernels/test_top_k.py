"""TOP_K1, generated from its row: every (input type, index type) dmlgpu computes at the newest
level, both directions, K from 1 to one less than the axis (the page: "greater than 0, but less
than the number of elements ... along ... Axis"), many ties, bit for bit against
dmlgpu.table.reference.top_k with both outputs poisoned first; the front end; validation."""
import numpy as np
import pytest
from conftest import POISON

import dmlgpu
from dmlgpu import Binding, DataType, TensorDesc, ValidationError, testing
from dmlgpu.describe.operator_descs import TopK1OperatorDesc
from dmlgpu.kernels.variants import SELECTION_WORKGROUP_SIZE, TOP_K_GROUP_SLOTS, TOP_K_GROUP_WALK
from dmlgpu.table.operators import TOP_K, AxisDirection
from dmlgpu.table.reference import order_key
from dmlgpu.table.reference import top_k as reference_top_k

CASES = TOP_K.computed_cases()


def _run(device, x, axis, k, direction, index_type):
    data_type = DataType.from_numpy(x.dtype)
    shape = tuple(k if d == axis else s for d, s in enumerate(x.shape))
    descs = [TensorDesc(data_type, x.shape), TensorDesc(data_type, shape), TensorDesc(index_type, shape)]
    op = device.create_operator(TopK1OperatorDesc(*descs, axis, k, direction))
    buffers = [device.upload(x)] + [device.upload(np.full(d.total_size, POISON, np.uint8)) for d in descs[1:]]
    op.execute([Binding(buffers[0])], [Binding(b) for b in buffers[1:]])
    count = int(np.prod(shape))
    return (buffers[1].read()[:count * data_type.size].view(data_type.numpy).reshape(shape),
            buffers[2].read()[:count * index_type.size].view(index_type.numpy).reshape(shape))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[1].name.lower()}-{c[2].name.lower()}")
@pytest.mark.parametrize("direction", list(AxisDirection), ids=lambda d: d.name.lower())
def test_matches_reference(device, case, direction, rng):
    _, in_type, index_type = case
    x = testing.sample(in_type, (3, 9, 2), rng)
    x[1] = x[1, :1]  # a sequence of one repeated value: all ties
    x.reshape(-1)[::4] = x.reshape(-1)[1]  # and many ties elsewhere
    for axis, k in ((1, 1), (1, 4), (1, 8), (0, 2), (2, 1)):
        values, indices = _run(device, x, axis, k, direction, index_type)
        expected = reference_top_k(x, axis, k, direction, index_type.numpy)
        assert testing.same_bits(values, expected[0]) and testing.same_bits(indices, expected[1]), (axis, k)


#: The orders that drive the one-pass selection's insertions differently: random (about K ln(n/K)
#: insertions), each direction's worst (every element inserted, at the front), its best (none after
#: the first K), all ties (none after the first K either), and sorted runs (a burst per run).
ORDERS = ("random", "ascending", "descending", "equal", "runs")


def _ordered(x: np.ndarray, order: str, axis: int) -> np.ndarray:
    key = order_key(x)  # sorted by the kernel's own order (floats: -NaN < -inf < ... < +NaN)
    if order == "random":
        return x
    if order == "equal":
        return np.broadcast_to(x.take([0], axis=axis), x.shape).copy()
    if order == "runs":
        runs = np.stack(np.split(np.moveaxis(x, axis, 0), 6), axis=0)  # 6 runs along the axis
        runs = np.take_along_axis(runs, np.argsort(order_key(runs), axis=1, kind="stable"), axis=1)
        return np.moveaxis(runs.reshape(-1, *runs.shape[2:]), 0, axis)
    ranked = np.take_along_axis(x, np.argsort(key, axis=axis, kind="stable"), axis=axis)
    return ranked if order == "ascending" else np.flip(ranked, axis=axis).copy()


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("in_type, index_type", [(DataType.UINT8, DataType.UINT32), (DataType.INT16, DataType.UINT64),
                                                 (DataType.FLOAT32, DataType.UINT32), (DataType.INT64, DataType.UINT64),
                                                 (DataType.FLOAT16, DataType.UINT32)],
                         ids=lambda t: t.name.lower())
@pytest.mark.parametrize("n", [600, TOP_K_GROUP_WALK + 8], ids=["invocation", "workgroup"])
def test_long_sequences_in_every_order(device, order, in_type, index_type, n, rng):
    """Sequences of n (three interleaved in each row: sub-word outputs share words), K from 1
    to n - 1, both directions, in every order, bit for bit against the reference; from
    TOP_K_GROUP_WALK elements, K up to TOP_K_GROUP_SLOTS runs a workgroup per sequence (K of 16
    and 17: all its invocations; 37: 27 of them; the most slots: one)."""
    x = _ordered(testing.sample(in_type, (2, n, 3), rng), order, 1)
    for direction in AxisDirection:
        for k in sorted({1, TOP_K_GROUP_SLOTS // SELECTION_WORKGROUP_SIZE, 17, 37, TOP_K_GROUP_SLOTS,
                         TOP_K_GROUP_SLOTS + 1, n - 1} & set(range(1, n))):
            values, indices = _run(device, x, 1, k, direction, index_type)
            expected = reference_top_k(x, 1, k, direction, index_type.numpy)
            assert testing.same_bits(values, expected[0]) and testing.same_bits(indices, expected[1]), (direction, k)


@pytest.mark.parametrize("order", ("random", "ascending", "equal"))
@pytest.mark.parametrize("in_type, index_type", [(DataType.UINT8, DataType.UINT32), (DataType.INT16, DataType.UINT64),
                                                 (DataType.FLOAT32, DataType.UINT32), (DataType.INT64, DataType.UINT64),
                                                 (DataType.FLOAT16, DataType.UINT32)],
                         ids=lambda t: t.name.lower())
def test_sorted_selection_in_every_order(device, order, in_type, index_type, rng, monkeypatch):
    """TOP_K_SORT (what a GPU runs for every sequence of 512 elements or more; a CPU driver keeps heaps)
    forced on this device, bit for bit against the reference: 2,500 elements (padded to 4,096,
    four blocks) cover each of its steps: K up to 512 folds blocks (a first pass, then folds, the
    last writing the outputs); 513 and 1,024 sort runs of a block and halve pairs of them twice (as a
    merge reads them); 2,000 sorts runs of two blocks (an exchange across blocks, a merge) then
    halves a pair (as an exchange reads it); n - 1
    sorts the whole sequence (two stages across blocks)."""
    from dmlgpu.kernels import compiled_selection
    for cpu in (False, True):
        monkeypatch.setitem(compiled_selection.TOP_K_SORT_WALK, cpu, 512)
    n = 2500
    x = _ordered(testing.sample(in_type, (2, n, 3), rng), order, 1)
    for direction in AxisDirection:
        for k in (1, 17, TOP_K_GROUP_SLOTS // 2, TOP_K_GROUP_SLOTS // 2 + 1, TOP_K_GROUP_SLOTS, 2000, n - 1):
            values, indices = _run(device, x, 1, k, direction, index_type)
            expected = reference_top_k(x, 1, k, direction, index_type.numpy)
            assert testing.same_bits(values, expected[0]) and testing.same_bits(indices, expected[1]), (direction, k)


def test_sort_steps_cover_every_pass():
    """The planner's passes for the cases above: the steps each K takes (the test's claim)."""
    from dmlgpu.kernels.top_k_sort import top_k_sort_steps
    from dmlgpu.kernels.variants import TOP_K_SORT_STEPS
    names = {v: k for k, v in TOP_K_SORT_STEPS.items()}

    def steps(k):
        found, entries = top_k_sort_steps(6, 2500, k)
        assert entries == 6 * (4096 + 2048)
        assert [out for *_, out in found] == [False] * (len(found) - 1) + [True]  # the last writes the outputs
        return [names[words["sort_step"]].removeprefix("TOP_K_") for words, *_ in found]
    assert steps(1) == steps(256) == ["FIRST", "FOLD"]  # 4 blocks -> 4 runs (1,024 entries at most) -> 1
    assert steps(512) == ["FIRST", "FOLD", "FOLD"]  # 4 blocks -> 2,048 entries -> 2 runs -> 1
    assert steps(513) == steps(1024) == ["FIRST", "MERGE", "MERGE"]  # each halving merge reads pairs of runs
    assert steps(2000) == ["FIRST", "EXCHANGE", "MERGE", "EXCHANGE", "MERGE"]  # the second exchange halves
    assert steps(2499) == ["FIRST", "EXCHANGE", "MERGE", "EXCHANGE", "EXCHANGE", "MERGE"]
    assert [s["sort_entries"] for s, *_ in top_k_sort_steps(1, 1 << 20, 10)[0]] == [1 << 20, 1 << 14, 256]  # -> 16
    assert len(top_k_sort_steps(1, 1 << 20, 10)[0]) == 3


def test_directml_example(device):
    x = np.array([[[[0, 1, 10, 11], [3, 2, 9, 8], [4, 5, 6, 7]]]], np.float32)
    values, indices = _run(device, x, 3, 2, AxisDirection.DECREASING, DataType.UINT32)
    assert values.tolist() == [[[[11, 10], [9, 8], [7, 6]]]] and indices.tolist() == [[[[3, 2], [2, 3], [3, 2]]]]
    values, indices = _run(device, x, 2, 2, AxisDirection.DECREASING, DataType.UINT32)
    assert values.tolist() == [[[[4, 5, 10, 11], [3, 2, 9, 8]]]] and indices.tolist() == [[[[2, 2, 0, 0], [1, 1, 1, 1]]]]


@pytest.mark.parametrize("largest", [True, False])
def test_front_end_ties_by_ascending_index(largest, rng):
    x = rng.integers(0, 3, size=(5, 40)).astype(np.uint16)
    values, indices = dmlgpu.top_k(x, 7, largest=largest)
    key = -x.astype(np.int64) if largest else x
    order = np.argsort(key, axis=-1, kind="stable")[:, :7]
    assert np.array_equal(indices, order) and np.array_equal(values, np.take_along_axis(x, order, -1))
    t_values, t_indices = dmlgpu.top_k(dmlgpu.Tensor.from_numpy(x), 7, largest=largest)
    assert np.array_equal(t_values.numpy(), values) and np.array_equal(t_indices.numpy(), indices)


@pytest.mark.parametrize("k, axis", [(0, -1), (5, -1), (6, -1), (True, -1), (2, 2), (2, (0, 1)), (2, (1,)), (2, 1.0)])
def test_front_end_validation(k, axis):
    with pytest.raises(ValidationError):
        dmlgpu.top_k(np.zeros((2, 5), np.int32), k, axis=axis)


@pytest.mark.parametrize("field, attrs", [("Axis", (2, 1, 1)), ("K", (1, 0, 1)), ("K", (1, 5, 1)), ("K", (1, 6, 1)),
                                          ("AxisDirection", (1, 1, 2))])
def test_validation(field, attrs):
    descs = [TensorDesc(DataType.INT32, (2, 5)), TensorDesc(DataType.INT32, (2, 1)), TensorDesc(DataType.UINT32, (2, 1))]
    with pytest.raises(ValidationError) as info:
        dmlgpu.validate(TopK1OperatorDesc(*descs, *attrs))
    assert info.value.field == field


def test_validation_of_output_types_and_sizes():
    x = TensorDesc(DataType.INT32, (2, 5))
    with pytest.raises(ValidationError) as info:
        dmlgpu.validate(TopK1OperatorDesc(x, TensorDesc(DataType.INT32, (2, 2)), TensorDesc(DataType.INT32, (2, 2)), 1, 2, 0))
    assert info.value.tensor == "OutputIndexTensor" and info.value.field == "DataType"
    with pytest.raises(ValidationError) as info:
        dmlgpu.validate(TopK1OperatorDesc(x, TensorDesc(DataType.INT32, (2, 3)), TensorDesc(DataType.UINT32, (2, 2)), 1, 2, 0))
    assert info.value.tensor == "OutputValueTensor" and info.value.field == "Sizes"
    with pytest.raises(ValidationError) as info:
        dmlgpu.validate(TopK1OperatorDesc(x, TensorDesc(DataType.UINT32, (2, 2)), TensorDesc(DataType.UINT32, (2, 2)), 1, 2, 0))
    assert info.value.field == "DataType"
