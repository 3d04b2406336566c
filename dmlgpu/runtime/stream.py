"""The device's stream: work queued in order, recorded into an open command buffer, submitted
in batches, with barriers only between dependent work.

One submit costs the GPU 13-17 us while a dispatch behind a barrier costs 1.7 us (see
`docs/internals/performance.md` §1, "Floors"), so queued operations are recorded straight into an open
command buffer and submitted together: when someone must wait (a read, `synchronize`), every
`BATCH_OPS` operations, and as soon as a batch holds more work than its submit costs: at
`EARLY_BYTES` of traffic (bytes its dispatches read and write) where the device has nothing left
to run, at `BATCH_BYTES` whatever it runs. So a device is not left idle while the host records
large operations (a Dask task's chain over 1 GiB blocks queues 7 dispatches and no one waits for
them until the end), and small ones still share a submit. Several command buffers rotate, so the
host records the next batch while the GPU runs the last.

Dependencies are tracked on byte ranges of arenas: an operation that reads or writes bytes
written since the last barrier, or writes bytes read since then, gets one global barrier before
it (read-after-write, write-after-read, write-after-write); independent operations get none and
may overlap on the GPU. The tracked ranges carry over from one submission to the next, because
queue submission order alone orders nothing in Vulkan; once the host has waited for everything
submitted, nothing is owed and the tracking starts afresh.

A dispatch queued while the stream is idle (nothing open, nothing in flight, nothing owed) is
not recorded: a dispatch that was alone before has a command buffer holding only it, recorded
once and kept (`REPLAYS` of them, keyed by pipeline and push constants, made once and
re-recorded for other dispatches), and that is submitted at once, so the device runs it while
the caller goes on to its wait; one alone for the first time is held back, and recorded into
the open batch if other work joins it, or kept at the submit if none does. The common "one
operation, then wait" then costs what a recorded command buffer costs, with no recording, no
command-buffer begin/end and no reset, and its submit overlaps the caller's way to the wait.

Positions: every operation is queued at `position`, the number of the batch being recorded;
`completed` is the number of the last batch known to have finished. Frees and host accesses
wait for positions, never for the whole device unless asked.

Waits go in slices (`interrupts.WAIT_SLICE_NS`). A wait that is `interruptible` (asked for by a
read of results or `synchronize`, where nothing is half queued) raises a Ctrl-C deferred
meanwhile between two slices; the batch it waited for stays in flight and tracked, so the memory
it uses is reused only once a later wait has seen it end.
"""
from __future__ import annotations

from collections import OrderedDict, deque

from ..errors import DeviceError
from . import interrupts
from .spans import overlap

#: Operations recorded before a batch is submitted without being asked.
BATCH_OPS = 64
#: A batch whose dispatches read and write this many bytes is submitted at once where nothing
#: else runs on the device (about 16 us of an H200's bandwidth, where a submit costs it 15-21 us
#: of latency) ...
EARLY_BYTES = 64 << 20
#: ... and at this many whatever runs (about 0.25 ms of an H200's bandwidth: a submit's cost is
#: lost in it).
BATCH_BYTES = 1 << 30
#: Command buffers a stream rotates through; with all of them in flight it waits for the oldest.
MAX_COMMAND_BUFFERS = 4
#: Past this many tracked ranges a barrier is cheaper than checking them all in Python.
MAX_TRACKED = 16
#: Command buffers holding one dispatch each, kept for replay (least recently used dropped).
REPLAYS = 16
#: The barriers `Stream._depends` asks for: between dispatches, or with a copy or fill on a side.
_COMPUTE_BARRIER, _FULL_BARRIER = 1, 2


