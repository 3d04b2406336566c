"""Vulkan devices through Kompute: device choice, buffers, and the caches that keep kp fast.

Kompute objects are expensive to make (a tensor is one or two `vkAllocateMemory`, an Algorithm a
pipeline plus a descriptor set bound to fixed tensors, a Sequence a command pool), so a Device
keeps every Algorithm and recorded Sequence it makes in small LRU caches, keyed by what they were
made from, and reuses them. Everything device-side runs under one lock: a kp Sequence cannot be
submitted twice at once, and Python threads may share a Device.
"""
from __future__ import annotations

import atexit
import itertools
import math
import os
import threading
import weakref
from collections import OrderedDict

import numpy as np

from . import barriers, debug_layer, kernels
from .errors import DeviceError, DeviceMemoryError, ValidationError
from .validation import is_int, resolve_feature_level
from .vulkan_probe import physical_device_count

#: VkPhysicalDeviceType, and the order in which the default device is chosen.
DEVICE_TYPES = {0: "other", 1: "integrated GPU", 2: "discrete GPU", 3: "virtual GPU", 4: "CPU"}
_PREFERENCE = (2, 1, 3, 0, 4)
WORKGROUP_SIZE = 256
#: Grids are a power of two of workgroups, at most this many; invocations stride over the rest.
MAX_GROUPS = 1 << 16
_CACHE_SIZE = 512
_SERIALS = itertools.count(1)


def _kp():
    try:
        from . import _kompute as kp
    except ImportError as exc:
        raise DeviceError("dmlgpu._kompute (Kompute, built with dmlgpu) is missing: reinstall dmlgpu "
                          "with pip install . or tools/bootstrap.sh setup") from exc
    return kp


def _manager(kp, index: int):
    try:
        return kp.Manager(index)
    except Exception as exc:  # kp raises plain RuntimeError / vk errors
        raise DeviceError(f"no Vulkan device {index} could be opened: {exc}") from exc


def choose_device(devices: list[dict]) -> int:
    """Index of the default device: DMLGPU_DEVICE if set, else a GPU before a CPU driver."""
    override = os.environ.get("DMLGPU_DEVICE")
    if override is not None:
        if not override.strip().isdigit() or int(override) >= len(devices):
            raise DeviceError(f"DMLGPU_DEVICE={override!r} names no device; there are "
                              f"{len(devices)}: {', '.join(d['device_name'] for d in devices)}")
        return int(override)
    return min(range(len(devices)), key=lambda i: (_PREFERENCE.index(devices[i]["device_type"]), i))


class _LRU(OrderedDict):
    """Least-recently-used cache whose evicted values are destroyed (kp objects)."""

    def __init__(self, size: int, on_evict=None):
        super().__init__()
        self.size = size
        self.on_evict = on_evict

    def get_or_make(self, key, make):
        if key in self:
            self.move_to_end(key)
            return self[key]
        value = self[key] = make()
        while len(self) > self.size:
            old_key, old = self.popitem(last=False)
            self._destroy(old_key, old)
        return value

    def drop_if(self, predicate):
        for key in [k for k in self if predicate(k)]:
            self._destroy(key, self.pop(key))

    def _destroy(self, key, value):
        if self.on_evict:
            self.on_evict(key)
        value.destroy()


