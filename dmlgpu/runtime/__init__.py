"""dmlgpu's runtime: the only layer that talks to Vulkan (through Kompute, in `vulkan`).

Its interface to the layers above: `Device` (pooled `Buffer`s, `allocate`/`upload`, a stream
of queued work with `synchronize`, `memory_stats`/`empty_cache`, `launch`/`enqueue` of
`Program`s, recorded lists, GPU timing), `devices()` and the current-device context.
"""
from .device import (
    CACHE_LIMITS,
    DEVICE_TYPES,
    Buffer,
    Device,
    Launch,
    Program,
    choose_device,
    current_device,
    devices,
    open_devices,
    set_cache_limits,
)
from . import debug_layer
from .probe import physical_device_count

__all__ = ["CACHE_LIMITS", "DEVICE_TYPES", "Buffer", "Device", "Launch", "Program", "choose_device", "current_device",
           "debug_layer", "devices", "open_devices", "physical_device_count",
           "set_cache_limits"]
