"""Calls over memory that spans several buffers (`dmlgpu.layout.pieces`), planned once into steps.

A call of an element-wise operator whose views (or whose new result) span several buffers is
validated whole and cut into chunks of the result whose every view lies in one buffer: runs of
whole rows (packed data: a chunk per buffer), bands of rows split into blocks of columns (a
transpose: a chunk per band and buffer), else pieces of single rows; output chunks start at
16-byte boundaries where the layouts allow. Each chunk becomes `Step`s: a compiled operator
and where each of its bindings lies (an operand's piece, a temporary, a zero). DirectML binds
at 16-byte multiples: an input chunk that does not start at one of its piece is first copied
into a packed temporary (bound from the byte below with one more dimension of size 2 whose
stride is its element offset, its second half the copy); an output chunk that does not is
bound from the byte below and written from its element offset by the strided kernel
(`Step.out_shift`). A call whose `out` alone starts off a boundary (one buffer) runs here too.

`plan` keeps each `Plan` in `memo.TENSOR_SPANS`, keyed by the operator, the level, the data
types and the views' layouts (offsets, shapes, strides, where their buffers begin, which share
memory), so a repeated call plans nothing: `dmlgpu.front.resident` runs a plan's steps eagerly, a
`CommandList` records them (the same steps, so the same bits).
"""
from __future__ import annotations
from ..describe.shapes import coalesce, extent, fit_dimensions  # noqa: F401 (re-exported)

import bisect
import math
from typing import NamedTuple

from ..layout import memo, pieces
from ..describe.bindings import Binding
from ..describe.operator_descs import DESC_CLASSES
from ..errors import ValidationError
from ..table.operators import BIT_XOR
from ..layout.pieces import Pieces
from ..describe.tensor_desc import MINIMUM_BUFFER_TENSOR_ALIGNMENT, TensorDesc, packed_strides
from ..describe.validation import support_row, validate
from ..layout.views import View

__all__ = ["Plan", "Step", "allocate_result", "bindings", "fit_dimensions", "plan", "run", "temporaries"]

_ALIGN = MINIMUM_BUFFER_TENSOR_ALIGNMENT
#: Kinds of a step's binding source: an operand's view (its piece, or its buffer), a
#: temporary of the plan, the plan's zero (the second operand of a copy: XOR with zero).
VIEW, TEMP, ZERO = "view", "temp", "zero"
#: Bytes of the zero every copy of a plan reads (one element of any data type, broadcast).
_ZERO_BYTES = 16




class Step(NamedTuple):
    """One dispatch of a plan: `compiled` over bindings whose sources are, in the descriptor's
    order, (kind, index, piece, byte start, bytes): kind VIEW names operand `index` (the output
    is last) and `piece` its buffer in its Pieces (None: its own Buffer); TEMP names the plan's
    temporary `index`; ZERO the plan's zero. The output is written from `out_shift` elements
    after its binding's start (`CompiledOperator.launch`)."""

    compiled: object
    sources: tuple
    out_shift: int = 0


class Plan(NamedTuple):
    """A spanning call's steps, in order, and what each execution allocates: `temps` (bytes of
    each temporary), `zero` (whether a zero-filled buffer is read), and for a new result
    `cuts` (where its buffers begin; one: a single Buffer) of `nbytes`."""

    steps: tuple
    temps: tuple
    zero: bool
    cuts: tuple | None
    nbytes: int


def _spans_meet(a: View, b: View) -> bool:
    """Whether the byte ranges two views span meet."""
    a_end = a.offset + extent(a.shape, a.strides) * a.itemsize
    b_end = b.offset + extent(b.shape, b.strides) * b.itemsize
    return a.offset < b_end and b.offset < a_end


