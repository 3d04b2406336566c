#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]]: loops over registers
// DirectML's bitwise family (its functions: include/bitwise.glsl). The build picks the member
// with OP=<name> and passes ARITY from the row.
#include "elementwise.glsl"
#include "bitwise.glsl"

#define op_lanes OP
#define op_pair OP
#include "elementwise_main.glsl"
