"""k sweep of the register path with and without the sampled bound, one process, one GPU."""
import json, sys, time
import numpy as np
import dmlgpu
from dmlgpu.kernels import search_programs as P
rng = np.random.default_rng(7)
SHARE = P.BOUND_SAMPLE_SHARE
def med(fn, reps=9, warm=0.3):
    end = time.perf_counter() + warm
    while time.perf_counter() < end:
        fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return float(np.median(ts))
for rows, words, nq in [(1 << 20, 4, 1024), (1 << 20, 16, 1024), (1 << 24, 4, 256)]:
    db = rng.integers(0, 2**63, (rows, words), dtype=np.uint64)
    q = rng.integers(0, 2**63, (nq, words), dtype=np.uint64)
    index = dmlgpu.HammingIndex(db)
    med(lambda: index.search(q, 10), warm=1.5)
    for k in (1, 2, 4, 8, 10, 12, 16, 20, 24, 28, 32):
        row = {"rows": rows, "bits": words * 64, "queries": nq, "k": k}
        for rnd in range(2):
            for variant, share in (("sample", SHARE), ("none", 1 << 60)):
                P.BOUND_SAMPLE_SHARE = share
                index._shards[0]._planned = None
                s = med(lambda: index.search(q, k))
                row.setdefault(variant, []).append(round(s * 1e3, 3))
        P.BOUND_SAMPLE_SHARE = SHARE
        print(json.dumps(row), flush=True)
    del index
