"""k sweep, 1M x 256-bit, 1,024 queries, wall per search (median of 7 after 0.5 s warm)."""
import json, sys, time
import numpy as np
import dmlgpu, os
if os.environ.get('PREV'):
    from dmlgpu.kernels import search_programs as _sp
    from dmlgpu.search import pacing as _pc
    _sp.DISPATCHES_PER_SUBMIT = {True: 2, False: 2}
    _pc.RATE_GPU = 2e12
label = sys.argv[1]
rng = np.random.default_rng(3)
db = rng.integers(0, 2**63, (1 << 20, 4), dtype=np.uint64)
q = rng.integers(0, 2**63, (1024, 4), dtype=np.uint64)
index = dmlgpu.HammingIndex(db)
out = {}
for k in (10, 32, 33, 100, 1024, 16384):
    index.search(q, k)
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:
        index.search(q, k)
    ts = []
    for _ in range(7):
        t = time.perf_counter(); index.search(q, k); ts.append(time.perf_counter() - t)
    out[k] = round(float(np.median(ts)) * 1e3, 3)
print(json.dumps({"build": label, "ms": out}), flush=True)
