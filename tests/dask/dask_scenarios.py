"""What tests/test_dask.py runs on real clusters, each group in a child process of its own
(`python tests/dask/dask_scenarios.py GROUP`), so that a hang or a crash fails a test instead of
stalling the run. The child prints one JSON line: scenario -> null (passed) or its traceback.

Groups:
- local: a `LocalVulkanCluster` of two worker processes (one per device, or both on device 0);
- hosts: `dask scheduler` and two `python -m dmlgpu worker --nworkers 1` commands against it on
  127.0.0.1, as two hosts would run them; a worker is killed in the middle of a search;
- pinning: one `python -m dmlgpu worker` command whose second worker is pinned to a device that
  does not exist.

Workers inherit this process's environment: under DMLGPU_VALIDATION=1 they run under the
validation layer too and write to the same log, which the tests read after each test.
"""
import inspect
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import numpy as np

import dask
import dask.array as da
import distributed
import psutil

import dmlgpu
import dmlgpu.dask as dd
from dmlgpu.dask import sharded_index, shards
from dmlgpu.front import numpy_api
from dmlgpu.runtime import physical_device_count
from dmlgpu.table.dtypes import DataType
from dmlgpu.table.operators import OPERATORS
from dmlgpu.table.reference import REFERENCES

#: 2048 x 8192 four-byte elements: 64 MiB, in uneven chunks.
BIG_SHAPE = (2048, 8192)
BIG_CHUNKS = ((640, 1024, 384), (3000, 5192))
#: Preferred 4-byte type per operator (raw float bits matter most), first the table allows.
FOUR_BYTE = (DataType.FLOAT32, DataType.INT32, DataType.UINT32)
STARTUP_S = 120
TRANSFER_KEYS = ("uploads", "upload_bytes", "downloads", "download_bytes")


# --- helpers (sent to the workers by value: this file is __main__ there is none) ------------------

def _blocks(fn, arrays, dtype):
    """`fn` over blocks of `arrays` broadcast together (what the reference needs, on the workers)."""
    ndim = max(a.ndim for a in arrays)
    args = [x for a in arrays for x in (a, tuple(range(ndim - a.ndim, ndim)))]
    return da.blockwise(fn, tuple(range(ndim)), *args, dtype=dtype)


def _reference(short, options):
    def expected(*blocks):
        result = REFERENCES[short](*blocks)
        return result.astype(options["dtype"]) if "dtype" in options else result
    return expected


def _mismatches(result, expected):
    """Elements whose raw bits differ, counted on the workers."""
    bits = np.dtype(f"u{result.dtype.itemsize}")
    return (result.view(bits) != expected.view(bits)).sum()


