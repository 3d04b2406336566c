"""Same-call A/B of HammingIndex.search end to end (host queries in, numpy answers out), one GPU."""
import json, sys, time
import numpy as np
import dmlgpu
label = sys.argv[1]
rng = np.random.default_rng(7)
cases = [(1 << 20, 4, 1024, (10, 100, 1024)), (1 << 20, 16, 1024, (10,)), (1 << 24, 4, 256, (10,)), (1 << 24, 4, 1024, (10,))]
for rows, words, nq, ks in cases:
    db = rng.integers(0, 2**63, (rows, words), dtype=np.uint64)
    q = rng.integers(0, 2**63, (nq, words), dtype=np.uint64)
    index = dmlgpu.HammingIndex(db)
    for k in ks:
        d, i = index.search(q, k)
        end = time.perf_counter() + 1.0
        while time.perf_counter() < end:
            index.search(q, k)
        ts = []
        for _ in range(15):
            t = time.perf_counter(); index.search(q, k); ts.append(time.perf_counter() - t)
        med = float(np.median(ts))
        print(json.dumps({"build": label, "rows": rows, "bits": words * 64, "queries": nq, "k": k, "ms": round(med * 1e3, 3),
                          "gdist_per_s": round(rows * nq / med / 1e9, 1), "check": int(np.asarray(d).sum() % 1000003) + int(np.asarray(i).sum() % 1000003)}), flush=True)
    del index
