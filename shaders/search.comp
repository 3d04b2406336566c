#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// Binary-code search beyond the register path (dmlgpu/search/hamming.py, the plan in
// dmlgpu/kernels/search_programs.py): exact top-k for any k, range search, Tanimoto. Every
// kernel orders rows by an integer key, smaller first, ties by lower row:
//   Hamming: the distance popcount(a ^ q);
//   Tanimoto: SCALE - floor(c * SCALE / u), c = popcount(a & q), u = popcount(a | q), SCALE =
//     2^27; an empty union counts as 1 (row_counts), so 0/0 is 0 (RDKit's rule since its 2025.09.5;
//     1 before) in every kernel. Distinct fractions with denominators up to 8,192 lie
//     more than 2^-26 apart, so the floor is exact and keeps their order: equal keys are equal
//     fractions. The bound tests compare fractions by cross-multiplication.
// The kernels (one define each). Every kernel runs over a grid fixed per device
// (dmlgpu/kernels/search_programs.py `grid`): its workgroups (or invocations) loop over the
// dispatch's work items, so one pipeline serves every size of search.
//   SEARCH_HIST: item = (block of sampled rows, SEARCH_HIST_QUERIES queries); lane = row: a
//     histogram of key >> shift per query in shared memory, added to the global one. The
//     sample: every stride-th row (stride 1: every row).
//   SEARCH_BOUND: lane = query: the bound key, the upper edge of the bin where the histogram's
//     running sum reaches `reach`. Every row's histogram and reach = k: the k nearest surely lie
//     within. A sample's and reach = its expected count of k rows plus a margin: they lie
//     within but for a rare sample (the selection then finds fewer than k candidates).
//   SEARCH_GATHER: item = (64 queries, one tile of rows walked in order; every lane reads the
//     same row: one load serves the workgroup); lane = query: each row whose key is within the
//     query's bound is appended to the (query, tile) region, in row order; the region's count is
//     written even past its capacity (the selection then reports overflow).
//   SEARCH_SELECT: item = query, a workgroup each: its candidates (the regions in tile order: row
//     order) -> the k-th least key by radix select over the key's digits -> the k least in row
//     order (ties at the threshold: the lowest rows) -> a stable LSD radix sort by key, each lane
//     owning a run of the entries (per-lane digit counts: no atomics, no per-entry barriers) ->
//     the answer; a query whose regions overflowed gets status 1 (its bound holds k rows: the
//     host searches it again with regions counted first), one whose regions hold fewer than k
//     candidates status 2 (searched again with a sure bound). k = 0: every candidate, sorted
//     (range search), written at the query's `lims`.
//   SEARCH_ROWS: copies rows of codes (by an index list, or a run), for add/remove/re-sorting.
//   SEARCH_FINISH: answer entries -> values (uint32 distance or float32 similarity, rounded
//     exactly from the integers) and int64 ids, for answers that stay on the device.
// An entry is (key, row) for Hamming, (key, row, c << 16 | u) for Tanimoto.
#include "abi.glsl"

layout(local_size_x = SELECTION_WORKGROUP_SIZE) in;

// The code's 32-bit words and the metric (0 Hamming, 1 Tanimoto): specialization constants.
layout(constant_id = 0) const uint WORDS = 8u;
layout(constant_id = 1) const uint METRIC = 0u;
const uint ENTRY = METRIC == 0u ? 2u : 3u;
const uint SCALE_BITS = 27u;
const uint ALL = 0xFFFFFFFFu;
const uint GROUP = SELECTION_WORKGROUP_SIZE;

uint tanimoto_key(uint c, uint u) {
    uint a = c << 13u;  // c <= u <= 2^13
    uint q1 = a / u, r = a - q1 * u;
    uint q2 = (r << 14u) / u;
    return (1u << SCALE_BITS) - ((q1 << 14u) + q2);
}

uint entry_key(uvec2 counts) { return METRIC == 0u ? counts.x : tanimoto_key(counts.x, counts.y); }

#if defined(SEARCH_HIST) || defined(SEARCH_GATHER)
layout(std430, binding = 0) readonly buffer DbWords { uint db_w[]; };
// The same memory as uvec4 (db_offset and rows are 16-byte aligned when WORDS % 4 == 0).
layout(std430, binding = 0) readonly buffer DbVec4 { uvec4 db_v[]; };
layout(std430, binding = 1) readonly buffer QueryWords { uint query_w[]; };
layout(std430, binding = 2) buffer AuxWords { uint aux_w[]; };

