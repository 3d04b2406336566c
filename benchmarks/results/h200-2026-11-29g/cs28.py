"""Carry-save bit counts on or off (env CS=1), HammingIndex.search end to end, 1,024 host queries,
k = 10, 1M rows of 256/512/1,024/2,048 bits; warm 1.5 s, median of 15. One JSON line per case."""
import json, os, sys, time
import numpy as np
import dmlgpu
from dmlgpu.kernels import variants
variants.HAMMING_CARRY_SAVE = os.environ.get("CS") == "1"
rng = np.random.default_rng(7)
for words in (4, 8, 16, 32):
    rows, nq = 1 << 20, 1024
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
    print(json.dumps({"cs": variants.HAMMING_CARRY_SAVE, "bits": words * 64, "ms": med * 1e3,
                      "gdist_per_s": rows * nq / med / 1e9, "check": int(np.asarray(d).sum() % 1000003),
                      "icheck": int(np.asarray(i).astype(np.int64).sum() % 1000003)}), flush=True)
    del index
