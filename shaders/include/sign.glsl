// DML_ELEMENT_WISE_SIGN: -1 if x < 0, 1 if x > 0, otherwise 0 -- decided on the bits, so NaN
// gives 0, -0 gives +0 and denormals give +/-1 whatever the GPU's float modes are. `sign(x, unused)`
// for the input type IN_BITS/IN_KIND (constants here, the slot's operand type in the fused-graph
// kernel, graph.comp, which includes every family: test them with `if`, not `#if`): on one
// 64-bit element (uvec2; DirectML has no FLOAT64 SIGN) or on a word of packed lanes (uint).

uvec2 sign(uvec2 x, uvec2 unused) {
    if (IN_KIND == KIND_INT && (x.y >> 31) != 0u) return uvec2(0xFFFFFFFFu);
    return (x.x | x.y) == 0u ? uvec2(0u) : uvec2(1u, 0u);
}
uint sign(uint x, uint unused) {
    if (IN_KIND == KIND_FLOAT && IN_BITS == 32) {
        uint magnitude = x & 0x7FFFFFFFu;
        return (magnitude == 0u || magnitude > 0x7F800000u) ? 0u : (x & 0x80000000u) | 0x3F800000u;
    }
    if (IN_KIND == KIND_FLOAT) {  // FLOAT16: two halves per word, SWAR
        uint magnitude = x & 0x7FFF7FFFu;
        uint nonzero = ((magnitude + 0x7FFF7FFFu) >> 15) & 0x00010001u;
        uint nan = ((magnitude + 0x03FF03FFu) >> 15) & 0x00010001u;  // magnitude > 0x7C00
        uint keep = (nonzero & ~nan) * 0xFFFFu;
        return ((x & 0x80008000u) | 0x3C003C00u) & keep;
    }
    // Integers of 8, 16 or 32 bits, SWAR over the lanes of a word.
    uint low = 0xFFFFFFFFu / LANE_MASK(IN_BITS);  // lowest bit of every lane
    uint body = ~(low << (IN_BITS - 1));           // all bits but each lane's top bit
    uint nonzero = ((((x & body) + body) | x) >> (IN_BITS - 1)) & low;
    if (IN_KIND != KIND_INT) return nonzero;
    uint negative = (x >> (IN_BITS - 1)) & low;
    return (negative * LANE_MASK(IN_BITS)) | (nonzero & ~negative);
}
