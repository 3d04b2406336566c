"""`Device`: the handle of one open Vulkan device, as the layers above see it.

It opens the device and owns its parts (`resources.Resources`: context, lock, stream, memory
pools, pipelines with their on-disk cache, kept host calls), hands them to the modules that do the work and closes them:

- memory and host transfers: `buffers` (`Buffer`, staging pipelines);
- work: `launches` (`Launch`, `Results`, `Recorded`), queued on the device's `Stream` and
  returned from at once; the host waits only to read (`Buffer.read`), to write memory the
  device may still use, and in `synchronize()`;
- calls on host data: `host_calls`; device memory handed to numpy: `hand_over`;
- benchmark-only timing: `timing`.
"""
from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from ..errors import DeviceError, ValidationError
from . import (buffers, debug_layer, discovery, float_controls, fork, host_calls, interrupts, launches,
               shader_compiler, timing, vulkan)
from .buffers import Buffer
from .hand_over import HandOvers
from .launches import Launch, Program, Rebound, Recorded, Results
from .limits import is_int
from .memory import trim_host_heap
from .pipelines import seeded_disk_cache
from .probe import physical_device_count
from .resources import Resources

#: Device types whose device memory the host can map (no staging copies needed).
_MAPPED_TYPES = ("CPU", "integrated GPU")
#: Shared arenas hold at most this much (or the device's maxStorageBufferRange if smaller).
ARENA_BYTES = 256 << 20


