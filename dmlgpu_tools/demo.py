"""`python -m dmlgpu demo`: what the library does, shown on the default device.

Prints the device, runs the documentation pages' examples, cross-checks every operator on every
data type of the newest feature level against `dmlgpu.table.reference` bit for bit, and times each
operator against its peer in the same run (the row's `peer`: numpy's fastest function with the
same result, on a data type where it has it; `dmlgpu_tools.peers`), two ways: end to end (numpy
arrays in and out: upload, kernel, download) and resident (Tensors with `out=`, then
`synchronize()`: the kernel's cost). Exits non-zero if any result is wrong, the peer's included.
"""
from __future__ import annotations

import time

import numpy as np

from dmlgpu import testing
from dmlgpu.front import numpy_api
from dmlgpu.api.device import default_device
from dmlgpu.table.operators import OPERATORS
from dmlgpu.front.tensor import Tensor

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


def run_demo(counts=(1 << 10, 1 << 16, 1 << 22), seconds=0.2) -> int:
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
            expected = testing.reference(op, arrays, out_type)
            for who, got in (("dmlgpu", out.numpy()), ("numpy", numpy_result(op, arrays, in_type))):
                if not testing.same_bits(got, expected):
                    failures += 1
                    print(f"  {op.short}: {who}'s result differs from the reference on the timed data")
    print("\nall results correct" if not failures else f"\n{failures} WRONG RESULTS")
    return 1 if failures else 0
