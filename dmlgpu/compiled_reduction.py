"""The dispatches of a graph of element-wise nodes ending in a REDUCE, optionally followed by a
TOP_K1 (`validation.validate_fused_reduction` proved that shape): the element-wise nodes are never
stored.

Two routes, chosen by the graph's pattern (`ReductionPlan.route` names the one taken):
- "hamming": XOR of a query broadcast along the database axis with a database broadcast along
  the query axis -> BIT_COUNT -> REDUCE(SUM over the code's words) -> TOP_K1(INCREASING along the
  database axis): the Hamming search's kernels (shaders/hamming.comp, dmlgpu/hamming.py), the
  distances in registers and never stored, then one small dispatch that writes the values and
  indices where the graph's outputs want them.
- "reduce": any other such graph: one dispatch of the reducing fused-graph kernel
  (shaders/graph.comp, GRAPH_REDUCE) computes each output element of the REDUCE from its
  innermost input elements, running the element-wise program per element; a TOP_K1 then runs
  as its own dispatch (shaders/top_k.comp) over the REDUCE's output (stored: in the graph output
  if the graph asks for it, else in a scratch buffer of the compiled graph).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import graph_kernel as gk
from .bindings import BoundRange
from .compiled_selection import CompiledSelection
from .errors import ValidationError
from .graph_program import Read, Reduction, SlotProgram, TooBig, assemble
from .operators import ReduceFunction
from .validation import GRAPH

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

    @property
    def reads(self):
        return ()

    def launch(self, device, where, name):
        return self.selection.launch([BoundRange(*where(*place)) for place in self.places])


class _Places:
    """Where each node output goes: the graph outputs it feeds (the first written by the step,
    the rest copied from it), else a scratch buffer."""

    def __init__(self, graph):
        self.graph = graph
        self.scratch_bytes: list[int] = []
        self.copies: list = []  # (from place, graph output index, desc)

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


def plan_reduction(device, graph, fused, level) -> ReductionPlan:
    """The dispatches of a graph of `fused`'s shape (a `FusedReduction`), at feature `level`.

    Raises:
        ValidationError: the element-wise program exceeds the fused kernel's limits (naming the
            REDUCE node).
    """
    nodes = graph.nodes
    reduce_node = nodes[fused.reduce]
    places = _Places(graph)
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
