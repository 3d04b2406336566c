"""The numpy front end's functions, one per row of the operator table (`dmlgpu.table.operators`).

Written by tools/generate_functions.py from the table when dmlgpu is built; not kept in git
(tests/test_typing.py checks that the installed file is what the table gives). Each function calls
`dmlgpu.front.host_front.apply`, which validates the call before any work and runs it on the default
device (or the device of its Tensors). It grows by one function (some 45 lines with its overloads
and docstring) per row, so it may pass 500 lines: one job, written by a script, not worth splitting.
"""
from __future__ import annotations

from typing import Any, Union, overload

import numpy.typing as npt

from ..layout.operands import HostOperand
from ..table.feature_levels import FeatureLevel
from ..table.operators import BY_SHORT
from .host_front import apply
from .tensor import Tensor

#: Any operand: numpy data or a Tensor.
Operand = Union[Tensor, HostOperand]
#: A feature level, its value, or None for the newest.
Level = Union[FeatureLevel, int, None]

__all__ = ["bit_not", "bit_xor", "bit_and", "bit_or", "bit_shift_left", "bit_shift_right", "sign", "bit_count", "is_nan"]


_BIT_NOT = BY_SHORT['bit_not']

@overload
def bit_not(x: Tensor, out: Tensor | None = None, *, feature_level: Level = None) -> Tensor: ...
@overload
def bit_not(x: HostOperand, out: Tensor, *, feature_level: Level = None) -> Tensor: ...
@overload
def bit_not(x: HostOperand, out: npt.NDArray[Any] | None = None, *, feature_level: Level = None) -> Any: ...
def bit_not(x: Operand, out: Tensor | npt.NDArray[Any] | None = None, *, feature_level: Level = None) -> Any:
    """Bitwise NOT of every element's raw bits (DML_ELEMENT_WISE_BIT_NOT).

    Args:
        x: numpy array (or dmlgpu.Tensor). DirectML's tables: 4_1+: 1–8 dims, all 11; 3_0+: 1–8
            dims, UINT32, UINT16, UINT8.
        out: optional array of the result's dtype and shape; `out=x` runs in place.
        feature_level: a `FeatureLevel` (or its value); None means the newest. Dimensions beyond
            the level's are merged where contiguous; missing ones are added as 1s.

    Returns:
        A new array (a numpy scalar for 0-d numpy operands; a Tensor when an operand or `out` is a
        Tensor), or `out`.

    Raises:
        DataTypeError: a dtype DirectML does not allow (both a ValidationError and a TypeError,
            as numpy's UFuncTypeError); nothing runs.
        ValidationError: a shape, `out` or level that DirectML does not allow, a Python scalar
            that does not fit, or an ndarray subclass (masked array, matrix); nothing runs.
    """
    return apply(_BIT_NOT, (x,), out, None, feature_level)


_BIT_XOR = BY_SHORT['bit_xor']

@overload
def bit_xor(a: Tensor, b: Operand, out: Tensor | None = None, *, feature_level: Level = None) -> Tensor: ...
@overload
def bit_xor(a: HostOperand, b: Tensor, out: Tensor | None = None, *, feature_level: Level = None) -> Tensor: ...
@overload
def bit_xor(a: HostOperand, b: HostOperand, out: Tensor, *, feature_level: Level = None) -> Tensor: ...
@overload
def bit_xor(
    a: HostOperand, b: HostOperand, out: npt.NDArray[Any] | None = None, *, feature_level: Level = None,
) -> Any: ...
def bit_xor(
    a: Operand, b: Operand, out: Tensor | npt.NDArray[Any] | None = None, *, feature_level: Level = None,
) -> Any:
    """Bitwise XOR of the raw bits of `a` and `b` (DML_ELEMENT_WISE_BIT_XOR).

    Args:
        a, b: numpy arrays (or dmlgpu.Tensors) of one dtype (DirectML does not promote) whose
            shapes broadcast with numpy's rules; either may be a Python int, float or bool,
            which takes the other's dtype (NEP 50). DirectML's tables: 4_1+: 1–8 dims, all 11;
            3_0+: 1–8 dims, UINT32, UINT16, UINT8.
        out: optional array of the result's dtype and shape; `out=a` or `out=b` runs in place.
        feature_level: a `FeatureLevel` (or its value); None means the newest. Dimensions beyond
            the level's are merged where contiguous; missing ones are added as 1s.

    Returns:
        A new array (a numpy scalar for 0-d numpy operands; a Tensor when an operand or `out` is a
        Tensor), or `out`.

    Raises:
        DataTypeError: a dtype DirectML does not allow (both a ValidationError and a TypeError,
            as numpy's UFuncTypeError); nothing runs.
        ValidationError: a shape, `out` or level that DirectML does not allow, a Python scalar
            that does not fit, or an ndarray subclass (masked array, matrix); nothing runs.
    """
    return apply(_BIT_XOR, (a, b), out, None, feature_level)


