"""HammingIndex as a product: ids, add and remove_ids, reconstruct, Tanimoto (exact fractions,
0/0 = 0 as RDKit), range search for both metrics, save/load and pickling, sharding over two
devices (a private second device on one driver), and ValidationError labelled with the index."""
import pickle
from fractions import Fraction

import numpy as np
import pytest

import dmlgpu
from dmlgpu import ValidationError


def as_bytes(codes):
    return np.ascontiguousarray(codes).view(np.uint8).reshape(len(codes), -1)


def hamming_ref(database, ids, queries, k):
    d = np.bitwise_count(as_bytes(queries)[:, None, :] ^ as_bytes(database)[None]).sum(2)
    order = np.lexsort((np.broadcast_to(ids, d.shape), d), axis=1)[:, :k]
    return np.take_along_axis(d, order, 1).astype(np.uint32), ids[order]


def tanimoto_ref(database, ids, queries, k):
    """Sorted by the exact fraction (largest first), then id; 0/0 = 0 (RDKit's rule since 2025.09.5)."""
    qa, da = as_bytes(queries), as_bytes(database)
    common = np.bitwise_count(qa[:, None, :] & da[None]).sum(2)
    union = np.bitwise_count(qa[:, None, :] | da[None]).sum(2)
    sims, found = [], []
    for c, u in zip(common, union):
        fractions = [Fraction(int(a), int(b)) if b else Fraction(0) for a, b in zip(c, u)]
        order = sorted(range(len(fractions)), key=lambda r: (-fractions[r], ids[r]))[:k]
        found.append(ids[order])
        sims.append([np.float32(float(fractions[r])) for r in order])
    return np.array(sims, np.float32), np.array(found, np.int64)


def fingerprints(rng, rows, bits=128, density=0.08):
    return np.packbits(rng.random((rows, bits)) < density, axis=1)


def test_ids_add_remove_reconstruct(rng):
    database = rng.integers(0, 4, size=(600, 4), dtype=np.uint8)  # ties everywhere
    index = dmlgpu.HammingIndex(database[:400], ids=np.arange(1000, 1400))
    index.add(database[400:])  # default ids continue after the largest
    assert index.ntotal == len(index) == 600 and index.d == 32
    assert np.array_equal(index.ids, np.r_[np.arange(1000, 1400), np.arange(1400, 1600)])
    queries = database[:5]
    for k in (1, 40, 600):
        assert all(np.array_equal(a, b) for a, b in zip(index.search(queries, k),
                                                        hamming_ref(database, index.ids, queries, k)))
    assert index.remove_ids(np.array([1000, 1001, 1450, 99])) == 3
    keep = ~np.isin(np.arange(1000, 1600), [1000, 1001, 1450])
    live, live_ids = database[keep], np.arange(1000, 1600)[keep]
    for k in (3, 33, 597):
        assert all(np.array_equal(a, b) for a, b in zip(index.search(queries, k), hamming_ref(live, live_ids, queries, k)))
    index.add(database[:3], ids=[5, 7, 6])  # below the largest: laid out again in id order
    live, live_ids = np.concatenate([database[[0, 2, 1]], live]), np.r_[5, 6, 7, live_ids]
    assert np.array_equal(index.ids, live_ids)
    assert np.array_equal(index.reconstruct(6), database[2])
    assert np.array_equal(index.reconstruct_batch([1599, 5]), database[[599, 0]])
    assert all(np.array_equal(a, b) for a, b in zip(index.search(queries, 50), hamming_ref(live, live_ids, queries, 50)))
    assert "hamming, 32 bits, 600 codes" in repr(index)


def test_empty_index_then_adds(rng):
    index = dmlgpu.HammingIndex()
    assert index.ntotal == 0 and "empty" in repr(index)
    database = rng.integers(-128, 128, size=(3000, 16), dtype=np.int8)  # int8 binary embeddings
    for start in range(0, 3000, 700):
        index.add(database[start:start + 700])
    assert index.reconstruct(2999).dtype == np.int8
    queries = rng.integers(-128, 128, size=(3, 16), dtype=np.int8)
    assert all(np.array_equal(a, b) for a, b in zip(index.search(queries, 70), hamming_ref(database, np.arange(3000), queries, 70)))


