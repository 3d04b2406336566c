"""Float REDUCE (SUM) against its peers and the device's read floor, one JSON file.

    python benchmarks/reduce.py [--quick] [--out benchmarks/out/reduce.json]

Data: 256 MiB of FLOAT32 (--quick: 64 MiB), normal random values; every result checked once
against the exact sum rounded once (math.fsum) before anything is timed, and its error reported
beside numpy's and torch's.

Rows:
- `kernel`: DML_OPERATOR_REDUCE(SUM) over all elements compiled for the device, GPU time from
  timestamps (median of repeats; its dispatches timed one by one behind a barrier, summed),
  where the data fits one buffer (a GPU: 4 GiB); against
  - the read floor: the bytes / the device's read bandwidth measured in this run (torch's
    device-to-device copy moves 2 x the bytes; without torch dmlgpu's flat `bit_not` copy);
  - `torch.sum` of the same float32 data on the GPU (CUDA events, median), same run;
- `call`: `dmlgpu.sum(t)` on a resident Tensor (+ synchronize), wall clock, against `np.sum` of the
  host array, in alternating rounds (a CPU device shares the host: lavapipe's target is this
  ratio, >= 1.0). On lavapipe 256 MiB spans two 128 MiB buffers (reduced per piece, then merged).

Targets (docs/guide/reductions.md): H100/H200 kernel >= 0.9 x the read floor and >= 1.0 x
torch.sum; lavapipe call >= 1.0 x np.sum.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

import dmlgpu
from dmlgpu import Binding, DataType, Tensor, TensorDesc
from dmlgpu.describe.operator_descs import ReduceOperatorDesc
from dmlgpu.table.operators import ReduceFunction

sys.path.insert(0, os.path.dirname(__file__))
from common import torch_seconds, wall  # noqa: E402

try:
    import torch
    if not torch.cuda.is_available():
        torch = None
except ImportError:
    torch = None

MiB = 1 << 20


def read_bandwidth(device, nbytes) -> tuple[float, str]:
    """Bytes read per second: half a plain copy's bytes moved (a read and a write each)."""
    if torch:
        a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        return nbytes / torch_seconds(lambda: b.copy_(a)), "torch device-to-device copy (bytes / time)"
    nbytes = min(nbytes, device.max_buffer_size)
    desc = TensorDesc(DataType.UINT32, (nbytes // 4,))
    compiled = device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
    a, b = device.allocate(nbytes), device.allocate(nbytes)
    launch = compiled.launch(compiled.check([Binding(a)], [Binding(b)]))
    return nbytes / float(np.median(device.time_dispatches(launch, 10))), "dmlgpu flat bit_not copy (bytes / time)"


def error(value, exact) -> float:
    return abs(float(value) - exact)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 MiB (a CPU driver such as lavapipe)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out", "reduce.json"))
    args = parser.parse_args(argv)
    device = dmlgpu.default_device()
    nbytes = (64 if args.quick else 256) * MiB
    n = nbytes // 4
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    exact = math.fsum(x.astype(np.float64))
    expected = np.float32(exact)  # (fsum rounds the exact sum once; float32 of it: a tie at most apart)
    report = {"device": device.name, "type": device.type, "driver": device.driver, "bytes": nbytes,
              "torch": torch.__version__ if torch else None, "numpy": np.__version__, "rows": []}
    bandwidth, source = read_bandwidth(device, nbytes)
    report |= {"read_bandwidth_bytes_per_s": bandwidth, "read_bandwidth_source": source}
    floor = nbytes / bandwidth

    if nbytes <= device.max_buffer_size:
        desc = ReduceOperatorDesc(TensorDesc(DataType.FLOAT32, (n,)), TensorDesc(DataType.FLOAT32, (1,)),
                                  ReduceFunction.SUM, (0,))
        compiled = device.create_operator(desc)
        source_buffer, out = device.upload(x), device.allocate(16)
        compiled.execute([Binding(source_buffer)], [Binding(out)])
        got = out.read()[:4].view(np.float32)[0]
        assert got == expected, (got, expected)
        launches = compiled.launches(compiled.check([Binding(source_buffer)], [Binding(out)]))
        times = [float(np.median(device.time_dispatches(launch, 20))) for launch in launches]
        row = {"case": f"REDUCE(SUM) over {nbytes // MiB} MiB FLOAT32, GPU time", "seconds": sum(times),
               "dispatch_seconds": times, "shape": compiled.shape._asdict(), "floor_seconds": floor,
               "of_floor": floor / sum(times), "error": error(got, exact)}
        if torch:
            tx = torch.from_numpy(x).cuda()
            row |= {"torch_sum_seconds": torch_seconds(lambda: torch.sum(tx)),
                    "torch_error": error(torch.sum(tx).item(), exact)}
            row["vs_torch_sum"] = row["torch_sum_seconds"] / row["seconds"]
            del tx
        report["rows"].append(row)
        del source_buffer

    t = Tensor.from_numpy(x, device)
    got = dmlgpu.sum(t).numpy()
    assert got == expected, (got, expected)
    calls = {"ours": lambda: (dmlgpu.sum(t), device.synchronize()), "numpy": lambda: np.sum(x)}
    rounds = {name: [] for name in calls}
    for fn in calls.values():
        fn()
    for _ in range(5 if args.quick else 9):
        for name, fn in calls.items():
            rounds[name].append(wall(fn, 3))
    ours, peer = (float(np.median(rounds[name])) for name in ("ours", "numpy"))
    report["rows"].append({"case": f"dmlgpu.sum of a resident {nbytes // MiB} MiB FLOAT32 Tensor "
                                   f"({len(getattr(t.buffer, 'buffers', [t.buffer]))} buffer(s)), wall + synchronize",
                           "seconds": ours, "numpy_sum_seconds": peer, "vs_numpy_sum": peer / ours,
                           "error": error(got, exact), "numpy_error": error(np.sum(x), exact)})
    if device.is_cpu:
        report["load_average"] = os.getloadavg()
        report["cpu_count"] = os.cpu_count()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    for r in report["rows"]:
        ratios = ", ".join(f"{k} {v:.3g}" for k, v in r.items() if k.startswith(("vs_", "of_")))
        print(f"{r['case']}: {r['seconds'] * 1e3:.3g} ms ({ratios})")
    print(f"wrote {args.out} ({time.strftime('%Y-%m-%d %H:%M')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
