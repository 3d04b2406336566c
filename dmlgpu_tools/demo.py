"""`python -m dmlgpu demo`: what the library does, shown on the default device.

Prints the device, runs the documentation pages' examples, cross-checks every operator on every
data type of the newest feature level against `dmlgpu.reference` bit for bit, and times each
operator against numpy in the same run, two ways: end to end (numpy arrays in and out: upload,
kernel, download) and resident (Tensors with `out=`, then `synchronize()`: the kernel's cost).
Exits non-zero if any result is wrong.
"""
from __future__ import annotations

import time

import numpy as np

from dmlgpu import numpy_api, testing
from dmlgpu.device import default_device
from dmlgpu.dtypes import DataType
from dmlgpu.operators import OPERATORS
from dmlgpu.reference import REFERENCES
from dmlgpu.tensor import Tensor

#: What each operator is timed against: numpy's ufunc of the same raw-bit meaning (the row's
#: `numpy_ufunc`), else dmlgpu.reference's numpy implementation of DirectML's semantics.
NUMPY_PEERS = {op.short: getattr(np, op.numpy_ufunc) if op.numpy_ufunc else REFERENCES[op.short]
               for op in OPERATORS}
NAME_WIDTH = max(len(op.short) for op in OPERATORS)

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

    print("\nCross-check against dmlgpu.reference, bit for bit (4097 elements each)")
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

    print("\nTime per call on UINT32 data, numpy in the same run (speed-up = numpy time / dmlgpu time)")
    print("  end to end: dmlgpu.<op>(numpy arrays) -> numpy array (upload, kernel, download, new array)")
    print("              vs numpy's function returning a new array")
    print("  resident:   dmlgpu.<op>(Tensors, out=Tensor) + device.synchronize() (kernel only, no copies)")
    print("              vs numpy's ufunc with out= (its function where numpy has no ufunc)")
    print(f"  {'operator':{NAME_WIDTH}s} {'elements':>10s} {'case':10s} {'dmlgpu':>10s} {'numpy':>10s} {'speed-up':>9s}")
    for op in OPERATORS:
        peer = NUMPY_PEERS[op.short]
        out_type = op.default_output or DataType.UINT32
        for count in counts:
            arrays = [testing.sample(DataType.UINT32, (count,), rng) for _ in op.inputs]
            result = np.empty(count, out_type.numpy)
            with device:
                tensors = [Tensor.from_numpy(a) for a in arrays]
                out = Tensor.empty((count,), out_type.numpy)

            def resident():
                testing.front_end(op, tensors, out_type, out=out)
                device.synchronize()
            resident_peer = (lambda: peer(*arrays, out=result)) if op.numpy_ufunc else (lambda: peer(*arrays))
            rows = (("end to end", lambda: testing.front_end(op, arrays, out_type), lambda: peer(*arrays)),
                    ("resident", resident, resident_peer))
            for case, ours_fn, theirs_fn in rows:
                ours, theirs = _time(ours_fn, seconds), _time(theirs_fn, seconds)
                print(f"  {op.short:{NAME_WIDTH}s} {count:>10d} {case:10s} {ours * 1e6:>8.0f}us "
                      f"{theirs * 1e6:>8.0f}us {theirs / ours:>8.2f}x")
            failures += not testing.same_bits(out.numpy(), testing.reference(op, arrays, out_type))
    print("\nall results correct" if not failures else f"\n{failures} WRONG RESULTS")
    return 1 if failures else 0
