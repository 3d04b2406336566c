"""`python -m dmlgpu demo`: what the library does, and what the default device is good at.

Prints the device, runs the documentation pages' examples, cross-checks every operator on every
data type of the newest feature level against `dmlgpu.table.reference` bit for bit, and times each
operator against its peer in the same run (the row's `peer`: numpy's fastest function with the
same result, on a data type where it has it; `dmlgpu_tools.peers`), two ways: end to end (numpy
arrays in and out: upload, kernel, download) and resident (Tensors with `out=`, then
`synchronize()`: the kernel's cost). Then what the device is good at, honestly, in four rows,
each against numpy's fastest route to the same result and with a line saying what wins and why
(a CPU device's floor, PCIe, fusion): the plain operators end to end and resident, a fused chain
of eight operators (`dmlgpu_tools.showcases`), and an exact binary-code search. Exits non-zero
if any result is wrong, the peer's included.
"""
from __future__ import annotations

import time

import numpy as np

import dmlgpu
from dmlgpu import testing
from dmlgpu.front import numpy_api
from dmlgpu.api.device import default_device
from dmlgpu.table.operators import OPERATORS
from dmlgpu.front.tensor import Tensor

from . import showcases
from .peers import numpy_result, out_type as output_type, peer_function, timed_inputs, timed_type

NAME_WIDTH = max(len(op.short) for op in OPERATORS)
PEER_WIDTH = max(len("np." + op.peer.numpy) for op in OPERATORS)

#: The documents' examples (BIT_XOR's page repeats BIT_NOT's example, so it has none of its own).
EXAMPLES = (
    ("BIT_NOT, UINT8 {2,2}", lambda: numpy_api.bit_not(np.array([[0, 128], [42, 255]], np.uint8)),
     np.array([[255, 127], [213, 0]], np.uint8)),
    ("BIT_COUNT, UINT32 {2,2} -> UINT32",
     lambda: numpy_api.bit_count(np.array([[0, 123], [456, 789]], np.uint32), dtype=np.uint32),
     np.array([[0, 6], [4, 5]], np.uint32)),
)


def _time(function, seconds=0.2) -> float:
    function()
    runs, start = 0, time.perf_counter()
    while True:
        function()
        runs += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / runs


def run_demo(counts=(1 << 10, 1 << 16, 1 << 22), seconds=0.2, search=(1 << 18, 64)) -> int:
    """Run the demo on the default device; `counts` are the operator timings' element counts (the
    largest also sizes the fused chain), `search` the database rows and queries of the search
    (256-bit codes, top-10). Returns 1 if any result was wrong, else 0."""
    device = default_device()
    print(f"device: {device.name} ({device.type}; {device.driver})")
    failures = 0

    print("\nDirectML documentation examples")
    for title, run, expected in EXAMPLES:
        got = run()
        ok = testing.same_bits(got, expected)
        failures += not ok
        print(f"  {'ok  ' if ok else 'FAIL'} {title}: {got.tolist()}")
    x = np.array([-2.5, -0.0, 0.0, 3.0, np.inf, -np.inf, np.nan], np.float32)
    print(f"  SIGN, FLOAT32 {x.tolist()} -> {numpy_api.sign(x).tolist()} (NaN -> 0, -0 -> +0)")

    print("\nCross-check against dmlgpu.table.reference, bit for bit (4097 elements each)")
    rng = np.random.default_rng(0)
    for op in OPERATORS:
        results = []
        for in_type, out_type in testing.case_types(op):
            arrays = [testing.sample(in_type, (4097,), rng) for _ in op.inputs]
            ok = testing.same_bits(testing.front_end(op, arrays, out_type),
                                   testing.reference(op, arrays, out_type))
            failures += not ok
            label = in_type.name if op.same_type else f"{in_type.name}->{out_type.name}"
            results.append(label if ok else f"{label} FAILED")
        print(f"  {op.short:{NAME_WIDTH}s} {len(results)} types: {', '.join(results)}")

    print("\nTime per call against numpy's fastest function with the same result on the timed data type")
    print("(speed-up = numpy time / dmlgpu time; both results checked against dmlgpu.table.reference)")
    print("  end to end: dmlgpu.<op>(numpy arrays) -> numpy array (upload, kernel, download, new array)")
    print("              vs numpy's function returning a new array")
    print("  resident:   dmlgpu.<op>(Tensors, out=Tensor) + device.synchronize() (kernel only, no copies)")
    print("              vs numpy's function with out=")
    print(f"  {'operator':{NAME_WIDTH}s} {'type':8s} {'numpy':{PEER_WIDTH}s} {'elements':>10s} {'case':10s} {'dmlgpu':>10s} "
          f"{'numpy':>10s} {'speed-up':>9s}")
    speedups = {"end to end": [], "resident": []}  # at the largest count, per operator
    for op in OPERATORS:
        in_type = timed_type(op)
        out_type = output_type(op, in_type)
        peer = peer_function(op, np)
        if peer is None:
            print(f"  {op.short:{NAME_WIDTH}s} not timed: numpy {np.__version__} has no {op.peer.numpy}")
            continue
        for count in counts:
            arrays = timed_inputs(op, in_type, count, rng)
            result = np.empty(count, out_type.numpy)
            with device:
                tensors = [Tensor.from_numpy(a) for a in arrays]
                out = Tensor.empty((count,), out_type.numpy)

            def resident():
                testing.front_end(op, tensors, out_type, out=out)
                device.synchronize()
            rows = (("end to end", lambda: testing.front_end(op, arrays, out_type), lambda: peer(*arrays)),
                    ("resident", resident, lambda: peer(*arrays, out=result)))
            for case, ours_fn, theirs_fn in rows:
                ours, theirs = _time(ours_fn, seconds), _time(theirs_fn, seconds)
                print(f"  {op.short:{NAME_WIDTH}s} {in_type.name:8s} {'np.' + op.peer.numpy:{PEER_WIDTH}s} {count:>10d} "
                      f"{case:10s} {ours * 1e6:>8.0f}us {theirs * 1e6:>8.0f}us {theirs / ours:>8.2f}x")
                if count == max(counts):
                    speedups[case].append((theirs / ours, ours, theirs, in_type.size * count))
            expected = testing.reference(op, arrays, out_type)
            for who, got in (("dmlgpu", out.numpy()), ("numpy", numpy_result(op, arrays, in_type))):
                if not testing.same_bits(got, expected):
                    failures += 1
                    print(f"  {op.short}: {who}'s result differs from the reference on the timed data")
    failures += _strengths(device, speedups, max(counts), search, seconds)
    print("\nall results correct" if not failures else f"\n{failures} WRONG RESULTS")
    return 1 if failures else 0


