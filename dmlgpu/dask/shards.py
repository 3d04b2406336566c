"""The worker side of `dmlgpu.dask.HammingIndex`: one `dmlgpu.HammingIndex` per database block,
built on the worker that holds the block and kept there across searches.

Each worker process keeps its shards in a registry keyed by the block's dask key. A shard is a
`dmlgpu.HammingIndex` over the block as it lies on the worker's device (a Tensor block is
searched in place: no copy), with the block's global ids, less the ids removed so far. A
shard's `Spec` says everything needed to build it again from its block: its key, its first id,
the ids removed, and the version of that list, so that a shard found stale is brought up to date
and a lost one is rebuilt anywhere the block is (dask recomputes a lost block from its graph).

Two ways in:
- a request handler (`HANDLER`, installed on every worker by `ShardPlugin`), which the client
  calls directly, one message per worker per search carrying the queries and the names of that
  worker's shards: the fast path. It builds a shard it lacks from the block in the worker's
  memory, searches all the shards asked for at once (`dmlgpu.HammingIndex.joined`: one search
  over their blocks where they lie, merged on the device, kept while the shards do not change)
  and answers with the merged k nearest, or the keys it cannot serve;
- tasks (`search_shards`, `range_search_shards`) that take the blocks as dependencies, so dask
  runs them where the blocks are (or recomputes lost ones): the fallback for shards no worker
  answered for.

The registry holds at most `SHARD_LIMIT` shards (least recently used go first) and drops a
shard as soon as its block has left the worker's memory (the client released or moved it);
`VIEW_LIMIT` joined views are kept, and all are dropped when any shard changes.
"""
from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import Counter, OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from distributed import WorkerPlugin
from distributed.protocol import to_serialize

from ..front.tensor import Tensor
from ..search.hamming import HammingIndex as DeviceIndex
from ..search.merge import nearest

__all__ = ["HANDLER", "SHARD_LIMIT", "ShardPlugin", "Spec", "VIEW_LIMIT", "held_keys", "merge_knn",
           "merge_ranges", "range_search_shards", "search_shards", "served", "served_seconds"]

#: Shards one worker process keeps at most.
SHARD_LIMIT = 1024
#: Joined views (one per set of shards searched together) one worker process keeps at most.
VIEW_LIMIT = 8
#: The name of the workers' request handler.
HANDLER = "dmlgpu_shards"


@dataclass(frozen=True)
class Spec:
    """What a shard is: the dask key of its block, the block's first global id and rows, the
    global ids removed from it (sorted int64) and how many removals made that list (`version`)."""
    key: object
    first: int
    rows: int
    version: int = 0
    removed: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), compare=False)

    @property
    def live(self) -> int:
        return self.rows - self.removed.size

    def brief(self) -> "Spec":
        """The spec without its removed ids (a search names shards by key and version only)."""
        return Spec(self.key, self.first, self.rows, self.version)


@dataclass
class _Shard:
    index: DeviceIndex
    version: int
    serial: int  # new at every build or change: what the joined views are keyed by


_SHARDS: OrderedDict = OrderedDict()  # block key -> _Shard, least recently used first
_VIEWS: OrderedDict = OrderedDict()  # the shards' serials -> their joined DeviceIndex
_LOCK = threading.Lock()  # (the handler's thread and task threads share the registry)
_SERIALS = itertools.count()
#: The handler's searches run here, one at a time, off the worker's event loop.
_EXECUTOR = ThreadPoolExecutor(1, thread_name_prefix="dmlgpu-shards")
#: Requests this process served, by kind, and the seconds their answers took on the shard
#: thread (what `served` and `served_seconds` report).
_SERVED: Counter = Counter()
_SECONDS: Counter = Counter()


def _forget(keys) -> None:
    """Drop the shards of `keys` and every joined view (call with _LOCK held)."""
    for key in keys:
        _SHARDS.pop(key, None)
    _VIEWS.clear()


