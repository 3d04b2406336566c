"""Hypothesis differential test of the numpy front end: random calls judged by the oracle of
tests/property_cases.py (which says how to run more examples and how to keep a failing one as a
regression) and compared bit for bit with `dmlgpu.table.reference`.

Shapes of 0-10 dimensions (size-0 and size-1 included), every dtype in either byte order,
broadcasting pairs for operators of two operands, views (slices with steps, reversals,
transposes, broadcast_to), Python scalars as operands (edges of every width, floats, bools;
judged by NEP 50 as numpy 2 applies it), `out` (fresh, a view into a larger array, in place,
big-endian). Accepted calls match the reference bit for bit and write nothing outside `out`;
rejected calls raise `ValidationError` and change no array.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dmlgpu
from dmlgpu import DataType, FeatureLevel, ValidationError, testing
from dmlgpu.table.operators import BY_SHORT, OPERATORS

from conftest import poisoned
from property_cases import (FRONT_END_FAULTS, ArrayCase, FrontEndCase, examples, front_end_cases,
                            front_end_verdict, is_scalar, load_regressions, native_type, result_shape, tell)


def build_call(case: FrontEndCase, rng):
    """(operands, the arrays owning their memory, out, the array owning out's memory)."""
    built = [a.build(rng) for a in case.inputs]
    if case.same_operand:
        built[1] = built[0]
    arrays, bases = [b[0] for b in built], [b[1] for b in built]
    first = next((a for a in arrays if not is_scalar(a)), np.zeros(0, np.uint8))
    default = first.dtype if case.operator.same_type else case.operator.default_output.numpy
    dtype = np.dtype(case.out_dtype or default)
    shape = case.out_shape if case.out_shape is not None else (result_shape(arrays) or first.shape)
    out, out_base = None, None
    if case.out in ("fresh", "readonly"):
        out = out_base = np.full(shape, None, object) if dtype == object else poisoned(shape, dtype)
        out.flags.writeable = case.out == "fresh"
    elif case.out == "view":
        out, out_base = ArrayCase(dtype.str, shape, "sliced", tuple((2, 1) for _ in shape)).build(rng)
    elif case.out.startswith("in_place:"):
        k = int(case.out.split(":")[1])
        out, out_base = arrays[k], bases[k]
    elif case.out == "overlap":
        # Input 0 and `out` are views of one buffer, one element apart: a partial overlap.
        a = np.ascontiguousarray(arrays[0])
        storage = np.concatenate([a.reshape(-1), a.reshape(-1)[:1]])
        arrays[0] = bases[0] = storage[:-1].reshape(a.shape)
        out, out_base = storage[1:].reshape(a.shape), storage
        if case.same_operand:
            arrays[1], bases[1] = arrays[0], bases[0]
    return arrays, bases, out, out_base


def _same_view(target: np.ndarray, base: np.ndarray, view: np.ndarray) -> np.ndarray:
    """The view of `target` (shaped like `base`) that `view` is of `base`."""
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // base.itemsize
    scale = target.itemsize / base.itemsize
    return np.lib.stride_tricks.as_strided(target.reshape(-1)[offset:], view.shape,
                                           [int(s * scale) for s in view.strides])


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Unchanged: same dtype, shape and bytes (works for object and str arrays too)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def check_front_end_case(case: FrontEndCase):
    tell(f"regression entry: {case.to_json()}")
    arrays, bases, out, out_base = build_call(case, np.random.default_rng(case.seed))
    verdict, values = front_end_verdict(case, arrays, out)
    tell(f"oracle: {verdict}; operands {[a if is_scalar(a) else (a.shape, a.dtype.str) for a in arrays]}, "
         f"out {None if out is None else (out.shape, out.dtype.str)}", f"oracle: {verdict}")
    owners = list({id(b): b for b in bases + [out_base] if b is not None}.values())
    snapshots = [b.copy() for b in owners]
    op = case.operator
    kwargs = {"feature_level": None if case.level is None else FeatureLevel(case.level)}
    if not op.same_type:
        kwargs["dtype"] = np.dtype(case.out_dtype)
    if verdict != "reject":
        out_type = native_type(kwargs.get("dtype", values[0].dtype))
        expected = testing.reference(op, [v.copy() for v in values], out_type)
    try:
        result = getattr(dmlgpu, op.short)(*arrays, out=out, **kwargs)
    except ValidationError as error:
        assert verdict != "accept", f"rejected a call the oracle accepts: {error}"
        if verdict == "dims":
            assert error.field == "DimensionCount", str(error)
        assert error.operator == op.dml_name and str(error).startswith(op.dml_name + ":")
        for owner, before in zip(owners, snapshots):
            assert same_bytes(owner, before), "a rejected call changed an array"
        return
    assert verdict != "reject", "accepted a call the oracle rejects"
    got = np.asarray(result)
    assert got.dtype.isnative or result is out, "a new result in non-native byte order"
    got = got.astype(got.dtype.newbyteorder("="))  # a big-endian `out` holds the same values
    assert testing.same_bits(got, expected), f"got {result!r}, expected {expected!r}"
    untouched = [np.ones(owner.shape, bool) for owner in owners]
    if out is not None:
        assert result is out
        k = next(i for i, owner in enumerate(owners) if owner is out_base)
        _same_view(untouched[k], out_base, out)[...] = False
    for owner, before, keep in zip(owners, snapshots, untouched):
        assert same_bytes(owner[keep], before[keep]), "bytes outside `out` changed"


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.short)
@settings(max_examples=examples(13))
@given(data=st.data())
def test_front_end_property(op, data):
    check_front_end_case(data.draw(front_end_cases(op=op), label="case"))


@pytest.mark.parametrize("fault", FRONT_END_FAULTS, ids=lambda fault: fault.replace(" ", "-"))
@settings(max_examples=examples(6))
@given(data=st.data())
def test_front_end_property_with_a_fault(fault, data):
    check_front_end_case(data.draw(front_end_cases(fault), label="case"))


@pytest.mark.parametrize("case", load_regressions("front_end_cases.json", FrontEndCase))
def test_front_end_regression(case):
    check_front_end_case(case)


# =============================================================================================
# Bugs found while writing these properties, fixed: regression tests with the minimal input.
# =============================================================================================
def test_xor_in_place_on_a_while_b_overlaps_a(device, monkeypatch):
    """Either rejected (the front end's rule for partial overlap) or right; never wrong."""
    monkeypatch.setattr(device, "max_buffer_size", 16)  # as if the arrays exceeded device limits
    base = np.arange(48, dtype=np.uint8)
    a, b = base[8:40], base[0:32]
    before = base.copy()
    expected = testing.reference(BY_SHORT["bit_xor"], [a.copy(), b.copy()], DataType.UINT8)
    try:
        dmlgpu.bit_xor(a, b, out=a)
    except ValidationError:
        assert testing.same_bits(base, before)
        return
    assert testing.same_bits(a, expected), f"got {a.tolist()}, expected {expected.tolist()}"
