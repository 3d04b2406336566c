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

import math
from decimal import Decimal, localcontext
from fractions import Fraction

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


#: (significand bits, least and greatest exponent) of the float types REDUCE rounds to.
_FORMATS = {np.dtype(np.float32): (24, -126, 127), np.dtype(np.float16): (11, -14, 15)}
#: Decimal digits of the logarithms and exponentials: far beyond float32's rounding.
_DIGITS = 60


def round_to(value: Fraction, dtype, negative_zero: bool = False) -> np.floating:
    """The `dtype` float nearest to the rational `value` (ties to even; infinity past the largest
    finite value; subnormals), as IEEE 754 rounds one operation's exact result."""
    dtype = np.dtype(dtype)
    bits, least, greatest = _FORMATS[dtype]
    if value == 0:
        return dtype.type(-0.0 if negative_zero else 0.0)
    magnitude = abs(value)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if magnitude < Fraction(2) ** exponent:
        exponent -= 1
    quantum = Fraction(2) ** (max(exponent, least) - bits + 1)
    units, rest = divmod(magnitude, quantum)
    if rest > quantum / 2 or (rest == quantum / 2 and units % 2):
        units += 1
    rounded = units * quantum
    sign = -1.0 if value < 0 else 1.0
    if rounded >= Fraction(2) ** (greatest + 1):
        return dtype.type(sign * math.inf)
    return dtype.type(sign * float(rounded))


def _root(value: Fraction) -> Fraction:
    """sqrt(value) to over 100 bits, plus half a unit of the last bit when inexact: it rounds as
    the real root does (an irrational root is never a tie)."""
    shift = 110 + max(0, value.denominator.bit_length() - value.numerator.bit_length())
    scaled = value * 4 ** shift
    whole = scaled.numerator // scaled.denominator
    root = math.isqrt(whole)
    exact = scaled.denominator == 1 and root * root == whole
    return Fraction(2 * root + (0 if exact else 1), 2 ** (shift + 1))


def _ln(value: Fraction) -> Decimal:
    return Decimal(value.numerator).ln() - Decimal(value.denominator).ln()


def _log_sum_exp_quick(finite: np.ndarray, dtype):
    """LOG_SUM_EXP of finite float64 values rounded to `dtype`, from float64 arithmetic where
    that settles the rounding, else None (then 60 digits decide; Ziv's test). Each exp(t - m)
    is within 1 ulp (2^-52 relative), their sum exact (math.fsum) then rounded, the log within
    1 ulp: the result is within 2^-48 of log(sum) + m plus an ulp of each; where both ends of
    that interval round to the same float, so does the real value."""
    top = float(finite.max())
    terms = np.exp(finite - top)
    total = math.fsum(terms.tolist())
    value = top + math.log(total)
    slack = 2.0 ** -48 * (1.0 + abs(math.log(total))) + 4 * math.ulp(value) + 2 * math.ulp(top)
    low, high = round_to(Fraction(value - slack), dtype), round_to(Fraction(value + slack), dtype)
    return low if low == high else None


def _product(wide: np.ndarray, negative: bool) -> Fraction:
    """The product of finite nonzero float64 values, exactly or with a sticky bit below its top
    160 bits (it rounds to any float type as the exact product does): their integer significands
    multiplied as a balanced tree (a running product of n terms costs O(n^2) in its growing
    length), over the product of their power-of-two denominators."""
    numerators, shift = [], 0
    for value in np.abs(wide).tolist():
        numerator, denominator = value.as_integer_ratio()
        numerators.append(numerator)
        shift += denominator.bit_length() - 1
    while len(numerators) > 1:
        paired = [a * b for a, b in zip(numerators[::2], numerators[1::2])]
        numerators = paired + numerators[len(paired) * 2:]
    whole = numerators[0]
    # Kept to 160 bits and a sticky bit for whatever lay below them: it rounds to a float (53
    # bits at most) as the whole product does, and stays a small rational.
    cut = max(0, whole.bit_length() - 160)
    if cut:
        whole = (whole >> cut) | (1 if whole & ((1 << cut) - 1) else 0)
    return Fraction(-whole if negative else whole, 1 << shift) * Fraction(2) ** cut


