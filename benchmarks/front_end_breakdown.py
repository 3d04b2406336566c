"""Where the numpy front end's time goes for one large call: the upload (host copy into
staging or mapped memory, and the device's copy), the download, host memcpys for scale (one
thread, and the runtime's copy threads), and the result's first touch.

    python benchmarks/front_end_breakdown.py [MiB]      (DMLGPU_STAGING=1: through staging memory)
"""
import sys

import numpy as np

import dmlgpu
from dmlgpu_tools.bench import wall_seconds
from dmlgpu.runtime import host_copy


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    x = np.random.default_rng(0).integers(0, 2**32, mib << 18, dtype=np.uint32)
    device = dmlgpu.default_device()
    resident = device.upload(x)
    out = np.empty(x.nbytes, np.uint8)
    y = np.zeros_like(x)

    def upload():
        device.upload(x).release()
        device.synchronize()

    results = {
        "host memcpy (numpy copyto)": 1e3 * wall_seconds(repeats=5, fn=lambda: np.copyto(out, x.view(np.uint8))),
        f"host memcpy ({host_copy.copy_threads(x.nbytes)} copy threads)":
            1e3 * wall_seconds(repeats=5, fn=lambda: host_copy.copy(out, x.view(np.uint8))),
        "new array, first touch": 1e3 * wall_seconds(repeats=5, fn=lambda: np.empty_like(out).fill(0)),
        "upload (device.upload + wait)": 1e3 * wall_seconds(repeats=5, fn=upload),
        "download (Buffer.read into out)": 1e3 * wall_seconds(repeats=5, fn=lambda: resident.read(out=out)),
        "whole bit_not call": 1e3 * wall_seconds(repeats=5, fn=lambda: dmlgpu.bit_not(x)),
        "whole bit_not call, out=": 1e3 * wall_seconds(repeats=5, fn=lambda: dmlgpu.bit_not(x, out=x)),
        "whole bit_not call, out= apart": 1e3 * wall_seconds(repeats=5, fn=lambda: dmlgpu.bit_not(x, out=y)),
        "numpy invert": 1e3 * wall_seconds(repeats=5, fn=lambda: np.invert(x)),
    }
    print(f"{device.name}: {mib} MiB")
    for name, ms in results.items():
        print(f"  {name:32s} {ms:8.2f} ms  ({mib / 1024 / ms * 1e3:6.1f} GB/s)")


if __name__ == "__main__":
    main()
