#version 450
#extension GL_GOOGLE_include_directive : require
// DML_OPERATOR_TOP_K1 (dmlgpu/table/operators.py TOP_K): each invocation selects the K best of one
// sequence in one pass over it, keeping them in the outputs themselves as a binary heap whose
// root is the worst kept (by key: the order key for INCREASING or its complement for DECREASING,
// then by index), and sorts them there at the end (heapsort). An element enters while fewer than
// K are kept, or when its key is below the root's (an equal key comes later, so it is worse): it
// replaces the root and sinks. O(size + entries x log K + K log K): random data enters about
// K ln(size / K) times; data already in the opposite order enters every time (size log K). Ties
// come out by ascending index in either direction. The Hamming search has its own kernels
// (search.comp). Parameter word SP_DIMS + 3 * outer dims + 2 * walked dims holds K, then the
// direction, the value and index outputs' strides along the axis, then the index output's
// stride per outer dim (the outer dims' own words hold the value output's).
//
// With TOP_K_GROUP (K up to TOP_K_GROUP_SLOTS over long sequences: dmlgpu/kernels/variants.py),
// a workgroup takes each sequence: L = min(its size, TOP_K_GROUP_SLOTS / K) of its invocations
// each keep the K best of elements i, i + L, ... in a heap of their own in shared memory, then
// the first merges those heaps into the outputs' heap and sorts it (so a larger K spreads over
// fewer invocations, down to one, with no step between two K). Within one invocation elements
// still come in ascending position; the merge compares (key, index) in full.
//
// The indices written are SP_INDEX_BASE + the position along the axis (a piece of a longer
// sequence: dmlgpu/api/selection_spans.py), or with SP_MODE's TOP_K_FROM_CANDIDATES the index
// that binding 4 holds for the chosen element (at its element offset): the second pass over the
// candidates the pieces chose, laid out piece after piece, so that their positions order ties
// as their indices do (and so the indices kept order ties in the heap in both modes).
#define INDEX_BINDING 2
#define PARAMS_BINDING 3
#include "select.glsl"

layout(std430, binding = 4) readonly buffer SourceWords { uint source_w[]; };  // sp.source_offset

// The value output's element e as load_value gives an input element (the invocation's own: any
// other invocation sharing its word writes only its own lanes, by atomics).
uvec2 load_out(uint e) {
#if IN_BITS == 64
    return uvec2(out_w[sp.out_offset + 2u * e], out_w[sp.out_offset + 2u * e + 1u]);
#elif IN_BITS == 32
    return lane_value(out_w[sp.out_offset + e]);
#else
    return element_of(atomicOr(out_w[sp.out_offset + e / (32u / uint(IN_BITS))], 0u), e);
#endif
}

// The index output's element e (OUT_BITS 32 or 64; the high word of a 64-bit index is 0).
uint load_index(uint e) { return index_w[sp.aux_offset + (OUT_BITS == 64 ? 2u * e : e)]; }

// The sequence the invocation works on: its outputs' first elements and steps, and the direction.
uint g_out_at, g_index_at, g_value_step, g_index_step, g_decreasing;

uvec2 ranked_key(uvec2 v) {
    uvec2 key = order_key(v);
    return g_decreasing != 0u ? ~key : key;
}

uvec2 entry_value(uint j) { return load_out(g_out_at + j * g_value_step); }
uint entry_index(uint j) { return load_index(g_index_at + j * g_index_step); }

void set_entry(uint j, uvec2 v, uint index) {
    STORE_ELEMENT(out_w, sp.out_offset, IN_BITS, g_out_at + j * g_value_step, v);
    STORE_ELEMENT(index_w, sp.aux_offset, OUT_BITS, g_index_at + j * g_index_step, uvec2(index, 0u));
}

// Whether (key a, index a) comes after (key b, index b) in the output's order.
bool worse(uvec2 key_a, uint index_a, uvec2 key_b, uint index_b) {
    return key_less(key_b, key_a) || (key_a == key_b && index_a > index_b);
}

