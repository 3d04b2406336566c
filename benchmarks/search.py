"""Binary-code search as a product: dmlgpu.HammingIndex against numpy, FAISS IndexBinaryFlat,
usearch (exact), RDKit BulkTanimotoSimilarity and, on an NVIDIA GPU, CuPy (the same formula, and a
raw-CUDA distance-only kernel: the floor), each in the same run where it imports. End to end:
queries up and results down inside the timing, databases resident. Every answer is checked
against numpy's exact one before it is timed.

    python benchmarks/search.py [--quick] [--out FOLDER] [--sections k,hamming,tanimoto,shards]
                                [--ks 10,33,100] [--breakdown] [--register-k 32]

Sections (each well under two minutes on an H100/H200):
- k: 1M x 256-bit codes, 1,024 queries, k from 1 to 16,384 (and k = n on 20,000 rows x 64
  queries): G distances/s and the share of the k = 10 rate;
- hamming: top-10 over 1M x 256-bit, 1M x 1,024-bit (1,024 queries) and 16M x 256-bit (256);
  with CuPy, against the distance-only floor: a raw-CUDA kernel that writes every distance (a
  thread per row, its code in registers, the queries in shared memory, 128-bit loads, a popcount
  per word, uint16 out, coalesced), the least any exact search that looks at every pair costs;
Every timed GPU case runs for WARM_S seconds first (an idle GPU drops its clocks, and a search of
a few milliseconds timed cold reads 2-3x slow).
- tanimoto: top-10 and threshold 0.7 over 2M x 2,048-bit fingerprints (64 queries),
  fingerprints compared per second;
- shards: 16M x 256-bit on every device of the process (devices="all") against one.
--quick: small sizes for a CPU driver (lavapipe). --ks: the k section's k (k = 10 always, the
rate the others are a share of). --breakdown: in the k section, each kernel's GPU time in one
search (every dispatch it queued, run again alone: `Device.time_dispatches`), summed per kernel.
--register-k N: the register path's largest k for this run (0: every k by the selection path; to
compare the two at k <= 32). Writes FOLDER/search.json.
"""
import argparse
import json
import os
import time

import numpy as np

import dmlgpu
from dmlgpu.kernels import variants as kernels

from common import wall

try:
    import faiss
except ImportError:
    faiss = None
try:
    import cupy
except ImportError:
    cupy = None
try:
    import usearch.index as usearch_index
except ImportError:
    usearch_index = None
try:
    from rdkit import DataStructs
except ImportError:
    DataStructs = None


