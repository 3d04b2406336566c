"""Device-resident Tensors and recorded command lists."""
import operator

import numpy as np
import pytest

import dmlgpu
from dmlgpu import Binding, CommandList, DataType, Tensor, TensorDesc, ValidationError, testing
from dmlgpu.table import reference
from dmlgpu.table.operators import OPERATORS
from dmlgpu.table.reference import REFERENCES


def test_tensor_operators_stay_on_the_device(rng):
    a = testing.sample(DataType.INT32, (4, 5), rng)
    b = testing.sample(DataType.INT32, (5,), rng)
    ta, tb = Tensor.from_numpy(a), Tensor.from_numpy(b)
    assert isinstance(~ta, Tensor) and isinstance(ta ^ tb, Tensor)
    assert testing.same_bits((~ta).numpy(), reference.bit_not(a))
    assert testing.same_bits((ta ^ tb).numpy(), reference.bit_xor(a, b))
    assert testing.same_bits((b ^ ta).numpy(), reference.bit_xor(b, a))  # numpy on the left
    assert testing.same_bits(dmlgpu.sign(ta).numpy(), reference.sign(a))
    counted = dmlgpu.bit_count(ta, dtype=np.uint32)
    assert counted.dtype == np.uint32 and testing.same_bits(counted.numpy(), reference.bit_count(a, np.uint32))
    buffer = ta.buffer
    ta ^= tb  # in place: the output binds the input's range
    assert ta.buffer is buffer and testing.same_bits(ta.numpy(), reference.bit_xor(a, b))


def _python_operators():
    for op in OPERATORS:
        if op.python_operator:
            data_type, = testing.one_type_per_width(op, (DataType.INT32,), widths=(32,))
            yield pytest.param(op, data_type, id=f"{op.short}-{op.python_operator}")


@pytest.mark.parametrize("op, data_type", list(_python_operators()))
def test_python_operators_from_the_table(rng, op, data_type):
    """Each row's Python operator: `op(t)`, or `t op u`, `numpy op t` and `t op= u`."""
    python = getattr(operator, f"__{op.python_operator}__")  # operator.__xor__ is `^`
    if len(op.inputs) == 1:
        a = testing.sample(data_type, (3, 5), rng)
        got = python(Tensor.from_numpy(a))
        assert isinstance(got, Tensor) and testing.same_bits(got.numpy(), REFERENCES[op.short](a))
        return
    a, b = testing.sample(data_type, (3, 5), rng), testing.sample(data_type, (5,), rng)
    ta, tb = Tensor.from_numpy(a), Tensor.from_numpy(b)
    expected = REFERENCES[op.short](a, b)
    assert testing.same_bits(python(ta, tb).numpy(), expected)
    assert testing.same_bits(python(b, ta).numpy(), REFERENCES[op.short](b, a))  # numpy on the left
    buffer = ta.buffer
    ta = getattr(operator, f"__i{op.python_operator}__")(ta, tb)  # `ta ^= tb`
    assert ta.buffer is buffer and testing.same_bits(ta.numpy(), expected)


def test_tensor_argument_rules():
    t = Tensor.from_numpy(np.arange(6, dtype=np.uint8).reshape(2, 3))
    with pytest.raises(ValidationError, match="allowed: shape \\(2, 3\\) and data type UINT8"):
        dmlgpu.bit_not(t, out=Tensor.empty((3, 2), np.uint8))
    with pytest.raises(ValidationError, match="out is 'ndarray'"):
        dmlgpu.bit_not(t, out=np.empty((2, 3), np.uint8))
    with pytest.raises(ValidationError, match="does not support in-place"):
        dmlgpu.bit_count(t, out=t)
    with pytest.raises(ValidationError, match="BTensor.DataType is UINT16"):
        t ^ Tensor.from_numpy(np.zeros(3, np.uint16))
    with pytest.raises(ValidationError, match="Tensors of one device"):
        t ^ Tensor.from_numpy(np.zeros(3, np.uint8), device=dmlgpu.Device(t.device.index, private=True))


