"""dmlgpu.dask on a distributed cluster of two worker processes: one per device, or two on one.

One cluster for the module (starting workers costs seconds). The workers inherit this process's
environment, so under DMLGPU_VALIDATION=1 they run under the validation layer too and write to
the same log, which `conftest.no_validation_messages` reads after every test.
"""
import inspect
import logging
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is not installed (pip install .[dask])")
distributed = pytest.importorskip("distributed", reason="distributed is not installed (pip install .[dask])")

import cloudpickle  # noqa: E402  (a dependency of distributed)
import dask  # noqa: E402
import psutil  # noqa: E402  (a dependency of distributed)

import dmlgpu  # noqa: E402
import dmlgpu.dask as dd  # noqa: E402
from dmlgpu.front import numpy_api  # noqa: E402
from dmlgpu.table.dtypes import DataType  # noqa: E402
from dmlgpu.table.operators import OPERATORS  # noqa: E402
from dmlgpu.table.reference import REFERENCES  # noqa: E402
from dmlgpu.runtime import physical_device_count  # noqa: E402

#: 2048 x 8192 four-byte elements: 64 MiB, in uneven chunks.
BIG_SHAPE = (2048, 8192)
BIG_CHUNKS = ((640, 1024, 384), (3000, 5192))
#: Preferred 4-byte type per operator (raw float bits matter most), first the table allows.
FOUR_BYTE = (DataType.FLOAT32, DataType.INT32, DataType.UINT32)
STARTUP_S = 120

