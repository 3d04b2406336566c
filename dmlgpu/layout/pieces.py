"""Device memory larger than one buffer: consecutive Buffers addressed as one byte range.

A device binds at most `Device.max_buffer_size` bytes per buffer (Vulkan's
maxStorageBufferRange: 128 MiB on lavapipe, 4 GiB on NVIDIA). A Tensor of more bytes keeps its
elements in `Pieces`: consecutive buffers, each holding a range of the whole's bytes. An upload
or `Tensor.empty` cuts them every `piece_bytes` (the most whole rows of the tensor's shape one
buffer holds), so no element and no row that fits a buffer is cut; an operator's new result is
cut where its chunks begin (`dmlgpu.api.span_plan`), so every chunk's output starts where DirectML
can bind it. Reads and writes go piece by piece; nothing binds a Pieces whole.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

from ..errors import ValidationError

__all__ = ["Pieces", "allocate", "allocate_runs", "piece_bytes", "upload"]


def piece_bytes(device, shape, itemsize: int) -> int:
    """The bytes of every piece but the last of a packed tensor of `shape` on `device`: the
    most whole rows that one buffer holds, a row being the largest block of innermost
    dimensions that fits (at least one element); where they fit, a multiple of 256 bytes (piece
    boundaries 16-byte aligned in any other data type too: BIT_COUNT's UINT8 result of a UINT64
    tensor splits where its input does) and of 16 rows (a transpose's blocks of columns, cut
    where these rows are, start 16-byte aligned in its result)."""
    limit = device.max_buffer_size
    row = itemsize
    for n in reversed(shape):
        if row * n > limit:
            break
        row *= n
    rows, unit = limit // row, math.lcm(256 // math.gcd(256, row), 16)
    if rows >= unit:
        rows -= rows % unit
    return rows * row


class Pieces:
    """`size_in_bytes` of device memory as consecutive Buffers; `starts[i]` is the byte of the
    whole where buffer i begins (ascending, from 0)."""

    def __init__(self, device, buffers: list, starts: list, size_in_bytes: int):
        self.device = device
        self.buffers = buffers
        self.starts = starts
        self.size_in_bytes = size_in_bytes
        self.serial = -buffers[0].serial  # its first buffer is its alone: never reused, never a Buffer's

    def __repr__(self):
        state = "released" if self.released else f"{self.size_in_bytes} bytes in {len(self.buffers)} buffers"
        return f"<dmlgpu.Pieces {state} on {self.device.name}>"

    @property
    def released(self) -> bool:
        return any(b.released for b in self.buffers)

    def check_live(self, operator: str = "dmlgpu", field: str = "buffer") -> None:
        """ValidationError saying why a piece cannot be used, if one cannot (`Buffer.check_live`)."""
        for buffer in self.buffers:
            buffer.check_live(operator, field)

    def _unbindable(self):
        raise ValidationError("dmlgpu", None, "Binding.Buffer", f"Pieces of {len(self.buffers)} buffers",
                              "allowed: one Buffer (no binding reaches past one buffer: bind a spanning Tensor's "
                              "pieces, `.buffers`, one by one, or record it in a CommandList, which runs it "
                              "as per-piece executions)")

    block_key = property(_unbindable, doc="Refused: a binding is one Buffer.")
    arena_offset = property(_unbindable, doc="Refused: a binding is one Buffer.")

    def _index(self, byte: int) -> int:
        return bisect.bisect_right(self.starts, byte) - 1

    def piece_start(self, byte: int) -> int:
        """Where the piece holding `byte` begins."""
        return self.starts[self._index(byte)]

    def piece_end(self, byte: int) -> int:
        """Where the piece holding `byte` ends."""
        index = self._index(byte) + 1
        return self.starts[index] if index < len(self.starts) else self.size_in_bytes

    def divides(self, size: int) -> bool:
        """Whether every piece boundary is a multiple of `size` (elements of that size never span two)."""
        return all(start % size == 0 for start in self.starts)

    def piece(self, start: int, end: int):
        """(buffer, offset in it) of bytes [start, end) if they lie in one piece, else None."""
        index = self._index(start)
        if end > self.piece_end(start):
            return None
        return self.buffers[index], start - self.starts[index]

    def _ranges(self, offset: int, size: int):
        """(buffer, offset in it, size, offset in the range) of each piece a byte range touches."""
        self.check_live()
        if offset < 0 or size < 0 or offset + size > self.size_in_bytes:
            raise ValidationError("dmlgpu", None, "range", (offset, size),
                                  f"allowed: a range inside the {self.size_in_bytes} bytes")
        done = 0
        while done < size:
            index = self._index(offset + done)
            local = offset + done - self.starts[index]
            n = min(size - done, self.piece_end(offset + done) - offset - done)
            yield self.buffers[index], local, n, done
            done += n

    def read(self, offset: int = 0, size: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Copy `size` bytes from `offset` into a new uint8 array (or `out`), piece by piece."""
        size = self.size_in_bytes - offset if size is None else size
        result = np.empty(size, np.uint8) if out is None else out
        for buffer, local, n, at in self._ranges(offset, size):
            buffer.read(local, n, out=result[at:at + n])
        return result

    def write(self, array, offset: int = 0) -> None:
        """Copy the bytes of `array` (C order) in at `offset`, after queued work, piece by piece."""
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        for buffer, local, n, at in self._ranges(offset, data.size):
            buffer.write(data[at:at + n], local)

    def release(self) -> None:
        for buffer in self.buffers:
            buffer.release()


def _bound(nbytes: int) -> int:
    return max(4, -(-nbytes // 4) * 4)  # a bindable size: a multiple of 4, never empty


def allocate(device, shape, itemsize: int, *, zero_fill: bool = True, device_writes_first: bool = False):
    """Memory for a packed tensor of `shape`: a Buffer, or Pieces where one cannot hold it
    (`device_writes_first`: as `Device.allocate`'s, for one Buffer)."""
    nbytes = math.prod(shape) * itemsize
    if nbytes <= device.max_buffer_size:
        return device.allocate(_bound(nbytes), zero_fill=zero_fill, device_writes_first=device_writes_first)
    return allocate_runs(device, range(0, nbytes, piece_bytes(device, shape, itemsize)), nbytes, zero_fill=zero_fill)


def allocate_runs(device, starts, nbytes: int, *, zero_fill: bool = True) -> Pieces:
    """Pieces of `nbytes` whose buffers begin at bytes `starts` (ascending, from 0)."""
    starts = list(starts)
    ends = starts[1:] + [nbytes]
    buffers = [device.allocate(_bound(end - start), zero_fill=zero_fill) for start, end in zip(starts, ends)]
    return Pieces(device, buffers, starts, nbytes)


def upload(device, array: np.ndarray):
    """`array`'s elements (C order) on `device`: a Buffer, or Pieces where one cannot hold them."""
    array = np.asarray(array)
    data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    if data.size <= device.max_buffer_size:
        return device.upload(data)
    starts = list(range(0, data.size, piece_bytes(device, array.shape, array.dtype.itemsize)))
    buffers = [device.upload(data[start:start + n]) for start, n in
               zip(starts, [b - a for a, b in zip(starts, starts[1:] + [data.size])])]
    return Pieces(device, buffers, starts, data.size)
