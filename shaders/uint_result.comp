#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]]: loops over registers
// Operators whose result is a UINT8 or UINT32 per element whatever the input type (their
// functions: include/uint_result.glsl). The build picks the member with OP=<name>;
// uint_result_main.glsl packs the results into the output type.
#include "elementwise.glsl"
#include "uint_result.glsl"

#include "uint_result_main.glsl"
