#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]]: loops over registers
// Operators whose result is a UINT8 or UINT32 per element whatever the input type (their rows
// list the output types apart). One function per member, named after the operator (its row's
// `short`), with two overloads: on a word of packed IN_BITS-wide lanes (uint), leaving each
// lane's result in that lane, and on one 64-bit element (uvec2). The build picks the member with
// OP=<name>; uint_result_main.glsl packs the results into the output type.
#include "elementwise.glsl"

// DML_ELEMENT_WISE_BIT_COUNT: number of 1 bits of each element's raw encoding.
uint bit_count(uint lanes) {
#if IN_BITS == 8
    return popcount_lanes8(lanes);
#elif IN_BITS == 16
    return popcount_lanes16(lanes);
#else
    return uint(bitCount(lanes));
#endif
}
uint bit_count(uvec2 x) { return uint(bitCount(x.x) + bitCount(x.y)); }

#include "uint_result_main.glsl"
