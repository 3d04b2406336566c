"""What a device's parts share: its Vulkan context, lock, stream, memory pools, pipelines and
kept host calls, with the few operations on them that buffers, transfers, launches and host
calls need (take a block, track a span, re-make a retired pipeline, wait for threads copying
outside the lock).

`Device` is the handle the layers above use; its collaborators (`buffers`, `launches`,
`host_calls`, `hand_over`, `timing`) are given this object, never the `Device`, and touch
nothing of it but what is public here.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from ..errors import DeviceMemoryError, ValidationError
from . import fork, threads
from .memory import MemoryPool
from .pipelines import PipelineCache
from .stream import Stream, replay_key


class Transfers:
    """Copies between host memory and the device's memory, counted where they happen (a buffer's
    write and read, a host call's copies in and out, an array handed over to the host): how many
    and how many bytes each way, for `Device.memory_stats`. The caller holds the device's lock."""

    __slots__ = ("uploads", "upload_bytes", "downloads", "download_bytes")

    def __init__(self):
        self.uploads = self.upload_bytes = self.downloads = self.download_bytes = 0

    def upload(self, nbytes: int) -> None:
        self.uploads += 1
        self.upload_bytes += int(nbytes)

    def download(self, nbytes: int) -> None:
        self.downloads += 1
        self.download_bytes += int(nbytes)

    def stats(self) -> dict:
        return {name: getattr(self, name) for name in self.__slots__}


