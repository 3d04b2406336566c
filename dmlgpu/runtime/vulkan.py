"""The one module that speaks to Kompute (`dmlgpu.runtime._kompute`): devices, memory, pipelines and command buffers.

Everything else in dmlgpu sees only the small objects made here. Kompute 0.9.0 is patched
(third_party/kompute/patches) so that these objects need nothing kp does not offer: storage
tensors without staging that can be copied and filled, recorded region copies, fills and global
barriers, dispatches without kp's own per-tensor barriers, asynchronous submits, a fence poll,
and GPU waits that release the GIL.
"""
from __future__ import annotations

import functools

import numpy as np

from ..errors import DeviceError, DeviceMemoryError
from . import float_controls, probe
from .installation import missing_extension
from .interrupts import raised_meanwhile
from .vulkan_loader import LOADER_ERROR  # opens libvulkan.so.1, which _kompute's Vulkan calls bind to

try:
    from . import _kompute as _kp  # Kompute, compiled into dmlgpu by its build
except ImportError:  # reported when a device is opened, with what to do
    _kp = None

# VkAccessFlagBits and VkPipelineStageFlagBits values used by dmlgpu's barriers.
SHADER_READ, SHADER_WRITE = 0x20, 0x40
TRANSFER_READ, TRANSFER_WRITE = 0x800, 0x1000
HOST_READ = 0x2000
COMPUTE_SHADER, TRANSFER, HOST = 0x800, 0x1000, 0x4000
#: Every device-side access dmlgpu makes: shader and transfer reads and writes.
DEVICE_WRITES = SHADER_WRITE | TRANSFER_WRITE
DEVICE_ACCESS = SHADER_READ | SHADER_WRITE | TRANSFER_READ | TRANSFER_WRITE
DEVICE_STAGES = COMPUTE_SHADER | TRANSFER


def _module():
    if LOADER_ERROR is not None:
        raise DeviceError(LOADER_ERROR)
    if _kp is None:
        raise missing_extension("runtime._kompute", "Kompute, built with dmlgpu")
    return _kp


