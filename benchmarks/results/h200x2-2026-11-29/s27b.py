"""Two-GPU sharded search: where the time goes (16M x 256-bit, 256/1024 queries, top-10)."""
import json, sys, time, threading
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import dmlgpu
from dmlgpu.search import hamming as H

rng = np.random.default_rng(3)
import os
n = int(os.environ.get("ROWS", 1 << 24))
db = rng.integers(0, 256, size=(n, 32), dtype=np.uint8)
qs = rng.integers(0, 256, size=(1024, 32), dtype=np.uint8)
d0 = dmlgpu.Device(0)
d1 = dmlgpu.Device(0, private=True) if os.environ.get("ROWS") else dmlgpu.Device(1)
one = dmlgpu.HammingIndex(db, device=d0)
many = dmlgpu.HammingIndex(db, devices=[d0, d1])
h0 = dmlgpu.HammingIndex(db[: n // 2], device=d0)
h1 = dmlgpu.HammingIndex(db[n // 2:], device=d1)
pool = ThreadPoolExecutor(2)

def both(q):
    f = [pool.submit(h.search, q, 10) for h in (h0, h1)]
    return [x.result() for x in f]

def med(fn, reps=15, warm=1.0):
    end = time.perf_counter() + warm
    while time.perf_counter() < end:
        fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e3, float(np.min(ts)) * 1e3

log = []
orig = H.HammingIndex._shard_search
def traced(self, shard, *a, **k):
    t0 = time.perf_counter()
    r = orig(self, shard, *a, **k)
    log.append((shard.device.index if hasattr(shard.device, "index") else str(shard.device), t0, time.perf_counter()))
    return r

for nq in (256, 1024):
    q = qs[:nq]
    row = {"queries": nq}
    for name, fn in [("one", lambda: one.search(q, 10)), ("half0", lambda: h0.search(q, 10)),
                     ("half1", lambda: h1.search(q, 10)), ("many", lambda: many.search(q, 10)),
                     ("halves_threads", lambda: both(q)), ("one2", lambda: one.search(q, 10)),
                     ("many2", lambda: many.search(q, 10))]:
        row[name] = med(fn)
    H.HammingIndex._shard_search = traced
    tl = []
    for _ in range(5):
        log.clear()
        t = time.perf_counter(); many.search(q, 10); end = time.perf_counter()
        tl.append({"total": (end - t) * 1e3, "shards": [(d, (a - t) * 1e3, (b - t) * 1e3) for d, a, b in log]})
    H.HammingIndex._shard_search = orig
    row["timeline"] = tl
    print(json.dumps(row), flush=True)

# GPU time per kernel of a half and of the whole on device 0
for label, index, q in [("half0-256", h0, qs[:256]), ("one-256", one, qs[:256]), ("half0-1024", h0, qs), ("one-1024", one, qs)]:
    dev = index.device
    captured = []
    queue = dev.enqueue
    def enqueue(launch):
        captured.append((launch, [r() for r in launch.buffers]))
        return queue(launch)
    dev.enqueue = enqueue
    try:
        index.search(q, 10)
    finally:
        del dev.enqueue
    dev.synchronize()
    per, counts = {}, {}
    for launch, kept in captured:
        s = float(np.median(dev.time_dispatches(launch, 5))) * 1e3
        per[launch.program.name] = per.get(launch.program.name, 0.0) + s
        counts[launch.program.name] = counts.get(launch.program.name, 0) + 1
    print(json.dumps({"case": label, "gpu_ms": per, "dispatches": counts, "wall_ms": med(lambda: index.search(q, 10), 9, 0.5)}), flush=True)
