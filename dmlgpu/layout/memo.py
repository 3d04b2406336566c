"""The front end's memos: what an earlier call decided, kept so a repeated call skips deciding.

Five bounded least-recently-used tables (issue: every cache has a bound), each keyed by what
decides a call (the operator, the level and dtype as given, the operands' dtypes and shapes or
Tensors' keys):

- `HOST_PLANS`: numpy-data calls -> their validated plan (device, pieces, result shape and dtype).
- `HOST_PARTS`: the same keys -> the pieces such a call runs as through the device's kept host
  calls.
- `TENSOR_SCALARS`: Python scalar operands of Tensor calls (device, dtype, bytes) -> the device
  buffer holding the value (a plan of `TENSOR_PLANS` holds its own scalars' buffers).
- `TENSOR_PLANS`: Tensor calls by the layouts of their operands and output (`View.layout`: never
  by which buffers they view) -> the planned dispatch, re-aimed at each call's buffers: a Tensor
  not seen before costs what one seen before costs. Reductions and `top_k`
  (`front.reductions`) keep theirs here too: the compiled operator and the result's shape.
- `TENSOR_SPANS`: calls over Tensors that span several buffers, by the views' layouts -> their
  plan (`dmlgpu.api.span_plan`: the compiled operator and bindings of each per-piece step).

Each holds `DEFAULT_SIZE` (256) entries unless `set_sizes` says otherwise. An entry holds no
array data but `TENSOR_SCALARS`' few bytes each: it names compiled operators, prepared
dispatches and their device, which it keeps alive until it is evicted or `clear()` (also `Device.empty_cache()`) empties them all.
"""
from __future__ import annotations

from collections import OrderedDict

__all__ = ["DEFAULT_SIZE", "HOST_PARTS", "HOST_PLANS", "LRU", "TENSOR_PLANS", "TENSOR_SCALARS",
           "TENSOR_SPANS", "clear", "set_sizes", "sizes", "stats"]

#: Entries per memo unless `set_sizes` changes it.
DEFAULT_SIZE = 256


class LRU:
    """A mapping of at most `maxsize` entries; a lookup refreshes an entry, a store past the
    bound evicts the least recently used one. `misses` counts lookups that found nothing since
    it was made or cleared (each is a call decided afresh)."""

    __slots__ = ("_entries", "maxsize", "misses", "_recent")

    def __init__(self, maxsize: int = DEFAULT_SIZE):
        self._entries: OrderedDict = OrderedDict()
        self.maxsize = maxsize
        self.misses = 0
        self._recent = None  # the key last stored or found: already the most recent entry

    def get(self, key, default=None):
        entries = self._entries
        try:
            value = entries[key]
        except KeyError:
            self.misses += 1
            return default
        # (a loop repeats one call: its key is already last, and moving it would hash it again)
        if key != self._recent:
            entries.move_to_end(key)
            self._recent = key
        return value

    def __setitem__(self, key, value) -> None:
        entries = self._entries
        entries[key] = value
        entries.move_to_end(key)
        self._recent = key
        while len(entries) > self.maxsize:
            entries.popitem(last=False)
            self._recent = None  # (a bound of 0 dropped it: nothing of it kept)

    def __len__(self) -> int:
        return len(self._entries)

    def values(self):
        return list(self._entries.values())

    def clear(self) -> None:
        self._entries.clear()
        self.misses = 0
        self._recent = None

    def resize(self, maxsize: int) -> None:
        if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 0:
            raise ValueError(f"a memo size is a non-negative int, not {maxsize!r}")
        self.maxsize = maxsize
        while len(self._entries) > maxsize:
            self._entries.popitem(last=False)
            self._recent = None


HOST_PLANS = LRU()
HOST_PARTS = LRU()
TENSOR_SCALARS = LRU()
TENSOR_SPANS = LRU()
TENSOR_PLANS = LRU()
_MEMOS = {"host_plans": HOST_PLANS, "host_parts": HOST_PARTS, "tensor_plans": TENSOR_PLANS,
          "tensor_scalars": TENSOR_SCALARS, "tensor_spans": TENSOR_SPANS}


def sizes() -> dict:
    """Each memo's bound, by name (`host_plans`, `host_parts`, `tensor_plans`,
    `tensor_scalars`, `tensor_spans`)."""
    return {name: memo.maxsize for name, memo in _MEMOS.items()}


def stats() -> dict:
    """Each memo's entries, bound and misses (lookups that found nothing: calls decided afresh)
    since it was made or cleared, by name."""
    return {name: {"entries": len(memo), "bound": memo.maxsize, "misses": memo.misses} for name, memo in _MEMOS.items()}


def set_sizes(size: int | None = None, **by_name: int) -> None:
    """Bound every memo at `size` entries, or those named (`set_sizes(tensor_plans=1024)`);
    0 turns a memo off. Entries beyond a smaller bound are evicted at once.

    Raises:
        ValueError: an unknown name or a size that is not a non-negative int.
    """
    unknown = sorted(set(by_name) - set(_MEMOS))
    if unknown:
        raise ValueError(f"unknown memos {unknown}; allowed: {sorted(_MEMOS)}")
    for name, memo in _MEMOS.items():
        wanted = by_name.get(name, size)
        if wanted is not None:
            memo.resize(wanted)


def clear() -> None:
    """Forget every memoised call (the next calls are validated and planned again)."""
    for memo in _MEMOS.values():
        memo.clear()
