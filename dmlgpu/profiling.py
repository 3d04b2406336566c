"""GPU-side timing of compiled operators, from Vulkan timestamp queries.

Each timed dispatch is followed by a compute-to-compute barrier, so consecutive dispatches do not
overlap and the timestamps written after each command (kp writes one after every recorded
operation, at the end of all prior work) bracket exactly one kernel.
"""
from __future__ import annotations

import numpy as np

from . import barriers


def kernel_seconds(compiled, inputs, outputs, repeats: int = 20) -> np.ndarray:
    """Seconds each of `repeats` back-to-back executions took on the GPU."""
    device = compiled.device
    kp = device._kp
    with device._lock:
        ranges = compiled.check(inputs, outputs)
        _, algorithm, push = compiled._launch(ranges)
        tensors = [r.buffer._tensor for r in ranges]
        sequence = device._manager.sequence(0, 2 * repeats)
        try:
            for _ in range(repeats):
                sequence.record(kp.OpAlgoDispatch(algorithm, push))
                sequence.record(barriers.between_dispatches(kp, tensors))
            sequence.eval()
            ticks = np.array(sequence.get_timestamps(), dtype=np.float64)
        finally:
            sequence.destroy()
        ranges[-1].buffer._host_current = False
    seconds = ticks * device.properties["timestamp_period"] * 1e-9
    return seconds[1::2][:repeats] - seconds[0::2][:repeats]  # after dispatch - after previous barrier