_BIT_AND = BY_SHORT['bit_and']

@overload
def bit_and(a: Tensor, b: Operand, out: Tensor | None = None, *, feature_level: Level = None) -> Tensor: ...
@overload
def bit_and(a: HostOperand, b: Tensor, out: Tensor | None = None, *, feature_level: Level = None) -> Tensor: ...
@overload
def bit_and(a: HostOperand, b: HostOperand, out: Tensor, *, feature_level: Level = None) -> Tensor: ...
@overload
def bit_and(
    a: HostOperand, b: HostOperand, out: npt.NDArray[Any] | None = None, *, feature_level: Level = None,
) -> Any: ...
def bit_and(
    a: Operand, b: Operand, out: Tensor | npt.NDArray[Any] | None = None, *, feature_level: Level = None,
) -> Any:
    """Bitwise AND of the raw bits of `a` and `b` (DML_ELEMENT_WISE_BIT_AND).

    Args:
        a, b: numpy arrays (or dmlgpu.Tensors) of one dtype (DirectML does not promote) whose
            shapes broadcast with numpy's rules; either may be a Python int, float or bool,
            which takes the other's dtype (NEP 50). DirectML's tables: 4_1+: 1–8 dims, all 11;
            3_0+: 1–8 dims, UINT32, UINT16, UINT8.
        out: optional array of the result's dtype and shape; `out=a` or `out=b` runs in place.
        feature_level: a `FeatureLevel` (or its value); None means the newest. Dimensions beyond
            the level's are merged where contiguous; missing ones are added as 1s.

    Returns:
        A new array (a numpy scalar for 0-d numpy operands; a Tensor when an operand or `out` is a
        Tensor), or `out`.

    Raises:
        DataTypeError: a dtype DirectML does not allow (both a ValidationError and a TypeError,
            as numpy's UFuncTypeError); nothing runs.
        ValidationError: a shape, `out` or level that DirectML does not allow, a Python scalar
            that does not fit, or an ndarray subclass (masked array, matrix); nothing runs.
    """
    return apply(_BIT_AND, (a, b), out, None, feature_level)


_BIT_OR = BY_SHORT['bit_or']

@overload
def bit_or(a: Tensor, b: Operand, out: Tensor | None = None, *, feature_level: Level = None) -> Tensor: ...
@overload
def bit_or(a: HostOperand, b: Tensor, out: Tensor | None = None, *, feature_level: Level = None) -> Tensor: ...
@overload
def bit_or(a: HostOperand, b: HostOperand, out: Tensor, *, feature_level: Level = None) -> Tensor: ...
@overload
def bit_or(
    a: HostOperand, b: HostOperand, out: npt.NDArray[Any] | None = None, *, feature_level: Level = None,
) -> Any: ...
def bit_or(
    a: Operand, b: Operand, out: Tensor | npt.NDArray[Any] | None = None, *, feature_level: Level = None,
) -> Any:
    """Bitwise OR of the raw bits of `a` and `b` (DML_ELEMENT_WISE_BIT_OR).

    Args:
        a, b: numpy arrays (or dmlgpu.Tensors) of one dtype (DirectML does not promote) whose
            shapes broadcast with numpy's rules; either may be a Python int, float or bool,
            which takes the other's dtype (NEP 50). DirectML's tables: 4_1+: 1–8 dims, all 11;
            3_0+: 1–8 dims, UINT32, UINT16, UINT8.
        out: optional array of the result's dtype and shape; `out=a` or `out=b` runs in place.
        feature_level: a `FeatureLevel` (or its value); None means the newest. Dimensions beyond
            the level's are merged where contiguous; missing ones are added as 1s.

    Returns:
        A new array (a numpy scalar for 0-d numpy operands; a Tensor when an operand or `out` is a
        Tensor), or `out`.

    Raises:
        DataTypeError: a dtype DirectML does not allow (both a ValidationError and a TypeError,
            as numpy's UFuncTypeError); nothing runs.
        ValidationError: a shape, `out` or level that DirectML does not allow, a Python scalar
            that does not fit, or an ndarray subclass (masked array, matrix); nothing runs.
    """
    return apply(_BIT_OR, (a, b), out, None, feature_level)


