"""GPU time per kernel of one HammingIndex.search (each dispatch captured as queued, run again
alone, median of 5) beside the search's wall time; both builds. One JSON line per case."""
import json, sys, time
import numpy as np
import dmlgpu
label = sys.argv[1]
rng = np.random.default_rng(7)
dev = dmlgpu.default_device()
for rows, words, nq in [(1 << 20, 4, 1024), (1 << 24, 4, 256)]:
    db = rng.integers(0, 2**63, (rows, words), dtype=np.uint64)
    q = rng.integers(0, 2**63, (nq, words), dtype=np.uint64)
    index = dmlgpu.HammingIndex(db)
    index.search(q, 10)
    end = time.perf_counter() + 1.5
    while time.perf_counter() < end:
        index.search(q, 10)
    ts = []
    for _ in range(15):
        t = time.perf_counter(); index.search(q, 10); ts.append(time.perf_counter() - t)
    captured = []
    queue = dev.enqueue
    def enqueue(launch):
        captured.append((launch, [r() for r in launch.buffers]))
        return queue(launch)
    dev.enqueue = enqueue
    sub0 = getattr(getattr(dev, "_resources", None), "stream", None)
    try:
        index.search(q, 10)
    finally:
        del dev.enqueue
    dev.synchronize()
    per = {}
    counts = {}
    for launch, kept in captured:
        s = float(np.median(dev.time_dispatches(launch, 5))) * 1e3
        name = launch.program.name
        per[name] = per.get(name, 0.0) + s
        counts[name] = counts.get(name, 0) + 1
    print(json.dumps({"build": label, "rows": rows, "queries": nq, "wall_ms": float(np.median(ts)) * 1e3,
                      "gpu_ms": per, "dispatches": counts, "gpu_sum_ms": sum(per.values())}), flush=True)
    del index
