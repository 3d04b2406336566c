"""The tables restate DirectML's headers and documentation pages; these tests compare them with
the documents themselves, written out here independently (docs/guide/semantics.md §1, §3):
a new operator's page is restated here by hand, on purpose. The parts of the docs that are
derived from the table (the user guide's operator section) are checked against it."""
from pathlib import Path

import pytest

from dmlgpu import DataType, FeatureLevel
from dmlgpu.describe import operator_descs as descs
from dmlgpu.front import numpy_api
from dmlgpu.table.operators import BIT_NOT, BIT_XOR, OPERATORS, SIGN, field_name, support_table
from dmlgpu.describe.tensor_desc import calc_buffer_tensor_size
from dmlgpu_tools import readme

L = FeatureLevel
#: The user-guide page holding the operator section (`python -m dmlgpu table --readme` writes it).
PAGE = Path(__file__).resolve().parents[2] / readme.PAGE


def test_data_type_values_match_directml_h():
    expected = {"UNKNOWN": 0, "FLOAT32": 1, "FLOAT16": 2, "UINT32": 3, "UINT16": 4, "UINT8": 5,
                "INT32": 6, "INT16": 7, "INT8": 8, "FLOAT64": 9, "UINT64": 10, "INT64": 11,
                "UINT4": 12, "INT4": 13}
    assert {t.name: t.value for t in DataType} == expected


def test_feature_level_values_match_directml_h():
    expected = [0x1000, 0x2000, 0x2100, 0x3000, 0x3100, 0x4000, 0x4100, 0x5000, 0x5100, 0x5200,
                0x6000, 0x6100, 0x6200, 0x6300, 0x6400]
    assert [level.value for level in FeatureLevel] == expected
    assert FeatureLevel.LEVEL_3_0 == 0x3000 and FeatureLevel.newest() is FeatureLevel.LEVEL_6_4


UNARY, BINARY = ("InputTensor",), ("ATensor", "BTensor")
#: By DirectML operator name: DirectML.h's DML_OPERATOR_TYPE value, the desc struct's input members,
#: and the page's in-place sentence ("may alias", or none) and tensor constraints (same DataType
#: on all tensors or not).
DOC_FACTS = {
    "ELEMENT_WISE_BIT_NOT": (124, UNARY, True, True),
    "ELEMENT_WISE_BIT_XOR": (123, BINARY, True, True),
    "ELEMENT_WISE_BIT_AND": (121, BINARY, True, True),
    "ELEMENT_WISE_BIT_OR": (122, BINARY, True, True),
    "ELEMENT_WISE_BIT_SHIFT_LEFT": (97, BINARY, True, True),
    "ELEMENT_WISE_BIT_SHIFT_RIGHT": (98, BINARY, True, True),
    "ELEMENT_WISE_SIGN": (79, UNARY, True, True),
    "ELEMENT_WISE_BIT_COUNT": (125, UNARY, False, False),
    "ELEMENT_WISE_IS_NAN": (80, UNARY, False, False),
}


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.short)
def test_operator_type_values_tensors_and_rules(op):
    assert op.name in DOC_FACTS, f"{op.name}: restate its DirectML page in DOC_FACTS and DOC_TABLES"
    assert (op.type_value, op.inputs, op.in_place, op.same_type) == DOC_FACTS[op.name]
    assert op.output == "OutputTensor"


def test_field_names():
    assert [field_name(t) for t in BIT_XOR.tensors] == ["a_tensor", "b_tensor", "output_tensor"]


