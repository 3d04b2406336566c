"""Device buffers and the host transfers into and out of them.

`Buffer`s are blocks of a device's pooled arenas (`memory.MemoryPool`). Where the device's own
memory is host-visible (CPU drivers such as lavapipe, integrated GPUs), arenas are mapped and
read and written in place; elsewhere transfers go through pooled host-visible staging memory in
chunks, pipelined so that host copies overlap the device's copies. Host copies of a few MiB
and more run on several cores (`host_copy`).
"""
from __future__ import annotations

import itertools
from collections import deque

import numpy as np

from ..errors import ValidationError
from . import fork, host_copy, interrupts
from .limits import is_int

#: Host transfers through staging memory go in chunks of this size, several in flight: large
#: enough that a chunk's submit (~15 us) and its hand-out to the copy threads (1 MiB a thread)
#: are small against its copies (~0.2 ms at 40 GB/s, and they overlap the next chunk's), small
#: enough that filling the pipeline (one chunk's host copy before the first device copy, one
#: device copy after the last host copy) costs ~0.4 ms, a tenth of a 64 MiB call's transfers.
STAGING_CHUNK = 8 << 20
#: Staging memory is one pooled arena of this size, kept between transfers (`empty_cache`
#: gives it back); it holds `STAGING_SLOTS` chunks, the most one transfer uses at once.
STAGING_ARENA = 64 << 20
STAGING_SLOTS = STAGING_ARENA // STAGING_CHUNK
#: A download keeps this many device copies queued ahead of the chunk whose host copy is
#: running (which holds the last slot).
DOWNLOAD_WINDOW = STAGING_SLOTS - 1
#: An upload chunk at least this large is submitted at once, so the device copies it while the
#: host fills the next; smaller ones ride with the work that follows.
SUBMIT_CHUNK_BYTES = 1 << 20
_SERIALS = itertools.count(1)


