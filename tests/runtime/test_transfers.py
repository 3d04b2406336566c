"""Host transfers: the copy threads (`runtime.host_copy`) bit for bit, and every transfer path
both ways: mapped arenas (lavapipe's own) and staging memory (a discrete GPU's, forced here
with `Device(staging=True)`)."""
import multiprocessing
import subprocess
import sys
import threading
import tracemalloc
import warnings

import numpy as np
import pytest
from conftest import assert_clean_exit

import dmlgpu
from dmlgpu import DataType, Tensor, testing
from dmlgpu.table import reference
from dmlgpu.runtime import buffers, host_calls, limits
from dmlgpu.runtime import host_copy

P = 4 << 20
S = host_copy.SPLIT_BYTES
CHUNK = buffers.STAGING_CHUNK
GUARD = 0x5A


def _guarded(n, offset):
    """A uint8 view of n bytes at `offset` into a guard-filled array with guards after it too."""
    raw = np.full(n + offset + 64, GUARD, np.uint8)
    return raw, raw[offset:offset + n]


# -- the copy threads ---------------------------------------------------------------------------
@pytest.mark.parametrize("threads", [None, 1, 8], ids=["threads=cores", "threads=1", "threads=8"])
@pytest.mark.parametrize("n", [0, 1, 4095, S - 1, S, S + 1, 2 * S + 4097, P - 1, P, P + 1, 3 * P + 17])
@pytest.mark.parametrize("how", ["copy", "start"])
def test_host_copy_is_exact_around_the_threshold(n, threads, how, rng, monkeypatch):
    if threads:  # 8: more slices than this machine's threads, which take them in turn
        monkeypatch.setattr(host_copy, "THREADS", threads)
    data = rng.integers(0, 256, n + 3, dtype=np.uint8)
    for src_offset, dst_offset in ((0, 0), (3, 1), (1, 7)):
        src = data[src_offset:src_offset + n]
        raw, dst = _guarded(n, dst_offset)
        if how == "copy":
            host_copy.copy(dst, src)
        else:
            host_copy.start(dst, src).wait()
        assert testing.same_bits(dst, src), (n, src_offset, dst_offset)
        assert (raw[:dst_offset] == GUARD).all() and (raw[dst_offset + n:] == GUARD).all()


