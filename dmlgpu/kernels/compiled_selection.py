"""A validated REDUCE or TOP_K1 compiled for one device (the table's reduce and top-k families).

The input's dimensions split into the outer ones (one work item each combination: an output
element of REDUCE, a sequence of TOP_K1) and the walked ones (REDUCE's Axes, TOP_K1's Axis);
their sizes and element strides go once into a small parameter buffer (shaders/include/select.glsl
documents its words), so one pipeline per variant serves every shape and layout.

REDUCE runs in a fixed order of operations (shaders/reduce.comp): each output element's walk is
cut into chunks, each reduced by `lanes` lanes of a workgroup; with more than one chunk a first
dispatch writes each chunk's state into a buffer the compiled operator keeps and a second merges
them, or, where that merge is one workgroup's work, the first dispatch's last workgroup to finish
merges them in the same order (REDUCE_MERGE_LAST: one dispatch, no barrier between). `reduce_shape` picks lanes and chunks from the output and walk sizes, whether the device is a
CPU and whether the walk goes across (`walks_across`: a strided walk whose output elements'
inputs are adjacent takes a lane per chunk), nothing else: one input gives the same bits on every
run.
"""
from __future__ import annotations

import math
import threading
from typing import NamedTuple

import numpy as np

from . import variants as kernels, spirv
from ..describe.bindings import check_bindings
from .compiled_operator import LaunchMemo, binding_key
from .top_k_sort import top_k_sort_steps
from .reduce_shapes import (DOUBLE_FIRST_WALK, MAX_STATES, REDUCE_GROUP, ReduceShape, _floor_pow2, double_first_lanes,
                            reduce_shape)
from .short_walks import FIXED_WALK, SHORT_WALKS, SUMMED, fixed_sums, quad_layout, quick_sums, short_quads, short_walk, short_words, walks_across, word_layout
from ..errors import ValidationError
from ..table.operators import PICKING_FUNCTIONS, REDUCE_FAMILY
from ..runtime import Program
from ..describe.validation import checked_attributes

__all__ = ["DOUBLE_ACCUMULATORS", "DOUBLE_FIRST_WALK", "double_first_lanes", "MAX_STATES", "STATE_BYTES", "REDUCE_GROUP", "SHORT_WALKS", "WIDE_LOADS", "CompiledSelection", "flushes_subnormals", "Pass", "Passes",
           "ReduceShape", "quad_layout", "reduce_shape", "selection_params", "short_quads", "short_walk", "walks_across"]

#: Workgroups per dispatch at most: invocations stride over the rest (select.glsl).
_MAX_GROUPS = 1 << 15
_GROUP = kernels.SELECTION_WORKGROUP_SIZE
#: REDUCE's specialization constants by whether the device is a CPU (figures: benchmarks/NOTES.md,
#: sessions 11-12). WIDE_LOADS: a lane keeps eight blocks' loads in flight (64-bit: four), float
#: sums judging their terms once, at the end (H200, 256 MiB: MAX 600 -> 83-200 us; lavapipe: 1.2-1.4x
#: slower); the workgroup size: reduce_shapes.REDUCE_GROUP.
WIDE_LOADS = {False: True, True: False}
#: Whether FLOAT32 SUM and L1 run in doubles (kernels.double_sums; the same bits) where the device
#: has 64-bit floats, by whether it is a CPU: lavapipe 32 MiB 3.5-3.9 ms against the triples'
#: 5.3-5.7; on an H200 2-5% slower than the triples at 64-256 MiB (75.6-79 against 74 us at 256
#: MiB, whatever the cut or loop tried), within 2-8% faster below 16 MiB (benchmarks/NOTES.md,
#: session 24).
DOUBLE_ACCUMULATORS = {False: False, True: True}
STATE_BYTES = 32
_HEADER = kernels.SELECT_WORD
#: TOP_K_SORT (shaders/top_k.comp) serves sequences of at least TOP_K_SORT_WALK elements, by
#: whether the device is a CPU (None: never). On a GPU every K of a sequence long enough to spread over workgroups: a heap per invocation is one thread's
#: dependent reads (2^20 elements took 4 ms at K = 1 and 4.3 s at K = n - 1 on an H200). On a CPU
#: driver the heaps stay: they cost about one compare per element where the sorting network
#: costs log^2 steps with a barrier each (lavapipe, 2^20 random: K = 1,000 26 ms by heap, 487 ms
#: sorted; K = n - 1 1.2-2.0 s against 2.1 s; benchmarks/NOTES.md).
TOP_K_SORT_WALK = {False: 512, True: None}