def exact(database, queries, k):
    d = np.stack([np.bitwise_count(q ^ database).sum(1, dtype=np.uint32) for q in queries])
    order = np.argsort(d, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(d, order, 1), order


def numpy_topk(database, queries, k):
    out = []
    for q in queries:
        d = np.bitwise_count(q ^ database).sum(1, dtype=np.uint32)
        part = np.argpartition(d, k - 1)[:k] if k < d.size else np.arange(d.size)
        out.append(d[part[np.lexsort((part, d[part]))]])
    return np.array(out)


#: Seconds of untimed runs before each timed GPU case.
WARM_S = 1.0

# The distance-only floor: thread = database row, its code in registers (W 32-bit words, uint4
# loads where W % 4 == 0), the queries QB at a time in shared memory (every thread reads the same
# word: a broadcast), one popcount per word, each distance written as uint16 (out[q][row]: a
# warp writes 64 contiguous bytes per query). Bound by the popcount rate (16 per clock per SM on
# an H100/H200) and, for narrow codes, by the 2 bytes written per distance.
CUDA_FLOOR = r"""
#define VEC (W % 4 == 0)
extern "C" __global__ void __launch_bounds__(256) distances(const unsigned int* __restrict__ db,
        const unsigned int* __restrict__ q, unsigned short* __restrict__ out, int rows, int queries) {
    __shared__ __align__(16) unsigned int qs[QB * W];
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int code[W];
    if (row < rows) {
#if VEC
        const uint4* src = reinterpret_cast<const uint4*>(db + (size_t)row * W);
#pragma unroll
        for (int v = 0; v < W / 4; ++v) {
            uint4 x = src[v];
            code[4 * v] = x.x; code[4 * v + 1] = x.y; code[4 * v + 2] = x.z; code[4 * v + 3] = x.w;
        }
#else
#pragma unroll
        for (int w = 0; w < W; ++w) code[w] = db[(size_t)row * W + w];
#endif
    }
    for (int q0 = 0; q0 < queries; q0 += QB) {
        int n = min(QB, queries - q0);
        __syncthreads();
        for (int i = threadIdx.x; i < n * W; i += blockDim.x) qs[i] = q[(size_t)q0 * W + i];
        __syncthreads();
        if (row >= rows) continue;
        for (int j = 0; j < n; ++j) {
            int d = 0;
#if VEC
            const uint4* qv = reinterpret_cast<const uint4*>(qs + j * W);
#pragma unroll
            for (int v = 0; v < W / 4; ++v) {
                uint4 y = qv[v];
                d += __popc(code[4 * v] ^ y.x) + __popc(code[4 * v + 1] ^ y.y)
                   + __popc(code[4 * v + 2] ^ y.z) + __popc(code[4 * v + 3] ^ y.w);
            }
#else
#pragma unroll
            for (int w = 0; w < W; ++w) d += __popc(code[w] ^ qs[j * W + w]);
#endif
            out[(size_t)(q0 + j) * rows + row] = (unsigned short)d;
        }
    }
}
"""
#: Queries per shared-memory chunk of the floor kernel; its output at most this many bytes per launch.
FLOOR_QUERIES, FLOOR_OUT_BYTES = 64, 4 << 30


def cupy_peers(database, queries, k, row):
    """CuPy: bitwise_count + argpartition (the same formula), and the raw-CUDA distance-only floor."""
    db = cupy.asarray(database)
    q = cupy.asarray(queries)

    def formula():
        found = []
        step = max(1, (2 << 30) // (db.shape[0] * db.shape[1]))
        for s in range(0, q.shape[0], step):
            d = cupy.bitwise_count(q[s:s + step, None, :] ^ db[None]).sum(axis=2, dtype=cupy.uint32)
            part = cupy.argpartition(d, k - 1, axis=1)[:, :k]
            found.append(cupy.sort(cupy.take_along_axis(d, part, 1), axis=1).get())
        return np.concatenate(found)

    db32, q32 = db.view(cupy.uint32), q.view(cupy.uint32)
    rows, words = db32.shape
    kernel = cupy.RawKernel(f"#define W {words}\n#define QB {FLOOR_QUERIES}\n" + CUDA_FLOOR, "distances",
                            options=("-std=c++14",))
    per_launch = max(1, min(q32.shape[0], FLOOR_OUT_BYTES // (2 * rows)))
    out = cupy.empty((per_launch, rows), cupy.uint16)

    def floor(chunks=range(0, q32.shape[0], per_launch)):
        for s in chunks:
            chunk = q32[s:s + per_launch]
            kernel(((rows + 255) // 256,), (256,), (db32, chunk, out, np.int32(rows), np.int32(chunk.shape[0])))
        cupy.cuda.Device().synchronize()

    row["cupy_formula_s"] = wall(formula, repeats=2)
    try:
        floor(range(0, 1))  # checked once: the distances of the first queries are numpy's
    except cupy.cuda.compiler.CompileException as error:  # (the run goes on without the floor)
        row["cuda_distance_floor_error"] = str(error)[-2000:]
        print(f"CUDA floor kernel did not compile: {row['cuda_distance_floor_error']}", flush=True)
        return
    n = min(per_launch, 4)
    want = np.stack([np.bitwise_count(queries[j] ^ database).sum(1) for j in range(n)])
    assert np.array_equal(out[:n].get(), want), "the CUDA floor kernel differs from numpy"
    row["cuda_distance_floor_s"] = wall(floor, repeats=5, warm_seconds=WARM_S)


def kernel_breakdown(index, queries, k, repeats=5) -> dict:
    """GPU milliseconds per kernel of one `index.search(queries, k)`: every dispatch it queued,
    captured as it was queued (its buffers kept alive) and run again alone, `repeats` times
    back to back (the median), summed per kernel."""
    device = index.device
    captured = []

    def enqueue(launch, queue=device.enqueue):
        captured.append((launch, [ref() for ref in launch.buffers]))
        return queue(launch)

    device.enqueue = enqueue  # (this device object only, for one search)
    try:
        index.search(queries, k)
    finally:
        del device.enqueue
    found = {}
    for launch, _kept in captured:
        if launch.valid:
            seconds = float(np.median(device.time_dispatches(launch, repeats)))
            found[launch.program.name] = found.get(launch.program.name, 0.0) + seconds * 1e3
    return found


def k_section(quick, ks=(1, 10, 32, 33, 100, 1024, 4096, 16384), breakdown=False):
    n, bits, nq = (200_000, 256, 32) if quick else (1 << 20, 256, 1024)
    rng = np.random.default_rng(0)
    database = rng.integers(0, 256, size=(n, bits // 8), dtype=np.uint8)
    queries = rng.integers(0, 256, size=(nq, bits // 8), dtype=np.uint8)
    index = dmlgpu.HammingIndex(database)
    rows = []
    base = None
    for k in sorted(set(ks) | {10}):
        want_d, want_i = exact(database, queries[:2], k)
        got_d, got_i = index.search(queries[:2], k)
        assert np.array_equal(got_d, want_d) and np.array_equal(got_i, want_i), k
        seconds = wall(lambda: index.search(queries, k), repeats=3,
                       warm_seconds=0.0 if quick else WARM_S)
        rate = n * nq / seconds / 1e9
        base = rate if k == 10 else base
        rows.append({"rows": n, "bits": bits, "queries": nq, "k": k, "ours_s": seconds, "gdist_per_s": rate,
                     "share_of_k10": rate / base if base else None})
        print(f"k={k}: {rate:.3f} G distances/s ({seconds * 1e3:.1f} ms){'' if base is None else f', {rate / base:.0%} of k=10'}",
              flush=True)
        if breakdown:
            rows[-1]["kernel_ms"] = kernel_breakdown(index, queries, k)
            print("    GPU ms per kernel: " + ", ".join(f"{name} {ms:.3f}" for name, ms in rows[-1]["kernel_ms"].items()),
                  flush=True)
    small = rng.integers(0, 256, size=(20000, 8), dtype=np.uint8)
    small_q = rng.integers(0, 256, size=(64, 8), dtype=np.uint8)
    small_index = dmlgpu.HammingIndex(small)
    assert all(np.array_equal(a, b) for a, b in zip(small_index.search(small_q[:2], 20000), exact(small, small_q[:2], 20000)))
    seconds = wall(lambda: small_index.search(small_q, 20000), repeats=1 if quick else 3)
    numpy_s = wall(lambda: exact(small, small_q, 20000), repeats=1)
    rows.append({"rows": 20000, "bits": 64, "queries": 64, "k": 20000, "ours_s": seconds, "numpy_s": numpy_s})
    print(f"k = n = 20,000, 64 queries: {seconds:.3f} s (numpy sort {numpy_s:.3f} s)", flush=True)
    if breakdown:
        rows[-1]["kernel_ms"] = kernel_breakdown(small_index, small_q, 20000)
        print("    GPU ms per kernel: " + ", ".join(f"{name} {ms:.3f}" for name, ms in rows[-1]["kernel_ms"].items()),
              flush=True)
    return rows


def hamming_section(quick):
    cases = [(200_000, 256, 32)] if quick else [(1 << 20, 256, 1024), (1 << 20, 1024, 1024), (1 << 24, 256, 256)]
    rows = []
    for n, bits, nq in cases:
        rng = np.random.default_rng(1)
        database = rng.integers(0, 256, size=(n, bits // 8), dtype=np.uint8)
        queries = rng.integers(0, 256, size=(nq, bits // 8), dtype=np.uint8)
        sample = queries[:min(nq, 16)]
        index = dmlgpu.HammingIndex(database)
        want_d, want_i = exact(database, queries[:2], 10)
        got_d, got_i = index.search(queries[:2], 10)
        assert np.array_equal(got_d, want_d) and np.array_equal(got_i, want_i)
        row = {"rows": n, "bits": bits, "queries": nq, "k": 10, "device": index.device.name,
               "ours_s": wall(lambda: index.search(queries, 10), repeats=5, warm_seconds=0.0 if quick else WARM_S)}
        row["numpy_s"] = wall(lambda: numpy_topk(database, sample, 10), repeats=1) * nq / len(sample)
        if faiss is not None:
            flat = faiss.IndexBinaryFlat(bits)
            flat.add(database)
            assert np.array_equal(flat.search(queries[:2], 10)[0].astype(np.uint32), want_d)
            row["faiss_cpu_s"] = wall(lambda: flat.search(sample, 10), repeats=1) * nq / len(sample)
        if usearch_index is not None:
            u = usearch_index.Index(ndim=bits, metric="hamming", dtype="b1")
            u.add(np.arange(n), database)
            row["usearch_exact_s"] = wall(lambda: u.search(sample, 10, exact=True), repeats=1) * nq / len(sample)
        if cupy is not None:
            cupy_peers(database, queries, 10, row)
        for key in [key for key in row if key.endswith("_s")]:
            row[key.replace("_s", "_gdist_per_s")] = n * nq / row[key] / 1e9
        if "cuda_distance_floor_s" in row:
            row["ours_share_of_floor"] = row["cuda_distance_floor_s"] / row["ours_s"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        index = None
    return rows


def tanimoto_section(quick):
    n, bits, nq = (100_000, 2048, 8) if quick else (2_000_000, 2048, 64)
    rng = np.random.default_rng(2)
    database = np.packbits(rng.random((n, bits), dtype=np.float32) < 0.03, axis=1) if quick else \
        np.packbits(rng.random((n, bits // 8 * 8), dtype=np.float32) < 0.03, axis=1)
    queries = database[rng.integers(0, n, nq)]
    index = dmlgpu.HammingIndex(database, metric="tanimoto")
    row = {"rows": n, "bits": bits, "queries": nq, "device": index.device.name}
    warm = 0.0 if quick else WARM_S
    row["top10_s"] = wall(lambda: index.search(queries, 10), repeats=3, warm_seconds=warm)
    row["threshold_0.7_s"] = wall(lambda: index.range_search(queries, 0.7), repeats=3, warm_seconds=warm)
    if DataStructs is not None:
        sample = min(nq, 4)
        vectors = [DataStructs.CreateFromBinaryText(np.unpackbits(r).tobytes()) for r in database[:1]]  # warm
        fps = []
        for r in database:
            v = DataStructs.ExplicitBitVect(bits)
            v.SetBitsFromList(np.flatnonzero(np.unpackbits(r)).tolist())
            fps.append(v)
        sims, ids = index.search(queries[:1], 10)
        want = np.array(DataStructs.BulkTanimotoSimilarity(fps[int(ids[0, 0])], fps), np.float32)
        assert np.isclose(sims[0, 0], want.max())
        row["rdkit_bulk_one_core_s"] = wall(lambda: [DataStructs.BulkTanimotoSimilarity(fps[i], fps)
                                                      for i in range(sample)], repeats=1) * nq / sample
        row["rdkit_bulk_all_cores_s"] = row["rdkit_bulk_one_core_s"] / (os.cpu_count() or 1)  # (embarrassingly parallel)
        del vectors
    for key in [key for key in row if key.endswith("_s")]:
        row[key.replace("_s", "_fps_per_s")] = n * nq / row[key]
    print(json.dumps(row), flush=True)
    return [row]


def shards_section(quick):
    """One row per batch of queries (256, and 1,024 as the single-GPU rows use): a batch's
    fixed host cost per shard (threads, submits, the merge) weighs less against more queries."""
    n, bits = (200_000, 256) if quick else (1 << 24, 256)
    rng = np.random.default_rng(3)
    database = rng.integers(0, 256, size=(n, bits // 8), dtype=np.uint8)
    queries = rng.integers(0, 256, size=(1024, bits // 8), dtype=np.uint8)
    listed = dmlgpu.devices()
    one = dmlgpu.HammingIndex(database)
    many = dmlgpu.HammingIndex(database, devices="all") if len(listed) > 1 else None
    if many is not None:
        assert all(np.array_equal(a, b) for a, b in zip(many.search(queries[:2], 10), exact(database, queries[:2], 10)))
    rows = []
    for nq in ((32,) if quick else (256, 1024)):
        batch = queries[:nq]
        row = {"rows": n, "bits": bits, "queries": nq, "devices": [d["name"] for d in listed],
               "one_s": wall(lambda: one.search(batch, 10), repeats=3, warm_seconds=0.0 if quick else WARM_S)}
        if many is not None:
            row["all_s"] = wall(lambda: many.search(batch, 10), repeats=3, warm_seconds=0.0 if quick else WARM_S)
            row["speedup"] = row["one_s"] / row["all_s"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out"))
    parser.add_argument("--sections", default="k,hamming,tanimoto,shards")
    parser.add_argument("--ks", default="1,10,32,33,100,1024,4096,16384", help="the k section's k (comma-separated)")
    parser.add_argument("--breakdown", action="store_true", help="the k section: GPU time per kernel of each search")
    parser.add_argument("--register-k", type=int, default=kernels.HAMMING_REGISTER_K,
                        help="the register path's largest k (0: the selection path for every k)")
    args = parser.parse_args()
    kernels.HAMMING_REGISTER_K = args.register_k
    device = dmlgpu.default_device()
    print(f"{device.name} ({device.type}); faiss {getattr(faiss, '__version__', None)}, cupy "
          f"{getattr(cupy, '__version__', None)}, usearch {usearch_index is not None}, rdkit {DataStructs is not None}",
          flush=True)
    ks = tuple(int(k) for k in args.ks.split(","))
    sections = {"k": lambda quick: k_section(quick, ks, args.breakdown), "hamming": hamming_section,
                "tanimoto": tanimoto_section, "shards": shards_section}
    results = {"device": device.name, "quick": args.quick, "register_k": args.register_k}
    for name in args.sections.split(","):
        start = time.perf_counter()
        results[name] = sections[name](args.quick)
        print(f"section {name}: {time.perf_counter() - start:.1f} s", flush=True)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "search.json")
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
