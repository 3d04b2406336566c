"""Same-call A/B of HammingIndex.search, end to end (host queries in, numpy answers out):
1M x 256-bit (uint64 words), 1,024 queries, k = 10; 1M x 1,024-bit; 16M x 256-bit, 256 queries.
Warm 1.5 s before each case; median of 15. Prints one JSON line per case."""
import json, sys, time
import numpy as np
import dmlgpu, os
if os.environ.get('PREV'):
    from dmlgpu.kernels import search_programs as _sp
    from dmlgpu.search import pacing as _pc
    _sp.DISPATCHES_PER_SUBMIT = {True: 2, False: 2}
    _pc.RATE_GPU = 2e12
label = sys.argv[1]
rng = np.random.default_rng(7)
cases = [(1 << 20, 4, 1024), (1 << 20, 16, 1024), (1 << 24, 4, 256)]
for rows, words, nq in cases:
    db = rng.integers(0, 2**63, (rows, words), dtype=np.uint64)
    q = rng.integers(0, 2**63, (nq, words), dtype=np.uint64)
    index = dmlgpu.HammingIndex(db)
    d, i = index.search(q, 10)
    end = time.perf_counter() + 1.5
    while time.perf_counter() < end:
        index.search(q, 10)
    ts = []
    for _ in range(15):
        t = time.perf_counter(); index.search(q, 10); ts.append(time.perf_counter() - t)
    med = float(np.median(ts))
    print(json.dumps({"build": label, "rows": rows, "bits": words * 64, "queries": nq, "ms": med * 1e3,
                      "gdist_per_s": rows * nq / med / 1e9, "check": int(np.asarray(d).sum() % 1000003)}), flush=True)
    del index
