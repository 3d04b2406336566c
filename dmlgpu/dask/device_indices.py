"""Index arithmetic on the device with the table's operators only: what the argmin/argmax and
top-k trees need to turn a block's local indices into global ones and to pick, after a merge,
the indices that go with the values kept, without bringing them to the host.

The table has no addition and no gather, so:
- widening (uint32 -> int64) writes the words into the low halves of a zero-filled Tensor;
- `add_constant` sums the index and the constant along a new axis of two (REDUCE SUM, int64);
- `flag_high` sets bit 62 of an int64 index (OR on its high word): an index so flagged is larger
  than any real one (a dask array has fewer than 2^62 elements);
- `select_last(g, p)` is `take_along_axis(g, p, -1)`: each candidate index is flagged where its
  position differs from the wanted one (SIGN of the XOR), and the minimum over the candidates is
  the one not flagged. It holds rows x k x candidates int64 values at once, so it runs over
  bands of rows of at most `SELECT_BYTES`.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ..front import numpy_api, reductions
from ..front.tensor import Tensor

__all__ = ["add_constant", "flag_high", "select_last", "widen"]

#: Bytes of the candidates x k key table `select_last` builds at once.
SELECT_BYTES = 64 << 20
#: Position vectors kept per (device, length): `select_last` and short top-k blocks reuse them.
POSITIONS_CACHE_SIZE = 64
#: The bit `flag_high` sets, counted in the high 32-bit word (bit 62 of the int64).
_FLAG_SHIFT = 30


def widen(t: Tensor) -> Tensor:
    """`t` (uint32) as an int64 Tensor of the same shape, on its device."""
    words = Tensor.empty(t.shape + (2,), np.uint32, t.device)
    words[..., 0] = t
    return words.view(np.int64).reshape(t.shape)


def add_constant(g: Tensor, constant: int) -> Tensor:
    """`g + constant` for an int64 Tensor `g` (a new Tensor)."""
    if constant == 0:
        return g
    pair = Tensor.empty(g.shape + (2,), np.int64, g.device)
    pair[..., 0] = g
    pair[..., 1] = numpy_api.bit_xor(Tensor.empty((), np.int64, g.device), int(constant))
    return reductions.sum(pair, axis=-1)


def flag_high(g: Tensor, flags: Tensor) -> Tensor:
    """A new int64 Tensor: `g` (packed, int64) with bit 62 set where `flags` (uint32 0 or 1,
    `g`'s shape or broadcasting to it) is 1."""
    words = g.view(np.uint32)
    out = Tensor.empty(words.shape, np.uint32, g.device)
    out[..., 0::2] = words[..., 0::2]
    numpy_api.bit_or(words[..., 1::2], numpy_api.bit_shift_left(flags, _FLAG_SHIFT), out=out[..., 1::2])
    return out.view(np.int64)


def differs(values: Tensor, reference: Tensor) -> Tensor:
    """uint32 1 where the raw bits of `values` differ from `reference` (broadcast), else 0."""
    return numpy_api.sign(numpy_api.bit_count(numpy_api.bit_xor(values, reference), dtype=np.uint32))


#: (device, length) -> `positions`, least recently used first.
_POSITIONS: OrderedDict = OrderedDict()
_POSITIONS_LOCK = threading.Lock()  # (a worker may run several tasks at once)


def positions(device, length: int) -> Tensor:
    """0, 1, ..., length - 1 as uint32 on `device` (uploaded once per device and length while
    the last `POSITIONS_CACHE_SIZE` are kept)."""
    key = (device, int(length))
    with _POSITIONS_LOCK:
        kept = _POSITIONS.get(key)
        if kept is None or kept.buffer.released:
            kept = _POSITIONS[key] = Tensor.from_numpy(np.arange(length, dtype=np.uint32), device)
            while len(_POSITIONS) > POSITIONS_CACHE_SIZE:
                _POSITIONS.popitem(last=False)
        _POSITIONS.move_to_end(key)
        return kept


def select_last(g: Tensor, p: Tensor) -> Tensor:
    """`np.take_along_axis(g, p, -1)` on the device: g int64 (..., n) packed, p uint32 (..., k)
    positions in [0, n); returns int64 (..., k)."""
    n, k = g.shape[-1], p.shape[-1]
    lead = p.shape[:-1]
    out = Tensor.empty(lead + (k,), np.int64, g.device)
    if not out.size:
        return out
    g2, p2, out2 = g.reshape(-1, n), p.reshape(-1, k), out.reshape(-1, k)
    rows = g2.shape[0]
    band = max(1, SELECT_BYTES // (k * n * 8))
    here = positions(g.device, n)
    for first in range(0, rows, band):
        last = min(rows, first + band)
        flags = numpy_api.sign(numpy_api.bit_xor(p2[first:last, :, None], here))  # (rows, k, n)
        words = g2[first:last].view(np.uint32)  # (rows, 2n)
        keys = Tensor.empty((last - first, k, 2 * n), np.uint32, g.device)
        keys[..., 0::2] = words[:, None, 0::2]
        numpy_api.bit_or(words[:, None, 1::2], numpy_api.bit_shift_left(flags, _FLAG_SHIFT), out=keys[..., 1::2])
        out2[first:last] = reductions.min(keys.view(np.int64), axis=-1)
    return out
