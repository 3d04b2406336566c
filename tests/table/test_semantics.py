"""Hand-written vectors: the documents' examples and DirectML's raw-bit semantics, written out
independently of dmlgpu.table.reference so that both the GPU and the reference are held to them."""
import numpy as np
import pytest

import dmlgpu
from dmlgpu.front.numpy_api import FUNCTIONS
from dmlgpu.table.reference import REFERENCES


def bits(a):
    a = np.asarray(a)
    return np.ascontiguousarray(a).view(f"<u{a.dtype.itemsize}")


IMPLEMENTATIONS = {"gpu": FUNCTIONS, "reference": REFERENCES}
both = pytest.mark.parametrize("impl", IMPLEMENTATIONS.values(), ids=IMPLEMENTATIONS.keys())


@both
def test_bit_not_document_example(impl):
    x = np.array([[0, 128], [42, 255]], np.uint8)
    np.testing.assert_array_equal(impl["bit_not"](x), [[255, 127], [213, 0]])


@both
def test_bit_count_document_example(impl):
    x = np.array([[0, 123], [456, 789]], np.uint32)
    got = impl["bit_count"](x, dtype=np.uint32)
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got, [[0, 6], [4, 5]])


@both
def test_bit_not_on_floats_and_signed_ints_is_raw(impl):
    x = np.array([1.0, -0.0], np.float32)
    np.testing.assert_array_equal(bits(impl["bit_not"](x)), [0xC07FFFFF, 0x7FFFFFFF])
    np.testing.assert_array_equal(impl["bit_not"](np.array([5, -1, -128], np.int8)), [-6, 0, 127])


@both
def test_bit_xor_keeps_nan_payloads(impl):
    a = np.array([0x7FA00001, 0x7F800001, 0x3F800000], np.uint32).view(np.float32)  # sNaN, payloads
    b = np.array([0x80000000] * 3, np.uint32).view(np.float32)
    np.testing.assert_array_equal(bits(impl["bit_xor"](a, b)), [0xFFA00001, 0xFF800001, 0xBF800000])


@both
def test_sign_floats(impl):
    x = np.array([2.5, -3.0, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan], np.float32)
    x = np.concatenate([x, np.array([1, 0x80000001, 0x7FC00001, 0xFFFFFFFF], np.uint32).view(np.float32)])
    expected = [0x3F800000, 0xBF800000, 0, 0, 0x3F800000, 0xBF800000, 0, 0,
                0x3F800000, 0xBF800000, 0, 0]  # denormals +/-1; every NaN 0; -0 -> +0
    np.testing.assert_array_equal(bits(impl["sign"](x)), expected)


@both
def test_sign_float16(impl):
    x = np.array([0x3C00, 0xBC00, 0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00, 0x0001,
                  0x8001, 0x7BFF], np.uint16).view(np.float16)
    expected = [0x3C00, 0xBC00, 0, 0, 0x3C00, 0xBC00, 0, 0, 0, 0x3C00, 0xBC00, 0x3C00]
    np.testing.assert_array_equal(bits(impl["sign"](x)), expected)


@both
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_sign_signed_ints(impl, dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, -1, 0, 1, info.max, info.min + 1], dtype)
    np.testing.assert_array_equal(impl["sign"](x), np.array([-1, -1, 0, 1, 1, -1], dtype))


@both
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
def test_sign_unsigned_ints(impl, dtype):
    x = np.array([0, 1, np.iinfo(dtype).max, 1 << (np.dtype(dtype).itemsize * 8 - 1)], dtype)
    np.testing.assert_array_equal(impl["sign"](x), np.array([0, 1, 1, 1], dtype))


@both
def test_bit_count_raw_bits(impl):
    f32 = np.array([1.0, -0.0, np.nan, -1.0], np.float32)
    np.testing.assert_array_equal(impl["bit_count"](f32), [7, 1, 9, 8])
    np.testing.assert_array_equal(impl["bit_count"](np.array([1.0], np.float16)), [4])
    np.testing.assert_array_equal(impl["bit_count"](np.array([-1, -128, 127], np.int8)), [8, 1, 7])
    got = impl["bit_count"](np.array([2**64 - 1, 0, 2**63], np.uint64), dtype=np.uint8)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, [64, 0, 1])


