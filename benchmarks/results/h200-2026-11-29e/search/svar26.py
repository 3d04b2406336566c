"""Variants of the register-path search plan (module constants patched), wall and GPU per kernel:
V0 as shipped; nosample (BOUND_SAMPLE_TILES 0); d1 (DISPATCHES_PER_SUBMIT 1); r4 (RATE_GPU 4e12:
a planned submit twice as long); d1r4; all3."""
import json, sys, time
import numpy as np
import dmlgpu
from dmlgpu.kernels import search_programs as sp
from dmlgpu.search import pacing
rng = np.random.default_rng(7)
dev = dmlgpu.default_device()
base = (sp.BOUND_SAMPLE_TILES, sp.DISPATCHES_PER_SUBMIT, pacing.RATE_GPU)
variants = {"V0": base, "nosample": (0, base[1], base[2]), "d1": (base[0], 1, base[2]), "r4": (base[0], base[1], 4e12),
            "d1r4": (base[0], 1, 4e12), "all3": (0, 1, 4e12)}
cases = [(1 << 20, 4, 1024), (1 << 20, 16, 1024), (1 << 24, 4, 256)]
data = {c: (rng.integers(0, 2**63, (c[0], c[1]), dtype=np.uint64), rng.integers(0, 2**63, (c[2], c[1]), dtype=np.uint64)) for c in cases}
want = {}
for rnd in range(2):
    for c in cases:
        db, q = data[c]
        for name, (tiles, dps, rate) in variants.items():
            sp.BOUND_SAMPLE_TILES, sp.DISPATCHES_PER_SUBMIT, pacing.RATE_GPU = tiles, dps, rate
            index = dmlgpu.HammingIndex(db)
            d, i = index.search(q, 10)
            key = (c, "ids")
            got = (np.asarray(d).tobytes(), np.asarray(i).tobytes())
            same = want.setdefault(c, got) == got
            end = time.perf_counter() + 1.0
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
            try:
                index.search(q, 10)
            finally:
                del dev.enqueue
            per, counts = {}, {}
            for launch, kept in captured:
                s = float(np.median(dev.time_dispatches(launch, 5))) * 1e3
                per[launch.program.name] = round(per.get(launch.program.name, 0.0) + s, 4)
                counts[launch.program.name] = counts.get(launch.program.name, 0) + 1
            print(json.dumps({"round": rnd, "rows": c[0], "bits": c[1] * 64, "queries": c[2], "variant": name, "same": same,
                              "wall_ms": round(float(np.median(ts)) * 1e3, 4), "gpu_ms": per, "dispatches": counts}), flush=True)
            del index, captured
