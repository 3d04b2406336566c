"""Where one numpy front-end call's time goes, by the runtime's and the front end's pieces:
wraps them with timers and runs `bit_not(x, out=o)` on 1 MiB and on 16 bytes of uint32.
Nested pieces are counted in each enclosing one (`read` holds `_land`, which holds waits).
Then the call unwrapped: at 1 MiB with its host copies on one thread and on 2 and 4; at 256 KiB,
1 MiB and 2 MiB as one kept host call and as two overlapped halves (the default through staging,
`HOST_CALL_SPLIT_BYTES` and up); and CuPy's `asnumpy(invert(asarray(x)), out=o)` at each size.

    python benchmarks/front_end_segments.py [--quick]

`--quick`: 20 calls per timing instead of 300 (a check that the script runs).
"""
import argparse
import collections
import time

import numpy as np

import dmlgpu
from dmlgpu.kernels import compiled_operator as compiled
from dmlgpu.layout import host_chunks as host_pieces, memo
from dmlgpu.runtime import buffers, device, host_calls, host_copy, stream

SECONDS = collections.defaultdict(float)
CALLS = 300  #: calls per timing (`--quick`: 20)
PIECES = ((host_pieces, "run_host_call"), (device.Device, "run_host_calls"), (host_calls.HostCall, "start"),
          (host_calls.HostCall, "finish"), (host_pieces, "run"), (device.Device, "upload"), (device.Device, "allocate"),
          (compiled.CompiledOperator, "execute"), (compiled.CompiledOperator, "check"),
          (buffers.Buffer, "read"), (buffers.Buffer, "release"), (buffers, "_land"),
          (stream.Stream, "flush"), (stream.Stream, "wait"), (stream.Stream, "_retire"))


def timed(function, label):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            SECONDS[label] += time.perf_counter() - start
    wrapper.__wrapped__ = function
    return wrapper


def whole_call(x, o) -> float:
    for _ in range(CALLS // 6):
        dmlgpu.bit_not(x, out=o)
    start = time.perf_counter()
    for _ in range(CALLS):
        dmlgpu.bit_not(x, out=o)
    return (time.perf_counter() - start) / CALLS


def best_call(x, o) -> float:
    return min(whole_call(x, o) for _ in range(3))


def cupy_call(x, o) -> float | None:
    try:
        import cupy
    except ImportError:
        return None
    for _ in range(CALLS // 6):
        cupy.asnumpy(cupy.invert(cupy.asarray(x)), out=o)
    best = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(CALLS):
            cupy.asnumpy(cupy.invert(cupy.asarray(x)), out=o)
        best.append((time.perf_counter() - start) / CALLS)
    return min(best)


def copy_threads_and_halves():
    """The call with its host copies on one thread and split over the pool (the default from
    host_copy.SPLIT_BYTES); as one host call and as two overlapped halves; with CuPy in the
    same process when it is there."""
    x = np.arange(1 << 18, dtype=np.uint32)
    o = np.empty_like(x)
    saved = host_copy.THREADS
    try:
        for label, threads in (("one thread", 1), (f"split over {saved} threads", saved)):
            host_copy.THREADS = threads
            print(f"1 MiB, host copies {label}: {best_call(x, o) * 1e6:.1f} us (best of 3 x {CALLS})")
    finally:
        host_copy.THREADS = saved
    split = host_calls.HOST_CALL_SPLIT_BYTES
    try:
        for size in (256 << 10, 1 << 20, 2 << 20):
            x = np.arange(size // 4, dtype=np.uint32)
            o = np.empty_like(x)
            row = []
            for label, threshold in (("whole", 1 << 40), ("halves", 0)):
                host_calls.HOST_CALL_SPLIT_BYTES = threshold
                memo.HOST_PARTS.clear()
                dmlgpu.default_device().empty_cache()
                row.append(f"{label} {best_call(x, o) * 1e6:.1f} us")
            peer = cupy_call(x, o)
            if peer is not None:
                row.append(f"CuPy {peer * 1e6:.1f} us")
            print(f"{size >> 10} KiB `out=`: " + ", ".join(row))
    finally:
        host_calls.HOST_CALL_SPLIT_BYTES = split


def main(argv=None):
    global CALLS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 calls per timing instead of 300")
    if parser.parse_args(argv).quick:
        CALLS = 20
    for owner, name in PIECES:
        setattr(owner, name, timed(getattr(owner, name), name))
    for label, count in (("1 MiB", 1 << 18), ("16 B", 4)):
        x = np.arange(count, dtype=np.uint32)
        o = np.empty_like(x)
        for _ in range(CALLS // 6):
            dmlgpu.bit_not(x, out=o)
        SECONDS.clear()
        calls = CALLS
        start = time.perf_counter()
        for _ in range(calls):
            dmlgpu.bit_not(x, out=o)
        print(f"{label}: whole call {(time.perf_counter() - start) / calls * 1e6:.1f} us")
        for name, seconds in sorted(SECONDS.items(), key=lambda item: -item[1]):
            print(f"   {name:14s} {seconds / calls * 1e6:8.1f} us")
    for owner, name in PIECES:
        setattr(owner, name, getattr(owner, name).__wrapped__)
    copy_threads_and_halves()


if __name__ == "__main__":
    main()
