"""Shader variants and the shader ABI, derived from the operator table.

The build (CMake) asks this module for the list of variants to compile and for `abi.glsl`, the
push-constant block and specialization-constant ids shared with the runtime; the runtime asks it
which variant runs a validated operator. Nothing here is typed twice:

    python -m dmlgpu shaders variants   # one "name|source|passes|DEFINE=value|..." line per variant
    python -m dmlgpu shaders abi        # abi.glsl
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import graph_abi as graph_kernel
from ..table.dtypes import DataType, Kind
from ..table.operators import OPERATORS, SELECTIONS, Operator, ReduceFunction

__all__ = ["CPU_UNITS_PER_INVOCATION", "KIND_CODES", "LAYOUTS", "MAX_DIMS", "MAX_GROUPS", "Module", "PUSH_FIELDS",
           "SPEC_COUNT", "SPEC_SCALAR_IN0", "SPEC_SCALAR_IN1", "SPEC_SIZES", "SPEC_STRIDES_IN0", "SPEC_STRIDES_IN1",
           "SPEC_STRIDES_OUT", "SPEC_WORKGROUP_SIZE", "Variant", "WORKGROUP_SIZE", "abi_glsl", "all_variants", "grid",
           "DOUBLE_SUMS", "double_sums",
           "ceil_pow2", "module_names", "modules", "variant_for", "variant_lines"]

#: Each tensor is bound at a 16-byte-aligned offset, so the flat layout may use 16-byte vectors.
FLAT, ROWS, GATHER, STRIDED = "flat", "rows", "gather", "strided"
LAYOUTS = (FLAT, ROWS, GATHER, STRIDED)
#: The reduce and top-k families' one layout: an invocation per output element (REDUCE) or per
#: sequence (TOP_K1), walking the input through sizes and strides in a parameter buffer.
AXES = "axes"
#: Their push constants (words): the input's and output's word offsets in their arenas, then the
#: third binding's (REDUCE's states, TOP_K1's indices), the parameter buffer's, and TOP_K1's
#: candidate indices' (binding 4, read in its second pass over a spanning sequence).
SELECTION_PUSH_FIELDS = ("in_offset", "out_offset", "aux_offset", "params_offset", "source_offset")
SELECTION_WORKGROUP_SIZE = 64
#: The parameter buffer's header (shaders/include/select.glsl), in order: work items (output
#: elements, sequences), elements each walks, outer and walked dimension counts, then REDUCE's
#: lanes per unit, chunk length, chunks per output element, mode (REDUCE_MODES), the index of
#: the first walked element (ARGMIN/ARGMAX, TOP_K1: a piece of a longer walk), the count
#: AVERAGE divides by, and element offsets added to every input and (value) output position
#: (a piece bound whole); then TOP_K_SORT's words for one pass (shaders/top_k.comp): its step
#: (TOP_K_SORT_STEPS), the run length kept (a power of two >= K), the bitonic stage and stride,
#: entries per sequence it reads, where (in entries of the scratch) the sequences' entries it
#: reads and writes start and how far apart, and whether it halves pairs of runs as it reads. Each is `SP_<NAME>` in abi.glsl; the dimensions
#: follow (SP_DIMS).
SELECT_HEADER = ("items", "walked", "outer_dims", "walked_dims", "lanes", "chunk", "chunks", "mode",
                 "index_base", "count", "in_base", "out_base", "sort_step", "sort_run", "sort_stage",
                 "sort_stride", "sort_entries", "sort_from", "sort_from_step", "sort_to", "sort_to_step", "sort_halve")
#: Each header word's index in the parameter words, by name.
SELECT_WORD = {name: i for i, name in enumerate(SELECT_HEADER)}
#: Mode bits: REDUCE reads states (not elements), writes states (not the output); TOP_K1 reads
#: its indices from binding 4; REDUCE's last workgroup to finish writing states merges them
#: (shaders/reduce.comp).
SELECT_MODES = {"REDUCE_FROM_STATES": 1, "REDUCE_TO_STATES": 2, "TOP_K_FROM_CANDIDATES": 4, "REDUCE_MERGE_LAST": 8,
                "TOP_K_GROUP": 16, "TOP_K_SORT": 32, "TOP_K_SORT_OUT": 64, "REDUCE_QUICK": 128,
                "REDUCE_GAVE_UP": 256}
#: TOP_K_SORT's steps (the sort_step word; shaders/top_k.comp): load blocks of TOP_K_GROUP_SLOTS
#: elements as (key, index) entries and sort them into runs, then fold runs pairwise in shared
#: memory, compare-exchange at one stride across blocks, merge within blocks (the last two may
#: first halve pairs of runs as they read: sort_halve).
TOP_K_SORT_STEPS = {"TOP_K_FIRST": 0, "TOP_K_FOLD": 1, "TOP_K_EXCHANGE": 2, "TOP_K_MERGE": 3}
#: TOP_K1 over sequences of at least TOP_K_GROUP_WALK elements, K up to TOP_K_GROUP_SLOTS, gives
#: each sequence a workgroup (TOP_K_GROUP): min(SELECTION_WORKGROUP_SIZE, TOP_K_GROUP_SLOTS / K)
#: invocations keep the K best of every so many elements in shared memory (12 bytes a slot: 12 KiB,
#: under Vulkan's least maxComputeSharedMemorySize of 16 KiB) and one merges them
#: (shaders/top_k.comp). Shorter sequences, or a larger K, get one invocation each.
TOP_K_GROUP_SLOTS = 1024
TOP_K_GROUP_WALK = 4096
#: Elements a REDUCE short-walk invocation loads before it adds them (shaders/reduce.comp
#: short_units: REDUCE_SHORT_LOADS / SHORT_WALK output elements' walks; the grid:
#: dmlgpu/kernels/compiled_selection.py).
REDUCE_SHORT_LOADS = 32
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
            if isinstance(value, Kind):
                parts.append(value.value)
            elif isinstance(value, ReduceFunction):
                parts.append(value.name.lower())
            else:
                parts.append(f"{fact.split('_')[0]}{value}")
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
        if self.layout not in (STRIDED, AXES):
            defines["UNIT_WORDS"] = self.unit_bytes // 4
        for fact, value in self.facts:
            if fact == "kind":
                defines["IN_KIND"] = KIND_CODES[value]
            else:
                defines[fact.upper()] = int(value)
        return defines


def ceil_pow2(n: int) -> int:
    """The least power of two at least `n` (1 for n <= 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


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


#: The REDUCE functions with a variant in double accumulators (shaders/reduce.comp DOUBLES) for
#: FLOAT32 in and out, run on CPU drivers with 64-bit floats (compiled_selection.DOUBLE_ACCUMULATORS): the
#: same bits as the triples (each result proved correctly rounded, else computed again by them)
#: with a third of their arithmetic.
DOUBLE_SUMS = (ReduceFunction.SUM, ReduceFunction.L1)


def double_sums(function, in_type: DataType, out_type: DataType) -> bool:
    """Whether REDUCE `function` from `in_type` to `out_type` has a DOUBLES variant."""
    return function in DOUBLE_SUMS and in_type == DataType.FLOAT32 and out_type == DataType.FLOAT32


def selection_variant(op: Operator, in_type: DataType, out_type: DataType, function=None,
                      doubles: bool = False) -> Variant:
    """The variant that runs a reduce or top-k row (`out_type`: REDUCE's output, TOP_K1's
    index output; `function`: REDUCE's DML_REDUCE_FUNCTION; `doubles`: its DOUBLES variant,
    where double_sums)."""
    facts = tuple((f, _fact(f, in_type, out_type)) for f in op.element_facts)
    if function is not None:
        facts = (("function", ReduceFunction(function)),) + facts
    if doubles:
        assert double_sums(function, in_type, out_type), (function, in_type, out_type)
        facts += (("doubles", 1),)
    return Variant(op, AXES, facts)


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
    for op in SELECTIONS:
        for function, in_type, out_type in op.computed_cases():
            variant = selection_variant(op, in_type, out_type, function)
            seen.setdefault(variant.name, variant)
            if double_sums(function, in_type, out_type):
                variant = selection_variant(op, in_type, out_type, function, doubles=True)
                seen.setdefault(variant.name, variant)
    return list(seen.values())


def abi_glsl() -> str:
    consts = {
        "MAX_DIMS": MAX_DIMS,
        "SELECTION_WORKGROUP_SIZE": SELECTION_WORKGROUP_SIZE,
        "TOP_K_GROUP_SLOTS": f"{TOP_K_GROUP_SLOTS}u",
        "REDUCE_SHORT_LOADS": f"{REDUCE_SHORT_LOADS}u",
        "SEARCH_HIST_BINS": SEARCH_HIST_BINS,
        "SEARCH_HIST_QUERIES": SEARCH_HIST_QUERIES,
        "SEARCH_DIGIT_BITS": SEARCH_DIGIT_BITS,
        "SEARCH_SORT_BITS": SEARCH_SORT_BITS,
        "SPEC_WORKGROUP_SIZE": SPEC_WORKGROUP_SIZE,
        "SPEC_SIZES": SPEC_SIZES,
        "SPEC_STRIDES_IN0": SPEC_STRIDES_IN0,
        "SPEC_STRIDES_IN1": SPEC_STRIDES_IN1,
        "SPEC_STRIDES_OUT": SPEC_STRIDES_OUT,
        "SPEC_SCALAR_IN0": SPEC_SCALAR_IN0,
        "SPEC_SCALAR_IN1": SPEC_SCALAR_IN1,
        **{f"KIND_{kind.name}": code for kind, code in KIND_CODES.items()},
        **{f"RED_{f.name}": int(f) for f in ReduceFunction},
        **{f"SP_{name.upper()}": f"{i}u" for i, name in enumerate(SELECT_HEADER)},
        "SP_DIMS": f"{len(SELECT_HEADER)}u",
        **{name: f"{bit}u" for name, bit in SELECT_MODES.items()},
        **{name: f"{step}u" for name, step in TOP_K_SORT_STEPS.items()},
    }
    lines = ["// Generated by `python -m dmlgpu shaders abi` from dmlgpu/kernels/variants.py; do not edit.",
             "#ifndef DMLGPU_ABI_GLSL", "#define DMLGPU_ABI_GLSL"]
    lines += [f"#define {name} {value}" for name, value in consts.items()]
    # The element-wise block; the reduce/top-k families and the Hamming search have blocks of their own.
    lines.append("#if defined(LAYOUT_AXES)")
    lines.append("layout(push_constant) uniform SelectParams {")
    lines += [f"    uint {name};" for name in SELECTION_PUSH_FIELDS]
    lines += ["} sp;", "#elif defined(HAMMING_SCAN) || defined(HAMMING_MERGE)",
              "layout(push_constant) uniform HammingParams {"]
    lines += [f"    uint {name};" for name in HAMMING_PUSH_FIELDS]
    lines += ["} hp;", "#elif defined(SEARCH_KERNEL)", "layout(push_constant) uniform SearchParams {"]
    lines += [f"    uint {name};" for name in SEARCH_PUSH_FIELDS]
    lines += ["} sp;", "#else", "layout(push_constant) uniform Params {"]
    lines += [f"    uint {name};" for name in PUSH_FIELDS]
    lines += ["} p;", "#endif", "#endif", ""]
    return "\n".join(lines)


@dataclass(frozen=True)
class Module:
    """A SPIR-V module as the build makes it: name, family source, defines, and the SPIRV-Tools
    optimizer passes (`spirv-opt` flags) run on glslang's output before it is validated."""

    name: str
    source: str
    defines: dict
    passes: tuple = ()


#: The fused Hamming search (XOR -> BIT_COUNT -> REDUCE(SUM) -> TOP_K, shaders/hamming.comp), for
#: k up to HAMMING_REGISTER_K: a scan whose lanes keep their query's k nearest of a tile of rows in
#: registers (k a specialization constant), and a merge of the tiles' lists per query;
#: HAMMING_PUSH_FIELDS is their push-constant block, in order. Larger k, range searches and
#: Tanimoto take the selection kernels (SEARCH_KERNELS, shaders/search.comp).
HAMMING_REGISTER_SCAN, HAMMING_REGISTER_MERGE = "hamming-register-scan", "hamming-register-merge"
#: The register path serves k up to 20: past it the sampled selection is faster (an H200, 1M x
#: 256-bit, 1,024 queries: register 254-275 / 209 G distances/s at k = 24 / 32, selection
#: 275-292 / 269-277; at k = 16 and below the register path leads; lavapipe: the selection is as
#: fast or faster at every k from 10; benchmarks/NOTES.md, session 8).
HAMMING_REGISTER_K = 20
HAMMING_PUSH_FIELDS = ("in_offset", "query_offset", "out_offset", "words", "rows", "row_base",
                       "rows_per_slice", "k", "slices", "slice_base", "slices_total", "queries", "tile_base", "tiles",
                       "query_base", "query_end", "in_at", "out_at", "bound_at")
#: The selection kernels of shaders/search.comp (dmlgpu/kernels/search_programs.py plans them):
#: a sampled histogram of keys, the bound it gives, the gather of rows within the bound, the
#: selection per query, a copy of rows, and the answer split into values and int64 ids.
SEARCH_HIST, SEARCH_BOUND, SEARCH_GATHER = "search-hist", "search-bound", "search-gather"
SEARCH_SELECT, SEARCH_ROWS, SEARCH_FINISH = "search-select", "search-rows", "search-finish"
SEARCH_KERNELS = (SEARCH_HIST, SEARCH_BOUND, SEARCH_GATHER, SEARCH_SELECT, SEARCH_ROWS, SEARCH_FINISH)
SEARCH_PUSH_FIELDS = ("db_offset", "query_offset", "aux_offset", "out_offset", "cand_offset", "scratch_offset",
                      "words", "rows", "row_base", "rows_per_tile", "tiles", "tile_base", "tile_index_base",
                      "tiles_total", "queries", "query_base", "k", "capacity", "stride", "shift", "key_bits",
                      "hist_at", "bounds_at", "counts_at", "regions_at", "status_at", "lims_at", "query_end", "reach")
#: The sample histogram: bins per query, queries per workgroup (8 KiB of shared memory).
SEARCH_HIST_BINS, SEARCH_HIST_QUERIES = 512, 4
#: The selection's radix digits: 10 bits (a 4 KiB histogram): a 1,023-bit Hamming key in one
#: pass, a Tanimoto key (28 bits) in three.
SEARCH_DIGIT_BITS = 10
#: The sort of the k selected entries: stable LSD passes of 5-bit digits over key - least key,
#: each lane counting its own run of entries (32 digits x 64 lanes: an 8 KiB table): a 256-bit
#: Hamming top-k in one or two passes.
SEARCH_SORT_BITS = 5
#: The register scan's specialization constants: the code's 32-bit words, the queries a lane
#: serves (one: the lanes of a workgroup already share each database load), k, rows at once,
#: carry-save bit counts.
HAMMING_SPEC_WORDS, HAMMING_SPEC_QUERIES, HAMMING_SPEC_K, HAMMING_SPEC_ROWS_AT_ONCE = 0, 1, 2, 3
HAMMING_SPEC_CARRY_SAVE = 4
#: The register scan computes the distances of max(1, this // the code's words) rows before
#: considering any: their loads are in flight together (4 rows of 256 bits: a 128-byte line),
#: without holding more words than that in registers for wide codes. 16 (2 rows of 256 bits) was
#: the fastest of 8/16/32/64 on an H100 (benchmarks/hamming.py --sweep: 355 G distances/s, 1M x
#: 256-bit, 1,024 queries; 32: 350), and no setting moved lavapipe.
HAMMING_WORDS_AT_ONCE = 16
#: The register scan counts the bits of eight words with four bitCounts and carry-save adders
#: (codes of a multiple of 256 bits), where bitCount runs at a quarter of the logic ops' rate.
#: Off: on an H100 the plain count was faster at every setting of the sweep (355 against 288 G
#: distances/s at the best): the scan is bound by instruction issue, not by bitCount's rate.
HAMMING_CARRY_SAVE = False


def modules() -> list[Module]:
    """Every SPIR-V module the build makes: each variant, the reducing fused-graph kernel in each
    of its sizes (its program is specialization constants: dmlgpu/graph_kernel.py; element-wise
    graphs run generated code, dmlgpu/graph_source.py), the Hamming search's kernels."""
    found = [Module(v.name, v.source, v.defines) for v in all_variants()]
    gk = graph_kernel
    return found + [*(Module(gk.reduce_tier_name(t), gk.GRAPH_SOURCE, gk.reduce_tier_defines(t), gk.BUILD_PASSES)
                      for t in gk.TIERS),
                    Module(HAMMING_REGISTER_SCAN, "hamming.comp", {"HAMMING_SCAN": 1, "HAMMING_REGISTERS": 1}),
                    Module(HAMMING_REGISTER_MERGE, "hamming.comp", {"HAMMING_MERGE": 1, "HAMMING_REGISTERS": 1}),
                    *(Module(name, "search.comp", {"SEARCH_KERNEL": 1, name.upper().replace("-", "_"): 1})
                      for name in SEARCH_KERNELS)]


def module_names() -> list[str]:
    return [m.name for m in modules()]


def variant_lines() -> str:
    lines = []
    for m in modules():
        defines = "|".join(f"{k}={val}" for k, val in m.defines.items())
        lines.append(f"{m.name}|{m.source}|{' '.join(m.passes) or '-'}|{defines}\n")
    return "".join(lines)
