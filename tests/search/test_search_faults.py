"""Long searches as a user meets them (issue 32, row 8), each in a fresh interpreter with a
timeout so that a hang or a crash fails the test: k = n over 20,000 codes with 64 queries ends in
about a sort's time, and Ctrl-C during a long search (or `top_k`) is seen within 100 ms, after
which the index and the device still give numpy's answer."""
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import watchdog

import dmlgpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(dmlgpu.__file__)))

#: Ctrl-C is seen within this many seconds of the signal (issue 32: "within 100 ms").
INTERRUPT_S = 0.1


def child(code: str, timeout: float) -> str:
    """Run `code` in a fresh interpreter (the dmlgpu under test first on the path) that must exit
    cleanly within `timeout` seconds; its stdout."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    try:
        result = subprocess.run([sys.executable, "-c", watchdog(timeout) + textwrap.dedent(code)], env=env, cwd="/",
                                capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"hung for {timeout} s; output so far:\n{exc.stdout}\n{exc.stderr}")
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result.stdout


def values(out: str, name: str) -> list[float]:
    """The numbers of the child's line `name: a b c`."""
    line = next(line for line in out.splitlines() if line.startswith(name + ":"))
    return [float(v) for v in line.split(":", 1)[1].split()]


# Sends SIGINT to its own process `after` seconds into `call()`, which must still be running; the
# delay until KeyboardInterrupt reaches the caller (the work already submitted drained).
INTERRUPT = """
import os, signal, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)

def interrupted(call, after):
    sent = []
    def interrupt():
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)
    timer = threading.Timer(after, interrupt)
    start = time.perf_counter()
    timer.start()
    try:
        call()
    except KeyboardInterrupt:
        timer.join()
        return time.perf_counter() - sent[0]
    timer.cancel()
    raise SystemExit(f"the call ended after {time.perf_counter() - start:.2f} s, before the interrupt")
"""


def test_k_equal_to_n_with_many_queries():
    """k = n = 20,000 with 64 queries: 25-41 s (8 queries) and over 120 s (64) before; now about
    numpy's stable sort of the distances (0.24 s on lavapipe, numpy 0.24-0.38 s)."""
    out = child("""
        import time
        import numpy as np
        import dmlgpu
        rng = np.random.default_rng(3)
        database = rng.integers(0, 256, size=(20000, 8), dtype=np.uint8)
        queries = rng.integers(0, 256, size=(64, 8), dtype=np.uint8)
        dmlgpu.hamming_knn(database, queries[:2], 20000)  # (the pipelines made once)
        start = time.perf_counter()
        distances, rows = dmlgpu.hamming_knn(database, queries, 20000)
        seconds = time.perf_counter() - start
        bits = np.bitwise_count(queries[:, None] ^ database[None]).sum(axis=2)
        order = np.argsort(bits, axis=1, kind="stable")
        assert np.array_equal(rows, order) and np.array_equal(distances, np.take_along_axis(bits, order, 1))
        print("seconds:", seconds)
    """, timeout=120)
    (seconds,) = values(out, "seconds")
    assert seconds < 5, f"k = n = 20,000 x 64 queries took {seconds:.2f} s (under 1 s on lavapipe)"


@pytest.mark.parametrize("k", [10, 4000])  # the register path; the selection path
def test_ctrl_c_during_a_long_search(k):
    """Ctrl-C 0.2-0.6 s into a search of a second or more (500,000 x 256-bit codes, 512 queries;
    with 256 it took 0.5 s on a quiet 2-core host and ended before the last interrupt) is seen
    within 100 ms (it was 6.2 s at k = 4,000): the pacer cuts the work into ~25 ms submits. The
    index and the device still work afterwards: numpy's answer."""
    out = child(INTERRUPT + f"""
import numpy as np
import dmlgpu
rng = np.random.default_rng(5)
database = rng.integers(0, 256, size=(500000, 32), dtype=np.uint8)
queries = rng.integers(0, 256, size=(512, 32), dtype=np.uint8)
index = dmlgpu.HammingIndex(database)
index.search(queries[:1], {k})  # (the pipelines made once)
delays = [interrupted(lambda: index.search(queries, {k}), 0.2 + 0.2 * attempt) for attempt in range(3)]
distances, rows = index.search(queries[:2], 50)
bits = np.bitwise_count(queries[:2, None] ^ database[None]).sum(axis=2)
order = np.argsort(bits, axis=1, kind="stable")[:, :50]
assert np.array_equal(rows, order) and np.array_equal(distances, np.take_along_axis(bits, order, 1))
print("delays:", *delays)
""", timeout=240)
    delays = sorted(values(out, "delays"))
    # (The median: a host shared with other work can stall one wait; pacing that fails is late
    # every time, by seconds.)
    assert delays[1] < INTERRUPT_S and delays[2] < 3 * INTERRUPT_S, \
        f"Ctrl-C seen after {[round(d * 1000) for d in delays]} ms"


def test_ctrl_c_during_a_long_top_k():
    """Ctrl-C 0.3 s into a top_k of seconds (8 x 2^19 uint32, K = 2^19 - 1: each invocation keeps
    a heap of almost its whole sequence, then sorts it) is seen within 100 ms, and a later top_k
    gives numpy's answer."""
    out = child(INTERRUPT + """
import numpy as np
import dmlgpu
rng = np.random.default_rng(5)
x = dmlgpu.Tensor.from_numpy(rng.integers(0, 2**32, size=(8, 1 << 19), dtype=np.uint32))
dmlgpu.top_k(x[:, :100], 10)  # (the pipeline made once)
delay = interrupted(lambda: dmlgpu.top_k(x, (1 << 19) - 1)[0].numpy(), 0.3)
small = rng.integers(0, 2**32, size=(3, 500), dtype=np.uint32)
values, indices = dmlgpu.top_k(small, 7)
order = np.argsort(-small.astype(np.int64), axis=1, kind="stable")[:, :7]
assert np.array_equal(indices, order) and np.array_equal(values, np.take_along_axis(small, order, 1))
print("delays:", delay)
""", timeout=240)
    delays = values(out, "delays")
    assert max(delays) < INTERRUPT_S, f"Ctrl-C seen after {[round(d * 1000) for d in delays]} ms"
