"""Device memory handed to numpy (`Device.hand_over`): arrays that *are* a buffer's mapped
bytes, the count of those alive, and what `close` leaves for the last of them to destroy."""
from __future__ import annotations

import sys
import weakref

import numpy as np

from ..errors import ValidationError
from . import fork, interrupts


class HandOvers:
    """The handed-over arrays of one device (whose parts are `resources`)."""

    def __init__(self, resources):
        self._resources = resources
        self.count = 0  # live arrays showing device memory
        self._owners = weakref.WeakSet()  # their owners (made private in a forked child)
        self._closing = None  # what `close` left for the last of them to destroy

    def hand_over(self, buffer, nbytes: int) -> np.ndarray:
        """`Device.hand_over`: a uint8 array that is the first `nbytes` bytes of `buffer`."""
        resources = self._resources
        with resources.lock:
            buffer.check_range(0, nbytes, "hand-over range")
            block = buffer.block
            if not block.arena.memory.mapped:
                raise ValidationError("dmlgpu", None, "buffer", "device memory the host does not map",
                                      "allowed: a buffer of a device whose memory is mapped")
            if buffer.last_use > resources.stream.completed:
                resources.stream.wait(buffer.last_use, interruptible=True)
            view = block.arena.memory.view[block.offset:block.offset + nbytes]
            resources.transfers.download(nbytes)  # (no copy: the host reads the device's memory)
            owner = _HandedOver(buffer, view)
            self.count += 1
            self._owners.add(owner)
            weakref.finalize(owner, self._handed_back).atexit = False
            return np.asarray(owner)

    @interrupts.critical
    def _handed_back(self) -> None:
        """A handed-over array died."""
        resources = self._resources
        with resources.lock:
            self.count -= 1
            if self.count == 0 and self._closing is not None and not sys.is_finalizing() \
                    and not resources.forked:
                closing, self._closing = self._closing, None
                for destroy in closing:
                    destroy()

    def close(self, closing) -> None:
        """The device closed: call each of `closing` now, or when the last array goes."""
        if self.count:  # arrays still show device memory: it goes with the last one
            self._closing = closing
        else:
            for destroy in closing:
                destroy()

    def privatize(self) -> None:
        """In a forked child: the arrays' pages become private copies (never the parent's)."""
        for owner in list(self._owners):
            fork.privatize(owner.__array_interface__["data"][0], owner.__array_interface__["shape"][0])


class _HandedOver:
    """The owner of a handed-over array's memory: the array's base, it holds the Buffer, so
    the block stays allocated while the array or a view of it lives."""

    __slots__ = ("buffer", "__array_interface__", "__weakref__")

    def __init__(self, buffer, view: np.ndarray):
        self.buffer = buffer
        self.__array_interface__ = {"version": 3, "shape": view.shape, "typestr": "|u1",
                                    "data": (view.ctypes.data, False)}