def _layout_key(views) -> tuple:
    """What a plan depends on in each view: its layout, where its buffers begin, which views
    share memory (the output last; None for a new result)."""
    keys = []
    for v in views:
        if v is None:
            keys.append(None)
            continue
        memory = v.buffer
        shared = next(k for k, w in enumerate(views) if w is not None and w.buffer is memory)
        starts = (tuple(memory.starts), memory.size_in_bytes) if isinstance(memory, Pieces) else None
        keys.append((starts, shared, v.offset, v.shape, v.strides, v.data_type))
    return tuple(keys)


def plan(op, level, row, views, in_types, out_type, shape, broadcast) -> Plan:
    """The steps of one call over `views` (inputs, then the output or None for a new result),
    each input seen as the result's `shape` through `broadcast` strides (one list per input);
    planned once per layout (`memo.TENSOR_SPANS`).

    Raises:
        ValidationError: the call as a whole breaks DirectML's rules, or an output overlaps an
            input other than in place (nothing planned, nothing run).
    """
    device = views[0].device
    key = (op.name, level, out_type, device, device.max_buffer_size, _layout_key(views),
           tuple(map(tuple, broadcast)))
    found = memo.TENSOR_SPANS.get(key)
    if found is None:
        found = _plan(op, level, row, views, in_types, out_type, shape, broadcast)
        memo.TENSOR_SPANS[key] = found
    return found


def _plan(op, level, row, views, in_types, out_type, shape, broadcast) -> Plan:
    *tensors, out = views
    device = tensors[0].device
    if out is not None:
        for name, t in zip(op.inputs, tensors):
            if t.buffer is not out.buffer or not _spans_meet(t, out):
                continue
            if (t.offset, t.shape, t.strides, t.itemsize) != (out.offset, out.shape, out.strides, out.itemsize):
                raise ValidationError(op.dml_name, op.output, "out", f"a view overlapping {name}",
                                      "allowed: no overlap, or exactly the same elements as an input (in place)")
            if not op.in_place:
                raise ValidationError(op.dml_name, op.output, "out", f"the same memory as {name}",
                                      f"{op.dml_name} does not support in-place execution")
    strides = [list(b) for b in broadcast] + [list(packed_strides(shape) if out is None else out.strides)]
    sizes, strides = coalesce(list(shape), strides)
    whole_sizes, whole_strides = fit_dimensions(op, row, sizes, strides)
    types = in_types + [out_type]
    validate(DESC_CLASSES[op.name](*[TensorDesc(t, tuple(whole_sizes), tuple(st))
                                     for t, st in zip(types, whole_strides)]), level)
    nbytes = math.prod(shape) * out_type.size
    limit = device.max_buffer_size
    fresh = out is None  # a new result is cut where its chunks begin: each starts a buffer, or aligned in one
    itemsizes = [t.size for t in types]
    bounds = [None if v is None or not isinstance(v.buffer, Pieces) else v.buffer for v in views]
    starts = [0 if v is None else v.offset for v in views]
    cap = limit // 2 - _ALIGN
    try:  # every output run at a 16-byte boundary (vector kernels), where the layouts allow
        chunks = list(_chunks(tuple(sizes), strides, starts, itemsizes, bounds, limit if fresh else None, cap))
    except ValidationError:  # a given output's runs that cannot all start so: any that do not are
        chunks = list(_chunks(tuple(sizes), strides, starts, itemsizes, bounds, None, cap, aligned=False))  # shifted
    cuts = None
    if fresh:
        cuts, first = [], None
        for sub_sizes, at, cut in chunks:
            end = at[-1] + extent(sub_sizes, strides[-1]) * out_type.size
            if cut is False:
                continue  # a band's later block: in the band's buffer
            if cut or first is None or (at[-1] - first) % _ALIGN or end - first > limit:
                cuts.append(at[-1])
                first = at[-1]
    begins = [None if b is None else b.starts for b in bounds[:-1]]  # where each view's buffers begin
    begins.append(cuts if fresh and len(cuts) > 1 else None if bounds[-1] is None else bounds[-1].starts)
    # inputs in the output's memory: a shifted output's aligned-down binding may meet them
    shared = [out is not None and t.buffer is out.buffer for t in tensors]
    steps, temps = [], []
    for sub_sizes, at, _ in chunks:
        places = []  # (piece, start in it) per view
        for start, begin in zip(at, begins):
            if begin is None:
                places.append((None, start))
            else:
                piece = bisect.bisect_right(begin, start) - 1
                places.append((piece, start - begin[piece]))
        steps.extend(_chunk_steps(op, level, row, device, types, tuple(sub_sizes), strides, places, shared, temps))
    zero = any(s[0] == ZERO for step in steps for s in step.sources)
    return Plan(tuple(steps), tuple(temps), zero, None if cuts is None else tuple(cuts), nbytes)


