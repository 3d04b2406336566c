"""Running a validated call over numpy data: in pieces that each fit one device buffer.

`pieces` cuts a compiled operator's tensors into runs of rows (recursing into a row that is
still too large; broadcast dimensions reuse the same bytes); `run` uploads each piece, queues it
and reads its result straight into the caller's array; `new_result` does the same into a fresh
array, or hands the device's own buffer over where the device's memory is the host's;
`run_host_call` runs a repeated one-piece call through the device's kept host calls.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import memo
from ..describe.bindings import Binding
from ..errors import ValidationError
from ..describe.tensor_desc import TensorDesc
from .views import extent

__all__ = ["Piece", "firsts", "new_result", "pieces", "run", "run_host_call"]


class Piece(NamedTuple):
    """One piece of a call over numpy data."""
    compiled: object          #: the compiled operator of this piece
    nbytes: list              #: bytes per binding (inputs, then the output)
    in_starts: list           #: byte offset of each input's first byte in its flat data
    out_start: int            #: byte offset of the piece's result in the flat result
    extent: int               #: bytes of the result the piece lands


def firsts(arrays) -> list[int]:
    """For each operand, the index of the first operand that is the very same array (its own
    index unless it repeats one): the same array passed twice is uploaded once."""
    return [next(j for j in range(i + 1) if arrays[j] is x) for i, x in enumerate(arrays)]


def pieces(whole, limit: int | None = None) -> list[Piece]:
    """How compiled operator `whole` runs over numpy data: pieces whose every binding fits one
    device buffer, or `limit` bytes (one piece, `whole` itself, when the data fits)."""
    device, desc = whole.device, whole.desc
    tensors = list(desc.tensor_descs().values())
    itemsizes = [t.data_type.size for t in tensors]
    strides = [t.effective_strides for t in tensors]
    found = []
    for offsets, sizes in _chunks(tensors[-1].sizes, strides, itemsizes, limit or device.max_buffer_size):
        if tuple(sizes) == tensors[-1].sizes:
            compiled, sub = whole, tensors
        else:
            sub = [TensorDesc(t.data_type, sizes, t.strides) for t in tensors]
            compiled = device.create_operator(type(desc)(*sub), whole.feature_level)
        starts = [o * n for o, n in zip(offsets, itemsizes)]
        found.append(Piece(compiled, [t.minimum_size for t in sub], starts[:-1], starts[-1],
                           extent(sizes, strides[-1]) * itemsizes[-1]))
    return found


def run(plan_pieces, flat_in, arrays, result, in_place) -> None:
    """Run `plan_pieces` over numpy data into `result`.

    `flat_in` holds each input's bytes as the descriptor addresses them; `arrays` are the
    caller's inputs (the same array passed twice is uploaded once). Each piece is uploaded,
    queued and read straight into `result`; the runtime overlaps the copies with the work.
    """
    flat_out = result.reshape(-1).view(np.uint8)
    for piece in plan_pieces:
        buffers, out = _launch(piece, flat_in, arrays, in_place)
        out.read(0, piece.extent, out=flat_out[piece.out_start:piece.out_start + piece.extent])
        _release(buffers, out)


def new_result(plan_pieces, flat_in, arrays, shape, dtype) -> np.ndarray:
    """Run `plan_pieces` into a new array of `shape` and `dtype`.

    Where the device's memory is the host's (lavapipe, integrated GPUs: `Device.mapped`), a
    result computed in one piece is the very buffer the kernel wrote, handed over to numpy
    (`Device.hand_over`): no download and no fresh host pages to fault in.
    """
    nbytes = math.prod(shape) * dtype.itemsize
    if len(plan_pieces) == 1 and plan_pieces[0].compiled.device.mapped \
            and plan_pieces[0][3:] == (0, nbytes):
        buffers, out = _launch(plan_pieces[0], flat_in, arrays, None)
        _release(buffers, None)
        return out.device.hand_over(out, nbytes).view(dtype).reshape(shape)
    result = np.empty(shape, dtype=dtype)
    run(plan_pieces, flat_in, arrays, result, None)
    return result


def _launch(piece: Piece, flat_in, arrays, in_place):
    """Upload one piece's inputs and queue its operator; returns (input buffers, output buffer)."""
    compiled, nbytes, in_starts = piece.compiled, piece.nbytes, piece.in_starts
    device = compiled.device
    buffers = []
    for i, (data, first) in enumerate(zip(flat_in, firsts(arrays))):
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


