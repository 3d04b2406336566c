// Packing of W-bit elements in 32-bit words, the only integer width Kompute lets a shader use
// (it enables no Int8/Int16/Int64 or 8/16-bit storage features). Little-endian: element k of
// width W < 32 is bits [(k % (32/W)) * W, +W) of word k / (32/W); a 64-bit element is the word
// pair (lo = word 2k, hi = word 2k+1).
#ifndef DMLGPU_WORDS_GLSL
#define DMLGPU_WORDS_GLSL

#define LANE_MASK(W) ((W) >= 32 ? 0xFFFFFFFFu : ((1u << (W)) - 1u))
uint lane_mask(uint bits) { return bits >= 32u ? 0xFFFFFFFFu : (1u << bits) - 1u; }

// A signed element of `bits` bits (its lane, any bits above ignored) as 64 bits (lo, hi), without a
// branch on its value (a branch on each loaded value kept the next loads from issuing before it:
// benchmarks/NOTES.md, session 19).
uvec2 sign_extended(uint v, uint bits) {
    int s = bitfieldExtract(int(v), 0, int(bits));
    return uvec2(uint(s), uint(s >> 31));
}

// Mask of the low `n` bytes of a word, n in [0, 4].
uint low_bytes_mask(uint n) { return n >= 4u ? 0xFFFFFFFFu : (1u << (8u * n)) - 1u; }

// Per-lane population counts, each left in its own lane (SWAR): 8-bit lanes, then 16-bit lanes.
uint popcount_lanes8(uint x) {
    x -= (x >> 1) & 0x55555555u;
    x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
    return (x + (x >> 4)) & 0x0F0F0F0Fu;
}
uint popcount_lanes16(uint x) {
    x = popcount_lanes8(x);
    return (x + (x >> 8)) & 0x00FF00FFu;
}

// Merge `value` into `old` where `mask` is set.
uint merge_bits(uint old, uint value, uint mask) { return (old & ~mask) | (value & mask); }

#endif
