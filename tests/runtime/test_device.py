"""Device choice and installation: the default device, DMLGPU_DEVICE, a missing driver (an error,
never a crash), and an installed package that carries every shader variant it can select."""
import os
import subprocess
import sys
from importlib import resources

import pytest

import dmlgpu
from dmlgpu.kernels import variants as kernels
from dmlgpu.runtime import choose_device


def run_python(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/",
                          env={**os.environ, **env}, timeout=120)


def test_default_device_prefers_a_gpu(monkeypatch):
    monkeypatch.delenv("DMLGPU_DEVICE", raising=False)
    devices = [{"device_name": "llvmpipe", "device_type": 4}, {"device_name": "iGPU", "device_type": 1},
               {"device_name": "dGPU", "device_type": 2}]
    assert choose_device(devices) == 2
    assert choose_device(devices[:2]) == 1
    assert choose_device(devices[:1]) == 0
    monkeypatch.setenv("DMLGPU_DEVICE", "0")
    assert choose_device(devices) == 0
    monkeypatch.setenv("DMLGPU_DEVICE", "3")
    with pytest.raises(dmlgpu.DeviceError, match="names no device; there are 3: llvmpipe, iGPU, dGPU"):
        choose_device(devices)


COUNT_CONTEXTS = """
import dmlgpu
from dmlgpu.runtime import vulkan
made = []
init, listed = vulkan.Context.__init__, vulkan.Context.list_devices
def counted(self, index):
    made.append(index)
    init(self, index)
vulkan.Context.__init__ = counted
vulkan.Context.list_devices = staticmethod(lambda: made.append("list") or listed())
device = dmlgpu.default_device()
assert dmlgpu.Device() is device and dmlgpu.Device(device.index) is device and dmlgpu.default_device() is device
print("contexts", device.index, made)
"""


@pytest.mark.parametrize("override", [None, "0"])
def test_the_first_default_device_opens_one_context(override):
    """The default device is chosen from the device list of its own context as it opens: no
    other Vulkan context is opened just to list the devices first (each costs the driver's
    start-up), and `Device()`, `Device(index)` and `default_device()` give that one device."""
    env = {} if override is None else {"DMLGPU_DEVICE": override}
    result = run_python(COUNT_CONTEXTS, **env)
    assert result.returncode == 0, result.stderr
    index, made = result.stdout.split(" ", 2)[1:]
    assert made.strip() in ("[0]", f"[0, {index}]"), result.stdout


def test_device_reports_itself(device):
    assert device.name and device.type in ("CPU", "discrete GPU", "integrated GPU", "virtual GPU", "other")
    assert "Vulkan" in device.driver and device.max_buffer_size >= 1 << 20
    with pytest.raises(dmlgpu.DeviceError, match="out of range"):
        dmlgpu.Device(99)


def test_missing_driver_is_an_error_not_a_crash():
    result = run_python(
        "import dmlgpu\n"
        "try:\n    dmlgpu.Device()\nexcept dmlgpu.DeviceError as e:\n    print('DeviceError', e)\n",
        VK_DRIVER_FILES="/nonexistent/icd.json", VK_ICD_FILENAMES="/nonexistent/icd.json")
    assert result.returncode == 0, result.stderr
    assert "DeviceError" in result.stdout and "VK_DRIVER_FILES" in result.stdout


def test_installed_package_runs_from_any_directory():
    # Installed from a wheel, or editable (pip install -e: Python from the tree, SPIR-V and
    # dmlgpu.runtime._kompute from the build), never the bare source tree, which has neither.
    result = run_python("import dmlgpu, numpy as np; print(dmlgpu.bit_not(np.array([1, 2], np.uint8)).tolist())")
    assert result.returncode == 0, result.stderr
    assert "[254, 253]" in result.stdout


def test_every_variant_is_installed_and_only_those():
    installed = {p.name[:-4] for p in (resources.files("dmlgpu") / "spirv").iterdir() if p.name.endswith(".spv")}
    assert installed == set(kernels.module_names())
