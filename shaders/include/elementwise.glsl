// Declarations shared by every operator: bindings, push constants, specialization constants and
// element loads/stores. A family source includes this file, defines its operations, then includes
// elementwise_main.glsl. The build passes, from the operator's row (dmlgpu/kernels.py): OP (the
// operator's name), ARITY (1 or 2), IN_BITS/OUT_BITS/IN_KIND and one of LAYOUT_FLAT / LAYOUT_ROWS /
// LAYOUT_GATHER / LAYOUT_STRIDED; abi.glsl (generated from dmlgpu/kernels.py) fixes the
// push-constant block and the specialization-constant ids that the Python side fills in.
//
// Binding i < ARITY is input i; binding ARITY is the output. Inputs and the output may be the
// same buffer (in-place execution): no block is `restrict`, and every invocation reads the
// elements it writes before writing them.
#ifndef DMLGPU_ELEMENTWISE_GLSL
#define DMLGPU_ELEMENTWISE_GLSL

#include "abi.glsl"
#include "words.glsl"

#ifndef IN_BITS
#define IN_BITS 32  // width-independent operations (raw-bit NOT, XOR, ...) in the flat layout
#endif
#ifndef OUT_BITS
#define OUT_BITS IN_BITS
#endif
#define LANES(W) (32u / uint(W))
// An invocation owns UNIT_WORDS output words at a time (flat, rows and gather layouts): 4 (a
// 16-byte vector), or 2 or 1 for narrowing operators, so that each invocation reads about one
// 16-byte input vector and neighbours read neighbouring input. UNIT_IN_WORDS input words lie
// behind one unit. The build sets UNIT_WORDS (dmlgpu/kernels.py, Variant.unit_bytes).
#ifndef UNIT_WORDS
#define UNIT_WORDS 4
#endif
#define UNIT_BYTES (4 * UNIT_WORDS)
#define UNIT_IN_WORDS (UNIT_WORDS * (IN_BITS) / (OUT_BITS))
#if UNIT_WORDS == 4
#define UNIT_T uvec4
#define UNIT_FROM_VEC(v) (v)
#define UNIT_AS_VEC(r) (r)
#define STORE_UNIT(u, r) out_v[p.out_offset / 4u + (u)] = (r)
#elif UNIT_WORDS == 2
#define UNIT_T uvec2
#define UNIT_FROM_VEC(v) ((v).xy)
#define UNIT_AS_VEC(r) uvec4((r), 0u, 0u)
#define STORE_UNIT(u, r) out_p[p.out_offset / 2u + (u)] = (r)
#else
#define UNIT_T uint
#define UNIT_FROM_VEC(v) ((v).x)
#define UNIT_AS_VEC(r) uvec4((r), 0u, 0u, 0u)
#define STORE_UNIT(u, r) out_w[p.out_offset + (u)] = (r)
#endif

#if IN_BITS == 64
#define IN_T uvec2
#else
#define IN_T uint
#endif
#if OUT_BITS == 64
#define OUT_T uvec2
#else
#define OUT_T uint
#endif

layout(local_size_x_id = SPEC_WORKGROUP_SIZE) in;

// Inputs are readonly, except in the strided layout: there an in-place output is updated with
// atomics, and a readonly view may be served from a non-coherent cache that atomics bypass.
#ifdef LAYOUT_STRIDED
#define INPUT_ACCESS
#else
#define INPUT_ACCESS readonly
#endif
layout(std430, binding = 0) INPUT_ACCESS buffer In0Words { uint in0_w[]; };
layout(std430, binding = 0) INPUT_ACCESS buffer In0Vecs { uvec4 in0_v[]; };
layout(std430, binding = 0) INPUT_ACCESS buffer In0Pairs { uvec2 in0_p[]; };
#if ARITY == 2
layout(std430, binding = 1) INPUT_ACCESS buffer In1Words { uint in1_w[]; };
layout(std430, binding = 1) INPUT_ACCESS buffer In1Vecs { uvec4 in1_v[]; };
#endif
#ifdef LAYOUT_FLAT
layout(constant_id = SPEC_SCALAR_IN0) const uint SCALAR_IN0 = 0u;
layout(constant_id = SPEC_SCALAR_IN1) const uint SCALAR_IN1 = 0u;
#endif
layout(std430, binding = ARITY) buffer OutWords { uint out_w[]; };
layout(std430, binding = ARITY) buffer OutVecs { uvec4 out_v[]; };
layout(std430, binding = ARITY) buffer OutPairs { uvec2 out_p[]; };

