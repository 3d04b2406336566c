// main() of both layouts. Before including this, an operator provides either
//   uint op_lanes(uint a, uint b)    operation on packed W-bit lanes (W <= 32), or
//   uvec2 op_pair(uvec2 a, uvec2 b)  operation on one 64-bit element,
// for operations whose output has the input's width; or it defines CUSTOM_ELEMENT with
//   OUT_T op_element(IN_T a, IN_T b) and CUSTOM_FLAT_UNIT with uvec4 flat_unit(uint u).
// Unary operations ignore b.

#ifndef CUSTOM_ELEMENT
OUT_T op_element(IN_T a, IN_T b) {
#if IN_BITS == 64
    return op_pair(a, b);
#else
    return op_lanes(a, b) & lane_mask(uint(IN_BITS));
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

#else  // LAYOUT_FLAT: every tensor packed in one element order; unit u = output bytes [16u, 16u+16).

#ifndef CUSTOM_FLAT_UNIT
uvec4 flat_unit(uint u) {
    uvec4 a = in0_v[p.in_offset0 / 4u + u];
#if ARITY == 2
    uvec4 b = in1_v[p.in_offset1 / 4u + u];
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

void main() {
    uint full = p.count >> 4;  // units whose 16 bytes all belong to the output
    uint tail = p.count & 15u;
    FOR_EACH_UNIT(u, full + (tail == 0u ? 0u : 1u)) {
        if (u < full) {
            out_v[p.out_offset / 4u + u] = flat_unit(u);
            continue;
        }
        uvec4 r = flat_unit(u);
        uint base = p.out_offset + 4u * u;
        for (uint k = 0u; k < 4u && 4u * k < tail; ++k) {
            uint valid = min(tail - 4u * k, 4u);
            out_w[base + k] = valid == 4u ? r[k] : merge_bits(out_w[base + k], r[k], low_bytes_mask(valid));
        }
    }
}
#endif
