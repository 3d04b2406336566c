"""A process forked after it used a Vulkan device: the child must not use the parent's.

A forked child shares the parent's driver state (its file descriptors, its mapped device
memory) but none of its threads: a wait on the parent's fences never returns, and a write
through a mapping lands in the parent's memory. So, as PyTorch does for CUDA
(`torch.cuda._is_in_bad_fork`), the child's first dmlgpu call raises `DeviceError` naming fork
and the start methods that work; its devices are never destroyed (destroying them would free
the parent's objects through the shared descriptors), and device memory that was handed over
to numpy arrays (`Device.hand_over`) becomes private copies in the child before it runs any
code of its own.
"""
from __future__ import annotations

import ctypes
import mmap

from ..errors import DeviceError

MESSAGE = ("dmlgpu cannot be used in a process forked after its parent used a Vulkan device "
           "(the parent's device, memory and threads are not the child's); start worker "
           "processes with the 'spawn' or 'forkserver' method instead, e.g. "
           "multiprocessing.get_context('spawn')")

_state = {"forked": False, "used": False}


def mark_used() -> None:
    """The process has opened a Vulkan device: a child forked from now on must not use it."""
    _state["used"] = True


def in_bad_fork() -> bool:
    return _state["forked"]


def check() -> None:
    """DeviceError in a child forked after the parent used a device."""
    if _state["forked"]:
        raise DeviceError(MESSAGE)


def became_child() -> bool:
    """Called in a forked child (os.register_at_fork): True if it is now a bad fork."""
    if _state["used"]:
        _state["forked"] = True
    return _state["forked"]


_libc = None


def privatize(address: int, nbytes: int) -> bool:
    """Replace the pages holding [address, address + nbytes) by private anonymous pages with
    the same contents: writes there no longer reach memory shared with the parent."""
    global _libc
    if nbytes <= 0:
        return True
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mmap.restype = ctypes.c_void_p
        _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                               ctypes.c_int, ctypes.c_long]
    page = mmap.PAGESIZE
    lo = address // page * page
    size = -(-(address + nbytes) // page) * page - lo
    saved = ctypes.create_string_buffer(size)
    ctypes.memmove(saved, lo, size)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x10  # MAP_FIXED
    got = _libc.mmap(lo, size, mmap.PROT_READ | mmap.PROT_WRITE, flags, -1, 0)
    if got is None or got != lo:  # MAP_FAILED: the pages stay as they were
        return False
    ctypes.memmove(lo, saved, size)
    return True


def leak(obj) -> None:
    """Keep `obj` alive for good: a forked child's device is never destroyed."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
