"""Resident XOR over a Tensor larger than one device buffer (it spans several: `dmlgpu.layout.pieces`)
against the same operator over a Tensor that fits one buffer, in the same run: GB/s of each and
their ratio (1.0: spanning costs nothing per byte). Also a transposed view of the spanning
Tensor (a new result cut where its chunks begin), the spanning XOR into a given `out` at a
16-byte boundary, into one 4 bytes past it (written by the strided kernel from its element
offset: the ratio of the two is that kernel's cost), and as a recorded CommandList of its
per-piece steps. Results are checked once before timing.

    python benchmarks/tensor_pieces.py [--out results/tensor_pieces.json]

Needs about 5x (limit + 1/4 limit) of device memory (H100: ~26 GiB) and 3x that of host memory.
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
        if name == "spanning":
            base = Tensor.empty((n + 4,), np.uint32)
            for label, out in (("spanning, out aligned", base[:n]), ("spanning, out off 16 bytes", base[1:n + 1])):
                dmlgpu.bit_xor(t, u, out=out)
                assert np.array_equal(out.numpy(), x ^ x[::-1]), label
                took = seconds(lambda: dmlgpu.bit_xor(t, u, out=out), device)
                rows[label] = {"elements": n, "seconds": took, "GB/s": 3 * n * 4 / took / 1e9}
            out = base[:n]
            desc = dmlgpu.TensorDesc(dmlgpu.DataType.UINT32, (n,))
            commands = dmlgpu.CommandList(device)
            commands.record(device.create_operator(dmlgpu.ElementWiseBitXorOperatorDesc(desc, desc, desc)),
                            [dmlgpu.Binding(t.buffer), dmlgpu.Binding(u.buffer)], [dmlgpu.Binding(out.buffer)])
            commands.execute()
            assert np.array_equal(out.numpy(), x ^ x[::-1]), "command list"
            took = seconds(commands.execute, device)
            rows["spanning, command list"] = {"elements": n, "dispatches": commands.gpu_dispatches,
                                              "seconds": took, "GB/s": 3 * n * 4 / took / 1e9}
            commands.release()
            del base, out
        del t, u
    x = np.arange(side * side, dtype=np.uint32).reshape(side, side)
    t = Tensor.from_numpy(x)
    assert np.array_equal((~t.T).numpy(), ~x.T)
    took = seconds(lambda: ~t.T, device)
    rows["transposed"] = {"elements": side * side, "buffers": len(getattr(t.buffer, "buffers", [t.buffer])),
                          "seconds": took, "GB/s": 2 * side * side * 4 / took / 1e9}
    report = {"device": device.name, "driver": device.driver, "host": platform.node(), "limit_bytes": limit,
              "rows": rows, "spanning / one buffer (GB/s)": rows["spanning"]["GB/s"] / rows["one buffer"]["GB/s"],
              "out off 16 bytes / out aligned (GB/s)":
                  rows["spanning, out off 16 bytes"]["GB/s"] / rows["spanning, out aligned"]["GB/s"]}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
