"""Operators over device-resident data: one call whose operands or output are views of device
buffers (`views.View`; users hold them as `dmlgpu.Tensor`), planned, validated and queued.

This layer sits below both callers: Tensor's Python operators and methods (`t ^ u`, `~t`,
`t.copy()`, numpy ufuncs on Tensors) and the numpy front end's functions when an operand is a
Tensor. It also holds the operand rules both share (`operands`: NEP 50 scalars, byte orders,
subclasses; `data_type`, `broadcast_shape`, `broadcast_strides`, `fit_dimensions`).

A call runs as one dispatch over the views' own layouts: inputs are bound where they lie,
broadcast through zero strides; results are new views of the class of the operands. A call
over views whose memory spans several buffers (`dmlgpu.pieces`), or whose new result would, is
validated whole and runs as one dispatch per chunk whose every view lies in one buffer: runs
of whole rows (packed data: a chunk per buffer), bands of rows split into blocks of columns (a
transpose: a chunk per band and buffer), else pieces of single rows (a dispatch each).
"""
from __future__ import annotations

import math

import numpy as np

from . import pieces
from .bindings import Binding
from .compiled import coalesce
from .descs import DESC_CLASSES
from .dtypes import DataType
from .errors import DataTypeError, ValidationError
from . import memo, operands as operand_rules
from .operators import BIT_XOR, Operator
from .tensor_desc import MINIMUM_BUFFER_TENSOR_ALIGNMENT, TensorDesc, packed_strides
from .pieces import Pieces
from .validation import resolve_feature_level, support_row, validate
from .views import View, extent

__all__ = ["apply", "broadcast_shape", "broadcast_strides", "copy", "data_type", "fail", "fit_dimensions",
           "operands", "output_dtype"]

#: (operator, level as given, dtype as given, operand keys) -> the prepared dispatch (holds no memory).
_CALLS = memo.TENSOR_CALLS
#: (operator, level as given, dtype as given, operand keys) -> (runtime.Results making each
#: new result, its class, shape, data type, offset and strides): a new result needs no validation again.
_RESULTS = memo.TENSOR_RESULTS
#: (device, dtype, bytes) -> the Buffer of a Python scalar operand: the two memos above bind it
#: (weakly), so a repeated call with the same scalar finds its dispatch still valid.
_SCALARS = memo.TENSOR_SCALARS


def fail(op, tensor, field, value, allowed):
    raise ValidationError(op.dml_name, tensor, field, value, allowed)


def data_type(op: Operator, tensor: str, dtype, allowed) -> DataType:
    """The DataType of numpy dtype `dtype` (any byte order), or DataTypeError naming `allowed`."""
    return operand_rules.data_type(dtype, op.dml_name, tensor, allowed)


def output_dtype(op: Operator, out, dtype):
    """The output dtype of an operator whose output types are listed apart: `dtype` if given,
    else `out`'s, else the row's default; None (the input's type) for same-type operators."""
    if op.same_type:
        return dtype
    if dtype is not None:
        return dtype
    if isinstance(out, (np.ndarray, View)):
        return out.dtype
    return op.default_output.numpy


def operands(op, row, arrays) -> list:
    """The operands as views or numpy data (native byte order, plain ndarrays), Python scalars
    converted to the data type of the first other operand (NEP 50: `dmlgpu.operands`)."""
    return operand_rules.convert(arrays, op.dml_name, op.inputs, row.input_types, (View,),
                                 "numpy.ndarray, dmlgpu.Tensor or a Python scalar", "numpy.ndarray or dmlgpu.Tensor")


def broadcast_shape(op, shapes) -> tuple[int, ...]:
    """numpy's broadcasting of operand shapes (any number of dimensions; numpy's own helper
    stops at 32), or ValidationError naming the operand that does not fit."""
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    result = []
    for sizes in zip(*padded):
        sized = {n for n in sizes if n != 1}
        if len(sized) > 1:
            fail(op, op.inputs[1], "shape", shapes[1], f"must broadcast with {op.inputs[0]}'s shape {shapes[0]}")
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


def fit_dimensions(op, row, sizes, strides):
    """Add leading 1s until the level's smallest dimension count; too many dims is an error."""
    lowest, highest = row.dims[0], row.dims[-1]
    if len(sizes) > highest:
        fail(op, op.output, "DimensionCount", len(sizes),
             f"allowed: {highest} after merging contiguous dimensions; these do not merge")
    pad = max(0, lowest - len(sizes))
    return [1] * pad + list(sizes), [[0] * pad + list(st) for st in strides]