@pytest.mark.parametrize("k", [1, 10, 33, 300])
def test_tanimoto_exact_with_empty_codes(k, rng):
    database = fingerprints(rng, 300, density=0.05)
    database[[3, 40]] = 0  # 0/0 against an empty query: similarity 0 (RDKit's rule)
    database[50:60] = database[60:70]  # equal fractions: ties by lower id
    queries = np.concatenate([np.zeros((1, 16), np.uint8), fingerprints(rng, 3, density=0.05), database[[60]]])
    index = dmlgpu.HammingIndex(database, metric="jaccard")
    similarities, ids = index.search(queries, k)
    want_s, want_i = tanimoto_ref(database, np.arange(300), queries, k)
    assert similarities.dtype == np.float32 and np.array_equal(ids, want_i) and np.array_equal(similarities, want_s)
    if k == 300:  # on the device too (float32 rounded from the integers there)
        t_s, t_i = index.search(dmlgpu.Tensor.from_numpy(queries), k)
        assert np.array_equal(t_s.numpy(), want_s) and np.array_equal(t_i.numpy(), want_i)


@pytest.mark.parametrize("bits", [256, 2048])
@pytest.mark.parametrize("k", [40, 400])  # sampled bounds; every row a candidate
def test_tanimoto_dense_codes(monkeypatch, bits, k, rng):
    """Random half-set fingerprints: similarities spread over the keys' 28 bits (three radix
    digits, six sort passes), in both selection modes."""
    from dmlgpu.kernels import search_programs
    monkeypatch.setattr(search_programs, "ROWS_PER_SLICE", 16)
    monkeypatch.setattr(search_programs, "TARGET_LANES", 1 << 30)
    monkeypatch.setattr(search_programs, "TARGET_LANES_CPU", 1 << 30)
    database = fingerprints(rng, 400, bits, density=0.5)
    database[7] = database[300]  # equal fractions: ties by lower id
    queries = np.concatenate([fingerprints(rng, 2, bits, density=0.5), database[[300]]])
    similarities, ids = dmlgpu.HammingIndex(database, metric="tanimoto").search(queries, k)
    want_s, want_i = tanimoto_ref(database, np.arange(400), queries, k)
    assert np.array_equal(ids, want_i) and np.array_equal(similarities, want_s)


def test_tanimoto_against_rdkit(rng):
    DataStructs = pytest.importorskip("rdkit.DataStructs")
    bits = rng.random((60, 256)) < 0.1
    bits[0] = bits[1] = False
    vectors = []
    for row in bits:
        v = DataStructs.ExplicitBitVect(256)
        v.SetBitsFromList([int(i) for i in np.flatnonzero(row)])
        vectors.append(v)
    index = dmlgpu.HammingIndex(np.packbits(bits, axis=1), metric="tanimoto")
    similarities, ids = index.search(np.packbits(bits[:3], axis=1), 60)
    for q in range(3):
        want = np.array(DataStructs.BulkTanimotoSimilarity(vectors[q], vectors), np.float32)
        assert np.array_equal(similarities[q], want[ids[q]])
        assert np.array_equal(ids[q], np.lexsort((np.arange(60), -want.astype(np.float64))))


def test_range_search_both_metrics(rng):
    database = rng.integers(0, 16, size=(500, 2), dtype=np.uint8)
    index = dmlgpu.HammingIndex(database)
    queries = database[:4]
    d = np.bitwise_count(queries[:, None, :] ^ database[None]).sum(2)
    for radius in (0, 1, 3, 17):
        lims, distances, ids = index.range_search(queries, radius)
        for q in range(4):
            want = np.lexsort((np.arange(500), d[q]))[:int((d[q] < radius).sum())]
            assert np.array_equal(ids[lims[q]:lims[q + 1]], want)
            assert np.array_equal(distances[lims[q]:lims[q + 1]], d[q][want])
    prints = fingerprints(rng, 400, bits=24, density=0.3)  # few bits: many fractions equal to 1/3, 1/4
    prints[5] = 0  # 0/0 against an empty query: 0
    queries = np.concatenate([prints[:3], np.zeros((1, 3), np.uint8)])
    tanimoto = dmlgpu.HammingIndex(prints, metric="tanimoto")
    common = np.bitwise_count(queries[:, None, :] & prints[None]).sum(2)
    union = np.bitwise_count(queries[:, None, :] | prints[None]).sum(2)
    for threshold in (0.0, 0.25, 1 / 3, 0.5, 1.0):  # (similarity >= the threshold's exact double value)
        lims, sims, ids = tanimoto.range_search(queries, threshold)
        for q in range(len(queries)):
            exact = [Fraction(int(c), int(u)) if u else Fraction(0) for c, u in zip(common[q], union[q])]
            want = sorted((r for r in range(400) if exact[r] >= Fraction(threshold)), key=lambda r: (-exact[r], r))
            assert np.array_equal(ids[lims[q]:lims[q + 1]], want), (threshold, q)
            assert np.array_equal(sims[lims[q]:lims[q + 1]], np.array([float(exact[r]) for r in want], np.float32))


