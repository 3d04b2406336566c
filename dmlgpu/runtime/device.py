"""A Vulkan device as dmlgpu's runtime sees it: pooled memory, one stream, pipelines per arena.

- Memory: `Buffer`s are blocks of pooled arenas (`memory.MemoryPool`). Where the device's own
  memory is host-visible (CPU drivers such as lavapipe, integrated GPUs), arenas are mapped and
  read and written in place; elsewhere transfers go through pooled host-visible staging memory
  in chunks, pipelined so that host copies overlap the device's copies. Host copies of a few
  MiB and more run on several cores (`host_copy`).
- Work: queued on the device's `Stream` and returned from at once; the host waits only to read
  (`Buffer.read`), to write memory the device may still use, and in `synchronize()`.
- Pipelines: one per program (a shader variant with its specialization) × grid × the arenas it
  binds, so creating buffers or results never compiles one in steady state. Offsets into the
  arenas travel as push constants.
"""
from __future__ import annotations

import itertools
import os
import sys
import threading
import time
import weakref
from collections import OrderedDict, deque

import numpy as np

from ..errors import DeviceError, DeviceMemoryError, ValidationError
from . import debug_layer, fork, host_copy, interrupts, vulkan
from .memory import MemoryPool, trim_host_heap
from .pipeline_cache import DiskCache
from .probe import physical_device_count
from .stream import Stream, replay_key

#: VkPhysicalDeviceType, and the order in which the default device is chosen.
DEVICE_TYPES = {0: "other", 1: "integrated GPU", 2: "discrete GPU", 3: "virtual GPU", 4: "CPU"}
_PREFERENCE = (2, 1, 3, 0, 4)
#: Device types whose device memory the host can map (no staging copies needed).
_MAPPED_TYPES = ("CPU", "integrated GPU")
#: Shared arenas hold at most this much (or the device's maxStorageBufferRange if smaller).
ARENA_BYTES = 256 << 20
#: Host transfers through staging memory go in chunks of this size, several in flight: large
#: enough that a chunk's submit (~15 us) and its hand-out to the copy threads (1 MiB a thread)
#: are small against its copies (~0.2 ms at 40 GB/s, and they overlap the next chunk's), small
#: enough that filling the pipeline (one chunk's host copy before the first device copy, one
#: device copy after the last host copy) costs ~0.4 ms, a tenth of a 64 MiB call's transfers.
STAGING_CHUNK = 8 << 20
#: Staging memory is one pooled arena of this size, kept between transfers (`empty_cache`
#: gives it back); it holds `STAGING_SLOTS` chunks, the most one transfer uses at once.
STAGING_ARENA = 64 << 20
#: The pipeline cache goes to disk at close, and after this many new pipelines if the last
#: write is this old (a burst of compiles; never per dispatch).
SAVE_AFTER_PIPELINES = 32
SAVE_INTERVAL_S = 10.0
STAGING_SLOTS = STAGING_ARENA // STAGING_CHUNK
#: A download keeps this many device copies queued ahead of the chunk whose host copy is
#: running (which holds the last slot).
DOWNLOAD_WINDOW = STAGING_SLOTS - 1
#: An upload chunk at least this large is submitted at once, so the device copies it while the
#: host fills the next; smaller ones ride with the work that follows.
SUBMIT_CHUNK_BYTES = 1 << 20
#: A call on host data of at most this many bytes (inputs and output together), repeated, keeps
#: its device and staging memory and one command buffer recorded for it (`Device.host_call`):
#: at 1 MiB a call's fixed Python (blocks taken and freed, copies and the dispatch recorded,
#: three submits) was ~60-80 us on the H100's host, more than its device time. Larger calls
#: are dominated by their copies and go through the pipelined transfers.
HOST_CALL_BYTES = 4 << 20
#: Bounds of the caches a device keeps, least recently used dropped first; settable with
#: `set_cache_limits` or, at import, the environment (DMLGPU_CACHE_PIPELINES, ...):
#: - "pipelines": compute pipelines (program x grid x arenas). A pipeline costs lavapipe
#:   ~1 MB of compiled code, a GPU driver far less; ones a recorded command buffer uses (a
#:   command list, a host call) are kept besides, until it goes.
#: - "host_calls": kept calls on host data (`host_call`): at most host_calls x HOST_CALL_BYTES
#:   of device memory and as much staging.
CACHE_LIMITS = {"pipelines": int(os.environ.get("DMLGPU_CACHE_PIPELINES", 256)),
                "host_calls": int(os.environ.get("DMLGPU_CACHE_HOST_CALLS", 16))}
#: A call on host data through staging memory that moves at least this many bytes (inputs and
#: output) runs as two host calls over its halves, overlapped (`Device.run_host_calls`): the
#: second half's host copy in runs while the device copies and computes the first half, and
#: the first half's copy out while the device does the second. Measured on an H100 (one
#: process, `benchmarks/front_end_segments.py`): 1 MiB of data (2 MiB moved) 332 -> 324 us,
#: 2 MiB 610 -> 555 us, but 256 KiB 110 -> 131 us (the second submit and wait cost more than
#: they hide), so smaller calls run whole.
HOST_CALL_SPLIT_BYTES = 2 << 20
_SERIALS = itertools.count(1)
_CURRENT = threading.local()


