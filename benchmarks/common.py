"""What several benchmarks time the same way: a wall-clock median, and the 1,000-step command
list of dependent tiny steps (issue 23's case, in `graphs.py` against a CUDA graph and in
`call_overhead.py` for its host time). Imported by the scripts of this folder (run as
`python benchmarks/<name>.py`, which puts the folder on the path)."""
from __future__ import annotations

import time

import numpy as np

from dmlgpu import Binding, CommandList, DataType, TensorDesc
from dmlgpu.describe.operator_descs import DESC_CLASSES
from dmlgpu.table.operators import BY_SHORT

__all__ = ["command_list", "cuda_torch", "median_of", "torch_seconds", "wall"]

def cuda_torch():
    """PyTorch where it is installed and sees a CUDA device (the GPU peers), else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def torch_seconds(fn, repeats=20) -> float:
    """Median seconds of `fn` on the CUDA device, by CUDA events (torch is imported by the caller)."""
    import torch
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return float(np.median(times))


def wall(fn, repeats=20, warm_seconds=0.0) -> float:
    """Median wall seconds of `fn()` over `repeats` runs, after one run not timed (and after
    `warm_seconds` of runs: a GPU idle for a few seconds drops its clocks)."""
    fn()
    end = time.perf_counter() + warm_seconds
    while time.perf_counter() < end:
        fn()
    return median_of(fn, repeats)


def median_of(fn, repeats) -> float:
    """Median wall seconds of `fn()` over `repeats` runs (every run timed)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def command_list(device, rng, count=1000, m=256) -> CommandList:
    """A recorded list of `count` dependent steps on `m` uint32 cycling NOT/XOR/SHL/SHR/SIGN/
    BIT_COUNT, then an XOR that folds the count back in (a period of 7)."""
    desc = TensorDesc(DataType.UINT32, (m,))
    ops = {s: device.create_operator(DESC_CLASSES[BY_SHORT[s].name](*[desc] * (len(BY_SHORT[s].inputs) + 1)))
           for s in ("bit_not", "bit_xor", "bit_shift_left", "bit_shift_right", "sign", "bit_count")}
    bx, bk, by = device.upload(rng.integers(0, 2**32, m, dtype=np.uint32)), \
        device.upload(rng.integers(0, 2**32, m, dtype=np.uint32)), device.allocate(4 * m)
    steps = [("bit_not", [bx], bx), ("bit_xor", [bx, bk], bx), ("bit_shift_left", [bx, bk], bx),
             ("bit_shift_right", [bx, bk], bx), ("sign", [bx], bx), ("bit_count", [bx], by), ("bit_xor", [by, bk], bx)]
    commands = CommandList(device)
    for i in range(count):
        short, ins, out = steps[i % len(steps)]
        commands.record(ops[short], [Binding(b) for b in ins], [Binding(out)])
    return commands
