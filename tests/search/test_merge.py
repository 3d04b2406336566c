"""The shards' merge (dmlgpu/search/merge.py): the k least (key, id) pairs per row, ties by lower
id, as numpy's lexsort gives them, whichever route it takes."""
import numpy as np
import pytest

from dmlgpu.search.merge import ID_BITS, KEY_BITS, nearest


@pytest.mark.parametrize("k", [1, 7, 40])
@pytest.mark.parametrize("ids_from, spread", [(0, 1 << 20), (-(1 << 40), 1 << 30), (5, (1 << ID_BITS) - 1),
                                              (-(1 << 61), 1 << 62), (0, 1 << ID_BITS)])
@pytest.mark.parametrize("key_dtype, key_top", [(np.uint32, 9), (np.uint32, (1 << KEY_BITS) - 1),
                                                (np.uint32, 1 << KEY_BITS), (np.int64, 9)])
def test_the_k_least_pairs_ties_by_lower_id(rng, k, ids_from, spread, key_dtype, key_top):
    rows, width = 6, 50
    keys = rng.integers(0, key_top, size=(rows, width), endpoint=True).astype(key_dtype)
    keys[:, ::3] = keys[:, :1]  # many ties
    ids = np.stack([ids_from + rng.choice(spread, size=width, replace=False) for _ in range(rows)]).astype(np.int64)
    ids[:, 0], ids[:, -1] = ids_from, ids_from + spread - 1  # the whole spread in every row
    got = nearest(keys, ids, k)
    want = np.lexsort((ids, keys), axis=1)[:, :k]
    assert np.array_equal(np.take_along_axis(keys, got, 1), np.take_along_axis(keys, want, 1))
    assert np.array_equal(np.take_along_axis(ids, got, 1), np.take_along_axis(ids, want, 1))


def test_no_columns():
    assert nearest(np.zeros((3, 0), np.uint32), np.zeros((3, 0), np.int64), 5).shape == (3, 0)
