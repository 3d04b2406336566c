"""REDUCE and TOP_K1 over memory that spans several buffers (`dmlgpu.layout.pieces`): each piece
reduced (or selected), then the pieces' results combined.

A call's index space is taken in the kernel's order: the kept (outer) dimensions, then the walked
ones (REDUCE's Axes, TOP_K1's Axis). It is cut into boxes whose every input element, and for a
box of whole walks every output element, lies in one buffer: a fixed prefix of indices, a run
along one dimension, every index of the dimensions after it (as `span_plan` cuts element-wise
calls). A box of whole walks runs the operator's kernel over its piece and writes its outputs; a
box of part of one walk (a walk that crosses a buffer's end) writes REDUCE's chunk states or
TOP_K1's K best with their indices (candidates), and one more dispatch per such walk merges
them, in walk order (REDUCE: the states' tree of shaders/reduce.comp; TOP_K1: a second
selection over the candidates, whose positions order ties as their indices do). Pieces are
bound whole, the boxes' element offsets in their parameters.

A layout that would need more than `MAX_BOXES` boxes (walks that cross buffers at every step: a
reduction along the outer axis of data cut into rows) is first copied into a packed temporary
in the kernel's order (`span_plan`'s copy: twice the input's memory for a moment), which pieces
cut at whole walks where a walk fits a buffer.

REDUCE's floats are rounded once per output element here too, but a walk cut at pieces is cut
into other chunks than one buffer's: its last bit may differ from the same data's in one
buffer (both are as accurate; each is the same on every run).
"""
from __future__ import annotations

import math
from itertools import islice
from typing import NamedTuple

from ..describe.bindings import BoundRange
from ..describe.shapes import extent
from ..describe.tensor_desc import TensorDesc
from ..describe.validation import support_row
from ..errors import ValidationError
from ..kernels.compiled_selection import STATE_BYTES, reduce_shape, walks_across
from ..layout import pieces
from ..layout.pieces import Pieces
from ..layout.views import View
from ..table.feature_levels import FeatureLevel
from ..table.operators import BIT_XOR, REDUCE_FAMILY
from . import span_plan

__all__ = ["MAX_BOXES", "Box", "execute", "launches"]

#: Boxes a call may be cut into at most before its input is copied into the kernel's order.
MAX_BOXES = 64


class Box(NamedTuple):
    """Indices `prefix` of the dimensions before `dim`, [start, stop) along it, all after it;
    `starts`: the byte where each view's first element of the box is (its Pieces' whole)."""

    prefix: tuple
    dim: int
    start: int
    stop: int
    starts: tuple


class _Walk(NamedTuple):
    """A view in the kernel's order: its buffer, byte offset, strides, item size, and sizes
    (the input's along the kept dimensions; its own along the walked ones)."""

    buffer: object
    offset: int
    strides: tuple
    itemsize: int
    sizes: tuple


def _fits(walk: _Walk, lo: int, inner: int) -> int:
    """Bytes left in `lo`'s piece after the element range [lo, lo + inner items) (negative:
    the range leaves it); a Buffer never runs out."""
    buffer = walk.buffer
    if not isinstance(buffer, Pieces):
        return 1 << 62
    return buffer.piece_end(lo) - lo - inner * walk.itemsize


