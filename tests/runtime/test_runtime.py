"""The runtime: pooled memory, stream-ordered frees, queued work with barriers only between
dependent operations, steady state without new pipelines or command buffers, devices."""
import numpy as np
import pytest
from conftest import assert_clean_exit

import dmlgpu
from dmlgpu import Binding, DataType, Tensor, TensorDesc, ValidationError, testing
from dmlgpu.table import reference
from dmlgpu.runtime.stream import MAX_COMMAND_BUFFERS


@pytest.fixture
def fresh():
    """A device of its own, so that counts are exact."""
    device = dmlgpu.Device(dmlgpu.default_device().index, private=True)
    yield device
    device.close()


@pytest.fixture
def small_arenas(monkeypatch):
    """A device of its own whose arenas hold 16 KiB: sixteen 1 KiB blocks fill one."""
    monkeypatch.setattr(dmlgpu.runtime.device, "ARENA_BYTES", 16 << 10)
    device = dmlgpu.Device(dmlgpu.default_device().index, private=True)
    yield device
    device.close()


def test_freed_blocks_are_reused_and_neighbours_merge(small_arenas):
    fresh = small_arenas
    blocks = [fresh.allocate(1000) for _ in range(16)]
    offsets = [b.arena_offset for b in blocks]
    assert len(set(offsets)) == 16 and all(o % 256 == 0 for o in offsets)
    stats = fresh.memory_stats()
    assert stats["in_use_bytes"] == 16 * 1024 and stats["arenas"] == 1
    for b in blocks[1::2]:  # free every other block: eight holes of 1 KiB
        b.release()
    fresh.synchronize()
    again = fresh.allocate(1000)  # a hole, taken back as it is
    assert again.arena_offset in offsets[1::2]
    for b in blocks[0::2]:
        b.release()
    again.release()
    fresh.synchronize()
    stats = fresh.memory_stats()
    assert stats["in_use_bytes"] == 0 and stats["arenas"] == 1, stats
    # Only merged holes fit 8 KiB in this full arena: they merge rather than the pool grow.
    big = fresh.allocate(8 * 1024)
    assert big.arena_offset in (0, 8 * 1024) and fresh.memory_stats()["arenas"] == 1
    more = [fresh.allocate(1000) for _ in range(8)]  # the other half, in 1 KiB blocks again
    assert fresh.memory_stats()["arenas"] == 1
    for b in (big, *more):
        b.release()
    fresh.empty_cache()
    assert fresh.memory_stats()["reserved_bytes"] == 0


def test_small_blocks_kept_for_reuse_merge_before_the_pool_grows(small_arenas):
    """Freed small blocks are kept unmerged for reuse at their size, but the pool merges them
    before it would grow, and `empty_cache()` gives their arenas back."""
    fresh = small_arenas
    many = [fresh.allocate(256) for _ in range(4 * 64)]  # four full arenas of 256-byte blocks
    assert fresh.memory_stats()["arenas"] == 4
    del many
    fresh.synchronize()
    stats = fresh.memory_stats()
    assert stats["in_use_bytes"] == 0 and stats["arenas"] == 4
    one = fresh.allocate(256)
    whole = [fresh.allocate(8 * 1024) for _ in range(7)]  # only merged halves of arenas fit
    assert fresh.memory_stats()["arenas"] == 4, fresh.memory_stats()
    del one, whole
    fresh.synchronize()
    fresh.empty_cache()
    assert fresh.memory_stats()["reserved_bytes"] == 0


def test_allocate_is_zero_filled_after_reuse(fresh):
    first = fresh.upload(np.full(4096, 0xFF, np.uint8))
    offset = first.arena_offset
    first.release()
    fresh.synchronize()
    second = fresh.allocate(4096)
    assert second.arena_offset == offset
    assert not second.read().any()


