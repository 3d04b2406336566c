#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// Binary-code k-NN (dmlgpu/hamming.py): XOR -> BIT_COUNT -> REDUCE(SUM over a code's words) ->
// TOP_K(INCREASING), fused: distances live in registers and are never stored as a matrix. The
// stages are the graph XOR -> BIT_COUNT -> REDUCE(SUM, last axis) -> TOP_K1(INCREASING) of the
// table's rows, so a graph compiler can route that pattern here. A pair compares by distance,
// then row, so ties go to the lower row; empty entries are (0xFFFFFFFF, 0xFFFFFFFF).
//
// For k up to kernels.HAMMING_REGISTER_K (larger k, range search and Tanimoto: search.comp):
//   (Both run over a grid fixed per device, dmlgpu/kernels/search_programs.py `grid`: their
//   workgroups loop over the dispatch's items, so one pipeline serves every size of search.)
//   HAMMING_SCAN: lane = query, item (x, y) = 64 queries x one long row tile; each lane keeps
//     its k best in a register array (K, a specialization constant: an unrolled insertion
//     network with constant indices) as packed keys (distance << SHIFT) | row_in_tile, and writes
//     them once at the end as k (distance, row) pairs: its slot of the partial buffer. A dispatch
//     covers tiles [tile_base, +tiles) of a piece, so a long search is cut into short submits.
//     With a bound (bound_at): the query's k-th distance over a sample of real rows (the same
//     scan and merge run first over a prefix of the database), so no row farther than it can be
//     in the answer: the lane's list starts full of keys just past the bound, and a row is
//     considered only if it beats them. Without it, the first rows of every tile are inserted in
//     turn (about 32 k rows of a tile for a warp of 32 lanes), and the unrolled insertion costs
//     the scan more than its distances do (k = 32: 2x).
//   HAMMING_MERGE: item = one query, a workgroup: each lane folds a strided share of the query's lists
//     into its register list (a list is sorted: it stops at the first entry that does not get
//     in), then a shared-memory tree halves the lanes' lists to one: the answer.
#include "abi.glsl"

layout(local_size_x = SELECTION_WORKGROUP_SIZE) in;

// Push constants `hp` (abi.glsl, from dmlgpu/kernels.py HAMMING_PUSH_FIELDS): in_offset (scan:
// database piece; merge: input lists), query_offset, out_offset (word offsets); words (32-bit
// words per code); rows (scan: rows in the piece; merge: input lists per query); row_base (the
// piece's first row); rows_per_slice (scan: rows per invocation; merge: lists per invocation);
// k; slices (scan: slices of the piece; merge: output lists per query); slice_base (the piece's
// first slice in the partial layout: list (slice, query) at 2K (slice * queries + query));
// slices_total (slices of that layout); queries;
// tile_base and tiles, query_base and query_end (scan: the dispatch's tiles of the piece and
// queries of the batch); in_at, out_at (words added to in_offset and out_offset: regions of one
// list buffer); bound_at (scan: ALL, or the word, from out_offset, of the lists whose k-th
// distance bounds each query's answer).

layout(std430, binding = 0) readonly buffer InWords { uint in_w[]; };
#ifdef HAMMING_SCAN
// The same memory as uvec4 (in_offset is a multiple of 4 words: buffers start at multiples of
// 256 bytes, a Tensor searched in place at a multiple of 16), for codes of whole uvec4s.
layout(std430, binding = 0) readonly buffer InVec4 { uvec4 in_v[]; };
layout(std430, binding = 1) readonly buffer QueryWords { uint query_w[]; };
layout(std430, binding = 2) buffer OutWords { uint out_w[]; };
#else
layout(std430, binding = 1) buffer OutWords { uint out_w[]; };
#endif

const uint EMPTY = 0xFFFFFFFFu;

bool pair_less(uint d0, uint r0, uint d1, uint r1) { return d0 < d1 || (d0 == d1 && r0 < r1); }