def is_int(value) -> bool:
    """An int or numpy integer, not a bool (the runtime's own test: it imports nothing from the
    table layers above it)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def set_cache_limits(**limits) -> dict:
    """Set cache bounds (`CACHE_LIMITS` names them; each at least 1) for every device; returns
    the bounds now in force. Caches over a new bound shrink at their next insertion."""
    for name, value in limits.items():
        if name not in CACHE_LIMITS:
            raise ValidationError("dmlgpu", None, "cache limit", name, f"allowed: {', '.join(CACHE_LIMITS)}")
        if not is_int(value) or value < 1:
            raise ValidationError("dmlgpu", None, name, value, "allowed: an int of at least 1")
    CACHE_LIMITS.update({name: int(value) for name, value in limits.items()})
    return dict(CACHE_LIMITS)


def devices() -> list[dict]:
    """Every Vulkan device: index, name, type, memory (heap bytes, if reported), buffer limit."""
    debug_layer.configure()
    physical_device_count()
    found = vulkan.Context.list_devices()
    return [{"index": i, "name": d["device_name"], "type": DEVICE_TYPES.get(d["device_type"], "unknown"),
             "max_buffer_bytes": int(d["max_storage_buffer_range"]) // 16 * 16,
             "default": i == choose_device(found)} for i, d in enumerate(found)]


def choose_device(found: list[dict]) -> int:
    """Index of the default device: DMLGPU_DEVICE if set, else a GPU before a CPU driver."""
    override = os.environ.get("DMLGPU_DEVICE")
    if override is not None:
        if not override.strip().isdigit() or int(override) >= len(found):
            raise DeviceError(f"DMLGPU_DEVICE={override!r} names no device; there are "
                              f"{len(found)}: {', '.join(d['device_name'] for d in found)}")
        return int(override)
    return min(range(len(found)), key=lambda i: (_PREFERENCE.index(found[i]["device_type"]), i))


def current_device():
    """The device made current for this thread by `with device:`, or None."""
    stack = getattr(_CURRENT, "stack", None)
    return stack[-1] if stack else None


class Program:
    """What a dispatch runs: SPIR-V with its specialization constants and push-constant size."""

    __slots__ = ("name", "spirv", "spec", "push_words", "key")

    def __init__(self, name: str, spirv: bytes, spec: np.ndarray, push_words: int):
        self.name = name
        self.spirv = spirv
        self.spec = spec
        self.push_words = push_words
        self.key = (name, spec.tobytes())


class Launch:
    """One dispatch ready to queue: pipeline, push constants and the ranges it reads and writes.

    Made once per operator and binding list (the blocks of live buffers never move), so a
    repeated execution costs a dependency check and one recorded dispatch. It holds its
    buffers weakly: a remembered launch never keeps memory alive.
    """

    __slots__ = ("device", "name", "pipeline", "push", "reads", "writes", "buffers", "key", "replay_key",
                 "program")

    def __init__(self, device, name, pipeline, push, reads, writes, buffers, key, program):
        self.device = device
        self.program = program
        self.name = name
        self.pipeline = pipeline
        self.push = push
        self.reads = reads
        self.writes = writes
        self.buffers = tuple(weakref.ref(b) for b in buffers)
        self.key = key  # (program key, grid, arena ids): what the pipeline was made for
        self.replay_key = replay_key(pipeline, push)  # the stream's kept command buffer for it

    def derived(self, pipeline, push, reads, writes, buffer_refs, key) -> "Launch":
        """A launch of the same device and name from parts already made (no checks, no copies):
        other buffers' in the same blocks (`Device.rebind`)."""
        launch = Launch.__new__(Launch)
        launch.device, launch.name, launch.pipeline, launch.push = self.device, self.name, pipeline, push
        launch.reads, launch.writes, launch.buffers, launch.key = reads, writes, buffer_refs, key
        launch.replay_key = replay_key(pipeline, push)
        launch.program = self.program
        return launch

    @property
    def arena_ids(self) -> tuple:
        """The arena each binding lies in, in binding order."""
        return self.key[2]

    @property
    def valid(self) -> bool:
        if self.pipeline.handle is None:
            return False
        for ref in self.buffers:
            buffer = ref()
            if buffer is None or buffer.released:
                return False
        return True