def test_large_allocations_get_dedicated_memory_kept_for_reuse(fresh):
    size = fresh.memory_stats()["arena_bytes"] // 2 + 4096
    big = fresh.allocate(size, zero_fill=False)
    assert fresh.memory_stats()["dedicated"] == 1
    big.release()
    fresh.synchronize()
    again = fresh.allocate(size - 4096, zero_fill=False)
    assert fresh.memory_stats()["dedicated"] == 1  # the same memory, not a new allocation
    again.release()
    fresh.empty_cache()
    assert fresh.memory_stats()["dedicated"] == 0


def test_a_block_freed_while_queued_work_uses_it_waits_for_that_work(fresh, rng):
    x = testing.sample(DataType.UINT32, (1 << 16,), rng)
    with fresh:
        t = Tensor.from_numpy(x)
        u = ~t  # queued, not yet run
        offset = t.buffer.arena_offset
        del t  # freed while the queued NOT still reads it: parked, not reused
        assert fresh.memory_stats()["pending_free_bytes"] > 0
        y = Tensor.from_numpy(np.zeros_like(x))  # would overwrite t's bytes if reused
        assert y.buffer.arena_offset != offset
        assert testing.same_bits(u.numpy(), reference.bit_not(x))
    assert fresh.memory_stats()["pending_free_bytes"] == 0


def test_operations_are_queued_until_someone_waits(fresh, rng):
    x = testing.sample(DataType.UINT16, (257,), rng)
    with fresh:
        t = Tensor.from_numpy(x)
        fresh.synchronize()
        submits = fresh.memory_stats()["submits"]
        results = [~t for _ in range(5)]
        assert fresh.memory_stats()["submits"] == submits  # recorded, not submitted
        assert testing.same_bits(results[0].numpy(), reference.bit_not(x))
        assert fresh.memory_stats()["submits"] > submits  # reading waits: the batch went
        assert all(testing.same_bits(r.numpy(), reference.bit_not(x)) for r in results[1:])


def test_barriers_only_between_dependent_operations(fresh, rng):
    """Byte ranges decide (under DMLGPU_VALIDATION whole arenas do, as the layer sees them)."""
    x = testing.sample(DataType.UINT32, (1000,), rng)
    fine = not dmlgpu.debug_layer.requested()
    with fresh:
        t = Tensor.from_numpy(x)
        outs = [Tensor.empty(x.shape, x.dtype) for _ in range(4)]
        fresh.synchronize()
        before = fresh.memory_stats()["barriers"]
        counts = []
        for o in outs:  # four independent NOTs reading t: no barrier
            dmlgpu.bit_not(t, out=o)
        counts.append(fresh.memory_stats()["barriers"] - before)
        dmlgpu.bit_xor(outs[0], outs[1], out=outs[2])  # reads what the NOTs wrote
        counts.append(fresh.memory_stats()["barriers"] - before)
        dmlgpu.bit_not(outs[3], out=outs[3])  # its NOT is before that barrier already
        counts.append(fresh.memory_stats()["barriers"] - before)
        dmlgpu.bit_not(outs[2], out=outs[2])  # rewrites what the XOR just wrote
        counts.append(fresh.memory_stats()["barriers"] - before)
        if fine:
            assert counts == [0, 1, 1, 2]
        else:  # one arena: every operation after the first waits for the one before
            assert counts[-1] >= 6
        assert testing.same_bits(outs[2].numpy(), np.full_like(x, 0xFFFFFFFF))
        assert testing.same_bits(outs[3].numpy(), x)
        # Planned calls (by layout) track their ranges afresh: the same calls again give the same barriers.
        fresh.synchronize()
        before = fresh.memory_stats()["barriers"]
        for o in outs:
            dmlgpu.bit_not(t, out=o)
        dmlgpu.bit_xor(outs[0], outs[1], out=outs[2])
        if fine:
            assert fresh.memory_stats()["barriers"] - before == 1


