"""Where a search's codes, queries and answers lie on a device: a caller's Tensor of codes read
where it lies (`tensor_places`), a batch of queries (`Queries`), and the Tensors an answer left
on the device is written into (`device_tensors`).
"""
from __future__ import annotations

import numpy as np

from ..front.tensor import Tensor
from ..kernels.search_programs import HAMMING
from ..layout.pieces import Pieces

__all__ = ["Queries", "device_tensors", "tensor_places"]


def tensor_places(value, device) -> list | None:
    """Where a Tensor of codes can be searched as it lies: (buffer, word offset, rows) per buffer
    its rows span; None if it cannot (not packed whole-word rows of one device, a piece not
    starting at a row or a 16-byte boundary)."""
    if not (isinstance(value, Tensor) and (device is None or device is value.device) and value.dtype.kind in "iu"
            and value.ndim == 2 and value.shape[0] >= 1 and value.shape[1] >= 1 and value.is_packed
            and (value.shape[1] * value.itemsize) % 4 == 0):
        return None
    memory, row_bytes, start = value.buffer, value.shape[1] * value.itemsize, value.offset
    end = start + value.shape[0] * row_bytes
    if not isinstance(memory, Pieces):
        return [(memory, start // 4, value.shape[0])] if start % 16 == 0 else None
    places = []
    for buffer, begins in zip(memory.buffers, memory.starts):
        first, last = max(start, begins), min(end, memory.piece_end(begins))
        if first >= last:
            continue
        if (first - start) % row_bytes or (last - start) % row_bytes or (first - begins) % 16:
            return None
        places.append((buffer, (first - begins) // 4, (last - first) // row_bytes))
    return places


class Queries:
    """A batch of queries on the shard's device: a buffer and the word offset of the first, and
    their words on the host where they came from there."""

    def __init__(self, device, code_words: int, words: np.ndarray | None, place=None):
        self.code_words = code_words
        self.host = words
        if place is not None:
            self.buffer, self.word_offset = place
        else:
            self.buffer, self.word_offset = device.upload(words), 0

    def at(self, first: int) -> int:
        """The word offset in its arena of query `first`."""
        return self.buffer.arena_offset // 4 + self.word_offset + first * self.code_words

    def rows(self, picked: np.ndarray) -> np.ndarray:
        """The words of queries `picked` on the host (read back for queries searched where they lie)."""
        if self.host is not None:
            return self.host[picked]
        count = int(picked.max()) + 1
        words = self.buffer.read(self.word_offset * 4, count * self.code_words * 4).view(np.uint32)
        return words.reshape(count, self.code_words)[picked]


def device_tensors(device, count: int, k: int, metric: int):
    """Fresh Tensors for an answer left on the device: values (uint32 or float32) and int64 ids,
    not zero-filled (the finish writes every element)."""
    values = Tensor.empty((count, k), np.uint32 if metric == HAMMING else np.float32, device, zero_fill=False)
    ids = Tensor.empty((count, k), np.int64, device, zero_fill=False)
    return values, ids
