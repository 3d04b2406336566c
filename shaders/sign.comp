#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]]: loops over registers
// DML_ELEMENT_WISE_SIGN: -1 if x < 0, 1 if x > 0, otherwise 0 -- decided on the bits, so NaN
// gives 0, -0 gives +0 and denormals give +/-1 whatever the GPU's float modes are.
#include "elementwise.glsl"

#if IN_BITS == 64
#if IN_KIND == KIND_FLOAT
#error "DirectML has no FLOAT64 SIGN"
#endif
uvec2 op_pair(uvec2 x, uvec2 unused) {
#if IN_KIND == KIND_INT
    if ((x.y >> 31) != 0u) return uvec2(0xFFFFFFFFu);
#endif
    return (x.x | x.y) == 0u ? uvec2(0u) : uvec2(1u, 0u);
}
#elif IN_KIND == KIND_FLOAT && IN_BITS == 32
uint op_lanes(uint x, uint unused) {
    uint magnitude = x & 0x7FFFFFFFu;
    return (magnitude == 0u || magnitude > 0x7F800000u) ? 0u : (x & 0x80000000u) | 0x3F800000u;
}
#elif IN_KIND == KIND_FLOAT && IN_BITS == 16
uint op_lanes(uint x, uint unused) {  // two halves per word, SWAR
    uint magnitude = x & 0x7FFF7FFFu;
    uint nonzero = ((magnitude + 0x7FFF7FFFu) >> 15) & 0x00010001u;
    uint nan = ((magnitude + 0x03FF03FFu) >> 15) & 0x00010001u;  // magnitude > 0x7C00
    uint keep = (nonzero & ~nan) * 0xFFFFu;
    return ((x & 0x80008000u) | 0x3C003C00u) & keep;
}
#else  // integers of 8, 16 or 32 bits, SWAR over the lanes of a word
const uint LOW = 0xFFFFFFFFu / LANE_MASK(IN_BITS);  // lowest bit of every lane
const uint BODY = ~(LOW << (IN_BITS - 1));                // all bits but each lane's top bit
uint op_lanes(uint x, uint unused) {
    uint nonzero = ((((x & BODY) + BODY) | x) >> (IN_BITS - 1)) & LOW;
#if IN_KIND == KIND_INT
    uint negative = (x >> (IN_BITS - 1)) & LOW;
    return (negative * LANE_MASK(IN_BITS)) | (nonzero & ~negative);
#else
    return nonzero;
#endif
}
#endif

#include "elementwise_main.glsl"
