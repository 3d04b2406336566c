"""Planning one front-end call: its operands, its output and how it runs, validated before any work.

`plan` turns a call as given (operands already converted by `dmlgpu.operands.convert`) into a
`HostPlan` (numpy data: pieces that each fit a device buffer, `dmlgpu.host_pieces`) or a
`TensorPlan` (Tensors: one dispatch over device memory). Shapes are fitted to the level's
dimension rules only where the meaning is unchanged: dimensions that every tensor walks
contiguously are merged, leading 1s are added; data-type rules are never bent. Operands of two
inputs broadcast with numpy's rules through zero strides, so the smaller one is never expanded.

`out` is judged in one place, `judge_out`: its type, dtype, shape, writeability, overlap with
the inputs (exact aliasing is in place) and, for a Tensor, its binding alignment.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .bindings import Binding
from .compiled import coalesce
from .descs import DESC_CLASSES
from .device import default_device
from .dtypes import DataType
from .errors import DataTypeError, ValidationError
from .host_pieces import Piece, pieces
from .operands import PLAIN_ARRAYS, SUBCLASS_ALLOWED, data_type, native_dtype
from .operators import Operator
from .tensor import Tensor
from .tensor_desc import MAX_ELEMENTS, MINIMUM_BUFFER_TENSOR_ALIGNMENT, TensorDesc, packed_strides

__all__ = ["HostKind", "HostPlan", "TensorPlan", "judge_out", "output_type", "plan"]

#: A strided view is sent as the memory it spans unless that is this many times its own bytes.
_MAX_SPAN_RATIO = 4


class HostKind(NamedTuple):
    """What holds for every call of one kind on numpy data (the front end keeps it:
    `dmlgpu.memo.HOST_PLANS`): the device, the pieces, the result's shape and dtype."""
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


class TensorPlan(NamedTuple):
    """A validated call on Tensors: one dispatch, its bindings checked."""
    compiled: object          #: None for an empty result (nothing to bind)
    ranges: list
    tensors: list             #: the inputs as bound (numpy inputs uploaded)
    out: Tensor
    given: bool               #: `out` was given


def _fail(op: Operator, tensor, field, value, allowed, error=ValidationError):
    raise error(op.dml_name, tensor, field, value, allowed)


def output_type(op: Operator, row, out, dtype, in_types) -> DataType:
    """The output's data type: the first input's for a same-type operator; else `dtype` if
    given, else `out`'s, else the row's default (DirectMLX's)."""
    if op.same_type:
        return in_types[0]
    if dtype is None:
        dtype = out.dtype if isinstance(out, (np.ndarray, Tensor)) else op.default_output.numpy
    return data_type(dtype, op.dml_name, op.output, row.output_types)


def judge_out(op: Operator, out, out_type: DataType, shape: tuple, inputs, resident: bool) -> int | None:
    """The one judgment of `out`: None, or an array of the result's data type and shape that
    DirectML can write; returns the index of the input it is exactly (in place), else None.

    `resident`: the call runs on Tensors, so `out` must be a Tensor that starts at a binding
    boundary; else a writeable plain ndarray that overlaps no input partially.
    """
    if out is None:
        return None
    if resident:
        if not isinstance(out, Tensor):
            _fail(op, op.output, "out", type(out).__name__, "allowed: None or a dmlgpu.Tensor")
        if out.data_type != out_type or out.shape != shape:
            _fail(op, op.output, "out", f"{out.shape} {out.data_type.name}",
                  f"allowed: shape {shape} and data type {out_type.name}",
                  DataTypeError if out.data_type != out_type else ValidationError)
        if 0 not in shape and out.offset % MINIMUM_BUFFER_TENSOR_ALIGNMENT:
            _fail(op, op.output, "out", f"a view starting at byte {out.offset} of its buffer",
                  f"allowed: a Tensor starting at a multiple of {MINIMUM_BUFFER_TENSOR_ALIGNMENT} bytes "
                  "(DirectML's binding alignment)")
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


def _broadcast(op: Operator, shapes) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        _fail(op, op.inputs[1], "shape", shapes[1], f"must broadcast with {op.inputs[0]}'s shape {shapes[0]}")


def plan(op: Operator, level, row, arrays, out, dtype) -> HostPlan | TensorPlan:
    """Validate one call and decide how it runs: on Tensors when an operand or `out` is one
    (numpy operands are uploaded), else over numpy data in pieces. `arrays` are the converted
    operands (`dmlgpu.operands.convert`); `dtype` is the output dtype as given (or None)."""
    if any(isinstance(x, Tensor) for x in (*arrays, out)):
        return _plan_tensors(op, level, row, arrays, out, dtype)
    return _plan_host(op, level, row, arrays, out, dtype)


def _plan_host(op, level, row, arrays, out, dtype) -> HostPlan:
    arrays = [np.asarray(x) for x in arrays]
    in_types = [data_type(x.dtype, op.dml_name, name, row.input_types) for name, x in zip(op.inputs, arrays)]
    out_type = output_type(op, row, out, dtype, in_types)
    shape = _broadcast(op, [x.shape for x in arrays])
    in_place = judge_out(op, out, out_type, shape, arrays, resident=False)
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