def flushes_subnormals(device) -> bool:
    """Whether `device` flushes float32 subnormals (NVIDIA's 580 drivers: DenormPreserve for 16 bits
    only; CPU drivers keep them): REDUCE's fast loops then look for them (reduce.comp FLUSHES)."""
    return not device.is_cpu and 32 not in device.properties["denorm_preserve"]


def selection_params(op, attributes, descs, **header) -> tuple[np.ndarray, int]:
    """The parameter words for these tensors (`descs`: a dict or list of TensorDesc, in the
    descriptor's order; see shaders/include/select.glsl; `header` sets words by their
    SELECT_HEADER names) and the number of work items."""
    tensors = list(descs.values()) if isinstance(descs, dict) else list(descs)
    source, output = tensors[0], tensors[len(op.inputs)]
    if op.family == REDUCE_FAMILY:
        walked = attributes["Axes"]
    else:
        walked = (attributes["Axis"],)
    in_strides, out_strides = source.effective_strides, output.effective_strides
    outer = [d for d in range(len(source.sizes)) if d not in walked]
    walked_dims = sorted(walked)
    words = [0] * len(kernels.SELECT_HEADER)
    items = 1
    for d in reversed(outer):  # innermost first
        words += [source.sizes[d], in_strides[d], out_strides[d]]
        items *= source.sizes[d]
    count = 1
    for d in reversed(walked_dims):
        words += [source.sizes[d], in_strides[d]]
        count *= source.sizes[d]
    fields = {**dict(items=items, walked=count, outer_dims=len(outer), walked_dims=len(walked_dims), lanes=1,
                     chunk=max(1, count), chunks=1, count=count), **header}
    for name, value in fields.items():
        words[_HEADER[name]] = value
    if op.family != REDUCE_FAMILY:
        index = tensors[len(op.inputs) + 1]
        axis = attributes["Axis"]
        words += [attributes["K"], int(attributes["AxisDirection"]), out_strides[axis],
                  index.effective_strides[axis]]
        words += [index.effective_strides[d] for d in reversed(outer)]
    return np.array(words, dtype=np.uint32), items


def _groups(units: int, lanes: int, group: int) -> tuple[int, int, int]:
    return (min(_MAX_GROUPS, max(1, math.ceil(units * lanes / group))), 1, 1)


class Pass(NamedTuple):
    """One dispatch: its parameter words, grid and mode (SELECT_MODES bits); with
    REDUCE_MERGE_LAST, `merge` is where in `words` the merge's own words start; with TOP_K_SORT,
    `scratch` the bytes of scratch its passes use."""

    words: np.ndarray
    grid: tuple
    mode: int = 0
    merge: int = 0
    scratch: int = 0


class Passes(NamedTuple):
    """Dispatches ready to launch: their parameter words in one Buffer, and per pass (word
    offset in it, grid, mode, the merge's word offset in it or 0)."""

    params: object
    passes: tuple


