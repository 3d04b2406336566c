"""Resident XOR over a Tensor larger than one device buffer (it spans several: `dmlgpu.pieces`)
against the same operator over a Tensor that fits one buffer, in the same run: GB/s of each and
their ratio (1.0: spanning costs nothing per byte). Also a transposed view of the spanning
Tensor (a new result cut where its chunks begin). Results are checked once before timing.

    python benchmarks/tensor_pieces.py [--out results/tensor_pieces.json]

Needs about 4x (limit + 1/4 limit) of device memory (H100: ~21 GiB) and 3x that of host memory.
"""
import argparse
import json
import math
import platform
import time

import numpy as np

import dmlgpu
from dmlgpu import Tensor


def seconds(fn, device, repeats=5) -> float:
    fn()
    device.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        device.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="JSON file to write (default: print only)")
    args = parser.parse_args()
    device = dmlgpu.default_device()
    limit = device.max_buffer_size
    big_n = (limit + limit // 4) // 4  # uint32 elements: 1.25 buffers
    small_n = (limit // 2) // 4
    side = math.isqrt(big_n) // 256 * 256 + 256  # a square just above 1.25 buffers
    rows = {}
    for name, n in (("one buffer", small_n), ("spanning", big_n)):
        x = np.arange(n, dtype=np.uint32)
        t, u = Tensor.from_numpy(x), Tensor.from_numpy(x[::-1].copy())
        assert np.array_equal((t ^ u).numpy(), x ^ x[::-1]), name
        took = seconds(lambda: t ^ u, device)
        rows[name] = {"elements": n, "buffers": len(getattr(t.buffer, "buffers", [t.buffer])),
                      "seconds": took, "GB/s": 3 * n * 4 / took / 1e9}
        del t, u
    x = np.arange(side * side, dtype=np.uint32).reshape(side, side)
    t = Tensor.from_numpy(x)
    assert np.array_equal((~t.T).numpy(), ~x.T)
    took = seconds(lambda: ~t.T, device)
    rows["transposed"] = {"elements": side * side, "buffers": len(getattr(t.buffer, "buffers", [t.buffer])),
                          "seconds": took, "GB/s": 2 * side * side * 4 / took / 1e9}
    report = {"device": device.name, "driver": device.driver, "host": platform.node(), "limit_bytes": limit,
              "rows": rows, "spanning / one buffer (GB/s)": rows["spanning"]["GB/s"] / rows["one buffer"]["GB/s"]}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
