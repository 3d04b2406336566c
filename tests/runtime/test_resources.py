"""Resources and faults: a soak of create-execute-release cycles, allocation failure, threads,
closing a device, and interpreter exit with live objects."""
import os
import threading

import numpy as np
import pytest
from conftest import assert_clean_exit

import dmlgpu
from dmlgpu import Binding, DataType, Tensor, TensorDesc, ValidationError, testing
from dmlgpu.table import reference
from dmlgpu.runtime import vulkan


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cycle(device, rng, k):
    """Allocate, compile, execute, check and release, at a size that varies with k."""
    count = 1 + (k * 37) % 700
    data_type = (DataType.UINT8, DataType.INT16, DataType.FLOAT32, DataType.UINT64)[k % 4]
    desc = TensorDesc(data_type, [count])
    compiled = device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
    x = testing.sample(data_type, (count,), rng)
    source, target = device.upload(x), device.allocate(desc.total_size)
    compiled.execute([Binding(source, 0, desc.total_size)], [Binding(target, 0, desc.total_size)])
    got = target.read(0, count * data_type.size).view(data_type.numpy)
    source.release()
    target.release()
    return testing.same_bits(got, reference.bit_not(x))


def test_soak_leaves_memory_where_it_started(rng):
    device = dmlgpu.Device(dmlgpu.default_device().index, private=True)  # a device of its own: exact counts
    for k in range(500):  # warm: caches fill to their bounds
        assert cycle(device, rng, k)
    rss, buffers = rss_bytes(), device.live_buffers
    for k in range(10_000):
        assert cycle(device, rng, k), f"cycle {k}"
    growth = rss_bytes() - rss
    print(f"soak: 10000 cycles, RSS {rss >> 20} MiB -> {(rss + growth) >> 20} MiB, "
          f"live buffers {buffers} -> {device.live_buffers}")
    assert device.live_buffers == buffers == 0
    stats = device.memory_stats()
    assert stats["arenas"] == 1 and stats["dedicated"] == 0, stats  # sizes up to 5.6 KiB: one arena
    assert stats["pipelines"] <= 4 * 2 * 17, stats  # variants x layouts x grids, one arena
    assert growth < 32 << 20, f"RSS grew by {growth >> 20} MiB"
    device.close()


def test_allocation_failure_is_a_memory_error_and_the_device_keeps_working(rng, monkeypatch):
    device = dmlgpu.Device(dmlgpu.default_device().index, private=True)

    def full(self, nbytes, mapped):
        raise dmlgpu.DeviceMemoryError(f"could not allocate {nbytes} bytes: ErrorOutOfDeviceMemory")

    with monkeypatch.context() as patched:  # the driver refuses every new arena
        patched.setattr(vulkan.Context, "memory", full)
        with pytest.raises(dmlgpu.DeviceMemoryError, match="could not allocate 4096 bytes") as info:
            device.allocate(4096)
        assert isinstance(info.value, MemoryError)
    assert cycle(device, rng, 3)
    device.close()


def test_threads_share_a_device(rng):
    errors = []
    inputs = [testing.sample(DataType.UINT32, (1000 + 97 * k,), rng) for k in range(8)]

    def work(k):
        try:
            x = inputs[k]
            t = Tensor.from_numpy(x)
            for _ in range(25):
                assert testing.same_bits(dmlgpu.bit_not(x), reference.bit_not(x))
                assert testing.same_bits(dmlgpu.bit_xor(x, x[::-1]), reference.bit_xor(x, x[::-1]))
                assert testing.same_bits((t ^ t).numpy(), np.zeros_like(x))
        except Exception as exc:  # reported below, with the thread
            errors.append((k, repr(exc)))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_results_dropped_on_any_thread_come_back_to_the_pool(tmp_path):
    # A dropped Buffer hands its block back without the device's lock (Buffer.__del__ appends
    # to Resources.dropped); the device takes it back under the lock before its next allocation
    # or report, or reuses it for its next result. Results made on one thread and dropped on
    # another, while every thread queues work, must all come back, none reused while in use.
    assert_clean_exit("""
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import dmlgpu
device = dmlgpu.Device(dmlgpu.default_device().index, private=True)
x = np.arange(4096, dtype=np.uint32) * np.uint32(2654435761)
s = dmlgpu.asarray(x, device=device)
small = dmlgpu.asarray(x[:300], device=device)
device.synchronize()
base = device.memory_stats()
for _ in range(2000):  # a loop dropping each result: one block, taken back at once
    ~s
stats = device.memory_stats()
assert stats["peak_in_use_bytes"] <= base["in_use_bytes"] + 2 * 16384, (base, stats)
assert device.live_buffers == 2, device.live_buffers
handed = []
errors = []
def work(k):
    try:
        for i in range(300):
            a, y = (s, x) if i % 3 else (small, x[:300])  # (two sizes: a block reused only at its size)
            r = (a ^ np.uint32(k)) if i % 2 else ~a
            handed.append(r)  # dropped by another thread (or this one) later
            if i % 7 == 0:
                assert (r.numpy() == ((y ^ np.uint32(k)) if i % 2 else ~y)).all()
            while len(handed) > 8:
                try:
                    handed.pop(0)
                except IndexError:
                    break
    except Exception as exc:
        errors.append(repr(exc))
with ThreadPoolExecutor(4) as pool:
    list(pool.map(work, range(4)))
assert not errors, errors
handed.clear()
device.synchronize()
stats = device.memory_stats()
assert device.live_buffers == 2 and stats["live_buffers"] == 2, stats
assert stats["in_use_bytes"] == base["in_use_bytes"] and stats["pending_free_bytes"] == 0, (base, stats)
device.close()
print("done")
""", tmp_path)


