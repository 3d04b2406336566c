"""Float REDUCE (SUM) against its peers and the device's read floor, one JSON file.

    python benchmarks/reduce.py [--quick] [--out benchmarks/out/reduce.json]

Data: 256 MiB of FLOAT32 (--quick: 64 MiB), normal random values; every result checked once
against the exact sum rounded once (math.fsum) before anything is timed, and its error reported
beside numpy's and torch's.

Rows:
- `kernel`: DML_OPERATOR_REDUCE(SUM) over all elements compiled for the device, GPU time from
  timestamps (median of repeats; its dispatches timed one by one behind a barrier, summed),
  where the data fits one buffer (a GPU: 4 GiB); against
  - the read floor: the fastest plain read of the same bytes measured in this run: a raw Vulkan
    kernel (below: eight `vec4` loads in flight in a grid-stride loop, an uncompensated sum per
    invocation, the grid swept; on a CPU device also one contiguous run per invocation) and, with CuPy on an NVIDIA GPU, the same as a raw CUDA kernel (grid swept);
    torch's device-to-device copy is reported beside it (it moves 2 x the bytes);
  - `torch.sum` of the same float32 data on the GPU (CUDA events, median), same run;
  Where the kernel runs in double accumulators (the device has 64-bit floats: `doubles`), the
  same sum with the triples (as on a device without them) is timed beside it, same bits.
- `size`: (with --sizes, the default) FLOAT32 SUM of whole arrays of 1 KiB to 256 MiB (a CPU
  device: to its largest buffer), the kernel and its triples (GPU time, or a CPU device's) against
  `torch.sum` (on a CPU device `np.sum`, wall clock), every result the same bits.
- `call`: `dmlgpu.sum(t)` on a resident Tensor (+ synchronize), wall clock, against `np.sum` of the
  host array, in alternating rounds (a CPU device shares the host: lavapipe's target is this
  ratio, >= 1.0). On lavapipe 256 MiB spans two 128 MiB buffers (reduced per piece, then merged).

- `axis`: (with --shapes, the default on a GPU) SUM over one axis of (rows, columns) FLOAT32
  arrays from 4 KiB to 256 MiB, either axis, GPU time against `torch.sum(dim=axis)` (a CPU device:
  the call's wall clock against `np.sum(axis=axis)`): a reduction over the leading axis walks with a
  stride, where the lanes must take adjacent columns (short_walks.walks_across).

- `function`: (with --functions, the default on a GPU) integer SUM, MAX, ARGMAX and MIN over 256 MiB
  (--quick: 64 MiB), GPU time against torch's (`torch.sum`, `amax`, `argmax`, `amin`; a CPU device:
  the call against numpy's): the functions that take no float triples.

- `short walks`: (on a GPU) SHORT_FUNCTIONS (32-bit, and INT16 / UINT8 / FLOAT16 picking
  functions) over axis 0 of 256 MiB cut into 2 to 2,048 rows (many output elements of a few
  elements each: short_walks.short_walk, short_quads, short_words), GPU time against torch's
  with dim=0.

Targets (docs/guide/reductions.md): H100/H200 kernel >= 0.9 x the read floor and >= 1.0 x
torch.sum; lavapipe call >= 1.0 x np.sum.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

import dmlgpu
from dmlgpu import Binding, DataType, Tensor, TensorDesc
from dmlgpu.describe.operator_descs import ReduceOperatorDesc
from dmlgpu.table.operators import ReduceFunction

sys.path.insert(0, os.path.dirname(__file__))
from common import cuda_torch, torch_seconds, wall  # noqa: E402

torch = cuda_torch()

MiB = 1 << 20


#: The plainest read a float sum needs: each invocation adds its vec4s (no compensation, no
#: tree), eight loads in flight (one at a time, the read took 2.5x longer on an H200); what it
#: writes is one float per invocation.
READ_KERNEL = """#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer In { vec4 x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform P { uint n4, in_at, out_at; } p;  // (bindings are whole arenas)
void main() {
    uint stride = gl_NumWorkGroups.x * 64u, i = gl_GlobalInvocationID.x;
    vec4 s = vec4(0.0);
    for (; i + 7u * stride < p.n4; i += 8u * stride) {
        vec4 a[8];
        for (uint k = 0u; k < 8u; ++k) a[k] = x[p.in_at + i + k * stride];
        for (uint k = 0u; k < 8u; ++k) s += a[k];
    }
    for (; i < p.n4; i += stride) s += x[p.in_at + i];
    o[p.out_at + gl_GlobalInvocationID.x] = s.x + s.y + s.z + s.w;
}
"""

#: The same read with each invocation taking one contiguous run of the data (the remainder by the
#: first invocations' grid-stride tail): on lavapipe, whose invocations are SIMD lanes of one CPU
#: thread, this was the fastest raw read (benchmarks/NOTES.md, session 14); on a GPU it is slow.
READ_RUNS_KERNEL = """#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer In { vec4 x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform P { uint n4, in_at, out_at; } p;
void main() {
    uint lanes = gl_NumWorkGroups.x * 64u, per = p.n4 / lanes;
    uint i = gl_GlobalInvocationID.x * per, end = i + per;
    vec4 s = vec4(0.0);
    for (; i < end; ++i) s += x[p.in_at + i];
    for (i = lanes * per + gl_GlobalInvocationID.x; i < p.n4; i += lanes) s += x[p.in_at + i];
    o[p.out_at + gl_GlobalInvocationID.x] = s.x + s.y + s.z + s.w;
}
"""

CUDA_READ = r"""extern "C" __global__ void read_sum(const float4* x, unsigned long long n4, float* out) {
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    #pragma unroll 4
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        float4 v = x[i]; s.x += v.x; s.y += v.y; s.z += v.z; s.w += v.w;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = s.x + s.y + s.z + s.w;
}"""


def vulkan_read_seconds(device, source_buffer, nbytes) -> tuple[float, int]:
    """GPU seconds of the raw Vulkan read of `nbytes`, the best of READ_KERNEL and (on a CPU
    device) READ_RUNS_KERNEL over a sweep of grids: (seconds, workgroups; negative for the runs)."""
    from dmlgpu.runtime import Program, shader_compiler
    programs = [(1, Program("read_floor", shader_compiler.spirv(READ_KERNEL), np.zeros(0, np.uint32), 3))]
    if device.is_cpu:
        programs.append((-1, Program("read_floor_runs", shader_compiler.spirv(READ_RUNS_KERNEL),
                                     np.zeros(0, np.uint32), 3)))
    assert source_buffer.arena_offset % 16 == 0
    best = (math.inf, 0)
    program = programs[0][1]
    def read(groups):
        out = device.allocate(groups * 64 * 4)
        return out, device.launch(program, (groups, 1, 1), [source_buffer, out],
                                  np.array([nbytes // 16, source_buffer.arena_offset // 16, out.arena_offset // 4], np.uint32),
                                  reads=[(source_buffer, 0, nbytes)], writes=[(out, 0, out.size_in_bytes)], name="read")
    kept, warm = read(4224)  # (`kept`: its output, alive while `warm` runs)
    end = time.perf_counter() + 2.0  # the clocks up from idle (an H200 idles at 345 MHz) before timing
    while time.perf_counter() < end:
        device.time_dispatches(warm, 20)
    for sign, program in programs:
        for groups in (64, 256, 1024, 2112, 4224, 8448, 16384, 65536):
            out, launch = read(groups)
            best = min(best, (float(np.median(device.time_dispatches(launch, 10))), sign * groups))
    return best


def cuda_read_seconds(x) -> tuple[float, int]:
    """GPU seconds of the raw CUDA read of host array `x` once on the GPU, the best grid of a sweep."""
    import cupy
    kernel = cupy.RawKernel(CUDA_READ, "read_sum")
    data = cupy.asarray(x)
    n4 = x.nbytes // 16
    best = (math.inf, 0)
    for blocks in (264, 528, 1056, 2112, 4224, 8448, 16896):
        out = cupy.empty(blocks * 256, cupy.float32)
        run = lambda: kernel((blocks,), (256,), (data, np.uint64(n4), out))  # noqa: E731
        run()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        times = []
        for _ in range(20):
            start.record(); run(); end.record(); end.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
        best = min(best, (float(np.median(times)), blocks))
    return best


def error(value, exact) -> float:
    return abs(float(value) - exact)


def kernel_run(device, desc, source, out_bytes) -> tuple:
    """REDUCE `desc` compiled for `device`, run once over the Buffer `source`: (its output's
    bytes, GPU seconds of each of its dispatches timed alone behind a barrier, the compiled
    operator, GPU seconds of all its dispatches in order with their barriers: median of 20)."""
    compiled = device.create_operator(desc)
    out = device.allocate(max(16, out_bytes))
    bindings = [Binding(source)], [Binding(out)]
    compiled.execute(*bindings)
    got = out.read()[:out_bytes]
    launches = compiled.launches(compiled.check(*bindings))
    times = [float(np.median(device.time_dispatches(launch, 20))) for launch in launches]
    seconds = times[0] if len(launches) == 1 else float(np.median(device.time_dispatches(launches, 20)))
    return got, times, compiled, seconds


#: (rows, columns) of the axis sweep: 4 KiB to 256 MiB of FLOAT32, wide and narrow.
SHAPES = [(32, 32), (64, 1024), (1024, 1024), (16384, 1024), (65536, 1024), (1 << 20, 16), (1 << 22, 16),
          (16, 1 << 22), (4, 1 << 24)]
QUICK_SHAPES = [(32, 32), (64, 1024), (1024, 1024), (16384, 1024), (1 << 20, 16), (16, 1 << 20)]


#: Bytes of the whole-array sweep: 1 KiB to 256 MiB (64 MiB on a CPU device).
SIZES = [1 << k for k in range(10, 29, 2)]


def triples_kernel_run(device, n, source) -> tuple:
    """kernel_run of FLOAT32 SUM over `n` elements with the triples, as on a device without 64-bit
    floats (the DOUBLES variant's peer, same run): compiled with the device's "float64" off (its
    strides given, so the descriptor is compiled anew, not the one the device remembers)."""
    desc = ReduceOperatorDesc(TensorDesc(DataType.FLOAT32, (n,), strides=(1,)), TensorDesc(DataType.FLOAT32, (1,)),
                              ReduceFunction.SUM, (0,))
    had = device.properties["float64"]
    device.properties["float64"] = False
    try:
        return kernel_run(device, desc, source, 4)
    finally:
        device.properties["float64"] = had


def size_rows(device) -> list:
    """FLOAT32 SUM of whole arrays of SIZES: the kernel (GPU time, or a CPU device's), its triples
    (triples_kernel_run) and torch.sum (np.sum on a CPU device, wall), each checked bit for bit
    against the correctly rounded sum."""
    rng = np.random.default_rng(3)
    rows = []
    for nbytes in SIZES:
        if nbytes > device.max_buffer_size:
            break
        n = nbytes // 4
        x = rng.standard_normal(n).astype(np.float32)
        want = np.float32(math.fsum(x.astype(np.float64)))
        source = device.upload(x)
        desc = ReduceOperatorDesc(TensorDesc(DataType.FLOAT32, (n,)), TensorDesc(DataType.FLOAT32, (1,)),
                                  ReduceFunction.SUM, (0,))
        raw, times, compiled, seconds = kernel_run(device, desc, source, 4)
        triples_raw, _, _, triples_seconds = triples_kernel_run(device, n, source)
        for got in (raw, triples_raw):
            assert abs(float(got.view(np.float32)[0]) - float(want)) <= abs(float(np.spacing(want))), (nbytes, got, want)
        assert raw.tobytes() == triples_raw.tobytes(), nbytes
        row = {"case": f"SUM of {nbytes} bytes FLOAT32", "bytes": nbytes, "seconds": seconds,
               "triples_seconds": triples_seconds, "doubles": compiled.doubles,
               "vs_triples": triples_seconds / seconds}
        if torch and not device.is_cpu:
            tx = torch.from_numpy(x).cuda()
            row["torch_sum_seconds"] = torch_seconds(lambda: torch.sum(tx))
            row["vs_torch_sum"] = row["torch_sum_seconds"] / seconds
        elif device.is_cpu:
            row["numpy_sum_seconds"] = min(wall(lambda: np.sum(x), 3) for _ in range(5))
            row["vs_numpy_sum"] = row["numpy_sum_seconds"] / seconds
        rows.append(row)
        del source
    return rows


def axis_rows(device, shapes) -> list:
    """SUM over each axis of each shape: ours (GPU time, or a CPU device's call) against torch.sum
    or np.sum, each result checked against float64 sums first."""
    rng = np.random.default_rng(2)
    rows = []
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        tx = torch.from_numpy(x).cuda() if torch and not device.is_cpu else None
        for axis in (0, 1):
            want = np.sum(x.astype(np.float64), axis=axis)
            out_shape = tuple(1 if d == axis else n for d, n in enumerate(shape))
            row = {"case": f"SUM over axis {axis} of {shape[0]} x {shape[1]} FLOAT32", "shape": list(shape),
                   "axis": axis, "bytes": x.nbytes}
            if device.is_cpu:
                t = Tensor.from_numpy(x, device)
                got = dmlgpu.sum(t, axis=axis).numpy()
                calls = {"ours": lambda: (dmlgpu.sum(t, axis=axis), device.synchronize()),
                         "numpy": lambda: np.sum(x, axis=axis)}
                rounds = {name: [wall(fn, 3) for _ in range(5)] for name, fn in calls.items()}
                row |= {"seconds": min(rounds["ours"]), "numpy_sum_seconds": min(rounds["numpy"])}
                row["vs_numpy_sum"] = row["numpy_sum_seconds"] / row["seconds"]
            else:
                desc = ReduceOperatorDesc(TensorDesc(DataType.FLOAT32, shape), TensorDesc(DataType.FLOAT32, out_shape),
                                          ReduceFunction.SUM, (axis,))
                raw, times, compiled, seconds = kernel_run(device, desc, device.upload(x), 4 * math.prod(out_shape))
                got = raw.view(np.float32)
                row |= {"seconds": seconds, "dispatch_seconds": times, "cut": compiled.shape._asdict(),
                        "doubles": compiled.doubles}
                if tx is not None:
                    row["torch_sum_seconds"] = torch_seconds(lambda: torch.sum(tx, dim=axis))
                    row["vs_torch_sum"] = row["torch_sum_seconds"] / row["seconds"]
            assert np.allclose(np.asarray(got).reshape(-1), want.reshape(-1), rtol=1e-5, atol=1e-5), row["case"]
            rows.append(row)
        del tx
    return rows


#: (function, input type, torch's, numpy's) of the functions sweep.
FUNCTIONS = [("SUM", np.int32, "sum", "sum"), ("MAX", np.float32, "amax", "max"), ("ARGMAX", np.float32, "argmax", "argmax"),
             ("MIN", np.uint8, "amin", "min"), ("MAX", np.int16, "amax", "max"), ("SUM", np.float16, "sum", "sum")]


def function_rows(device, nbytes) -> list:
    """Each of FUNCTIONS over `nbytes` of one dimension: ours (GPU time, or a CPU device's call)
    against torch's (or numpy's), each result checked against numpy's first."""
    rng = np.random.default_rng(3)
    rows = []
    for name, dtype, torch_name, numpy_name in FUNCTIONS:
        n = nbytes // np.dtype(dtype).itemsize
        floats = np.dtype(dtype).kind == "f" and name == "SUM"  # (normal data: a sum in FLOAT16's range)
        x = (rng.standard_normal(n) if floats else rng.integers(0, 100, n)).astype(dtype)
        function = getattr(ReduceFunction, name)
        out_type = DataType.UINT32 if name.startswith("ARG") else DataType.from_numpy(x.dtype)
        want = getattr(np, numpy_name)(x)
        row = {"case": f"REDUCE({name}) over {nbytes // MiB} MiB {np.dtype(dtype).name}", "bytes": nbytes}
        if device.is_cpu:
            t = Tensor.from_numpy(x, device)
            ours = getattr(dmlgpu, numpy_name)
            got = ours(t).numpy()
            calls = {"ours": lambda: (ours(t), device.synchronize()), "numpy": lambda: getattr(np, numpy_name)(x)}
            rounds = {key: [wall(fn, 3) for _ in range(5)] for key, fn in calls.items()}
            row |= {"seconds": min(rounds["ours"]), "numpy_seconds": min(rounds["numpy"])}
            row["vs_numpy"] = row["numpy_seconds"] / row["seconds"]
        else:
            desc = ReduceOperatorDesc(TensorDesc(DataType.from_numpy(x.dtype), (x.size,)), TensorDesc(out_type, (1,)),
                                      function, (0,))
            raw, times, compiled, seconds = kernel_run(device, desc, device.upload(x), out_type.size)
            got = raw.view(out_type.numpy)[0]
            row |= {"seconds": seconds, "dispatch_seconds": times, "cut": compiled.shape._asdict()}
            if torch:
                tx = torch.from_numpy(x).cuda()
                peer = getattr(torch, torch_name)
                row["torch_seconds"] = torch_seconds(lambda: peer(tx))
                row["vs_torch"] = row["torch_seconds"] / row["seconds"]
                del tx
        if floats:  # (the correctly rounded sum: the float64 sum's, a double rounding apart at most)
            want = np.sum(x.astype(np.float64))
            assert abs(float(got) - want) <= float(np.spacing(np.float16(want))), row["case"]
            rows.append(row)
            continue
        if name == "SUM":
            want = np.array(want).astype(x.dtype)  # (DirectML's SUM wraps at the input's width)
        assert np.array_equal(np.asarray(got).reshape(()), np.asarray(want).astype(np.asarray(got).dtype)), row["case"]
        rows.append(row)
    return rows


#: (rows, columns) of the short-walks sweep: 256 MiB of 32-bit elements reduced over axis 0,
#: each output element from 2 to 64 of them (GPUs: short_walks.short_walk; these columns come in
#: quads: short_quads), and the steps past the short pipelines' limits: 3 and 5 rows (192 and 160
#: MiB), 9 and 17 rows (144 and 272 MiB: past QUAD_WALK's halves), 33 (132 MiB), 129 rows (129 MiB:
#: past QUICK_WALK, float sums on the general pipeline), 256 and 257 (past the 256-row step picking
#: functions had in quad rounds until session 19), 1,024 and 2,048 (past the short pipelines: two
#: chunks an output element).
SHORT_SHAPES = [(2, 1 << 25), (3, 1 << 24), (4, 1 << 24), (5, 1 << 23), (8, 1 << 23), (9, 1 << 22), (16, 1 << 22),
                (17, 1 << 22), (32, 1 << 21), (33, 1 << 20), (64, 1 << 20), (128, 1 << 19), (129, 1 << 18),
                (256, 1 << 18), (257, 1 << 18), (1024, 1 << 16), (2048, 1 << 15)]
#: (function, input type, torch's) of the short-walks sweep.
#: 8/16-bit types take as many more columns as fit in the same bytes (short_walks.short_words).
SHORT_FUNCTIONS = [("SUM", np.float32, "sum"), ("MAX", np.float32, "amax"), ("SUM", np.int32, "sum"),
                   ("MIN", np.int32, "amin"), ("ARGMAX", np.float32, "argmax"), ("MAX", np.int16, "amax"),
                   ("MIN", np.uint8, "amin"), ("MAX", np.float16, "amax"), ("SUM", np.float16, "sum")]


def short_walk_rows(device, functions=SHORT_FUNCTIONS) -> list:
    """`functions` (of SHORT_FUNCTIONS) over axis 0 of SHORT_SHAPES on a GPU: ours (GPU time)
    against torch's with dim=0, each result checked against numpy's first (float sums: against
    float64 sums)."""
    rng = np.random.default_rng(4)
    rows = []
    for rows_columns in SHORT_SHAPES:
        for name, dtype, torch_name in functions:
            shape = (rows_columns[0], rows_columns[1] * 4 // np.dtype(dtype).itemsize)
            x = (rng.standard_normal(shape) if np.dtype(dtype).kind == "f" else rng.integers(-100, 100, shape)).astype(dtype)
            function = getattr(ReduceFunction, name)
            out_shape = (1, shape[1])
            out_type = np.dtype(np.uint32) if name == "ARGMAX" else x.dtype
            desc = ReduceOperatorDesc(TensorDesc(DataType.from_numpy(x.dtype), shape),
                                      TensorDesc(DataType.from_numpy(out_type), out_shape), function, (0,))
            raw, times, compiled, seconds = kernel_run(device, desc, device.upload(x), out_type.itemsize * shape[1])
            got = raw.view(out_type)
            if name == "SUM" and x.dtype.kind == "f":  # (FLOAT16: the float64 sums rounded, a double rounding apart)
                want = np.sum(x.astype(np.float64), axis=0)
                tolerance = np.spacing(want.astype(x.dtype)).astype(np.float64) if x.dtype.itemsize == 2 else 1e-5
                assert np.all(np.abs(got.astype(np.float64) - want) <= np.maximum(tolerance, 1e-5 * np.abs(want))), shape
            else:
                want = {"MAX": np.max, "MIN": np.min, "ARGMAX": np.argmax}.get(name, np.sum)(x, axis=0).astype(out_type)
                assert np.array_equal(got, want), (name, shape)
            row = {"case": f"REDUCE({name}) over axis 0 of {shape[0]} x {shape[1]} {x.dtype.name}", "shape": list(shape),
                   "bytes": x.nbytes, "seconds": seconds, "dispatch_seconds": times,
                   "cut": compiled.shape._asdict(), "short_walk": compiled.short_walk,
                   "short_quads": compiled.short_quads, "short_words": compiled.short_words, "quick": compiled.quick}
            if torch:
                tx = torch.from_numpy(x).cuda()
                peer = getattr(torch, torch_name)
                row["torch_seconds"] = torch_seconds(lambda: peer(tx, dim=0))
                row["vs_torch"] = row["torch_seconds"] / row["seconds"]
                del tx
            rows.append(row)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 MiB (a CPU driver such as lavapipe)")
    parser.add_argument("--shapes", action=argparse.BooleanOptionalAction, default=None,
                        help="the axis sweep (default: on a GPU; --quick: its smaller shapes)")
    parser.add_argument("--sizes", action=argparse.BooleanOptionalAction, default=True,
                        help="the whole-array sweep, 1 KiB up (SIZES), with the triples beside")
    parser.add_argument("--functions", action=argparse.BooleanOptionalAction, default=None,
                        help="the functions sweep (default: on a GPU)")
    parser.add_argument("--short-walks", action=argparse.BooleanOptionalAction, default=None,
                        help="the short-walks sweep (default: on a GPU)")
    parser.add_argument("--short-functions", default=None,
                        help="the short-walks sweep's functions only, e.g. MAX:int16,MIN:uint8 (default: all)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out", "reduce.json"))
    args = parser.parse_args(argv)
    short_functions = SHORT_FUNCTIONS
    if args.short_functions:
        wanted = {tuple(item.split(":")) for item in args.short_functions.split(",")}
        short_functions = [f for f in SHORT_FUNCTIONS if (f[0], np.dtype(f[1]).name) in wanted]
        if len(short_functions) != len(wanted):
            parser.error(f"--short-functions {args.short_functions}: known "
                         f"{','.join(f'{f[0]}:{np.dtype(f[1]).name}' for f in SHORT_FUNCTIONS)}")
    device = dmlgpu.default_device()
    nbytes = (64 if args.quick else 256) * MiB
    n = nbytes // 4
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    exact = math.fsum(x.astype(np.float64))
    expected = np.float32(exact)  # (fsum rounds the exact sum once; float32 of it: a tie at most apart)
    report = {"device": device.name, "type": device.type, "driver": device.driver, "bytes": nbytes,
              "torch": torch.__version__ if torch else None, "numpy": np.__version__, "rows": []}
    if nbytes <= device.max_buffer_size:
        desc = ReduceOperatorDesc(TensorDesc(DataType.FLOAT32, (n,)), TensorDesc(DataType.FLOAT32, (1,)),
                                  ReduceFunction.SUM, (0,))
        source_buffer = device.upload(x)
        floors = {}
        floors["vulkan_read_seconds"], floors["vulkan_read_groups"] = vulkan_read_seconds(device, source_buffer, nbytes)
        if torch:
            try:
                floors["cuda_read_seconds"], floors["cuda_read_blocks"] = cuda_read_seconds(x)
            except Exception as e:  # (no CuPy, or no NVRTC for it)
                floors["cuda_read_error"] = repr(e)
            a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
            floors["torch_copy_seconds"] = torch_seconds(lambda: a.clone())
            del a
        floor = min(floors.get("vulkan_read_seconds"), floors.get("cuda_read_seconds", math.inf))
        report |= floors
        raw, times, compiled, seconds = kernel_run(device, desc, source_buffer, 4)
        got = raw.view(np.float32)[0]
        assert got == expected, (got, expected)
        row = {"case": f"REDUCE(SUM) over {nbytes // MiB} MiB FLOAT32, GPU time", "seconds": seconds,
               "dispatch_seconds": times, "shape": compiled.shape._asdict(), "floor_seconds": floor,
               "of_floor": floor / seconds, "error": error(got, exact), "doubles": compiled.doubles}
        if compiled.doubles:
            triples_raw, _, _, triples_seconds = triples_kernel_run(device, n, source_buffer)
            assert triples_raw.tobytes() == raw.tobytes()
            row |= {"triples_seconds": triples_seconds, "triples_of_floor": floor / triples_seconds}
        if torch:
            tx = torch.from_numpy(x).cuda()
            row |= {"torch_sum_seconds": torch_seconds(lambda: torch.sum(tx)),
                    "torch_error": error(torch.sum(tx).item(), exact)}
            row["vs_torch_sum"] = row["torch_sum_seconds"] / row["seconds"]
            del tx
        report["rows"].append(row)
        del source_buffer

    t = Tensor.from_numpy(x, device)
    got = dmlgpu.sum(t).numpy()
    assert got == expected, (got, expected)
    calls = {"ours": lambda: (dmlgpu.sum(t), device.synchronize()), "numpy": lambda: np.sum(x)}
    rounds = {name: [] for name in calls}
    for fn in calls.values():
        fn()
    for _ in range(5 if args.quick else 9):
        for name, fn in calls.items():
            rounds[name].append(wall(fn, 3))
    ours, peer = (float(np.median(rounds[name])) for name in ("ours", "numpy"))
    report["rows"].append({"case": f"dmlgpu.sum of a resident {nbytes // MiB} MiB FLOAT32 Tensor "
                                   f"({len(getattr(t.buffer, 'buffers', [t.buffer]))} buffer(s)), wall + synchronize",
                           "seconds": ours, "numpy_sum_seconds": peer, "vs_numpy_sum": peer / ours,
                           "error": error(got, exact), "numpy_error": error(np.sum(x), exact)})
    if nbytes <= device.max_buffer_size:
        report["rows"][-1]["floor_seconds"] = floor
        report["rows"][-1]["of_floor"] = floor / ours
        report["rows"][-1]["numpy_vs_floor"] = floor / peer  # < 1: the read floor is slower than np.sum
    if args.sizes:
        report["rows"] += size_rows(device)
    if args.shapes or (args.shapes is None and not device.is_cpu):
        report["rows"] += axis_rows(device, QUICK_SHAPES if args.quick else SHAPES)
    if args.functions or (args.functions is None and not device.is_cpu):
        report["rows"] += function_rows(device, nbytes)
    if (args.short_walks or args.short_walks is None) and not device.is_cpu:
        report["rows"] += short_walk_rows(device, short_functions)
    if device.is_cpu:
        report["load_average"] = os.getloadavg()
        report["cpu_count"] = os.cpu_count()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    for r in report["rows"]:
        ratios = ", ".join(f"{k} {v:.3g}" for k, v in r.items() if k.startswith(("vs_", "of_")))
        print(f"{r['case']}: {r['seconds'] * 1e3:.3g} ms ({ratios})")
    print(f"wrote {args.out} ({time.strftime('%Y-%m-%d %H:%M')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
