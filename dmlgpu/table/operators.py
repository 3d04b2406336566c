"""The operator table: one row per DirectML operator, the single source of truth.

Every row restates its DirectML documentation page (see `docs/guide/semantics.md` §1): the
operator's enum value, its tensors, the level that introduced it, its tensor-support table per
feature level, its data-type rule and whether it may run in place, plus what dmlgpu derives from
it: the shader family that computes it, the front end's docstring text, and its numpy and Python
operator names. Validation, kernel selection, the descriptors, the front-end functions, Tensor's
operators, the reference, the tests, the docs, the demo and the benchmarks all read these rows;
declaring a row (`_declare`) is what puts an operator in `OPERATORS`.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from .dtypes import ALL, FLOATS_UP_TO_32, INTS, INTS_UP_TO_32, UINTS, UINTS_UP_TO_32, DataType
from .feature_levels import FeatureLevel as L

DIMS_1_TO_8 = tuple(range(1, 9))
DIMS_4 = (4,)

#: Operator families: how an operator's tensors relate (what validation checks between them,
#: which compiled form runs it). Element-wise: every tensor of one shape. Reduce: the output is
#: the input with the reduced axes of size 1. Top-k: the outputs are the input with K along one axis.
ELEMENT_WISE, REDUCE_FAMILY, TOP_K_FAMILY = "element_wise", "reduce", "top_k"


class ReduceFunction(enum.IntEnum):
    """`DML_REDUCE_FUNCTION` (DirectML.h order); member names drop `DML_REDUCE_FUNCTION_`."""

    ARGMAX = 0
    ARGMIN = 1
    AVERAGE = 2
    L1 = 3
    L2 = 4
    LOG_SUM = 5
    LOG_SUM_EXP = 6
    MAX = 7
    MIN = 8
    MULTIPLY = 9
    SUM = 10
    SUM_SQUARE = 11

    @property
    def dml_name(self) -> str:
        return "DML_REDUCE_FUNCTION_" + self.name


class AxisDirection(enum.IntEnum):
    """`DML_AXIS_DIRECTION`: INCREASING selects the smallest K, DECREASING the largest."""

    INCREASING = 0
    DECREASING = 1

    @property
    def dml_name(self) -> str:
        return "DML_AXIS_DIRECTION_" + self.name


@dataclass(frozen=True)
class Attribute:
    """A non-tensor member of an operator's desc struct, in DirectML's member order.

    kind: "enum" (a member of `enum`), "axes" (AxisCount + Axes: distinct dimensions of the
    input), "axis" (one dimension of the input), "count" (a UINT greater than 0 and less than the
    input's size along "axis": TOP_K1's K).
    """

    name: str  # DirectML member name ("Function", "Axes", "Axis", "K", "AxisDirection")
    kind: str
    enum: type | None = None


@dataclass(frozen=True)
class LevelSupport:
    """One "DML_FEATURE_LEVEL_x_y and above" table of a documentation page.

    Pages whose tables depend on an enum member (REDUCE: "Function is ARGMIN or ARGMAX") have
    one table per level and member group: `functions` lists the members it is for (empty: all).
    `index_types` are the types of an operator's index output (TOP_K1's OutputIndexTensor).
    """

    level: L
    dims: tuple[int, ...]
    input_types: tuple[DataType, ...]
    output_types: tuple[DataType, ...]
    functions: tuple = ()
    index_types: tuple[DataType, ...] = ()


@dataclass(frozen=True)
class Peer:
    """The fastest route in numpy (and CuPy, PyTorch) to an operator's result: numpy's function
    `numpy` (CuPy's has the same name, PyTorch's is `torch`), which gives DirectML's result on
    every value of the input types in `exact_on` (shift amounts below the element width, for a row
    that masks them). The demo and the benchmarks time it on one of those types; a row without a
    reference function of its own whose peer is exact on every type it takes has the peer as its
    reference (`dmlgpu.table.reference`)."""

    numpy: str
    exact_on: tuple[DataType, ...]
    torch: str | None = None  # None: numpy's name


@dataclass(frozen=True)
class Operator:
    name: str  # DML_OPERATOR_<name>
    type_value: int  # DML_OPERATOR_TYPE value
    short: str  # front-end function, reference function and shader function name
    inputs: tuple[str, ...]  # DirectML member names of the input tensors, in binding order
    support: tuple[LevelSupport, ...]  # newest level first
    same_type: bool  # all tensors share one DataType (else output types are listed apart)
    in_place: bool  # the output may alias an input (identical byte range)
    # Data-type facts ("in_bits", "out_bits", "kind") that select a shader variant: in the flat
    # layout (whole 16-byte vectors), and where the shader addresses single elements.
    flat_facts: tuple[str, ...]
    element_facts: tuple[str, ...]
    shader: str  # family: functions `short` in shaders/include/<shader>.glsl, kernel shaders/<shader>.comp (OP)
    doc: str  # the front end's docstring: one line, then how it differs from numpy, if it does
    peer: Peer  # what the demo and the benchmarks compare it with
    # Output type when a call names none (DirectMLX's default); None: the inputs' type.
    default_output: DataType | None = None
    masks_shift_amount: bool = False  # BTensor holds shift amounts, taken modulo the element width
    outputs: tuple[str, ...] = ("OutputTensor",)  # DirectML member names of the outputs, in order
    numpy_ufunc: str | None = None  # numpy's ufunc with the same raw-bit meaning, if any
    python_operator: str | None = None  # Python operator name ("xor" installs __xor__, __rxor__, __ixor__)
    family: str = ELEMENT_WISE
    attributes: tuple[Attribute, ...] = ()  # non-tensor members, in the desc struct's order
    # Enum members whose output holds indices, not values (its types are the table's output
    # types; for the other members all tensors share one type): REDUCE's ARGMIN and ARGMAX.
    index_functions: tuple = ()
    # What DirectML allows but dmlgpu does not compute, with the reason: (members, types, why).
    not_computed: tuple = ()

    @property
    def dml_name(self) -> str:
        return "DML_OPERATOR_" + self.name

    @property
    def output(self) -> str:
        """The (first) output: the values."""
        return self.outputs[0]

    @property
    def tensors(self) -> tuple[str, ...]:
        return self.inputs + self.outputs

    @property
    def desc_class_name(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_")) + "OperatorDesc"

    @property
    def introduced(self) -> L:
        return self.support[-1].level

    def support_at(self, level: L, function=None) -> LevelSupport | None:
        """The table in force at `level` (for enum member `function`, where tables depend on
        one), or None if the operator does not exist there."""
        for row in self.support:
            if row.level <= level and (not row.functions or function in row.functions):
                return row
        return None

    def computed_cases(self, level: L | None = None) -> list[tuple]:
        """(function, input type, output type) of every call dmlgpu computes at `level`
        (default: the newest), for the rows with attributes: function None where the tables
        do not depend on one; the output type is REDUCE's output or TOP_K1's index output."""
        cases = []
        for row in self.tables_at(level):
            for function in row.functions or (None,):
                for in_type in row.input_types:
                    if self.computed(function, in_type) is not None:
                        continue
                    out_types = row.index_types or (
                        row.output_types if function in self.index_functions else (in_type,))
                    cases += [(function, in_type, out_type) for out_type in out_types]
        return cases

    def computed(self, function, data_type: DataType) -> str | None:
        """None where dmlgpu computes `function` on `data_type`; else the reason it does not."""
        for functions, types, why in self.not_computed:
            if (not functions or function in functions) and data_type in types:
                return why
        return None

    @property
    def newest(self) -> LevelSupport:
        return self.support[0]

    @property
    def newest_tables(self) -> tuple[LevelSupport, ...]:
        """The newest table of each function group (one table where tables depend on none)."""
        return self.tables_at(None)

    def tables_at(self, level: L | None) -> tuple[LevelSupport, ...]:
        """The table in force at `level` (None: the newest) of each function group."""
        seen, rows = set(), []
        for row in self.support:
            if (level is None or row.level <= level) and row.functions not in seen:
                seen.add(row.functions)
                rows.append(row)
        return tuple(rows)


def field_name(tensor: str) -> str:
    """DirectML member name to the Python field name: 'ATensor' -> 'a_tensor'."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", tensor).lower()


