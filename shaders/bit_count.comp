#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]]: loops over registers
// DML_ELEMENT_WISE_BIT_COUNT: number of 1 bits of each element's raw encoding, written as UINT8
// or UINT32 whatever the input width.
#define CUSTOM_ELEMENT
#define CUSTOM_FLAT_UNIT
#include "elementwise.glsl"

#if IN_BITS == 64
uint popcount_element(uvec2 x) { return uint(bitCount(x.x) + bitCount(x.y)); }
#else
uint popcount_element(uint x) { return uint(bitCount(x)); }
#endif

OUT_T op_element(IN_T a, IN_T b) { return popcount_element(a); }

#if defined(LAYOUT_FLAT) || defined(LAYOUT_ROWS)
// An output unit holds ELEMS counts, read from UNIT_IN_WORDS input words: as 16-byte vectors
// when there are at least four words, else as words.
#define ELEMS (UNIT_BYTES / (OUT_BITS / 8))
UNIT_T flat_unit(uint a_word, uint unused) {
    uint w[UNIT_IN_WORDS];
#if UNIT_IN_WORDS >= 4
    [[unroll]] for (uint j = 0u; j < uint(UNIT_IN_WORDS) / 4u; ++j) {
        uvec4 v = in0_v[a_word / 4u + j];
        w[4u * j] = v.x; w[4u * j + 1u] = v.y; w[4u * j + 2u] = v.z; w[4u * j + 3u] = v.w;
    }
#elif UNIT_IN_WORDS == 2
    uvec2 pair = in0_p[a_word / 2u];  // 8-byte loads: a warp reads 256 contiguous bytes at once
    w[0] = pair.x; w[1] = pair.y;
#else
    [[unroll]] for (uint j = 0u; j < uint(UNIT_IN_WORDS); ++j) w[j] = in0_w[a_word + j];
#endif
    uvec4 r = uvec4(0u);
    [[unroll]] for (uint e = 0u; e < uint(ELEMS); ++e) {
#if IN_BITS == 64
        uint c = uint(bitCount(w[2u * e]) + bitCount(w[2u * e + 1u]));
#elif IN_BITS == 32
        uint c = uint(bitCount(w[e]));
#elif IN_BITS == 16
        uint c = (popcount_lanes16(w[e / 2u]) >> ((e % 2u) * 16u)) & 0xFFu;
#else
        uint c = (popcount_lanes8(w[e / 4u]) >> ((e % 4u) * 8u)) & 0xFFu;
#endif
        r[e / LANES(OUT_BITS)] |= c << ((e % LANES(OUT_BITS)) * uint(OUT_BITS));
    }
    return UNIT_FROM_VEC(r);
}
#endif

#include "elementwise_main.glsl"
