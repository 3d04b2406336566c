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

import math
from dataclasses import dataclass

import numpy as np

from . import kernels, spirv
from .device import default_device
from .errors import DeviceMemoryError, ValidationError
from .operands import host_array
from .runtime import Program
from .pieces import Pieces
from .tensor import Tensor

__all__ = ["CODE_DTYPES", "HammingIndex", "SearchPlan", "SearchStep", "as_codes", "hamming_knn", "plan_search",
           "search_programs"]

NAME = "dmlgpu.hamming_knn"
#: Word types a code may be made of.
CODE_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64))
#: Rows an invocation of the scan walks at least (more when the partial lists would not fit).
ROWS_PER_SLICE = 256
#: The register path (k <= kernels.HAMMING_REGISTER_K): lanes (one per query) times row tiles the
#: scan aims at, so that a GPU is full (an H100: 132 SMs x 2,048 lanes) with tiles as long as that
#: allows (a lane's list takes about k * ln(rows / k) insertions); a CPU driver runs a workgroup
#: per thread at a time and wants few, long tiles.
#: 2^19 on a GPU: the fastest of 2^15..2^19 on an H100 (benchmarks/hamming.py --sweep; 2,048-row
#: tiles for 1M rows x 1,024 queries: 355 G distances/s against 325 at 2^18).
TARGET_LANES, TARGET_LANES_CPU = 1 << 19, 1 << 10
#: Row tiles (scan workgroups along the grid's y, at most 65535 on any device) per piece.
MAX_SLICES_PER_PIECE = 1 << 15
#: The partial top-k lists of one batch of queries take at most this many bytes (and at most one
#: storage buffer).
PARTIAL_BYTES = 256 << 20
#: A database piece holds at most this many bytes (and never more than one storage buffer).
PIECE_BYTES = 1 << 30
_EMPTY = 0xFFFFFFFF
_GROUP = kernels.SELECTION_WORKGROUP_SIZE


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


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def search_programs(words: int, k: int):
    """The scan and merge Programs for codes of `words` 32-bit words and k: the register path's
    (k a specialization constant) for k <= kernels.HAMMING_REGISTER_K, else the global-memory
    path's (any k)."""
    key = k if k <= kernels.HAMMING_REGISTER_K else 0
    spec = np.zeros(5, np.uint32)
    spec[kernels.HAMMING_SPEC_WORDS] = words
    spec[kernels.HAMMING_SPEC_QUERIES] = kernels.HAMMING_QUERIES_PER_INVOCATION
    spec[kernels.HAMMING_SPEC_K] = key
    spec[kernels.HAMMING_SPEC_ROWS_AT_ONCE] = max(1, kernels.HAMMING_WORDS_AT_ONCE // words)
    spec[kernels.HAMMING_SPEC_CARRY_SAVE] = kernels.HAMMING_CARRY_SAVE
    scan, merge = ((kernels.HAMMING_REGISTER_SCAN, kernels.HAMMING_REGISTER_MERGE) if key
                   else (kernels.HAMMING_SCAN, kernels.HAMMING_MERGE))
    return tuple(Program(name, spirv.load(name), spec, len(kernels.HAMMING_PUSH_FIELDS)) for name in (scan, merge))


def tile_rows(device, pieces: list, words: int, k: int, count: int) -> int:
    """Rows of the database each scan invocation walks (a tile) in a search of `count`
    queries for the k nearest over pieces of `pieces` rows each, before the partial lists' fit
    in one buffer is checked."""
    rows, largest = sum(pieces), max(pieces)
    floor = max(ROWS_PER_SLICE, math.ceil(largest / MAX_SLICES_PER_PIECE))
    partial = min(PARTIAL_BYTES, device.max_buffer_size)
    if k > kernels.HAMMING_REGISTER_K:
        return max(floor, math.ceil(rows * k * 8 / partial))
    # A key packs (distance << shift) | row_in_tile: distance <= words * 32 < 2^(32 - shift).
    limit = 1 << (32 - (words * 32).bit_length())
    lanes = _pow2(math.ceil(count / _GROUP)) * _GROUP
    tiles = max(1, (TARGET_LANES_CPU if device.is_cpu else TARGET_LANES) // lanes)
    return min(limit, max(floor, math.ceil(rows / tiles), math.ceil(rows * k * 8 / partial)))


@dataclass(frozen=True)
class SearchStep:
    """One dispatch of a search batch: `kernel` "scan" (of database piece `piece`) or "merge",
    its grid and push words by name (the buffers' word offsets are added by the caller), the
    list buffer it reads (merge; None for a scan, which reads the piece and the queries) and the
    one it writes (`SearchPlan.list_bytes` names their sizes)."""

    kernel: str
    grid: tuple
    push: dict
    piece: int | None
    reads: int | None
    writes: int


@dataclass(frozen=True)
class SearchPlan:
    """How a search of `count` queries for the k nearest runs: batches of `batch` queries, each
    the dispatches `steps` (for a batch of `batch` queries; a last, smaller batch has steps of
    its own: `steps_for`), list buffers of `list_bytes` bytes; the answer is list buffer
    `result` as (distance, row) uint32 pairs, k per query."""

    k: int
    count: int
    batch: int
    per_slice: int
    slices: tuple
    words: int
    pieces: tuple  # (first row, rows) per piece

    def steps_for(self, count: int) -> tuple[list, list, int]:
        """(steps, list buffer sizes in bytes, result list) of a batch of `count` queries."""
        k, total = self.k, sum(self.slices)
        registers = k <= kernels.HAMMING_REGISTER_K
        grid_y = _pow2(count)
        scan_x = _pow2(math.ceil(count / ((1 if registers else kernels.HAMMING_QUERIES_PER_INVOCATION) * _GROUP)))
        steps, sizes = [], [count * total * k * 8]
        base = 0
        for i, ((first, rows), piece_slices) in enumerate(zip(self.pieces, self.slices)):
            steps.append(SearchStep("scan", (scan_x, _pow2(piece_slices), 1),
                                    dict(words=self.words, rows=rows, row_base=first, rows_per_slice=self.per_slice,
                                         k=k, slices=piece_slices, slice_base=base, slices_total=total,
                                         queries=count), i, None, 0))
            base += piece_slices
        if registers and total > 1:  # a workgroup per query folds its lists into one
            sizes.append(count * k * 8)
            steps.append(SearchStep("merge", (1, grid_y, 1), dict(rows=total, k=k, queries=count), None, 0, 1))
        level = 1 if registers else total
        while level > 1:
            out_lists = math.ceil(level / kernels.HAMMING_MERGE_GROUP)
            sizes.append(count * out_lists * k * 8)
            steps.append(SearchStep("merge", (_pow2(math.ceil(out_lists / _GROUP)), grid_y, 1),
                                    dict(rows=level, rows_per_slice=kernels.HAMMING_MERGE_GROUP, k=k,
                                         slices=out_lists, queries=count), None, len(sizes) - 2, len(sizes) - 1))
            level = out_lists
        return steps, sizes, len(sizes) - 1

    def batches(self) -> list[tuple[int, int]]:
        """(first query, queries) of each batch."""
        return [(start, min(self.batch, self.count - start)) for start in range(0, self.count, self.batch)]


def plan_search(device, pieces: list, words: int, k: int, count: int, tensor: str = "database") -> SearchPlan:
    """The plan of a search of `count` queries (at least 1) for the k nearest over database
    pieces `pieces` ((first row, rows) each) of codes of `words` 32-bit words.

    Raises:
        ValidationError: the partial lists cannot fit one buffer (codes too wide for the
            register path's keys).
    """
    partial = min(PARTIAL_BYTES, device.max_buffer_size)
    rows_of = [rows for _, rows in pieces]
    largest = max(rows_of)
    per_slice = tile_rows(device, rows_of, words, k, count)
    while True:  # one query's lists (a slice per tile of each piece) fit in `partial`
        slices = [math.ceil(rows / per_slice) for rows in rows_of]
        total = sum(slices)
        if total * k * 8 <= partial or per_slice >= largest:  # (else: a slice per piece)
            break
        if k <= kernels.HAMMING_REGISTER_K and per_slice * 2 > 1 << (32 - (words * 32).bit_length()):
            raise ValidationError(NAME, tensor, "shape", (sum(rows_of), words * 4),
                                  "allowed: partial top-k lists that fit one buffer")
        per_slice *= 2
    batch = max(1, min(count, 32768, partial // (total * k * 8)))
    return SearchPlan(k, count, batch, per_slice, tuple(slices), words, tuple(pieces))


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

    def search(self, queries, k: int):
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


def hamming_knn(database, queries, k: int):
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
