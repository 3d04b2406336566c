"""Search past the register path (k > kernels.HAMMING_REGISTER_K) by the sampled selection: a histogram of every
stride-th row bounds each query's k-th key tightly, one gather keeps the rows within, a
selection per query answers; a query whose regions overflow or hold fewer than k rows is
searched again "exact" (every row's histogram, rows counted before they are gathered). Every k
from the register path's edge to n is numpy's answer (ties by lower row) on databases with many ties; databases built
to mislead the sample (sorted, clustered, duplicated, all-equal rows, near rows only where the
sample looks) are answered exactly, and those that must are searched again; memory handed back
poisoned shows any entry left unwritten. Small sizes: a CPU driver runs these."""
import gc
import math
from fractions import Fraction

import numpy as np
import pytest

import dmlgpu
from conftest import POISON
from dmlgpu.kernels import search_programs, selection_plans, variants as kernels
from dmlgpu.search import shard as shards


def numpy_knn(database, queries, k):
    distances = np.bitwise_count(queries[:, None, :] ^ database[None, :, :]).sum(axis=2)
    order = np.argsort(distances, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(distances, order, axis=1), order


def check(index, database, queries, k):
    got_d, got_i = index.search(queries, k)
    want_d, want_i = numpy_knn(database, queries, k)
    assert got_d.shape == got_i.shape == (queries.shape[0], k)
    assert np.array_equal(got_i, want_i)
    assert np.array_equal(got_d, want_d)


@pytest.fixture
def searches(monkeypatch):
    """(mode, queries) of every selection-path search: (None, q) first, then ("exact", n) for
    the n queries it reported whose bound held fewer than k rows (every row's histogram bounds
    them again) and ("exact within", n) for those whose regions overflowed (their bounds kept)."""
    seen, search_selection = [], shards.Shard.search_selection

    def spy(self, queries, count, k, pacer, mode=None, bound=None):
        seen.append((mode if bound is None else f"{mode} within", count))
        return search_selection(self, queries, count, k, pacer, mode=mode, bound=bound)

    monkeypatch.setattr(shards.Shard, "search_selection", spy)
    return seen


def poison(device):
    """Hand the pool's next blocks back full of POISON: unwritten entries show."""
    for size in (1 << 12, 1 << 16, 1 << 20):
        device.upload(np.full(size, POISON, np.uint8)).release()


def plan_for(index, k, count):
    shard = index._shards[0]
    return selection_plans.plan_selection(index.device, shard.piece_rows(), shard.words, index.d, k, count,
                                          search_programs.HAMMING)


@pytest.mark.parametrize("k", [32, 33, 100, 374, 375, 376, 1000, 2999, 3000])
def test_every_k_with_ties(device, rng, searches, k):
    """k across the register path's edge, the sampled bound's (k <= n / 8: a sample of 4 k rows
    in every other row at least) and up to n, on 128 random bits a code (4 of 8 bits a byte: a
    few dozen distances, ties at every one); 70 queries (two groups of lanes), database rows
    among them (distance 0)."""
    database = rng.integers(0, 256, size=(3000, 32), dtype=np.uint8) & 0x93
    queries = np.concatenate([rng.integers(0, 256, size=(66, 32), dtype=np.uint8) & 0x93, database[[5, 6, 2999, 5]]])
    index = dmlgpu.HammingIndex(database)
    poison(device)
    check(index, database, queries, k)
    if k > kernels.HAMMING_REGISTER_K:
        assert searches[0] == (None, 70)
        assert plan_for(index, k, 70).mode == ("sampled" if k <= 375 else "full")


@pytest.fixture
def no_spare(monkeypatch):
    """Regions of the capacity the bound needs, none spare (which few queries would get)."""
    monkeypatch.setattr(selection_plans, "SPARE_SHARE", 1 << 40)


@pytest.mark.parametrize("k", [33, 100, 700])
def test_random_rows_are_never_searched_again(rng, searches, no_spare, k):
    """Random codes in random order: the tight bound holds k rows, and its candidates fit the
    regions sized for them (a bound as loose as the sample's own k-th key would let ~stride x k
    rows through and overflow them), so no query is searched again."""
    database = rng.integers(0, 256, size=(6000, 32), dtype=np.uint8)
    queries = rng.integers(0, 256, size=(70, 32), dtype=np.uint8)
    index = dmlgpu.HammingIndex(database)
    plan = plan_for(index, k, 70)
    assert plan.mode == "sampled" and plan.stride >= 2 and plan.reach < k
    check(index, database, queries, k)
    assert searches == [(None, 70)]


def test_the_bound_is_tight():
    """The plan's reach at 1M rows: the sample's expected count of k rows plus its margin, so
    the rows the bound lets through (before ties) stay a small multiple of k, however large k."""
    device = dmlgpu.default_device()
    for k, most in ((33, 9.0), (100, 4.5), (1024, 2.0), (4096, 1.5), (16384, 1.25)):
        plan = selection_plans.plan_selection(device, [(0, 1 << 20)], 8, 256, k, 1024, search_programs.HAMMING)
        sample = math.ceil((1 << 20) / plan.stride)
        mu = k * sample / (1 << 20)
        assert plan.mode == "sampled" and plan.reach >= mu + 5 * math.sqrt(mu)
        assert k < plan.reach * plan.stride <= most * k, (k, plan.reach, plan.stride)
    assert selection_plans.plan_selection(device, [(0, 1000)], 8, 256, 126, 4, search_programs.HAMMING).mode == "full"


def _near(rng, query, count, flips):
    """`count` codes within `flips` bits of `query` (each a different number of bits flipped)."""
    near = np.repeat(query[None], count, axis=0)
    bits = np.unpackbits(near, axis=1)
    for i in range(count):
        bits[i, rng.choice(bits.shape[1], i % (flips + 1), replace=False)] ^= 1
    return np.packbits(bits, axis=1)


@pytest.mark.parametrize("case, again", [("sorted", ()), ("clustered", ("exact within",)), ("duplicated", None),
                                         ("all equal", ("exact within",)),
                                         ("near rows only where the sample looks", ("exact",)),
                                         ("near rows only where it does not", ())])
def test_rows_that_mislead_the_sample(device, rng, searches, no_spare, case, again):
    """Databases built against the sample or the regions: rows sorted (a systematic sample still
    sees them in proportion), a query's near rows all in one tile (its region overflows),
    each row repeated 40 times in a run, every row equal (every row ties), near rows only at
    sampled rows (the sample counts each as `stride` rows: the bound keeps fewer than k) or
    only between them (the bound is the random rows', loose enough). Exactly numpy's answer;
    the queries that must be are searched again exactly (`again`: how; None: either)."""
    n, k = 4000, 100
    database = rng.integers(0, 256, size=(n, 32), dtype=np.uint8)
    queries = rng.integers(0, 256, size=(6, 32), dtype=np.uint8)
    index = dmlgpu.HammingIndex(database)
    plan = plan_for(index, k, 6)
    assert plan.mode == "sampled" and plan.stride >= 4 and plan.tiles_total >= 2
    if case == "sorted":
        database = database[np.lexsort(database.T[::-1])]
        queries[:3] = database[[10, 2000, 3990]] ^ 1
    elif case == "clustered":
        for q in range(3):
            database[1000 * q:1000 * q + 400] = _near(rng, queries[q], 400, 20)
    elif case == "duplicated":
        database = np.repeat(database[:100], 40, axis=0)
        queries[:3] = database[[0, 1000, 3999]]
    elif case == "all equal":
        database[:] = database[7]
    else:
        sampled = np.arange(0, n, plan.stride)
        rows = sampled if case == "near rows only where the sample looks" else np.setdiff1d(np.arange(n), sampled)
        for q in range(3):
            picked = rng.choice(rows, 40 if rows is sampled else 150, replace=False)
            database[picked] = _near(rng, queries[q], picked.size, 20)
    index = dmlgpu.HammingIndex(database)
    poison(device)
    check(index, database, queries, k)
    assert searches[0] == (None, 6)
    redone = sum(count for mode, count in searches[1:])
    if again is not None:
        assert {mode for mode, _ in searches[1:]} == set(again), searches
    if case == "all equal":
        assert redone == 6


def test_exact_search_in_groups_of_queries(monkeypatch, device, rng, searches, no_spare):
    """The exact search again of many queries whose candidates do not fit one buffer: queries
    in groups (one alone where its candidates alone are more), regions at offsets counted
    first, the answers of every group in one buffer."""
    monkeypatch.setattr(search_programs, "PARTIAL_BYTES", 1 << 14)  # 2,048 entries
    database = rng.integers(0, 256, size=(3000, 16), dtype=np.uint8) & 0x11  # 2 bits a byte: ties
    database[:1600] = database[1600]  # 1,600 equal rows: a query's candidates fill a group
    queries = np.concatenate([database[[0, 1600]], rng.integers(0, 256, size=(8, 16), dtype=np.uint8) & 0x11])
    index = dmlgpu.HammingIndex(database)
    selects, select = [], shards.Shard._select

    def spy(self, plan, aux, candidates, scratch, out, size, fields, total, pacer, span=None, cand_offset=None):
        selects.append((plan.mode, span))
        return select(self, plan, aux, candidates, scratch, out, size, fields, total, pacer, span, cand_offset)

    monkeypatch.setattr(shards.Shard, "_select", spy)
    poison(device)
    check(index, database, queries, 40)
    groups = [span for mode, span in selects if mode == "exact"]
    assert any(mode.startswith("exact") for mode, _ in searches[1:]) and len(groups) >= 2
    check(index, database, queries, 300)


def test_clustered_rows_fit_spare_regions(rng, searches):
    """A few queries whose near rows were added together (one run of rows each): the regions'
    spare room (the queries being few) holds them in the first pass: no query searched again."""
    database = rng.integers(0, 256, size=(4000, 32), dtype=np.uint8)
    queries = rng.integers(0, 256, size=(6, 32), dtype=np.uint8)
    for q in range(6):
        database[600 * q:600 * q + 200] = _near(rng, queries[q], 200, 20)
    index = dmlgpu.HammingIndex(database)
    check(index, database, queries, 100)
    assert searches == [(None, 6)]


def test_tanimoto_misled_sample_searched_again(rng, searches):
    """Tanimoto shares the sampled selection: near copies of a query only at sampled rows, found
    again exactly (ranked by the exact fraction, ties by lower row)."""
    n, k = 3000, 60
    database = np.packbits(rng.random((n, 128)) < 0.2, axis=1)
    queries = database[[3, 1500]].copy()
    index = dmlgpu.HammingIndex(database, metric="tanimoto")
    shard = index._shards[0]
    plan = selection_plans.plan_selection(index.device, shard.piece_rows(), shard.words, 128, k, 2,
                                          search_programs.TANIMOTO)
    assert plan.mode == "sampled"
    picked = rng.choice(np.arange(0, n, plan.stride), 25, replace=False)
    database[picked] = _near(rng, queries[0], 25, 3)
    index = dmlgpu.HammingIndex(database, metric="tanimoto")
    similarities, ids = index.search(queries, k)
    common = np.bitwise_count(queries[:, None, :] & database[None]).sum(2)
    union = np.bitwise_count(queries[:, None, :] | database[None]).sum(2)
    for q in range(2):
        exact = [Fraction(int(c), int(u)) if u else Fraction(0) for c, u in zip(common[q], union[q])]
        order = sorted(range(n), key=lambda r: (-exact[r], r))[:k]
        assert list(ids[q]) == order
        assert np.array_equal(similarities[q], np.array([float(exact[r]) for r in order], np.float32))
    assert ("exact", 1) in searches


@pytest.mark.parametrize("stream", [False, True])
def test_pieces_and_streamed_rows_searched_again(monkeypatch, device, rng, searches, no_spare, stream):
    """A database in pieces of 300 rows (uploaded for each search where streamed): a sample per
    piece, regions across pieces; queries searched again both ways (regions overflowed: the
    bound kept; the bound held too few: every row's histogram). No buffer is left behind."""
    monkeypatch.setattr(shards, "PIECE_BYTES", 300 * 32)
    database = rng.integers(0, 256, size=(4000, 32), dtype=np.uint8)
    queries = rng.integers(0, 256, size=(4, 32), dtype=np.uint8)
    database[1000:1400] = _near(rng, queries[0], 400, 20)  # one run: regions overflow
    database[3000:3400] = database[3000]  # 400 equal rows
    queries[1] = database[3000]
    index = dmlgpu.HammingIndex(database, stream=stream)
    assert index.pieces > 10 and index.streamed == stream
    plan = plan_for(index, 100, 4)
    assert plan.mode == "sampled"
    sampled = np.concatenate([np.arange(first, first + rows, plan.stride) for first, rows in plan.pieces])
    free = sampled[(sampled < 1000) | ((sampled >= 1400) & (sampled < 3000)) | (sampled >= 3400)]
    picked = rng.choice(free, 40, replace=False)
    database[picked] = _near(rng, queries[2], 40, 20)  # only where the sample looks: too few
    index = dmlgpu.HammingIndex(database, stream=stream)
    check(index, database, queries[3:], 100)  # (a resident index keeps its ids on the device after)
    searches.clear()
    gc.collect()  # (Buffers of an earlier test's reference cycles go now, not in the middle)
    live = device.live_buffers
    poison(device)
    check(index, database, queries, 100)
    assert {mode for mode, _ in searches[1:]} == {"exact", "exact within"}, searches
    assert device.live_buffers == live