def bound_size(nbytes: int) -> int:
    """The size of a buffer that holds `nbytes` of data and can be bound: a multiple of 4, as
    DirectML requires of bound buffers, and never empty."""
    return max(4, -(-nbytes // 4) * 4)


def as_bytes(array) -> np.ndarray:
    if not isinstance(array, (np.ndarray, bytes, bytearray, memoryview)):
        raise ValidationError("dmlgpu", None, "array", type(array).__name__,
                              "allowed: a numpy array or a bytes-like object")
    if isinstance(array, np.ndarray):
        return np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    return np.frombuffer(array, dtype=np.uint8)


def allocate(device, resources, size_in_bytes: int, zero_fill: bool, device_writes_first: bool = False) -> "Buffer":
    """`Device.allocate`: a Buffer of `device` (whose parts are `resources`), checked by it."""
    with resources.lock:
        resources.check_open()  # under the lock: no other thread closes it in between
        block = resources.take(resources.memory, int(size_in_bytes), device_writes_first and not zero_fill)
        buffer = Buffer(device, resources, int(size_in_bytes), block)
        if zero_fill:
            _fill(resources, buffer)
        return buffer


def upload(device, resources, array) -> "Buffer":
    """`Device.upload`: a Buffer holding a copy of `array`'s bytes, padded with zeros to a
    multiple of 4."""
    data = as_bytes(array)
    size = bound_size(data.size)
    with resources.lock:
        buffer = device.allocate(size, zero_fill=False)
        if size > data.size:  # the padding bytes are defined: zero
            _write(resources, buffer, np.zeros(size - data.size, np.uint8), data.size, fresh=True)
        _write(resources, buffer, data, 0, fresh=True)
        if data.size:
            resources.transfers.upload(data.size)
        return buffer


class Buffer:
    """Device memory (DirectML binds ID3D12Resource buffers; this is its Vulkan stand-in).

    A block of one of the device's pooled arenas. Reads wait for the work queued on it; writes
    are queued behind that work (or wait for it, where the device's memory is mapped).
    """

    # Slots: one is made and dropped per new result of a Tensor call (`u = ~u`).
    __slots__ = ("device", "size_in_bytes", "_serial", "_resources", "block", "last_use", "__weakref__")

    def __init__(self, device, resources, size_in_bytes: int, block):
        self.device = device
        self.size_in_bytes = size_in_bytes
        self._serial = 0  # (`serial`, drawn on first use: most new results are never asked)
        self._resources = resources
        #: The pool block holding its bytes (None once released): for the runtime's launches,
        #: host calls and hand-overs.
        self.block = block
        self.last_use = 0  # stream position of the last queued work on this buffer
        resources.live += 1

    def __repr__(self):
        state = "released" if self.released else f"{self.size_in_bytes} bytes"
        return f"<dmlgpu.Buffer {state} on {self.device.name}>"

    @property
    def serial(self) -> int:
        """A number no other Buffer of this process has (unlike id(), never reused): keys caches
        of bound ranges."""
        serial = self._serial
        if not serial:
            serial = self._serial = next(_SERIALS)
        return serial

    @property
    def released(self) -> bool:
        return self.block is None or self._resources.closed

    @property
    def block_key(self) -> tuple:
        """(arena id, offset) of its memory: the same for no two live buffers (AttributeError
        once released)."""
        block = self.block
        return block.arena.id, block.offset

    @property
    def arena_offset(self) -> int:
        """Where the buffer starts in the memory its dispatches bind (a multiple of 256)."""
        return self.block.offset

    def check_live(self, operator: str = "dmlgpu", field: str = "buffer") -> None:
        """ValidationError saying why the buffer cannot be used, if it cannot: its device was
        closed (named), or it was released (DeviceError in a process forked after its parent
        used the device)."""
        if self.block is not None and not self._resources.closed:
            return
        fork.check()
        if self._resources.closed:
            raise ValidationError(operator, None, field, f"a buffer of closed device {self.device.name}",
                                  "its device was closed (Device.close(), or at exit), and its buffers and "
                                  "Tensors with it: make them again on an open device")
        raise ValidationError(operator, None, field, "released buffer", "allowed: a live Buffer")

    def check_range(self, offset, size, what) -> None:
        """ValidationError unless the buffer is live and [offset, offset + size) lies in it."""
        self.check_live()
        if not is_int(offset) or not is_int(size) or offset < 0 or size < 0 \
                or offset + size > self.size_in_bytes:
            raise ValidationError("dmlgpu", None, what, (offset, size),
                                  f"allowed: a range inside the buffer's {self.size_in_bytes} bytes")

    def read(self, offset: int = 0, size: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Copy `size` bytes from `offset` (default: to the end) into a new uint8 array, or into
        `out`: a writeable, contiguous 1-D uint8 array of exactly `size` bytes."""
        with self._resources.lock:
            size = self.size_in_bytes - offset if size is None and is_int(offset) else size
            self.check_range(offset, size, "read range")
            if out is not None and not (isinstance(out, np.ndarray) and out.dtype == np.uint8
                                        and out.shape == (size,) and out.flags.c_contiguous
                                        and out.flags.writeable):
                given = (f"{type(out).__name__} {out.dtype} {out.shape}" if isinstance(out, np.ndarray)
                         else type(out).__name__)
                raise ValidationError("dmlgpu", None, "out", given,
                                      f"allowed: a writeable, contiguous 1-D uint8 array of {size} bytes")
            result = _read(self._resources, self, int(offset), int(size), out)
            if size:
                self._resources.transfers.download(size)
            return result

    def write(self, array, offset: int = 0) -> None:
        """Copy the bytes of `array` (C order) into the buffer at `offset`, after queued work."""
        data = as_bytes(array)
        with self._resources.lock:
            self.check_range(offset, data.size, "write range")
            if data.size:
                _write(self._resources, self, data, int(offset), fresh=False)
                self._resources.transfers.upload(data.size)

    def release(self) -> None:
        """Return the memory to the pool now (after queued work on it; also done by GC)."""
        resources = self._resources
        lock = resources.lock  # (not `with`: `__del__`'s body too, a dropped result's every time)
        lock.acquire()
        try:
            block, self.block = self.block, None
            if block is None or resources.closed:
                return
            resources.live -= 1
            resources.memory.free(block, self.last_use if self.last_use > resources.stream.completed else None)
        finally:
            lock.release()

    def __copy__(self) -> "Buffer":
        """A new buffer of the same size holding a copy of the data (never shared memory)."""
        with self._resources.lock:
            data = self.read()
            copy = self.device.allocate(self.size_in_bytes, zero_fill=False)
            copy.write(data)
            return copy

    def __deepcopy__(self, memo) -> "Buffer":
        return self.__copy__()

    def __reduce__(self):
        raise TypeError("a dmlgpu.Buffer cannot be pickled: read() its bytes, or pickle a Tensor")

    @interrupts.critical  # a Ctrl-C here is raised after it, not lost
    def __del__(self):
        # Not `release`: no lock, one list append (a dropped result of `~s` in a loop makes and
        # drops one Buffer a call); the device frees the block under its lock before it next
        # allocates, reclaims or reports (`Resources.dropped`), or reuses it for its next result.
        try:
            block = self.block
            if block is not None:
                self.block = None
                resources = self._resources
                if not resources.closed:  # (a closed device's memory went with it)
                    resources.dropped.append((self.last_use, block))
        except AttributeError:  # (an __init__ that raised: nothing was taken)
            pass


# -- transfers (the caller holds the device's lock) -------------------------------------------
def _fill(resources, buffer: Buffer) -> None:
    block = buffer.block
    size = -(-buffer.size_in_bytes // 4) * 4
    if block.arena.memory.mapped:  # a fresh block: no queued work can touch it
        block.arena.memory.view[block.offset:block.offset + size] = 0
        return
    stream = resources.stream
    stream.order((), [resources.span(block, 0, size)], transfer=True).fill(
        block.arena.memory.handle, block.offset, size, 0)
    buffer.last_use = stream.position
    stream.queued("zero fill")


def _write(resources, buffer: Buffer, data: np.ndarray, offset: int, fresh: bool) -> None:
    """Copy flat uint8 `data` into `buffer` at `offset`, after queued work on those bytes.

    Through staging memory the transfer is a pipeline of `STAGING_CHUNK` pieces: the copy
    threads fill chunk k + 1 while chunk k's device copy is submitted and runs.
    """
    block = buffer.block
    memory = block.arena.memory
    stream = resources.stream
    if memory.mapped:
        if not fresh and buffer.last_use > stream.completed:
            stream.wait(buffer.last_use, interruptible=True)  # the device may still use these bytes
        start = block.offset + offset
        host_copy.copy(memory.view[start:start + data.size], data)
        return
    staging_pool = resources.staging
    filling = None  # (lo, n, staging block, its host copy): filled, not yet sent
    try:
        for lo in range(0, data.size, STAGING_CHUNK):
            n = min(STAGING_CHUNK, data.size - lo)
            staging = resources.take(staging_pool, n)
            try:
                pending = host_copy.start(staging.arena.memory.view[staging.offset:staging.offset + n],
                                          data[lo:lo + n])
            except BaseException:
                staging_pool.free(staging)
                raise
            previous, filling = filling, (lo, n, staging, pending)
            if previous is not None:
                _send(resources, buffer, offset, previous)
        previous, filling = filling, None
        if previous is not None:
            _send(resources, buffer, offset, previous)
    finally:
        if filling is not None:  # an error left a chunk filling: let it land, then free it
            try:
                filling[3].wait()
            finally:
                staging_pool.free(filling[2])


def _send(resources, buffer: Buffer, offset: int, chunk) -> None:
    """Queue the device copy of a filled staging chunk into `buffer`, once it has landed."""
    lo, n, staging, pending = chunk
    stream = resources.stream
    position = None
    try:
        pending.wait()
        block = buffer.block
        stream.order((), [resources.span(block, offset + lo, offset + lo + n)], transfer=True).copy(
            staging.arena.memory.handle, block.arena.memory.handle, staging.offset,
            block.offset + offset + lo, n)
        position = buffer.last_use = stream.position
        stream.queued("upload")
    finally:  # reused once the device has copied it (or at once if nothing was queued)
        resources.staging.free(staging, position)
    if n >= SUBMIT_CHUNK_BYTES:
        stream.flush()  # let the device copy this chunk while the host fills the next


def _read(resources, buffer: Buffer, offset: int, size: int, out: np.ndarray | None = None) -> np.ndarray:
    """Copy `size` bytes of `buffer` from `offset` into `out` (default: a new uint8 array).

    Through staging memory the transfer is a pipeline: up to `DOWNLOAD_WINDOW` device copies
    run ahead of the chunk the copy threads are landing in `out`.
    """
    block = buffer.block
    start = block.offset + offset
    memory = block.arena.memory
    stream = resources.stream
    result = np.empty(size, np.uint8) if out is None else out
    if memory.mapped:
        if buffer.last_use > stream.completed:
            stream.wait(buffer.last_use, interruptible=True)
        host_copy.copy(result, memory.view[start:start + size])
        return result
    staging_pool = resources.staging
    copying: deque = deque()  # (stream position, lo, n, staging block): device copies queued
    landing = None  # (staging block, its host copy into `result`)
    try:
        for lo in range(0, size, STAGING_CHUNK):
            n = min(STAGING_CHUNK, size - lo)
            staging = resources.take(staging_pool, n)
            try:
                stream.order([resources.span(block, offset + lo, offset + lo + n)], (), transfer=True).copy(
                    memory.handle, staging.arena.memory.handle, start + lo, staging.offset, n)
                stream.queued("download")
                stream.flush()
            except BaseException:
                staging_pool.free(staging, stream.position)
                raise
            copying.append((stream.position - 1, lo, n, staging))
            while len(copying) >= DOWNLOAD_WINDOW or (copying and lo + n == size):
                # Queued behind the previous landing, so the copy threads go straight on.
                previous, landing = landing, _land(resources, copying.popleft(), result)
                if previous is not None:
                    _landed(resources, previous)
    finally:
        for position, _, _, staging in copying:  # only after an error
            staging_pool.free(staging, position)
        if landing is not None:
            _landed(resources, landing)
    return result


def _land(resources, chunk, result: np.ndarray):
    """Wait for `chunk`'s device copy, then start its host copy into `result`; returns
    (staging block, pending host copy)."""
    position, lo, n, staging = chunk
    try:
        resources.stream.wait(position, interruptible=True)
        pending = host_copy.start(result[lo:lo + n], staging.arena.memory.view[staging.offset:staging.offset + n])
    except BaseException:
        resources.staging.free(staging, position)
        raise
    return staging, pending


def _landed(resources, landing) -> None:
    """Wait until a landing host copy is done and give its staging chunk back."""
    staging, pending = landing
    try:
        pending.wait()
    finally:
        resources.staging.free(staging)