#if defined(HAMMING_REGISTERS) && defined(HAMMING_SCAN)
layout(constant_id = 0) const uint WORDS = 8u;
layout(constant_id = 1) const uint QUERIES = 1u;  // (one query per lane on this path)
layout(constant_id = 2) const uint K = 10u;

// Lane l of item (x, y) serves query x * 64 + l over tile y, rows [y * rows_per_slice,
// +rows_per_slice) of the piece. Every lane walks the tile's rows in order, so the lanes read the
// same database words at the same time (one broadcast load serves the workgroup).
// A key is (distance << SHIFT) | row_in_tile: distance <= WORDS * 32 < 2^(32 - SHIFT), and
// rows_per_slice <= 2^SHIFT (dmlgpu/hamming.py), so keys order as (distance, row) pairs do, and
// no key is all ones (WORDS * 32 has five zero low bits): EMPTY sorts last.
// Rows whose distances are computed before any of them is considered: their loads are in flight
// together (a 128-byte line holds four 256-bit codes); from kernels.HAMMING_WORDS_AT_ONCE.
layout(constant_id = 3) const uint ROWS_AT_ONCE = 4u;

// The lane's query: in registers for codes of up to UNROLL_WORDS words; wider codes read it from
// the query buffer (a private array of their size does not fit a GPU lane: NVIDIA's driver
// refuses the pipeline for 2^14 words).
const uint UNROLL_WORDS = 64u;
const uint QW_SIZE = WORDS <= UNROLL_WORDS ? WORDS : 1u;
uint qw[QW_SIZE];
uint qbase;  // the lane's query's first word in query_w
#define Q(i) (WORDS <= UNROLL_WORDS ? qw[(i)] : query_w[qbase + (i)])
uint best[K];    // the lane's k least keys, sorted

// Adds three bit vectors: per bit, the sum's high and low bit (a full adder, two LOP3s on NVIDIA).
void add3(out uint high, out uint low, uint a, uint b, uint c) {
    uint u = a ^ b;
    high = (a & b) | (u & c);
    low = u ^ c;
}

// The set bits of eight words with four bitCounts (Harley-Seal's carry-save adders): bitCount is
// a quarter-rate instruction on NVIDIA (16 per clock per SM), the adders' logic full rate, and a
// CPU driver emulates it with several vector instructions.
uint bit_count8(uvec4 a, uvec4 b) {
    uint c1, s1, c2, s2, c3, s3, d1, t1;
    add3(c1, s1, a.x, a.y, a.z);
    add3(c2, s2, a.w, b.x, b.y);
    add3(c3, s3, s1, s2, b.z);
    uint ones = s3 ^ b.w, c4 = s3 & b.w;     // weight 1 and a carry of weight 2
    add3(d1, t1, c1, c2, c3);
    uint twos = t1 ^ c4, d2 = t1 & c4;       // weight 2 and a carry of weight 4
    uint fours = d1 ^ d2, eights = d1 & d2;
    return uint(bitCount(ones)) + 2u * uint(bitCount(twos)) + 4u * uint(bitCount(fours)) + 8u * uint(bitCount(eights));
}

// Whether codes of whole eights of words take bit_count8 (kernels.HAMMING_CARRY_SAVE).
layout(constant_id = 4) const bool CARRY_SAVE = true;

