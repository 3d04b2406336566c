"""Dask scaling over data made on the workers, 1 worker vs N: numpy-backed blocks through the
front end (each block up and down per call) beside Tensor-backed blocks kept on the devices.

    .venv/bin/python benchmarks/dask_scaling.py --gib 32 --out benchmarks/results/HOST-DATE
    .venv/bin/python benchmarks/dask_scaling.py --quick     # lavapipe: two workers on one device

Pipelines over a and b (uint32 random bits, `--gib` of them in all):
- host: `dd.bit_count(dd.bit_xor(a, b))` on numpy-backed blocks (the only way before Tensor chunks);
- device-readme: `dd.bit_count(~a ^ b)` (the README's pipeline) on Tensor-backed blocks;
- device-chain: `bit_count(((~a ^ b) & (a | b)) ^ (a >> b))`, 7 steps, on Tensor-backed blocks;
- dask-floor: one task per pair of Tensor-backed blocks that returns its first block, no device
  work: what Dask itself costs a run of as many tasks on the same workers (building the graph,
  sending it, the scheduler's latency to the first task, each task's turn, the results' keys
  coming back, the synchronize's round trip). Against it, each device pipeline's speed-up has a
  ceiling, `(F1 + D1) / (FN + D1 / N)` with F the floor's time at 1 and N workers and
  D1 = T1 - F1 the one-worker run's time beyond the floor, and its device part scales by
  `(T1 - F1) / (TN - FN)`; both are written beside the speed-up.

One `LocalVulkanCluster` (one worker process per device, pinned by DMLGPU_DEVICE), or the
cluster at `--scheduler` (workers started with `python -m dmlgpu worker`). Each run is restricted
to its first k workers: a and b are made on those workers (uploaded where they are made for the
device pipelines) and persisted first (not timed; once per k and kind, kept for every pipeline
of that k); then the pipeline is timed from submission
until its result blocks are in the workers' memory and, for Tensor results, the workers' devices
have finished (`synchronize` on each, inside the timing); nothing crosses to the client. Each
run is repeated and the best time is kept, after untimed runs for at least `--warm` seconds (pipeline
creation, and the GPUs' clocks: an idle GPU drops to its lowest clock within seconds, and making
the inputs leaves it idle for tens of seconds).
Each run also records where its time went (`breakdown`: the client's graph building, `persist`,
the wait, the synchronize, the tasks' compute time per worker from dask's task stream, bytes
moved between workers). Afterwards the first, a middle and the last block are checked bit for
bit against `dmlgpu.table.reference` on the workers (each block's first, middle and last
CHECK_WINDOW elements). Writes `dask_scaling.json` (per pipeline: each run,
the speed-up of N workers over 1, and the device rows over the host row of the same run).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import dask
import dask.array
import distributed
import numpy as np

import dmlgpu
import dmlgpu.dask as dd
from dmlgpu.table.reference import REFERENCES as R

DTYPE = np.dtype(np.uint32)


def _host(a, b):
    return dd.bit_count(dd.bit_xor(a, b))


def _readme(a, b):
    return dd.bit_count(~a ^ b)


def _chain(a, b):
    return dd.bit_count(((~a ^ b) & (a | b)) ^ (a >> b))


def _reference_host(a, b):
    return R["bit_count"](R["bit_xor"](a, b))


def _reference_readme(a, b):
    return R["bit_count"](R["bit_xor"](R["bit_not"](a), b))


def _reference_chain(a, b):
    return R["bit_count"](R["bit_xor"](R["bit_and"](R["bit_xor"](R["bit_not"](a), b), R["bit_or"](a, b)),
                                       R["bit_shift_right"](a, b)))


def _first(a, b):
    return a


def _floor(a, b):
    return dask.array.map_blocks(_first, a, b, dtype=a.dtype, meta=a._meta)


def _reference_floor(a, b):
    return a


#: name -> (blocks on the device?, pipeline over dask arrays, reference over numpy blocks)
PIPELINES = {
    "host": (False, _host, _reference_host),  # bit_count(bit_xor(a, b)), numpy-backed
    "device-readme": (True, _readme, _reference_readme),  # bit_count(~a ^ b), Tensor-backed
    "device-chain": (True, _chain, _reference_chain),  # the 7-step chain, Tensor-backed
    "dask-floor": (True, _floor, _reference_floor),  # as many tasks, no device work
}


def same(block):
    return block


def synchronize() -> None:
    dmlgpu.default_device().synchronize()


def _numpy(block):
    return block.numpy() if isinstance(block, dmlgpu.Tensor) else block


#: Elements checked at the start, the middle and the end of each checked block (a whole 4 GiB
#: block took numpy's reference of the chain ~1 minute on the worker).
CHECK_WINDOW = 1 << 22


def windows(size: int) -> list[slice]:
    """The start, middle and end windows of a block of `size` elements (all of it if small)."""
    if size <= 3 * CHECK_WINDOW:
        return [slice(0, size)]
    middle = (size - CHECK_WINDOW) // 2
    return [slice(lo, lo + CHECK_WINDOW) for lo in (0, middle, size - CHECK_WINDOW)]


def mismatches(reference, result, a, b):
    """Elements of one result block's windows that differ from the reference (run on a worker)."""
    return sum(int(np.count_nonzero(_numpy(result[w]) != reference(_numpy(a[w]), _numpy(b[w]))))
               for w in windows(result.shape[0]))


