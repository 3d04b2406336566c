"""Benchmark-only timing of one prepared dispatch: GPU timestamps of back-to-back runs, and the
floor of submitting a recorded command buffer and waiting for it. Used by `dmlgpu.profiling`
and the benchmarks, never on a call's way."""
from __future__ import annotations

import time

import numpy as np


def time_dispatches(resources, launch, repeats: int, timestamp_period: float) -> np.ndarray:
    """GPU seconds of `repeats` back-to-back runs of `launch`, each behind a barrier."""
    with resources.lock:
        resources.synchronize()
        commands = resources.context.commands(2 * repeats)
        try:
            handle = resources.current(launch).handle
            for _ in range(repeats):
                commands.dispatch(handle, launch.push)
                commands.compute_barrier()
            commands.submit()
            commands.wait()
            ticks = np.array(commands.timestamps(), dtype=np.float64)
        finally:
            commands.destroy()
        for ref in launch.buffers:
            ref().last_use = resources.stream.completed
    seconds = ticks * timestamp_period * 1e-9
    return seconds[1::2][:repeats] - seconds[0::2][:repeats]


def submit_floor(resources, launch, repeats: int) -> np.ndarray:
    """Wall seconds of submitting a command buffer that holds only `launch`, recorded once,
    and waiting for its fence, `repeats` times: what any Vulkan runtime pays for this work,
    so the floor under a queued call followed by `synchronize()`."""
    with resources.lock:
        resources.synchronize()
        commands = resources.context.commands()
        times = []
        try:
            commands.dispatch(resources.current(launch).handle, launch.push)
            commands.host_barrier()
            for _ in range(repeats + 1):  # the first wakes the queue up
                start = time.perf_counter()
                commands.submit()
                commands.wait()
                times.append(time.perf_counter() - start)
        finally:
            commands.destroy()
        for ref in launch.buffers:
            ref().last_use = resources.stream.completed
    return np.array(times[1:])