def test_sign_nan_differs_from_numpy_on_purpose():
    x = np.array([np.nan], np.float32)
    assert np.isnan(np.sign(x))[0] and dmlgpu.sign(x)[0] == 0


@both
def test_bit_and_or_on_float_bits(impl):
    a = np.array([0xFFA00001, 0x80000000, 0x3F800000], np.uint32).view(np.float32)  # -sNaN, -0, 1.0
    clear_sign = np.array([0x7FFFFFFF] * 3, np.uint32).view(np.float32)  # a NaN itself
    np.testing.assert_array_equal(bits(impl["bit_and"](a, clear_sign)), [0x7FA00001, 0, 0x3F800000])
    np.testing.assert_array_equal(bits(impl["bit_or"](a, np.float32(-0.0))), [0xFFA00001, 0x80000000, 0xBF800000])
    np.testing.assert_array_equal(impl["bit_and"](np.array([-1, -128, 5], np.int8), np.int8(-2)), [-2, -128, 4])


# Shifts, one row per element width: amounts within, at, above and far above the width (DirectML
# takes them modulo the width: 8 -> 0, 9 -> 1, 255 -> 7 for 8-bit), all-ones and top-bit values
# (a right shift is logical: no sign bit is copied in), and for 64 bits amounts across the word
# boundary. Worked out by hand: value, amount, left, right.
SHIFT_VECTORS = {
    "uint8": [(0xFF, 0, 0xFF, 0xFF), (0xFF, 1, 0xFE, 0x7F), (0xFF, 7, 0x80, 0x01), (0xFF, 8, 0xFF, 0xFF),
              (0xFF, 9, 0xFE, 0x7F), (0x81, 255, 0x80, 0x01), (0x81, 15, 0x80, 0x01), (0x01, 200, 0x01, 0x01),
              (0x80, 7, 0x00, 0x01)],
    "uint16": [(0xFFFF, 15, 0x8000, 0x0001), (0x8001, 16, 0x8001, 0x8001), (0x1234, 17, 0x2468, 0x091A),
               (0x1234, 0xFFFF, 0x0000, 0x0000), (0xFFFF, 31, 0x8000, 0x0001)],
    "uint32": [(0xFFFFFFFF, 31, 0x80000000, 1), (0x80000001, 32, 0x80000001, 0x80000001),
               (0xDEADBEEF, 33, 0xBD5B7DDE, 0x6F56DF77), (1, 0xFFFFFFFF, 0x80000000, 0),
               (0x80000000, 1000, 0, 0x00800000)],
    "uint64": [(2**64 - 1, 63, 2**63, 1), (0x8000000000000001, 64, 0x8000000000000001, 0x8000000000000001),
               (0x0123456789ABCDEF, 4, 0x123456789ABCDEF0, 0x00123456789ABCDE),
               (0x0123456789ABCDEF, 32, 0x89ABCDEF00000000, 0x0000000001234567),
               (0x0123456789ABCDEF, 36, 0x9ABCDEF000000000, 0x0000000000123456),
               (0x00000000FFFFFFFF, 257, 0x00000001FFFFFFFE, 0x000000007FFFFFFF),
               (1, 2**64 - 1, 2**63, 0)],
}


@both
@pytest.mark.parametrize("dtype", list(SHIFT_VECTORS))
def test_shifts_take_the_amount_modulo_the_width(impl, dtype):
    value, amount, left, right = (np.array(column, dtype) for column in zip(*SHIFT_VECTORS[dtype]))
    np.testing.assert_array_equal(bits(impl["bit_shift_left"](value, amount)), bits(left))
    np.testing.assert_array_equal(bits(impl["bit_shift_right"](value, amount)), bits(right))


def test_shift_at_the_width_differs_from_numpy_on_purpose():
    x, amount = np.array([0xFF], np.uint8), np.array([8], np.uint8)
    assert np.left_shift(x, amount)[0] == 0 and dmlgpu.bit_shift_left(x, amount)[0] == 0xFF


def test_shifts_take_no_signed_types():
    with pytest.raises(dmlgpu.ValidationError, match="ATensor.DataType is INT32; allowed: UINT64, UINT32"):
        dmlgpu.bit_shift_right(np.array([-8], np.int32), np.array([1], np.int32))