# Workers cannot import this file: send its functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def local():
    """Two worker processes, on two devices where there are two, else both on device 0; with
    the worker processes seen and this process's children before it started."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    cluster = dd.LocalVulkanCluster(n_workers=2, dashboard_address=None, silence_logs=logging.CRITICAL)
    client = distributed.Client(cluster)
    client.wait_for_workers(2, timeout=STARTUP_S)
    yield SimpleNamespace(cluster=cluster, client=client, pids=set(), before=before)
    client.close()
    cluster.close()


@pytest.fixture
def client(local):
    if local.cluster.status.name != "running":
        pytest.skip("the module's cluster was shut down by an earlier test")
    local.pids |= set(local.client.run(os.getpid).values())
    return local.client


def _blocks(fn, arrays, dtype):
    """`fn` over blocks of `arrays` broadcast together (what the reference needs, in the test)."""
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


def test_every_operator_over_64_mib_bit_for_bit(client):
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


def test_every_operator_and_data_type_small_bit_for_bit(client):
    cases = [case for op in OPERATORS
             for case in _cases(op, (37, 50), ((10, 27), (20, 30)), op.newest.input_types, seed=7,
                                column_first=True)]
    counts = dask.compute(*(_mismatches(r, e) for _, r, e in cases))
    assert dict(zip((n for n, _, _ in cases), counts)) == {n: 0 for n, _, _ in cases}


def test_numpy_operands_scalars_and_zero_dims(client):
    x = da.arange(100, dtype=np.uint16, chunks=30)
    np.testing.assert_array_equal(dd.bit_xor(x, np.uint16(0xFF)).compute(), np.arange(100, dtype=np.uint16) ^ 0xFF)
    np.testing.assert_array_equal(dd.bit_xor(np.arange(100, dtype=np.uint16), x).compute(), np.zeros(100, np.uint16))
    assert dd.bit_not(da.from_array(np.array(7, np.int8))).compute() == ~np.int8(7)
    assert dd.bit_count(da.zeros((0, 4), dtype=np.uint8, chunks=2)).compute().shape == (0, 4)


def test_workers_are_pinned_to_their_devices(local, client):
    cluster = local.cluster
    reports = client.run(dd.worker_device)
    assert len(reports) == 2 and len({r["pid"] for r in reports.values()}) == 2
    assert sorted(r[dd.DEVICE_VARIABLE] for r in reports.values()) == sorted(map(str, cluster.devices))
    assert all(r["index"] == int(r[dd.DEVICE_VARIABLE]) for r in reports.values())
    if physical_device_count() >= 2:
        assert len({r["index"] for r in reports.values()}) == 2  # every worker its own device
    if dmlgpu.debug_layer.requested():  # workers inherit DMLGPU_VALIDATION=1 and its log
        for layers in client.run(_environ, "VK_INSTANCE_LAYERS").values():
            assert dmlgpu.debug_layer.LAYER in layers.split(":")


# Calls the client rejects before a graph exists, each with the front end's message.
BAD_CALLS = {
    "dtype-not-at-level": ("sign", [np.float64], {}),
    "mixed-dtypes": ("bit_xor", [np.uint8, np.uint16], {}),
    "no-directml-type": ("bit_not", [np.bool_], {}),
    "output-dtype": ("bit_count", [np.uint8], {"dtype": np.int8}),
    "old-level": ("sign", [np.int8], {"feature_level": dmlgpu.FeatureLevel.LEVEL_2_0}),
    "unknown-level": ("bit_not", [np.uint8], {"feature_level": 1}),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_client_side_errors_are_the_front_ends(case):
    short, dtypes, options = BAD_CALLS[case]
    with pytest.raises(dmlgpu.ValidationError) as front:
        getattr(dmlgpu, short)(*(np.zeros(3, t) for t in dtypes), **options)
    with pytest.raises(dmlgpu.ValidationError) as ours:
        dd.FUNCTIONS[short](*(da.zeros(3, dtype=t, chunks=2) for t in dtypes), **options)
    assert str(ours.value) == str(front.value) and type(ours.value) is type(front.value)


def test_operands_follow_the_front_ends_rules(client):
    """One implementation of the operand rules (dmlgpu.layout.operands): big-endian arrays and Python
    scalars are taken as the front end takes them, and rejected with its messages."""
    big = np.arange(100, dtype=">u4")
    x = da.from_array(big, chunks=30)
    expected = dmlgpu.bit_not(big)
    np.testing.assert_array_equal(dd.bit_not(x).compute(), expected)
    np.testing.assert_array_equal(dd.bit_not(big).compute(), expected)
    np.testing.assert_array_equal(dd.bit_xor(x, 0xFF).compute(), dmlgpu.bit_xor(big, 0xFF))
    np.testing.assert_array_equal(dd.bit_shift_left(3, x).compute(), dmlgpu.bit_shift_left(3, big))
    assert dd.bit_xor(x, 0xFF).dtype == np.uint32
    for bad in ((x, 2**40), (x, 1.5), (1, 2), (x, "1")):
        with pytest.raises(dmlgpu.ValidationError) as front:
            dmlgpu.bit_xor(*(big if b is x else b for b in bad))
        with pytest.raises(dmlgpu.ValidationError) as ours:
            dd.bit_xor(*bad)
        assert type(ours.value) is type(front.value), bad
        assert (ours.value.tensor, ours.value.field, ours.value.value) == \
            (front.value.tensor, front.value.field, front.value.value), bad


def test_shapes_that_do_not_broadcast_are_rejected_on_the_client():
    with pytest.raises(dmlgpu.ValidationError) as front:
        dmlgpu.bit_xor(np.zeros(3, np.uint8), np.zeros(4, np.uint8))
    with pytest.raises(dmlgpu.ValidationError) as ours:
        dd.bit_xor(da.zeros(3, dtype=np.uint8, chunks=2), da.zeros(4, dtype=np.uint8, chunks=2))
    assert str(ours.value) == str(front.value)
    with pytest.raises(TypeError, match="takes 2 arrays"):
        dd.bit_xor(da.zeros(3, dtype=np.uint8))
    with pytest.raises(TypeError, match="unexpected keyword"):
        dd.bit_not(da.zeros(3, dtype=np.uint8), out=None)


def _sign_float64_error():
    try:
        dmlgpu.sign(np.zeros(4, np.float64))
    except dmlgpu.ValidationError as exc:
        return exc
    raise AssertionError("no error")


def _declared_float32_holding_float64():
    """What only a block shows: a dask array whose blocks are not of its declared dtype."""
    return da.zeros(8, dtype=np.float64, chunks=4).map_blocks(np.asarray, dtype=np.float32)


def test_worker_errors_reach_the_client_intact(client):
    front = _sign_float64_error()
    with pytest.raises(dmlgpu.ValidationError) as ours:
        dd.sign(_declared_float32_holding_float64()).compute()
    assert type(ours.value) is type(front) and str(ours.value) == str(front)
    assert (ours.value.operator, ours.value.tensor, ours.value.field) == (front.operator, front.tensor, front.field)

    with pytest.raises(dmlgpu.DeviceError) as local:
        dmlgpu.Device(99)
    with pytest.raises(dmlgpu.DeviceError) as remote:
        client.submit(dmlgpu.Device, 99, pure=False).result()
    assert type(remote.value) is dmlgpu.DeviceError and str(remote.value) == str(local.value)
    assert dd.bit_not(da.ones(4, dtype=np.uint8, chunks=2)).compute().tolist() == [254] * 4  # still working


def test_resident_blocks_chain_operations_on_the_device(client):
    a = dd.random_bits((300, 200), np.uint16, chunks=((100, 200), (150, 50)), seed=3)
    b = dd.random_bits((200,), np.uint16, chunks=(64,), seed=4)
    chained = dd.map_blocks_resident(lambda t, u: dmlgpu.bit_count(~t ^ u), a, b, dtype=np.uint8)
    expected = _blocks(lambda x, y: REFERENCES["bit_count"](REFERENCES["bit_xor"](REFERENCES["bit_not"](x), y)),
                       [a, b], np.uint8)
    assert chained.compute().tolist() == expected.compute().tolist()
    wrong = dd.map_blocks_resident(lambda t: ~t, a, dtype=np.uint8)
    with pytest.raises(ValueError, match="map_blocks_resident"):
        wrong.compute()


def test_worker_restart_and_a_killed_worker(local, client):
    cluster = local.cluster
    x = dd.random_bits((512, 4096), np.uint32, chunks=((100, 412), (4096,)), seed=11)
    expected = _blocks(REFERENCES["bit_not"], [x], np.uint32)
    client.restart()
    pins = {r[dd.DEVICE_VARIABLE] for r in client.run(dd.worker_device).values()}
    assert pins == set(map(str, cluster.devices))
    assert _mismatches(dd.bit_not(x), expected).compute() == 0

    victim, pid = next(iter(client.run(os.getpid).items()))
    local.pids.add(pid)
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


def _ours(children, before):
    """New children of this process, less multiprocessing's resource tracker (lives until exit)."""
    return [p.pid for p in children if p.pid not in before
            and "resource_tracker" not in " ".join(_cmdline(p))]