@pytest.mark.skipif(host_copy.THREADS < 2, reason="one core: nothing to split over")
def test_copies_from_several_threads_and_in_flight_at_once_are_exact(rng):
    """Jobs from several threads, and several started copies of one thread, share the pool's
    queue; each lands exactly, whichever threads take its slices."""
    sizes = [S, S + 4097, 3 * S - 5, P + 1]
    sources = [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]
    results = [[] for _ in sizes]

    def run(k):
        for _ in range(20):
            raw, dst = _guarded(sizes[k], k + 1)
            host_copy.copy(dst, sources[k])
            results[k].append(testing.same_bits(dst, sources[k]) and (raw[:k + 1] == GUARD).all()
                              and (raw[k + 1 + sizes[k]:] == GUARD).all())
    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(sizes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(all(r) and len(r) == 20 for r in results)
    in_flight = [(_guarded(n, 3), src) for n, src in zip(sizes * 3, sources * 3)]
    pending = [host_copy.start(dst, src) for (_, dst), src in in_flight]
    for job in reversed(pending):  # waited for out of order
        job.wait()
    assert all(testing.same_bits(dst, src) and (raw[:3] == GUARD).all() and (raw[3 + src.size:] == GUARD).all()
               for ((raw, dst), src) in in_flight)
    assert host_copy.pool_threads() >= 1
    assert host_copy.copy_threads(S - 1) == 1
    assert host_copy.copy_threads(S) == min(host_copy.THREADS, S // host_copy.SPLIT_SLICE_BYTES) >= 2


def test_a_started_copy_holds_its_arrays_and_a_dropped_one_finishes(rng):
    """`start` keeps both arrays alive until `wait`; a Pending dropped unwaited finishes its
    copy first (its memory may go right after)."""
    src = rng.integers(0, 256, 4 * P, dtype=np.uint8)
    dst = np.zeros_like(src)
    pending = host_copy.start(dst, src.copy())  # the only reference to its source
    pending.wait()
    assert testing.same_bits(dst, src)
    dst[:] = 0
    host_copy.start(dst, src)  # dropped at once
    assert testing.same_bits(dst, src)


def test_host_copy_strided_overlapping_and_other_shapes_match_numpy(rng):
    n = 4 * P
    src = rng.integers(0, 256, 2 * n, dtype=np.uint8)
    dst = np.zeros(2 * n, np.uint8)
    host_copy.copy(dst[::2], src[1::2])  # strided 1-D views
    assert testing.same_bits(dst[::2], src[1::2]) and not dst[1::2].any()
    for shift in (1, -1, 4096):  # overlapping, either way: as numpy, as if through a copy
        overlap = src.copy()
        expected = overlap.copy()
        if shift > 0:
            expected[shift:] = expected[:-shift].copy()
            host_copy.start(overlap[shift:], overlap[:-shift]).wait()
        else:
            expected[:shift] = expected[-shift:].copy()
            host_copy.copy(overlap[:shift], overlap[-shift:])
        assert testing.same_bits(overlap, expected), shift
    grid = np.zeros((n // 64, 64), np.uint8)
    host_copy.copy(grid, src[:n].reshape(-1, 64))  # not 1-D: numpy whole
    assert testing.same_bits(grid.reshape(-1), src[:n])
    wide = np.zeros(n, np.uint32)
    host_copy.copy(wide, src[:n])  # as `wide[...] = src`: values, not bytes
    assert (wide == src[:n]).all()


def test_host_copy_errors_reach_the_caller():
    readonly = np.zeros(4 * P, np.uint8)
    readonly.flags.writeable = False
    for copy in (host_copy.copy, lambda d, s: host_copy.start(d, s).wait()):
        with pytest.raises(ValueError):
            copy(readonly, np.ones(4 * P, np.uint8))
    host_copy.copy(np.empty(4 * P, np.uint8), np.ones(4 * P, np.uint8))  # the pool still works


def test_host_copy_pool_is_made_once():
    a, b = np.ones(4 * P, np.uint8), np.empty(4 * P, np.uint8)
    host_copy.copy(b, a)
    threads = host_copy.pool_threads()
    assert (threads > 0) == (host_copy.copy_threads(a.size) > 1)
    assert threads <= host_copy.THREADS - 1
    for _ in range(50):
        host_copy.copy(b, a)
        host_copy.start(b, a).wait()
    assert host_copy.pool_threads() == threads


def _copy_in_child(queue):
    a = np.arange(4 * P, dtype=np.uint32).view(np.uint8)
    b = np.empty_like(a)
    host_copy.copy(b, a)
    c = np.empty_like(a)
    host_copy.start(c, a).wait()
    queue.put(bool((a == b).all() and (a == c).all()))


def test_host_copy_works_in_a_forked_child():
    host_copy.copy(np.empty(4 * P, np.uint8), np.ones(4 * P, np.uint8))  # the parent's pool exists
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_copy_in_child, args=(queue,))
    with warnings.catch_warnings():  # forking a process with threads warns (Python 3.12+): on purpose here
        warnings.simplefilter("ignore", DeprecationWarning)
        child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail("a parallel copy hung in a forked child")
    assert child.exitcode == 0 and queue.get(timeout=5)


def test_interpreter_exit_does_not_wait_for_the_pool():
    code = ("import numpy as np; from dmlgpu.runtime import host_copy; "
            f"a = np.ones({4 * P}, np.uint8); b = np.empty_like(a); host_copy.copy(b, a); "
            "p = host_copy.start(b, a); "
            "assert host_copy.pool_threads() or host_copy.THREADS == 1; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_copy_in_flight_at_exit_lands_before_its_arrays_go():
    """A started copy dropped unwaited at interpreter exit, with most of its slices still to
    copy (256 MiB): its job finishes before the arrays it holds are freed (the native Pending
    releases them after its destructor's body), so the process exits cleanly (it crashed every
    time when the arrays went first)."""
    code = ("import numpy as np; from dmlgpu.runtime import host_copy; "
            "a = np.ones(256 << 20, np.uint8); b = np.empty_like(a); host_copy.copy(b, a); "
            "p = host_copy.start(b, a); del a, b; print('ok')")
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


# -- transfers, mapped and through staging ------------------------------------------------------
@pytest.fixture(params=[False, True], ids=["own-path", "staging"])
def transfer_device(request):
    """A device of its own whose transfers are the device's own kind, or forced through staging."""
    device = dmlgpu.Device(dmlgpu.default_device().index, staging=request.param, private=True)
    if request.param:
        assert not device.mapped
    yield device
    device.close()


SIZES = [1, 3, 4096, 4099, P + 5, CHUNK - 1, CHUNK, CHUNK + 1,
         buffers.STAGING_SLOTS * CHUNK + 13]  # more chunks than staging holds at once


@pytest.mark.parametrize("n", SIZES)
def test_upload_and_read_are_exact(transfer_device, n, rng):
    data = rng.integers(0, 256, n + 7, dtype=np.uint8)[7:]  # an odd address
    buffer = transfer_device.upload(data)
    assert buffer.size_in_bytes >= n
    assert testing.same_bits(buffer.read(0, n), data)
    raw, out = _guarded(n, 3)
    assert buffer.read(0, n, out=out) is out
    assert testing.same_bits(out, data) and (raw[:3] == GUARD).all() and (raw[3 + n:] == GUARD).all()
    if n > 2:  # ranges at odd offsets
        assert testing.same_bits(buffer.read(1, n - 2), data[1:-1])
        patch = rng.integers(0, 256, n - 2, dtype=np.uint8)
        buffer.write(patch, 1)
        expected = data.copy()
        expected[1:-1] = patch
        assert testing.same_bits(buffer.read(0, n), expected)
    buffer.release()


def test_writes_wait_for_queued_work_on_their_bytes(transfer_device, rng):
    n = CHUNK + 4096
    x = testing.sample(DataType.UINT32, (n // 4,), rng)
    with transfer_device:
        t = Tensor.from_numpy(x)
        u = ~t  # queued, reads t
        t.buffer.write(np.zeros(n, np.uint8))  # must land after the NOT has read t
        assert testing.same_bits(u.numpy(), reference.bit_not(x))
        assert not t.numpy().any()


@pytest.mark.parametrize("n", [5, P + 3, 2 * CHUNK + 12])
def test_front_end_and_tensors_through_either_path(transfer_device, n, rng):
    x = testing.sample(DataType.UINT32, (n // 4 or 1,), rng)
    with transfer_device:
        assert testing.same_bits(dmlgpu.bit_not(x), reference.bit_not(x))
        out = np.zeros_like(x)
        assert dmlgpu.bit_not(x, out=out) is out
        assert testing.same_bits(out, reference.bit_not(x))
        inplace = x.copy()
        dmlgpu.bit_not(inplace, out=inplace)
        assert testing.same_bits(inplace, reference.bit_not(x))
        t = Tensor.from_numpy(x[::-1])
        assert testing.same_bits(t.numpy(), x[::-1])
        assert testing.same_bits(t[1::3].numpy(), x[::-1][1::3])


def test_front_end_with_out_allocates_no_host_array(transfer_device, rng):
    x = testing.sample(DataType.UINT32, ((CHUNK + P) // 4,), rng)
    out = np.zeros_like(x)
    with transfer_device:
        dmlgpu.bit_not(x, out=out)  # warm: the device's arenas and staging exist
        tracemalloc.start()
        try:
            dmlgpu.bit_not(x, out=out)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert testing.same_bits(out, reference.bit_not(x))
    assert peak < x.nbytes // 16, f"{peak} bytes of host memory allocated for a {x.nbytes}-byte call"


def test_staging_is_one_arena_kept_between_transfers_until_empty_cache(rng):
    device = dmlgpu.Device(dmlgpu.default_device().index, staging=True, private=True)
    data = rng.integers(0, 256, 3 * buffers.STAGING_SLOTS * CHUNK // 2, dtype=np.uint8)
    for _ in range(3):
        buffer = device.upload(data)
        assert testing.same_bits(buffer.read(), data)
        buffer.release()
        assert device.memory_stats()["staging_reserved_bytes"] == buffers.STAGING_ARENA
    device.empty_cache()
    assert device.memory_stats()["staging_reserved_bytes"] == 0
    buffer = device.upload(data[:CHUNK + 1])  # and it comes back when needed
    assert testing.same_bits(buffer.read(0, CHUNK + 1), data[:CHUNK + 1])
    assert device.memory_stats()["staging_reserved_bytes"] == buffers.STAGING_ARENA
    device.close()


def test_a_failed_read_gives_its_staging_back(rng):
    device = dmlgpu.Device(dmlgpu.default_device().index, staging=True, private=True)
    data = rng.integers(0, 256, 2 * CHUNK + 8, dtype=np.uint8)
    buffer = device.upload(data)
    readonly = np.zeros(data.size, np.uint8)
    readonly.flags.writeable = False
    for _ in range(3):
        with pytest.raises(ValueError):
            buffer.read(out=readonly)
    device.synchronize()
    assert testing.same_bits(buffer.read(), data)
    assert device.memory_stats()["staging_reserved_bytes"] == buffers.STAGING_ARENA
    device.close()


def test_staging_from_the_environment(monkeypatch):
    monkeypatch.setenv("DMLGPU_STAGING", "1")
    device = dmlgpu.Device(dmlgpu.default_device().index, private=True)
    assert not device.mapped
    device.close()
    device = dmlgpu.Device(dmlgpu.default_device().index, staging=False, private=True)  # the argument wins
    assert device.mapped == (device.type in ("CPU", "integrated GPU"))
    device.close()


# -- calls on host data recorded once ---------------------------------------------------------
def test_a_repeated_small_call_runs_from_its_kept_host_call(transfer_device, rng):
    """From its second time, a call on numpy data of at most HOST_CALL_BYTES runs from memory and
    a command buffer kept for it: one submit per call, no buffer taken or freed, new data each
    time bit for bit, the same array as both operands, and `empty_cache()` gives it all back."""
    shape = (3, 1000)
    with transfer_device:
        for k in range(4):
            a, b = (testing.sample(DataType.UINT16, shape, rng) for _ in range(2))
            before = transfer_device.memory_stats()
            out = np.zeros(shape, np.uint16)
            assert dmlgpu.bit_xor(a, b, out=out) is out
            assert testing.same_bits(out, reference.bit_xor(a, b))
            assert testing.same_bits(dmlgpu.bit_xor(a, a), np.zeros(shape, np.uint16))
            after = transfer_device.memory_stats()
            if k >= 2:  # both calls' host calls exist since the second round
                assert after["submits"] - before["submits"] == 2
                assert after["host_calls"] == before["host_calls"] == 2
                assert after["live_buffers"] == before["live_buffers"]
        transfer_device.empty_cache()
        stats = transfer_device.memory_stats()
        assert stats["host_calls"] == 0 and stats["live_buffers"] == 0 and stats["reserved_bytes"] == 0
        a = testing.sample(DataType.UINT16, shape, rng)
        assert testing.same_bits(dmlgpu.bit_not(a), reference.bit_not(a))  # and it starts again


SPLIT = host_calls.HOST_CALL_SPLIT_BYTES
SPLIT_CASES = [  # (operator, input data type, shape, broadcast second operand, pieces through staging)
    ("bit_not", DataType.UINT32, (SPLIT // 8,), False, 2),  # moves exactly the bytes that split
    ("bit_xor", DataType.UINT16, (SPLIT // 6 + 3,), False, 2),  # halves of odd element counts
    ("bit_xor", DataType.UINT8, (96, SPLIT // 192 + 1), True, 2),  # rows; a broadcast row
    ("bit_and", DataType.UINT64, (3, SPLIT // 56 + 1), True, 3),  # three rows (not merged: the
    ("bit_or", DataType.UINT64, (3, SPLIT // 72 + 1), False, 2),  # broadcast row): a piece each
    ("bit_count", DataType.UINT64, (SPLIT // 9 + 1,), False, 2),  # 8 bytes in, 1 out
    ("sign", DataType.FLOAT32, (SPLIT // 8 - 1,), False, 1),  # moves less than SPLIT: whole
]


@pytest.mark.parametrize("case", SPLIT_CASES, ids=lambda c: f"{c[0]}-{c[1].name}-{'x'.join(map(str, c[2]))}")
def test_a_large_host_call_through_staging_runs_as_overlapped_pieces(transfer_device, case, rng):
    """Through staging a call moving at least HOST_CALL_SPLIT_BYTES runs as kept host calls over
    its halves (one submit each, the second half copied in while the device does the first);
    mapped memory runs it whole. New data each time, poisoned outputs, bit for bit."""
    name, data_type, shape, broadcast, pieces = case
    op = getattr(dmlgpu, name)
    expected = getattr(reference, name)
    with transfer_device:
        for k in range(4):
            a = testing.sample(data_type, shape, rng)
            operands = [a]
            if name in ("bit_xor", "bit_and", "bit_or"):
                operands.append(testing.sample(data_type, shape[-1:] if broadcast else shape, rng))
            want = expected(*operands)
            out = np.full(want.nbytes, 0xA5, np.uint8).view(want.dtype).reshape(want.shape)  # poison
            before = transfer_device.memory_stats()
            assert op(*operands, out=out) is out
            assert testing.same_bits(out, want), (name, k)
            assert testing.same_bits(op(*operands), want), (name, k)
            after = transfer_device.memory_stats()
            if k >= 2:  # kept since the second round: one submit per piece, nothing allocated
                kept = pieces if not transfer_device.mapped else 1
                assert after["submits"] - before["submits"] == 2 * kept
                assert after["host_calls"] == before["host_calls"] == 2 * kept
                assert after["live_buffers"] == before["live_buffers"]


def test_the_halves_of_a_host_call_are_all_submitted_before_the_first_wait(rng, monkeypatch):
    """The overlap: each half is copied in and submitted before the first half is waited for."""
    device = dmlgpu.Device(dmlgpu.default_device().index, staging=True, private=True)
    seen = []
    finish = host_calls.HostCall.finish

    def watched(call, position, out, *args, **kwargs):
        seen.append((device.memory_stats()["submits"], position))
        return finish(call, position, out, *args, **kwargs)
    monkeypatch.setattr(host_calls.HostCall, "finish", watched)
    try:
        with device:
            x = testing.sample(DataType.UINT32, (SPLIT // 8,), rng)
            for _ in range(3):
                assert testing.same_bits(dmlgpu.bit_not(x), reference.bit_not(x))
        (first, p0), (second, p1) = seen[-2:]
        assert first == second and p1 == p0 + 1  # two submits, both before either wait
    finally:
        device.close()


def test_host_calls_are_bounded_and_large_calls_take_the_transfers(transfer_device, rng):
    with transfer_device:
        for n in range(1, limits.CACHE_LIMITS["host_calls"] + 6):  # more kinds of call than are kept
            x = testing.sample(DataType.UINT8, (n,), rng)
            for _ in range(3):
                assert testing.same_bits(dmlgpu.bit_not(x), reference.bit_not(x))
        assert transfer_device.memory_stats()["host_calls"] == limits.CACHE_LIMITS["host_calls"]
        transfer_device.empty_cache()
        big = testing.sample(DataType.UINT32, (host_calls.HOST_CALL_BYTES // 8 + 4,), rng)
        for _ in range(3):
            assert testing.same_bits(dmlgpu.bit_not(big), reference.bit_not(big))
        assert transfer_device.memory_stats()["host_calls"] == 0


def test_threads_sharing_a_host_call(transfer_device, rng):
    """Threads making the same call at once: one runs the kept host call, the others take the
    general path; every answer is right."""
    inputs = [testing.sample(DataType.UINT32, (2048,), rng) for _ in range(4)]
    errors = []

    def work(x):
        try:
            with transfer_device:
                for _ in range(50):
                    assert testing.same_bits(dmlgpu.bit_not(x), reference.bit_not(x))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(x,)) for x in inputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]
    assert transfer_device.memory_stats()["host_calls"] == 1


def test_read_into_out_checks_out(transfer_device):
    buffer = transfer_device.upload(np.arange(64, dtype=np.uint8))
    bad = [np.zeros(64, np.uint16)[:32], np.zeros(63, np.uint8), np.zeros((8, 8), np.uint8),
           np.zeros(128, np.uint8)[::2], bytearray(64)]
    frozen = np.zeros(64, np.uint8)
    frozen.flags.writeable = False
    for out in (*bad, frozen):
        with pytest.raises(dmlgpu.ValidationError, match="out"):
            buffer.read(0, 64, out=out)
    out = np.zeros(64, np.uint8)
    assert buffer.read(out=out) is out and testing.same_bits(out, np.arange(64, dtype=np.uint8))


# -- results handed over where the device's memory is the host's ----------------------------------
def test_a_new_result_on_mapped_memory_is_the_device_buffer_itself(transfer_device, rng):
    """Mapped (lavapipe's own path): a new result is the buffer the kernel wrote, handed to
    numpy; it is the caller's alone (writing it, or later calls, change nothing else) and its
    memory goes back to the pool with the array. Through staging: an ordinary array."""
    x = testing.sample(DataType.UINT32, ((2 * host_calls.HOST_CALL_BYTES) // 4,), rng)
    shaped = x.reshape(64, -1)
    with transfer_device:
        transfer_device.synchronize()
        before = transfer_device.memory_stats()["in_use_bytes"]
        first = dmlgpu.bit_not(shaped)
        assert first.shape == shaped.shape and first.dtype == shaped.dtype and first.flags.c_contiguous
        assert first.flags.writeable and first.flags.aligned
        held = transfer_device.memory_stats()["in_use_bytes"] - before
        assert held == (x.nbytes if transfer_device.mapped else 0)
        second = dmlgpu.bit_xor(shaped, shaped)  # a later call: its own memory
        assert not np.shares_memory(first, second)
        first[:] = 7  # the caller's to write
        assert testing.same_bits(second, np.zeros_like(shaped))
        assert testing.same_bits(dmlgpu.bit_not(shaped), reference.bit_not(shaped))
        view = first[3:5]
        del first, second
        assert transfer_device.memory_stats()["in_use_bytes"] - before == held  # the view holds it
        assert (view == 7).all()
        del view
        transfer_device.synchronize()
        assert transfer_device.memory_stats()["in_use_bytes"] == before


def test_a_handed_over_result_outlives_its_closed_device(rng):
    x = testing.sample(DataType.INT16, ((2 * host_calls.HOST_CALL_BYTES) // 2,), rng)
    device = dmlgpu.Device(dmlgpu.default_device().index, private=True)
    with device:
        result = dmlgpu.sign(x)
    device.close()  # its memory stays while `result` shows it ...
    assert testing.same_bits(result, reference.sign(x))
    result[:] = 1
    assert (result == 1).all()
    del result  # ... and is destroyed with it
    with pytest.raises(dmlgpu.ValidationError, match="closed"):
        device.allocate(16)


def test_hand_over_needs_mapped_memory():
    device = dmlgpu.Device(dmlgpu.default_device().index, staging=True, private=True)
    try:
        buffer = device.allocate(64)
        with pytest.raises(dmlgpu.ValidationError, match="not map"):
            device.hand_over(buffer, 64)
        with pytest.raises(dmlgpu.ValidationError, match="range"):
            device.hand_over(buffer, 65)
    finally:
        device.close()


HANDED_OVER_AT_EXIT = """
import numpy as np, dmlgpu
x = np.arange(1 << 22, dtype=np.uint32)
kept = [dmlgpu.bit_not(x) for _ in range(3)]  # alive when the interpreter exits
assert (kept[0] == ~x).all()
print("done")
"""


def test_interpreter_exit_with_handed_over_results_is_clean(tmp_path):
    assert_clean_exit(HANDED_OVER_AT_EXIT, tmp_path)


def test_memory_stats_count_every_transfer_each_way(transfer_device, rng):
    """`memory_stats` counts host <-> device copies where they happen (what dmlgpu.dask's tests
    read to prove a chain of operations moved nothing): buffer uploads, writes and reads,
    Tensor round trips, and a numpy front-end call's copies in and out; device work alone
    counts nothing."""
    device = transfer_device
    keys = ("uploads", "upload_bytes", "downloads", "download_bytes")

    def counted():
        stats = device.memory_stats()
        return np.array([stats[k] for k in keys])

    start = counted()
    data = rng.integers(0, 256, 1000, dtype=np.uint8)
    buffer = device.upload(data)
    buffer.write(data[:10], 4)
    buffer.read(0, 100)
    assert (counted() - start).tolist() == [2, 1010, 1, 100]
    with device:
        t = Tensor.from_numpy(rng.integers(0, 2**32, (64, 16), dtype=np.uint32))
        before = counted()
        chained = dmlgpu.bit_count(~t ^ t[0])  # device work only (no scalar operand to upload)
        assert (counted() - before).tolist() == [0, 0, 0, 0]
        chained.numpy()
        assert (counted() - before).tolist() == [0, 0, 1, chained.nbytes]
        before = counted()
        x = rng.integers(0, 2**16, 5000, dtype=np.uint16)
        dmlgpu.bit_not(x)  # a call on host data: its input in, its result out
        moved = counted() - before
        assert moved[1] >= x.nbytes and moved[0] >= 1 and moved[2] >= 1 and moved[3] >= x.nbytes
