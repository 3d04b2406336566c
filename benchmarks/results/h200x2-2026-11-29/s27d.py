"""(a) a joined view of 4 pieces by tile length; (b) timelines of one- and two-GPU searches."""
import json, sys, time, threading
import numpy as np
import dmlgpu
from dmlgpu.kernels import search_programs as P
from dmlgpu.runtime import buffers as B
rng = np.random.default_rng(3)
n = 1 << 24
db = rng.integers(0, 256, size=(n, 32), dtype=np.uint8)
qs = rng.integers(0, 256, size=(256, 32), dtype=np.uint8)
d0, d1 = dmlgpu.Device(0), dmlgpu.Device(1)
one = dmlgpu.HammingIndex(db, device=d0)
many = dmlgpu.HammingIndex(db, devices=[d0, d1])
quarters = [dmlgpu.HammingIndex(db[i * n // 4:(i + 1) * n // 4], ids=np.arange(i * n // 4, (i + 1) * n // 4), device=d0) for i in range(4)]
joined = dmlgpu.HammingIndex.joined(quarters)
def med(fn, reps=15, warm=1.0):
    end = time.perf_counter() + warm
    while time.perf_counter() < end:
        fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return round(float(np.median(ts)) * 1e3, 3)
orig_tile = P.tile_rows
row = {"one": med(lambda: one.search(qs, 10))}
for forced in (None, 1024, 2048, 4096, 8192, 16384):
    P.tile_rows = orig_tile if forced is None else (lambda *a, forced=forced, **k: forced)
    joined._shards[0]._planned = None
    row[f"joined4_{forced}"] = med(lambda: joined.search(qs, 10))
    one._shards[0]._planned = None
    row[f"one_{forced}"] = med(lambda: one.search(qs, 10))
P.tile_rows = orig_tile
one._shards[0]._planned = None
print(json.dumps(row), flush=True)
# timelines
log = []
def wrap(obj, name, label):
    f = getattr(obj, name)
    def w(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            log.append((threading.current_thread().name[:14], label, t, time.perf_counter()))
    setattr(obj, name, w)
for d, tag in ((d0, "d0"), (d1, "d1")):
    for m in ("flush", "wait_for", "synchronize", "enqueue"):
        wrap(d, m, f"{tag}.{m}")
rd = B.Buffer.read
def bread(self, *a, **k):
    t = time.perf_counter()
    try:
        return rd(self, *a, **k)
    finally:
        log.append((threading.current_thread().name[:14], "read", t, time.perf_counter()))
B.Buffer.read = bread
for idx, name in ((one, "one"), (many, "many")):
    med(lambda: idx.search(qs, 10), reps=3)
    for rep in range(3):
        log.clear()
        t0 = time.perf_counter(); idx.search(qs, 10); t1 = time.perf_counter()
        ev = [(th, lab, round((a - t0) * 1e3, 3), round((b - t0) * 1e3, 3)) for th, lab, a, b in log if lab.split(".")[-1] != "enqueue" or True]
        enq = {}
        for th, lab, a, b in ev:
            if lab.endswith("enqueue"):
                enq.setdefault((th, lab), []).append(a)
        rest = [e for e in ev if not e[1].endswith("enqueue")]
        print(json.dumps({"case": name, "total_ms": round((t1 - t0) * 1e3, 3), "enqueues": {f"{k[0]}|{k[1]}": v for k, v in enq.items()}, "events": rest}), flush=True)
