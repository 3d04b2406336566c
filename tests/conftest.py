"""Shared fixtures. The suite imports the installed dmlgpu (never the source tree) and says which
Vulkan device it runs on."""
import os

import numpy as np
import pytest

import dmlgpu

POISON = 0xA5  # every output byte starts as this, so unwritten elements show


def pytest_report_header(config):
    try:
        device = dmlgpu.default_device()
        where = f"{device.name} ({device.type}; {device.driver})"
    except dmlgpu.DeviceError as exc:
        where = f"no device: {exc}"
    return [f"dmlgpu {dmlgpu.__version__} from {os.path.dirname(dmlgpu.__file__)}",
            f"dmlgpu device: {where}"]


@pytest.fixture(scope="session")
def device():
    return dmlgpu.default_device()


@pytest.fixture
def rng(request):
    # A different but reproducible stream per test.
    seed = sum(request.node.nodeid.encode()) * 7919 + len(request.node.nodeid)
    return np.random.default_rng(seed)


def poisoned(shape, dtype) -> np.ndarray:
    out = np.empty(shape, dtype=dtype)
    out.reshape(-1).view(np.uint8)[:] = POISON
    return out


def shape_id(shape) -> str:
    return "(" + ",".join(map(str, shape)) + ")"