_BIT_SHIFT_LEFT = BY_SHORT['bit_shift_left']

@overload
def bit_shift_left(
    a: Tensor, b: Operand, out: Tensor | None = None, *, feature_level: Level = None,
) -> Tensor: ...
@overload
def bit_shift_left(
    a: HostOperand, b: Tensor, out: Tensor | None = None, *, feature_level: Level = None,
) -> Tensor: ...
@overload
def bit_shift_left(a: HostOperand, b: HostOperand, out: Tensor, *, feature_level: Level = None) -> Tensor: ...
@overload
def bit_shift_left(
    a: HostOperand, b: HostOperand, out: npt.NDArray[Any] | None = None, *, feature_level: Level = None,
) -> Any: ...
def bit_shift_left(
    a: Operand, b: Operand, out: Tensor | npt.NDArray[Any] | None = None, *, feature_level: Level = None,
) -> Any:
    """Logical left shift of each element of `a` by the amount in `b` (DML_ELEMENT_WISE_BIT_SHIFT_LEFT).

    Shift amounts are taken modulo the element width, `b & (bits - 1)` (8-bit amounts by 7,
    16-bit by 15, 32-bit by 31, 64-bit by 63), as DirectML does; numpy gives 0 for amounts at or
    above the width.

    Args:
        a, b: numpy arrays (or dmlgpu.Tensors) of one dtype (DirectML does not promote) whose
            shapes broadcast with numpy's rules; either may be a Python int, float or bool,
            which takes the other's dtype (NEP 50). DirectML's tables: 4_1+: 1–8 dims, UINT64,
            UINT32, UINT16, UINT8; 3_0+: 1–8 dims, UINT32, UINT16, UINT8; 2_1+: 4 dims, UINT32,
            UINT16, UINT8.
        out: optional array of the result's dtype and shape; `out=a` or `out=b` runs in place.
        feature_level: a `FeatureLevel` (or its value); None means the newest. Dimensions beyond
            the level's are merged where contiguous; missing ones are added as 1s.

    Returns:
        A new array (a numpy scalar for 0-d numpy operands; a Tensor when an operand or `out` is a
        Tensor), or `out`.

    Raises:
        DataTypeError: a dtype DirectML does not allow (both a ValidationError and a TypeError,
            as numpy's UFuncTypeError); nothing runs.
        ValidationError: a shape, `out` or level that DirectML does not allow, a Python scalar
            that does not fit, or an ndarray subclass (masked array, matrix); nothing runs.
    """
    return apply(_BIT_SHIFT_LEFT, (a, b), out, None, feature_level)


_BIT_SHIFT_RIGHT = BY_SHORT['bit_shift_right']

