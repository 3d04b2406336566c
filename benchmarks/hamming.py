"""Exact top-k binary-code search (Hamming distance): dmlgpu.HammingIndex against CuPy, FAISS
IndexBinaryFlat and numpy in the same run, end to end (queries up and results down inside the
timing; the database resident, as each peer keeps it).

    python benchmarks/hamming.py [--quick] [--sweep] [--out FOLDER]   (writes FOLDER/hamming.json)

Cases (issue 24's targets): 1M x 256-bit codes with 1,024 queries, 1M x 1,024-bit with 1,024,
16M x 256-bit with 256; top-10. --quick: 1M x 256-bit with 32 queries and numpy/FAISS only on
a sample of the queries (a CPU driver such as lavapipe). Every peer's answer is checked once
against numpy's exact answer (distances; indices where ties allow: FAISS and argpartition pick
any of equal distances, so only distances are compared for them) before it is timed. Reports
G distances/s (database rows x queries / seconds) and each peer's time / ours. --sweep: also
ours alone on the first case over the register scan's tuning knobs (hamming.TARGET_LANES, or
TARGET_LANES_CPU on a CPU driver: lanes x row tiles the grid aims at, which sets the tile
length; kernels.HAMMING_WORDS_AT_ONCE; kernels.HAMMING_CARRY_SAVE), each checked against
numpy first; the best is printed last.

Peers:
- CuPy: `bitwise_count(q[:, None] ^ db).sum(axis=2)` + `argpartition` + a sort of the k, on
  query chunks that fit in memory (if cupy imports);
- FAISS `IndexBinaryFlat` on the host's cores (if faiss imports; says which build loaded);
- numpy vectorised: `np.bitwise_count(q ^ db).sum(1)` + `argpartition` per query.
"""
import argparse
import itertools
import json
import os
import time

import numpy as np

import dmlgpu
from dmlgpu import hamming, kernels

try:
    import cupy
except ImportError:
    cupy = None
try:
    import faiss
except ImportError:
    faiss = None

K = 10
CASES = [(1 << 20, 256, 1024), (1 << 20, 1024, 1024), (1 << 24, 256, 256)]
QUICK = [(1 << 20, 256, 32)]
SWEEP_LANES = [1 << 15, 1 << 16, 1 << 17, 1 << 18, 1 << 19]
SWEEP_LANES_CPU = [1 << 8, 1 << 10, 1 << 12]  # (a CPU driver: hamming.TARGET_LANES_CPU)
SWEEP_WORDS_AT_ONCE = [8, 16, 32, 64]


