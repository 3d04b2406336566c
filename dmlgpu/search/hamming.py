"""Exact search of binary codes on the device: `HammingIndex` (FAISS's names) and `hamming_knn`.

An index holds codes of `d` bits with int64 ids, on one device or sharded over several
(`devices=[0, 1]`, `devices="all"`), and searches them exactly by Hamming distance or by
Tanimoto (Jaccard) similarity popcount(a & b) / popcount(a | b):

- `search(queries, k)`: the k nearest of each query, any k up to the live count. Hamming and k
  up to kernels.HAMMING_REGISTER_K take the register path (shaders/hamming.comp: each lane keeps
  its k best in registers); anything else the selection path (shaders/search.comp: a bound from a
  sampled histogram, one pass gathering the rows within it, a radix selection per query).
- `range_search(queries, radius)`: every row within the radius, in FAISS's (lims, D, I) layout.
- `add`, `remove_ids`, `reconstruct`, `save`/`load` (one versioned file), pickling.

The answer is numpy's exactly: rows ordered by (distance, id), or by (similarity descending,
id), the similarity compared as an exact fraction (0/0 counts as 0, RDKit's rule since its 2025.09.5).

Longer than 500 lines: the index's whole public face (construction, contents, reading back,
files, search, range search, the shards' merge) in one class, as FAISS's index classes are;
the device work lives in shard.py.
"""
from __future__ import annotations

import io
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Union, overload

import numpy as np
import numpy.typing as npt

from ..api.device import Device, default_device
from ..describe.validation import is_int
from ..errors import ValidationError
from ..front.tensor import Tensor
from ..kernels import search_programs as programs, variants as kernels
from ..kernels.search_programs import HAMMING, TANIMOTO
from ..runtime import devices as list_devices
from . import index_file
from .codes import code_bytes, ids_array, words_of
from .merge import nearest
from .pacing import Cancelled, Pacer, planned_budget
from .places import device_tensors, tensor_places
from .shard import Shard, tanimoto_bound

__all__ = ["Codes", "HammingIndex", "hamming_knn"]

#: Codes given as numpy data: rows of integers.
Codes = npt.NDArray[Any]
#: (distances or similarities, ids) on the host.
Answer = tuple[npt.NDArray[Any], npt.NDArray[Any]]

INDEX = "dmlgpu.HammingIndex"
KNN = programs.NAME
METRICS = {"hamming": HAMMING, "tanimoto": TANIMOTO, "jaccard": TANIMOTO}
_METRIC_NAMES = {HAMMING: "hamming", TANIMOTO: "tanimoto"}
#: (pid, pool) of the threads that search a sharded index's shards beside the calling thread:
#: made once per process (starting two threads took ~0.5 ms of a 7 ms two-GPU search, NOTES
#: session 27) and again in a forked child, where the parent's threads do not exist.
_POOL: list = [None, None]


def _shard_pool() -> ThreadPoolExecutor:
    pid = os.getpid()
    if _POOL[0] != pid:
        _POOL[:] = [pid, ThreadPoolExecutor(32, thread_name_prefix="dmlgpu-search")]
    return _POOL[1]


