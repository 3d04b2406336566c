"""Command lists fuse runs of any table operators through the graph compiler; planning is
O(n log n) in recorded steps."""
from __future__ import annotations

import time

import numpy as np
import pytest

import dmlgpu
from dmlgpu import Binding, CommandList, DataType, TensorDesc, testing
from dmlgpu.describe.operator_descs import DESC_CLASSES
from dmlgpu.table.operators import BY_SHORT
from dmlgpu.table.reference import REFERENCES

from graph_cases import int4_unpack

N = 37  # elements per tensor: not a whole number of 16-byte vectors


def operator(device, short, data_type, out_type=None):
    op = BY_SHORT[short]
    t = TensorDesc(data_type, (N,))
    out = TensorDesc(out_type or data_type, (N,))
    return device.create_operator(DESC_CLASSES[op.name](*[t] * len(op.inputs), out))


def run_reference(steps, memory):
    """Each step (short, [input slots], output slot, out dtype) run in order on host arrays."""
    for short, ins, out, out_type in steps:
        args = [memory[k].copy() for k in ins]
        function = REFERENCES[short]
        memory[out] = function(*args) if BY_SHORT[short].same_type else function(*args, out_type)
    return memory


@pytest.mark.parametrize("fuse", [True, False])
def test_mixed_steps_of_every_operator_are_one_dispatch(device, rng, fuse):
    """x = ~x; x ^= k; x <<= s; x >>= s; y = sign(x); c = bit_count(y) -> uint8; c ^= c8: every
    operator in one list, one fused dispatch, the sequential answer on every replay."""
    u32, u8 = DataType.UINT32, DataType.UINT8
    slots = {"x": u32, "k": u32, "s": u32, "y": u32, "c": u8, "c8": u8}
    data = {name: testing.sample(t, (N,), rng) for name, t in slots.items()}
    data["s"] = rng.integers(0, 64, N, dtype=np.uint32)
    buffers = {name: device.upload(v) for name, v in data.items()}
    size = {name: N * t.size for name, t in slots.items()}
    steps = [("bit_not", ["x"], "x", None), ("bit_xor", ["x", "k"], "x", None), ("bit_shift_left", ["x", "s"], "x", None),
             ("bit_shift_right", ["x", "s"], "x", None), ("sign", ["x"], "y", None),
             ("bit_count", ["y"], "c", np.uint8), ("bit_xor", ["c", "c8"], "c", None)]
    commands = CommandList(device, fuse=fuse)
    for short, ins, out, out_type in steps:
        compiled = operator(device, short, slots[ins[0]], slots[out])
        commands.record(compiled, [Binding(buffers[k], 0, -(-size[k] // 4) * 4) for k in ins],
                        [Binding(buffers[out], 0, -(-size[out] // 4) * 4)])
    assert commands.gpu_dispatches == (1 if fuse else len(steps))
    expected = {k: v.copy() for k, v in data.items()}
    for _ in range(2):
        commands.execute()
        expected = run_reference(steps, expected)
        for name, t in slots.items():
            got = buffers[name].read(0, size[name]).view(t.numpy)
            assert testing.same_bits(got, expected[name]), name


def test_thousand_dependent_steps_cycling_every_operator(device, rng):
    u32 = DataType.UINT32
    ops = {short: operator(device, short, u32) for short in
           ("bit_not", "bit_xor", "bit_shift_left", "bit_shift_right", "sign", "bit_count")}
    x, k = testing.sample(u32, (N,), rng), rng.integers(0, 2**32, N, dtype=np.uint32)
    buffers = {"x": device.upload(x), "k": device.upload(k), "y": device.allocate(N * 4)}
    size = N * 4
    cycle = [("bit_not", ["x"], "x"), ("bit_xor", ["x", "k"], "x"), ("bit_shift_left", ["x", "k"], "x"),
             ("bit_shift_right", ["x", "k"], "x"), ("sign", ["x"], "x"), ("bit_xor", ["x", "k"], "x"),
             ("bit_count", ["x"], "y"), ("bit_xor", ["y", "k"], "x")]
    commands = CommandList(device)
    steps = []
    for i in range(1000):
        short, ins, out = cycle[i % len(cycle)]
        commands.record(ops[short], [Binding(buffers[n], 0, size) for n in ins], [Binding(buffers[out], 0, size)])
        steps.append((short, ins, out, np.uint32))
    made = device.pipeline_stats()["pipelines_created"]
    assert commands.gpu_dispatches <= 1000 // 40  # planned: runs compiled
    commands.execute()
    # Runs are cut at a multiple of the list's period (8): every full run is one program, so
    # one pipeline serves them all, plus one for the last, shorter run (was one per phase).
    assert device.pipeline_stats()["pipelines_created"] - made <= 2
    expected = run_reference(steps, {"x": x.copy(), "k": k, "y": np.zeros(N, np.uint32)})
    for name in ("x", "y"):
        assert testing.same_bits(buffers[name].read(0, N * 4).view(np.uint32), expected[name]), name


@pytest.mark.parametrize("fuse", [False, True])
def test_many_independent_steps_plan_in_seconds(device, fuse):
    """Planning was O(n^2) (100k steps: about 30 minutes, so 25k about 2 minutes); now sorted
    interval sets (25k steps plan in about a second)."""
    count = 25_000
    compiled = operator(device, "bit_not", DataType.UINT32)
    size = 160  # 37 elements, bound as 160 bytes each
    source = device.allocate(size)
    target = device.allocate(size * count)
    commands = CommandList(device, fuse=fuse)
    for i in range(count):
        commands.record(compiled, [Binding(source, 0, size)], [Binding(target, i * size, size)])
    start = time.perf_counter()
    dispatches = commands.gpu_dispatches
    elapsed = time.perf_counter() - start
    if not dmlgpu.debug_layer.requested():  # there dependencies are whole arenas, as the layer sees them
        assert commands.barriers == 0
    assert dispatches == (count if not fuse else -(-count // 8))
    assert elapsed < 15, f"planning {count} steps took {elapsed:.1f} s"
    commands.release()


def test_a_compiled_graph_records_like_an_operator(device, rng):
    """An int4-unpack graph recorded between two plain executions: the list's answer is the
    sequential one."""
    n = 64
    graph = device.compile_graph(int4_unpack(n))
    w = rng.integers(0, 256, n, dtype=np.uint8)
    bw, lo, hi = device.upload(w), device.allocate(n), device.allocate(n)
    desc = TensorDesc(DataType.UINT8, (n,))
    invert = device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
    commands = CommandList(device)
    commands.record(invert, [Binding(bw)], [Binding(bw)])
    commands.record(graph, [Binding(bw)], [Binding(lo), Binding(hi)])
    commands.record(invert, [Binding(lo)], [Binding(lo)])
    commands.execute()
    inverted = ~w
    assert testing.same_bits(lo.read().view(np.uint8), ~(inverted & 15))
    assert testing.same_bits(hi.read().view(np.uint8), inverted >> 4)
    assert commands.barriers == 2 or dmlgpu.debug_layer.requested()


@pytest.mark.parametrize("seed", range(4))
def test_barriers_match_a_pairwise_planner(device, seed):
    """Random reads and writes over one buffer (ranges that coincide, overlap in part or not at
    all): the interval planner puts barriers exactly where a pairwise comparison does."""
    if dmlgpu.debug_layer.requested():
        pytest.skip("under DMLGPU_VALIDATION dependencies are whole arenas")
    rng = np.random.default_rng(seed)
    words = 16
    desc = TensorDesc(DataType.UINT32, (words,))
    compiled = device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
    buffer = device.allocate(64 * 64)
    commands = CommandList(device, fuse=False)
    expected, reads, writes = 0, [], []
    for _ in range(300):
        a, out = (int(rng.integers(0, 60)) * 64 for _ in range(2))
        if a != out and abs(a - out) < 64:
            continue  # DirectML rejects an output partly over its input
        commands.record(compiled, [Binding(buffer, a, 64)], [Binding(buffer, out, 64)])
        r, w = (a, a + 64), (out, out + 64)

        def hit(span, spans):
            return any(span[0] < s[1] and s[0] < span[1] for s in spans)
        if hit(r, writes) or hit(w, writes) or hit(w, reads):
            expected += 1
            reads, writes = [], []
        reads.append(r)
        writes.append(w)
    assert commands.barriers == expected


@pytest.mark.parametrize("fuse", [True, False])
def test_replays_are_right_and_a_buffer_released_between_them_is_refused(device, rng, fuse):
    """A replay checks and tracks each distinct bound buffer once (not each step): every
    replay is right, and releasing a buffer bound by one step in the middle of the list after
    a replay makes the next one refused, as before the first."""
    u32 = DataType.UINT32
    ops = {short: operator(device, short, u32) for short in ("bit_not", "bit_xor")}
    x, k = testing.sample(u32, (N,), rng), rng.integers(0, 2**32, N, dtype=np.uint32)
    size = N * 4
    bx, bk, middle = device.upload(x), device.upload(k), device.allocate(size)
    commands = CommandList(device, fuse=fuse)
    for i in range(200):
        if i == 100:  # the only step binding `middle`
            commands.record(ops["bit_not"], [Binding(bx, 0, size)], [Binding(middle, 0, size)])
        else:
            commands.record(ops["bit_xor"], [Binding(bx, 0, size), Binding(bk, 0, size)], [Binding(bx, 0, size)])
    launches = commands.recorded_launches()
    assert len(launches) == commands.gpu_dispatches == (200 if not fuse else len(launches))
    assert fuse == (len(launches) < 200)
    expected = x.copy()
    for _ in range(3):
        commands.execute()
        for i in range(200):
            if i == 100:
                expected_middle = REFERENCES["bit_not"](expected)
            else:
                expected = REFERENCES["bit_xor"](expected, k)
        assert testing.same_bits(bx.read(0, size).view(np.uint32), expected)
        assert testing.same_bits(middle.read(0, size).view(np.uint32), expected_middle)
    middle.release()
    with pytest.raises(dmlgpu.ValidationError, match="released buffer"):
        commands.execute()
    commands.release()


def test_a_step_recorded_after_a_replay_binds_its_buffers_too(device, rng):
    u32 = DataType.UINT32
    not_op = operator(device, "bit_not", u32)
    size = N * 4
    x = testing.sample(u32, (N,), rng)
    bx, late = device.upload(x), device.allocate(size)
    commands = CommandList(device)
    commands.record(not_op, [Binding(bx, 0, size)], [Binding(bx, 0, size)])
    commands.execute()
    commands.record(not_op, [Binding(bx, 0, size)], [Binding(late, 0, size)])
    commands.execute()
    # bx = ~x by the first replay; the second makes bx = x again and late = ~x
    assert testing.same_bits(late.read(0, size).view(np.uint32), REFERENCES["bit_not"](x))
    late.release()
    with pytest.raises(dmlgpu.ValidationError, match="released buffer"):
        commands.execute()
    commands.release()