def test_save_load_pickle_and_bad_files(tmp_path, rng):
    database = rng.integers(0, 2**16, size=(700, 3), dtype=np.uint16)
    index = dmlgpu.HammingIndex(database, ids=np.arange(700) * 3)
    index.remove_ids([0, 3])
    path = tmp_path / "codes.index"
    index.save(path)
    for again in (dmlgpu.HammingIndex.load(path), pickle.loads(pickle.dumps(index))):
        assert again.ntotal == 698 and again.d == 48 and again.dtype == np.uint16
        assert np.array_equal(again.ids, index.ids)
        assert all(np.array_equal(a, b) for a, b in zip(again.search(database[:5], 60), index.search(database[:5], 60)))
    data = path.read_bytes()
    for name, content in [("truncated", data[:-5]), ("foreign", b"PK\x03\x04" + data[4:]), ("empty", b""),
                          ("corrupt", data[:-1] + bytes([data[-1] ^ 1])),
                          ("newer", data[:8] + (99).to_bytes(4, "little") + data[12:])]:
        bad = tmp_path / name
        bad.write_bytes(content)
        with pytest.raises(ValidationError) as info:
            dmlgpu.HammingIndex.load(bad)
        assert info.value.operator == "dmlgpu.HammingIndex", name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["codes.index", "corrupt", "empty", "foreign", "newer",
                                                         "truncated"]  # (no temporary left behind)


def test_sharded_over_two_devices(device, rng):
    other = dmlgpu.Device(device.index, private=True)
    database = rng.integers(0, 8, size=(900, 8), dtype=np.uint8)  # ties across the shards
    index = dmlgpu.HammingIndex(database, devices=[device, other])
    assert len(index.devices) == 2 and index.ntotal == 900 and "2 codes" not in repr(index)
    queries = database[:6]
    for k in (1, 32, 100, 900):
        assert all(np.array_equal(a, b) for a, b in zip(index.search(queries, k), hamming_ref(database, np.arange(900), queries, k)))
    index.add(database[:50])
    index.remove_ids(np.arange(0, 950, 9))
    live_ids = np.setdiff1d(np.arange(950), np.arange(0, 950, 9))
    live = np.concatenate([database, database[:50]])[live_ids]
    assert all(np.array_equal(a, b) for a, b in zip(index.search(queries, 77), hamming_ref(live, live_ids, queries, 77)))
    lims, distances, ids = index.range_search(queries, 5)
    want_d, want_i = hamming_ref(live, live_ids, queries, len(live))
    for q in range(6):
        n = int((want_d[q] < 5).sum())
        assert np.array_equal(ids[lims[q]:lims[q + 1]], want_i[q][:n])


@pytest.mark.parametrize("metric", ["hamming", "tanimoto"])
def test_an_answer_larger_than_one_buffer_together(device, rng, monkeypatch, metric):
    """A host answer is finished into one buffer (values, then ids) and read back once; where
    the two together exceed the device's buffer (each alone fits) they come back one by one:
    the same answer either way."""
    database = rng.integers(0, 4, size=(2000, 32), dtype=np.uint8)
    queries = database[:64]
    index = dmlgpu.HammingIndex(database, metric=metric)
    want = index.search(queries, 100)
    reads = []
    monkeypatch.setattr(dmlgpu.runtime.buffers.Buffer, "read", lambda self, *a, read=dmlgpu.runtime.buffers.Buffer.read,
                        **k: reads.append(self.size_in_bytes) or read(self, *a, **k))
    answers = {64 * 100 * 4, 64 * 100 * 8, 64 * 100 * 12}  # (values, ids, both: other reads are the plan's)
    index.search(queries, 100)
    assert [r for r in reads if r in answers] == [64 * 100 * 12]  # (one read: values then ids)
    monkeypatch.setattr(index.device, "max_buffer_size", 64 * 100 * 10)  # ids alone fit; both do not
    reads.clear()
    got = index.search(queries, 100)
    assert [r for r in reads if r in answers] == [64 * 100 * 4, 64 * 100 * 8]
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


