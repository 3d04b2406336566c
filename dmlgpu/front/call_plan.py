"""Planning one front-end call: its operands, its output and how it runs, validated before any work.

`plan` turns a call on numpy data as given (operands already converted by
`dmlgpu.layout.operands.convert`) into a `HostPlan`: pieces that each fit a device buffer
(`dmlgpu.layout.host_chunks`). Calls with a Tensor operand or `out` are `dmlgpu.front.resident`'s, whose shape
rules (broadcasting, strides, dimension fitting) this module shares. Shapes are fitted to the level's
dimension rules only where the meaning is unchanged: dimensions that every tensor walks
contiguously are merged, leading 1s are added; data-type rules are never bent. Operands of two
inputs broadcast with numpy's rules through zero strides, so the smaller one is never expanded.

`out` is judged in one place, `judge_out`: its type, dtype, shape, writeability, overlap with
the inputs (exact aliasing is in place).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..describe.operator_descs import DESC_CLASSES
from ..api.device import default_device
from ..table.dtypes import DataType
from ..errors import DataTypeError, ValidationError
from ..layout.host_chunks import Piece, pieces
from ..layout.operands import PLAIN_ARRAYS, SUBCLASS_ALLOWED, data_type, native_dtype
from ..table.operators import Operator
from ..describe.shapes import broadcast_shape, broadcast_strides as _broadcast_strides, coalesce, fit_dimensions as _fit_dimensions
from ..describe.tensor_desc import MAX_ELEMENTS, TensorDesc

__all__ = ["HostKind", "HostPlan", "judge_out", "output_type", "plan"]

#: A strided view is sent as the memory it spans unless that is this many times its own bytes.
_MAX_SPAN_RATIO = 4


class HostKind(NamedTuple):
    """What holds for every call of one kind on numpy data (the front end keeps it:
    `dmlgpu.layout.memo.HOST_PLANS`): the device, the pieces, the result's shape and dtype."""
    device: object
    pieces: list[Piece]
    shape: tuple
    dtype: np.dtype


class HostPlan(NamedTuple):
    """A validated call on numpy data: its kind, and this call's data."""
    kind: HostKind
    flat_in: list             #: each input's bytes as the descriptors address them
    arrays: list              #: the converted operands (the same array twice stays one)
    in_place: int | None      #: the input `out` is, exactly, when it runs in place
    direct: bool              #: the result lands in `out` itself (else a copy into it)


def _fail(op: Operator, tensor, field, value, allowed, error=ValidationError):
    raise error(op.dml_name, tensor, field, value, allowed)


def output_type(op: Operator, row, out, dtype, in_types) -> DataType:
    """The output's data type: the first input's for a same-type operator; else `dtype` if
    given, else `out`'s, else the row's default (DirectMLX's)."""
    if op.same_type:
        return in_types[0]
    if dtype is None:
        dtype = out.dtype if isinstance(out, np.ndarray) else op.default_output.numpy
    return data_type(dtype, op.dml_name, op.output, row.output_types)


def judge_out(op: Operator, out, out_type: DataType, shape: tuple, inputs) -> int | None:
    """The one judgment of a numpy call's `out`: None, or a writeable plain ndarray of the
    result's data type and shape that overlaps no input partially; returns the index of the
    input it is exactly (in place), else None. (A Tensor `out` is `dmlgpu.front.resident`'s to judge.)
    """
    if out is None:
        return None
    if not isinstance(out, np.ndarray):
        _fail(op, op.output, "out", type(out).__name__, "allowed: None or a numpy.ndarray")
    if type(out) not in PLAIN_ARRAYS:
        _fail(op, op.output, "out", type(out).__name__, SUBCLASS_ALLOWED)
    if native_dtype(out.dtype) != out_type.numpy:
        _fail(op, op.output, "out.dtype", out.dtype, f"allowed: {out_type.numpy.name}", DataTypeError)
    if out.shape != shape:
        _fail(op, op.output, "out.shape", out.shape, f"allowed: {shape}")
    if not out.flags.writeable:
        _fail(op, op.output, "out", "a read-only array", "allowed: a writeable array")
    in_place = None
    for index, x in enumerate(inputs):  # every input: out may alias one exactly, none partially
        if not np.shares_memory(out, x):
            continue
        exact = (x.__array_interface__["data"][0] == out.__array_interface__["data"][0]
                 and x.shape == out.shape and x.strides == out.strides
                 and x.dtype.itemsize == out.dtype.itemsize)
        if not exact:
            _fail(op, op.output, "out", "an array partially overlapping " + op.inputs[index],
                  "allowed: no overlap, or exactly the same elements as an input (in place)")
        if not op.in_place:
            _fail(op, op.output, "out", f"the same memory as {op.inputs[index]}",
                  f"{op.dml_name} does not support in-place execution")
        if in_place is None:
            in_place = index
    return in_place