def _compiled(op, level, row, device, types, sizes, strides, strided_output=False):
    """The compiled operator and its tensor descriptions over `sizes` with per-tensor `strides`."""
    sizes, strides = coalesce(list(sizes), [list(st) for st in strides])
    sizes, strides = fit_dimensions(op, row, sizes, strides)
    descs = [TensorDesc(t, tuple(sizes), tuple(st)) for t, st in zip(types, strides)]
    return device.create_operator(DESC_CLASSES[op.name](*descs), level, strided_output=strided_output), descs


def _chunk_steps(op, level, row, device, types, sizes, strides, places, shared, temps):
    """The steps of one chunk whose view k starts at `places[k]` (piece, byte in it).

    An output that does not start at a 16-byte boundary is bound from the boundary below and
    written by the strided kernel from its element offset (`Step.out_shift`). An input that
    does not start at one (or, then, that lies in the output's piece: `shared`) is first
    copied into a packed temporary (appended to `temps`): from the boundary below, with one
    more dimension of size 2 whose stride is its element offset, the copy being the second half."""
    sources, steps = [], []
    out_piece, out_start = places[-1]
    out_shift = out_start % _ALIGN // types[-1].size
    for k, (data_type, st, (piece, start)) in enumerate(zip(types[:-1], strides, places)):
        shift = start % _ALIGN // data_type.size
        if not shift and not (out_shift and shared[k] and piece == out_piece):
            sources.append((VIEW, k, piece, start))
            continue
        own = tuple(n if stride else 1 for n, stride in zip(sizes, st))  # its own elements (not broadcast)
        packed = list(packed_strides(own))
        half = -(-math.prod(own) * data_type.size // _ALIGN) * _ALIGN // data_type.size  # elements of each half
        extra = ((2,), [shift], [half]) if shift else ((), [], [])
        copier, descs = _compiled(BIT_XOR, level, support_row(BIT_XOR, level), device, [data_type] * 3,
                                  extra[0] + own, [extra[1] + list(st), [0] * (len(extra[0]) + len(own)),
                                                   extra[2] + packed])
        temps.append((2 if shift else 1) * half * data_type.size)
        steps.append(Step(copier, ((VIEW, k, piece, start - start % _ALIGN, descs[0].total_size),
                                   (ZERO, 0, None, 0, descs[1].total_size),
                                   (TEMP, len(temps) - 1, None, 0, descs[2].total_size))))
        sources.append((TEMP, len(temps) - 1, None, half * data_type.size if shift else 0))
        read = [p if stride else 0 for p, stride in zip(packed, st)]  # broadcast again where it was
        strides = [*strides[:k], read, *strides[k + 1:]]
    sources.append((VIEW, len(types) - 1, out_piece, out_start - out_start % _ALIGN))
    compiled, descs = _compiled(op, level, row, device, types, sizes, strides, bool(out_shift))
    sizes_in_bytes = [d.total_size for d in descs]
    if out_shift:  # the bytes from the boundary below to the last element (within the buffer's 4-byte end)
        written = out_start % _ALIGN + extent(descs[-1].sizes, descs[-1].effective_strides) * types[-1].size
        sizes_in_bytes[-1] = max(sizes_in_bytes[-1], -(-written // 4) * 4)
    steps.append(Step(compiled, tuple((*s, n) for s, n in zip(sources, sizes_in_bytes)), out_shift))
    return steps


def bindings(step: Step, views, temps, zero):
    """(input Bindings, output Bindings) of `step` over this execution's views, temporaries and zero."""
    bound = []
    for kind, index, piece, start, size in step.sources:
        if kind == VIEW:
            buffer = views[index].buffer
            if piece is not None:
                buffer = buffer.buffers[piece]
        else:
            buffer = temps[index] if kind == TEMP else zero
        bound.append(Binding(buffer, start, size))
    return bound[:-1], bound[-1:]


def allocate_result(planned: Plan, device):
    """Memory for a plan's new result: a Buffer, or Pieces cut where its chunks begin."""
    if len(planned.cuts) == 1:
        return device.allocate(max(4, -(-planned.nbytes // 4) * 4), zero_fill=False)
    return pieces.allocate_runs(device, planned.cuts, planned.nbytes, zero_fill=False)


def temporaries(planned: Plan, device):
    """This execution's temporaries and zero (None where the plan reads none)."""
    temps = [device.allocate(n, zero_fill=False) for n in planned.temps]
    zero = device.allocate(_ZERO_BYTES) if planned.zero else None
    return temps, zero


def run(planned: Plan, views) -> None:
    """Queue a plan's steps over `views` (the output last, made already), in order."""
    device = views[0].device
    temps, zero = temporaries(planned, device)
    for step in planned.steps:
        step.compiled.execute(*bindings(step, views, temps, zero), step.out_shift)


class _Window:
    """A new output's piece-to-be from byte `start`: at most `limit` bytes (`_chunks` bands)."""

    def __init__(self, start: int, limit: int):
        self.start, self.limit = start, limit

    def piece_start(self, byte: int) -> int:
        return self.start

    def piece_end(self, byte: int) -> int:
        return self.start + self.limit


def _chunks(sizes, strides, starts, itemsizes, bounds, fresh_limit, cap, banded=False, aligned=True):
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
            and all(span <= cap or not (s - b.piece_start(s) if b else s) % _ALIGN
                    for s, span, b in zip(starts[:-1], spans[:-1], bounds)):
        yield sizes, starts, None
        return
    if not sizes:  # one element that cannot be bound (a band's window): the caller tries otherwise
        raise ValidationError("dmlgpu", None, "layout", "an element outside its run's buffer", "allowed: none")
    outer, rest = sizes[0], sizes[1:]
    rest_strides = [st[1:] for st in strides]
    inner = [extent(rest, st) * size for st, size in zip(rest_strides, itemsizes)]
    steps = [st[0] * size for st, size in zip(strides, itemsizes)]
    align = _ALIGN
    out_bound = bounds[-1]

    def misaligned(a) -> bool:  # whether an output run starting at byte `a` cannot be bound
        if fresh_limit is not None or not aligned:
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
        if misaligned(at[-1]):  # `_plan` plans again, shifting such runs' outputs
            raise ValidationError("dmlgpu", None, "layout", "an output run off a 16-byte boundary",
                                  "allowed: runs at 16-byte boundaries of the output's buffers")
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
                blocks = list(_chunks(band_sizes, band_strides, at, itemsizes, band_bounds, None, cap, True, aligned))
            except ValidationError:  # blocks of columns whose outputs cannot start aligned
                blocks = None
            if blocks is not None:
                for k, (sub, sub_starts, _) in enumerate(blocks):
                    yield (sub[1], sub[0]) + tuple(sub[2:]), sub_starts, None if fresh_limit is None else k == 0
                row += band
                continue
        for sub, sub_starts, cut in _chunks(rest, rest_strides, at, itemsizes, bounds, fresh_limit, cap, banded,
                                            aligned):
            yield (1,) + tuple(sub), sub_starts, cut
        row += 1
