"""Exact k-nearest-neighbour search of binary codes by Hamming distance, on the device.

`HammingIndex(database)` keeps the database resident (in pieces of at most one storage buffer,
`maxStorageBufferRange`); `search(queries, k)` uploads the queries once, runs the fused kernel
of shaders/hamming.comp (XOR -> BIT_COUNT -> REDUCE(SUM over a code's words) -> TOP_K, the
distances kept in registers, never an N x Q matrix) over every piece, merges the partial top-k
lists on the device and downloads the answer once. `hamming_knn` is the one-call form.
For k up to kernels.HAMMING_REGISTER_K each lane keeps its k best in registers over a long tile
of rows and one workgroup per query merges the tiles' lists; a larger k (a lane's list would
spill) keeps the lists in global memory and merges them in levels: slower, as exact.

The answer is numpy's, exactly: distance = `np.bitwise_count(db ^ q).sum()` over a code's bytes,
the k smallest in order, ties by lower row (a stable argsort). Codes are rows of unsigned
integers (uint8 from `np.packbits`, uint16/32/64): any number of bits that is a multiple of 8;
database and queries must have the same number of bits per code (their word types may differ:
distances only depend on the bits).
"""
from __future__ import annotations

from typing import Any, Union, overload

import numpy as np
import numpy.typing as npt

from ..kernels import variants as kernels
from ..api.device import default_device
from ..errors import DeviceMemoryError, ValidationError
from ..kernels.search_programs import NAME, SearchPlan, plan_search, search_programs, tile_rows
from ..layout.operands import host_array
from ..layout.pieces import Pieces
from ..front.tensor import Tensor

__all__ = ["CODE_DTYPES", "Codes", "HammingIndex", "as_codes", "hamming_knn"]

#: Codes given as numpy data: rows of unsigned integers.
Codes = npt.NDArray[Any]
#: (distances, rows) on the host.
Answer = tuple[npt.NDArray[Any], npt.NDArray[Any]]

#: Word types a code may be made of.
CODE_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64))
#: A database piece holds at most this many bytes (and never more than one storage buffer).
PIECE_BYTES = 1 << 30
_EMPTY = 0xFFFFFFFF


