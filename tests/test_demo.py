"""`python -m dmlgpu demo` still runs and finds every result right (small sizes, short timings)."""
from dmlgpu_tools.demo import run_demo
from dmlgpu.operators import OPERATORS


def test_demo_runs_and_every_result_is_right(capsys):
    assert run_demo(counts=(1 << 10,), seconds=0.01) == 0
    out = capsys.readouterr().out
    assert "all results correct" in out
    # Both comparisons, labelled, for every operator: end to end (numpy arrays) and resident (Tensors).
    assert "end to end: dmlgpu.<op>(numpy arrays)" in out and "resident:   dmlgpu.<op>(Tensors, out=Tensor)" in out
    for op in OPERATORS:
        for case in ("end to end", "resident"):
            assert any(line.split()[:1] == [op.short] and case in line for line in out.splitlines()), (op.short, case)
