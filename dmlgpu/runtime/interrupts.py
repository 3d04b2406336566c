"""Ctrl-C (SIGINT), and the other signals a program raises from, deferred out of the runtime's
non-reentrant sections, never swallowed.

Python runs a signal's handler in the main thread at its next check point (a call, a backward
jump), so a `KeyboardInterrupt` (or whatever a program's handler raises) could land between a
submit that released the GIL and the stream's record of it, between a block taken from the
memory pool and the Buffer that owns it, or halfway through a merge of the pool's free blocks,
and leave the device broken or memory lost for the rest of the process. CPython's own locks
keep such windows closed; so does this: a signal of `SIGNALS` that arrives while the main
thread holds a device's lock, or runs a function marked `critical`, is set aside and its
handler called at the first check point after it (the interrupted call has then either happened
whole or not at all).

`SIGNALS`: SIGINT (Ctrl-C), and the signals a program raises asynchronously from a handler of
its own: SIGALRM and SIGVTALRM (`signal.alarm`, `signal.setitimer`: timeouts) and SIGTERM (a
handler that calls `sys.exit`). SIGPROF is left to sampling profilers, whose handlers record the
frame they land in and raise nothing.

It costs nothing on the way through a call but one look at those signals' handlers (`guard`,
from `threads.entered` at the start of every device call): each Python handler found there is
put behind a `_Deferring` one (its own object per handler, so that a program that saved the
handler it replaced and puts it back gets the one it saved), which, run only when a signal
arrives, looks at the main thread's frames and the locks it holds. Once it defers, a profile
function of the main thread (`sys.setprofile`, an `_Owed` holding the frames that were running
and the program's own profile function, put back after) looks at each return into one of those
frames, from a C function or from a dmlgpu function, and calls the handlers set aside at the
first one that leaves the main thread outside every such section: typically as the interrupted
dmlgpu call returns to its caller. Never in a finalizer or a callback run meanwhile, where Python
would drop what they raise. A signal that comes twice while set aside is delivered once (as
Python sees a signal that came twice before it looked); the handlers of several signals set
aside are all called there, in arrival order, and none stays owed: when more than one raises,
the last one's exception comes out with the one before as its `__context__` (as when Python runs
a second signal's handler inside the `except` block of the first's). None is left for later: a
delivery that raises from the profile function loses the profile function (Python drops one
that raised), so a handler still owed then would wait for the next signal or device call. This
module's own code is a section itself: a signal whose handler would run at one of its check
points (a deferring handler deciding, the profile function) is set aside too; in a program's
handler it called, a signal is what it is anywhere. The frames are held only by the
profile function (never in a local of a frame it holds: no cycle): if it goes before it
delivered (the program set a profile function of its own meanwhile), they go with it, and the
handlers still owed are delivered after the next device call.

A long wait for the device does not hold a signal back: the stream waits in slices of
`WAIT_SLICE_NS`, and a wait that may end early (a read of results, `synchronize`: nothing is
half queued there) calls `raise_owed` between slices, which runs the deferred handlers at once.
The work stays queued and tracked (its memory is reused only once it has ended), so the
interrupted call did not happen for its caller and the device goes on.

The deferring handler goes in front of a signal's whenever the main thread starts a device call
and finds another one there: Python's default SIGINT handler (also when a program or a notebook
kernel put it back after the device opened) or a program's own, which is then called, deferred,
where it would have run. Handlers that are not Python callables (`SIG_IGN`, `SIG_DFL`) are left
alone: Ctrl-C then raises nothing, or ends the process, as the program asked.
"""
from __future__ import annotations

import dis
import inspect
import os
import signal
import sys
import threading

try:  # signal.getsignal wraps this in an enum lookup that costs ~8 us; this costs ~40 ns
    from _signal import getsignal as _getsignal
except ImportError:  # pragma: no cover (an interpreter without CPython's _signal)
    _getsignal = signal.getsignal