// The grid is 2-D (more groups than maxComputeWorkGroupCount[0]) and may be smaller than the work:
// invocations stride over units, so one compiled pipeline serves every tensor size.
uint first_unit() {
    return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x
        + gl_LocalInvocationID.x;
}
uint grid_size() { return gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x; }

// for (u = first_unit(); u < units; u += grid_size()) without wrapping near 2^32.
#define FOR_EACH_UNIT(u, units) \
    for (uint u = first_unit(), step_ = grid_size(), n_ = (units); u < n_; u = (n_ - u > step_) ? u + step_ : n_)

// Element e (in elements from the bound offset `base`, in words) of a tensor of width W.
#if IN_BITS == 64
#define LOAD_IN(buf, base, e) uvec2(buf[(base) + 2u * (e)], buf[(base) + 2u * (e) + 1u])
#else
#define LOAD_IN(buf, base, e) \
    ((buf[(base) + (e) / LANES(IN_BITS)] >> (((e) % LANES(IN_BITS)) * uint(IN_BITS))) & lane_mask(uint(IN_BITS)))
#endif

#ifdef LAYOUT_STRIDED
// Writes output element e (the strided layout's only store). Here p.out_offset counts output
// elements, not words: an output may start at any element of its buffer, not only at a 16-byte
// boundary (DirectML's binding alignment), so dmlgpu binds the 16-byte boundary below and adds
// the rest (dmlgpu/compiled.py, CompiledOperator.launch's out_shift). Lanes narrower than a word
// use atomics: two invocations may own elements of one word, and the word's other bits are
// never changed.
void store_out(uint e, OUT_T v) {
    uint at = p.out_offset + e;
#if OUT_BITS == 64
    out_w[2u * at] = v.x;
    out_w[2u * at + 1u] = v.y;
#elif OUT_BITS == 32
    out_w[at] = v;
#else
    uint index = at / LANES(OUT_BITS);
    uint shift = (at % LANES(OUT_BITS)) * uint(OUT_BITS);
    uint mask = lane_mask(uint(OUT_BITS)) << shift;
    atomicAnd(out_w[index], ~mask);
    atomicOr(out_w[index], (v << shift) & mask);
#endif
}
#endif

#if defined(LAYOUT_STRIDED) || defined(LAYOUT_GATHER) || defined(LAYOUT_ROWS)
// Sizes and per-tensor strides in elements, innermost dimension last (index MAX_DIMS - 1);
// unused leading dimensions have size 1. Fixed per compiled operator, so the driver folds the
// divisions below into multiplications.
#define SPEC_DIMS(name, base, init) \
    layout(constant_id = base + 0) const uint name##0 = init; \
    layout(constant_id = base + 1) const uint name##1 = init; \
    layout(constant_id = base + 2) const uint name##2 = init; \
    layout(constant_id = base + 3) const uint name##3 = init; \
    layout(constant_id = base + 4) const uint name##4 = init; \
    layout(constant_id = base + 5) const uint name##5 = init; \
    layout(constant_id = base + 6) const uint name##6 = init; \
    layout(constant_id = base + 7) const uint name##7 = init;
SPEC_DIMS(SIZE, SPEC_SIZES, 1u)
SPEC_DIMS(STRIDE_IN0_, SPEC_STRIDES_IN0, 0u)
SPEC_DIMS(STRIDE_IN1_, SPEC_STRIDES_IN1, 0u)
SPEC_DIMS(STRIDE_OUT_, SPEC_STRIDES_OUT, 0u)

struct Offsets { uint in0; uint in1; uint out_; };

#define DIM(d) { \
    uint c = i % SIZE##d; i /= SIZE##d; \
    o.in0 += c * STRIDE_IN0_##d; o.in1 += c * STRIDE_IN1_##d; o.out_ += c * STRIDE_OUT_##d; }

// Element offsets of the row-major element index i in each tensor.
Offsets element_offsets(uint i) {
    Offsets o = Offsets(0u, 0u, 0u);
    DIM(7) DIM(6) DIM(5) DIM(4) DIM(3) DIM(2) DIM(1) DIM(0)
    return o;
}
#endif

#endif