// The query: in registers for codes of up to UNROLL_WORDS words (SEARCH_GATHER), else read
// from its buffer (the same word for every lane of a workgroup in SEARCH_HIST: one load).
const uint UNROLL_WORDS = 64u;
const uint QW_SIZE = WORDS <= UNROLL_WORDS ? WORDS : 1u;
uint qw[QW_SIZE];
uint qbase;

// (distance, 0) for Hamming, (popcount(a & q), popcount(a | q)) for Tanimoto, of the row at word `at`
// (row_counts: an empty union as 1).
#define COUNT_WORDS(LOOP) \
    if (WORDS % 4u == 0u) { \
        LOOP for (uint v = 0u; v < WORDS / 4u; ++v) { \
            uvec4 x = db_v[at / 4u + v], y = uvec4(Q(4u * v), Q(4u * v + 1u), Q(4u * v + 2u), Q(4u * v + 3u)); \
            if (METRIC == 0u) { uvec4 c = uvec4(bitCount(x ^ y)); a += (c.x + c.y) + (c.z + c.w); } \
            else { uvec4 c = uvec4(bitCount(x & y)), d = uvec4(bitCount(x | y)); \
                   a += (c.x + c.y) + (c.z + c.w); b += (d.x + d.y) + (d.z + d.w); } \
        } \
    } else { \
        LOOP for (uint w = 0u; w < WORDS; ++w) { \
            uint x = db_w[at + w], y = Q(w); \
            if (METRIC == 0u) a += uint(bitCount(x ^ y)); \
            else { a += uint(bitCount(x & y)); b += uint(bitCount(x | y)); } \
        } \
    }

// Unrolled for codes of up to LIMIT words (rolled, wider codes compile in a fraction of the time).
#define DEFINE_ROW_COUNTS(LIMIT) \
uvec2 row_counts(uint at) { \
    uint a = 0u, b = 0u; \
    if (WORDS <= LIMIT) { \
        COUNT_WORDS([[unroll]]) \
    } else { \
        COUNT_WORDS([[dont_unroll]]) \
    } \
    return uvec2(a, METRIC == 0u ? b : max(b, 1u)); /* (Tanimoto: 0/0 as 0/1, RDKit's 0) */ \
}
#endif

#if defined(SEARCH_HIST)
// Bins per query and queries per workgroup: 8 KiB of shared memory (Vulkan guarantees 16).
const uint BINS = SEARCH_HIST_BINS;
const uint HQ = SEARCH_HIST_QUERIES;
shared uint hist[HQ * BINS];
#define Q(i) query_w[qbase + (i)]
// (Rolled past 8 words: the query is read from its buffer, nothing needs constant indices, and
// lavapipe compiled a 2,048-bit Tanimoto histogram in 5 s unrolled.)
DEFINE_ROW_COUNTS(8u)

// Item (x, y): the sample's rows [(tile_base + x) * rows_per_tile, +rows_per_tile), x < tiles,
// the sample being every stride-th row of the piece (row j * stride: systematic, so rows in any
// order, sorted or clustered, are sampled in proportion); queries query_base + [y * HQ, +HQ),
// below query_end. The global histogram: aux words hist_at + q * BINS.
void main() {
    uint lane = gl_LocalInvocationID.x;
    uint groups = (sp.query_end - sp.query_base + HQ - 1u) / HQ, items = sp.tiles * groups;
    for (uint item = gl_WorkGroupID.x; item < items; item += gl_NumWorkGroups.x) {
        for (uint i = lane; i < HQ * BINS; i += GROUP) hist[i] = 0u;
        barrier();
        uint q0 = sp.query_base + (item % groups) * HQ;
        uint first = (sp.tile_base + item / groups) * sp.rows_per_tile;
        uint last = min(first + sp.rows_per_tile, (sp.rows + sp.stride - 1u) / sp.stride);
        for (uint j = first + lane; j < last; j += GROUP) {
            uint at = sp.db_offset + j * sp.stride * WORDS;
            [[dont_unroll]] for (uint j = 0u; j < HQ; ++j) {
                uint q = q0 + j;
                if (q >= sp.query_end) break;
                qbase = sp.query_offset + q * WORDS;
                uint key = entry_key(row_counts(at));
                atomicAdd(hist[j * BINS + min(key >> sp.shift, BINS - 1u)], 1u);
            }
        }
        barrier();
        for (uint i = lane; i < HQ * BINS; i += GROUP) {
            uint q = q0 + i / BINS;
            if (hist[i] != 0u && q < sp.query_end)
                atomicAdd(aux_w[sp.aux_offset + sp.hist_at + q * BINS + i % BINS], hist[i]);
        }
        barrier();  // (the next item clears hist)
    }
}
#elif defined(SEARCH_BOUND)
layout(std430, binding = 0) buffer AuxWords { uint aux_w[]; };
const uint BINS = SEARCH_HIST_BINS;