class Context:
    """One Vulkan device opened through a kp Manager."""

    def __init__(self, index: int):
        kp = _module()
        self.float_controls = probe.float_controls(index)
        try:
            self._manager = kp.Manager(index, [], float_controls.device_extensions(self.float_controls))
        except Exception as exc:  # kp raises plain RuntimeError / vk errors
            raise DeviceError(f"no Vulkan device {index} could be opened: {exc}") from exc

    @staticmethod
    def list_devices() -> list[dict]:
        """Properties of every physical device (opens device 0 to ask, as kp must)."""
        kp = _module()
        try:
            manager = kp.Manager(0)
        except Exception as exc:
            raise DeviceError(f"no Vulkan device could be opened: {exc}") from exc
        try:
            return [dict(d) for d in manager.list_devices()]
        finally:
            manager.destroy()

    def devices(self) -> list[dict]:
        return [dict(d) for d in self._manager.list_devices()]

    def memory(self, nbytes: int, mapped: bool) -> "Memory":
        """Device memory of `nbytes` (a multiple of 16): host-mapped, or device-local only."""
        kp = _kp
        kind = kp.TensorTypes.host if mapped else kp.TensorTypes.storage
        what = f"{nbytes} bytes of {'host-visible' if mapped else 'device'} memory"
        try:
            tensor = self._manager.tensor_empty(nbytes // 4, kind)
        except Exception as exc:  # vkAllocateMemory failed, or the host's malloc (MemoryError)
            raise DeviceMemoryError(f"could not allocate {what}: {exc}") from exc
        try:
            memory = Memory(tensor, nbytes, mapped)
        except Exception as exc:
            tensor.destroy()
            raise DeviceMemoryError(f"could not map {what}: {exc}") from exc
        return memory

    def pipeline(self, spirv: bytes, grid, spec: np.ndarray, push_words: int, memories) -> "Pipeline":
        """A compute pipeline and descriptor set binding `memories` in order (whole buffers)."""
        try:
            algorithm = self._manager.algorithm(
                [m.handle for m in memories], float_controls.preserve_denormals(spirv, self.float_controls),
                list(grid), spec, np.zeros(push_words, np.uint32))
        except Exception as exc:
            raise _failure("creating a compute pipeline", exc) from exc
        return Pipeline(algorithm)

    def pipeline_cache_uuid(self) -> bytes:
        """VkPhysicalDeviceProperties::pipelineCacheUUID of the opened device."""
        return bytes(self._manager.pipeline_cache_uuid())

    def seed_pipeline_cache(self, data: bytes) -> None:
        """Create the VkPipelineCache every later pipeline is made through, from `data` (what
        `pipeline_cache_data` gave earlier; b"": empty). Only before the first pipeline."""
        try:
            self._manager.seed_pipeline_cache(data)
        except Exception as exc:
            raise DeviceError(f"could not create the pipeline cache: {exc}") from exc

    def pipeline_cache_data(self) -> bytes:
        """The pipeline cache's contents (vkGetPipelineCacheData)."""
        return bytes(self._manager.pipeline_cache_data())

    def commands(self, timestamps: int = 0) -> "Commands":
        try:
            return Commands(self._manager.sequence(0, timestamps))
        except Exception as exc:
            raise _failure("creating a command buffer", exc) from exc

    def destroy(self) -> None:
        self._manager.destroy()


def _failure(what: str, exc: Exception) -> Exception:
    """kp's exception for a failed Vulkan call as dmlgpu's: out of host or device memory is
    DeviceMemoryError, anything else DeviceError."""
    text = str(exc)
    if isinstance(exc, MemoryError) or "OutOfDeviceMemory" in text or "OutOfHostMemory" in text \
            or "OUT_OF_" in text or "bad_alloc" in text:
        return DeviceMemoryError(f"{what} ran out of memory: {text or type(exc).__name__}")
    return DeviceError(f"{what} failed: {text or type(exc).__name__}")


#: A wait with no end in view (vkWaitForFences takes nanoseconds as a uint64).
_FOREVER_NS = 1 << 62
#: What a failed mmap returns (MAP_FAILED), as an address.
_MAP_FAILED = (1 << 64) - 1


class Memory:
    """A VkBuffer with its memory; `view` is the host mapping (uint8) when mapped."""

    __slots__ = ("handle", "nbytes", "mapped", "view", "__weakref__")

    def __init__(self, tensor, nbytes: int, mapped: bool):
        self.handle = tensor
        self.nbytes = nbytes
        self.mapped = mapped
        self.view = None
        if mapped:
            view = tensor.data().view(np.uint8)
            address = view.ctypes.data
            if address in (0, _MAP_FAILED) or view.nbytes < nbytes:  # vkMapMemory failed
                raise DeviceMemoryError(f"mapping {nbytes} bytes of device memory failed")
            self.view = view

    def destroy(self) -> None:
        self.view = None
        self.handle.destroy()


class Pipeline:
    """A compute pipeline; `handle` is None once it was destroyed or retired from a cache."""

    __slots__ = ("handle",)

    def __init__(self, algorithm):
        self.handle = algorithm

    def destroy(self) -> None:
        self.handle.destroy()


class Commands:
    """A command buffer with its fence (a kp Sequence): record, submit, poll, wait, reuse.

    The recording methods are kp's own bound methods, so recording costs one call into C++.
    """

    __slots__ = ("_sequence", "dispatch", "copy", "fill", "_barrier", "compute_barrier", "compute_barrier_dispatch",
                 "submit", "done", "_wait_for", "reset", "timestamps")

    def __init__(self, sequence):
        self._sequence = sequence
        self.dispatch = sequence.record_dispatch  # (pipeline.handle, push words)
        self.copy = sequence.record_copy  # (src.handle, dst.handle, src_offset, dst_offset, size)
        self.fill = sequence.record_fill  # (memory.handle, offset, size, value)
        self._barrier = sequence.record_barrier
        # Earlier shader writes -> later shader access: all a chain of dispatches needs, and
        # cheaper on GPUs than a barrier that also waits for transfers (one call into C++).
        self.compute_barrier = functools.partial(sequence.record_barrier, SHADER_WRITE, SHADER_READ | SHADER_WRITE,
                                                 COMPUTE_SHADER, COMPUTE_SHADER)
        # That barrier, then a dispatch (pipeline.handle, push words): a dependent operation's two
        # commands in one call.
        self.compute_barrier_dispatch = functools.partial(sequence.record_barrier_dispatch, SHADER_WRITE,
                                                          SHADER_READ | SHADER_WRITE, COMPUTE_SHADER, COMPUTE_SHADER)
        self.submit = sequence.eval_async
        self.done = sequence.is_done
        self._wait_for = sequence.wait_for  # (timeout ns) -> whether it ended; GIL released
        self.reset = sequence.clear
        self.timestamps = sequence.get_timestamps

    def barrier(self, src_access=DEVICE_WRITES, dst_access=DEVICE_ACCESS,
                src_stages=DEVICE_STAGES, dst_stages=DEVICE_STAGES) -> None:
        """A global memory barrier (by default: earlier device writes -> later device access)."""
        self._barrier(src_access, dst_access, src_stages, dst_stages)

    def host_barrier(self) -> None:
        """Device writes so far -> host reads after the fence."""
        self._barrier(DEVICE_WRITES, HOST_READ, DEVICE_STAGES, HOST)

    def wait(self) -> None:
        """Wait for the submission however long it runs (benchmarks' timing)."""
        while not self.wait_for(_FOREVER_NS):
            pass

    def wait_for(self, timeout_ns: int) -> bool:
        """Wait up to `timeout_ns` for the submission; whether it has ended (a submission that
        has not stays running, to be waited for again). A device failure raises DeviceError."""
        try:
            return self._wait_for(timeout_ns)
        except Exception as exc:
            if raised_meanwhile(exc):  # a signal's handler, as the wait returned: the work runs on
                raise
            raise DeviceError(f"the device failed while running submitted work: {exc}") from exc

    def destroy(self) -> None:
        self._sequence.destroy()
