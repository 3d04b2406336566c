// main() of the operators whose result is a UINT8 or UINT32 per element (uint_result.comp):
// the member OP gives each element's result from its input bits, in the input's lanes (a word
// of packed IN_BITS-wide lanes, or a 64-bit element as a word pair); this file packs the results
// into OUT_BITS-wide output lanes, for every layout.
#define CUSTOM_ELEMENT
#define CUSTOM_FLAT_UNIT

OUT_T op_element(IN_T a, IN_T b) {
#if IN_BITS == 64
    return OP(a, b);
#else
    return OP(a, b) & lane_mask(uint(IN_BITS));
#endif
}

#if defined(LAYOUT_FLAT) || defined(LAYOUT_ROWS)
// An output unit holds ELEMS results, read from UNIT_IN_WORDS input words: as 16-byte vectors
// when there are at least four words, else as words.
#define ELEMS (UNIT_BYTES / (OUT_BITS / 8))
#define PUT(r, e, c) r[(e) / LANES(OUT_BITS)] |= (c) << (((e) % LANES(OUT_BITS)) * uint(OUT_BITS))
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
#if IN_BITS == 64
    [[unroll]] for (uint e = 0u; e < uint(ELEMS); ++e) PUT(r, e, OP(uvec2(w[2u * e], w[2u * e + 1u]), uvec2(0u)));
#else
    [[unroll]] for (uint j = 0u; j < uint(UNIT_IN_WORDS); ++j) {
        uint lanes = OP(w[j], 0u);  // the results of a whole word's elements at once
        [[unroll]] for (uint l = 0u; l < LANES(IN_BITS); ++l) {
            PUT(r, j * LANES(IN_BITS) + l, (lanes >> (l * uint(IN_BITS))) & lane_mask(uint(IN_BITS)));
        }
    }
#endif
    return UNIT_FROM_VEC(r);
}
#endif

#include "elementwise_main.glsl"
