"""Calls on host data kept with their own memory and one recorded command buffer (`HostCall`),
and the run of a call's pieces overlapped.

A call on host data of at most `HOST_CALL_BYTES`, repeated, keeps its device and staging memory
and one command buffer recorded for it: copies in, the dispatch and the copy out run with no
block taken or freed and nothing recorded per call.
"""
from __future__ import annotations

import threading

import numpy as np

from . import host_copy, interrupts, limits, threads
from .buffers import bound_size
from .launches import Recorded

#: A call on host data of at most this many bytes (inputs and output together), repeated, keeps
#: its device and staging memory and one command buffer recorded for it (`Device.host_call`):
#: at 1 MiB a call's fixed Python (blocks taken and freed, copies and the dispatch recorded,
#: three submits) was ~60-80 us on the H100's host, more than its device time. Larger calls
#: are dominated by their copies and go through the pipelined transfers.
HOST_CALL_BYTES = 4 << 20
#: A call on host data through staging memory that moves at least this many bytes (inputs and
#: output) runs as two host calls over its halves, overlapped (`Device.run_host_calls`): the
#: second half's host copy in runs while the device copies and computes the first half, and
#: the first half's copy out while the device does the second. Measured on an H100 (one
#: process, `benchmarks/front_end_segments.py`): 1 MiB of data (2 MiB moved) 332 -> 324 us,
#: 2 MiB 610 -> 555 us, but 256 KiB 110 -> 131 us (the second submit and wait cost more than
#: they hide), so smaller calls run whole.
HOST_CALL_SPLIT_BYTES = 2 << 20


def kept_call(device, resources, key, input_sizes, output_size: int, make_launch) -> "HostCall | None":
    """`Device.host_call`: the kept HostCall for `key`, made on first use; None when too large."""
    if sum(input_sizes) + output_size > HOST_CALL_BYTES:
        return None
    with resources.lock:
        resources.check_open()
        calls = resources.host_calls
        call = calls.get(key)
        if call is not None:
            calls.move_to_end(key)
            return call
        call = HostCall(device, resources, input_sizes, output_size)
        try:
            call.record(make_launch(call.inputs, call.output))
        except BaseException:
            call.close()
            raise
        calls[key] = call
        while len(calls) > limits.CACHE_LIMITS["host_calls"]:
            calls.popitem(last=False)[1].close()
        return call


def pieces(mapped: bool, nbytes: int) -> int:
    """How many host calls a call on host data moving `nbytes` (inputs and output) runs as:
    none above HOST_CALL_BYTES; 2 where transfers go through staging (not `mapped`) and it
    moves at least HOST_CALL_SPLIT_BYTES; else 1 (mapped memory has no device copies to hide)."""
    if nbytes > HOST_CALL_BYTES:
        return 0
    return 2 if not mapped and nbytes >= HOST_CALL_SPLIT_BYTES else 1


@interrupts.critical
def run(calls, inputs, outs) -> bool:
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
            call.finish(position, out, interruptible=True)
        return True
    finally:
        for call, position in started[finished:]:  # after a piece failed to start or finish
            call.finish(position, None)