// Puts (v, key, index) into the heap of `size` entries at `hole`, moving the worse child up while
// it is worse than the entry.
void sink(uint hole, uint size, uvec2 v, uvec2 key, uint index) {
    for (;;) {
        uint c = 2u * hole + 1u;
        if (c >= size) break;
        uvec2 cv = entry_value(c), ck = ranked_key(cv);
        uint ci = entry_index(c);
        if (c + 1u < size) {
            uvec2 dv = entry_value(c + 1u), dk = ranked_key(dv);
            uint di = entry_index(c + 1u);
            if (worse(dk, di, ck, ci)) { c += 1u; cv = dv; ck = dk; ci = di; }
        }
        if (!worse(ck, ci, key, index)) break;
        set_entry(hole, cv, ci);
        hole = c;
    }
    set_entry(hole, v, index);
}

// Puts (v, key, index) into the outputs' heap at `hole`, moving parents down while they are
// better than it.
void rise(uint hole, uvec2 v, uvec2 key, uint index) {
    while (hole > 0u) {
        uint p = (hole - 1u) / 2u;
        uvec2 pv = entry_value(p), pk = ranked_key(pv);
        uint pi = entry_index(p);
        if (!worse(key, index, pk, pi)) break;
        set_entry(hole, pv, pi);
        hole = p;
    }
    set_entry(hole, v, index);
}

// The outputs' heap of `filled` entries sorted, best first (the worst to the end, one at a time).
void heapsort(uint filled) {
    for (uint end = filled; end > 1u; --end) {
        uvec2 v = entry_value(end - 1u);
        uint index = entry_index(end - 1u);
        set_entry(end - 1u, entry_value(0u), entry_index(0u));
        sink(0u, end - 1u, v, ranked_key(v), index);
    }
}

// TOP_K_GROUP: each invocation's heap of up to K (value, index) in shared memory, at its
// invocation index x K, and how many it holds.
shared uvec2 lane_values[TOP_K_GROUP_SLOTS];
shared uint lane_indices[TOP_K_GROUP_SLOTS];
shared uint lane_counts[SELECTION_WORKGROUP_SIZE];

void lane_set(uint base, uint j, uvec2 v, uint index) {
    lane_values[base + j] = v;
    lane_indices[base + j] = index;
}

void lane_rise(uint base, uint hole, uvec2 v, uvec2 key, uint index) {
    while (hole > 0u) {
        uint p = (hole - 1u) / 2u;
        uvec2 pk = ranked_key(lane_values[base + p]);
        if (!worse(key, index, pk, lane_indices[base + p])) break;
        lane_set(base, hole, lane_values[base + p], lane_indices[base + p]);
        hole = p;
    }
    lane_set(base, hole, v, index);
}

void lane_sink(uint base, uint hole, uint size, uvec2 v, uvec2 key, uint index) {
    for (;;) {
        uint c = 2u * hole + 1u;
        if (c >= size) break;
        uvec2 ck = ranked_key(lane_values[base + c]);
        if (c + 1u < size) {
            uvec2 dk = ranked_key(lane_values[base + c + 1u]);
            if (worse(dk, lane_indices[base + c + 1u], ck, lane_indices[base + c])) { c += 1u; ck = dk; }
        }
        if (!worse(ck, lane_indices[base + c], key, index)) break;
        lane_set(base, hole, lane_values[base + c], lane_indices[base + c]);
        hole = c;
    }
    lane_set(base, hole, v, index);
}

// The index tensor's first element of work item `item` (its outer dims' strides: param words
// after K's), into g_index_at.
void index_offsets(uint item, uint outer, uint tail) {
    uint rest = item;
    g_index_at = 0u;
    for (uint d = 0u; d < outer; ++d) {
        uint size = param(SP_DIMS + 3u * d), i = rest % size;
        rest /= size;
        g_index_at += i * param(tail + 4u + d);
    }
}

