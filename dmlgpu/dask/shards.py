"""The worker side of `dmlgpu.dask.HammingIndex`: one `dmlgpu.HammingIndex` per database block,
built on the worker that holds the block and kept there across searches.

Each worker process keeps its shards in a registry keyed by the block's dask key. A shard is a
`dmlgpu.HammingIndex` over the block as it lies on the worker's device (a Tensor block is
searched in place: no copy), with the block's global ids, less the ids removed so far. A
shard's `Spec` says everything needed to build it again from its block: its key, its first id,
the ids removed, and the version of that list, so that a shard found stale is brought up to date
and a lost one is rebuilt anywhere the block is (dask recomputes a lost block from its graph).

Two ways in:
- tasks (`build_shard`, `search_shards`, `range_search_shards`) take the blocks as dependencies,
  so dask runs them where the blocks are (or moves the blocks): they build what is missing. Used
  to place the shards and as the fallback of a search;
- one `ShardServer` actor per worker answers the client directly (no scheduler round trip) for
  the shards already built there: the fast path of every search. It raises `MissingShards` for
  any shard it does not hold at the wanted version.

The registry holds at most `SHARD_LIMIT` shards (least recently used go first) and drops a
shard as soon as its block has left the worker's memory (the client released or moved it).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from distributed import get_worker

from ..front.tensor import Tensor
from ..search.hamming import HammingIndex as DeviceIndex

__all__ = ["MissingShards", "SHARD_LIMIT", "ShardServer", "Spec", "build_shard", "merge_knn", "merge_ranges",
           "range_search_shards", "search_shards"]

#: Shards one worker process keeps at most.
SHARD_LIMIT = 1024


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


class MissingShards(KeyError):
    """The shards (their keys) a `ShardServer` does not hold at the version asked for."""


@dataclass
class _Shard:
    index: DeviceIndex
    version: int


_SHARDS: OrderedDict = OrderedDict()  # block key -> _Shard, least recently used first
_LOCK = threading.Lock()  # (the actor's thread and task threads share the registry)


def _held_keys():
    """The keys whose data this worker holds, or None outside a worker."""
    try:
        return get_worker().data
    except ValueError:
        return None


def _lookup(spec: Spec) -> _Shard | None:
    with _LOCK:
        held = _held_keys()
        for key in [k for k in _SHARDS if held is not None and k not in held]:
            del _SHARDS[key]  # its block is gone from this worker: so is the shard
        shard = _SHARDS.get(spec.key)
        if shard is not None:
            _SHARDS.move_to_end(spec.key)
        return shard


def _build(spec: Spec, block) -> _Shard:
    """The shard of `spec` over `block`, built (or brought to `spec`'s version) and registered."""
    shard = _lookup(spec)
    if shard is None:
        codes = block if isinstance(block, Tensor) else np.ascontiguousarray(block)
        index = DeviceIndex(codes, ids=np.arange(spec.first, spec.first + spec.rows, dtype=np.int64))
        shard = _Shard(index, 0)
    if shard.version != spec.version:
        if spec.removed.size:
            shard.index.remove_ids(spec.removed)
        shard.version = spec.version
    with _LOCK:
        _SHARDS[spec.key] = shard
        _SHARDS.move_to_end(spec.key)
        while len(_SHARDS) > SHARD_LIMIT:
            _SHARDS.popitem(last=False)
    return shard


def _address() -> str | None:
    try:
        return get_worker().address
    except ValueError:
        return None


def build_shard(spec: Spec, block) -> tuple:
    """Task: build the shard of `block` on this worker; returns (worker address, live rows)."""
    return _address(), _build(spec, block).index.ntotal


def _knn(shard: _Shard, queries: np.ndarray, k: int):
    live = shard.index.ntotal
    if not live:
        return None
    return shard.index.search(queries, min(k, live))


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
    order = np.lexsort((ids, distances), axis=1)[:, :k]
    return np.take_along_axis(distances, order, 1), np.take_along_axis(ids, order, 1)


def merge_ranges(parts, count: int):
    """Per query, every (distance, id) of partial range answers [(lims, distances, ids)], in
    (distance, id) order, as FAISS's (lims, distances, ids)."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return np.zeros(count + 1, np.int64), np.zeros(0, np.uint32), np.zeros(0, np.int64)
    queries = np.concatenate([np.repeat(np.arange(count), np.diff(lims)) for lims, _, _ in parts])
    distances = np.concatenate([d for _, d, _ in parts]).astype(np.uint32, copy=False)
    ids = np.concatenate([i for _, _, i in parts]).astype(np.int64, copy=False)
    order = np.lexsort((ids, distances, queries))
    lims = np.zeros(count + 1, np.int64)
    lims[1:] = np.cumsum(np.bincount(queries, minlength=count))
    return lims, distances[order], ids[order]


def search_shards(specs, queries: np.ndarray, k: int, *blocks):
    """Task: the k nearest over the shards of `specs` (built here from `blocks` where missing)."""
    return merge_knn([_knn(_build(spec, block), queries, k) for spec, block in zip(specs, blocks)], k)


def range_search_shards(specs, queries: np.ndarray, radius: int, *blocks):
    """Task: every code within `radius` over the shards of `specs` (built here where missing)."""
    parts = [_build(spec, block).index.range_search(queries, radius) for spec, block in zip(specs, blocks)]
    return merge_ranges(parts, queries.shape[0])


class ShardServer:
    """The actor on each worker: searches the shards built there, answering the client directly."""

    def _held(self, specs) -> list[_Shard]:
        found, missing = [], []
        for spec in specs:
            shard = _lookup(spec)
            if shard is None or shard.version != spec.version:
                missing.append(spec.key)
            found.append(shard)
        if missing:
            raise MissingShards(missing)
        return found

    def search(self, specs, queries: np.ndarray, k: int):
        """The k nearest over these shards, merged; MissingShards for any not held."""
        return merge_knn([_knn(shard, queries, k) for shard in self._held(specs)], k)

    def range_search(self, specs, queries: np.ndarray, radius: int):
        """Every code within `radius` over these shards, merged; MissingShards as `search`."""
        return merge_ranges([shard.index.range_search(queries, radius) for shard in self._held(specs)],
                            queries.shape[0])

    def remove(self, spec: Spec, ids: np.ndarray) -> bool:
        """Remove `ids` from the shard of `spec` (now at `spec.version`); False if not held here."""
        with _LOCK:
            shard = _SHARDS.get(spec.key)
        if shard is None or shard.version != spec.version - 1:
            return False
        shard.index.remove_ids(ids)
        shard.version = spec.version
        return True

    def shards(self) -> list:
        """The keys of the shards this worker holds (for tests and diagnostics)."""
        with _LOCK:
            return list(_SHARDS)
