"""A validated graph compiled for one device (`IDMLDevice1::CompileGraph`'s compiled operator).

The graph's operator nodes are grouped by output shape (an intermediate edge joins tensors of
one shape, so each group is closed under its edges); each group becomes one dispatch of the
fused-graph kernel (dmlgpu/graph_kernel.py, shaders/graph.comp) whose program is a list of slots:
a load per distinct way a graph input (or a large constant) is read, a constant per distinct
small constant, then the group's nodes in topological order. Nothing is stored between nodes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import graph_kernel as gk
from . import kernels, spirv
from .bindings import check_graph_bindings
from .compiled import LaunchMemo, binding_key, coalesce
from .errors import ValidationError
from .kernels import WORKGROUP_SIZE
from .operators import ELEMENT_WISE
from .runtime import Program
from .tensor_desc import packed_strides
from .validation import GRAPH, validate_graph

__all__ = ["CompiledGraph"]


@dataclass(frozen=True)
class _Read:
    """A bound input of one dispatch: graph input `index` (or constant node `index`) read
    through `desc`."""

    source: str  # "input" or "constant"
    index: int
    desc: object


@dataclass
class _Kernel:
    """One dispatch: its program, its inputs (reads) and outputs (graph output index, desc)."""

    program: Program
    tier: tuple  # (slots, inputs, outputs) of its module
    reads: list
    outputs: list
    count: int
    grid: tuple


def _scalar_value(node, desc) -> int | None:
    """A constant read through `desc` as one repeated element: its raw bits; else None."""
    if any(size > 1 and stride != 0 for size, stride in zip(desc.sizes, desc.effective_strides)):
        return None
    return int.from_bytes(node.data[:desc.data_type.size], "little")


class _TooBig(Exception):
    """A program beyond the fused kernel's limits: (what, allowed)."""


def _fail(what, value, allowed):
    raise ValidationError(GRAPH, None, what, value, allowed)


