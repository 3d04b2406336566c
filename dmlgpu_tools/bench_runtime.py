"""The runtime's targets (`python -m dmlgpu bench`): wall clock, PyTorch in the same run.

Measured in a process that also holds `ballast_gib` of device buffers and 200 compiled
operators, as a real program would, since a runtime's costs may grow with what it holds:
- a tiny resident operation with `out=`, submit -> done;
- a tiny `~t` with a new result, submit -> done;
- 1,000 dependent tiny operations issued from Python, one synchronize at the end;
- a command list of 1,000 dependent tiny operations replayed (against a CUDA graph);
- 256 MiB resident operations, every operator x width, submit -> done;
- 100,000 `u = ~t` with results dropped: reserved memory, host RSS, live objects before/after.
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np

from dmlgpu import testing
from dmlgpu.front import numpy_api
from dmlgpu.describe.bindings import Binding
from dmlgpu.api.command_list import CommandList
from dmlgpu.describe.operator_descs import DESC_CLASSES
from dmlgpu.api.device import Device, devices
from dmlgpu.table.dtypes import DataType
from dmlgpu.table.operators import OPERATORS
from dmlgpu.table.reference import shift_amount
from dmlgpu.front.tensor import Tensor
from dmlgpu.describe.tensor_desc import TensorDesc

from .peers import torch_dtype

MiB, GiB = 1 << 20, 1 << 30


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _row(name, target, ours, peer=None, peer_name="torch", limit=None, **extra) -> dict:
    record = {"kind": "runtime", "case": name, "target": target, "seconds": ours, **extra}
    if peer is not None:
        record[f"{peer_name}_seconds"] = peer
        record["ratio"] = ours / peer
        if limit is not None:
            record["met"] = ours <= limit * peer
    return record


def ballast(device, gib: float) -> list:
    """Buffers of `gib` GiB in all and 200 compiled operators, kept alive by the caller."""
    held = []
    chunk = min(device.max_buffer_size // 2, 1 * GiB)
    left = int(gib * GiB)
    while left > 0:
        held.append(device.allocate(min(chunk, left), zero_fill=False))
        left -= chunk
    for n in range(1, 201):
        desc = TensorDesc(DataType.UINT32, [n])
        held.append(device.create_operator(DESC_CLASSES["ELEMENT_WISE_BIT_NOT"](desc, desc)))
    return held


def records(device, torch, wall_seconds, quick: bool, peer_function, case_type) -> list[dict]:
    """The cases above. `peer_function(op, torch)` is PyTorch's operator for a row (or None),
    `case_type(op, bits)` the data type measured at a width (or None)."""
    out = []
    sync = device.synchronize
    tsync = torch.cuda.synchronize if torch else None
    n = 256  # 1 KiB of uint32
    x = testing.sample(DataType.UINT32, (n,), np.random.default_rng(1))
    with device:
        t, o = Tensor.from_numpy(x), Tensor.empty((n,), np.uint32)
        tb = Tensor.from_numpy(x[::-1].copy())
    if torch:
        tx = torch.from_numpy(x.view(np.int32)).cuda()
        ty, tz = torch.empty_like(tx), tx.flip(0).contiguous()

    def tiny_out():
        numpy_api.bit_not(t, out=o)
        sync()

    def tiny_new():
        ~t  # noqa: B018
        sync()
    peer_out_fn = peer_new_fn = None
    if torch:
        def peer_out_fn():
            torch.bitwise_not(tx, out=ty)
            tsync()

        def peer_new_fn():
            ~tx  # noqa: B018
            tsync()
    launch = _floor_launch(device, "ELEMENT_WISE_BIT_NOT", [t], o)
    tiny = _interleaved({"peer_out": _timed(peer_out_fn), "ours_out": _timed(tiny_out),
                         "peer_new": _timed(peer_new_fn), "ours_new": _timed(tiny_new),
                         "floor": lambda n: device.submit_floor(launch, n)}, rounds=10, repeats=300)
    ours_out, ours_new, peer_out, peer_new, floor = (
        tiny[k] for k in ("ours_out", "ours_new", "peer_out", "peer_new", "floor"))
    out.append(_row("bit_not(t, out=o) 1 KiB + synchronize", "<= 1.5 x torch", ours_out, peer_out, limit=1.5,
                    floor_seconds=floor, floor_ratio=ours_out / floor))
    out.append(_row("u = ~t 1 KiB + synchronize", "<= 2 x torch", ours_new, peer_new, limit=2.0))
    out.append({"kind": "runtime", "case": "tiny ~t / tiny bit_not(out=) (same device)",
                "target": "<= 2", "ratio": ours_new / ours_out, "met": ours_new <= 2 * ours_out})

    count = 1000
    a = Tensor.from_numpy(x)

    def chain():
        for _ in range(count):
            numpy_api.bit_xor(a, tb, out=a)
        sync()
    peer_chain = None
    if torch:
        ta = tx.clone()

        def peer_chain_fn():
            for _ in range(count):
                torch.bitwise_xor(ta, tz, out=ta)
            tsync()
        peer_chain = wall_seconds(peer_chain_fn, repeats=10) / count
    out.append(_row(f"{count} dependent bit_xor(a, b, out=a) from Python, one synchronize",
                    "<= 2 x torch eager per op", wall_seconds(chain, repeats=10) / count, peer_chain, limit=2.0))
    assert testing.same_bits(a.numpy(), x), "chain result"  # 11 runs x 1000 XORs with b: even

    desc = TensorDesc(DataType.UINT32, [n])
    compiled = device.create_operator(DESC_CLASSES["ELEMENT_WISE_BIT_NOT"](desc, desc))
    buffer = device.upload(x)
    lists = {}
    for fuse in (True, False):
        commands = CommandList(device, fuse=fuse)
        for _ in range(count):
            commands.record(compiled, [Binding(buffer, 0, 4 * n)], [Binding(buffer, 0, 4 * n)])

        def replay():
            commands.execute()
            sync()
        lists[fuse] = (wall_seconds(replay, repeats=20) / count, commands)
        assert testing.same_bits(buffer.read().view(np.uint32), x), "command list result"  # 21 x 1000 NOTs
    peer_graph = None
    if torch:
        y = torch.zeros(n, dtype=torch.int32, device="cuda")
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            for _ in range(3):
                y.bitwise_not_()
        tsync()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(count):
                y.bitwise_not_()

        def graph_replay():
            graph.replay()
            tsync()
        peer_graph = wall_seconds(graph_replay, repeats=20) / count
    for fuse, (ours_list, commands) in lists.items():
        how = "fused" if fuse else "unfused: one dispatch per execution"
        out.append(_row(f"command list of {count} dependent bit_not ({how}), replay + synchronize",
                        "<= 1.0 x CUDA graph per op" if fuse else "(the floor: a dispatch behind a barrier)",
                        ours_list, peer_graph, peer_name="torch_graph", limit=1.0 if fuse else None,
                        barriers=commands.barriers, gpu_dispatches=commands.gpu_dispatches))
        commands.release()

    # Quick runs on a CPU driver (lavapipe) use 1 MiB: a 16 MiB case there takes ~60 ms, and
    # ~30 operator x width cases plus the two-device case would hold a smoke run for minutes.
    big = (256 if not quick else 1 if device.is_cpu else 16) * MiB
    _sustain(device, big, 0.1 if quick else 1.5)  # the tiny cases above let the GPU clock fall
    # Random bits, not zeros (which can run faster than real data), the same for both sides.
    data = np.random.default_rng(2).integers(0, 256, size=big * 2, dtype=np.uint8)
    for op in OPERATORS:
        peer_fn = peer_function(op, torch) if torch else None
        if torch and peer_fn is None:
            continue
        for bits in (8, 16, 32, 64):
            data_type = case_type(op, bits)
            if data_type is None:
                continue
            count_el = big // data_type.size
            host = [data[k * big:(k + 1) * big].view(data_type.numpy) for k in range(len(op.inputs))]
            if op.masks_shift_amount:  # amounts below the width: PyTorch's shift is DirectML's there
                host[-1] = shift_amount(host[-1])
            result_type = op.default_output or data_type
            with device:
                inputs = [Tensor.from_numpy(h) for h in host]
                result = Tensor.empty((count_el,), result_type.numpy)
            fn = getattr(numpy_api, op.short)

            def ours_big():
                fn(*inputs, out=result)
                sync()
            launch = _floor_launch(device, op.name, inputs, result)
            peer_big_fn = None
            if torch:
                px = [torch.from_numpy(h.view(np.uint8)).cuda().view(torch_dtype(torch, data_type)) for h in host]
                py = torch.empty(count_el, dtype=torch_dtype(torch, result_type), device="cuda")
                try:
                    peer_fn(*px, out=py)
                    same = testing.same_bits(py.cpu().numpy().view(result_type.numpy),
                                             testing.reference(op, host, result_type))
                    reason = f"not DirectML's result on {data_type.name}"
                except (RuntimeError, TypeError) as e:  # not implemented for this dtype, or no out=
                    same, reason = False, str(e)[:200]
                if not same:
                    out.append({"kind": "peer_skipped", "peer": "torch", "op": op.short, "size": big, "reason": reason})
                    continue

                def peer_big_fn():
                    peer_fn(*px, out=py)
                    tsync()
            big_times = _interleaved({"peer": _timed(peer_big_fn), "ours": _timed(ours_big),
                                      "floor": lambda n: device.submit_floor(launch, n)}, rounds=5, repeats=6)
            ours, peer_big, floor = big_times["ours"], big_times["peer"], big_times["floor"]
            record = _row(f"{op.short} {big >> 20} MiB {data_type.name} resident + synchronize",
                          ">= 0.95 x torch speed", ours, peer_big, limit=1 / 0.95, bytes=big,
                          floor_seconds=floor, floor_ratio=ours / floor)
            out.append(record)
            del inputs, result, launch
            if torch:
                del px, py
    device.empty_cache()

    out.append(two_devices(device, wall_seconds, big))

    iterations = 10_000 if quick else 100_000
    with device:
        small = Tensor.from_numpy(x)
    for _ in range(1000):
        u = ~small
    sync()
    before, rss = device.memory_stats(), _rss()
    for _ in range(iterations):
        u = ~small
    sync()
    after = device.memory_stats()
    del u
    out.append({"kind": "runtime", "case": f"{iterations} x u = ~t, results dropped",
                "target": "reserved grows by <= 2 arenas; RSS, pipelines, buffers flat",
                "arenas_before": before["arenas"], "arenas_after": after["arenas"],
                "reserved_before": before["reserved_bytes"], "reserved_after": after["reserved_bytes"],
                "pipelines_before": before["pipelines"], "pipelines_after": after["pipelines"],
                "command_buffers_before": before["command_buffers"], "command_buffers_after": after["command_buffers"],
                "live_buffers_before": before["live_buffers"], "live_buffers_after": after["live_buffers"],
                "rss_growth_mib": (_rss() - rss) / MiB,
                "met": after["reserved_bytes"] - before["reserved_bytes"] <= 2 * after["arena_bytes"]
                and after["pipelines"] == before["pipelines"]
                and after["live_buffers"] == before["live_buffers"] and _rss() - rss < 16 * MiB})
    return out


def _sustain(device, nbytes: int, seconds: float) -> None:
    """Resident NOTs of `nbytes` back to back for `seconds`: the GPU clock ramps up (it falls
    to 345 MHz within seconds of light work, and the first large row would be timed ramping)."""
    with device:
        a, b = (Tensor.empty((nbytes // 4,), np.uint32) for _ in range(2))
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        numpy_api.bit_not(a, out=b)
        device.synchronize()


def _floor_launch(device, op_name: str, inputs, output):
    """A launch of the operation over whole buffers, for the runtime's `submit_floor`: the same
    command buffer recorded once, submitted and waited for, is the floor under a queued call +
    synchronize on this device."""
    descs = [TensorDesc(t.data_type, list(t.shape)) for t in (*inputs, output)]
    compiled = device.create_operator(DESC_CLASSES[op_name](*descs))
    ranges = compiled.check([Binding(t.buffer, 0, t.buffer.size_in_bytes) for t in inputs],
                            [Binding(output.buffer, 0, output.buffer.size_in_bytes)])
    return compiled.launch(ranges)


def _timed(fn):
    """`fn` (None: not measured) as `batch(n)`: the wall seconds of n calls."""
    if fn is None:
        return None

    def batch(n: int) -> list:
        times = []
        for _ in range(n):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return times
    return batch


def _interleaved(cases: dict, rounds: int, repeats: int) -> dict:
    """Median seconds of each case (`name -> batch(n)` returning n times, or None: not
    measured, median None), measured in `rounds` alternating rounds of `repeats` each after one
    warm-up call of each, so that a drift of the GPU's clock between them weighs on all alike."""
    live = {name: batch for name, batch in cases.items() if batch is not None}
    for batch in live.values():
        batch(1)
    times = {name: [] for name in live}
    for _ in range(rounds):
        for name, batch in live.items():
            times[name].extend(batch(repeats))
    return {name: float(np.median(times[name])) if name in live else None for name in cases}


