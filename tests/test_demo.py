"""`python -m dmlgpu demo` still runs and finds every result right (small sizes, short timings)."""
from dmlgpu.demo import run_demo


def test_demo_runs_and_every_result_is_right(capsys):
    assert run_demo(counts=(1 << 10,), seconds=0.01) == 0
    assert "all results correct" in capsys.readouterr().out