def timed(fn, repeats=3) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def exact(database, queries, k):
    """numpy's exact answer: distances then stable order."""
    bits = np.stack([np.bitwise_count(q ^ database).sum(1, dtype=np.uint32) for q in queries])
    order = np.argsort(bits, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(bits, order, 1), order


def numpy_search(database, queries, k):
    distances, indices = [], []
    for q in queries:
        bits = np.bitwise_count(q ^ database).sum(1, dtype=np.uint32)
        part = np.argpartition(bits, k)[:k]
        part = part[np.lexsort((part, bits[part]))]
        distances.append(bits[part])
        indices.append(part)
    return np.array(distances), np.array(indices)


def cupy_search(db_gpu, queries, k, chunk_bytes=4 << 30):
    q_gpu = cupy.asarray(queries)
    rows, width = db_gpu.shape
    step = max(1, chunk_bytes // (rows * width))
    distances, indices = [], []
    for start in range(0, len(queries), step):
        bits = cupy.bitwise_count(q_gpu[start:start + step, None, :] ^ db_gpu[None]).sum(axis=2, dtype=cupy.uint32)
        part = cupy.argpartition(bits, k, axis=1)[:, :k]
        values = cupy.take_along_axis(bits, part, 1)
        order = cupy.argsort(values, axis=1)
        distances.append(cupy.take_along_axis(values, order, 1).get())
        indices.append(cupy.take_along_axis(part, order, 1).get())
    return np.concatenate(distances), np.concatenate(indices)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small case for a CPU driver")
    parser.add_argument("--sweep", action="store_true", help="also tune the register scan on the first case")
    parser.add_argument("--out", default=".", help="folder for hamming.json (default: here)")
    args = parser.parse_args()
    device = dmlgpu.default_device()
    print(f"{device.name} ({device.type}); {os.cpu_count()} host cores; "
          f"faiss: {getattr(faiss, '__version__', 'not importable')}"
          f"{' (GPU build)' if faiss is not None and hasattr(faiss, 'StandardGpuResources') else ''}; "
          f"cupy: {getattr(cupy, '__version__', 'not importable')}")
    rows, sweep = [], []
    for n, bits, nq in (QUICK if args.quick else CASES):
        rng = np.random.default_rng(0)
        database = rng.integers(0, 256, size=(n, bits // 8), dtype=np.uint8)
        queries = rng.integers(0, 256, size=(nq, bits // 8), dtype=np.uint8)
        sample = queries[:min(nq, 32 if args.quick else 64)]  # host peers: a sample, scaled per query
        want_d, want_i = exact(database, sample[:4], K)
        index = dmlgpu.HammingIndex(database)
        got_d, got_i = index.search(sample[:4], K)
        assert np.array_equal(got_d, want_d) and np.array_equal(got_i, want_i), "dmlgpu differs from numpy"
        ours = timed(lambda: index.search(queries, K))
        row = {"rows": n, "bits": bits, "queries": nq, "k": K, "device": device.name,
               "tile_rows": index.tile_rows(K, nq), "ours_s": ours, "ours_gdist_per_s": n * nq / ours / 1e9}
        peers = {}
        numpy_d, _ = numpy_search(database, sample[:4], K)
        assert np.array_equal(numpy_d, want_d)
        peers["numpy"] = timed(lambda: numpy_search(database, sample, K), repeats=1) * nq / len(sample)
        if faiss is not None:
            flat = faiss.IndexBinaryFlat(bits)
            flat.add(database)
            faiss_d, _ = flat.search(sample[:4], K)
            assert np.array_equal(faiss_d.astype(np.uint32), want_d), "FAISS differs from numpy"
            peers["faiss_cpu"] = timed(lambda: flat.search(sample, K), repeats=1) * nq / len(sample)
        if cupy is not None:
            db_gpu = cupy.asarray(database)
            cupy_d, _ = cupy_search(db_gpu, sample[:4], K)
            assert np.array_equal(cupy_d, want_d), "CuPy differs from numpy"
            peers["cupy"] = timed(lambda: cupy_search(db_gpu, queries, K))
            db_gpu = None
        for name, seconds in peers.items():
            row[f"{name}_s"] = seconds
            row[f"{name}_gdist_per_s"] = n * nq / seconds / 1e9
            row[f"{name}_time_over_ours"] = seconds / ours
        rows.append(row)
        print(f"{n} x {bits}-bit, {nq} queries, top-{K} (tiles of {row['tile_rows']} rows): "
              f"ours {row['ours_gdist_per_s']:.3f} G/s ({ours * 1e3:.2f} ms)"
              + "".join(f"; {name} {row[f'{name}_gdist_per_s']:.3f} G/s ({row[f'{name}_time_over_ours']:.2f}x ours)"
                        for name in peers), flush=True)
        if args.sweep and not sweep:
            sweep = tune(database, queries, want_d, want_i)
        index = None  # frees the device copy before the next case
    path = os.path.join(args.out, "hamming.json")
    with open(path, "w") as f:
        json.dump({"cases": rows, "sweep": sweep}, f, indent=1)
    print(f"wrote {path}")


def tune(database, queries, want_d, want_i):
    """Ours on one case over TARGET_LANES x HAMMING_WORDS_AT_ONCE x HAMMING_CARRY_SAVE (a fresh
    index each: the pipelines are specialised when made)."""
    n, nq, found = database.shape[0], queries.shape[0], []
    knob = "TARGET_LANES_CPU" if dmlgpu.default_device().is_cpu else "TARGET_LANES"
    saved = getattr(hamming, knob), kernels.HAMMING_WORDS_AT_ONCE, kernels.HAMMING_CARRY_SAVE
    try:
        for lanes, at_once, carry_save in itertools.product(
                SWEEP_LANES_CPU if knob == "TARGET_LANES_CPU" else SWEEP_LANES, SWEEP_WORDS_AT_ONCE, (True, False)):
            setattr(hamming, knob, lanes)
            kernels.HAMMING_WORDS_AT_ONCE, kernels.HAMMING_CARRY_SAVE = at_once, carry_save
            index = dmlgpu.HammingIndex(database)
            got_d, got_i = index.search(queries[:4], K)
            assert np.array_equal(got_d, want_d) and np.array_equal(got_i, want_i), "dmlgpu differs from numpy"
            seconds = timed(lambda: index.search(queries, K))
            found.append({"target_lanes": lanes, "words_at_once": at_once, "carry_save": carry_save,
                          "tile_rows": index.tile_rows(K, nq),
                          "ours_s": seconds, "ours_gdist_per_s": n * nq / seconds / 1e9})
            print(f"  sweep: target lanes {lanes}, words at once {at_once}, carry-save {carry_save}, tiles of "
                  f"{found[-1]['tile_rows']} rows: {found[-1]['ours_gdist_per_s']:.3f} G/s", flush=True)
            index = None
        top = max(found, key=lambda r: r["ours_gdist_per_s"])
        print(f"  sweep best: {top}", flush=True)
    finally:
        setattr(hamming, knob, saved[0])
        kernels.HAMMING_WORDS_AT_ONCE, kernels.HAMMING_CARRY_SAVE = saved[1:]
    return found


if __name__ == "__main__":
    main()
