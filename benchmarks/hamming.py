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
ours alone on the first case over the register scan's tuning knobs (hamming_plan.TARGET_LANES, or
TARGET_LANES_CPU on a CPU driver: lanes x row tiles the grid aims at, which sets the tile
length; kernels.HAMMING_WORDS_AT_ONCE; kernels.HAMMING_CARRY_SAVE), each checked against
numpy first; the best is printed last.

Also "graph": the same search as a DirectML graph through `compile_graph` (XOR of the queries
[q, 1, w] and the database [1, n, w] broadcast -> BIT_COUNT -> REDUCE(SUM, words) ->
TOP_K1(INCREASING, rows); compiled.route "hamming": the same kernels as HammingIndex), 64-bit
words, the database bound resident, queries uploaded and results downloaded per execution; a
graph holds at most as many queries as keep its [q, n, w] tensors within DirectML's 2^32 - 1
elements, so a batch of queries runs several executions (`graph_executions`).

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
from dmlgpu import Binding, DataType, GraphDesc, InputGraphEdgeDesc, IntermediateGraphEdgeDesc, OutputGraphEdgeDesc, TensorDesc
from dmlgpu.kernels import search_programs as hamming_plan, variants as kernels
from dmlgpu.describe.operator_descs import (ElementWiseBitCountOperatorDesc, ElementWiseBitXorOperatorDesc, ReduceOperatorDesc,
                          TopK1OperatorDesc)
from dmlgpu.table.operators import AxisDirection, ReduceFunction

from common import wall

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
SWEEP_LANES_CPU = [1 << 8, 1 << 10, 1 << 12]  # (a CPU driver: hamming_plan.TARGET_LANES_CPU)
SWEEP_WORDS_AT_ONCE = [8, 16, 32, 64]


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


def search_graph(q, n, words, k):
    """The k nearest of q queries among n codes of `words` uint64 words, as a DML_GRAPH_DESC:
    graph inputs 0 (queries) and 1 (database), outputs the distances and the rows (uint32)."""
    sizes, u64, u32 = (q, n, words), DataType.UINT64, DataType.UINT32
    x, counts, distances = TensorDesc(u64, sizes), TensorDesc(u32, sizes), TensorDesc(u32, (q, n, 1))
    top = TensorDesc(u32, (q, k, 1))
    nodes = [ElementWiseBitXorOperatorDesc(TensorDesc(u64, sizes, (words, 0, 1)), TensorDesc(u64, sizes, (0, words, 1)), x),
             ElementWiseBitCountOperatorDesc(x, counts), ReduceOperatorDesc(counts, distances, ReduceFunction.SUM, (2,)),
             TopK1OperatorDesc(distances, top, top, 1, k, AxisDirection.INCREASING)]
    return GraphDesc(2, 2, nodes, [InputGraphEdgeDesc(0, 0, 0), InputGraphEdgeDesc(1, 0, 1)],
                     [OutputGraphEdgeDesc(3, 0, 0), OutputGraphEdgeDesc(3, 1, 1)],
                     [IntermediateGraphEdgeDesc(0, 0, 1, 0), IntermediateGraphEdgeDesc(1, 0, 2, 0),
                      IntermediateGraphEdgeDesc(2, 0, 3, 0)])


