"""The numpy front end across sizes: `bit_not(x, out=o)` and `bit_not(x)` on uint32 data from
256 KiB to 64 MiB, against CuPy's `asnumpy(invert(asarray(x)), out=o)` and `asnumpy(...)` in the
same process (the harness times only 1, 64 and 256 MiB; the runtime switches paths in between:
kept host calls, their halves, the staging pipeline).

    python benchmarks/front_end_sizes.py [--out results.json]

Median of 0.4 s of calls per case, after 1.5 s of resident work that raises the GPU clock;
ratio = CuPy's time / ours. Without CuPy only our times are printed.
"""
import argparse
import json
import time

import numpy as np

import dmlgpu

try:
    import cupy
except ImportError:
    cupy = None

SIZES_MIB = (0.25, 0.5, 1, 2, 3, 4, 6, 8, 16, 32, 64)


def median_ms(fn, seconds=0.4) -> float:
    fn()
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args()
    device = dmlgpu.default_device()
    a = dmlgpu.Tensor.from_numpy(np.zeros(16 << 20, np.uint32))
    b = dmlgpu.Tensor.empty((16 << 20,), np.uint32)
    end = time.perf_counter() + 1.5
    while time.perf_counter() < end:
        dmlgpu.bit_not(a, out=b)
        device.synchronize()
    del a, b
    print(f"{device.name}; ms (ratio = CuPy's time / ours)")
    print(f"{'MiB':>6} {'ours out=':>10} {'CuPy out=':>10} {'ratio':>6} | {'ours new':>9} {'CuPy new':>9} {'ratio':>6}")
    rows = []
    for mib in SIZES_MIB:
        x = np.random.default_rng(0).integers(0, 2**32, int(mib * (1 << 18)), dtype=np.uint32)
        o = np.zeros_like(x)
        row = {"mib": mib, "ours_out_ms": median_ms(lambda: dmlgpu.bit_not(x, out=o)),
               "ours_new_ms": median_ms(lambda: dmlgpu.bit_not(x))}
        assert (o == ~x).all() and (dmlgpu.bit_not(x) == ~x).all()
        if cupy is not None:
            row["cupy_out_ms"] = median_ms(lambda: cupy.asnumpy(cupy.invert(cupy.asarray(x)), out=o))
            row["cupy_new_ms"] = median_ms(lambda: cupy.asnumpy(cupy.invert(cupy.asarray(x))))
            print(f"{mib:6} {row['ours_out_ms']:10.3f} {row['cupy_out_ms']:10.3f} "
                  f"{row['cupy_out_ms'] / row['ours_out_ms']:6.2f} | {row['ours_new_ms']:9.3f} "
                  f"{row['cupy_new_ms']:9.3f} {row['cupy_new_ms'] / row['ours_new_ms']:6.2f}", flush=True)
        else:
            print(f"{mib:6} {row['ours_out_ms']:10.3f} {'-':>10} {'-':>6} | {row['ours_new_ms']:9.3f}", flush=True)
        rows.append(row)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": device.name, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
