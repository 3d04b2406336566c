"""dmlgpu.sum of a resident Tensor + synchronize against torch.sum + synchronize, tight loops
(after 1 s warm), and where the host's time goes (cProfile, 1 KiB)."""
import time, sys, numpy as np, dmlgpu
import torch
dev = dmlgpu.default_device()
def med(fn, n=200):
    ts = []
    for _ in range(n):
        s = time.perf_counter(); fn(); ts.append(time.perf_counter() - s)
    return float(np.median(ts)) * 1e6
for nbytes in (1024, 1 << 20, 64 << 20, 256 << 20):
    x = np.random.default_rng(0).standard_normal(nbytes // 4).astype(np.float32)
    t = dmlgpu.Tensor.from_numpy(x, dev); tx = torch.from_numpy(x).cuda()
    end = time.perf_counter() + 1.0
    while time.perf_counter() < end:
        dmlgpu.sum(t); dev.synchronize(); torch.sum(tx); torch.cuda.synchronize()
    for r in range(2):
        ours = med(lambda: (dmlgpu.sum(t), dev.synchronize()))
        only = med(lambda: dmlgpu.sum(t)); dev.synchronize()
        theirs = med(lambda: (torch.sum(tx), torch.cuda.synchronize()))
        print(f"{nbytes} B: dmlgpu.sum+sync {ours:.1f} us (call alone {only:.1f}), torch.sum+sync {theirs:.1f} us", flush=True)
import cProfile, pstats
t = dmlgpu.Tensor.from_numpy(np.ones(256, np.float32), dev)
pr = cProfile.Profile(); pr.enable()
for _ in range(500): dmlgpu.sum(t)
pr.disable(); dev.synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(12)