// Lane = query: bounds[q] = the upper edge of the first bin where the running sum reaches
// `reach` (the last bin holds every key past it: no edge).
void main() {
    for (uint q = gl_GlobalInvocationID.x; q < sp.queries; q += gl_NumWorkGroups.x * GROUP) {
        uint sum = 0u, bound = ALL;
        for (uint b = 0u; b + 1u < BINS; ++b) {
            sum += aux_w[sp.aux_offset + sp.hist_at + q * BINS + b];
            if (sum >= sp.reach) { bound = ((b + 1u) << sp.shift) - 1u; break; }
        }
        aux_w[sp.aux_offset + sp.bounds_at + q] = bound;
    }
}
#elif defined(SEARCH_GATHER)
layout(std430, binding = 3) buffer OutWords { uint out_w[]; };
#define Q(i) (WORDS <= UNROLL_WORDS ? qw[(i)] : query_w[qbase + (i)])
DEFINE_ROW_COUNTS(UNROLL_WORDS)

// Whether a row's counts are within the bound key: Hamming d <= bound; Tanimoto
// key <= bound <=> c / u >= f / 2^27 (f = 2^27 - bound) <=> c * 2^27 >= f * u.
bool within(uvec2 counts, uint bound, uint f) {
    if (METRIC == 0u) return counts.x <= bound;
    uint high, low;
    umulExtended(f, counts.y, high, low);
    uint c_high = counts.x >> (32u - SCALE_BITS), c_low = counts.x << SCALE_BITS;
    return c_high > high || (c_high == high && c_low >= low);
}

// Query q over tile `tile` of the piece. The region of (query, tile): capacity > 0:
// `capacity` entries at region * capacity; else its start and end are aux words regions_at +
// region and the next.
void gather(uint q, uint tile) {
    qbase = sp.query_offset + q * WORDS;
    if (WORDS <= UNROLL_WORDS) {
        [[unroll]] for (uint w = 0u; w < QW_SIZE; ++w) qw[w] = query_w[qbase + w];
    }
    uint bound = sp.bounds_at == ALL ? ALL : aux_w[sp.aux_offset + sp.bounds_at + q];
    uint f = bound >= (1u << SCALE_BITS) ? 0u : (1u << SCALE_BITS) - bound;
    uint region = q * sp.tiles_total + sp.tile_index_base + tile;
    uint start = region * sp.capacity, capacity = sp.capacity;
    if (capacity == 0u) {
        start = aux_w[sp.aux_offset + sp.regions_at + region];
        capacity = aux_w[sp.aux_offset + sp.regions_at + region + 1u] - start;
    }
    uint first = tile * sp.rows_per_tile, count = min(sp.rows_per_tile, sp.rows - first);
    uint at = sp.db_offset + first * WORDS, n = 0u;
    for (uint t = 0u; t < count; ++t, at += WORDS) {
        uvec2 counts = row_counts(at);
        if (within(counts, bound, f)) {  // rare once the bound is tight
            if (n < capacity) {
                uint e = sp.out_offset + ENTRY * (start + n);
                out_w[e] = entry_key(counts);
                out_w[e + 1u] = sp.row_base + first + t;
                if (METRIC != 0u) out_w[e + 2u] = (counts.x << 16u) | counts.y;
            }
            ++n;
        }
    }
    aux_w[sp.aux_offset + sp.counts_at + region] = n;
}

