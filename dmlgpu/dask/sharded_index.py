"""`dmlgpu.dask.HammingIndex`: a database of binary codes sharded over Dask workers, one resident
`dmlgpu.HammingIndex` per block on the worker that holds the block, searched exactly.

The database's blocks are uploaded where they are made (`to_device`) and persisted; each block
gets an index on the worker holding it (`dmlgpu.dask.shards`), kept there across searches. A
search sends one message to each worker holding shards, straight from the client (not through
the scheduler), carrying the queries and the names of its shards; the worker searches all of
them in one device search and answers with their merged k nearest; the client merges the
workers' answers into numpy's exact answer: the k least (distance, id), ties by lower id. A
search makes no task and no block crosses PCIe.

Faults: where a worker does not answer (it died, or its shards moved; a connection not made
within `CONNECT_S` counts as no answer), the search of its shards
runs as dask tasks that depend on the blocks themselves, so dask recomputes a lost block from
its graph on another worker, the shard is rebuilt there from it, and the answer is the same.
The next call places the shards again (asks the scheduler where the blocks are).

Ids are the rows' global positions (0 .. n - 1 in block order); `add` appends a new shard
(its rows get the ids after the largest so far); `remove_ids` goes to the shards holding the
ids, and the ids of the other rows stay.
"""
from __future__ import annotations

import asyncio
from collections import Counter

import dask.array as da
import numpy as np
from distributed import get_client, wait
from distributed.core import send_recv
from distributed.protocol import to_serialize

from ..errors import ValidationError
from ..front.tensor import Tensor
from .chunks import to_device
from .shards import HANDLER, ShardPlugin, Spec, merge_knn, merge_ranges, range_search_shards, search_shards

__all__ = ["HammingIndex"]

NAME = "dmlgpu.dask.HammingIndex"
#: Seconds a search waits to reach a worker before it searches that worker's shards as tasks
#: (a worker that died between two searches, before the client heard of it).
CONNECT_S = 3.0


class _Record:
    """The client's view of one shard: its spec and the future of its persisted block."""

    __slots__ = ("spec", "future", "worker")

    def __init__(self, spec: Spec, future):
        self.spec, self.future, self.worker = spec, future, None


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