class Device:
    """One open Vulkan context on one physical device: memory, a stream of work, pipelines,
    kept host calls. It knows no DirectML operator: `dmlgpu.Device` (dmlgpu/device.py) adds
    operator and graph compilation and the process-wide sharing of one device per index. Each
    construction of this class opens a new context.

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
        # glslang's first compile (its built-in tables) overlaps the driver's start-up, so that
        # the process's first fused graph finds the compiler ready (runtime/shader_compiler.py).
        shader_compiler.warm_up()
        context = vulkan.Context(0)
        found = context.devices()
        if index is None:
            index = discovery.choose_device(found)
        elif not is_int(index) or not 0 <= index < len(found):
            context.destroy()
            raise DeviceError(f"device index {index!r} is out of range; there are {len(found)}")
        if index != 0:
            context.destroy()
            context = vulkan.Context(int(index))
        self.index = int(index)
        self.properties = dict(found[index])
        # the float widths whose subnormals every kernel keeps (runtime/float_controls.py)
        self.properties["denorm_preserve"] = tuple(sorted(float_controls.widths_kept({16, 32, 64}, context.float_controls)))
        # 64-bit float arithmetic, enabled where the device has it (the float sums' DOUBLES kernels)
        self.properties["float64"] = context.float_controls.float64
        self.name = self.properties["device_name"]
        self.type = discovery.DEVICE_TYPES.get(self.properties["device_type"], "unknown")
        self.max_buffer_size = int(self.properties["max_storage_buffer_range"]) // 16 * 16
        if staging is None:
            staging = os.environ.get("DMLGPU_STAGING", "") == "1"
        self.mapped = self.type in _MAPPED_TYPES and not staging  # else transfers go through staging
        self._resources = resources = Resources(
            context, self.label, self.mapped, min(ARENA_BYTES, self.max_buffer_size), buffers.STAGING_ARENA,
            debug_layer.requested(), seeded_disk_cache(context, self.properties))
        interrupts.watch_lock(resources.lock._is_owned)  # Ctrl-C waits while the main thread holds it
        self._hand_overs = HandOvers(resources)
        _DEVICES.add(self)

    def __repr__(self):
        return f"<dmlgpu.Device {self.index}: {self.name} ({self.type})>"

    @property
    def label(self) -> str:
        """'device 1 (NVIDIA H200)': names a device in messages, also among identical ones."""
        return f"device {self.index} ({self.name})"

    def __enter__(self):
        discovery.push_current(self)
        return self

    def __exit__(self, *exc):
        discovery.pop_current()
        return False

    @property
    def lock(self):
        """The device's lock (reentrant): while a thread holds it, no other changes the device's
        state; a subclass keeps its own caches under it too."""
        return self._resources.lock

    @property
    def closed(self) -> bool:
        return self._resources.closed

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
        resources = self._resources
        with resources.lock:
            if resources.dropped:
                resources.absorb_dropped()
            return resources.live

    def check_open(self, operator: str = "dmlgpu", what: str = "device") -> None:
        """ValidationError (naming `operator`) if the device is closed; DeviceError in a
        process forked after its parent used it."""
        self._resources.check_open(operator, what)

    # -- memory ----------------------------------------------------------------------------
    def allocate(self, size_in_bytes: int, *, zero_fill: bool = True, device_writes_first: bool = False) -> Buffer:
        """A device buffer of `size_in_bytes` bytes, zero-filled on the device unless asked not to.
        `device_writes_first` (with `zero_fill=False`): the caller's first use of it is a
        dispatch queued on this device that writes it, so memory whose queued uses are not done
        may be taken at once (the stream orders that write after them): the block a dropped
        result of the same size had, as a loop's new results reuse two or three blocks."""
        if not is_int(size_in_bytes) or not 1 <= size_in_bytes <= self.max_buffer_size:
            raise ValidationError("dmlgpu", None, "size_in_bytes", size_in_bytes,
                                  f"allowed: 1 to {self.max_buffer_size} bytes (the device's "
                                  "maxStorageBufferRange)")
        return buffers.allocate(self, self._resources, size_in_bytes, zero_fill, device_writes_first)

    def upload(self, array) -> Buffer:
        """A device buffer holding a copy of `array`'s bytes (C order).

        Its size is rounded up to a multiple of 4, as DirectML requires of bound buffers, so a
        tensor's data uploaded this way can be bound as that tensor.
        """
        return buffers.upload(self, self._resources, array)

    def memory_stats(self) -> dict:
        """Bytes in use, reserved, peak; arenas and dedicated buffers; staging; pipelines; host
        transfers since the device opened (`uploads`/`downloads` and their bytes: writes and
        reads of buffers, host calls' copies in and out, arrays handed over to the host)."""
        resources = self._resources
        with resources.lock:
            if resources.dropped:
                resources.absorb_dropped()
            stats = resources.memory.stats()
            staging = resources.staging
            stats["staging_reserved_bytes"] = staging.stats()["reserved_bytes"] if staging else 0
            stats["pipelines"] = len(resources.pipelines)
            stats["pinned_pipelines"] = resources.pipelines.pinned
            stats["live_buffers"] = resources.live
            stats["command_buffers"] = resources.stream.command_buffers + len(resources.host_calls)
            stats["host_calls"] = len(resources.host_calls)
            stats["submits"] = resources.stream.submits
            stats["barriers"] = resources.stream.barriers
            stats.update(resources.transfers.stats())
            return stats

    def empty_cache(self) -> None:
        """Give back what no live object needs, after queued work ends: kept host calls,
        pipelines no recorded command buffer uses, and every arena no live buffer uses."""
        resources = self._resources
        with resources.lock:
            resources.check_open()
            resources.give_back()
            resources.pipelines.retire_unpinned()
            resources.stream.synchronize()
            resources.reclaim(resources.stream.completed)
            trim_host_heap()

    def pipeline_stats(self) -> dict:
        """Pipelines this device created and the seconds it spent creating them (the driver's
        compilation, or a lookup in the pipeline cache seeded from disk), and the disk cache:
        its file, `status` ("disabled", "missing", "loaded", "rejected: ...", "saved",
        "save failed: ..."), bytes loaded and saved."""
        with self._resources.lock:
            return self._resources.pipelines.stats()

    # -- work ------------------------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait until all queued work has finished."""
        resources = self._resources
        lock = resources.lock  # acquire/release: half the cost of `with` on this hot path
        lock.acquire()
        try:
            resources.synchronize(interruptible=True)
        finally:
            lock.release()

    def flush(self) -> int:
        """Submit the queued work now, without waiting; returns its position for `wait_for`."""
        resources = self._resources
        with resources.lock:
            resources.check_open()
            resources.stream.flush()
            return resources.stream.position - 1

    def wait_for(self, position: int) -> None:
        """Wait until the work submitted up to `position` (from `flush`) has finished: a wait
        that returns as soon as that work does, so that a caller cutting long work into
        submits sees Ctrl-C between them."""
        resources = self._resources
        with resources.lock:
            resources.check_open()
            resources.stream.wait(position)

    def launch(self, program: Program, grid, bindings, push, reads, writes, name: str) -> Launch:
        """Prepare a dispatch of `program` over `grid` binding `bindings` (Buffers, in order).

        `reads`/`writes` are (Buffer, start, end) byte ranges for dependency tracking.
        """
        return launches.prepare(self, self._resources, program, grid, bindings, push, reads, writes, name)

    def results(self, templates, ends, writes, inputs) -> Results:
        """Repeats of the launches `templates` (one call's dispatches, in order), each repeat
        writing bytes [0, end) of a fresh buffer per `ends`: a repeated call that makes new
        results (`launches.Results`: `writes` says, per template, which fresh outputs it
        writes, the push-constant word of each one's word offset in its arena and the binding
        positions that bind it; `inputs` are weak references to the buffers that stay bound)."""
        return Results(self, self._resources, templates, ends, writes, inputs)

    def rebound(self, template: Launch, words, units, sizes, fresh) -> Rebound:
        """`template` re-aimed per call at other buffers of the same layout (`launches.Rebound`)."""
        return Rebound(self, self._resources, template, words, units, sizes, fresh)

    def rebind(self, launch: Launch, buffers) -> Launch:
        """`launch` for other live `buffers` (in binding order) in the very blocks its own
        buffers had: the same pipeline, push constants and ranges."""
        return launch.derived(launch.pipeline, launch.push, launch.reads, launch.writes,
                              tuple(weakref.ref(b) for b in {id(b): b for b in buffers}.values()), launch.key)

    def enqueue(self, launch: Launch) -> bool:
        """Queue one prepared dispatch behind the work it depends on; returns at once.

        Returns False, queuing nothing, when the launch is no longer valid (a buffer of it was
        released, or its pipeline went with an arena): checked under the lock, so no other
        thread can release one in between.
        """
        return launches.enqueue(self._resources, launch)

    def record(self, steps, name: str) -> Recorded:
        """Record a list of launches (with None for a barrier) into a reusable command buffer."""
        return launches.record(self._resources, steps, name)

    def time_dispatches(self, launch, repeats: int) -> np.ndarray:
        """GPU seconds of `repeats` back-to-back runs of `launch` (a Launch, or a sequence of
        them run in order with a barrier after each), each behind a barrier."""
        return timing.time_dispatches(self._resources, launch, repeats, self.properties["timestamp_period"])

    def submit_floor(self, launch: Launch, repeats: int) -> np.ndarray:
        """Wall seconds of submitting a command buffer that holds only `launch`, recorded once,
        and waiting for its fence, `repeats` times (`timing.submit_floor`)."""
        return timing.submit_floor(self._resources, launch, repeats)

    # -- calls on host data ----------------------------------------------------------------
    def hand_over(self, buffer: Buffer, nbytes: int) -> np.ndarray:
        """A uint8 numpy array that *is* the first `nbytes` bytes of `buffer`, on a device whose
        memory the host maps (`mapped`): a result computed into `buffer` reaches the caller with
        no download and no fresh host pages. Waits for queued work on the buffer.

        The array owns the buffer from then on: its memory stays allocated while the array or
        any view of it lives, and returns to the pool after; the caller must not use `buffer`
        again. If the device is closed first, its memory is destroyed when the last such
        array goes.
        """
        return self._hand_overs.hand_over(buffer, nbytes)

    def host_call(self, key, input_sizes, output_size: int, make_launch) -> "host_calls.HostCall | None":
        """The kept `HostCall` for `key` (any hashable naming the call), made on first use with
        device buffers for `input_sizes` bytes of data each (padded as `upload` pads) and an
        `output_size`-byte output; `make_launch(inputs, output)` returns the dispatch over those
        buffers. None for calls larger than HOST_CALL_BYTES."""
        return host_calls.kept_call(self, self._resources, key, input_sizes, output_size, make_launch)

    def host_call_pieces(self, nbytes: int) -> int:
        """How many host calls a call on host data moving `nbytes` (inputs and output) runs as:
        none above HOST_CALL_BYTES; 2 where transfers go through staging and it moves at least
        HOST_CALL_SPLIT_BYTES; else 1 (mapped memory has no device copies to hide)."""
        return host_calls.pieces(self.mapped, nbytes)

    @interrupts.critical
    def run_host_calls(self, calls, inputs, outs) -> bool:
        """Run kept host calls over pieces of one call, overlapped (`host_calls.run`); False,
        with nothing copied out, if a piece could not start: the caller takes the general path."""
        return host_calls.run(calls, inputs, outs)

    # -- lifetime --------------------------------------------------------------------------
    @interrupts.critical
    def close(self) -> None:
        """Finish queued work, then release every buffer, pipeline and the Vulkan device.

        Done for every open device at interpreter exit; buffers, operators and command lists of
        a closed device raise ValidationError when used. Other threads' calls in flight finish
        first (or raise ValidationError if they start after this); threads copying into or out
        of device memory (calls on host data) are waited for before any memory is freed.
        """
        resources = self._resources
        with resources.lock:
            if resources.closed:
                return
            resources.closing_now = True
            resources.wait_unused()  # releases the lock while it waits
            try:
                resources.stream.synchronize()
            except DeviceError:
                pass
            resources.close_host_calls()
            resources.stream.destroy()
            resources.pipelines.destroy()
            interrupts.unwatch_lock(resources.lock._is_owned)
            closing = [resources.memory.destroy, resources.context.destroy]
            if resources.staging is not None:
                resources.staging.destroy()
            resources.closed = True
            resources.dropped.clear()  # (blocks of the memory just destroyed)
            self._hand_overs.close(closing)

    def _became_fork_child(self) -> None:
        """In a forked child: the device is the parent's; never use or destroy it here."""
        resources = self._resources
        resources.lock = threading.RLock()  # the parent's may have been held by a thread the child lacks
        resources.forked = resources.closed = True
        self._hand_overs.privatize()
        fork.leak(self)


_DEVICES: weakref.WeakSet = weakref.WeakSet()


def open_devices() -> list[Device]:
    return list(_DEVICES)


def _after_fork_in_child() -> None:
    if fork.became_child():
        for device in list(_DEVICES):
            device._became_fork_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
