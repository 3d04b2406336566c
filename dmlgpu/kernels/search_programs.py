"""The plans of exact binary-code searches on the device: their kernels, tiles, batches and
dispatches, for `dmlgpu.HammingIndex` and for a compiled graph routed to the same kernels
(dmlgpu/compiler/reduction_plan.py). They name buffers by role; the caller binds them.

Two families of kernels:
- the register path (shaders/hamming.comp; Hamming, k up to kernels.HAMMING_REGISTER_K): each
  lane keeps its query's k nearest of a tile of rows in registers, one workgroup per query merges
  the tiles' lists (`plan_search`, `SearchPlan`); where the database is large enough, the same
  scan and merge over a sample of it first bound each query's answer;
- shaders/search.comp (`plan_selection`, `SelectionPlan` in selection_plans.py): Hamming past the
  register path, Tanimoto and range search, by selection: a histogram of a sample of the rows
  (every stride-th) bounds each query's k-th key tightly, one pass appends the rows within the
  bound to per-(query, tile) regions in row order, and a selection per query (radix select,
  then a stable radix sort) gives the answer. A query whose regions overflow (rows far from
  uniform) or hold fewer than k rows (a sample that misled the bound) is searched again
  "exact": every row's histogram bounds it surely, and the rows within are counted before the
  regions are laid out, so it cannot fail.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from . import variants as kernels, spirv
from ..errors import ValidationError
from ..runtime import Program

__all__ = ["ALL", "ENTRY_WORDS", "HAMMING", "NAME", "SearchPlan", "SearchStep", "TANIMOTO", "cut", "grid",
           "key_bits", "lane_cost", "dispatch_budget", "partial_bytes", "plan_search", "push_words", "search_programs",
           "selection_program", "tile_rows"]

NAME = "dmlgpu.hamming_knn"
HAMMING, TANIMOTO = 0, 1
#: A push word meaning "none" (no bound: every row; no region table: fixed capacities).
ALL = 0xFFFFFFFF
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
#: A submit's worth of work (a search's `budget`, at the first guess of the rate) holds at least
#: this many items (a group of 64 queries over one tile), so that one submit is short and a CPU
#: driver's threads share it, in this many dispatches (a submit is made of whole dispatches, and
#: follows the rate measured as the search runs). Few, long tiles: the register path's lanes
#: insert about k (1 + ln(rows / k)) rows into their lists per tile (lavapipe, 100k x 256-bit x 64
#: queries, k = 32: 8 items per submit 245-320 ms, 2 items 120-140 ms, unpaced 95-125 ms), but two
#: items per dispatch at least, for a CPU driver's two threads. DISPATCHES_PER_SUBMIT is keyed by
#: `device.is_cpu`: a GPU's dispatch is a whole submit's worth, as a dispatch cut shorter leaves
#: the GPU part empty at its end (H200, 16M x 256-bit codes, 256 queries, top-10: the main scan
#: in three dispatches 13.2 ms end to end, in one 11.1; benchmarks/NOTES.md, session 26).
ITEMS_PER_SUBMIT, DISPATCHES_PER_SUBMIT = 4, {True: 2, False: 1}
#: Queries a CPU driver runs as one vector (lavapipe's 256-bit vectors): fewer cost as much, so
#: the cost of kernels whose lanes are queries counts them in eights.
LANES_AT_ONCE = 8
#: Row tiles per piece at most (longer tiles beyond).
MAX_SLICES_PER_PIECE = 1 << 15
#: The register path's bound (shaders/hamming.comp): the scan and merge run first over the
#: database's first k x BOUND_SAMPLE_TILES tiles' rows, and each query's k-th distance there
#: bounds its answer, so a lane then considers about BOUND_SAMPLE_TILES^-1 rows per tile instead
#: of inserting the first ~32 k rows of every tile (a warp inserts when any of its 32 lanes
#: does). Only where that sample is at most 1 / BOUND_SAMPLE_SHARE of the rows (its own scan
#: costs that share, and pays the insertions the bound saves the rest).
BOUND_SAMPLE_TILES, BOUND_SAMPLE_SHARE = 1, 8
#: On a GPU, and only from this k for 256-bit codes (in proportion to the code's width: a wider
#: code's distance costs more beside the insertions the bound saves): below it the sample's own
#: scan and merge cost more than they save (H200, 1,024 queries over 1M x 256-bit codes: k = 1-10
#: 2-9% faster without, k = 12 alike, k = 16 7% and k = 20 18% faster with; 1M x 1,024-bit: k up
#: to 20 1-3% faster without, 24-32 alike; 16M x 256-bit x 256 queries: the same crossing; NOTES
#: session 27). A CPU driver bounds every search the sample fits.
BOUND_MIN_K_GPU = 13
#: Every search kernel (both families) is dispatched over one grid per device, its workgroups
#: looping over the dispatch's items, so that a pipeline is made once per kernel and
#: specialization, never per size of search (a first search on lavapipe compiled one for every
#: new power-of-two grid). A GPU: TARGET_LANES / 64 workgroups, as many as the register plan
#: aims its items at (an H100 full); a CPU driver: TARGET_LANES_CPU / 64 = 16 (lavapipe runs each
#: workgroup of the grid, even one with no item: 64 made searches of 16 items 1.5-2x slower).
GRIDGROUPS, GRIDGROUPS_CPU = 1 << 13, 1 << 4
#: The partial top-k lists (or the candidates) of one batch of queries take at most this many
#: bytes (and at most one storage buffer).
PARTIAL_BYTES = 256 << 20
GROUP = kernels.SELECTION_WORKGROUP_SIZE


def grid(device) -> tuple:
    """The grid of every search kernel on `device` (see GRIDGROUPS)."""
    return (GRIDGROUPS_CPU if device.is_cpu else GRIDGROUPS, 1, 1)


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


def tile_rows(device, pieces: list, words: int, k: int, count: int, budget: int | None = None,
              fill: bool = True) -> int:
    """Rows of the database each scan invocation walks (a tile) in a search of `count` queries
    over pieces of `pieces` rows each: tiles so that lanes (queries) x tiles fill the device, and
    (with a `budget` in row-words: a submit's worth) short enough that ITEMS_PER_SUBMIT groups of
    64 queries over one tile fit it, so that a search can be cut into submits that short; on the
    register path (k <= kernels.HAMMING_REGISTER_K) a packed key's row bits cap it, and on a GPU
    each dispatch (a piece's scan, or a part of it where the scan is cut) holds a full grid's
    worth of items (`fill`; `plan_search` lengthens them again where one batch's partial lists
    would not fit a buffer)."""
    rows, largest = sum(pieces), max(pieces)
    floor = max(ROWS_PER_SLICE, math.ceil(largest / MAX_SLICES_PER_PIECE))
    lanes = kernels.ceil_pow2(math.ceil(count / GROUP)) * GROUP
    tiles = max(1, (TARGET_LANES_CPU if device.is_cpu else TARGET_LANES) // lanes)
    wanted = math.ceil(rows / tiles)
    if budget is not None:
        wanted = min(wanted, max(1, budget // (ITEMS_PER_SUBMIT * GROUP * words)))
    if k > kernels.HAMMING_REGISTER_K:
        return max(floor, wanted)
    if fill and not device.is_cpu:
        # A dispatch with a fraction of the grid's items runs a wave and a ragged one (H200, 16M x
        # 256-bit x 1,024 queries, the scan cut in three: 0.73x the rate; four pieces of 4M rows,
        # a quarter grid each: 0.85x; NOTES session 27)
        cuts = 1 if budget is None else math.ceil(largest * lane_cost(count) * words / dispatch_budget(budget, False))
        wanted = min(wanted, math.ceil(largest / (tiles * cuts)))
    # A key packs (distance << shift) | row_in_tile: distance <= words * 32 < 2^(32 - shift).
    limit = 1 << (32 - (words * 32).bit_length())
    return min(limit, max(floor, wanted, math.ceil(rows * k * 8 / partial_bytes(device))))


def dispatch_budget(budget: int | None, cpu: bool) -> int | None:
    """Row-words of one dispatch of a plan made for submits of `budget` on a CPU driver or a GPU
    (DISPATCHES_PER_SUBMIT)."""
    return None if budget is None else max(1, budget // DISPATCHES_PER_SUBMIT[cpu])


def lane_cost(queries: int) -> int:
    """What `queries` lanes of a kernel whose lanes are queries cost as (LANES_AT_ONCE)."""
    return -(-queries // LANES_AT_ONCE) * LANES_AT_ONCE


def cut(groups: int, tiles: int, item_cost: int, budget: int | None):
    """(first group, groups, first tile, tiles) of dispatches covering `groups` x `tiles` items
    (a group of queries over a tile, `item_cost` row-words each), each at most `budget`
    row-words (but one item at least); budget None: one dispatch."""
    if budget is None:
        yield 0, groups, 0, tiles
    elif groups * item_cost <= budget:  # whole tiles: every group of queries
        # As few dispatches as the budget allows, their tiles shared out evenly (sizes one apart):
        # a short last one would leave the device part idle (NOTES, session 26).
        dispatches = math.ceil(tiles / max(1, min(tiles, budget // (groups * item_cost))))
        for i in range(dispatches):
            first = i * tiles // dispatches
            yield 0, groups, first, (i + 1) * tiles // dispatches - first
    else:
        step = max(1, budget // item_cost)
        for tile in range(tiles):
            for group in range(0, groups, step):
                yield group, min(step, groups - group), tile, 1


def push_words(push: dict) -> np.ndarray:
    """The push-constant block (kernels.HAMMING_PUSH_FIELDS, uint32) of a register-path step
    from its fields by name (a step's own, and the buffers' offsets its caller adds)."""
    words = np.zeros(len(kernels.HAMMING_PUSH_FIELDS), np.uint32)
    for name, value in push.items():
        words[kernels.HAMMING_PUSH_FIELDS.index(name)] = value
    return words


def partial_bytes(device) -> int:
    """Bytes of one batch's scratch buffer at most: PARTIAL_BYTES and one storage buffer; on a
    CPU driver also half an arena of the device's pool (a larger buffer is a dedicated
    allocation, and the pipelines that bind it are made again in every search: lavapipe's take
    tens of milliseconds each, a GPU driver's come from its cache)."""
    partial = min(PARTIAL_BYTES, device.max_buffer_size)
    return min(partial, device.memory_stats()["arena_bytes"] // 2) if device.is_cpu else partial


@dataclass(frozen=True)
class SearchStep:
    """One dispatch of a register-path search batch: `kernel` "scan" (of database piece `piece`,
    tiles [tile_base, +tiles), queries [query_base, query_end)) or "merge", its grid (the same for
    every step) and push words by name (the buffers' word offsets are added by the caller), the
    list buffer it reads (merge) and the one it writes; `cost` is its work in row-words (for
    cutting a search into submits). A scan's `span` is the byte range of the list buffer it
    writes (its tiles' lists, slice-major: scans of other tiles need no barrier between them)
    and `bound` the range it reads there (the sample's answer) or None; a merge's are None
    (the whole buffer)."""

    kernel: str
    grid: tuple
    push: dict
    piece: int | None
    reads: int | None
    writes: int
    cost: int = 0
    span: tuple | None = None
    bound: tuple | None = None


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
    grid: tuple  # (`grid(device)`)
    budget: int | None  # row-words of a submit the plan was made for (None: one dispatch per piece)
    sample_rows: int = 0  # rows of piece 0 whose k-th distance bounds the answer (0: no bound)
    sample_slice: int = 0  # rows per tile of the sample's scan (shorter: it runs alone)
    cpu: bool = False  # made for a CPU driver (`dispatch_budget`)

    def _scans(self, count: int, piece: int, first: int, rows: int, per_slice: int, slices: int, slice_base: int,
               slices_total: int, **fields):
        """The scan steps of `count` queries over `rows` rows of piece `piece` (tiles `cut`)."""
        groups = math.ceil(count / GROUP)
        item = per_slice * lane_cost(min(count, GROUP)) * self.words
        for group, n_groups, tile_base, tiles in cut(groups, slices, item, dispatch_budget(self.budget, self.cpu)):
            query_base, query_end = group * GROUP, min(count, (group + n_groups) * GROUP)
            push = dict(words=self.words, rows=rows, row_base=first, rows_per_slice=per_slice, k=self.k,
                        slices=slices, slice_base=slice_base, slices_total=slices_total, queries=count,
                        tile_base=tile_base, tiles=tiles, query_base=query_base, query_end=query_end, in_at=0,
                        out_at=0, bound_at=ALL)
            push.update(fields)
            list_bytes = 8 * self.k * count  # a slice's lists, every query
            start = 4 * push["out_at"] + (slice_base + tile_base) * list_bytes
            bound = None if push["bound_at"] == ALL else (4 * push["bound_at"], 4 * push["bound_at"] + list_bytes)
            yield SearchStep("scan", self.grid, push, piece, None, 0,
                             tiles * per_slice * lane_cost(query_end - query_base) * self.words,
                             (start, start + tiles * list_bytes), bound)

    def steps_for(self, count: int) -> tuple[list, list, int]:
        """(steps, list buffer sizes in bytes, result list) of a batch of `count` queries; each
        piece's scan cut into dispatches of a share of the plan's budget (`cut`). With a sample
        (`sample_rows`), list buffer 0 holds after the partial lists the sample's lists and
        then its answer (merged in place), which bounds the scans that follow."""
        k, total = self.k, sum(self.slices)
        main = count * total * k * 2  # words of the partial lists
        steps, bound_at = [], ALL
        if self.sample_rows:
            sample_slices = math.ceil(self.sample_rows / self.sample_slice)
            answer_at = main + count * sample_slices * k * 2
            steps += self._scans(count, 0, self.pieces[0][0], self.sample_rows, self.sample_slice, sample_slices, 0,
                                 sample_slices, out_at=main)
            steps.append(SearchStep("merge", self.grid, dict(rows=sample_slices, k=k, queries=count, in_at=main,
                                                             out_at=answer_at, bound_at=ALL), None, 0, 0,
                                    count * sample_slices * k))
            main, bound_at = answer_at + count * k * 2, answer_at
        sizes = [main * 4]
        base = 0
        for i, ((first, rows), piece_slices) in enumerate(zip(self.pieces, self.slices)):
            steps += self._scans(count, i, first, rows, self.per_slice, piece_slices, base, total, bound_at=bound_at)
            base += piece_slices
        if total > 1:  # a workgroup per query folds its lists into one
            sizes.append(count * k * 8)
            steps.append(SearchStep("merge", self.grid, dict(rows=total, k=k, queries=count, in_at=0, out_at=0,
                                                             bound_at=ALL), None, 0, 1, count * total * k))
        return steps, sizes, len(sizes) - 1

    def batches(self) -> list[tuple[int, int]]:
        """(first query, queries) of each batch."""
        return [(start, min(self.batch, self.count - start)) for start in range(0, self.count, self.batch)]


def plan_search(device, pieces: list, words: int, k: int, count: int, tensor: str = "database",
                operator: str = NAME, budget: int | None = None) -> SearchPlan:
    """The register-path plan of a search of `count` queries (at least 1) for the k nearest
    (k <= kernels.HAMMING_REGISTER_K) over database pieces `pieces` ((first row, rows) each) of
    codes of `words` 32-bit words, for submits of `budget` row-words (`tile_rows`; None: a
    dispatch per piece).

    Raises:
        ValidationError: the partial lists cannot fit one buffer (codes too wide for the
            register path's keys).
    """
    partial = partial_bytes(device)
    rows_of = [rows for _, rows in pieces]
    largest = max(rows_of)
    per_slice = tile_rows(device, rows_of, words, k, count, budget)
    longest = tile_rows(device, rows_of, words, k, count, budget, fill=False)
    limit = 1 << (32 - (words * 32).bit_length())

    def layout(per_slice: int):
        """(per_slice, slices, sample rows, sample tile rows, list bytes per query)."""
        while True:  # one query's lists (a slice per tile of each piece) fit in `partial`
            slices = [math.ceil(rows / per_slice) for rows in rows_of]
            total = sum(slices)
            if total * k * 8 <= partial or per_slice >= largest:
                break
            if per_slice * 2 > limit:
                raise ValidationError(operator, tensor, "shape", (sum(rows_of), words * 4),
                                      "allowed: partial top-k lists that fit one buffer")
            per_slice *= 2
        sample = BOUND_SAMPLE_TILES * k * per_slice
        if total < 2 or sample * BOUND_SAMPLE_SHARE > sum(rows_of) or sample > rows_of[0] \
                or (not device.is_cpu and k * 8 < BOUND_MIN_K_GPU * words):
            sample = 0
        # The sample's scan runs alone (before the bound it gives): tiles as short as fill the device.
        sample_slice = min(per_slice, tile_rows(device, [sample], words, k, count, budget)) if sample else 0
        per_query = (total + (math.ceil(sample / sample_slice) + 1 if sample else 0)) * k * 8
        if per_query > partial:
            sample, sample_slice, per_query = 0, 0, total * k * 8
        return per_slice, slices, sample, sample_slice, per_query

    per_slice, slices, sample, sample_slice, per_query = layout(per_slice)
    # Tiles shortened to fill a GPU's dispatches (`tile_rows`) are lengthened again, up to the
    # length they had without, while one batch's lists do not fit: a batch more would scan the
    # database once more.
    while per_query * min(count, 32768) > partial and per_slice < longest:
        per_slice, slices, sample, sample_slice, per_query = layout(min(longest, math.ceil(per_slice * 1.25)))
    batch = max(1, min(count, 32768, partial // per_query))
    return SearchPlan(k, count, batch, per_slice, tuple(slices), words, tuple(pieces), grid(device), budget, sample,
                      sample_slice, device.is_cpu)
