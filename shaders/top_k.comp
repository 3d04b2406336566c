#version 450
#extension GL_GOOGLE_include_directive : require
// DML_OPERATOR_TOP_K1 (dmlgpu/table/operators.py TOP_K): each invocation selects the K best of one
// sequence, one pass per rank: pass j finds the least (key, index) after pass j-1's, where the
// key is the order key (INCREASING) or its complement (DECREASING), so ties come out by
// ascending index in either direction. O(K x size) per sequence: the general path; the Hamming
// search has its own kernels (search.comp). Parameter word SP_DIMS + 3 * outer dims + 2 * walked
// dims holds K, then the direction, the value and index outputs' strides along the axis, then
// the index output's stride per outer dim (the outer dims' own words hold the value output's).
//
// The indices written are SP_INDEX_BASE + the position along the axis (a piece of a longer
// sequence: dmlgpu/api/selection_spans.py), or with SP_MODE's TOP_K_FROM_CANDIDATES the index
// that binding 4 holds for the chosen element (at its element offset): the second pass over the
// candidates the pieces chose, laid out piece after piece, so that their positions order ties
// as their indices do.
#define INDEX_BINDING 2
#define PARAMS_BINDING 3
#include "select.glsl"

layout(std430, binding = 4) readonly buffer SourceWords { uint source_w[]; };  // sp.source_offset

void main() {
    uint items = param(SP_ITEMS), walked = param(SP_WALKED), outer = param(SP_OUTER_DIMS);
    uint tail = SP_DIMS + 3u * outer + 2u * param(SP_WALKED_DIMS);
    uint k = param(tail), decreasing = param(tail + 1u), value_step = param(tail + 2u),
         index_step = param(tail + 3u);
    bool candidates = (param(SP_MODE) & TOP_K_FROM_CANDIDATES) != 0u;
    uint index_base = param(SP_INDEX_BASE);
    for (uint item = work_item(); item < items; item += work_stride()) {
        uint in_base, out_at;
        outer_offsets(item, in_base, out_at);
        // The index tensor's outer offsets: the same dims, its own strides (param words after K).
        uint rest = item, index_at = 0u;
        for (uint d = 0u; d < outer; ++d) {
            uint size = param(SP_DIMS + 3u * d), i = rest % size;
            rest /= size;
            index_at += i * param(tail + 4u + d);
        }
        uvec2 last_key = uvec2(0u);
        uint last_index = 0u;
        for (uint j = 0u; j < k; ++j) {
            bool found = false;
            uvec2 best_key = uvec2(0xFFFFFFFFu), best_value = uvec2(0u);
            uint best_index = 0u;
            for (uint r = 0u; r < walked; ++r) {
                uvec2 v = load_value(in_base + walked_offset(r));
                uvec2 key = order_key(v);
                if (decreasing != 0u) key = ~key;
                bool after = j == 0u || key_less(last_key, key) || (key == last_key && r > last_index);
                bool better = !found || key_less(key, best_key) || (key == best_key && r < best_index);
                if (after && better) { found = true; best_key = key; best_value = v; best_index = r; }
            }
            last_key = best_key;
            last_index = best_index;
            uint at = in_base + walked_offset(best_index);  // (the candidates' indices: OUT_BITS wide)
            uint index = candidates ? source_w[sp.source_offset + (OUT_BITS == 64 ? 2u * at : at)]
                                    : index_base + best_index;
            STORE_ELEMENT(out_w, sp.out_offset, IN_BITS, out_at + j * value_step, best_value);
            STORE_ELEMENT(index_w, sp.aux_offset, OUT_BITS, index_at + j * index_step, uvec2(index, 0u));
        }
    }
}