__all__ = ["SIGNALS", "WAIT_SLICE_NS", "critical", "guard", "install", "raise_owed", "raised_meanwhile", "unwatch_lock",
           "watch_lock"]

#: A wait for the device that may end early looks for a deferred Ctrl-C this often (the
#: KeyboardInterrupt comes within ~one slice of the signal, well inside 100 ms).
WAIT_SLICE_NS = 25_000_000

#: The signals whose Python handlers are deferred out of the runtime's sections (those of them
#: this platform has).
SIGNALS = tuple(int(getattr(signal, name)) for name in ("SIGINT", "SIGALRM", "SIGVTALRM", "SIGTERM")
                if hasattr(signal, name))
_CRITICAL: set = set()  # code objects of functions marked `critical`
_RETURNS = frozenset(dis.opmap[name] for name in ("RETURN_VALUE", "RETURN_CONST") if name in dis.opmap)
_LOCKS: list = []  # callables: whether the calling thread holds a runtime lock (weakly kept devices)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # dmlgpu/
#: SIGNALS repeated to four: what `guard` looks at, unrolled (a loop or a map costs 2-4x more).
_A, _B, _C, _D = (SIGNALS * 4)[:4]
#: Per signal of (_A, _B, _C, _D), the handler `guard` last found in place (a `_Deferring`, or
#: one left alone: SIG_IGN, SIG_DFL, None): a device call looks again only when one changed.
_seen: list = [object()] * 4
#: (signal, the handler to call) set aside, in arrival order, until the main thread leaves the
#: runtime's sections (only handlers: the frames are the profile function's).
_owed: list = []


def critical(function):
    """Mark `function` as a section a signal's handler must not run in (it runs after)."""
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
    """The deferring handlers in front of SIGNALS' (a device call starts): four C calls while
    they are; handlers owed with no profile function left to deliver them (the program put
    its own in place meanwhile) are delivered after this call."""
    seen = _seen
    if _getsignal(_A) is not seen[0] or _getsignal(_B) is not seen[1] or _getsignal(_C) is not seen[2] \
            or _getsignal(_D) is not seen[3]:
        _take_over()
    if _owed and type(sys.getprofile()) is not _Owed:
        _reschedule(inspect.currentframe().f_back)


def install() -> None:
    """Put the deferring handlers in front of SIGNALS' (from the main thread; elsewhere nothing)."""
    _take_over()


def _take_over() -> None:
    if threading.get_ident() != threading.main_thread().ident:
        return  # (signal handlers are the main thread's to set)
    for signum in SIGNALS:
        current = _getsignal(signum)
        if callable(current) and type(current) is not _Deferring:  # (SIG_IGN, SIG_DFL, None: left)
            try:
                signal.signal(signum, _Deferring(signum, current))
            except (ValueError, OSError):  # no signals here (an embedded interpreter)
                pass
    _seen[:] = [_getsignal(signum) for signum in (_A, _B, _C, _D)]


def deferring(frame) -> bool:
    """Whether a signal's handler at `frame` (in the main thread) must wait: also where this
    module's own code runs (a deferring handler deciding, the profile function, a delivery),
    though not in a program's handler it called."""
    if frame is not None and frame.f_code.co_filename == _HERE:
        return True
    for owned in _LOCKS:
        if owned():
            return True
    while frame is not None:
        if frame.f_code in _CRITICAL:
            return True
        frame = frame.f_back
    return False


class _Deferring:
    """The handler dmlgpu puts in a signal's place: calls the one it replaced (`chained`: the
    program's, or Python's default for SIGINT) now, or once the runtime's section ends."""

    __slots__ = ("signum", "chained")

    def __init__(self, signum: int, chained):
        self.signum = signum
        self.chained = chained

    def __repr__(self):
        return f"<dmlgpu's deferring handler of {signal.Signals(self.signum).name}, calling {self.chained!r}>"

    def __call__(self, signum, frame):
        if deferring(frame):
            _owe(signum, self.chained)
            _defer(frame)
        elif _owed:  # others set aside: delivered with this one
            _owe(signum, self.chained)
            _deliver(frame)
        else:
            try:
                self.chained(signum, frame)
            except BaseException as exc:
                if not _owed:
                    raise
                _deliver(frame, exc)  # set aside while it ran (a device call of its own): called now