class Device:
    """A Vulkan device (DirectML's IDMLDevice, in spirit): memory, a stream of work, pipelines.

    Args:
        index: Vulkan physical-device index; None picks DMLGPU_DEVICE, else the first GPU,
            else a CPU implementation such as lavapipe.
        staging: True sends every host transfer through staging memory, with device memory
            left unmapped, even where the host could map it (lavapipe, integrated GPUs): the
            path a discrete GPU takes, as a test and diagnostic knob. None (default): on when
            the environment sets DMLGPU_STAGING=1.

    `with device:` makes it the current device of the calling thread: the numpy front end and
    new Tensors use it.
    """

    @interrupts.critical
    def __init__(self, index: int | None = None, *, staging: bool | None = None):
        fork.check()
        interrupts.install()
        debug_layer.configure()  # DMLGPU_VALIDATION=1: before the process's first instance
        physical_device_count()  # kp aborts the process when there is no driver: ask first
        fork.mark_used()
        context = vulkan.Context(0)
        found = context.devices()
        if index is None:
            index = choose_device(found)
        elif not is_int(index) or not 0 <= index < len(found):
            context.destroy()
            raise DeviceError(f"device index {index!r} is out of range; there are {len(found)}")
        if index != 0:
            context.destroy()
            context = vulkan.Context(int(index))
        self._context = context
        self.index = int(index)
        self.properties = dict(found[index])
        props = self.properties
        self._disk_cache = DiskCache.for_device(context.pipeline_cache_uuid(), props["vendor_id"],
                                                props["device_id"], props["driver_version"])
        try:
            context.seed_pipeline_cache(self._disk_cache.load())
        except DeviceError:  # the driver refused the data: an empty cache, the file rebuilt
            self._disk_cache.status = "rejected: by the driver"
            context.seed_pipeline_cache(b"")
        self._pipelines_made = 0  # pipelines created by this device (compiled or from the cache)
        self._pipeline_seconds = 0.0  # time spent creating them
        self._unsaved = 0  # pipelines made since the cache file was last written
        self._saved_at = time.monotonic()
        self.name = self.properties["device_name"]
        self.type = DEVICE_TYPES.get(self.properties["device_type"], "unknown")
        self.max_buffer_size = int(self.properties["max_storage_buffer_range"]) // 16 * 16
        if staging is None:
            staging = os.environ.get("DMLGPU_STAGING", "") == "1"
        self.mapped = self.type in _MAPPED_TYPES and not staging  # else transfers go through staging
        self._whole_arenas = debug_layer.requested()
        self._lock = threading.RLock()
        interrupts.watch_lock(self._lock._is_owned)  # Ctrl-C waits while the main thread holds it
        self._users = 0  # threads copying into or out of device memory outside the lock
        self._unused = threading.Condition(self._lock)  # notified when _users drops to 0
        self._pipelines: OrderedDict = OrderedDict()  # key -> Pipeline, least recently made first
        self._pins: dict = {}  # pipeline key -> recorded command buffers using it
        self._retired: list = []  # (stream position, Pipeline): destroyed once work passes it
        self._memory = MemoryPool(lambda n: context.memory(n, self.mapped),
                                  min(ARENA_BYTES, self.max_buffer_size), self._drop_pipelines)
        self._staging = None if self.mapped else MemoryPool(
            lambda n: context.memory(n, True), STAGING_ARENA)
        self._stream = Stream(context)
        self._stream.on_complete = self._reclaim
        self._live = 0  # Buffers allocated and not yet released
        self._host_calls: OrderedDict = OrderedDict()  # key -> HostCall, least recently used first
        self._handed_over = 0  # live arrays showing device memory (`hand_over`)
        self._handed = weakref.WeakSet()  # their owners (made private in a forked child)
        self._closing = None  # what `close` left for the last of them to destroy
        self._closing_now = False  # `close` has begun: no host call starts
        self.closed = False
        self._forked = False  # a forked child's copy of a parent's device
        _DEVICES.add(self)

    def __repr__(self):
        return f"<dmlgpu.Device {self.index}: {self.name} ({self.type})>"

    @property
    def label(self) -> str:
        """'device 1 (NVIDIA H200)': names a device in messages, also among identical ones."""
        return f"device {self.index} ({self.name})"

    def __enter__(self):
        stack = getattr(_CURRENT, "stack", None)
        if stack is None:
            stack = _CURRENT.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _CURRENT.stack.pop()
        return False

    @property
    def is_cpu(self) -> bool:
        return self.type == "CPU"

    @property
    def driver(self) -> str:
        """Vulkan API version and the driver's version number, for reports."""
        api = self.properties["api_version"]
        return (f"Vulkan {api >> 22}.{(api >> 12) & 0x3FF}.{api & 0xFFF}, "
                f"driver 0x{self.properties['driver_version']:08x}")

    @property
    def live_buffers(self) -> int:
        """Device buffers allocated and not yet released."""
        return self._live

    def check_open(self, operator: str = "dmlgpu", what: str = "device") -> None:
        """ValidationError (naming `operator`) if the device is closed; DeviceError in a
        process forked after its parent used it."""
        if self.closed:
            if self._forked:
                fork.check()
            raise ValidationError(operator, None, what, "closed", "allowed: an open Device")

    _check_open = check_open

    # -- memory ----------------------------------------------------------------------------
    def allocate(self, size_in_bytes: int, *, zero_fill: bool = True) -> "Buffer":
        """A device buffer of `size_in_bytes` bytes, zero-filled on the device unless asked not to."""
        if not is_int(size_in_bytes) or not 1 <= size_in_bytes <= self.max_buffer_size:
            raise ValidationError("dmlgpu", None, "size_in_bytes", size_in_bytes,
                                  f"allowed: 1 to {self.max_buffer_size} bytes (the device's "
                                  "maxStorageBufferRange)")
        with self._lock:
            self._check_open()  # under the lock: no other thread closes it in between
            buffer = Buffer(self, int(size_in_bytes), self._take(self._memory, int(size_in_bytes)))
            if zero_fill:
                self._fill(buffer)
            return buffer

    def upload(self, array) -> "Buffer":
        """A device buffer holding a copy of `array`'s bytes (C order).

        Its size is rounded up to a multiple of 4, as DirectML requires of bound buffers, so a
        tensor's data uploaded this way can be bound as that tensor.
        """
        data = as_bytes(array)
        size = _bound_size(data.size)
        with self._lock:
            buffer = self.allocate(size, zero_fill=False)
            if size > data.size:  # the padding bytes are defined: zero
                buffer._write(np.zeros(size - data.size, np.uint8), data.size, fresh=True)
            buffer._write(data, 0, fresh=True)
            return buffer

    def _take(self, pool: MemoryPool, nbytes: int):
        """A block, reusing memory freed by finished work before growing the pool."""
        if self.closed:  # (callers hold the lock: checked where no close can slip in)
            self._check_open()
        block = pool.allocate(nbytes, grow=False)
        if block is None:
            self._stream.poll()  # retire finished batches, reclaim what they freed
            block = pool.allocate(nbytes, grow=False)
        while block is None and pool.parked_bytes >= nbytes:
            self._stream.wait(pool.oldest_parked())  # memory freed by queued work: wait for it
            block = pool.allocate(nbytes, grow=False)
        if block is None:
            try:
                block = pool.allocate(nbytes)
            except DeviceMemoryError:
                self._give_back()  # as CuPy's MemoryPool.malloc: free what is cached, retry once
                try:
                    block = pool.allocate(nbytes)
                except DeviceMemoryError as exc:
                    raise DeviceMemoryError(f"{self.label} could not allocate {nbytes} bytes: {exc}") from exc
        return block

    def _give_back(self) -> None:
        """Wait for queued work (what it freed comes back), close kept host calls and give
        every arena no live buffer uses back to the driver, in both pools."""
        self._stream.synchronize()
        self._close_host_calls()
        self._memory.release_unused()
        if self._staging is not None:
            self._staging.release_unused()

    def _reclaim(self, completed: int) -> None:
        self._memory.reclaim(completed)
        if self._staging is not None:
            self._staging.reclaim(completed)
        if self._retired and self._retired[0][0] <= completed:
            keep = []
            for position, pipeline in self._retired:
                if position <= completed:
                    pipeline.destroy()
                else:
                    keep.append((position, pipeline))
            self._retired = keep

    def memory_stats(self) -> dict:
        """Bytes in use, reserved, peak; arenas and dedicated buffers; staging; pipelines."""
        with self._lock:
            stats = self._memory.stats()
            stats["staging_reserved_bytes"] = self._staging.stats()["reserved_bytes"] if self._staging else 0
            stats["pipelines"] = len(self._pipelines)
            stats["pinned_pipelines"] = len(self._pins)
            stats["live_buffers"] = self._live
            stats["command_buffers"] = self._stream.command_buffers + len(self._host_calls)
            stats["host_calls"] = len(self._host_calls)
            stats["submits"] = self._stream.submits
            stats["barriers"] = self._stream.barriers
            return stats

    def empty_cache(self) -> None:
        """Give back what no live object needs, after queued work ends: kept host calls,
        pipelines no recorded command buffer uses, and every arena no live buffer uses."""
        with self._lock:
            self._check_open()
            self._give_back()
            for key in [k for k in self._pipelines if k not in self._pins]:
                self._retire(key)
            self._stream.synchronize()
            self._reclaim(self._stream.completed)
            trim_host_heap()

    # -- work ------------------------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait until all queued work has finished."""
        lock = self._lock  # acquire/release: half the cost of `with` on this hot path
        lock.acquire()
        try:
            if not self.closed:
                self._stream.synchronize()
            elif self._forked:
                fork.check()
        finally:
            lock.release()

    def launch(self, program: Program, grid, bindings, push, reads, writes, name: str) -> Launch:
        """Prepare a dispatch of `program` over `grid` binding `bindings` (Buffers, in order).

        `reads`/`writes` are (Buffer, start, end) byte ranges for dependency tracking.
        """
        with self._lock:
            self._check_open()
            key, pipeline = self._pipeline(program, tuple(grid), [b._block.arena for b in bindings])
            return Launch(self, name, pipeline, np.ascontiguousarray(push, np.uint32),
                          [self._span(b._block, s, e) for b, s, e in reads],
                          [self._span(b._block, s, e) for b, s, e in writes],
                          tuple({id(b): b for b in bindings}.values()), key, program)

    def _pipeline(self, program: Program, grid: tuple, arenas):
        """(key, pipeline) of `program` over `grid` binding `arenas` in order: made once per
        program, grid and arenas, and kept until one of them is released or it is the least
        recently made or looked up of more than CACHE_LIMITS["pipelines"] (then made again
        when needed: a Launch of it is remade by its user, `Launch.valid` turns False)."""
        key = (program.key, grid, tuple(a.id for a in arenas))
        with self._lock:
            pipeline = self._pipelines.get(key)
            if pipeline is None:
                start = time.perf_counter()
                pipeline = self._pipelines[key] = self._context.pipeline(
                    program.spirv, grid, program.spec, program.push_words, [a.memory for a in arenas])
                self._pipeline_seconds += time.perf_counter() - start
                self._pipelines_made += 1
                self._unsaved += 1
                if len(self._pipelines) > CACHE_LIMITS["pipelines"]:
                    self._evict_pipelines(CACHE_LIMITS["pipelines"])
                if self._unsaved >= SAVE_AFTER_PIPELINES and time.monotonic() - self._saved_at >= SAVE_INTERVAL_S:
                    self._save_pipeline_cache()
            else:
                self._pipelines.move_to_end(key)
        return key, pipeline

    def _evict_pipelines(self, limit: int) -> None:
        """Retire the least recently made unpinned pipelines until at most `limit` are kept
        (pinned ones count, and are never retired)."""
        excess = len(self._pipelines) - limit
        for key in list(self._pipelines):
            if excess <= 0:
                break
            if key not in self._pins:
                self._retire(key)
                excess -= 1

    def _retire(self, key) -> None:
        """Drop a pipeline from the cache now (every Launch of it is invalid from here) and
        destroy it once the work queued so far, which may use it, has finished."""
        pipeline = self._pipelines.pop(key)
        self._retired.append((self._stream.position, vulkan.Pipeline(pipeline.handle)))
        pipeline.handle = None

    def _current(self, launch: Launch):
        """`launch`'s pipeline, made again if it was retired (its buffers are live)."""
        pipeline = launch.pipeline
        if pipeline.handle is None:
            program_key, grid, arena_ids = launch.key
            _, pipeline = self._pipeline(launch.program, grid, self._arenas_by_id(arena_ids))
            launch.pipeline, launch.replay_key = pipeline, replay_key(pipeline, launch.push)
        return pipeline

    def _save_pipeline_cache(self) -> None:
        """Write the pipeline cache to disk (a new process then compiles none of these)."""
        self._unsaved, self._saved_at = 0, time.monotonic()
        self._disk_cache.save(self._context.pipeline_cache_data())

    def pipeline_stats(self) -> dict:
        """Pipelines this device created and the seconds it spent creating them (the driver's
        compilation, or a lookup in the pipeline cache seeded from disk), and the disk cache:
        its file, `status` ("disabled", "missing", "loaded", "rejected: ...", "saved",
        "save failed: ..."), bytes loaded and saved."""
        with self._lock:
            return {"pipelines_created": self._pipelines_made, "pipeline_seconds": self._pipeline_seconds,
                    **self._disk_cache.info()}

    def results(self, template: Launch, word: int, end: int) -> "Results":
        """Repeats of `template`, each writing bytes [0, end) of a fresh output buffer (its last
        binding) whose word offset in its arena goes into push constant `word`: a repeated call
        that makes a new result."""
        return Results(self, template, word, end)

    def rebind(self, launch: Launch, buffers) -> Launch:
        """`launch` for other live `buffers` (in binding order) in the very blocks its own
        buffers had: the same pipeline, push constants and ranges."""
        return launch.derived(launch.pipeline, launch.push, launch.reads, launch.writes,
                              tuple(weakref.ref(b) for b in {id(b): b for b in buffers}.values()), launch.key)

    def _arenas_by_id(self, ids):
        arenas = {a.id: a for pool in (self._memory, self._staging) if pool for a in pool.arenas}
        return [arenas[i] for i in ids]

    def enqueue(self, launch: Launch) -> bool:
        """Queue one prepared dispatch behind the work it depends on; returns at once.

        Returns False, queuing nothing, when the launch is no longer valid (a buffer of it was
        released, or its pipeline went with an arena): checked under the lock, so no other
        thread can release one in between.
        """
        lock = self._lock  # acquire/release: half the cost of `with` on this hot path
        lock.acquire()
        try:
            if self.closed:
                if self._forked:
                    fork.check()
                return False
            buffers = []
            for ref in launch.buffers:
                buffer = ref()
                if buffer is None or buffer._block is None:
                    return False
                buffers.append(buffer)
            if launch.pipeline.handle is None:  # retired from the cache: made again
                self._current(launch)
            stream = self._stream
            position = stream.position
            stream.dispatch(launch.pipeline, launch.push, launch.reads, launch.writes, launch.name,
                            launch.replay_key)
            for buffer in buffers:
                buffer.last_use = position
            return True
        finally:
            lock.release()

    def record(self, steps, name: str):
        """Record a list of launches (with None for a barrier) into a reusable command buffer."""
        with self._lock:
            self._check_open()
            commands = self._context.commands()
            commands.barrier()  # earlier work in the stream -> this list
            for step in steps:
                if step is None:
                    commands.compute_barrier()
                else:
                    commands.dispatch(self._current(step).handle, step.push)
            commands.host_barrier()
            return Recorded(self, commands, name, [step.key for step in steps if step is not None])

    def _pin(self, keys) -> None:
        """Keep the pipelines of `keys` (a recorded command buffer uses them) out of eviction."""
        for key in keys:
            self._pins[key] = self._pins.get(key, 0) + 1

    def _unpin(self, keys) -> None:
        for key in keys:
            count = self._pins.get(key, 0) - 1
            if count > 0:
                self._pins[key] = count
            else:
                self._pins.pop(key, None)

    def time_dispatches(self, launch: Launch, repeats: int) -> np.ndarray:
        """GPU seconds of `repeats` back-to-back runs of `launch`, each behind a barrier."""
        with self._lock:
            self.synchronize()
            commands = self._context.commands(2 * repeats)
            try:
                handle = self._current(launch).handle
                for _ in range(repeats):
                    commands.dispatch(handle, launch.push)
                    commands.compute_barrier()
                commands.submit()
                commands.wait()
                ticks = np.array(commands.timestamps(), dtype=np.float64)
            finally:
                commands.destroy()
            for ref in launch.buffers:
                ref().last_use = self._stream.completed
        seconds = ticks * self.properties["timestamp_period"] * 1e-9
        return seconds[1::2][:repeats] - seconds[0::2][:repeats]

    def submit_floor(self, launch: Launch, repeats: int) -> np.ndarray:
        """Wall seconds of submitting a command buffer that holds only `launch`, recorded once,
        and waiting for its fence, `repeats` times: what any Vulkan runtime pays for this work,
        so the floor under a queued call followed by `synchronize()`."""
        with self._lock:
            self.synchronize()
            commands = self._context.commands()
            times = []
            try:
                commands.dispatch(self._current(launch).handle, launch.push)
                commands.host_barrier()
                for _ in range(repeats + 1):  # the first wakes the queue up
                    start = time.perf_counter()
                    commands.submit()
                    commands.wait()
                    times.append(time.perf_counter() - start)
            finally:
                commands.destroy()
            for ref in launch.buffers:
                ref().last_use = self._stream.completed
        return np.array(times[1:])

    def _fill(self, buffer: "Buffer") -> None:
        block = buffer._block
        size = -(-buffer.size_in_bytes // 4) * 4
        if block.arena.memory.mapped:  # a fresh block: no queued work can touch it
            block.arena.memory.view[block.offset:block.offset + size] = 0
            return
        stream = self._stream
        stream.order((), [self._span(block, 0, size)], transfer=True).fill(
            block.arena.memory.handle, block.offset, size, 0)
        buffer.last_use = stream.position
        stream.queued("zero fill")

    def _span(self, block, start: int, end: int) -> tuple:
        """(arena id, start, end) of bytes [start, end) of `block`, as the stream tracks them.

        Under DMLGPU_VALIDATION the whole arena: the validation layer's synchronization checks
        see what a descriptor binds (the whole arena), not the bytes a shader touches, so there
        every access to an arena is ordered after the last write to it.
        """
        if self._whole_arenas:
            return (block.arena.id, 0, block.arena.nbytes)
        return (block.arena.id, block.offset + start, block.offset + end)

    def _drop_pipelines(self, arena) -> None:
        for key in [k for k in self._pipelines if arena.id in k[2]]:
            pipeline = self._pipelines.pop(key)
            pipeline.destroy()
            pipeline.handle = None

    # -- calls on host data ----------------------------------------------------------------
    def hand_over(self, buffer: "Buffer", nbytes: int) -> np.ndarray:
        """A uint8 numpy array that *is* the first `nbytes` bytes of `buffer`, on a device whose
        memory the host maps (`mapped`): a result computed into `buffer` reaches the caller with
        no download and no fresh host pages. Waits for queued work on the buffer.

        The array owns the buffer from then on: its memory stays allocated while the array or
        any view of it lives, and returns to the pool after; the caller must not use `buffer`
        again. If the device is closed first, its memory is destroyed when the last such
        array goes.
        """
        with self._lock:
            buffer._check_range(0, nbytes, "hand-over range")
            block = buffer._block
            if not block.arena.memory.mapped:
                raise ValidationError("dmlgpu", None, "buffer", "device memory the host does not map",
                                      "allowed: a buffer of a device whose memory is mapped")
            if buffer.last_use > self._stream.completed:
                self._stream.wait(buffer.last_use)
            view = block.arena.memory.view[block.offset:block.offset + nbytes]
            owner = _HandedOver(buffer, view)
            self._handed_over += 1
            self._handed.add(owner)
            weakref.finalize(owner, self._handed_back).atexit = False
            return np.asarray(owner)

    @interrupts.critical
    def _handed_back(self) -> None:
        """A handed-over array died."""
        with self._lock:
            self._handed_over -= 1
            if self._handed_over == 0 and self._closing is not None and not sys.is_finalizing() \
                    and not self._forked:
                closing, self._closing = self._closing, None
                for destroy in closing:
                    destroy()

    def host_call(self, key, input_sizes, output_size: int, make_launch) -> "HostCall | None":
        """The kept `HostCall` for `key` (any hashable naming the call), made on first use with
        device buffers for `input_sizes` bytes of data each (padded as `upload` pads) and an
        `output_size`-byte output; `make_launch(inputs, output)` returns the dispatch over those
        buffers. None for calls larger than HOST_CALL_BYTES."""
        if sum(input_sizes) + output_size > HOST_CALL_BYTES:
            return None
        with self._lock:
            self._check_open()
            call = self._host_calls.get(key)
            if call is not None:
                self._host_calls.move_to_end(key)
                return call
            call = HostCall(self, input_sizes, output_size)
            try:
                call.record(make_launch(call.inputs, call.output))
            except BaseException:
                call.close()
                raise
            self._host_calls[key] = call
            while len(self._host_calls) > CACHE_LIMITS["host_calls"]:
                self._host_calls.popitem(last=False)[1].close()
            return call

    def host_call_pieces(self, nbytes: int) -> int:
        """How many host calls a call on host data moving `nbytes` (inputs and output) runs as:
        none above HOST_CALL_BYTES; 2 where transfers go through staging and it moves at least
        HOST_CALL_SPLIT_BYTES; else 1 (mapped memory has no device copies to hide)."""
        if nbytes > HOST_CALL_BYTES:
            return 0
        return 2 if not self.mapped and nbytes >= HOST_CALL_SPLIT_BYTES else 1

    @interrupts.critical
    def run_host_calls(self, calls, inputs, outs) -> bool:
        """Run kept host calls over pieces of one call, overlapped: every piece's inputs are
        copied in and submitted before the first is waited for and copied out, so one piece's
        host copies run while the device works on another. `inputs[i]` and `outs[i]` are what
        `HostCall.start` and `finish` take. False, with nothing copied out, if a piece could not
        start (another thread runs it, or it was closed): the caller takes the general path."""
        started, finished = [], 0
        try:
            for call, data in zip(calls, inputs):
                position = call.start(data)
                if position is None:
                    return False
                started.append((call, position))
            for (call, position), out in zip(started, outs):
                finished += 1
                call.finish(position, out)
            return True
        finally:
            for call, position in started[finished:]:  # after a piece failed to start or finish
                call.finish(position, None)

    def _close_host_calls(self) -> None:
        while self._host_calls:
            self._host_calls.popitem()[1].close()

    def _use_memory(self) -> bool:
        """A thread is about to copy into or out of device memory outside the lock (a host
        call): False once the device is closing, else `close` waits for `_memory_used`."""
        with self._lock:
            if self.closed or self._closing_now:
                return False
            self._users += 1
            return True

    def _memory_used(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                self._unused.notify_all()

    # -- host transfers --------------------------------------------------------------------
    def _write(self, buffer: "Buffer", data: np.ndarray, offset: int, fresh: bool) -> None:
        """Copy flat uint8 `data` into `buffer` at `offset`, after queued work on those bytes.

        Through staging memory the transfer is a pipeline of `STAGING_CHUNK` pieces: the copy
        threads fill chunk k + 1 while chunk k's device copy is submitted and runs.
        """
        block = buffer._block
        memory = block.arena.memory
        stream = self._stream
        if memory.mapped:
            if not fresh and buffer.last_use > stream.completed:
                stream.wait(buffer.last_use)  # the device may still read or write these bytes
            start = block.offset + offset
            host_copy.copy(memory.view[start:start + data.size], data)
            return
        filling = None  # (lo, n, staging block, its host copy): filled, not yet sent
        try:
            for lo in range(0, data.size, STAGING_CHUNK):
                n = min(STAGING_CHUNK, data.size - lo)
                staging = self._take(self._staging, n)
                try:
                    pending = host_copy.start(staging.arena.memory.view[staging.offset:staging.offset + n],
                                              data[lo:lo + n])
                except BaseException:
                    self._staging.free(staging)
                    raise
                previous, filling = filling, (lo, n, staging, pending)
                if previous is not None:
                    self._send(buffer, offset, previous)
            previous, filling = filling, None
            if previous is not None:
                self._send(buffer, offset, previous)
        finally:
            if filling is not None:  # an error left a chunk filling: let it land, then free it
                try:
                    filling[3].wait()
                finally:
                    self._staging.free(filling[2])

    def _send(self, buffer: "Buffer", offset: int, chunk) -> None:
        """Queue the device copy of a filled staging chunk into `buffer`, once it has landed."""
        lo, n, staging, pending = chunk
        stream = self._stream
        position = None
        try:
            pending.wait()
            block = buffer._block
            stream.order((), [self._span(block, offset + lo, offset + lo + n)], transfer=True).copy(
                staging.arena.memory.handle, block.arena.memory.handle, staging.offset,
                block.offset + offset + lo, n)
            position = buffer.last_use = stream.position
            stream.queued("upload")
        finally:  # reused once the device has copied it (or at once if nothing was queued)
            self._staging.free(staging, position)
        if n >= SUBMIT_CHUNK_BYTES:
            stream.flush()  # let the device copy this chunk while the host fills the next

    def _read(self, buffer: "Buffer", offset: int, size: int, out: np.ndarray | None = None) -> np.ndarray:
        """Copy `size` bytes of `buffer` from `offset` into `out` (default: a new uint8 array).

        Through staging memory the transfer is a pipeline: up to `DOWNLOAD_WINDOW` device copies
        run ahead of the chunk the copy threads are landing in `out`.
        """
        block = buffer._block
        start = block.offset + offset
        memory = block.arena.memory
        stream = self._stream
        result = np.empty(size, np.uint8) if out is None else out
        if memory.mapped:
            if buffer.last_use > stream.completed:
                stream.wait(buffer.last_use)
            host_copy.copy(result, memory.view[start:start + size])
            return result
        copying: deque = deque()  # (stream position, lo, n, staging block): device copies queued
        landing = None  # (staging block, its host copy into `result`)
        try:
            for lo in range(0, size, STAGING_CHUNK):
                n = min(STAGING_CHUNK, size - lo)
                staging = self._take(self._staging, n)
                try:
                    stream.order([self._span(block, offset + lo, offset + lo + n)], (), transfer=True).copy(
                        memory.handle, staging.arena.memory.handle, start + lo, staging.offset, n)
                    stream.queued("download")
                    stream.flush()
                except BaseException:
                    self._staging.free(staging, stream.position)
                    raise
                copying.append((stream.position - 1, lo, n, staging))
                while len(copying) >= DOWNLOAD_WINDOW or (copying and lo + n == size):
                    # Queued behind the previous landing, so the copy threads go straight on.
                    previous, landing = landing, self._land(copying.popleft(), result)
                    if previous is not None:
                        self._landed(previous)
        finally:
            for position, _, _, staging in copying:  # only after an error
                self._staging.free(staging, position)
            if landing is not None:
                self._landed(landing)
        return result

    def _land(self, chunk, result: np.ndarray):
        """Wait for `chunk`'s device copy, then start its host copy into `result`; returns
        (staging block, pending host copy)."""
        position, lo, n, staging = chunk
        try:
            self._stream.wait(position)
            pending = host_copy.start(result[lo:lo + n], staging.arena.memory.view[staging.offset:staging.offset + n])
        except BaseException:
            self._staging.free(staging, position)
            raise
        return staging, pending

    def _landed(self, landing) -> None:
        """Wait until a landing host copy is done and give its staging chunk back."""
        staging, pending = landing
        try:
            pending.wait()
        finally:
            self._staging.free(staging)

    # -- lifetime --------------------------------------------------------------------------
    @interrupts.critical
    def close(self) -> None:
        """Finish queued work, then release every buffer, pipeline and the Vulkan device.

        Done for every open device at interpreter exit; buffers, operators and command lists of
        a closed device raise ValidationError when used. Other threads' calls in flight finish
        first (or raise ValidationError if they start after this); threads copying into or out
        of device memory (calls on host data) are waited for before any memory is freed.
        """
        with self._lock:
            if self.closed:
                return
            self._closing_now = True
            while self._users:  # releases the lock while it waits
                self._unused.wait()
            try:
                self._stream.synchronize()
            except DeviceError:
                pass
            self._close_host_calls()
            self._stream.destroy()
            for pipeline in self._pipelines.values():
                pipeline.destroy()
                pipeline.handle = None
            self._pipelines.clear()
            if self._pipelines_made:
                self._save_pipeline_cache()
            for _, pipeline in self._retired:
                pipeline.destroy()
            self._retired.clear()
            interrupts.unwatch_lock(self._lock._is_owned)
            closing = [self._memory.destroy, self._context.destroy]
            if self._staging is not None:
                self._staging.destroy()
            self.closed = True
            if self._handed_over:  # arrays still show device memory: it goes with the last one
                self._closing = closing
            else:
                for destroy in closing:
                    destroy()

    def _became_fork_child(self) -> None:
        """In a forked child: the device is the parent's; never use or destroy it here."""
        self._lock = threading.RLock()  # the parent's may have been held by a thread the child lacks
        self._forked = self.closed = True
        for owner in list(self._handed):
            fork.privatize(owner.__array_interface__["data"][0], owner.__array_interface__["shape"][0])
        fork.leak(self)


def _after_fork_in_child() -> None:
    if fork.became_child():
        for device in list(_DEVICES):
            device._became_fork_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _HandedOver:
    """The owner of a handed-over array's memory (`Device.hand_over`): the array's base, it
    holds the Buffer, so the block stays allocated while the array or a view of it lives."""

    __slots__ = ("buffer", "__array_interface__", "__weakref__")

    def __init__(self, buffer, view: np.ndarray):
        self.buffer = buffer
        self.__array_interface__ = {"version": 3, "shape": view.shape, "typestr": "|u1",
                                    "data": (view.ctypes.data, False)}


class Results:
    """Repeats of one dispatch, each writing a fresh output buffer (`u = ~t` in a loop).

    The pool hands a loop the same few blocks again and again, so the pipeline, push constants
    and written span are remembered per output block: a call takes a block, makes its Buffer
    and queues the dispatch, under one hold of the device's lock, and makes no Launch.
    """

    __slots__ = ("device", "template", "word", "end", "_inputs", "_by_block")
    #: Output blocks remembered (then forgotten all at once): a loop uses two or three.
    BLOCKS = 64

    def __init__(self, device: Device, template: Launch, word: int, end: int):
        self.device = device
        self.template = template
        self.word = word
        self.end = end
        self._inputs = template.buffers[:-1]  # weak references, as in the template
        self._by_block: dict = {}  # (arena id, offset) -> (pipeline, push, written spans, replay key)

    def __call__(self) -> "Buffer":
        """A new output buffer with the dispatch writing it queued; its inputs must be live."""
        device = self.device
        with device._lock:
            device._check_open()
            block = device._take(device._memory, self.end)
            buffer = Buffer(device, self.end, block)
            entry = self._by_block.get((block.arena.id, block.offset))
            if entry is None or entry[0].handle is None:  # (arena ids are never reused)
                entry = self._remember(block)
            stream = device._stream
            position = stream.position
            stream.dispatch(entry[0], entry[1], self.template.reads, entry[2], self.template.name, entry[3])
            for ref in self._inputs:
                ref().last_use = position
            buffer.last_use = position
            return buffer

    def _remember(self, block):
        device, template = self.device, self.template
        program_key, grid, arena_ids = template.key
        _, pipeline = device._pipeline(template.program, grid, device._arenas_by_id(arena_ids[:-1]) + [block.arena])
        push = template.push.copy()
        push[self.word] = block.offset // 4
        if len(self._by_block) >= self.BLOCKS:
            self._by_block.clear()
        entry = self._by_block[block.arena.id, block.offset] = (
            pipeline, push, [device._span(block, 0, self.end)], replay_key(pipeline, push))
        return entry


class HostCall:
    """A call on host data recorded once: its own device buffers, staging memory where the
    device's memory is not mapped, and one command buffer holding the uploads, the dispatch and
    the download, with the barriers between them.

    `start` copies the inputs in and submits that command buffer on the stream (after queued
    work); `finish` waits for it and copies the output out: no block is taken or freed and
    nothing is recorded per call. One thread runs it at a time; `start` returns None to a
    second (it takes the general path then) and after `close`.
    """

    def __init__(self, device: Device, input_sizes, output_size: int):
        self.device = device
        self.inputs, self.output, self._staging, self._views = [], None, [], []
        self._recorded = self._launch = None
        self._busy = threading.Lock()
        self._closed = self._freed = False
        try:
            self.inputs = [device.allocate(_bound_size(n), zero_fill=False) for n in input_sizes]
            self.output = device.allocate(output_size, zero_fill=False)
            # What the host writes (inputs) and reads (the output, last).
            for buffer in (*self.inputs, self.output):
                block = buffer._block
                if block.arena.memory.mapped:
                    self._views.append(block.arena.memory.view[block.offset:block.offset + buffer.size_in_bytes])
                    continue
                staging = device._take(device._staging, buffer.size_in_bytes)
                self._staging.append((staging, buffer))
                self._views.append(staging.arena.memory.view[staging.offset:staging.offset + buffer.size_in_bytes])
            for view in self._views[:-1]:
                view[:] = 0  # padding past the data reads as zeros, as after `upload`
        except BaseException:
            self.close()
            raise

    def record(self, launch: Launch) -> None:
        device = self.device
        commands = device._context.commands()
        commands.barrier()  # earlier work in the stream -> this call
        copies = [(staging, buffer) for staging, buffer in self._staging if buffer is not self.output]
        for staging, buffer in copies:
            commands.copy(staging.arena.memory.handle, buffer._block.arena.memory.handle,
                          staging.offset, buffer._block.offset, buffer.size_in_bytes)
        if copies:
            commands.barrier()
        commands.dispatch(launch.pipeline.handle, launch.push)
        for staging, buffer in self._staging:
            if buffer is self.output:
                commands.barrier()
                commands.copy(buffer._block.arena.memory.handle, staging.arena.memory.handle,
                              buffer._block.offset, staging.offset, buffer.size_in_bytes)
        commands.host_barrier()
        self._recorded = Recorded(device, commands, "a call on host data", [launch.key])
        self._launch = launch  # its pipeline lives as long as the call (pinned)

    @interrupts.critical
    def start(self, inputs) -> int | None:
        """Copy flat uint8 `inputs` (each at most its buffer's size) in and submit; returns the
        stream position to `finish` with, or None where it did not start (another thread runs
        it, it was closed, or its device is closing). A started call must be finished.

        Its copies run outside the device's lock, so `Device.close` waits for them (from here
        to the end of `finish`) before it frees any memory."""
        if not self._busy.acquire(blocking=False):
            return None
        device = self.device
        position = None
        using = False
        try:
            if not self._closed:
                using = device._use_memory()
            if using:
                for view, data in zip(self._views, inputs):
                    host_copy.copy(view[:data.size], data)
                with device._lock:
                    if not device.closed:
                        position = self._recorded.submit((*self.inputs, self.output))
            return position
        finally:
            if position is None:
                if using:
                    device._memory_used()
                self._end()

    @interrupts.critical
    def finish(self, position: int, out: np.ndarray | None) -> None:
        """Wait for the started call and copy the first `out.size` bytes of its output into
        flat uint8 `out` (nothing when `out` is None)."""
        device = self.device
        try:
            with device._lock:
                device._stream.wait(position)
            if out is not None:
                host_copy.copy(out, self._views[-1][:out.size])
        finally:
            device._memory_used()
            self._end()

    def _end(self) -> None:
        self._busy.release()
        if self._closed:
            self.close()  # closed while it ran: free now

    @interrupts.critical
    def close(self) -> None:
        """Give its memory and command buffer back (at once, or when a started call is finished)."""
        self._closed = True
        if not self._busy.acquire(blocking=False):
            return
        try:
            device = self.device
            with device._lock:
                if self._freed:
                    return
                self._freed = True
                if self._recorded is not None:
                    self._recorded.destroy()
                for staging, _ in self._staging:
                    if not device.closed:
                        device._staging.free(staging)
                for buffer in (*self.inputs, self.output):
                    if buffer is not None:
                        buffer.release()
                self._views = []
        finally:
            self._busy.release()


class Recorded:
    """A command buffer recorded once (a command list) and submitted on the stream on demand.

    The pipelines it dispatches (`keys`) are pinned in the device's cache until `destroy`."""

    def __init__(self, device, commands, name, keys=()):
        self.device = device
        self._commands = commands
        self.name = name
        self._keys = list(keys)
        with device._lock:
            device._pin(self._keys)

    def submit(self, buffers) -> int:
        """Queue it after everything queued; `buffers` (what it uses) are in use until it ends.
        Returns its stream position."""
        device = self.device
        with device._lock:
            device._stream.submit_recorded(self._commands, self.name)
            position = device._stream.position - 1
            for buffer in buffers:
                buffer.last_use = position
            return position

    def destroy(self) -> None:
        device = self.device
        with device._lock:
            keys, self._keys = self._keys, []
            if device.closed:
                return
            device._unpin(keys)
            if self._commands is None:
                return
            device._stream.synchronize()
            self._commands.destroy()
            self._commands = None


def _bound_size(nbytes: int) -> int:
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


class Buffer:
    """Device memory (DirectML binds ID3D12Resource buffers; this is its Vulkan stand-in).

    A block of one of the device's pooled arenas. Reads wait for the work queued on it; writes
    are queued behind that work (or wait for it, where the device's memory is mapped).
    """

    def __init__(self, device: Device, size_in_bytes: int, block):
        self.device = device
        self.size_in_bytes = size_in_bytes
        self.serial = next(_SERIALS)  # never reused, unlike id(): keys caches of bound ranges
        self._block = block
        self.last_use = 0  # stream position of the last queued work on this buffer
        device._live += 1

    def __repr__(self):
        state = "released" if self.released else f"{self.size_in_bytes} bytes"
        return f"<dmlgpu.Buffer {state} on {self.device.name}>"

    @property
    def released(self) -> bool:
        return self._block is None or self.device.closed

    @property
    def block_key(self) -> tuple:
        """(arena id, offset) of its memory: the same for no two live buffers (AttributeError
        once released)."""
        block = self._block
        return block.arena.id, block.offset

    @property
    def arena_offset(self) -> int:
        """Where the buffer starts in the memory its dispatches bind (a multiple of 256)."""
        return self._block.offset

    def _check_range(self, offset, size, what):
        if self.released:
            fork.check()
            raise ValidationError("dmlgpu", None, "buffer", "released buffer", "allowed: a live Buffer")
        if not is_int(offset) or not is_int(size) or offset < 0 or size < 0 \
                or offset + size > self.size_in_bytes:
            raise ValidationError("dmlgpu", None, what, (offset, size),
                                  f"allowed: a range inside the buffer's {self.size_in_bytes} bytes")

    def read(self, offset: int = 0, size: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Copy `size` bytes from `offset` (default: to the end) into a new uint8 array, or into
        `out`: a writeable, contiguous 1-D uint8 array of exactly `size` bytes."""
        with self.device._lock:
            size = self.size_in_bytes - offset if size is None and is_int(offset) else size
            self._check_range(offset, size, "read range")
            if out is not None and not (isinstance(out, np.ndarray) and out.dtype == np.uint8
                                        and out.shape == (size,) and out.flags.c_contiguous
                                        and out.flags.writeable):
                given = (f"{type(out).__name__} {out.dtype} {out.shape}" if isinstance(out, np.ndarray)
                         else type(out).__name__)
                raise ValidationError("dmlgpu", None, "out", given,
                                      f"allowed: a writeable, contiguous 1-D uint8 array of {size} bytes")
            return self.device._read(self, int(offset), int(size), out)

    def write(self, array, offset: int = 0) -> None:
        """Copy the bytes of `array` (C order) into the buffer at `offset`, after queued work."""
        data = as_bytes(array)
        with self.device._lock:
            self._check_range(offset, data.size, "write range")
            if data.size:
                self._write(data, int(offset), fresh=False)

    def _write(self, data, offset, fresh):
        self.device._write(self, data, offset, fresh)

    def release(self) -> None:
        """Return the memory to the pool now (after queued work on it; also done by GC)."""
        device = self.device
        with device._lock:
            block, self._block = self._block, None
            if block is None or device.closed:
                return
            device._live -= 1
            device._memory.free(block, self.last_use if self.last_use > device._stream.completed else None)

    def __copy__(self) -> "Buffer":
        """A new buffer of the same size holding a copy of the data (never shared memory)."""
        device = self.device
        with device._lock:
            data = self.read()
            copy = device.allocate(self.size_in_bytes, zero_fill=False)
            copy.write(data)
            return copy

    def __deepcopy__(self, memo) -> "Buffer":
        return self.__copy__()

    def __reduce__(self):
        raise TypeError("a dmlgpu.Buffer cannot be pickled: read() its bytes, or pickle a Tensor")

    @interrupts.critical  # a Ctrl-C here is raised after it, not lost
    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown: kp may already be gone
            pass


_DEVICES: weakref.WeakSet = weakref.WeakSet()


def open_devices() -> list[Device]:
    return list(_DEVICES)