def test_a_queued_chain_across_tensors_matches_the_reference(fresh, rng):
    for data_type in (DataType.UINT8, DataType.INT16, DataType.FLOAT32, DataType.UINT64):
        a, b = (testing.sample(data_type, (3, 1001), rng) for _ in range(2))
        with fresh:
            ta, tb = Tensor.from_numpy(a), Tensor.from_numpy(b)
            want_a, want_b = a, b
            for step in range(40):
                if step % 3 == 0:
                    ta = ~ta ^ tb
                    want_a = reference.bit_xor(reference.bit_not(want_a), want_b)
                elif step % 3 == 1:
                    dmlgpu.bit_xor(tb, ta, out=tb)
                    want_b = reference.bit_xor(want_b, want_a)
                else:
                    tb ^= tb ^ ta
                    want_b = reference.bit_xor(want_b, reference.bit_xor(want_b, want_a))
            assert testing.same_bits(ta.numpy(), want_a) and testing.same_bits(tb.numpy(), want_b)


def test_a_validation_error_in_a_queued_chain_queues_nothing_and_the_chain_goes_on(fresh, rng):
    x = testing.sample(DataType.UINT32, (64,), rng)
    with fresh:
        t = Tensor.from_numpy(x)
        u = ~t
        with pytest.raises(ValidationError):
            t ^ Tensor.from_numpy(np.zeros(3, np.uint32))
        with pytest.raises(ValidationError):
            dmlgpu.bit_not(t, out=Tensor.empty((64,), np.uint8))
        v = u ^ t
        assert testing.same_bits(v.numpy(), np.full_like(x, 0xFFFFFFFF))


def test_steady_state_makes_no_pipeline_command_buffer_or_arena(fresh, rng):
    x = testing.sample(DataType.UINT32, (256,), rng)
    with fresh:
        t = Tensor.from_numpy(x)
        for _ in range(200):
            u = ~t
        fresh.synchronize()
        before = fresh.memory_stats()
        for _ in range(3000):
            u = ~t  # each result is new; the last one is dropped
        assert testing.same_bits(u.numpy(), reference.bit_not(x))
        after = fresh.memory_stats()
    for key in ("pipelines", "arenas", "dedicated", "reserved_bytes", "live_buffers"):
        assert after[key] == before[key], (key, before, after)
    assert after["command_buffers"] <= MAX_COMMAND_BUFFERS  # a ring, refilled, never per operation


def test_buffer_writes_are_ordered_after_queued_reads(fresh, rng):
    x = testing.sample(DataType.UINT8, (4096,), rng)
    desc = TensorDesc(DataType.UINT8, [4096])
    compiled = fresh.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
    source, target = fresh.upload(x), fresh.allocate(4096)
    compiled.execute([Binding(source)], [Binding(target)])  # queued: reads source
    source.write(np.zeros(4096, np.uint8))  # must not change what the queued NOT reads
    assert testing.same_bits(target.read().view(np.uint8), reference.bit_not(x))
    assert not source.read().any()


def test_current_device_and_moving_tensors(fresh, rng):
    listed = dmlgpu.devices()
    assert [d["index"] for d in listed] == list(range(len(listed)))
    assert sum(d["default"] for d in listed) == 1
    x = testing.sample(DataType.INT8, (33,), rng)
    with fresh:
        assert dmlgpu.default_device() is fresh
        t = Tensor.from_numpy(x)
        assert t.device is fresh and Tensor.empty((2,), np.uint8).device is fresh
        assert (~t).device is fresh
    assert dmlgpu.default_device() is not fresh
    moved = t.to(dmlgpu.default_device())
    assert moved.device is dmlgpu.default_device() and t.to(fresh) is t
    assert testing.same_bits(moved.numpy(), x)
    with pytest.raises(ValidationError, match=r"device \d+ .* and device \d+ "):
        t ^ moved


