"""The operator table: one row per DirectML operator, the single source of truth.

Every row restates its DirectML documentation page (see `shared/spec/directml.md` §1): the
operator's enum value, its tensors, the level that introduced it, its tensor-support table per
feature level, its data-type rule and whether it may run in place. Validation, kernel selection,
the reference, the tests, the docs and the benchmarks all read these rows.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .dtypes import ALL, FLOATS_32, INTS, INTS_32, UINTS, UINTS_32, DataType
from .feature_levels import FeatureLevel as L

DIMS_1_TO_8 = tuple(range(1, 9))
DIMS_4 = (4,)


@dataclass(frozen=True)
class LevelSupport:
    """One "DML_FEATURE_LEVEL_x_y and above" table of a documentation page."""

    level: L
    dims: tuple[int, ...]
    input_types: tuple[DataType, ...]
    output_types: tuple[DataType, ...]


@dataclass(frozen=True)
class Operator:
    name: str  # DML_OPERATOR_<name>
    type_value: int  # DML_OPERATOR_TYPE value
    short: str  # front-end function, reference function and shader source name
    inputs: tuple[str, ...]  # DirectML member names of the input tensors, in binding order
    support: tuple[LevelSupport, ...]  # newest level first
    same_type: bool  # all tensors share one DataType (else output types are listed apart)
    in_place: bool  # the output may alias an input (identical byte range)
    # Data-type facts ("in_bits", "out_bits", "kind") that select a shader variant: in the flat
    # layout (whole 16-byte vectors), and where the shader addresses single elements.
    flat_facts: tuple[str, ...]
    element_facts: tuple[str, ...]
    output: str = "OutputTensor"
    numpy_ufunc: str | None = None  # numpy's ufunc with the same raw-bit meaning, if any
    python_operator: str | None = None  # Python operator name ("xor" installs __xor__, __rxor__, __ixor__)

    @property
    def dml_name(self) -> str:
        return "DML_OPERATOR_" + self.name

    @property
    def tensors(self) -> tuple[str, ...]:
        return self.inputs + (self.output,)

    @property
    def desc_class_name(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_")) + "OperatorDesc"

    @property
    def introduced(self) -> L:
        return self.support[-1].level

    def support_at(self, level: L) -> LevelSupport | None:
        """The table in force at `level`, or None if the operator does not exist there."""
        for row in self.support:
            if row.level <= level:
                return row
        return None

    @property
    def newest(self) -> LevelSupport:
        return self.support[0]


def field_name(tensor: str) -> str:
    """DirectML member name to the Python field name: 'ATensor' -> 'a_tensor'."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", tensor).lower()


def _support(*rows) -> tuple[LevelSupport, ...]:
    return tuple(LevelSupport(*row) for row in sorted(rows, key=lambda r: r[0], reverse=True))


_BITWISE = _support(
    (L.LEVEL_4_1, DIMS_1_TO_8, ALL, ALL),
    (L.LEVEL_3_0, DIMS_1_TO_8, UINTS_32, UINTS_32),
)
_SIGN_TYPES_3_0 = FLOATS_32 + INTS_32 + UINTS_32
_BIT_COUNT_OUT = (DataType.UINT32, DataType.UINT8)

BIT_NOT = Operator(
    "ELEMENT_WISE_BIT_NOT", 124, "bit_not", ("InputTensor",), _BITWISE,
    same_type=True, in_place=True, flat_facts=(), element_facts=("in_bits",),
    numpy_ufunc="invert", python_operator="invert")
BIT_XOR = Operator(
    "ELEMENT_WISE_BIT_XOR", 123, "bit_xor", ("ATensor", "BTensor"), _BITWISE,
    same_type=True, in_place=True, flat_facts=(), element_facts=("in_bits",),
    numpy_ufunc="bitwise_xor", python_operator="xor")
SIGN = Operator(
    "ELEMENT_WISE_SIGN", 79, "sign", ("InputTensor",),
    _support(
        (L.LEVEL_4_1, DIMS_1_TO_8, FLOATS_32 + INTS + UINTS, FLOATS_32 + INTS + UINTS),
        (L.LEVEL_3_0, DIMS_1_TO_8, _SIGN_TYPES_3_0, _SIGN_TYPES_3_0),
        (L.LEVEL_2_1, DIMS_4, _SIGN_TYPES_3_0, _SIGN_TYPES_3_0),
        (L.LEVEL_2_0, DIMS_4, FLOATS_32, FLOATS_32),
    ),
    same_type=True, in_place=True, flat_facts=("in_bits", "kind"),
    element_facts=("in_bits", "kind"))
BIT_COUNT = Operator(
    "ELEMENT_WISE_BIT_COUNT", 125, "bit_count", ("InputTensor",),
    _support(
        (L.LEVEL_4_1, DIMS_1_TO_8, ALL, _BIT_COUNT_OUT),
        (L.LEVEL_3_0, DIMS_1_TO_8, UINTS_32, _BIT_COUNT_OUT),
    ),
    same_type=False, in_place=False, flat_facts=("in_bits", "out_bits"),
    element_facts=("in_bits", "out_bits"))

OPERATORS: tuple[Operator, ...] = (BIT_NOT, BIT_XOR, SIGN, BIT_COUNT)
BY_SHORT = {op.short: op for op in OPERATORS}