// TOP_K_GROUP: a workgroup per sequence (k <= TOP_K_GROUP_SLOTS).
void group_main(uint items, uint walked, uint k, uint tail, bool candidates, uint index_base, bool one_dim,
                uint stride) {
    uint lanes = min(SELECTION_WORKGROUP_SIZE, TOP_K_GROUP_SLOTS / k);
    uint lane = gl_LocalInvocationID.x, base = lane * k;
    uint groups = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
    for (uint item = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; item < items; item += groups) {
        uint in_base;
        outer_offsets(item, in_base, g_out_at);
        index_offsets(item, param(SP_OUTER_DIMS), tail);
        uint filled = 0u;
        uvec2 root_key = uvec2(0u);
        for (uint r = lane < lanes ? lane : walked; r < walked; r += lanes) {
            uint at = in_base + (one_dim ? r * stride : walked_offset(r));
            uvec2 v = load_value(at);
            uvec2 key = ranked_key(v);
            if (filled == k && !key_less(key, root_key)) continue;
            uint index = candidates ? source_w[sp.source_offset + (OUT_BITS == 64 ? 2u * at : at)] : index_base + r;
            if (filled < k) lane_rise(base, filled++, v, key, index);
            else lane_sink(base, 0u, k, v, key, index);
            if (filled == k) root_key = ranked_key(lane_values[base]);
        }
        lane_counts[lane] = filled;
        barrier();  // (shared memory: barrier() orders it in compute shaders)
        if (lane == 0u) {  // the heaps merged into the outputs' (in no order of index: compared in full)
            uint kept = 0u;
            for (uint l = 0u; l < lanes; ++l) {
                for (uint e = 0u; e < lane_counts[l]; ++e) {
                    uvec2 v = lane_values[l * k + e], key = ranked_key(v);
                    uint index = lane_indices[l * k + e];
                    if (kept < k) {
                        rise(kept++, v, key, index);
                    } else {
                        uvec2 rv = entry_value(0u);
                        if (worse(ranked_key(rv), entry_index(0u), key, index)) sink(0u, k, v, key, index);
                    }
                }
            }
            heapsort(kept);
        }
        barrier();  // (the next sequence reuses the heaps)
    }
}

void main() {
    uint items = param(SP_ITEMS), walked = param(SP_WALKED), outer = param(SP_OUTER_DIMS);
    uint tail = SP_DIMS + 3u * outer + 2u * param(SP_WALKED_DIMS);
    uint k = min(param(tail), walked);
    g_decreasing = param(tail + 1u);
    g_value_step = param(tail + 2u);
    g_index_step = param(tail + 3u);
    bool candidates = (param(SP_MODE) & TOP_K_FROM_CANDIDATES) != 0u;
    uint index_base = param(SP_INDEX_BASE);
    // One walked dim (an Axis, the usual case): its stride, not walked_offset's division per element.
    uint first = SP_DIMS + 3u * outer, stride = param(first + 1u);
    bool one_dim = param(SP_WALKED_DIMS) == 1u;
    if ((param(SP_MODE) & TOP_K_GROUP) != 0u) {
        group_main(items, walked, k, tail, candidates, index_base, one_dim, stride);
        return;
    }
    for (uint item = work_item(); item < items; item += work_stride()) {
        uint in_base;
        outer_offsets(item, in_base, g_out_at);
        index_offsets(item, outer, tail);
        uint filled = 0u;
        uvec2 root_key = uvec2(0u);  // the worst kept's key, once K are kept
        for (uint r = 0u; r < walked; ++r) {
            uint at = in_base + (one_dim ? r * stride : walked_offset(r));
            uvec2 v = load_value(at);
            uvec2 key = ranked_key(v);
            if (filled == k && !key_less(key, root_key)) continue;
            uint index = candidates ? source_w[sp.source_offset + (OUT_BITS == 64 ? 2u * at : at)]  // (OUT_BITS wide)
                                    : index_base + r;
            if (filled < k) rise(filled++, v, key, index);  // kept at the end, rising
            else sink(0u, k, v, key, index);  // in the root's place, sinking
            if (filled == k) root_key = ranked_key(entry_value(0u));
        }
        heapsort(filled);
    }
}
