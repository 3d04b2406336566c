"""Ask the Vulkan loader, through ctypes, whether any physical device exists, and what each
one's float controls are (and whether it has 64-bit float arithmetic).

kp 0.9.0 aborts the whole process (std::terminate) when instance creation finds no driver, so
dmlgpu asks first and raises a DeviceError that says what to install instead. The same instance
reads each device's VK_KHR_shader_float_controls properties (kp asks for none): which float
widths a shader may ask to keep subnormals for (`runtime/float_controls.py`).
"""
from __future__ import annotations

import ctypes
import dataclasses

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


class _ExtensionProperties(ctypes.Structure):
    _fields_ = [("extensionName", ctypes.c_char * 256), ("specVersion", ctypes.c_uint32)]


class _LayerProperties(ctypes.Structure):  # VkLayerProperties
    _fields_ = [("layerName", ctypes.c_char * 256), ("specVersion", ctypes.c_uint32),
                ("implementationVersion", ctypes.c_uint32), ("description", ctypes.c_char * 256)]


class _FloatControlsProperties(ctypes.Structure):  # VkPhysicalDeviceFloatControlsProperties
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p),
                ("denormBehaviorIndependence", ctypes.c_int), ("roundingModeIndependence", ctypes.c_int)] + [
        (f"{name}Float{bits}", ctypes.c_uint32)
        for name in ("shaderSignedZeroInfNanPreserve", "shaderDenormPreserve", "shaderDenormFlushToZero",
                     "shaderRoundingModeRTE", "shaderRoundingModeRTZ")
        for bits in (16, 32, 64)]


class _Features(ctypes.Structure):  # VkPhysicalDeviceFeatures: 55 VkBool32, shaderFloat64 the 40th
    _fields_ = [("flags", ctypes.c_uint32 * 55)]


_SHADER_FLOAT64 = 39


class _Properties2(ctypes.Structure):  # VkPhysicalDeviceProperties2; the properties left as bytes
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("properties", ctypes.c_uint8 * 2048)]


FLOAT_CONTROLS_EXTENSION = "VK_KHR_shader_float_controls"
_PROPERTIES_2 = 1000059001  # VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2
_FLOAT_CONTROLS = 1000197000  # VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES


@dataclasses.dataclass(frozen=True)
class FloatControls:
    """A device's VK_KHR_shader_float_controls: whether it has the extension, the float widths
    whose subnormals a shader can ask it to keep (DenormPreserve), and VkShaderFloatControls-
    Independence for them (0: 32-bit independent of the others; 1: all independent; 2: none)."""
    extension: bool = False
    denorm_preserve: frozenset = frozenset()
    independence: int = 2
    #: VkPhysicalDeviceFeatures.shaderFloat64, which dmlgpu's device enables where it is there
    #: (third_party/kompute/patches/0013): the float sums' double accumulators need it.
    float64: bool = False


#: The devices' float controls once a probe found a device: later probes (every device open)
#: ask no new instance.
_found: tuple | None = None


def _float_controls(vulkan, device) -> FloatControls:
    features = _Features()
    vulkan.vkGetPhysicalDeviceFeatures(device, ctypes.byref(features))
    float64 = bool(features.flags[_SHADER_FLOAT64])
    count = ctypes.c_uint32(0)
    if vulkan.vkEnumerateDeviceExtensionProperties(device, None, ctypes.byref(count), None) != 0:
        return FloatControls(float64=float64)
    listed = (_ExtensionProperties * count.value)()
    if vulkan.vkEnumerateDeviceExtensionProperties(device, None, ctypes.byref(count), listed) != 0:
        return FloatControls(float64=float64)
    if FLOAT_CONTROLS_EXTENSION.encode() not in {e.extensionName for e in listed[:count.value]}:
        return FloatControls(float64=float64)
    controls = _FloatControlsProperties(sType=_FLOAT_CONTROLS)
    properties = _Properties2(sType=_PROPERTIES_2, pNext=ctypes.cast(ctypes.pointer(controls), ctypes.c_void_p))
    vulkan.vkGetPhysicalDeviceProperties2(device, ctypes.byref(properties))
    return FloatControls(True, frozenset(bits for bits in (16, 32, 64)
                                         if getattr(controls, f"shaderDenormPreserveFloat{bits}")),
                         int(controls.denormBehaviorIndependence), float64)


def physical_device_count() -> int:
    """Number of Vulkan physical devices; raises DeviceError when there is no usable loader/driver.

    What a probe found is kept for the process (a driver found stays installed; each probe
    costs a Vulkan instance, tens of milliseconds on some drivers); a failure is asked again."""
    return len(_survey())


def float_controls(index: int) -> FloatControls:
    """Physical device `index`'s float controls (in the loader's order, as kp opens them)."""
    found = _survey()
    return found[index] if 0 <= index < len(found) else FloatControls()


def instance_layers() -> list[str]:
    """Names of the instance layers the Vulkan loader can enable (vkEnumerateInstanceLayerProperties).
    The loader skips a layer named in VK_INSTANCE_LAYERS that is not installed, silently: asking
    here is how a missing one is found."""
    vulkan = _loader()
    count = ctypes.c_uint32(0)
    if vulkan.vkEnumerateInstanceLayerProperties(ctypes.byref(count), None) != 0:
        return []
    listed = (_LayerProperties * count.value)()
    if vulkan.vkEnumerateInstanceLayerProperties(ctypes.byref(count), listed) not in (0, 5):
        return []
    return [listed[i].layerName.decode(errors="replace") for i in range(count.value)]


def _loader():
    try:
        return ctypes.CDLL("libvulkan.so.1")
    except OSError as exc:
        raise DeviceError(f"the Vulkan loader libvulkan.so.1 is missing ({exc}); install libvulkan1") from exc


def _survey() -> tuple:
    global _found
    if _found is not None:
        return _found
    vulkan = _loader()
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
        if result != 0 or count.value == 0:
            raise DeviceError(f"no Vulkan physical device found: {_HINT}")
        devices = (ctypes.c_void_p * count.value)()
        result = vulkan.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), devices)
        if result not in (0, 5):  # VK_SUCCESS, VK_INCOMPLETE
            raise DeviceError(f"vkEnumeratePhysicalDevices failed (VkResult {result}): {_HINT}")
        found = tuple(_float_controls(vulkan, ctypes.c_void_p(devices[i])) for i in range(count.value))
    finally:
        vulkan.vkDestroyInstance(instance, None)
    _found = found
    return found
