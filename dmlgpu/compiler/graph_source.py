"""GLSL for one element-wise fused graph: its program written out as straight-line code.

A graph's dispatch runs code generated for that graph alone (`element_wise`): every slot of its
program (a load of a bound tensor, a constant, or a table operator applied to earlier slots) is
one statement calling the operator's own function from its family source
(shaders/include/<shader>.glsl, installed with the package as dmlgpu/glsl/), with the operand
type fixed; a group's elements are written out one after another, every size, stride, width and
mode is a literal. So the driver gets no switch to fold, no loop over registers to unroll and no
code for other graphs, and compiles it about as fast as a plain operator's kernel: on an H100
24-79 ms against 53-169 ms for the build-time module specialised by constants
(benchmarks/NOTES.md, "A new graph's first call on an H100"). `dmlgpu.runtime.shader_compiler`
compiles the text in-process (glslang, built into dmlgpu.runtime._glsl) and keeps the SPIR-V on disk.

The layout is graph.comp's (which still runs the graphs that end in a REDUCE): invocations own
groups of `group` consecutive elements of the output shape, 16 bytes of the narrowest tensor, so
packed tensors move as whole vectors and a group owns whole 32-bit words of every packed output;
strided tensors are addressed element by element through their strides, sub-word strided
outputs with atomics; every input element of a group is read before any output of it is
written (in place). The elements past the last whole group are computed one at a time by
invocation 0 after its loop.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

from ..kernels import graph_abi as gk
from ..errors import DeviceError
from ..table.operators import OPERATORS

__all__ = ["Tensor", "element_wise", "family_sources"]


@dataclass(frozen=True)
class Tensor:
    """A bound tensor as the program addresses it: packed (in the output's element order, its
    binding's start a 16-byte multiple) or through `strides` (elements, one per dimension of the
    coalesced shape), `bits` wide."""

    packed: bool
    bits: int
    strides: tuple


@functools.lru_cache(maxsize=None)
def family_sources() -> str:
    """words.glsl and every operator family's functions, as installed with the package."""
    folder = resources.files("dmlgpu") / "glsl"
    names = ["words.glsl", *dict.fromkeys(f"{op.shader}.glsl" for op in OPERATORS)]
    try:
        return "\n".join((folder / name).read_text() for name in names)
    except FileNotFoundError as error:
        raise DeviceError(f"shader source {error.filename} is not installed with dmlgpu ({folder}); reinstall with "
                          "tools/bootstrap.sh setup") from None


def _mask(bits: int) -> str:
    return "0xFFFFFFFFu" if bits >= 32 else f"{(1 << bits) - 1}u"


def _u(value: int) -> str:
    return f"{value & 0xFFFFFFFF}u"


def _element(buffer: str, base: str, at: str, bits: int) -> str:
    """The element of width `bits` at element offset `at` from word `base` of a words array, as
    a (lo, hi) pair, the bits above the width zero."""
    if bits == 64:
        return f"uvec2({buffer}[{base} + 2u * ({at})], {buffer}[{base} + 2u * ({at}) + 1u])"
    return f"uvec2(({buffer}[{base} + ({at}) * {bits}u / 32u] >> ((({at}) * {bits}u) % 32u)) & {_mask(bits)}, 0u)"


def _store(j: int, bits: int, at: str, value: str) -> list[str]:
    """Output j's element at element offset `at`, stored alone (sub-word: atomics, neighbouring
    elements of the word may be other invocations')."""
    base = f"p.out_offset{j}"
    if bits == 64:
        return [f"out{j}_w[{base} + 2u * ({at})] = {value}.x;", f"out{j}_w[{base} + 2u * ({at}) + 1u] = {value}.y;"]
    if bits == 32:
        return [f"out{j}_w[{base} + ({at})] = {value}.x;"]
    return [f"{{ uint word = {base} + ({at}) * {bits}u / 32u, shift = (({at}) * {bits}u) % 32u, "
            f"mask = {_mask(bits)} << shift;",
            f"  atomicAnd(out{j}_w[word], ~mask); atomicOr(out{j}_w[word], ({value}.x << shift) & mask); }}"]


