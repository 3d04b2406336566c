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
// With TOP_K_SORT (long sequences on a GPU, or K above TOP_K_GROUP_SLOTS / 2 anywhere: the
// passes come from dmlgpu/kernels/compiled_selection.py top_k_sort_passes), each element becomes
// an entry (its ranked key, its index) in a scratch buffer bound at binding 4, and a bitonic
// network keeps the best: TOP_K_FIRST loads blocks of TOP_K_GROUP_SLOTS elements (the sequence
// padded to a power of two M with entries worse than any element) and sorts each into runs of L
// (a power of two >= K) in shared memory; where two runs fit a block, TOP_K_FOLD halves them
// again and again (entry j of the pair's first run becomes the better of it and entry L-1-j of
// the second, a bitonic sequence holding the pair's L best, merged back into a run), so each pass
// leaves L of every block; where they do not, TOP_K_EXCHANGE (one stride across blocks) and
// TOP_K_MERGE (the strides within a block) finish the sort into runs of L, and then halve pairs
// of runs across blocks: with SP_SORT_HALVE the first of those passes reads each entry j of the
// halved sequence as the better of the pair's entries j and L-1-j (the fold's step, done as it
// loads, so halving costs no pass of its own) and merges. The pass with TOP_K_SORT_OUT writes the first K entries
// of each sequence's last run to the outputs, each value read again from the input by its index.
// The order compared is the heap's, (key, index) in full, so both give the same outputs.
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

// TOP_K_SORT: an entry is (ranked key, index): four words for 64-bit types (key lo, key hi,
// index, unused), else two (key, index). The block in shared memory reuses TOP_K_GROUP's slots.
#if IN_BITS == 64
#define ENTRY_WORDS 4u
#else
#define ENTRY_WORDS 2u
#endif
layout(std430, binding = 4) coherent buffer ScratchWords { uint scratch_w[]; };  // sp.source_offset

#define SORT_BLOCK TOP_K_GROUP_SLOTS
#define SORT_HALF_PER_LANE (TOP_K_GROUP_SLOTS / 2u / SELECTION_WORKGROUP_SIZE)

void get_entry(uint e, out uvec2 key, out uint index) {
    uint w = sp.source_offset + e * ENTRY_WORDS;
#if IN_BITS == 64
    key = uvec2(scratch_w[w], scratch_w[w + 1u]);
    index = scratch_w[w + 2u];
#else
    key = uvec2(scratch_w[w], 0u);
    index = scratch_w[w + 1u];
#endif
}

void put_entry(uint e, uvec2 key, uint index) {
    uint w = sp.source_offset + e * ENTRY_WORDS;
#if IN_BITS == 64
    scratch_w[w] = key.x;
    scratch_w[w + 1u] = key.y;
    scratch_w[w + 2u] = index;
#else
    scratch_w[w] = key.x;
    scratch_w[w + 1u] = index;
#endif
}

// The key an element sorts by, as stored: for types under 64 bits one word that orders as the
// ranked key does (a signed value's order key keeps its sign in the high word), the high 0.
uvec2 stored_key(uvec2 v) {
#if IN_BITS == 64
    return ranked_key(v);
#else
#if IN_KIND == KIND_INT
    uint key = v.x ^ 0x80000000u;  // sign-extended to 32 bits: its order as unsigned
#else
    uint key = order_key(v).x;
#endif
    return uvec2(g_decreasing != 0u ? ~key : key, 0u);
#endif
}

// Shared entries a and b (a < b) put in order: the better first if `best_first`, else the worse.
void block_exchange(uint a, uint b, bool best_first) {
    uvec2 ka = lane_values[a], kb = lane_values[b];
    uint ia = lane_indices[a], ib = lane_indices[b];
    if (best_first ? worse(ka, ia, kb, ib) : worse(kb, ib, ka, ia)) {
        lane_values[a] = kb; lane_indices[a] = ib;
        lane_values[b] = ka; lane_indices[b] = ia;
    }
}

