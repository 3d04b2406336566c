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
    """What wins and why: a CPU device's floor, PCIe on a discrete GPU, fusion, the search kernel;
    where numpy wins, the cause follows from the device's kind and dmlgpu's time against the floor."""
    from types import SimpleNamespace

    from dmlgpu_tools.demo import _verdict

    cpu, gpu = SimpleNamespace(is_cpu=True, type="CPU"), SimpleNamespace(is_cpu=False, type="discrete GPU")
    igpu = SimpleNamespace(is_cpu=False, type="integrated GPU")
    big = 16 << 20
    assert _verdict("end to end", 0.3, cpu, 9e-5, big, 3e-3).startswith("numpy wins (3.33x): on a CPU device")
    assert "floor (~90 us here)" in _verdict("end to end", 0.3, cpu, 9e-5, big, 3e-3)
    assert "over PCIe" in _verdict("end to end", 0.5, gpu, 2e-5, big, 3e-3)
    assert _verdict("end to end", 2.0, gpu, 2e-5, big, 3e-3).startswith("dmlgpu wins (2.00x)")
    assert "memory bandwidth" in _verdict("resident", 4.0, gpu, 2e-5, big, 1e-3)
    assert "same cores" in _verdict("resident", 0.4, cpu, 9e-5, big, 1e-3)
    assert "fusion: eight operations in one pass" in _verdict("fused", 1.6, cpu, 9e-5, big, 1e-3)
    # The fused chain lost: to the floor where it is most of dmlgpu's time, else to the device's pass.
    assert "floor (~20 us here) is most of dmlgpu's 30us" in _verdict("fused", 0.1, gpu, 2e-5, 4096, 3e-5)
    assert "numpy's own cores" in _verdict("fused", 0.8, cpu, 9e-5, big, 1e-2)
    fused_gpu = _verdict("fused", 0.8, gpu, 2e-5, big, 2e-5 + 0.052)  # 52 MiB moved in 52 ms
    assert "nothing is copied" in fused_gpu and "52 MiB read and written at 1.0 GB/s on this discrete GPU" in fused_gpu
    # The search.
    assert "in one kernel" in _verdict("search", 7.0, cpu, 9e-5, big, 1e-3)
    assert "shares numpy's cores and memory bandwidth" in _verdict("search", 0.5, cpu, 9e-5, big, 1e-2)
    assert "is most of dmlgpu's" in _verdict("search", 0.5, gpu, 2e-5, 1 << 16, 3e-5)
    assert "sends its queries over PCIe" in _verdict("search", 0.5, gpu, 2e-5, big, 1e-3)
    assert "host memory numpy reads" in _verdict("search", 0.5, igpu, 2e-5, big, 1e-3)
    for case in ("end to end", "resident", "fused", "search"):  # every one that numpy wins names a cause
        for device in (cpu, gpu, igpu):
            for nbytes, seconds in ((4096, 3e-5), (big, 1e-2)):
                line = _verdict(case, 0.5, device, 2e-5, nbytes, seconds)
                assert re.search(r"floor|PCIe|cores|GB/s|memory", line.split(": ", 1)[1]), line
                assert not any(vague in line for vague in ("outran", "still slower")), line



def test_showcases_numpy_routes_without_bitwise_count(monkeypatch):
    """numpy before 2.0 has no np.bitwise_count: the showcases' numpy routes (the chain, in place
    and not, and the search) give the same answer without it, bit for bit."""
    from dmlgpu_tools import showcases

    rng = np.random.default_rng(3)
    words = {t: rng.integers(0, np.iinfo(t).max, 4099, dtype=t, endpoint=True)
             for t in (np.uint8, np.uint16, np.uint32, np.uint64)}
    for t, w in words.items():
        w[:3] = 0, np.iinfo(t).max, np.iinfo(t).max >> 1  # no bits, all bits, all but the top one
    x, y = words[np.uint32], rng.integers(0, 1 << 32, 4099, dtype=np.uint32)
    database = showcases.codes(4096, 256)
    queries = database[rng.integers(0, 4096, 5)] ^ np.uint8(1)
    odd = showcases.codes(512, 24)  # 3-byte codes: the search counts bytes, not 64-bit words

    def answers():
        z, counts = np.empty_like(x), np.empty(x.size, np.uint8)
        return ([showcases.popcount(w) for w in words.values()], showcases.numpy_chain(x, y),
                tuple(a.copy() for a in showcases.numpy_chain_in_place(x, y, z, counts)),
                showcases.numpy_search(database, queries, 10), showcases.numpy_search(odd, odd[:3], 7))

    with_it = answers()
    monkeypatch.delattr(np, "bitwise_count", raising=False)
    assert not hasattr(np, "bitwise_count")
    without = answers()
    for w, counts in zip(words.values(), without[0]):  # each element's set bits, counted bit by bit
        expected = np.unpackbits(w.view(np.uint8)).reshape(w.size, -1).sum(1).astype(np.uint8)
        assert counts.dtype == np.uint8 and np.array_equal(counts, expected)
    for a, b in zip(with_it[1:], without[1:]):
        assert all(testing.same_bits(p, q) for p, q in zip(a, b))