def float_reduction(values: np.ndarray, function) -> np.floating:
    """One output element of DML_OPERATOR_REDUCE over float `values` (1-D, FLOAT32 or FLOAT16):
    the function of the real values, rounded once to their type.

    SUM, AVERAGE (the sum / the count), L1 (sum of |x|), SUM_SQUARE, L2 (sqrt of the sum of
    squares) and LOG_SUM (log of the sum) are exact rationals (then a root or a 60-digit
    logarithm); LOG_SUM_EXP is log(sum(exp(x - m))) + m (m the largest) in 60 digits; MULTIPLY the
    exact product. NaN and infinities follow IEEE 754: a NaN gives NaN (the quiet NaN, whatever
    NaN the input held), +inf with -inf among the terms NaN, else the infinity (log(-inf) and
    inf * 0 are NaN); LOG_SUM_EXP ignores -inf elements unless all are; a sum of -0.0s is -0.0;
    a product's sign is the product of the signs.
    """
    x = np.asarray(values)
    out = x.dtype.type
    function = ReduceFunction(function)
    f = ReduceFunction
    with np.errstate(invalid="ignore"):  # (a signalling NaN quietens)
        wide = x.astype(np.float64)
    nan = out(np.nan)
    if function is f.LOG_SUM_EXP:
        if np.isnan(wide).any():
            return nan
        if np.isposinf(wide).any():
            return out(np.inf)
        finite = wide[np.isfinite(wide)]
        if finite.size == 0:
            return out(-np.inf)
        quick = _log_sum_exp_quick(finite, x.dtype)
        if quick is not None:
            return quick
        top = Decimal(float(finite.max()))
        with localcontext() as context:
            context.prec = _DIGITS
            total = sum(((Decimal(float(t)) - top).exp() for t in finite), Decimal(0))
            return round_to(Fraction(top + total.ln()), x.dtype)
    if function is f.MULTIPLY:
        negative = bool(np.signbit(wide).sum() % 2)
        if np.isnan(wide).any() or (np.isinf(wide).any() and (wide == 0).any()):
            return nan
        if np.isinf(wide).any() or (wide == 0).any():
            return out(math.copysign(np.inf if np.isinf(wide).any() else 0.0, -1.0 if negative else 1.0))
        return round_to(_product(wide, negative), x.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        terms = np.abs(wide) if function is f.L1 else wide * wide if function in (f.SUM_SQUARE, f.L2) else wide
    if np.isnan(terms).any() or (np.isposinf(terms).any() and np.isneginf(terms).any()):
        return nan
    if np.isinf(terms).any():
        infinity = terms[np.isinf(terms)][0]
        return nan if function is f.LOG_SUM and infinity < 0 else out(infinity)
    square = function in (f.SUM_SQUARE, f.L2)
    total = sum((Fraction(float(t)) ** 2 if square else Fraction(float(abs(t) if function is f.L1 else t))
                 for t in wide), Fraction(0))
    if function is f.LOG_SUM:
        if total <= 0:
            return nan if total < 0 else out(-np.inf)
        with localcontext() as context:
            context.prec = _DIGITS
            return round_to(Fraction(_ln(total)), x.dtype)
    negative_zero = function in (f.SUM, f.AVERAGE) and bool(np.all((wide == 0) & np.signbit(wide)))
    if function is f.AVERAGE:
        total /= len(wide)
    if function is f.L2:
        total = _root(total)
    return round_to(total, x.dtype, negative_zero)


def reduce(x: np.ndarray, function, axes, out_dtype=None) -> np.ndarray:
    """DML_OPERATOR_REDUCE: `function` over `axes`, the rank kept (reduced axes of size 1).

    Integer SUM, MULTIPLY, L1 (sum of |x|) and SUM_SQUARE wrap at the output width; MIN/MAX
    pick by `order_key`; ARGMIN/ARGMAX give the first index of the extreme value, row-major over
    the reduced axes, as `out_dtype` (the index output's type); the other functions on floats
    are `float_reduction`'s exact results, rounded once.
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
        values = [float_reduction(row, function) for row in moved.reshape(-1, moved.shape[-1])]
        return np.array(values, dtype=x.dtype).reshape(shape)
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
__all__ = ["REFERENCES", "float_reduction", "order_key", "round_to", "shift_amount", *REFERENCES]
