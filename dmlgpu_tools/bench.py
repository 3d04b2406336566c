"""`python -m dmlgpu bench`: dmlgpu against its peers, measured in the same run.

What is measured (benchmarks/NOTES.md says why each way):
- kernel bandwidth from GPU timestamps, for every operator x element width x layout
  (contiguous / broadcast / strided input) x out-of-place / in-place x size, after the GPU clock
  has ramped; bytes = bytes each kernel must read and write;
- peers on the same card: PyTorch's and CuPy's own operator (same width), and PyTorch's
  device-to-device copy as the bandwidth ceiling (CUDA events);
- the numpy front end end to end, with and without `out=`, against numpy, PyTorch's
  from_numpy -> cuda -> op -> cpu and CuPy's asarray -> invert -> asnumpy, next to the floors
  measured in the same run (host memcpy on 1 and on the runtime's copy threads, PCIe each way);
- against numpy in the same run, 16 MiB of uint32 (issue 12's targets, set for CPU drivers such as
  lavapipe): a resident NOT on Tensors + synchronize, the numpy front end, `Tensor.from_numpy`;
- the latency of one small device-resident operation, submit to result, against a tiny PyTorch
  op + synchronize;
- the per-operation cost of a recorded list of 1,000 small dependent operations, against a CUDA
  graph replay of the same;
- the exact binary-code search, `HammingIndex.search` end to end (queries up and results down
  inside the timing, the database resident), against numpy's exact search in the same run
  (`dmlgpu_tools.showcases`; benchmarks/hamming.py adds CuPy and FAISS and larger cases).
Progress counters are written only when stdout and stderr are a terminal (a log stays clean).
Every kernel's output is checked against the reference (all of it up to 16 MiB, a spread
sample beyond, so that checking never lets the GPU clock fall between timings). Output: JSON, PNG plots, a markdown table.
"""
from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import dmlgpu
from dmlgpu import testing
from dmlgpu.front import numpy_api
from dmlgpu.table import reference
from dmlgpu.describe.bindings import Binding
from dmlgpu.describe.operator_descs import DESC_CLASSES
from dmlgpu.api.device import default_device
from dmlgpu.table.dtypes import DataType
from dmlgpu.table.operators import OPERATORS
from dmlgpu.profiling import kernel_seconds
from dmlgpu.table.reference import shift_amount
from dmlgpu.runtime import host_copy
from dmlgpu.front.tensor import Tensor
from dmlgpu.describe.tensor_desc import TensorDesc

from . import bench_runtime, showcases
from .bench_report import write_report
from .peers import out_type as output_type, peer_function, timed_type, torch_dtype

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
#: The element widths measured; each operator is measured on the type its row's peer is exact on
#: (`kernel_type`). The peers' device copy runs on these types.
WIDTH_TYPES = {8: DataType.UINT8, 16: DataType.UINT16, 32: DataType.UINT32, 64: DataType.UINT64}
LAYOUTS = ("contiguous", "broadcast", "strided")
ROW = 4 * KiB  # bytes per row in the broadcast and strided layouts
#: Elements of each peer's result checked against the reference before it is timed.
CHECKED = 1 << 16
#: Size of the comparisons with numpy (issue 12: numpy time / dmlgpu time, 16 MiB of uint32).
NUMPY_TARGET_BYTES = 16 * MiB


def _progress(items, label):
    """`items`, with a progress counter on the terminal; nothing is written where output goes to a
    file or a pipe (no carriage-return lines in logs)."""
    if not (sys.stdout.isatty() and sys.stderr.isatty()):
        return items
    try:
        from tqdm import tqdm
        return tqdm(items, desc=label, file=sys.stderr, leave=False)
    except ImportError:
        items = list(items)

        def gen():
            for i, item in enumerate(items):
                print(f"\r{label} {i + 1}/{len(items)}", end="", file=sys.stderr, flush=True)
                yield item
            print(file=sys.stderr)
        return gen()


def gpu_clocks() -> dict:
    """SM and memory clocks as nvidia-smi reports them now (empty without nvidia-smi)."""
    if not shutil.which("nvidia-smi"):
        return {}
    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    return dict(zip(("sm_clock", "mem_clock", "temperature", "power"), [v.strip() for v in out.split(",")]))