QUEUED_AT_EXIT = """
import numpy as np, dmlgpu
t = dmlgpu.Tensor.from_numpy(np.arange(1 << 16, dtype=np.uint32))
results = [~t ^ t for _ in range(300)]  # queued and in flight when the interpreter exits
print("done")
"""


def test_interpreter_exit_with_queued_work_is_clean(tmp_path):
    assert_clean_exit(QUEUED_AT_EXIT, tmp_path)


def test_an_operation_alone_is_replayed_from_a_kept_command_buffer(fresh, rng):
    """One dispatch queued on an idle stream and waited for is submitted from a command buffer
    recorded once for it: repeating it makes no new command buffers, and every replay computes
    afresh (new input data each time), bit for bit."""
    with fresh:
        t, o = Tensor.empty((256,), np.uint32), Tensor.empty((256,), np.uint32)
    for k in range(3):
        x = testing.sample(DataType.UINT32, (256,), rng)
        t.buffer.write(x)
        fresh.synchronize()
        before = fresh.memory_stats()
        for i in range(5):
            submits = fresh.memory_stats()["submits"]
            dmlgpu.bit_not(t, out=o)
            if k or i >= 2:  # kept (from its second time alone): submitted at the call
                assert fresh.memory_stats()["submits"] == submits + 1
            fresh.synchronize()
        after = fresh.memory_stats()
        assert after["submits"] - before["submits"] == 5
        if k:
            assert after["command_buffers"] == before["command_buffers"]
        assert testing.same_bits(o.numpy(), reference.bit_not(x))
    # Kept, so submitted at once, then a dependent operation: ordered after it by a barrier.
    dmlgpu.bit_not(t, out=o)
    dmlgpu.bit_not(o, out=t)
    assert testing.same_bits(t.numpy(), x)
    # Alone for the first time, so held back, then joined by a dependent operation: recorded
    # in order into one batch, with a barrier.
    with fresh:
        u = Tensor.empty((256,), np.uint32)
    fresh.synchronize()
    before = fresh.memory_stats()["submits"]
    dmlgpu.bit_not(t, out=u)
    dmlgpu.bit_not(u, out=t)
    fresh.synchronize()
    assert fresh.memory_stats()["submits"] - before == 1
    assert testing.same_bits(t.numpy(), x) and testing.same_bits(u.numpy(), reference.bit_not(x))


def test_a_launch_whose_buffer_was_released_queues_nothing(fresh, rng):
    """The repeated-call path checks its launch under the device's lock: once a buffer it
    binds is released, `enqueue` refuses it (nothing queued) and the call is validated afresh,
    which names the released buffer."""
    x = testing.sample(DataType.UINT32, (256,), rng)
    with fresh:
        t, o = Tensor.from_numpy(x), Tensor.empty((256,), np.uint32)
    dmlgpu.bit_not(t, out=o)
    dmlgpu.bit_not(t, out=o)  # now remembered
    assert testing.same_bits(o.numpy(), reference.bit_not(x))
    compiled = fresh.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(
        TensorDesc(DataType.UINT32, (256,)), TensorDesc(DataType.UINT32, (256,))))
    launch = compiled.launch(compiled.check([Binding(t.buffer)], [Binding(o.buffer)]))
    assert fresh.enqueue(launch)
    fresh.synchronize()
    o.buffer.release()
    submits = fresh.memory_stats()["submits"]
    assert not fresh.enqueue(launch)
    with pytest.raises(ValidationError, match="released"):
        dmlgpu.bit_not(t, out=o)
    with pytest.raises(ValidationError, match="released"):
        compiled.execute([Binding(t.buffer)], [Binding(o.buffer)])
    fresh.synchronize()
    assert fresh.memory_stats()["submits"] == submits


