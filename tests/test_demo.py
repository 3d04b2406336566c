"""`python -m dmlgpu demo` still runs and finds every result right (small sizes, short timings),
and every peer the demo and the benchmarks time is honest: the same result as dmlgpu on the data
it is timed on."""
import numpy as np
import pytest

from dmlgpu import testing
from dmlgpu.table.operators import OPERATORS
from dmlgpu_tools import bench
from dmlgpu_tools.demo import run_demo
from dmlgpu_tools.peers import numpy_result, out_type, peer_function, timed_inputs, timed_type


def test_demo_runs_and_every_result_is_right(capsys):
    assert run_demo(counts=(1 << 10,), seconds=0.01) == 0
    out = capsys.readouterr().out
    assert "all results correct" in out
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
