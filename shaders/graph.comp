#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]] in the families' functions
// A fused graph of element-wise operators ending in a REDUCE (dmlgpu/kernels/graph_abi.py,
// dmlgpu/compiler/reduction_plan.py): one dispatch of this module per graph, its node program in
// specialization constants. (Element-wise graphs run code generated for each one instead,
// dmlgpu/graph_source.py, in the same layout of slots.)
//
// Slot i of the program (i < SLOT_COUNT) is SLOT_OP<i>: OP_LOAD (element of bound input
// SLOT_A<i>), OP_CONST (the value SLOT_HI<i>:SLOT_LO<i>), or a table operator applied to slots
// SLOT_A<i> and SLOT_B<i> (earlier slots), whose operands' width and kind are SLOT_BITS<i> and
// SLOT_KIND<i> (a same-type operator's result has them too; a UINT8/UINT32 result, a count or a
// flag, fits any width).
// Values are 64-bit raw encodings (lo, hi) with the bits above the width zero. Every constant is
// fixed when the pipeline is made, so the driver folds each slot's switch to one operator and
// keeps the slot array in registers: intermediates are never stored.
#define WIDE(bits) ((bits) == 64u)
#include "graph_abi.glsl"
#include "words.glsl"
#include "arith64.glsl"

// A table operator's result as a slot value. graph_abi.glsl's graph_apply calls the operator's
// own function from its family source (shaders/include/<shader>.glsl) for the slot's operand
// type: on one element in the low lane of a word, its result masked to the width (as the
// family's strided kernels do), or on a 64-bit element (uvec2), its result a uvec2 or a uint
// (a count or a flag).
uvec2 graph_pair(uvec2 value) { return value; }
uvec2 graph_pair(uint value) { return uvec2(value, 0u); }

#define GRAPH_ELEMENT_FUNCTIONS
#include "graph_abi.glsl"

// for (g = first; g < groups; g += grid) without wrapping near 2^32.
uint first_unit() {
    return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x
        + gl_LocalInvocationID.x;
}
uint grid_size() { return gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x; }

// Element offsets from the coordinates c0..c7 (innermost dimension 7).
#define OFFSET(prefix) (c[0] * prefix##0 + c[1] * prefix##1 + c[2] * prefix##2 + c[3] * prefix##3 \
    + c[4] * prefix##4 + c[5] * prefix##5 + c[6] * prefix##6 + c[7] * prefix##7)

// An element of width `bits` at element offset `e` from word `base` of a words array.
#define LOAD_ELEMENT(buf, base, e, bits) (WIDE(bits) \
    ? uvec2(buf[(base) + 2u * (e)], buf[(base) + 2u * (e) + 1u]) \
    : uvec2((buf[(base) + (e) * (bits) / 32u] >> (((e) * (bits)) % 32u)) & lane_mask(bits), 0u))

#define SLOT(s) if (s < SLOT_COUNT) { \
    if (SLOT_OP##s == OP_LOAD) r[s] = xin[SLOT_A##s]; \
    else if (SLOT_OP##s == OP_CONST) r[s] = uvec2(SLOT_LO##s, SLOT_HI##s); \
    else r[s] = graph_apply(SLOT_OP##s, r[SLOT_A##s], r[SLOT_B##s], SLOT_BITS##s, SLOT_KIND##s); }

#define COORD(d) c[d] = rest % SIZE##d; rest /= SIZE##d;

// The reducing module: output element `item` (p.count of them) is DML_REDUCE_FUNCTION
// RED_FUNCTION of slot RED_SLOT over elements [item * RED_COUNT, +RED_COUNT) of the program's
// shape (the innermost RED_COUNT: REDUCE's trailing axes), accumulated in order by one invocation
// (shaders/include/reduce_acc.glsl: the same accumulators and rounding as shaders/reduce.comp);
// the program runs per element, its values never stored. Inputs are addressed through their
// strides; the output's strides are 0 along the reduced dimensions.
#define ACC_FUNCTION RED_FUNCTION
#define ACC_BITS RED_BITS
#define ACC_KIND RED_KIND
#define ACC_OUT_BITS OUT_BITS0
#include "reduce_acc.glsl"

// The slot's value as 64 bits: signed types sign-extended.
uvec2 red_extend(uvec2 v) {
    return RED_KIND == KIND_INT && RED_BITS < 64u ? sign_extended(v.x, RED_BITS) : v;
}

#define LOAD_STRIDED(k) if (IN_MODE##k != MODE_UNUSED) \
    xin[k] = LOAD_ELEMENT(in##k##_w, p.in_offset##k, OFFSET(IN##k##_STRIDE), IN_BITS##k);

void main() {
    uint items = p.count;
    for (uint item = first_unit(), step_ = grid_size(); item < items;
         item = (items - item > step_) ? item + step_ : items) {
        Acc acc = acc_empty();
        uint c[8];
        for (uint w = 0u; w < RED_COUNT; ++w) {
            uint rest = item * RED_COUNT + w;
            COORD(7) COORD(6) COORD(5) COORD(4) COORD(3) COORD(2) COORD(1) COORD(0)
            uvec2 xin[GRAPH_INPUTS];
            FOR_INPUTS(LOAD_STRIDED)
            uvec2 r[GRAPH_SLOTS];
            FOR_SLOTS(SLOT)
            acc = acc_add(acc, red_extend(r[RED_SLOT]), w);
        }
        uvec2 result = acc_result(acc, RED_COUNT);
        uint o = OFFSET(OUT0_STRIDE), bits = OUT_BITS0;
        if (WIDE(bits)) { out0_w[p.out_offset0 + 2u * o] = result.x; out0_w[p.out_offset0 + 2u * o + 1u] = result.y; }
        else if (bits == 32u) out0_w[p.out_offset0 + o] = result.x;
        else {  // neighbouring output elements of other invocations share the word
            uint index = p.out_offset0 + o * bits / 32u, shift = (o * bits) % 32u, mask = lane_mask(bits) << shift;
            atomicAnd(out0_w[index], ~mask);
            atomicOr(out0_w[index], (result.x << shift) & mask);
        }
    }
}