def test_closed_device_refuses_work():
    device = dmlgpu.Device(dmlgpu.default_device().index, private=True)
    desc = TensorDesc(DataType.UINT8, [4])
    compiled = device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
    buffer = device.allocate(16)
    device.close()
    device.close()  # idempotent
    with pytest.raises(ValidationError, match="closed"):
        device.allocate(16)
    with pytest.raises(ValidationError):
        buffer.read()
    with pytest.raises(ValidationError):
        compiled.execute([Binding(buffer, 0, 4)], [Binding(buffer, 0, 4)])


EXIT_WITH_LIVE_OBJECTS = """
import numpy as np, dmlgpu
from dmlgpu import Binding, CommandList, DataType, Tensor, TensorDesc
device = dmlgpu.default_device()
desc = TensorDesc(DataType.UINT32, [64])
compiled = device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
buffers = [device.allocate(256) for _ in range(3)]
commands = CommandList(device)
commands.record(compiled, [Binding(buffers[0], 0, 256)], [Binding(buffers[1], 0, 256)])
commands.execute()
tensor = Tensor.from_numpy(np.arange(64, dtype=np.uint32))
other = dmlgpu.Device(device.index, private=True)
kept = other.upload(np.arange(10, dtype=np.uint8))
result = dmlgpu.bit_xor(tensor, tensor)
print("done")
"""


def test_interpreter_exit_with_live_objects_is_clean(tmp_path):
    assert_clean_exit(EXIT_WITH_LIVE_OBJECTS, tmp_path)


class _Memory:
    """Host memory standing in for device memory (the pool only sizes and destroys it)."""

    def __init__(self, nbytes):
        self.nbytes = nbytes

    def destroy(self):
        pass


@pytest.mark.parametrize("late", ["at once", "parked"])
def test_a_free_arriving_inside_the_pools_own_work_is_done_after_it(late):
    """The garbage collector can finalize a Buffer of a reference cycle while the pool is in the
    middle of its own work (any allocation in there runs it). That free is done after the work,
    never under it: here it arrives as _bin has marked a block free but not yet binned it, and
    its neighbour's merge looked for the block in a bin that was not there (KeyError)."""
    from dmlgpu.runtime.memory import MemoryPool
    pool = MemoryPool(_Memory, 1 << 20)
    a, b, c = (pool.allocate(300_000) for _ in range(3))  # one arena, side by side; merged when freed
    assert a.next is b and b.next is c
    size = a.size
    bin_, fired = pool._bin, []

    def bin_then_collect(block):
        block.free = True  # (_bin's first step)
        if not fired:  # what a finalizer run by the collector here would do
            fired.append(True)
            pool.free(a, position=7 if late == "parked" else None)
        bin_(block)

    pool._bin = bin_then_collect
    pool.free(b)
    pool._bin = bin_
    assert fired
    if late == "parked":
        assert pool.oldest_parked() == 7 and pool.reclaim(7) == size
    assert pool.in_use == size and a.free and a.size == 2 * size  # a and b merged
    pool.free(c)
    assert pool.in_use == 0 and pool.release_unused() == 1 << 20 and not pool.arenas