def two_devices(device, wall_seconds, nbytes: int) -> dict:
    """Two threads, each looping a resident XOR on its own device, against one thread alone.

    On a host with one GPU both devices are that GPU (two Vulkan devices of it): the figure then
    shows only whether the host side serialises (the GIL or a lock held across GPU waits).
    """
    indices = [d["index"] for d in devices() if d["type"] == device.type][:2]
    others = [Device(i, private=True) for i in (indices if len(indices) == 2 else [device.index] * 2)]
    work = []
    for d in others:
        with d:
            a, b = (Tensor.empty((nbytes // 4,), np.uint32) for _ in range(2))
        work.append((d, a, b))
    loops = 20

    def run(d, a, b):
        for _ in range(loops):
            numpy_api.bit_xor(a, b, out=a)
            d.synchronize()

    def one():
        run(*work[0])

    def both():
        threads = [threading.Thread(target=run, args=w) for w in work]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    alone, together = wall_seconds(one, repeats=5), wall_seconds(both, repeats=5)
    for d, a, b in work:
        del a, b
        d.close()
    return {"kind": "runtime", "case": f"2 threads x {loops} resident bit_xor {nbytes >> 20} MiB, "
            f"each on its own device ({'two GPUs' if len(indices) == 2 else 'one GPU twice'})",
            "target": ">= 1.9 x one thread (two GPUs)", "one_thread_seconds": alone,
            "two_threads_seconds": together, "scaling": 2 * alone / together,
            **({"met": 2 * alone / together >= 1.9} if len(indices) == 2 else {})}