def _boxes(walks, kept: int, dim: int = 0, prefix: tuple = (), starts: tuple | None = None):
    """Yield the boxes of `walks` (the input first) from dimension `dim` on (see Box); along
    walked dimensions only the input must fit (other views are written per walk)."""
    starts = tuple(w.offset for w in walks) if starts is None else starts
    active = walks if dim < kept else walks[:1]
    size = walks[0].sizes[dim]
    a = 0
    while a < size:
        stop = size
        for walk, start in zip(active, starts):
            lo = start + a * walk.strides[dim] * walk.itemsize
            inner = extent(walk.sizes[dim + 1:], walk.strides[dim + 1:]) if dim + 1 < len(walk.sizes) else 1
            room = _fits(walk, lo, inner)
            if room < 0:
                stop = a
            elif walk.strides[dim]:
                stop = min(stop, a + 1 + room // (walk.strides[dim] * walk.itemsize))
        here = tuple(s + a * w.strides[dim] * w.itemsize for s, w in zip(starts, walks))
        if stop > a:
            yield Box(prefix, dim, a, stop, here)
            a = stop
            continue
        if dim + 1 == len(walks[0].sizes):
            raise ValidationError("dmlgpu", None, "layout", "an element across two buffers",
                                  "allowed: Pieces cut at element boundaries")
        yield from _boxes(walks, kept, dim + 1, prefix + (a,), here)
        a += 1


def _order(compiled) -> tuple[list, list]:
    """(kept dimensions, walked dimensions) of the operator, in the kernel's order."""
    descs = list(compiled.desc.tensor_descs().values())
    rank = len(descs[0].sizes)
    walked = sorted(compiled.attributes["Axes"]) if compiled.op.family == REDUCE_FAMILY \
        else [compiled.attributes["Axis"]]
    return [d for d in range(rank) if d not in walked], walked


def _walks(compiled, views, order) -> list:
    """The views in the kernel's order: the input's sizes along kept dimensions, each view's own
    along walked ones."""
    walks = []
    for view in views:
        walks.append(_Walk(view.buffer, view.offset, tuple(view.strides[d] for d in order), view.itemsize,
                           tuple(view.shape[d] for d in order)))
    return walks


def _copied(compiled, view: View, order) -> View:
    """`view` copied into a packed temporary in the kernel's order (the copy's memory held by
    the returned View)."""
    device = view.device
    shape = tuple(view.shape[d] for d in order)
    permuted = View.from_fields(view.buffer, shape, view.data_type, view.offset,
                                tuple(view.strides[d] for d in order))
    zero = View.from_fields(device.allocate(16), (1,), view.data_type, 0, (0,))
    level = FeatureLevel.newest()
    # Cut where a buffer holds whole walks (pieces.allocate: whole rows of the innermost dimensions).
    out = View.from_fields(pieces.allocate(device, shape, view.itemsize, zero_fill=False), shape, view.data_type)
    planned = span_plan.plan(BIT_XOR, level, support_row(BIT_XOR, level), [permuted, zero, out],
                             [view.data_type] * 2, view.data_type, shape, [permuted.strides, (0,) * len(shape)])
    span_plan.run(planned, [permuted, zero, out])
    return out


def _piece(buffer, byte: int):
    """(Buffer, start of its piece) holding `byte`."""
    if isinstance(buffer, Pieces):
        start = buffer.piece_start(byte)
        return buffer.buffers[buffer.starts.index(start)], start
    return buffer, 0


def _whole(buffer, byte: int) -> BoundRange:
    """The piece holding `byte`, bound whole."""
    piece, _ = _piece(buffer, byte)
    return BoundRange(piece, 0, piece.size_in_bytes)


def _descs(data_type, sizes, strides) -> TensorDesc:
    return TensorDesc(data_type, tuple(sizes), tuple(strides))


def launches(compiled, views) -> tuple[list, list]:
    """(prepared dispatches in order, buffers they need kept alive) of one execution of
    `compiled` (a CompiledSelection) over `views` (inputs, then outputs; any may span buffers)."""
    kept, walked = _order(compiled)
    order = kept + walked
    k = len(kept)
    keep = []
    walks = _walks(compiled, views, order)
    boxes = list(islice(_boxes(walks, k), MAX_BOXES + 1))
    if len(boxes) > MAX_BOXES:
        source = _copied(compiled, views[0], order)
        keep.append(source.buffer)
        walks = [_Walk(source.buffer, 0, source.strides, source.itemsize, source.shape)] + walks[1:]
        boxes = list(_boxes(walks, k))
    plan = _Plan(compiled, walks, k, boxes)
    made = plan.launches()
    return made, keep + plan.keep


class _Plan:
    """The dispatches of one spanning execution over `walks` (the kernel's order) cut into `boxes`."""

    def __init__(self, compiled, walks, kept: int, boxes):
        self.compiled, self.walks, self.kept, self.boxes = compiled, walks, kept, boxes
        self.device = compiled.device
        self.descs = list(compiled.desc.tensor_descs().values())
        self.reduce = compiled.op.family == REDUCE_FAMILY
        self.rank = len(walks[0].sizes)
        self.keep = []

    # -- the pieces of a box -------------------------------------------------------------
    def _box_sizes(self, box: Box, walk: _Walk) -> list:
        return [1] * len(box.prefix) + [box.stop - box.start] + list(walk.sizes[box.dim + 1:])

    def _attributes(self, k: int | None = None) -> dict:
        attributes = dict(self.compiled.attributes)
        if self.reduce:
            attributes["Axes"] = tuple(range(self.kept, self.rank))
        else:
            attributes["Axis"] = self.rank - 1
            if k is not None:
                attributes["K"] = k
        return attributes

    def _walk_index(self, box: Box) -> int:
        """The index, row-major over the walked dimensions, of a part box's first element."""
        index = list(box.prefix[self.kept:]) + [box.start]
        index += [0] * (self.rank - self.kept - len(index))
        sizes = self.walks[0].sizes[self.kept:]
        at = 0
        for i, n in zip(index, sizes):
            at = at * n + i
        return at

    def _item(self, box: Box) -> tuple:
        return box.prefix[:self.kept]

    def launches(self) -> list:
        made = []
        whole = [b for b in self.boxes if b.dim < self.kept]
        parts: dict = {}
        for box in self.boxes:
            if box.dim >= self.kept:
                parts.setdefault(self._item(box), []).append(box)
        states = self._state_buffer(whole, parts)
        offset = 0
        for box in whole:
            offset, dispatches = self._whole_box(box, states, offset)
            made += dispatches
        for item, boxes in parts.items():
            offset, dispatches = self._part_walk(item, boxes, states, offset)
            made += dispatches
        return made

    def _state_buffer(self, whole, parts):
        if not self.reduce:
            return None
        total = 0
        for box in whole:
            sizes = self._box_sizes(box, self.walks[0])
            shape = self._whole_shape(sizes)
            total += math.prod(sizes[:self.kept]) * shape.chunks if shape.chunks > 1 else 0
        for boxes in parts.values():
            for box in boxes:
                walked = math.prod(self._box_sizes(box, self.walks[0])[self.kept:])
                total += reduce_shape(1, walked, self.device.is_cpu).chunks
        if not total:
            return None
        buffer = self.device.allocate(total * STATE_BYTES, zero_fill=False)
        self.keep.append(buffer)
        return buffer

    def _upload(self, passes):
        uploaded = self.compiled.upload(passes)
        self.keep.append(uploaded.params)
        return uploaded

    def _whole_shape(self, sizes) -> tuple:
        """REDUCE's cut of a box of whole walks of these sizes (the kernel's order)."""
        across = walks_across(sizes, self.walks[0].strides, range(self.kept, self.rank))
        return reduce_shape(math.prod(sizes[:self.kept]), math.prod(sizes[self.kept:]), self.device.is_cpu, across)

    def _in_range(self, box: Box) -> tuple:
        """(bound range of the input's piece, the box's first element's offset in it)."""
        walk = self.walks[0]
        piece, start = _piece(walk.buffer, box.starts[0])
        return BoundRange(piece, 0, piece.size_in_bytes), (box.starts[0] - start) // walk.itemsize

    def _whole_box(self, box: Box, states, offset: int):
        """A box of whole walks: the kernel over its piece, its outputs written in place."""
        compiled, walks = self.compiled, self.walks
        in_walk = walks[0]
        sizes = self._box_sizes(box, in_walk)
        in_desc = _descs(self.descs[0].data_type, sizes, in_walk.strides)
        in_range, in_base = self._in_range(box)
        out_descs, out_ranges, out_base = [], [], 0
        for j, walk in enumerate(walks[1:]):
            out_sizes = sizes[:self.kept] + list(walk.sizes[self.kept:])
            out_descs.append(_descs(self.descs[1 + j].data_type, out_sizes, walk.strides))
            piece, start = _piece(walk.buffer, box.starts[1 + j])
            if j == 0:  # REDUCE's output, TOP_K1's values: bound whole, their offset a parameter
                out_ranges.append(BoundRange(piece, 0, piece.size_in_bytes))
                out_base = (box.starts[1] - start) // walk.itemsize
            else:  # TOP_K1's indices (4- or 8-byte): bound from the box's first
                out_ranges.append(BoundRange(piece, box.starts[1 + j] - start, piece.size_in_bytes))
        descs = [in_desc] + out_descs
        attributes = self._attributes()
        if self.reduce:
            items = math.prod(sizes[:self.kept])
            shape = self._whole_shape(sizes)
            passes = compiled.reduce_passes(shape, descs=descs, attributes=attributes, in_base=in_base,
                                            out_base=out_base)
            made = compiled.launches([in_range] + out_ranges, self._upload(passes), states=states,
                                     state_offset=offset * STATE_BYTES)
            return offset + (items * shape.chunks if shape.chunks > 1 else 0), made
        passes = compiled.top_k_passes(descs=descs, attributes=attributes, in_base=in_base, out_base=out_base)
        return offset, compiled.launches([in_range] + out_ranges, self._upload(passes))

    def _part_walk(self, item: tuple, boxes: list, states, offset: int):
        """One walk cut at pieces: each box's states (candidates), then their merge into the
        item's outputs."""
        compiled, walks = self.compiled, self.walks
        in_walk = walks[0]
        count = math.prod(in_walk.sizes[self.kept:])
        data_type = self.descs[0].data_type
        made = []
        first_slot = offset
        candidates = []  # TOP_K1: (box, K of the box, first candidate)
        if not self.reduce:
            k = compiled.attributes["K"]
            total = 0
            for box in boxes:
                length = math.prod(self._box_sizes(box, in_walk)[self.kept:])
                candidates.append((box, min(k, length), total))
                total += min(k, length)
            index_type = self.descs[2].data_type
            values = self.device.allocate(max(4, -(-total * data_type.size // 4) * 4), zero_fill=False)
            indices = self.device.allocate(total * index_type.size, zero_fill=False)
            self.keep += [values, indices]
        for n, box in enumerate(boxes):
            sizes = self._box_sizes(box, in_walk)
            in_desc = _descs(data_type, sizes, in_walk.strides)
            in_range, in_base = self._in_range(box)
            walked = math.prod(sizes[self.kept:])
            if self.reduce:
                out_desc = _descs(self.descs[1].data_type, [1] * self.rank, [0] * self.rank)
                shape = reduce_shape(1, walked, self.device.is_cpu)
                passes = compiled.reduce_passes(shape, descs=[in_desc, out_desc], attributes=self._attributes(),
                                                index_base=self._walk_index(box), count=count, to_states=True,
                                                in_base=in_base)
                out = BoundRange(states, 0, states.size_in_bytes)  # (bound; the states are written)
                made += compiled.launches([in_range, out], self._upload(passes), states=states,
                                          state_offset=offset * STATE_BYTES)
                offset += shape.chunks
            else:
                _, k_box, first = candidates[n]
                out_sizes = [1] * (self.rank - 1) + [k_box]
                descs = [in_desc, _descs(data_type, out_sizes, [0] * (self.rank - 1) + [1]),
                         _descs(self.descs[2].data_type, out_sizes, [0] * (self.rank - 1) + [1])]
                passes = compiled.top_k_passes(descs=descs, attributes=self._attributes(k_box),
                                               index_base=self._walk_index(box), in_base=in_base, out_base=first)
                ranges = [in_range, BoundRange(values, 0, values.size_in_bytes),
                          BoundRange(indices, first * self.descs[2].data_type.size, indices.size_in_bytes)]
                made += compiled.launches(ranges, self._upload(passes))
        # The merge, into the item's outputs.
        out_ranges, out_base, out_descs = [], 0, []
        for j, walk in enumerate(walks[1:]):
            byte = walk.offset + sum(i * st for i, st in zip(item, walk.strides)) * walk.itemsize
            piece, start = _piece(walk.buffer, byte)
            last = byte + (extent(walk.sizes[self.kept:], walk.strides[self.kept:]) - 1) * walk.itemsize
            if isinstance(walk.buffer, Pieces) and last >= walk.buffer.piece_end(byte):
                raise ValidationError(compiled.op.dml_name, compiled.op.outputs[j], "Binding.Buffer",
                                      "an output walk across two buffers",
                                      "allowed: each output element's (each sequence's) outputs in one buffer")
            out_descs.append(_descs(self.descs[1 + j].data_type, [1] * self.kept + list(walk.sizes[self.kept:]),
                                    walk.strides))
            if j == 0:
                out_ranges.append(BoundRange(piece, 0, piece.size_in_bytes))
                out_base = (byte - start) // walk.itemsize
            else:
                out_ranges.append(BoundRange(piece, byte - start, piece.size_in_bytes))
        if self.reduce:
            slots = offset - first_slot
            in_desc = _descs(data_type, [1] * self.rank, [0] * self.rank)
            combine = compiled.combine_pass(slots, min(64, 1 << (max(1, slots // 4).bit_length() - 1)),
                                            descs=[in_desc] + out_descs, attributes=self._attributes(),
                                            out_base=out_base, count=count)
            anchor = BoundRange(states, 0, states.size_in_bytes)
            made += compiled.launches([anchor] + out_ranges, self._upload([combine]), states=states,
                                      state_offset=first_slot * STATE_BYTES)
            return offset, made
        total = candidates[-1][2] + candidates[-1][1]
        in_desc = _descs(data_type, [1] * (self.rank - 1) + [total], [0] * (self.rank - 1) + [1])
        passes = compiled.top_k_passes(descs=[in_desc] + out_descs, attributes=self._attributes(),
                                       candidates=True, out_base=out_base)
        made += compiled.launches([BoundRange(values, 0, values.size_in_bytes)] + out_ranges,
                                  self._upload(passes), candidates=indices)
        return offset, made


def execute(compiled, inputs, outputs) -> None:
    """Queue one execution of `compiled` (a CompiledSelection) whose bindings include memory
    that spans several buffers (the CompiledSelection's `spans`).

    Raises:
        ValidationError: bindings DirectML would reject (nothing is queued).
    """
    views = span_plan.binding_views(compiled, inputs, outputs)
    made, keep = launches(compiled, views)
    for launch in made:
        compiled.enqueue(launch)
    del keep  # (freed after the queued work that uses them)

