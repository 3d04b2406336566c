#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]]: loops over registers
// DML_ELEMENT_WISE_SIGN (its function: include/sign.glsl), for the input type IN_BITS/IN_KIND.
#include "elementwise.glsl"
#include "sign.glsl"

#define op_lanes sign
#define op_pair sign
#include "elementwise_main.glsl"