def _cmdline(proc):
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def _wait_gone(pids, seconds=30):
    deadline = time.monotonic() + seconds
    while _leftovers(pids):
        assert time.monotonic() < deadline, f"still running: {_leftovers(pids)}"
        time.sleep(0.2)


def test_cluster_shuts_down_cleanly(local, client):
    local.pids |= set(client.run(os.getpid).values())
    children = psutil.Process().children(recursive=True)
    client.close()
    local.cluster.close(timeout=STARTUP_S)
    assert local.cluster.status.name == "closed"
    _wait_gone(local.pids | set(_ours(children, local.before)))


def test_dask_worker_command_pins_the_kth_worker_to_the_kth_device(tmp_path):
    """`dask scheduler` + `python -m dmlgpu worker` as on another host, here on 127.0.0.1: the
    k-th worker process gets the k-th device of DMLGPU_DEVICES. The second names no device, so
    its DeviceError must reach the client."""
    count = physical_device_count()
    scheduler_file = tmp_path / "scheduler.json"
    env = dict(os.environ, **{dd.DEVICES_VARIABLE: f"0,{count}"})
    env.pop(dd.DEVICE_VARIABLE, None)
    common = ["--no-dashboard", "--scheduler-file", str(scheduler_file)]
    log = open(tmp_path / "log.txt", "w+")
    quiet = dict(cwd=str(tmp_path), env=env, stdout=log, stderr=subprocess.STDOUT)
    scheduler = subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1",
                                  "--port", "0", *common], **quiet)
    workers = subprocess.Popen([sys.executable, "-m", "dmlgpu", "worker", "--host", "127.0.0.1", *common], **quiet)
    processes = [workers, scheduler]
    try:
        deadline = time.monotonic() + STARTUP_S
        while not scheduler_file.exists():
            assert time.monotonic() < deadline and scheduler.poll() is None, (tmp_path / "log.txt").read_text()
            time.sleep(0.1)
        with distributed.Client(scheduler_file=str(scheduler_file), timeout=STARTUP_S) as client:
            client.wait_for_workers(2, timeout=STARTUP_S)
            pins = client.run(_environ, dd.DEVICE_VARIABLE)
            assert sorted(pins.values()) == sorted(["0", str(count)])
            good = next(w for w, pin in pins.items() if pin == "0")
            bad = next(w for w, pin in pins.items() if pin != "0")
            assert client.run(dd.worker_device, workers=[good])[good]["index"] == 0
            x = da.arange(10, dtype=np.uint8, chunks=5)
            assert client.compute(dd.bit_not(x), workers=[good]).result().tolist() == list(range(255, 245, -1))
            y = da.arange(10, 20, dtype=np.uint8, chunks=5)  # new keys: nothing computed yet
            with pytest.raises(dmlgpu.DeviceError, match=f"DMLGPU_DEVICE='{count}' names no device"):
                client.compute(dd.bit_not(y), workers=[bad]).result()
            spawned = [p.pid for p in psutil.Process(workers.pid).children(recursive=True)]
            client.shutdown()
        for proc in processes:
            proc.wait(timeout=60)
        _wait_gone(spawned)
    finally:
        for proc in processes:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log.close()


def _environ(name):
    return os.environ.get(name)