def test_a_reduction_of_a_new_tensor_of_a_seen_layout_plans_nothing(device, rng, monkeypatch):
    """Reductions (REDUCE through `dmlgpu.sum`, `argmax`, `mean`) of Tensors never seen before,
    of layouts seen before, are not planned again (no operator compiled or looked up, no memo
    miss), and a loop whose new results are dropped prepares no dispatch again (the results reuse
    the blocks of the dropped ones: the operator's remembered dispatches are re-aimed at them);
    the results are the reference's; a planned layout's buffers are still checked at each call."""
    from dmlgpu.kernels.compiled_selection import CompiledSelection
    from dmlgpu.table.operators import ReduceFunction as F
    from dmlgpu.table.reference import reduce as reference_reduce
    x = rng.standard_normal((64, 48)).astype(np.float32)
    calls = [(dmlgpu.sum, F.SUM, None), (dmlgpu.argmax, F.ARGMAX, 1), (dmlgpu.mean, F.AVERAGE, (0,))]
    wide = Tensor.from_numpy(np.concatenate([x, x, x]))

    def run(t):
        got = []
        for call, function, axis in calls:
            r = call(t, axis=axis)
            got.append(r.numpy())
            expected = reference_reduce(x, function, tuple(range(2)) if axis is None else
                                        (axis,) if isinstance(axis, int) else axis)
            assert testing.same_bits(got[-1].reshape(-1), expected.reshape(-1).astype(got[-1].dtype)), call
        return got

    run(Tensor.from_numpy(x))  # each layout planned here
    planned, prepared = [], []
    create, launches = device.create_operator, CompiledSelection.launches
    monkeypatch.setattr(device, "create_operator", lambda *args, **kwargs: planned.append(args) or create(*args, **kwargs))
    monkeypatch.setattr(CompiledSelection, "launches", lambda self, *a, **k: prepared.append(self) or launches(self, *a, **k))
    misses = dmlgpu.layout.memo.stats()["tensor_plans"]["misses"]
    for _ in range(3):
        run(Tensor.from_numpy(x))
        run(wide[64:128])  # a view 12 KiB into another buffer: the same layout
    assert planned == [] and dmlgpu.layout.memo.stats()["tensor_plans"]["misses"] == misses
    t = Tensor.from_numpy(x)
    prepared.clear()
    for _ in range(20):
        r = dmlgpu.sum(t)  # the last result dropped each time
    assert len(prepared) <= 4, len(prepared)  # (a few blocks in turn)
    assert testing.same_bits(r.numpy().reshape(-1), reference_reduce(x, F.SUM, (0, 1)).reshape(-1))
    gone = Tensor.from_numpy(x)
    gone.buffer.release()
    with pytest.raises(ValidationError, match="released"):
        dmlgpu.sum(gone)


def test_a_new_tensor_of_a_seen_layout_plans_nothing(device, rng, monkeypatch):
    """Calls on Tensors never seen before, of layouts seen before, are not planned again (no
    operator compiled or looked up, no memo miss); a new layout is planned once; validation of a
    planned layout still raises before anything is queued."""
    x, y = testing.sample(DataType.UINT32, (1024,), rng), testing.sample(DataType.UINT32, (1024,), rng)

    def chain(t, s, o):
        u = ~t
        u = u ^ s
        u = (u ^ 0x5A5A5A5A) >> 3
        u = ~t ^ u
        dmlgpu.bit_not(o, out=o)
        return u

    def expected(t):
        u = ((~t ^ y) ^ np.uint32(0x5A5A5A5A)) >> 3
        return ~t ^ u

    chain(Tensor.from_numpy(x), Tensor.from_numpy(y), Tensor.from_numpy(x))  # each layout planned here
    planned = []
    create = device.create_operator
    monkeypatch.setattr(device, "create_operator", lambda *args, **kwargs: planned.append(args) or create(*args, **kwargs))
    misses = dmlgpu.layout.memo.stats()["tensor_plans"]["misses"]
    wide = Tensor.from_numpy(np.concatenate([y, y, y]))  # a view 4 KiB into another buffer: the same layout
    for _ in range(3):
        o = Tensor.from_numpy(x)
        got = chain(Tensor.from_numpy(x), wide[1024:2048], o)
        assert testing.same_bits(got.numpy(), expected(x)) and testing.same_bits(o.numpy(), ~x)
        assert got.layout == Tensor(got.buffer, got.shape, got.data_type, got.offset, got.strides).layout
    assert planned == [] and dmlgpu.layout.memo.stats()["tensor_plans"]["misses"] == misses
    for data in (np.concatenate([y, y]), np.concatenate([x, x])):  # views 4 bytes into their 16-byte unit
        assert testing.same_bits((~Tensor.from_numpy(data)[1:1025]).numpy(), ~data[1:1025])
        assert len(planned) == 1  # a new layout: planned once
    gone = Tensor.from_numpy(x)
    gone.buffer.release()
    with pytest.raises(ValidationError, match="released"):
        ~gone  # a planned layout; the buffer is checked at each call
    with pytest.raises(ValidationError, match="allowed: shape \\(1024,\\)"):
        dmlgpu.bit_not(Tensor.from_numpy(x), out=Tensor.from_numpy(x[:512]))


