"""The benchmark harness still runs (a quick pass without peers); benchmarks are not tests, but
a harness that cannot run is a defect."""
import json

from dmlgpu_tools.bench import main
from dmlgpu_tools.bench_report import clocks_text


def test_bench_quick_run_writes_reports(tmp_path, capsys):
    assert main(["--quick", "--no-peers", "--out", str(tmp_path), "--repeats", "3"]) == 0
    assert "\r" not in capsys.readouterr().err  # progress counters only on a terminal
    data = json.loads((tmp_path / "results.json").read_text())
    kinds = {r["kind"] for r in data["records"]}
    assert {"kernel", "front_end", "numpy_target", "runtime", "search"} <= kinds
    search = next(r for r in data["records"] if r["kind"] == "search")
    assert search["ratio"] == search["numpy_seconds"] / search["seconds"] and search["g_distances_per_s"] > 0
    numpy_rows = [r for r in data["records"] if r["kind"] == "numpy_target"]
    assert [r["target"] for r in numpy_rows] == [0.5, 0.3, 0.3]
    assert all(r["ratio"] == r["numpy_seconds"] / r["seconds"] and r["met"] == (r["ratio"] >= r["target"])
               for r in numpy_rows)
    assert all(r["gbps"] > 0 for r in data["records"] if r["kind"] == "kernel")
    report = (tmp_path / "results.md").read_text()
    assert "## Kernel bandwidth" in report
    assert ">= 1 x numpy's exact search (numpy time / ours) | 65536 x 256-bit codes, 16 queries, top-10 |" in report
    assert report.count("x numpy (numpy time / ours)") == 3
    clocks = next(line for line in report.splitlines() if line.startswith("GPU clocks:"))
    assert "{" not in clocks and "None" not in clocks, clocks


def test_bench_parts_run_alone_and_report_after_each(tmp_path, capsys, monkeypatch):
    """`--parts` runs the parts named, in the harness's order, and writes the report after each:
    a run cut short (the second part fails here) keeps the first part's records."""
    import pytest

    import dmlgpu_tools.bench as bench

    assert main(["--quick", "--no-peers", "--out", str(tmp_path), "--repeats", "3", "--parts", "search"]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert {r["kind"] for r in data["records"]} == {"search"} and data["environment"]["parts"] == ["search"]
    assert "parts run: search" in (tmp_path / "results.md").read_text()
    assert "part search:" in capsys.readouterr().out

    def cut(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(bench.bench_runtime, "records", cut)
    with pytest.raises(KeyboardInterrupt):
        main(["--quick", "--no-peers", "--out", str(tmp_path / "cut"), "--repeats", "3", "--parts", "runtime, numpy"])
    data = json.loads((tmp_path / "cut" / "results.json").read_text())
    assert {r["kind"] for r in data["records"]} == {"numpy_target"}  # (numpy runs before runtime)
    with pytest.raises(SystemExit):
        main(["--parts", "kernels,gpu"])
    assert "unknown gpu; choose from kernels, front-end, numpy, search, runtime" in capsys.readouterr().err


def test_report_prints_gpu_clocks_as_text():
    sample = {"sm_clock": "1980 MHz", "mem_clock": "2619 MHz", "temperature": "45", "power": "120.50 W"}
    assert clocks_text(sample) == "SM 1980 MHz, memory 2619 MHz, 45 °C, 120.50 W"
    assert clocks_text({"sm_clock": "345", "mem_clock": "[N/A]"}) == "SM 345 MHz, memory [N/A]"
    assert clocks_text({"before": {"sm_clock": "345 MHz"}, "after": sample}) == \
        "before SM 345 MHz, after SM 1980 MHz, memory 2619 MHz, 45 °C, 120.50 W"
    assert clocks_text({}) == clocks_text(None) == "not read"


def test_progress_counters_only_on_a_terminal(monkeypatch, capsys):
    import sys

    from dmlgpu_tools.bench import _progress

    assert list(_progress([1, 2, 3], "cases")) == [1, 2, 3]
    assert capsys.readouterr().err == ""  # a log file or a pipe: nothing
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert list(_progress([1, 2, 3], "cases")) == [1, 2, 3]
    assert "\r" in capsys.readouterr().err