class CompiledGraph:
    """A graph ready to execute with any bindings that fit it (`execute`, like a compiled operator)."""

    def __init__(self, device, graph_desc, feature_level):
        self.graph = validate_graph(graph_desc, feature_level)
        self.device = device
        self.desc = graph_desc
        self.feature_level = feature_level
        nodes = self.graph.nodes
        for node in nodes:
            if node.op is not None and node.op.family != ELEMENT_WISE:
                raise ValidationError(f"{GRAPH} {node.label}", None, "operator", node.op.dml_name,
                                      "allowed: element-wise operators (the fused kernel computes those; "
                                      "run a reduction or selection as its own operator)")
        self._input_descs = [[nodes[n].input_descs[j] for n, j in reads] for reads in self.graph.input_reads]
        self._output_descs = [nodes[n].output_desc for n in self.graph.outputs]
        self._constants: dict = {}  # constant node index -> uploaded Buffer (non-scalar reads)
        groups: dict = {}
        for n in self.graph.order:
            if nodes[n].op is not None:
                groups.setdefault(nodes[n].output_desc.sizes, []).append(n)
        self._kernels = []
        for sizes, members in groups.items():
            self._kernels += self._split(sizes, members)
        # In place needs every input element read before its output is written: one dispatch
        # per output shape (a shape split over several dispatches recomputes, and would read
        # an input another dispatch already overwrote).
        self._in_place = len(self._kernels) == len(groups)
        self._launches = LaunchMemo()

    @property
    def dispatches(self) -> int:
        """How many dispatches one execution runs: one per output shape of the graph's nodes
        (more only where one shape's program exceeds the fused kernel's limits)."""
        return len(self._kernels)

    def __repr__(self):
        return f"<dmlgpu.CompiledGraph {len(self.graph.nodes)} nodes, {self.dispatches} dispatch(es)>"

    def _split(self, sizes, members) -> list:
        """The dispatches of one output shape: one, unless its program exceeds the kernel's
        limits; then the outputs are split greedily and each dispatch recomputes what its
        outputs need (intermediates are still never stored)."""
        outputs = [j for j, n in enumerate(self.graph.outputs) if n in members]
        try:
            return [self._plan(sizes, members, outputs)]
        except _TooBig:
            pass
        kernels_, chunk = [], []
        for j in outputs:
            try:
                self._plan(sizes, self._ancestors(members, chunk + [j]), chunk + [j])
                chunk.append(j)
            except _TooBig as exc:
                if not chunk:
                    _fail("Nodes", exc.args[0], exc.args[1])
                kernels_.append(self._plan(sizes, self._ancestors(members, chunk), chunk))
                chunk = [j]
        try:
            kernels_.append(self._plan(sizes, self._ancestors(members, chunk), chunk))
        except _TooBig as exc:
            _fail("Nodes", exc.args[0], exc.args[1])
        return kernels_

    def _ancestors(self, members, outputs) -> list:
        needed = {self.graph.outputs[j] for j in outputs}
        for n in reversed(members):
            if n in needed:
                for j in range(len(self.graph.nodes[n].input_descs)):
                    kind, k = self.graph.feeds[(n, j)]
                    if kind == "node":
                        needed.add(k)
        return [n for n in members if n in needed]

    def _plan(self, sizes, members, output_indices) -> _Kernel:
        nodes, feeds = self.graph.nodes, self.graph.feeds
        reads: list[_Read] = []
        slots: list[tuple] = []  # (op code, a, b, bits, kind, lo, hi)
        slot_of: dict = {}  # ("read", i) / ("const", bits, value) / ("node", n) -> slot

        def slot(key, entry):
            if key not in slot_of:
                slot_of[key] = len(slots)
                slots.append(entry)
            return slot_of[key]

        def operand(n, j):
            desc = nodes[n].input_descs[j]
            kind, k = feeds[(n, j)]
            bits, code = desc.data_type.bits, gk.KIND_CODES[desc.data_type.kind]
            if kind == "node" and nodes[k].op is not None:
                return slot_of[("node", k)]
            if kind == "node":
                value = _scalar_value(nodes[k], desc)
                if value is not None:
                    return slot(("const", bits, value), (gk.OP_CONST, 0, 0, bits, code, value & 0xFFFFFFFF, value >> 32))
                read = _Read("constant", k, desc)
            else:
                read = _Read("input", k, desc)
            if read not in reads:
                reads.append(read)
            return slot(("read", reads.index(read)), (gk.OP_LOAD, reads.index(read), 0, bits, code, 0, 0))

        for n in members:
            node = nodes[n]
            a = operand(n, 0)
            b = operand(n, 1) if len(node.op.inputs) > 1 else a
            # An operator decides on its operands' encoding (a same-type row's output is the
            # same type; a UINT8/UINT32 result such as a count or a flag fits any output width).
            operand_type = node.input_descs[0].data_type
            slot(("node", n), (gk.op_code(node.op), a, b, operand_type.bits, gk.KIND_CODES[operand_type.kind], 0, 0))
        outputs = [(j, nodes[self.graph.outputs[j]].output_desc) for j in output_indices]
        for what, have, limit in (("slots (loads, constants and nodes) for one output", len(slots), gk.MAX_SLOTS),
                                  ("distinct input reads for one output", len(reads), gk.MAX_INPUTS),
                                  ("graph outputs", len(outputs), gk.MAX_OUTPUTS)):
            if have > limit:
                raise _TooBig(f"{have} {what}", f"allowed: at most {limit} in one fused dispatch")
        tier = gk.tier_for(len(slots), len(reads), len(outputs))
        tensors = [r.desc for r in reads] + [d for _, d in outputs]
        csizes, cstrides = coalesce(sizes, [list(t.effective_strides) for t in tensors])
        packed = list(packed_strides(csizes))
        spec = np.zeros(gk.SPEC_COUNT, dtype=np.uint32)
        ids = gk.SPEC_IDS

        def put(name, i, value):
            spec[ids[name] + i] = value

        put("WORKGROUP_SIZE", 0, WORKGROUP_SIZE)
        put("SLOT_COUNT", 0, len(slots))
        bits = [t.data_type.bits for t in tensors]
        group = gk.group_elements(min(bits), max(bits))
        put("GROUP", 0, group)
        pad = gk.MAX_DIMS - len(csizes)
        for d in range(gk.MAX_DIMS):
            put("SIZE", d, 1 if d < pad else csizes[d - pad])
        for k in range(gk.MAX_INPUTS):
            put("IN_MODE", k, gk.MODE_UNUSED)
        for j in range(gk.MAX_OUTPUTS):
            put("OUT_MODE", j, gk.MODE_UNUSED)
        for i, (tensor, strides) in enumerate(zip(tensors, cstrides)):
            is_out = i >= len(reads)
            index = i - len(reads) if is_out else i
            prefix = "OUT" if is_out else "IN"
            mode = gk.MODE_PACKED if strides == packed else gk.MODE_STRIDED
            put(f"{prefix}_MODE", index, mode)
            put(f"{prefix}_BITS", index, tensor.data_type.bits)
            for d, stride in enumerate(strides):
                put(f"{prefix}{index}_STRIDE", pad + d, stride)
        for j, (_, _) in enumerate(outputs):
            put("OUT_SLOT", j, slot_of[("node", self.graph.outputs[outputs[j][0]])])
        for s, (code, a, b, bits, kind, lo, hi) in enumerate(slots):
            for name, value in (("SLOT_OP", code), ("SLOT_A", a), ("SLOT_B", b), ("SLOT_BITS", bits),
                                ("SLOT_KIND", kind), ("SLOT_LO", lo), ("SLOT_HI", hi)):
                put(name, s, value)
        for read in reads:
            if read.source == "constant" and read.index not in self._constants:
                data = nodes[read.index].data
                self._constants[read.index] = self.device.upload(np.frombuffer(data, dtype=np.uint8))
        count = math.prod(sizes)
        groups = -(-count // group)
        per = gk.CPU_GROUPS_PER_INVOCATION if self.device.is_cpu else 1
        name = gk.tier_name(tier)
        program = Program(name, spirv.load(name), spec, gk.PUSH_WORDS)
        return _Kernel(program, tier, reads, outputs, count, kernels.grid(groups, per))

    def execute(self, inputs, outputs) -> None:
        """Queue one execution: `inputs` and `outputs` are lists of `Binding`, one per graph
        input and output. Returns at once.

        Raises:
            ValidationError: the bindings break DirectML's rules (nothing is queued).
        """
        key = binding_key(inputs, outputs)
        launches = self._launches.get(key)
        if launches is None or not all(launch.valid for launch in launches):
            if self.device.closed:
                raise ValidationError(GRAPH, None, "device", "closed", "allowed: a graph of an open device")
            launches = self._launches.put(key, self.launches(*self.check(inputs, outputs)))
        for launch in launches:
            if not self.device.enqueue(launch):
                raise ValidationError(GRAPH, None, "bindings", "a buffer released while queuing",
                                      "allowed: live buffers of an open device")

    def check(self, inputs, outputs):
        """(input ranges, output ranges) of these bindings; `ValidationError` if DirectML rejects them."""
        return check_graph_bindings(GRAPH, self._input_descs, self._output_descs, inputs, outputs, self.device,
                                    in_place=self._in_place)

    def launches(self, in_ranges, out_ranges) -> list:
        """The runtime's prepared dispatches over checked ranges, in order."""
        made = []
        for kernel in self._kernels:
            bound = []
            for read in kernel.reads:
                if read.source == "input":
                    r = in_ranges[read.index]
                    bound.append((r.buffer, r.start, r.end))
                else:
                    buffer = self._constants[read.index]
                    bound.append((buffer, 0, buffer.size_in_bytes))
            written = [(out_ranges[j].buffer, out_ranges[j].start, out_ranges[j].end) for j, _ in kernel.outputs]
            anchor = (bound or written)[0][0]
            _, tier_inputs, tier_outputs = kernel.tier
            buffers = [b for b, _, _ in bound] + [anchor] * (tier_inputs - len(bound))
            buffers += [b for b, _, _ in written] + [anchor] * (tier_outputs - len(written))
            push = np.zeros(gk.PUSH_WORDS, dtype=np.uint32)
            for k, (b, start, _) in enumerate(bound):
                push[k] = (b.arena_offset + start) // 4
            for j, (b, start, _) in enumerate(written):
                push[gk.MAX_INPUTS + j] = (b.arena_offset + start) // 4
            push[gk.PUSH_COUNT] = kernel.count
            made.append(self.device.launch(kernel.program, kernel.grid, buffers, push, reads=bound, writes=written,
                                           name=f"a fused graph of {len(self.graph.nodes)} nodes"))
        return made
