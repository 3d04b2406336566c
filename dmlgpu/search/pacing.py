"""Long device work cut into submits of a few milliseconds, so that Ctrl-C is seen soon.

A search queues its dispatches through a `Pacer`, saying what each costs (in row-words: rows x
queries x 32-bit words, the scan's unit; other kernels convert) and which kernel it is. The pacer
submits whenever about SLICE_S seconds of one kernel's work are queued (and whenever the kernel
changes: each submit is of one kernel, so its time measures that kernel's rate), and keeps at
most about one slice of work (at the rates known) queued behind the slice the device runs: it
waits for the oldest submit while those after it hold half a slice or more. A wait that blocks
in the driver returns within a slice, so Python's SIGINT handler runs within about two slices;
the device keeps a slice queued meanwhile, so it never idles. A search shorter than that (its
kernels' submits, small ones included) is submitted whole with no wait between its kernels: a
blocking wait wakes tens of microseconds after the work ends, and the next kernel would start
only then. The rate (row-words per second) is
measured from each finished slice, per kernel (a sample histogram runs at a third of the
gather's rate on lavapipe); a slower slice is believed at once. The rates are kept per device
and metric, and the next search starts from them where they are below the first guess (on a
slow or busy host its first slices are already short).

On any exception (KeyboardInterrupt included) `Pacer.drain` waits for the slices already
submitted before it lets the exception go: the device is never left writing into memory that
the caller is about to drop or reuse.
"""
from __future__ import annotations

import time
import weakref
from collections import deque

__all__ = ["Cancelled", "Pacer", "planned_budget"]

#: Seconds of device work per submit: a Ctrl-C waits for at most about two (the one in flight,
#: the one being queued), so 15 ms keeps it under 100 ms with room for a busy host.
SLICE_S = 0.015
#: A wait shorter than this did not block: its slice had already ended.
BLOCKED_S = 0.0005
#: First guesses of the rate (row-words per second) before a slice has been measured. A GPU's is
#: about an H200's register-path scan (3.3e12: 410 G distances/s of 256-bit codes), so that a
#: plan's dispatches (sized by it: `planned_budget`) fill the device; a slower GPU's first
#: slices run longer until its rate is measured.
RATE_GPU, RATE_CPU = 4e12, 4e8
#: The rate last measured per device, per (metric, kernel): {device: {(kind, work): rate}}
#: (bounded by the devices alive and their kernels).
_RATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def planned_budget(device) -> int:
    """Row-words of a slice at the first guess of `device`'s rate: what a search's tiles are
    sized by (the same for every search, whatever was measured since)."""
    return int((RATE_CPU if device.is_cpu else RATE_GPU) * SLICE_S)


class Cancelled(Exception):
    """Another thread asked the search to stop (a Ctrl-C in the main thread of a sharded search)."""


class Pacer:
    """Submits for one search on `device` (`kind`: its metric, part of its rates' key);
    `cancel`, an Event another thread sets to stop it."""

    def __init__(self, device, cancel=None, kind=0):
        self.device = device
        self.cancel = cancel
        self._rates = _RATES.setdefault(device, {})
        self._kind = kind
        self._guess = RATE_CPU if device.is_cpu else RATE_GPU
        self._seen: set = set()  # the kernels this search measured
        self._inflight: deque = deque()  # (position, work, cost, submitted at, estimated seconds)
        self._ahead = 0.0  # estimated seconds of the slices in flight
        self._work = None  # the kernel of the work queued and not yet submitted
        self._pending = 0
        self._last_done = 0.0

    def rate(self, work: str) -> float:
        """Row-words per second of kernel `work`: as measured in this search; before that, the
        rate an earlier search measured if it is below the first guess (a search of another
        size can run at another rate per row-word: only a slower one is carried over)."""
        if work in self._seen:
            return self._rates[(self._kind, work)]
        return min(self._rates.get((self._kind, work), self._guess), self._guess)

    def budget(self, work: str) -> int:
        """Row-words of kernel `work` one slice holds."""
        return max(1, int(self.rate(work) * SLICE_S))

    def starting(self, work: str) -> None:
        """A dispatch of kernel `work` is about to be queued: submit first what another kernel
        queued (so that each submit holds one kernel's work: a submit that also held the next
        kernel's first dispatch timed a small merge by the long scan queued after it, and the
        pacer then waited for that scan in every search; NOTES session 27)."""
        if work != self._work:
            self.submit()
            self._work = work

    def queued(self, cost: int, work: str) -> None:
        """Count `cost` row-words of kernel `work` just queued (`starting(work)` came before
        it); submit once a slice's worth is queued."""
        self.starting(work)
        self._pending += cost
        if self._pending >= self.budget(work):
            self.submit()

    def submit(self) -> None:
        """Submit what is queued; then wait for the oldest submit in flight while those after
        it hold half a slice of work or more (at the rates known)."""
        if self._pending:
            seconds = self._pending / self.rate(self._work)
            self._inflight.append((self.device.flush(), self._work, self._pending, time.perf_counter(), seconds))
            self._ahead += seconds
            self._pending = 0
        while len(self._inflight) > 1 and self._ahead - self._inflight[0][4] >= SLICE_S / 2:
            self._wait_oldest()
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled

    def _wait_oldest(self) -> None:
        position, work, cost, submitted, seconds = self._inflight.popleft()
        self._ahead -= seconds
        start = max(submitted, self._last_done)
        waiting = time.perf_counter()
        self.device.wait_for(position)
        done = self._last_done = time.perf_counter()
        # Timed only if the wait blocked: a slice that had ended before it (the host was slower)
        # ran for an unknown part of the time since `start`, and would read as a false rate.
        if done - waiting > BLOCKED_S and cost:
            rate, known = cost / (done - start), self.rate(work)
            # A slower slice is believed at once (the next submits shrink), a faster one halfway.
            self._rates[(self._kind, work)] = rate if rate < known else 0.5 * (known + rate)
            self._seen.add(work)

    def drain(self) -> None:
        """Wait for everything queued and submitted."""
        self._pending = 0
        self._inflight.clear()
        self._ahead = 0.0
        self.device.synchronize()
