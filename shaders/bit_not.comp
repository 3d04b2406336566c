#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]]: loops over registers
// DML_ELEMENT_WISE_BIT_NOT: every bit of the raw encoding inverted; the type only sets the width.
#define ARITY 1
#include "elementwise.glsl"

uint op_lanes(uint a, uint b) { return ~a; }
uvec2 op_pair(uvec2 a, uvec2 b) { return ~a; }

#include "elementwise_main.glsl"
