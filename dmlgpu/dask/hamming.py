"""`dmlgpu.dask.hamming_knn`: exact Hamming k-NN over a `dask.array` database sharded by rows.

Each row block is searched on the device of the worker holding it (`dmlgpu.HammingIndex`, the
fused kernel); the blocks' partial top-k lists (global row numbers) are merged in a tree of
`MERGE_FANIN`-way merges, the same ordering as on one device: distance, then lower row. The
answer is numpy's, exactly. Inputs are checked on the client before the graph is built.
"""
from __future__ import annotations

import dask
import dask.array as da
import numpy as np

from ..errors import ValidationError
from ..kernels.search_programs import NAME
from ..search.codes import code_bytes
from ..search.hamming import HammingIndex

__all__ = ["hamming_knn"]

#: Partial results merged per task of the tree.
MERGE_FANIN = 8


def _search_block(block: np.ndarray, queries: np.ndarray, k: int, first_row: int):
    distances, indices = HammingIndex(block).search(queries, min(k, block.shape[0]))
    return distances, indices + first_row


def _merge(k: int, *parts):
    """The k least (distance, row) pairs of each query over `parts`, in order."""
    distances = np.concatenate([d for d, _ in parts], axis=1)
    indices = np.concatenate([i for _, i in parts], axis=1)
    order = np.lexsort((indices, distances), axis=1)[:, :k]
    return np.take_along_axis(distances, order, 1), np.take_along_axis(indices, order, 1)


def hamming_knn(database, queries, k: int):
    """The k nearest rows of a row-sharded dask database for each query, by Hamming distance.

    Args:
        database: a `dask.array` of (n, words) unsigned integer codes (blocks along rows; a
            split along words is rechunked away).
        queries: (q, words') numpy codes with the same bits per code.
        k: from 1 to n.

    Returns:
        (distances, indices): lazy dask arrays of shape (q, k), uint32 and int64, nearest first,
        ties by lower row: numpy's answer.

    Raises:
        ValidationError: on the client, before any graph runs (as `dmlgpu.hamming_knn`).
    """
    if not isinstance(database, da.Array):
        raise ValidationError(NAME, "database", "type", type(database).__name__, "allowed: a dask.array.Array")
    if database.dtype.kind not in "iu":
        raise ValidationError(NAME, "database", "dtype", database.dtype,
                              "allowed: integer codes (any integer dtype: its bits are the code)")
    if database.ndim != 2 or database.shape[1] == 0 or database.shape[0] == 0 or np.isnan(database.shape[0]):
        raise ValidationError(NAME, "database", "shape", database.shape,
                              "allowed: (rows, words) of known size, rows and words >= 1")
    query_bytes = code_bytes(queries, NAME, "queries")
    if query_bytes.shape[1] != database.shape[1] * database.dtype.itemsize:
        raise ValidationError(NAME, "queries", "bits", query_bytes.shape[1] * 8,
                              f"allowed: {database.shape[1] * database.dtype.itemsize * 8} bits per code, as the database's")
    rows = database.shape[0]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= rows:
        raise ValidationError(NAME, None, "k", k, f"allowed: an integer from 1 to {rows} (the database's rows)")
    k = int(k)
    queries = np.ascontiguousarray(np.asarray(queries.numpy() if hasattr(queries, "numpy") else queries))
    if len(database.chunks[1]) > 1:
        database = database.rechunk({1: -1})
    starts = np.cumsum((0,) + database.chunks[0][:-1])
    level = [dask.delayed(_search_block, pure=True)(block, queries, k, int(first))
             for block, first in zip(database.to_delayed().ravel(), starts)]
    while len(level) > 1:
        level = [dask.delayed(_merge, pure=True)(k, *level[i:i + MERGE_FANIN])
                 for i in range(0, len(level), MERGE_FANIN)]
    result = level[0]
    shape = (queries.shape[0], k)
    distances = da.from_delayed(result[0], shape, np.uint32)
    indices = da.from_delayed(result[1], shape, np.int64)
    return distances, indices
