"""A/B: one- and two-GPU searches, 16M x 256-bit, 256 / 1,024 queries, top-10; a joined view of 4 pieces."""
import json, os, sys, time
import numpy as np
import dmlgpu
label = sys.argv[1]
rng = np.random.default_rng(3)
n = 1 << 24
db = rng.integers(0, 256, size=(n, 32), dtype=np.uint8)
qs = rng.integers(0, 256, size=(1024, 32), dtype=np.uint8)
d0, d1 = dmlgpu.Device(0), dmlgpu.Device(1)
one = dmlgpu.HammingIndex(db, device=d0)
many = dmlgpu.HammingIndex(db, devices=[d0, d1])
h0 = dmlgpu.HammingIndex(db[: n // 2], device=d0)
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
for nq in (256, 1024):
    q = qs[:nq]
    a, b = one.search(q, 10), many.search(q, 10)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    c = joined.search(q, 10)
    assert all(np.array_equal(x, y) for x, y in zip(a, c))
    row = {"build": label, "queries": nq}
    for name, idx in [("one", one), ("many", many), ("half0", h0), ("joined4", joined), ("one_again", one), ("many_again", many)]:
        row[name] = med(lambda: idx.search(q, 10))
    row["speedup"] = round(min(row["one"], row["one_again"]) / min(row["many"], row["many_again"]), 3)
    print(json.dumps(row), flush=True)