def _operand_keys(arrays) -> tuple:
    """What a call's operands are found by in the memos: a view's key, a Python scalar's
    `scalar_key`; AttributeError for other operands (numpy data is never memoised here)."""
    try:
        return tuple([x.key for x in arrays])
    except AttributeError:
        return tuple([x.key if isinstance(x, View) or not operand_rules.is_python_scalar(x)
                      else operand_rules.scalar_key(x) for x in arrays])


def _scalar_buffer(device, value: np.ndarray):
    """The device buffer holding a Python scalar operand (`value`, converted), made once per
    device, data type and value while `_SCALARS` keeps it."""
    key = (device, value.dtype.str, value.tobytes())
    buffer = _SCALARS.get(key)
    if buffer is None or buffer.released:
        buffer = device.upload(value)
        _SCALARS[key] = buffer
    return buffer


def apply(op: Operator, arrays, out, out_dtype, feature_level):
    """One call of `op` where an operand or `out` is a view: the result is `out`, or a new view.

    `arrays` are the operands as given (views, numpy data, Python scalars); `out_dtype` is None
    for "the input's type" (same-type operators) or "not given". Repeated calls with the same
    views (or a new result from the same views) are found by the views' keys and not planned
    again.
    """
    call = (op.name, feature_level, out_dtype)  # the arguments as given: part of the cache key
    if isinstance(out, View):  # hot path: the same views (and Python scalars) as an earlier call
        try:
            launch = _CALLS.get((*call, (*_operand_keys(arrays), out.key)))
        except (AttributeError, TypeError):
            launch = None
        if launch is not None and launch.device.enqueue(launch):
            return out
    elif out is None:
        try:  # hot path: a new result of an earlier call's shape from the same views
            known = _RESULTS.get((*call, _operand_keys(arrays)))
        except (AttributeError, TypeError):
            known = None
        if known is not None:
            results, cls, shape, out_type, offset, strides = known
            made = results()  # None: an input was released (the general path explains)
            if made is not None:
                return cls.from_fields(made[0], shape, out_type, offset, strides)
    level = resolve_feature_level(feature_level, op.dml_name)
    row = support_row(op, level)
    given = arrays
    arrays = operands(op, row, arrays)
    return _apply_views(op, level, row, given, arrays, out, out_dtype, call)


def copy(view: View) -> View:
    """A packed copy on the same device (raw bits kept: XOR with zero)."""
    return apply(BIT_XOR, (view, 0), None, None, None)


