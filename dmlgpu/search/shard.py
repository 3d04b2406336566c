"""One device's part of a `HammingIndex`: its codes in pieces of device memory, its ids, and the
searches over them (dmlgpu/kernels/search_programs.py plans them).

Rows are kept in ascending id order, so "ties by lower row" on the device is "ties by lower
id" (adding ids below the largest present re-sorts the shard). A piece is one storage buffer
(or a host array with `stream=True`, uploaded for each search and freed once scanned, or a
caller's Tensor searched where it lies) with room for `capacity` rows; adds fill the last piece
before they take a new one, pieces growing geometrically.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import DeviceMemoryError, ValidationError
from ..kernels import search_programs as programs, selection_plans as selections, variants as kernels
from ..kernels.search_programs import HAMMING, TANIMOTO
from .codes import words_of
from .pacing import Pacer, planned_budget
from .places import Queries

__all__ = ["Shard", "tanimoto_bound"]

#: A database piece holds at most this many bytes (and never more than one storage buffer).
PIECE_BYTES = 1 << 30
#: The first piece of an index built by small adds holds at least this many rows.
MIN_PIECE_ROWS = 1024


@dataclass
class _Piece:
    memory: object  # Buffer, or a host uint32 array (stream=True)
    word_offset: int
    rows: int
    capacity: int
    owned: bool  # False: a caller's Tensor, searched where it lies (never written)


def tanimoto_bound(threshold: float, bits: int) -> int:
    """The largest Tanimoto key (shaders/search.comp) of a similarity >= `threshold` with codes
    of `bits` bits: the key of the least fraction c / u >= threshold, u <= bits."""
    if threshold <= 0:
        return 1 << programs.TANIMOTO_SCALE_BITS
    exact = Fraction(threshold)
    least = Fraction(1)
    for u in range(1, bits + 1):
        c = math.ceil(exact * u)
        if c <= u and Fraction(c, u) < least:
            least = Fraction(c, u)
    scale = 1 << programs.TANIMOTO_SCALE_BITS
    return scale - (least.numerator * scale) // least.denominator


#: The register path's push words set per search (the buffers' word offsets in their arenas).
_OUT_OFFSET, _IN_OFFSET, _QUERY_OFFSET = (kernels.HAMMING_PUSH_FIELDS.index(name)
                                          for name in ("out_offset", "in_offset", "query_offset"))


class Shard:
    """Codes and ids on one device; see the module docstring."""

    def __init__(self, device, code_bytes: int, metric: int, streamed: bool, name: str):
        self.device = device
        self.code_bytes = code_bytes
        self.words = -(-code_bytes // 4)
        self.metric = metric
        self.streamed = streamed
        self.name = name
        self.pieces: list[_Piece] = []
        self.ids = np.zeros(0, np.int64)
        self._id_table = None  # the ids as a device buffer (answers that stay on the device)
        # The register path's last plan: ((piece rows, k, queries), plan, (scan, merge), {batch
        # size: steps_for(size)}): a search repeated over the same rows is planned once.
        self._planned = None

    # -- contents --------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        return int(self.ids.size)

    @property
    def in_place(self) -> bool:
        return any(not p.owned for p in self.pieces)

    def piece_rows(self) -> list[tuple[int, int]]:
        first, found = 0, []
        for piece in self.pieces:
            found.append((first, piece.rows))
            first += piece.rows
        return found

    def _per_piece(self) -> int:
        return max(1, min(self.device.max_buffer_size, PIECE_BYTES) // (self.words * 4))

    @classmethod
    def joined(cls, shards: list["Shard"]) -> "Shard":
        """One shard over the rows of `shards` (same device, width and metric, none streamed; ids
        ascending from one to the next), in that order, reading their pieces where they lie: a
        snapshot (no copy) that never writes them."""
        first = shards[0]
        joined = cls(first.device, first.code_bytes, first.metric, False, first.name)
        joined.pieces = [_Piece(p.memory, p.word_offset, p.rows, p.rows, False) for s in shards for p in s.pieces]
        joined.ids = np.concatenate([s.ids for s in shards]) if len(shards) > 1 else first.ids
        return joined

    def add_places(self, places, ids: np.ndarray) -> None:
        """Search a caller's Tensor where it lies (its pieces as `tensor_places` found them)."""
        for buffer, word_offset, rows in places:
            self.pieces.append(_Piece(buffer, word_offset, rows, rows, False))
        self.ids = ids
        self._id_table = None

    def add(self, words: np.ndarray, ids: np.ndarray) -> None:
        """Append codes (uint32 words) with their ids (sorted here if they are not above the
        shard's largest)."""
        if not ids.size:
            return
        order = np.argsort(ids, kind="stable")
        if np.any(order != np.arange(ids.size)):
            words, ids = words[order], ids[order]
        if self.rows and ids[0] <= self.ids[-1]:  # below the largest: the shard is laid out again
            all_words = np.concatenate([self.read_words(np.arange(self.rows)), words])
            all_ids = np.concatenate([self.ids, ids])
            order = np.argsort(all_ids, kind="stable")
            self.pieces, self.ids = [], np.zeros(0, np.int64)
            words, ids = all_words[order], all_ids[order]
        self._append(words)
        self.ids = np.concatenate([self.ids, ids])
        self._id_table = None

    def _append(self, words: np.ndarray) -> None:
        done, per_piece = 0, self._per_piece()
        while done < words.shape[0]:
            last = self.pieces[-1] if self.pieces else None
            if last is not None and last.owned and last.rows < last.capacity:
                n = min(last.capacity - last.rows, words.shape[0] - done)
                chunk = words[done:done + n]
                if self.streamed:
                    last.memory = np.concatenate([last.memory, chunk])
                else:
                    last.memory.write(np.ascontiguousarray(chunk), (last.word_offset + last.rows * self.words) * 4)
                last.rows += n
                done += n
                continue
            left = words.shape[0] - done
            grown = 2 * last.capacity if last is not None else MIN_PIECE_ROWS
            capacity = min(per_piece, max(left, grown))
            n = min(capacity, left)
            chunk = np.ascontiguousarray(words[done:done + n])
            if self.streamed:
                self.pieces.append(_Piece(chunk, 0, n, n, True))
            else:
                try:
                    buffer = self.device.allocate(capacity * self.words * 4, zero_fill=False)
                    buffer.write(chunk, 0)
                except DeviceMemoryError as error:
                    raise DeviceMemoryError(
                        f"{self.name}: the codes ({(self.rows + words.shape[0]) * self.words * 4} bytes) do not fit "
                        f"in {self.device.label}'s memory; HammingIndex(..., stream=True) keeps them on the host "
                        "and searches them piece by piece") from error
                self.pieces.append(_Piece(buffer, 0, n, capacity, True))
            done += n

    def remove(self, keep: np.ndarray) -> None:
        """Keep the rows where `keep` is True (in order), compacting each piece on the device."""
        first, pieces = 0, []
        for piece in self.pieces:
            mask = keep[first:first + piece.rows]
            first += piece.rows
            live = int(mask.sum())
            if live == piece.rows:
                pieces.append(piece)
            elif live and self.streamed:
                pieces.append(_Piece(np.ascontiguousarray(piece.memory[:piece.rows][mask]), 0, live, live, True))
            elif live:
                index = self.device.upload(np.flatnonzero(mask).astype(np.uint32))
                out = self.device.allocate(live * self.words * 4, zero_fill=False)
                self._copy_rows(piece, index, out, live)
                pieces.append(_Piece(out, 0, live, live, True))
        self.pieces = pieces
        self.ids = self.ids[keep]
        self._id_table = None

    def _copy_rows(self, piece: _Piece, index, out, rows: int) -> None:
        program = programs.selection_program(kernels.SEARCH_ROWS, self.words, self.metric)
        source = piece.memory
        push = selections.push_words(dict(db_offset=source.arena_offset // 4 + piece.word_offset,
                                        aux_offset=index.arena_offset // 4, out_offset=out.arena_offset // 4, rows=rows,
                                        regions_at=0))
        self._launch(program, [source, index, out], push, [source, index], [out])

    def read_words(self, rows: np.ndarray) -> np.ndarray:
        """The codes of local rows `rows` (sorted or not) as uint32 words."""
        found = np.empty((rows.size, self.words), np.uint32)
        bounds = np.cumsum([0] + [p.rows for p in self.pieces])
        where = np.searchsorted(bounds, rows, side="right") - 1
        for i, piece in enumerate(self.pieces):
            picked = np.flatnonzero(where == i)
            if not picked.size:
                continue
            local = rows[picked] - bounds[i]
            if self.streamed:
                found[picked] = piece.memory[local]
                continue
            low, high = int(local.min()), int(local.max()) + 1
            data = piece.memory.read((piece.word_offset + low * self.words) * 4, (high - low) * self.words * 4)
            found[picked] = data.view(np.uint32).reshape(high - low, self.words)[local - low]
        return found

    def id_table(self):
        """The ids as int64 words on the device (made when first asked after a change)."""
        if self._id_table is None:
            self._id_table = self.device.upload(self.ids)
        return self._id_table

    # -- dispatches ------------------------------------------------------------------------
    def _launch(self, program, buffers, push, reads, writes) -> None:
        """Queue `program` over the device's search grid (every size of work: one pipeline);
        `reads`/`writes`: buffers (whole) or (buffer, start, end) byte ranges."""
        launch = self.device.launch(program, programs.grid(self.device), buffers, push,
                                    reads=[r if isinstance(r, tuple) else (r, 0, r.size_in_bytes) for r in reads],
                                    writes=[w if isinstance(w, tuple) else (w, 0, w.size_in_bytes) for w in writes],
                                    name=self.name)
        if not self.device.enqueue(launch):
            raise ValidationError(self.name, None, "device", "closed or released", "allowed: an open device")

    def _piece_buffers(self):
        """(piece, buffer) per piece: streamed pieces uploaded now (freed in stream order)."""
        for piece in self.pieces:
            yield piece, (self.device.upload(piece.memory[:piece.rows]) if self.streamed else piece.memory)

    def queries(self, words: np.ndarray | None, place=None) -> Queries:
        """Queries on this shard's device: host words uploaded, or a (buffer, word offset) place."""
        return Queries(self.device, self.words, words, place)

    def query_uploads(self, words: np.ndarray | None, place, count: int):
        """(first, count, Queries) of the queries in uploads of at most one storage buffer each
        (host words; a place on the device is one already)."""
        if place is not None:
            yield 0, count, self.queries(None, place)
            return
        rows = max(1, programs.partial_bytes(self.device) // (self.words * 4))
        for first in range(0, count, rows):
            n = min(rows, count - first)
            yield first, n, self.queries(words[first:first + n])

    def search(self, queries: Queries, count: int, k: int, pacer: Pacer) -> list:
        """The k nearest of each query, exactly: [(first, size, buffer)], each buffer the answer
        entries (size, k, ENTRY_WORDS) uint32 of a batch of queries, nearest first (the register
        path where it serves, else the selection path; a query the sampled bound failed is
        searched again "exact", its entries written over)."""
        if self.metric == HAMMING and k <= kernels.HAMMING_REGISTER_K:
            return self.search_registers(queries, count, k, pacer)
        entry = programs.ENTRY_WORDS[self.metric]
        found = []
        for start, size, buffer, retry in self.search_selection(queries, count, k, pacer):
            failed = np.flatnonzero(retry >= 0)
            known = retry[failed] != programs.ALL
            for picked, bound in ((failed[known], retry[failed[known]]), (failed[~known], None)):
                if not picked.size:
                    continue
                again = self.queries(queries.rows(start + picked))
                for first, n, fixed, left in self.search_selection(again, picked.size, k, pacer, "exact", bound):
                    if (left >= 0).any():
                        raise RuntimeError(f"{self.name}: an exact search again reported a query")  # (a bug)
                    entries = fixed.read(0, n * k * entry * 4).view(np.uint32).reshape(n, k, entry)
                    for row, answer in zip(picked[first:first + n], entries):
                        buffer.write(answer, int(row) * k * entry * 4)
            found.append((start, size, buffer))
        return found

    # -- the register path -----------------------------------------------------------------
    def search_registers(self, queries: Queries, count: int, k: int, pacer: Pacer):
        """The k nearest (Hamming, k <= kernels.HAMMING_REGISTER_K): the answer's (distance,
        row) pairs, (count, k, 2) uint32 in a device buffer per batch: [(first, size, buffer)]."""
        key = (tuple(self.piece_rows()), k, count)
        planned = self._planned
        if planned is None or planned[0] != key:
            plan = programs.plan_search(self.device, list(key[0]), self.words, k, count, operator=self.name,
                                        budget=planned_budget(self.device))
            planned = self._planned = (key, plan, programs.search_programs(self.words, k), {})
        _, plan, (scan, merge), batch_steps = planned
        answers = []
        for start, size in plan.batches():
            made = batch_steps.get(size)
            if made is None:
                steps, sizes, result = plan.steps_for(size)
                made = batch_steps[size] = (steps, sizes, result, [programs.push_words(step.push) for step in steps])
            steps, sizes, result, templates = made
            lists = [None] * len(sizes)
            buffers = None
            for step, template in zip(steps, templates):
                if lists[step.writes] is None:
                    lists[step.writes] = self.device.allocate(sizes[step.writes], zero_fill=False)
                out = lists[step.writes]
                words = template.copy()  # (the step's own push words; the buffers' offsets below)
                words[_OUT_OFFSET] = out.arena_offset // 4
                if step.kernel == "scan":
                    if buffers is None:
                        buffers = list(self._piece_buffers())
                    piece, memory = buffers[step.piece]
                    words[_IN_OFFSET] = self._db_offset(piece, memory)
                    words[_QUERY_OFFSET] = queries.at(start)
                    bound, reads = [memory, queries.buffer, out], [memory, queries.buffer]
                    reads += [(out, *step.bound)] if step.bound is not None else []
                    written = [(out, *step.span)]  # (its tiles' lists only: scans run side by side)
                    program = scan
                else:
                    source = lists[step.reads]
                    words[_IN_OFFSET] = source.arena_offset // 4
                    bound, reads, program, written = [source, out], [source], merge, [out]
                pacer.starting(program.name)
                self._launch(program, bound, words, reads, written)
                pacer.queued(step.cost, program.name)
            answers.append((start, size, lists[result]))
            pacer.submit()
        return answers

    # -- the selection path ----------------------------------------------------------------
    def search_selection(self, queries: Queries, count: int, k: int, pacer: Pacer, mode=None, bound=None):
        """The k nearest by the selection path (any k; k = 0 with `bound`: every row within the
        bound key, range search; mode "exact" with `bound`, one bound key per query: the k
        nearest within it, which holds k rows). Returns [(first, size, answer buffer, retry or
        lims)]: retry, per query (int64), -1 where it is answered, else the bound to search it
        again "exact" with: where its sampled bound held k rows but its regions overflowed,
        that bound; where the bound held fewer, ALL (none: every row's histogram). For a range
        search the lims (size + 1 entries) instead."""
        plan = selections.plan_selection(self.device, self.piece_rows(), self.words, self.code_bytes * 8, k, count,
                                       self.metric, "range" if bound is not None and k == 0 else mode,
                                       planned_budget(self.device))
        found = []
        for start, size in plan.batches():
            part = bound if bound is None or np.isscalar(bound) else bound[start:start + size]
            found.append(self._selection_batch(plan, queries, start, size, pacer, part))
        # (Statuses read once every batch is queued: the device never waits for the host between.)
        return [(start, size, out, self._retry(plan, aux, size) if plan.k else lims)
                for start, size, out, (aux, lims) in found]

    def _selection_batch(self, plan, queries: Queries, start: int, size: int, pacer: Pacer, bound):
        device, entry, k = self.device, plan.entry, plan.k
        at = plan.layout(size)
        aux = device.allocate(at["words"] * 4)  # (zeros filled on the device: 6 MB at 1,024 queries)
        if bound is not None:
            aux.write(np.broadcast_to(np.asarray(bound, np.uint32), (size,)), at["bounds_at"] * 4)
        buffers = list(self._piece_buffers())
        fields = dict(plan.fields(size), aux_offset=aux.arena_offset // 4, query_offset=queries.at(start))
        if plan.sampled and bound is None:
            self._histogram(plan, buffers, queries, size, aux, fields, pacer)
        if plan.counted:
            return self._counted_batch(plan, buffers, queries, start, size, aux, fields, pacer)
        candidates = device.allocate(max(4, plan.candidate_words(size) * 4), zero_fill=False)
        self._gather(plan, buffers, queries, size, aux, candidates, fields, pacer)
        out = device.allocate(size * k * entry * 4, zero_fill=False)
        scratch = device.allocate(2 * size * k * entry * 4, zero_fill=False)
        self._select(plan, aux, candidates, scratch, out, size, fields, size * plan.tiles_total * plan.capacity, pacer)
        return start, size, out, (aux, None)

    @staticmethod
    def _retry(plan, aux, size: int) -> np.ndarray:
        """Per query of a batch: -1 (answered), its bound (status 1: the regions overflowed, the
        bound holds k rows) or ALL (status 2: fewer than k rows within the bound)."""
        status = aux.read(plan.layout(size)["status_at"] * 4, size * 4).view(np.uint32)
        retry = np.full(size, -1, np.int64)
        if status.any():  # (the bounds read back only then)
            bounds = aux.read(plan.layout(size)["bounds_at"] * 4, size * 4).view(np.uint32)
            retry[status == 1] = bounds[status == 1]
            retry[status == 2] = programs.ALL
        return retry

    def _counted_batch(self, plan, buffers, queries, start, size, aux, fields, pacer):
        """A batch whose rows within the bound are counted per (query, tile) region first (one
        gather writing nothing else), then gathered to regions at the offsets the counts give
        and selected: queries in groups whose candidates fit one buffer each. Range search (k
        = 0): every candidate, the answer at the lims; "exact": the k nearest of each query."""
        device, entry, k, tiles_total = self.device, plan.entry, plan.k, plan.tiles_total
        at = plan.layout(size)
        self._gather(plan, buffers, queries, size, aux, None, fields, pacer)
        counts = aux.read(at["counts_at"] * 4, size * tiles_total * 4).view(np.uint32).astype(np.int64)
        lims = np.concatenate([[0], np.cumsum(counts.reshape(size, tiles_total).sum(axis=1))])
        ends = lims[1:]
        # Region offsets (entries) wrap at 2^32 as the kernels' uint arithmetic does: a group's
        # word offsets, made relative to its first entry, come out right.
        offsets = np.zeros(size * tiles_total + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        aux.write(np.concatenate([offsets, lims]).astype(np.uint64).astype(np.uint32), at["regions_at"] * 4)
        total = int(lims[-1])
        if k == 0 and total == 0:
            return start, size, None, (aux, lims.astype(np.uint32))
        out = device.allocate(max(4, (total if k == 0 else size * k) * entry * 4), zero_fill=False)
        scratch = device.allocate(max(4, 2 * (total if k == 0 else size * k) * entry * 4), zero_fill=False)
        limit = max(1, programs.partial_bytes(device) // (entry * 4))
        first = 0
        while first < size:  # groups of queries whose candidates fit `limit` entries (one query at least)
            last = max(first + 1, int(np.searchsorted(ends, lims[first] + limit, side="right")))
            begin, n = int(lims[first]), int(lims[last] - lims[first])
            if n:
                candidates = device.allocate(n * entry * 4, zero_fill=False)
                shifted = (candidates.arena_offset // 4 - entry * begin) % (1 << 32)
                self._gather(plan, buffers, queries, size, aux, candidates, fields, pacer, (first, last), shifted)
                self._select(plan, aux, candidates, scratch, out, size, fields, n, pacer, (first, last), shifted)
            first = last
        return start, size, out, (aux, lims.astype(np.uint32))

    def _db_offset(self, piece: _Piece, memory) -> int:
        """The word offset (in its arena) of a piece's first code, `memory` its buffer now."""
        return memory.arena_offset // 4 + (0 if self.streamed else piece.word_offset)

    def _histogram(self, plan, buffers, queries, size, aux, fields, pacer) -> None:
        program = programs.selection_program(kernels.SEARCH_HIST, self.words, self.metric)
        for i, part, cost in plan.histogram_dispatches(size):
            piece, memory = buffers[i]
            push = selections.push_words({**fields, **part, "db_offset": self._db_offset(piece, memory)})
            pacer.starting(program.name)
            self._launch(program, [memory, queries.buffer, aux], push, [memory, queries.buffer], [aux])
            pacer.queued(cost, program.name)
        program = programs.selection_program(kernels.SEARCH_BOUND, self.words, self.metric)
        self._launch(program, [aux], selections.push_words(fields), [aux], [aux])

    def _gather(self, plan, buffers, queries, size, aux, candidates, fields, pacer, span=None, out_offset=None):
        """SEARCH_GATHER of the batch's queries `span` (None: all) to word `out_offset` (None: the
        start) of `candidates` (None: the regions' counts alone)."""
        program = programs.selection_program(kernels.SEARCH_GATHER, self.words, self.metric)
        out = candidates if candidates is not None else aux  # (counts alone: nothing is written there)
        at = out.arena_offset // 4 if out_offset is None else out_offset
        for i, part, cost in plan.gather_dispatches(size, span):
            piece, memory = buffers[i]
            push = selections.push_words({**fields, **part, "db_offset": self._db_offset(piece, memory),
                                          "out_offset": at})
            pacer.starting(program.name)
            self._launch(program, [memory, queries.buffer, aux, out], push, [memory, queries.buffer, aux],
                         [aux] if out is aux else [aux, out])
            pacer.queued(cost, program.name)

    def _select(self, plan, aux, candidates, scratch, out, size, fields, candidates_total, pacer, span=None,
                cand_offset=None) -> None:
        """SEARCH_SELECT of the batch's queries `span` (None: all), candidates at `cand_offset`."""
        program = programs.selection_program(kernels.SEARCH_SELECT, self.words, self.metric)
        offsets = dict(aux_offset=aux.arena_offset // 4,
                       cand_offset=candidates.arena_offset // 4 if cand_offset is None else cand_offset,
                       scratch_offset=scratch.arena_offset // 4, out_offset=out.arena_offset // 4)
        for part, cost in plan.select_dispatches(size, candidates_total, span):
            push = selections.push_words({**fields, **offsets, **part})
            pacer.starting(program.name)
            self._launch(program, [aux, candidates, scratch, out], push, [aux, candidates], [aux, scratch, out])
            pacer.queued(cost, program.name)

    # -- answers that stay on the device -----------------------------------------------------
    def finish(self, entries, count: int, entry: int, values, ids, first: int, values_at: int = 0,
               ids_at: int = 0) -> None:
        """Answer entries (count of them, `entry` words each) -> values (uint32 distances or
        float32 similarities) and int64 ids, written from element `first` of the values at word
        `values_at` of buffer `values` and the ids at word `ids_at` of buffer `ids` (the same
        buffer may hold both)."""
        metric = HAMMING if entry == 2 else TANIMOTO
        program = programs.selection_program(kernels.SEARCH_FINISH, self.words, metric)
        table = self.id_table()
        push = selections.push_words(dict(db_offset=entries.arena_offset // 4, aux_offset=table.arena_offset // 4,
                                        out_offset=values.arena_offset // 4 + values_at + first,
                                        cand_offset=ids.arena_offset // 4 + ids_at + 2 * first, rows=count,
                                        regions_at=0))
        self._launch(program, [entries, table, values, ids], push, [entries, table], [values, ids])
