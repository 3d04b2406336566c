"""Shared fixtures. The suite imports the installed dmlgpu (never the source tree) and says which
Vulkan device it runs on.

CI runs it in several processes (pytest-xdist, `tools/bootstrap.sh test`). A worker of xdist
ignores SIGINT, which its children would inherit and `_thread.interrupt_main` would honour, so
each worker takes Python's own Ctrl-C handler back (the suite's interrupt tests need a process
as a user's is); and each writes the validation layer's messages to a log of its own
(DMLGPU_VALIDATION_LOG plus the worker's name), as two processes appending to one file could
overwrite each other's.
"""
import os
import signal
import subprocess
import sys
import zlib

import numpy as np
import pytest

_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.environ.get("DMLGPU_VALIDATION_LOG"):
        os.environ["DMLGPU_VALIDATION_LOG"] += "." + _WORKER

import dmlgpu  # noqa: E402 (after the worker's environment is set: the first device reads it)

POISON = 0xA5  # every output byte starts as this, so unwritten elements show

#: What the second CI pass (under the Khronos validation layer) leaves out: tests that make no
#: Vulkan call of their own (types, docs, the repository's layout, packaging, descriptor
#: validation, the planner's speed, the cache files' trust checks), or whose device work is what
#: the rest of the suite runs under the layer already (the benchmark harness's quick run, Dask's
#: cluster plumbing and chunk protocol, the Ctrl-C sweeps: tests/runtime/test_soak.py interrupts
#: calls at random under the layer too). The first pass runs them all.
VALIDATION_PASS_LEAVES_OUT = (
    "tests/test_typing.py", "tests/test_docs.py", "tests/test_structure.py", "tests/test_repository.py",
    "tests/test_package_metadata.py", "tests/test_packaging.py", "tests/test_bootstrap.py", "tests/test_bench.py",
    "tests/describe/test_fuzz_descriptors.py", "tests/dask/test_dask.py", "tests/dask/test_dask_arrays.py",
    "tests/runtime/test_cache_trust.py", "tests/runtime/test_interrupts.py",
    "tests/api/test_graphs_command_lists.py::test_many_independent_steps_plan_in_seconds",
)


#: Of a parametrized test's cases, the second pass runs the first and one in VALIDATION_PASS_SHARE
#: of the others, picked by a hash of the case's id (the same cases every run). The layer judges
#: how a kernel is built and dispatched (pipelines, descriptors, barriers, copies), which the
#: cases of one test share (they differ in values, shapes and data types); every test function
#: still runs under it, and the first pass runs every case.
VALIDATION_PASS_SHARE = 3


def _validation_pass_runs(item, firsts: set) -> bool:
    spec = getattr(item, "callspec", None)
    if spec is None:
        return True
    function = item.nodeid.split("[", 1)[0]
    if function not in firsts:
        firsts.add(function)
        return True
    return zlib.crc32(item.nodeid.encode()) % VALIDATION_PASS_SHARE == 0


def pytest_collection_modifyitems(config, items):
    if not dmlgpu.debug_layer.requested():
        return
    root = str(config.rootpath)
    kept, left, firsts = [], [], set()
    for item in items:
        where = os.path.relpath(str(item.path), root) + "::" + item.name
        runs = (not any(where.startswith(prefix) for prefix in VALIDATION_PASS_LEAVES_OUT)
                and _validation_pass_runs(item, firsts))
        (kept if runs else left).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def pytest_report_header(config):
    try:
        device = dmlgpu.default_device()
        where = f"{device.name} ({device.type}; {device.driver})"
    except dmlgpu.DeviceError as exc:
        where = f"no device: {exc}"
    layer = (f"on, log {os.environ.get('DMLGPU_VALIDATION_LOG')}" if dmlgpu.debug_layer.requested()
             else "off (DMLGPU_VALIDATION=1 turns it on)")
    return [f"dmlgpu {dmlgpu.__version__} from {os.path.dirname(dmlgpu.__file__)}",
            f"dmlgpu device: {where}", f"Vulkan validation layer: {layer}"]


@pytest.fixture(autouse=True)
def no_validation_messages():
    """Under DMLGPU_VALIDATION=1, any message of the Khronos validation layer fails the test."""
    log = os.environ.get("DMLGPU_VALIDATION_LOG") if dmlgpu.debug_layer.requested() else None
    start = os.path.getsize(log) if log and os.path.exists(log) else 0
    yield
    if log and os.path.exists(log) and os.path.getsize(log) > start:
        with open(log, errors="replace") as f:
            f.seek(start)
            pytest.fail("Vulkan validation layer:\n" + f.read()[:4000], pytrace=False)


@pytest.fixture(scope="session")
def device():
    return dmlgpu.default_device()


@pytest.fixture
def rng(request):
    # A different but reproducible stream per test.
    seed = sum(request.node.nodeid.encode()) * 7919 + len(request.node.nodeid)
    return np.random.default_rng(seed)


def poisoned(shape, dtype) -> np.ndarray:
    out = np.empty(shape, dtype=dtype)
    out.reshape(-1).view(np.uint8)[:] = POISON
    return out


def shape_id(shape) -> str:
    return "(" + ",".join(map(str, shape)) + ")"


def watchdog(timeout: float) -> str:
    """A first line for a child's code: shortly before `timeout` it prints every thread's stack
    and exits, so a hang fails with where it hung (a child killed at the timeout leaves nothing)."""
    return f"import faulthandler; faulthandler.dump_traceback_later({max(timeout - 10, 0.9 * timeout)!r}, exit=True)\n"


def run_validated(code: str, log) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter from / under the validation layer, logging to `log`.
    Where the layer is not installed (a lent GPU machine; CI installs it, and asked for without
    it DMLGPU_VALIDATION is an error), outside CI the child runs without it: its exit and output
    are still checked, its log stays empty."""
    env = {**os.environ, "DMLGPU_VALIDATION": "1", "DMLGPU_VALIDATION_LOG": str(log)}
    if not os.environ.get("CI") and dmlgpu.debug_layer.LAYER not in dmlgpu.runtime.probe.instance_layers():
        del env["DMLGPU_VALIDATION"]
    return subprocess.run([sys.executable, "-c", code], env=env, cwd="/", capture_output=True,
                          text=True, timeout=120)


def assert_clean_exit(code: str, tmp_path) -> None:
    """`code` (which prints "done") exits with status 0, no stderr and no validation message."""
    log = tmp_path / "validation.log"
    result = run_validated(code, log)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done" and result.stderr == ""
    assert not log.exists() or log.read_text() == "", log.read_text()