@overload
def bit_shift_right(
    a: Tensor, b: Operand, out: Tensor | None = None, *, feature_level: Level = None,
) -> Tensor: ...
@overload
def bit_shift_right(
    a: HostOperand, b: Tensor, out: Tensor | None = None, *, feature_level: Level = None,
) -> Tensor: ...
@overload
def bit_shift_right(a: HostOperand, b: HostOperand, out: Tensor, *, feature_level: Level = None) -> Tensor: ...
@overload
def bit_shift_right(
    a: HostOperand, b: HostOperand, out: npt.NDArray[Any] | None = None, *, feature_level: Level = None,
) -> Any: ...
def bit_shift_right(
    a: Operand, b: Operand, out: Tensor | npt.NDArray[Any] | None = None, *, feature_level: Level = None,
) -> Any:
    """Logical right shift of each element of `a` by the amount in `b` (DML_ELEMENT_WISE_BIT_SHIFT_RIGHT).

    Shift amounts are taken modulo the element width, `b & (bits - 1)` (8-bit amounts by 7,
    16-bit by 15, 32-bit by 31, 64-bit by 63), as DirectML does; numpy gives 0 for amounts at or
    above the width.

    Args:
        a, b: numpy arrays (or dmlgpu.Tensors) of one dtype (DirectML does not promote) whose
            shapes broadcast with numpy's rules; either may be a Python int, float or bool,
            which takes the other's dtype (NEP 50). DirectML's tables: 4_1+: 1–8 dims, UINT64,
            UINT32, UINT16, UINT8; 3_0+: 1–8 dims, UINT32, UINT16, UINT8; 2_1+: 4 dims, UINT32,
            UINT16, UINT8.
        out: optional array of the result's dtype and shape; `out=a` or `out=b` runs in place.
        feature_level: a `FeatureLevel` (or its value); None means the newest. Dimensions beyond
            the level's are merged where contiguous; missing ones are added as 1s.

    Returns:
        A new array (a numpy scalar for 0-d numpy operands; a Tensor when an operand or `out` is a
        Tensor), or `out`.

    Raises:
        DataTypeError: a dtype DirectML does not allow (both a ValidationError and a TypeError,
            as numpy's UFuncTypeError); nothing runs.
        ValidationError: a shape, `out` or level that DirectML does not allow, a Python scalar
            that does not fit, or an ndarray subclass (masked array, matrix); nothing runs.
    """
    return apply(_BIT_SHIFT_RIGHT, (a, b), out, None, feature_level)


_SIGN = BY_SHORT['sign']

@overload
def sign(x: Tensor, out: Tensor | None = None, *, feature_level: Level = None) -> Tensor: ...
@overload
def sign(x: HostOperand, out: Tensor, *, feature_level: Level = None) -> Tensor: ...
@overload
def sign(x: HostOperand, out: npt.NDArray[Any] | None = None, *, feature_level: Level = None) -> Any: ...
def sign(x: Operand, out: Tensor | npt.NDArray[Any] | None = None, *, feature_level: Level = None) -> Any:
    """-1, 0 or +1 per element, in the input's dtype (DML_ELEMENT_WISE_SIGN).

    Differs from `numpy.sign`: NaN gives 0 (DirectML's "otherwise" branch), -0.0 gives +0.0.
    Unsigned inputs give 0 or 1. DirectML has no FLOAT64 SIGN at any level.

    Args:
        x: numpy array (or dmlgpu.Tensor). DirectML's tables: 4_1+: 1–8 dims, all but FLOAT64;
            3_0+: 1–8 dims, FLOAT32, FLOAT16, INT32, INT16, INT8, UINT32, UINT16, UINT8; 2_1+: 4
            dims, FLOAT32, FLOAT16, INT32, INT16, INT8, UINT32, UINT16, UINT8; 2_0+: 4 dims,
            FLOAT32, FLOAT16.
        out: optional array of the result's dtype and shape; `out=x` runs in place.
        feature_level: a `FeatureLevel` (or its value); None means the newest. Dimensions beyond
            the level's are merged where contiguous; missing ones are added as 1s.

    Returns:
        A new array (a numpy scalar for 0-d numpy operands; a Tensor when an operand or `out` is a
        Tensor), or `out`.

    Raises:
        DataTypeError: a dtype DirectML does not allow (both a ValidationError and a TypeError,
            as numpy's UFuncTypeError); nothing runs.
        ValidationError: a shape, `out` or level that DirectML does not allow, a Python scalar
            that does not fit, or an ndarray subclass (masked array, matrix); nothing runs.
    """
    return apply(_SIGN, (x,), out, None, feature_level)


_BIT_COUNT = BY_SHORT['bit_count']