def _prune(held) -> None:
    """Drop the shards whose blocks are no longer in `held` (the worker's data)."""
    with _LOCK:
        gone = [k for k in _SHARDS if k not in held]
        if gone:
            _forget(gone)


def _build(spec: Spec, block) -> _Shard:
    """The shard of `spec` over `block`, built (or brought to `spec`'s version) and registered."""
    with _LOCK:
        shard = _SHARDS.get(spec.key)
    changed = shard is None
    if shard is None:
        codes = block if isinstance(block, Tensor) else np.ascontiguousarray(block)
        index = DeviceIndex(codes, ids=np.arange(spec.first, spec.first + spec.rows, dtype=np.int64))
        shard = _Shard(index, 0, next(_SERIALS))
    if shard.version != spec.version:
        if spec.removed.size:
            shard.index.remove_ids(spec.removed)
        shard.version, shard.serial, changed = spec.version, next(_SERIALS), True
    with _LOCK:
        if changed or _SHARDS.get(spec.key) is not shard:
            _forget([spec.key])
        _SHARDS[spec.key] = shard
        _SHARDS.move_to_end(spec.key)
        while len(_SHARDS) > SHARD_LIMIT:
            _forget([next(iter(_SHARDS))])
    return shard


def _view(shards: list[_Shard]) -> DeviceIndex | None:
    """One index over the live rows of `shards` (given in id order, as the client lists them):
    the shard's own where there is one, else their joined view, made once while none of them
    changes."""
    live = [s for s in shards if s.index.ntotal]
    if len(live) <= 1:
        return live[0].index if live else None
    key = tuple(s.serial for s in live)
    with _LOCK:
        view = _VIEWS.get(key)
        if view is not None:
            _VIEWS.move_to_end(key)
            return view
    view = DeviceIndex.joined([s.index for s in live])
    with _LOCK:
        if key == tuple(s.serial for s in live):  # (none changed meanwhile)
            _VIEWS[key] = view
            while len(_VIEWS) > VIEW_LIMIT:
                _VIEWS.popitem(last=False)
    return view


def merge_knn(parts, k: int):
    """The k least (distance, id) of each query over partial answers [(distances, ids)] (None:
    an empty shard's; None if all are)."""
    parts = [p for p in parts if p is not None]
    if not parts:  # only empty shards
        return None
    if len(parts) == 1:
        distances, ids = parts[0]
        return distances[:, :k], ids[:, :k]
    distances = np.concatenate([d for d, _ in parts], axis=1)
    ids = np.concatenate([i for _, i in parts], axis=1)
    order = nearest(distances, ids, k)
    return np.take_along_axis(distances, order, 1), np.take_along_axis(ids, order, 1)