class HostCall:
    """A call on host data recorded once: its own device buffers, staging memory where the
    device's memory is not mapped, and one command buffer holding the uploads, the dispatch and
    the download, with the barriers between them.

    `start` copies the inputs in and submits that command buffer on the stream (after queued
    work); `finish` waits for it and copies the output out: no block is taken or freed and
    nothing is recorded per call. One thread runs it at a time; `start` returns None to a
    second (it takes the general path then) and after `close`.
    """

    def __init__(self, device, resources, input_sizes, output_size: int):
        self.device = device
        self._resources = resources
        self.inputs, self.output, self._staging, self._views = [], None, [], []
        self._recorded = self._launch = None
        self._busy = threading.Lock()
        self._closed = self._freed = False
        try:
            self.inputs = [device.allocate(bound_size(n), zero_fill=False) for n in input_sizes]
            self.output = device.allocate(output_size, zero_fill=False)
            # What the host writes (inputs) and reads (the output, last).
            for buffer in (*self.inputs, self.output):
                block = buffer.block
                if block.arena.memory.mapped:
                    self._views.append(block.arena.memory.view[block.offset:block.offset + buffer.size_in_bytes])
                    continue
                staging = resources.take(resources.staging, buffer.size_in_bytes)
                self._staging.append((staging, buffer))
                self._views.append(staging.arena.memory.view[staging.offset:staging.offset + buffer.size_in_bytes])
            for view in self._views[:-1]:
                view[:] = 0  # padding past the data reads as zeros, as after `upload`
        except BaseException:
            self.close()
            raise

    def record(self, launch) -> None:
        resources = self._resources
        commands = resources.context.commands()
        commands.barrier()  # earlier work in the stream -> this call
        copies = [(staging, buffer) for staging, buffer in self._staging if buffer is not self.output]
        for staging, buffer in copies:
            commands.copy(staging.arena.memory.handle, buffer.block.arena.memory.handle,
                          staging.offset, buffer.block.offset, buffer.size_in_bytes)
        if copies:
            commands.barrier()
        commands.dispatch(launch.pipeline.handle, launch.push)
        for staging, buffer in self._staging:
            if buffer is self.output:
                commands.barrier()
                commands.copy(buffer.block.arena.memory.handle, staging.arena.memory.handle,
                              buffer.block.offset, staging.offset, buffer.size_in_bytes)
        commands.host_barrier()
        self._recorded = Recorded(resources, commands, "a call on host data", [launch.key])
        self._launch = launch  # its pipeline lives as long as the call (pinned)

    @interrupts.critical
    def start(self, inputs) -> int | None:
        """Copy flat uint8 `inputs` (each at most its buffer's size) in and submit; returns the
        stream position to `finish` with, or None where it did not start (another thread runs
        it, it was closed, or its device is closing). A started call must be finished.

        Its copies run outside the device's lock, so `Device.close` waits for them (from here
        to the end of `finish`) before it frees any memory."""
        threads.entered()  # (before anything is taken: SystemExit in a daemon thread at exit)
        if not self._busy.acquire(blocking=False):
            return None
        resources = self._resources
        position = None
        using = False
        try:
            if not self._closed:
                using = resources.use_memory()
            if using:
                for view, data in zip(self._views, inputs):
                    host_copy.copy(view[:data.size], data)
                with resources.lock:
                    if not resources.closed:
                        position = self._recorded.submit((*self.inputs, self.output))
                        resources.transfers.upload(sum(data.size for data in inputs))
            return position
        finally:
            if position is None:
                if using:
                    resources.memory_used()
                self._end()

    @interrupts.critical
    def finish(self, position: int, out: np.ndarray | None, interruptible: bool = False) -> None:
        """Wait for the started call and copy the first `out.size` bytes of its output into
        flat uint8 `out`; with `out` None, give the call up unwaited (after an error in a
        call of several pieces). `interruptible`: a Ctrl-C ends the wait (KeyboardInterrupt,
        nothing copied out). A call given up stays queued and tracked: its next `start` waits
        for it before submitting again, and `close` before freeing its memory."""
        resources = self._resources
        try:
            if out is not None:
                with resources.lock:
                    resources.stream.wait(position, interruptible)
                    resources.transfers.download(out.size)
                host_copy.copy(out, self._views[-1][:out.size])
        finally:
            resources.memory_used()
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
            resources = self._resources
            with resources.lock:
                if self._freed:
                    return
                self._freed = True
                if self._recorded is not None:
                    self._recorded.destroy()
                for staging, _ in self._staging:
                    if not resources.closed:
                        resources.staging.free(staging)
                for buffer in (*self.inputs, self.output):
                    if buffer is not None:
                        buffer.release()
                self._views = []
        finally:
            self._busy.release()
