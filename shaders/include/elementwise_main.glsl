// main() of the four layouts. Before including this, an operator provides either
//   uint op_lanes(uint a, uint b)    operation on packed W-bit lanes (W <= 32), or
//   uvec2 op_pair(uvec2 a, uvec2 b)  operation on one 64-bit element,
// for operations whose output has the input's width; or it defines CUSTOM_ELEMENT with
//   OUT_T op_element(IN_T a, IN_T b) and CUSTOM_FLAT_UNIT with
//   UNIT_T flat_unit(uint a_word, uint b_word)  (one output unit from UNIT_IN_WORDS input words).
// Unary operations ignore b.
//
// LAYOUT_FLAT     every tensor packed in one element order; unit u = output bytes
//                 [u * UNIT_BYTES, +UNIT_BYTES), read and written whole (flat_unit); the tail unit's
//                 bytes are masked.
// LAYOUT_ROWS     output packed; each input walks its innermost dimension contiguously and every
//                 row starts 16-byte aligned (padded rows, broadcast rows): flat_unit per row.
// LAYOUT_GATHER   output packed, inputs strided or broadcast otherwise: the same 16-byte output
//                 units, each element's inputs found through element_offsets().
// LAYOUT_STRIDED  output strided: one element per unit; sub-word outputs written with atomics;
//                 p.out_offset in elements (an output may start at any element: store_out).

#ifndef CUSTOM_ELEMENT
OUT_T op_element(IN_T a, IN_T b) {
#if IN_BITS == 64
    return op_pair(a, b);
#else
    return op_lanes(a, b) & lane_mask(uint(IN_BITS));
#endif
}
#endif

