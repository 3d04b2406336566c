"""Host time of repeated calls that make new results, and of a command list's replay (issue 23):
what a call costs in Python and in the runtime before the device does anything.

    python benchmarks/call_overhead.py [--elements 4096] [--out call_overhead.json]

Rows (tiny data, so the device's work is negligible; each result checked once first):
- `dmlgpu.fuse` int4 unpack on a Tensor, two new results per call;
- the same graph's `CompiledGraph.execute` with the same bindings (the floor: a memo hit);
- a single operator's new result (`~t`, `t ^ u`) and `bit_not(t, out=)`, its peers; the same
  with a Python int operand (`t & 15`, `bit_and(t, 15, out=)`);
- a command list of 1,000 dependent steps (cycling NOT/XOR/SHL/SHR/SIGN/BIT_COUNT): its
  `execute()` alone, and replay + synchronize, per step.
Call times are the median of single calls timed in batches of 32 between waits (the first of
each batch, which may submit at once to an idle device, is left out): the host's time per call.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import dmlgpu  # noqa: E402
from dmlgpu import Binding, Tensor, testing  # noqa: E402
from common import command_list, median_of  # noqa: E402
from graph_cases import int4_unpack  # noqa: E402


def per_call(device, fn, batches=100, inner=32) -> float:
    """Median host seconds of one call of `fn` (its result dropped), batches between waits."""
    for _ in range(inner):
        fn()
    device.synchronize()
    times = []
    for _ in range(batches):
        for i in range(inner):
            start = time.perf_counter()
            result = fn()
            if i:
                times.append(time.perf_counter() - start)
            del result
        device.synchronize()
    return float(np.median(times))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=4096)
    parser.add_argument("--out", default="call_overhead.json")
    args = parser.parse_args(argv)
    device = dmlgpu.default_device()
    rng = np.random.default_rng(0)
    n = args.elements
    w = rng.integers(0, 256, n, dtype=np.uint8)
    tw, tw2 = Tensor.from_numpy(w), Tensor.from_numpy(w[::-1].copy())
    out = Tensor.empty((n,), np.uint8)
    fused = dmlgpu.fuse(lambda x: (x & 15, x >> 4))
    lo, hi = fused(tw)
    assert testing.same_bits(lo.numpy(), w & 15) and testing.same_bits(hi.numpy(), w >> 4)
    graph = device.compile_graph(int4_unpack(n))
    ins, outs = [Binding(tw.buffer)], [Binding(device.allocate(n, zero_fill=False)) for _ in range(2)]
    graph.execute(ins, outs)
    assert testing.same_bits(outs[1].buffer.read()[:n], w >> 4)
    assert testing.same_bits((~tw).numpy(), ~w)
    rows = {
        "fuse int4 unpack on a Tensor, new results": per_call(device, lambda: fused(tw)),
        "compile_graph execute, same bindings": per_call(device, lambda: graph.execute(ins, outs)),
        "~t (new result)": per_call(device, lambda: ~tw),
        "t ^ u (new result)": per_call(device, lambda: tw ^ tw2),
        "bit_not(t, out=)": per_call(device, lambda: dmlgpu.bit_not(tw, out=out)),
        "t & 15 (new result, a Python int operand)": per_call(device, lambda: tw & 15),
        "bit_and(t, 15, out=)": per_call(device, lambda: dmlgpu.bit_and(tw, 15, out=out)),
    }
    commands = command_list(device, rng)
    count = commands.dispatches
    commands.execute()
    device.synchronize()
    execute_only = []
    for _ in range(200):
        start = time.perf_counter()
        commands.execute()
        execute_only.append(time.perf_counter() - start)
        device.synchronize()
    rows[f"command list of {count} steps: execute() per step"] = float(np.median(execute_only)) / count
    rows[f"command list of {count} steps: replay + synchronize per step"] = \
        median_of(lambda: (commands.execute(), device.synchronize()), 200) / count
    gpu_dispatches = commands.gpu_dispatches
    commands.release()
    report = {"device": device.name, "driver": device.driver, "elements": n,
              "command_list_gpu_dispatches": gpu_dispatches, "seconds": rows}
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"{device.name}, {n} elements: host time per call")
    for name, seconds in rows.items():
        print(f"  {name:60s} {seconds * 1e6:9.3f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
