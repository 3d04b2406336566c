"""The fused graphs' program format: limits, op codes, the operator expressions, and the
reducing module's specialization-constant ids and `graph_abi.glsl`.

A graph's nodes become a program of "slots", each a load of a bound input, a constant, or one
table operator applied to earlier slots (dmlgpu/graph_program.py). An element-wise program runs
code generated for it (dmlgpu/graph_source.py: every slot one statement calling its operator's
family function, `operator_expression`), compiled at run time. A program ending in a REDUCE runs
the build-time module shaders/graph.comp (in the sizes `TIERS`), given the program as
specialization constants: the driver specialises it when it makes the pipeline, every slot's
switch (`graph_apply`, generated here from the table) folding to one operator. Everything here
is derived from the operator table:

    python -m dmlgpu shaders graph-abi   # graph_abi.glsl
"""
from __future__ import annotations

from ..table.dtypes import Kind
from ..table.operators import OPERATORS, Operator, ReduceFunction

__all__ = ["BUILD_PASSES", "CPU_GROUPS_PER_INVOCATION", "GRAPH_SOURCE", "GROUP_BYTES", "KIND_CODES", "MAX_DIMS",
           "MAX_INPUTS", "MAX_OUTPUTS", "MAX_SLOTS", "MODE_STRIDED", "MODE_UNUSED", "OP_CODES", "OP_CONST",
           "OP_LOAD", "PUSH_COUNT", "PUSH_WORDS", "SPEC_COUNT", "SPEC_IDS", "TIERS", "graph_abi_glsl",
           "group_elements", "op_code", "operand_widths", "operator_expression", "reduce_tier_defines", "reduce_tier_name", "tier_for"]

GRAPH_SOURCE = "graph.comp"
MAX_DIMS = 8
#: Limits of one fused dispatch, and the sizes of the reducing module, (slots, inputs,
#: outputs): slots of the program (loads, constants and operator nodes), bound inputs (graph
#: inputs as read by their nodes, large constants) and graph outputs. A reducing program runs on
#: the smallest size that holds it: the driver's work when it makes the pipeline grows with the
#: module (lavapipe: a 64 KiB module specialises in a third of the time of a 190 KiB one).
TIERS = ((8, 2, 2), (16, 4, 4), (48, 8, 8))
MAX_SLOTS, MAX_INPUTS, MAX_OUTPUTS = TIERS[-1]
#: spirv-opt passes the build runs on the reducing modules: their functions' variables made SSA
#: values and what is then dead removed, before any specialization (what the driver's compiler
#: must otherwise do first, once per pipeline; benchmarks/NOTES.md, "A new graph's first call on
#: an H100").
BUILD_PASSES = ("--eliminate-local-single-block", "--eliminate-local-single-store", "--ssa-rewrite",
                "--eliminate-dead-code-aggressive", "--simplify-instructions")
#: Elements an invocation of an element-wise graph's code computes at a time ("a group"): 16
#: bytes of the graph's narrowest tensor (16 elements of 8 bits ... 2 of 64 bits), so that it
#: reads and writes whole 16-byte vectors of its packed tensors where it can and owns whole 32-bit
#: words of every packed output (no sub-word write races).
GROUP_BYTES = 16