class HammingIndex:
    """Binary codes sharded over the workers of a Dask cluster, searched exactly by Hamming
    distance (FAISS's names: `search`, `range_search`, `add`, `remove_ids`, `ntotal`, `d`, `ids`).

    Args:
        database: (n, words) integer codes: a dask array (numpy- or Tensor-backed; its row
            blocks become the shards, a split along words is rechunked away) or a numpy array
            (cut into blocks of `chunks` rows).
        client: the `distributed.Client` (default: the current one).
        chunks: rows per block for a numpy database (dask's "auto" by default).
        workers: worker addresses to hold the shards (default: any; dask places the blocks).

    Raises:
        ValidationError: not 2-D integer codes of known size, on the client, before any work.
    """

    def __init__(self, database, *, client=None, chunks="auto", workers=None):
        if not isinstance(database, da.Array):
            if isinstance(database, Tensor):
                database = database.numpy()
            if not isinstance(database, np.ndarray):
                raise ValidationError(NAME, "database", "type", type(database).__name__,
                                      "allowed: a dask array or a numpy array of integer codes")
            if database.ndim == 2:
                database = da.from_array(database, chunks=(chunks, -1))
        if database.dtype.kind not in "iu":
            raise ValidationError(NAME, "database", "dtype", database.dtype,
                                  "allowed: integer codes (np.packbits output, uint64 words, ...)")
        if database.ndim != 2 or not database.shape[1] or np.isnan(database.shape[0]):
            raise ValidationError(NAME, "database", "shape", database.shape,
                                  "allowed: (rows, words) of known size, words >= 1")
        if len(database.chunks[1]) > 1:
            database = database.rechunk({1: -1})
        self._client = client or get_client()
        self._client.register_plugin(ShardPlugin())  # (once per cluster: the plugin is idempotent)
        self._dtype = database.dtype
        self._bits = int(database.shape[1]) * database.dtype.itemsize * 8
        self._chunk_rows = max(database.chunks[0]) if database.chunks[0] else 1
        self._records: list[_Record] = []
        self._next_id = 0
        self._routes = None  # worker address -> (its records, their brief specs), while placed
        self._counts: Counter = Counter()
        self._stale = False  # True: a worker did not answer; place the shards again first
        self._workers = list(workers) if workers is not None else None
        self._append(database, workers=self._workers)
        self._place()

    # -- facts ---------------------------------------------------------------------------------
    @property
    def d(self) -> int:
        """Bits per code."""
        return self._bits

    @property
    def ntotal(self) -> int:
        """Codes in the index (removed ones not counted)."""
        return sum(r.spec.live for r in self._records)

    def __len__(self) -> int:
        return self.ntotal

    @property
    def ids(self) -> np.ndarray:
        """The ids present, ascending."""
        parts = [np.setdiff1d(np.arange(r.spec.first, r.spec.first + r.spec.rows, dtype=np.int64),
                              r.spec.removed, assume_unique=True) for r in self._records]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    @property
    def shards(self) -> int:
        """Shards (database blocks), each a resident index on one worker."""
        return len(self._records)

    @property
    def placement(self) -> dict:
        """Worker address -> the number of shards it searches (as last placed)."""
        found: dict = {}
        for record in self._records:
            found[record.worker] = found.get(record.worker, 0) + 1
        return found

    @property
    def counts(self) -> dict:
        """What this index has done so far, by kind: "searches" (search and range_search calls),
        "requests" (messages to workers), "placements" (asking the scheduler where the blocks
        are), "fallback_shards" (shards searched as tasks because no worker answered for them)."""
        return dict(self._counts)

    def __repr__(self):
        return (f"<dmlgpu.dask.HammingIndex {self.d} bits, {self.ntotal:,} codes in {self.shards} shards "
                f"on {len(self.placement)} workers>")

    # -- placing shards ----------------------------------------------------------------------------
    def _append(self, codes: da.Array, workers, strict: bool = True) -> list[_Record]:
        """Persist `codes` on the workers (on their devices) as new shards with the next ids: on
        `workers` only (`strict`), or there first."""
        blocks = to_device(codes).to_delayed().ravel()
        where = {} if workers is None else dict(workers=workers, allow_other_workers=not strict)
        futures = self._client.compute(list(blocks), **where)
        added = []
        for future, rows in zip(futures, codes.chunks[0]):
            if rows:
                added.append(_Record(Spec(future.key, self._next_id, int(rows)), future))
            self._next_id += int(rows)
        self._records += added
        return added

    def _place(self) -> None:
        """Each shard is searched by the worker holding its block (one question to the
        scheduler; where a block has several holders, the one with the fewest rows so far).
        The worker builds the shard at its first search."""
        futures = [r.future for r in self._records]
        wait(futures)
        holders = self._client.who_has(futures)
        rows: Counter = Counter()
        for record in self._records:
            found = holders.get(record.future.key) or [None]
            record.worker = min(found, key=lambda w: rows[w])
            rows[record.worker] += record.spec.live
        self._routes, self._stale = None, False
        self._counts["placements"] += 1

    def _group(self) -> dict:
        """Worker address -> (its records with live rows, their brief specs); None: no holder."""
        if self._routes is None:
            groups: dict = {}
            for record in self._records:
                if record.spec.live:
                    groups.setdefault(record.worker, ([], []))
                    groups[record.worker][0].append(record)
                    groups[record.worker][1].append(record.spec.brief())
            self._routes = groups
        return self._routes

    def _ask(self, requests: dict) -> dict:
        """Send `requests` ({worker address: request}) to the workers' shard handlers at once,
        straight from the client; {address: answer dict, or the exception raised}."""
        pool = self._client.rpc

        async def one(address, request):
            try:
                # A dead worker's port refuses: dask retries a refused connect until the
                # client's timeout (30 s by default), so give up after CONNECT_S and search
                # its shards as tasks instead.
                comm = await pool.connect(address, timeout=CONNECT_S)
                try:
                    return await send_recv(comm=comm, op=HANDLER, request=to_serialize(request),
                                           serializers=pool.serializers, deserializers=pool.deserializers)
                finally:
                    pool.reuse(address, comm)
            except Exception as error:  # noqa: BLE001 -- a lost worker: the caller decides
                return error

        async def every():
            answers = await asyncio.gather(*(one(a, r) for a, r in requests.items()))
            return dict(zip(requests, answers))

        self._counts["requests"] += len(requests)
        return self._client.sync(every)

    # -- checks ----------------------------------------------------------------------------------
    def _queries(self, queries) -> np.ndarray:
        if isinstance(queries, Tensor):
            queries = queries.numpy()
        if not isinstance(queries, np.ndarray) or queries.dtype.kind not in "iu":
            raise ValidationError(NAME, "queries", "type", getattr(queries, "dtype", type(queries).__name__),
                                  "allowed: a numpy array (or Tensor) of integer codes")
        if queries.ndim != 2 or queries.shape[1] * queries.dtype.itemsize * 8 != self._bits:
            raise ValidationError(NAME, "queries", "shape", queries.shape,
                                  f"allowed: (q, words) codes of {self._bits} bits, as the index's (d)")
        return np.ascontiguousarray(queries)

    # -- searching --------------------------------------------------------------------------------
    def _run(self, request: dict, as_task):
        """`request` (a search's kind and arguments) to every worker holding shards, with the
        names of its shards; then, for the shards no worker answered for, tasks on their blocks
        (rebuilt where dask puts them). Returns the partial answers."""
        # A block future not finished: its worker died (the scheduler told the client) and the
        # block is being computed again elsewhere: place again rather than ask a dead address.
        if self._stale or any(r.future.status != "finished" for r in self._records):
            self._place()
        self._counts["searches"] += 1
        groups = self._group()
        redo = list(groups.get(None, ([], []))[0])
        asked = {a: dict(request, specs=specs) for a, (_, specs) in groups.items() if a is not None}
        parts = []
        for address, answer in self._ask(asked).items():
            if isinstance(answer, dict) and "result" in answer:
                parts.append(answer["result"])
            else:  # a lost worker, or shards no longer there
                redo += groups[address][0]
        if redo:
            self._counts["fallback_shards"] += len(redo)
            parts += self._client.gather([as_task(r) for r in redo])
            self._place()  # where the blocks are now: the next search asks those workers
        return parts

    def search(self, queries, k: int):
        """The k nearest codes of each query: (distances uint32, ids int64), shape (q, k), nearest
        first, ties by lower id: numpy's exact answer.

        Args:
            queries: (q, words) integer codes (numpy or Tensor) of the index's bits.
            k: from 1 to `ntotal`.

        Raises:
            ValidationError: bad queries or k, on the client, before any work.
        """
        queries = self._queries(queries)
        live = self.ntotal
        if not _is_int(k) or not 1 <= k <= live:
            raise ValidationError(NAME, None, "k", k, f"allowed: an integer from 1 to {live} (ntotal)")
        k = int(k)
        client = self._client
        parts = self._run(dict(kind="search", queries=queries, k=k),
                          lambda r: client.submit(search_shards, [r.spec], queries, k, r.future, pure=False))
        return merge_knn(parts, k)

    def range_search(self, queries, radius: int):
        """Every code at distance below `radius` from each query, in FAISS's layout: (lims int64
        (q + 1), distances uint32, ids int64), query i's at [lims[i], lims[i + 1]), ordered by
        (distance, id).

        Raises:
            ValidationError: bad queries or a radius outside 0 .. d + 1, on the client.
        """
        queries = self._queries(queries)
        if not _is_int(radius) or not 0 <= radius <= self._bits + 1:
            raise ValidationError(NAME, None, "radius", radius,
                                  f"allowed: an integer from 0 to {self._bits + 1} (distances < radius)")
        radius = int(radius)
        client = self._client
        parts = self._run(dict(kind="range_search", queries=queries, radius=radius),
                          lambda r: client.submit(range_search_shards, [r.spec], queries, radius, r.future,
                                                  pure=False))
        return merge_ranges(parts, queries.shape[0])

    # -- changing ---------------------------------------------------------------------------------
    def add(self, codes) -> None:
        """Append codes as new shards (blocks of at most the database's block rows), placed on the
        worker with the fewest codes; their ids follow the largest so far.

        Raises:
            ValidationError: codes of another width or not integers, on the client.
        """
        codes = self._queries(codes.numpy() if isinstance(codes, Tensor) else codes)
        if not codes.shape[0]:
            return
        counts: dict = {}
        for record in self._records:
            counts[record.worker] = counts.get(record.worker, 0) + record.spec.live
        workers = self._workers or list(self._client.scheduler_info(n_workers=-1)["workers"])
        target = min(workers, key=lambda w: counts.get(w, 0)) if workers else None
        self._append(da.from_array(codes, chunks=(self._chunk_rows, -1)), workers=[target] if target else None,
                     strict=False)
        self._place()

    def remove_ids(self, ids) -> int:
        """Remove the codes of `ids` (ids not present are ignored) from the shards holding them;
        the other codes keep their ids. Returns how many were removed."""
        wanted = np.asarray(ids)
        if wanted.dtype == object or wanted.dtype.kind not in "iu" or wanted.ndim > 1:
            raise ValidationError(NAME, "ids", "type", type(ids).__name__,
                                  "allowed: an integer or a 1-D array of integers")
        wanted = np.unique(wanted.reshape(-1).astype(np.int64))
        removed, changes = 0, {}
        for record in self._records:
            spec = record.spec
            inside = wanted[(wanted >= spec.first) & (wanted < spec.first + spec.rows)]
            new = np.setdiff1d(inside, spec.removed, assume_unique=True)
            if not new.size:
                continue
            record.spec = Spec(spec.key, spec.first, spec.rows, spec.version + 1, np.union1d(spec.removed, new))
            removed += int(new.size)
            changes.setdefault(record.worker, []).append((record.spec.brief(), new))
        if changes:
            self._routes = None
            lost = changes.pop(None, None) is not None
            asked = self._ask({a: dict(kind="remove", changes=c) for a, c in changes.items()})
            # A worker that did not answer or lacked a shard: the next search rebuilds from the specs.
            if lost or not all(isinstance(a, dict) and all(a.get("result", ())) for a in asked.values()):
                self._stale = True
        return removed

    def close(self) -> None:
        """Release the persisted blocks; the workers drop the shards' device memory now."""
        keys = {}
        for record in self._records:
            if record.worker is not None:
                keys.setdefault(record.worker, []).append(record.spec.key)
            record.future.release()
        self._ask({a: dict(kind="forget", keys=k) for a, k in keys.items()})
        self._records, self._routes = [], None
