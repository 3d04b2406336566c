import numpy as np, dmlgpu, time, json
from dmlgpu.search import pacing
log = []
orig = pacing.Pacer._wait_oldest
def w(self):
    pos, work, cost, sub, sec = self._inflight[0]
    t = time.perf_counter(); ld = self._last_done
    orig(self)
    log.append(f"wait {work[-5:]} cost {cost:.3g} est {sec*1e3:.3f}ms blocked {(time.perf_counter()-t)*1e3:.3f}ms since_start {(time.perf_counter()-max(sub, ld))*1e3:.3f}ms left {len(self._inflight)}")
pacing.Pacer._wait_oldest = w
rng = np.random.default_rng(3)
for n, nq in [(1 << 24, 256), (1 << 20, 1024)]:
    db = rng.integers(0, 256, size=(n, 32), dtype=np.uint8)
    q = rng.integers(0, 256, size=(nq, 32), dtype=np.uint8)
    idx = dmlgpu.HammingIndex(db)
    end = time.perf_counter() + 1.0
    i = 0
    while time.perf_counter() < end:
        log.clear(); t = time.perf_counter(); idx.search(q, 10); dt = time.perf_counter() - t
        if i < 3:
            print(n, nq, "search", i, round(dt * 1e3, 3), log, {k[1][-5:]: f"{v:.3g}" for k, v in list(pacing._RATES.values())[-1].items()}, flush=True)
        i += 1
    log.clear(); t = time.perf_counter(); idx.search(q, 10); dt = time.perf_counter() - t
    print(n, nq, "last", round(dt * 1e3, 3), log, {k[1][-5:]: f"{v:.3g}" for k, v in list(pacing._RATES.values())[-1].items()}, flush=True)
    del idx