def _floor(device, seconds) -> float:
    """Seconds of the smallest resident call + synchronize: what any call costs on this device."""
    with device:
        tiny = Tensor.from_numpy(np.zeros(4, np.uint32))

    def call():
        numpy_api.bit_not(tiny, out=tiny)
        device.synchronize()
    return _time(call, seconds)


def _verdict(case: str, ratio: float, device, floor: float, nbytes: int, seconds: float) -> str:
    """One line: what wins this row on this device, and why. `ratio` is numpy's time over dmlgpu's,
    `floor` the device's smallest call (`_floor`), `nbytes` the row's data (an operand's bytes;
    the search's database), `seconds` dmlgpu's time per call."""
    win = ratio >= 1
    head = f"dmlgpu wins ({ratio:.2f}x)" if win else f"numpy wins ({1 / ratio:.2f}x)"
    cpu, discrete = device.is_cpu, device.type == "discrete GPU"
    floor_text = f"each call's submit-and-wait floor (~{floor * 1e6:.0f} us here)"
    floor_bound = seconds < 2 * floor  # the floor is at least half of dmlgpu's time
    if case == "end to end":
        if win:
            return f"{head}: the kernel's speed pays for moving {_bytes(nbytes)} in and out of the device each call"
        if cpu:
            return (f"{head}: on a CPU device the kernel runs on numpy's own cores, after an upload, plus {floor_text}; "
                    "dmlgpu's gain here is DirectML's exact semantics, not speed")
        if discrete:
            return (f"{head}: each call sends its inputs over PCIe and its result back ({_bytes(nbytes)} each way), "
                    "which costs more than numpy's one pass over host memory: keep data on the device (Tensors)")
        return f"{head}: the copies in and out plus {floor_text} cost more than numpy's one pass"
    if case == "resident":
        if win:
            return f"{head}: the device's memory bandwidth, with no copies (data kept on the device as Tensors)"
        if cpu:
            return (f"{head}: on a CPU device a kernel can at best match numpy's memory speed on the same cores, "
                    f"plus {floor_text}")
        return f"{head}: at this size {floor_text} is more than the work"
    if case == "fused":
        if win:
            return (f"{head}: fusion: eight operations in one pass over memory, the intermediates in registers, "
                    "where numpy makes a pass per operation" + (" (even on numpy's own cores)" if cpu else ""))
        if floor_bound:
            return (f"{head}: {floor_text} is most of dmlgpu's {_us(seconds)}, and numpy's eight passes over "
                    f"{_bytes(nbytes)} take less")
        if cpu:
            return (f"{head}: on a CPU device the fused kernel runs on numpy's own cores (and shares them with "
                    "whatever else runs), so one pass does not always beat numpy's eight cached ones")
        moved = nbytes * 13 // 4  # x and y read (4 bytes an element each), z (4) and the counts (1) written
        rate = moved / (seconds - floor) / 1e9
        return (f"{head}: nothing is copied (Tensors in and out), so past {floor_text} the time is the fused pass "
                f"and its two new outputs: {_bytes(moved)} read and written at {rate:.1f} GB/s on this "
                f"{device.type}, slower than numpy's eight passes through host memory and caches")
    if win:
        return (f"{head}: XOR, popcount, sum and top-k in one kernel with the distances in registers, "
                "where numpy writes and reads a distance array per query")
    if cpu:
        return (f"{head}: on a CPU device the search kernel shares numpy's cores and memory bandwidth, so it scans "
                f"the {_bytes(nbytes)} database no faster than numpy's vectorised popcount, plus {floor_text}")
    if floor_bound:
        return f"{head}: {floor_text} is most of dmlgpu's {_us(seconds)}; numpy scans {_bytes(nbytes)} in less"
    if discrete:
        return (f"{head}: each call sends its queries over PCIe and brings the distances and rows back, "
                f"which with {floor_text} costs more than numpy's scan of {_bytes(nbytes)} in host memory")
    if device.type == "integrated GPU":
        return (f"{head}: an integrated GPU reads the {_bytes(nbytes)} database from the host memory numpy reads, "
                f"with no more bandwidth than numpy's vectorised popcount gets, plus {floor_text}")
    return (f"{head}: the search kernel's pass over {_bytes(nbytes)} on this {device.type} is slower than "
            f"numpy's vectorised popcount on the host's cores, plus {floor_text}")


