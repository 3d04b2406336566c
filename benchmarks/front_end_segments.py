"""Where one numpy front-end call's time goes, by the runtime's and the front end's pieces:
wraps them with timers and runs `bit_not(x, out=o)` on 1 MiB and on 16 bytes of uint32.
Nested pieces are counted in each enclosing one (`read` holds `_land`, which holds waits).

    python benchmarks/front_end_segments.py
"""
import collections
import time

import numpy as np

import dmlgpu
from dmlgpu import compiled, numpy_api
from dmlgpu.runtime import device, stream

SECONDS = collections.defaultdict(float)
PIECES = ((numpy_api, "_run_pieces"), (device.Device, "upload"), (device.Device, "allocate"),
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
    return wrapper


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


if __name__ == "__main__":
    main()
