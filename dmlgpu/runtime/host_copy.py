"""Host memcpys on several cores.

A single thread copies host memory at ~10 GB/s on the NVIDIA VMs we measure on, a quarter of
what PCIe moves (~46 GB/s each way), so the two host copies of a front-end call (user array ->
staging, staging -> user array) cost more than the device's copies.

- `copy(dst, src)`: copy now. A contiguous copy of `SPLIT_BYTES` or more is split over threads
  of the native pool (`dmlgpu._host_copy`: threads that spin briefly for work, so a split costs
  no thread wake-up or GIL hand-off, and pays from 256 KiB); other large 1-D copies over the
  Python pool below.
- `start(dst, src)`: queue the copy on a pool of Python threads (numpy releases the GIL while
  it copies, so slices run on several cores at once) and return a `Pending` to `wait()` on, so
  a caller can queue the next piece of a pipelined transfer before the last one has landed and
  the threads never idle between pieces.

The threads of both pools are daemons made once, on the first copy large enough to use them; a
forked child makes its own on first use (threads do not survive `fork`), and interpreter exit
never waits for them (every caller waits for its own copies before it returns).
"""
from __future__ import annotations

import os
import queue
import threading

import numpy as np

from ..errors import DeviceError

try:
    from .. import _host_copy as _native  # built with dmlgpu (native/host_copy.cpp)
except ImportError:  # reported at the first copy that needs it, with what to do
    _native = None

#: Copy threads: one per core this process may run on, up to 8. Past ~8 threads one socket's
#: memory bandwidth is the limit (a host memcpy reads and writes each byte), and more only contend.
THREADS = min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
#: Copies smaller than this run in the calling thread. Handing slices to other threads costs
#: 20-60 us (queue, wake-ups, GIL hand-offs; 55 us median on a busy 2-core host), as much as a
#: 1 MiB copy from cache, while 4 MiB takes ~400 us at 10 GB/s and ~100 us on 8 threads.
PARALLEL_BYTES = 4 << 20
#: No slice is smaller than this (a 4 MiB copy goes to 8 threads, not more).
MIN_SLICE_BYTES = 512 << 10
#: Slice bounds fall on page boundaries: no two threads write (or first-touch) the same page.
SLICE_ALIGN = 4096
#: Contiguous copies from this size are split over the native pool, in slices of at least
#: SPLIT_SLICE_BYTES. On an H100 host a 512 KiB copy into or out of memory the GPU's DMA had
#: just touched took 49 us on one thread (19 us from cache); handing slices to Python threads
#: made a 1 MiB front-end call 1.5-2x slower (benchmarks/NOTES.md, changes 30 and 38).
SPLIT_BYTES = 256 << 10
SPLIT_SLICE_BYTES = 128 << 10

_pool = None
_pool_lock = threading.Lock()


def copy(dst: np.ndarray, src: np.ndarray) -> None:
    """Copy `src` into `dst` (as `dst[...] = src`), on several threads when it is large."""
    if dst.nbytes >= SPLIT_BYTES and THREADS > 1 and dst.dtype == src.dtype and dst.ndim == 1 \
            and src.shape == dst.shape and dst.flags.c_contiguous and src.flags.c_contiguous \
            and dst.flags.writeable:
        if _native is None:
            raise DeviceError("dmlgpu._host_copy (built with dmlgpu) is missing: reinstall dmlgpu "
                              "with pip install . or tools/bootstrap.sh setup")
        _native.copy(dst, src, THREADS, SPLIT_SLICE_BYTES)  # overlapping arrays: one memmove
        return
    bounds = _bounds(dst, src)
    if bounds is None:
        np.copyto(dst, src, casting="unsafe")
        return
    job = Pending(dst, src, len(bounds))
    _threads().put_all(job, bounds[1:])
    job.run(*bounds[0])  # the caller copies the first slice meanwhile
    job.wait()


def start(dst: np.ndarray, src: np.ndarray) -> "Pending":
    """Queue the copy of `src` into `dst` on the pool; returns a `Pending` to wait on.

    Neither array may be changed or freed before `wait()` returns. A copy too small to split
    is done at once (its `Pending` is already complete).
    """
    bounds = _bounds(dst, src)
    if bounds is None:
        np.copyto(dst, src, casting="unsafe")
        return _DONE
    job = Pending(dst, src, len(bounds))
    _threads().put_all(job, bounds)
    return job


