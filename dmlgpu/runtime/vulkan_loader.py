"""The Vulkan loader, `libvulkan.so.1`, opened for `dmlgpu.runtime._kompute` before it is imported.

The extension module does not name the loader as a library it needs: its Vulkan calls bind to the
loader opened here into the process' global scope, as the dynamic linker would have bound them.
So the wheel asks nothing of the system but glibc (auditwheel, which follows needed libraries,
would otherwise hold the wheel to the glibc of the loader it was linked against), and a system
without a loader gets a message saying what to install instead of an import error naming a file.
"""
from __future__ import annotations

import ctypes
import os

__all__ = ["LOADER_ERROR", "SONAME", "open_loader"]

#: The loader's name, as every Linux distribution installs it.
SONAME = "libvulkan.so.1"
#: The package that installs it, by package manager.
PACKAGES = {"apt-get": "libvulkan1", "dnf": "vulkan-loader", "pacman": "vulkan-icd-loader",
            "zypper": "libvulkan1"}


def open_loader(soname: str = SONAME) -> str | None:
    """Opens `soname` into the global scope; None, or why it could not be opened (what to install)."""
    try:
        ctypes.CDLL(soname, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    except OSError as error:
        install = ", ".join(f"{manager} install {package}" for manager, package in PACKAGES.items())
        return (f"the Vulkan loader ({soname}) could not be opened: {error}. Install your system's Vulkan "
                f"loader ({install}) and a Vulkan driver (Mesa's lavapipe runs on the CPU)")
    return None


#: None once the loader is open; otherwise the message that opening a device raises.
LOADER_ERROR = open_loader()
