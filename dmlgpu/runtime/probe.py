"""Ask the Vulkan loader, through ctypes, whether any physical device exists.

kp 0.9.0 aborts the whole process (std::terminate) when instance creation finds no driver, so
dmlgpu asks first and raises a DeviceError that says what to install instead.
"""
from __future__ import annotations

import ctypes

from ..errors import DeviceError

_HINT = ("install a Vulkan driver (mesa-vulkan-drivers gives lavapipe on the CPU), or point the "
         "loader at one with VK_DRIVER_FILES; VK_LOADER_DEBUG=driver shows what the loader tried")


class _ApplicationInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p),
                ("pApplicationName", ctypes.c_char_p), ("applicationVersion", ctypes.c_uint32),
                ("pEngineName", ctypes.c_char_p), ("engineVersion", ctypes.c_uint32),
                ("apiVersion", ctypes.c_uint32)]


class _InstanceCreateInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                ("pApplicationInfo", ctypes.POINTER(_ApplicationInfo)),
                ("enabledLayerCount", ctypes.c_uint32), ("ppEnabledLayerNames", ctypes.c_void_p),
                ("enabledExtensionCount", ctypes.c_uint32), ("ppEnabledExtensionNames", ctypes.c_void_p)]


#: The count once a probe found a device: later probes (every device open) ask no new instance.
_found: int | None = None


def physical_device_count() -> int:
    """Number of Vulkan physical devices; raises DeviceError when there is no usable loader/driver.

    A count found once is kept for the process (a driver found stays installed; each probe
    costs a Vulkan instance, tens of milliseconds on some drivers); a failure is asked again."""
    global _found
    if _found is not None:
        return _found
    try:
        vulkan = ctypes.CDLL("libvulkan.so.1")
    except OSError as exc:
        raise DeviceError(f"the Vulkan loader libvulkan.so.1 is missing ({exc}); install libvulkan1") from exc
    app = _ApplicationInfo(0, None, b"dmlgpu", 1, b"dmlgpu", 1, (1 << 22) | (1 << 12))  # Vulkan 1.1
    info = _InstanceCreateInfo(1, None, 0, ctypes.pointer(app), 0, None, 0, None)
    instance = ctypes.c_void_p()
    result = vulkan.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance))
    if result == -6:  # VK_ERROR_LAYER_NOT_PRESENT
        raise DeviceError("DMLGPU_VALIDATION asks for the Khronos validation layer, which is not "
                          "installed (Debian: vulkan-validationlayers)")
    if result != 0:
        raise DeviceError(f"vkCreateInstance failed (VkResult {result}): {_HINT}")
    try:
        count = ctypes.c_uint32(0)
        result = vulkan.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
    finally:
        vulkan.vkDestroyInstance(instance, None)
    if result != 0 or count.value == 0:
        raise DeviceError(f"no Vulkan physical device found: {_HINT}")
    _found = count.value
    return count.value
