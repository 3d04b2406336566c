"""Subnormals kept: every compute module asks the device for SPIR-V's DenormPreserve.

Vulkan leaves a shader's handling of subnormal floats to the driver unless the module asks
(VK_KHR_shader_float_controls); NVIDIA's drivers flush them to zero by default, so a sum of
1e-45 terms, a SIGN of 1e-40 or a TOP_K1 among subnormals would differ from DirectML's IEEE
results and from the reference. Before a module becomes a pipeline, `preserve_denormals` adds
`OpExecutionMode DenormPreserve <width>` for each float width the module declares
(`OpTypeFloat`) and the device can keep, with the capability and extension that mode needs.
Where the device cannot (no extension, or the width not supported) the module is left as it
is and the driver's default holds; `Device.properties["denorm_preserve"]` says which widths
are kept (docs/guide/reductions.md, "Subnormals").

The modules are built for SPIR-V 1.3 (`vulkan1.1`), where float controls is an extension; the
change is made on the words, so the shipped modules, the kernels compiled at run time and the
disk cache's entries stay the same bytes for every device.
"""
from __future__ import annotations

import functools
import struct

from .probe import FLOAT_CONTROLS_EXTENSION, FloatControls

_OP_EXTENSION = 10
_OP_EXT_INST_IMPORT = 11
_OP_MEMORY_MODEL = 14
_OP_ENTRY_POINT = 15
_OP_EXECUTION_MODE = 16
_OP_CAPABILITY = 17
_OP_TYPE_FLOAT = 22
_OP_FUNCTION = 54  # the types are all declared before the first function
_DENORM_PRESERVE = 4459  # the execution mode
_DENORM_PRESERVE_CAPABILITY = 4464
_SPV_EXTENSION = "SPV_KHR_float_controls"
_MAGIC = 0x07230203


def _instruction(opcode: int, operands: list[int]) -> list[int]:
    return [(len(operands) + 1) << 16 | opcode, *operands]


def _string(text: str) -> list[int]:
    data = text.encode() + b"\0"
    data += b"\0" * (-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def device_extensions(controls: FloatControls) -> list[str]:
    """The device extensions a Vulkan device must be opened with for the modules' float controls."""
    return [FLOAT_CONTROLS_EXTENSION] if controls.extension and controls.denorm_preserve else []


def widths_kept(module_widths: set, controls: FloatControls) -> list[int]:
    """Of the float widths a module declares, those whose subnormals it can ask to keep. Where
    the device ties widths together (VkShaderFloatControlsIndependence), all of a tied group
    are asked for or none."""
    if not controls.extension:
        return []
    supported = controls.denorm_preserve
    if controls.independence == 2:  # NONE: every width of the module alike
        groups = [set(module_widths)]
    elif controls.independence == 0:  # 32_BIT_ONLY: 32 alone, 16 and 64 alike
        groups = [module_widths & {32}, module_widths & {16, 64}]
    else:
        groups = [{w} for w in module_widths]
    return sorted(w for group in groups if group and group <= supported for w in group)


def preserve_denormals(spirv: bytes, controls: FloatControls) -> bytes:
    """`spirv` with DenormPreserve asked for each of its float widths the device can keep (see
    the module's docstring); the same bytes where there is none to ask for (a device that keeps
    none: at once, nothing held)."""
    if not controls.extension or not controls.denorm_preserve:
        return spirv
    return _rewritten(spirv, controls)


@functools.lru_cache(maxsize=512)
def _rewritten(spirv: bytes, controls: FloatControls) -> bytes:
    if len(spirv) < 20 or len(spirv) % 4:
        return spirv
    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    if words[0] != _MAGIC:
        return spirv
    widths, entry_points = set(), []
    capabilities_end = extensions_end = modes_end = None
    has_capability = has_extension = False
    preserved = set()
    position = 5
    while position < len(words):
        count, opcode = words[position] >> 16, words[position] & 0xFFFF
        if count == 0:
            return spirv  # malformed: left for the driver's own checks
        operands = words[position + 1:position + count]
        end = position + count
        if opcode == _OP_CAPABILITY:
            capabilities_end = end
            has_capability |= operands[0] == _DENORM_PRESERVE_CAPABILITY
        elif opcode in (_OP_EXTENSION, _OP_EXT_INST_IMPORT, _OP_MEMORY_MODEL):
            if opcode == _OP_EXTENSION:
                extensions_end = end
                has_extension |= operands == _string(_SPV_EXTENSION)
        elif opcode == _OP_ENTRY_POINT:
            entry_points.append(operands[1])
            modes_end = end
        elif opcode == _OP_EXECUTION_MODE:
            modes_end = end
            if operands[1] == _DENORM_PRESERVE:
                preserved.add(operands[2])
        elif opcode == _OP_TYPE_FLOAT:
            widths.add(operands[1])
        elif opcode == _OP_FUNCTION:
            break
        position = end
    kept = [w for w in widths_kept(widths, controls) if w not in preserved]
    if not kept or capabilities_end is None or modes_end is None:
        return spirv
    # inserted from the back, so that the earlier positions stay right
    modes = [w for width in kept for entry in entry_points
             for w in _instruction(_OP_EXECUTION_MODE, [entry, _DENORM_PRESERVE, width])]
    words[modes_end:modes_end] = modes
    if not has_extension:
        at = extensions_end if extensions_end is not None else capabilities_end
        words[at:at] = _instruction(_OP_EXTENSION, _string(_SPV_EXTENSION))
    if not has_capability:
        words[capabilities_end:capabilities_end] = _instruction(_OP_CAPABILITY, [_DENORM_PRESERVE_CAPABILITY])
    return struct.pack(f"<{len(words)}I", *words)
