"""The benchmark harness still runs (a quick pass without peers); benchmarks are not tests, but
a harness that cannot run is a defect."""
import json

from dmlgpu_tools.bench import main


def test_bench_quick_run_writes_reports(tmp_path):
    assert main(["--quick", "--no-peers", "--out", str(tmp_path), "--repeats", "3"]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    kinds = {r["kind"] for r in data["records"]}
    assert {"kernel", "front_end", "numpy_target", "runtime"} <= kinds
    numpy_rows = [r for r in data["records"] if r["kind"] == "numpy_target"]
    assert [r["target"] for r in numpy_rows] == [0.5, 0.3, 0.3]
    assert all(r["ratio"] == r["numpy_seconds"] / r["seconds"] and r["met"] == (r["ratio"] >= r["target"])
               for r in numpy_rows)
    assert all(r["gbps"] > 0 for r in data["records"] if r["kind"] == "kernel")
    report = (tmp_path / "results.md").read_text()
    assert "## Kernel bandwidth" in report
    assert report.count("x numpy (numpy time / ours)") == 3