def test_sharded_tanimoto_as_on_one_device(device, rng):
    """Tanimoto keys (up to 2^27) through the shards' merge: the answer of one device's index,
    ties by lower id across the shards, ids given in no order."""
    other = dmlgpu.Device(device.index, private=True)
    database = rng.integers(0, 4, size=(600, 8), dtype=np.uint8)  # ties everywhere
    ids = rng.permutation(np.arange(10**9, 10**9 + 600))
    sharded = dmlgpu.HammingIndex(database, ids=ids, metric="tanimoto", devices=[device, other])
    single = dmlgpu.HammingIndex(database, ids=ids, metric="tanimoto", device=device)
    for k in (1, 33, 600):
        assert all(np.array_equal(a, b) for a, b in zip(sharded.search(database[:5], k), single.search(database[:5], k)))


def test_sharded_with_an_emptied_shard(device, rng):
    """Every code of one shard removed: searches and range searches take the other's."""
    other = dmlgpu.Device(device.index, private=True)
    database = rng.integers(0, 16, size=(100, 4), dtype=np.uint8)
    index = dmlgpu.HammingIndex(database, devices=[device, other])
    assert index.remove_ids(np.arange(50)) == 50  # (the first shard's rows)
    live_ids = np.arange(50, 100)
    for k in (1, 40, 50):
        assert all(np.array_equal(a, b) for a, b in zip(index.search(database[:3], k),
                                                        hamming_ref(database[50:], live_ids, database[:3], k)))
    lims, _, ids = index.range_search(database[:3], 33)
    assert np.array_equal(lims, [0, 50, 100, 150]) and np.array_equal(ids[:50], hamming_ref(database[50:], live_ids,
                                                                                            database[:1], 50)[1][0])


@pytest.mark.parametrize("metric", ["hamming", "tanimoto"])
def test_joined_parts_are_searched_where_they_lie(device, metric, rng):
    """`HammingIndex.joined`: one index over several parts' codes (a caller's Tensor, uploaded
    codes, a part with removals), no copy made; numpy's answer, ties across the parts by lower
    id; a snapshot: later changes on either side are not seen by the other."""
    database = rng.integers(0, 4, size=(700, 8), dtype=np.uint8)  # ties everywhere
    cuts = [0, 250, 251, 520, 700]
    tensor = dmlgpu.Tensor.from_numpy(database[:250], device)
    parts = [dmlgpu.HammingIndex(tensor, ids=np.arange(250), metric=metric)]
    parts += [dmlgpu.HammingIndex(database[a:b], ids=np.arange(a, b), metric=metric, device=device)
              for a, b in zip(cuts[1:], cuts[2:])]
    parts.append(dmlgpu.HammingIndex(metric=metric, device=device))  # an empty part is left out
    parts[2].remove_ids(np.arange(300, 400, 3))
    live_ids = np.setdiff1d(np.arange(700), np.arange(300, 400, 3))
    before = device.memory_stats()
    joined = dmlgpu.HammingIndex.joined(parts)
    after = device.memory_stats()
    assert (after["in_use_bytes"], after["uploads"]) == (before["in_use_bytes"], before["uploads"])  # no copy
    assert joined.ntotal == live_ids.size and joined.pieces == 4 and joined.in_place and joined.metric == metric
    reference = hamming_ref if metric == "hamming" else tanimoto_ref
    queries = database[:5]
    for k in (1, 32, 33, live_ids.size):
        got = joined.search(queries, k)
        want = reference(database[live_ids], live_ids, queries, k)
        assert np.array_equal(got[1], want[1]) and np.array_equal(got[0], want[0]), k
    if metric == "hamming":
        lims, distances, ids = joined.range_search(queries, 9)
        want_d, want_i = hamming_ref(database[live_ids], live_ids, queries, live_ids.size)
        for q in range(5):
            n = int((want_d[q] < 9).sum())
            assert np.array_equal(ids[lims[q]:lims[q + 1]], want_i[q][:n])
            assert np.array_equal(distances[lims[q]:lims[q + 1]], want_d[q][:n])
    parts[0].remove_ids([0, 1])
    assert joined.ntotal == live_ids.size  # a snapshot
    assert joined.remove_ids(np.arange(250, 700)) == np.setdiff1d(np.arange(250, 700), np.arange(300, 400, 3)).size
    assert parts[3].ntotal == 180 and np.array_equal(joined.ids, np.arange(250))
    assert np.array_equal(tensor.numpy(), database[:250])  # the caller's Tensor never written


