"""Ctrl-C (SIGINT) deferred out of the runtime's non-reentrant sections, never swallowed.

Python raises `KeyboardInterrupt` in the main thread at its next check point (a call, a
backward jump), so one could land between a submit that released the GIL and the stream's
record of it, or halfway through a merge of the memory pool's free blocks, and leave the device
broken for the rest of the process. CPython's own locks keep such windows closed; so does this:
a SIGINT that arrives while the main thread holds a device's lock, or runs a function marked
`critical`, is set aside and raised again at the first check point after it (the interrupted
call has then either happened whole or not at all).

It costs nothing on the way through a call but one look at SIGINT's handler (`guard`, from
`threads.entered` at the start of every device call): the handler, run only when a signal
arrives, looks at the main thread's frames and the locks it holds. Once it defers, a profile
function of the main thread (`sys.setprofile`, the program's own put back after) looks at each
return into a frame that was running when the signal came, from a C function or from a dmlgpu
function, and raises the KeyboardInterrupt at the first one that leaves the main thread outside
every such section: typically as the interrupted dmlgpu call returns to its caller. Never in a
finalizer or a callback run meanwhile, where Python would drop it.

A long wait for the device does not hold an interrupt back: the stream waits in slices of
`WAIT_SLICE_NS`, and a wait that may end early (a read of results, `synchronize`: nothing is
half queued there) calls `raise_owed` between slices, which raises the deferred interrupt at
once. The work stays queued and tracked (its memory is reused only once it has ended), so the
interrupted call did not happen for its caller and the device goes on.

The handler goes in front of SIGINT's whenever the main thread starts a device call and finds
another one there: Python's default (also when a program or a notebook kernel put it back after
the device opened) or a program's own, which is then called, deferred like the default, where
the default would have raised. Handlers that are not Python functions (`SIG_IGN`, `SIG_DFL`) are
left alone: Ctrl-C then raises nothing, or ends the process, as the program asked.
"""
from __future__ import annotations

import inspect
import os
import signal
import sys
import threading

try:  # signal.getsignal wraps this in an enum lookup that costs ~8 us; this costs ~40 ns
    from _signal import getsignal as _getsignal
except ImportError:  # pragma: no cover (an interpreter without CPython's _signal)
    _getsignal = signal.getsignal

__all__ = ["WAIT_SLICE_NS", "critical", "guard", "handler", "install", "raise_owed", "unwatch_lock",
           "watch_lock"]

#: A wait for the device that may end early looks for a deferred Ctrl-C this often (the
#: KeyboardInterrupt comes within ~one slice of the signal, well inside 100 ms).
WAIT_SLICE_NS = 25_000_000

_SIGINT = int(signal.SIGINT)
_CRITICAL: set = set()  # code objects of functions marked `critical`
_LOCKS: list = []  # callables: whether the calling thread holds a runtime lock (weakly kept devices)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # dmlgpu/
#: What a SIGINT does once it may: Python's default handler, or the program's own it replaced.
_chained: list = [signal.default_int_handler]
#: A handler found in SIGINT's place and left there (SIG_IGN, SIG_DFL, None): `guard` does not
#: look at it again until it changes.
_left: list = [object()]


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


def guard() -> None:
    """The deferring handler in front of SIGINT's (a device call starts): one C call when it is."""
    current = _getsignal(_SIGINT)
    if current is not handler and current is not _left[0]:
        _take_over(current)


def install() -> None:
    """Put the deferring handler in front of SIGINT's (from the main thread; elsewhere nothing)."""
    _take_over(_getsignal(_SIGINT))


def _take_over(current) -> None:
    if current is handler or threading.get_ident() != threading.main_thread().ident:
        return  # (signal handlers are the main thread's to set)
    if not callable(current):  # SIG_IGN, SIG_DFL, or a handler not set from Python
        _left[0] = current
        return
    try:
        signal.signal(_SIGINT, handler)
    except (ValueError, OSError):  # no signals here (an embedded interpreter)
        _left[0] = current
        return
    _chained[0] = current


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


def handler(signum, frame):
    """dmlgpu's SIGINT handler: the program's (or Python's) now, or once the section ends."""
    if deferring(frame):
        profile = sys.getprofile()
        if profile is not _profile:
            _saved[0] = profile
            _chain[:] = _frames(frame)
            sys.setprofile(_profile)  # the main thread's, until the section ends
        return
    _chained[0](signum, frame)


def raise_owed() -> None:
    """Where a long wait for the device may end early: deliver a SIGINT deferred in the main
    thread now (Python's handler raises KeyboardInterrupt). Nothing in another thread."""
    if sys.getprofile() is not _profile or threading.current_thread() is not threading.main_thread():
        return
    _deliver(inspect.currentframe().f_back)


def _deliver(frame) -> None:
    profile, _saved[0] = _saved[0], None
    _chain.clear()
    sys.setprofile(profile)
    _chained[0](_SIGINT, frame)


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
    _deliver(frame)
