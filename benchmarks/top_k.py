"""TOP_K1 (`dmlgpu.top_k`) on one long sequence, swept over sizes, k and the data's order, against
its peers in the same run; one JSON file.

    python benchmarks/top_k.py [--quick] [--sizes 65536 1048576] [--out benchmarks/out/top_k.json]

Data: `uint32`, one sequence (the case where a kernel that gives each sequence one invocation
has nothing to spread), in four orders: random, ascending, descending (the largest K asked: the
ascending order inserts every element) and all equal (every element ties). k from 1 to n - 1
(`ks`: both sides of every switch of the plans). Every result is checked against numpy's before
anything is timed. Then (`--batches`) rows of sequences along the last axis, and a Tensor not
seen before for each call beside a reused one (the plan is keyed by layout: the same cost).

Rows, each the median wall clock of repeats, result on the host:
- `dmlgpu`: `dmlgpu.top_k(t, k)` on a resident Tensor, both outputs read back;
- `numpy`: the same answer from numpy: a stable argsort of the complemented keys (largest first,
  ties by ascending index), then the values taken (`np.argpartition` does not order ties by
  index, so it is not the same result; it is reported beside, as `numpy_partition`, for scale);
- `torch` (CUDA present): `torch.topk` of the same data as int64 on the GPU, answer read back.
  Its ties come in no promised order, so only the random rows compare like with like.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import dmlgpu
from dmlgpu import Tensor

sys.path.insert(0, os.path.dirname(__file__))
from common import cuda_torch, median_of  # noqa: E402

torch = cuda_torch()

ORDERS = ("random", "ascending", "descending", "equal")


def data(order: str, n: int, rng) -> np.ndarray:
    x = rng.integers(0, 2**32, n, dtype=np.uint32)
    if order == "ascending":
        x.sort()
    elif order == "descending":
        x = np.sort(x)[::-1].copy()
    elif order == "equal":
        x[:] = x[0]
    return x


def ks(n: int) -> list[int]:
    """K from 1 to n - 1, with both sides of every switch of the kernels' plans: 32/33, 512/513
    (the heaps' workgroup; the sorting network's folding), 1,024/1,025 (a run of one block or
    two), and the large K."""
    return sorted({k for k in (1, 10, 32, 33, 100, 256, 512, 513, 1000, 1024, 1025, 4096, 32768, n // 2, n - 1)
                   if 0 < k < n})


def numpy_answer(x: np.ndarray, k: int):
    order = np.argsort(~x, kind="stable")[:k]
    return x[order], order


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="sizes 4,096 and 65,536, fewer repeats")
    parser.add_argument("--sizes", type=int, nargs="+", help="sequence lengths (default: 256 to 4M)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--budget", type=float, default=2.0,
                        help="seconds one row may take; a slower row is timed once")
    parser.add_argument("--max-k", type=int, help="leave out the k above this (a slow build's comparison)")
    parser.add_argument("--batches", action="store_true",
                        help="also rows x columns along the last axis, and new against reused operands")
    parser.add_argument("--out", default="benchmarks/out/top_k.json")
    args = parser.parse_args()
    sizes = args.sizes or ([4096, 65536] if args.quick else [256, 65536, 1 << 20, 1 << 22])
    repeats = 3 if args.quick else args.repeats
    device = dmlgpu.default_device()
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        for order in ORDERS:
            x = data(order, n, rng)
            t = Tensor.from_numpy(x, device)
            gpu = torch.from_numpy(x.astype(np.int64)).cuda() if torch is not None else None
            for k in [k for k in ks(n) if args.max_k is None or k <= args.max_k]:
                def ours():
                    values, indices = dmlgpu.top_k(t, k)
                    return values.numpy(), indices.numpy()

                want = numpy_answer(x, k)
                start = time.perf_counter()
                got = ours()  # (also the pipelines made once)
                first = time.perf_counter() - start
                assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1].astype(got[1].dtype)), \
                    (n, order, k)
                times = max(1, repeats if first * repeats < args.budget else 1)
                row = {"n": n, "order": order, "k": k, "dmlgpu_s": median_of(ours, times),
                       "numpy_s": median_of(lambda: numpy_answer(x, k), times),
                       "numpy_partition_s": median_of(lambda: np.argpartition(~x, k - 1)[:k], times)}
                if gpu is not None:
                    def peer():
                        values, indices = torch.topk(gpu, k)
                        return values.cpu(), indices.cpu()
                    peer()
                    row["torch_s"] = median_of(peer, times)
                row["ratio_to_numpy"] = row["dmlgpu_s"] / row["numpy_s"]
                rows.append(row)
                print(f"n={n:>8} {order:>10} k={k:>8}: dmlgpu {row['dmlgpu_s'] * 1e3:9.2f} ms, numpy "
                      f"{row['numpy_s'] * 1e3:8.2f} ms ({row['ratio_to_numpy']:.2f}x)"
                      + (f", torch {row['torch_s'] * 1e3:.2f} ms" if "torch_s" in row else ""), flush=True)
    if args.batches:
        rows += batch_rows(device, rng, repeats)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"device": device.name, "type": device.type, "driver": device.driver, "rows": rows}, f, indent=1)
    print("wrote", args.out)


def batch_rows(device, rng, repeats: int) -> list:
    """Sequences along the last axis of rows x columns (random `uint32`), and one sequence of 2^20
    through a new Tensor per call (made outside the timing) against the same Tensor reused."""
    rows = []
    for count, n in ((1024, 1024), (64, 65536), (16384, 64)):
        x = rng.integers(0, 2**32, (count, n), dtype=np.uint32)
        t = Tensor.from_numpy(x, device)
        gpu = torch.from_numpy(x.astype(np.int64)).cuda() if torch is not None else None
        for k in sorted({1, 10, 100, 1000, n - 1} & set(range(1, n))):
            def ours():
                values, indices = dmlgpu.top_k(t, k)
                return values.numpy(), indices.numpy()
            got = ours()
            want = np.argsort(~x, axis=1, kind="stable")[:, :k]
            assert np.array_equal(got[1], want.astype(got[1].dtype)), (count, n, k)
            row = {"rows": count, "n": n, "order": "random", "k": k, "dmlgpu_s": median_of(ours, repeats)}
            if gpu is not None:
                def peer():
                    values, indices = torch.topk(gpu, k)
                    return values.cpu(), indices.cpu()
                peer()
                row["torch_s"] = median_of(peer, repeats)
            rows.append(row)
            print(f"{count} x {n} k={k}: dmlgpu {row['dmlgpu_s'] * 1e3:.3f} ms"
                  + (f", torch {row['torch_s'] * 1e3:.3f} ms" if "torch_s" in row else ""), flush=True)
    x = rng.integers(0, 2**32, 1 << 20, dtype=np.uint32)
    for k in (10, 1000):
        fresh = [Tensor.from_numpy(x, device) for _ in range(repeats + 1)]
        dmlgpu.top_k(fresh[0], k)[1].numpy()
        times = []
        for t in fresh[1:]:
            start = time.perf_counter()
            values, indices = dmlgpu.top_k(t, k)
            values.numpy(), indices.numpy()
            times.append(time.perf_counter() - start)
        reused = median_of(lambda: [a.numpy() for a in dmlgpu.top_k(fresh[1], k)], repeats)
        rows.append({"case": "new operands", "n": 1 << 20, "k": k, "new_s": float(np.median(times)),
                     "reused_s": reused})
        print(f"2^20 k={k}: a new Tensor each call {np.median(times) * 1e3:.3f} ms, reused {reused * 1e3:.3f} ms",
              flush=True)
    return rows


if __name__ == "__main__":
    main()
