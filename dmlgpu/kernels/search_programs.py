"""The plan of an exact Hamming k-NN search on the device (shaders/hamming.comp): its kernels,
tiles, batches and dispatches, for `dmlgpu.HammingIndex` and for a compiled graph routed to the
same kernels (dmlgpu/compiled_reduction.py). It names buffers by role; the caller binds them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import variants as kernels, spirv
from ..errors import ValidationError
from ..runtime import Program

__all__ = ["NAME", "SearchPlan", "SearchStep", "plan_search", "search_programs", "tile_rows"]

NAME = "dmlgpu.hamming_knn"
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
_GROUP = kernels.SELECTION_WORKGROUP_SIZE


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