def _support(*rows) -> tuple[LevelSupport, ...]:
    return tuple(LevelSupport(*row) for row in sorted(rows, key=lambda r: r[0], reverse=True))


def _function_support(*groups) -> tuple[LevelSupport, ...]:
    """Tables per function group, as a page with "Tensor support according to function" lists
    them: (functions, [(level, dims, in, out), ...]); each group has levels of its own. The rows
    come out newest first (a stable sort), so `support_at` finds each group's table in force."""
    rows = [LevelSupport(level, dims, i, o, tuple(functions))
            for functions, tables in groups for level, dims, i, o in tables]
    return tuple(sorted(rows, key=lambda row: row.level, reverse=True))


_REGISTRY: list[Operator] = []


def _declare(op: Operator) -> Operator:
    """Add a row to the table: a row exists for dmlgpu exactly when it is declared here."""
    if any(o.name == op.name or o.short == op.short or o.type_value == op.type_value for o in _REGISTRY):
        raise ValueError(f"{op.name} is declared twice")
    if op.same_type != (op.default_output is None):
        raise ValueError(f"{op.name}: default_output is for operators whose output types are listed apart")
    _REGISTRY.append(op)
    return op


_A_B = ("ATensor", "BTensor")
_BITWISE = _support(
    (L.LEVEL_4_1, DIMS_1_TO_8, ALL, ALL),
    (L.LEVEL_3_0, DIMS_1_TO_8, UINTS_UP_TO_32, UINTS_UP_TO_32),
)
_SHIFTS = _support(
    (L.LEVEL_4_1, DIMS_1_TO_8, UINTS, UINTS),
    (L.LEVEL_3_0, DIMS_1_TO_8, UINTS_UP_TO_32, UINTS_UP_TO_32),
    (L.LEVEL_2_1, DIMS_4, UINTS_UP_TO_32, UINTS_UP_TO_32),
)
_SIGN_TYPES_3_0 = FLOATS_UP_TO_32 + INTS_UP_TO_32 + UINTS_UP_TO_32
#: Output types of the operators with a UINT8/UINT32 result per element, as their pages list them.
_UINT_RESULT_TYPES = (DataType.UINT32, DataType.UINT8)
#: Width-independent bitwise operators: in the flat layout they run on whole words.
_RAW_BITS = dict(same_type=True, in_place=True, flat_facts=(), element_facts=("in_bits",), shader="bitwise")
#: Shifts of A by the amounts in B, lane by lane of the element width.
_SHIFT = dict(same_type=True, in_place=True, flat_facts=("in_bits",), element_facts=("in_bits",), shader="bitwise",
              masks_shift_amount=True)
