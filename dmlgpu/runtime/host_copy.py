"""Host memcpys on several cores, through the native pool of `dmlgpu.runtime._host_copy`.

A single thread copies host memory at ~10 GB/s on the NVIDIA VMs we measure on (from DRAM, as
every copy right after the GPU's DMA touched the memory is), a quarter of what PCIe moves
(~46 GB/s each way), so the two host copies of a front-end call (user array -> staging,
staging -> user array) would cost more than the device's copies. Handing slices to Python
threads costs a thread wake-up and GIL hand-offs per slice, more than a 1 MiB copy
(benchmarks/NOTES.md, changes 30 and 40); the native pool's threads spin briefly on an atomic
for work and take slices with no system call and no GIL.

- `copy(dst, src)`: copy now, the caller copying slices too.
- `start(dst, src)`: queue the copy and return a `Pending` to `wait()` on, so a caller can
  queue the next piece of a pipelined transfer before the last one has landed and the threads
  never idle between pieces; `wait` copies whatever slices no thread has taken yet.

Contiguous copies of one dtype from `SPLIT_BYTES` are split; anything else (small, strided,
casting) is one `np.copyto` in the caller. The pool's threads are daemons made once, on the
first split copy; a forked child makes its own, and interpreter exit never waits for them
(every caller waits for its own copies before it returns).
"""
from __future__ import annotations

import os

import numpy as np

from .installation import missing_extension

try:
    from . import _host_copy as _native  # built with dmlgpu (native/host_copy.cpp)
except ImportError:  # reported at the first copy that needs it, with what to do
    _native = None

#: Copy threads, the caller among them: one per core this process may run on, up to 8. Past
#: ~8 threads one socket's memory bandwidth is the limit (a host memcpy reads and writes each
#: byte), and more only contend.
THREADS = min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
#: Copies from this size are split, in page-aligned slices of at least SPLIT_SLICE_BYTES. On
#: an H100 host a 512 KiB copy into or out of memory the GPU's DMA had just touched took 49 us
#: on one thread and 24 us over the pool (19 us from cache on one thread).
SPLIT_BYTES = 256 << 10
SPLIT_SLICE_BYTES = 128 << 10


def copy(dst: np.ndarray, src: np.ndarray) -> None:
    """Copy `src` into `dst` (as `dst[...] = src`), on several threads when it is large."""
    if _splits(dst, src):
        _module().copy(dst, src, THREADS, SPLIT_SLICE_BYTES)  # overlapping arrays: one memmove
    else:
        np.copyto(dst, src, casting="unsafe")


def start(dst: np.ndarray, src: np.ndarray):
    """Queue the copy of `src` into `dst`; returns a `Pending` to wait on.

    Neither array may be changed or freed before `wait()` returns (the `Pending` holds both).
    A copy too small to split is done at once (its `Pending` is already complete).
    """
    if not _splits(dst, src):
        np.copyto(dst, src, casting="unsafe")
        return _DONE
    # (the native Pending holds both arrays until the copy has landed, dropped unwaited too)
    return _module().start(dst, src, THREADS, SPLIT_SLICE_BYTES)


def copy_threads(nbytes: int) -> int:
    """How many threads a contiguous copy of `nbytes` is split over (the caller among them)."""
    if nbytes < SPLIT_BYTES or THREADS == 1:
        return 1
    return max(1, min(THREADS, nbytes // SPLIT_SLICE_BYTES))


def _splits(dst, src) -> bool:
    return dst.nbytes >= SPLIT_BYTES and THREADS > 1 and dst.dtype == src.dtype and dst.ndim == 1 \
        and src.shape == dst.shape and dst.flags.c_contiguous and src.flags.c_contiguous \
        and dst.flags.writeable


def _module():
    if _native is None:
        raise missing_extension("runtime._host_copy", "the host copy threads, built with dmlgpu")
    return _native


class _Done:
    """The `Pending` of a copy done at once."""

    __slots__ = ()
    done = True

    def wait(self) -> None:
        pass


_DONE = _Done()


def pool_threads() -> int:
    """Threads the pool has started (0 before the first split copy)."""
    return _native.pool_threads() if _native is not None else 0
