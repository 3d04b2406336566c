"""Benchmark-only timing of prepared dispatches: GPU timestamps of back-to-back runs, and the
floor of submitting a recorded command buffer and waiting for it. Used by `dmlgpu.profiling`
and the benchmarks, never on a call's way."""
from __future__ import annotations

import time

import numpy as np


def time_dispatches(resources, launch, repeats: int, timestamp_period: float) -> np.ndarray:
    """GPU seconds of `repeats` back-to-back runs of `launch`, each behind a barrier; `launch` may
    be a sequence of launches, each run then the whole sequence with a barrier after each (from
    before its first dispatch to after its last)."""
    launches = list(launch) if isinstance(launch, (list, tuple)) else [launch]
    steps = 2 * len(launches)  # (a timestamp after each dispatch and after each barrier)
    with resources.lock:
        resources.synchronize()
        commands = resources.context.commands(steps * repeats)
        try:
            handles = [resources.current(one).handle for one in launches]
            for _ in range(repeats):
                for handle, one in zip(handles, launches):
                    commands.dispatch(handle, one.push)
                    commands.compute_barrier()
            commands.submit()
            commands.wait()
            ticks = np.array(commands.timestamps(), dtype=np.float64)
        finally:
            commands.destroy()
        for one in launches:
            for ref in one.buffers:
                ref().last_use = resources.stream.completed
    seconds = ticks * timestamp_period * 1e-9
    return seconds[steps - 1::steps][:repeats] - seconds[0::steps][:repeats]


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
