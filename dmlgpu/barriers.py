"""The Vulkan memory barriers dmlgpu records (through kp.OpMemoryBarrier, our kp patch 0006).

kp itself records only a transfer-write -> shader-read barrier before each dispatch. dmlgpu adds:
- before every submitted dispatch list: earlier shader and transfer writes -> this list's shader
  reads and writes, so that an execution sees what the previous submission computed in the same
  buffers (in-place execution, a buffer written back and forth) and no stale cache line survives;
- between dependent executions inside a command list: shader writes -> shader reads and writes.
"""
from __future__ import annotations

# VkAccessFlagBits and VkPipelineStageFlagBits values.
SHADER_READ, SHADER_WRITE, TRANSFER_WRITE = 0x20, 0x40, 0x1000
COMPUTE_SHADER, TRANSFER = 0x800, 0x1000


def _unique(tensors) -> list:
    """Each kp tensor once (in-place and shared bindings repeat them)."""
    return list({id(t): t for t in tensors}.values())


def between_submissions(kp, tensors):
    """Earlier shader or transfer writes -> shader reads and writes of the coming dispatches."""
    return kp.OpMemoryBarrier(_unique(tensors), SHADER_WRITE | TRANSFER_WRITE, SHADER_READ | SHADER_WRITE,
                              COMPUTE_SHADER | TRANSFER, COMPUTE_SHADER)


def between_dispatches(kp, tensors):
    """Shader writes of earlier dispatches -> shader reads and writes of later ones."""
    return kp.OpMemoryBarrier(_unique(tensors), SHADER_WRITE, SHADER_READ | SHADER_WRITE,
                              COMPUTE_SHADER, COMPUTE_SHADER)
