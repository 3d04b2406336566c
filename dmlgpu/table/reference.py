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
from .operators import TABLE, AxisDirection, Operator, ReduceFunction

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


def order_key(x: np.ndarray) -> np.ndarray:
    """Unsigned integers of the element's width whose order is the order REDUCE's MIN/MAX/ARG*
    and TOP_K1 use: unsigned as they are, signed with the sign bit flipped, floats by the total
    order of their encodings (-NaN < -inf < -0.0 < +0.0 < +inf < +NaN)."""
    x = np.asarray(x)
    dt = DataType.from_numpy(x.dtype)
    bits = _bits(x)
    top = np.array(1 << (dt.bits - 1), dtype=bits.dtype)
    if not dt.is_signed:
        return bits.copy()
    if not dt.is_float:
        return bits ^ top
    negative = (bits & top) != 0
    return np.where(negative, ~bits, bits | top).astype(bits.dtype)


def _moved(x: np.ndarray, axes) -> tuple[np.ndarray, tuple]:
    """`x` with `axes` moved last and merged into one, and the kept shape (reduced axes 1)."""
    axes = tuple(sorted(axes))
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, kept + list(axes))
    shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    return moved.reshape(moved.shape[:len(kept)] + (-1,)), shape


def reduce(x: np.ndarray, function, axes, out_dtype=None) -> np.ndarray:
    """DML_OPERATOR_REDUCE: `function` over `axes`, the rank kept (reduced axes of size 1).

    Integer SUM, MULTIPLY, L1 (sum of |x|) and SUM_SQUARE wrap at the output width; MIN/MAX
    pick by `order_key`; ARGMIN/ARGMAX give the first index of the extreme value, row-major over
    the reduced axes, as `out_dtype` (the index output's type).
    """
    x = np.asarray(x)
    function = ReduceFunction(function)
    moved, shape = _moved(x, axes)
    if function in (ReduceFunction.ARGMIN, ReduceFunction.ARGMAX):
        key = order_key(moved)
        pick = np.argmin if function is ReduceFunction.ARGMIN else np.argmax
        return pick(key, axis=-1).astype(out_dtype).reshape(shape)
    if function in (ReduceFunction.MIN, ReduceFunction.MAX):
        key = order_key(moved)
        pick = np.argmin if function is ReduceFunction.MIN else np.argmax
        index = pick(key, axis=-1)[..., None]
        return np.take_along_axis(moved, index, axis=-1).reshape(shape)
    dt = DataType.from_numpy(x.dtype)
    if dt.is_float:
        raise TypeError(f"{function.dml_name} on floats is not bit-exact; no reference")
    wide = moved.astype(np.uint64)  # two's complement: wrapping arithmetic mod 2^64
    if function is ReduceFunction.L1 and dt.is_signed:
        wide = np.where(moved < 0, (~wide + np.uint64(1)), wide)
    if function is ReduceFunction.SUM_SQUARE:
        wide = wide * wide
    with np.errstate(over="ignore"):
        if function is ReduceFunction.MULTIPLY:
            result = np.multiply.reduce(wide, axis=-1, dtype=np.uint64)
        else:
            result = np.add.reduce(wide, axis=-1, dtype=np.uint64)
    return result.astype(_bits(x).dtype).view(x.dtype).reshape(shape)


def top_k(x: np.ndarray, axis: int, k: int, direction, index_dtype=np.uint32):
    """DML_OPERATOR_TOP_K1: (values, indices) of the K largest (DECREASING) or smallest
    (INCREASING) along `axis`, sorted, ties by ascending index in either direction."""
    x = np.asarray(x)
    key = np.moveaxis(order_key(x), axis, -1)
    if AxisDirection(direction) is AxisDirection.DECREASING:
        key = ~key  # reverses the order, keeps ties equal: a stable sort keeps lower index first
    order = np.argsort(key, axis=-1, kind="stable")[..., :k]
    values = np.take_along_axis(np.moveaxis(x, axis, -1), order, axis=-1)
    return np.moveaxis(values, -1, axis), np.moveaxis(order.astype(index_dtype), -1, axis)


#: Operator short name -> reference function; operators without a numpy ufunc of the same
#: raw-bit meaning have a function of their name above, or their peer.
REFERENCES = {op.short: _raw_bits(op) if op.numpy_ufunc else globals().get(op.short) or _from_peer(op)
              for op in TABLE}
globals().update(REFERENCES)
__all__ = ["REFERENCES", "order_key", "shift_amount", *REFERENCES]
