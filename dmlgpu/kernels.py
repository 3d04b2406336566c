"""Shader variants and the shader ABI, derived from the operator table.

The build (CMake) asks this module for the list of variants to compile and for `abi.glsl`, the
push-constant block and specialization-constant ids shared with the runtime; the runtime asks it
which variant runs a validated operator. Nothing here is typed twice:

    python -m dmlgpu shaders variants   # one "name|source|DEFINE=value|..." line per variant
    python -m dmlgpu shaders abi        # abi.glsl
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import graph_kernel
from .dtypes import DataType, Kind
from .operators import OPERATORS, Operator

#: Each tensor is bound at a 16-byte-aligned offset, so the flat layout may use 16-byte vectors.
FLAT, ROWS, GATHER, STRIDED = "flat", "rows", "gather", "strided"
LAYOUTS = (FLAT, ROWS, GATHER, STRIDED)
MAX_DIMS = 8
WORKGROUP_SIZE = 256
#: Grids are a power of two of workgroups, at most this many; invocations stride over the rest.
#: So one pipeline per grid size serves every tensor size.
MAX_GROUPS = 1 << 16
#: Units each invocation covers (at least) on a CPU driver: llvmpipe pays per invocation and per
#: workgroup, so a grid of a quarter as many groups, each invocation looping over 4 units, runs
#: 1.3-2.7x faster on Mesa 25 from 1 to 64 MiB (benchmarks/NOTES.md, lavapipe L13). GPUs get
#: one unit per invocation (their kernels run at copy bandwidth that way).
CPU_UNITS_PER_INVOCATION = 4
#: Push constants, in block order; every field is a uint. Offsets are in 32-bit words.
PUSH_FIELDS = ("in_offset0", "in_offset1", "out_offset", "count")
#: Specialization constant ids: the workgroup size, then MAX_DIMS each of sizes and strides.
SPEC_WORKGROUP_SIZE = 0
SPEC_SIZES = 1
SPEC_STRIDES_IN0 = SPEC_SIZES + MAX_DIMS
SPEC_STRIDES_IN1 = SPEC_STRIDES_IN0 + MAX_DIMS
SPEC_STRIDES_OUT = SPEC_STRIDES_IN1 + MAX_DIMS
SPEC_COUNT = SPEC_STRIDES_OUT + MAX_DIMS
#: The flat layout's broadcast scalar operands: each input's width in bits, 0 for a packed one.
SPEC_SCALAR_IN0 = SPEC_COUNT
SPEC_SCALAR_IN1 = SPEC_COUNT + 1
KIND_CODES = {Kind.UINT: 0, Kind.INT: 1, Kind.FLOAT: 2}


@dataclass(frozen=True)
class Variant:
    """One compiled shader module: an operator's source with a set of defines."""

    op: Operator
    layout: str
    facts: tuple[tuple[str, object], ...]  # (fact, value) in the row's order

    @property
    def name(self) -> str:
        parts = [self.op.short, self.layout]
        for fact, value in self.facts:
            parts.append(value.value if isinstance(value, Kind) else f"{fact.split('_')[0]}{value}")
        return "-".join(parts)

    @property
    def source(self) -> str:
        return f"{self.op.shader}.comp"

    @property
    def unit_bytes(self) -> int:
        """Output bytes an invocation owns at a time: a 16-byte vector, or less when the output
        is narrower than the input, so that an invocation reads about one 16-byte input vector
        and neighbouring invocations read neighbouring input (never less than one word)."""
        facts = dict(self.facts)
        in_bits = facts.get("in_bits", 0)
        out_bits = facts.get("out_bits", in_bits)
        if out_bits >= in_bits:
            return 16
        return max(4, 16 * out_bits // in_bits)

    @property
    def defines(self) -> dict[str, object]:
        # OP names the operator's function(s) in its family source; ARITY its input count.
        defines = {"OP": self.op.short, "ARITY": len(self.op.inputs), "LAYOUT_" + self.layout.upper(): 1}
        if self.layout != STRIDED:
            defines["UNIT_WORDS"] = self.unit_bytes // 4
        for fact, value in self.facts:
            if fact == "kind":
                defines["IN_KIND"] = KIND_CODES[value]
            else:
                defines[fact.upper()] = value
        return defines


def grid(units: int, per_invocation: int = 1) -> tuple[int, int, int]:
    """A power-of-two grid of workgroups that covers `units`, `per_invocation` or more per
    invocation (x at most 2^15 wide: every Vulkan device allows 65535 groups per dimension)."""
    needed = max(1, math.ceil(units / (WORKGROUP_SIZE * per_invocation)))
    groups = min(1 << (needed.bit_length() - 1), MAX_GROUPS)
    x = min(groups, 1 << 15)
    return (x, groups // x, 1)


def _fact(fact: str, in_type: DataType, out_type: DataType):
    return {"in_bits": in_type.bits, "out_bits": out_type.bits, "kind": in_type.kind}[fact]


def variant_for(op: Operator, in_type: DataType, out_type: DataType, layout: str) -> Variant:
    """The shader variant that runs `op` on these data types in this layout."""
    facts = op.flat_facts if layout == FLAT else op.element_facts
    return Variant(op, layout, tuple((f, _fact(f, in_type, out_type)) for f in facts))


def all_variants() -> list[Variant]:
    """Every variant any validated operator can select (the newest level allows the most types)."""
    seen: dict[str, Variant] = {}
    for op in OPERATORS:
        row = op.newest
        for in_type in row.input_types:
            out_types = (in_type,) if op.same_type else row.output_types
            for out_type in out_types:
                for layout in LAYOUTS:
                    variant = variant_for(op, in_type, out_type, layout)
                    seen.setdefault(variant.name, variant)
    return list(seen.values())


def abi_glsl() -> str:
    consts = {
        "MAX_DIMS": MAX_DIMS,
        "SPEC_WORKGROUP_SIZE": SPEC_WORKGROUP_SIZE,
        "SPEC_SIZES": SPEC_SIZES,
        "SPEC_STRIDES_IN0": SPEC_STRIDES_IN0,
        "SPEC_STRIDES_IN1": SPEC_STRIDES_IN1,
        "SPEC_STRIDES_OUT": SPEC_STRIDES_OUT,
        "SPEC_SCALAR_IN0": SPEC_SCALAR_IN0,
        "SPEC_SCALAR_IN1": SPEC_SCALAR_IN1,
        **{f"KIND_{kind.name}": code for kind, code in KIND_CODES.items()},
    }
    lines = ["// Generated by `python -m dmlgpu shaders abi` from dmlgpu/kernels.py; do not edit.",
             "#ifndef DMLGPU_ABI_GLSL", "#define DMLGPU_ABI_GLSL"]
    lines += [f"#define {name} {value}" for name, value in consts.items()]
    lines.append("layout(push_constant) uniform Params {")
    lines += [f"    uint {name};" for name in PUSH_FIELDS]
    lines += ["} p;", "#endif", ""]
    return "\n".join(lines)


@dataclass(frozen=True)
class Module:
    """A SPIR-V module as the build makes it: name, family source and defines."""

    name: str
    source: str
    defines: dict


def modules() -> list[Module]:
    """Every SPIR-V module the build makes: each variant, and the fused-graph kernel in each of
    its sizes (its program is specialization constants: dmlgpu/graph_kernel.py)."""
    found = [Module(v.name, v.source, v.defines) for v in all_variants()]
    return found + [*(Module(graph_kernel.tier_name(t), graph_kernel.GRAPH_SOURCE, graph_kernel.tier_defines(t))
                      for t in graph_kernel.TIERS)]


def module_names() -> list[str]:
    return [m.name for m in modules()]


def variant_lines() -> str:
    lines = []
    for m in modules():
        defines = "|".join(f"{k}={val}" for k, val in m.defines.items())
        lines.append(f"{m.name}|{m.source}|{defines}\n")
    return "".join(lines)
