"""Where the numpy front end's time goes for one large call: staging copy in, the submit
(upload + kernel + download on the device), staging copy out, and the result's first touch.

    python benchmarks/front_end_breakdown.py [MiB]
"""
import sys
import numpy as np

import dmlgpu
from dmlgpu import numpy_api
from dmlgpu.bench import wall_seconds


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    x = np.random.default_rng(0).integers(0, 2**32, mib << 18, dtype=np.uint32)
    device = dmlgpu.default_device()
    pool = numpy_api._pool(device)
    a, b = pool.take(x.nbytes), pool.take(x.nbytes)
    staging_in, staging_out = a._host_bytes(), b._host_bytes()
    flat = x.view(np.uint8)
    out = np.empty_like(flat)
    fresh = lambda: np.empty_like(flat)  # noqa: E731
    results = {
        "numpy -> staging (memcpy)": 1e3 * wall_seconds(repeats=5, fn=lambda: staging_in.__setitem__(slice(0, flat.size), flat)),
        "staging -> numpy (memcpy)": 1e3 * wall_seconds(repeats=5, fn=lambda: np.copyto(out, staging_out[:flat.size])),
        "new array, first touch": 1e3 * wall_seconds(repeats=5, fn=lambda: fresh().fill(0)),
        "sync device (upload)": 1e3 * wall_seconds(repeats=5, fn=lambda: device._sync(device._kp.OpTensorSyncDevice, a._tensor)),
        "sync local (download)": 1e3 * wall_seconds(repeats=5, fn=lambda: device._sync(device._kp.OpTensorSyncLocal, b._tensor)),
        "whole bit_not call": 1e3 * wall_seconds(repeats=5, fn=lambda: dmlgpu.bit_not(x)),
        "numpy invert": 1e3 * wall_seconds(repeats=5, fn=lambda: np.invert(x)),
    }
    print(f"{device.name}: {mib} MiB")
    for name, ms in results.items():
        print(f"  {name:28s} {ms:8.2f} ms  ({mib / 1024 / ms * 1e3:6.1f} GB/s)")


if __name__ == "__main__":
    main()