// The word loops, unrolled for codes of up to UNROLL_WORDS words so that the query stays in
// registers (constant indices), left rolled for wider codes (the query read from its buffer then).
#define SUM_BITS(LOOP) \
    if (CARRY_SAVE && WORDS % 8u == 0u) { \
        LOOP for (uint v = 0u; v < WORDS / 4u; v += 2u) { \
            uvec4 a = in_v[at / 4u + v] ^ uvec4(Q(4u * v), Q(4u * v + 1u), Q(4u * v + 2u), Q(4u * v + 3u)); \
            uvec4 b = in_v[at / 4u + v + 1u] ^ uvec4(Q(4u * v + 4u), Q(4u * v + 5u), Q(4u * v + 6u), Q(4u * v + 7u)); \
            d += bit_count8(a, b); \
        } \
    } else if (WORDS % 4u == 0u) { \
        LOOP for (uint v = 0u; v < WORDS / 4u; ++v) { \
            uvec4 x = in_v[at / 4u + v] ^ uvec4(Q(4u * v), Q(4u * v + 1u), Q(4u * v + 2u), Q(4u * v + 3u)); \
            uvec4 c = uvec4(bitCount(x)); \
            d += (c.x + c.y) + (c.z + c.w); \
        } \
    } else { \
        LOOP for (uint w = 0u; w < WORDS; ++w) d += uint(bitCount(in_w[at + w] ^ Q(w))); \
    }

uint distance(uint at) {
    uint d = 0u;
    if (WORDS <= UNROLL_WORDS) {
        SUM_BITS([[unroll]])
    } else {
        SUM_BITS([[dont_unroll]])
    }
    return d;
}

void consider(uint key) {
    if (key < best[K - 1u]) {  // rare after the first rows: about K * ln(rows / K) times
        [[unroll]] for (uint i = K - 1u; i > 0u; --i)
            best[i] = key < best[i - 1u] ? best[i - 1u] : min(key, best[i]);
        best[0] = min(best[0], key);
    }
}

// Query q over tile `tile` of the piece: its k best into its slot of the partial buffer.
void scan(uint q, uint tile) {
    uint shift = 31u - uint(findMSB(WORDS * 32u));
    qbase = hp.query_offset + q * WORDS;
    if (WORDS <= UNROLL_WORDS) {
        [[unroll]] for (uint w = 0u; w < WORDS; ++w) qw[w] = query_w[qbase + w];
    }
    // Keys from `cap` up cannot be in the answer: (bound + 1) << shift, the least key of a
    // distance past the bound (bound <= WORDS * 32 < 2^(32 - shift) - 1: no overflow).
    uint cap = EMPTY;
    if (hp.bound_at != EMPTY) {
        uint bound = out_w[hp.out_offset + hp.bound_at + 2u * K * q + 2u * (K - 1u)];
        if (bound != EMPTY) cap = (bound + 1u) << shift;
    }
    [[unroll]] for (uint i = 0u; i < K; ++i) best[i] = cap;
    uint first = tile * hp.rows_per_slice, count = min(hp.rows_per_slice, hp.rows - first);
    uint at = hp.in_offset + first * WORDS, t = 0u;
    for (; t + ROWS_AT_ONCE <= count; t += ROWS_AT_ONCE, at += ROWS_AT_ONCE * WORDS) {
        uint d[ROWS_AT_ONCE];
        [[unroll]] for (uint u = 0u; u < ROWS_AT_ONCE; ++u) d[u] = distance(at + u * WORDS);
        [[unroll]] for (uint u = 0u; u < ROWS_AT_ONCE; ++u) consider((d[u] << shift) | (t + u));
    }
    for (; t < count; ++t, at += WORDS) consider((distance(at) << shift) | t);
    // Slice-major: each dispatch's tiles write one run of the lists (dmlgpu/kernels/search_programs.py
    // SearchStep.span), so the scans of other tiles and pieces need no barrier between them.
    uint list = hp.out_offset + hp.out_at + 2u * K * ((hp.slice_base + tile) * hp.queries + q);
    uint mask = (1u << shift) - 1u, row0 = hp.row_base + first;
    [[unroll]] for (uint i = 0u; i < K; ++i) {
        bool empty = best[i] >= cap;
        out_w[list + 2u * i] = empty ? EMPTY : best[i] >> shift;
        out_w[list + 2u * i + 1u] = empty ? EMPTY : row0 + (best[i] & mask);
    }
}

