// Operators whose result is a UINT8 or UINT32 per element whatever the input type (their rows
// list the output types apart). One function per member, named after the operator (its row's
// `short`), taking (a, b) (b unused: the members are unary), with two overloads: on a word of
// packed IN_BITS-wide lanes (uint), leaving each lane's result in that lane, and on one 64-bit
// element (uvec2). The input type is IN_BITS (a constant here, the slot's operand width in the
// fused-graph kernel, graph.comp, which includes every family): test it with `if`, not `#if`.

// DML_ELEMENT_WISE_BIT_COUNT: number of 1 bits of each element's raw encoding.
uint bit_count(uint lanes, uint unused) {
    if (IN_BITS == 8) return popcount_lanes8(lanes);
    if (IN_BITS == 16) return popcount_lanes16(lanes);
    return uint(bitCount(lanes));
}
uint bit_count(uvec2 x, uvec2 unused) { return uint(bitCount(x.x) + bitCount(x.y)); }

// DML_ELEMENT_WISE_IS_NAN (FLOAT32, FLOAT16): 1 where the exponent is all ones and the mantissa
// is not zero, decided on the bits (no float compare a GPU's float modes could change).
uint is_nan(uint lanes, uint unused) {
    if (IN_BITS == 16) return (((lanes & 0x7FFF7FFFu) + 0x03FF03FFu) >> 15) & 0x00010001u;  // per half: magnitude > 0x7C00
    return (lanes & 0x7FFFFFFFu) > 0x7F800000u ? 1u : 0u;
}
