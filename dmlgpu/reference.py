"""numpy reference implementations with DirectML's semantics, looked up by operator name.

Everything works on raw bits, because that is what DirectML specifies: the bitwise operators
ignore the data type except for its width, and SIGN of a float is decided from its bit pattern
(NaN -> 0, -0 -> +0, denormals -> +/-1). An operator whose row names a numpy ufunc with the same
raw-bit meaning runs that ufunc on the raw bits (shift amounts masked to the element width first,
`shift_amount`); SIGN and BIT_COUNT are written out here, because numpy's own `np.sign` (NaN -> NaN)
and `np.bitwise_count` (counts |x| for signed integers) differ. A row with neither, whose peer
(`Operator.peer`) gives DirectML's result on every type the row takes, has the peer as its
reference, its result in the output type (IS_NAN: `np.isnan`). `REFERENCES` maps each row's
`short` name to its function, which is also a module attribute of that name.
"""
from __future__ import annotations

import numpy as np

from .dtypes import DataType
from .operators import OPERATORS, Operator

__all__ = ["REFERENCES", "bit_count", "shift_amount", "sign"]

_POPCOUNT_8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def _bits(x: np.ndarray) -> np.ndarray:
    """The same memory read as unsigned integers of the element's width."""
    x = np.asarray(x)
    return x.view(np.dtype(f"<u{x.dtype.itemsize}"))


def shift_amount(b: np.ndarray) -> np.ndarray:
    """DirectML's shift amount: `b` modulo the element width, `b & (bits - 1)` on raw bits.

    DirectML masks out-of-range amounts (onnxruntime keeps opset-28 BitShift, which defines 0 for
    them, off its DirectML kernel for that reason); numpy and PyTorch give 0 instead.
    """
    return b & np.array(8 * b.dtype.itemsize - 1, dtype=b.dtype)


def _raw_bits(op: Operator):
    """The reference of an operator whose row names a numpy ufunc with the same raw-bit meaning."""
    ufunc = getattr(np, op.numpy_ufunc)

    def reference(*arrays):
        arrays = [np.asarray(x) for x in arrays]
        if len({x.dtype for x in arrays}) > 1:
            raise TypeError(f"{op.short} needs one data type, got {', '.join(str(x.dtype) for x in arrays)}")
        bits = [_bits(x) for x in arrays]
        if op.masks_shift_amount:
            bits[-1] = shift_amount(bits[-1])
        return ufunc(*bits).view(arrays[0].dtype)

    reference.__name__ = reference.__qualname__ = op.short
    masked = " (shift amounts masked: `shift_amount`)" if op.masks_shift_amount else ""
    reference.__doc__ = f"{op.dml_name}: numpy.{op.numpy_ufunc} on the raw bits{masked}."
    return reference


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


def bit_count(x: np.ndarray, dtype=np.uint8) -> np.ndarray:
    """DML_ELEMENT_WISE_BIT_COUNT: number of 1 bits in each element's raw encoding."""
    x = np.asarray(x)
    flat = np.ascontiguousarray(x).reshape(-1)
    per_byte = _POPCOUNT_8[flat.view(np.uint8)].reshape(flat.size, x.dtype.itemsize)
    return per_byte.sum(axis=-1, dtype=np.uint32).astype(dtype).reshape(x.shape)


def _from_peer(op: Operator):
    """The reference of a row whose peer is exact on every input type the row takes."""
    taken = {t for row in op.support for t in row.input_types}
    if not taken <= set(op.peer.exact_on):
        raise TypeError(f"{op.name} needs a reference function: numpy.{op.peer.numpy} is not DirectML's "
                        f"result on {', '.join(sorted(t.name for t in taken - set(op.peer.exact_on)))}")
    function = getattr(np, op.peer.numpy)

    def reference(*args, dtype=None):  # the inputs, then (where the row lists output types) dtype
        arrays, rest = args[:len(op.inputs)], args[len(op.inputs):]
        result = function(*(np.asarray(x) for x in arrays))
        if op.same_type:
            return result
        return result.astype((rest[0] if rest else dtype) or op.default_output.numpy)

    reference.__name__ = reference.__qualname__ = op.short
    reference.__doc__ = f"{op.dml_name}: numpy.{op.peer.numpy}, in the output's dtype."
    return reference


#: Operator short name -> reference function; operators without a numpy ufunc of the same
#: raw-bit meaning have a function of their name above, or their peer.
REFERENCES = {op.short: _raw_bits(op) if op.numpy_ufunc else globals().get(op.short) or _from_peer(op)
              for op in OPERATORS}
globals().update(REFERENCES)
__all__ = ["REFERENCES", "shift_amount", *REFERENCES]