def as_codes(value, tensor: str) -> np.ndarray:
    """A 2-D C-ordered array of codes as uint32 words (rows zero-padded to whole words), and
    the code's byte width."""
    if isinstance(value, Tensor):
        value = value.numpy()
    value = host_array(value, NAME, tensor, "type")
    if not isinstance(value, np.ndarray):
        raise ValidationError(NAME, tensor, "type", type(value).__name__,
                              "allowed: a numpy array or a dmlgpu.Tensor of unsigned integers")
    if value.dtype not in CODE_DTYPES:
        raise ValidationError(NAME, tensor, "dtype", value.dtype,
                              "allowed: uint8 (np.packbits), uint16, uint32, uint64 codes")
    if value.ndim != 2 or value.shape[1] == 0:
        raise ValidationError(NAME, tensor, "shape", value.shape, "allowed: (rows, words), words >= 1")
    row_bytes = value.shape[1] * value.dtype.itemsize
    as_bytes = np.ascontiguousarray(value).view(np.uint8).reshape(value.shape[0], row_bytes)
    words = -(-row_bytes // 4)
    if words * 4 != row_bytes:
        as_bytes = np.concatenate([as_bytes, np.zeros((value.shape[0], words * 4 - row_bytes), np.uint8)], axis=1)
    return np.ascontiguousarray(as_bytes).view(np.uint32), row_bytes


def _places(value, device) -> list | None:
    """Where a Tensor database can be searched as it lies (no copy through the host): its
    pieces as (buffer, word offset, first row, rows), one per buffer its rows span; None if it
    cannot (not packed whole-word rows, a piece not starting at a row or a 16-byte boundary)."""
    if not (isinstance(value, Tensor) and (device is None or device is value.device)
            and value.dtype in CODE_DTYPES and value.ndim == 2 and value.shape[0] >= 1
            and value.shape[1] >= 1 and value.is_packed and (value.shape[1] * value.itemsize) % 4 == 0):
        return None
    memory, row_bytes, start = value.buffer, value.shape[1] * value.itemsize, value.offset
    end = start + value.shape[0] * row_bytes
    if not isinstance(memory, Pieces):
        return [(memory, start // 4, 0, value.shape[0])] if start % 16 == 0 else None
    places = []
    for buffer, begins in zip(memory.buffers, memory.starts):
        first, last = max(start, begins), min(end, memory.piece_end(begins))
        if first >= last:
            continue
        if (first - start) % row_bytes or (last - start) % row_bytes or (first - begins) % 16:
            return None  # a row cut by a piece boundary, or a piece starting off a binding boundary
        places.append((buffer, (first - begins) // 4, (first - start) // row_bytes, (last - first) // row_bytes))
    return places


class HammingIndex:
    """A database of binary codes resident on a device, searched exactly by Hamming distance.

    Args:
        database: (n, words) unsigned integers (numpy or Tensor): n codes of words * itemsize * 8
            bits. A packed Tensor whose rows are whole 32-bit words is searched where it lies
            (keep it alive and unchanged while the index is used), one piece per buffer where
            it spans several; other input is copied to the device once, in pieces of at most
            one storage buffer.
        device: where it lives (default: the Tensor's device, else the default device).
        stream: keep the database on the host and upload it piece by piece in every search (each
            piece freed once scanned), for databases larger than the device's memory.

    Raises:
        ValidationError: not a 2-D array of unsigned integer codes, or no rows.
        DeviceMemoryError: the database does not fit in device memory (`stream=True` searches it).
    """

    def __init__(self, database, device=None, *, stream: bool = False):
        self._pieces = []  # (buffer, or host words with stream, word offset, first row, rows)
        self.streamed = bool(stream)
        places = None if self.streamed else _places(database, device)
        self._in_place = places is not None
        if places is not None:
            # A packed Tensor of whole-word rows, each piece 16-byte aligned: searched where it is.
            self.device = database.device
            self.rows = database.shape[0]
            self.code_bytes = database.shape[1] * database.itemsize
            self.words = self.code_bytes // 4
            self._pieces.extend(places)
        else:
            words, self.code_bytes = as_codes(database, "database")
            if words.shape[0] == 0:
                raise ValidationError(NAME, "database", "shape", words.shape, "allowed: at least one row")
            self.device = device or (database.device if isinstance(database, Tensor) else default_device())
            self.rows, self.words = words.shape
            per_piece = max(1, min(self.device.max_buffer_size, PIECE_BYTES) // (self.words * 4))
            for first in range(0, self.rows, per_piece):
                chunk = words[first:first + per_piece]
                try:
                    piece = chunk if self.streamed else self.device.upload(chunk)
                except DeviceMemoryError as error:
                    raise DeviceMemoryError(
                        f"{NAME}: the database ({self.rows * self.words * 4} bytes) does not fit in "
                        f"{self.device.name}'s memory; HammingIndex(database, stream=True) searches it "
                        "piece by piece") from error
                self._pieces.append((piece, 0, first, chunk.shape[0]))
        self._programs = {}  # k (0: the global-memory path) -> (scan, merge)

    def _kernels(self, k: int):
        """The scan and merge Programs for k (`search_programs`), kept per k."""
        key = k if k <= kernels.HAMMING_REGISTER_K else 0
        if key not in self._programs:
            self._programs[key] = search_programs(self.words, k)
        return self._programs[key]

    def tile_rows(self, k: int, count: int) -> int:
        """Rows of the database each scan invocation walks (a tile) in a search of `count`
        queries for the k nearest, before the partial lists' fit in one buffer is checked."""
        return tile_rows(self.device, [rows for _, _, _, rows in self._pieces], self.words, k, count)

    def __len__(self) -> int:
        return self.rows

    @property
    def in_place(self) -> bool:
        """Whether the index searches the caller's Tensor where it lies (no copy)."""
        return self._in_place

    @property
    def pieces(self) -> int:
        """Database pieces (one storage buffer each) a search walks."""
        return len(self._pieces)

    @overload
    def search(self, queries: Tensor, k: int) -> tuple[Tensor, Tensor]: ...
    @overload
    def search(self, queries: Codes, k: int) -> Answer: ...
    def search(self, queries: Union[Tensor, Codes], k: int) -> Any:
        """The k nearest codes of each query: (distances uint32, indices int64), shape (q, k),
        numpy's answer exactly (ties by lower row); Tensors (uint32 both) for a Tensor query.

        Raises:
            ValidationError: widths that differ, k of 0 or above the database's rows, codes that
                are not unsigned integers; before any work.
        """
        tensor_out = isinstance(queries, Tensor)
        words, code_bytes = as_codes(queries, "queries")
        if code_bytes != self.code_bytes:
            raise ValidationError(NAME, "queries", "shape", f"{code_bytes * 8}-bit codes",
                                  f"allowed: the database's {self.code_bytes * 8}-bit codes")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= self.rows:
            raise ValidationError(NAME, None, "k", k, f"allowed: an integer from 1 to {self.rows} (the database's rows)")
        k, count = int(k), words.shape[0]
        pairs = np.empty((count, k, 2), np.uint32)
        if count:
            plan = plan_search(self.device, [(first, rows) for _, _, first, rows in self._pieces], self.words, k, count)
            for start, size in plan.batches():
                pairs[start:start + size] = self._search_batch(words[start:start + size], plan)
        distances, indices = pairs[..., 0], pairs[..., 1]
        if tensor_out:
            device = queries.device
            return Tensor.from_numpy(distances, device), Tensor.from_numpy(indices, device)
        return np.ascontiguousarray(distances), indices.astype(np.int64)

    def _launch(self, program, grid, buffers, push, reads, writes):
        words = np.zeros(len(kernels.HAMMING_PUSH_FIELDS), np.uint32)
        for name, value in push.items():
            words[kernels.HAMMING_PUSH_FIELDS.index(name)] = value
        launch = self.device.launch(program, grid, buffers, words, reads=reads, writes=writes,
                                    name="dmlgpu.hamming_knn")
        if not self.device.enqueue(launch):
            raise ValidationError(NAME, None, "device", "closed or released", "allowed: an open device")

    def _search_batch(self, words: np.ndarray, plan: SearchPlan) -> np.ndarray:
        count, k = words.shape[0], plan.k
        scan, merge = self._kernels(k)
        steps, sizes, result = plan.steps_for(count)
        queries = self.device.upload(words)
        lists = [None] * len(sizes)  # (a buffer dropped here is freed in stream order, after the work using it)
        for step in steps:
            if lists[step.writes] is None:  # (every piece's scan writes its slices of list 0)
                lists[step.writes] = self.device.allocate(sizes[step.writes], zero_fill=False)
            out = lists[step.writes]
            if step.kernel == "scan":
                piece, word_offset, _, _ = self._pieces[step.piece]
                streamed = isinstance(piece, np.ndarray)
                if streamed:
                    piece = self.device.upload(piece)  # freed in stream order once scanned
                self._launch(scan, step.grid, [piece, queries, out],
                             dict(step.push, in_offset=piece.arena_offset // 4 + word_offset,
                                  query_offset=queries.arena_offset // 4, out_offset=out.arena_offset // 4),
                             reads=[(piece, 0, piece.size_in_bytes), (queries, 0, queries.size_in_bytes)],
                             writes=[(out, 0, out.size_in_bytes)])
                if streamed:
                    piece.release()
            else:
                source = lists[step.reads]
                self._launch(merge, step.grid, [source, out],
                             dict(step.push, in_offset=source.arena_offset // 4, out_offset=out.arena_offset // 4),
                             reads=[(source, 0, source.size_in_bytes)], writes=[(out, 0, out.size_in_bytes)])
        return lists[result].read(0, count * k * 8).view(np.uint32).reshape(count, k, 2)


@overload
def hamming_knn(database: Union[Tensor, Codes], queries: Tensor, k: int) -> tuple[Tensor, Tensor]: ...
@overload
def hamming_knn(database: Union[Tensor, Codes], queries: Codes, k: int) -> Answer: ...
def hamming_knn(database: Union[Tensor, Codes], queries: Union[Tensor, Codes], k: int) -> Any:
    """The k nearest database codes of each query by Hamming distance, exactly numpy's answer.

    Args:
        database: (n, words) unsigned integers, numpy or Tensor (np.packbits output works).
        queries: (q, words') unsigned integers with the same bits per code.
        k: from 1 to n.

    Returns:
        (distances, indices), shape (q, k): uint32 distances and int64 rows (uint32 Tensors for
        a Tensor query), nearest first, ties by lower row.

    Raises:
        ValidationError: bad codes, widths that differ, k out of range; before any work.

    For repeated searches keep the database on the device with `HammingIndex(database)`.
    """
    return HammingIndex(database).search(queries, k)