def run_host_call(device, key, plan_pieces, flat_in, arrays, out, shape, dtype):
    """Run a repeated one-piece call through the device's kept host calls for it (their
    memory and command buffers made once; two, overlapped, where the runtime splits the call:
    `Device.host_call_pieces`) into `out`, or a new array of `shape` and `dtype` when `out` is
    None; returns the result, or None where there are none (large or split calls, another
    thread running them) and the caller runs the pieces itself."""
    if len(plan_pieces) != 1:
        return None
    plan = memo.HOST_PARTS.get(key)
    if plan is None:
        repeats = firsts(arrays)  # which operands are the same array: part of `key`
        unique = [i for i, first in enumerate(repeats) if first == i]
        plan = unique, [(part, _launcher(part.compiled, repeats, unique))
                        for part in _host_parts(device, plan_pieces[0], repeats)]
        memo.HOST_PARTS[key] = plan
    unique, parts = plan
    if not parts:
        return None
    result = None
    calls, inputs, outs = [], [], []
    for index, (part, make_launch) in enumerate(parts):
        nbytes, in_starts = part.nbytes, part.in_starts
        call = device.host_call((key, index), [nbytes[i] for i in unique], nbytes[-1], make_launch)
        if call is None:
            return None
        if result is None:
            result = out if out is not None else np.empty(shape, dtype=dtype)
            flat_out = result.reshape(-1).view(np.uint8)
        calls.append(call)
        inputs.append([flat_in[i][in_starts[i]:in_starts[i] + nbytes[i]] for i in unique])
        outs.append(flat_out[part.out_start:part.out_start + part.extent])
    return result if device.run_host_calls(calls, inputs, outs) else None


def _host_parts(device, whole: Piece, repeats) -> list[Piece]:
    """The pieces a one-piece call runs as through host calls: none for a call too large for
    them, `whole` alone, or its halves where the runtime splits a call of its size (two or
    three pieces, by its outermost rows)."""
    nbytes = whole.nbytes
    moved = sum(n for i, n in enumerate(nbytes[:-1]) if repeats[i] == i) + nbytes[-1]
    count = device.host_call_pieces(moved)
    if count < 2:
        return [whole] * count
    try:
        parts = pieces(whole.compiled, -(-max(nbytes) // 2) + 16)  # + an element: odd counts halve
    except ValidationError:  # a half DirectML would not take: the whole, as one call
        return [whole]
    return parts if 2 <= len(parts) <= 3 else [whole]


def _launcher(compiled, repeats, unique):
    """`make_launch` for a host call of `compiled`: its dispatch over the call's buffers."""
    def make_launch(inputs, output):
        bindings = [Binding(inputs[unique.index(first)]) for first in repeats]
        return compiled.launch(compiled.check(bindings, [Binding(output)]))
    return make_launch


def _chunks(sizes, strides, itemsizes, limit, base=None):
    """Yield (element offset per tensor, sub-sizes) pieces whose spans fit in `limit` bytes.

    Splits the outermost dimension into runs of rows; when one row is still too large it
    recurses into the row. Broadcast (zero-stride) dimensions reuse the same bytes.
    """
    base = base or [0] * len(strides)
    sizes = tuple(sizes)
    spans = [extent(sizes, st) * isz for st, isz in zip(strides, itemsizes)]
    if all(span <= limit for span in spans):
        yield base, sizes
        return
    rest, outer = sizes[1:], sizes[0]
    rows = outer
    for st, isz in zip(strides, itemsizes):
        inner = extent(rest, st[1:]) * isz
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
