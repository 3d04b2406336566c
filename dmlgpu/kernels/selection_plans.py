"""The plans of selection-path searches (shaders/search.comp): Hamming past the register path,
Tanimoto, range search (see search_programs.py's docstring for the two families). A plan says
the mode, the tiles, the batches of queries (each batch's buffers within one storage buffer) and
every dispatch by its push fields; the caller binds the buffers."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import variants as kernels
from ..errors import ValidationError
from .search_programs import (ALL, ENTRY_WORDS, GROUP, HAMMING, NAME, TANIMOTO, TANIMOTO_SCALE_BITS, cut,
                              dispatch_budget, key_bits, lane_cost, partial_bytes, tile_rows)

__all__ = ["SelectionPlan", "histogram_shift", "plan_selection", "push_words"]

#: The sampled search's sample: every `stride`-th row, the largest power of two up to MAX_STRIDE
#: whose sample holds SAMPLE_FACTOR times the count its bound must reach (the bound well inside
#: the sample); where none does, or k is above rows / (2 * SAMPLE_FACTOR), every row is a
#: candidate ("full"). The histogram costs about 1 / stride of the gather (a tenth on lavapipe
#: at 32, where its shared-memory atomics are slow), and a larger stride only widens the
#: bound's margin below (relatively: BOUND_SIGMAS * sqrt(stride / k)).
SAMPLE_FACTOR, MAX_STRIDE = 4, 32
#: The sampled bound: the bin where the sample's running sum reaches `reach` = ceil(mu +
#: BOUND_SIGMAS * sqrt(mu)) + BOUND_SLACK, mu = k * sample / rows: the count a bin holding
#: exactly k rows gets on average. In rows in random order (or any order sampled evenly by a
#: systematic sample) a bin's sample count is binomial (~Poisson) with mean N / stride, so the
#: bound holds fewer than k rows only when a count exceeds its mean by BOUND_SIGMAS standard
#: deviations (2 slack for the heavier Poisson tail at small mu): 1e-5 per query or less, and then
#: the selection reports the query (too few candidates) and it is searched again exactly. The
#: candidates it lets through: k + BOUND_SIGMAS * sqrt(k * stride) + stride * BOUND_SLACK, and
#: the bound's ties (the rest of its bin). The k-th key of the sample instead (reach = k) would
#: let about stride * k through.
BOUND_SIGMAS, BOUND_SLACK = 5, 2
#: Candidates a (query, tile) region holds: twice its share of the most rows below the bound's
#: bin but for a rare sample, stride * (reach + BOUND_SIGMAS * sqrt(reach) + BOUND_SLACK) (the
#: bin below the bound has a sample count under reach; twice: ties at the bound, a bin whose rows
#: are no more than those below it), plus REGION_SLACK (the largest of many Poisson counts with a
#: small mean). With the expected share alone, 2 of 70 queries at k = 33 (reach 9) overflowed.
REGION_SLACK = 16
#: Regions may take up to 1 / SPARE_SHARE of a batch's largest buffer beyond that, up to a tile's
#: rows: free (only the rows within a bound are written), and rows clustered in a tile (a query's
#: near rows added together) then stay in the first pass when the queries are few.
SPARE_SHARE = 4


@dataclass(frozen=True)
class SelectionPlan:
    """A selection-path search of `count` queries for the k nearest (k = 0: every row within
    a bound, range search) over pieces ((first row, rows) each).

    mode: "sampled" (a histogram of every `stride`-th row bounds the k-th key, its running sum
    reaching `reach`; regions of `capacity` entries; a query whose regions overflowed or hold
    fewer than k rows is reported in its status, to be searched again "exact", within its bound
    where that held k rows), "exact" (the
    histogram of every row bounds the k-th key surely; the rows within counted per region
    first, regions at the offsets they give: it never fails), "full" (every row a candidate;
    regions of a tile's rows) or "range" (regions at offsets counted first, under a bound the
    caller gives). Queries run in batches of `batch`; `tiles` per piece, `shift` the
    histogram's bin width (bits)."""

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
    budget: int | None  # row-words of a submit the plan was made for (None: one dispatch each)
    reach: int = 0  # the sample's count the bound's bin reaches
    cpu: bool = False  # made for a CPU driver (`dispatch_budget`)

    @property
    def tiles_total(self) -> int:
        return sum(self.tiles)

    @property
    def entry(self) -> int:
        return ENTRY_WORDS[self.metric]

    @property
    def key_bits(self) -> int:
        return key_bits(self.bits, self.metric)

    @property
    def sampled(self) -> bool:
        """Whether a histogram (of a sample, or of every row: "exact") bounds each query's k-th
        key first (SEARCH_HIST, SEARCH_BOUND)."""
        return self.mode in ("sampled", "exact")

    @property
    def counted(self) -> bool:
        """Whether the rows within the bound are counted per region first, and the regions laid
        out at the offsets the counts give ("exact", "range")."""
        return self.mode in ("exact", "range")

    def candidate_words(self, count: int) -> int:
        """Words of the candidate regions of a batch of `count` queries (fixed capacities; 0
        where they are counted first)."""
        return count * self.tiles_total * self.capacity * self.entry

    def batches(self) -> list[tuple[int, int]]:
        return [(start, min(self.batch, self.count - start)) for start in range(0, self.count, self.batch)]

    # The dispatches of a batch of `size` queries, as push fields by name (the caller adds the
    # buffers' word offsets: db_offset, query_offset, aux_offset, out_offset, cand_offset,
    # scratch_offset) and their cost in row-words (for cutting a search into submits), each a
    # share of the plan's budget (None: one dispatch per piece, or for every query).
    def layout(self, size: int) -> dict:
        """Word offsets in the aux buffer of a batch: the sample histograms (hist_at), bounds,
        region counts, statuses, region offsets and lims (range search); its size ("words")."""
        at = {"hist_at": 0, "bounds_at": size * kernels.SEARCH_HIST_BINS if self.sampled else 0}
        at["counts_at"] = at["bounds_at"] + size
        at["status_at"] = at["counts_at"] + size * self.tiles_total
        at["regions_at"] = at["status_at"] + size
        at["lims_at"] = at["regions_at"] + size * self.tiles_total + 1
        at["words"] = at["lims_at"] + size + 1
        return at

    def fields(self, size: int) -> dict:
        """The push fields every kernel of a batch shares (a dispatch narrows [query_base,
        query_end))."""
        at = self.layout(size)
        return dict(words=self.words, queries=size, query_base=0, query_end=size, tiles_total=self.tiles_total,
                    rows_per_tile=self.rows_per_tile,
                    hist_at=at["hist_at"], counts_at=at["counts_at"], status_at=at["status_at"],
                    bounds_at=ALL if self.mode == "full" else at["bounds_at"],
                    regions_at=at["regions_at"] if self.counted else ALL,
                    lims_at=at["lims_at"], capacity=self.capacity, reach=self.reach,
                    k=self.k, key_bits=self.key_bits, stride=self.stride, shift=self.shift)

    def _rectangles(self, queries: tuple, per_group: int, tiles: int, lanes=lambda n: n):
        """(query fields, tile base, tiles, cost) of dispatches over `tiles` tiles x the queries
        [first, end) = `queries` of a batch in groups of `per_group` (`cut`); `lanes(queries)`:
        what they cost as."""
        first, end = queries
        groups = math.ceil((end - first) / per_group)
        item = self.rows_per_tile * lanes(min(end - first, per_group)) * self.words
        for group, n_groups, base, n in cut(groups, tiles, item, dispatch_budget(self.budget, self.cpu)):
            query_base, query_end = first + group * per_group, min(end, first + (group + n_groups) * per_group)
            yield (dict(query_base=query_base, query_end=query_end), base, n,
                   n * self.rows_per_tile * lanes(query_end - query_base) * self.words)

    def histogram_dispatches(self, size: int):
        """(piece index, fields, cost) of the sample histogram's dispatches (SEARCH_HIST; then one
        SEARCH_BOUND with the batch's fields): each piece's every stride-th row, in blocks of
        rows_per_tile."""
        for i, (_, rows) in enumerate(self.pieces):
            blocks = math.ceil(math.ceil(rows / self.stride) / self.rows_per_tile)
            for queries, base, n, cost in self._rectangles((0, size), kernels.SEARCH_HIST_QUERIES, blocks):
                yield i, dict(queries, rows=rows, tiles=n, tile_base=base), cost

    def gather_dispatches(self, size: int, queries: tuple | None = None):
        """(piece index, fields, cost) of the gather's dispatches (SEARCH_GATHER) for the batch's
        queries [first, end) (None: all `size`)."""
        tile_index_base = 0
        for i, ((first, rows), tiles) in enumerate(zip(self.pieces, self.tiles)):
            for part, base, n, cost in self._rectangles(queries or (0, size), GROUP, tiles, lane_cost):
                yield i, dict(part, rows=rows, row_base=first, tiles=n, tile_base=base,
                              tile_index_base=tile_index_base), cost
            tile_index_base += tiles

    def select_dispatches(self, size: int, candidates: int, queries: tuple | None = None):
        """(fields, cost) of the selection's dispatches (SEARCH_SELECT) for the batch's queries
        [first, end) (None: all `size`) over `candidates` in all."""
        first, end = queries or (0, size)
        digits = math.ceil(self.key_bits / kernels.SEARCH_DIGIT_BITS) + math.ceil(self.key_bits / kernels.SEARCH_SORT_BITS)
        per_query = max(1, candidates // max(1, end - first)) * self.entry * digits + self.tiles_total
        budget = dispatch_budget(self.budget, self.cpu)
        step = end - first if budget is None else max(1, min(end - first, budget // per_query))
        for base in range(first, end, step):
            n = min(step, end - base)
            yield dict(query_base=base, query_end=base + n), n * per_query


def push_words(fields: dict) -> np.ndarray:
    """The push words (kernels.SEARCH_PUSH_FIELDS) of a selection-path kernel from its fields by
    name; bounds_at and regions_at are ALL unless given."""
    words = np.zeros(len(kernels.SEARCH_PUSH_FIELDS), np.uint32)
    words[kernels.SEARCH_PUSH_FIELDS.index("bounds_at")] = ALL
    words[kernels.SEARCH_PUSH_FIELDS.index("regions_at")] = ALL
    for name, value in fields.items():
        words[kernels.SEARCH_PUSH_FIELDS.index(name)] = value
    return words


def histogram_shift(bits: int, metric: int) -> int:
    """Bits dropped from a key to index the sample histogram's kernels.SEARCH_HIST_BINS bins."""
    largest = (1 << TANIMOTO_SCALE_BITS) if metric == TANIMOTO else bits
    shift = 0
    while (largest >> shift) + 1 > kernels.SEARCH_HIST_BINS:
        shift += 1
    return shift


def plan_selection(device, pieces: list, words: int, bits: int, k: int, count: int, metric: int,
                   mode: str | None = None, budget: int | None = None) -> SelectionPlan:
    """The plan of a selection-path search (see `SelectionPlan`), for submits of `budget`
    row-words (`tile_rows`; None: a dispatch per piece); mode None picks "sampled" where a
    sample fits (see SAMPLE_FACTOR), else "full" (every row a candidate: no more than
    SAMPLE_FACTOR * 2 times the k the answer holds), and "exact" where one query's regions of
    either would exceed a buffer. "exact" is also for the queries a sampled search reported,
    "full" for a caller that cannot search a query again (a compiled graph)."""
    rows_of = [rows for _, rows in pieces]
    rows = sum(rows_of)
    per_tile = tile_rows(device, rows_of, words, max(k, kernels.HAMMING_REGISTER_K + 1), count, budget)
    partial = partial_bytes(device) // 4  # words
    tiles = tuple(math.ceil(r / per_tile) for r in rows_of)
    total = sum(tiles)
    entry = ENTRY_WORDS[metric]
    stride, capacity, reach = 1, 0, k
    chosen = mode
    if mode is None:
        mode, stride = "full", MAX_STRIDE
        while k and k * 2 * SAMPLE_FACTOR <= rows and stride >= 2:
            if _reach(k, rows_of, stride) * SAMPLE_FACTOR <= _sample(rows_of, stride):
                mode = "sampled"
                break
            stride //= 2
    if mode == "sampled":
        stride = max(2, stride)
        sample, reach = _sample(rows_of, stride), _reach(k, rows_of, stride)
        high = (reach + BOUND_SIGMAS * math.sqrt(reach) + BOUND_SLACK) * rows / sample
        spare = partial // SPARE_SHARE // (min(count, 32768) * total * entry)
        capacity = max(2 * math.ceil(high / total) + REGION_SLACK, min(per_tile, spare))
    elif mode == "full":
        capacity = per_tile
    if chosen is None and total * capacity * entry > partial - 2:
        # One query's fixed regions alone exceed a buffer (many short tiles, or every row of a
        # huge database): its candidates counted first take what they need.
        mode, stride, capacity, reach = "exact", 1, 0, k
    # Candidates (fixed capacities; counted ones are allocated as counted), the answer's scratch.
    sizes = (total * capacity * entry, 2 * max(k, 1) * entry)
    batch = _batch(count, partial, sizes, _aux_words(mode in ("sampled", "exact"), total), k)
    return SelectionPlan(mode, metric, k, count, batch, words, bits, per_tile, tiles, tuple(pieces), stride,
                         capacity, histogram_shift(bits, metric), budget, reach if k else 0, device.is_cpu)


def _sample(rows_of: list, stride: int) -> int:
    """Rows of a sample of every `stride`-th row of pieces of `rows_of` rows."""
    return sum(math.ceil(r / stride) for r in rows_of)


def _reach(k: int, rows_of: list, stride: int) -> int:
    """The sample count the sampled bound's bin reaches (see BOUND_SIGMAS)."""
    sample = _sample(rows_of, stride)
    mu = k * sample / sum(rows_of)
    return min(sample, math.ceil(mu + BOUND_SIGMAS * math.sqrt(mu)) + BOUND_SLACK)


def _aux_words(sampled: bool, tiles_total: int) -> int:
    """Words of one query's share of a batch's aux buffer (`SelectionPlan.layout`)."""
    return (kernels.SEARCH_HIST_BINS if sampled else 0) + 3 + 2 * tiles_total


def _batch(count: int, partial: int, sizes: tuple, aux: int, k: int) -> int:
    """Queries per batch: as many as keep each of a batch's buffers (`sizes`, words per query,
    and the aux buffer's `aux` words per query plus 2) within `partial` words. Raises
    ValidationError where one query's buffers alone exceed it (a device with tiny buffers)."""
    per_query = max(max(sizes), aux, 1)
    batch = min(count, 32768, (partial - 2) // per_query)
    if batch < 1:
        raise ValidationError(NAME, None, "k", k,
                              f"allowed: a search whose buffers for one query ({per_query * 4} bytes) fit the "
                              f"device's largest buffer ({partial * 4} bytes)")
    return batch