#: A UINT8/UINT32 result per element whatever the input type (not in place: the pages say nothing
#: of it); DirectMLX's default output type is UINT8.
_UINT_RESULT = dict(same_type=False, in_place=False, flat_facts=("in_bits", "out_bits"),
                    element_facts=("in_bits", "out_bits"), shader="uint_result", default_output=DataType.UINT8)

BIT_NOT = _declare(Operator(
    "ELEMENT_WISE_BIT_NOT", 124, "bit_not", ("InputTensor",), _BITWISE, **_RAW_BITS,
    doc="Bitwise NOT of every element's raw bits.", peer=Peer("invert", UINTS + INTS, torch="bitwise_not"),
    numpy_ufunc="invert", python_operator="invert"))
BIT_XOR = _declare(Operator(
    "ELEMENT_WISE_BIT_XOR", 123, "bit_xor", _A_B, _BITWISE, **_RAW_BITS,
    doc="Bitwise XOR of the raw bits of `a` and `b`.", peer=Peer("bitwise_xor", UINTS + INTS),
    numpy_ufunc="bitwise_xor", python_operator="xor"))
BIT_AND = _declare(Operator(
    "ELEMENT_WISE_BIT_AND", 121, "bit_and", _A_B, _BITWISE, **_RAW_BITS,
    doc="Bitwise AND of the raw bits of `a` and `b`.", peer=Peer("bitwise_and", UINTS + INTS),
    numpy_ufunc="bitwise_and", python_operator="and"))
BIT_OR = _declare(Operator(
    "ELEMENT_WISE_BIT_OR", 122, "bit_or", _A_B, _BITWISE, **_RAW_BITS,
    doc="Bitwise OR of the raw bits of `a` and `b`.", peer=Peer("bitwise_or", UINTS + INTS),
    numpy_ufunc="bitwise_or", python_operator="or"))
BIT_SHIFT_LEFT = _declare(Operator(
    "ELEMENT_WISE_BIT_SHIFT_LEFT", 97, "bit_shift_left", _A_B, _SHIFTS, **_SHIFT,
    doc="Logical left shift of each element of `a` by the amount in `b`.",
    peer=Peer("left_shift", UINTS, torch="bitwise_left_shift"), numpy_ufunc="left_shift",
    python_operator="lshift"))