// Item (x, y): lane l serves query query_base + x * 64 + l (below query_end) over tile
// tile_base + y (y < tiles); items of one tile are consecutive (workgroups running together read
// the same rows).
void main() {
    uint groups = (sp.query_end - sp.query_base + GROUP - 1u) / GROUP, items = groups * sp.tiles;
    for (uint item = gl_WorkGroupID.x; item < items; item += gl_NumWorkGroups.x) {
        uint q = sp.query_base + (item % groups) * GROUP + gl_LocalInvocationID.x;
        if (q < sp.query_end) gather(q, sp.tile_base + item / groups);
    }
}
#elif defined(SEARCH_SELECT)
layout(std430, binding = 0) buffer AuxWords { uint aux_w[]; };
layout(std430, binding = 1) readonly buffer Candidates { uint cand_w[]; };
// Written and read back by other lanes of the workgroup: coherent, behind memoryBarrierBuffer().
layout(std430, binding = 2) coherent buffer Scratch { uint scratch_w[]; };
layout(std430, binding = 3) buffer OutWords { uint out_w[]; };

// The radix select's digits (a histogram in `table`) and the sort's (a count per digit per
// lane in `table`, digit-major).
const uint DIGIT_BITS = SEARCH_DIGIT_BITS;
const uint DIGITS = 1u << DIGIT_BITS;
const uint SORT_BITS = SEARCH_SORT_BITS;
const uint SORT_DIGITS = 1u << SORT_BITS;
const uint TABLE = DIGITS > SORT_DIGITS * GROUP ? DIGITS : SORT_DIGITS * GROUP;
shared uint table[TABLE];
shared uint lane_a[GROUP], lane_b[GROUP];
// total, overflow, the radix select's digit and the count below it, the taken keys' least and
// largest.
shared uint vars[6];

// Buffer writes of the workgroup so far -> its later reads (the scratch runs hand over).
void sync_buffers() {
    memoryBarrierBuffer();
    barrier();
}

uint region_start(uint region) {
    return sp.capacity != 0u ? region * sp.capacity : aux_w[sp.aux_offset + sp.regions_at + region];
}
uint region_length(uint region, out bool over) {
    uint capacity = sp.capacity != 0u ? sp.capacity
        : aux_w[sp.aux_offset + sp.regions_at + region + 1u] - aux_w[sp.aux_offset + sp.regions_at + region];
    uint n = aux_w[sp.aux_offset + sp.counts_at + region];
    over = n > capacity;
    return min(n, capacity);
}

// Inclusive sums of lane_a and lane_b over the workgroup (Hillis-Steele in shared memory); the
// caller has put them behind a barrier.
void scan_lanes(uint lane) {
    [[dont_unroll]] for (uint span = 1u; span < GROUP; span *= 2u) {
        uint a = lane >= span ? lane_a[lane - span] : 0u, b = lane >= span ? lane_b[lane - span] : 0u;
        barrier();
        lane_a[lane] += a;
        lane_b[lane] += b;
        barrier();
    }
}

// One stable counting pass of the LSD sort over entries [0, k) at `from`, by digit
// ((key - low) >> shift) & (SORT_DIGITS - 1), to `to` (scratch) or the answer (`to_out`). Lane
// l owns the run [begin, end): it counts its run's digits in its column of `table`, the columns'
// exclusive sums in digit-major order give each lane's first slot per digit, and the lane
// places its run in order: equal digits keep their order.
void sort_pass(uint from, uint to, bool to_out, uint k, uint low, uint shift, uint lane, uint begin, uint end) {
    [[dont_unroll]] for (uint d = 0u; d < SORT_DIGITS; ++d) table[d * GROUP + lane] = 0u;
    for (uint i = begin; i < end; ++i) ++table[(((scratch_w[from + ENTRY * i] - low) >> shift) & (SORT_DIGITS - 1u)) * GROUP + lane];
    barrier();
    uint own = 0u, base = lane * SORT_DIGITS;  // this lane's share of the table to sum
    [[dont_unroll]] for (uint j = 0u; j < SORT_DIGITS; ++j) own += table[base + j];
    lane_a[lane] = own;
    lane_b[lane] = 0u;
    barrier();
    scan_lanes(lane);
    uint run = lane_a[lane] - own;
    [[dont_unroll]] for (uint j = 0u; j < SORT_DIGITS; ++j) { uint c = table[base + j]; table[base + j] = run; run += c; }
    barrier();
    for (uint i = begin; i < end; ++i) {
        uint e = from + ENTRY * i;
        uint slot = (((scratch_w[e] - low) >> shift) & (SORT_DIGITS - 1u)) * GROUP + lane;
        uint at = ENTRY * table[slot];
        table[slot] += 1u;
        for (uint w = 0u; w < ENTRY; ++w) {
            uint v = scratch_w[e + w];
            if (to_out) out_w[to + at + w] = v; else scratch_w[to + at + w] = v;
        }
    }
    sync_buffers();
}

