"""Fuzzing `dmlgpu.validate` and `dmlgpu.TensorDesc` with arbitrary Python values.

`validate` is the gate between whatever a program passes and the GPU, so it must either return
the operator's table row or raise `ValidationError`, never anything else (a TypeError from a
comparison, an OverflowError from a conversion, ...), and its message must be a non-empty string
that starts with the operator's DirectML name ("dmlgpu" when the descriptor names no operator).
`TensorDesc(...)` stores its arguments without judging them, so building one never raises.

Fields get arbitrary values: ints of any size and sign, floats with NaN and infinities, None,
strings, bytes, bools, complex numbers, numpy scalars, enum members, out-of-range enum values,
lists and tuples of random length holding any of these, dicts, sets, numpy arrays. Descriptors
start valid and get 0-3 fields (or whole tensor slots) replaced, so that every rule of validate()
is reached (about a fifth are accepted); the operator descriptor itself and the feature level
are sometimes anything. validate() does not touch the GPU, so the CI budget is large: 2000
examples of validate and 400 of TensorDesc, under 10 s on lavapipe's 2 cores. Profiles come from
property_cases (`DMLGPU_HYPOTHESIS_PROFILE`).

Bugs this fuzz found, fixed and kept as regression tests below:
* numpy integers next to Python ints in sizes or strides made validate() raise OverflowError
  (`test_numpy_int_size_next_to_a_python_int`);
* integers beyond Python's 4300-digit int-to-str limit broke ValidationError's message
  (`test_huge_int_in_any_field_is_a_validation_error`).

New failing examples: add them as a regression test like these (or as an `@example(...)` on
the fuzz test) so that they are replayed on every run.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import dmlgpu
from dmlgpu import DataType, FeatureLevel, TensorDesc, ValidationError, testing
from dmlgpu.describe.operator_descs import DESC_CLASSES, OperatorDesc

from property_cases import examples

NUMPY_INTS = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
EDGE_INTS = (0, 1, -1, 2, 3, 4, 16, 24, 2**31, 2**32 - 1, 2**32, 2**63, 2**64 - 1, 2**64, 2**100, -2**70)


def numpy_ints():
    return st.sampled_from(NUMPY_INTS).flatmap(
        lambda t: st.integers(int(np.iinfo(t).min), int(np.iinfo(t).max)).map(t))


SCALARS = st.one_of(
    st.integers(),  # unbounded: negative and far beyond 2^64, well under 4300 digits
    st.sampled_from(EDGE_INTS),
    st.floats(),  # NaN, infinities, -0.0
    st.none(),
    st.booleans(),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.complex_numbers(max_magnitude=1e6),
    numpy_ints(),
    st.floats(width=32).map(np.float32),
    st.booleans().map(np.bool_),
    st.sampled_from(list(DataType) + list(FeatureLevel)),
    st.integers(14, 1000),  # DataType values beyond the enum
    st.integers(-(2**16), 0x7000),  # FeatureLevel-sized values, mostly not levels
    st.builds(object),
)
ANYTHING = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=10),
        st.lists(inner, max_size=10).map(tuple),
        st.dictionaries(st.integers(0, 9), inner, max_size=3),
        st.frozensets(st.integers(-3, 3), max_size=3),
        st.lists(st.integers(-(2**31), 2**31 - 1), max_size=9).map(np.array),
    ),
    max_leaves=6,
)


def packed(sizes):
    return [int(np.prod(sizes[d + 1:], dtype=np.int64)) for d in range(len(sizes))]


def int_like():
    """Integers as a program might pass them: small, edge, negative, numpy, or anything."""
    return st.one_of(st.integers(-2, 6), st.sampled_from(EDGE_INTS), numpy_ints(), SCALARS)


def sequences(element, min_size=0, max_size=9):
    return st.lists(element, min_size=min_size, max_size=max_size).flatmap(
        lambda items: st.sampled_from([items, tuple(items)]))


#: Per TensorDesc field: values that break it, plausibly or wildly.
BAD_FIELDS = {
    "data_type": st.one_of(st.sampled_from(list(DataType)), st.integers(-5, 300), ANYTHING),
    "sizes": st.one_of(sequences(int_like()), ANYTHING),
    "strides": st.one_of(sequences(int_like()), ANYTHING),
    "total_tensor_size_in_bytes": st.one_of(int_like(), ANYTHING),
    "guaranteed_base_offset_alignment": st.one_of(
        st.sampled_from([1, 2, 3, 4, 8, 16, 24, 32, -16, 2**32]), int_like(), ANYTHING),
}
FIELDS = tuple(BAD_FIELDS)


@st.composite
def operator_descs(draw):
    """One of the descriptor classes (one per table row), valid at first, with 0-3 fields (or whole tensor
    slots) replaced by fuzzed values, so that every rule of validate() is reached; now and then
    not a descriptor at all."""
    if draw(st.integers(0, 19)) == 0:
        return draw(ANYTHING)
    cls = draw(st.sampled_from(list(DESC_CLASSES.values())))
    op = cls.OPERATOR
    in_type, out_type = draw(st.sampled_from(testing.case_types(op)))
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=8))
    fields = []
    for k in range(len(op.tensors)):
        is_output = k == len(op.inputs)
        strides = draw(st.sampled_from([None, packed(sizes)] + ([] if is_output else [[0] * len(sizes)])))
        fields.append(dict(data_type=out_type if is_output else in_type, sizes=list(sizes), strides=strides,
                           total_tensor_size_in_bytes=None, guaranteed_base_offset_alignment=0))
    slots = [None] * len(fields)
    for _ in range(draw(st.integers(0, 3))):
        k = draw(st.integers(0, len(fields) - 1))
        name = draw(st.sampled_from(FIELDS + ("tensor",)))
        if name == "tensor":
            slots[k] = draw(ANYTHING)
        else:
            fields[k][name] = draw(BAD_FIELDS[name])
    # The row's other members (REDUCE's Function and Axes, TOP_K1's Axis, K, AxisDirection):
    # small integers and sequences of them, valid or not, or anything at all.
    attributes = [draw(st.one_of(st.integers(-1, 12), st.lists(st.integers(-1, 8), max_size=9), ANYTHING))
                  for _ in op.attributes]
    return cls(*(TensorDesc(**f) if slot is None else slot for f, slot in zip(fields, slots)), *attributes)


FEATURE_LEVELS = st.one_of(st.none(), st.none(), st.sampled_from(list(FeatureLevel)),
                           st.sampled_from([int(level) for level in FeatureLevel]), ANYTHING)


def expected_operator(desc) -> str:
    return desc.OPERATOR.dml_name if isinstance(desc, OperatorDesc) else "dmlgpu"


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # numpy-int sizes: see test_bad_inputs
@settings(max_examples=examples(2000))
@given(desc=operator_descs(), level=FEATURE_LEVELS)
def test_validate_returns_or_raises_validation_error(desc, level):
    try:
        result = dmlgpu.validate(desc, level)
    except ValidationError as error:
        message = str(error)
        operator = expected_operator(desc)
        assert isinstance(message, str) and message, "empty message"
        assert error.operator == operator and message.startswith(operator + ": "), message
        assert error.field and isinstance(error.field, str), message
        event(f"rejected: {error.field}")
    else:
        assert isinstance(desc, OperatorDesc) and result is desc.OPERATOR
        event("accepted")


FIELDS = ("data_type", "sizes", "strides", "total_tensor_size_in_bytes", "guaranteed_base_offset_alignment")


@settings(max_examples=examples(400))
@given(fields=st.fixed_dictionaries({name: ANYTHING for name in FIELDS}), positional=st.booleans())
def test_tensor_desc_construction_never_raises(fields, positional):
    """TensorDesc stores what it is given; sequences become tuples, DataType values members."""
    desc = TensorDesc(*(fields[name] for name in FIELDS)) if positional else TensorDesc(**fields)
    for name in ("sizes", "strides"):
        given_value, stored = fields[name], getattr(desc, name)
        if isinstance(given_value, (list, tuple)):  # the same values as a tuple, numpy ints as ints
            assert isinstance(stored, tuple) and len(stored) == len(given_value)
            assert all(_same_or_plain(a, b) for a, b in zip(stored, given_value))
    for name in ("total_tensor_size_in_bytes", "guaranteed_base_offset_alignment"):
        assert _same_or_plain(getattr(desc, name), fields[name])


def _same_or_plain(stored, given) -> bool:
    """TensorDesc keeps values as given, except numpy integers, which become Python ints."""
    if isinstance(given, np.integer) and not isinstance(given, np.bool_):
        return type(stored) is int and stored == int(given)
    return stored is given


def test_numpy_int_size_next_to_a_python_int():
    """Found by test_validate_returns_or_raises_validation_error (minimal example)."""
    desc = TensorDesc(DataType.FLOAT32, [128, np.int8(1)])  # a valid {128, 1} tensor
    assert dmlgpu.validate(dmlgpu.ElementWiseBitNotOperatorDesc(desc, desc)).short == "bit_not"


HUGE = 2**20000  # over Python's 4300-digit int-to-str limit


@pytest.mark.parametrize("field", ["data_type", "sizes", "strides", "total_tensor_size_in_bytes",
                                   "guaranteed_base_offset_alignment", "feature_level"])
def test_huge_int_in_any_field_is_a_validation_error(field):
    fields = dict(data_type=DataType.UINT8, sizes=(4,))
    level = None
    if field == "feature_level":
        level = HUGE
    elif field in ("sizes", "strides"):
        fields[field] = (HUGE,)
    else:
        fields[field] = HUGE
    desc = TensorDesc(**fields)
    with pytest.raises(ValidationError):
        dmlgpu.validate(dmlgpu.ElementWiseBitNotOperatorDesc(desc, TensorDesc(DataType.UINT8, (4,))), level)