def test_joined_parts_must_fit_together(device, rng):
    codes = rng.integers(0, 256, size=(20, 4), dtype=np.uint8)
    low, high = (dmlgpu.HammingIndex(codes[:10], device=device),
                 dmlgpu.HammingIndex(codes[10:], ids=np.arange(10, 20), device=device))
    for parts in ([], [dmlgpu.HammingIndex(device=device)], [high, low], [low, low],
                  [low, dmlgpu.HammingIndex(codes[10:, :2], ids=np.arange(10, 20), device=device)],
                  [low, dmlgpu.HammingIndex(codes, ids=np.arange(10, 30), metric="tanimoto", device=device)],
                  [low, dmlgpu.HammingIndex(codes, ids=np.arange(10, 30), stream=True, device=device)]):
        with pytest.raises(ValidationError) as info:
            dmlgpu.HammingIndex.joined(parts)
        assert info.value.operator == "dmlgpu.HammingIndex" and info.value.field == "parts"
    assert dmlgpu.HammingIndex.joined([low, high]).ntotal == 20


@pytest.mark.parametrize("call, field", [
    (lambda i: i.search(np.zeros((2, 5), np.uint8), 1), "bits"),
    (lambda i: i.search(np.zeros((2, 4), np.uint8), 0), "k"),
    (lambda i: i.search(np.zeros((2, 4), np.uint8), 11), "k"),
    (lambda i: i.search(np.zeros((2, 4), np.float64), 1), "dtype"),
    (lambda i: i.add(np.zeros((2, 4), np.uint8), ids=[1, 1]), "value"),
    (lambda i: i.add(np.zeros((2, 4), np.uint8), ids=[3, 20]), "value"),  # 3 is present
    (lambda i: i.add(np.zeros((2, 4), np.uint8), ids=["a", "b"]), "dtype"),
    (lambda i: i.add(np.zeros((2, 4), np.uint8), ids=[1]), "shape"),
    (lambda i: i.range_search(np.zeros((2, 4), np.uint8), -1), "radius"),
    (lambda i: i.range_search(np.zeros((2, 4), np.uint8), 1.5), "radius"),
    (lambda i: i.reconstruct(10), "value"),
    (lambda i: i.reconstruct_batch([3, 10]), "value"),
    (lambda i: i.range_search(dmlgpu.Tensor.from_numpy(np.zeros((2, 4), np.uint8)), 40), "radius"),
    (lambda i: i.search(dmlgpu.Tensor.from_numpy(np.zeros((2, 4), np.uint8)), 0), "k"),
    (lambda i: i.search(dmlgpu.Tensor.from_numpy(np.zeros((2, 1), np.uint16)), 1), "bits"),
    (lambda i: i.reconstruct("x"), "id"),
    (lambda i: dmlgpu.HammingIndex(np.zeros((2, 4), np.uint8), metric="cosine"), "metric"),
    (lambda i: dmlgpu.HammingIndex(np.zeros((2, 4), np.uint8), devices=[7]), "devices"),
])
def test_bad_input_is_labelled_with_the_index(call, field):
    index = dmlgpu.HammingIndex(np.zeros((10, 4), np.uint8))
    with pytest.raises(ValidationError) as info:
        call(index)
    assert info.value.operator == "dmlgpu.HammingIndex" and info.value.field == field
    assert index.ntotal == 10  # nothing was done
