"""Every operator x every data type of the newest level x shapes of 0-10 dimensions x
out-of-place / in-place, through the numpy front end, compared bit for bit with
dmlgpu.table.reference. Outputs are poisoned first, so an element left unwritten fails."""
import numpy as np
import pytest

from dmlgpu import bit_xor, testing
from dmlgpu.table.operators import OPERATORS

from conftest import poisoned, shape_id

SHAPES = [(1,), (3,), (5,), (7,), (4097,), (3, 5), (2, 3, 7), (1, 2, 1, 3), (2, 1, 3, 1, 5),
          (2, 3, 1, 2, 5, 1), (1, 2, 1, 2, 1, 3, 2), (2, 1, 2, 1, 2, 1, 2, 3), (), (2,) * 10]
MODES = ["new", "out", "inplace"]


def _cases():
    for op, in_type, out_type in testing.all_cases():
        for shape in SHAPES:
            for mode in MODES:
                if mode == "inplace" and not op.in_place:
                    continue
                label = in_type.name.lower() + ("" if op.same_type else "-" + out_type.name.lower())
                yield pytest.param(op, in_type, out_type, shape, mode,
                                   id=f"{op.short}-{label}-{shape_id(shape)}-{mode}")


@pytest.mark.parametrize("op, in_type, out_type, shape, mode", list(_cases()))
def test_matches_reference(op, in_type, out_type, shape, mode, rng):
    arrays = [testing.sample(in_type, shape, rng) for _ in op.inputs]
    originals = [a.copy() for a in arrays]
    expected = testing.reference(op, arrays, out_type)
    if mode == "new":
        got = testing.front_end(op, arrays, out_type)
    elif mode == "out":
        out = poisoned(shape, out_type.numpy)
        got = testing.front_end(op, arrays, out_type, out=out)
        assert got is out
    else:
        out = arrays[-1]
        got = testing.front_end(op, arrays, out_type, out=out)
        assert got is out
    if shape == ():
        assert np.ndim(got) == 0
    assert testing.same_bits(np.asarray(got), expected)
    for i, (a, original) in enumerate(zip(arrays, originals)):
        if not (mode == "inplace" and i == len(arrays) - 1):
            assert testing.same_bits(a, original), "an input was modified"


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.short)
def test_empty_arrays(op):
    in_type, out_type = testing.case_types(op)[0]
    arrays = [np.empty((3, 0, 2), in_type.numpy) for _ in op.inputs]
    got = testing.front_end(op, arrays, out_type)
    assert got.shape == (3, 0, 2) and got.dtype == out_type.numpy


def test_bit_xor_of_an_array_with_itself_is_zero(rng):
    a = testing.sample(testing.DataType.FLOAT32, (1000,), rng)
    assert not bit_xor(a, a).view(np.uint32).any()
