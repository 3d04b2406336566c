#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]] in the families' functions
// A fused graph of element-wise operators ending in a REDUCE (dmlgpu/graph_kernel.py,
// dmlgpu/compiled_reduction.py): one dispatch of this module per graph, its node program in
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
// shape (the innermost RED_COUNT: REDUCE's trailing axes), in order; the program runs per
// element, its values never stored. Inputs are addressed through their strides; the output's
// strides are 0 along the reduced dimensions. Integer arithmetic is 64-bit and wraps at the
// output's width when stored; ARGMIN/ARGMAX keep the first extreme index (row-major over the
// reduced axes), as shaders/reduce.comp does.

// The slot's value as 64 bits: signed types sign-extended.
uvec2 red_extend(uvec2 v) {
    if (RED_KIND == KIND_INT && RED_BITS < 64u && ((v.x >> (RED_BITS - 1u)) & 1u) != 0u)
        return uvec2(v.x | ~lane_mask(RED_BITS), 0xFFFFFFFFu);
    return v;
}

// Order key (dmlgpu.reference.order_key; select.glsl's order_key): unsigned compare orders values.
uvec2 red_key(uvec2 v) {
    if (RED_KIND == KIND_UINT) return v;
    if (RED_KIND == KIND_INT) { v = red_extend(v); return uvec2(v.x, v.y ^ 0x80000000u); }
    if (RED_BITS == 64u) return (v.y & 0x80000000u) != 0u ? ~v : uvec2(v.x, v.y | 0x80000000u);
    uint top = 1u << (RED_BITS - 1u);
    return uvec2((v.x & top) != 0u ? (~v.x & lane_mask(RED_BITS)) : (v.x | top), 0u);
}

bool red_less(uvec2 a, uvec2 b) { return a.y < b.y || (a.y == b.y && a.x < b.x); }

#define LOAD_STRIDED(k) if (IN_MODE##k != MODE_UNUSED) \
    xin[k] = LOAD_ELEMENT(in##k##_w, p.in_offset##k, OFFSET(IN##k##_STRIDE), IN_BITS##k);

void main() {
    uint items = p.count;
    bool ordered = RED_FUNCTION == RED_ARGMAX || RED_FUNCTION == RED_ARGMIN || RED_FUNCTION == RED_MAX
        || RED_FUNCTION == RED_MIN;
    bool largest = RED_FUNCTION == RED_ARGMAX || RED_FUNCTION == RED_MAX;
    for (uint item = first_unit(), step_ = grid_size(); item < items;
         item = (items - item > step_) ? item + step_ : items) {
        uvec2 acc = RED_FUNCTION == RED_MULTIPLY ? uvec2(1u, 0u) : uvec2(0u);
        uvec2 best = uvec2(0u), best_value = uvec2(0u);
        uint best_index = 0u;
        uint c[8];
        for (uint w = 0u; w < RED_COUNT; ++w) {
            uint rest = item * RED_COUNT + w;
            COORD(7) COORD(6) COORD(5) COORD(4) COORD(3) COORD(2) COORD(1) COORD(0)
            uvec2 xin[GRAPH_INPUTS];
            FOR_INPUTS(LOAD_STRIDED)
            uvec2 r[GRAPH_SLOTS];
            FOR_SLOTS(SLOT)
            uvec2 v = red_extend(r[RED_SLOT]);
            if (ordered) {
                uvec2 key = red_key(v);
                // strict: the first extreme is kept
                if (w == 0u || (largest ? red_less(best, key) : red_less(key, best))) {
                    best = key; best_value = v; best_index = w;
                }
            } else if (RED_FUNCTION == RED_MULTIPLY) acc = mul64(acc, v);
            else if (RED_FUNCTION == RED_SUM_SQUARE) acc = add64(acc, mul64(v, v));
            else if (RED_FUNCTION == RED_L1 && RED_KIND == KIND_INT && (v.y & 0x80000000u) != 0u) acc = add64(acc, negate64(v));
            else acc = add64(acc, v);
        }
        uvec2 result = RED_FUNCTION == RED_ARGMAX || RED_FUNCTION == RED_ARGMIN ? uvec2(best_index, 0u)
            : ordered ? best_value : acc;
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