def _operands(op, dtype, shape, chunks, seed, column_first=False):
    """The first operand full size; the others broadcast (a row, then a column, or the other way)."""
    x = dd.random_bits(shape, dtype, chunks, seed=seed)
    rows = [dd.random_bits(shape[-1:], dtype, chunks=(shape[-1] // 2 + 1,), seed=seed + 1),
            dd.random_bits(shape[:-1] + (1,), dtype, chunks=(chunks[0][::-1], 1), seed=seed + 2)]
    return [x] + [rows[(i + column_first) % 2] for i in range(len(op.inputs) - 1)]


def _cases(op, shape, chunks, dtypes, seed, column_first=False):
    """(id, dmlgpu.dask result, reference result) for `op` over each dtype and output option."""
    row = op.newest
    takes_dtype = "dtype" in inspect.signature(getattr(numpy_api, op.short)).parameters
    out_options = [{"dtype": t.numpy} for t in row.output_types] if takes_dtype else [{}]
    for dtype in dtypes:
        arrays = _operands(op, dtype.numpy, shape, chunks, seed, column_first)
        for options in out_options:
            result = dd.FUNCTIONS[op.short](*arrays, **options)
            expected = _blocks(_reference(op.short, options), arrays, result.dtype)
            name = "-".join([op.short, dtype.numpy.name] + [np.dtype(v).name for v in options.values()])
            yield name, result, expected


def _environ(name):
    return os.environ.get(name)


def _transfers(dask_worker=None):
    """This process's host <-> device transfers; on a worker also the bytes of the blocks it
    received from and sent to other processes (distributed's transfer logs)."""
    stats = dmlgpu.default_device().memory_stats()
    found = {k: stats[k] for k in TRANSFER_KEYS}
    if dask_worker is not None:
        found["received_bytes"] = sum(t["total"] for t in dask_worker.transfer_incoming_log)
        found["sent_bytes"] = sum(t["total"] for t in dask_worker.transfer_outgoing_log)
    return found


def _moved(before: dict, after: dict) -> dict:
    """Per worker, what crossed between host and device (and between processes) from `before`
    to `after`."""
    return {w: {k: after[w][k] - before[w][k] for k in after[w]} for w in after}


def _only_moved_blocks_crossed(moved: dict) -> None:
    """Each worker uploaded exactly the Tensor bytes it received from another process and
    downloaded exactly those it sent: nothing else crossed PCIe."""
    for worker, m in moved.items():
        assert m["upload_bytes"] == m["received_bytes"] and m["download_bytes"] == m["sent_bytes"], (worker, m)


def _host_reference(codes, queries, k):
    """numpy's exact k nearest: distances, then lower row."""
    bits = np.bitwise_count(queries.view(np.uint8)[:, None, :] ^ codes.view(np.uint8)[None]).sum(axis=2)
    order = np.argsort(bits, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(bits, order, 1).astype(np.uint32), order.astype(np.int64)


def _check_search(index, codes, queries, k, removed=()):
    distances, ids = index.search(queries, k)
    keep = np.setdiff1d(np.arange(codes.shape[0]), removed)
    expected_distances, order = _host_reference(codes[keep], queries, k)
    assert np.array_equal(distances, expected_distances), k
    assert np.array_equal(ids, keep[order]), k


# --- local: a LocalVulkanCluster of two workers ---------------------------------------------------

def local_pinned(cluster, client):
    reports = client.run(dd.worker_device)
    assert len(reports) == 2 and len({r["pid"] for r in reports.values()}) == 2
    assert sorted(r[dd.DEVICE_VARIABLE] for r in reports.values()) == sorted(map(str, cluster.devices))
    assert all(r["index"] == int(r[dd.DEVICE_VARIABLE]) for r in reports.values())
    if physical_device_count() >= 2:
        assert len({r["index"] for r in reports.values()}) == 2  # every worker its own device
    if dmlgpu.debug_layer.requested():  # workers inherit DMLGPU_VALIDATION=1 and its log
        for layers in client.run(_environ, "VK_INSTANCE_LAYERS").values():
            assert dmlgpu.debug_layer.LAYER in layers.split(":")


def local_every_operator_over_64_mib(cluster, client):
    cases = []
    for op in OPERATORS:
        dtype = next(t for t in FOUR_BYTE if t in op.newest.input_types)
        cases += list(_cases(op, BIG_SHAPE, BIG_CHUNKS, [dtype], seed=1))
    for name, result, expected in cases:  # dask's chunks, uneven; refined where operands differ
        assert result.shape == BIG_SHAPE and result.chunks == expected.chunks, name
        assert all(c in BIG_CHUNKS[0] for c in result.chunks[0]), name
    assert dd.random_bits(BIG_SHAPE, np.uint32, BIG_CHUNKS).nbytes >= 64 << 20
    counts = dask.compute(*(_mismatches(r, e) for _, r, e in cases))
    assert dict(zip((n for n, _, _ in cases), counts)) == {n: 0 for n, _, _ in cases}
    assert {op.short for op in OPERATORS} <= set(dd.FUNCTIONS)


def local_every_operator_and_type_small(cluster, client):
    cases = [case for op in OPERATORS
             for case in _cases(op, (37, 50), ((10, 27), (20, 30)), op.newest.input_types, seed=7,
                                column_first=True)]
    counts = dask.compute(*(_mismatches(r, e) for _, r, e in cases))
    assert dict(zip((n for n, _, _ in cases), counts)) == {n: 0 for n, _, _ in cases}


def local_numpy_operands_scalars_and_zero_dims(cluster, client):
    x = da.arange(100, dtype=np.uint16, chunks=30)
    np.testing.assert_array_equal(dd.bit_xor(x, np.uint16(0xFF)).compute(), np.arange(100, dtype=np.uint16) ^ 0xFF)
    np.testing.assert_array_equal(dd.bit_xor(np.arange(100, dtype=np.uint16), x).compute(), np.zeros(100, np.uint16))
    assert dd.bit_not(da.from_array(np.array(7, np.int8))).compute() == ~np.int8(7)
    assert dd.bit_count(da.zeros((0, 4), dtype=np.uint8, chunks=2)).compute().shape == (0, 4)


def local_operands_follow_the_front_ends_rules(cluster, client):
    """One implementation of the operand rules (dmlgpu.layout.operands): big-endian arrays and
    Python scalars are taken as the front end takes them."""
    big = np.arange(100, dtype=">u4")
    x = da.from_array(big, chunks=30)
    expected = dmlgpu.bit_not(big)
    np.testing.assert_array_equal(dd.bit_not(x).compute(), expected)
    np.testing.assert_array_equal(dd.bit_not(big).compute(), expected)
    np.testing.assert_array_equal(dd.bit_xor(x, 0xFF).compute(), dmlgpu.bit_xor(big, 0xFF))
    np.testing.assert_array_equal(dd.bit_shift_left(3, x).compute(), dmlgpu.bit_shift_left(3, big))


def _sign_float64_error():
    try:
        dmlgpu.sign(np.zeros(4, np.float64))
    except dmlgpu.ValidationError as exc:
        return exc
    raise AssertionError("no error")


def local_worker_errors_reach_the_client_intact(cluster, client):
    front = _sign_float64_error()
    declared = da.zeros(8, dtype=np.float64, chunks=4).map_blocks(np.asarray, dtype=np.float32)  # blocks lie
    try:
        dd.sign(declared).compute()
        raise AssertionError("no error")
    except dmlgpu.ValidationError as ours:
        assert type(ours) is type(front) and str(ours) == str(front)
        assert (ours.operator, ours.tensor, ours.field) == (front.operator, front.tensor, front.field)
    try:
        dmlgpu.Device(99)
    except dmlgpu.DeviceError as local:
        message = str(local)
    try:
        client.submit(dmlgpu.Device, 99, pure=False).result()
        raise AssertionError("no error")
    except dmlgpu.DeviceError as remote:
        assert type(remote) is dmlgpu.DeviceError and str(remote) == message
    assert dd.bit_not(da.ones(4, dtype=np.uint8, chunks=2)).compute().tolist() == [254] * 4  # still working


def local_device_blocks_move_only_between_processes(cluster, client):
    """Tensor-backed arrays over two workers: a chain computes with no transfer but the one
    block that must reach the other worker; compute() lands one Tensor on the client's device;
    to_host gives numpy."""
    a = dd.to_device(dd.random_bits((4000, 1000), np.uint32, chunks=(500, 1000), seed=1)).persist()
    b = dd.to_device(dd.random_bits((1000,), np.uint32, chunks=(1000,), seed=2)).persist()
    distributed.wait([a, b])
    held = {w for w, keys in client.has_what().items() if any(a.name in str(k) for k in keys)}
    assert len(held) == 2, held  # a's blocks are on both workers
    before = client.run(_transfers)
    alone = dd.bit_count(~a ^ (a >> a) ^ (a & a)).persist()  # one array, no scalar
    distributed.wait(alone)
    after = client.run(_transfers)
    _only_moved_blocks_crossed(_moved(before, after))
    readme = dd.bit_count(~a ^ b).persist()  # b's block (at least) reaches the worker that lacks it
    distributed.wait(readme)
    moved = _moved(after, client.run(_transfers))
    _only_moved_blocks_crossed(moved)
    assert sum(m["upload_bytes"] for m in moved.values()) >= b.nbytes, moved
    mine = _transfers()
    result = readme.compute()
    assert isinstance(result, dmlgpu.Tensor) and result.device is dmlgpu.default_device()
    assert _moved({"me": mine}, {"me": _transfers()})["me"]["upload_bytes"] == result.nbytes
    a0, b0 = dd.to_host(a).compute(), dd.to_host(b).compute()
    assert type(a0) is np.ndarray
    R = REFERENCES
    assert np.array_equal(result.numpy(), R["bit_count"](R["bit_xor"](R["bit_not"](a0), b0)))
    assert np.array_equal(dd.to_host(alone).compute(),
                          R["bit_count"](~a0 ^ R["bit_shift_right"](a0, a0) ^ a0))


def local_reductions_across_workers(cluster, client):
    x = dd.to_device(dd.random_bits((600, 50), np.int32, chunks=(100, 25), seed=3))
    x0 = dd.to_host(x).compute()
    total = dd.sum(x, split_every=2).compute()
    assert isinstance(total, dmlgpu.Tensor) and total.numpy() == x0.sum(dtype=np.int32)
    assert np.array_equal(dd.to_host(dd.argmax(x, axis=0)).compute(), np.argmax(x0, axis=0))
    values, indices = dd.top_k(x, 5, axis=0, largest=False, split_every=2)
    order = np.argsort(x0, axis=0, kind="stable")[:5]
    assert np.array_equal(dd.to_host(indices).compute(), order)
    assert np.array_equal(dd.to_host(values).compute(), np.take_along_axis(x0, order, 0))


def local_map_blocks_resident(cluster, client):
    a = dd.random_bits((300, 200), np.uint16, chunks=((100, 200), (150, 50)), seed=3)
    b = dd.random_bits((200,), np.uint16, chunks=(64,), seed=4)
    chained = dd.map_blocks_resident(lambda t, u: dmlgpu.bit_count(~t ^ u), a, b, dtype=np.uint8)
    expected = _blocks(lambda x, y: REFERENCES["bit_count"](REFERENCES["bit_xor"](REFERENCES["bit_not"](x), y)),
                       [a, b], np.uint8)
    assert chained.compute().tolist() == expected.compute().tolist()


def local_hamming_index(cluster, client):
    """Shards on both workers, searched through their actors: numpy's answer for search,
    range_search, after removals and an add; every shard stays on its worker."""
    db = dd.random_bits((6000, 8), np.uint32, chunks=(1100, 8), seed=9)
    codes = dd.to_host(db).compute()
    index = dd.HammingIndex(db)
    assert index.shards == 6 and index.ntotal == 6000 and index.d == 256
    assert len(index.placement) == 2, index.placement
    queries = np.random.default_rng(2).integers(0, 2**32, (7, 8), dtype=np.uint32)
    for k in (1, 10, 40):
        _check_search(index, codes, queries, k)
    removed = np.arange(5, 6000, 7)
    assert index.remove_ids(np.concatenate([removed, removed[:3], [10**9]])) == removed.size
    _check_search(index, codes, queries, 10, removed)
    lims, distances, ids = index.range_search(queries, 118)
    keep = np.setdiff1d(np.arange(6000), removed)
    bits = np.bitwise_count(queries.view(np.uint8)[:, None, :] ^ codes[keep].view(np.uint8)[None]).sum(axis=2)
    for q in range(queries.shape[0]):
        hits = np.flatnonzero(bits[q] < 118)
        hits = hits[np.lexsort((keep[hits], bits[q][hits]))]
        assert np.array_equal(ids[lims[q]:lims[q + 1]], keep[hits])
        assert np.array_equal(distances[lims[q]:lims[q + 1]], bits[q][hits])
    extra = np.random.default_rng(3).integers(0, 2**32, (500, 8), dtype=np.uint32)
    index.add(extra)
    assert index.ntotal == keep.size + 500 and index.ids[-1] == 6499
    _check_search(index, np.concatenate([codes, extra]), queries, 10, removed)
    assert not index.counts.get("fallback_shards"), index.counts  # every answer came from the handlers
    index.close()


def _uploads():
    return dmlgpu.default_device().memory_stats()["uploads"]


def _transitions(dask_scheduler):
    return dask_scheduler.transition_counter


def _served_since(client, before):
    now = client.run(shards.served)
    return {w: {kind: n - before[w].get(kind, 0) for kind, n in now[w].items() if n != before[w].get(kind, 0)}
            for w in now}


def local_hamming_index_is_one_message_per_worker(cluster, client):
    """However many shards a worker holds, a search is one request to it, straight from the
    client (no task: the scheduler makes no transition), and one device search there (the
    queries uploaded once); a removal is one request per worker; the answers stay exact."""
    db = dd.random_bits((4000, 8), np.uint32, chunks=(500, 8), seed=12)  # 8 shards
    codes = dd.to_host(db).compute()
    index = dd.HammingIndex(db)
    placement = index.placement
    assert len(placement) == 2 and sum(placement.values()) == 8, placement
    assert {w: len(keys) for w, keys in client.run(shards.held_keys).items()} == {w: 0 for w in placement}
    queries = np.random.default_rng(5).integers(0, 2**32, (9, 8), dtype=np.uint32)
    _check_search(index, codes, queries, 10)  # the first search builds the shards where the blocks are
    assert {w: len(keys) for w, keys in client.run(shards.held_keys).items()} == placement
    served, uploads = client.run(shards.served), client.run(_uploads)
    transitions, counts = client.run_on_scheduler(_transitions), index.counts
    for k in (1, 10, 40):
        _check_search(index, codes, queries, k)
    index.range_search(queries, 100)
    assert client.run_on_scheduler(_transitions) == transitions
    assert _served_since(client, served) == {w: {"search": 3, "range_search": 1} for w in placement}
    one = dmlgpu.HammingIndex(codes)  # the same calls as one device search each, in this process
    one.search(queries, 10)  # (warm, as the workers' views are: its ids go to the device once)
    before = _uploads()
    for k in (1, 10, 40):
        one.search(queries, k)
    one.range_search(queries, 100)
    once = _uploads() - before
    assert client.run(_uploads) == {w: uploads[w] + once for w in placement}, (once, uploads, client.run(_uploads))
    assert index.counts == dict(counts, searches=counts["searches"] + 4, requests=counts["requests"] + 8)
    served = client.run(shards.served)
    removed = np.arange(3, 4000, 5)
    assert index.remove_ids(removed) == removed.size
    assert _served_since(client, served) == {w: {"remove": 1} for w in placement}
    _check_search(index, codes, queries, 10, removed)
    assert not index.counts.get("fallback_shards") and index.counts["placements"] == 1, index.counts
    index.close()
    assert all(not keys for keys in client.run(shards.held_keys).values())  # dropped at once


def local_restart_and_a_killed_worker(cluster, client):
    x = dd.random_bits((512, 4096), np.uint32, chunks=((100, 412), (4096,)), seed=11)
    expected = _blocks(REFERENCES["bit_not"], [x], np.uint32)
    client.restart()
    pins = {r[dd.DEVICE_VARIABLE] for r in client.run(dd.worker_device).values()}
    assert pins == set(map(str, cluster.devices))
    assert _mismatches(dd.bit_not(x), expected).compute() == 0
    victim, pid = next(iter(client.run(os.getpid).items()))
    future = client.compute(_mismatches(dd.bit_not(x), expected))
    os.kill(pid, signal.SIGKILL)
    assert future.result(timeout=STARTUP_S) == 0  # lost blocks rerun on the other worker
    deadline = time.monotonic() + STARTUP_S
    while True:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        if len(workers) == 2 and victim not in workers:
            break
        assert time.monotonic() < deadline, "the nanny did not bring the killed worker back"
        time.sleep(0.2)
    reports = client.run(dd.worker_device)
    assert sorted(r[dd.DEVICE_VARIABLE] for r in reports.values()) == sorted(map(str, cluster.devices))
    assert _mismatches(dd.bit_not(x), expected).compute() == 0


def _leftovers(pids):
    alive = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append((pid, " ".join(proc.cmdline()[:4])))
        except psutil.NoSuchProcess:
            pass
    return alive


def _wait_gone(pids, seconds=30):
    deadline = time.monotonic() + seconds
    while _leftovers(pids):
        assert time.monotonic() < deadline, f"still running: {_leftovers(pids)}"
        time.sleep(0.2)


def local_shuts_down_cleanly(cluster, client):
    pids = set(client.run(os.getpid).values())
    pids |= {p.pid for p in psutil.Process().children(recursive=True)
             if "resource_tracker" not in " ".join(p.cmdline())}
    client.close()
    cluster.close(timeout=STARTUP_S)
    assert cluster.status.name == "closed"
    _wait_gone(pids)


def group_local():
    cluster = dd.LocalVulkanCluster(n_workers=2, dashboard_address=None, silence_logs=logging.CRITICAL)
    client = distributed.Client(cluster)
    client.wait_for_workers(2, timeout=STARTUP_S)
    try:
        yield from ((name, fn, (cluster, client)) for name, fn in SCENARIOS["local"])
    finally:
        client.close()
        cluster.close()


# --- hosts: a scheduler and two worker commands, as on two hosts ----------------------------------

def _start(command, log, env):
    return subprocess.Popen([sys.executable, "-m", *command], cwd=os.path.dirname(log.name), env=env,
                            stdout=log, stderr=subprocess.STDOUT)


def _scheduler(folder, log, env):
    scheduler_file = os.path.join(folder, "scheduler.json")
    scheduler = _start(["dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                        "--scheduler-file", scheduler_file], log, env)
    deadline = time.monotonic() + STARTUP_S
    while not os.path.exists(scheduler_file):
        assert time.monotonic() < deadline and scheduler.poll() is None, "the scheduler did not start"
        time.sleep(0.1)
    return scheduler, scheduler_file


def _stop(processes):
    for proc in processes:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def hosts_arrays_exact(client):
    a = dd.to_device(dd.random_bits((3000, 700), np.uint16, chunks=(400, 350), seed=4))
    b = dd.to_device(dd.random_bits((700,), np.uint16, chunks=(300,), seed=5))
    a0, b0 = dd.to_host(a).compute(), dd.to_host(b).compute()
    chain = dd.bit_count(((~a ^ b) & (a | b)) ^ (a >> b))
    expected = np.bitwise_count(((~a0 ^ b0) & (a0 | b0)) ^ (a0 >> (b0 & 15)))
    assert np.array_equal(dd.to_host(chain).compute(), expected)
    assert np.array_equal(dd.to_host(dd.min(a, axis=1)).compute(), a0.min(axis=1))


def _stall_searches(seconds):
    """On a worker: its shard handler's next searches wait `seconds` first (a search in flight
    when the test kills the worker)."""
    from dmlgpu.dask import shards
    answer = shards._answer

    def stalled(request, blocks):
        if request["kind"] == "search":
            time.sleep(seconds)
        return answer(request, blocks)

    shards._answer = stalled


def _searches_served():
    from dmlgpu.dask import shards
    return shards.served().get("search", 0)


def hosts_killed_worker_mid_search(client):
    """A worker killed while it searches: its shards are searched again where dask recomputes
    their blocks (rebuilt from the persisted blocks' graph); the answer is numpy's, and nothing
    is lost: every id is still there, and later searches are exact."""
    db = dd.random_bits((120_000, 8), np.uint32, chunks=(15_000, 8), seed=6)
    codes = dd.to_host(db).compute()
    index = dd.HammingIndex(db)
    before = index.placement
    assert len(before) == 2, before
    queries = np.random.default_rng(4).integers(0, 2**32, (48, 8), dtype=np.uint32)
    expected = _host_reference(codes, queries, 10)
    assert all(np.array_equal(x, y) for x, y in zip(index.search(queries, 10), expected))
    pids = client.run(os.getpid)
    victim = sorted(before)[0]
    answer = {}

    def search():
        begin = time.perf_counter()
        answer["result"] = index.search(queries, 10)
        answer["seconds"] = time.perf_counter() - begin

    served = client.run(_searches_served, workers=[victim])[victim]
    client.run(_stall_searches, STARTUP_S, workers=[victim])  # killed inside its next search
    thread = threading.Thread(target=search)
    begin = time.perf_counter()
    thread.start()
    deadline = time.monotonic() + STARTUP_S
    while client.run(_searches_served, workers=[victim])[victim] == served:
        assert time.monotonic() < deadline, "the search did not reach the victim"
        time.sleep(0.01)
    os.kill(pids[victim], signal.SIGKILL)
    killed_after = time.perf_counter() - begin
    thread.join(STARTUP_S)
    assert not thread.is_alive(), "the search did not come back"
    assert answer["seconds"] > killed_after, "the search ended before the kill: nothing was tested"
    assert all(np.array_equal(x, y) for x, y in zip(answer["result"], expected))
    assert index.ntotal == codes.shape[0] and np.array_equal(index.ids, np.arange(codes.shape[0]))
    assert all(np.array_equal(x, y) for x, y in zip(index.search(queries, 10), expected))
    assert victim not in index.placement, index.placement  # its shards were rebuilt elsewhere
    deadline = time.monotonic() + STARTUP_S  # the nanny brings a new worker back
    while len(client.scheduler_info(n_workers=-1)["workers"]) < 2:
        assert time.monotonic() < deadline, "the killed worker did not come back"
        time.sleep(0.2)
    assert all(np.array_equal(x, y) for x, y in zip(index.search(queries, 10), expected))
    holder = next(iter(index.placement))  # now every shard: killed between two searches
    os.kill(client.run(os.getpid)[holder], signal.SIGKILL)
    deadline = time.monotonic() + STARTUP_S
    while holder in client.scheduler_info(n_workers=-1)["workers"]:
        assert time.monotonic() < deadline, "the scheduler did not notice the killed worker"
        time.sleep(0.1)
    begin = time.perf_counter()  # the client has not heard yet: its first try is a dead address
    assert all(np.array_equal(x, y) for x, y in zip(index.search(queries, 10), expected))
    seconds = time.perf_counter() - begin
    # A refused connection is given up after CONNECT_S, not retried for the client's timeout
    # (STARTUP_S here; it took all of it before).
    assert seconds < sharded_index.CONNECT_S + 30 < STARTUP_S, seconds
    assert all(np.array_equal(x, y) for x, y in zip(index.search(queries, 10), expected))  # placed again
    assert index.ntotal == codes.shape[0] and holder not in index.placement, index.placement
    deadline = time.monotonic() + STARTUP_S
    while len(client.scheduler_info(n_workers=-1)["workers"]) < 2:
        assert time.monotonic() < deadline, "the killed worker did not come back"
        time.sleep(0.2)


def group_hosts():
    folder = tempfile.mkdtemp(prefix="dmlgpu-dask-hosts-")
    log = open(os.path.join(folder, "log.txt"), "w+")
    env = dict(os.environ)
    env.pop(dd.DEVICE_VARIABLE, None)
    env.pop(dd.DEVICES_VARIABLE, None)
    scheduler, scheduler_file = _scheduler(folder, log, env)
    common = ["--host", "127.0.0.1", "--no-dashboard", "--scheduler-file", scheduler_file,
              "--nworkers", "1", "--nthreads", "1"]
    workers = [_start(["dmlgpu", "worker", *common], log, env) for _ in range(2)]  # two "hosts"
    try:
        with distributed.Client(scheduler_file=scheduler_file, timeout=STARTUP_S) as client:
            client.wait_for_workers(2, timeout=STARTUP_S)
            yield from ((name, fn, (client,)) for name, fn in SCENARIOS["hosts"])
            client.shutdown()
        for proc in workers + [scheduler]:
            proc.wait(timeout=60)
    finally:
        _stop(workers + [scheduler])
        log.close()


# --- pinning: DMLGPU_DEVICES for the workers of one command ---------------------------------------

def pinning_kth_worker_on_kth_device(client, count):
    """The k-th worker process gets the k-th device of DMLGPU_DEVICES; the second names no
    device, so its DeviceError must reach the client."""
    pins = client.run(_environ, dd.DEVICE_VARIABLE)
    assert sorted(pins.values()) == sorted(["0", str(count)])
    good = next(w for w, pin in pins.items() if pin == "0")
    bad = next(w for w, pin in pins.items() if pin != "0")
    assert client.run(dd.worker_device, workers=[good])[good]["index"] == 0
    x = da.arange(10, dtype=np.uint8, chunks=5)
    assert client.compute(dd.bit_not(x), workers=[good]).result().tolist() == list(range(255, 245, -1))
    y = da.arange(10, 20, dtype=np.uint8, chunks=5)  # new keys: nothing computed yet
    try:
        client.compute(dd.bit_not(y), workers=[bad]).result()
        raise AssertionError("no error")
    except dmlgpu.DeviceError as error:
        assert f"DMLGPU_DEVICE='{count}' names no device" in str(error), error


def group_pinning():
    count = physical_device_count()
    folder = tempfile.mkdtemp(prefix="dmlgpu-dask-pinning-")
    log = open(os.path.join(folder, "log.txt"), "w+")
    env = dict(os.environ, **{dd.DEVICES_VARIABLE: f"0,{count}"})
    env.pop(dd.DEVICE_VARIABLE, None)
    scheduler, scheduler_file = _scheduler(folder, log, env)
    workers = _start(["dmlgpu", "worker", "--host", "127.0.0.1", "--no-dashboard", "--scheduler-file",
                      scheduler_file], log, env)
    try:
        with distributed.Client(scheduler_file=scheduler_file, timeout=STARTUP_S) as client:
            client.wait_for_workers(2, timeout=STARTUP_S)
            yield from ((name, fn, (client, count)) for name, fn in SCENARIOS["pinning"])
            spawned = [p.pid for p in psutil.Process(workers.pid).children(recursive=True)]
            client.shutdown()
        for proc in (workers, scheduler):
            proc.wait(timeout=60)
        _wait_gone(spawned)
    finally:
        _stop([workers, scheduler])
        log.close()


GROUPS = {"local": group_local, "hosts": group_hosts, "pinning": group_pinning}
#: Group -> its scenarios, in the order they run (each a function of this module named GROUP_...).
SCENARIOS = {group: [(name[len(group) + 1:], fn) for name, fn in list(globals().items())
                     if name.startswith(group + "_") and callable(fn)] for group in GROUPS}


def main(group: str) -> int:
    results = {}
    try:
        for name, fn, args in GROUPS[group]():
            start = time.perf_counter()
            try:
                fn(*args)
                results[name] = None
            except Exception:  # noqa: BLE001 -- reported to the test by name
                results[name] = traceback.format_exc()
            print(f"{group}-{name}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 -- the group's cluster itself failed
        results["<setup>"] = traceback.format_exc()
    print(json.dumps(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
