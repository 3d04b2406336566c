// Declarations shared by the reduce and top-k families (LAYOUT_AXES; dmlgpu/kernels/variants.py):
// every element is read as a uvec2 (lo, hi), integers sign-extended; sizes and strides come from a
// parameter buffer that dmlgpu/kernels/compiled_selection.py writes once per compiled operator.
// The build passes IN_BITS (8/16/32/64), IN_KIND (KIND_UINT/INT/FLOAT from abi.glsl), OUT_BITS.
//
// Parameter words: the header (SP_* in abi.glsl: work items, elements each walks, outer and walked
// dims, REDUCE's lanes, chunk, chunks and mode, the first walked element's index, AVERAGE's count,
// input and output base element offsets: dmlgpu/kernels/variants.py SELECT_HEADER), then from
// SP_DIMS per outer dim (size, input stride, output stride), then per walked dim (size, input
// stride); outer dims innermost first, walked dims innermost first.
#ifndef DMLGPU_SELECT_GLSL
#define DMLGPU_SELECT_GLSL

#include "abi.glsl"
#include "words.glsl"

// The size is specialization constant 1 where a family sets it (REDUCE on a GPU:
// dmlgpu/kernels/compiled_selection.py REDUCE_GROUP); others keep SELECTION_WORKGROUP_SIZE.
layout(local_size_x = SELECTION_WORKGROUP_SIZE, local_size_x_id = 1) in;  // push constants `sp`: abi.glsl

layout(std430, binding = 0) readonly buffer InWords { uint in_w[]; };
layout(std430, binding = 1) buffer OutWords { uint out_w[]; };
#ifdef INDEX_BINDING
layout(std430, binding = INDEX_BINDING) buffer IndexWords { uint index_w[]; };
#endif
layout(std430, binding = PARAMS_BINDING) readonly buffer ParamWords { uint params_w[]; };

// Where this invocation's parameter words start, from sp.params_offset (REDUCE_MERGE_LAST moves it).
uint params_base = 0u;
uint param(uint i) { return params_w[sp.params_offset + params_base + i]; }

#if IN_BITS < 64
// A lane's bits as (lo, hi): sign-extended for signed integers, without a branch (a branch on
// each loaded value kept the next loads from issuing before it: INT32 MAX of 256 MiB on an H200
// took 100 us against UINT32's 77, INT16 MAX over 2,048 rows 777 us; NOTES, session 19).
// A program that never reads a signed element's high word defines LANE_HIGH_WORD 0: it stays
// zero (one register less an element, and no arithmetic on it).
#ifndef LANE_HIGH_WORD
#define LANE_HIGH_WORD 1
#endif
uvec2 lane_value(uint v) {
#if IN_KIND == KIND_INT
    uvec2 x = sign_extended(v, uint(IN_BITS));
    return uvec2(x.x, LANE_HIGH_WORD != 0 ? x.y : 0u);
#else
    return uvec2(v, 0u);
#endif
}
#endif

#if IN_BITS < 64
// Element e's lane of the word that holds it (IN_BITS wide), as (lo, hi).
uvec2 element_of(uint word, uint e) {
    uint lanes = 32u / uint(IN_BITS);
    return lane_value((word >> ((e % lanes) * uint(IN_BITS))) & lane_mask(uint(IN_BITS)));
}
#endif

// The input element at element offset e, as (lo, hi): integers sign-extended to 64 bits.
uvec2 load_value(uint e) {
#if IN_BITS == 64
    return uvec2(in_w[sp.in_offset + 2u * e], in_w[sp.in_offset + 2u * e + 1u]);
#else
    return element_of(in_w[sp.in_offset + e / (32u / uint(IN_BITS))], e);
#endif
}

// Order key (dmlgpu.table.reference.order_key): unsigned compare of keys orders the values.
uvec2 order_key(uvec2 v) {
#if IN_KIND == KIND_UINT
    return v;
#elif IN_KIND == KIND_INT
    return uvec2(v.x, v.y ^ 0x80000000u);  // sign-extended: flip bit 63
#else
#if IN_BITS == 64
    return (v.y & 0x80000000u) != 0u ? ~v : uvec2(v.x, v.y | 0x80000000u);
#else
    uint top = 1u << (uint(IN_BITS) - 1u);
    return uvec2((v.x & top) != 0u ? (~v.x & lane_mask(uint(IN_BITS))) : (v.x | top), 0u);
#endif
#endif
}

bool key_less(uvec2 a, uvec2 b) { return a.y < b.y || (a.y == b.y && a.x < b.x); }

// Element offsets of work item `item`: its input base and its output element.
void outer_offsets(uint item, out uint in_base, out uint out_at) {
    uint dims = param(SP_OUTER_DIMS), rest = item;
    in_base = param(SP_IN_BASE);
    out_at = param(SP_OUT_BASE);
    for (uint d = 0u; d < dims; ++d) {
        uint size = param(SP_DIMS + 3u * d), i = rest % size;
        rest /= size;
        in_base += i * param(SP_DIMS + 1u + 3u * d);
        out_at += i * param(SP_DIMS + 2u + 3u * d);
    }
}

// Input element offset of the r-th walked element (row-major over the walked dims).
uint walked_offset(uint r) {
    uint first = SP_DIMS + 3u * param(SP_OUTER_DIMS), dims = param(SP_WALKED_DIMS), at = 0u;
    for (uint d = 0u; d < dims; ++d) {
        uint size = param(first + 2u * d);
        at += (r % size) * param(first + 2u * d + 1u);
        r /= size;
    }
    return at;
}

// Writes element e (W bits: 8/16 by atomics, other bits of its word untouched) of a tensor.
#define STORE_ELEMENT(buf, base, W, e, v) { \
    if ((W) == 64) { buf[(base) + 2u * (e)] = (v).x; buf[(base) + 2u * (e) + 1u] = (v).y; } \
    else if ((W) == 32) { buf[(base) + (e)] = (v).x; } \
    else { uint lanes_ = 32u / uint(W), shift_ = ((e) % lanes_) * uint(W); \
           uint mask_ = lane_mask(uint(W)) << shift_; \
           atomicAnd(buf[(base) + (e) / lanes_], ~mask_); \
           atomicOr(buf[(base) + (e) / lanes_], ((v).x << shift_) & mask_); } }

uint work_item() { return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x; }
uint work_stride() { return gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x; }

#endif