def _apply_views(op, level, row, given, arrays, out, out_dtype, call):
    """The device-resident path: views in, a view out, no host round trip.

    numpy arrays among the inputs are uploaded first; `out` must be a view (or None) that
    starts at a 16-byte boundary. Input views that do not are bound from the aligned-down byte
    with one more dimension of size 2 whose stride is their element offset: only its second
    half is the result, so a fresh output is allocated twice (the result is its second half);
    with `out` given, such inputs are first copied to packed views.
    """
    anchor = next(x for x in (*arrays, out) if isinstance(x, View))
    make = type(anchor).from_fields
    if out is not None and not isinstance(out, View):
        fail(op, op.output, "out", type(out).__name__, "allowed: None or a dmlgpu.Tensor")
    devices = {x.device for x in (*arrays, out) if isinstance(x, View)}
    if len(devices) > 1:
        fail(op, None, "device", " and ".join(sorted(d.label for d in devices)),
             "allowed: Tensors of one device (move one with Tensor.to(device))")
    device = devices.pop()
    tensors = []
    for name, x, as_given in zip(op.inputs, arrays, given):
        if not isinstance(x, View):
            x = np.asarray(x)
            found = data_type(op, name, x.dtype, row.input_types)
            scalar = operand_rules.is_python_scalar(as_given)
            x = make(_scalar_buffer(device, x) if scalar else pieces.upload(device, x), x.shape, found)
        tensors.append(x)
    in_types = [data_type(op, name, t.dtype, row.input_types) for name, t in zip(op.inputs, tensors)]
    out_type = in_types[0] if out_dtype is None else data_type(op, op.output, out_dtype, row.output_types)
    shape = broadcast_shape(op, [t.shape for t in tensors])
    given_out = out is not None
    if given_out and (out.data_type != out_type or out.shape != shape):
        error = DataTypeError if out.data_type != out_type else ValidationError
        raise error(op.dml_name, op.output, "out", f"{out.shape} {out.data_type.name}",
                    f"allowed: shape {shape} and data type {out_type.name}")
    if 0 in shape:  # nothing to bind
        return out if given_out else make(device.allocate(4), shape, out_type)
    if given_out and out.offset % MINIMUM_BUFFER_TENSOR_ALIGNMENT:
        fail(op, op.output, "out", f"a view starting at byte {out.offset} of its buffer",
             f"allowed: a Tensor starting at a multiple of {MINIMUM_BUFFER_TENSOR_ALIGNMENT} bytes "
             "(DirectML's binding alignment)")
    count = math.prod(shape)
    shifts = [t.offset % MINIMUM_BUFFER_TENSOR_ALIGNMENT // t.itemsize for t in tensors]
    fresh_bytes = count * out_type.size  # an offset dimension doubles it (rounded to 16-byte halves)
    if any(shifts):
        fresh_bytes = 2 * -(-fresh_bytes // MINIMUM_BUFFER_TENSOR_ALIGNMENT) * MINIMUM_BUFFER_TENSOR_ALIGNMENT
    if (not given_out and fresh_bytes > device.max_buffer_size) \
            or any(isinstance(t.buffer, Pieces) for t in (*tensors, out) if t is not None):
        return _apply_pieces(op, level, row, tensors, in_types, out, out_type, shape, make)
    realign = given_out and any(shifts)  # those inputs become packed copies, once the call is valid
    strides = [broadcast_strides(t.shape, shape, None if realign and k else t.strides)
               for t, k in zip(tensors, shifts)]
    if realign:
        shifts = [0] * len(tensors)
    out_strides = packed_strides(shape)
    sizes = list(shape)
    if any(shifts):  # the offset dimension: its second half is the result
        half = -(-count * out_type.size // MINIMUM_BUFFER_TENSOR_ALIGNMENT) \
            * MINIMUM_BUFFER_TENSOR_ALIGNMENT // out_type.size
        buffer = device.allocate(2 * half * out_type.size, zero_fill=False)
        out = make(buffer, shape, out_type, half * out_type.size)
        sizes = [2] + sizes
        strides = [[k] + st for k, st in zip(shifts, strides)]
        out_strides = (half,) + out_strides
        out_start = 0
    else:
        if not given_out:  # every element is written: no need to zero-fill
            nbytes = max(4, -(-count * out_type.size // 4) * 4)
            out = make(device.allocate(nbytes, zero_fill=False), shape, out_type)
        out_start = out.offset
        out_strides = out.strides
    strides = strides + [list(out_strides)]
    sizes, strides = coalesce(sizes, strides)
    sizes, strides = fit_dimensions(op, row, sizes, strides)
    descs = [TensorDesc(t, tuple(sizes), tuple(st)) for t, st in zip(in_types + [out_type], strides)]
    compiled = device.create_operator(DESC_CLASSES[op.name](*descs), level)  # validates first
    if realign:
        tensors = [copy(t) if t.offset % MINIMUM_BUFFER_TENSOR_ALIGNMENT else t for t in tensors]
    starts = [t.offset - t.offset % MINIMUM_BUFFER_TENSOR_ALIGNMENT for t in tensors]
    bindings = ([Binding(t.buffer, start, d.total_size) for t, start, d in zip(tensors, starts, descs)],
                [Binding(out.buffer, out_start, descs[-1].total_size)])
    ranges = compiled.check(*bindings)  # hazards are checked on the bindings
    launch = compiled.launch(ranges)
    compiled.enqueue(launch)
    # Views and Python scalars only (a scalar's buffer is kept in `_SCALARS`): it can repeat as is.
    if call is not None and all(x is t or operand_rules.is_python_scalar(x) for x, t in zip(given, tensors)):
        keys = _operand_keys(given)
        _CALLS[(*call, (*keys, out.key))] = launch
        if not given_out and ranges[-1].start == 0:
            _RESULTS[(*call, keys)] = (compiled.results(launch, ranges[-1].end), type(anchor), out.shape,
                                       out.data_type, out.offset, out.strides)
    return out


def _apply_pieces(op, level, row, tensors, in_types, out, out_type, shape, make):
    """A call where a view's memory spans several buffers (`dmlgpu.pieces`), or its new result
    would: validated whole, then run as chunks of the result (runs of rows, or of one row)
    whose every view lies in one buffer and whose output starts at a 16-byte boundary, each
    an ordinary call over single-buffer views. A result of more than one buffer's bytes is
    made in Pieces."""
    device = tensors[0].device
    strides = [broadcast_strides(t.shape, shape, t.strides) for t in tensors]
    given_out = out is not None
    if given_out:
        for name, t in zip(op.inputs, tensors):
            if t.buffer is not out.buffer or not _spans_meet(t, out):
                continue
            if (t.offset, t.shape, t.strides, t.itemsize) != (out.offset, out.shape, out.strides, out.itemsize):
                fail(op, op.output, "out", f"a view overlapping {name}",
                     "allowed: no overlap, or exactly the same elements as an input (in place)")
            if not op.in_place:
                fail(op, op.output, "out", f"the same memory as {name}", f"{op.dml_name} does not support in-place execution")
    strides.append(list(packed_strides(shape) if out is None else out.strides))
    sizes, strides = coalesce(list(shape), strides)
    whole_sizes, whole_strides = fit_dimensions(op, row, sizes, strides)
    validate(DESC_CLASSES[op.name](*[TensorDesc(t, tuple(whole_sizes), tuple(st))
                                     for t, st in zip(in_types + [out_type], whole_strides)]), level)
    nbytes = math.prod(shape) * out_type.size
    limit = device.max_buffer_size
    fresh = out is None  # a new result is cut where its chunks begin: each starts a buffer, or aligned in one
    views = [*tensors, out]
    itemsizes = [t.itemsize for t in tensors] + [out_type.size]
    bounds = [None if v is None or not isinstance(v.buffer, Pieces) else v.buffer for v in views]
    starts = [0 if v is None else v.offset for v in views]
    chunks = list(_chunks(tuple(sizes), strides, starts, itemsizes, bounds, limit if fresh else None,
                          limit // 2 - MINIMUM_BUFFER_TENSOR_ALIGNMENT))
    if fresh:  # the whole plan is made before any work
        cuts, first = [], None
        for sub_sizes, at, cut in chunks:
            end = at[-1] + extent(sub_sizes, strides[-1]) * out_type.size
            if cut is False:
                continue  # a band's later block: in the band's buffer
            if cut or first is None or (at[-1] - first) % MINIMUM_BUFFER_TENSOR_ALIGNMENT or end - first > limit:
                cuts.append(at[-1])
                first = at[-1]
        memory = (device.allocate(max(4, -(-nbytes // 4) * 4), zero_fill=False) if len(cuts) == 1
                  else pieces.allocate_runs(device, cuts, nbytes, zero_fill=False))
        out = views[-1] = make(memory, shape, out_type)
    out_dtype = None if op.same_type else out_type.numpy
    for sub_sizes, starts, _ in chunks:
        subs = []
        for v, st, start, size in zip(views, strides, starts, itemsizes):
            buffer, local = v.buffer, start
            if isinstance(buffer, Pieces):
                buffer, local = buffer.piece(start, start + extent(sub_sizes, st) * size)
            subs.append(make(buffer, sub_sizes, v.data_type, local, tuple(st)))
        *ins, sub_out = subs
        _apply_views(op, level, row, ins, ins, sub_out, out_dtype, None)
    return out


def _spans_meet(a: View, b: View) -> bool:
    """Whether the byte ranges two views span meet."""
    a_end = a.offset + extent(a.shape, a.strides) * a.itemsize
    b_end = b.offset + extent(b.shape, b.strides) * b.itemsize
    return a.offset < b_end and b.offset < a_end


class _Window:
    """A new output's piece-to-be from byte `start`: at most `limit` bytes (`_chunks` bands)."""

    def __init__(self, start: int, limit: int):
        self.start, self.limit = start, limit

    def piece_start(self, byte: int) -> int:
        return self.start

    def piece_end(self, byte: int) -> int:
        return self.start + self.limit


def _chunks(sizes, strides, starts, itemsizes, bounds, fresh_limit, cap, banded=False):
    """Yield (sizes, byte start per view, cut) of runs of a call whose every view in Pieces
    (`bounds`: its Pieces, else None) lies in one piece: runs of outer rows; where a row spans
    pieces, bands of rows split along the next dimension (a transpose: blocks of columns), else
    pieces of one row. The output is the last view: given (`fresh_limit` None), every run of it
    starts at a 16-byte boundary of its buffer; new, it is cut where runs begin (`cut`: True,
    a run that must begin a buffer; False, one that must not; None, either), every run holding
    at most `fresh_limit` bytes. An input of a run that does not start at a 16-byte boundary
    spans at most `cap` bytes (it is copied first, into twice its bytes)."""
    spans = [extent(sizes, st) * size for st, size in zip(strides, itemsizes)]
    if all(b is None or s + span <= b.piece_end(s) for s, span, b in zip(starts, spans, bounds)) \
            and (fresh_limit is None or spans[-1] <= fresh_limit) \
            and all(span <= cap or not (s - b.piece_start(s) if b else s) % MINIMUM_BUFFER_TENSOR_ALIGNMENT
                    for s, span, b in zip(starts[:-1], spans[:-1], bounds)):
        yield sizes, starts, None
        return
    if not sizes:  # one element that cannot be bound (a band's window): the caller tries otherwise
        raise ValidationError("dmlgpu", None, "layout", "an element outside its run's buffer", "allowed: none")
    outer, rest = sizes[0], sizes[1:]
    rest_strides = [st[1:] for st in strides]
    inner = [extent(rest, st) * size for st, size in zip(rest_strides, itemsizes)]
    steps = [st[0] * size for st, size in zip(strides, itemsizes)]
    align = MINIMUM_BUFFER_TENSOR_ALIGNMENT
    out_bound = bounds[-1]

    def misaligned(a) -> bool:  # whether an output run starting at byte `a` cannot be bound
        if fresh_limit is not None:
            return False
        return bool((a - out_bound.piece_start(a) if out_bound else a) % align)

    def fitting(at, ends, spans) -> int:  # rows from `at` whose spans of `spans` bytes fit `ends`
        n = outer - row
        for a, step, span, end in zip(at, steps, spans, ends):
            if end is not None:
                room = end - a - span  # bytes left for the starts of further rows
                n = 0 if room < 0 else min(n, room // step + 1) if step else n
        if 0 < n < outer - row:  # the next run's output starts aligned
            while n and misaligned(at[-1] + n * steps[-1]):
                n -= 1
        return n

    row = 0
    while row < outer:
        at = [s + row * step for s, step in zip(starts, steps)]
        if misaligned(at[-1]):
            raise ValidationError("dmlgpu", None, "layout", f"output runs of {steps[-1]} bytes split where inputs "
                                  "cross buffer boundaries", "allowed: layouts whose runs between the boundaries of "
                                  "a Tensor's buffers start at 16-byte multiples of the output (DirectML's binding "
                                  "alignment), e.g. packed, broadcast, sliced, or transposed where rows divide "
                                  "the buffers evenly; nothing ran")
        ends = [None if b is None else b.piece_end(a) for a, b in zip(at, bounds)]
        for k, (a, b) in enumerate(zip(at[:-1], bounds)):  # an input bound off a 16-byte boundary is copied
            if (a - b.piece_start(a) if b else a) % align:
                ends[k] = a + cap if ends[k] is None else min(ends[k], a + cap)
        if fresh_limit is not None:
            ends[-1] = at[-1] + fresh_limit
        n = fitting(at, ends, inner)
        if n:
            yield (n,) + tuple(rest), at, None
            row += n
            continue
        band = 0 if banded or not rest else fitting(at, ends, [*itemsizes[:-1], inner[-1]])  # input columns
        if band >= 2:  # a band of rows, split along the next dimension, where its blocks can be bound
            band_sizes = (rest[0], band) + tuple(rest[1:])
            band_strides = [[st[1], st[0]] + list(st[2:]) for st in strides]
            band_bounds = bounds if fresh_limit is None else [*bounds[:-1], _Window(at[-1], fresh_limit)]
            try:
                blocks = list(_chunks(band_sizes, band_strides, at, itemsizes, band_bounds, None, cap, True))
            except ValidationError:  # blocks of columns whose outputs cannot start aligned
                blocks = None
            if blocks is not None:
                for k, (sub, sub_starts, _) in enumerate(blocks):
                    yield (sub[1], sub[0]) + tuple(sub[2:]), sub_starts, None if fresh_limit is None else k == 0
                row += band
                continue
        for sub, sub_starts, cut in _chunks(rest, rest_strides, at, itemsizes, bounds, fresh_limit, cap, banded):
            yield (1,) + tuple(sub), sub_starts, cut
        row += 1