def test_operations_alone_on_ever_new_data_make_no_command_buffers(fresh):
    """Kept replays are bounded and re-recorded, never made per call: operations queued alone on
    a hundred different outputs leave at most the rotation plus the kept replays."""
    from dmlgpu.runtime.stream import REPLAYS
    with fresh:
        t = Tensor.from_numpy(np.arange(64, dtype=np.uint32))
        outs = [Tensor.empty((64,), np.uint32) for _ in range(100)]
    for _ in range(2):
        for o in outs:
            dmlgpu.bit_not(t, out=o)
            fresh.synchronize()
    assert fresh.memory_stats()["command_buffers"] <= MAX_COMMAND_BUFFERS + REPLAYS
    assert all(testing.same_bits(o.numpy(), ~np.arange(64, dtype=np.uint32)) for o in outs[::17])


def test_repeated_new_results_across_blocks_arenas_and_released_arenas(monkeypatch, rng):
    """`u = ~t` repeated reuses what it remembers per output block; results landing in new
    blocks, in new arenas and in arenas made again after `empty_cache()` are all right, and
    an input changed in place between calls is read as it is then."""
    monkeypatch.setattr(dmlgpu.runtime.device, "ARENA_BYTES", 1 << 20)
    x = testing.sample(DataType.UINT32, (1 << 14,), rng)  # 64 KiB: 16 results fill an arena
    key = testing.sample(DataType.UINT32, x.shape, rng)
    device = dmlgpu.Device(dmlgpu.default_device().index, private=True)
    try:
        with device:
            t, k = Tensor.from_numpy(x), Tensor.from_numpy(key)
            want = x
            for _ in range(3):
                kept = [~t for _ in range(80)]  # past the blocks remembered, over 5 arenas
                assert device.memory_stats()["arenas"] >= 5
                t ^= k  # queued after the NOTs that read t
                for u in kept:
                    assert testing.same_bits(u.numpy(), reference.bit_not(want))
                want = reference.bit_xor(want, key)
                del kept, u
                device.synchronize()
                device.empty_cache()  # the results' arenas go, with their pipelines
                assert device.memory_stats()["arenas"] <= 2
            assert testing.same_bits((~t).numpy(), reference.bit_not(want))
    finally:
        device.close()


def test_large_work_is_submitted_without_waiting_for_a_full_batch(fresh, rng, monkeypatch):
    """A batch is submitted once it holds more work than a submit costs: at EARLY_BYTES of
    traffic where the device has nothing left to run, at BATCH_BYTES whatever it runs; small
    operations still share one submit. (A Dask task's chain over large blocks: no one waits for
    it, and the device must not idle until 64 operations are queued.) The thresholds are scaled
    down to blocks of 64 KiB here."""
    from dmlgpu.runtime import stream
    n = 1 << 14  # 64 KiB of uint32: each NOT reads and writes 128 KiB
    x = testing.sample(DataType.UINT32, (n,), rng)
    with fresh:
        t, u = Tensor.from_numpy(x), Tensor.empty((n,), np.uint32)
        small = Tensor.empty((16,), np.uint32)
    for i in range(4):  # warm: every call kept as a replay or planned
        dmlgpu.bit_not(t, out=u)
        dmlgpu.bit_not(u, out=t)
        dmlgpu.bit_not(small, out=small)
    fresh.synchronize()

    def submits_of(call, times):
        fresh.synchronize()
        before = fresh.memory_stats()["submits"]
        for _ in range(times):
            call()
        queued = fresh.memory_stats()["submits"] - before
        fresh.synchronize()
        return queued

    def pair():
        dmlgpu.bit_not(t, out=u)
        dmlgpu.bit_not(u, out=t)

    # Default thresholds (64 MiB, 1 GiB): twenty pairs of 128 KiB NOTs are one batch, submitted
    # at the wait (the first is held back, then joined).
    assert submits_of(pair, 20) == 0
    # Early at 256 KiB, batched at 1 MiB: every dispatch's traffic is 128 KiB.
    monkeypatch.setattr(stream, "EARLY_BYTES", 256 << 10)
    monkeypatch.setattr(stream, "BATCH_BYTES", 1 << 20)
    queued = submits_of(pair, 20)  # 40 dependent dispatches, 5 MiB: submitted at least every 8
    assert 5 <= queued <= 40, queued
    assert submits_of(lambda: dmlgpu.bit_not(small, out=small), 40) == 0  # small ones still wait
    # Alone on an idle device, one dispatch of at least EARLY_BYTES starts at the call.
    monkeypatch.setattr(stream, "EARLY_BYTES", 128 << 10)
    with fresh:
        w = Tensor.empty((n,), np.uint32)
    fresh.synchronize()
    assert submits_of(lambda: dmlgpu.bit_not(t, out=w), 1) == 1
    assert testing.same_bits(t.numpy(), x) and testing.same_bits(w.numpy(), reference.bit_not(x))


