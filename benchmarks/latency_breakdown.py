"""Where the time of one small device-resident operation goes, submit to result.

    python benchmarks/latency_breakdown.py

Rows, each the median wall time of one call: a command buffer holding one tiny dispatch
recorded once and re-submitted (the floor of any runtime built on kp), the same recorded afresh
each time as the stream records it (barrier, dispatch, host barrier), dmlgpu's `bit_not(t,
out=o)` and `~t` each followed by `synchronize()`, and PyTorch's tiny op + synchronize when
PyTorch sees a GPU. Then the phases of one command (record, submit, fence wait, reset; and
recorded once, submit + wait) for the tiny dispatch, 1 MiB copies each way, a 4 KiB copy and a
1 MiB fill: what a transfer costs before any of dmlgpu's Python.
"""
import time

import numpy as np

import dmlgpu
from dmlgpu import Tensor
from dmlgpu.kernels import variants as kernels, spirv
from dmlgpu_tools.bench import wall_seconds
from dmlgpu.runtime import vulkan

N = 256  # uint32: 1 KiB
MiB = 1 << 20


def _median_us(times) -> float:
    return float(np.median(times)) * 1e6


def phases(context, label, record, repeats=300, warm=20):
    """Median record / submit / wait / reset times of `record`, then recorded once, re-submitted."""
    commands = context.commands()
    split = []
    for _ in range(warm + repeats):
        t0 = time.perf_counter()
        record(commands)
        commands.host_barrier()
        t1 = time.perf_counter()
        commands.submit()
        t2 = time.perf_counter()
        commands.wait()
        t3 = time.perf_counter()
        commands.reset()
        split.append((t1 - t0, t2 - t1, t3 - t2, time.perf_counter() - t3))
    record(commands)
    commands.host_barrier()
    once = []
    for _ in range(warm + repeats):
        t0 = time.perf_counter()
        commands.submit()
        commands.wait()
        once.append(time.perf_counter() - t0)
    commands.destroy()
    record_us, submit_us, wait_us, reset_us = (_median_us(column) for column in zip(*split[warm:]))
    print(f"  {label:26s} record {record_us:5.1f}  submit {submit_us:5.1f}  wait {wait_us:6.1f}  "
          f"reset {reset_us:4.1f}  | recorded once: submit + wait {_median_us(once[warm:]):6.1f} us")


def main():
    device = dmlgpu.default_device()
    context = vulkan.Context(device.index)
    memory = context.memory(4096, mapped=False)
    spec = np.array([kernels.WORKGROUP_SIZE], np.uint32)
    name = kernels.variant_for(dmlgpu.table.operators.BIT_NOT, dmlgpu.DataType.UINT32, dmlgpu.DataType.UINT32,
                               kernels.FLAT).name
    pipeline = context.pipeline(spirv.load(name), kernels.grid(N * 4 // 16), spec, len(kernels.PUSH_FIELDS),
                                [memory, memory])
    push = np.array([0, 0, 0, N * 4], np.uint32)
    recorded = context.commands()
    recorded.dispatch(pipeline.handle, push)
    fresh = context.commands()

    def replay():
        recorded.submit()
        recorded.wait()

    def record_and_submit():
        fresh.barrier()
        fresh.dispatch(pipeline.handle, push)
        fresh.host_barrier()
        fresh.submit()
        fresh.wait()
        fresh.reset()

    t, o = Tensor.from_numpy(np.arange(N, dtype=np.uint32)), Tensor.empty((N,), np.uint32)
    rows = {"vulkan: recorded once, submit + wait": replay,
            "vulkan: record, submit, wait, reset": record_and_submit,
            "dmlgpu bit_not(t, out=o) + synchronize": lambda: (dmlgpu.bit_not(t, out=o), device.synchronize()),
            "dmlgpu bit_not(t, out=o), no wait": lambda: dmlgpu.bit_not(t, out=o),
            "dmlgpu ~t + synchronize": lambda: (~t, device.synchronize()),
            "dmlgpu ~t, no wait": lambda: ~t}
    try:
        import torch
        if torch.cuda.is_available():
            x = torch.zeros(N, dtype=torch.int32, device="cuda")
            y = torch.empty_like(x)
            rows["torch bitwise_not(out=) + synchronize"] = lambda: (torch.bitwise_not(x, out=y),
                                                                     torch.cuda.synchronize())
            rows["torch ~x + synchronize"] = lambda: (~x, torch.cuda.synchronize())
            rows["torch synchronize alone"] = torch.cuda.synchronize
    except ImportError:
        pass
    wall_seconds(replay, seconds=1.5)  # let the clock ramp
    print(f"{device.name}:")
    for label, fn in rows.items():
        print(f"  {label:45s} {wall_seconds(fn, repeats=3000) * 1e6:7.1f} us")
        device.synchronize()
    print("phases of one command:")
    stage, small, target = context.memory(MiB, mapped=True), context.memory(4096, mapped=True), \
        context.memory(MiB, mapped=False)
    phases(context, "tiny dispatch", lambda c: c.dispatch(pipeline.handle, push))
    phases(context, "copy 1 MiB host -> device", lambda c: c.copy(stage.handle, target.handle, 0, 0, MiB))
    phases(context, "copy 1 MiB device -> host", lambda c: c.copy(target.handle, stage.handle, 0, 0, MiB))
    phases(context, "copy 4 KiB host -> device", lambda c: c.copy(small.handle, target.handle, 0, 0, 4096))
    phases(context, "fill 1 MiB", lambda c: c.fill(target.handle, 0, MiB, 0))
    for m in (stage, small, target):
        m.destroy()
    for c in (recorded, fresh):
        c.destroy()
    pipeline.destroy()
    memory.destroy()
    context.destroy()


if __name__ == "__main__":
    main()
