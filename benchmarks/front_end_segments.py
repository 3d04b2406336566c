"""Where one numpy front-end call's time goes, by the runtime's and the front end's pieces:
wraps them with timers and runs `bit_not(x, out=o)` on 1 MiB and on 16 bytes of uint32.
Nested pieces are counted in each enclosing one (`read` holds `_land`, which holds waits).
Then the 1 MiB call unwrapped, with its host copies on one thread and on 2 and 4, and CuPy's.

    python benchmarks/front_end_segments.py
"""
import collections
import time

import numpy as np

import dmlgpu
from dmlgpu import compiled, numpy_api
from dmlgpu.runtime import device, host_copy, stream

SECONDS = collections.defaultdict(float)
PIECES = ((numpy_api, "_run_host_call"), (device.HostCall, "run"), (numpy_api, "_run_pieces"), (device.Device, "upload"), (device.Device, "allocate"),
          (compiled.CompiledOperator, "execute"), (compiled.CompiledOperator, "check"),
          (device.Buffer, "read"), (device.Buffer, "release"), (device.Device, "_land"),
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


def whole_call(x, o, calls=300) -> float:
    for _ in range(50):
        dmlgpu.bit_not(x, out=o)
    start = time.perf_counter()
    for _ in range(calls):
        dmlgpu.bit_not(x, out=o)
    return (time.perf_counter() - start) / calls


def copy_threads():
    """The 1 MiB call with its two host copies on one thread (the default below
    host_copy.PARALLEL_BYTES) and split over 2 and 4 threads, with CuPy's
    `asnumpy(invert(asarray(x)), out=o)` in the same process when it is there."""
    x = np.arange(1 << 18, dtype=np.uint32)
    o = np.empty_like(x)
    saved = host_copy.PARALLEL_BYTES, host_copy.MIN_SLICE_BYTES
    try:
        for label, threshold, piece in (("one thread", saved[0], saved[1]),
                                        ("2 slices", 1 << 20, 512 << 10), ("4 slices", 1 << 20, 256 << 10)):
            host_copy.PARALLEL_BYTES, host_copy.MIN_SLICE_BYTES = threshold, piece
            times = [whole_call(x, o) for _ in range(3)]
            print(f"1 MiB, host copies {label}: {min(times) * 1e6:.1f} us (best of 3 x 300)")
    finally:
        host_copy.PARALLEL_BYTES, host_copy.MIN_SLICE_BYTES = saved
    try:
        import cupy
    except ImportError:
        return
    for _ in range(50):
        cupy.asnumpy(cupy.invert(cupy.asarray(x)), out=o)
    best = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(300):
            cupy.asnumpy(cupy.invert(cupy.asarray(x)), out=o)
        best.append((time.perf_counter() - start) / 300)
    print(f"1 MiB, CuPy asnumpy(invert(asarray(x)), out=o): {min(best) * 1e6:.1f} us")


def main():
    for owner, name in PIECES:
        setattr(owner, name, timed(getattr(owner, name), name))
    for label, count in (("1 MiB", 1 << 18), ("16 B", 4)):
        x = np.arange(count, dtype=np.uint32)
        o = np.empty_like(x)
        for _ in range(50):
            dmlgpu.bit_not(x, out=o)
        SECONDS.clear()
        calls = 300
        start = time.perf_counter()
        for _ in range(calls):
            dmlgpu.bit_not(x, out=o)
        print(f"{label}: whole call {(time.perf_counter() - start) / calls * 1e6:.1f} us")
        for name, seconds in sorted(SECONDS.items(), key=lambda item: -item[1]):
            print(f"   {name:14s} {seconds / calls * 1e6:8.1f} us")
    for owner, name in PIECES:
        setattr(owner, name, getattr(owner, name).__wrapped__)
    copy_threads()


if __name__ == "__main__":
    main()
