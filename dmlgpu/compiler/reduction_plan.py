"""The dispatches of a graph of element-wise nodes ending in a REDUCE, optionally followed by a
TOP_K1 (`validation.validate_fused_reduction` proved that shape): the element-wise nodes are never
stored.

Two routes, chosen by the graph's pattern (`ReductionPlan.route` names the one taken):
- "hamming": XOR of a query broadcast along the database axis with a database broadcast along
  the query axis -> BIT_COUNT -> REDUCE(SUM over the code's words) -> TOP_K1(INCREASING along the
  database axis), any K: the Hamming search's kernels (dmlgpu/kernels/search_programs.py plans
  them), then one small dispatch per batch of queries that writes the values and indices where
  the graph's outputs want them. K up to kernels.HAMMING_REGISTER_K: the register path
  (shaders/hamming.comp: the distances in registers, never stored); beyond, the selection path
  (shaders/search.comp) with every row a candidate ("full" mode: a compiled graph runs without
  the host, so it cannot search a query again as the index does when a sampled bound's regions
  overflow): a gather of (distance, row) per tile, then the selection per query.
- "reduce": any other such graph: one dispatch of the reducing fused-graph kernel
  (shaders/graph.comp) computes each output element of the REDUCE from its
  innermost input elements, running the element-wise program per element; a TOP_K1 then runs
  as its own dispatch (shaders/top_k.comp) over the REDUCE's output (stored: in the graph output
  if the graph asks for it, else in a scratch buffer of the compiled graph).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..kernels import graph_abi as gk
from ..kernels import variants as kernels
from ..describe.bindings import BoundRange
from ..kernels.compiled_selection import CompiledSelection
from ..table.dtypes import DataType
from ..errors import ValidationError
from .program import Read, Reduction, SlotProgram, TooBig, assemble
from ..kernels import search_programs as programs
from ..kernels.search_programs import HAMMING, SearchPlan, plan_search, search_programs
from ..kernels.selection_plans import SelectionPlan, plan_selection, push_words
from ..table.operators import AxisDirection, ReduceFunction
from ..describe.tensor_desc import TensorDesc
from ..describe.validation import GRAPH

__all__ = ["ReductionPlan", "plan_reduction"]


@dataclass
class ReductionPlan:
    """The steps (each with `launch(device, where, name)`), the route's name and the byte sizes
    of the scratch buffers the steps use (`("scratch", i)`)."""

    steps: list
    route: str
    scratch_bytes: list


@dataclass
class _SelectionStep:
    """TOP_K1 over a stored REDUCE output: its compiled operator, where its input and outputs are."""

    selection: CompiledSelection
    places: list  # (source, index) of the input, the values and the indices

    dispatches = 1
    reads = ()

    def launches(self, device, where, name):
        return [self.selection.launch([BoundRange(*where(*place)) for place in self.places])]


@dataclass
class _HammingSearch:
    """The Hamming search's dispatches over the bound query and database graph inputs: per
    batch of queries, its scan and merges (dmlgpu/hamming.py's plan) into scratch list buffers,
    then a split of the answer's (distance, row) pairs into the TOP_K1's outputs."""

    programs: tuple  # (scan, merge)
    plan: SearchPlan
    queries: int  # graph input index
    database: int  # graph input index
    lists: list  # scratch index of each list buffer
    batches: list  # (first query, steps, split Kernel)

    @property
    def dispatches(self) -> int:
        return sum(len(steps) + split.dispatches for _, steps, split in self.batches)

    @property
    def reads(self):
        return [read for _, _, split in self.batches for read in split.reads]

    def launches(self, device, where, name):
        db, db_start, db_end = where("input", self.database)
        qb, q_start, q_end = where("input", self.queries)
        made = []
        for first, steps, split in self.batches:
            for step in steps:
                out, _, out_end = where("scratch", self.lists[step.writes])
                push = dict(step.push, out_offset=out.arena_offset // 4)
                if step.kernel == "scan":
                    push.update(in_offset=(db.arena_offset + db_start) // 4,
                                query_offset=(qb.arena_offset + q_start) // 4 + first * self.plan.words)
                    buffers, reads = [db, qb, out], [(db, db_start, db_end), (qb, q_start, q_end)]
                else:
                    source, _, source_end = where("scratch", self.lists[step.reads])
                    push.update(in_offset=source.arena_offset // 4)
                    buffers, reads = [source, out], [(source, 0, source_end)]
                words = programs.push_words(push)
                program = self.programs[0 if step.kernel == "scan" else 1]
                made.append(device.launch(program, step.grid, buffers, words, reads=reads, writes=[(out, 0, out_end)],
                                          name=name))
            made += split.launches(device, where, name)
        return made


@dataclass
class _HammingSelection:
    """The selection path's dispatches over the bound query and database graph inputs (K above
    the register path's): per batch of queries, the gather of every row's (distance, row) into
    scratch regions, the selection per query into the answer (scratch), then the split of its
    (distance, row) pairs into the TOP_K1's outputs."""

    plan: SelectionPlan
    queries: int  # graph input index
    database: int  # graph input index
    scratch: tuple  # scratch index of the aux words, the candidates, the sort's runs, the answer
    batches: list  # (first query, queries, split Kernel)

    @property
    def dispatches(self) -> int:
        plan = self.plan
        return sum(len(list(plan.gather_dispatches(n))) + len(list(plan.select_dispatches(n, 0))) + split.dispatches
                   for _, n, split in self.batches)

    @property
    def reads(self):
        return [read for _, _, split in self.batches for read in split.reads]

    def launches(self, device, where, name):
        plan = self.plan
        db, db_start, db_end = where("input", self.database)
        qb, q_start, q_end = where("input", self.queries)
        aux, candidates, runs, answer = (where("scratch", i) for i in self.scratch)
        gather = programs.selection_program(kernels.SEARCH_GATHER, plan.words, HAMMING)
        select = programs.selection_program(kernels.SEARCH_SELECT, plan.words, HAMMING)
        grid = programs.grid(device)
        offsets = dict(db_offset=(db.arena_offset + db_start) // 4, aux_offset=aux[0].arena_offset // 4,
                       cand_offset=candidates[0].arena_offset // 4, scratch_offset=runs[0].arena_offset // 4)
        made = []
        for first, count, split in self.batches:
            fields = dict(plan.fields(count), **offsets,
                          query_offset=(qb.arena_offset + q_start) // 4 + first * plan.words)
            for _, part, _ in plan.gather_dispatches(count):
                push = push_words({**fields, **part, "out_offset": candidates[0].arena_offset // 4})
                made.append(device.launch(gather, grid, [db, qb, aux[0], candidates[0]], push,
                                          reads=[(db, db_start, db_end), (qb, q_start, q_end), aux],
                                          writes=[aux, candidates], name=name))
            for part, _ in plan.select_dispatches(count, 0):
                push = push_words({**fields, **part, "out_offset": answer[0].arena_offset // 4})
                made.append(device.launch(select, grid, [aux[0], candidates[0], runs[0], answer[0]], push,
                                          reads=[aux, candidates], writes=[aux, runs, answer], name=name))
            made += split.launches(device, where, name)
        return made


class _Places:
    """Where each node output goes: the graph outputs it feeds (the first written by the step,
    the rest copied from it), else a scratch buffer."""

    def __init__(self, graph):
        self.graph = graph
        self.scratch_bytes: list[int] = []
        self.copies: list = []  # (from place, graph output index, desc)

    def first_output(self, n: int, port: int):
        """The first graph output of node n's output `port` (the rest copied from it), or None."""
        outs = [j for j, (m, q) in enumerate(zip(self.graph.outputs, self.graph.output_ports)) if (m, q) == (n, port)]
        if outs:
            desc = self.graph.nodes[n].output_descs[port]
            self.copies += [(("output", outs[0]), j, desc) for j in outs[1:]]
        return outs[0] if outs else None

    def of(self, n: int, port: int):
        desc = self.graph.nodes[n].output_descs[port]
        outs = [j for j, (m, q) in enumerate(zip(self.graph.outputs, self.graph.output_ports)) if (m, q) == (n, port)]
        if not outs:
            self.scratch_bytes.append(desc.total_size)
            return ("scratch", len(self.scratch_bytes) - 1)
        first = ("output", outs[0])
        self.copies += [(first, j, desc) for j in outs[1:]]
        return first


def _copy(device, graph, place, j, desc):
    """A dispatch copying a stored output to graph output j (same description)."""
    program = SlotProgram(graph)
    slot = program.load(Read(place[0], place[1], desc))
    return assemble(device, desc.sizes, program.reads, program.slots, [("output", j, desc, slot)])


def _hamming_pattern(graph, fused):
    """(query graph input, database graph input, 32-bit words per code) where the graph is
    XOR(query broadcast along axis 1, database broadcast along axis 0) -> BIT_COUNT ->
    REDUCE(SUM, axis 2) -> TOP_K1(axis 1, INCREASING) over packed rows of whole 32-bit words,
    its distances not asked for; else None."""
    nodes = graph.nodes
    if fused.top_k is None or len(fused.prefix) != 2 or fused.reduce in graph.outputs:
        return None
    xor, count = fused.prefix
    if (nodes[xor].op.short, nodes[count].op.short) != ("bit_xor", "bit_count"):
        return None
    if graph.feeds[(count, 0)] != ("node", xor) or graph.feeds[(fused.reduce, 0)] != ("node", count):
        return None
    reduce_attrs = nodes[fused.reduce].operator_desc.attribute_values()
    top_attrs = nodes[fused.top_k].operator_desc.attribute_values()
    if (ReduceFunction(reduce_attrs["Function"]) is not ReduceFunction.SUM or tuple(reduce_attrs["Axes"]) != (2,)
            or top_attrs["Axis"] != 1 or AxisDirection(top_attrs["AxisDirection"]) is not AxisDirection.INCREASING):
        return None
    feeds = [graph.feeds[(xor, j)] for j in range(2)]
    if any(kind != "input" for kind, _ in feeds):
        return None
    descs = nodes[xor].input_descs
    q, n, w = descs[0].sizes
    bits = descs[0].data_type.bits
    if (w * bits) % 32:
        return None

    def is_query(desc):
        st = desc.effective_strides
        return st[2] == 1 and (n == 1 or st[1] == 0) and (q == 1 or st[0] == w)

    def is_database(desc):
        st = desc.effective_strides
        return st[2] == 1 and (q == 1 or st[0] == 0) and (n == 1 or st[1] == w)

    for a, b in ((0, 1), (1, 0)):
        if is_query(descs[a]) and is_database(descs[b]):
            return feeds[a][1], feeds[b][1], w * bits // 32
    return None


def _split(device, graph, top, outs, pairs_place, first: int, count: int, k: int):
    """The dispatch writing a batch's answer pairs ((distance, row) uint32, k per query, in
    scratch `pairs_place`) into the TOP_K1's outputs `outs` ((port, graph output or None))."""
    pairs = TensorDesc(DataType.UINT32, (count, k, 1), (2 * k, 2, 1))
    program = SlotProgram(graph)
    outputs = []
    for port, j in outs:
        if j is None:
            continue
        desc = top.output_descs[port]
        slot = program.load(Read("scratch", pairs_place, pairs, 4 * port))
        strides = desc.effective_strides
        outputs.append(("output", j, TensorDesc(desc.data_type, (count, k, 1), strides), slot,
                        first * strides[0] * desc.data_type.size))
    return assemble(device, (count, k, 1), program.reads, program.slots, outputs)


def _scratch(places, size: int) -> int:
    places.scratch_bytes.append(max(4, size))
    return len(places.scratch_bytes) - 1


def _plan_hamming(device, graph, fused, found, places) -> list:
    """The Hamming route's steps for a graph `_hamming_pattern` matched (`found`)."""
    nodes = graph.nodes
    queries, database, words = found
    top = nodes[fused.top_k]
    q, n, _ = nodes[fused.reduce].input_descs[0].sizes
    k = top.operator_desc.attribute_values()["K"]
    outs = [(port, places.first_output(fused.top_k, port)) for port in (0, 1)]
    if k > kernels.HAMMING_REGISTER_K:
        plan = plan_selection(device, [(0, n)], words, words * 32, k, q, HAMMING, mode="full")
        entry = plan.entry
        scratch = (_scratch(places, plan.layout(plan.batch)["words"] * 4),
                   _scratch(places, plan.candidate_words(plan.batch) * 4),
                   _scratch(places, 2 * plan.batch * k * entry * 4), _scratch(places, plan.batch * k * entry * 4))
        batches = [(first, count, _split(device, graph, top, outs, scratch[3], first, count, k))
                   for first, count in plan.batches()]
        return [_HammingSelection(plan, queries, database, scratch, batches)]
    try:
        plan = plan_search(device, [(0, n)], words, k, q)
    except ValidationError as exc:
        raise ValidationError(f"{GRAPH} {top.label}", None, exc.field, exc.value, exc.allowed) from None
    _, sizes, _ = plan.steps_for(plan.batch)
    lists = [_scratch(places, size) for size in sizes]
    batches = []
    for first, count in plan.batches():
        steps, _, result = plan.steps_for(count)
        batches.append((first, steps, _split(device, graph, top, outs, lists[result], first, count, k)))
    return [_HammingSearch(search_programs(words, k), plan, queries, database, lists, batches)]


def plan_reduction(device, graph, fused, level) -> ReductionPlan:
    """The dispatches of a graph of `fused`'s shape (a `FusedReduction`), at feature `level`.

    Raises:
        ValidationError: the element-wise program exceeds the fused kernel's limits (naming the
            REDUCE node).
    """
    nodes = graph.nodes
    reduce_node = nodes[fused.reduce]
    places = _Places(graph)
    found = _hamming_pattern(graph, fused)
    if found is not None:
        steps = _plan_hamming(device, graph, fused, found, places)
        steps += [_copy(device, graph, place, j, desc) for place, j, desc in places.copies]
        return ReductionPlan(steps, "hamming", places.scratch_bytes)
    program = SlotProgram(graph)
    for n in fused.prefix:
        program.add_node(n)
    slot = program.operand(fused.reduce, 0)
    source = reduce_node.input_descs[0]
    attributes = reduce_node.operator_desc.attribute_values()
    walked = math.prod(source.sizes[a] for a in attributes["Axes"])
    reduction = Reduction(int(ReduceFunction(attributes["Function"])), slot, source.data_type.bits,
                          gk.KIND_CODES[source.data_type.kind], walked)
    stored = places.of(fused.reduce, 0)
    try:
        steps = [assemble(device, source.sizes, program.reads, program.slots,
                          [(stored[0], stored[1], reduce_node.output_desc, slot)], reduction)]
    except TooBig as exc:
        raise ValidationError(f"{GRAPH} {reduce_node.label}", None, "Nodes", exc.args[0],
                              exc.args[1] + " (the element-wise nodes fused into the REDUCE)") from None
    route = "reduce"
    if fused.top_k is not None:
        top_node = nodes[fused.top_k]
        selection = CompiledSelection(device, top_node.operator_desc, level)
        steps.append(_SelectionStep(selection, [stored, places.of(fused.top_k, 0), places.of(fused.top_k, 1)]))
    steps += [_copy(device, graph, place, j, desc) for place, j, desc in places.copies]
    return ReductionPlan(steps, route, places.scratch_bytes)