ALL11 = "FLOAT64 FLOAT32 FLOAT16 INT64 INT32 INT16 INT8 UINT64 UINT32 UINT16 UINT8".split()
UINT32_16_8 = ["UINT32", "UINT16", "UINT8"]
DOC_TABLES = {  # (level, dims, input types, output types), from each operator's page
    "ELEMENT_WISE_BIT_NOT": [(L.LEVEL_4_1, "1-8", ALL11, ALL11),
                             (L.LEVEL_3_0, "1-8", UINT32_16_8, UINT32_16_8)],
    "ELEMENT_WISE_BIT_XOR": [(L.LEVEL_4_1, "1-8", ALL11, ALL11),
                             (L.LEVEL_3_0, "1-8", UINT32_16_8, UINT32_16_8)],
    "ELEMENT_WISE_BIT_AND": [(L.LEVEL_4_1, "1-8", ALL11, ALL11),
                             (L.LEVEL_3_0, "1-8", UINT32_16_8, UINT32_16_8)],
    "ELEMENT_WISE_BIT_OR": [(L.LEVEL_4_1, "1-8", ALL11, ALL11),
                            (L.LEVEL_3_0, "1-8", UINT32_16_8, UINT32_16_8)],
    "ELEMENT_WISE_BIT_SHIFT_LEFT": [(L.LEVEL_4_1, "1-8", ["UINT64"] + UINT32_16_8, ["UINT64"] + UINT32_16_8),
                                    (L.LEVEL_3_0, "1-8", UINT32_16_8, UINT32_16_8),
                                    (L.LEVEL_2_1, "4", UINT32_16_8, UINT32_16_8)],
    "ELEMENT_WISE_BIT_SHIFT_RIGHT": [(L.LEVEL_4_1, "1-8", ["UINT64"] + UINT32_16_8, ["UINT64"] + UINT32_16_8),
                                     (L.LEVEL_3_0, "1-8", UINT32_16_8, UINT32_16_8),
                                     (L.LEVEL_2_1, "4", UINT32_16_8, UINT32_16_8)],
    "ELEMENT_WISE_SIGN": [
        (L.LEVEL_4_1, "1-8", ALL11[1:], ALL11[1:]),
        (L.LEVEL_3_0, "1-8", "FLOAT32 FLOAT16 INT32 INT16 INT8 UINT32 UINT16 UINT8".split(),
         "FLOAT32 FLOAT16 INT32 INT16 INT8 UINT32 UINT16 UINT8".split()),
        (L.LEVEL_2_1, "4", "FLOAT32 FLOAT16 INT32 INT16 INT8 UINT32 UINT16 UINT8".split(),
         "FLOAT32 FLOAT16 INT32 INT16 INT8 UINT32 UINT16 UINT8".split()),
        (L.LEVEL_2_0, "4", ["FLOAT32", "FLOAT16"], ["FLOAT32", "FLOAT16"]),
    ],
    "ELEMENT_WISE_BIT_COUNT": [(L.LEVEL_4_1, "1-8", ALL11, ["UINT32", "UINT8"]),
                               (L.LEVEL_3_0, "1-8", UINT32_16_8, ["UINT32", "UINT8"])],
    "ELEMENT_WISE_IS_NAN": [(L.LEVEL_3_0, "1-8", ["FLOAT32", "FLOAT16"], ["UINT32", "UINT8"]),
                            (L.LEVEL_2_0, "4", ["FLOAT32", "FLOAT16"], ["UINT32", "UINT8"])],
}


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.short)
def test_support_tables_match_the_documentation(op):
    got = [(row.level, "4" if row.dims == (4,) else f"{row.dims[0]}-{row.dims[-1]}",
            [t.name for t in row.input_types], [t.name for t in row.output_types])
           for row in op.support]
    assert got == DOC_TABLES[op.name]


def test_sign_has_no_float64_at_any_level():
    assert SIGN.introduced == L.LEVEL_2_0 and BIT_NOT.introduced == L.LEVEL_3_0
    assert all(DataType.FLOAT64 not in row.input_types for row in SIGN.support)


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.short)
def test_each_row_gives_a_descriptor_a_function_and_its_operators(op):
    cls = descs.DESC_CLASSES[op.name]
    assert cls.__name__ == op.desc_class_name and getattr(descs, cls.__name__) is cls
    function = numpy_api.FUNCTIONS[op.short]
    assert getattr(numpy_api, op.short) is function and function.__doc__.startswith(op.doc.split("\n")[0][:-1])
    assert f"(DML_{op.name})" in function.__doc__


def test_the_operator_section_is_the_table():
    """The user guide's operator section (prose and table) is written from the rows: regenerate it
    with `python -m dmlgpu table --readme docs/guide/numpy.md` when a row changes."""
    text = PAGE.read_text()
    assert readme.section() in text, f"the operator section differs: python -m dmlgpu table --readme {readme.PAGE}"
    assert support_table() in text


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.short)
def test_the_section_names_every_row(op):
    prose = PAGE.read_text().split(readme.BEGIN)[1].split("\n\n")[0]
    lines = [line for line in prose.splitlines() if line.startswith(f"- `dmlgpu.{op.short}` (`{op.name}`): ")]
    assert len(lines) == 1 and op.doc.partition("\n\n")[0] in lines[0]


@pytest.mark.parametrize("data_type, sizes, strides, expected", [
    (DataType.FLOAT16, [3], None, 8),        # 6 bytes, rounded up to 4
    (DataType.UINT8, [2, 2], None, 4),
    (DataType.UINT8, [5], None, 8),
    (DataType.FLOAT32, [2, 3], [0, 1], 12),  # broadcast rows: only one row stored
    (DataType.FLOAT32, [2, 3], [5, 1], 32),  # padded rows: (1*5 + 2 + 1) * 4
    (DataType.UINT64, [1, 1, 3, 5], [15, 1, 5, 1], 120),  # NHWC-style permuted strides
    (DataType.INT4, [3], None, 4),           # 12 bits -> 2 bytes -> 4
    (DataType.UNKNOWN, [4], None, 0),        # DirectML returns 0 for an unknown type
])
def test_calc_buffer_tensor_size(data_type, sizes, strides, expected):
    assert calc_buffer_tensor_size(data_type, sizes, strides) == expected