class HammingIndex:
    """Binary codes with int64 ids, resident on one device or sharded over several, searched
    exactly (FAISS's `IndexBinaryFlat` + `IndexBinaryIDMap`, on any Vulkan GPU).

    Args:
        codes: (n, words) codes of any integer dtype, their bits taken as they lie in memory
            (np.packbits output, int8 binary embeddings, uint64 words), numpy or Tensor; None
            for an empty index. A packed Tensor of whole 32-bit-word rows on the index's device
            is searched where it lies (keep it alive and unchanged).
        ids: n int64-convertible distinct ids (default 0, 1, ..., n - 1).
        metric: "hamming" (distances, nearest first) or "tanimoto" / "jaccard" (similarity
            popcount(a & b) / popcount(a | b), largest first; codes of up to 8,192 bits).
        device: the device (default: the Tensor's, else the default device).
        devices: several devices to shard over: indices, `Device`s, or "all"; searches run on
            each concurrently and the partial answers are merged.
        stream: keep the codes on the host and upload them piece by piece in every search, for
            databases larger than device memory.

    Raises:
        ValidationError: bad codes, ids, metric or devices, before any work.
        DeviceMemoryError: the codes do not fit in device memory (`stream=True` searches them).
    """

    def __init__(self, codes=None, *, ids=None, metric: str = "hamming", device=None, devices=None,
                 stream: bool = False):
        self._name = INDEX
        if codes is None and ids is not None:
            raise ValidationError(self._name, "ids", "value", "ids without codes", "allowed: ids together with codes")
        self._setup(metric, device, devices, stream, codes)
        if codes is not None:
            self._add(codes, ids, first=True)

    # -- construction ------------------------------------------------------------------------
    def _setup(self, metric, device, devices, stream, codes) -> None:
        name = self._name
        if not isinstance(metric, str) or metric.lower() not in METRICS:
            raise ValidationError(name, None, "metric", metric, "allowed: 'hamming', 'tanimoto' or 'jaccard'")
        self._metric = METRICS[metric.lower()]
        if device is not None and devices is not None:
            raise ValidationError(name, None, "devices", devices, "allowed: device or devices, not both")
        if devices is None:
            if device is not None and not isinstance(device, Device):
                raise ValidationError(name, None, "device", type(device).__name__, "allowed: a dmlgpu.Device")
            chosen = [device or (codes.device if isinstance(codes, Tensor) else default_device())]
        else:
            chosen = self._devices(devices)
        self._devices_list = chosen
        self._stream = bool(stream)
        self._shards: list[Shard] = []
        self._bits = None
        self._dtype = None
        self._next_id = 0

    def _devices(self, devices) -> list:
        name = self._name
        if isinstance(devices, str):
            if devices != "all":
                raise ValidationError(name, None, "devices", devices, "allowed: 'all' or a list of devices")
            return [Device(d["index"]) for d in list_devices()]
        try:
            items = list(devices)
        except TypeError:
            raise ValidationError(name, None, "devices", type(devices).__name__,
                                  "allowed: 'all' or a list of device indices or dmlgpu.Devices") from None
        if not items:
            raise ValidationError(name, None, "devices", devices, "allowed: at least one device")
        found = []
        for item in items:
            if isinstance(item, Device):
                found.append(item)
            elif is_int(item) and 0 <= item < len(list_devices()):
                found.append(Device(int(item)))
            else:
                raise ValidationError(name, None, "devices", item,
                                      f"allowed: device indices from 0 to {len(list_devices()) - 1}, or dmlgpu.Devices")
        if len({id(d) for d in found}) != len(found):
            raise ValidationError(name, None, "devices", devices, "allowed: distinct devices")
        return found

    def _codes(self, codes, tensor: str):
        """The uint8 code bytes of codes (numpy or Tensor), their width checked."""
        as_bytes = code_bytes(codes, self._name, tensor)
        self._check_bits(as_bytes.shape[1] * 8, tensor)
        return as_bytes

    def _check_bits(self, bits: int, tensor: str) -> None:
        """Codes of `bits` bits fit this index: its width (once it has one), the metric's limit."""
        if self._bits is not None and bits != self._bits:
            raise ValidationError(self._name, tensor, "bits", bits,
                                  f"allowed: {self._bits} bits per code, as the index's (d)")
        if self._metric == TANIMOTO and bits > programs.TANIMOTO_MAX_BITS:
            raise ValidationError(self._name, tensor, "bits", bits,
                                  f"allowed: Tanimoto codes of up to {programs.TANIMOTO_MAX_BITS} bits")

    def add(self, codes, ids=None) -> None:
        """Append codes; `ids` default to the ones after the largest so far (FAISS's `add` /
        `add_with_ids`).

        Raises:
            ValidationError: codes of another width or not integers, ids not distinct, not
                int64-convertible or already present; before any work.
        """
        self._add(codes, ids, first=False)

    def _add(self, codes, ids, first: bool) -> None:
        name = self._name
        places = None
        if first and not self._stream and len(self._devices_list) == 1:
            places = tensor_places(codes, self._devices_list[0])
        as_bytes = None if places is not None else self._codes(codes, "codes")
        rows = int(codes.shape[0]) if places is not None else as_bytes.shape[0]
        if ids is None:
            new_ids = np.arange(self._next_id, self._next_id + rows, dtype=np.int64)
        else:
            new_ids = ids_array(ids, rows, name)
            present = np.concatenate([s.ids for s in self._shards]) if self._shards else np.zeros(0, np.int64)
            if new_ids.size and present.size and np.isin(new_ids, present).any():
                raise ValidationError(name, "ids", "value", "ids already in the index", "allowed: new ids")
        if places is not None:
            bits = int(codes.shape[1]) * codes.itemsize * 8
            self._check_bits(bits, "codes")
            self._bits, self._dtype = bits, np.dtype(codes.dtype.name)
            shard = Shard(self._devices_list[0], bits // 8, self._metric, False, name)
            shard.add_places(places, new_ids)
            self._shards = [shard]
        else:
            if not rows:
                return
            if self._bits is None:
                self._bits = as_bytes.shape[1] * 8
                self._dtype = np.dtype(codes.dtype.name) if hasattr(codes, "dtype") else np.dtype(np.uint8)
            if not self._shards:
                self._shards = [Shard(d, self._bits // 8, self._metric, self._stream, name) for d in self._devices_list]
            words = words_of(as_bytes)
            # New rows go to the shards with the fewest, in contiguous runs (balanced sizes).
            sizes = np.array([s.rows for s in self._shards])
            target = (sizes.sum() + rows + len(sizes) - 1) // len(sizes)
            share = np.maximum(target - sizes, 0)
            share[np.argmax(share)] += rows - share.sum() if share.sum() < rows else 0
            done = 0
            for shard, n in zip(self._shards, share):
                n = int(min(n, rows - done))
                if n:
                    shard.add(words[done:done + n], new_ids[done:done + n])
                    done += n
        if new_ids.size:
            self._next_id = max(self._next_id, int(new_ids.max()) + 1)

    def remove_ids(self, ids) -> int:
        """Remove the codes of `ids` (absent ids are ignored); the rest keep their ids. Returns
        how many were removed (FAISS's `remove_ids`)."""
        try:
            wanted = np.asarray(ids)
        except Exception:  # noqa: BLE001
            wanted = None
        if wanted is None or wanted.dtype == object or wanted.dtype.kind not in "iu" or wanted.ndim > 1:
            raise ValidationError(self._name, "ids", "type", type(ids).__name__,
                                  "allowed: an integer or a 1-D array of integers")
        wanted = wanted.reshape(-1).astype(np.int64)
        removed = 0
        for shard in self._shards:
            keep = ~np.isin(shard.ids, wanted)
            gone = int(shard.ids.size - keep.sum())
            if gone:
                shard.remove(keep)
                removed += gone
        return removed

    # -- facts -----------------------------------------------------------------------------
    @property
    def metric(self) -> str:
        return _METRIC_NAMES[self._metric]

    @property
    def d(self) -> int:
        """Bits per code (0 while the index is empty and no code has set it)."""
        return self._bits or 0

    @property
    def ntotal(self) -> int:
        return sum(s.rows for s in self._shards)

    def __len__(self) -> int:
        return self.ntotal

    @property
    def ids(self) -> np.ndarray:
        """The ids, ascending."""
        if not self._shards:
            return np.zeros(0, np.int64)
        return np.sort(np.concatenate([s.ids for s in self._shards]), kind="stable")

    @property
    def devices(self) -> list:
        return list(self._devices_list)

    @property
    def device(self):
        """The device (the first, for a sharded index)."""
        return self._devices_list[0]

    @property
    def dtype(self) -> np.dtype | None:
        """The dtype of the codes as first added (what `reconstruct` returns)."""
        return self._dtype

    @property
    def streamed(self) -> bool:
        return self._stream

    @property
    def in_place(self) -> bool:
        """Whether the index searches the caller's Tensor where it lies (no copy)."""
        return any(s.in_place for s in self._shards)

    @property
    def pieces(self) -> int:
        """Database pieces (one storage buffer each) the searches walk."""
        return sum(len(s.pieces) for s in self._shards)

    def tile_rows(self, k: int, count: int) -> int:
        """Rows each scan invocation walks in a search of `count` queries for the k nearest (on
        the first shard, before its searches have measured the device's rate)."""
        shard = self._shards[0]
        return programs.tile_rows(shard.device, [r for _, r in shard.piece_rows()], shard.words, k, count,
                                  planned_budget(shard.device))

    def __repr__(self):
        where = ", ".join(d.label for d in self._devices_list)
        body = f"{self.metric}, {self.d} bits, {self.ntotal:,} codes" if self._bits else f"{self.metric}, empty"
        return f"<dmlgpu.HammingIndex {body} on {where}{' (streamed)' if self._stream else ''}>"

    # -- reading codes back ----------------------------------------------------------------
    def reconstruct(self, id) -> np.ndarray:
        """The code of `id`, in the dtype it was first added as (FAISS's `reconstruct`)."""
        if not is_int(id):
            raise ValidationError(self._name, None, "id", id, "allowed: an integer id of the index")
        return self.reconstruct_batch([id])[0]

    def reconstruct_batch(self, ids) -> np.ndarray:
        """The codes of `ids` (in that order), shape (len(ids), words)."""
        wanted = np.asarray(ids)
        if wanted.dtype == object or wanted.dtype.kind not in "iu" or wanted.ndim != 1:
            raise ValidationError(self._name, "ids", "type", type(ids).__name__, "allowed: a 1-D array of integer ids")
        wanted = wanted.astype(np.int64)
        hits, seen = [], np.zeros(wanted.size, bool)  # (where each shard holds them) found first
        for shard in self._shards:
            at = np.searchsorted(shard.ids, wanted)
            hit = (at < shard.ids.size) & (shard.ids[np.minimum(at, shard.ids.size - 1)] == wanted) \
                if shard.ids.size else np.zeros(wanted.size, bool)
            hits.append((shard, at, hit))
            seen |= hit
        if not seen.all():
            raise ValidationError(self._name, "ids", "value", int(wanted[~seen][0]), "allowed: ids in the index")
        width = self.d // 8
        found = np.zeros((wanted.size, width), np.uint8)
        for shard, at, hit in hits:
            if hit.any():
                found[hit] = shard.read_words(at[hit]).view(np.uint8)[:, :width]
        dtype = self._dtype or np.dtype(np.uint8)
        return found.view(dtype).reshape(wanted.size, width // dtype.itemsize)

    def _code_chunks(self):
        for shard_rows in self._ordered_rows():
            for shard, rows in shard_rows:
                yield shard.read_words(rows).view(np.uint8)[:, :self.d // 8]

    def _ordered_rows(self):
        """[(shard, local rows)] runs covering every code in ascending id order."""
        ids = self.ids
        if not ids.size:
            return
        owner = np.zeros(ids.size, np.int64)
        local = np.zeros(ids.size, np.int64)
        for i, shard in enumerate(self._shards):
            at = np.searchsorted(ids, shard.ids)
            owner[at] = i
            local[at] = np.arange(shard.rows)
        for start in range(0, ids.size, 1 << 20):
            o, l = owner[start:start + (1 << 20)], local[start:start + (1 << 20)]
            cuts = np.flatnonzero(np.diff(o)) + 1
            yield [(self._shards[int(o[a])], l[a:b]) for a, b in zip(np.r_[0, cuts], np.r_[cuts, o.size])]

    # -- persistence -----------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the index to one file (written aside and renamed over `path`: atomic); the
        format is `dmlgpu.search.index_file`'s."""
        if not self._bits:
            raise ValidationError(self._name, None, "ntotal", 0, "allowed: an index with codes (its width unknown)")
        index_file.write(path, self._metric, self._bits, self._dtype, self.ids, self._code_chunks())

    @classmethod
    def load(cls, path, device=None, *, devices=None, stream: bool = False) -> "HammingIndex":
        """An index read from a file `save` wrote.

        Raises:
            ValidationError: a missing, truncated, foreign, corrupted or newer file.
        """
        metric, bits, dtype, ids, codes = index_file.read(path, INDEX)
        return cls._from_parts(metric, bits, dtype, ids, codes, device, devices, stream)

    @classmethod
    def joined(cls, parts) -> "HammingIndex":
        """One index over the codes of `parts` (single-device indexes of one device, metric and
        width, none streamed, each part's ids above the one before it's), searched where they
        lie: no copy, one search over all of them instead of one per part. A snapshot: later
        adds and removals in the parts are not seen in it, and its own never reach them.

        Raises:
            ValidationError: parts that differ in device, metric or width, a streamed or
                several-device part, or ids not ascending from one part to the next.
        """
        parts = [p for p in parts if p.ntotal]
        if not parts:
            raise ValidationError(INDEX, None, "parts", 0, "allowed: at least one part with codes")
        first = parts[0]
        for part in parts:
            if not isinstance(part, HammingIndex) or len(part._shards) != 1 or part.streamed:
                raise ValidationError(INDEX, None, "parts", repr(part),
                                      "allowed: single-device HammingIndexes that are not streamed")
            if (part.device, part._metric, part.d) != (first.device, first._metric, first.d):
                raise ValidationError(INDEX, None, "parts", repr(part),
                                      f"allowed: parts of {first.device.label}, {first.metric}, {first.d} bits")
        shards = [p._shards[0] for p in parts]
        if any(a.ids[-1] >= b.ids[0] for a, b in zip(shards, shards[1:])):
            raise ValidationError(INDEX, None, "parts", "ids", "allowed: each part's ids above the previous part's")
        index = cls(metric=first.metric, device=first.device)
        index._bits, index._dtype = first._bits, first._dtype
        index._shards = [Shard.joined(shards)]
        index._next_id = max(p._next_id for p in parts)
        return index

    @classmethod
    def _from_parts(cls, metric, bits, dtype, ids, codes, device=None, devices=None, stream=False):
        index = cls(metric=_METRIC_NAMES[metric], device=device, devices=devices, stream=stream)
        index._bits, index._dtype = bits, dtype
        if ids.size:
            index._add(codes, ids, first=False)
        return index

    def __reduce__(self):
        buffer = io.BytesIO()
        if self._bits:
            index_file.write(buffer, self._metric, self._bits, self._dtype, self.ids, self._code_chunks())
        return _unpickle, (buffer.getvalue(), _METRIC_NAMES[self._metric])

    # -- searching -------------------------------------------------------------------------
    def _queries(self, queries):
        """(host uint32 words or None, Tensor place or None, count) of queries, checked."""
        if not self._bits:
            raise ValidationError(self._name, None, "ntotal", 0, "allowed: an index with codes")
        place = None
        if isinstance(queries, Tensor) and len(self._shards) == 1:
            found = tensor_places(queries, self._shards[0].device)
            if found is not None and len(found) == 1:
                self._check_bits(queries.shape[1] * queries.itemsize * 8, "queries")
                place = (found[0][0], found[0][1])
                return None, place, int(queries.shape[0])
        as_bytes = self._codes(queries, "queries")
        return words_of(as_bytes), None, as_bytes.shape[0]

    def _check_k(self, k) -> int:
        live = self.ntotal
        if not is_int(k) or not 1 <= k <= live:
            raise ValidationError(self._name, None, "k", k, f"allowed: an integer from 1 to {live} (ntotal)")
        return int(k)

    @overload
    def search(self, queries: Tensor, k: int) -> tuple[Tensor, Tensor]: ...
    @overload
    def search(self, queries: Codes, k: int) -> Answer: ...
    def search(self, queries: Union[Tensor, Codes], k: int) -> Any:
        """The k nearest codes of each query: (distances uint32, nearest first; or Tanimoto
        similarities float32, largest first; ids int64), shape (q, k); ties by lower id. A
        Tensor of queries on a single-device index is read where it lies, and the answer is
        left on the device as Tensors.

        Raises:
            ValidationError: codes of another width or not integers, k of 0 or above ntotal;
                before any work.
        """
        k = self._check_k(k)
        words, place, count = self._queries(queries)
        if place is not None:
            return self._search_on_device(None, place, count, k)
        one = self._shards[0] if len(self._shards) == 1 else None
        if one is not None and not one.streamed and k <= one.rows and count * k * 8 <= one.device.max_buffer_size:
            # One resident shard: the answer finished on the device (values, then int64 ids, in one
            # buffer read back in one copy); a Tensor of queries gets Tensors, as the overloads say
            # (on its device: left there; one not searchable where it lies: uploaded)
            if isinstance(queries, Tensor) and queries.device is one.device:
                return self._search_on_device(words, None, count, k)
            if _answer_bytes(count, k)[1] <= one.device.max_buffer_size:
                values, ids = self._search_to_host(words, count, k)
            else:  # (values and ids together exceed one buffer: each its own, read back in turn)
                values, ids = (t.numpy() for t in self._search_on_device(words, None, count, k))
            if isinstance(queries, Tensor):
                return Tensor.from_numpy(values, queries.device), Tensor.from_numpy(ids, queries.device)
            return values, ids
        parts = self._run(lambda shard, cancel: self._shard_search(shard, words, None, count, k, cancel))
        keys, ids, cu = _merge(parts, k)
        values = self._values(keys, cu)
        if isinstance(queries, Tensor):
            return Tensor.from_numpy(values, queries.device), Tensor.from_numpy(ids, queries.device)
        return values, ids

    def _values(self, keys, cu):
        if self._metric == HAMMING:
            return np.ascontiguousarray(keys, dtype=np.uint32)
        c, u = (cu >> 16).astype(np.float64), (cu & 0xFFFF).astype(np.float64)
        return (c / u).astype(np.float32)  # (u >= 1: shaders/search.comp row_counts; 0/0 is 0/1)

    def _run(self, work):
        """work(shard, cancel) on every shard, concurrently where there are several; a Ctrl-C
        stops them all (each after its slice in flight) before it propagates."""
        if len(self._shards) == 1:
            return [work(self._shards[0], None)]
        cancel = threading.Event()
        # The first shard on this thread, the others on the pool's (a Ctrl-C here stops them all)
        futures = [_shard_pool().submit(work, shard, cancel) for shard in self._shards[1:]]
        try:
            first = work(self._shards[0], cancel)
            while wait(futures, timeout=0.05).not_done:  # (returns when the last ends; Ctrl-C between)
                pass
        except BaseException:
            cancel.set()
            for f in futures:
                try:
                    f.result()
                except BaseException:  # noqa: BLE001 -- the interrupt below is the news
                    pass
            raise
        return [first] + [f.result() for f in futures]

    def _shard_search(self, shard: Shard, words, place, count: int, k: int, cancel):
        """(keys, global ids, cu or None) of one shard's k' = min(k, rows) nearest, numpy."""
        k = min(k, shard.rows)
        if k and self._metric == HAMMING and place is None and not shard.streamed \
                and _answer_bytes(count, k)[1] <= shard.device.max_buffer_size:
            # Hamming distances are the keys: the answer finished on the device, as one shard's (a
            # streamed shard keeps its ids off the device too; Tanimoto's merge needs the keys)
            distances, ids = self._search_to_host(words, count, k, shard, cancel)
            return distances, ids, None
        entry = programs.ENTRY_WORDS[self._metric]
        found = np.empty((count, k, entry), np.uint32)
        if k:
            pacer = Pacer(shard.device, cancel, shard.metric)
            try:
                for first, n, uploaded in shard.query_uploads(words, place, count):
                    for start, size, buffer in shard.search(uploaded, n, k, pacer):
                        start += first
                        found[start:start + size] = \
                            buffer.read(0, size * k * entry * 4).view(np.uint32).reshape(size, k, entry)
            except BaseException:
                pacer.drain()  # nothing left writing into buffers about to be dropped
                raise
        keys, rows = found[..., 0], found[..., 1].astype(np.int64)
        return keys, shard.ids[rows], (found[..., 2] if entry == 3 else None)

    def _search_on_device(self, words, place, count: int, k: int):
        """A single-device search of host query words, or of a Tensor of queries bound where
        it lies (`place`); the answer finished on the device (values and int64 ids Tensors)."""
        shard = self._shards[0]
        values, ids = device_tensors(shard.device, count, k, self._metric)
        self._finish_on(shard, words, place, count, k, (values.buffer, 0), (ids.buffer, 0))
        return values, ids

    def _finish_on(self, shard: Shard, words, place, count: int, k: int, values, ids, cancel=None) -> None:
        """Search `shard` for the k nearest of `count` queries (host words, or a `place` on the
        device) and queue the finish of each batch's answer into (buffer, word offset) `values`
        and `ids`; on any exception the device's work ends before it propagates."""
        entry = programs.ENTRY_WORDS[self._metric]
        pacer = Pacer(shard.device, cancel, shard.metric)
        try:
            for first, n, uploaded in shard.query_uploads(words, place, count):
                for start, size, buffer in shard.search(uploaded, n, k, pacer):
                    shard.finish(buffer, size * k, entry, values[0], ids[0], (first + start) * k, values[1], ids[1])
        except BaseException:
            pacer.drain()
            raise

    def _search_to_host(self, words, count: int, k: int, shard: Shard | None = None, cancel=None):
        """A search of host query words on one shard (default: the only one), its answer
        finished on the device into one buffer (values, then the int64 ids) and read back in one
        copy: numpy (values, ids)."""
        shard = shard or self._shards[0]
        values_bytes, total = _answer_bytes(count, k)
        answer = shard.device.allocate(total, zero_fill=False)
        self._finish_on(shard, words, None, count, k, (answer, 0), (answer, values_bytes // 4), cancel)
        raw = answer.read()
        values = raw[:count * k * 4].view(np.uint32 if self._metric == HAMMING else np.float32).reshape(count, k)
        return values, raw[values_bytes:values_bytes + count * k * 8].view(np.int64).reshape(count, k)

    def range_search(self, queries, radius):
        """Every code within `radius` of each query, in FAISS's layout: (lims int64 (q + 1),
        distances, ids int64), query i's results at [lims[i], lims[i + 1]), in `search`'s
        order. Hamming: distance < radius (an integer, FAISS's rule); Tanimoto: similarity >=
        radius (a threshold from 0 to 1, FPSim2's and chemfp's rule).

        Raises:
            ValidationError: bad queries or a radius out of range; before any work.
        """
        words, place, count = self._queries(queries)
        if self._metric == HAMMING:
            if not is_int(radius) or not 0 <= radius <= self._bits + 1:
                raise ValidationError(self._name, None, "radius", radius,
                                      f"allowed: an integer from 0 to {self._bits + 1} (distances < radius)")
            bound = int(radius) - 1
        else:
            if isinstance(radius, bool) or not isinstance(radius, (int, float, np.integer, np.floating)) \
                    or not 0.0 <= float(radius) <= 1.0:
                raise ValidationError(self._name, None, "radius", radius,
                                      "allowed: a similarity threshold from 0 to 1 (similarities >= it)")
            bound = tanimoto_bound(float(radius), self._bits)
        if bound < 0:
            empty = np.zeros(0, np.uint32 if self._metric == HAMMING else np.float32)
            return np.zeros(count + 1, np.int64), empty, np.zeros(0, np.int64)
        parts = self._run(lambda shard, cancel: self._shard_range(shard, words, place, count, bound, cancel))
        per_query = []
        for q in range(count):
            keys = np.concatenate([p[q][0] for p in parts])
            ids = np.concatenate([p[q][1] for p in parts])
            cu = np.concatenate([p[q][2] for p in parts]) if self._metric == TANIMOTO else None
            order = np.lexsort((ids, keys))
            per_query.append((keys[order], ids[order], cu[order] if cu is not None else None))
        lims = np.zeros(count + 1, np.int64)
        lims[1:] = np.cumsum([p[0].size for p in per_query])
        keys = np.concatenate([p[0] for p in per_query]) if per_query else np.zeros(0, np.uint32)
        ids = np.concatenate([p[1] for p in per_query]) if per_query else np.zeros(0, np.int64)
        cu = np.concatenate([p[2] for p in per_query]) if self._metric == TANIMOTO and per_query else None
        return lims, self._values(keys, cu), ids

    def _shard_range(self, shard: Shard, words, place, count: int, bound: int, cancel):
        """Per query (keys, global ids, cu or None) of one shard's rows within the bound."""
        if not shard.rows:
            empty = (np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, np.uint32))
            return [empty] * count
        pacer = Pacer(shard.device, cancel, shard.metric)
        entry = programs.ENTRY_WORDS[self._metric]
        found = [None] * count
        try:
            for first, n, uploaded in shard.query_uploads(words, place, count):
                for start, size, buffer, lims in shard.search_selection(uploaded, n, 0, pacer, bound=bound):
                    total = int(lims[-1])
                    entries = (buffer.read(0, total * entry * 4).view(np.uint32).reshape(total, entry) if total
                               else np.zeros((0, entry), np.uint32))
                    for i in range(size):
                        part = entries[lims[i]:lims[i + 1]]
                        found[first + start + i] = (part[:, 0], shard.ids[part[:, 1].astype(np.int64)],
                                                    part[:, 2] if entry == 3 else None)
        except BaseException:
            pacer.drain()
            raise
        return found


def _answer_bytes(count: int, k: int) -> tuple[int, int]:
    """(bytes of the values, 16-byte aligned, and of values and int64 ids) of an answer of
    `count` queries x k read back in one buffer."""
    values = -(-count * k * 4 // 16) * 16
    return values, values + count * k * 8


def _merge(parts, k: int):
    """The k least (key, id) of each query over the shards' partial answers."""
    if len(parts) == 1:
        keys, ids, cu = parts[0]
        return keys, ids, cu
    keys = np.concatenate([p[0] for p in parts], axis=1)
    ids = np.concatenate([p[1] for p in parts], axis=1)
    order = nearest(keys, ids, k)
    cu = None
    if parts[0][2] is not None:
        cu = np.take_along_axis(np.concatenate([p[2] for p in parts], axis=1), order, 1)
    return np.take_along_axis(keys, order, 1), np.take_along_axis(ids, order, 1), cu


def _unpickle(data: bytes, metric: str) -> HammingIndex:
    if not data:
        return HammingIndex(metric=metric)
    metric_code, bits, dtype, ids, codes = index_file.read(io.BytesIO(data), INDEX)
    return HammingIndex._from_parts(metric_code, bits, dtype, ids, codes)


@overload
def hamming_knn(database: Union[Tensor, Codes], queries: Tensor, k: int) -> tuple[Tensor, Tensor]: ...
@overload
def hamming_knn(database: Union[Tensor, Codes], queries: Codes, k: int) -> Answer: ...
def hamming_knn(database: Union[Tensor, Codes], queries: Union[Tensor, Codes], k: int) -> Any:
    """The k nearest database codes of each query by Hamming distance, exactly numpy's answer.

    Args:
        database: (n, words) integer codes, numpy or Tensor (np.packbits output works).
        queries: (q, words') integer codes with the same bits per code.
        k: from 1 to n.

    Returns:
        (distances uint32, rows int64), shape (q, k), nearest first, ties by lower row
        (Tensors for a Tensor query).

    Raises:
        ValidationError: bad codes, widths that differ, k out of range; before any work.

    For repeated searches keep the database on the device with `HammingIndex(database)`.
    """
    index = HammingIndex.__new__(HammingIndex)
    index._name = KNN
    index._setup("hamming", None, None, False, database)
    index._add(database, None, first=True)
    if not index.ntotal:
        raise ValidationError(KNN, "database", "shape", (0, index.d // 8), "allowed: at least one code")
    return index.search(queries, k)
