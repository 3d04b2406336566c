"""Exact Hamming search over Dask: `dmlgpu.dask.HammingIndex` (one resident index per block, kept
on the worker holding it; a search is one message to each worker) on 1 worker and on N, against
the same search in this one process (`dmlgpu.HammingIndex`) and the task-per-search
`dmlgpu.dask.hamming_knn` (a new index per block per search), all in the same run.

    .venv/bin/python benchmarks/dask_hamming.py --out benchmarks/results/HOST-DATE   # 16M x 256-bit
    .venv/bin/python benchmarks/dask_hamming.py --quick    # lavapipe: two workers on one device

The database (uint32 random bits, made on the workers and uploaded where made) is persisted
first; each row is timed end to end from the client as a user sees it (queries sent, answers
merged and back, numpy): WARM_S seconds of warm-up searches, then the median of `--repeat` searches. The dask
HammingIndex rows also give the mean time the slowest worker spent answering a search (its one
device search) and the rest of the median (messages, the client, the merge), and the index's
counts (a fallback or another placement during the timed searches shows there). Every row's
answer is checked against the one-process index's (distances and ids, exactly) before timing.
Writes `dask_hamming.json`: seconds, G distances/s (rows x queries / s), the speed-up of N
workers over 1, and one worker's throughput as a fraction of one process's.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import dask
import distributed
import numpy as np

import dmlgpu
import dmlgpu.dask as dd
from dmlgpu.dask import shards


#: Seconds of searches before a row's timing: a GPU idle for a few seconds runs at 345 MHz (an
#: H200) and takes 1-2 s of work to clock up; a row on two workers whose second GPU sat idle
#: through the rows before timed it cold (256 queries: "0.55x" one worker; NOTES, session 28).
WARM_S = 2.0


def timed(search, repeat: int, every: bool = False):
    """The median of `repeat` timed searches after WARM_S seconds of them (pipelines, the first
    upload of the queries' buffers, the GPUs' clocks; with `every`: and the list)."""
    end = time.perf_counter() + WARM_S
    search()
    while time.perf_counter() < end:
        search()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        search()
        times.append(time.perf_counter() - start)
    return (statistics.median(times), times) if every else statistics.median(times)


def _identity(block):
    return block


def worker_seconds(client, workers) -> dict:
    """Per worker, the seconds its shard handler has spent answering searches so far."""
    return {w: s.get("search", 0.0) for w, s in client.run(shards.served_seconds, workers=workers).items()}


def same(got, expected) -> bool:
    return all(np.array_equal(np.asarray(g), np.asarray(e)) for g, e in zip(got, expected))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=None, help="database codes (default 2^24; --quick 2^18)")
    parser.add_argument("--bits", type=int, default=256, help="bits per code, a multiple of 32")
    parser.add_argument("--queries", type=int, default=None, help="queries per search (default 256; --quick 32)")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--chunk-rows", type=int, default=None,
                        help="rows per block, one shard each (default rows / 4)")
    parser.add_argument("--workers", type=int, default=None, help="N (default: one per device; --quick 2)")
    parser.add_argument("--devices", default=None, help="devices of the local cluster, e.g. 0,1")
    parser.add_argument("--scheduler", default=None, help="use this cluster instead of a local one")
    parser.add_argument("--repeat", type=int, default=None, help="timed searches per row (default 20; --quick 5)")
    parser.add_argument("--no-knn", action="store_true", help="skip the hamming_knn rows")
    parser.add_argument("--quick", action="store_true", help="small sizes for a CPU driver such as lavapipe")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="benchmarks/out", help="folder for dask_hamming.json")
    args = parser.parse_args(argv)
    quick = dict(rows=1 << 18, queries=32, repeat=5, workers=2) if args.quick else {}
    for key, default in dict(rows=1 << 24, queries=256, repeat=20).items():
        if getattr(args, key) is None:
            setattr(args, key, quick.get(key, default))
    if args.workers is None and not args.devices:
        args.workers = quick.get("workers")
    words = args.bits // 32
    chunk_rows = args.chunk_rows or -(-args.rows // 4)

    if args.scheduler:
        cluster, client = None, distributed.Client(args.scheduler)
    else:
        devices = [int(d) for d in args.devices.split(",")] if args.devices else None
        cluster = dd.LocalVulkanCluster(devices=devices, n_workers=args.workers, memory_limit=None,
                                        dashboard_address=None)
        client = distributed.Client(cluster)
        client.wait_for_workers(len(cluster.devices))
    rows = []
    try:
        info = client.scheduler_info(n_workers=-1)["workers"]
        workers = sorted(info, key=lambda w: str(info[w]["name"]))
        database = dd.random_bits((args.rows, words), np.uint32, chunks=(chunk_rows, words), seed=args.seed)
        codes = dd.to_host(database).compute()
        queries = np.random.default_rng(args.seed + 1).integers(0, 2**32, (args.queries, words), dtype=np.uint32)
        distances = args.rows * args.queries

        def record(name, n_workers, seconds, extra=None):
            row = {"row": name, "workers": n_workers, "seconds": seconds, "g_distances_per_s": distances / seconds / 1e9,
                   **(extra or {})}
            rows.append(row)
            print(f"{name:<28} {n_workers} worker(s): {seconds * 1e3:9.2f} ms, {row['g_distances_per_s']:8.2f} G/s",
                  flush=True)

        local = dmlgpu.HammingIndex(codes)
        expected = local.search(queries, args.k)
        record("one process HammingIndex", 0, timed(lambda: local.search(queries, args.k), args.repeat),
               {"device": dmlgpu.default_device().name})
        del local
        for n in sorted({1, len(workers)}):
            # Keys of this row only (the same bits): no block of another row's index is found done.
            mine = database.map_blocks(_identity, dtype=database.dtype, meta=database._meta,
                                       name=f"{database.name}-on-{n}")
            index = dd.HammingIndex(mine, workers=workers[:n])
            assert set(index.placement) == set(workers[:n]), f"shards placed on {index.placement}, not {n} worker(s)"
            assert same(index.search(queries, args.k), expected), f"dask HammingIndex on {n} worker(s) differs"
            counts, busy = index.counts, worker_seconds(client, workers[:n])
            seconds, times = timed(lambda: index.search(queries, args.k), args.repeat, every=True)
            searched = index.counts["searches"] - counts["searches"]  # (the warm-up's too)
            on_worker = max((s - busy[w]) / searched for w, s in worker_seconds(client, workers[:n]).items())
            mean = statistics.mean(times)
            record("dask HammingIndex", n, seconds,
                   {"shards": index.shards, "placement": index.placement, "counts": index.counts,
                    "mean_s": mean, "worker_search_mean_s": on_worker, "rest_mean_s": mean - on_worker})
            print(f"{'':<28} mean {mean * 1e3:.2f} ms: the slowest worker's answer {on_worker * 1e3:.2f} ms, "
                  f"the rest (messages, client, merge) {(mean - on_worker) * 1e3:.2f} ms; {index.counts}", flush=True)
            index.close()
            if not args.no_knn:
                on = dict(workers=workers[:n], allow_other_workers=False)
                persisted = client.persist(database, **on)
                distributed.wait(persisted)

                def knn():
                    return client.compute(list(dd.hamming_knn(persisted, queries, args.k)), sync=True, **on)

                assert same(knn(), expected), f"hamming_knn on {n} worker(s) differs"
                record("dask hamming_knn", n, timed(knn, max(3, args.repeat // 4)))
                del persisted
        devices = client.run(dd.worker_device)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()

    def seconds(name, n):
        return next(r["seconds"] for r in rows if r["row"] == name and r["workers"] == n)

    n = len(workers)
    summary = {"speedup_n_over_1": seconds("dask HammingIndex", 1) / seconds("dask HammingIndex", n),
               "one_worker_over_one_process": seconds("one process HammingIndex", 0) / seconds("dask HammingIndex", 1)}
    if not args.no_knn:
        summary["index_over_knn_at_n"] = seconds("dask hamming_knn", n) / seconds("dask HammingIndex", n)
    print(f"{n} workers over 1: {summary['speedup_n_over_1']:.2f}x; one worker at "
          f"{summary['one_worker_over_one_process']:.0%} of one process")
    report = {"rows": args.rows, "bits": args.bits, "queries": args.queries, "k": args.k, "chunk_rows": chunk_rows,
              "quick": args.quick, "results": rows, "summary": summary, "workers": devices,
              "host": platform.node(), "python": sys.version.split()[0], "dmlgpu": dmlgpu.__version__,
              "dask": dask.__version__, "distributed": distributed.__version__,
              "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "dask_hamming.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=1, default=str)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