def copy_threads(nbytes: int) -> int:
    """How many threads `copy` runs a contiguous copy of `nbytes` on (the caller among them)."""
    if nbytes < SPLIT_BYTES or THREADS == 1:
        return 1
    return max(1, min(THREADS, nbytes // SPLIT_SLICE_BYTES))


def parallel_slices(nbytes: int) -> int:
    """How many slices (threads) a copy of `nbytes` is split into."""
    if nbytes < PARALLEL_BYTES or THREADS == 1:
        return 1
    return max(1, min(THREADS, nbytes // MIN_SLICE_BYTES))


def _bounds(dst, src):
    """[(lo, hi), ...] element ranges of the slices, or None to copy in one call.

    Only 1-D arrays of one length are split (the runtime's transfers are flat uint8 views);
    anything else, and arrays that may overlap (slices copied apart would read bytes already
    overwritten), go to numpy whole, which handles them.
    """
    if dst.ndim != 1 or src.shape != dst.shape:
        return None
    itemsize = max(dst.itemsize, src.itemsize)
    parts = parallel_slices(dst.size * itemsize)
    if parts == 1 or np.may_share_memory(dst, src):
        return None
    align = max(1, SLICE_ALIGN // itemsize)
    step = -(-dst.size // parts // align) * align
    return [(lo, min(lo + step, dst.size)) for lo in range(0, dst.size, step)]


class Pending:
    """A copy in slices on the pool; `wait()` returns once every slice has landed."""

    __slots__ = ("_dst", "_src", "_left", "_count_lock", "_latch", "_error")

    def __init__(self, dst, src, slices: int):
        self._dst, self._src = dst, src
        self._left = slices
        self._count_lock = threading.Lock()
        self._latch = threading.Lock()
        self._error = None
        if slices:
            self._latch.acquire()  # released by the last slice

    def run(self, lo: int, hi: int) -> None:
        """Copy one slice (in a pool thread, or in the caller)."""
        try:
            np.copyto(self._dst[lo:hi], self._src[lo:hi], casting="unsafe")
        except BaseException as exc:  # raised again in the waiting thread
            self._error = exc
        with self._count_lock:
            self._left -= 1
            last = self._left == 0
        if last:
            self._latch.release()

    def wait(self) -> None:
        """Block until every slice has been copied; re-raises a slice's error.

        It returns or raises only once no slice is running, even when interrupted (Ctrl-C is
        raised after the slices, a few ms at most, have finished): callers free or reuse the
        memory right after.
        """
        latch = self._latch
        if latch is not None:
            interrupted = None
            while True:
                try:
                    latch.acquire()
                    break
                except BaseException as exc:  # KeyboardInterrupt while slices still copy
                    interrupted = exc
            latch.release()
            self._latch = None
            self._dst = self._src = None
            if interrupted is not None:
                raise interrupted
        if self._error is not None:
            raise self._error


class _Done(Pending):
    def __init__(self):
        super().__init__(None, None, 0)
        self._latch = None


_DONE = _Done()


class _Pool:
    """`THREADS` daemon threads taking slices from one queue, first come first served."""

    def __init__(self, count: int):
        self._tasks = queue.SimpleQueue()
        self.threads = [threading.Thread(target=self._work, name=f"dmlgpu-host-copy-{i}", daemon=True)
                        for i in range(count)]
        for thread in self.threads:
            thread.start()

    def put_all(self, job: Pending, bounds) -> None:
        put = self._tasks.put
        for lo, hi in bounds:
            put((job, lo, hi))

    def _work(self) -> None:
        get = self._tasks.get
        while True:
            job, lo, hi = get()
            job.run(lo, hi)


def _threads() -> _Pool:
    global _pool
    pool = _pool
    if pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = _Pool(THREADS)
            pool = _pool
    return pool


def pool_threads() -> int:
    """Threads the two pools have started (0 before the first parallel copy)."""
    pool = _pool
    return (len(pool.threads) if pool is not None else 0) + (_native.pool_threads() if _native else 0)


def _forget_pool_after_fork() -> None:
    """In a forked child the parent's threads do not exist: the child makes its own pool."""
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)
