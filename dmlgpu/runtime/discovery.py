"""Which Vulkan devices there are, which one is the default, and the calling thread's current one."""
from __future__ import annotations

import os
import threading

from ..errors import DeviceError
from . import debug_layer, vulkan
from .probe import physical_device_count

#: VkPhysicalDeviceType, and the order in which the default device is chosen.
DEVICE_TYPES = {0: "other", 1: "integrated GPU", 2: "discrete GPU", 3: "virtual GPU", 4: "CPU"}
_PREFERENCE = (2, 1, 3, 0, 4)
_CURRENT = threading.local()


def devices() -> list[dict]:
    """Every Vulkan device: index, name, type, memory (heap bytes, if reported), buffer limit."""
    debug_layer.configure()
    physical_device_count()
    found = vulkan.Context.list_devices()
    return [{"index": i, "name": d["device_name"], "type": DEVICE_TYPES.get(d["device_type"], "unknown"),
             "max_buffer_bytes": int(d["max_storage_buffer_range"]) // 16 * 16,
             "default": i == choose_device(found)} for i, d in enumerate(found)]


def choose_device(found: list[dict]) -> int:
    """Index of the default device: DMLGPU_DEVICE if set, else a GPU before a CPU driver."""
    override = os.environ.get("DMLGPU_DEVICE")
    if override is not None:
        if not override.strip().isdigit() or int(override) >= len(found):
            raise DeviceError(f"DMLGPU_DEVICE={override!r} names no device; there are "
                              f"{len(found)}: {', '.join(d['device_name'] for d in found)}")
        return int(override)
    return min(range(len(found)), key=lambda i: (_PREFERENCE.index(found[i]["device_type"]), i))


def current_device():
    """The device made current for this thread by `with device:`, or None."""
    stack = getattr(_CURRENT, "stack", None)
    return stack[-1] if stack else None


def push_current(device) -> None:
    """Make `device` the calling thread's current device (`Device.__enter__`)."""
    stack = getattr(_CURRENT, "stack", None)
    if stack is None:
        stack = _CURRENT.stack = []
    stack.append(device)


def pop_current() -> None:
    """Make the previous device current again (`Device.__exit__`)."""
    _CURRENT.stack.pop()
