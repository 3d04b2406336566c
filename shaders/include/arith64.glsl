// 64-bit integer arithmetic on (lo, hi) pairs, wrapping: the reductions' accumulators
// (shaders/reduce.comp and the reducing fused-graph kernel, shaders/graph.comp).
#ifndef DMLGPU_ARITH64_GLSL
#define DMLGPU_ARITH64_GLSL

uvec2 add64(uvec2 a, uvec2 b) {
    uint carry;
    uint lo = uaddCarry(a.x, b.x, carry);
    return uvec2(lo, a.y + b.y + carry);
}

uvec2 mul64(uvec2 a, uvec2 b) {  // low 64 bits of the product
    uint hi, lo;
    umulExtended(a.x, b.x, hi, lo);
    return uvec2(lo, hi + a.x * b.y + a.y * b.x);
}

uvec2 negate64(uvec2 a) { return add64(~a, uvec2(1u, 0u)); }

#endif