def test_a_planned_call_into_a_given_output_checks_what_its_layout_does_not_fix(device, rng):
    """`out=` calls of a layout planned before take the given-output lane (no lists, no plan):
    each call's buffers are still checked (released ones raise), an output overlapping an input
    at another offset of the same buffer goes to the full path (which refuses it), and in-place forms, Python
    scalars and two inputs give numpy's bits every time."""
    x, y = testing.sample(DataType.UINT32, (1024,), rng), testing.sample(DataType.UINT32, (1024,), rng)
    for _ in range(3):  # the first call of each layout plans it; the next ones take the lane
        o, t, u = Tensor.from_numpy(x), Tensor.from_numpy(x), Tensor.from_numpy(y)
        dmlgpu.bit_not(t, out=o)
        assert testing.same_bits(o.numpy(), ~x)
        dmlgpu.bit_not(o, out=o)
        assert testing.same_bits(o.numpy(), x)
        dmlgpu.bit_xor(t, u, out=o)
        assert testing.same_bits(o.numpy(), x ^ y)
        dmlgpu.bit_xor(u, t, out=t)  # the output is the second input
        assert testing.same_bits(t.numpy(), x ^ y)
        dmlgpu.bit_xor(o, 0x5A5A5A5A, out=o)
        assert testing.same_bits(o.numpy(), x ^ y ^ np.uint32(0x5A5A5A5A))
        u ^= t
        assert testing.same_bits(u.numpy(), x)
    both = Tensor.from_numpy(np.concatenate([x, x]))
    dmlgpu.bit_not(both[:1024], out=both[1024:])  # the same buffer, apart: planned
    assert testing.same_bits(both.numpy()[1024:], ~x)
    for _ in range(2):  # the same layouts, overlapping at another offset: the full path refuses it
        both = Tensor.from_numpy(np.concatenate([x, x]))
        with pytest.raises(ValidationError, match="only over an identical range"):
            dmlgpu.bit_not(both[4:1028], out=both[:1024])
    gone, o = Tensor.from_numpy(x), Tensor.from_numpy(x)
    gone.buffer.release()
    with pytest.raises(ValidationError, match="released"):
        dmlgpu.bit_not(gone, out=o)
    with pytest.raises(ValidationError, match="released"):
        dmlgpu.bit_not(o, out=gone)


def test_a_plan_dropped_from_the_memo_frees_its_scalars_at_once(device, rng):
    """A planned Tensor call with a Python scalar holds the scalar's device buffer; clearing the
    memo frees it by reference counting alone (no cycle through the plan that only the garbage
    collector would break), for one and for two inputs."""
    import gc

    x = testing.sample(DataType.UINT32, (1024,), rng)
    t = Tensor.from_numpy(x)
    dmlgpu.layout.memo.clear()
    device.synchronize()
    live = device.memory_stats()["live_buffers"]
    gc.disable()
    try:
        for _ in range(2):  # planned, then the planned path
            assert testing.same_bits((~t).numpy(), ~x)
            assert testing.same_bits((t ^ 0x1234567).numpy(), x ^ np.uint32(0x1234567))
            assert testing.same_bits((0x7654321 & t).numpy(), np.uint32(0x7654321) & x)
        assert device.memory_stats()["live_buffers"] > live  # the scalars' buffers, held by the plans
        dmlgpu.layout.memo.clear()
        device.synchronize()
        assert device.memory_stats()["live_buffers"] == live
    finally:
        gc.enable()


