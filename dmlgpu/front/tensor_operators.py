"""Tensor's Python operators, from each row of the operator table with a `python_operator`.

Written by tools/generate_functions.py from the table when dmlgpu is built; not kept in git
(tests/test_typing.py checks that the installed file is what the table gives). `dmlgpu.Tensor` takes
`TensorOperators` as a base: `t ^ u`, `u ^ t` and `t ^= u` call `dmlgpu.front.resident` as the row's
function (`dmlgpu.bit_xor`) would, and type checkers see each operator with its types.
"""
from __future__ import annotations

from typing import TypeVar, Union, cast

from ..layout.operands import HostOperand
from ..table.operators import BY_SHORT
from . import resident as ops

__all__ = ["Other", "TensorOperators"]

_Self = TypeVar("_Self", bound="TensorOperators")
#: The other operand of a binary operator: a Tensor, numpy data or a Python scalar.
Other = Union["TensorOperators", HostOperand]

_BIT_NOT = BY_SHORT['bit_not']
_BIT_NOT_DTYPE = ops.output_dtype(_BIT_NOT, None, None)
_BIT_XOR = BY_SHORT['bit_xor']
_BIT_XOR_DTYPE = ops.output_dtype(_BIT_XOR, None, None)
_BIT_AND = BY_SHORT['bit_and']
_BIT_AND_DTYPE = ops.output_dtype(_BIT_AND, None, None)
_BIT_OR = BY_SHORT['bit_or']
_BIT_OR_DTYPE = ops.output_dtype(_BIT_OR, None, None)
_BIT_SHIFT_LEFT = BY_SHORT['bit_shift_left']
_BIT_SHIFT_LEFT_DTYPE = ops.output_dtype(_BIT_SHIFT_LEFT, None, None)
_BIT_SHIFT_RIGHT = BY_SHORT['bit_shift_right']
_BIT_SHIFT_RIGHT_DTYPE = ops.output_dtype(_BIT_SHIFT_RIGHT, None, None)


class TensorOperators:
    """The table's Python operators, as a base of `dmlgpu.Tensor`."""

    __slots__ = ()

    def __invert__(self: _Self) -> _Self:
        """`dmlgpu.bit_not` as a Python operator."""
        return cast(_Self, ops.apply(_BIT_NOT, (self,), None, _BIT_NOT_DTYPE, None))

    def __xor__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_xor` as a Python operator."""
        return cast(_Self, ops.apply(_BIT_XOR, (self, other), None, _BIT_XOR_DTYPE, None))

    def __rxor__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_xor` as a Python operator (reflected)."""
        return cast(_Self, ops.apply(_BIT_XOR, (other, self), None, _BIT_XOR_DTYPE, None))

    def __ixor__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_xor` as a Python operator (in place: `out` is this Tensor)."""
        return cast(_Self, ops.apply(_BIT_XOR, (self, other), self, _BIT_XOR_DTYPE, None))

    def __and__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_and` as a Python operator."""
        return cast(_Self, ops.apply(_BIT_AND, (self, other), None, _BIT_AND_DTYPE, None))

    def __rand__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_and` as a Python operator (reflected)."""
        return cast(_Self, ops.apply(_BIT_AND, (other, self), None, _BIT_AND_DTYPE, None))

    def __iand__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_and` as a Python operator (in place: `out` is this Tensor)."""
        return cast(_Self, ops.apply(_BIT_AND, (self, other), self, _BIT_AND_DTYPE, None))

    def __or__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_or` as a Python operator."""
        return cast(_Self, ops.apply(_BIT_OR, (self, other), None, _BIT_OR_DTYPE, None))

    def __ror__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_or` as a Python operator (reflected)."""
        return cast(_Self, ops.apply(_BIT_OR, (other, self), None, _BIT_OR_DTYPE, None))

    def __ior__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_or` as a Python operator (in place: `out` is this Tensor)."""
        return cast(_Self, ops.apply(_BIT_OR, (self, other), self, _BIT_OR_DTYPE, None))

    def __lshift__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_shift_left` as a Python operator."""
        return cast(_Self, ops.apply(_BIT_SHIFT_LEFT, (self, other), None, _BIT_SHIFT_LEFT_DTYPE, None))

    def __rlshift__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_shift_left` as a Python operator (reflected)."""
        return cast(_Self, ops.apply(_BIT_SHIFT_LEFT, (other, self), None, _BIT_SHIFT_LEFT_DTYPE, None))

    def __ilshift__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_shift_left` as a Python operator (in place: `out` is this Tensor)."""
        return cast(_Self, ops.apply(_BIT_SHIFT_LEFT, (self, other), self, _BIT_SHIFT_LEFT_DTYPE, None))

    def __rshift__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_shift_right` as a Python operator."""
        return cast(_Self, ops.apply(_BIT_SHIFT_RIGHT, (self, other), None, _BIT_SHIFT_RIGHT_DTYPE, None))

    def __rrshift__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_shift_right` as a Python operator (reflected)."""
        return cast(_Self, ops.apply(_BIT_SHIFT_RIGHT, (other, self), None, _BIT_SHIFT_RIGHT_DTYPE, None))

    def __irshift__(self: _Self, other: Other) -> _Self:
        """`dmlgpu.bit_shift_right` as a Python operator (in place: `out` is this Tensor)."""
        return cast(_Self, ops.apply(_BIT_SHIFT_RIGHT, (self, other), self, _BIT_SHIFT_RIGHT_DTYPE, None))
