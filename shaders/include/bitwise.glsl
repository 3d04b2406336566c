// DirectML's bitwise family: each operation is applied to the raw encoding, the data type only
// sets the element width IN_BITS. One function per member, named after the operator (its row's
// `short`), taking (a, b) (b unused by unary members), with two overloads: on a word of packed
// IN_BITS-wide lanes (uint), and on one 64-bit element (uvec2). IN_BITS is a constant here and
// the slot's operand width in the fused-graph kernel (graph.comp, which includes every family):
// test it with `if`, not `#if`.

// A member whose result does not depend on the element width: one expression on whole words.
#define RAW_BITS(name, expression) \
    uint name(uint a, uint b) { return expression; } \
    uvec2 name(uvec2 a, uvec2 b) { return expression; }

RAW_BITS(bit_not, ~a)
RAW_BITS(bit_xor, a ^ b)
RAW_BITS(bit_and, a & b)
RAW_BITS(bit_or, a | b)

// Logical shifts of a by b. DirectML masks the amount to the element width, b & (IN_BITS - 1)
// (dmlgpu.reference.shift_amount is the same rule); bits shifted past an element's edge are
// dropped. Sub-word lanes are shifted in place, one lane of the word at a time.
#define AMOUNT(b, lane_shift) (((b) >> (lane_shift)) & uint(IN_BITS - 1))
uint bit_shift_left(uint a, uint b) {
    uint r = 0u;
    [[unroll]] for (uint s = 0u; s < 32u; s += uint(IN_BITS)) {
        uint lane = LANE_MASK(IN_BITS) << s;
        r |= ((a & lane) << AMOUNT(b, s)) & lane;
    }
    return r;
}
uint bit_shift_right(uint a, uint b) {
    uint r = 0u;
    [[unroll]] for (uint s = 0u; s < 32u; s += uint(IN_BITS)) {
        uint lane = LANE_MASK(IN_BITS) << s;
        r |= ((a & lane) >> AMOUNT(b, s)) & lane;
    }
    return r;
}
// 64-bit elements as (lo, hi) word pairs; the amount is in b's low word.
uvec2 bit_shift_left(uvec2 a, uvec2 b) {
    uint n = AMOUNT(b.x, 0u);
    if (n >= 32u) return uvec2(0u, a.x << (n - 32u));
    return n == 0u ? a : uvec2(a.x << n, (a.y << n) | (a.x >> (32u - n)));
}
uvec2 bit_shift_right(uvec2 a, uvec2 b) {
    uint n = AMOUNT(b.x, 0u);
    if (n >= 32u) return uvec2(a.y >> (n - 32u), 0u);
    return n == 0u ? a : uvec2((a.x >> n) | (a.y << (32u - n)), a.y >> n);
}
