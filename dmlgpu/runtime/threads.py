"""The threads that called a device, and stopping the daemon ones when the interpreter exits.

NVIDIA's Linux driver crashes in its own exit handlers when threads that called it are still
alive as the process exits (measured on an H100, driver 580.159, 2026-11-24: SIGSEGV in the
main thread after Python's finalization in 6-8 of 40 exits with four daemon threads calling;
0 of 80 when the same threads had ended first; 5 of 40 even when dmlgpu destroyed nothing at
exit: benchmarks/NOTES.md, "Exit with daemon threads on NVIDIA"). Interpreter shutdown stops
daemon threads anyway, at whatever point they are, without ending them. So once exit begins
(`begin_exit`, from dmlgpu's atexit handler, before any device closes), a daemon thread's next
device call raises SystemExit at its start (where a closed device's ValidationError would be:
no state is half changed), the thread ends with its `finally` blocks run, and the handler waits
up to `STOP_SECONDS` for every daemon thread that called a device (`join_daemon_callers`).
A daemon thread busy elsewhere is not stopped; its next dmlgpu call stops it. dmlgpu's own
helper threads (`join_helper`: glslang's warm-up) are waited for in the same time.
"""
from __future__ import annotations

import threading
import time

from .interrupts import guard

__all__ = ["STOP_SECONDS", "begin_exit", "entered", "join_daemon_callers", "join_helper"]

#: How long the exit handler waits for daemon threads that called a device to end.
STOP_SECONDS = 2.0

_callers: set[int] = set()  # idents of threads that made a device call
_local = threading.local()
_exiting = [False]
_helpers: list[threading.Thread] = []  # dmlgpu's own short-lived daemon threads


def entered() -> None:
    """A device call starts on this thread: remembered; SystemExit in a daemon thread once the
    interpreter's exit began; dmlgpu's SIGINT handler put back in front if a program (or a
    notebook kernel) replaced it (`interrupts.guard`)."""
    if _exiting[0] and threading.current_thread().daemon:
        raise SystemExit("dmlgpu: the interpreter is exiting; a daemon thread's device call ends it")
    try:
        _local.noted
    except AttributeError:
        _local.noted = True
        _callers.add(threading.get_ident())
    guard()


def begin_exit() -> None:
    """From now on a daemon thread's device call ends the thread (SystemExit)."""
    _exiting[0] = True


def join_helper(thread: threading.Thread) -> None:
    """A daemon thread of dmlgpu's own (one that runs native code and ends by itself) that the
    exit handler waits for, as for the threads that called a device."""
    _helpers[:] = [t for t in _helpers if t.is_alive()] + [thread]


def join_daemon_callers(seconds: float = STOP_SECONDS) -> None:
    """Wait up to `seconds` in all for the daemon threads that called a device, and dmlgpu's
    helper threads, to end."""
    me = threading.current_thread()
    deadline = time.monotonic() + seconds
    for thread in threading.enumerate():
        if thread is not me and thread.daemon and (thread.ident in _callers or thread in _helpers):
            thread.join(max(0.0, deadline - time.monotonic()))
