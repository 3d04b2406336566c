#version 450
#extension GL_GOOGLE_include_directive : require
// DML_ELEMENT_WISE_BIT_COUNT: number of 1 bits of each element's raw encoding, written as UINT8
// or UINT32 whatever the input width.
#define ARITY 1
#define CUSTOM_ELEMENT
#define CUSTOM_FLAT_UNIT
#include "elementwise.glsl"

#if IN_BITS == 64
uint popcount_element(uvec2 x) { return uint(bitCount(x.x) + bitCount(x.y)); }
#else
uint popcount_element(uint x) { return uint(bitCount(x)); }
#endif

OUT_T op_element(IN_T a, IN_T b) { return popcount_element(a); }

// Output word k of unit u holds elements [(4u + k) * LANES(OUT_BITS), +LANES(OUT_BITS)); elements
// past the end are neither read nor counted.
uvec4 flat_unit(uint u) {
    uint n = p.count / (uint(OUT_BITS) / 8u);
    uvec4 r = uvec4(0u);
    for (uint k = 0u; k < 4u; ++k) {
        for (uint l = 0u; l < LANES(OUT_BITS); ++l) {
            uint e = (4u * u + k) * LANES(OUT_BITS) + l;
            if (e < n) r[k] |= popcount_element(LOAD_IN(in0_w, p.in_offset0, e)) << (l * uint(OUT_BITS));
        }
    }
    return r;
}

#include "elementwise_main.glsl"
