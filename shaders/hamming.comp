#version 450
#extension GL_GOOGLE_include_directive : require
// Binary-code k-NN (dmlgpu/hamming.py): XOR -> BIT_COUNT -> REDUCE(SUM over a code's words) ->
// TOP_K(INCREASING), fused: distances live in registers and are never stored as a matrix.
//
// HAMMING_SCAN: an invocation walks rows_per_slice rows of one database piece in increasing
//   order (main says which) for QUERIES queries, computes popcount(row ^ query) summed over the
//   code's words, and keeps for each query the k least (distance, row) pairs, sorted, in its own slot of the partial
//   buffer (insertion when a pair beats the slot's last; a pair compares by distance, then row,
//   so ties go to the lower row). Empty entries are (0xFFFFFFFF, 0xFFFFFFFF). Pairs, not one
//   packed key: codes of any width, databases of any size. The stages are the graph
//   XOR -> BIT_COUNT -> REDUCE(SUM, last axis) -> TOP_K1(INCREASING) of the table's rows, so a
//   graph compiler can route that pattern here.
// HAMMING_MERGE: invocation (list j, query q) merges sorted lists [j * group, +group) of k pairs
//   into list j of the next level (a group-way merge, k steps): log_group(lists) passes leave one
//   list per query, the answer.
#include "abi.glsl"

layout(local_size_x = SELECTION_WORKGROUP_SIZE) in;

// Push constants `hp` (abi.glsl, from dmlgpu/kernels.py HAMMING_PUSH_FIELDS): in_offset (scan:
// database piece; merge: input lists), query_offset, out_offset (word offsets); words (32-bit
// words per code); rows (scan: rows in the piece; merge: input lists per query); row_base (the
// piece's first row); rows_per_slice (scan: rows per invocation; merge: lists per invocation);
// k; slices (scan: slices of the piece; merge: output lists per query); slice_base (the piece's
// first slice in the partial layout); slices_total (slices per query in that layout); queries
// (the grid's y is rounded up to a power of two, so that few pipelines serve every call).

layout(std430, binding = 0) readonly buffer InWords { uint in_w[]; };
#ifdef HAMMING_SCAN
layout(std430, binding = 1) readonly buffer QueryWords { uint query_w[]; };
layout(std430, binding = 2) buffer OutWords { uint out_w[]; };
#else
layout(std430, binding = 1) buffer OutWords { uint out_w[]; };
#endif

const uint EMPTY = 0xFFFFFFFFu;

bool pair_less(uint d0, uint r0, uint d1, uint r1) { return d0 < d1 || (d0 == d1 && r0 < r1); }

// Inserts (d, r) into the sorted list of k pairs at word `list` of out_w, if it beats the last.
void insert(uint list, uint d, uint r) {
    uint k = hp.k;
    uint i = k - 1u;
    if (!pair_less(d, r, out_w[list + 2u * i], out_w[list + 2u * i + 1u])) return;
    while (i > 0u && pair_less(d, r, out_w[list + 2u * (i - 1u)], out_w[list + 2u * (i - 1u) + 1u])) {
        out_w[list + 2u * i] = out_w[list + 2u * (i - 1u)];
        out_w[list + 2u * i + 1u] = out_w[list + 2u * (i - 1u) + 1u];
        --i;
    }
    out_w[list + 2u * i] = d;
    out_w[list + 2u * i + 1u] = r;
}

#ifdef HAMMING_SCAN
// The code's word count and the queries an invocation serves are specialization constants, so
// the word loop has a constant trip count and the queries' words stay in registers; each
// database word is loaded once for QUERIES queries.
layout(constant_id = 0) const uint WORDS = 8u;
layout(constant_id = 1) const uint QUERIES = 4u;

// Workgroup (x, y) serves queries [x * 64 * QUERIES, +64 * QUERIES) over tile y of the piece:
// rows [y * rows_per_slice, +rows_per_slice), its list slot y. Lane l holds queries
// (x * 64 + l) * QUERIES + j in registers, and every lane walks the tile's rows in order: the
// lanes read the same database words at the same time (one load serves the workgroup's
// 64 * QUERIES queries), so the database is read once per workgroup of queries, not per query.
void main() {
    uint tile = gl_WorkGroupID.y;
    uint q0 = gl_GlobalInvocationID.x * QUERIES;
    if (tile >= hp.slices || q0 >= hp.queries) return;
    uint n = min(QUERIES, hp.queries - q0);
    uint qw[WORDS * QUERIES];
    uint worst[QUERIES];
    for (uint j = 0u; j < QUERIES; ++j) {
        uint q = min(q0 + j, hp.queries - 1u);  // a missing query repeats the last: never stored
        for (uint w = 0u; w < WORDS; ++w) qw[j * WORDS + w] = query_w[hp.query_offset + q * WORDS + w];
        worst[j] = EMPTY;
        if (j < n) {
            uint list = hp.out_offset + 2u * hp.k * ((q0 + j) * hp.slices_total + hp.slice_base + tile);
            for (uint i = 0u; i < hp.k; ++i) { out_w[list + 2u * i] = EMPTY; out_w[list + 2u * i + 1u] = EMPTY; }
        }
    }
    uint first = tile * hp.rows_per_slice, last = min(first + hp.rows_per_slice, hp.rows);
    for (uint row = first; row < last; ++row) {
        uint at = hp.in_offset + row * WORDS;
        uint d[QUERIES];
        for (uint j = 0u; j < QUERIES; ++j) d[j] = 0u;
        for (uint w = 0u; w < WORDS; ++w) {
            uint x = in_w[at + w];
            for (uint j = 0u; j < QUERIES; ++j) d[j] += uint(bitCount(x ^ qw[j * WORDS + w]));
        }
        for (uint j = 0u; j < QUERIES; ++j) {
            if (d[j] < worst[j] && j < n) {  // rows come in order: an equal distance loses (higher row)
                uint list = hp.out_offset + 2u * hp.k * ((q0 + j) * hp.slices_total + hp.slice_base + tile);
                insert(list, d[j], hp.row_base + row);
                worst[j] = out_w[list + 2u * (hp.k - 1u)];
            }
        }
    }
}
#else
void main() {
    uint j = gl_GlobalInvocationID.x, q = gl_WorkGroupID.y;
    if (j >= hp.slices || q >= hp.queries) return;
    uint group = hp.rows_per_slice, k = hp.k;
    uint first = j * group, count = min(group, hp.rows - first);
    uint lists = hp.in_offset + 2u * k * (q * hp.rows + first);
    uint dest = hp.out_offset + 2u * k * (q * hp.slices + j);
    uint heads[64];  // position in each merged list (group <= 64)
    for (uint g = 0u; g < count; ++g) heads[g] = 0u;
    for (uint i = 0u; i < k; ++i) {
        uint best_d = EMPTY, best_r = EMPTY, best_g = 0u;
        for (uint g = 0u; g < count; ++g) {
            if (heads[g] >= k) continue;
            uint at = lists + 2u * (g * k + heads[g]);
            if (pair_less(in_w[at], in_w[at + 1u], best_d, best_r)) { best_d = in_w[at]; best_r = in_w[at + 1u]; best_g = g; }
        }
        if (best_d != EMPTY || best_r != EMPTY) heads[best_g] += 1u;
        out_w[dest + 2u * i] = best_d;
        out_w[dest + 2u * i + 1u] = best_r;
    }
}
#endif