// The bitonic steps of stage `stage` at strides `from` down to 1 over the block's `size`
// entries, whose first has position `at` in the sequence: a pair's direction is best first
// where the stage is the run's (`run`) or the position's bit `stage` is 0.
void block_steps(uint size, uint stage, uint run, uint from, uint at) {
    for (uint j = from; j > 0u; j >>= 1u) {
        for (uint t = gl_LocalInvocationID.x; t < size / 2u; t += SELECTION_WORKGROUP_SIZE) {
            uint i = 2u * t - (t & (j - 1u));
            block_exchange(i, i + j, stage == run || ((at + i) & stage) == 0u);
        }
        barrier();
    }
}

// The block's `size` entries, the first at position `at`, sorted by the stages up to the block's
// or the run's length: into runs of `run` best first where a run fits the block, else into
// blocks in alternate directions (bitonic), for the later stages across blocks.
void block_sort(uint size, uint run, uint at) {
    for (uint stage = 2u; stage <= min(run, size); stage <<= 1u) block_steps(size, stage, run, stage >> 1u, at);
}

// The block's size / run runs (each best first) folded into one run of the best `run`, at 0.
void block_fold(uint size, uint run) {
    for (uint count = size / run; count > 1u; count >>= 1u) {
        uint kept = count / 2u * run;
        uvec2 keys[SORT_HALF_PER_LANE];
        uint indices[SORT_HALF_PER_LANE];
        uint n = 0u;
        for (uint t = gl_LocalInvocationID.x; t < kept; t += SELECTION_WORKGROUP_SIZE) {
            uint p = t / run, j = t % run;
            uint a = 2u * p * run + j, b = (2u * p + 1u) * run + run - 1u - j;
            bool take_b = worse(lane_values[a], lane_indices[a], lane_values[b], lane_indices[b]);
            keys[n] = take_b ? lane_values[b] : lane_values[a];
            indices[n] = take_b ? lane_indices[b] : lane_indices[a];
            ++n;
        }
        barrier();
        n = 0u;
        for (uint t = gl_LocalInvocationID.x; t < kept; t += SELECTION_WORKGROUP_SIZE) {
            lane_values[t] = keys[n];
            lane_indices[t] = indices[n];
            ++n;
        }
        barrier();
        block_steps(kept, run, run, run >> 1u, 0u);  // each bitonic run merged, best first
    }
}

// Entry j of a sequence whose entries start at `source`: with `halve`, of the sequence that
// halving its pairs of runs of `run` gives (the better of the pair's entries j and run-1-j).
void sequence_entry(uint source, uint j, uint run, bool halve, out uvec2 key, out uint index) {
    if (!halve) {
        get_entry(source + j, key, index);
        return;
    }
    uint base = source + 2u * (j / run) * run, i = j % run;
    uvec2 other;
    uint other_index;
    get_entry(base + i, key, index);
    get_entry(base + 2u * run - 1u - i, other, other_index);
    if (worse(key, index, other, other_index)) {
        key = other;
        index = other_index;
    }
}

// The block of `size` entries from entry `first` of the sequence at `source` (see sequence_entry).
void block_load(uint source, uint first, uint size, uint run, bool halve) {
    for (uint t = gl_LocalInvocationID.x; t < size; t += SELECTION_WORKGROUP_SIZE) {
        uvec2 key;
        uint index;
        sequence_entry(source, first + t, run, halve, key, index);
        lane_values[t] = key;
        lane_indices[t] = index;
    }
    barrier();
}

void block_store(uint to, uint size) {
    for (uint t = gl_LocalInvocationID.x; t < size; t += SELECTION_WORKGROUP_SIZE)
        put_entry(to + t, lane_values[t], lane_indices[t]);
    barrier();  // (the block is loaded again next)
}

// The block's first `count` entries, positions `first` on of sequence `item` (best first), into
// its outputs, each value read again from the input at its index's position.
void block_output(uint item, uint first, uint count, uint tail, uint index_base, bool one_dim, uint stride) {
    uint in_base;
    outer_offsets(item, in_base, g_out_at);
    index_offsets(item, param(SP_OUTER_DIMS), tail);
    for (uint t = gl_LocalInvocationID.x; t < count; t += SELECTION_WORKGROUP_SIZE) {
        uint index = lane_indices[t], r = index - index_base;
        set_entry(first + t, load_value(in_base + (one_dim ? r * stride : walked_offset(r))), index);
    }
    barrier();
}