def inputs(gib: float, chunk_mib: float, seed: int, device: bool):
    count = int(gib * 2**30) // (2 * DTYPE.itemsize)  # a and b together
    chunk = max(1, int(chunk_mib * 2**20) // DTYPE.itemsize)
    made = [dd.random_bits((count,), DTYPE, chunks=(chunk,), seed=seed + i) for i in range(2)]
    return [dd.to_device(x) for x in made] if device else made


def run(client, workers, name, args, made: dict):
    """Time pipeline `name` on `workers` only; returns the run's record. `made`: the inputs
    persisted on these workers so far, by whether they are on the device (made by the first
    pipeline that needs them, kept for the next: generate_s is 0 for those)."""
    device, pipeline, reference = PIPELINES[name]
    on = dict(workers=workers, allow_other_workers=False)
    start = time.perf_counter()
    if device not in made:
        made[device] = client.persist(inputs(args.gib, args.chunk_mib, args.seed + 2 * len(workers), device), **on)
        distributed.wait(made[device])
    a, b = made[device]
    generate_s = time.perf_counter() - start
    times, parts = [], []
    warm_until = time.perf_counter() + args.warm
    rep = 0
    while True:  # untimed until warm (at least once)
        x, y = (v.map_blocks(same, dtype=v.dtype, meta=v._meta, name=f"{v.name}-warm{rep}") for v in (a, b))
        warmed = client.persist(pipeline(x, y), **on)
        distributed.wait(warmed)
        if device:
            client.run(synchronize, workers=workers)
        del warmed, x, y
        rep += 1
        if time.perf_counter() >= warm_until:
            break
    for rep in range(args.repeat):
        # New keys per repetition (or it finds the last one's blocks done); the alias is fused away.
        x, y = (v.map_blocks(same, dtype=v.dtype, meta=v._meta, name=f"{v.name}-{rep}") for v in (a, b))
        moved = client.run(received_bytes, workers=workers)
        with distributed.get_task_stream(client) as stream:
            wall = time.time()  # the task stream's clock
            start = time.perf_counter()
            graph = pipeline(x, y)
            built = time.perf_counter()
            result = client.persist(graph, **on)
            submitted = time.perf_counter()
            distributed.wait(result)
            done = time.perf_counter()
            if device:
                client.run(synchronize, workers=workers)
            times.append(time.perf_counter() - start)
        parts.append(breakdown(stream.data, start, built, submitted, done, start + times[-1],
                               client.run(received_bytes, workers=workers), moved, wall))
    nblocks = result.numblocks[0]
    sample = sorted({0, nblocks // 2, nblocks - 1})
    checks = [dask.delayed(mismatches)(reference, result.blocks[i], a.blocks[i], b.blocks[i]) for i in sample]
    bad = sum(client.compute(checks, sync=True, **on))
    checked = sum(w.stop - w.start for i in sample for w in windows(int(result.chunks[0][i])))
    devices = client.run(dd.worker_device, workers=workers)
    del result, a, b, x, y
    best = min(times)
    return {"pipeline": name, "workers": len(workers), "devices": list(devices.values()), "generate_s": generate_s,
            "pipeline_s": times, "best_s": best, "input_gb_per_s": args.gib * 2**30 / best / 1e9,
            "breakdown": parts, "best_breakdown": parts[times.index(best)],
            "check": {"blocks": sample, "elements": checked, "mismatches": bad}}


def received_bytes(dask_worker) -> int:
    """Bytes this worker has received from other workers so far (blocks moved to it)."""
    return sum(t["total"] for t in dask_worker.transfer_incoming_log)


def breakdown(tasks, start, built, submitted, done, end, received, before, wall) -> dict:
    """Where one timed run went: the client building the graph, `persist` (optimising and
    sending it), waiting for the blocks, the workers' synchronize; the tasks' own time on
    each worker (their dmlgpu calls: submits, not device time), when the first task started
    and the last one ended (from the start, by the workers' clocks: the scheduler's latency),
    and blocks moved between workers (none is expected)."""
    busy: dict = {}
    starts, stops = [], []
    for task in tasks:
        computed = [s for s in task["startstops"] if s["action"] == "compute"]
        busy[task["worker"]] = busy.get(task["worker"], 0.0) + sum(s["stop"] - s["start"] for s in computed)
        starts += [s["start"] - wall for s in computed]
        stops += [s["stop"] - wall for s in computed]
    return {"graph_s": built - start, "persist_s": submitted - built, "wait_s": done - submitted,
            "synchronize_s": end - done, "tasks": len(tasks), "task_compute_s": busy,
            "first_task_start_s": min(starts, default=None), "last_task_stop_s": max(stops, default=None),
            "moved_bytes": sum(received[w] - before[w] for w in received)}


def _ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=None, help="a and b together, GiB (default 32; --quick 0.125)")
    parser.add_argument("--chunk-mib", type=float, default=None, help="block size per input (default 256; --quick 8)")
    parser.add_argument("--workers", type=int, default=None,
                        help="N: workers of the local cluster (default: one per device; --quick 2)")
    parser.add_argument("--devices", default=None, help="devices of the local cluster, e.g. 0,1")
    parser.add_argument("--scheduler", default=None, help="use this cluster instead of a local one")
    parser.add_argument("--threads", type=int, default=1, help="threads per worker (local cluster)")
    parser.add_argument("--repeat", type=int, default=None, help="repetitions per run (default 5; --quick 2)")
    parser.add_argument("--warm", type=float, default=None, help="untimed runs first for this many seconds (default 2; --quick 0)")
    parser.add_argument("--pipelines", default=",".join(PIPELINES), help="comma-separated names to run")
    parser.add_argument("--quick", action="store_true", help="small sizes for a CPU driver such as lavapipe")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="benchmarks/out", help="folder for dask_scaling.json")
    args = parser.parse_args(argv)
    quick = dict(gib=0.125, chunk_mib=8, repeat=2, workers=2, warm=0.0) if args.quick else {}
    for key, default in dict(gib=32.0, chunk_mib=256.0, repeat=5, warm=2.0).items():
        if getattr(args, key) is None:
            setattr(args, key, quick.get(key, default))
    if args.workers is None and not args.devices:
        args.workers = quick.get("workers")
    names = [n.strip() for n in args.pipelines.split(",") if n.strip()]
    unknown = sorted(set(names) - set(PIPELINES))
    if unknown:
        parser.error(f"unknown pipelines {unknown}; known: {list(PIPELINES)}")

    if args.scheduler:
        cluster, client = None, distributed.Client(args.scheduler)
    else:
        devices = [int(d) for d in args.devices.split(",")] if args.devices else None
        cluster = dd.LocalVulkanCluster(devices=devices, n_workers=args.workers, threads_per_worker=args.threads,
                                        memory_limit=None, dashboard_address=None)
        client = distributed.Client(cluster)
        client.wait_for_workers(len(cluster.devices))
    try:
        # Workers in name order: a local cluster's are 0, 1, ... (device order).
        info = client.scheduler_info(n_workers=-1)["workers"]
        workers = sorted(info, key=lambda w: str(info[w]["name"]))
        runs = []
        for k in sorted({1, len(workers)}):
            made = {}  # this k's inputs, numpy-backed and Tensor-backed, made once for every pipeline
            for name in names:
                record = run(client, workers[:k], name, args, made)
                runs.append(record)
                print(f"{name}, {k} worker(s): best {record['best_s']:.3f} s of {len(record['pipeline_s'])}, "
                      f"{record['input_gb_per_s']:.2f} GB/s of input; mismatches {record['check']['mismatches']}",
                      flush=True)
                b = record["best_breakdown"]
                print(f"    graph {b['graph_s'] * 1e3:.1f} ms, persist {b['persist_s'] * 1e3:.1f} ms, wait "
                      f"{b['wait_s'] * 1e3:.1f} ms, synchronize {b['synchronize_s'] * 1e3:.1f} ms; {b['tasks']} tasks, "
                      f"their compute per worker {[round(v * 1e3, 1) for v in b['task_compute_s'].values()]} ms, "
                      f"from {_ms(b['first_task_start_s'])} to {_ms(b['last_task_stop_s'])} ms; "
                      f"moved {b['moved_bytes']} bytes", flush=True)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    summary = {}
    for name in names:
        mine = [r for r in runs if r["pipeline"] == name]
        summary[name] = {"speedup": mine[0]["best_s"] / mine[-1]["best_s"], "workers": mine[-1]["workers"]}
        host = [r for r in runs if r["pipeline"] == names[0] and not PIPELINES[names[0]][0]]
        if host and PIPELINES[name][0]:  # device rows against the host row of the same run, same workers
            summary[name]["over_host_at_n_workers"] = host[-1]["best_s"] / mine[-1]["best_s"]
        floor = [r for r in runs if r["pipeline"] == "dask-floor"]
        if floor and PIPELINES[name][0] and name != "dask-floor" and len(mine) > 1:
            (f1, fn), (t1, tn), n = (floor[0]["best_s"], floor[-1]["best_s"]), (mine[0]["best_s"], mine[-1]["best_s"]), \
                mine[-1]["workers"]
            summary[name]["ceiling"] = t1 / (fn + (t1 - f1) / n)
            summary[name]["device_part_speedup"] = (t1 - f1) / (tn - fn)
        print(f"{name}: speed-up {summary[name]['speedup']:.2f}x with {mine[-1]['workers']} workers"
              + (f", {summary[name]['over_host_at_n_workers']:.2f}x the host row"
                 if "over_host_at_n_workers" in summary[name] else "")
              + (f"; ceiling over Dask's floor {summary[name]['ceiling']:.2f}x, device part "
                 f"{summary[name]['device_part_speedup']:.2f}x" if "ceiling" in summary[name] else ""))
    report = {
        "gib": args.gib, "chunk_mib": args.chunk_mib, "threads_per_worker": args.threads, "quick": args.quick,
        "runs": runs, "summary": summary,
        "host": platform.node(), "python": sys.version.split()[0], "dmlgpu": dmlgpu.__version__,
        "dask": dask.__version__, "distributed": distributed.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "dask_scaling.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=1, default=str)
    print(f"wrote {path}")
    return 0 if all(r["check"]["mismatches"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