# -- the reduce and top-k rows: DirectML.h and the DML_REDUCE_OPERATOR_DESC / DML_TOP_K1_OPERATOR_DESC
# pages, restated by hand (struct members in order, enum values, tables per level and function).
def test_reduce_function_and_axis_direction_values_match_directml_h():
    from dmlgpu.table.operators import AxisDirection, ReduceFunction
    expected = ["ARGMAX", "ARGMIN", "AVERAGE", "L1", "L2", "LOG_SUM", "LOG_SUM_EXP", "MAX", "MIN",
                "MULTIPLY", "SUM", "SUM_SQUARE"]
    assert [(f.name, f.value) for f in ReduceFunction] == [(name, i) for i, name in enumerate(expected)]
    assert [(d.name, d.value) for d in AxisDirection] == [("INCREASING", 0), ("DECREASING", 1)]


SELECTION_FACTS = {  # DML_OPERATOR_TYPE value, inputs, outputs, non-tensor members, introduced
    "REDUCE": (55, ("InputTensor",), ("OutputTensor",), ("Function", "Axes"), L.LEVEL_1_0),
    "TOP_K1": (112, ("InputTensor",), ("OutputValueTensor", "OutputIndexTensor"), ("Axis", "K", "AxisDirection"),
               L.LEVEL_2_1),
}
ORDERED_5_0 = "FLOAT32 FLOAT16 INT64 INT32 INT16 INT8 UINT64 UINT32 UINT16 UINT8".split()
ORDERED_3_0 = "FLOAT32 FLOAT16 INT32 INT16 INT8 UINT32 UINT16 UINT8".split()
F32_F16 = ["FLOAT32", "FLOAT16"]
WIDE = ["FLOAT32", "FLOAT16", "INT64", "INT32", "UINT64", "UINT32"]
NARROW = ["FLOAT32", "FLOAT16", "INT32", "UINT32"]
INDICES = ["INT64", "INT32", "UINT64", "UINT32"]
#: By function group, as the pages' "Tensor support according to function" sections list them
#: (REDUCE: MicrosoftDocs/sdk-api ns-directml-dml_reduce_operator_desc.md; TOP_K1, one group:
#: ns-directml-dml_top_k1_operator_desc.md): (level, dims, input types, output types, index types).
SELECTION_TABLES = {
    "REDUCE": {
        "ARGMAX ARGMIN": [(L.LEVEL_4_1, "1-8", ORDERED_5_0, INDICES, []),
                          (L.LEVEL_3_0, "1-8", ORDERED_3_0, INDICES, []),
                          (L.LEVEL_2_1, "4", ORDERED_3_0, ["UINT32"], []),
                          (L.LEVEL_1_0, "4", F32_F16, ["UINT32"], [])],
        "AVERAGE L2 LOG_SUM LOG_SUM_EXP": [(L.LEVEL_3_0, "1-8", F32_F16, F32_F16, []),
                                           (L.LEVEL_1_0, "4", F32_F16, F32_F16, [])],
        "L1 SUM_SQUARE": [(L.LEVEL_5_0, "1-8", WIDE, WIDE, []),
                          (L.LEVEL_3_0, "1-8", F32_F16, F32_F16, []),
                          (L.LEVEL_1_0, "4", F32_F16, F32_F16, [])],
        "MAX MIN": [(L.LEVEL_5_0, "1-8", ORDERED_5_0, ORDERED_5_0, []),
                    (L.LEVEL_3_0, "1-8", ORDERED_3_0, ORDERED_3_0, []),
                    (L.LEVEL_2_1, "4", NARROW, NARROW, []),
                    (L.LEVEL_1_0, "4", F32_F16, F32_F16, [])],
        "MULTIPLY SUM": [(L.LEVEL_5_0, "1-8", WIDE, WIDE, []),
                         (L.LEVEL_3_0, "1-8", NARROW, NARROW, []),
                         (L.LEVEL_2_1, "4", NARROW, NARROW, []),
                         (L.LEVEL_1_0, "4", F32_F16, F32_F16, [])],
    },
    "TOP_K1": {
        "": [(L.LEVEL_5_0, "1-8", ORDERED_5_0, ORDERED_5_0, ["UINT64", "UINT32"]),
             (L.LEVEL_3_1, "1-8", ORDERED_3_0, ORDERED_3_0, ["UINT32"]),
             (L.LEVEL_2_1, "4", ORDERED_3_0, ORDERED_3_0, ["UINT32"])],
    },
}