def _bytes(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB" if n >= 1 << 20 else f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} B"


def _strengths(device, speedups: dict, count: int, search, seconds) -> int:
    """The four rows of what this device is good at; returns the number of wrong results."""
    failures = 0
    floor = _floor(device, seconds)
    rows = []  # (label, ours, numpy, case, bytes moved)
    for case, label in (("end to end", "plain operators, numpy arrays in and out"),
                        ("resident", "plain operators on Tensors (resident)")):
        found = sorted(speedups[case])
        if found:
            ratio, ours, theirs, nbytes = found[len(found) // 2]  # the median operator
            rows.append((f"{label}, median of {len(found)}", ours, theirs, case, nbytes))

    rng = np.random.default_rng(2)
    x, y = (rng.integers(0, 1 << 32, count, dtype=np.uint32) for _ in range(2))
    z, counts = np.empty_like(x), np.empty(count, np.uint8)
    expected = showcases.numpy_chain(x, y)
    with device:
        tx, ty = Tensor.from_numpy(x), Tensor.from_numpy(y)
    got = showcases.fused_chain(tx, ty)
    in_place = showcases.numpy_chain_in_place(x, y, z, counts)
    for who, result in (("dmlgpu.fuse", [r.numpy() for r in got]), ("numpy in place", in_place)):
        if not all(testing.same_bits(a, b) for a, b in zip(result, expected)):
            failures += 1
            print(f"  the fused chain: {who}'s result differs from numpy's expression")

    def fused():
        showcases.fused_chain(tx, ty)
        device.synchronize()
    numpy_best = min(_time(lambda: showcases.numpy_chain(x, y), seconds),
                     _time(lambda: showcases.numpy_chain_in_place(x, y, z, counts), seconds))
    rows.append(("fused chain of 8 operators on Tensors (dmlgpu.fuse)", _time(fused, seconds), numpy_best, "fused",
                 count * 4))

    rows_n, queries_n = search
    database = showcases.codes(rows_n, 256)
    queries = database[rng.integers(0, rows_n, queries_n)] ^ np.uint8(1)
    with device:
        index = dmlgpu.HammingIndex(database)
    ours_d, ours_r = index.search(queries, 10)
    numpy_d, numpy_r = showcases.numpy_search(database, queries, 10)
    if not (testing.same_bits(ours_d, numpy_d) and testing.same_bits(ours_r, numpy_r)):
        failures += 1
        print("  the search: dmlgpu's answer differs from numpy's")
    rows.append((f"search, {rows_n} x 256-bit codes, {queries_n} queries, top-10", _time(lambda: index.search(queries, 10),
                 seconds), _time(lambda: showcases.numpy_search(database, queries, 10), seconds), "search",
                 database.nbytes))

    print(f"\nWhat {device.name} ({device.type}) is good at: each row against numpy's fastest route to the same "
          f"result, measured now ({count} elements where a row has a size)")
    width = max(len(r[0]) for r in rows)
    print(f"  {'row':{width}s} {'dmlgpu':>10s} {'numpy':>10s} {'speed-up':>9s}")
    for label, ours, theirs, case, nbytes in rows:
        print(f"  {label:{width}s} {_us(ours):>10s} {_us(theirs):>10s} {theirs / ours:>8.2f}x")
        print(f"    -> {_verdict(case, theirs / ours, device, floor, nbytes, ours)}")
    return failures


def _us(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}ms" if seconds >= 0.01 else f"{seconds * 1e6:.0f}us"