class Peers:
    """PyTorch and CuPy on the same GPU, when they are installed and see one."""

    def __init__(self, enabled: bool = True):
        self.torch = self.cupy = None
        if not enabled:
            return
        try:
            import torch
            if torch.cuda.is_available():
                self.torch = torch
        except ImportError:
            pass
        try:
            import cupy
            if cupy.cuda.runtime.getDeviceCount():
                self.cupy = cupy
        except Exception:
            pass

    def describe(self) -> dict:
        info = {}
        if self.torch:
            info["torch"] = self.torch.__version__
            info["cuda_device"] = self.torch.cuda.get_device_name()
        if self.cupy:
            info["cupy"] = self.cupy.__version__
        return info

    def torch_time(self, fn, repeats=20) -> float:
        """Median seconds of `fn` on the GPU (CUDA events), after a warm-up call."""
        torch = self.torch
        fn()
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
        return float(np.median(times))

    def cupy_time(self, fn, repeats=20) -> float:
        cupy = self.cupy
        fn()
        times = []
        for _ in range(repeats):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, end) * 1e-3)
        return float(np.median(times))


def kernel_type(op, bits) -> DataType | None:
    """The data type measured for `op` at a width: the first its peer gives DirectML's result on
    (`Operator.peer.exact_on`: unsigned for the bitwise operators, signed for SIGN, whose kernel
    depends on the kind, floats for IS_NAN); None when the operator takes no such type."""
    return timed_type(op, bits)


