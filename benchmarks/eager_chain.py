"""Eager expressions with temporaries (issue 31): per operation of a chain of dependent small ops
written as a user writes them, against PyTorch eager (and CuPy) on the same card, or against our
own `out=` chain on a CPU device.

    python benchmarks/eager_chain.py [--ops 1000] [--elements 1024] [--out eager_chain.json]

Rows, each the median over `--repeats` chains of `--ops` operations on `--elements` uint32, timed
on the wall clock from the first operation to the result on the host (the download of the last
result, or torch.cuda.synchronize), divided by the number of operations:
- `u = ~u`: each result a new Tensor, the previous one dropped;
- `u = ~u` kept: every result kept alive in a list (no memory comes back during the chain);
- `u = u ^ s`: a new result of two Tensors each time;
- `u = (u ^ s) >> 1`, `u = (u ^ k) >> 3` (`k` a Python int), `u = ~t ^ u`: two operations per
  step, both new results (one of them a temporary dropped at once);
- `bit_not(o, out=o)`: the same Tensor every time (the floor of a call);
- `~s` dropped: the same input each time, the result dropped (no dependency between calls);
- `allocate` (dmlgpu only): a new Tensor of a result's size from the pool, dropped at once, per
  allocation: with `out=` it is the floor of a call that makes a new result.
Beside each dmlgpu row, `host`: the CPU time of the calling thread per op from the first operation
to the last one queued (the wait for the device left out; `time.thread_time`, so other
processes' and the driver's threads' time is not counted), median and least over the rounds:
what the call costs in Python (and in the driver's recording and submits on this thread).
Before any timing each route's result is checked against numpy once, and the GPU runs every
route in turn for `--warm` seconds per route (an idle GPU drops its clocks). Then `--repeats`
rounds each run every route of a peer once, in a new random order per round. The ratios the issue asks for are
written beside the rows: the chains against torch eager, the chain against `out=` on a CPU device,
`~s` dropped against `out=`.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time

import numpy as np

import dmlgpu  # noqa: E402


def timed_rounds(routes, repeats) -> dict:
    """Per route name: (median wall seconds, median and smallest CPU seconds of this thread until
    the last operation was queued, or None where the route does not report it: it returns a
    pair, the thread time then and its result). `repeats` rounds, each running every route once
    in a new random order, so that a change of load or clocks during the run reaches every route
    alike. This script also runs against older dmlgpu builds for before/after figures, so it
    imports nothing of benchmarks/common.py."""
    walls: dict = {name: [] for name in routes}
    hosts: dict = {name: [] for name in routes}
    order = list(routes)
    shuffle = random.Random(0).shuffle
    for _ in range(repeats):
        shuffle(order)
        for name in order:
            start = time.perf_counter()
            cpu = time.thread_time()
            queued = routes[name]()
            walls[name].append(time.perf_counter() - start)
            if isinstance(queued, tuple):
                hosts[name].append(queued[0] - cpu)
    return {name: (float(np.median(walls[name])),
                   (float(np.median(hosts[name])), float(np.min(hosts[name]))) if hosts[name] else None)
            for name in routes}


def _clock() -> str | None:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


#: The Python int of the `(u ^ k) >> 3` chain.
K = 0x5A5A5A5A


def dmlgpu_routes(x, s_host, ops):
    """The chains on dmlgpu Tensors; each returns (this thread's CPU time once the last
    operation was queued, the result on the host)."""
    t = dmlgpu.Tensor.from_numpy(x)
    s = dmlgpu.Tensor.from_numpy(s_host)
    o = dmlgpu.Tensor.from_numpy(x)
    device, shape, data_type = t.device, t.shape, t.data_type
    nbytes = x.nbytes

    def new():
        u = t
        for _ in range(ops):
            u = ~u
        return time.thread_time(), u.numpy()

    def kept():
        u, keep = t, []
        for _ in range(ops):
            u = ~u
            keep.append(u)
        return time.thread_time(), u.numpy()

    def xor():
        u = t
        for _ in range(ops):
            u = u ^ s
        return time.thread_time(), u.numpy()

    def two():
        u = t
        for _ in range(ops // 2):
            u = (u ^ s) >> 1
        return time.thread_time(), u.numpy()

    def scalar():
        u = t
        for _ in range(ops // 2):
            u = (u ^ K) >> 3
        return time.thread_time(), u.numpy()

    def mixed():
        u = t
        for _ in range(ops // 2):
            u = ~t ^ u
        return time.thread_time(), u.numpy()

    def out():
        for _ in range(ops):
            dmlgpu.bit_not(o, out=o)
        return time.thread_time(), o.numpy()

    def dropped():
        for _ in range(ops):
            ~s
        return time.thread_time(), s.numpy()

    def allocate():
        for _ in range(ops):
            dmlgpu.Tensor.from_fields(device.allocate(nbytes, zero_fill=False), shape, data_type)
        return time.thread_time(), None

    return {"u = ~u": new, "u = ~u kept": kept, "u = u ^ s": xor, "u = (u ^ s) >> 1": two,
            "u = (u ^ k) >> 3": scalar, "u = ~t ^ u": mixed, "bit_not(o, out=o)": out, "~s dropped": dropped,
            "allocate": allocate}


def torch_routes(x, s_host, ops):
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    # int64 holds every uint32 value: ~ and ^ and >> of non-negative values give the uint32 bits
    # after masking; masking costs an op, so the chains use int32 for ~ (same bits) and int64 for
    # the shift chain (a logical shift of non-negative values).
    t32 = torch.from_numpy(x.view(np.int32)).cuda()
    s32 = torch.from_numpy(s_host.view(np.int32)).cuda()
    t64 = torch.from_numpy(x.astype(np.int64)).cuda()
    s64 = torch.from_numpy(s_host.astype(np.int64)).cuda()
    o32 = t32.clone()

    def new():
        u = t32
        for _ in range(ops):
            u = ~u
        torch.cuda.synchronize()
        return u.cpu().numpy().view(np.uint32)

    def xor():
        u = t32
        for _ in range(ops):
            u = u ^ s32
        torch.cuda.synchronize()
        return u.cpu().numpy().view(np.uint32)

    def scalar():
        u = t64
        for _ in range(ops // 2):
            u = (u ^ K) >> 3
        torch.cuda.synchronize()
        return u.cpu().numpy().astype(np.uint32)

    def mixed():
        u = t32
        for _ in range(ops // 2):
            u = ~t32 ^ u
        torch.cuda.synchronize()
        return u.cpu().numpy().view(np.uint32)

    def two():
        u = t64
        for _ in range(ops // 2):
            u = (u ^ s64) >> 1
        torch.cuda.synchronize()
        return u.cpu().numpy().astype(np.uint32)

    def out():
        for _ in range(ops):
            torch.bitwise_not(o32, out=o32)
        torch.cuda.synchronize()
        return o32.cpu().numpy().view(np.uint32)

    return {"u = ~u": new, "u = u ^ s": xor, "u = (u ^ s) >> 1": two, "u = (u ^ k) >> 3": scalar,
            "u = ~t ^ u": mixed, "bit_not(o, out=o)": out}


def cupy_routes(x, s_host, ops):
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 -- no CuPy or no CUDA device: no peer
        return {}
    t, s = cupy.asarray(x), cupy.asarray(s_host)

    def new():
        u = t
        for _ in range(ops):
            u = ~u
        return cupy.asnumpy(u)

    def two():
        u = t
        for _ in range(ops // 2):
            u = (u ^ s) >> 1
        return cupy.asnumpy(u)

    return {"u = ~u": new, "u = (u ^ s) >> 1": two}


def expected(x, s, ops):
    not_chain = x if ops % 2 == 0 else ~x
    two, scalar, mixed = x.copy(), x.copy(), x.copy()
    for _ in range(ops // 2):
        two = (two ^ s) >> 1
        scalar = (scalar ^ np.uint32(K)) >> 3
        mixed = ~x ^ mixed
    return {"u = ~u": not_chain, "u = ~u kept": not_chain, "u = u ^ s": x if ops % 2 == 0 else x ^ s,
            "u = (u ^ s) >> 1": two, "u = (u ^ k) >> 3": scalar, "u = ~t ^ u": mixed,
            "bit_not(o, out=o)": not_chain, "~s dropped": s, "allocate": None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--elements", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=7, help="rounds (each runs every route once)")
    parser.add_argument("--warm", type=float, default=1.5, help="seconds of warm-up per route on a GPU")
    parser.add_argument("--out", default="eager_chain.json")
    parser.add_argument("--rows", default=None, help="comma-separated row names to run (default: all)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2**32, args.elements, dtype=np.uint32)
    s = rng.integers(0, 2**32, args.elements, dtype=np.uint32)
    device = dmlgpu.default_device()
    gpu = not device.is_cpu
    want = expected(x, s, args.ops)
    peers = {"dmlgpu": dmlgpu_routes(x, s, args.ops), "torch": torch_routes(x, s, args.ops),
             "cupy": cupy_routes(x, s, args.ops)}
    results = {"device": device.label, "ops": args.ops, "elements": args.elements, "clock_before": _clock(),
               "rows": {}}
    chosen = None if args.rows is None else set(args.rows.split(","))
    for peer, routes in peers.items():
        routes = {name: fn for name, fn in routes.items() if chosen is None or name in chosen}
        for name, fn in routes.items():
            got = fn()
            got = got[1] if isinstance(got, tuple) else got
            if want[name] is not None and not np.array_equal(got, want[name]):
                raise SystemExit(f"{peer} {name}: wrong result")
        end = time.perf_counter() + (args.warm * len(routes) if gpu else 0.0)
        while time.perf_counter() < end:
            for fn in routes.values():
                fn()
        for name, (seconds, host) in timed_rounds(routes, args.repeats).items():
            per_op = seconds / args.ops
            results["rows"].setdefault(name, {})[peer] = per_op
            line = f"{peer:7s} {name:20s} {per_op * 1e6:9.2f} us/op"
            if host is not None:
                results.setdefault("host", {})[name] = host[0] / args.ops
                results.setdefault("host_min", {})[name] = host[1] / args.ops
                line += f"   host {host[0] / args.ops * 1e6:7.2f} (least {host[1] / args.ops * 1e6:6.2f}) us/op"
            print(line, flush=True)
    rows = results["rows"]
    ratios = {}
    out = rows.get("bit_not(o, out=o)", {}).get("dmlgpu")
    for name in ("u = ~u", "u = u ^ s", "u = (u ^ s) >> 1", "u = (u ^ k) >> 3", "u = ~t ^ u"):
        if "torch" in rows.get(name, {}):
            ratios[f"{name} / torch eager"] = rows[name]["dmlgpu"] / rows[name]["torch"]
        if out and "dmlgpu" in rows.get(name, {}):
            ratios[f"{name} / our out= chain"] = rows[name]["dmlgpu"] / out
    if out and "dmlgpu" in rows.get("~s dropped", {}):
        ratios["~s dropped / out="] = rows["~s dropped"]["dmlgpu"] / out
    results["ratios"] = ratios
    results["clock_after"] = _clock()
    for name, value in ratios.items():
        print(f"{name:40s} {value:6.2f}x")
    with open(args.out, "w") as handle:
        json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
