"""GPU-side timing of compiled operators, from Vulkan timestamp queries.

Each timed dispatch is followed by a barrier, so consecutive dispatches do not overlap and the
timestamps written after each command bracket exactly one kernel.
"""
from __future__ import annotations

import numpy as np

__all__ = ["kernel_seconds"]


def kernel_seconds(compiled, inputs, outputs, repeats: int = 20) -> np.ndarray:
    """Seconds each of `repeats` back-to-back executions took on the GPU."""
    launch = compiled.launch(compiled.check(inputs, outputs))
    return compiled.device.time_dispatches(launch, repeats)
