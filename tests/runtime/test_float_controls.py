"""Subnormals kept (dmlgpu/runtime/float_controls.py): every module with float types asks for
DenormPreserve where the device can keep them, as valid SPIR-V, and nothing else changes.

lavapipe keeps subnormals without being asked and reports no DenormPreserve, so the modules it
runs are unchanged; these tests check the words the rewrite makes for a device that can (an
NVIDIA GPU, which flushes them unless asked), and spirv-val checks every shipped module so
rewritten. The float reductions' subnormal cases (tests/kernels) are what a GPU run checks."""
from __future__ import annotations

import shutil
import struct
import subprocess

import pytest

from dmlgpu.kernels import spirv, variants
from dmlgpu.runtime import float_controls
from dmlgpu.runtime.probe import FloatControls

EVERY_WIDTH = FloatControls(True, frozenset({16, 32, 64}), 1)
DENORM_PRESERVE, CAPABILITY = 4459, 4464


def instructions(data: bytes) -> list[tuple[int, list[int]]]:
    words = struct.unpack(f"<{len(data) // 4}I", data)
    found, at = [], 5
    while at < len(words):
        count = words[at] >> 16
        found.append((words[at] & 0xFFFF, list(words[at + 1:at + count])))
        at += count
    return found


def float_widths(data: bytes) -> set:
    return {operands[1] for opcode, operands in instructions(data) if opcode == 22}


def modes(data: bytes) -> list[tuple[int, int]]:
    return [(operands[0], operands[2]) for opcode, operands in instructions(data)
            if opcode == 16 and operands[1] == DENORM_PRESERVE]


SHIPPED = [m.name for m in variants.modules()]
WITH_FLOATS = [name for name in SHIPPED if float_widths(spirv.load(name))]


def test_the_float_kernels_are_there():
    # the reductions, SIGN, IS_NAN and TOP_K1 on floats; a rename must not empty the list
    assert len(WITH_FLOATS) >= 20 and any(name.startswith("reduce") for name in WITH_FLOATS)


@pytest.mark.parametrize("name", WITH_FLOATS)
def test_each_float_module_asks_for_each_of_its_widths_once(name):
    data = spirv.load(name)
    patched = float_controls.preserve_denormals(data, EVERY_WIDTH)
    found = instructions(patched)
    entry_points = [operands[1] for opcode, operands in found if opcode == 15]
    assert sorted(modes(patched)) == sorted((e, w) for e in entry_points for w in float_widths(data))
    assert [operands for opcode, operands in found if opcode == 17].count([CAPABILITY]) == 1
    assert sum(1 for opcode, _ in found if opcode == 10) == 1 + sum(1 for opcode, _ in instructions(data) if opcode == 10)
    # the layout SPIR-V requires: capabilities, extensions, imports, memory model, entry points, modes
    order = [opcode for opcode, _ in found]
    first = {op: order.index(op) for op in (17, 10, 14, 15, 16)}
    last = {op: len(order) - 1 - order[::-1].index(op) for op in (17, 10, 15, 16)}
    assert last[17] < first[10] <= last[10] < first[14] < first[15] <= last[15] < first[16]
    assert float_controls.preserve_denormals(patched, EVERY_WIDTH) == patched  # asked once


@pytest.mark.skipif(shutil.which("spirv-val") is None, reason="spirv-val (spirv-tools) is not installed")
def test_every_rewritten_module_is_valid_spirv(tmp_path):
    bad = []
    for name in WITH_FLOATS:
        path = tmp_path / f"{name}.spv"
        path.write_bytes(float_controls.preserve_denormals(spirv.load(name), EVERY_WIDTH))
        result = subprocess.run(["spirv-val", "--target-env", "vulkan1.1", str(path)], capture_output=True, text=True)
        if result.returncode:
            bad.append((name, result.stderr[:300]))
    assert not bad


def test_modules_without_floats_and_devices_that_cannot_are_left_alone():
    without = next(name for name in SHIPPED if not float_widths(spirv.load(name)))
    assert float_controls.preserve_denormals(spirv.load(without), EVERY_WIDTH) == spirv.load(without)
    data = spirv.load(WITH_FLOATS[0])
    for controls in (FloatControls(), FloatControls(False, frozenset({32}), 1), FloatControls(True, frozenset(), 1)):
        assert float_controls.preserve_denormals(data, controls) == data
        assert float_controls.device_extensions(controls) == []
    assert float_controls.device_extensions(FloatControls(True, frozenset({32}), 1)) == ["VK_KHR_shader_float_controls"]


@pytest.mark.parametrize("independence, supported, module, kept", [
    (1, {16, 32, 64}, {32, 64}, [32, 64]),  # ALL: each width on its own
    (1, {32}, {32, 64}, [32]),
    (0, {32}, {32, 64}, [32]),  # 32_BIT_ONLY: 32 alone; 16 and 64 together
    (0, {32, 64}, {16, 32, 64}, [32]),
    (0, {16, 32, 64}, {16, 32, 64}, [16, 32, 64]),
    (2, {32}, {32, 64}, []),  # NONE: every width of the module alike, or none
    (2, {32, 64}, {32, 64}, [32, 64]),
    (2, {32}, {32}, [32]),
])
def test_widths_tied_together_are_asked_for_together(independence, supported, module, kept):
    assert float_controls.widths_kept(set(module), FloatControls(True, frozenset(supported), independence)) == kept


def test_the_device_says_which_widths_it_keeps(device):
    kept = device.properties["denorm_preserve"]
    assert isinstance(kept, tuple) and set(kept) <= {16, 32, 64}
