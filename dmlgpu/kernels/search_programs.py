"""The plans of exact binary-code searches on the device: their kernels, tiles, batches and
dispatches, for `dmlgpu.HammingIndex` and for a compiled graph routed to the same kernels
(dmlgpu/compiler/reduction_plan.py). They name buffers by role; the caller binds them.

Two families of kernels:
- the register path (shaders/hamming.comp; Hamming, k up to kernels.HAMMING_REGISTER_K): each
  lane keeps its query's k nearest of a tile of rows in registers, one workgroup per query merges
  the tiles' lists (`plan_search`, `SearchPlan`);
- the selection path (shaders/search.comp; any k, range search, Tanimoto): a bound on the k-th
  key from a histogram of a sample of the rows, one pass appending the rows within the bound to
  per-(query, tile) regions in row order, and a selection per query (radix select, then a stable
  radix sort): `plan_selection`, `SelectionPlan`. A query whose regions overflow (rows far from
  uniform) is searched again with every row a candidate ("full" mode), which cannot overflow.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from . import variants as kernels, spirv
from ..errors import ValidationError
from ..runtime import Program

__all__ = ["ENTRY_WORDS", "HAMMING", "NAME", "SearchPlan", "SearchStep", "SelectionPlan", "TANIMOTO", "key_bits",
           "plan_search", "plan_selection", "search_programs", "selection_program", "tile_rows"]

NAME = "dmlgpu.hamming_knn"
HAMMING, TANIMOTO = 0, 1
#: Words per candidate or answer entry: (key, row), and c << 16 | u for Tanimoto.
ENTRY_WORDS = {HAMMING: 2, TANIMOTO: 3}
#: Tanimoto keys: 2^27 - floor(c * 2^27 / u) (shaders/search.comp), for codes of up to this many bits.
TANIMOTO_SCALE_BITS = 27
TANIMOTO_MAX_BITS = 8192
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
#: The partial top-k lists (or the candidates) of one batch of queries take at most this many
#: bytes (and at most one storage buffer).
PARTIAL_BYTES = 256 << 20
_GROUP = kernels.SELECTION_WORKGROUP_SIZE
#: The selection path's sample: one block of rows in `stride`, stride = rows // (SAMPLE_FACTOR * k)
#: at most MAX_STRIDE (candidates per query: about stride * k); below 2, every row is a candidate.
SAMPLE_FACTOR, MAX_STRIDE = 4, 16
#: Candidates a query's regions hold beyond the expected stride * k (per region: twice the
#: expectation plus REGION_SLACK).
REGION_SLACK = 16


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def search_programs(words: int, k: int):
    """The register path's scan and merge Programs for codes of `words` 32-bit words and k."""
    spec = np.zeros(5, np.uint32)
    spec[kernels.HAMMING_SPEC_WORDS] = words
    spec[kernels.HAMMING_SPEC_QUERIES] = 1
    spec[kernels.HAMMING_SPEC_K] = k
    spec[kernels.HAMMING_SPEC_ROWS_AT_ONCE] = max(1, kernels.HAMMING_WORDS_AT_ONCE // words)
    spec[kernels.HAMMING_SPEC_CARRY_SAVE] = kernels.HAMMING_CARRY_SAVE
    return tuple(Program(name, spirv.load(name), spec, len(kernels.HAMMING_PUSH_FIELDS))
                 for name in (kernels.HAMMING_REGISTER_SCAN, kernels.HAMMING_REGISTER_MERGE))


@functools.lru_cache(maxsize=256)
def selection_program(kernel: str, words: int, metric: int) -> Program:
    """The Program of one selection-path kernel (kernels.SEARCH_KERNELS) for codes of `words`
    32-bit words and a metric (HAMMING or TANIMOTO)."""
    spec = np.array([words, metric], np.uint32)
    return Program(kernel, spirv.load(kernel), spec, len(kernels.SEARCH_PUSH_FIELDS))


def key_bits(bits: int, metric: int) -> int:
    """Bits of the largest key of codes of `bits` bits."""
    return bits.bit_length() if metric == HAMMING else TANIMOTO_SCALE_BITS + 1


def tile_rows(device, pieces: list, words: int, k: int, count: int) -> int:
    """Rows of the database each scan invocation walks (a tile) in a search of `count` queries
    over pieces of `pieces` rows each: tiles so that lanes (queries) x tiles fill the device;
    on the register path (k <= kernels.HAMMING_REGISTER_K) a packed key's row bits cap it."""
    rows, largest = sum(pieces), max(pieces)
    floor = max(ROWS_PER_SLICE, math.ceil(largest / MAX_SLICES_PER_PIECE))
    lanes = _pow2(math.ceil(count / _GROUP)) * _GROUP
    tiles = max(1, (TARGET_LANES_CPU if device.is_cpu else TARGET_LANES) // lanes)
    if k > kernels.HAMMING_REGISTER_K:
        return max(floor, math.ceil(rows / tiles))
    # A key packs (distance << shift) | row_in_tile: distance <= words * 32 < 2^(32 - shift).
    limit = 1 << (32 - (words * 32).bit_length())
    return min(limit, max(floor, math.ceil(rows / tiles), math.ceil(rows * k * 8 / _partial(device))))


def _partial(device) -> int:
    return min(PARTIAL_BYTES, device.max_buffer_size)


@dataclass(frozen=True)
class SearchStep:
    """One dispatch of a register-path search batch: `kernel` "scan" (of database piece `piece`,
    tiles [tile_base, +tiles)) or "merge", its grid and push words by name (the buffers' word
    offsets are added by the caller), the list buffer it reads (merge) and the one it writes;
    `cost` is its work in row-words (for cutting a search into submits)."""

    kernel: str
    grid: tuple
    push: dict
    piece: int | None
    reads: int | None
    writes: int
    cost: int = 0


@dataclass(frozen=True)
class SearchPlan:
    """A register-path search of `count` queries for the k nearest: batches of `batch` queries,
    each the dispatches `steps_for(size)`; the answer is list buffer `result` as (distance, row)
    uint32 pairs, k per query."""

    k: int
    count: int
    batch: int
    per_slice: int
    slices: tuple
    words: int
    pieces: tuple  # (first row, rows) per piece

    def steps_for(self, count: int, tiles_per_step: int | None = None) -> tuple[list, list, int]:
        """(steps, list buffer sizes in bytes, result list) of a batch of `count` queries; each
        piece's scan cut into dispatches of at most `tiles_per_step` tiles (default: one)."""
        k, total = self.k, sum(self.slices)
        grid_y = _pow2(count)
        scan_x = _pow2(math.ceil(count / _GROUP))
        steps, sizes = [], [count * total * k * 8]
        base = 0
        for i, ((first, rows), piece_slices) in enumerate(zip(self.pieces, self.slices)):
            per_step = piece_slices if tiles_per_step is None else max(1, min(piece_slices, tiles_per_step))
            for tile_base in range(0, piece_slices, per_step):
                tiles = min(per_step, piece_slices - tile_base)
                steps.append(SearchStep("scan", (scan_x, _pow2(tiles), 1),
                                        dict(words=self.words, rows=rows, row_base=first, rows_per_slice=self.per_slice,
                                             k=k, slices=piece_slices, slice_base=base, slices_total=total,
                                             queries=count, tile_base=tile_base, tiles=tiles), i, None, 0,
                                        tiles * self.per_slice * count * self.words))
            base += piece_slices
        if total > 1:  # a workgroup per query folds its lists into one
            sizes.append(count * k * 8)
            steps.append(SearchStep("merge", (1, grid_y, 1), dict(rows=total, k=k, queries=count), None, 0, 1,
                                    count * total * k))
        return steps, sizes, len(sizes) - 1

    def batches(self) -> list[tuple[int, int]]:
        """(first query, queries) of each batch."""
        return [(start, min(self.batch, self.count - start)) for start in range(0, self.count, self.batch)]


def plan_search(device, pieces: list, words: int, k: int, count: int, tensor: str = "database",
                operator: str = NAME) -> SearchPlan:
    """The register-path plan of a search of `count` queries (at least 1) for the k nearest
    (k <= kernels.HAMMING_REGISTER_K) over database pieces `pieces` ((first row, rows) each) of
    codes of `words` 32-bit words.

    Raises:
        ValidationError: the partial lists cannot fit one buffer (codes too wide for the
            register path's keys).
    """
    partial = _partial(device)
    rows_of = [rows for _, rows in pieces]
    largest = max(rows_of)
    per_slice = tile_rows(device, rows_of, words, k, count)
    limit = 1 << (32 - (words * 32).bit_length())
    while True:  # one query's lists (a slice per tile of each piece) fit in `partial`
        slices = [math.ceil(rows / per_slice) for rows in rows_of]
        total = sum(slices)
        if total * k * 8 <= partial or per_slice >= largest:
            break
        if per_slice * 2 > limit:
            raise ValidationError(operator, tensor, "shape", (sum(rows_of), words * 4),
                                  "allowed: partial top-k lists that fit one buffer")
        per_slice *= 2
    batch = max(1, min(count, 32768, partial // (total * k * 8)))
    return SearchPlan(k, count, batch, per_slice, tuple(slices), words, tuple(pieces))


@dataclass(frozen=True)
class SelectionPlan:
    """A selection-path search of `count` queries for the k nearest (k = 0: every row within
    a bound, range search) over pieces ((first row, rows) each).

    mode: "sampled" (a histogram of every `stride`-th block of `rows_per_tile` rows bounds the
    k-th key; regions of `capacity` entries) or "full" (every row a candidate; regions of a
    tile's rows) or "range" (regions at offsets counted first). Queries run in batches of
    `batch`; `tiles` per piece, `shift` the histogram's bin width (bits)."""

    mode: str
    metric: int
    k: int
    count: int
    batch: int
    words: int
    bits: int
    rows_per_tile: int
    tiles: tuple
    pieces: tuple
    stride: int
    capacity: int
    shift: int

    @property
    def tiles_total(self) -> int:
        return sum(self.tiles)

    @property
    def entry(self) -> int:
        return ENTRY_WORDS[self.metric]

    @property
    def key_bits(self) -> int:
        return key_bits(self.bits, self.metric)

    def candidate_words(self, count: int) -> int:
        """Words of the candidate regions of a batch of `count` queries (fixed capacities)."""
        return count * self.tiles_total * self.capacity * self.entry

    def batches(self) -> list[tuple[int, int]]:
        return [(start, min(self.batch, self.count - start)) for start in range(0, self.count, self.batch)]


def _histogram_shift(bits: int, metric: int) -> int:
    """Bits dropped from a key to index the sample histogram's kernels.SEARCH_HIST_BINS bins."""
    largest = (1 << TANIMOTO_SCALE_BITS) if metric == TANIMOTO else bits
    shift = 0
    while (largest >> shift) + 1 > kernels.SEARCH_HIST_BINS:
        shift += 1
    return shift


def plan_selection(device, pieces: list, words: int, bits: int, k: int, count: int, metric: int,
                   mode: str | None = None) -> SelectionPlan:
    """The plan of a selection-path search (see `SelectionPlan`); mode None picks "sampled"
    where a sample of at least SAMPLE_FACTOR * k rows in every other block exists, else "full"."""
    rows_of = [rows for _, rows in pieces]
    rows = sum(rows_of)
    per_tile = tile_rows(device, rows_of, words, max(k, kernels.HAMMING_REGISTER_K + 1), count)
    tiles = tuple(math.ceil(r / per_tile) for r in rows_of)
    total = sum(tiles)
    stride = 1
    if mode is None:
        stride = min(MAX_STRIDE, rows // max(1, SAMPLE_FACTOR * k), total // 2 if total >= 2 else 1)
        mode = "sampled" if stride >= 2 else "full"
    entry = ENTRY_WORDS[metric]
    if mode == "sampled":
        capacity = 2 * math.ceil(stride * k / total) + REGION_SLACK
    elif mode == "full":
        capacity = per_tile
    else:
        capacity = 0
    partial = _partial(device) // 4  # words
    per_query = max(total * capacity * entry, 2 * max(k, 1) * entry, 1)
    batch = max(1, min(count, 32768, partial // per_query))
    return SelectionPlan(mode, metric, k, count, batch, words, bits, per_tile, tiles, tuple(pieces), stride,
                         capacity, _histogram_shift(bits, metric))