def _not_and_xor(device, n):
    desc = TensorDesc(DataType.UINT32, [n])
    not_op = device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
    xor_op = device.create_operator(dmlgpu.ElementWiseBitXorOperatorDesc(desc, desc, desc))
    return not_op, xor_op, n * 4


@pytest.mark.parametrize("fuse", [False, True])
def test_dependent_chain_in_place_is_right_every_time(device, rng, fuse):
    not_op, xor_op, size = _not_and_xor(device, 4099)
    x = testing.sample(DataType.UINT32, (4099,), rng)
    key = testing.sample(DataType.UINT32, (4099,), rng)
    bx, bkey = device.upload(x), device.upload(key)
    commands = CommandList(device, fuse=fuse)
    for _ in range(3):  # x = ~x ^ key, three times: each step depends on the one before
        commands.record(not_op, [Binding(bx, 0, size)], [Binding(bx, 0, size)])
        commands.record(xor_op, [Binding(bx, 0, size), Binding(bkey, 0, size)], [Binding(bx, 0, size)])
    assert commands.dispatches == 6
    # Unfused: a barrier between each dependent pair; fused: one dispatch, nothing stored between.
    assert (commands.barriers, commands.gpu_dispatches) == ((0, 1) if fuse else (5, 6))
    expected = x
    for run in range(4):
        commands.execute()
        for _ in range(3):
            expected = reference.bit_xor(reference.bit_not(expected), key)
        assert testing.same_bits(bx.read(0, size).view(np.uint32), expected), f"run {run}"
    commands.release()


def test_barriers_only_where_executions_depend(device, rng):
    if dmlgpu.debug_layer.requested():
        pytest.skip("under DMLGPU_VALIDATION dependencies are whole arenas (what the layer sees)")
    not_op, _, size = _not_and_xor(device, 64)
    data = testing.sample(DataType.UINT32, (256,), rng)
    source = device.upload(data)
    target = device.allocate(size * 4)
    commands = CommandList(device, fuse=False)
    for k in range(4):  # four disjoint outputs from one shared input: independent
        commands.record(not_op, [Binding(source, 0, size)], [Binding(target, k * size, size)])
    assert commands.barriers == 0
    # Writes what the four read (write-after-read): one barrier, which orders all earlier work.
    commands.record(not_op, [Binding(source, size, size)], [Binding(source, 0, size)])
    assert commands.barriers == 1
    # Reads and rewrites outputs of work before that barrier: already ordered, no new barrier.
    commands.record(not_op, [Binding(target, 0, size)], [Binding(target, size, size)])
    assert commands.barriers == 1
    # Reads what the write-after-read step wrote (read-after-write): a second barrier.
    commands.record(not_op, [Binding(source, 0, size)], [Binding(target, 0, size)])
    assert commands.barriers == 2
    commands.execute()
    inverted = reference.bit_not(data[:64])
    expected_target = np.concatenate([data[64:128], data[:64], inverted, inverted])
    assert testing.same_bits(target.read().view(np.uint32), expected_target)
    expected_source = np.concatenate([reference.bit_not(data[64:128]), data[64:]])
    assert testing.same_bits(source.read().view(np.uint32), expected_source)


