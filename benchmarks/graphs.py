"""Fused graphs against their peers (issue 23's targets), one JSON file of rows.

    python benchmarks/graphs.py [--quick] [--out graphs.json]

Rows (each checked bit for bit once before it is timed; kernel times from GPU timestamps,
median of repeats; peers measured in the same run, skipped when absent):
- int4 unpack of `uint8` (256 MiB; --quick 16 MiB): `compile_graph` and `dmlgpu.fuse` against
  torch eager (`w & 15`, `w >> 4`), torch.compile, numpy, and the floor: 1 read + 2 writes at the
  device copy bandwidth measured in this run (torch's device-to-device copy; without torch,
  dmlgpu's own flat `bit_not`);
- the 7-step chain (`x^y`, `<<3`, `&m`, `|k`, `~`, `>>1`, `^x`) on `uint32` plus a final
  `BIT_COUNT -> uint8`: the graph against torch eager/compile of the 7 steps, numpy step by step,
  and its floor (2 reads, 1 write + the uint8 counts);
- a command list of 1,000 dependent tiny steps cycling NOT/XOR/SHL/SHR/SIGN/BIT_COUNT, replay +
  synchronize per step, against a CUDA graph of NOT/XOR/SHL/SHR/SIGN (torch has no popcount);
- plain `bit_and(w_u8, 15, out=)` against `torch.bitwise_and(w, 15, out=)`;
- first-call time of a new graph (compile + first execution; with and without making its
  buffers; the pipeline creation in it) and the cache-hit time of compiling it again, both on
  this device (`benchmarks/first_call.py` breaks a first call down in fresh processes).

On a CPU device (lavapipe) the report also has `cpu_targets`, issue 23's two lavapipe ratios
(numpy's time / ours, same run): the int4 unpack (>= 1.0) and the 8-step chain (>= 1.5), each
timed as a user calls it: `dmlgpu.fuse` on resident Tensors returning new Tensors (wall clock,
+ synchronize) against numpy's expressions returning new arrays, in alternating rounds (medians),
with the load average of the machine; beside them `compile_graph`'s execute into kept outputs
against numpy's expressions and against numpy writing into kept arrays (`out=`)
(benchmarks/NOTES.md, "Fused graphs against numpy on lavapipe").
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import dmlgpu  # noqa: E402
from dmlgpu import Binding, DataType, Tensor, TensorDesc, testing  # noqa: E402
from common import command_list, cuda_torch, torch_seconds, wall  # noqa: E402
from graph_cases import int4_unpack, seven_step_chain  # noqa: E402

torch = cuda_torch()

MiB = 1 << 20
U8, U32 = DataType.UINT8, DataType.UINT32


def gpu_seconds(device, launch, repeats=20) -> float:
    return float(np.median(device.time_dispatches(launch, repeats)))


def alternating(calls: dict, rounds=9, repeats=3) -> dict:
    """Median seconds of each call, timed in alternating rounds (each round: every call, the
    median of `repeats` runs), so a machine whose load changes during the run (a CPU device
    shares the host) weighs on every call alike."""
    times = {name: [] for name in calls}
    for fn in calls.values():
        fn()
    for _ in range(rounds):
        for name, fn in calls.items():
            times[name].append(wall(fn, repeats))
    return {name: float(np.median(t)) for name, t in times.items()}


def cpu_target(target, numpy, numpy_out, fuse, graph, ours_text, numpy_text) -> dict:
    """One of issue 23's lavapipe ratios: numpy's expressions, numpy into kept arrays (`out=`),
    our `fuse` call and `compile_graph`'s execute into kept outputs, timed in alternating rounds."""
    t_ = alternating({"numpy": numpy, "numpy_out": numpy_out, "fuse": fuse, "graph": graph})
    return {"target": target, "ratio": t_["numpy"] / t_["fuse"], "seconds": t_["fuse"], "numpy_seconds": t_["numpy"],
            "graph_execute_seconds": t_["graph"], "ratio_graph_execute": t_["numpy"] / t_["graph"],
            "numpy_out_seconds": t_["numpy_out"], "ratio_vs_numpy_out": t_["numpy_out"] / t_["graph"],
            "ours": ours_text, "numpy": numpy_text}


def seven_steps(a, b):
    """The 7-step chain + BIT_COUNT -> uint8, written with dmlgpu's Tensor operators (for `fuse`)."""
    t = a ^ b
    t = t << 3
    t = t & 0x0F0F0F0F
    t = t | 0x10101010
    t = ~t
    t = t >> 1
    t = t ^ a
    return t, dmlgpu.bit_count(t, dtype=np.uint8)