@pytest.mark.parametrize("name", sorted(SELECTION_FACTS))
def test_selection_rows_restate_their_pages(name):
    from dmlgpu.table.operators import BY_SHORT, SELECTIONS
    (op,) = [o for o in SELECTIONS if o.name == name]
    assert BY_SHORT[op.short] is op
    assert (op.type_value, op.inputs, op.outputs, tuple(a.name for a in op.attributes), op.introduced) == \
        SELECTION_FACTS[name]
    assert [row.level for row in op.support] == sorted((row.level for row in op.support), reverse=True)
    got = {}
    for row in op.support:  # newest first within each group, as the pages list them
        got.setdefault(" ".join(sorted(f.name for f in row.functions)), []).append(
            (row.level, "4" if row.dims == (4,) else f"{row.dims[0]}-{row.dims[-1]}", [t.name for t in row.input_types],
             [t.name for t in row.output_types], [t.name for t in row.index_types]))
    assert got == SELECTION_TABLES[name]
    functions = [f for f in getattr(op.attributes[0].enum, "__members__", {}).values()] if name == "REDUCE" else [None]
    assert sorted(" ".join(sorted(f.name for f in row.functions)) for row in op.newest_tables) == \
        sorted(SELECTION_TABLES[name])
    for function in functions:  # every function has a table at every level from 1_0 (REDUCE's Availability)
        for level in L:
            row = op.support_at(level, function)
            assert (row is None) == (level < op.introduced), (function, level)
    cls = descs.DESC_CLASSES[name]
    assert cls.__name__ == op.desc_class_name and list(cls.__dataclass_fields__) == \
        [field_name(t) for t in op.tensors] + [field_name(a.name) for a in op.attributes]


@pytest.mark.parametrize("k, size, ok", [(0, 5, False), (1, 5, True), (4, 5, True), (5, 5, False), (1, 1, False)])
def test_top_k1_k_is_greater_than_0_and_less_than_the_axis_size(k, size, ok):
    """TOP_K1's page: "K must be greater than 0, but less than the number of elements in the
    InputTensor along the dimension specified by Axis"."""
    from dmlgpu import TensorDesc, ValidationError, validate
    from dmlgpu.describe.operator_descs import TopK1OperatorDesc
    x, out = TensorDesc(DataType.INT32, (2, size)), (2, k) if k else (2, 1)
    desc = TopK1OperatorDesc(x, TensorDesc(DataType.INT32, out), TensorDesc(DataType.UINT32, out), 1, k, 0)
    if ok:
        validate(desc)
    else:
        with pytest.raises(ValidationError) as info:
            validate(desc)
        assert info.value.field == "K" and "less than" in info.value.allowed


@pytest.mark.parametrize("level, function, in_type, out_type, ok", [
    (L.LEVEL_3_0, "L1", "INT32", "INT32", False),          # L1, SUM_SQUARE: floats only below 5_0
    (L.LEVEL_3_0, "SUM_SQUARE", "UINT32", "UINT32", False),
    (L.LEVEL_5_0, "L1", "INT32", "INT32", True),
    (L.LEVEL_3_0, "SUM", "INT32", "INT32", True),
    (L.LEVEL_3_0, "ARGMAX", "INT32", "INT64", True),        # 3_0: INT64, INT32, UINT64, UINT32 indices
    (L.LEVEL_3_0, "ARGMIN", "UINT8", "INT32", True),
    (L.LEVEL_3_0, "ARGMAX", "INT64", "UINT32", False),      # 64-bit inputs from 4_1
    (L.LEVEL_4_1, "ARGMAX", "INT64", "UINT32", True),
    (L.LEVEL_2_1, "ARGMAX", "INT8", "UINT32", True),        # 2_1: 4 dims, UINT32 indices only
    (L.LEVEL_2_1, "ARGMAX", "INT8", "UINT64", False),
    (L.LEVEL_2_1, "MAX", "INT32", "INT32", True),
    (L.LEVEL_2_1, "MAX", "INT16", "INT16", False),
    (L.LEVEL_2_1, "SUM", "UINT32", "UINT32", True),
    (L.LEVEL_1_0, "SUM", "UINT32", "UINT32", False),
    (L.LEVEL_1_0, "ARGMIN", "FLOAT32", "UINT32", True),
])
def test_reduce_levels_by_function(level, function, in_type, out_type, ok):
    from dmlgpu import TensorDesc, ValidationError, validate
    from dmlgpu.describe.operator_descs import ReduceOperatorDesc
    from dmlgpu.table.operators import ReduceFunction
    desc = ReduceOperatorDesc(TensorDesc(DataType[in_type], (2, 3, 1, 5)), TensorDesc(DataType[out_type], (2, 1, 1, 5)),
                              ReduceFunction[function], (1,))
    if ok:
        validate(desc, level)
    else:
        with pytest.raises(ValidationError) as info:
            validate(desc, level)
        assert info.value.field == "DataType"
