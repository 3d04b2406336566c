"""Dask scaling: `bit_count(bit_xor(a, b))` over data made on the workers, 1 worker vs N.

    .venv/bin/python benchmarks/dask_scaling.py --gib 32 --out benchmarks/results/HOST-DATE
    .venv/bin/python benchmarks/dask_scaling.py --gib 0.25 --workers 2   # lavapipe: two on one

One `LocalVulkanCluster` (one worker process per device, pinned by DMLGPU_DEVICE), or the
cluster at `--scheduler` (workers started with `python -m dmlgpu worker`). Each run is restricted
to its first k workers: a and b (uint32 random bits, `--gib` in all) are made and persisted on
those workers first (not timed), then the pipeline is timed from submission until its result
blocks are in the workers' memory; nothing crosses to the client. Each run is repeated and the
best time is kept; the first repetition includes pipeline creation on each worker. Afterwards
the first, a middle and the last block are checked bit for bit against `dmlgpu.table.reference` on
the workers. Writes `dask_scaling.json` (speed-up, every worker's device, the check) to `--out`.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import dask
import dask.array as da
import distributed
import numpy as np

import dmlgpu
import dmlgpu.dask as dd
from dmlgpu.table.reference import REFERENCES

DTYPE = np.dtype(np.uint32)


def reference_pipeline(a, b):
    return REFERENCES["bit_count"](REFERENCES["bit_xor"](a, b))


def same(block):
    return block


def mismatches(result, a, b):
    """Elements of one result block that differ from the reference (run on a worker)."""
    return int(np.count_nonzero(result != reference_pipeline(a, b)))


def inputs(gib: float, chunk_mib: float, seed: int):
    count = int(gib * 2**30) // (2 * DTYPE.itemsize)  # a and b together
    chunk = max(1, int(chunk_mib * 2**20) // DTYPE.itemsize)
    return (dd.random_bits((count,), DTYPE, chunks=(chunk,), seed=seed),
            dd.random_bits((count,), DTYPE, chunks=(chunk,), seed=seed + 1))


def run(client, workers, args):
    """Time the pipeline on `workers` only; returns the run's record."""
    on = dict(workers=workers, allow_other_workers=False)
    a, b = inputs(args.gib, args.chunk_mib, args.seed + 2 * len(workers))  # keys of this run only
    start = time.perf_counter()
    a, b = client.persist([a, b], **on)
    distributed.wait([a, b])
    generate_s = time.perf_counter() - start
    times = []
    for rep in range(args.repeat):
        # New keys per repetition (or it finds the last one's blocks done); the alias is fused away.
        x, y = (v.map_blocks(same, dtype=v.dtype, name=f"{v.name}-{rep}") for v in (a, b))
        start = time.perf_counter()
        result = client.persist(dd.bit_count(dd.bit_xor(x, y)), **on)
        distributed.wait(result)
        times.append(time.perf_counter() - start)
    nblocks = result.numblocks[0]
    sample = sorted({0, nblocks // 2, nblocks - 1})
    checks = [dask.delayed(mismatches)(result.blocks[i], a.blocks[i], b.blocks[i]) for i in sample]
    bad = sum(client.compute(checks, sync=True, **on))
    checked = sum(int(result.chunks[0][i]) for i in sample)
    devices = client.run(dd.worker_device, workers=workers)
    del result, a, b, x, y
    best = min(times)
    return {"workers": len(workers), "devices": list(devices.values()), "generate_s": generate_s,
            "pipeline_s": times, "best_s": best, "input_gb_per_s": args.gib * 2**30 / best / 1e9,
            "check": {"blocks": sample, "elements": checked, "mismatches": bad}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=32.0, help="a and b together, GiB (default 32)")
    parser.add_argument("--chunk-mib", type=float, default=256.0, help="block size per input (default 256)")
    parser.add_argument("--workers", type=int, default=None,
                        help="N: workers of the local cluster (default: one per device)")
    parser.add_argument("--devices", default=None, help="devices of the local cluster, e.g. 0,1")
    parser.add_argument("--scheduler", default=None, help="use this cluster instead of a local one")
    parser.add_argument("--threads", type=int, default=1, help="threads per worker (local cluster)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=".", help="folder for dask_scaling.json")
    args = parser.parse_args(argv)

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
            record = run(client, workers[:k], args)
            runs.append(record)
            print(f"{k} worker(s): best {record['best_s']:.3f} s of {len(record['pipeline_s'])}, "
                  f"{record['input_gb_per_s']:.2f} GB/s of input; mismatches {record['check']['mismatches']}",
                  flush=True)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    report = {
        "pipeline": "bit_count(bit_xor(a, b)), uint32 -> uint8, persisted on the workers",
        "gib": args.gib, "chunk_mib": args.chunk_mib, "threads_per_worker": args.threads,
        "runs": runs, "speedup": runs[0]["best_s"] / runs[-1]["best_s"],
        "host": platform.node(), "python": sys.version.split()[0], "dmlgpu": dmlgpu.__version__,
        "dask": dask.__version__, "distributed": distributed.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "dask_scaling.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=1, default=str)
    print(f"speed-up {report['speedup']:.2f}x with {runs[-1]['workers']} workers; wrote {path}")
    return 0 if all(r["check"]["mismatches"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
