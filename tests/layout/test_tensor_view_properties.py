"""Hypothesis differential test of operators on Tensor views through the device-resident path,
with the cases of tests/property_cases.py (which says how to run more examples and how to keep a
failing one as a regression).

Operands that are views of uploaded Tensors (slices with steps and starts on and off 16-byte
boundaries, integers, None, `...`, transposes; uploads from big-endian arrays), Python scalars,
`out` fresh, a view of a poisoned Tensor or in place; judged against numpy's own views of the
same data: results bit for bit, every element outside `out` unchanged (an `out` off a 16-byte
boundary too), rejected calls (scalars numpy rejects) write nothing; accepted calls with `out`
run twice (the second through the remembered call).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dmlgpu
from dmlgpu import Tensor, ValidationError, testing
from dmlgpu.table.operators import OPERATORS

from conftest import POISON
from property_cases import (TensorCallCase, examples, is_scalar, load_regressions, native_type, result_shape,
                            scalar_value, tell, tensor_call_cases)


def check_tensor_call_case(case: TensorCallCase):
    tell(f"regression entry: {case.to_json()}")
    rng = np.random.default_rng(case.seed)
    built = [v.build(rng) for v in case.operands]
    if case.same_operand:
        built[1] = built[0]
    xs, ts = [b[0] for b in built], [b[1] for b in built]
    op = case.operator
    # The oracle, from numpy's own views of the same data.
    types = [native_type(x.dtype) for x in xs if not is_scalar(x)]
    values = [scalar_value(x, types[0]) if is_scalar(x) else x.astype(types[0].numpy) for x in xs]
    shape = result_shape([v for v in values if v is not None])
    out_type = native_type(case.out_dtype) if case.out_dtype else types[0]
    out, out_x, out_base, out_tensor = None, None, None, None
    if case.out == "fresh":
        out = Tensor.empty(shape, out_type.numpy)
    elif case.out == "view":
        out_x, out, out_base, out_tensor = case.out_view.build(rng, poison=True)
    elif case.out.startswith("in_place:"):
        k = int(case.out.split(":")[1])
        out_x, out, out_base, out_tensor = built[k]
    problem = None
    if any(v is None for v in values):
        problem = "a Python scalar numpy rejects"
    elif out is not None:
        if out_x is not None and (out_x.shape != shape or native_type(out_x.dtype) != out_type):
            problem = "out's shape or type"
        elif case.out.startswith("in_place:") and not op.in_place:
            problem = "in place not supported"
    tell(f"oracle: {problem or 'accept'}; operands {[x if is_scalar(x) else (x.shape, x.strides) for x in xs]}",
         f"oracle: {problem or 'accept'}")
    owners = [(b[2], b[3]) for b in built if b[2] is not None] + ([(out_base, out_tensor)] if case.out == "view" else [])
    owners = list({id(t): (b, t) for b, t in owners}.values())
    expected = None if problem else testing.reference(op, [v.copy() for v in values], out_type)
    kwargs = {"dtype": np.dtype(case.out_dtype)} if case.out_dtype else {}

    def call():
        return getattr(dmlgpu, op.short)(*ts, out=out, **kwargs)

    if problem:
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.operator == op.dml_name, str(info.value)
        for base, tensor in owners:
            assert testing.same_bits(tensor.numpy(), base.astype(tensor.dtype)), "a rejected call wrote"
        return
    result = call()
    assert isinstance(result, Tensor) and (out is None or result is out)
    assert result.dtype.isnative and testing.same_bits(result.numpy(), expected)
    for base, tensor in owners:  # every element outside `out` keeps its value
        want = base.copy()
        if tensor is out_tensor:
            spec = case.out_view if case.out == "view" else case.operands[int(case.out.split(":")[1])]
            spec.of(want)[...] = expected
        assert testing.same_bits(tensor.numpy(), want), "wrong bytes in or around out"
    if case.out in ("fresh", "view"):  # again through the cache of repeated Tensor calls
        if out_tensor is not None:
            out_tensor.buffer.write(np.full(out_tensor.buffer.size_in_bytes, POISON, np.uint8))
        assert call() is out and testing.same_bits(out.numpy(), expected)


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.short)
@settings(max_examples=examples(12))
@given(data=st.data())
def test_tensor_view_property(op, data):
    check_tensor_call_case(data.draw(tensor_call_cases(op), label="case"))


@pytest.mark.parametrize("case", load_regressions("tensor_cases.json", TensorCallCase))
def test_tensor_view_regression(case):
    check_tensor_call_case(case)