void select_query(uint q, uint lane) {
    uint regions = sp.tiles_total, first_region = q * regions;
    if (lane < 6u) vars[lane] = lane == 4u ? ALL : 0u;
    barrier();
    for (uint t = lane; t < regions; t += GROUP) {
        bool over;
        uint n = region_length(first_region + t, over);
        atomicAdd(vars[0], n);
        if (over) atomicOr(vars[1], 1u);
    }
    barrier();
    uint total = vars[0], k = sp.k == 0u ? total : sp.k;
    uint out_at = sp.k == 0u ? aux_w[sp.aux_offset + sp.lims_at + q] : q * sp.k;  // in entries
    if (vars[1] != 0u || total < k) {  // the host searches the query again
        if (lane == 0u) aux_w[sp.aux_offset + sp.status_at + q] = total < k ? 2u : 1u;
        return;  // (uniform over the workgroup)
    }
    // The k-th least key by radix select, most significant digit first: `threshold`, and
    // `need`, how many entries with that key are taken (the lowest rows).
    uint levels = (sp.key_bits + DIGIT_BITS - 1u) / DIGIT_BITS;
    uint threshold = ALL, need = 0u;  // k == total: every candidate, all keys below
    if (k < total) {
        threshold = 0u;
        need = k;
        for (uint level = levels; level > 0u; --level) {
            uint shift = (level - 1u) * DIGIT_BITS;
            for (uint d = lane; d < DIGITS; d += GROUP) table[d] = 0u;
            barrier();
            for (uint t = lane; t < regions; t += GROUP) {
                bool over;
                uint n = region_length(first_region + t, over), e = ENTRY * region_start(first_region + t);
                for (uint i = 0u; i < n; ++i, e += ENTRY) {
                    uint key = cand_w[sp.cand_offset + e];
                    bool matches = level == levels || (key >> (shift + DIGIT_BITS)) == (threshold >> (shift + DIGIT_BITS));
                    if (matches) atomicAdd(table[(key >> shift) & (DIGITS - 1u)], 1u);
                }
            }
            barrier();
            if (lane == 0u) {
                uint below = 0u, d = 0u;
                for (; d + 1u < DIGITS && below + table[d] < need; ++d) below += table[d];
                vars[2] = d;
                vars[3] = below;
            }
            barrier();
            threshold |= vars[2] << shift;
            need -= vars[3];
            barrier();
        }
    }
    // The k least in row order into scratch A: regions in groups of 64 (lane = region), each
    // walked in order by its lane; positions from the groups' running sums. The taken keys'
    // least and largest bound the digits the sort needs.
    uint a_base = sp.scratch_offset + ENTRY * 2u * out_at, b_base = a_base + ENTRY * k;
    uint below_before = 0u, ties_before = 0u, low = ALL, high = 0u;
    for (uint g = 0u; g < regions; g += GROUP) {
        uint t = g + lane, n = 0u, e = 0u, nb = 0u, nt = 0u;
        if (t < regions) {
            bool over;
            n = region_length(first_region + t, over);
            e = sp.cand_offset + ENTRY * region_start(first_region + t);
            for (uint i = 0u; i < n; ++i) {
                uint key = cand_w[e + ENTRY * i];
                nb += key < threshold ? 1u : 0u;
                nt += key == threshold ? 1u : 0u;
            }
        }
        lane_a[lane] = nb;
        lane_b[lane] = nt;
        barrier();
        scan_lanes(lane);
        uint lb = below_before + lane_a[lane] - nb, lt = ties_before + lane_b[lane] - nt;
        for (uint i = 0u; i < n; ++i) {
            uint key = cand_w[e + ENTRY * i];
            bool take = key < threshold || (key == threshold && lt < need);
            if (take) {
                uint at = a_base + ENTRY * (lb + min(lt, need));
                for (uint w = 0u; w < ENTRY; ++w) scratch_w[at + w] = cand_w[e + ENTRY * i + w];
                low = min(low, key);
                high = max(high, key);
            }
            lb += key < threshold ? 1u : 0u;
            lt += key == threshold ? 1u : 0u;
        }
        below_before += lane_a[GROUP - 1u];
        ties_before += lane_b[GROUP - 1u];
        barrier();
    }
    atomicMin(vars[4], low);
    atomicMax(vars[5], high);
    sync_buffers();
    if (k != 0u) {
        // Stable LSD radix sort of A by key - low, ping-ponging A <-> B; the last pass writes
        // the answer (one pass at least: it is the copy when every key is equal).
        low = vars[4];
        uint bits = uint(findMSB(vars[5] - low) + 1);
        uint passes = max(1u, (bits + SORT_BITS - 1u) / SORT_BITS);
        uint per = (k + GROUP - 1u) / GROUP, begin = min(lane * per, k), end = min(begin + per, k);
        for (uint pass = 0u; pass < passes; ++pass) {
            uint from = pass % 2u == 0u ? a_base : b_base, to = pass % 2u == 0u ? b_base : a_base;
            bool last = pass + 1u == passes;
            sort_pass(from, last ? sp.out_offset + ENTRY * out_at : to, last, k, low, pass * SORT_BITS, lane,
                      begin, end);
        }
    }
    if (lane == 0u) aux_w[sp.aux_offset + sp.status_at + q] = 0u;
}

