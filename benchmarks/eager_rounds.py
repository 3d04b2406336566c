"""Eager chains against PyTorch eager in one process, in alternated rounds (issue 31): where the
host's own speed moves between processes and minutes (torch's `u = ~u` has measured 5.9-11.7 us
per op on the same lent machine), each round runs every route of both libraries once, in the same
order, so a change of host speed reaches both alike.

    python benchmarks/eager_rounds.py [--rounds 20] [--ops 1000] [--out eager_rounds.json]

Routes on 1,024 uint32 (dmlgpu Tensors; torch tensors on the CUDA device when torch sees one):
`u = ~u`, `u = u ^ s`, `u = (u ^ s) >> 1`, `u = ~t ^ u` (new results, the previous one dropped),
`bit_not(o, out=o)` and, for dmlgpu, `~s` with the result dropped. Per route and per op: the
calling thread's CPU time until the last operation was queued (least and median over the
rounds) and the wall time to the result on the host (median). Ratios: dmlgpu's wall time over
torch's per route, and `~s` dropped over `out=` (issue 31's targets: the chains at most 1.0x,
the dropped result at most 1.2x). Without torch, dmlgpu's rows alone.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

import dmlgpu

try:
    import torch
except ImportError:
    torch = None

CHAINS = ("~u", "u ^ s", "(u ^ s) >> 1", "~t ^ u", "out=")


def _routes(ops: int) -> dict:
    """(library, route) -> a function that queues `ops` operations and returns what to wait for."""
    x = np.arange(1024, dtype=np.uint32)
    s, t, o = dmlgpu.asarray(x), dmlgpu.asarray(x), dmlgpu.asarray(x)

    def chains(s, t, o, bit_not):
        def invert():
            u = s
            for _ in range(ops):
                u = ~u
            return u

        def xor():
            u = s
            for _ in range(ops):
                u = u ^ s
            return u

        def xor_shift():
            u = s
            for _ in range(ops // 2):
                u = (u ^ s) >> 1
            return u

        def invert_xor():
            u = s
            for _ in range(ops // 2):
                u = ~t ^ u
            return u

        def into():
            for _ in range(ops):
                bit_not(o, out=o)
            return o
        return dict(zip(CHAINS, (invert, xor, xor_shift, invert_xor, into)))

    routes = {("dmlgpu", name): f for name, f in chains(s, t, o, dmlgpu.bit_not).items()}

    def dropped():
        for _ in range(ops):
            ~s
        return s
    routes[("dmlgpu", "~s dropped")] = dropped
    if torch is not None and torch.cuda.is_available():
        ts = torch.from_numpy(x.view(np.int32)).cuda()
        routes.update({("torch", name): f for name, f in
                       chains(ts, ts.clone(), ts.clone(), torch.bitwise_not).items()})
    return routes


def _wait(library: str, result) -> None:
    if library == "dmlgpu":
        result.numpy()
    else:
        torch.cuda.synchronize()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--warm", type=float, default=2.0, help="seconds of every route before timing")
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    routes = _routes(args.ops)
    end = time.perf_counter() + args.warm
    while True:  # (every route once at least: the plans made, the GPU's clock up)
        for (library, _), f in routes.items():
            _wait(library, f())
        if time.perf_counter() >= end:
            break
    cpu: dict = {key: [] for key in routes}
    wall: dict = {key: [] for key in routes}
    for _ in range(args.rounds):
        for key, f in routes.items():
            start, thread = time.perf_counter(), time.thread_time()
            result = f()
            cpu[key].append((time.thread_time() - thread) / args.ops)
            _wait(key[0], result)
            wall[key].append((time.perf_counter() - start) / args.ops)
    rows = {f"{library} {name}": {"cpu_least_us": min(cpu[(library, name)]) * 1e6,
                                  "cpu_median_us": float(np.median(cpu[(library, name)])) * 1e6,
                                  "wall_median_us": float(np.median(wall[(library, name)])) * 1e6}
            for library, name in routes}
    ratios = {"~s dropped / out=": rows["dmlgpu ~s dropped"]["wall_median_us"] / rows["dmlgpu out="]["wall_median_us"]}
    for name in CHAINS:
        if f"torch {name}" in rows:
            ratios[f"{name} / torch"] = rows[f"dmlgpu {name}"]["wall_median_us"] / rows[f"torch {name}"]["wall_median_us"]
    print(f"{dmlgpu.default_device().name}; us per op: thread CPU least / median, wall median")
    for key, row in rows.items():
        print(f"{key:22s} {row['cpu_least_us']:7.2f} / {row['cpu_median_us']:7.2f}  {row['wall_median_us']:7.2f}")
    for name, ratio in ratios.items():
        print(f"{name:24s} {ratio:5.2f}x")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": dmlgpu.default_device().name, "ops": args.ops, "rounds": args.rounds,
                       "rows": rows, "ratios": ratios}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