class Resources:
    """The state of one open device (`context`, named `label` in messages).

    Args:
        mapped: the host maps the device's memory (no staging pool is made).
        arena_bytes: the size of each shared arena of device memory.
        staging_bytes: the size of the staging arena (where the memory is not mapped).
        whole_arenas: track every access as the whole arena (under the validation layer).
        disk_cache: the on-disk pipeline cache the context's pipeline cache was seeded from.
    """

    def __init__(self, context, label: str, mapped: bool, arena_bytes: int, staging_bytes: int,
                 whole_arenas: bool, disk_cache):
        self.context = context
        self.label = label
        self.whole_arenas = whole_arenas
        self.lock = threading.RLock()
        self.users = 0  # threads copying into or out of device memory outside the lock
        self._unused = threading.Condition(self.lock)  # notified when users drops to 0
        self.stream = Stream(context)
        self.stream.on_complete = self.reclaim
        self.pipelines = PipelineCache(context, self.stream, disk_cache)
        self.memory = MemoryPool(lambda n: context.memory(n, mapped), arena_bytes, self.pipelines.drop_arena)
        self.staging = None if mapped else MemoryPool(lambda n: context.memory(n, True), staging_bytes)
        self.host_calls: OrderedDict = OrderedDict()  # key -> HostCall, least recently used first
        self.live = 0  # Buffers allocated and not yet released (those in `dropped` count)
        #: (last use, block) of Buffers dropped by the garbage collector (`Buffer.__del__`), which
        #: appends without the lock (one list append: a dropped result of `~s` in a loop costs no
        #: lock); taken back under the lock by `take_dropped` and `absorb_dropped`, which every
        #: allocation, reclaim, statistic and `give_back` runs first.
        self.dropped: list = []
        self.transfers = Transfers()
        self.closed = False
        self.closing_now = False  # `close` has begun: no host call starts
        self.forked = False  # a forked child's copy of a parent's device

    def check_open(self, operator: str = "dmlgpu", what: str = "device") -> None:
        """ValidationError (naming `operator`) if the device is closed; DeviceError in a
        process forked after its parent used it; SystemExit in a daemon thread once the
        interpreter's exit began (`threads.entered`)."""
        threads.entered()
        if self.closed:
            if self.forked:
                fork.check()
            raise ValidationError(operator, None, what, "closed",
                                  "allowed: an open Device (this one was closed by Device.close(), or at exit, and "
                                  "its buffers and Tensors with it: open one with dmlgpu.Device(i) and make them again)")

    def synchronize(self, interruptible: bool = False) -> None:
        """Wait for queued work (the caller holds the lock); `interruptible`: a Ctrl-C raises
        meanwhile (`Stream.wait`)."""
        if not self.closed:
            self.stream.synchronize(interruptible)
        elif self.forked:
            fork.check()

    # -- memory ----------------------------------------------------------------------------
    def take(self, pool: MemoryPool, nbytes: int, device_writes_first: bool = False):
        """A block, reusing memory freed by finished work before growing the pool.

        `device_writes_first`: the block's first access is a dispatch or copy queued on this
        device's stream, which orders it after any queued use of a parked block: such a block
        is taken at once rather than waited for (`MemoryPool.take_parked`)."""
        threads.entered()
        if self.closed:  # (callers hold the lock: checked where no close can slip in)
            self.check_open()
        if self.dropped:
            self.absorb_dropped()
        block = None
        if device_writes_first and pool is self.memory:  # the most recently parked first: a loop
            block = pool.take_parked(nbytes)  # that drops its results reuses two or three blocks
        if block is None:
            block = pool.allocate(nbytes, grow=False)
        if block is None:
            self.stream.poll()  # retire finished batches, reclaim what they freed
            block = pool.allocate(nbytes, grow=False)
        while block is None and pool.parked_bytes >= nbytes:
            self.stream.wait(pool.oldest_parked())  # memory freed by queued work: wait for it
            block = pool.allocate(nbytes, grow=False)
        if block is None:
            try:
                block = pool.allocate(nbytes)
            except DeviceMemoryError:
                self.give_back()  # as CuPy's MemoryPool.malloc: free what is cached, retry once
                try:
                    block = pool.allocate(nbytes)
                except DeviceMemoryError as exc:
                    raise DeviceMemoryError(f"{self.label} could not allocate {nbytes} bytes: {exc}") from exc
        return block

    def absorb_dropped(self) -> None:
        """Free the blocks of dropped Buffers (`dropped`; the caller holds the lock): parked
        until the stream completes their last use, as `Buffer.release` frees them."""
        dropped, memory = self.dropped, self.memory
        while dropped:  # (other threads only append meanwhile: every pop finds an entry)
            position, block = dropped.pop()
            if self.closed:  # (the memory went with the device)
                continue
            self.live -= 1
            memory.free(block, position if position > self.stream.completed else None)

    def take_dropped(self, nbytes: int):
        """The block of the Buffer dropped last, for `nbytes` whose first access is a dispatch
        queued on this device's stream (as `MemoryPool.take_parked`: the stream orders that write
        after the block's queued uses), or None with every dropped block freed. The caller holds
        the lock and has seen `dropped` non-empty (a loop's `~s`, its result dropped)."""
        dropped = self.dropped
        position, block = dropped.pop()
        if dropped:  # several: freed (parked), `take_parked` then finds them
            dropped.append((position, block))
            self.absorb_dropped()
            return None
        self.live -= 1
        if block.size == nbytes or self.memory.reusable(block, nbytes):  # (equal: a block of that size)
            return block
        self.memory.free(block, position if position > self.stream.completed else None)
        return None

    def give_back(self) -> None:
        """Wait for queued work (what it freed comes back), close kept host calls and give
        every arena no live buffer uses back to the driver, in both pools."""
        self.stream.synchronize()
        if self.dropped:
            self.absorb_dropped()
        self.close_host_calls()
        self.memory.release_unused()
        if self.staging is not None:
            self.staging.release_unused()

    def reclaim(self, completed: int) -> None:
        """Free what work up to stream position `completed` held (the stream calls it)."""
        if self.dropped:
            self.absorb_dropped()
        self.memory.reclaim(completed)
        if self.staging is not None:
            self.staging.reclaim(completed)
        self.pipelines.reclaim(completed)

    def span(self, block, start: int, end: int) -> tuple:
        """(arena id, start, end) of bytes [start, end) of `block`, as the stream tracks them.

        Under DMLGPU_VALIDATION the whole arena: the validation layer's synchronization checks
        see what a descriptor binds (the whole arena), not the bytes a shader touches, so there
        every access to an arena is ordered after the last write to it.
        """
        if self.whole_arenas:
            return (block.arena.id, 0, block.arena.nbytes)
        return (block.arena.id, block.offset + start, block.offset + end)

    def arenas_by_id(self, ids) -> list:
        arenas = {a.id: a for pool in (self.memory, self.staging) if pool for a in pool.arenas}
        return [arenas[i] for i in ids]

    # -- pipelines -------------------------------------------------------------------------
    def current(self, launch):
        """`launch`'s pipeline, made again if it was retired (its buffers are live)."""
        pipeline = launch.pipeline
        if pipeline.handle is None:
            program_key, grid, arena_ids = launch.key
            _, pipeline = self.pipelines.get(launch.program, grid, self.arenas_by_id(arena_ids))
            launch.pipeline, launch.replay_key = pipeline, replay_key(pipeline, launch.push)
        return pipeline

    # -- calls on host data ----------------------------------------------------------------
    def close_host_calls(self) -> None:
        while self.host_calls:
            self.host_calls.popitem()[1].close()

    def use_memory(self) -> bool:
        """A thread is about to copy into or out of device memory outside the lock (a host
        call): False once the device is closing, else `close` waits for `memory_used`."""
        with self.lock:
            if self.closed or self.closing_now:
                return False
            self.users += 1
            return True

    def memory_used(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users == 0:
                self._unused.notify_all()

    def wait_unused(self) -> None:
        """Wait (releasing the lock, which the caller holds) until no thread copies outside it."""
        while self.users:
            self._unused.wait()