@overload
def bit_count(
    x: Tensor, out: Tensor | None = None, *, dtype: npt.DTypeLike | None = None, feature_level: Level = None,
) -> Tensor: ...
@overload
def bit_count(
    x: HostOperand, out: Tensor, *, dtype: npt.DTypeLike | None = None, feature_level: Level = None,
) -> Tensor: ...
@overload
def bit_count(
    x: HostOperand,
    out: npt.NDArray[Any] | None = None,
    *,
    dtype: npt.DTypeLike | None = None,
    feature_level: Level = None,
) -> Any: ...
def bit_count(
    x: Operand,
    out: Tensor | npt.NDArray[Any] | None = None,
    *,
    dtype: npt.DTypeLike | None = None,
    feature_level: Level = None,
) -> Any:
    """Number of 1 bits of each element's raw encoding (DML_ELEMENT_WISE_BIT_COUNT).

    Differs from `numpy.bitwise_count`, which counts |x| for signed integers: -1 as int8 gives 8
    here.

    Args:
        x: numpy array (or dmlgpu.Tensor). DirectML's tables: 4_1+: 1–8 dims, all 11 -> UINT32,
            UINT8; 3_0+: 1–8 dims, UINT32, UINT16, UINT8 -> UINT32, UINT8.
        out: optional array of the result's dtype and shape; never an input (DirectML does not
            allow ELEMENT_WISE_BIT_COUNT in place).
        dtype: the output dtype, uint32 or uint8; None: `out`'s dtype, else uint8 (DirectMLX's
            default). Given with `out`, they must agree.
        feature_level: a `FeatureLevel` (or its value); None means the newest. Dimensions beyond
            the level's are merged where contiguous; missing ones are added as 1s.

    Returns:
        A new array (a numpy scalar for 0-d numpy operands; a Tensor when an operand or `out` is a
        Tensor), or `out`.

    Raises:
        DataTypeError: a dtype DirectML does not allow (both a ValidationError and a TypeError,
            as numpy's UFuncTypeError); nothing runs.
        ValidationError: a shape, `out` or level that DirectML does not allow, a Python scalar
            that does not fit, or an ndarray subclass (masked array, matrix); nothing runs.
    """
    return apply(_BIT_COUNT, (x,), out, dtype, feature_level)


_IS_NAN = BY_SHORT['is_nan']

@overload
def is_nan(
    x: Tensor, out: Tensor | None = None, *, dtype: npt.DTypeLike | None = None, feature_level: Level = None,
) -> Tensor: ...
@overload
def is_nan(
    x: HostOperand, out: Tensor, *, dtype: npt.DTypeLike | None = None, feature_level: Level = None,
) -> Tensor: ...
@overload
def is_nan(
    x: HostOperand,
    out: npt.NDArray[Any] | None = None,
    *,
    dtype: npt.DTypeLike | None = None,
    feature_level: Level = None,
) -> Any: ...
def is_nan(
    x: Operand,
    out: Tensor | npt.NDArray[Any] | None = None,
    *,
    dtype: npt.DTypeLike | None = None,
    feature_level: Level = None,
) -> Any:
    """1 where an element is a NaN (IEEE-754: any payload, either sign, quiet or signalling), else 0 (DML_ELEMENT_WISE_IS_NAN).

    Args:
        x: numpy array (or dmlgpu.Tensor). DirectML's tables: 3_0+: 1–8 dims, FLOAT32, FLOAT16
            -> UINT32, UINT8; 2_0+: 4 dims, FLOAT32, FLOAT16 -> UINT32, UINT8.
        out: optional array of the result's dtype and shape; never an input (DirectML does not
            allow ELEMENT_WISE_IS_NAN in place).
        dtype: the output dtype, uint32 or uint8; None: `out`'s dtype, else uint8 (DirectMLX's
            default). Given with `out`, they must agree.
        feature_level: a `FeatureLevel` (or its value); None means the newest. Dimensions beyond
            the level's are merged where contiguous; missing ones are added as 1s.

    Returns:
        A new array (a numpy scalar for 0-d numpy operands; a Tensor when an operand or `out` is a
        Tensor), or `out`.

    Raises:
        DataTypeError: a dtype DirectML does not allow (both a ValidationError and a TypeError,
            as numpy's UFuncTypeError); nothing runs.
        ValidationError: a shape, `out` or level that DirectML does not allow, a Python scalar
            that does not fit, or an ndarray subclass (masked array, matrix); nothing runs.
    """
    return apply(_IS_NAN, (x,), out, dtype, feature_level)
