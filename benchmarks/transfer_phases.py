"""The phases of one recorded command on the raw runtime layer: record, submit, fence wait,
reset, and the same recorded once and re-submitted; a tiny dispatch, 1 MiB copies each way,
a 4 KiB copy and a 1 MiB fill. What a 1 MiB transfer must cost before any Python of dmlgpu's.

    python benchmarks/transfer_phases.py
"""
import time

import numpy as np

import dmlgpu
from dmlgpu import kernels, spirv
from dmlgpu.runtime import vulkan
d = dmlgpu.default_device()
ctx = vulkan.Context(d.index)
n = 1 << 20
stage = ctx.memory(n, mapped=True)
dev = ctx.memory(n, mapped=False)
small_stage = ctx.memory(4096, mapped=True)
spec = np.array([kernels.WORKGROUP_SIZE], np.uint32)
name = kernels.variant_for(dmlgpu.operators.BIT_NOT, dmlgpu.DataType.UINT32, dmlgpu.DataType.UINT32, kernels.FLAT).name
pipe = ctx.pipeline(spirv.load(name), kernels.grid(64), spec, len(kernels.PUSH_FIELDS), [dev, dev])
push = np.array([0, 0, 0, 1024], np.uint32)
def phases(label, record, reps=300):
    c = ctx.commands()
    rec = []; sub = []; wt = []; rs = []
    for i in range(reps + 20):
        t0 = time.perf_counter(); record(c); c.host_barrier(); t1 = time.perf_counter()
        c.submit(); t2 = time.perf_counter(); c.wait(); t3 = time.perf_counter(); c.reset(); t4 = time.perf_counter()
        if i >= 20: rec.append(t1-t0); sub.append(t2-t1); wt.append(t3-t2); rs.append(t4-t3)
    m = lambda v: round(np.median(v) * 1e6, 1)
    print(f"{label:40s} record {m(rec)}  submit {m(sub)}  wait {m(wt)}  reset {m(rs)}  us", flush=True)
    c2 = ctx.commands(); record(c2); c2.host_barrier()
    ts = []
    for i in range(reps + 20):
        t0 = time.perf_counter(); c2.submit(); c2.wait(); ts.append(time.perf_counter() - t0)
    print(f"{'   recorded once: submit+wait':40s} {round(np.median(ts[20:]) * 1e6, 1)} us", flush=True)
phases("tiny dispatch", lambda c: c.dispatch(pipe.handle, push))
phases("copy 1 MiB host->device", lambda c: c.copy(stage.handle, dev.handle, 0, 0, n))
phases("copy 1 MiB device->host", lambda c: c.copy(dev.handle, stage.handle, 0, 0, n))
phases("copy 4 KiB host->device", lambda c: c.copy(small_stage.handle, dev.handle, 0, 0, 4096))
phases("fill 1 MiB", lambda c: c.fill(dev.handle, 0, n, 0))