// Item (x, y): lane l serves query query_base + x * 64 + l (below query_end) over tile
// tile_base + y (y < tiles), the items of one tile consecutive (workgroups running together read
// the same rows); the grid is fixed per device and its workgroups loop over the items.
void main() {
    uint groups = (hp.query_end - hp.query_base + SELECTION_WORKGROUP_SIZE - 1u) / SELECTION_WORKGROUP_SIZE;
    uint items = groups * hp.tiles;
    for (uint item = gl_WorkGroupID.x; item < items; item += gl_NumWorkGroups.x) {
        uint q = hp.query_base + (item % groups) * SELECTION_WORKGROUP_SIZE + gl_LocalInvocationID.x;
        uint tile = hp.tile_base + item / groups;
        if (q < hp.query_end && tile < hp.slices) scan(q, tile);
    }
}
#elif defined(HAMMING_REGISTERS)
layout(constant_id = 2) const uint K = 10u;
shared uint shared_d[(SELECTION_WORKGROUP_SIZE / 2) * K];
shared uint shared_r[(SELECTION_WORKGROUP_SIZE / 2) * K];

uint bd[K], br[K];  // this lane's list, sorted

// Folds (d, r) into the lane's list; false (nothing changed) if it does not beat the last.
bool fold(uint d, uint r) {
    if (!pair_less(d, r, bd[K - 1u], br[K - 1u])) return false;
    [[unroll]] for (uint i = K - 1u; i > 0u; --i) {
        bool shifted = pair_less(d, r, bd[i - 1u], br[i - 1u]);
        bool here = !shifted && pair_less(d, r, bd[i], br[i]);
        bd[i] = shifted ? bd[i - 1u] : (here ? d : bd[i]);
        br[i] = shifted ? br[i - 1u] : (here ? r : br[i]);
    }
    if (pair_less(d, r, bd[0], br[0])) { bd[0] = d; br[0] = r; }
    return true;
}

// Query q, a workgroup: its hp.rows lists of K pairs at in_offset + in_at + 2K * (j * queries + q);
// the answer goes to out_offset + out_at + 2K * q (the same buffer may be bound to both: the
// regions are apart).
void merge(uint q, uint lane) {
    [[unroll]] for (uint i = 0u; i < K; ++i) { bd[i] = EMPTY; br[i] = EMPTY; }
    for (uint j = lane; j < hp.rows; j += SELECTION_WORKGROUP_SIZE) {
        uint at = hp.in_offset + hp.in_at + 2u * K * (j * hp.queries + q);
        for (uint i = 0u; i < K; ++i)
            if (!fold(in_w[at + 2u * i], in_w[at + 2u * i + 1u])) break;
    }
    [[dont_unroll]] for (uint span = SELECTION_WORKGROUP_SIZE / 2u; span > 0u; span /= 2u) {
        if (lane >= span && lane < 2u * span) {
            [[unroll]] for (uint i = 0u; i < K; ++i) {
                shared_d[(lane - span) * K + i] = bd[i];
                shared_r[(lane - span) * K + i] = br[i];
            }
        }
        barrier();
        if (lane < span) {
            for (uint i = 0u; i < K; ++i)
                if (!fold(shared_d[lane * K + i], shared_r[lane * K + i])) break;
        }
        barrier();
    }
    if (lane == 0u) {
        uint dest = hp.out_offset + hp.out_at + 2u * K * q;
        [[unroll]] for (uint i = 0u; i < K; ++i) { out_w[dest + 2u * i] = bd[i]; out_w[dest + 2u * i + 1u] = br[i]; }
    }
}

// Item = query (the grid is fixed per device; its workgroups loop over the queries).
void main() {
    for (uint q = gl_WorkGroupID.x; q < hp.queries; q += gl_NumWorkGroups.x) {
        merge(q, gl_LocalInvocationID.x);
        barrier();  // (the next query reuses the shared lists)
    }
}
#endif
