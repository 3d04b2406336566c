"""The two cases where dmlgpu does more than one operator per call, as the demo and the benchmark
time them: a fused chain of eight operators, and an exact binary-code search. Each comes with
numpy's fastest route to the same result (both are checked equal before anything is timed).

- The chain: `z = ((((x ^ y) << 3) & 0x0F0F0F0F) | 0x10101010)`, then `~z >> 1 ^ x`, and the
  bit count of the result (uint8): `dmlgpu.fuse` on Tensors, one kernel, the seven intermediates
  in registers; numpy either writes a temporary per step, or (often faster) runs the steps in place
  into one kept array with `out=`: the faster of the two is the peer.
- The search: the k nearest of each query among binary codes by Hamming distance, nearest first,
  ties by lower row: `HammingIndex.search` (XOR, popcount, sum and top-k in one kernel, the
  database resident); numpy per query `np.bitwise_count(db ^ q).sum(1)` over 64-bit words, then an
  exact selection (`argpartition`, ties at the k-th distance taken by lower row) and a sort.

numpy before 2.0 has no `np.bitwise_count`; there the bit counts come from `popcount`'s SWAR
route (shifts, masks and one multiply per word, in place), numpy's fastest route to the same counts
on those versions (faster than a 16-bit lookup table).
"""
from __future__ import annotations

import numpy as np

import dmlgpu

#: The chain's constants (uint32).
MASK, BITS = 0x0F0F0F0F, 0x10101010


def popcount(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """`np.bitwise_count(x, out=out)` on an unsigned integer array: the set bits of each element,
    uint8. On numpy before 2.0, which has no bitwise_count, the same counts by the SWAR bit trick:
    2-bit, 4-bit and 8-bit partial sums by shifts and masks, then one multiply adds the bytes into
    the top byte, which a shift brings down."""
    count = getattr(np, "bitwise_count", None)
    if count is not None:
        return count(x, out=out)
    word = x.dtype.type
    ones = int.from_bytes(b"\x01" * x.itemsize, "little")  # 0x0101...01, one per byte
    y = x >> word(1)
    y &= word(0x55 * ones)
    np.subtract(x, y, out=y)  # each 2-bit field: its bit count
    z = y >> word(2)
    z &= word(0x33 * ones)
    y &= word(0x33 * ones)
    y += z  # each 4-bit field: its bit count
    np.right_shift(y, word(4), out=z)
    y += z
    y &= word(0x0F * ones)  # each byte: its bit count
    y *= word(ones)
    y >>= word(8 * (x.itemsize - 1))  # the top byte: the sum of all the bytes
    if out is None:
        return y.astype(np.uint8)
    np.copyto(out, y, casting="unsafe")
    return out


def chain(x, y):
    """The chain on numpy arrays or Tensors (and traced by `dmlgpu.fuse`): (z, bit count of z)."""
    z = (x ^ y) << 3
    z = (z & MASK) | BITS
    z = (~z >> 1) ^ x
    return z, dmlgpu.bit_count(z)


fused_chain = dmlgpu.fuse(chain)


def numpy_chain(x: np.ndarray, y: np.ndarray):
    """numpy's expression: a new array per step."""
    z = (x ^ y) << 3
    z = (z & MASK) | BITS
    z = (~z >> 1) ^ x
    return z, popcount(z)


def numpy_chain_in_place(x: np.ndarray, y: np.ndarray, z: np.ndarray, counts: np.ndarray):
    """numpy's steps in place into kept arrays (`out=`): no temporaries."""
    np.bitwise_xor(x, y, out=z)
    np.left_shift(z, 3, out=z)
    np.bitwise_and(z, MASK, out=z)
    np.bitwise_or(z, BITS, out=z)
    np.invert(z, out=z)
    np.right_shift(z, 1, out=z)
    np.bitwise_xor(z, x, out=z)
    popcount(z, out=counts)
    return z, counts


def codes(rows: int, bits: int, seed: int = 0) -> np.ndarray:
    """Random binary codes: `rows` x `bits / 8` uint8 (np.packbits' layout)."""
    return np.random.default_rng(seed).integers(0, 256, (rows, bits // 8), dtype=np.uint8)


def numpy_search(database: np.ndarray, queries: np.ndarray, k: int):
    """numpy's exact k nearest by Hamming distance: (distances uint32, rows int64), shape (q, k),
    nearest first, ties by lower row, as dmlgpu's. Works on 64-bit words where the code's width
    allows (a quarter of the popcounts of bytes)."""
    words = np.uint64 if database.shape[1] % 8 == 0 else np.uint8
    db = np.ascontiguousarray(database).view(words)
    qs = np.ascontiguousarray(queries).view(words)
    distances = np.empty((len(qs), k), np.uint32)
    rows = np.empty((len(qs), k), np.int64)
    for j, q in enumerate(qs):
        d = popcount(db ^ q).sum(1, dtype=np.uint32)
        kth = d[np.argpartition(d, k - 1)[k - 1]]
        below = np.flatnonzero(d < kth)
        picked = np.concatenate([below, np.flatnonzero(d == kth)[:k - below.size]])
        order = np.lexsort((picked, d[picked]))
        rows[j], distances[j] = picked[order], d[picked[order]]
    return distances, rows