class Device:
    """A Vulkan device with Kompute (DirectML's IDMLDevice, in spirit).

    Args:
        index: Vulkan physical-device index; None picks DMLGPU_DEVICE, else the first GPU,
            else a CPU implementation such as lavapipe.
    """

    def __init__(self, index: int | None = None):
        kp = _kp()
        debug_layer.configure()  # DMLGPU_VALIDATION=1: before the process's first instance
        physical_device_count()  # kp aborts the process when there is no driver: ask first
        self._kp = kp
        manager = _manager(kp, 0)
        devices = manager.list_devices()
        if index is None:
            index = choose_device(devices)
        elif not is_int(index) or not 0 <= index < len(devices):
            manager.destroy()
            raise DeviceError(f"device index {index!r} is out of range; there are {len(devices)}")
        if index != 0:
            manager.destroy()
            manager = _manager(kp, index)
        self._manager = manager
        self.index = int(index)
        self.properties = dict(devices[index])
        self.name = self.properties["device_name"]
        self.type = DEVICE_TYPES.get(self.properties["device_type"], "unknown")
        self.max_buffer_size = int(self.properties["max_storage_buffer_range"]) // 16 * 16
        self._lock = threading.RLock()
        self._sequences = _LRU(_CACHE_SIZE)
        # A recorded Sequence refers to its Algorithm: evicting one drops the other.
        self._algorithms = _LRU(_CACHE_SIZE, on_evict=lambda key: self._sequences.drop_if(
            lambda seq_key: seq_key[0] == key))
        self._operators: OrderedDict = OrderedDict()
        self._utility = manager.sequence()
        self._buffers: weakref.WeakSet = weakref.WeakSet()
        self._scratch = None  # the numpy front end's ScratchPool
        self.closed = False
        _DEVICES.add(self)

    def __repr__(self):
        return f"<dmlgpu.Device {self.index}: {self.name} ({self.type})>"

    @property
    def live_buffers(self) -> int:
        """Device buffers allocated and not yet released."""
        return len(self._buffers)

    def close(self) -> None:
        """Release every buffer, cached pipeline and command buffer, then the Vulkan device.

        Done for every open device at interpreter exit; buffers, operators and command lists of
        a closed device raise ValidationError when used.
        """
        with self._lock:
            if self.closed:
                return
            for buffer in list(self._buffers):
                buffer.release()
            self._sequences.drop_if(lambda key: True)
            self._algorithms.drop_if(lambda key: True)
            self._operators.clear()
            self._utility.destroy()
            self.closed = True
            self._manager.destroy()

    @property
    def is_cpu(self) -> bool:
        return self.type == "CPU"

    @property
    def driver(self) -> str:
        """Vulkan API version and the driver's version number, for reports."""
        api = self.properties["api_version"]
        return (f"Vulkan {api >> 22}.{(api >> 12) & 0x3FF}.{api & 0xFFF}, "
                f"driver 0x{self.properties['driver_version']:08x}")

    # -- buffers ---------------------------------------------------------------------------
    def allocate(self, size_in_bytes: int) -> "Buffer":
        """A zero-filled device buffer of `size_in_bytes` bytes."""
        if self.closed:
            raise ValidationError("dmlgpu", None, "device", "closed", "allowed: an open Device")
        if not is_int(size_in_bytes) or not 1 <= size_in_bytes <= self.max_buffer_size:
            raise ValidationError("dmlgpu", None, "size_in_bytes", size_in_bytes,
                                  f"allowed: 1 to {self.max_buffer_size} bytes (the device's "
                                  "maxStorageBufferRange)")
        return Buffer(self, int(size_in_bytes))

    def upload(self, array) -> "Buffer":
        """A device buffer holding a copy of `array`'s bytes (C order).

        Its size is rounded up to a multiple of 4, as DirectML requires of bound buffers, so a
        tensor's data uploaded this way can be bound as that tensor.
        """
        data = _as_bytes(array)
        buffer = self.allocate(max(4, -(-data.size // 4) * 4))
        buffer.write(data)
        return buffer

    # -- operators -------------------------------------------------------------------------
    def create_operator(self, operator_desc, feature_level=None) -> "CompiledOperator":
        """Validate `operator_desc` at `feature_level` and compile it for this device.

        Returns a `CompiledOperator` that can be executed any number of times with different
        bindings. Raises `ValidationError` for a descriptor DirectML would reject.
        """
        from .compiled import CompiledOperator

        level = resolve_feature_level(feature_level, getattr(
            getattr(operator_desc, "OPERATOR", None), "dml_name", "dmlgpu"))
        # repr, not equality: 64.0 == 64 and True == 1, but only ints are valid sizes.
        key = (_strict_repr(operator_desc), level)
        with self._lock:
            compiled = self._operators.get(key)
            if compiled is None:
                compiled = CompiledOperator(self, operator_desc, level)
                self._operators[key] = compiled
                while len(self._operators) > _CACHE_SIZE:
                    self._operators.popitem(last=False)
            else:
                self._operators.move_to_end(key)
            return compiled

    # -- internals used by Buffer and CompiledOperator -------------------------------------
    def _grid(self, units: int) -> tuple[int, int, int]:
        """A power-of-two grid of workgroups that covers `units` in at most two strides."""
        needed = max(1, math.ceil(units / WORKGROUP_SIZE))
        groups = min(1 << (needed.bit_length() - 1), MAX_GROUPS)
        x = min(groups, 1 << 15)
        return (x, groups // x, 1)

    def _algorithm(self, variant_name, spirv, spec, units, tensors):
        """(cache key, kp Algorithm) for a shader variant bound to these kp tensors."""
        grid = self._grid(units)
        key = (variant_name, spec.tobytes(), grid, tuple(id(t) for t in tensors))
        push = np.zeros(len(kernels.PUSH_FIELDS), np.uint32)
        algorithm = self._algorithms.get_or_make(
            key, lambda: self._manager.algorithm(list(tensors), spirv, grid, spec, push))
        return key, algorithm

    def _dispatch(self, algo_key, algorithm, push, upload=(), download=()):
        """Run one dispatch, with optional staging uploads before and downloads after it."""
        seq_key = (algo_key, push.tobytes(), tuple(id(t) for t in upload),
                   tuple(id(t) for t in download))

        def record():
            sequence = self._manager.sequence()
            if upload:
                sequence.record(self._kp.OpTensorSyncDevice(list(upload)))
            sequence.record(barriers.between_submissions(self._kp, algorithm.get_tensors()))
            sequence.record(self._kp.OpAlgoDispatch(algorithm, push))
            if download:
                sequence.record(self._kp.OpTensorSyncLocal(list(download)))
            return sequence

        self._sequences.get_or_make(seq_key, record).eval()
        return seq_key

    def _sync(self, op_class, tensor):
        self._utility.eval(op_class([tensor]))

    def _forget(self, tensor):
        """Destroy every cached Algorithm and Sequence that uses `tensor`."""
        tid = id(tensor)
        self._sequences.drop_if(lambda key: tid in key[0][3] or tid in key[2] or tid in key[3])
        self._algorithms.drop_if(lambda key: tid in key[3])


def _strict_repr(value) -> str:
    try:
        return f"{type(value).__qualname__}:{value!r}"
    except ValueError:  # an int too long to print: never a valid field, never cached twice
        return f"unprintable:{id(value)}"


def _as_bytes(array) -> np.ndarray:
    if not isinstance(array, (np.ndarray, bytes, bytearray, memoryview)):
        raise ValidationError("dmlgpu", None, "array", type(array).__name__,
                              "allowed: a numpy array or a bytes-like object")
    if isinstance(array, np.ndarray):
        return np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    return np.frombuffer(array, dtype=np.uint8)


class Buffer:
    """Device memory (DirectML binds ID3D12Resource buffers; this is its Vulkan stand-in).

    Backed by one kp device tensor of 32-bit words, padded to 16 bytes, with its host staging
    copy. Reads and writes go through the staging copy; the buffer remembers which side is
    current so that a read after a GPU write downloads once and a write never loses GPU data.
    """

    def __init__(self, device: Device, size_in_bytes: int):
        self.device = device
        self.size_in_bytes = size_in_bytes
        self.serial = next(_SERIALS)  # never reused, unlike id(): keys caches of bound ranges
        words = math.ceil(size_in_bytes / 16) * 4
        with device._lock:
            try:
                self._tensor = device._manager.tensor_t(np.zeros(words, dtype=np.uint32))
            except Exception as exc:
                raise DeviceMemoryError(
                    f"{device.name} could not allocate {size_in_bytes} bytes: {exc}") from exc
            device._sync(device._kp.OpTensorSyncDevice, self._tensor)
            device._buffers.add(self)
        self._host_current = True

    def __repr__(self):
        state = "released" if self.released else f"{self.size_in_bytes} bytes"
        return f"<dmlgpu.Buffer {state} on {self.device.name}>"

    @property
    def released(self) -> bool:
        return self._tensor is None or self.device.closed

    def _check_range(self, offset, size, what):
        if self.released or self.device.closed:
            raise ValidationError("dmlgpu", None, "buffer", "released buffer", "allowed: a live Buffer")
        if not is_int(offset) or not is_int(size) or offset < 0 or size < 0 \
                or offset + size > self.size_in_bytes:
            raise ValidationError("dmlgpu", None, what, (offset, size),
                                  f"allowed: a range inside the buffer's {self.size_in_bytes} bytes")

    def _host_bytes(self) -> np.ndarray:
        """The staging copy as bytes (valid only while `_host_current`)."""
        return self._tensor.data().view(np.uint8)

    def _download(self):
        if not self._host_current:
            self.device._sync(self.device._kp.OpTensorSyncLocal, self._tensor)
            self._host_current = True

    def read(self, offset: int = 0, size: int | None = None) -> np.ndarray:
        """Copy `size` bytes from `offset` (default: to the end) into a new uint8 array."""
        with self.device._lock:
            size = self.size_in_bytes - offset if size is None and is_int(offset) else size
            self._check_range(offset, size, "read range")
            self._download()
            return self._host_bytes()[offset:offset + size].copy()

    def write(self, array, offset: int = 0) -> None:
        """Copy the bytes of `array` (C order) into the buffer at `offset`."""
        data = _as_bytes(array)
        with self.device._lock:
            self._check_range(offset, data.size, "write range")
            if data.size == 0:
                return
            partial = offset > 0 or data.size < self.size_in_bytes
            if partial:
                self._download()  # keep the bytes around the written range
            self._host_bytes()[offset:offset + data.size] = data
            self.device._sync(self.device._kp.OpTensorSyncDevice, self._tensor)
            self._host_current = True

    def release(self) -> None:
        """Free the device memory now (also done when the buffer is garbage-collected)."""
        with self.device._lock:
            tensor, self._tensor = getattr(self, "_tensor", None), None
            if tensor is None or self.device.closed:
                return
            self.device._forget(tensor)
            tensor.destroy()
            self.device._buffers.discard(self)

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown: kp may already be gone
            pass


_default: Device | None = None
_default_lock = threading.Lock()
_DEVICES: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_devices():
    """Close every open device while the interpreter can still run kp's destructors in order."""
    for device in list(_DEVICES):
        device.close()


def default_device() -> Device:
    """The process-wide default Device (created on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Device()
        return _default