class Harness:
    def __init__(self, sizes, repeats, peers: bool):
        self.device = default_device()
        self.sizes = sizes
        self.repeats = repeats
        self.peers = Peers(enabled=peers)
        self.records: list[dict] = []
        self.rng = np.random.default_rng(0)
        biggest = max(sizes)
        # Random input bytes, written once: every case binds prefixes of buffers 0 and 1.
        self.pool = self.rng.integers(0, 256, size=2 * biggest + 64, dtype=np.uint8)
        size = min(2 * biggest, self.device.max_buffer_size)
        self.buffers = [self.device.allocate(size) for _ in range(3)]
        for k in (0, 1):
            self.buffers[k].write(self.pool[k * 16:k * 16 + size])
        self.last_gpu_work = 0.0

    # -- environment -----------------------------------------------------------------------
    def environment(self) -> dict:
        d = self.device
        return {"device": d.name, "device_type": d.type, "driver": d.driver,
                "vendor_id": d.properties["vendor_id"], "python": platform.python_version(),
                "numpy": np.__version__, "host": platform.node(), "time": time.strftime("%Y-%m-%d %H:%M:%S"),
                **self.peers.describe()}

    def warm_up(self, seconds=2.0) -> dict:
        """Sustained work until the GPU clock has ramped (it idles at 345 MHz on an H200)."""
        before = gpu_clocks()
        n = min(max(self.sizes), 256 * MiB) // 4
        desc = TensorDesc(DataType.UINT32, [n])
        compiled = self.device.create_operator(DESC_CLASSES["ELEMENT_WISE_BIT_NOT"](desc, desc))
        binding = [Binding(self.buffers[0], 0, n * 4)], [Binding(self.buffers[2], 0, n * 4)]
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            kernel_seconds(compiled, *binding, repeats=20)
        return {"before": before, "after": gpu_clocks()}

    # -- kernels ---------------------------------------------------------------------------
    def kernel_cases(self):
        for op in OPERATORS:
            if not any(kernel_type(op, bits) for bits in WIDTH_TYPES):
                raise ValueError(f"{op.name}: no data type to measure (its peer is exact on none it takes)")
            for bits in WIDTH_TYPES:
                in_type = kernel_type(op, bits)
                if in_type is None:
                    continue
                out_type = op.default_output or in_type
                for layout in LAYOUTS:
                    for in_place in (False, True):
                        if in_place and (not op.in_place or layout != "contiguous"):
                            continue
                        for size in self.sizes:
                            # 1 GiB only where a target needs it: contiguous, out of place.
                            if size > 256 * MiB and (layout != "contiguous" or in_place):
                                continue
                            yield op, in_type, out_type, layout, in_place, size

    def _kernel_descs(self, op, in_type, out_type, layout, size):
        """Descriptors for `size` bytes of input in this layout; returns (descs, bytes moved)."""
        count = max(1, size // in_type.size)
        cols = max(1, min(count, ROW // in_type.size))
        rows = max(1, count // cols)
        out = TensorDesc(out_type, [rows, cols])
        if layout == "contiguous":
            ins = [TensorDesc(in_type, [rows, cols]) for _ in op.inputs]
            moved = rows * cols * (in_type.size * len(op.inputs) + out_type.size)
        elif layout == "broadcast":  # the last input is one row repeated
            ins = [TensorDesc(in_type, [rows, cols]) for _ in op.inputs[:-1]]
            ins.append(TensorDesc(in_type, [rows, cols], [0, 1]))
            moved = rows * cols * (in_type.size * (len(op.inputs) - 1) + out_type.size) + cols * in_type.size
        else:  # strided: each input row padded to twice its length
            ins = [TensorDesc(in_type, [rows, cols], [2 * cols, 1]) for _ in op.inputs]
            moved = rows * cols * (in_type.size * len(op.inputs) + out_type.size)
        return ins + [out], moved

    def run_kernel_case(self, op, in_type, out_type, layout, in_place, size) -> dict | None:
        descs, moved = self._kernel_descs(op, in_type, out_type, layout, size)
        if any(d.total_size > self.buffers[0].size_in_bytes - 16 for d in descs):
            return None
        compiled = self.device.create_operator(DESC_CLASSES[op.name](*descs))
        inputs = [Binding(self.buffers[k], 0, d.total_size) for k, d in enumerate(descs[:-1])]
        out = Binding(self.buffers[2], 0, descs[-1].total_size)
        logical = [self._logical(k, d, in_type) for k, d in enumerate(descs[:-1])]
        if in_place:  # the input lives in the output buffer: load it, run once and check first
            self.buffers[2].write(self.pool[:descs[0].total_size])
            inputs[0] = out
            compiled.execute(inputs, [out])
            self._check(op, compiled, descs, logical, out, out_type)
        # The SM clock falls within seconds of light load (small cases are light): large cases
        # get a second of their own sustained work first, and the clock is logged after timing.
        if size >= 16 * MiB or time.perf_counter() - self.last_gpu_work > 0.5:
            self._keep_busy(compiled, inputs, out, seconds=1.0)
        seconds = kernel_seconds(compiled, inputs, [out], repeats=self.repeats)
        self.last_gpu_work = time.perf_counter()
        clock = gpu_clocks().get("sm_clock") if size >= 16 * MiB else None
        if not in_place:  # the timed runs' output, checked once
            self._check(op, compiled, descs, logical, out, out_type)
        t = float(np.median(seconds))
        return {"kind": "kernel", "op": op.short, "in_type": in_type.name, "out_type": out_type.name,
                "bits": in_type.bits, "layout": layout, "in_place": in_place, "size": size,
                "bytes_moved": moved, "variant": compiled.variant.name, "seconds": t,
                "seconds_min": float(seconds.min()), "gbps": moved / t / 1e9, "sm_clock": clock}

    def _keep_busy(self, compiled, inputs, out, seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            kernel_seconds(compiled, inputs, [out], repeats=20)

    def _logical(self, k, desc, data_type):
        """Input k's logical elements: a strided view of the bytes written to buffer k."""
        raw = self.pool[k * 16:k * 16 + desc.total_size].view(data_type.numpy)
        return np.lib.stride_tricks.as_strided(
            raw, desc.sizes, [s * data_type.size for s in desc.effective_strides])

    def _check(self, op, compiled, descs, logical, out, out_type):
        """Compare the output with the reference: every element up to 16 MiB, beyond that the
        first and last 4096 and 65536 spread between."""
        n = descs[-1].element_count
        got = out.buffer.read(out.offset, n * out_type.size).view(out_type.numpy)
        index = np.arange(n)
        if n * out_type.size > 16 * MiB:
            index = np.unique(np.concatenate([index[:4096], index[-4096:],
                                              np.linspace(0, n - 1, 65536).astype(np.int64)]))
        coords = np.unravel_index(index, descs[-1].sizes)
        picked = [np.ascontiguousarray(x[coords]) for x in logical]
        if not testing.same_bits(got[index], testing.reference(op, picked, out_type)):
            raise AssertionError(f"{compiled.variant.name}: wrong result")

    def peer_kernel_records(self):
        """The peers' operator (each row's peer, on its measured type, its result checked against
        the reference first) and PyTorch's device copy at each size."""
        p = self.peers
        for size in self.sizes:
            for bits in WIDTH_TYPES:
                n = max(1, size // (bits // 8))
                if p.torch:
                    torch = p.torch
                    dtype = torch_dtype(torch, WIDTH_TYPES[bits])
                    x = torch.randint(-100, 100, (n,), dtype=torch.int64, device="cuda").to(dtype)
                    y = torch.empty_like(x)
                    t = p.torch_time(lambda: y.copy_(x))
                    self.records.append({"kind": "peer", "peer": "torch", "op": "copy", "bits": bits,
                                         "size": size, "seconds": t, "gbps": 2 * n * bits / 8 / t / 1e9})
                    del x, y
                for op in OPERATORS:
                    in_type = kernel_type(op, bits)
                    if in_type is None:
                        continue
                    # The harness's random bytes (amounts below the width for a shift: where the
                    # peers' shift is DirectML's); the check runs on the first CHECKED elements.
                    host = [self.pool[k * 16:k * 16 + n * in_type.size].view(in_type.numpy)
                            for k in range(len(op.inputs))]
                    if op.masks_shift_amount:
                        host[-1] = shift_amount(host[-1])
                    out_type = output_type(op, in_type)
                    m = min(n, CHECKED)
                    expected = testing.reference(op, [h[:m] for h in host], out_type)
                    for name, module in (("torch", p.torch), ("cupy", p.cupy)):
                        fn = peer_function(op, module) if module else None
                        if fn is None:
                            continue
                        if name == "torch":
                            operands = [module.from_numpy(h.view(np.uint8)).cuda().view(torch_dtype(module, in_type))
                                        for h in host]
                            y = module.empty(n, dtype=torch_dtype(module, out_type), device="cuda")
                            timer, fetch = p.torch_time, lambda y: y.cpu().numpy()
                        else:
                            operands = [module.asarray(h) for h in host]
                            y = module.empty(n, out_type.numpy)
                            timer, fetch = p.cupy_time, module.asnumpy
                        try:
                            fn(*[o[:m] for o in operands], out=y[:m])
                        except (RuntimeError, TypeError) as e:  # not implemented for this dtype, or no out=
                            self.records.append({"kind": "peer_skipped", "peer": name, "op": op.short,
                                                 "bits": bits, "size": size, "reason": str(e)[:200]})
                            continue
                        if not testing.same_bits(fetch(y[:m]).view(out_type.numpy), expected):
                            self.records.append({"kind": "peer_skipped", "peer": name, "op": op.short, "bits": bits,
                                                 "size": size, "reason": f"not DirectML's result on {in_type.name}"})
                            continue
                        t = timer(lambda: fn(*operands, out=y))
                        self.records.append({"kind": "peer", "peer": name, "op": op.short, "bits": bits,
                                             "size": size, "seconds": t, "gbps": _moved(op, n, in_type, out_type) / t / 1e9})
                        del operands, y

    # -- against numpy on the host -------------------------------------------------------
    def numpy_target_records(self, nbytes=NUMPY_TARGET_BYTES):
        """dmlgpu against numpy in the same run, `nbytes` of uint32 (issue 12's targets, set for
        CPU drivers such as lavapipe, where numpy is the peer; measured on every device):
        resident NOT on Tensors + synchronize, the numpy front end end to end, and an upload."""
        x = testing.sample(DataType.UINT32, (nbytes // 4,), self.rng)
        o = np.empty_like(x)
        with self.device:
            t, u = Tensor.from_numpy(x), Tensor.empty(x.shape, x.dtype)

        def resident():
            numpy_api.bit_not(t, out=u)
            self.device.synchronize()
        resident()
        assert testing.same_bits(u.numpy(), reference.bit_not(x)), "resident bit_not"
        assert testing.same_bits(numpy_api.bit_not(x), reference.bit_not(x)), "front end bit_not"
        assert testing.same_bits(np.invert(x), reference.bit_not(x)), "numpy's peer"
        cases = (
            ("resident bit_not(T, out=O) + synchronize vs np.invert(x, out=o)", 0.5,
             resident, lambda: np.invert(x, out=o)),
            ("numpy front end bit_not(x) vs np.invert(x)", 0.3,
             lambda: numpy_api.bit_not(x), lambda: np.invert(x)),
            ("Tensor.from_numpy(x) vs x.copy()", 0.3,
             lambda: Tensor.from_numpy(x, self.device), lambda: x.copy()),
        )
        for case, need, ours, peer in cases:
            ours_s, numpy_s = wall_seconds(ours, repeats=7), wall_seconds(peer, repeats=7)
            self.records.append({"kind": "numpy_target", "case": case, "size": nbytes, "target": need,
                                 "seconds": ours_s, "numpy_seconds": numpy_s,
                                 "ratio": numpy_s / ours_s, "met": numpy_s / ours_s >= need})

    # -- the binary-code search ------------------------------------------------------------
    def search_records(self, rows: int, queries: int, k: int = 10, bits: int = 256):
        """`HammingIndex.search` against numpy's exact search, end to end, in the same run: both
        answers checked equal first (distances and rows, ties by lower row)."""
        database = showcases.codes(rows, bits)
        picked = database[self.rng.integers(0, rows, queries)] ^ np.uint8(1)
        with self.device:
            index = dmlgpu.HammingIndex(database)
        ours, expected = index.search(picked, k), showcases.numpy_search(database, picked, k)
        assert all(testing.same_bits(a, b) for a, b in zip(ours, expected)), "HammingIndex.search"
        seconds = wall_seconds(lambda: index.search(picked, k), repeats=7)
        numpy_seconds = wall_seconds(lambda: showcases.numpy_search(database, picked, k), repeats=3)
        self.records.append({"kind": "search", "case": f"{rows} x {bits}-bit codes, {queries} queries, top-{k}",
                             "rows": rows, "queries": queries, "k": k, "bits": bits, "seconds": seconds,
                             "numpy_seconds": numpy_seconds, "ratio": numpy_seconds / seconds,
                             "g_distances_per_s": rows * queries / seconds / 1e9,
                             "numpy_g_distances_per_s": rows * queries / numpy_seconds / 1e9})

    # -- end to end, latency, command lists ------------------------------------------------
    def front_end_records(self, sizes):
        """`bit_not` on uint32 numpy data, end to end, with and without `out=` (a touched array),
        against numpy, PyTorch and CuPy, with the transfer floors of the same size."""
        p = self.peers
        for size in sizes:
            n = size // 4
            x = testing.sample(DataType.UINT32, (n,), self.rng)
            expected = reference.bit_not(x)
            o = np.zeros_like(x)  # written once: no page faults are timed with out=
            assert testing.same_bits(numpy_api.bit_not(x), expected)
            assert testing.same_bits(numpy_api.bit_not(x, out=o), expected)
            assert testing.same_bits(np.invert(x), expected)
            record = {"kind": "front_end", "op": "bit_not", "size": size,
                      "seconds": wall_seconds(lambda: numpy_api.bit_not(x)),
                      "out_seconds": wall_seconds(lambda: numpy_api.bit_not(x, out=o)),
                      "numpy_seconds": wall_seconds(lambda: np.invert(x))}
            if p.torch:
                torch = p.torch
                xi = x.view(np.int32)
                record["torch_seconds"] = wall_seconds(
                    lambda: torch.bitwise_not(torch.from_numpy(xi).cuda()).cpu().numpy())
            if p.cupy:
                cp = p.cupy

                def cupy_call(out=None):
                    return cp.asnumpy(cp.invert(cp.asarray(x)), out=out)

                o.fill(0)
                assert testing.same_bits(cupy_call(), expected) and testing.same_bits(cupy_call(o), expected)
                record["cupy_seconds"] = wall_seconds(cupy_call)
                record["cupy_out_seconds"] = wall_seconds(lambda: cupy_call(o))
            record.update(self.transfer_floors(x.view(np.uint8), o.view(np.uint8)))
            self.records.append(record)

    def transfer_floors(self, src: np.ndarray, dst: np.ndarray) -> dict:
        """What moving these bytes costs at best, measured now: a host memcpy on one thread and
        on the runtime's copy threads (into touched memory), PCIe each way (PyTorch's pinned
        copies, CUDA events), and the runtime's own upload and download (host copies included:
        without PyTorch, the only device-side figure)."""
        size = src.size
        floors = {"memcpy_gbps": size / wall_seconds(lambda: np.copyto(dst, src)) / 1e9,
                  "memcpy_threads": host_copy.copy_threads(size),
                  "memcpy_threads_gbps": size / wall_seconds(lambda: host_copy.copy(dst, src)) / 1e9}
        device = self.device
        buffer = device.allocate(size, zero_fill=False)

        def upload():
            buffer.write(src)
            device.synchronize()

        floors["upload_gbps"] = size / wall_seconds(upload) / 1e9
        floors["download_gbps"] = size / wall_seconds(lambda: buffer.read(out=dst)) / 1e9
        buffer.release()
        if self.peers.torch:
            torch = self.peers.torch
            pinned = torch.empty(size, dtype=torch.uint8, pin_memory=True)
            on_device = torch.empty(size, dtype=torch.uint8, device="cuda")
            floors["pcie_h2d_gbps"] = size / self.peers.torch_time(
                lambda: on_device.copy_(pinned, non_blocking=True)) / 1e9
            floors["pcie_d2h_gbps"] = size / self.peers.torch_time(
                lambda: pinned.copy_(on_device, non_blocking=True)) / 1e9
            floors["pcie_source"] = "torch pinned copies"
            del pinned, on_device
        else:
            floors["pcie_h2d_gbps"], floors["pcie_d2h_gbps"] = floors["upload_gbps"], floors["download_gbps"]
            floors["pcie_source"] = "dmlgpu upload/download"
        return floors


def _moved(op, n, in_type, out_type) -> int:
    """Bytes an operator over n elements reads and writes."""
    return n * (in_type.size * len(op.inputs) + out_type.size)


def wall_seconds(fn, repeats=None, seconds=0.5) -> float:
    """Median wall-clock seconds of `fn` (after one warm-up call)."""
    fn()
    times = []
    deadline = time.perf_counter() + seconds
    while (repeats is None and (time.perf_counter() < deadline or len(times) < 5)) or \
            (repeats is not None and len(times) < repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


#: The harness's parts, in the order they run.
PARTS = ("kernels", "front-end", "numpy", "search", "runtime")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dmlgpu bench", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/out", help="folder for JSON, PNG and markdown")
    parser.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    parser.add_argument("--no-peers", action="store_true", help="skip PyTorch and CuPy")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--skip-kernels", action="store_true",
                        help="skip the kernel-bandwidth cases (the same as --parts without kernels)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated parts to run, of {','.join(PARTS)} (default: all); the report "
                             "is written after each part, so a run cut short keeps what it measured")
    parser.add_argument("--ballast-gib", type=float, default=None,
                        help="device buffers held during the runtime cases (default 4, quick 0.25)")
    parser.add_argument("--ops", nargs="+", choices=[op.short for op in OPERATORS],
                        help="only these operators' kernel cases (default: all)")
    args = parser.parse_args(argv)
    parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        parser.error(f"--parts: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(PARTS)}")
    if args.skip_kernels and "kernels" in parts:
        parts.remove("kernels")
    sizes = [4 * KiB, 64 * KiB] if args.quick else [4 * KiB, 256 * KiB, 16 * MiB, 256 * MiB, 1 * GiB]
    harness = Harness(sizes, args.repeats, peers=not args.no_peers)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = harness.environment()
    print(f"device: {env['device']} ({env['device_type']}; {env['driver']})", flush=True)
    env["clocks_warm_up"] = harness.warm_up(0.2 if args.quick else 2.0)
    env["parts"] = parts
    for part in PARTS:
        if part not in parts:
            continue
        start = time.perf_counter()
        _run_part(part, harness, args)
        print(f"part {part}: {time.perf_counter() - start:.1f} s", flush=True)
        env[f"clocks_after_{part.replace('-', '_')}"] = env["clocks_end"] = gpu_clocks()
        write_report(out, env, harness.records)
    print(f"results in {out}/")
    return 0


def _run_part(part: str, harness: "Harness", args) -> None:
    """Measure one part of the harness into `harness.records`."""
    if part == "kernels":
        cases = [c for c in harness.kernel_cases() if not args.ops or c[0].short in args.ops]
        for case in _progress(cases, "kernels"):
            record = harness.run_kernel_case(*case)
            if record:
                harness.records.append(record)
        harness.peer_kernel_records()
    elif part == "front-end":
        harness.front_end_records([64 * KiB] if args.quick else [1 * MiB, 64 * MiB, 256 * MiB])
    elif part == "numpy":
        harness.numpy_target_records()
    elif part == "search":
        harness.search_records(*((1 << 16, 16) if args.quick else (1 << 20, 1024)))
    else:  # runtime
        harness.device.empty_cache()  # memory cached by the cases above goes back first
        held = bench_runtime.ballast(harness.device, args.ballast_gib if args.ballast_gib is not None
                                     else (0.25 if args.quick else 4.0))
        harness.warm_up(0.2 if args.quick else 1.5)
        harness.records += bench_runtime.records(harness.device, harness.peers.torch, wall_seconds, args.quick,
                                                 peer_function, kernel_type)
        del held