// Item = query, [query_base, query_end) of the batch.
void main() {
    for (uint q = sp.query_base + gl_WorkGroupID.x; q < sp.query_end; q += gl_NumWorkGroups.x) {
        select_query(q, gl_LocalInvocationID.x);
        barrier();  // (the next query resets the shared state)
    }
}
#elif defined(SEARCH_ROWS)
layout(std430, binding = 0) readonly buffer Source { uint src_w[]; };
layout(std430, binding = 1) readonly buffer Index { uint index_w[]; };
layout(std430, binding = 2) buffer Destination { uint dst_w[]; };

// Invocation per word (looping over the grid): destination row i (of `rows`) <- source row index[i] (regions_at != ALL)
// or row_base + i.
void main() {
    for (uint g = gl_GlobalInvocationID.x; g < sp.rows * WORDS; g += gl_NumWorkGroups.x * GROUP) {
        uint i = g / WORDS, w = g % WORDS;
        uint from = sp.regions_at == ALL ? sp.row_base + i : index_w[sp.aux_offset + sp.regions_at + i];
        dst_w[sp.out_offset + i * WORDS + w] = src_w[sp.db_offset + from * WORDS + w];
    }
}
#elif defined(SEARCH_FINISH)
layout(std430, binding = 0) readonly buffer Entries { uint entry_w[]; };
layout(std430, binding = 1) readonly buffer Ids { uint id_w[]; };
layout(std430, binding = 2) buffer Values { uint value_w[]; };
layout(std430, binding = 3) buffer IdsOut { uint ids_out_w[]; };

// c / u (u >= 1: row_counts) rounded to the nearest float32 with integers alone: the quotient's
// bits by long division, then round half to even.
uint ratio_bits(uint c, uint u) {
    if (c == 0u) return 0u;
    if (c == u) return 0x3F800000u;
    uint e = 0u, r = c;
    while (r < u) { r <<= 1u; ++e; }
    uint m = 1u;
    r -= u;
    for (uint i = 0u; i < 23u; ++i) {
        r <<= 1u;
        m <<= 1u;
        if (r >= u) { r -= u; m |= 1u; }
    }
    r <<= 1u;
    bool half_up = r >= u;
    if (half_up) r -= u;
    if (half_up && (r != 0u || (m & 1u) != 0u)) ++m;
    if (m == (1u << 24u)) { m >>= 1u; --e; }
    return ((127u - e) << 23u) | (m & 0x7FFFFFu);
}

// Invocation per entry (`rows` of them, looping over the grid): value and id (int64: the id table's entry for the
// row, or the row itself when regions_at is ALL).
void main() {
    for (uint i = gl_GlobalInvocationID.x; i < sp.rows; i += gl_NumWorkGroups.x * GROUP) {
        uint e = sp.db_offset + ENTRY * i, row = entry_w[e + 1u];
        if (METRIC == 0u) value_w[sp.out_offset + i] = entry_w[e];
        else { uint cu = entry_w[e + 2u]; value_w[sp.out_offset + i] = ratio_bits(cu >> 16u, cu & 0xFFFFu); }
        uint lo = row, hi = 0u;
        if (sp.regions_at != ALL) { lo = id_w[sp.aux_offset + 2u * row]; hi = id_w[sp.aux_offset + 2u * row + 1u]; }
        ids_out_w[sp.cand_offset + 2u * i] = lo;
        ids_out_w[sp.cand_offset + 2u * i + 1u] = hi;
    }
}
#endif
