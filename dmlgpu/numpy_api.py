"""The numpy front end: one function per operator of the table, on the default device.

Each call builds the DirectML descriptors that describe the arrays, validates them at the
requested feature level (before any work starts), and runs them. Shapes are fitted to the level's
dimension rules only where the meaning is unchanged: dimensions that every tensor walks
contiguously are merged, leading 1s are added; data-type rules are never bent. Functions of two
operands broadcast with numpy's rules through zero strides, so the smaller operand is never
expanded.

The functions (`FUNCTIONS`, one per row, named after its `short`) and Tensor's Python operators
(from each row's `python_operator`) are made from the table at the end of this module.
"""
from __future__ import annotations

import math
import textwrap

import numpy as np

from .device import default_device
from .descs import DESC_CLASSES
from .dtypes import DataType
from .errors import ValidationError
from .compiled import coalesce
from .operators import OPERATORS, Operator, level_texts
from .tensor_desc import MAX_ELEMENTS, MINIMUM_BUFFER_TENSOR_ALIGNMENT, TensorDesc, packed_strides
from .bindings import Binding
from .operands import PLAIN_ARRAYS, SUBCLASS_ALLOWED, host_array, is_python_scalar, native_dtype, python_scalar
from . import tensor as tensor_module
from .tensor import Tensor
from .validation import resolve_feature_level, support_row


def _fail(op, tensor, field, value, allowed):
    raise ValidationError(op.dml_name, tensor, field, value, allowed)


def _data_type(op: Operator, tensor: str, dtype, allowed) -> DataType:
    try:
        data_type = DataType.from_numpy(native_dtype(dtype))
    except TypeError:
        data_type = None
    if data_type is None:
        names = ", ".join(t.numpy.name for t in allowed)
        _fail(op, tensor, "dtype", dtype, f"allowed: {names}")
    return data_type


