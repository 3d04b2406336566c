"""Long device work cut into submits of a few tens of milliseconds, so that Ctrl-C is seen soon.

A search queues its dispatches through a `Pacer`, saying what each costs (in row-words: rows x
queries x 32-bit words, the scan's unit; other kernels convert). The pacer submits whenever about
SLICE_S seconds of work are queued, and keeps at most one submitted slice ahead of the host: it
waits for the older one. A wait that blocks in the driver returns within a slice, so Python's
SIGINT handler runs within about two slices; the device keeps a slice queued meanwhile, so it
never idles. The rate (row-words per second) is measured from each finished slice.

On any exception (KeyboardInterrupt included) `Pacer.drain` waits for the slices already
submitted before it lets the exception go: the device is never left writing into memory that
the caller is about to drop or reuse.
"""
from __future__ import annotations

import time
from collections import deque

__all__ = ["Cancelled", "Pacer"]

#: Seconds of device work per submit.
SLICE_S = 0.025
#: First guesses of the rate (row-words per second) before a slice has been measured.
RATE_GPU, RATE_CPU = 2e12, 4e8


class Cancelled(Exception):
    """Another thread asked the search to stop (a Ctrl-C in the main thread of a sharded search)."""


class Pacer:
    def __init__(self, device, cancel=None):
        self.device = device
        self.cancel = cancel
        self.rate = RATE_CPU if device.is_cpu else RATE_GPU
        self._measured = False
        self._inflight: deque = deque()  # (position, cost, submitted at)
        self._pending = 0
        self._last_done = 0.0

    @property
    def budget(self) -> int:
        """Row-words one slice holds."""
        return max(1, int(self.rate * SLICE_S))

    def queued(self, cost: int) -> None:
        """Count `cost` row-words just queued; submit once a slice's worth is."""
        self._pending += cost
        if self._pending >= self.budget:
            self.submit()

    def submit(self) -> None:
        """Submit what is queued; wait until at most one slice is in flight."""
        if self._pending:
            self._inflight.append((self.device.flush(), self._pending, time.perf_counter()))
            self._pending = 0
        while len(self._inflight) > 1:
            self._wait_oldest()
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled

    def _wait_oldest(self) -> None:
        position, cost, submitted = self._inflight.popleft()
        start = max(submitted, self._last_done)
        self.device.wait_for(position)
        done = self._last_done = time.perf_counter()
        if done > start and cost:
            rate = cost / (done - start)
            self.rate = rate if not self._measured else 0.5 * (self.rate + rate)
            self._measured = True

    def drain(self) -> None:
        """Wait for everything queued and submitted."""
        self._pending = 0
        self._inflight.clear()
        self.device.synchronize()