def _owe(signum: int, chained) -> None:
    """Set `chained` aside, once per signal (as Python sees a signal that came twice once)."""
    for owed, _ in _owed:
        if owed == signum:
            return
    _owed.append((signum, chained))


def _defer(frame) -> None:
    """Have a profile function of the main thread deliver what is owed (`frame`: where the
    signal came)."""
    saved = sys.getprofile()
    if type(saved) is not _Owed:
        sys.setprofile(_Owed(_frames(frame), saved))


def _reschedule(frame) -> None:
    if threading.current_thread() is threading.main_thread():
        sys.setprofile(_Owed(_frames(frame), sys.getprofile()))


def raise_owed() -> None:
    """Where a long wait for the device may end early: deliver the signals deferred in the main
    thread now (Python's SIGINT handler raises KeyboardInterrupt). Nothing in another thread."""
    if _owed and threading.current_thread() is threading.main_thread():
        _deliver(inspect.currentframe().f_back)


def _deliver(frame, error: BaseException | None = None) -> None:
    """Call every handler set aside, in order, the program's profile function put back first, and
    raise what they raised (`error`: one raised before, by the handler that ran as they were set
    aside): the last exception, with the one before as its `__context__`. Nothing stays owed,
    not even a signal set aside at a check point in here (the loops look again after each call
    and no call comes between their last look and the `raise`)."""
    while True:
        _restore()
        while _owed:
            signum, chained = _owed.pop(0)  # (a signal at a check point in here is set aside: see `deferring`)
            try:
                chained(signum, frame)
            except BaseException as exc:
                if error is not None and exc is not error and exc.__context__ is None:
                    exc.__context__ = error
                error = exc
        _restore()  # (a handler's own deferral may have put one back)
        if not _owed:
            break
    if error is not None:
        try:
            raise error
        finally:
            error = None  # (no cycle through this frame's locals)


def _restore() -> None:
    """The program's own profile function back in place of an `_Owed` (held in no local of a
    frame an `_Owed` may hold: that would be a cycle, freed only by the garbage collector)."""
    if type(sys.getprofile()) is _Owed:
        sys.setprofile(sys.getprofile().saved)


def raised_meanwhile(exc: BaseException) -> bool:
    """Whether `exc`, caught around one call into C, was raised by Python code that ran at the
    call's check point (a handler of a signal not in SIGNALS) rather than by the call, which
    then succeeded: its traceback goes on past the frame that caught it."""
    trace = exc.__traceback__
    return trace is not None and trace.tb_next is not None


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


class _Owed:
    """The main thread's profile function while handlers are owed: at each return into one of
    `frames` (those running when the signal came), from a C function or from a dmlgpu function
    (never from a finalizer or a callback run since, which would drop what they raise), it
    delivers them if that frame may be interrupted there. `saved` is the program's own profile
    function, put back then."""

    __slots__ = ("frames", "saved")

    def __init__(self, frames, saved):
        self.frames = frames
        self.saved = saved

    def __call__(self, frame, event, arg):
        if event == "return":
            code = frame.f_code
            if not _ours(code) or (arg is None and code.co_code[frame.f_lasti] not in _RETURNS):
                return  # (an exception unwinds it: what a handler raised here would replace that one)
            frame = frame.f_back
        elif event != "c_return":
            return
        if frame is None or not any(frame is f for f in self.frames) or deferring(frame):
            return
        self.frames = ()
        _deliver(frame)


_HERE = deferring.__code__.co_filename  # this module's code: `deferring` defers at its check points
