"""dmlgpu.hamming_knn / HammingIndex's search on one device: exactly numpy's answer (np.bitwise_count
summed over a code, stable argsort: ties by lower row) for every word type, every k from 1 to n on
both paths (the register path up to k = kernels.HAMMING_REGISTER_K, the selection path beyond), databases with many ties,
databases split in pieces and queries in batches, Tensors, and ValidationError before any work.
The index as a product (ids, add/remove, Tanimoto, range search, files, sharding) is in
tests/search/test_search_index.py."""
import gc

import numpy as np
import pytest

import dmlgpu
from conftest import POISON
from dmlgpu import ValidationError
from dmlgpu.search import shard as hamming
from dmlgpu.kernels import search_programs as hamming_plan, selection_plans, variants as kernels


def numpy_knn(database, queries, k):
    db = np.ascontiguousarray(database).view(np.uint8).reshape(database.shape[0], -1)
    q = np.ascontiguousarray(queries).view(np.uint8).reshape(queries.shape[0], -1)
    distances = np.bitwise_count(q[:, None, :] ^ db[None, :, :]).sum(axis=2)
    order = np.argsort(distances, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(distances, order, axis=1), order


def check(database, queries, k, index=None):
    got_d, got_i = (index or dmlgpu.HammingIndex(database)).search(queries, k)
    want_d, want_i = numpy_knn(database, queries, k)
    assert got_i.dtype == np.int64 and got_d.shape == got_i.shape == (queries.shape[0], k)
    assert np.array_equal(got_i, want_i)
    assert np.array_equal(got_d, want_d)


@pytest.mark.parametrize("dtype, words", [(np.uint8, 32), (np.uint8, 3), (np.uint16, 5), (np.uint32, 8),
                                          (np.uint64, 4), (np.uint64, 1)])
def test_every_word_type(dtype, words, rng):
    info = np.iinfo(dtype)
    database = rng.integers(0, info.max, size=(700, words), dtype=dtype, endpoint=True)
    queries = rng.integers(0, info.max, size=(9, words), dtype=dtype, endpoint=True)
    check(database, queries, 10)


@pytest.mark.parametrize("k", [1, 2, 299, 300])
def test_many_ties_k_edges(k, rng):
    database = rng.integers(0, 4, size=(300, 1), dtype=np.uint8)  # 2 random bits: ties everywhere
    database[::7] = 0
    queries = np.array([[0], [255], [3], [1]], np.uint8)
    check(database, queries, k)


def test_packbits_codes(rng):
    embeddings = rng.standard_normal((500, 200)).astype(np.float32)
    database = np.packbits(embeddings > 0, axis=1)  # 200 bits: 25 bytes, not whole words
    check(database, database[:6], 5)


@pytest.mark.parametrize("k", [7, kernels.HAMMING_REGISTER_K + 8, 900])  # register path, sampled, full
def test_pieces_batches_and_tiles(monkeypatch, rng, k):
    monkeypatch.setattr(hamming, "PIECE_BYTES", 64 * 32)  # 64 rows of 32 bytes per piece
    monkeypatch.setattr(hamming_plan, "ROWS_PER_SLICE", 3)  # many tiles per piece
    monkeypatch.setattr(hamming_plan, "TARGET_LANES", 1 << 30)  # (short tiles on every device)
    monkeypatch.setattr(hamming_plan, "TARGET_LANES_CPU", 1 << 30)
    monkeypatch.setattr(hamming_plan, "PARTIAL_BYTES", 1 << 16)  # queries in batches
    monkeypatch.setattr(hamming_plan, "MAX_SLICES_PER_PIECE", 16)  # the grid's limit: longer tiles
    database = rng.integers(0, 2, size=(5000, 32), dtype=np.uint8)
    index = dmlgpu.HammingIndex(database)
    assert index.pieces == 79 and not index.in_place
    check(database, rng.integers(0, 256, size=(40, 32), dtype=np.uint8), k, index)


@pytest.mark.parametrize("k", [kernels.HAMMING_REGISTER_K - 1, kernels.HAMMING_REGISTER_K,
                               kernels.HAMMING_REGISTER_K + 1])
def test_register_path_boundary_with_ties(k, rng):
    """k on both sides of the register path's limit, on a database of ties (3 random bits)."""
    database = rng.integers(0, 8, size=(3000, 8), dtype=np.uint8)
    check(database, rng.integers(0, 256, size=(70, 8), dtype=np.uint8), k)  # 70: two workgroups of lanes


def test_wide_codes_pack_keys_within_32_bits(monkeypatch, rng):
    """Codes of 2^19 bits: a packed key keeps 12 bits for the row in its tile, so tiles stop at
    4,096 rows whatever else asks; distances up to the code's full width (all bits differ)."""
    monkeypatch.setattr(hamming_plan, "ROWS_PER_SLICE", 1 << 20)
    words = 1 << 14
    database = rng.integers(0, 2**32, size=(300, words), dtype=np.uint32)
    database[5] = database[77] = 0xFFFFFFFF  # the farthest code from a zero query: distance 2^19
    database[9] = 0
    queries = np.stack([np.zeros(words, np.uint32), database[40], ~database[40]])
    index = dmlgpu.HammingIndex(database)
    # The key's row bits cap the tile; a CPU driver asks for the longest tiles, so it hits the cap
    # (a GPU's tiles are shorter, to fill its lanes).
    assert index.tile_rows(5, 3) == 4096 if index.device.is_cpu else index.tile_rows(5, 3) <= 4096
    check(database, queries, 5, index)
    check(database, queries, 300, index)  # the selection path (keys of 20 bits: two radix digits)
    distances, indices = index.search(queries[:1], 300)
    assert distances[0, -1] == 1 << 19 and list(indices[0, -2:]) == [5, 77]


def test_resident_index_reused_and_poisoned_memory(device, rng):
    database = rng.integers(0, 256, size=(2000, 16), dtype=np.uint8)
    index = dmlgpu.HammingIndex(database)
    for size in (1 << 12, 1 << 16, 1 << 20):
        # The pool hands freed blocks to the next allocations: the search's lists and results
        # start as poison (or as the previous search's lists), and an unwritten entry shows.
        for _ in range(4):
            device.upload(np.full(size, POISON, np.uint8)).release()
        check(database, rng.integers(0, 256, size=(5, 16), dtype=np.uint8), 12, index)


def test_tensors(rng):
    database = rng.integers(0, 2**32, size=(400, 2), dtype=np.uint32)
    queries = rng.integers(0, 2**32, size=(3, 2), dtype=np.uint32)
    for k in (4, 60):  # (both paths; the answer stays on the device: values and int64 ids)
        distances, indices = dmlgpu.hamming_knn(dmlgpu.Tensor.from_numpy(database), dmlgpu.Tensor.from_numpy(queries), k)
        want_d, want_i = numpy_knn(database, queries, k)
        assert isinstance(indices, dmlgpu.Tensor) and indices.dtype == np.int64 and distances.dtype == np.uint32
        assert np.array_equal(indices.numpy(), want_i) and np.array_equal(distances.numpy(), want_d)


@pytest.mark.parametrize("database, queries, k, field", [
    (np.zeros((4, 4), np.uint8), np.zeros((2, 5), np.uint8), 1, "bits"),  # widths differ
    (np.zeros((4, 4), np.uint8), np.zeros((2, 1), np.uint64), 1, "bits"),  # 32 vs 64 bits
    (np.zeros((4, 4), np.uint8), np.zeros((2, 4), np.uint8), 0, "k"),
    (np.zeros((4, 4), np.uint8), np.zeros((2, 4), np.uint8), 5, "k"),
    (np.zeros((4, 4), np.uint8), np.zeros((2, 4), np.uint8), True, "k"),
    (np.zeros((4, 4), np.float32), np.zeros((2, 4), np.float32), 1, "dtype"),
    (np.zeros(4, np.uint8), np.zeros((2, 4), np.uint8), 1, "shape"),
    ([[1, 2]], np.zeros((2, 4), np.uint8), 1, "type"),
    (np.zeros((0, 4), np.uint8), np.zeros((2, 4), np.uint8), 1, "shape"),
])
def test_validation(database, queries, k, field):
    with pytest.raises(ValidationError) as info:
        dmlgpu.hamming_knn(database, queries, k)
    assert info.value.field == field and info.value.operator == "dmlgpu.hamming_knn"
    assert "256-bit codes" not in str(info.value)


def test_signed_codes_are_raw_bits(rng):
    """int8 codes (sentence-transformers' binary embeddings) are their bits, as uint8 would be."""
    database = rng.integers(-128, 128, size=(300, 8), dtype=np.int8)
    queries = rng.integers(-128, 128, size=(4, 8), dtype=np.int8)
    check(database.view(np.uint8), queries.view(np.uint8), 9, dmlgpu.HammingIndex(database))


DASK_SCRIPT = r"""
import logging
import numpy as np
import dask.array as da
import distributed
import dmlgpu.dask as dd

rng = np.random.default_rng(7)
database = rng.integers(0, 8, size=(3000, 4), dtype=np.uint8)  # 3 random bits of 32: many ties
queries = rng.integers(0, 256, size=(6, 4), dtype=np.uint8)
with dd.LocalVulkanCluster(n_workers=2, dashboard_address=None, silence_logs=logging.CRITICAL) as cluster, \
        distributed.Client(cluster) as client:
    client.wait_for_workers(2, timeout=120)
    sharded = client.persist(da.from_array(database, chunks=(260, 4)))  # 12 blocks: a two-level tree
    for k in (1, 10, 2999):
        distances, indices = dd.hamming_knn(sharded, queries, k)
        distances, indices = client.compute([distances, indices], sync=True)
        bits = np.bitwise_count(queries[:, None, :] ^ database[None]).sum(axis=2)
        order = np.argsort(bits, axis=1, kind="stable")[:, :k]
        assert np.array_equal(indices, order), k
        assert np.array_equal(distances, np.take_along_axis(bits, order, 1)), k
    workers = {w for w, tasks in client.has_what().items() if tasks}
    assert len(workers) == 2, workers  # both workers hold (and searched) blocks
print("done")
"""


def test_dask_two_workers_match_numpy():
    """Two worker processes, each searching its blocks on its device, the tree merge: numpy's
    answer. In a subprocess with a timeout, so that a hang fails instead of stalling CI."""
    pytest.importorskip("distributed", reason="distributed is not installed (pip install .[dask])")
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-c", DASK_SCRIPT], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().endswith("done")


def test_dask_validation():
    da = pytest.importorskip("dask.array")
    import dmlgpu.dask as dd
    database = da.zeros((10, 4), dtype=np.uint8, chunks=(5, 4))
    with pytest.raises(ValidationError):
        dd.hamming_knn(database, np.zeros((2, 5), np.uint8), 1)
    with pytest.raises(ValidationError):
        dd.hamming_knn(database, np.zeros((2, 4), np.uint8), 11)
    with pytest.raises(ValidationError):
        dd.hamming_knn(database.astype(np.float32), np.zeros((2, 4), np.uint8), 1)


def test_tensor_database_searched_in_place(rng):
    database = rng.integers(0, 2**64, size=(600, 4), dtype=np.uint64)
    tensor = dmlgpu.Tensor.from_numpy(np.concatenate([database[:1], database]))[1:]  # offset 32 bytes
    index = dmlgpu.HammingIndex(tensor)
    assert index.pieces == 1 and index.in_place
    check(database, rng.integers(0, 2**64, size=(5, 4), dtype=np.uint64), 6, index)


def test_streamed_database(monkeypatch, device, rng):
    """stream=True: the database stays on the host, each search uploads it piece by piece."""
    monkeypatch.setattr(hamming, "PIECE_BYTES", 100 * 8)  # 100 rows of 8 bytes per piece
    database = rng.integers(0, 2**16, size=(1000, 4), dtype=np.uint16)
    index = dmlgpu.HammingIndex(database, stream=True)
    assert index.streamed and index.pieces == 10
    gc.collect()  # (Buffers of an earlier test's reference cycles go now, not in the middle)
    live = device.live_buffers
    for _ in range(2):
        check(database, rng.integers(0, 2**16, size=(6, 4), dtype=np.uint16), 9, index)
    assert device.live_buffers == live  # the pieces were freed


@pytest.mark.parametrize("words_at_once", [1, 3])
def test_register_scan_rows_at_once(monkeypatch, words_at_once, rng):
    """The register scan's group of rows (a specialization constant: 1 and 3 rows of one word)
    with a tail in every tile."""
    monkeypatch.setattr(kernels, "HAMMING_WORDS_AT_ONCE", words_at_once)
    monkeypatch.setattr(hamming_plan, "ROWS_PER_SLICE", 101)
    monkeypatch.setattr(hamming_plan, "TARGET_LANES", 1 << 30)
    monkeypatch.setattr(hamming_plan, "TARGET_LANES_CPU", 1 << 30)
    database = rng.integers(0, 16, size=(1001, 4), dtype=np.uint8)
    index = dmlgpu.HammingIndex(database)
    assert index.tile_rows(6, 5) == 101
    check(database, rng.integers(0, 256, size=(5, 4), dtype=np.uint8), 6, index)


@pytest.mark.parametrize("carry_save", [True, False])
@pytest.mark.parametrize("words", [8, 16, 32])
def test_register_scan_bit_counts(monkeypatch, carry_save, words, rng):
    """Codes of whole eights of words, with and without the carry-save bit count; codes that
    differ in every bit, in one bit of each word, in none."""
    monkeypatch.setattr(kernels, "HAMMING_CARRY_SAVE", carry_save)
    database = rng.integers(0, 2**32, size=(500, words), dtype=np.uint32)
    queries = rng.integers(0, 2**32, size=(4, words), dtype=np.uint32)
    database[10], database[20], database[30] = ~queries[0], queries[0] ^ 1, queries[0]
    database[40:48] = database[50:58] = rng.integers(0, 2**32, size=(8, words), dtype=np.uint32)  # ties
    check(database, queries, 16)
    check(database, queries[:1], 500)  # (the global-memory path: the last is distance words * 32)


@pytest.mark.parametrize("k", [33, 100, 640, 1999, 2000])
def test_every_k_beyond_the_register_path(k, rng):
    """The selection path: sampled bounds (k up to n / 8), every row a candidate beyond, and
    queries whose sampled regions overflow (a database of few distinct codes) searched again
    (tests/search/test_selection_k.py: the bound, its failures and the exact search again)."""
    database = rng.integers(0, 2**32, size=(2000, 8), dtype=np.uint32)
    database[1000:] = database[:8][rng.integers(0, 8, 1000)]  # ties: 8 codes repeated 125 times
    queries = np.concatenate([rng.integers(0, 2**32, size=(5, 8), dtype=np.uint32), database[1000:1003]])
    check(database, queries, k)


@pytest.mark.parametrize("width", [64, 128, 256])  # keys of 10, 11 and 12 bits: one and two radix digits
@pytest.mark.parametrize("k", [40, 299, 600])  # sampled bounds, every row a candidate, k = n
def test_wide_codes_beyond_the_register_path(monkeypatch, width, k, rng):
    """Codes of 512 to 2,048 random bits (keys past one radix digit), in both selection modes: the
    selection hands runs of entries between the lanes of a workgroup (the k least in row order,
    then every pass of the sort)."""
    monkeypatch.setattr(hamming_plan, "ROWS_PER_SLICE", 16)  # 38 tiles: a sample exists for k = 40
    monkeypatch.setattr(hamming_plan, "TARGET_LANES", 1 << 30)
    monkeypatch.setattr(hamming_plan, "TARGET_LANES_CPU", 1 << 30)
    database = rng.integers(0, 256, size=(600, width), dtype=np.uint8)
    database[100:110] = database[200:210]  # ties
    check(database, np.concatenate([rng.integers(0, 256, size=(2, width), dtype=np.uint8), database[[200]]]), k)


@pytest.mark.parametrize("mode", [None, "sampled"])
def test_selection_batches_fit_the_largest_buffer(monkeypatch, device, mode):
    """Every buffer of a batch (aux, counts or candidates, answer, scratch) fits the largest
    buffer; where one query's alone cannot (a large k, or "full" mode's every row a candidate),
    ValidationError names k before any work."""
    monkeypatch.setattr(hamming_plan, "PARTIAL_BYTES", 1 << 14)
    plan = selection_plans.plan_selection(device, [(0, 3000), (3000, 3000)], 2, 64, 100, 500, hamming_plan.HAMMING, mode)
    at = plan.layout(plan.batch)
    entry = hamming_plan.ENTRY_WORDS[hamming_plan.HAMMING]
    assert 1 <= plan.batch < 500
    for words in (at["words"], plan.candidate_words(plan.batch), 2 * plan.batch * plan.k * entry):
        assert words * 4 <= 1 << 14
    with pytest.raises(ValidationError, match="fit the device's largest buffer") as caught:
        selection_plans.plan_selection(device, [(0, 10 ** 5)], 2, 64, 5000, 10, hamming_plan.HAMMING, mode)
    assert caught.value.field == "k" and caught.value.value == 5000
    with pytest.raises(ValidationError, match=r"one query \(48000 bytes\)"):
        selection_plans.plan_selection(device, [(0, 3000), (3000, 3000)], 2, 64, 100, 500, hamming_plan.HAMMING, "full")


@pytest.mark.parametrize("k", [1, 10, kernels.HAMMING_REGISTER_K])
def test_register_scan_bounded_by_a_sample(monkeypatch, rng, k):
    """The register path's bound: the scan and merge over the first k tiles' rows first, each
    query's k-th distance there caps what its lanes consider; ties at the bound across tiles."""
    monkeypatch.setattr(hamming_plan, "ROWS_PER_SLICE", 64)
    monkeypatch.setattr(hamming_plan, "TARGET_LANES", 1 << 30)
    monkeypatch.setattr(hamming_plan, "TARGET_LANES_CPU", 1 << 30)
    monkeypatch.setattr(hamming_plan, "BOUND_SAMPLE_SHARE", 2)
    monkeypatch.setattr(hamming_plan, "BOUND_MIN_K_GPU", 0)  # (every k, on a GPU too)
    database = rng.integers(0, 256, size=(6000, 8), dtype=np.uint8) & 0x41  # 2 random bits a byte: ties
    queries = rng.integers(0, 256, size=(70, 8), dtype=np.uint8) & 0x41
    index = dmlgpu.HammingIndex(database)
    plan = hamming_plan.plan_search(index.device, [(0, 6000)], 2, k, 70)
    assert plan.sample_rows == k * 64
    check(database, queries, k, index)


class _Gpu:
    """What a register-path plan reads of a device: a GPU with 4 GiB storage buffers."""
    is_cpu = False
    max_buffer_size = 4 << 30


M = 1 << 20


@pytest.mark.parametrize("pieces, count", [([16 * M], 256), ([16 * M], 1024), ([8 * M], 1024), ([M], 1024),
                                           ([4 * M] * 4, 256), ([2 * M] * 2, 256), ([M] * 16, 256),
                                           ([M] * 16, 1024), ([M] * 8, 256), ([16 * M], 4096)])
def test_a_gpu_scan_fills_the_grid_in_every_dispatch(pieces, count):
    """On a GPU each main-scan dispatch (a piece's, or a part where the scan is cut) holds a
    full grid's items where the piece has them (a third of a grid ran at 0.73x: NOTES session
    27), unless one batch's lists would not fit (then tiles lengthen: never a batch more than
    without the shortening), and the dispatches cover every (query group, tile) once."""
    from dmlgpu.search.pacing import planned_budget
    gpu, starts = _Gpu(), np.cumsum([0] + pieces[:-1])
    plan = hamming_plan.plan_search(gpu, [(int(s), r) for s, r in zip(starts, pieces)], 8, 10, count,
                                    budget=planned_budget(gpu))
    unshortened = hamming_plan.tile_rows(gpu, pieces, 8, 10, count, planned_budget(gpu), fill=False)
    assert plan.per_slice <= unshortened
    lists = sum(-(-r // unshortened) for r in pieces) * 10 * 8
    assert plan.batch >= min(count, hamming_plan.partial_bytes(gpu) // lists)
    filled = plan.per_slice == hamming_plan.tile_rows(gpu, pieces, 8, 10, count, planned_budget(gpu))
    steps, _, _ = plan.steps_for(plan.batch)
    groups = -(-plan.batch // 64)
    grid = hamming_plan.GRIDGROUPS
    for piece, tiles in enumerate(plan.slices):
        # (the main scans: those the sample's answer bounds, where there is a sample)
        scans = [s for s in steps if s.kernel == "scan" and s.piece == piece
                 and (s.bound is not None or not plan.sample_rows)]
        covered = np.zeros((groups, tiles), np.int64)
        for s in scans:
            first = s.push["query_base"] // 64
            last = -(-s.push["query_end"] // 64)
            covered[first:last, s.push["tile_base"]:s.push["tile_base"] + s.push["tiles"]] += 1
            items = s.push["tiles"] * (last - first)
            if filled:
                assert items >= min(groups * tiles, grid) * 0.8, (piece, items)
        assert (covered == 1).all()


@pytest.mark.parametrize("words", [2, 8, 32])
def test_a_gpu_bounds_by_a_sample_from_a_k_in_proportion_to_the_width(monkeypatch, words):
    """A GPU's register path samples a bound only from k = BOUND_MIN_K_GPU for 256-bit codes (in
    proportion to the width: below it the sample costs more than it saves, H200, NOTES session
    27); a CPU driver wherever the sample fits."""
    from dmlgpu.search.pacing import planned_budget

    class Cpu(_Gpu):
        is_cpu = True

        def memory_stats(self):
            return {"arena_bytes": 1 << 30}

    def sampled(device, k, threshold):
        monkeypatch.setattr(hamming_plan, "BOUND_MIN_K_GPU", threshold)
        return hamming_plan.plan_search(device, [(0, M)], words, k, 1024, budget=planned_budget(device)).sample_rows > 0

    least, seen = hamming_plan.BOUND_MIN_K_GPU, set()
    for device in (_Gpu(), Cpu()):
        for k in range(1, kernels.HAMMING_REGISTER_K + 1):
            fits = sampled(device, k, 0)
            got = sampled(device, k, least)
            assert got == (fits and (device.is_cpu or k * 8 >= least * words)), (device.is_cpu, words, k)
            seen.add((device.is_cpu, fits, got))
    assert (False, True, False) in seen  # (a GPU plan the threshold took the sample from)
    assert (True, True, True) in seen  # (a CPU plan that kept it)


@pytest.mark.parametrize("groups", [1, 3, 16])
@pytest.mark.parametrize("tiles", [1, 2, 7, 260, 2048])
@pytest.mark.parametrize("per_dispatch", [1, 2, 3, 894, 5000])
def test_a_cut_covers_every_item_once_in_even_dispatches(groups, tiles, per_dispatch):
    """`cut`: every (group, tile) item in exactly one dispatch, none over the budget (one item at
    least); where whole tiles fit, as few dispatches as the budget allows, their sizes at most one
    tile apart (no short last dispatch: 2,048 tiles at 894 a dispatch are 683/683/682, not
    894/894/260); budget None: one dispatch."""
    item_cost = 5
    budget = per_dispatch * item_cost
    steps = list(hamming_plan.cut(groups, tiles, item_cost, budget))
    seen = np.zeros((groups, tiles), np.int64)
    for group, n_groups, tile, n_tiles in steps:
        assert n_groups >= 1 and n_tiles >= 1
        seen[group:group + n_groups, tile:tile + n_tiles] += 1
        assert n_groups * n_tiles * item_cost <= max(budget, item_cost)
    assert (seen == 1).all()
    if groups <= per_dispatch:
        fit = max(1, per_dispatch // groups)
        assert len(steps) == -(-tiles // min(tiles, fit))
        sizes = [n_tiles for _, _, _, n_tiles in steps]
        assert max(sizes) - min(sizes) <= 1
    assert list(hamming_plan.cut(groups, tiles, item_cost, None)) == [(0, groups, 0, tiles)]


@pytest.mark.parametrize("k", [10, 100])  # the register path; the selection path
def test_each_paced_submit_holds_one_kernels_work(rng, monkeypatch, k):
    """The pacer submits what one kernel queued before the next kernel's first dispatch is
    queued: a submit that also held that dispatch timed a small merge by the long scan queued
    after it, and every later search waited for the scan on the host (H200: 10 ms waits;
    NOTES session 27). Every submit the pacer makes holds dispatches of one kernel (the
    histogram's unpaced bound kernel rides with the histogram)."""
    database = rng.integers(0, 256, size=(60000, 32), dtype=np.uint8)
    queries = rng.integers(0, 256, size=(40, 32), dtype=np.uint8)
    index = dmlgpu.HammingIndex(database)
    device = index.device
    batch, batches = [], []
    enqueue, flush = device.enqueue, device.flush

    def recording_enqueue(launch):
        batch.append(launch.program.name)
        return enqueue(launch)

    def recording_flush():
        if batch:
            batches.append(set(batch) - {kernels.SEARCH_BOUND})
            batch.clear()
        return flush()

    monkeypatch.setattr(device, "enqueue", recording_enqueue)
    monkeypatch.setattr(device, "flush", recording_flush)
    got_d, got_i = index.search(queries, k)
    monkeypatch.undo()
    want_d, want_i = numpy_knn(database, queries, k)
    assert np.array_equal(got_i, want_i) and np.array_equal(got_d, want_d)
    assert len(batches) >= 2 and all(len(names) == 1 for names in batches), batches