BIT_SHIFT_RIGHT = _declare(Operator(
    "ELEMENT_WISE_BIT_SHIFT_RIGHT", 98, "bit_shift_right", _A_B, _SHIFTS, **_SHIFT,
    doc="Logical right shift of each element of `a` by the amount in `b`.",
    peer=Peer("right_shift", UINTS, torch="bitwise_right_shift"), numpy_ufunc="right_shift",
    python_operator="rshift"))
SIGN = _declare(Operator(
    "ELEMENT_WISE_SIGN", 79, "sign", ("InputTensor",),
    _support(
        (L.LEVEL_4_1, DIMS_1_TO_8, FLOATS_UP_TO_32 + INTS + UINTS, FLOATS_UP_TO_32 + INTS + UINTS),
        (L.LEVEL_3_0, DIMS_1_TO_8, _SIGN_TYPES_3_0, _SIGN_TYPES_3_0),
        (L.LEVEL_2_1, DIMS_4, _SIGN_TYPES_3_0, _SIGN_TYPES_3_0),
        (L.LEVEL_2_0, DIMS_4, FLOATS_UP_TO_32, FLOATS_UP_TO_32),
    ),
    same_type=True, in_place=True, flat_facts=("in_bits", "kind"),
    element_facts=("in_bits", "kind"), shader="sign",
    doc="-1, 0 or +1 per element, in the input's dtype.\n\n"
        "Differs from `numpy.sign`: NaN gives 0 (DirectML's \"otherwise\" branch), -0.0 gives +0.0. "
        "Unsigned inputs give 0 or 1. DirectML has no FLOAT64 SIGN at any level.",
    peer=Peer("sign", INTS + UINTS)))
BIT_COUNT = _declare(Operator(
    "ELEMENT_WISE_BIT_COUNT", 125, "bit_count", ("InputTensor",),
    _support(
        (L.LEVEL_4_1, DIMS_1_TO_8, ALL, _UINT_RESULT_TYPES),
        (L.LEVEL_3_0, DIMS_1_TO_8, UINTS_UP_TO_32, _UINT_RESULT_TYPES),
    ),
    **_UINT_RESULT,
    doc="Number of 1 bits of each element's raw encoding.\n\n"
        "Differs from `numpy.bitwise_count`, which counts |x| for signed integers: -1 as int8 gives 8 "
        "here.",
    peer=Peer("bitwise_count", UINTS)))
IS_NAN = _declare(Operator(
    "ELEMENT_WISE_IS_NAN", 80, "is_nan", ("InputTensor",),
    _support(
        (L.LEVEL_3_0, DIMS_1_TO_8, FLOATS_UP_TO_32, _UINT_RESULT_TYPES),
        (L.LEVEL_2_0, DIMS_4, FLOATS_UP_TO_32, _UINT_RESULT_TYPES),
    ),
    **_UINT_RESULT,
    doc="1 where an element is a NaN (IEEE-754: any payload, either sign, quiet or signalling), else 0.",
    peer=Peer("isnan", FLOATS_UP_TO_32)))


