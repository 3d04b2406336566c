"""Shape arithmetic, in one place: packed strides, a view's extent, numpy broadcasting, merging
dimensions that every tensor walks contiguously, and fitting a dimension count to a feature
level's rules. Element strides throughout (DirectML's convention, not numpy's bytes).

Every planner reads these: the numpy front end's and the Tensor calls' (`dmlgpu.front`), the
spanning plans (`dmlgpu.api.span_plan`), the compiled operators and graphs (`dmlgpu.kernels`,
`dmlgpu.compiler`) and the views (`dmlgpu.layout.views`).
"""
from __future__ import annotations

from typing import Sequence

from ..errors import ValidationError

__all__ = ["broadcast_shape", "broadcast_strides", "coalesce", "extent", "fit_dimensions", "is_packed",
           "packed_strides"]


def packed_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides, in elements, of a packed tensor with these sizes."""
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def extent(shape, strides) -> int:
    """Elements from the first to one past the last (0 when there are none)."""
    if 0 in shape:
        return 0
    return sum((n - 1) * s for n, s in zip(shape, strides)) + 1


def is_packed(shape, strides) -> bool:
    """C order without gaps (strides of size-1 dimensions do not count)."""
    return all(n == 1 or s == p for n, s, p in zip(shape, strides, packed_strides(shape)))


def broadcast_shape(op, shapes) -> tuple[int, ...]:
    """numpy's broadcasting of operand shapes (any number of dimensions; numpy's own helper
    stops at 32), or ValidationError naming the operand of `op` that does not fit."""
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    result = []
    for sizes in zip(*padded):
        sized = {n for n in sizes if n != 1}
        if len(sized) > 1:
            raise ValidationError(op.dml_name, op.inputs[1], "shape", shapes[1],
                                  f"must broadcast with {op.inputs[0]}'s shape {shapes[0]}")
        result.append(sized.pop() if sized else 1)
    return tuple(result)


def broadcast_strides(shape, target, strides=None):
    """Element strides of an array of `shape` (packed unless `strides` are given) seen with
    numpy broadcasting as `target`."""
    if strides is None:
        strides = packed_strides(shape)
    lead = len(target) - len(shape)
    return [0 if d < lead or (shape[d - lead] == 1 and target[d] != 1) else strides[d - lead]
            for d in range(len(target))]


def coalesce(sizes, strides_per_tensor):
    """Drop size-1 dimensions and merge neighbours that every tensor walks contiguously.

    Returns (sizes, [strides per tensor]) with at least one dimension.
    """
    dims = [(s, [st[d] for st in strides_per_tensor]) for d, s in enumerate(sizes) if s != 1]
    merged: list = []
    for size, strides in dims:
        if merged:
            outer_size, outer = merged[-1]
            if all(o == i * size for o, i in zip(outer, strides)):
                merged[-1] = (outer_size * size, strides)
                continue
        merged.append((size, strides))
    if not merged:
        merged = [(1, [0] * len(strides_per_tensor))]
    return [s for s, _ in merged], [[st[k] for _, st in merged] for k in range(len(strides_per_tensor))]


def fit_dimensions(op, row, sizes, strides):
    """Add leading 1s until the level's smallest dimension count (`row.dims`); too many
    dimensions (after `coalesce`) is a ValidationError naming `op`."""
    lowest, highest = row.dims[0], row.dims[-1]
    if len(sizes) > highest:
        raise ValidationError(op.dml_name, op.output, "DimensionCount", len(sizes),
                              f"allowed: {highest} after merging contiguous dimensions; these do not merge")
    pad = max(0, lowest - len(sizes))
    return [1] * pad + list(sizes), [[0] * pad + list(st) for st in strides]
