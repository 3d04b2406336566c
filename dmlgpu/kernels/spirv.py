"""The SPIR-V modules that the build put inside the package (dmlgpu/spirv/<variant>.spv)."""
from __future__ import annotations

import functools
from importlib import resources

from ..errors import DeviceError

__all__ = ["load"]


@functools.lru_cache(maxsize=None)
def load(name: str) -> bytes:
    """SPIR-V of one shader variant; a missing module means a broken install, never a fallback."""
    module = resources.files("dmlgpu") / "spirv" / f"{name}.spv"
    try:
        return module.read_bytes()
    except FileNotFoundError:
        raise DeviceError(
            f"shader module {name}.spv is not installed with dmlgpu ({module}); reinstall with "
            "tools/bootstrap.sh setup, whose CMake build compiles the shaders") from None
