"""`python -m dmlgpu demo` still runs and finds every result right (small sizes, short timings),
and every peer the demo and the benchmarks time is honest: the same result as dmlgpu on the data
it is timed on."""
import re

import numpy as np
import pytest

from dmlgpu import testing
from dmlgpu.table.operators import OPERATORS
from dmlgpu_tools import bench
from dmlgpu_tools.demo import run_demo
from dmlgpu_tools.peers import numpy_result, out_type, peer_function, timed_inputs, timed_type


def test_demo_runs_and_every_result_is_right(capsys):
    assert run_demo(counts=(1 << 10,), seconds=0.01, search=(4096, 4)) == 0
    out = capsys.readouterr().out
    assert "all results correct" in out
    # What the device is good at: four rows, each followed by what wins and why.
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "is good at: each row against numpy's fastest route" in line)
    rows = [line for line in lines[start + 2:] if line.startswith("  ") and not line.startswith("    ->")]
    verdicts = [line for line in lines[start + 2:] if line.startswith("    -> ")]
    assert [r.split(",")[0].split(" (")[0].strip() for r in rows[:4]] == [
        "plain operators", "plain operators on Tensors", "fused chain of 8 operators on Tensors", "search"]
    assert len(verdicts) == 4 and all(re.match(r"    -> (dmlgpu|numpy) wins \(\d+\.\d\dx\): \S", v) for v in verdicts)
    # Both comparisons, labelled, for every operator: end to end (numpy arrays) and resident (Tensors).
    assert "end to end: dmlgpu.<op>(numpy arrays)" in out and "resident:   dmlgpu.<op>(Tensors, out=Tensor)" in out
    for op in OPERATORS:
        for case in ("end to end", "resident"):
            assert any(line.split()[:1] == [op.short] and case in line for line in out.splitlines()), (op.short, case)


def _timed_types(op):
    """The demo's type, and the benchmark's at each width (kernel cases and runtime rows)."""
    found = {timed_type(op)} | {bench.kernel_type(op, bits) for bits in bench.WIDTH_TYPES}
    return sorted((t for t in found if t is not None), key=lambda t: t.value)


@pytest.mark.parametrize("op, data_type", [(op, t) for op in OPERATORS for t in _timed_types(op)],
                         ids=lambda v: getattr(v, "short", None) or getattr(v, "name", None))
def test_every_peer_gives_dmlgpus_result_on_the_timed_data(op, data_type):
    """numpy's function the row names as its peer, on the data the demo and the benchmark time it
    on, is bit for bit dmlgpu's result (np.bitwise_count on signed integers or np.sign on floats
    would not be: the rows time them on the types where they are)."""
    if peer_function(op, np) is None:
        pytest.skip(f"numpy {np.__version__} has no {op.peer.numpy}")
    arrays = timed_inputs(op, data_type, 4099, np.random.default_rng(1))
    ours = testing.front_end(op, arrays, out_type(op, data_type))
    assert testing.same_bits(numpy_result(op, arrays, data_type), ours)
    assert testing.same_bits(ours, testing.reference(op, arrays, out_type(op, data_type)))


def test_every_operator_is_timed_by_the_benchmark():
    """No row leaves the kernel sweep silently: each has a timed type at some width."""
    assert all(any(bench.kernel_type(op, bits) for bits in bench.WIDTH_TYPES) for op in OPERATORS)


def test_each_verdict_names_its_cause():
    """What wins and why: a CPU device's floor, PCIe on a discrete GPU, fusion, the search kernel."""
    from types import SimpleNamespace

    from dmlgpu_tools.demo import _verdict

    cpu, gpu = SimpleNamespace(is_cpu=True, type="CPU"), SimpleNamespace(is_cpu=False, type="discrete GPU")
    big = 16 << 20
    assert _verdict("end to end", 0.3, cpu, 9e-5, big).startswith("numpy wins (3.33x): on a CPU device")
    assert "floor (~90 us here)" in _verdict("end to end", 0.3, cpu, 9e-5, big)
    assert "over PCIe" in _verdict("end to end", 0.5, gpu, 2e-5, big)
    assert _verdict("end to end", 2.0, gpu, 2e-5, big).startswith("dmlgpu wins (2.00x)")
    assert "memory bandwidth" in _verdict("resident", 4.0, gpu, 2e-5, big)
    assert "same cores" in _verdict("resident", 0.4, cpu, 9e-5, big)
    assert "fusion: eight operations in one pass" in _verdict("fused", 1.6, cpu, 9e-5, big)
    assert "floor" in _verdict("fused", 0.1, gpu, 2e-5, 4096)
    assert "in one kernel" in _verdict("search", 7.0, cpu, 9e-5, big)
