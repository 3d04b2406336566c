"""Ctrl-C (SIGINT) deferred out of the runtime's non-reentrant sections, never swallowed.

Python raises `KeyboardInterrupt` in the main thread at its next check point (a call, a
backward jump), so one could land between a submit that released the GIL and the stream's
record of it, or halfway through a merge of the memory pool's free blocks, and leave the device
broken for the rest of the process. CPython's own locks keep such windows closed; so does this:
a SIGINT that arrives while the main thread holds a device's lock, or runs a function marked
`critical`, is set aside and raised again at the first check point after it (the interrupted
call has then either happened whole or not at all).

It costs nothing on the way through a call: the handler, run only when a signal arrives, looks
at the main thread's frames and the locks it holds. Once it defers, a profile function of the
main thread (`sys.setprofile`, the program's own put back after) looks at each return into a
frame that was running when the signal came, from a C function or from a dmlgpu function, and
raises the KeyboardInterrupt at the first one that leaves the main thread outside every such
section: typically as the interrupted dmlgpu call returns to its caller. Never in a finalizer or
a callback run meanwhile, where Python would drop it.

The handler is installed when the first device opens in the main thread, over Python's default
SIGINT handler only: a handler of the program's own is left alone (and not deferred).
"""
from __future__ import annotations

import os
import signal
import sys
import threading

_CRITICAL: set = set()  # code objects of functions marked `critical`
_LOCKS: list = []  # callables: whether the calling thread holds a runtime lock (weakly kept devices)
_installed = False
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # dmlgpu/


def critical(function):
    """Mark `function` as a section a KeyboardInterrupt must not land in (it is raised after)."""
    _CRITICAL.add(function.__code__)
    return function


def watch_lock(owned) -> None:
    """`owned()` says whether the calling thread holds a lock whose holder must not be interrupted."""
    _LOCKS.append(owned)


def unwatch_lock(owned) -> None:
    try:
        _LOCKS.remove(owned)
    except ValueError:
        pass


def install() -> None:
    """Install the deferring SIGINT handler (from the main thread, over the default one)."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return
        signal.signal(signal.SIGINT, _handler)
    except (ValueError, OSError):  # no signals here (an embedded interpreter)
        return
    _installed = True


def deferring(frame) -> bool:
    """Whether a KeyboardInterrupt at `frame` (in the main thread) must wait."""
    for owned in _LOCKS:
        if owned():
            return True
    while frame is not None:
        if frame.f_code in _CRITICAL:
            return True
        frame = frame.f_back
    return False


_saved: list = [None]  # the main thread's profile function before a deferral
_chain: list = []  # the frames the main thread was running when the signal came


def _handler(signum, frame):
    if deferring(frame):
        profile = sys.getprofile()
        if profile is not _profile:
            _saved[0] = profile
            _chain[:] = _frames(frame)
            sys.setprofile(_profile)  # the main thread's, until the section ends
        return
    signal.default_int_handler(signum, frame)


def _frames(frame) -> list:
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def _ours(code) -> bool:
    """Whether `code` is a function of dmlgpu's own that is no finalizer (those are critical)."""
    name = code.co_filename
    return (name.startswith(_PACKAGE) or name.startswith("<dmlgpu")) and code not in _CRITICAL


def _profile(frame, event, arg):
    """While a SIGINT is owed: at each return into a frame that was running when the signal
    came, from a C function or from a dmlgpu function (never from a finalizer or a callback
    run since, which would drop it), raise it if that frame may be interrupted there."""
    if event == "return":
        if not _ours(frame.f_code):
            return
        frame = frame.f_back
    elif event != "c_return":
        return
    if frame is None or not any(frame is f for f in _chain) or deferring(frame):
        return
    profile, _saved[0] = _saved[0], None
    _chain.clear()
    sys.setprofile(profile)
    signal.default_int_handler(signal.SIGINT, frame)