def element_wise(sizes, reads: list, outputs: list, slots: list, out_slots: list, group: int) -> str:
    """The GLSL of a program over the coalesced shape `sizes` (innermost last): `reads`/`outputs`
    the bound tensors (bindings 0.. then after the reads), `slots` the program's (op code, a, b,
    bits, kind code, lo, hi), `out_slots` the slot each output stores."""
    dims = list(sizes)
    addressed = not all(t.packed for t in reads + outputs)

    def coordinates(index: str) -> list[str]:
        """c<d> of element `index` (only when some tensor is strided)."""
        if not addressed:
            return []
        lines = [f"uint rest = {index};"]
        for d in range(len(dims) - 1, -1, -1):
            lines.append(f"uint c{d} = rest % {dims[d]}u;" + (f" rest /= {dims[d]}u;" if d else ""))
        return lines

    def offset(strides) -> str:
        terms = [f"c{d} * {_u(s)}" for d, s in enumerate(strides) if s and dims[d] > 1]
        return " + ".join(terms) or "0u"

    def program(load) -> list[str]:
        """The slots, `load(i)` the expression of bound read i."""
        lines = []
        for s, (code, a, b, bits, kind, lo, hi) in enumerate(slots):
            if code == gk.OP_LOAD:
                lines.append(f"uvec2 s{s} = {load(a)};")
            elif code == gk.OP_CONST:
                lines.append(f"uvec2 s{s} = uvec2({_u(lo)}, {_u(hi)});")
            else:
                expression = gk.operator_expression(OPERATORS[code], bits).format(a=f"s{a}", b=f"s{b}",
                                                                                 mask=_mask(bits))
                lines.append(f"graph_bits = {bits}u; graph_kind = {kind}u; uvec2 s{s} = {expression};")
        return lines

    out = ["#version 450", "#extension GL_EXT_control_flow_attributes : require",
           f"layout(local_size_x_id = {gk.SPEC_IDS['WORKGROUP_SIZE']}) in;"]
    # Inputs are not declared readonly: an output may be the same memory (in place), and NVIDIA's
    # compiler moved a load through a readonly binding past an atomic store to that word through
    # the output's (H100, driver 580.159: an in-place tail element read after its own store).
    for k, t in enumerate(reads):
        out.append(f"layout(std430, binding = {k}) buffer In{k}Words {{ uint in{k}_w[]; }};")
        if t.packed:
            out.append(f"layout(std430, binding = {k}) buffer In{k}Pairs {{ uvec2 in{k}_p[]; }};")
            out.append(f"layout(std430, binding = {k}) buffer In{k}Vecs {{ uvec4 in{k}_v[]; }};")
    for j, t in enumerate(outputs):
        binding = len(reads) + j
        out.append(f"layout(std430, binding = {binding}) buffer Out{j}Words {{ uint out{j}_w[]; }};")
        if t.packed:
            out.append(f"layout(std430, binding = {binding}) buffer Out{j}Vecs {{ uvec4 out{j}_v[]; }};")
    out.append("layout(push_constant) uniform GraphParams {")
    out += [f"    uint in_offset{k};" for k in range(gk.MAX_INPUTS)]
    out += [f"    uint out_offset{j};" for j in range(gk.MAX_OUTPUTS)]
    out += ["    uint count;", "} p;"]
    out += [f"#define KIND_{kind.name} {code}" for kind, code in gk.KIND_CODES.items()]
    # The families' IN_BITS/IN_KIND are the slot's operand type: private variables assigned
    # before each call, constants once the driver has inlined the call.
    out += ["uint graph_bits, graph_kind;", "#define IN_BITS graph_bits", "#define IN_KIND graph_kind",
            family_sources(), "#undef IN_BITS", "#undef IN_KIND",
            "uvec2 graph_pair(uvec2 value) { return value; }", "uvec2 graph_pair(uint value) { return uvec2(value, 0u); }"]

    body = ["void main() {",
            "    uint n = p.count;",
            f"    uint whole = n / {group}u;",
            "    uint first = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x"
            " + gl_LocalInvocationID.x;",
            "    uint step_ = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;",
            "    for (uint g = first; g < whole; g = (whole - g > step_) ? g + step_ : whole) {"]
    inner = []
    for k, t in enumerate(reads):  # a packed input's group: whole vectors (or words) into registers
        if not t.packed:
            continue
        words = group * t.bits // 32
        base = f"(p.in_offset{k} + g * {words}u)"
        if words >= 4:
            for q in range(words // 4):
                inner.append(f"uvec4 i{k}v{q} = in{k}_v[{base} / 4u + {q}u];")
                inner += [f"uint i{k}w{4 * q + c} = i{k}v{q}.{'xyzw'[c]};" for c in range(4)]
        elif words == 2:
            inner += [f"uvec2 i{k}p = in{k}_p[{base} / 2u];", f"uint i{k}w0 = i{k}p.x;", f"uint i{k}w1 = i{k}p.y;"]
        else:
            inner.append(f"uint i{k}w0 = in{k}_w[{base}];")
    for j, t in enumerate(outputs):
        if t.packed:
            inner += [f"uint o{j}w{q} = 0u;" for q in range(group * t.bits // 32)]
    for i in range(group):
        def load(k, i=i):
            t = reads[k]
            if not t.packed:
                return _element(f"in{k}_w", f"p.in_offset{k}", offset(t.strides), t.bits)
            if t.bits == 64:
                return f"uvec2(i{k}w{2 * i}, i{k}w{2 * i + 1})"
            return f"uvec2((i{k}w{i * t.bits // 32} >> {(i * t.bits) % 32}u) & {_mask(t.bits)}, 0u)"
        element = coordinates(f"g * {group}u + {i}u") + program(load)
        for j, t in enumerate(outputs):
            value = f"s{out_slots[j]}"
            if not t.packed:
                element += _store(j, t.bits, offset(t.strides), value)
            elif t.bits == 64:
                element += [f"o{j}w{2 * i} = {value}.x;", f"o{j}w{2 * i + 1} = {value}.y;"]
            else:
                element.append(f"o{j}w{i * t.bits // 32} |= {value}.x << {(i * t.bits) % 32}u;")
        inner += ["{"] + ["    " + line for line in element] + ["}"]
    for j, t in enumerate(outputs):
        if not t.packed:
            continue
        words = group * t.bits // 32
        base = f"(p.out_offset{j} + g * {words}u)"
        if words >= 4:
            inner += [f"out{j}_v[{base} / 4u + {q}u] = uvec4({', '.join(f'o{j}w{4 * q + c}' for c in range(4))});"
                      for q in range(words // 4)]
        else:
            inner += [f"out{j}_w[{base} + {q}u] = o{j}w{q};" for q in range(words)]
    body += ["        " + line for line in inner] + ["    }"]

    # The tail: elements past the last whole group, one at a time, by invocation 0.
    def tail_load(k):
        t = reads[k]
        return _element(f"in{k}_w", f"p.in_offset{k}", "e" if t.packed else offset(t.strides), t.bits)
    tail = coordinates("e") + program(tail_load)
    for j, t in enumerate(outputs):
        tail += _store(j, t.bits, "e" if t.packed else offset(t.strides), f"s{out_slots[j]}")
    body += ["    if (first == 0u) {", f"        for (uint e = whole * {group}u; e < n; ++e) {{"]
    body += ["            " + line for line in tail] + ["        }", "    }", "}"]
    return "\n".join(out + body) + "\n"