def test_fused_list_is_one_dispatch_with_the_same_results(device, rng):
    not_op, _, size = _not_and_xor(device, 64)
    data = testing.sample(DataType.UINT32, (256,), rng)
    source, target = device.upload(data), device.allocate(size * 4)
    commands = CommandList(device)
    for k in range(4):
        commands.record(not_op, [Binding(source, 0, size)], [Binding(target, k * size, size)])
    commands.record(not_op, [Binding(source, size, size)], [Binding(source, 0, size)])
    commands.record(not_op, [Binding(target, 0, size)], [Binding(target, size, size)])
    commands.record(not_op, [Binding(source, 0, size)], [Binding(target, 0, size)])
    assert commands.gpu_dispatches == 1  # one graph, whatever arenas the buffers lie in
    commands.execute()
    inverted = reference.bit_not(data[:64])
    assert testing.same_bits(target.read().view(np.uint32), np.concatenate([data[64:128], data[:64], inverted, inverted]))
    assert testing.same_bits(source.read().view(np.uint32),
                             np.concatenate([reference.bit_not(data[64:128]), data[64:]]))


@pytest.mark.parametrize("seed", range(6))
def test_random_chains_give_the_sequential_answer(device, seed):
    """Random runs of bitwise operators over slots of one buffer, some straddling two slots (never
    fused) and some shifts (never fused): fused and unfused lists give the host's sequential
    answer, bit for bit, on every replay."""
    rng = np.random.default_rng(seed)
    words, slots = 64, 6
    desc = TensorDesc(DataType.UINT32, [words])
    ops = [op for op in OPERATORS if op.same_type and DataType.UINT32 in op.newest.input_types]
    compiled = {op.short: device.create_operator(dmlgpu.describe.operator_descs.DESC_CLASSES[op.name](
        *[desc] * (len(op.inputs) + 1))) for op in ops}
    starts = [k * 4 * words for k in range(slots)] + [4 * words * k + 2 * words for k in range(slots - 1)]
    steps = []
    while len(steps) < 40:
        op = ops[rng.integers(len(ops))]
        chosen = [int(starts[rng.integers(len(starts) if rng.random() < 0.2 else slots)])
                  for _ in range(len(op.inputs) + 1)]
        out = chosen[-1]
        if any(s != out and abs(s - out) < 4 * words for s in chosen[:-1]):
            continue  # an output partly over its own input: DirectML rejects it
        steps.append((op, chosen))
    data = testing.sample(DataType.UINT32, (slots * words,), rng)
    expected = data.copy()
    results = {}
    for fuse in (True, False):
        buffer = device.upload(data)
        commands = CommandList(device, fuse=fuse)
        for op, chosen in steps:
            commands.record(compiled[op.short], [Binding(buffer, s, 4 * words) for s in chosen[:-1]],
                            [Binding(buffer, chosen[-1], 4 * words)])
        runs = []
        for _ in range(2):
            commands.execute()
            runs.append(buffer.read().view(np.uint32).copy())
        results[fuse] = (runs, commands.gpu_dispatches)
        commands.release()
    for _ in range(2):
        for op, chosen in steps:
            args = [expected[s // 4:s // 4 + words].copy() for s in chosen[:-1]]
            expected[chosen[-1] // 4:chosen[-1] // 4 + words] = REFERENCES[op.short](*args)
        for fuse in (True, False):
            assert testing.same_bits(results[fuse][0].pop(0), expected), f"fuse={fuse}"
    assert results[False][1] == len(steps) and results[True][1] < len(steps)


def test_thousand_small_dependent_operations(device, rng):
    not_op, _, size = _not_and_xor(device, 16)
    x = testing.sample(DataType.UINT32, (16,), rng)
    buffer = device.upload(x)
    commands = CommandList(device)
    for _ in range(1001):
        commands.record(not_op, [Binding(buffer, 0, size)], [Binding(buffer, 0, size)])
    commands.execute()
    assert testing.same_bits(buffer.read(0, size).view(np.uint32), reference.bit_not(x))  # odd count
    commands.execute()
    assert testing.same_bits(buffer.read(0, size).view(np.uint32), x)


def test_released_buffer_makes_the_list_unusable(device):
    not_op, _, size = _not_and_xor(device, 16)
    buffer = device.allocate(size)
    commands = CommandList(device)
    commands.record(not_op, [Binding(buffer, 0, size)], [Binding(buffer, 0, size)])
    buffer.release()
    with pytest.raises(ValidationError, match="released buffer"):
        commands.execute()