def _apply(op: Operator, arrays, out, out_dtype, feature_level):
    """One call of `op`: `arrays` are its operands (numpy data, Tensors, Python scalars);
    `out_dtype` is None for "the input's type" (same-type operators) or "not given"."""
    call = (op.name, feature_level, out_dtype)  # the arguments as given: part of the cache key
    if isinstance(out, Tensor):  # hot path: the same Tensors as an earlier call
        try:
            launch = _TENSOR_CALLS.get((*call, (*[t.key for t in arrays], out.key)))
        except (AttributeError, TypeError):
            launch = None
        if launch is not None and launch.device.enqueue(launch):
            return out
    elif out is None and arrays and all(isinstance(x, Tensor) for x in arrays):
        try:  # hot path: a new result of an earlier call's shape from the same Tensors
            known = _TENSOR_RESULTS.get((*call, tuple([t.key for t in arrays])))
        except (AttributeError, TypeError):
            known = None
        if known is not None and not any(t.buffer.released for t in arrays):
            results, shape, out_type, offset, strides = known
            return Tensor._made(results(), shape, out_type, offset, strides)
    else:  # hot path: numpy arrays of an earlier call's dtypes and shapes
        try:
            key = _host_key(call, arrays, out)
            plan = _HOST_CALLS.get(key)
        except TypeError:  # an unhashable argument: the full path explains
            plan = None
        if plan is not None and _separate(arrays, out) and not plan[0].closed:
            device, pieces, shape, out_dtype = plan
            flat_in = [x.reshape(-1).view(np.uint8) for x in arrays]
            result = _run_host_call(device, key, pieces, flat_in, arrays, out, shape, out_dtype)
            if result is None and out is None:
                result = _new_result(pieces, flat_in, arrays, shape, out_dtype)
            elif result is None:
                _run_pieces(pieces, flat_in, arrays, out, None)
                result = out
            return result if out is not None or result.ndim else result[()]
    for x in arrays:  # an operand traced by dmlgpu.fuse: the call becomes a node of its graph
        traced = getattr(x, "dmlgpu_traced_call", None)
        if traced is not None:
            return traced(op, arrays, out, out_dtype, feature_level)
    level = resolve_feature_level(feature_level, op.dml_name)
    row = support_row(op, level)
    given = arrays
    arrays = _operands(op, row, arrays)
    if isinstance(out, np.ndarray):
        out = _host_out(op, out)
    if any(isinstance(x, Tensor) for x in (*arrays, out)):
        return _apply_tensors(op, level, row, arrays, out, out_dtype, call)
    arrays = [np.asarray(x) for x in arrays]
    in_types = [_data_type(op, name, x.dtype, row.input_types) for name, x in zip(op.inputs, arrays)]
    if out_dtype is None:
        out_type = in_types[0]
    else:
        out_type = _data_type(op, op.output, out_dtype, row.output_types)
    try:
        shape = np.broadcast_shapes(*(x.shape for x in arrays))
    except ValueError:
        _fail(op, op.inputs[1], "shape", arrays[1].shape,
              f"must broadcast with {op.inputs[0]}'s shape {arrays[0].shape}")
    in_place = _check_out(op, out, out_type, shape, arrays)
    count = int(np.prod(shape, dtype=np.float64))
    if count > MAX_ELEMENTS:
        _fail(op, op.output, "shape", tuple(shape),
              f"a tensor may hold at most 2^32-1 elements, not {count}")

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
    desc = DESC_CLASSES[op.name](*tensors)
    device = default_device()
    compiled = device.create_operator(desc, level)  # validates the whole call before any work

    direct = out is not None and out.flags.c_contiguous and out.dtype.isnative
    pieces = [] if empty else _pieces(compiled)
    key = _host_key(call, given, out)
    if key is not None and in_place is None and _separate(given, out):  # the call can repeat as is
        if len(_HOST_CALLS) >= 256:
            _HOST_CALLS.clear()
        _HOST_CALLS[key] = (device, pieces, tuple(shape), out_type.numpy)
    if out is None:
        result = _new_result(pieces, memories, arrays, tuple(shape), out_type.numpy)
        return result[()] if result.ndim == 0 else result
    result = out if direct else np.empty(shape, dtype=out_type.numpy)
    _run_pieces(pieces, memories, arrays, result, in_place)
    if not direct:
        np.copyto(out, result, casting="equiv")
    return out


def _operands(op, row, arrays) -> list:
    """The operands as Tensors or numpy data (native byte order, plain ndarrays), Python scalars
    converted to the data type of the first other operand (NEP 50: `dmlgpu.operands`)."""
    converted, seen = [], {}
    for name, x in zip(op.inputs, arrays):
        if not (isinstance(x, (Tensor, np.ndarray, np.generic)) or is_python_scalar(x)):
            _fail(op, name, "type", type(x).__name__,
                  "allowed: numpy.ndarray, dmlgpu.Tensor or a Python scalar")
        if id(x) not in seen:  # the same array twice stays one array (uploaded once)
            seen[id(x)] = host_array(x, op.dml_name, name)
        converted.append(seen[id(x)])
    anchor = next(((name, x) for name, x in zip(op.inputs, converted) if not is_python_scalar(x)), None)
    if anchor is None:
        _fail(op, op.inputs[0], "type", type(arrays[0]).__name__,
              "allowed: numpy.ndarray or dmlgpu.Tensor (a Python scalar takes its data type from "
              "an array or Tensor operand, and there is none)")
    if len(converted) == 1:
        return converted
    data_type = _data_type(op, anchor[0], anchor[1].dtype, row.input_types)
    return [python_scalar(x, data_type, op.dml_name, name) if is_python_scalar(x) else x
            for name, x in zip(op.inputs, converted)]


def _host_out(op, out):
    """A numpy `out` that dmlgpu can honour (a plain ndarray; any byte order)."""
    if type(out) not in PLAIN_ARRAYS:
        _fail(op, op.output, "out", type(out).__name__, SUBCLASS_ALLOWED)
    return out