void sort_main(uint items, uint walked, uint k, uint tail, uint index_base, bool one_dim, uint stride) {
    uint step = param(SP_SORT_STEP), run = param(SP_SORT_RUN), stage = param(SP_SORT_STAGE);
    uint entries = param(SP_SORT_ENTRIES), from = param(SP_SORT_FROM), from_step = param(SP_SORT_FROM_STEP);
    uint to = param(SP_SORT_TO), to_step = param(SP_SORT_TO_STEP);
    bool to_outputs = (param(SP_MODE) & TOP_K_SORT_OUT) != 0u, halve = param(SP_SORT_HALVE) != 0u;
    uint groups = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
    uint group = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (step == TOP_K_EXCHANGE) {  // one invocation per pair, across blocks
        uint j = param(SP_SORT_STRIDE), pairs = entries / 2u;
        for (uint u = group * SELECTION_WORKGROUP_SIZE + gl_LocalInvocationID.x; u < items * pairs;
             u += groups * SELECTION_WORKGROUP_SIZE) {
            uint item = u / pairs, t = u % pairs;
            uint i = 2u * t - (t & (j - 1u)), source = from + item * from_step, target = to + item * to_step;
            uvec2 ka, kb;
            uint ia, ib;
            sequence_entry(source, i, run, halve, ka, ia);
            sequence_entry(source, i + j, run, halve, kb, ib);
            bool best_first = stage == run || (i & stage) == 0u;
            bool swap = best_first ? worse(ka, ia, kb, ib) : worse(kb, ib, ka, ia);
            if (swap || halve || source != target) {  // (in place, only a swap writes)
                put_entry(target + i, swap ? kb : ka, swap ? ib : ia);
                put_entry(target + i + j, swap ? ka : kb, swap ? ia : ib);
            }
        }
        return;
    }
    uint size = min(entries, SORT_BLOCK), blocks = entries / size;
    for (uint g = group; g < items * blocks; g += groups) {
        uint item = g / blocks, b = g % blocks;
        if (step == TOP_K_FIRST) {  // elements -> entries (past the sequence: worse than any)
            uint in_base, unused;
            outer_offsets(item, in_base, unused);
            for (uint t = gl_LocalInvocationID.x; t < size; t += SELECTION_WORKGROUP_SIZE) {
                uint r = b * size + t;
                if (r < walked) {
                    lane_values[t] = stored_key(load_value(in_base + (one_dim ? r * stride : walked_offset(r))));
                    lane_indices[t] = index_base + r;
                } else {
                    lane_values[t] = uvec2(0xFFFFFFFFu, IN_BITS == 64 ? 0xFFFFFFFFu : 0u);
                    lane_indices[t] = 0xFFFFFFFFu;
                }
            }
            barrier();
            block_sort(size, run, b * size);
        } else {
            block_load(from + item * from_step, b * size, size, run, halve);
        }
        bool whole = step == TOP_K_MERGE || run >= size;  // the block's entries kept in place
        if (step == TOP_K_MERGE) {  // the stage's strides below the block, in place
            block_steps(size, stage, run, min(stage, size) >> 1u, b * size);
        } else if (!whole) {  // TOP_K_FIRST or TOP_K_FOLD: the block's runs folded into one, at 0
            block_fold(size, run);
        }
        if (to_outputs) {  // the sequence's last run: its first K to the outputs
            uint first = whole ? b * size : 0u;
            if (first < k) block_output(item, first, min(k - first, whole ? size : run), tail, index_base, one_dim, stride);
            continue;
        }
        if (whole) block_store(to + item * to_step + b * size, size);
        else block_store(to + item * to_step + b * run, run);
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
    if ((param(SP_MODE) & TOP_K_SORT) != 0u) {
        sort_main(items, walked, k, tail, index_base, one_dim, stride);
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
