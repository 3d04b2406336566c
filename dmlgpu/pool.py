"""Reusable device buffers for the numpy front end.

Every kp tensor costs an allocation (0.8 ms on an H200) and every new tensor means new Algorithms
bound to it, so the front end borrows buffers from size classes (eight per power of two, so at
most 12.5% is wasted) and returns them after each call. Same-sized calls then hit the same
buffers and so the same cached pipelines and recorded command buffers.
"""
from __future__ import annotations

from collections import OrderedDict

#: Free buffers kept per device, in bytes, beyond which the least recently used are released.
KEEP_BYTES = 512 << 20


def size_class(nbytes: int) -> int:
    """Round up to a multiple of 16 with at most three significant bits above it."""
    units = max(1, -(-nbytes // 16))
    if units > 8:
        step = 1 << (units.bit_length() - 4)
        units = -(-units // step) * step
    return units * 16


class ScratchPool:
    def __init__(self, device):
        self.device = device
        self._free: OrderedDict = OrderedDict()  # id(buffer) -> buffer, least recent first
        self._free_bytes = 0

    def take(self, nbytes: int):
        size = min(size_class(nbytes), self.device.max_buffer_size)
        for key, buffer in self._free.items():
            if buffer.size_in_bytes == size:
                del self._free[key]
                self._free_bytes -= size
                return buffer
        return self.device.allocate(size)

    def give(self, *buffers):
        for buffer in dict.fromkeys(buffers):  # a buffer bound twice comes back once
            self._free[id(buffer)] = buffer
            self._free_bytes += buffer.size_in_bytes
        while self._free_bytes > KEEP_BYTES and self._free:
            _, old = self._free.popitem(last=False)
            self._free_bytes -= old.size_in_bytes
            old.release()