def _plan_tensors(op, level, row, arrays, out, dtype) -> TensorPlan:
    """The device-resident path: Tensors in, a Tensor out, no host round trip.

    numpy arrays among the inputs are uploaded first; `out` must be a Tensor (or None) that
    starts at a 16-byte boundary. Input views that do not are bound from the aligned-down byte
    with one more dimension of size 2 whose stride is their element offset: only its second
    half is the result, so a fresh output is allocated twice (the result is its second half);
    with `out` given, such inputs are first copied to packed Tensors.
    """
    devices = {x.device for x in (*arrays, out) if isinstance(x, Tensor)}
    if len(devices) > 1:
        _fail(op, None, "device", " and ".join(sorted(d.label for d in devices)),
              "allowed: Tensors of one device (move one with Tensor.to(device))")
    device = devices.pop()
    tensors = []
    for name, x in zip(op.inputs, arrays):
        if not isinstance(x, Tensor):
            data_type(np.asarray(x).dtype, op.dml_name, name, row.input_types)
            x = Tensor.from_numpy(x, device)
        tensors.append(x)
    in_types = [data_type(t.dtype, op.dml_name, name, row.input_types) for name, t in zip(op.inputs, tensors)]
    out_type = output_type(op, row, out, dtype, in_types)
    shape = _broadcast(op, [t.shape for t in tensors])
    judge_out(op, out, out_type, shape, tensors, resident=True)
    given = out is not None
    if 0 in shape:  # nothing to bind
        return TensorPlan(None, [], tensors, out if given else Tensor.empty(shape, out_type.numpy, device), given)
    shifts = [t.offset % MINIMUM_BUFFER_TENSOR_ALIGNMENT // t.itemsize for t in tensors]
    realign = given and any(shifts)  # those inputs become packed copies, once the call is valid
    strides = [_broadcast_strides(t.shape, shape, None if realign and k else t.strides)
               for t, k in zip(tensors, shifts)]
    if realign:
        shifts = [0] * len(tensors)
    out_strides = packed_strides(shape)
    sizes = list(shape)
    if any(shifts):  # the offset dimension: its second half is the result
        half = -(-int(np.prod(shape, dtype=np.int64)) * out_type.size // MINIMUM_BUFFER_TENSOR_ALIGNMENT) \
            * MINIMUM_BUFFER_TENSOR_ALIGNMENT // out_type.size
        buffer = device.allocate(2 * half * out_type.size, zero_fill=False)
        out = Tensor._made(buffer, shape, out_type, half * out_type.size)
        sizes = [2] + sizes
        strides = [[k] + st for k, st in zip(shifts, strides)]
        out_strides = (half,) + out_strides
        out_start = 0
    else:
        if not given:  # every element is written: no need to zero-fill
            nbytes = max(4, -(-int(np.prod(shape, dtype=np.int64)) * out_type.size // 4) * 4)
            out = Tensor._made(device.allocate(nbytes, zero_fill=False), shape, out_type)
        out_start = out.offset
        out_strides = out.strides
    strides = strides + [list(out_strides)]
    sizes, strides = coalesce(sizes, strides)
    sizes, strides = _fit_dimensions(op, row, sizes, strides)
    descs = [TensorDesc(t, tuple(sizes), tuple(st)) for t, st in zip(in_types + [out_type], strides)]
    compiled = device.create_operator(DESC_CLASSES[op.name](*descs), level)  # validates first
    if realign:
        tensors = [t.copy() if t.offset % MINIMUM_BUFFER_TENSOR_ALIGNMENT else t for t in tensors]
    starts = [t.offset - t.offset % MINIMUM_BUFFER_TENSOR_ALIGNMENT for t in tensors]
    bindings = ([Binding(t.buffer, start, d.total_size) for t, start, d in zip(tensors, starts, descs)],
                [Binding(out.buffer, out_start, descs[-1].total_size)])
    ranges = compiled.check(*bindings)  # hazards are checked on the bindings
    return TensorPlan(compiled, ranges, tensors, out, given)


def _broadcast_strides(shape, target, strides=None):
    """Element strides of an array of `shape` (packed unless `strides` are given) seen with
    numpy broadcasting as `target`."""
    if strides is None:
        strides = packed_strides(shape)
    lead = len(target) - len(shape)
    return [0 if d < lead or (shape[d - lead] == 1 and target[d] != 1) else strides[d - lead]
            for d in range(len(target))]


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


def _fit_dimensions(op, row, sizes, strides):
    """Add leading 1s until the level's smallest dimension count; too many dims is an error."""
    lowest, highest = row.dims[0], row.dims[-1]
    if len(sizes) > highest:
        _fail(op, op.output, "DimensionCount", len(sizes),
              f"allowed: {highest} after merging contiguous dimensions; these do not merge")
    pad = max(0, lowest - len(sizes))
    return [1] * pad + list(sizes), [[0] * pad + list(st) for st in strides]