#if (defined(LAYOUT_FLAT) || defined(LAYOUT_ROWS)) && !defined(CUSTOM_FLAT_UNIT)
#ifdef LAYOUT_FLAT
// A broadcast scalar operand (SCALAR_IN<k> = its width in bits; 0: a packed operand) is read
// once per unit and repeated across a 16-byte vector, so `w & 15` runs as fast as `w & w2`.
uvec4 scalar_vector(uint word0, uint word1, uint bits) {
    if (bits == 64u) return uvec4(word0, word1, word0, word1);
    uint lane = lane_mask(bits);
    return uvec4((word0 & lane) * (0xFFFFFFFFu / lane));
}
#define OPERAND_VEC(k, word) (SCALAR_IN##k != 0u \
    ? scalar_vector(in##k##_w[p.in_offset##k], SCALAR_IN##k == 64u ? in##k##_w[p.in_offset##k + 1u] : 0u, SCALAR_IN##k) \
    : in##k##_v[(word) / 4u])
#else
#define OPERAND_VEC(k, word) in##k##_v[(word) / 4u]
#endif

uvec4 flat_unit(uint a_word, uint b_word) {
    uvec4 a = OPERAND_VEC(0, a_word);
#if ARITY == 2
    uvec4 b = OPERAND_VEC(1, b_word);
#else
    uvec4 b = uvec4(0u);
#endif
#if IN_BITS == 64
    return uvec4(op_pair(a.xy, b.xy), op_pair(a.zw, b.zw));
#else
    return uvec4(op_lanes(a.x, b.x), op_lanes(a.y, b.y), op_lanes(a.z, b.z), op_lanes(a.w, b.w));
#endif
}
#endif

#ifdef LAYOUT_STRIDED
void main() {
    FOR_EACH_UNIT(i, p.count) {
        Offsets o = element_offsets(i);
        IN_T a = LOAD_IN(in0_w, p.in_offset0, o.in0);
#if ARITY == 2
        IN_T b = LOAD_IN(in1_w, p.in_offset1, o.in1);
#else
        IN_T b = IN_T(0u);
#endif
        store_out(o.out_, op_element(a, b));
    }
}

#elif defined(LAYOUT_ROWS)
// Rows of ROW_UNITS output units; unit k of a row reads input words from the row's start.
const uint ROW_UNITS = SIZE7 * uint(OUT_BITS) / 8u / uint(UNIT_BYTES);
void main() {
    FOR_EACH_UNIT(u, p.count / uint(UNIT_BYTES)) {
        uint row = u / ROW_UNITS, k = u % ROW_UNITS;
        Offsets o = element_offsets(row * SIZE7);
        uint a_word = p.in_offset0 + o.in0 * uint(IN_BITS) / 32u + k * uint(UNIT_IN_WORDS);
        uint b_word = p.in_offset1 + o.in1 * uint(IN_BITS) / 32u + k * uint(UNIT_IN_WORDS);
        STORE_UNIT(u, flat_unit(a_word, b_word));
    }
}

#else  // LAYOUT_FLAT or LAYOUT_GATHER: p.count is the output's size in bytes

// Output element e computed on its own (packed output, so element e is the e-th of the output).
OUT_T element_value(uint e) {
#ifdef LAYOUT_GATHER
    Offsets o = element_offsets(e);
    uint a_at = o.in0, b_at = o.in1;
#else
    uint a_at = e, b_at = e;
#endif
    IN_T a = LOAD_IN(in0_w, p.in_offset0, a_at);
#if ARITY == 2
    IN_T b = LOAD_IN(in1_w, p.in_offset1, b_at);
#else
    IN_T b = IN_T(0u);
#endif
    return op_element(a, b);
}

// Unit u assembled element by element; elements at or past n are neither read nor written.
UNIT_T unit_from_elements(uint u, uint n) {
    uvec4 r = uvec4(0u);
#if OUT_BITS == 64
    [[unroll]] for (uint k = 0u; k < uint(UNIT_WORDS) / 2u; ++k) {
        uint e = uint(UNIT_WORDS) / 2u * u + k;
        if (e < n) {
            uvec2 v = element_value(e);
            r[2u * k] = v.x;
            r[2u * k + 1u] = v.y;
        }
    }
#else
    [[unroll]] for (uint k = 0u; k < uint(UNIT_WORDS); ++k) {
        [[unroll]] for (uint l = 0u; l < LANES(OUT_BITS); ++l) {
            uint e = (uint(UNIT_WORDS) * u + k) * LANES(OUT_BITS) + l;
            if (e < n) r[k] |= element_value(e) << (l * uint(OUT_BITS));
        }
    }
#endif
    return UNIT_FROM_VEC(r);
}

void main() {
    uint full = p.count / uint(UNIT_BYTES);  // units whose bytes all belong to the output
    uint tail = p.count % uint(UNIT_BYTES);
    uint n = p.count / (uint(OUT_BITS) / 8u);
    FOR_EACH_UNIT(u, full) {
#ifdef LAYOUT_FLAT
        STORE_UNIT(u, flat_unit(p.in_offset0 + u * uint(UNIT_IN_WORDS), p.in_offset1 + u * uint(UNIT_IN_WORDS)));
#else
        STORE_UNIT(u, unit_from_elements(u, n));
#endif
    }
    // The tail unit, by invocation 0 after its loop: a branch inside the loop costs CPU drivers
    // (lavapipe runs both sides of it under a lane mask) ~25% of a 16 MiB NOT (NOTES, issue 12).
    if (tail == 0u || first_unit() != 0u) return;
    uint u = full;
#if defined(LAYOUT_FLAT) && !defined(CUSTOM_FLAT_UNIT)
    // Same width in and out: the tail vector lies inside the 16-byte-padded buffers, and the
    // width-independent variants (raw-bit NOT, XOR, ...) have no element width to go element by element.
    uvec4 r = UNIT_AS_VEC(flat_unit(p.in_offset0 + u * uint(UNIT_IN_WORDS), p.in_offset1 + u * uint(UNIT_IN_WORDS)));
#else
    uvec4 r = UNIT_AS_VEC(unit_from_elements(u, n));
#endif
    uint base = p.out_offset + uint(UNIT_WORDS) * u;
    [[unroll]] for (uint k = 0u; k < uint(UNIT_WORDS) && 4u * k < tail; ++k) {
        uint valid = min(tail - 4u * k, 4u);
        out_w[base + k] = valid == 4u ? r[k] : merge_bits(out_w[base + k], r[k], low_bytes_mask(valid));
    }
}
#endif