def plan(op: Operator, level, row, arrays, out, dtype) -> HostPlan:
    """Validate one call on numpy data and decide how it runs: in pieces that each fit a device
    buffer. `arrays` are the converted operands (`dmlgpu.layout.operands.convert`); `dtype` is the
    output dtype as given (or None)."""
    arrays = [np.asarray(x) for x in arrays]
    in_types = [data_type(x.dtype, op.dml_name, name, row.input_types) for name, x in zip(op.inputs, arrays)]
    out_type = output_type(op, row, out, dtype, in_types)
    shape = broadcast_shape(op, [x.shape for x in arrays])
    in_place = judge_out(op, out, out_type, shape, arrays)
    count = int(np.prod(shape, dtype=np.float64))
    if count > MAX_ELEMENTS:
        _fail(op, op.output, "shape", shape, f"a tensor may hold at most 2^32-1 elements, not {count}")

    # Each input is presented with its own element strides over the result's shape (0 where it
    # broadcasts), over the memory it covers: transposes and slices reach the GPU as strided
    # tensors, not as host copies. An empty result is validated as if each size were 1.
    memories, strides = zip(*(_memory(x, shape) for x in arrays))
    strides = list(strides) + [_broadcast_strides(shape, shape)]
    if in_place is not None and strides[in_place] != strides[-1]:
        in_place = None  # a strided view written in place: compute apart, then copy into `out`
    empty = 0 in shape
    probe = tuple(1 for _ in shape) if empty else shape
    sizes, strides = coalesce(probe, strides)
    sizes, strides = _fit_dimensions(op, row, sizes, strides)
    types = in_types + [out_type]
    tensors = [TensorDesc(t, tuple(sizes), tuple(st)) for t, st in zip(types, strides)]
    device = default_device()
    compiled = device.create_operator(DESC_CLASSES[op.name](*tensors), level)  # validates the whole call
    direct = out is not None and out.flags.c_contiguous and out.dtype.isnative
    kind = HostKind(device, [] if empty else pieces(compiled), shape, out_type.numpy)
    return HostPlan(kind, list(memories), arrays, in_place, direct)


def _memory(x: np.ndarray, target):
    """(bytes the GPU reads, element strides over `target`) for input array `x`.

    A view with non-negative strides that are whole elements is sent as the memory it spans,
    with its strides; anything else (negative strides, odd byte strides, sparse views) is
    copied into C order first.
    """
    itemsize = x.dtype.itemsize
    if not x.flags.c_contiguous and x.size:
        steps = [st // itemsize for st in x.strides]
        span = sum((n - 1) * st for n, st in zip(x.shape, steps)) + 1
        if all(st >= 0 and st % itemsize == 0 for st in x.strides) and span <= _MAX_SPAN_RATIO * x.size:
            raw = np.lib.stride_tricks.as_strided(x, shape=(span,), strides=(itemsize,))
            return raw.view(np.uint8), _broadcast_strides(x.shape, target, steps)
    x = np.ascontiguousarray(x)
    return x.reshape(-1).view(np.uint8), _broadcast_strides(x.shape, target)
