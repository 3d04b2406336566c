"""Slot programs of the fused graphs, assembled into dispatches.

A program is a list of slots: a load per distinct way a bound tensor is read, a constant per
distinct small constant, then operator nodes in topological order (dmlgpu/graph_kernel.py
describes the format and its limits). `SlotProgram` builds one from a validated graph's nodes;
`assemble` turns it into a `Kernel`: element-wise (each output element from the program), the
code generated for it (dmlgpu/graph_source.py) compiled at run time; or reducing (each output
element the reduction of the program's value over the innermost elements), the build's reducing
module of the smallest size that holds it (shaders/graph.comp), the program in its
specialization constants.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from ..kernels import graph_abi as gk
from . import graph_source
from ..kernels import variants as kernels, spirv
from ..describe.shapes import coalesce
from ..kernels.variants import WORKGROUP_SIZE
from ..runtime import Program, shader_compiler
from ..describe.tensor_desc import packed_strides

__all__ = ["Kernel", "Read", "Reduction", "SlotProgram", "TooBig", "assemble"]


@dataclass(frozen=True)
class Read:
    """A bound tensor of one dispatch: `source` "input" (graph input `index`), "constant"
    (constant node `index`), "scratch" (the compiled graph's scratch buffer `index`) or "output"
    (graph output `index`, written by an earlier dispatch), read through `desc` from `offset`
    bytes into it."""

    source: str
    index: int
    desc: object
    offset: int = 0


@dataclass(frozen=True)
class Reduction:
    """A reducing program: DML_REDUCE_FUNCTION `function` of slot `slot` (its values of width
    `bits` and kind code `kind`) over the innermost `walked` elements of the program's shape."""

    function: int
    slot: int
    bits: int
    kind: int
    walked: int


class TooBig(Exception):
    """A program beyond the fused kernel's limits: (what, allowed)."""


def scalar_value(node, desc) -> int | None:
    """A constant read through `desc` as one repeated element: its raw bits; else None."""
    if any(size > 1 and stride != 0 for size, stride in zip(desc.sizes, desc.effective_strides)):
        return None
    return int.from_bytes(node.data[:desc.data_type.size], "little")


class SlotProgram:
    """The slots of a program over a validated graph's nodes (`graph`: a ValidGraph)."""

    def __init__(self, graph):
        self.graph = graph
        self.reads: list[Read] = []
        self.slots: list[tuple] = []  # (op code, a, b, bits, kind, lo, hi)
        self.slot_of: dict = {}  # ("read", i) / ("const", bits, value) / ("node", n) -> slot

    def _slot(self, key, entry) -> int:
        if key not in self.slot_of:
            self.slot_of[key] = len(self.slots)
            self.slots.append(entry)
        return self.slot_of[key]

    def operand(self, n: int, j: int) -> int:
        """The slot holding input j of node n."""
        nodes, desc = self.graph.nodes, self.graph.nodes[n].input_descs[j]
        kind, k = self.graph.feeds[(n, j)]
        bits, code = desc.data_type.bits, gk.KIND_CODES[desc.data_type.kind]
        if kind == "node" and nodes[k].op is not None:
            return self.slot_of[("node", k)]
        if kind == "node":
            value = scalar_value(nodes[k], desc)
            if value is not None:
                return self._slot(("const", bits, value), (gk.OP_CONST, 0, 0, bits, code, value & 0xFFFFFFFF, value >> 32))
            read = Read("constant", k, desc)
        else:
            read = Read("input", k, desc)
        if read not in self.reads:
            self.reads.append(read)
        i = self.reads.index(read)
        return self._slot(("read", i), (gk.OP_LOAD, i, 0, bits, code, 0, 0))

    def add_node(self, n: int) -> int:
        """Appends element-wise node n (its operands already in slots); returns its slot."""
        node = self.graph.nodes[n]
        a = self.operand(n, 0)
        b = self.operand(n, 1) if len(node.op.inputs) > 1 else a
        # An operator decides on its operands' encoding (a same-type row's output is the same
        # type; a UINT8/UINT32 result such as a count or a flag fits any output width).
        operand_type = node.input_descs[0].data_type
        return self._slot(("node", n), (gk.op_code(node.op), a, b, operand_type.bits,
                                        gk.KIND_CODES[operand_type.kind], 0, 0))

    def load(self, read: Read) -> int:
        """A slot loading `read` (a bound tensor that no node input names)."""
        if read not in self.reads:
            self.reads.append(read)
        i = self.reads.index(read)
        bits, code = read.desc.data_type.bits, gk.KIND_CODES[read.desc.data_type.kind]
        return self._slot(("read", i), (gk.OP_LOAD, i, 0, bits, code, 0, 0))


@dataclass
class Kernel:
    """One dispatch of the fused-graph kernel: its program, what it reads and writes
    (`outputs`: (target, index, desc, slot[, byte offset]), target "output" or "scratch"), the
    element count it is pushed (output elements) and its grid."""

    program: Program
    tier: tuple  # (slots, inputs, outputs) of its module
    reads: list
    outputs: list
    count: int
    grid: tuple

    def launch(self, device, where, name: str):
        """The runtime's prepared dispatch; `where(source, index)` is the (buffer, start, end)
        bound to a read's or an output's source."""
        bound = []
        for read in self.reads:
            buffer, start, end = where(read.source, read.index)
            bound.append((buffer, start + read.offset, end))
        written = []
        for target, index, _, _, *offset in self.outputs:
            buffer, start, end = where(target, index)
            written.append((buffer, start + sum(offset), end))
        anchor = (bound or written)[0][0]
        _, tier_inputs, tier_outputs = self.tier
        buffers = [b for b, _, _ in bound] + [anchor] * (tier_inputs - len(bound))
        buffers += [b for b, _, _ in written] + [anchor] * (tier_outputs - len(written))
        push = np.zeros(gk.PUSH_WORDS, dtype=np.uint32)
        for k, (b, start, _) in enumerate(bound):
            push[k] = (b.arena_offset + start) // 4
        for j, (b, start, _) in enumerate(written):
            push[gk.MAX_INPUTS + j] = (b.arena_offset + start) // 4
        push[gk.PUSH_COUNT] = self.count
        return device.launch(self.program, self.grid, buffers, push, reads=bound, writes=written, name=name)

    dispatches = 1

    def launches(self, device, where, name: str) -> list:
        return [self.launch(device, where, name)]


def assemble(device, sizes, reads, slots, outputs, reduction: Reduction | None = None) -> Kernel:
    """The dispatch of a program over the shape `sizes` (an element-wise program: the output
    shape; a reducing one: the input shape, whose innermost `reduction.walked` elements make one
    output element); `outputs`: (target, index, desc, slot[, byte offset]).

    An element-wise program runs code generated for it (dmlgpu/graph_source.py), compiled at run
    time (`runtime.shader_compiler`: in memory, on disk); a reducing one the build's reducing
    module (shaders/graph.comp) of the smallest size that holds it, the program in its
    specialization constants.

    Raises:
        TooBig: the program exceeds the kernel's limits.
    """
    for what, have, limit in (("slots (loads, constants and nodes) for one output", len(slots), gk.MAX_SLOTS),
                              ("distinct input reads for one output", len(reads), gk.MAX_INPUTS),
                              ("graph outputs", len(outputs), gk.MAX_OUTPUTS)):
        if have > limit:
            raise TooBig(f"{have} {what}", f"allowed: at most {limit} in one fused dispatch")
    tensors = [r.desc for r in reads] + [out[2] for out in outputs]
    if reduction is None:
        bits = [t.data_type.bits for t in tensors]
        group = gk.group_elements(min(bits), max(bits))
        # Where a tensor starts (bytes past its binding: a batch's rows of an output, the second
        # word of pairs): a packed tensor moves 16-byte vectors, so it needs a 16-byte multiple.
        offsets = [r.offset for r in reads] + [sum(out[4:]) for out in outputs]
        csizes, cstrides = coalesce(sizes, [list(t.effective_strides) for t in tensors])
        packed = list(packed_strides(csizes))
        bound = [graph_source.Tensor(strides == packed and offset % 16 == 0, t.data_type.bits, tuple(strides))
                 for t, strides, offset in zip(tensors, cstrides, offsets)]
        source = graph_source.element_wise(csizes, bound[:len(reads)], bound[len(reads):], slots,
                                           [out[3] for out in outputs], group)
        name = "graph-" + hashlib.sha256(source.encode()).hexdigest()[:24]
        program = Program(name, shader_compiler.spirv(source), np.array([WORKGROUP_SIZE], dtype=np.uint32),
                          gk.PUSH_WORDS)
        count = math.prod(sizes)
        grid = kernels.grid(-(-count // group), gk.CPU_GROUPS_PER_INVOCATION if device.is_cpu else 1)
        # bound exactly: the reads, then the outputs
        return Kernel(program, (len(slots), len(reads), len(outputs)), list(reads), list(outputs), count, grid)

    tier = gk.tier_for(len(slots), len(reads), len(outputs))
    # Reads through their strides over the input shape; the output's reduced (innermost)
    # dimensions get stride 0: every walked element maps to its output element.
    csizes = list(sizes)
    cstrides = [list(t.effective_strides) for t in tensors]
    for strides in cstrides[len(reads):]:
        walked, d = reduction.walked, len(sizes) - 1
        while walked > 1:
            strides[d] = 0
            walked //= sizes[d]
            d -= 1
    spec = np.zeros(gk.SPEC_COUNT, dtype=np.uint32)

    def put(name, i, value):
        spec[gk.SPEC_IDS[name] + i] = value

    put("WORKGROUP_SIZE", 0, WORKGROUP_SIZE)
    put("SLOT_COUNT", 0, len(slots))
    pad = gk.MAX_DIMS - len(csizes)
    for d in range(gk.MAX_DIMS):
        put("SIZE", d, csizes[d - pad] if d >= pad else 1)
    for k in range(gk.MAX_INPUTS):
        put("IN_MODE", k, gk.MODE_UNUSED)
    for j in range(gk.MAX_OUTPUTS):
        put("OUT_MODE", j, gk.MODE_UNUSED)
    for i, (tensor, strides) in enumerate(zip(tensors, cstrides)):
        is_out = i >= len(reads)
        index = i - len(reads) if is_out else i
        prefix = "OUT" if is_out else "IN"
        put(f"{prefix}_MODE", index, gk.MODE_STRIDED)
        put(f"{prefix}_BITS", index, tensor.data_type.bits)
        for d, stride in enumerate(strides):
            put(f"{prefix}{index}_STRIDE", pad + d, stride)
    for j, out in enumerate(outputs):
        put("OUT_SLOT", j, out[3])
    for s, (code, a, b, bits_, kind, lo, hi) in enumerate(slots):
        for name, value in (("SLOT_OP", code), ("SLOT_A", a), ("SLOT_B", b), ("SLOT_BITS", bits_),
                            ("SLOT_KIND", kind), ("SLOT_LO", lo), ("SLOT_HI", hi)):
            put(name, s, value)
    for field, value in (("RED_FUNCTION", reduction.function), ("RED_SLOT", reduction.slot),
                         ("RED_BITS", reduction.bits), ("RED_KIND", reduction.kind),
                         ("RED_COUNT", reduction.walked)):
        put(field, 0, value)
    count = math.prod(sizes) // reduction.walked
    name = gk.reduce_tier_name(tier)
    program = Program(name, spirv.load(name), spec, gk.PUSH_WORDS)
    return Kernel(program, tier, list(reads), list(outputs), count, kernels.grid(count))