F = ReduceFunction
_F32_F16 = FLOATS_UP_TO_32
_ORDERED_5_0 = FLOATS_UP_TO_32 + INTS + UINTS  # all but FLOAT64
_ORDERED_3_0 = FLOATS_UP_TO_32 + INTS_UP_TO_32 + UINTS_UP_TO_32
_WIDE = FLOATS_UP_TO_32 + (DataType.INT64, DataType.INT32, DataType.UINT64, DataType.UINT32)
_NARROW = FLOATS_UP_TO_32 + (DataType.INT32, DataType.UINT32)
_INDICES = (DataType.INT64, DataType.INT32, DataType.UINT64, DataType.UINT32)
_ARG = (F.ARGMAX, F.ARGMIN)
#: REDUCE's functions that pick an element by the order of encodings (no arithmetic on values).
PICKING_FUNCTIONS = _ARG + (F.MAX, F.MIN)
REDUCE = _declare(Operator(
    "REDUCE", 55, "reduce", ("InputTensor",),
    # The page's "Tensor support according to function": each group has levels of its own.
    _function_support(
        (_ARG, [(L.LEVEL_4_1, DIMS_1_TO_8, _ORDERED_5_0, _INDICES),
                (L.LEVEL_3_0, DIMS_1_TO_8, _ORDERED_3_0, _INDICES),
                (L.LEVEL_2_1, DIMS_4, _ORDERED_3_0, (DataType.UINT32,)),
                (L.LEVEL_1_0, DIMS_4, _F32_F16, (DataType.UINT32,))]),
        ((F.AVERAGE, F.L2, F.LOG_SUM, F.LOG_SUM_EXP), [(L.LEVEL_3_0, DIMS_1_TO_8, _F32_F16, _F32_F16),
                                                      (L.LEVEL_1_0, DIMS_4, _F32_F16, _F32_F16)]),
        ((F.L1, F.SUM_SQUARE), [(L.LEVEL_5_0, DIMS_1_TO_8, _WIDE, _WIDE),
                                (L.LEVEL_3_0, DIMS_1_TO_8, _F32_F16, _F32_F16),
                                (L.LEVEL_1_0, DIMS_4, _F32_F16, _F32_F16)]),
        ((F.MAX, F.MIN), [(L.LEVEL_5_0, DIMS_1_TO_8, _ORDERED_5_0, _ORDERED_5_0),
                          (L.LEVEL_3_0, DIMS_1_TO_8, _ORDERED_3_0, _ORDERED_3_0),
                          (L.LEVEL_2_1, DIMS_4, _NARROW, _NARROW),
                          (L.LEVEL_1_0, DIMS_4, _F32_F16, _F32_F16)]),
        ((F.MULTIPLY, F.SUM), [(L.LEVEL_5_0, DIMS_1_TO_8, _WIDE, _WIDE),
                               (L.LEVEL_3_0, DIMS_1_TO_8, _NARROW, _NARROW),
                               (L.LEVEL_2_1, DIMS_4, _NARROW, _NARROW),
                               (L.LEVEL_1_0, DIMS_4, _F32_F16, _F32_F16)]),
    ),
    same_type=True, in_place=False, flat_facts=(), element_facts=("in_bits", "kind", "out_bits"),
    shader="reduce",
    # numpy's sum/min/max/argmin/argmax: not DirectML's result on every type (numpy widens small
    # integer sums and propagates NaN), so no type is listed as exact.
    peer=Peer("sum", ()),
    doc="Reduction of the input over a set of axes (DML_REDUCE_FUNCTION), rank kept.\n\n"
        "Integer sums, products, L1 and SUM_SQUARE wrap at the output width. ARGMIN/ARGMAX give "
        "the first index of the extreme value (row-major over the reduced axes). MIN/MAX/ARGMIN/ARGMAX "
        "order floats by their encoding's total order (-NaN < -inf < -0.0 < +0.0 < +inf < +NaN), where "
        "numpy propagates NaN. Float sums, means, norms, logarithms and products are accumulated "
        "with compensation in a fixed order (the same bits on every run) and rounded once: the "
        "correctly rounded result but for sums that cancel beyond about 2^-70 of their terms (and "
        "for LOG_SUM and LOG_SUM_EXP, values within about 2^-46 of a midpoint between two floats); "
        "FLOAT16 accumulates in float32; NaN and infinities follow IEEE 754.",
    family=REDUCE_FAMILY,
    attributes=(Attribute("Function", "enum", ReduceFunction), Attribute("Axes", "axes")),
    index_functions=_ARG))
#: The front end's function of each DML_REDUCE_FUNCTION member that numpy or SciPy names
#: (dmlgpu.front.reductions): numpy's sum, prod, min, max, argmin, argmax and mean, SciPy's
#: scipy.special.logsumexp. L1 and L2 are numpy.linalg.norm's ord=1 and ord=2 (`NORM_ORDERS`,
#: dmlgpu.norm); LOG_SUM and SUM_SQUARE have no such name (dmlgpu.reduce runs every member).
REDUCE_NAMES = {F.SUM: "sum", F.MULTIPLY: "prod", F.MIN: "min", F.MAX: "max", F.ARGMIN: "argmin",
                F.ARGMAX: "argmax", F.AVERAGE: "mean", F.LOG_SUM_EXP: "logsumexp"}
