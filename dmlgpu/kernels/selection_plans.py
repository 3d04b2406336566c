"""The plans of selection-path searches (shaders/search.comp): Hamming with any k by counting,
range search, and Tanimoto by selection (see search_programs.py's docstring for the two
families). A plan says the mode, the tiles, the batches of queries (each batch's buffers within
one storage buffer) and every dispatch by its push fields; the caller binds the buffers."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import variants as kernels
from ..errors import ValidationError
from .search_programs import (ALL, ENTRY_WORDS, GROUP, HAMMING, NAME, TANIMOTO, TANIMOTO_SCALE_BITS, cut,
                              dispatch_budget, key_bits, lane_cost, partial_bytes, tile_rows)

__all__ = ["SelectionPlan", "histogram_shift", "plan_selection", "push_words"]

#: The selection path's sample: one block of rows in `stride`, stride = rows // (SAMPLE_FACTOR * k)
#: at most MAX_STRIDE (candidates per query: about stride * k); below 2, every row is a candidate.
SAMPLE_FACTOR, MAX_STRIDE = 4, 16
#: Candidates a query's regions hold beyond the expected stride * k (per region: twice the
#: expectation plus REGION_SLACK).
REGION_SLACK = 16
#: The counting search (Hamming, any k): tiles at most this long (a tile's count of one distance
#: is 16 bits in shared memory), and long enough that this many queries' counts fit one batch.
COUNT_MAX_TILE_ROWS, COUNT_BATCH = (1 << 16) - 1, 1024


@dataclass(frozen=True)
class SelectionPlan:
    """A selection-path search of `count` queries for the k nearest (k = 0: every row within
    a bound, range search) over pieces ((first row, rows) each).

    mode: "sampled" (a histogram of every `stride`-th block of `rows_per_tile` rows bounds the
    k-th key; regions of `capacity` entries) or "full" (every row a candidate; regions of a
    tile's rows) or "range" (regions at offsets counted first) or "counting" (Hamming: exact
    per-tile histograms of distances within a window give every row of the answer its place;
    the window's top is the bound of a histogram of every `stride`-th block, or the code's bits
    for stride 0). Queries run in batches of `batch`; `tiles` per piece, `shift` the histogram's
    bin width (bits)."""

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
        """Whether a sample histogram bounds each query's k-th key first (SEARCH_HIST, SEARCH_BOUND;
        in counting mode stride 1 is every row's histogram, stride 0 none)."""
        return self.mode == "sampled" or (self.mode == "counting" and self.stride >= 1)

    def candidate_words(self, count: int) -> int:
        """Words of the candidate regions of a batch of `count` queries (fixed capacities); in
        counting mode, of the counts per (query, tile, bin)."""
        if self.mode == "counting":
            return count * self.tiles_total * kernels.SEARCH_COUNT_BINS
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
        ranged = self.mode == "range"
        return dict(words=self.words, queries=size, query_base=0, query_end=size, tiles_total=self.tiles_total,
                    rows_per_tile=self.rows_per_tile,
                    hist_at=at["hist_at"], counts_at=at["counts_at"], status_at=at["status_at"],
                    bounds_at=ALL if self.mode == "full" else at["bounds_at"],
                    regions_at=at["regions_at"] if ranged or self.mode == "counting" else ALL,
                    lims_at=at["lims_at"], capacity=self.capacity,
                    k=self.k, key_bits=self.key_bits, stride=self.stride, shift=self.shift)

    def _rectangles(self, size: int, per_group: int, tiles: int, lanes=lambda n: n):
        """(query fields, tile base, tiles, cost) of dispatches over `tiles` tiles x the batch's
        queries in groups of `per_group` (`cut`); `lanes(queries)`: what they cost as."""
        groups = math.ceil(size / per_group)
        item = self.rows_per_tile * lanes(min(size, per_group)) * self.words
        for group, n_groups, base, n in cut(groups, tiles, item, dispatch_budget(self.budget)):
            query_base, query_end = group * per_group, min(size, (group + n_groups) * per_group)
            yield (dict(query_base=query_base, query_end=query_end), base, n,
                   n * self.rows_per_tile * lanes(query_end - query_base) * self.words)

    def histogram_dispatches(self, size: int):
        """(piece index, fields, cost) of the sample histogram's dispatches (SEARCH_HIST; then one
        SEARCH_BOUND with the batch's fields)."""
        for i, ((_, rows), tiles) in enumerate(zip(self.pieces, self.tiles)):
            blocks = math.ceil(tiles / self.stride)
            for queries, base, n, cost in self._rectangles(size, kernels.SEARCH_HIST_QUERIES, blocks):
                yield i, dict(queries, rows=rows, tiles=n, tile_base=base), cost

    def gather_dispatches(self, size: int):
        """(piece index, fields, cost) of the gather's dispatches (SEARCH_GATHER)."""
        tile_index_base = 0
        for i, ((first, rows), tiles) in enumerate(zip(self.pieces, self.tiles)):
            for queries, base, n, cost in self._rectangles(size, GROUP, tiles, lane_cost):
                yield i, dict(queries, rows=rows, row_base=first, tiles=n, tile_base=base,
                              tile_index_base=tile_index_base), cost
            tile_index_base += tiles

    def offsets_dispatches(self, size: int):
        """(fields, cost) of the counting search's SEARCH_OFFSETS dispatches (a query each item)."""
        per_query = self.tiles_total * kernels.SEARCH_COUNT_BINS
        budget = dispatch_budget(self.budget)
        step = size if budget is None else max(1, min(size, budget // per_query))
        for base in range(0, size, step):
            n = min(step, size - base)
            yield dict(query_base=base, query_end=base + n), n * per_query

    def select_dispatches(self, size: int, candidates: int):
        """(fields, cost) of the selection's dispatches (SEARCH_SELECT) over `candidates` in all."""
        digits = math.ceil(self.key_bits / kernels.SEARCH_DIGIT_BITS) + math.ceil(self.key_bits / kernels.SEARCH_SORT_BITS)
        per_query = max(1, candidates // max(1, size)) * self.entry * digits + self.tiles_total
        budget = dispatch_budget(self.budget)
        step = size if budget is None else max(1, min(size, budget // per_query))
        for base in range(0, size, step):
            n = min(step, size - base)
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
    row-words (`tile_rows`; None: a dispatch per piece); mode None picks "counting" for Hamming
    (a query is searched again only where its sampled bound lies over a window's width above
    its threshold), and for Tanimoto "sampled" where a sample of at least SAMPLE_FACTOR * k rows
    in every other block exists, else "full". Mode "counting" asked for never searches a query
    again (the bound from every row's histogram; codes of up to 2^16 bits)."""
    rows_of = [rows for _, rows in pieces]
    rows = sum(rows_of)
    per_tile = tile_rows(device, rows_of, words, max(k, kernels.HAMMING_REGISTER_K + 1), count, budget)
    partial = partial_bytes(device) // 4  # words
    exact = False
    if mode in (None, "counting") and metric == HAMMING and k > 0:
        # Tiles long enough that the counts of COUNT_BATCH queries fit one buffer (the database
        # read once per batch), within the 16-bit counts of shared memory.
        wanted = math.ceil(rows * kernels.SEARCH_COUNT_BINS * min(count, COUNT_BATCH) / partial)
        per_tile, exact = min(COUNT_MAX_TILE_ROWS, max(per_tile, wanted)), mode == "counting"
        mode = "counting"
    tiles = tuple(math.ceil(r / per_tile) for r in rows_of)
    total = sum(tiles)
    if mode == "counting":
        # The window's top: the code's bits where the window holds every distance (stride 0: no
        # sample); else a sample's bound, every row's where no sample of SAMPLE_FACTOR * k rows
        # in every other block exists or where the plan must never search a query again
        # (`exact`: the bound is then the threshold's own bin, and the window holds it).
        stride = min(MAX_STRIDE, rows // max(1, SAMPLE_FACTOR * k), total // 2 if total >= 2 else 1)
        stride = 0 if bits <= kernels.SEARCH_COUNT_BINS - 2 else (1 if exact else max(1, stride))
        # (Counts, answer and scratch are buffers of their own.)
        sizes = (total * kernels.SEARCH_COUNT_BINS, k * ENTRY_WORDS[metric])
        batch = _batch(count, partial, sizes, _aux_words(stride >= 1, total), k)
        return SelectionPlan(mode, metric, k, count, batch, words, bits, per_tile, tiles, tuple(pieces), stride, 0,
                             histogram_shift(bits, metric), budget)
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
    sizes = (total * capacity * entry, 2 * max(k, 1) * entry)  # candidates; the answer's scratch
    batch = _batch(count, partial, sizes, _aux_words(mode == "sampled", total), k)
    return SelectionPlan(mode, metric, k, count, batch, words, bits, per_tile, tiles, tuple(pieces), stride,
                         capacity, histogram_shift(bits, metric), budget)


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