class GraphSearch:
    """The search through compile_graph: the database resident, one graph of `per` queries,
    executed once per `per` queries (all queued, then every result read)."""

    def __init__(self, device, database, nq, k):
        n, width = database.shape
        self.words = width // 8
        self.per = 1 << ((min(nq, (2 ** 32 - 1) // (n * self.words))).bit_length() - 1)
        self.compiled = device.compile_graph(search_graph(self.per, n, self.words, k))
        assert self.compiled.route == "hamming", self.compiled.route
        self.device, self.k = device, k
        self.database = device.upload(np.ascontiguousarray(database).view(np.uint64))
        self.outputs = [(device.allocate(self.per * k * 4), device.allocate(self.per * k * 4))
                        for _ in range(-(-nq // self.per))]

    def __call__(self, queries):
        starts = range(0, len(queries), self.per)
        for start, (values, rows) in zip(starts, self.outputs):
            chunk = np.ascontiguousarray(queries[start:start + self.per]).view(np.uint64)
            if len(chunk) < self.per:  # (the graph's q is fixed: pad the last batch)
                chunk = np.concatenate([chunk, np.zeros((self.per - len(chunk), self.words), np.uint64)])
            self.compiled.execute([Binding(self.device.upload(chunk)), Binding(self.database)],
                                  [Binding(values), Binding(rows)])
        distances, found = [], []
        for start, (values, rows) in zip(starts, self.outputs):
            count = min(self.per, len(queries) - start)
            distances.append(values.read().view(np.uint32).reshape(self.per, self.k)[:count])
            found.append(rows.read().view(np.uint32).reshape(self.per, self.k)[:count])
        return np.concatenate(distances), np.concatenate(found)


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
        ours = wall(lambda: index.search(queries, K), repeats=3)
        row = {"rows": n, "bits": bits, "queries": nq, "k": K, "device": device.name,
               "tile_rows": index.tile_rows(K, nq), "ours_s": ours, "ours_gdist_per_s": n * nq / ours / 1e9}
        graph = GraphSearch(device, database, nq, K)
        graph_d, graph_i = graph(queries[:4])
        assert np.array_equal(graph_d, want_d) and np.array_equal(graph_i, want_i), "the graph differs from numpy"
        graph_s = wall(lambda: graph(queries), repeats=3)
        row.update(graph_s=graph_s, graph_gdist_per_s=n * nq / graph_s / 1e9, graph_time_over_ours=graph_s / ours,
                   graph_queries_per_execution=graph.per, graph_executions=-(-nq // graph.per),
                   graph_dispatches_per_execution=graph.compiled.dispatches)
        graph = None
        peers = {}
        numpy_d, _ = numpy_search(database, sample[:4], K)
        assert np.array_equal(numpy_d, want_d)
        peers["numpy"] = wall(lambda: numpy_search(database, sample, K), repeats=1) * nq / len(sample)
        if faiss is not None:
            flat = faiss.IndexBinaryFlat(bits)
            flat.add(database)
            faiss_d, _ = flat.search(sample[:4], K)
            assert np.array_equal(faiss_d.astype(np.uint32), want_d), "FAISS differs from numpy"
            peers["faiss_cpu"] = wall(lambda: flat.search(sample, K), repeats=1) * nq / len(sample)
        if cupy is not None:
            db_gpu = cupy.asarray(database)
            cupy_d, _ = cupy_search(db_gpu, sample[:4], K)
            assert np.array_equal(cupy_d, want_d), "CuPy differs from numpy"
            peers["cupy"] = wall(lambda: cupy_search(db_gpu, queries, K), repeats=3)
            db_gpu = None
        for name, seconds in peers.items():
            row[f"{name}_s"] = seconds
            row[f"{name}_gdist_per_s"] = n * nq / seconds / 1e9
            row[f"{name}_time_over_ours"] = seconds / ours
        rows.append(row)
        print(f"{n} x {bits}-bit, {nq} queries, top-{K} (tiles of {row['tile_rows']} rows): "
              f"ours {row['ours_gdist_per_s']:.3f} G/s ({ours * 1e3:.2f} ms); graph {row['graph_gdist_per_s']:.3f} G/s "
              f"({row['graph_executions']} executions of {row['graph_queries_per_execution']} queries, "
              f"{row['graph_dispatches_per_execution']} dispatches each)"
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
    saved = getattr(hamming_plan, knob), kernels.HAMMING_WORDS_AT_ONCE, kernels.HAMMING_CARRY_SAVE
    try:
        for lanes, at_once, carry_save in itertools.product(
                SWEEP_LANES_CPU if knob == "TARGET_LANES_CPU" else SWEEP_LANES, SWEEP_WORDS_AT_ONCE, (True, False)):
            setattr(hamming_plan, knob, lanes)
            kernels.HAMMING_WORDS_AT_ONCE, kernels.HAMMING_CARRY_SAVE = at_once, carry_save
            index = dmlgpu.HammingIndex(database)
            got_d, got_i = index.search(queries[:4], K)
            assert np.array_equal(got_d, want_d) and np.array_equal(got_i, want_i), "dmlgpu differs from numpy"
            seconds = wall(lambda: index.search(queries, K), repeats=3)
            found.append({"target_lanes": lanes, "words_at_once": at_once, "carry_save": carry_save,
                          "tile_rows": index.tile_rows(K, nq),
                          "ours_s": seconds, "ours_gdist_per_s": n * nq / seconds / 1e9})
            print(f"  sweep: target lanes {lanes}, words at once {at_once}, carry-save {carry_save}, tiles of "
                  f"{found[-1]['tile_rows']} rows: {found[-1]['ours_gdist_per_s']:.3f} G/s", flush=True)
            index = None
        top = max(found, key=lambda r: r["ours_gdist_per_s"])
        print(f"  sweep best: {top}", flush=True)
    finally:
        setattr(hamming_plan, knob, saved[0])
        kernels.HAMMING_WORDS_AT_ONCE, kernels.HAMMING_CARRY_SAVE = saved[1:]
    return found


if __name__ == "__main__":
    main()