NORM_ORDERS = {1: F.L1, 2: F.L2}
TOP_K = _declare(Operator(
    "TOP_K1", 112, "top_k", ("InputTensor",),
    (LevelSupport(L.LEVEL_5_0, DIMS_1_TO_8, _ORDERED_5_0, _ORDERED_5_0, (), (DataType.UINT64, DataType.UINT32)),
     LevelSupport(L.LEVEL_3_1, DIMS_1_TO_8, _ORDERED_3_0, _ORDERED_3_0, (), (DataType.UINT32,)),
     LevelSupport(L.LEVEL_2_1, DIMS_4, _ORDERED_3_0, _ORDERED_3_0, (), (DataType.UINT32,))),
    same_type=True, in_place=False, flat_facts=(), element_facts=("in_bits", "kind", "out_bits"),
    shader="top_k",
    # numpy's argpartition then a stable sort of the K: the fastest equivalent route, no one function.
    peer=Peer("argpartition", (), torch="topk"),
    doc="The K largest (or smallest) elements along one axis, sorted, with their indices.\n\n"
        "Ties are ordered by ascending index whatever the direction. Floats are ordered by their "
        "encoding's total order (-NaN < -inf < -0.0 < +0.0 < +inf < +NaN).",
    outputs=("OutputValueTensor", "OutputIndexTensor"),
    family=TOP_K_FAMILY,
    attributes=(Attribute("Axis", "axis"), Attribute("K", "count"),
                Attribute("AxisDirection", "enum", AxisDirection))))

#: Every row of the table, in declaration order.
TABLE: tuple[Operator, ...] = tuple(_REGISTRY)
#: The element-wise rows: each has a numpy-style function, a Tensor method or operator and a
#: dask function of its name (the reduce and top-k rows have their own front end, reductions.py).
OPERATORS: tuple[Operator, ...] = tuple(op for op in TABLE if op.family == ELEMENT_WISE)
#: The rows that reduce or select along axes.
SELECTIONS: tuple[Operator, ...] = tuple(op for op in TABLE if op.family != ELEMENT_WISE)
BY_SHORT = {op.short: op for op in TABLE}
#: The rows are exported under their names (`BIT_XOR`, ...) with the table's helpers; a new row
#: needs no edit here.
__all__ = ["BY_SHORT", "DIMS_1_TO_8", "DIMS_4", "LevelSupport", "NORM_ORDERS", "OPERATORS", "PICKING_FUNCTIONS",
           "REDUCE_NAMES",
           "SELECTIONS", "TABLE", "Operator",
           "Attribute", "AxisDirection", "ReduceFunction", "Peer", "field_name", "level_texts", "support_table",
           *sorted(name for name, value in globals().items() if isinstance(value, Operator))]


def _types_text(types: tuple[DataType, ...]) -> str:
    if set(types) == set(ALL):
        return f"all {len(ALL)}"
    missing = [t for t in ALL if t not in types]
    if len(missing) <= 2 and set(types) <= set(ALL):
        return "all but " + ", ".join(t.name for t in missing)
    return ", ".join(t.name for t in types)


def level_texts(op: Operator) -> list[str]:
    """One short line per tensor-support table, newest first (by function group where the tables
    depend on one): "4_1+: 1–8 dims, all 11"."""
    texts = []
    # By function group in enum order, as the pages list them (a stable sort keeps newest first).
    for row in sorted(op.support, key=lambda row: min((int(f) for f in row.functions), default=0)):
        dims = f"{row.dims[0]}–{row.dims[-1]}" if len(row.dims) > 1 else f"{row.dims[0]}"
        types = _types_text(row.input_types)
        if not op.same_type or (row.functions and set(row.functions) <= set(op.index_functions)):
            types += " -> " + _types_text(row.output_types)
        if row.index_types:
            types += ", indices " + _types_text(row.index_types)
        if row.functions:
            types = "/".join(f.name for f in row.functions) + ": " + types
        texts.append(f"{row.level.name[6:]}+: {dims} dims, {types}")
    return texts


def support_table() -> str:
    """README's operator table (markdown), restated from the rows; tests check README has it."""
    lines = ["| operator | enum | introduced | tensor support per level (dimensions, data types) | in place |",
             "|---|---|---|---|---|"]
    for op in TABLE:
        in_place = "no" if not op.in_place else "yes" if len(op.inputs) == 1 else "yes, with either input"
        lines.append(f"| `{op.name}` | {op.type_value} | {op.introduced.name[6:]} | {'; '.join(level_texts(op))} "
                     f"| {in_place} |")
    return "\n".join(lines) + "\n"