def copy_bandwidth(device, nbytes) -> tuple[float, str]:
    """Device bytes moved per second (reads + writes) by a plain copy of `nbytes`."""
    if torch:
        a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        return 2 * nbytes / torch_seconds(lambda: b.copy_(a)), "torch device-to-device copy"
    desc = TensorDesc(U32, (nbytes // 4,))
    compiled = device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
    a, b = device.allocate(nbytes), device.allocate(nbytes)
    launch = compiled.launch(compiled.check([Binding(a)], [Binding(b)]))
    return 2 * nbytes / gpu_seconds(device, launch), "dmlgpu flat bit_not (1 read, 1 write)"


def numpy_chain(x, y):
    t = x ^ y
    t = t << 3
    t &= 0x0F0F0F0F
    t |= 0x10101010
    t = ~t
    t >>= 1
    t ^= x
    return t, np.bitwise_count(t).astype(np.uint8)


def numpy_chain_out(x, y, t, counts):
    """numpy_chain into kept arrays (`t` like x, `counts` uint8): no allocation at all."""
    np.bitwise_xor(x, y, out=t)
    np.left_shift(t, 3, out=t)
    np.bitwise_and(t, 0x0F0F0F0F, out=t)
    np.bitwise_or(t, 0x10101010, out=t)
    np.invert(t, out=t)
    np.right_shift(t, 1, out=t)
    np.bitwise_xor(t, x, out=t)
    np.bitwise_count(t, out=counts)
    return t, counts


def timed_graph(device, desc, inputs, out_sizes):
    """(compiled, launch, bindings, first-call times, cache-hit seconds). First-call times:
    `first_call_seconds` (inputs uploaded, outputs allocated, compile, execute, wait),
    `first_call_compute_seconds` (the same without the buffers, made first) and
    `first_call_pipeline_seconds` (the pipeline creation in it: the driver's compilation)."""
    start = time.perf_counter()
    ins = [Binding(device.upload(x)) for x in inputs]
    outs = [Binding(device.allocate(s, zero_fill=False)) for s in out_sizes]
    device.synchronize()
    buffers = time.perf_counter() - start
    pipeline = device.pipeline_stats()["pipeline_seconds"]
    start = time.perf_counter()
    compiled = device.compile_graph(desc)
    compiled.execute(ins, outs)
    device.synchronize()
    compute = time.perf_counter() - start
    first = {"first_call_seconds": buffers + compute, "first_call_compute_seconds": compute,
             "first_call_pipeline_seconds": device.pipeline_stats()["pipeline_seconds"] - pipeline}
    start = time.perf_counter()
    again = device.compile_graph(desc)
    again.execute(ins, outs)
    device.synchronize()
    hit = time.perf_counter() - start
    launch, = compiled.launches(*compiled.check(ins, outs))
    return compiled, launch, ins, outs, first, hit


def row(name, ours, floor=None, **peers) -> dict:
    record = {"case": name, "seconds": ours}
    if floor:
        record["floor_seconds"] = floor
        record["of_floor"] = floor / ours
    for peer, seconds in peers.items():
        if seconds is not None:
            record[f"{peer}_seconds"] = seconds
            record[f"vs_{peer}"] = seconds / ours
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 MiB cases (a CPU driver such as lavapipe)")
    parser.add_argument("--out", default="graphs.json")
    args = parser.parse_args(argv)
    device = dmlgpu.default_device()
    nbytes = (16 if args.quick else 256) * MiB
    rng = np.random.default_rng(1)
    rows = []
    bandwidth, source = copy_bandwidth(device, nbytes)

    # int4 unpack
    w = rng.integers(0, 256, nbytes, dtype=np.uint8)
    compiled, launch, ins, outs, first, hit = timed_graph(device, int4_unpack(nbytes), [w], [nbytes, nbytes])
    assert testing.same_bits(outs[0].buffer.read().view(np.uint8), w & 15)
    assert testing.same_bits(outs[1].buffer.read().view(np.uint8), w >> 4)
    ours = gpu_seconds(device, launch)
    fused = dmlgpu.fuse(lambda x: (x & 15, x >> 4))
    tw = Tensor.from_numpy(w)
    lo, hi = fused(tw)
    assert testing.same_bits(lo.numpy(), w & 15) and testing.same_bits(hi.numpy(), w >> 4)
    del lo, hi  # as a loop that drops each call's results
    # A GPU's wall-clock rows after 1.5 s of the same calls: the downloads above left it idle.
    warm = 0.0 if device.is_cpu else 1.5
    fuse_wall = wall(lambda: (fused(tw), device.synchronize()), warm_seconds=warm)
    peers = {}
    if torch:
        tt = torch.from_numpy(w).cuda()
        peers["torch_eager"] = torch_seconds(lambda: (tt & 15, tt >> 4))
        compiled_peer = torch.compile(lambda x: (x & 15, x >> 4))
        peers["torch_compile"] = torch_seconds(lambda: compiled_peer(tt))
    cpu_targets = {}
    if device.is_cpu:
        lo_np, hi_np = np.empty_like(w), np.empty_like(w)
        cpu_targets["int4 unpack"] = cpu_target(
            1.0, lambda: (w & 15, w >> 4),
            lambda: (np.bitwise_and(w, 15, out=lo_np), np.right_shift(w, 4, out=hi_np)),
            lambda: (fused(tw), device.synchronize()), lambda: (compiled.execute(ins, outs), device.synchronize()),
            "dmlgpu.fuse(lambda x: (x & 15, x >> 4)) on a resident Tensor, new Tensors, + synchronize",
            "(w & 15, w >> 4), new arrays")
        peers["numpy"] = cpu_targets["int4 unpack"]["numpy_seconds"]
    rows.append(row(f"int4 unpack {nbytes // MiB} MiB uint8: compile_graph (GPU time)", ours,
                    3 * nbytes / bandwidth, **peers) | {
        **first, "cache_hit_seconds": hit, "dispatches": compiled.dispatches})
    rows.append(row(f"int4 unpack {nbytes // MiB} MiB uint8: dmlgpu.fuse on Tensors (wall, + sync)", fuse_wall,
                    3 * nbytes / bandwidth, **peers))
    same_wall = wall(lambda: (compiled.execute(ins, outs), device.synchronize()), warm_seconds=warm)
    rows.append(row(f"int4 unpack {nbytes // MiB} MiB uint8: compile_graph execute, same bindings (wall, + sync)",
                    same_wall, 3 * nbytes / bandwidth, **peers))
    lo_t, hi_t = Tensor.empty((nbytes,), np.uint8), Tensor.empty((nbytes,), np.uint8)
    two = wall(lambda: (dmlgpu.bit_and(tw, 15, out=lo_t), dmlgpu.bit_shift_right(tw, 4, out=hi_t),
                        device.synchronize()), warm_seconds=warm)
    rows.append(row(f"int4 unpack {nbytes // MiB} MiB uint8: two plain calls with out= (wall, + sync)", two,
                    3 * nbytes / bandwidth, **peers))

    # plain bit_and(w, 15, out=)
    desc_p, desc_s = TensorDesc(U8, (nbytes,)), TensorDesc(U8, (nbytes,), (0,))
    plain = device.create_operator(dmlgpu.ElementWiseBitAndOperatorDesc(desc_p, desc_s, desc_p))
    fifteen = device.upload(np.array([15], np.uint8))
    plain_launch = plain.launch(plain.check([Binding(tw.buffer), Binding(fifteen)], [Binding(lo_t.buffer)]))
    peer = {}
    if torch:
        out_t = torch.empty_like(tt)
        peer["torch"] = torch_seconds(lambda: torch.bitwise_and(tt, 15, out=out_t))
    if device.is_cpu:
        out_np = np.empty_like(w)
        peer["numpy"] = wall(lambda: np.bitwise_and(w, 15, out=out_np))
    rows.append(row(f"bit_and(w_u8, 15, out=) {nbytes // MiB} MiB (GPU time, layout {plain.layout})",
                    gpu_seconds(device, plain_launch), 2 * nbytes / bandwidth, **peer))

    # 7-step chain + BIT_COUNT -> uint8
    n = nbytes // 4
    x = rng.integers(0, 2**32, n, dtype=np.uint32)
    y = rng.integers(0, 2**32, n, dtype=np.uint32)
    compiled, launch, ins, outs, first, hit = timed_graph(device, seven_step_chain(n), [x, y], [4 * n, n])
    t, counts = numpy_chain(x, y)
    assert testing.same_bits(outs[0].buffer.read().view(np.uint32), t)
    assert testing.same_bits(outs[1].buffer.read().view(np.uint8)[:n], counts)
    peers = {}
    if torch:
        tx, ty = torch.from_numpy(x.view(np.int32)).cuda(), torch.from_numpy(y.view(np.int32)).cuda()

        def seven(a, b):
            t = a ^ b
            t = t << 3
            t = t & 0x0F0F0F0F
            t = t | 0x10101010
            t = ~t
            t = (t >> 1) & 0x7FFFFFFF  # a logical shift of int32 (torch's uint32 shifts are partial)
            return t ^ a
        peers["torch_eager"] = torch_seconds(lambda: seven(tx, ty))
        compiled_seven = torch.compile(seven)
        peers["torch_compile"] = torch_seconds(lambda: compiled_seven(tx, ty))
    if device.is_cpu:
        fused_chain = dmlgpu.fuse(seven_steps)
        tx, ty = Tensor.from_numpy(x), Tensor.from_numpy(y)
        ft, fc = fused_chain(tx, ty)
        assert testing.same_bits(ft.numpy(), t) and testing.same_bits(fc.numpy(), counts)
        t_np, c_np = np.empty_like(x), np.empty(n, np.uint8)
        assert testing.same_bits(numpy_chain_out(x, y, t_np, c_np)[1], counts)
        cpu_targets["8-step chain"] = cpu_target(
            1.5, lambda: numpy_chain(x, y), lambda: numpy_chain_out(x, y, t_np, c_np),
            lambda: (fused_chain(tx, ty), device.synchronize()),
            lambda: (compiled.execute(ins, outs), device.synchronize()),
            "dmlgpu.fuse(seven_steps) on resident Tensors, new Tensors, + synchronize",
            "the 8 steps one by one (benchmarks/graphs.py numpy_chain), new arrays")
        peers["numpy"] = cpu_targets["8-step chain"]["numpy_seconds"]
    rows.append(row(f"7-step chain + BIT_COUNT->uint8 on {nbytes // MiB} MiB uint32 (GPU time)",
                    gpu_seconds(device, launch), (3 * 4 * n + n) / bandwidth, **peers) | {
        **first, "cache_hit_seconds": hit, "dispatches": compiled.dispatches})

    # command list of 1,000 dependent tiny steps
    count, m = 1000, 256
    commands = command_list(device, rng, count, m)
    start = time.perf_counter()
    commands.execute()
    device.synchronize()
    list_first = time.perf_counter() - start
    ours = wall(lambda: (commands.execute(), device.synchronize())) / count
    peer = {}
    if torch:
        gx = torch.zeros(m, dtype=torch.int32, device="cuda")
        gk = torch.ones(m, dtype=torch.int32, device="cuda")
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            gx.bitwise_not_()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        steps = [lambda: gx.bitwise_not_(), lambda: gx.bitwise_xor_(gk), lambda: gx.bitwise_left_shift_(gk & 31),
                 lambda: gx.bitwise_right_shift_(gk & 31), lambda: gx.copy_(torch.sign(gx))]
        with torch.cuda.graph(graph):
            for i in range(count):
                steps[i % len(steps)]()
        peer["cuda_graph"] = wall(lambda: (graph.replay(), torch.cuda.synchronize())) / count
    # The GPU's share: each dispatch of the recorded list timed alone (behind a barrier, as in the list).
    kernels = sum(gpu_seconds(device, launch, repeats=5) for launch in commands.recorded_launches())
    rows.append(row(f"command list of {count} dependent tiny steps (NOT/XOR/SHL/SHR/SIGN/BIT_COUNT), "
                    "replay + sync per step", ours, **peer) | {
        "gpu_dispatches": commands.gpu_dispatches, "barriers": commands.barriers, "first_replay_seconds": list_first,
        "kernel_seconds_per_step": kernels / count})
    commands.release()

    report = {"device": device.name, "type": device.type, "driver": device.driver, "bytes": nbytes,
              "copy_bandwidth_bytes_per_s": bandwidth, "copy_bandwidth_source": source,
              "torch": torch.__version__ if torch else None, "rows": rows}
    if cpu_targets:
        report["cpu_targets"] = cpu_targets
        report["load_average"] = os.getloadavg()
        report["cpu_count"] = os.cpu_count()
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    for r in rows:
        extras = ", ".join(f"{k} {v:.3g}" for k, v in r.items() if k.startswith(("vs_", "of_")) and v is not None)
        timed = [k for k in r if k.startswith("first_call") or k in ("cache_hit_seconds", "kernel_seconds_per_step")]
        times = ", ".join(f"{k.replace('_seconds', '')} {r[k] * 1e3:.3g} ms" for k in timed)
        extras = ", ".join(e for e in (extras, times) if e)
        print(f"{r['case']}: {r['seconds'] * 1e3:.4g} ms" + (f" ({extras})" if extras else ""))
    for name, target in cpu_targets.items():
        print(f"target: {name} {target['ratio']:.2f}x numpy (>= {target['target']}; fuse {target['seconds'] * 1e3:.2f} ms, "
              f"numpy {target['numpy_seconds'] * 1e3:.2f} ms; kept outputs: graph execute "
              f"{target['graph_execute_seconds'] * 1e3:.2f} ms, {target['ratio_graph_execute']:.2f}x numpy, "
              f"{target['ratio_vs_numpy_out']:.2f}x numpy with out=)")
    if cpu_targets:
        print("load average", " ".join(f"{v:.2f}" for v in os.getloadavg()), f"on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
