"""Inputs for cross-checks, shared by the demo, the tests and the benchmarks.

Values are made as raw bit patterns so that every encoding the operators must keep intact
appears: for integers 0, +/-1, the extremes and alternating bits; for floats +/-0, +/-1,
+/-inf, quiet and signalling NaNs with payloads and either sign, denormals and the extremes.
"""
from __future__ import annotations

import numpy as np

from .table.dtypes import DataType
from .front.numpy_api import FUNCTIONS
from .table.operators import OPERATORS, Operator
from .table.reference import REFERENCES

__all__ = ["all_cases", "case_types", "edge_bits", "front_end", "one_type_per_width", "reference",
           "same_bits", "sample"]

_FLOAT_LAYOUT = {16: (10, 5), 32: (23, 8), 64: (52, 11)}  # mantissa bits, exponent bits


def edge_bits(data_type: DataType) -> np.ndarray:
    """Edge-case encodings of `data_type`, as unsigned integers of its width."""
    width = data_type.bits
    utype = np.dtype(f"<u{width // 8}")
    ones = (1 << width) - 1
    top = 1 << (width - 1)
    values = {0, 1, ones, top, top - 1, top + 1, ones - 1, 2, 0x55 * (ones // 0xFF), 0xAA * (ones // 0xFF)}
    if data_type.is_float:
        mantissa, exponent = _FLOAT_LAYOUT[width]
        inf = ((1 << exponent) - 1) << mantissa
        one = ((1 << (exponent - 1)) - 1) << mantissa
        quiet = inf | (1 << (mantissa - 1))
        for bits in (one, inf, quiet, quiet | 1, inf | 1, inf | ((1 << mantissa) - 1), 1,
                     (1 << mantissa) - 1, 1 << mantissa, inf - 1, one + 1):
            values.update((bits, bits | top))  # each with both signs
    return np.array(sorted(values), dtype=utype)


def sample(data_type: DataType, shape, rng: np.random.Generator) -> np.ndarray:
    """An array of `shape` holding every edge value (as far as it fits) and random bits."""
    width = data_type.bits
    count = int(np.prod(shape, dtype=np.int64))
    raw = rng.integers(0, 256, size=count * (width // 8), dtype=np.uint8).view(f"<u{width // 8}")
    edges = edge_bits(data_type)
    if count:
        positions = rng.permutation(count)[:edges.size]
        raw[positions] = edges[:positions.size]
    return raw.view(data_type.numpy).reshape(shape)


def case_types(op: Operator, level=None) -> list[tuple[DataType, DataType]]:
    """(input type, output type) pairs the operator allows at `level` (default: newest)."""
    row = op.newest if level is None else op.support_at(level)
    if row is None:
        return []
    if op.same_type:
        return [(t, t) for t in row.input_types]
    return [(i, o) for i in row.input_types for o in row.output_types]


def one_type_per_width(op: Operator, preferred=(), widths=(8, 16, 32, 64)) -> list[DataType]:
    """One input type per element width the operator takes at its newest level: the first of
    `preferred` it takes, else the first the table lists, so that a test covers every width (and
    every kernel width) of every operator."""
    allowed = op.newest.input_types
    chosen = []
    for bits in widths:
        of_width = [t for t in (*preferred, *allowed) if t.bits == bits and t in allowed]
        if of_width:
            chosen.append(of_width[0])
    return chosen


def all_cases(level=None) -> list[tuple[Operator, DataType, DataType]]:
    return [(op, i, o) for op in OPERATORS for i, o in case_types(op, level)]


def front_end(op: Operator, arrays, out_type: DataType, out=None, feature_level=None):
    """Call the public numpy function of `op` (with `dtype` where the output type is chosen)."""
    extra = {} if op.same_type else {"dtype": out_type.numpy}
    return FUNCTIONS[op.short](*arrays, out=out, feature_level=feature_level, **extra)


def reference(op: Operator, arrays, out_type: DataType) -> np.ndarray:
    """`dmlgpu.table.reference` for `op`, with numpy broadcasting and the output type applied."""
    function = REFERENCES[op.short]
    if op.same_type:
        return np.asarray(function(*arrays))
    return np.asarray(function(*arrays, out_type.numpy))


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit-for-bit equality (NaN == NaN, -0 != +0), shapes and dtypes included."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    view = np.dtype(f"<u{a.dtype.itemsize}")
    return np.array_equal(np.ascontiguousarray(a).view(view), np.ascontiguousarray(b).view(view))
