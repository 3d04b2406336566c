#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]]: loops over registers
// DirectML's bitwise family: each operation is applied to the raw encoding, the data type only
// sets the element width. One function per member, named after the operator (its row's `short`),
// with two overloads: on a word of packed IN_BITS-wide lanes (uint), and on one 64-bit element
// (uvec2). The build picks the member with OP=<name> and passes ARITY from the row.
#include "elementwise.glsl"

// A member whose result does not depend on the element width: one expression on whole words.
#define RAW_BITS(name, expression) \
    uint name(uint a, uint b) { return expression; } \
    uvec2 name(uvec2 a, uvec2 b) { return expression; }

RAW_BITS(bit_not, ~a)
RAW_BITS(bit_xor, a ^ b)
RAW_BITS(bit_and, a & b)
RAW_BITS(bit_or, a | b)

#define op_lanes OP
#define op_pair OP
#include "elementwise_main.glsl"
