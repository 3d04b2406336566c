#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]]: loops over registers
// DML_ELEMENT_WISE_BIT_XOR: raw bits of A xor raw bits of B; the type only sets the width.
#define ARITY 2
#include "elementwise.glsl"

uint op_lanes(uint a, uint b) { return a ^ b; }
uvec2 op_pair(uvec2 a, uvec2 b) { return a ^ b; }

#include "elementwise_main.glsl"
