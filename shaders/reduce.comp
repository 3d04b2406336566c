#version 450
#extension GL_GOOGLE_include_directive : require
// DML_OPERATOR_REDUCE (dmlgpu/operators.py REDUCE): each invocation reduces the walked (reduced)
// elements of one output element. FUNCTION is a DML_REDUCE_FUNCTION value; integer arithmetic is
// 64-bit (uvec2) and wraps at OUT_BITS when stored. ARGMIN/ARGMAX keep the first extreme index.
#define PARAMS_BINDING 2
#include "select.glsl"
#include "arith64.glsl"

#define F_ARGMAX 0
#define F_ARGMIN 1
#define F_L1 3
#define F_MAX 7
#define F_MIN 8
#define F_MULTIPLY 9
#define F_SUM 10
#define F_SUM_SQUARE 11

void main() {
    uint items = param(0u), walked = param(1u);
    for (uint item = work_item(); item < items; item += work_stride()) {
        uint in_base, out_at;
        outer_offsets(item, in_base, out_at);
#if FUNCTION == F_ARGMAX || FUNCTION == F_ARGMIN || FUNCTION == F_MAX || FUNCTION == F_MIN
        uvec2 best_value = load_value(in_base + walked_offset(0u));
        uvec2 best = order_key(best_value);
        uint best_index = 0u;
        for (uint r = 1u; r < walked; ++r) {
            uvec2 v = load_value(in_base + walked_offset(r));
            uvec2 k = order_key(v);
#if FUNCTION == F_ARGMAX || FUNCTION == F_MAX
            bool better = key_less(best, k);
#else
            bool better = key_less(k, best);
#endif
            if (better) { best = k; best_value = v; best_index = r; }  // strict: first extreme kept
        }
#if FUNCTION == F_ARGMAX || FUNCTION == F_ARGMIN
        STORE_ELEMENT(out_w, sp.out_offset, OUT_BITS, out_at, uvec2(best_index, 0u));
#else
        STORE_ELEMENT(out_w, sp.out_offset, OUT_BITS, out_at, best_value);
#endif
#else
#if FUNCTION == F_MULTIPLY
        uvec2 acc = uvec2(1u, 0u);
#else
        uvec2 acc = uvec2(0u);
#endif
        for (uint r = 0u; r < walked; ++r) {
            uvec2 v = load_value(in_base + walked_offset(r));
#if FUNCTION == F_MULTIPLY
            acc = mul64(acc, v);
#elif FUNCTION == F_SUM_SQUARE
            acc = add64(acc, mul64(v, v));
#elif FUNCTION == F_L1 && IN_KIND == KIND_INT
            acc = add64(acc, (v.y & 0x80000000u) != 0u ? negate64(v) : v);
#else
            acc = add64(acc, v);
#endif
        }
        STORE_ELEMENT(out_w, sp.out_offset, OUT_BITS, out_at, acc);
#endif
    }
}