class Stream:
    def __init__(self, context):
        self._context = context
        self._free: list = []  # command buffers ready to record
        self._inflight: deque = deque()  # (position, commands, recycle, names)
        self._open = None
        self._names: list = []  # what the open batch runs, for error messages
        self._count = 0
        self._bytes = 0  # traffic of the open batch (and of a held-back dispatch)
        self.position = 1  # the batch being recorded (or the next one)
        self.completed = 0
        # Ranges touched since the last barrier, as (arena id, start, end): the very lists a
        # caller passed (never changed by it) until `_shared` is False, copied before appending.
        self._reads: list = []
        self._writes: list = []
        self._shared = False
        self._force_barrier = False
        self._transfers = False  # a copy or fill since the last barrier
        self._solo = None  # (pipeline, push, name): a dispatch held back on an idle stream
        self._replays: OrderedDict = OrderedDict()  # (pipeline id, push bytes) -> (pipeline, commands)
        self._seen: OrderedDict = OrderedDict()  # keys of dispatches lately submitted alone
        self.barriers = 0
        self.submits = 0
        self.on_complete = None  # called with `completed` after waits (reclaims memory)

    # -- recording -------------------------------------------------------------------------
    def _commands(self):
        """The open command buffer (opened on first use)."""
        if self._open is None:
            if not self._free:
                self.poll()
            if not self._free and len(self._inflight) >= MAX_COMMAND_BUFFERS:
                self._retire()  # all in flight: wait for the oldest rather than make another
                if self.on_complete is not None:
                    self.on_complete(self.completed)
            self._open = self._free.pop() if self._free else self._context.commands()
            self._count = 0
            if self._solo is not None:  # no longer alone: record it first, as queued
                pipeline, push, _ = self._solo
                self._solo = None
                self._open.dispatch(pipeline.handle, push)
                self._count = 1
        return self._open

    def dispatch(self, pipeline, push, reads, writes, name: str, key=None, nbytes: int = 0) -> None:
        """Queue a dispatch of `pipeline` (a vulkan.Pipeline) that reads and writes these spans.

        `key` is `replay_key(pipeline, push)`, `nbytes` the bytes its ranges span (what it reads
        and writes: not the spans tracked, which may be whole arenas), both made once by callers
        that repeat a dispatch."""
        if self._open is None and self._solo is None and not self._inflight and not self._force_barrier \
                and not self._reads and not self._writes:  # idle: nothing to order it after
            kept = self._kept(key or replay_key(pipeline, push), pipeline)
            if kept is not None:
                self._submit_solo(kept, (name,))  # alone before: its kept command buffer, now;
            else:  # the bookkeeping below runs while the device works
                self._names.append(name)
                self._solo = (pipeline, push, name)
                self._bytes = nbytes
            self._reads, self._writes, self._shared = reads, writes, True
            self._transfers = False
            if nbytes >= EARLY_BYTES and self._solo is not None:
                self.flush()  # the device is idle: it starts now
            return
        commands = self._open
        if commands is None:
            commands = self._commands()
        barrier = self._depends(reads, writes, False)
        if barrier == _COMPUTE_BARRIER:  # (a chain's every step: one call into C++ for both)
            commands.compute_barrier_dispatch(pipeline.handle, push)
        else:
            if barrier:
                commands.barrier()
            commands.dispatch(pipeline.handle, push)
        self._names.append(name)  # `queued`, inline on this hot path
        self._count += 1
        if self._count >= BATCH_OPS:
            self.flush()
        elif nbytes:
            self._bytes += nbytes
            if self._bytes >= EARLY_BYTES and (self._bytes >= BATCH_BYTES or self._idle()):
                self.flush()

    def _idle(self) -> bool:
        """Whether every submitted batch has finished (asks the device of the newest)."""
        return not self._inflight or self._inflight[-1][1].done()

    def order(self, reads, writes, transfer: bool = False):
        """Record a barrier first if these (arena id, start, end) accesses depend on earlier ones;
        returns the open command buffer. `transfer`: the coming command is a copy or fill, not
        a dispatch (barriers between dispatches alone need not wait for transfers)."""
        commands = self._open
        if commands is None:
            commands = self._commands()
        barrier = self._depends(reads, writes, transfer)
        if barrier == _COMPUTE_BARRIER:
            commands.compute_barrier()
        elif barrier:
            commands.barrier()
        return commands

    def _depends(self, reads, writes, transfer: bool) -> int:
        """Track these accesses; the barrier the coming command needs first: 0 (none),
        _COMPUTE_BARRIER (dispatches after dispatches) or _FULL_BARRIER (a copy or fill on either
        side). The caller records it, in the open command buffer."""
        pending_w, pending_r = self._writes, self._reads
        # (read-after-write first: a chain's next operation reads what the last one wrote)
        dependent = self._force_barrier or len(pending_w) + len(pending_r) > MAX_TRACKED or \
            overlap(reads, pending_w) or overlap(writes, pending_w) or overlap(writes, pending_r)
        if dependent:
            barrier = _FULL_BARRIER if transfer or self._transfers else _COMPUTE_BARRIER
            self.barriers += 1
            self._force_barrier = False
            self._transfers = transfer
            self._reads, self._writes, self._shared = reads, writes, True
            return barrier
        self._transfers = self._transfers or transfer
        if self._shared:  # the caller's lists: appended to as copies
            self._reads = pending_r = list(pending_r)
            self._writes = pending_w = list(pending_w)
            self._shared = False
        for span in reads:
            if span not in pending_r:  # loops read the same ranges again and again
                pending_r.append(span)
        pending_w.extend(writes)
        return 0

    def queued(self, name: str) -> None:
        """Count one recorded operation; submits the batch when it is full."""
        self._names.append(name)
        self._count += 1
        if self._count >= BATCH_OPS:
            self.flush()

    def flush(self) -> None:
        """Submit the open batch (if any) without waiting."""
        if self._solo is not None:
            replay = self._replay(*self._solo[:2])
            if replay is not None:
                self._submit_solo(replay)
                return
            self._commands()  # records it into a command buffer of the rotation
        commands = self._open
        if commands is None:
            return
        commands.host_barrier()  # device writes -> host reads after the fence
        try:
            commands.submit()
        except Exception as exc:
            self._open = None
            commands.reset()
            self._free.append(commands)
            raise DeviceError(f"submitting {_describe(self._names)} failed: {exc}") from exc
        self._inflight.append((self.position, commands, True, self._names))
        self._open, self._names, self._bytes = None, [], 0
        self.position += 1
        self.submits += 1

    def _kept(self, key, pipeline):
        """The kept command buffer holding only this dispatch (`key`), if there is one (most
        recently used now), else None."""
        entry = self._replays.get(key)
        if entry is None or pipeline.handle is None:
            return None
        self._replays.move_to_end(key)
        return entry[1]

    def _replay(self, pipeline, push):
        """The kept command buffer holding only this dispatch, or None: kept from the second
        time a dispatch is submitted alone, in one of `REPLAYS` command buffers made once and
        re-recorded when the least recently used is given to another dispatch (nothing is in
        flight while a dispatch is held back, so none of them is)."""
        key = replay_key(pipeline, push)
        kept = self._kept(key, pipeline)
        if kept is not None:
            return kept
        entry = self._replays.get(key)
        if entry is None and key not in self._seen:  # first time alone: the open buffer takes it
            self._seen[key] = None
            if len(self._seen) > 4 * REPLAYS:
                self._seen.popitem(last=False)
            return None
        if entry is not None:  # its pipeline went with an arena: record it again
            del self._replays[key]
            commands = entry[1]
            commands.reset()
        elif len(self._replays) < REPLAYS:
            commands = self._context.commands()
        else:
            commands = self._replays.popitem(last=False)[1][1]
            commands.reset()
        commands.dispatch(pipeline.handle, push)
        commands.host_barrier()
        self._replays[key] = (pipeline, commands)  # holding `pipeline` keeps its id unique
        return commands

    def _submit_solo(self, commands, names=None) -> None:
        """Submit the held-back dispatch (named `names`, else the open batch's names) from its
        kept command buffer."""
        self._solo = None
        self._bytes = 0
        if names is None:
            names, self._names = self._names, []
        try:
            commands.submit()
        except Exception as exc:
            raise DeviceError(f"submitting {_describe(names)} failed: {exc}") from exc
        self._inflight.append((self.position, commands, False, names))
        self.position += 1
        self.submits += 1

    def submit_recorded(self, commands, name: str) -> None:
        """Queue a command buffer recorded elsewhere (a command list) after everything queued."""
        self.flush()
        for entry in self._inflight:
            if entry[1] is commands:  # still running from an earlier execute: wait for it
                self.wait(entry[0])
                break
        try:
            commands.submit()
        except Exception as exc:
            raise DeviceError(f"submitting {name} failed: {exc}") from exc
        self._inflight.append((self.position, commands, False, [name]))
        self.position += 1
        self.submits += 1
        # The list's own first barrier orders it after earlier work; later work must wait for
        # everything the list touched, which is not tracked here: the next operation gets a barrier.
        self._force_barrier = True
        self._reads, self._writes = [], []

    # -- waiting ---------------------------------------------------------------------------
    def poll(self) -> None:
        """Retire finished batches without waiting."""
        while self._inflight and self._inflight[0][1].done():
            self._retire()
        if self.on_complete is not None:
            self.on_complete(self.completed)

    def _retire(self, interruptible: bool = False) -> None:
        """Wait for the oldest batch in flight, then take it off the list (its command buffer
        back to the free ones): never before it ended, whatever is raised meanwhile."""
        position, commands, recycle, names = self._inflight[0]
        try:
            while not commands.wait_for(interrupts.WAIT_SLICE_NS):
                if interruptible:
                    interrupts.raise_owed()
        except DeviceError as exc:  # the device failed it: it is over
            self._finished(position, commands, recycle)
            raise DeviceError(f"{_describe(names)}: {exc}") from exc
        self._finished(position, commands, recycle)

    def _finished(self, position: int, commands, recycle: bool) -> None:
        self._inflight.popleft()
        self.completed = position
        if recycle:
            commands.reset()
            self._free.append(commands)

    def wait(self, position: int, interruptible: bool = False) -> None:
        """Wait until every batch up to `position` has completed (submitting it if open).

        `interruptible`: a Ctrl-C that comes meanwhile is raised between two slices of the wait
        (only where the caller has nothing half queued); what is in flight stays tracked."""
        if position >= self.position and (self._open is not None or self._solo is not None):
            self.flush()
        while self._inflight and self._inflight[0][0] <= position:
            self._retire(interruptible)
        if not self._inflight and self._open is None and self._solo is None:
            # Everything submitted has completed and the host has seen its fence: the fence
            # signal, the host's wait and the next submit order all of it before later work,
            # so no barrier is owed to it any more.
            self._reads, self._writes = [], []
            self._transfers = self._force_barrier = False
        if self.on_complete is not None:
            self.on_complete(self.completed)

    def synchronize(self, interruptible: bool = False) -> None:
        if self._open is not None or self._solo is not None:
            self.flush()
        self.wait(self.position, interruptible)

    @property
    def command_buffers(self) -> int:
        """Command buffers this stream owns (recycled, never made per operation)."""
        own = sum(1 for entry in self._inflight if entry[2])
        return len(self._free) + own + (self._open is not None) + len(self._replays)

    def destroy(self) -> None:
        for _, commands, recycle, _ in self._inflight:
            try:
                while not commands.wait_for(interrupts.WAIT_SLICE_NS):
                    pass
            except DeviceError:
                pass
        for commands in self._free:
            commands.destroy()
        for _, commands in self._replays.values():
            commands.destroy()
        self._replays.clear()
        self._solo = None
        if self._open is not None:
            self._open.destroy()
        for _, commands, recycle, _ in self._inflight:
            if recycle:
                commands.destroy()
        self._inflight.clear()
        self._free.clear()
        self._open = None


def replay_key(pipeline, push) -> tuple:
    """What a kept command buffer holding one dispatch is found by: its pipeline and push
    constants (a uint32 array)."""
    return id(pipeline), push.tobytes()


def _describe(names) -> str:
    shown = ", ".join(dict.fromkeys(names[:8]))
    return f"queued work ({len(names)} operations: {shown}{', ...' if len(names) > 8 else ''})"
