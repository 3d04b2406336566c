"""DMLGPU_VALIDATION=1: run every device dmlgpu opens under the Khronos validation layer,
with its synchronization validation (missing or wrong barriers between queued work).

The layer's messages (errors and warnings) go to a log file, DMLGPU_VALIDATION_LOG (default:
`dmlgpu-validation-<pid>.log` in the temp folder), where the test suite looks after every test;
kp is built without its own debug callback, which would swallow them. Set before the first
Vulkan instance of the process, so the first Device does it.
"""
from __future__ import annotations

import os
import tempfile

from ..errors import DeviceError
from . import probe

_SETTINGS = """khronos_validation.debug_action = VK_DBG_LAYER_ACTION_LOG_MSG
khronos_validation.report_flags = error,warn
khronos_validation.log_filename = {log}
khronos_validation.enables = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT
"""
LAYER = "VK_LAYER_KHRONOS_validation"
_configured = False


def requested() -> bool:
    return os.environ.get("DMLGPU_VALIDATION", "").lower() in ("1", "true", "yes", "on")


def configure() -> str | None:
    """Enable the layer for this process if DMLGPU_VALIDATION asks; returns the log's path.

    Raises:
        DeviceError: DMLGPU_VALIDATION asks and the loader has no such layer (it would run the
            process without validation, saying nothing).
    """
    global _configured
    if not requested():
        return None
    if not _configured and LAYER not in probe.instance_layers():
        raise DeviceError(f"DMLGPU_VALIDATION asks for the Khronos validation layer ({LAYER}), which the "
                          "Vulkan loader does not list: install it (Debian: vulkan-validationlayers; or point "
                          "VK_ADD_LAYER_PATH at its manifest), or unset DMLGPU_VALIDATION")
    log = os.environ.setdefault(
        "DMLGPU_VALIDATION_LOG", os.path.join(tempfile.gettempdir(), f"dmlgpu-validation-{os.getpid()}.log"))
    if not _configured:
        settings = tempfile.mkdtemp(prefix="dmlgpu-vvl-")
        with open(os.path.join(settings, "vk_layer_settings.txt"), "w") as f:
            f.write(_SETTINGS.format(log=os.path.abspath(log)))
        os.environ["VK_LAYER_SETTINGS_PATH"] = settings
        layers = [name for name in os.environ.get("VK_INSTANCE_LAYERS", "").split(":") if name]
        if LAYER not in layers:
            os.environ["VK_INSTANCE_LAYERS"] = ":".join(layers + [LAYER])
        _configured = True
    return log