def _apply_tensors(op, level, row, arrays, out, out_dtype, call):
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
            _data_type(op, name, np.asarray(x).dtype, row.input_types)
            x = Tensor.from_numpy(x, device)
        tensors.append(x)
    in_types = [_data_type(op, name, t.dtype, row.input_types) for name, t in zip(op.inputs, tensors)]
    out_type = in_types[0] if out_dtype is None else _data_type(op, op.output, out_dtype, row.output_types)
    try:
        shape = np.broadcast_shapes(*(t.shape for t in tensors))
    except ValueError:
        _fail(op, op.inputs[1], "shape", tensors[1].shape,
              f"must broadcast with {op.inputs[0]}'s shape {tensors[0].shape}")
    given = out is not None
    if given:
        if not isinstance(out, Tensor):
            _fail(op, op.output, "out", type(out).__name__, "allowed: None or a dmlgpu.Tensor")
        if out.data_type != out_type or out.shape != tuple(shape):
            _fail(op, op.output, "out", f"{out.shape} {out.data_type.name}",
                  f"allowed: shape {tuple(shape)} and data type {out_type.name}")
    if 0 in shape:  # nothing to bind
        return out if given else Tensor.empty(shape, out_type.numpy, device)
    if given and out.offset % MINIMUM_BUFFER_TENSOR_ALIGNMENT:
        _fail(op, op.output, "out", f"a view starting at byte {out.offset} of its buffer",
              f"allowed: a Tensor starting at a multiple of {MINIMUM_BUFFER_TENSOR_ALIGNMENT} bytes "
              "(DirectML's binding alignment)")
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
        out = Tensor._made(buffer, tuple(shape), out_type, half * out_type.size)
        sizes = [2] + sizes
        strides = [[k] + st for k, st in zip(shifts, strides)]
        out_strides = (half,) + out_strides
        out_start = 0
    else:
        if not given:  # every element is written: no need to zero-fill
            nbytes = max(4, -(-int(np.prod(shape, dtype=np.int64)) * out_type.size // 4) * 4)
            out = Tensor._made(device.allocate(nbytes, zero_fill=False), tuple(shape), out_type)
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
    launch = compiled.launch(ranges)
    compiled.enqueue(launch)
    if all(x is t for x, t in zip(arrays, tensors)):  # Tensors only: the call can repeat as is
        if len(_TENSOR_CALLS) >= 256:
            _TENSOR_CALLS.clear()
        _TENSOR_CALLS[(*call, tuple(t.key for t in (*tensors, out)))] = launch
        if not given and ranges[-1].start == 0:
            if len(_TENSOR_RESULTS) >= 256:
                _TENSOR_RESULTS.clear()
            _TENSOR_RESULTS[(*call, tuple(t.key for t in tensors))] = (
                compiled.results(launch, ranges[-1].end), out.shape, out.data_type, out.offset, out.strides)
    return out


def _host_key(call, arrays, out):
    """The memo key of a call whose operands are C-contiguous native numpy arrays (and `out`
    one too, or None), on the current default device; None for any other call.

    Such a call is decided by its arrays' dtypes and shapes (and which operands are the same
    array): the same validated operator and pieces serve every call with that key."""
    parts = []
    for x, first in zip(arrays, _firsts(arrays)):
        if type(x) is not np.ndarray or not x.flags.c_contiguous or not x.dtype.isnative:
            return None
        parts.append((x.dtype, x.shape, first))
    if out is not None:
        if type(out) is not np.ndarray or not out.flags.c_contiguous or not out.dtype.isnative:
            return None
        parts.append((out.dtype, out.shape))
    device = default_device()  # its buffer limit decides the pieces
    return (*call, device, device.max_buffer_size, *parts)


def _firsts(arrays) -> list[int]:
    """For each operand, the index of the first operand that is the very same array (its own
    index unless it repeats one): the same array passed twice is uploaded once."""
    return [next(j for j in range(i + 1) if arrays[j] is x) for i, x in enumerate(arrays)]


def _separate(arrays, out) -> bool:
    """`out` (if any) is writeable and shares no memory with any input: neither in place nor a
    partial overlap, which the full path decides."""
    if out is None:
        return True
    return out.flags.writeable and not any(np.may_share_memory(out, x) for x in arrays)


#: (operator, level and dtype as given, device, its buffer limit, numpy operands' dtypes and
#: shapes, out's) ->
#: (device, pieces, result shape, result dtype): a call on numpy data of a known kind is not validated again.
_HOST_CALLS: dict = {}
#: The same keys -> (the operands uploaded, those not repeating an earlier one; the pieces such
#: a call runs as through the device's host calls, each with its `make_launch`).
_HOST_PARTS: dict = {}
#: (operator, level as given, dtype as given, tensors) -> the prepared dispatch (holds no memory).
_TENSOR_CALLS: dict = {}
#: (operator, level as given, dtype as given, input Tensors) -> (runtime.Results making each new
#: result, its shape, data type, offset and strides): a new result needs no validation again.
_TENSOR_RESULTS: dict = {}


def _check_out(op, out, out_type, shape, arrays) -> int | None:
    """Check `out`; returns the index of the input it aliases exactly (in place), else None."""
    if out is None:
        return None
    if not isinstance(out, np.ndarray):
        _fail(op, op.output, "out", type(out).__name__, "allowed: None or a numpy.ndarray")
    if native_dtype(out.dtype) != out_type.numpy:
        _fail(op, op.output, "out.dtype", out.dtype, f"allowed: {out_type.numpy.name}")
    if out.shape != tuple(shape):
        _fail(op, op.output, "out.shape", out.shape, f"allowed: {tuple(shape)}")
    if not out.flags.writeable:
        _fail(op, op.output, "out", "a read-only array", "allowed: a writeable array")
    in_place = None
    for index, x in enumerate(arrays):  # every input: out may alias one exactly, none partially
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


def _broadcast_strides(shape, target, strides=None):
    """Element strides of an array of `shape` (packed unless `strides` are given) seen with
    numpy broadcasting as `target`."""
    if strides is None:
        strides = packed_strides(shape)
    lead = len(target) - len(shape)
    return [0 if d < lead or (shape[d - lead] == 1 and target[d] != 1) else strides[d - lead]
            for d in range(len(target))]


#: A strided view is sent as the memory it spans unless that is this many times its own bytes.
_MAX_SPAN_RATIO = 4


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


def _pieces(whole, limit: int | None = None) -> list:
    """How compiled operator `whole` runs over numpy data: pieces whose every binding fits one
    device buffer, or `limit` bytes (one piece, `whole` itself, when the data fits), each as
    (compiled operator, bytes per binding, byte offset per input, output byte offset, output
    bytes it lands)."""
    device, desc = whole.device, whole.desc
    tensors = list(desc.tensor_descs().values())
    itemsizes = [t.data_type.size for t in tensors]
    strides = [t.effective_strides for t in tensors]
    pieces = []
    for offsets, sizes in _chunks(tensors[-1].sizes, strides, itemsizes, limit or device.max_buffer_size):
        if tuple(sizes) == tensors[-1].sizes:
            compiled, sub = whole, tensors
        else:
            sub = [TensorDesc(t.data_type, sizes, t.strides) for t in tensors]
            compiled = device.create_operator(type(desc)(*sub), whole.feature_level)
        starts = [o * n for o, n in zip(offsets, itemsizes)]
        pieces.append((compiled, [t.minimum_size for t in sub], starts[:-1], starts[-1],
                       _extent(sizes, strides[-1]) * itemsizes[-1]))
    return pieces


def _run_pieces(pieces, flat_in, arrays, result, in_place) -> None:
    """Run `pieces` (from `_pieces`) over numpy data.

    `flat_in` holds each input's bytes as the descriptor addresses them; `arrays` are the
    caller's inputs (the same array passed twice is uploaded once). Each piece is uploaded,
    queued and read straight into `result`; the runtime overlaps the copies with the work.
    """
    flat_out = result.reshape(-1).view(np.uint8)
    for piece in pieces:
        *_, out_start, extent = piece
        buffers, out = _launch_piece(piece, flat_in, arrays, in_place)
        out.read(0, extent, out=flat_out[out_start:out_start + extent])
        _release(buffers, out)


def _new_result(pieces, flat_in, arrays, shape, dtype) -> np.ndarray:
    """Run `pieces` into a new array of `shape` and `dtype`.

    Where the device's memory is the host's (lavapipe, integrated GPUs: `Device.mapped`), a
    result computed in one piece is the very buffer the kernel wrote, handed over to numpy
    (`Device.hand_over`): no download and no fresh host pages to fault in.
    """
    nbytes = math.prod(shape) * dtype.itemsize
    if len(pieces) == 1 and pieces[0][0].device.mapped and pieces[0][3:] == (0, nbytes):
        buffers, out = _launch_piece(pieces[0], flat_in, arrays, None)
        _release(buffers, None)
        return out.device.hand_over(out, nbytes).view(dtype).reshape(shape)
    result = np.empty(shape, dtype=dtype)
    _run_pieces(pieces, flat_in, arrays, result, None)
    return result


def _launch_piece(piece, flat_in, arrays, in_place):
    """Upload one piece's inputs and queue its operator; returns (input buffers, output buffer)."""
    compiled, nbytes, in_starts, _, _ = piece
    device = compiled.device
    buffers = []
    for i, (data, first) in enumerate(zip(flat_in, _firsts(arrays))):
        if first != i:
            buffers.append(buffers[first])
            continue
        start = in_starts[i]
        buffers.append(device.upload(data[start:start + nbytes[i]]))
    out = buffers[in_place] if in_place is not None else device.allocate(nbytes[-1], zero_fill=False)
    compiled.execute([Binding(b) for b in buffers], [Binding(out)])
    return buffers, out


def _release(buffers, out) -> None:
    """Free a piece's buffers (`out` too unless None), newest first: the pool hands the next
    call the same blocks."""
    every = (*buffers, out) if out is not None else buffers
    for buffer in reversed({id(b): b for b in every}.values()):
        buffer.release()


def _run_host_call(device, key, pieces, flat_in, arrays, out, shape, dtype):
    """Run a repeated one-piece call through the device's kept host calls for it (their
    memory and command buffers made once; two, overlapped, where the runtime splits the call:
    `Device.host_call_pieces`) into `out`, or a new array of `shape` and `dtype` when `out` is
    None; returns the result, or None where there are none (large or split calls, another
    thread running them) and the caller runs the pieces itself."""
    if len(pieces) != 1:
        return None
    plan = _HOST_PARTS.get(key)
    if plan is None:
        if len(_HOST_PARTS) >= 256:
            _HOST_PARTS.clear()
        firsts = _firsts(arrays)  # which operands are the same array: part of `key`
        unique = [i for i, first in enumerate(firsts) if first == i]
        plan = _HOST_PARTS[key] = unique, [(part, _launcher(part[0], firsts, unique))
                                           for part in _host_parts(device, pieces[0], firsts)]
    unique, parts = plan
    if not parts:
        return None
    result = None
    calls, inputs, outs = [], [], []
    for index, ((_, nbytes, in_starts, out_start, extent), make_launch) in enumerate(parts):
        call = device.host_call((key, index), [nbytes[i] for i in unique], nbytes[-1], make_launch)
        if call is None:
            return None
        if result is None:
            result = out if out is not None else np.empty(shape, dtype=dtype)
            flat_out = result.reshape(-1).view(np.uint8)
        calls.append(call)
        inputs.append([flat_in[i][in_starts[i]:in_starts[i] + nbytes[i]] for i in unique])
        outs.append(flat_out[out_start:out_start + extent])
    return result if device.run_host_calls(calls, inputs, outs) else None


def _host_parts(device, whole, firsts) -> list:
    """The pieces a one-piece call runs as through host calls: none for a call too large for
    them, `whole` alone, or its halves where the runtime splits a call of its size (two or
    three pieces, by its outermost rows)."""
    _, nbytes, _, _, _ = whole
    moved = sum(n for i, n in enumerate(nbytes[:-1]) if firsts[i] == i) + nbytes[-1]
    count = device.host_call_pieces(moved)
    if count < 2:
        return [whole] * count
    try:
        parts = _pieces(whole[0], -(-max(nbytes) // 2) + 16)  # + an element: odd counts halve
    except ValidationError:  # a half DirectML would not take: the whole, as one call
        return [whole]
    return parts if 2 <= len(parts) <= 3 else [whole]


def _launcher(compiled, firsts, unique):
    """`make_launch` for a host call of `compiled`: its dispatch over the call's buffers."""
    def make_launch(inputs, output):
        bindings = [Binding(inputs[unique.index(first)]) for first in firsts]
        return compiled.launch(compiled.check(bindings, [Binding(output)]))
    return make_launch


def _extent(sizes, strides) -> int:
    """Elements from the first to one past the last element."""
    return sum((s - 1) * st for s, st in zip(sizes, strides)) + 1


def _chunks(sizes, strides, itemsizes, limit, base=None):
    """Yield (element offset per tensor, sub-sizes) pieces whose spans fit in `limit` bytes.

    Splits the outermost dimension into runs of rows; when one row is still too large it
    recurses into the row. Broadcast (zero-stride) dimensions reuse the same bytes.
    """
    base = base or [0] * len(strides)
    sizes = tuple(sizes)
    spans = [_extent(sizes, st) * isz for st, isz in zip(strides, itemsizes)]
    if all(span <= limit for span in spans):
        yield base, sizes
        return
    rest, outer = sizes[1:], sizes[0]
    rows = outer
    for st, isz in zip(strides, itemsizes):
        inner = _extent(rest, st[1:]) * isz
        if st[0] and inner <= limit:
            rows = min(rows, (limit - inner) // (st[0] * isz) + 1)
        elif inner > limit:
            rows = 0
    if rows >= 1:
        for r0 in range(0, outer, rows):
            n = min(rows, outer - r0)
            yield [b + r0 * st[0] for b, st in zip(base, strides)], (n,) + rest
        return
    for r0 in range(outer):
        row_base = [b + r0 * st[0] for b, st in zip(base, strides)]
        for offsets, sub in _chunks(rest, [st[1:] for st in strides], itemsizes, limit, row_base):
            yield offsets, (1,) + tuple(sub)


# =============================================================================================
# The public functions and Tensor's operators, made from the table
# =============================================================================================
#: Operand names by operator arity.
_OPERANDS = {1: ("x",), 2: ("a", "b")}


def _output_dtype(op: Operator, out, dtype):
    """The output dtype of an operator whose output types are listed apart: `dtype` if given,
    else `out`'s, else the row's default."""
    if dtype is not None:
        return dtype
    if isinstance(out, (np.ndarray, Tensor)):
        return out.dtype
    return op.default_output.numpy


def _docstring(op: Operator) -> str:
    """Google-style docstring from the row: its text, DirectML's tables, the argument rules."""
    def paragraph(text, indent=""):
        return textwrap.fill(text, 96, initial_indent=indent, subsequent_indent=indent + "    " if indent else "")

    summary, _, notes = op.doc.partition("\n\n")
    operands = _OPERANDS[len(op.inputs)]
    parts = [f"{summary[:-1]} (DML_{op.name})."]
    if notes:
        parts.append(paragraph(notes))
    if op.masks_shift_amount:
        parts.append(paragraph(
            f"Shift amounts are taken modulo the element width, `{operands[-1]} & (bits - 1)` (8-bit amounts "
            "by 7, 16-bit by 15, 32-bit by 31, 64-bit by 63), as DirectML does; numpy gives 0 for amounts at "
            "or above the width."))
    tables = "DirectML's tables: " + "; ".join(level_texts(op)) + "."
    if len(operands) == 1:
        args = [paragraph(f"x: numpy array (or dmlgpu.Tensor). {tables}", "    ")]
    else:
        args = [paragraph(f"{', '.join(operands)}: numpy arrays (or dmlgpu.Tensors) of one dtype (DirectML "
                          f"does not promote) whose shapes broadcast with numpy's rules; either may be a Python "
                          f"int, float or bool, which takes the other's dtype (NEP 50). {tables}", "    ")]
    if op.in_place:
        in_place = " or ".join(f"`out={name}`" for name in operands) + " runs in place."
    else:
        in_place = f"never an input (DirectML does not allow {op.name} in place)."
    args.append(paragraph(f"out: optional array of the result's dtype and shape; {in_place}", "    "))
    if not op.same_type:
        names = " or ".join(t.numpy.name for t in op.newest.output_types)
        args.append(paragraph(f"dtype: the output dtype, {names}; None: `out`'s dtype, else "
                              f"{op.default_output.numpy.name} (DirectMLX's default). Given with `out`, they "
                              "must agree.", "    "))
    args.append(paragraph("feature_level: a `FeatureLevel` (or its value); None means the newest. Dimensions "
                          "beyond the level's are merged where contiguous; missing ones are added as 1s.", "    "))
    parts += ["Args:\n" + "\n".join(args),
              "Returns:\n    A new array (a Tensor when an operand is a Tensor), or `out`.",
              "Raises:\n" + paragraph("ValidationError: a dtype, shape, `out` or level that DirectML does not "
                                       "allow, a Python scalar that does not fit, or an ndarray subclass "
                                       "(masked array, matrix); nothing runs.", "    ")]
    return "\n\n".join(parts)


def _function(op: Operator):
    """The front-end function of `op`, with a real signature: `(x, out=None, *,
    feature_level=None)` or `(a, b, out=None, *, feature_level=None)`, with a keyword-only
    `dtype=None` before `feature_level` when the output types are listed apart."""
    operands = ", ".join(_OPERANDS[len(op.inputs)])
    typed = not op.same_type
    source = (f"def {op.short}({operands}, out=None, *, {'dtype=None, ' if typed else ''}feature_level=None):\n"
              f"    return _apply(_OP, ({operands},), out, "
              f"{'_output_dtype(_OP, out, dtype)' if typed else 'None'}, feature_level)\n")
    namespace = {"__name__": __name__, "_apply": _apply, "_output_dtype": _output_dtype, "_OP": op}
    exec(compile(source, f"<dmlgpu front end: {op.short}>", "exec"), namespace)
    function = namespace[op.short]
    function.__doc__ = _docstring(op)
    return function


def _tensor_methods(function, arity: int) -> dict:
    """Tensor's methods for a Python operator: `__op__`, plus `__rop__` and `__iop__` for binary ones."""
    if arity == 1:
        return {"": lambda self: function(self)}
    return {"": lambda self, other: function(self, other),
            "r": lambda self, other: function(other, self),
            "i": lambda self, other: function(self, other, out=self)}


#: Operator short name -> public function.
FUNCTIONS = {op.short: _function(op) for op in OPERATORS}
globals().update(FUNCTIONS)
__all__ = list(FUNCTIONS)
def _install_tensor_operators() -> None:
    """Tensor's Python operators, from each row's `python_operator` ("xor": `t ^ u`, `u ^ t`, `t ^= u`)."""
    for op in OPERATORS:
        if op.python_operator:
            for prefix, method in _tensor_methods(FUNCTIONS[op.short], len(op.inputs)).items():
                method.__name__ = f"__{prefix}{op.python_operator}__"
                method.__qualname__ = f"Tensor.{method.__name__}"
                method.__doc__ = f"`{op.short}` as a Python operator."
                setattr(Tensor, method.__name__, method)


_install_tensor_operators()
tensor_module.install_front_end(_apply)