def test_recorded_dispatches_bind_what_they_run(fresh, rng):
    """Dispatches are recorded straight into the command buffer, each pipeline bound only where
    another was bound last: operators interleaved in one batch (each pipeline again after
    another, and after a fill recorded between them) compute what each asks, bit for bit."""
    x = testing.sample(DataType.UINT32, (4096,), rng)
    y = testing.sample(DataType.UINT32, (4096,), rng)
    with fresh:
        a, b = Tensor.from_numpy(x), Tensor.from_numpy(y)
        fresh.synchronize()
        u = ~a
        v = a ^ b
        w = ~b
        zeros = dmlgpu.zeros((4096,), np.uint32)  # a fill recorded between dispatches
        c = u ^ zeros
        z = ~v ^ w
        t = ~c
    want_u, want_v, want_w = reference.bit_not(x), reference.bit_xor(x, y), reference.bit_not(y)
    assert testing.same_bits(u.numpy(), want_u) and testing.same_bits(v.numpy(), want_v)
    assert testing.same_bits(w.numpy(), want_w) and testing.same_bits(c.numpy(), want_u)
    assert testing.same_bits(z.numpy(), reference.bit_xor(reference.bit_not(want_v), want_w))
    assert testing.same_bits(t.numpy(), x)


def test_timed_dispatches_are_numbered_operations(fresh):
    """A command buffer with timestamps records each dispatch as a numbered operation (the
    direct recording is for the stream's), so `profiling.kernel_seconds` brackets each one."""
    from dmlgpu import profiling
    desc = TensorDesc(DataType.UINT32, [1 << 16])
    compiled = fresh.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
    source, target = fresh.upload(np.arange(1 << 16, dtype=np.uint32)), fresh.allocate(1 << 18)
    seconds = profiling.kernel_seconds(compiled, [Binding(source)], [Binding(target)], repeats=5)
    assert seconds.shape == (5,) and np.all(seconds > 0) and np.all(seconds < 10), seconds
    assert testing.same_bits(target.read().view(np.uint32), ~np.arange(1 << 16, dtype=np.uint32))


def test_a_sequence_of_dispatches_is_timed_whole(fresh):
    """`Device.time_dispatches` of a list of launches times each run of the whole sequence, from
    before its first dispatch to after its last, barriers between included: a run of two
    dispatches takes longer than either alone, and the second sees the first's result."""
    desc = TensorDesc(DataType.UINT32, [1 << 18])
    compiled = fresh.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
    a, b = fresh.upload(np.arange(1 << 18, dtype=np.uint32)), fresh.allocate(1 << 20)
    c = fresh.allocate(1 << 20)
    first = compiled.launch(compiled.check([Binding(a)], [Binding(b)]))
    second = compiled.launch(compiled.check([Binding(b)], [Binding(c)]))
    alone = [np.median(fresh.time_dispatches(launch, 5)) for launch in (first, second)]
    both = fresh.time_dispatches([first, second], 5)
    assert both.shape == (5,) and np.all(both > 0), both
    assert np.median(both) > max(alone), (both, alone)
    assert testing.same_bits(c.read().view(np.uint32), np.arange(1 << 18, dtype=np.uint32))
