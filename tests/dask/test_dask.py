"""dmlgpu.dask: what the client checks before any graph exists, here; and the cluster
scenarios of tests/dask/dask_scenarios.py, each group run once in a child process with a timeout (a
`LocalVulkanCluster` of two workers; two `python -m dmlgpu worker` commands against one
scheduler, as two hosts, with a worker killed in the middle of a search; DMLGPU_DEVICES pinning).
Each scenario is reported as a test of its own. The workers inherit this process's environment,
so under DMLGPU_VALIDATION=1 they run under the validation layer too and write to the same log,
which `conftest.no_validation_messages` reads after every test.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask is not installed (pip install .[dask])")
pytest.importorskip("distributed", reason="distributed is not installed (pip install .[dask])")

import dmlgpu  # noqa: E402
import dmlgpu.dask as dd  # noqa: E402
from dask_scenarios import SCENARIOS  # noqa: E402

SCRIPT = Path(__file__).with_name("dask_scenarios.py")
ROOT = Path(dmlgpu.__file__).resolve().parents[1]
#: Seconds each group's child may take (a hang fails the group's tests, never the run).
TIMEOUTS = {"local": 900, "hosts": 420, "pinning": 300}
_RESULTS: dict = {}


def group_results(group: str) -> dict:
    """The scenario results of `group`, from one child process run the first time it is asked."""
    if group not in _RESULTS:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        try:
            done = subprocess.run([sys.executable, str(SCRIPT), group], env=env, cwd=str(SCRIPT.parent),
                                  capture_output=True, text=True, timeout=TIMEOUTS[group])
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            _RESULTS[group] = json.loads(lines[-1]) if lines else {
                "<setup>": f"exit status {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"}
        except subprocess.TimeoutExpired as exc:
            _RESULTS[group] = {"<setup>": f"hung for {TIMEOUTS[group]} s\n{exc.stdout}\n{exc.stderr}"}
    return _RESULTS[group]


CASES = [(group, name) for group, scenarios in SCENARIOS.items() for name, _ in scenarios]


@pytest.mark.parametrize("group, scenario", CASES, ids=[f"{g}-{n}" for g, n in CASES])
def test_cluster_scenario(group, scenario):
    results = group_results(group)
    assert "<setup>" not in results, results["<setup>"]
    assert scenario in results, f"{scenario} did not run: {sorted(results)}"
    assert results[scenario] is None, results[scenario]


# Calls the client rejects before a graph exists, each with the front end's message.
BAD_CALLS = {
    "dtype-not-at-level": ("sign", [np.float64], {}),
    "mixed-dtypes": ("bit_xor", [np.uint8, np.uint16], {}),
    "no-directml-type": ("bit_not", [np.bool_], {}),
    "output-dtype": ("bit_count", [np.uint8], {"dtype": np.int8}),
    "old-level": ("sign", [np.int8], {"feature_level": dmlgpu.FeatureLevel.LEVEL_2_0}),
    "unknown-level": ("bit_not", [np.uint8], {"feature_level": 1}),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_client_side_errors_are_the_front_ends(case):
    short, dtypes, options = BAD_CALLS[case]
    with pytest.raises(dmlgpu.ValidationError) as front:
        getattr(dmlgpu, short)(*(np.zeros(3, t) for t in dtypes), **options)
    with pytest.raises(dmlgpu.ValidationError) as ours:
        dd.FUNCTIONS[short](*(da.zeros(3, dtype=t, chunks=2) for t in dtypes), **options)
    assert str(ours.value) == str(front.value) and type(ours.value) is type(front.value)


def test_shapes_that_do_not_broadcast_are_rejected_on_the_client():
    with pytest.raises(dmlgpu.ValidationError) as front:
        dmlgpu.bit_xor(np.zeros(3, np.uint8), np.zeros(4, np.uint8))
    with pytest.raises(dmlgpu.ValidationError) as ours:
        dd.bit_xor(da.zeros(3, dtype=np.uint8, chunks=2), da.zeros(4, dtype=np.uint8, chunks=2))
    assert str(ours.value) == str(front.value)
    with pytest.raises(TypeError, match="takes 2 arrays"):
        dd.bit_xor(da.zeros(3, dtype=np.uint8))
    with pytest.raises(TypeError, match="unexpected keyword"):
        dd.bit_not(da.zeros(3, dtype=np.uint8), out=None)


def test_operands_are_taken_and_rejected_as_the_front_end_does():
    """One implementation of the operand rules (dmlgpu.layout.operands): Python scalars take the
    other operand's type, and what the front end rejects is rejected with its fields."""
    big = np.arange(100, dtype=">u4")
    x = da.from_array(big, chunks=30)
    assert dd.bit_xor(x, 0xFF).dtype == np.uint32 and dd.bit_not(x).dtype == np.uint32
    for bad in ((x, 2**40), (x, 1.5), (1, 2), (x, "1")):
        with pytest.raises(dmlgpu.ValidationError) as front:
            dmlgpu.bit_xor(*(big if b is x else b for b in bad))
        with pytest.raises(dmlgpu.ValidationError) as ours:
            dd.bit_xor(*bad)
        assert type(ours.value) is type(front.value), bad
        assert (ours.value.tensor, ours.value.field, ours.value.value) == \
            (front.value.tensor, front.value.field, front.value.value), bad


def test_sharded_index_checks_its_database_before_any_cluster():
    for bad in (da.zeros((10, 4), dtype=np.float32, chunks=5), da.zeros(10, dtype=np.uint8, chunks=5),
                np.zeros((3, 4), np.float64), [[1, 2]]):
        with pytest.raises(dmlgpu.ValidationError) as error:
            dd.HammingIndex(bad)
        assert error.value.operator == "dmlgpu.dask.HammingIndex"