def merge_ranges(parts, count: int):
    """Per query, every (distance, id) of partial range answers [(lims, distances, ids)], in
    (distance, id) order, as FAISS's (lims, distances, ids)."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return np.zeros(count + 1, np.int64), np.zeros(0, np.uint32), np.zeros(0, np.int64)
    if len(parts) == 1:
        return parts[0]
    queries = np.concatenate([np.repeat(np.arange(count), np.diff(lims)) for lims, _, _ in parts])
    distances = np.concatenate([d for _, d, _ in parts]).astype(np.uint32, copy=False)
    ids = np.concatenate([i for _, _, i in parts]).astype(np.int64, copy=False)
    order = np.lexsort((ids, distances, queries))
    lims = np.zeros(count + 1, np.int64)
    lims[1:] = np.cumsum(np.bincount(queries, minlength=count))
    return lims, distances[order], ids[order]


def _knn(view: DeviceIndex | None, queries: np.ndarray, k: int):
    return None if view is None else view.search(queries, min(k, view.ntotal))


def _range(view: DeviceIndex | None, queries: np.ndarray, radius: int):
    return None if view is None else view.range_search(queries, radius)


def search_shards(specs, queries: np.ndarray, k: int, *blocks):
    """Task: the k nearest over the shards of `specs` (built here from `blocks` where missing)."""
    return _knn(_view([_build(spec, block) for spec, block in zip(specs, blocks)]), queries, k)


def range_search_shards(specs, queries: np.ndarray, radius: int, *blocks):
    """Task: every code within `radius` over the shards of `specs` (built here where missing)."""
    found = _range(_view([_build(spec, block) for spec, block in zip(specs, blocks)]), queries, radius)
    return merge_ranges([found], queries.shape[0])


# -- the request handler --------------------------------------------------------------------------
def _held(specs, blocks: dict) -> tuple[list[_Shard], list]:
    """The shards of `specs` at their versions (built from `blocks` where missing), and the keys
    of those this worker cannot serve."""
    found, missing = [], []
    for spec in specs:
        with _LOCK:
            shard = _SHARDS.get(spec.key)
            if shard is not None:
                _SHARDS.move_to_end(spec.key)
        if shard is None and spec.key in blocks:
            shard = _build(spec, blocks[spec.key])
        if shard is None or shard.version != spec.version:
            missing.append(spec.key)
        found.append(shard)
    return found, missing


def _answer(request: dict, blocks: dict) -> dict:
    """A request's answer (on the handler's thread), timed."""
    start = time.perf_counter()
    try:
        return _answer_now(request, blocks)
    finally:
        _SECONDS[request["kind"]] += time.perf_counter() - start


def _answer_now(request: dict, blocks: dict) -> dict:
    """{"result": ...} or {"missing": [keys]}."""
    kind = request["kind"]
    if kind == "remove":
        done = []
        for spec, ids in request["changes"]:
            with _LOCK:
                shard = _SHARDS.get(spec.key)
            ok = shard is not None and shard.version == spec.version - 1
            if ok:
                shard.index.remove_ids(ids)
                with _LOCK:
                    shard.version, shard.serial = spec.version, next(_SERIALS)
                    _VIEWS.clear()
            done.append(ok)
        return {"result": done}
    shards, missing = _held(request["specs"], blocks)
    if missing:
        return {"missing": missing}
    view = _view(shards)
    if kind == "search":
        return {"result": to_serialize(_knn(view, request["queries"], request["k"]))}
    return {"result": to_serialize(_range(view, request["queries"], request["radius"]))}


async def serve(worker, request: dict) -> dict:
    """The handler (on the worker's event loop): reads the blocks of shards not built yet from
    the worker's memory here, then answers on the shard thread. Kinds: "search" (specs,
    queries, k), "range_search" (specs, queries, radius), "remove" (changes: [(spec at its new
    version, ids)]), "forget" (keys: drop those shards now)."""
    kind = request["kind"]
    _SERVED[kind] += 1
    data = worker.data
    if kind == "forget":
        with _LOCK:
            _forget(request["keys"])
        return {"result": None}
    _prune(data)
    blocks = {}
    if kind != "remove":
        with _LOCK:
            wanted = [s.key for s in request["specs"] if s.version == 0 and s.key not in _SHARDS]
        blocks = {key: data[key] for key in wanted if key in data}
    return await asyncio.get_running_loop().run_in_executor(_EXECUTOR, _answer, request, blocks)


class ShardPlugin(WorkerPlugin):
    """Installs the shards' request handler on every worker, present and future."""

    name = "dmlgpu-shards"
    idempotent = True

    def setup(self, worker) -> None:
        async def dmlgpu_shards(request: dict) -> dict:
            return await serve(worker, request)

        worker.handlers[HANDLER] = dmlgpu_shards


def served() -> dict:
    """Requests this worker's handler served so far, by kind (`client.run(served)`)."""
    return dict(_SERVED)


def served_seconds() -> dict:
    """Seconds the handler's answers took on its thread so far (building shards and views,
    device searches), by kind (`client.run(served_seconds)`)."""
    return dict(_SECONDS)


def held_keys(dask_worker) -> list:
    """The keys of the shards this worker holds whose blocks it still holds
    (`client.run(held_keys)`)."""
    _prune(dask_worker.data)
    with _LOCK:
        return list(_SHARDS)

