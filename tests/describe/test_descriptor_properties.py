"""Hypothesis differential test of the low level: random operator descriptors and bindings,
judged by the oracle of tests/property_cases.py (which says how to run more examples and how to
keep a failing one as a regression) and compared bit for bit with `dmlgpu.table.reference`.

An operator, a feature level, tensor descriptors (data types, 1-8 dimensions, packed / padded /
aligned-row / permuted / broadcast strides, alignments, total sizes), element values rich in edge
cases (`dmlgpu.testing.sample`) and bindings (offsets, range sizes, one shared buffer or one
buffer per tensor, in place or not). The oracle (`descriptor_problem`, `binding_problem`)
restates the rules from the operator table. Accepted: `create_operator` and `execute` succeed,
and every buffer afterwards equals its snapshot from before with exactly the output elements
replaced by the reference's values (gaps between strided elements, padding, inputs and guard
bytes keep their bytes); then once more with new data through the same bindings. Rejected:
`ValidationError`, and no byte of any buffer changes.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dmlgpu
from dmlgpu import Binding, DataType, TensorDesc, ValidationError, testing
from dmlgpu.describe.operator_descs import DESC_CLASSES
from dmlgpu.table.operators import OPERATORS

from property_cases import (DESCRIPTOR_FAULTS, NUMERIC_TYPES, DescriptorCase, TensorCase, descriptor_cases,
                            element_offsets, examples, load_regressions, tell, verdict_of)


# -- running a case -------------------------------------------------------------------------
def byte_positions(t: TensorCase) -> np.ndarray:
    """(elements, element size) array: the buffer bytes each logical element occupies."""
    starts = t.offset + element_offsets(t.sizes, t.strides) * t.element_size
    return starts[:, None] + np.arange(t.element_size)


def buffer_contents(case: DescriptorCase, rng) -> list:
    """Random guard bytes for every buffer, with edge-rich sample values at every input element."""
    contents = [rng.integers(0, 256, n, dtype=np.uint8) for n in case.buffer_sizes]
    for t in case.tensors[:-1]:
        if DataType(t.data_type) not in NUMERIC_TYPES or not t.sizes:
            continue
        positions = byte_positions(t)
        if positions.size == 0 or positions.max() >= case.buffer_sizes[t.buffer]:
            continue
        values = testing.sample(DataType(t.data_type), (positions.shape[0],), rng).view(np.uint8)
        contents[t.buffer][positions.ravel()] = values  # broadcast elements: the last write wins
    return contents


def assert_contents(buffers, expected: list):
    """Every byte of every buffer as expected; the first differing bytes are reported."""
    for k, (buffer, want) in enumerate(zip(buffers, expected)):
        got = buffer.read()
        wrong = np.flatnonzero(got != want)[:8]
        assert wrong.size == 0, (f"buffer {k}: bytes {wrong.tolist()} are {got[wrong].tolist()}, "
                                 f"expected {want[wrong].tolist()}")


def expected_contents(case: DescriptorCase, before: list) -> list:
    """The buffers after a correct run: `before` with only the output elements replaced."""
    *inputs, output = case.tensors
    logical = [before[t.buffer][byte_positions(t).ravel()].view(DataType(t.data_type).numpy).reshape(t.sizes)
               for t in inputs]
    result = testing.reference(case.operator, logical, DataType(output.data_type))
    after = [b.copy() for b in before]
    after[output.buffer][byte_positions(output).ravel()] = np.ascontiguousarray(result).reshape(-1).view(np.uint8)
    return after


def check_descriptor_case(device, case: DescriptorCase):
    tell(f"regression entry: {case.to_json()}")
    desc_problem, bind_problem = verdict_of(case)
    in_place = any(case.range(t) == case.range(case.tensors[-1]) and t.buffer == case.tensors[-1].buffer
                   for t in case.tensors[:-1])
    verdict = (f"descriptor rejected: {desc_problem}" if desc_problem else
               f"bindings rejected: {bind_problem}" if bind_problem else
               "accepted, in place" if in_place else "accepted")
    tell(f"oracle: {verdict}", f"oracle: {verdict}")

    rng = np.random.default_rng(case.seed)
    before = buffer_contents(case, rng)
    buffers = [device.allocate(data.size) for data in before]
    try:
        for buffer, data in zip(buffers, before):
            buffer.write(data)
        desc = DESC_CLASSES[case.operator.name](*(t.desc() for t in case.tensors))
        bindings = [Binding(buffers[t.buffer], t.offset, t.size) for t in case.tensors]
        if desc_problem:
            with pytest.raises(ValidationError):
                device.create_operator(desc, case.feature_level())
            assert_contents(buffers, before)
            return
        compiled = device.create_operator(desc, case.feature_level())
        if bind_problem:
            with pytest.raises(ValidationError):
                compiled.execute(bindings[:-1], bindings[-1:])
            assert_contents(buffers, before)
            return
        compiled.execute(bindings[:-1], bindings[-1:])
        assert_contents(buffers, expected_contents(case, before))
        # Again with new data through the same bindings (execute() replays recorded work then).
        again = buffer_contents(case, rng)
        for buffer, data in zip(buffers, again):
            buffer.write(data)
        compiled.execute(bindings[:-1], bindings[-1:])
        assert_contents(buffers, expected_contents(case, again))
    finally:
        for buffer in buffers:
            buffer.release()


@pytest.mark.parametrize("plan", ["flat", "rows", "gather", "strided"])
@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.short)
@settings(max_examples=examples(5))
@given(data=st.data())
def test_descriptor_property(device, op, plan, data):
    """Per operator and layout plan, so that each pair gets its share of the examples."""
    check_descriptor_case(device, data.draw(descriptor_cases(op=op, plan=plan), label="case"))


@pytest.mark.parametrize("fault", DESCRIPTOR_FAULTS, ids=lambda fault: fault.replace(" ", "-"))
@settings(max_examples=examples(10))
@given(data=st.data())
def test_descriptor_property_with_a_fault(device, fault, data):
    """Each fault gets its own budget, so that every rule is exercised on every CI run."""
    check_descriptor_case(device, data.draw(descriptor_cases(fault), label="case"))


@pytest.mark.parametrize("case", load_regressions("descriptor_cases.json", DescriptorCase))
def test_descriptor_regression(device, case):
    check_descriptor_case(device, case)


# =============================================================================================
# Bugs found while writing these properties, fixed: regression tests with the minimal input.
# =============================================================================================
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_numpy_uint8_sizes_compute_every_element(device):
    sizes = (np.uint8(16), np.uint8(16))
    desc = TensorDesc(DataType.UINT8, sizes)
    compiled = device.create_operator(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc))
    source = device.upload(np.arange(256, dtype=np.uint8))
    out = device.allocate(256)
    compiled.execute([Binding(source)], [Binding(out)])
    assert testing.same_bits(out.read(), ~np.arange(256, dtype=np.uint8)), "output left unwritten"