class CompiledSelection:
    """A REDUCE or TOP_K1 ready to execute with any bindings that fit its descriptor.
    The device's `SpanningSelection` (dmlgpu/api/spanning_operators.py) also takes bindings of
    memory that spans several buffers. `short_walk`: the SHORT_WALK its own dispatch runs
    with (0: the general pipeline; see short_walk); `short_quads`: whether in quads;
    `short_words`: 8/16-bit elements, a word's output elements an invocation (their count, or 0);
    `fixed_sums`: a FLOAT16 sum whose states are fixed-point integers (short_walks.fixed_sums);
    `doubles`: its own dispatch runs the DOUBLES variant (kernels.double_sums)."""

    def __init__(self, device, operator_desc, feature_level):
        self.op = op = operator_desc.OPERATOR
        self.attributes = checked_attributes(operator_desc, feature_level)
        self.device = device
        self.desc = operator_desc
        self.feature_level = feature_level
        self._descs = operator_desc.tensor_descs()
        tensors = list(self._descs.values())
        in_type, out_type = tensors[0].data_type, tensors[-1].data_type
        self.variant = kernels.selection_variant(op, in_type, out_type, self.attributes.get("Function"))
        cpu = bool(device.is_cpu)
        self._group = REDUCE_GROUP[cpu]  # REDUCE's workgroup size: the pipeline's and its grids'
        params, items = selection_params(op, self.attributes, self._descs)
        self.items, self.walked = items, int(params[_HEADER["walked"]])
        across = fixed = False
        if op.family == REDUCE_FAMILY:
            source, function = tensors[0], self.attributes["Function"]
            across = walks_across(source.sizes, source.effective_strides, self.attributes["Axes"])
            fixed = fixed_sums(function, in_type.bits, in_type.is_float)  # (short walks as the integer sums' to FIXED_WALK)
        # REDUCE's specialization constants by id: WIDE_LOADS, group size, SHORT_WALK (0: general), FLUSHES,
        # SHORT_QUADS, QUICK_PASS, FIXED_SUMS (a FLOAT16 sum walking across: in fixed point).
        self.fixed_sums = fixed and across
        spec = [int(WIDE_LOADS[cpu]), self._group, 0, int(flushes_subnormals(device)), 0, 0, int(self.fixed_sums)] \
            if op.family == REDUCE_FAMILY else []
        self._program = self._own_program = Program(self.variant.name, spirv.load(self.variant.name),
                                                    np.array(spec, dtype=np.uint32), len(kernels.SELECTION_PUSH_FIELDS))
        if op.family == REDUCE_FAMILY:
            self.shape = reduce_shape(items, self.walked, device.is_cpu, across)
            quick = quick_sums(function, in_type.bits, out_type.bits, in_type.is_float, self.walked)
            arithmetic = in_type.is_float and function not in PICKING_FUNCTIONS and not quick and not (
                fixed and self.walked <= FIXED_WALK)
            float_sums = in_type.is_float and function in SUMMED and not quick and not fixed
            self.short_walk = short = short_walk(self.shape, self.walked, across, cpu, arithmetic)
            quad_walk = short_quads(short, self.walked, quad_layout(params, in_type.size), float_sums, quick)
            self.short_quads, short = bool(quad_walk), quad_walk or short  # (8/16-bit: words, or 0 for none)
            self.short_words, short = short_words(short, self.walked, word_layout(params, in_type.size), in_type.size)
            self.short_walk = short
            self.quick = quick = bool(short) and quick
            if short:  # this operator's own dispatch (a spanning call's pieces keep the general one)
                spec[2], spec[4], spec[5] = short, int(self.short_quads or bool(self.short_words)), int(quick)
                self._own_program = Program(self.variant.name, self._program.spirv,
                                            np.array(spec, dtype=np.uint32), self._program.push_words)
            if quick:  # the pass after the quick one (shaders/reduce.comp QUICK_PASS)
                spec[5] = 2
                self._gave_up_program = Program(self.variant.name, self._program.spirv,
                                                np.array(spec, dtype=np.uint32), self._program.push_words)
            self._passes = self.upload(self.reduce_passes(self.shape, merge_last=True, short_walk=short,
                                                          quads=self.short_quads, words=self.short_words, quick=quick))
            # FLOAT32 SUM and L1 in one general dispatch (its own merge included, so that a result
            # not proved can be computed again from the input in the same dispatch) in doubles,
            # on a CPU driver with them (shaders/reduce.comp DOUBLES); the same bits either way.
            self.doubles = (DOUBLE_ACCUMULATORS[cpu] and not short and len(self._passes.passes) == 1
                            and device.properties["float64"] and kernels.double_sums(function, in_type, out_type))
            self._double_first = self._double_grid = None
            if self.doubles:
                name = kernels.selection_variant(op, in_type, out_type, function, doubles=True).name
                code = spirv.load(name)
                walk = len(kernels.SELECT_HEADER) + 3 * int(params[_HEADER["outer_dims"]])
                if (self.walked >= DOUBLE_FIRST_WALK and int(params[_HEADER["walked_dims"]]) == 1
                        and int(params[walk + 1]) == 1):  # a long contiguous walk (the loop DOUBLE_PASS hoists)
                    # Its lanes' states in a dispatch of its own, merged, proved (and computed again
                    # where not) by the dispatch after (shaders/reduce.comp DOUBLE_PASS); fewer,
                    # longer runs: the merge's work is per lane.
                    self.shape = reduce_shape(items, self.walked, cpu, across, target=double_first_lanes())
                    passes, self._double_grid = self.double_first_passes(self.shape)
                    self._passes = self.upload(passes)
                    self._double_first = Program(name, code, np.array(spec + [1], dtype=np.uint32),
                                                 self._program.push_words)
                    spec = spec + [2]
                self._own_program = Program(name, code, np.array(spec, dtype=np.uint32), self._program.push_words)
        else:
            self.shape, self.short_walk, self.short_quads, self.short_words, self.quick = None, 0, False, 0, False
            self.doubles, self._double_first, self._double_grid = False, None, None
            self._passes = self.upload(self.top_k_passes())
        self._states = None  # REDUCE's chunk states, allocated at the first execution that needs them
        self._scratch = None  # TOP_K_SORT's entries, likewise
        # (Two threads' first executions would each make one; launches hold the replaced one weakly.)
        self._made_lock = threading.Lock()
        self._launches = LaunchMemo()  # binding key -> prepared dispatches

    def reduce_passes(self, shape: ReduceShape, *, descs=None, attributes=None, index_base: int = 0,
                      count: int | None = None, to_states: bool = False, in_base: int = 0,
                      out_base: int = 0, merge_last: bool = False, short_walk: int = 0, quads: bool = False,
                      words: int = 0, quick: bool = False) -> list:
        """REDUCE's dispatches for this cut (`Pass`es): one, or with several chunks a first
        writing states and a second merging them; `merge_last`: where the merge is one
        workgroup's, the first's last workgroup merges (one dispatch: its state buffer needs
        STATE_BYTES more, zeroed, for the count). For a piece of a spanning call
        (dmlgpu/api/selection_spans.py): `descs`/`attributes` describe the piece, `to_states`
        writes its chunks' states and stops, `index_base` is its first walked element's index,
        `count` what AVERAGE divides by (default: the walk), `in_base`/`out_base` element
        offsets of the input and output. `short_walk`: the dispatch runs the short-walk
        pipeline (one pass; an invocation takes REDUCE_SHORT_LOADS / short_walk output elements, or
        with `quads` (short_quads) REDUCE_SHORT_LOADS / (4 short_walk) quads of them, at least one;
        with `words` (short_words' output elements a word) as many words as output elements);
        `quick` (short_walks.quick_sums): two, the quick pass (REDUCE_QUICK) and the triples for the
        output elements it gave up on (REDUCE_GAVE_UP, a pipeline of its own)."""
        modes = kernels.SELECT_MODES
        descs = self._descs if descs is None else descs
        attributes = self.attributes if attributes is None else attributes
        params, items = selection_params(self.op, attributes, descs)
        count = int(params[_HEADER["walked"]]) if count is None else count
        bases = dict(in_base=in_base, out_base=out_base, count=count)
        mode = modes["REDUCE_TO_STATES"] if shape.chunks > 1 or to_states else 0
        first, _ = selection_params(self.op, attributes, descs, lanes=shape.lanes, chunk=shape.chunk,
                                    chunks=shape.chunks, index_base=index_base, mode=mode, **bases)
        if quads:
            units = math.ceil(items / (4 * max(1, kernels.REDUCE_SHORT_LOADS // (4 * short_walk))))
        elif short_walk:
            units = math.ceil(items // max(1, words) * short_walk / kernels.REDUCE_SHORT_LOADS)
        else:
            units = items * shape.chunks
        passes = [Pass(first, _groups(units, shape.lanes, self._group), mode)]
        if quick:
            return [Pass(first, passes[0].grid, mode | modes["REDUCE_QUICK"]),
                    Pass(first, passes[0].grid, mode | modes["REDUCE_GAVE_UP"])]
        if shape.chunks > 1 and not to_states:
            combine = self.combine_pass(shape.chunks, shape.combine_lanes, descs=descs, attributes=attributes,
                                        **bases)
            if merge_last and combine.grid == (1, 1, 1):
                first[_HEADER["mode"]] |= kernels.SELECT_MODES["REDUCE_MERGE_LAST"]
                return [Pass(np.concatenate([first, combine.words]), passes[0].grid, int(first[_HEADER["mode"]]),
                             first.size)]
            passes.append(combine)
        return passes

    def double_first_passes(self, shape: ReduceShape) -> tuple[list, tuple]:
        """A float sum in doubles whose lanes' states are stored by a dispatch of their own
        (DOUBLE_PASS 1, over the one Pass's grid) and merged by the next (DOUBLE_PASS 2, over the
        returned grid, by the Pass's words from `merge`): ([that Pass], the merge's grid)."""
        mode = kernels.SELECT_MODES["REDUCE_TO_STATES"]
        first, items = selection_params(self.op, self.attributes, self._descs, lanes=shape.lanes, chunk=shape.chunk,
                                        chunks=shape.chunks, mode=mode)
        states = shape.chunks * shape.lanes
        combine = self.combine_pass(states, min(self._group, _floor_pow2(states // 4)))
        grid = _groups(items * shape.chunks, shape.lanes, self._group)
        return [Pass(np.concatenate([first, combine.words]), grid, mode, first.size)], combine.grid

    def combine_pass(self, states: int, lanes: int, *, descs=None, attributes=None, **header) -> Pass:
        """A REDUCE dispatch merging `states` states per output element (each element's in a row,
        in order) into the output (`header`: SELECT_HEADER words, as `reduce_passes`')."""
        mode = kernels.SELECT_MODES["REDUCE_FROM_STATES"]
        descs = self._descs if descs is None else descs
        attributes = self.attributes if attributes is None else attributes
        header = {"count": self.walked, **header}
        words, items = selection_params(self.op, attributes, descs, walked=states, lanes=lanes, chunk=states,
                                        mode=mode, **header)
        return Pass(words, _groups(items, lanes, self._group), mode)

    def top_k_passes(self, *, descs=None, attributes=None, index_base: int = 0, candidates: bool = False,
                     in_base: int = 0, out_base: int = 0) -> list:
        """TOP_K1's one dispatch; for a piece of a spanning call, `descs`/`attributes` describe
        the piece, its indices count from `index_base` or (`candidates`) are read from the
        candidates' index buffer, and `in_base`/`out_base` are element offsets."""
        attributes = self.attributes if attributes is None else attributes
        mode = kernels.SELECT_MODES["TOP_K_FROM_CANDIDATES"] if candidates else 0
        words, items = selection_params(self.op, attributes, self._descs if descs is None else descs,
                                        index_base=index_base, mode=mode, in_base=in_base, out_base=out_base)
        walked, cpu = int(words[_HEADER["walked"]]), bool(self.device.is_cpu)
        sort_walk = TOP_K_SORT_WALK[cpu]
        if not candidates and sort_walk is not None and walked >= sort_walk:
            entry_bytes = 16 if self._descs["InputTensor"].data_type.size == 8 else 8
            steps, entries = top_k_sort_steps(items, walked, min(attributes["K"], walked))
            if entries * entry_bytes <= self.device.max_buffer_size:
                return self._sort_passes(words, steps, entries * entry_bytes)
        if attributes["K"] <= kernels.TOP_K_GROUP_SLOTS // 2 and walked >= kernels.TOP_K_GROUP_WALK:
            mode |= kernels.SELECT_MODES["TOP_K_GROUP"]  # a workgroup per sequence
            words[_HEADER["mode"]] = mode
            return [Pass(words, (min(_MAX_GROUPS, items), 1, 1), mode)]
        return [Pass(words, (min(_MAX_GROUPS, max(1, math.ceil(items / _GROUP))), 1, 1), mode)]

    @staticmethod
    def _sort_passes(words: np.ndarray, steps: list, scratch: int) -> list:
        """TOP_K_SORT's dispatches: `words` (the operator's parameter words) with each step's."""
        passes = []
        for header, units, pairs, out in steps:
            mode = kernels.SELECT_MODES["TOP_K_SORT"] | (kernels.SELECT_MODES["TOP_K_SORT_OUT"] if out else 0)
            step_words = words.copy()
            for name, value in {**header, "mode": mode}.items():
                step_words[_HEADER[name]] = value
            groups = math.ceil(units / _GROUP) if pairs else units
            passes.append(Pass(step_words, (min(_MAX_GROUPS, max(1, groups)), 1, 1), mode, scratch=scratch))
        return passes

    def upload(self, passes) -> Passes:
        """`passes`' parameter words in one new Buffer."""
        words = np.concatenate([p.words for p in passes])
        offsets = np.cumsum([0] + [p.words.size for p in passes[:-1]]).tolist()
        return Passes(self.device.upload(words),
                      tuple((o, p.grid, p.mode, o + p.merge if p.merge else 0, p.scratch)
                            for o, p in zip(offsets, passes)))

    def __repr__(self):
        return f"<dmlgpu.CompiledOperator {self.op.name} {self.variant.name}>"

    @property
    def layout(self) -> str:
        return self.variant.layout

    @property
    def double_first(self) -> bool:
        """Whether its float sum in doubles runs its first loop in a dispatch of its own
        (DOUBLE_FIRST_WALK; shaders/reduce.comp DOUBLE_PASS)."""
        return self._double_first is not None

    @property
    def state_bytes(self) -> int:
        """Bytes of the states REDUCE's first dispatch writes (0: one dispatch), and of the count
        after them where its last workgroup merges."""
        if self._double_first is not None:  # a state per lane
            return self.items * self.shape.chunks * self.shape.lanes * STATE_BYTES
        if self.shape is None or self.shape.chunks == 1:
            return 0
        merge_last = any(merge for _, _, _, merge, _ in self._passes.passes)
        return (self.items * self.shape.chunks + merge_last) * STATE_BYTES

    def check(self, inputs, outputs):
        """The checked byte ranges of these bindings (`ValidationError` if DirectML rejects them)."""
        return check_bindings(self.op, self._descs, inputs, outputs, self.device)

    def launch(self, ranges):
        """The one prepared dispatch of a TOP_K1 (or a one-pass REDUCE) over checked `ranges`."""
        made = self.launches(ranges)
        if len(made) != 1:
            raise ValidationError(self.op.dml_name, None, "dispatches", len(made), "allowed: one (see launches)")
        return made[0]

    def launches(self, ranges, passes: Passes | None = None, states=None, candidates=None,
                 state_offset: int = 0) -> list:
        """The runtime's prepared dispatches over checked `ranges` (inputs, then outputs; any
        objects with `buffer`, `start`, `end`), in order: a second reads what the first wrote.
        For a piece of a spanning call, `passes` (from `upload`), `states` (REDUCE: a Buffer
        holding the states its passes write or read, from byte `state_offset`) and `candidates` (TOP_K1:
        a Buffer of the indices of its input's elements) replace this operator's own."""
        own = passes is None
        program = self._own_program if own else self._program
        passes = self._passes if own else passes
        params = passes.params
        inputs, outputs = ranges[:len(self.op.inputs)], ranges[len(self.op.inputs):]
        words = [(r.buffer.arena_offset + r.start) // 4 for r in ranges]
        modes = kernels.SELECT_MODES
        ends = [offset for offset, *_ in passes.passes[1:]] + [params.size_in_bytes // 4]
        made = []
        for (offset, grid, mode, merge, scratch), end in zip(passes.passes, ends):
            reads = [(params, 4 * offset, 4 * end)]
            pass_program = program
            if self.op.family == REDUCE_FAMILY:
                quick = mode & (modes["REDUCE_QUICK"] | modes["REDUCE_GAVE_UP"])
                if mode & (modes["REDUCE_TO_STATES"] | modes["REDUCE_FROM_STATES"]) or quick:
                    states = self._state_buffer() if states is None else states
                aux = states if states is not None else params  # (bound, not used)
                if mode & modes["REDUCE_FROM_STATES"]:
                    reads.append((aux, 0, aux.size_in_bytes))
                else:
                    reads += [(r.buffer, r.start, r.end) for r in inputs]
                writes = [(aux, 0, aux.size_in_bytes)] if mode & modes["REDUCE_TO_STATES"] or quick else []
                if mode & modes["REDUCE_GAVE_UP"]:  # (its word, and the outputs the quick pass gave up on)
                    pass_program = self._gave_up_program
                    reads += [(aux, 0, aux.size_in_bytes)] + [(r.buffer, r.start, r.end) for r in outputs]
                if not mode & modes["REDUCE_TO_STATES"] or mode & modes["REDUCE_MERGE_LAST"]:
                    writes += [(r.buffer, r.start, r.end) for r in outputs]
                push = [words[0], words[1], (aux.arena_offset + state_offset) // 4, params.arena_offset // 4 + offset,
                        params.arena_offset // 4 + merge if merge else 0]
                buffers = [ranges[0].buffer, ranges[1].buffer, aux, params]
                if own and self._double_first is not None:  # the lanes' states first, on their own
                    made.append(self.device.launch(self._double_first, grid, buffers, np.array(push, dtype=np.uint32),
                                                   reads=list(reads), writes=[(aux, 0, aux.size_in_bytes)],
                                                   name=self.op.dml_name))
                    reads.append((aux, 0, aux.size_in_bytes))
                    writes = [(r.buffer, r.start, r.end) for r in outputs]
                    grid = self._double_grid
            else:
                source = candidates if candidates is not None else params  # (bound, not used)
                if candidates is not None:
                    reads.append((candidates, 0, candidates.size_in_bytes))
                if mode & modes["TOP_K_SORT"]:
                    source = self._scratch_buffer(scratch)
                    reads.append((source, 0, scratch))
                    writes = [(source, 0, scratch)]
                reads += [(r.buffer, r.start, r.end) for r in inputs]
                writes = (writes if mode & modes["TOP_K_SORT"] else []) + [(r.buffer, r.start, r.end) for r in outputs]
                push = [words[0], words[1], words[2], params.arena_offset // 4 + offset, source.arena_offset // 4]
                buffers = [r.buffer for r in ranges] + [params, source]
            made.append(self.device.launch(pass_program, grid, buffers, np.array(push, dtype=np.uint32),
                                           reads=reads, writes=writes, name=self.op.dml_name))
        return made

    def _scratch_buffer(self, nbytes: int):
        """TOP_K_SORT's entries: one buffer per compiled operator, the largest its passes asked."""
        with self._made_lock:
            if self._scratch is None or self._scratch.released or self._scratch.size_in_bytes < nbytes:
                self._scratch = self.device.allocate(nbytes, zero_fill=False)
            return self._scratch

    def _state_buffer(self):
        with self._made_lock:
            if self._states is None or self._states.released:
                # (zeroed: the count of REDUCE_MERGE_LAST starts at 0, and its last workgroup resets it)
                self._states = self.device.allocate(max(STATE_BYTES, self.state_bytes), zero_fill=True)
            return self._states

    def execute(self, inputs, outputs) -> None:
        """Queue one execution: `inputs` and `outputs` are lists of `Binding`, in the
        descriptor's order (TOP_K1: values, then indices). Returns at once.

        Raises:
            ValidationError: the bindings break DirectML's rules (nothing is queued).
        """
        key = binding_key(inputs, outputs)
        launches = self._launches.get(key)
        if launches is not None and not all(launch.valid for launch in launches):
            launches = self._rebound(launches, inputs, outputs)
        if launches is None:
            if self.device.closed:
                raise ValidationError(self.op.dml_name, None, "device", "closed",
                                      "allowed: an operator of an open device")
            launches = self._launches.put(key, self.launches(self.check(inputs, outputs)))
        for launch in launches:
            self.enqueue(launch)

    def _rebound(self, launches, inputs, outputs):
        """`launches` (remembered for bindings of the very blocks of `inputs` and `outputs`:
        `binding_key`) for these bindings' buffers, where theirs were released (a new result in
        the block of the last one dropped: `r = dmlgpu.sum(t)` in a loop); None if one of the
        operator's own buffers went (its states, parameter words) or a pipeline was retired."""
        given = list({id(b.buffer): b.buffer for b in (*inputs, *outputs)}.values())
        made = []
        for launch in launches:
            own = [ref() for ref in launch.buffers[len(given):]]
            if any(b is None or b.released for b in own):
                return None
            made.append(self.device.rebind(launch, given + own))
        if not all(launch.valid for launch in made):
            return None
        return made

    def enqueue(self, launch) -> None:
        """Queue `launch` (made by `launches`); ValidationError if another thread released one of
        its buffers (or closed the device) since it was checked."""
        if not self.device.enqueue(launch):
            raise ValidationError(self.op.dml_name, None, "bindings", "a buffer released while queuing",
                                  "allowed: live buffers of an open device")