def group_elements(min_bits: int, max_bits: int) -> int:
    """Elements per group for a graph whose tensors are `min_bits` to `max_bits` wide: 16 bytes
    of the widest, but at least a word of the narrowest. (Larger groups cost the driver more
    code to compile when it makes the pipeline, and gain nothing once the wide tensors move
    whole vectors.)"""
    return max(GROUP_BYTES * 8 // max_bits, 32 // min_bits)


#: Groups each invocation covers (at least) on a CPU driver. A graph's group moves more bytes
#: than a plain operator's unit (kernels.CPU_UNITS_PER_INVOCATION, 4), and on Mesa 25 a grid of
#: half as many workgroups again ran the 16 MiB int4 unpack and 8-step chain 10-20 % faster
#: (benchmarks/NOTES.md, "Fused graphs against numpy on lavapipe", GL2). GPUs get one group
#: per invocation.
CPU_GROUPS_PER_INVOCATION = 8

#: Op codes: a table operator's index in OPERATORS, then a load and a constant.
OP_CODES = {op.short: i for i, op in enumerate(OPERATORS)}
OP_LOAD = len(OPERATORS)
OP_CONST = OP_LOAD + 1
#: How the reducing module addresses a bound tensor: through its strides, or not at all.
MODE_STRIDED, MODE_UNUSED = 1, 2
KIND_CODES = {Kind.UINT: 0, Kind.INT: 1, Kind.FLOAT: 2}
#: Push constants (words): each input's and output's word offset in its arena, then the
#: element count.
PUSH_WORDS = MAX_INPUTS + MAX_OUTPUTS + 1
PUSH_COUNT = MAX_INPUTS + MAX_OUTPUTS

# Specialization constant ids, in order; each (name, count).
_SPEC_BLOCKS = (
    ("WORKGROUP_SIZE", 1),
    ("SLOT_COUNT", 1),
    ("SIZE", MAX_DIMS),
    *((f"IN{k}_STRIDE", MAX_DIMS) for k in range(MAX_INPUTS)),
    *((f"OUT{j}_STRIDE", MAX_DIMS) for j in range(MAX_OUTPUTS)),
    ("IN_MODE", MAX_INPUTS), ("IN_BITS", MAX_INPUTS),
    ("OUT_MODE", MAX_OUTPUTS), ("OUT_BITS", MAX_OUTPUTS), ("OUT_SLOT", MAX_OUTPUTS),
    ("SLOT_OP", MAX_SLOTS), ("SLOT_A", MAX_SLOTS), ("SLOT_B", MAX_SLOTS), ("SLOT_BITS", MAX_SLOTS),
    ("SLOT_KIND", MAX_SLOTS), ("SLOT_LO", MAX_SLOTS), ("SLOT_HI", MAX_SLOTS),
    # The reducing module: the DML_REDUCE_FUNCTION value, the slot it reduces, that
    # slot's width and kind code, and the elements (innermost) reduced into each output element.
    ("RED_FUNCTION", 1), ("RED_SLOT", 1), ("RED_BITS", 1), ("RED_KIND", 1), ("RED_COUNT", 1),
)
SPEC_IDS: dict[str, int] = {}
_next = 0
for _name, _count in _SPEC_BLOCKS:
    SPEC_IDS[_name] = _next
    _next += _count
SPEC_COUNT = _next
del _next, _name, _count


def reduce_tier_name(tier) -> str:
    """The reducing module of a size: each output element the reduction of the program over
    the innermost elements (a fused element-wise prefix -> REDUCE)."""
    slots, inputs, outputs = tier
    return f"graph-reduce-s{slots}-i{inputs}-o{outputs}"


def tier_for(slots: int, inputs: int, outputs: int):
    """The smallest module that holds a program, or None."""
    for tier in TIERS:
        if slots <= tier[0] and inputs <= tier[1] and outputs <= tier[2]:
            return tier
    return None


def reduce_tier_defines(tier) -> dict:
    slots, inputs, outputs = tier
    return {"GRAPH_SLOTS": slots, "GRAPH_INPUTS": inputs, "GRAPH_OUTPUTS": outputs}


def op_code(op: Operator) -> int:
    return OP_CODES[op.short]


def operand_widths(op: Operator) -> set:
    return {t.bits for level in op.support for t in level.input_types}


def operator_expression(op: Operator, bits: int) -> str:
    """A table operator applied to slot values {a} and {b} (uvec2) whose operand width is `bits`,
    as a slot value: its family function on one 64-bit element (uvec2 overload; a count or a
    flag comes back as a uint), or on one element in the low lane of a word, its result masked
    to the width ({mask}), as the family's strided kernels do. (graph_apply's switch, and the
    generated code of each graph, dmlgpu/graph_source.py.)"""
    if bits == 64:
        return f"graph_pair({op.short}({{a}}, {{b}}))"
    return f"uvec2({op.short}({{a}}.x, {{b}}.x) & {{mask}}, 0u)"


def graph_abi_glsl() -> str:
    """graph_abi.glsl: the constants, specialization constants, bindings and push block of
    shaders/graph.comp, and `graph_apply`'s switch over the table's operators."""
    lines = ["// Generated by `python -m dmlgpu shaders graph-abi` from dmlgpu/graph_kernel.py; do not edit.",
             "#ifndef DMLGPU_GRAPH_ABI_GLSL", "#define DMLGPU_GRAPH_ABI_GLSL"]
    consts = {"GRAPH_MAX_DIMS": MAX_DIMS, "GRAPH_MAX_INPUTS": MAX_INPUTS, "GRAPH_MAX_OUTPUTS": MAX_OUTPUTS,
              "GRAPH_MAX_SLOTS": MAX_SLOTS, "OP_LOAD": OP_LOAD, "OP_CONST": OP_CONST,
              "MODE_STRIDED": MODE_STRIDED, "MODE_UNUSED": MODE_UNUSED,
              **{f"KIND_{kind.name}": code for kind, code in KIND_CODES.items()},
              **{f"OP_{op.short.upper()}": i for i, op in enumerate(OPERATORS)},
              **{f"RED_{f.name}": int(f) for f in ReduceFunction}}
    lines += [f"#define {name} {value}" for name, value in consts.items()]
    for name, count in _SPEC_BLOCKS:
        base = SPEC_IDS[name]
        if name == "WORKGROUP_SIZE":
            lines.append(f"layout(local_size_x_id = {base}) in;")
            continue
        if count == 1:
            lines.append(f"layout(constant_id = {base}) const uint {name} = 0u;")
            continue
        init = "1u" if name == "SIZE" else "0u"
        # Declared only where the module's size uses them (a smaller module for the driver).
        bound = ("GRAPH_SLOTS" if name.startswith("SLOT_") else "GRAPH_INPUTS" if name.startswith("IN")
                 else "GRAPH_OUTPUTS" if name.startswith("OUT") else None)
        blocks = name.startswith(("IN", "OUT")) and name.endswith("_STRIDE")
        if blocks:
            lines.append(f"#if {bound} > {int(name[2 if name.startswith('IN') else 3:-7])}")
        for i in range(count):
            guarded = bound is not None and not blocks
            if guarded:
                lines.append(f"#if {bound} > {i}")
            lines.append(f"layout(constant_id = {base + i}) const uint {name}{i} = {init};")
            if guarded:
                lines.append("#endif")
        if blocks:
            lines.append("#endif")
    # The module's size (tier_defines): FOR_SLOTS(X) is X(0) ... X(GRAPH_SLOTS - 1), and so on;
    # inputs bind at 0.., outputs right after them.
    for name in ("SLOTS", "INPUTS", "OUTPUTS"):
        for count in sorted({t[("SLOTS", "INPUTS", "OUTPUTS").index(name)] for t in TIERS}):
            lines.append(f"#if GRAPH_{name} == {count}")
            lines.append(f"#define FOR_{name}(X) " + " ".join(f"X({i})" for i in range(count)))
            lines.append("#endif")
    for k in range(MAX_INPUTS):
        lines.append(f"#if GRAPH_INPUTS > {k}")
        lines.append(f"layout(std430, binding = {k}) readonly buffer In{k}Words {{ uint in{k}_w[]; }};")
        lines.append(f"layout(std430, binding = {k}) readonly buffer In{k}Pairs {{ uvec2 in{k}_p[]; }};")
        lines.append(f"layout(std430, binding = {k}) readonly buffer In{k}Vecs {{ uvec4 in{k}_v[]; }};")
        lines.append("#endif")
    for j in range(MAX_OUTPUTS):
        lines.append(f"#if GRAPH_OUTPUTS > {j}")
        lines.append(f"layout(std430, binding = GRAPH_INPUTS + {j}) buffer Out{j}Words {{ uint out{j}_w[]; }};")
        lines.append(f"layout(std430, binding = GRAPH_INPUTS + {j}) buffer Out{j}Vecs {{ uvec4 out{j}_v[]; }};")
        lines.append("#endif")
    lines.append("layout(push_constant) uniform GraphParams {")
    lines += [f"    uint in_offset{k};" for k in range(MAX_INPUTS)]
    lines += [f"    uint out_offset{j};" for j in range(MAX_OUTPUTS)]
    lines += ["    uint count;", "} p;"]
    # The operators' own functions, from their family sources (shaders/include/<shader>.glsl),
    # with the family's IN_BITS/IN_KIND made the slot's operand type (private variables set before
    # each call, constants once the driver has inlined graph_apply into a slot), then
    # `graph_apply`'s switch over them: an operand of 64 bits goes to the uvec2 overload, a
    # narrower one to the lanes overload. The second include of this file (after graph.comp's
    # graph_pair) adds them.
    lines += ["#endif", "#if defined(GRAPH_ELEMENT_FUNCTIONS) && !defined(DMLGPU_GRAPH_APPLY)",
              "#define DMLGPU_GRAPH_APPLY", "uint graph_bits, graph_kind;",
              "#define IN_BITS graph_bits", "#define IN_KIND graph_kind"]
    lines += [f'#include "{shader}.glsl"' for shader in dict.fromkeys(op.shader for op in OPERATORS)]
    lines += ["#undef IN_BITS", "#undef IN_KIND",
              "uvec2 graph_apply(uint op, uvec2 a, uvec2 b, uint bits, uint kind) {",
              "    graph_bits = bits;", "    graph_kind = kind;", "    uint mask = lane_mask(bits);",
              "    switch (op) {"]
    names = {"a": "a", "b": "b", "mask": "mask"}
    for i, op in enumerate(OPERATORS):
        widths = operand_widths(op)
        lines.append(f"    case {i}u:  // {op.short}")
        if 64 in widths and len(widths) > 1:
            lines.append(f"        if (WIDE(bits)) return {operator_expression(op, 64).format(**names)};")
        lines.append(f"        return {operator_expression(op, 64 if widths == {64} else 32).format(**names)};")
    lines += ["    }", "    return uvec2(0u);", "}", "#endif", ""]
    return "\n".join(lines)
