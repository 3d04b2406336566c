"""dmlgpu's runtime: the only layer that talks to Vulkan (through Kompute, in `vulkan`).

Its interface to the layers above: `Device` (pooled `Buffer`s, `allocate`/`upload`, a stream
of queued work with `synchronize`, `memory_stats`/`empty_cache`, `launch`/`enqueue` of
`Program`s, recorded lists, GPU timing), `devices()` and the current-device context, and
`shader_compiler` (GLSL to SPIR-V at run time, for generated kernels).

It imports nothing from the layers above it (only `dmlgpu.errors`, the version and dmlgpu's
own built extensions).
"""
from . import debug_layer, shader_compiler, threads
from .buffers import Buffer
from .device import Device, open_devices
from .discovery import DEVICE_TYPES, choose_device, current_device, devices
from .launches import Launch, Program
from .limits import CACHE_LIMITS, set_cache_limits
from .probe import physical_device_count
from .spans import Spans

__all__ = ["CACHE_LIMITS", "DEVICE_TYPES", "Buffer", "Device", "Launch", "Program", "Spans", "choose_device", "current_device",
           "debug_layer", "devices", "open_devices", "physical_device_count",
           "set_cache_limits", "shader_compiler", "threads"]
