"""numpy reference implementations with DirectML's semantics, looked up by operator name.

Everything works on raw bits, because that is what DirectML specifies: the bitwise operators
ignore the data type except for its width, and SIGN of a float is decided from its bit pattern
(NaN -> 0, -0 -> +0, denormals -> +/-1). numpy's own `np.sign` (NaN -> NaN) and
`np.bitwise_count` (counts |x| for signed integers) differ, so neither is used.
"""
from __future__ import annotations

import numpy as np

from .dtypes import DataType

_POPCOUNT_8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def _bits(x: np.ndarray) -> np.ndarray:
    """The same memory read as unsigned integers of the element's width."""
    x = np.asarray(x)
    return x.view(np.dtype(f"<u{x.dtype.itemsize}"))


def bit_not(x: np.ndarray) -> np.ndarray:
    """DML_ELEMENT_WISE_BIT_NOT: every bit of every element inverted."""
    return np.invert(_bits(x)).view(x.dtype)


def bit_xor(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """DML_ELEMENT_WISE_BIT_XOR: bits of A xor bits of B (numpy broadcasting applies)."""
    if a.dtype != b.dtype:
        raise TypeError(f"bit_xor needs one data type, got {a.dtype} and {b.dtype}")
    return np.bitwise_xor(_bits(a), _bits(b)).view(a.dtype)


def sign(x: np.ndarray) -> np.ndarray:
    """DML_ELEMENT_WISE_SIGN: -1 if x < 0, 1 if x > 0, else 0 (NaN and -0 included)."""
    x = np.asarray(x)
    dt = DataType.from_numpy(x.dtype)
    if dt is None:
        raise TypeError(f"no DirectML data type for {x.dtype}")
    if not dt.is_float:
        positive = (x > 0).astype(x.dtype)
        return positive - (x < 0).astype(x.dtype) if dt.is_signed else positive
    bits = _bits(x)
    width = dt.bits
    sign_bit = np.array(1 << (width - 1), dtype=bits.dtype)
    exponent_all_ones = {16: 0x7C00, 32: 0x7F800000, 64: 0x7FF0000000000000}[width]
    one = {16: 0x3C00, 32: 0x3F800000, 64: 0x3FF0000000000000}[width]
    magnitude = bits & ~sign_bit
    keep = (magnitude != 0) & (magnitude <= exponent_all_ones)
    result = np.where(keep, (bits & sign_bit) | np.array(one, dtype=bits.dtype), 0)
    return result.astype(bits.dtype).view(x.dtype)


def bit_count(x: np.ndarray, out_dtype=np.uint8) -> np.ndarray:
    """DML_ELEMENT_WISE_BIT_COUNT: number of 1 bits in each element's raw encoding."""
    x = np.asarray(x)
    flat = np.ascontiguousarray(x).reshape(-1)
    per_byte = _POPCOUNT_8[flat.view(np.uint8)].reshape(flat.size, x.dtype.itemsize)
    return per_byte.sum(axis=-1, dtype=np.uint32).astype(out_dtype).reshape(x.shape)


REFERENCES = {"bit_not": bit_not, "bit_xor": bit_xor, "sign": sign, "bit_count": bit_count}
