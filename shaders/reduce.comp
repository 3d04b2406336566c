#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require  // [[unroll]]: loops over register arrays
// DML_OPERATOR_REDUCE (dmlgpu/table/operators.py REDUCE) in a fixed order of operations, so that
// one input gives the same bits on every run (shaders/include/reduce_acc.glsl holds each
// function's accumulator; FUNCTION is a DML_REDUCE_FUNCTION value).
//
// Each output element's walked elements r = 0 .. R-1 are cut into chunks of SP_CHUNK elements; a
// unit (an output element's chunk) is reduced by SP_LANES lanes of a workgroup (one lane where the
// walk goes across: short_walks.walks_across; then a workgroup's lanes take adjacent
// output elements' chunks, adjacent words of a strided walk): lane j, component
// q (0..3) takes the elements chunk start + 4 (j + lanes t) + q for t = 0, 1, ... in order; the
// four components merge as (0 + 1) + (2 + 3), then the lanes in a pairwise tree (lane j takes
// lane j + s for s = lanes/2, ..., 1). With one chunk the unit writes the output element; with
// several each writes its state (SP_MODE's REDUCE_TO_STATES) and a second dispatch
// (REDUCE_FROM_STATES) merges each output element's states the same way: lane j takes states
// j, j + lanes, ... in order, then the tree. With REDUCE_MERGE_LAST that merge runs in the same
// dispatch: each workgroup, done, counts itself in a word after the states; the last one to
// count merges every output element's states with the merge's own parameter words (push word
// source_offset) and sets the count back to 0. The merge's order is the second dispatch's, so
// the bits are the same; nothing depends on timing but which workgroup runs the merge (and the
// stores of sub-word outputs, by atomics).
#define PARAMS_BINDING 3
// Integers of at most 32 bits into an output of at most 32 bits: every function's result is the low
// word of its 64-bit arithmetic (sums, products, squares and L1 wrap; MIN/MAX/ARG* compare the
// sign-extended low word: acc_key), so an element's high word is left zero (H200: INT32 MIN of 256
// MiB 92 -> 78 us, as UINT32's; NOTES session 19).
#if OUT_BITS <= 32
#define LANE_HIGH_WORD 0
#endif
#include "select.glsl"

#define ACC_FUNCTION uint(FUNCTION)
#define ACC_BITS uint(IN_BITS)
#define ACC_KIND uint(IN_KIND)
#define ACC_OUT_BITS uint(OUT_BITS)
// Set where a FLOAT16 sum walks across (dmlgpu/kernels/compiled_selection.py: short_walks.fixed_sums
// and walks_across): its states are exact fixed-point integers (reduce_acc.glsl acc_fixed), the
// same bits as the triples' at less cost there; lanes sharing a contiguous walk keep the triples,
// which ran faster there (H200: benchmarks/NOTES.md, session 22).
layout(constant_id = 6) const bool FIXED_SUMS = false;
#define ACC_FIXED FIXED_SUMS
// DOUBLES (a variant of its own: dmlgpu/kernels/variants.py DOUBLE_SUMS, run on CPU drivers with
// 64-bit floats: compiled_selection.DOUBLE_ACCUMULATORS): FLOAT32 SUM and L1 in double accumulators with an
// error bound, each result proved to be the correctly rounded sum or else computed again with the
// triples (reduce_units), so the bits are the triples' either way.
#ifdef DOUBLES
#define ACC_DOUBLES
#endif
#include "reduce_acc.glsl"

layout(std430, binding = 0) readonly buffer InVecs { uvec4 in_v[]; };
layout(std430, binding = 2) coherent buffer States { Acc states[]; };  // sp.aux_offset: its word offset
layout(std430, binding = 2) coherent buffer StateWords { uint state_w[]; };  // the same, as words (the count)

shared Acc tree[gl_WorkGroupSize.x];
shared bool merges;  // REDUCE_MERGE_LAST: this workgroup counted last
#ifdef DOUBLES
// A unit of this workgroup's round could not prove its double sum: a word per round's parity, so
// that a round sets its word while the one before's is still read (one barrier a round).
shared bool gave_up[2];
// The double sums' first pass in a dispatch of its own (dmlgpu/kernels/compiled_selection.py,
// double_first): 0, not so (everything in this dispatch, as above); 1, this dispatch only stores
// each lane's state (double_lane_states: no barrier survives, so nothing of the loop is kept in
// the frame of a coroutine, as llvmpipe keeps what lives across a barrier: 64 MiB 4.1 against 3.3
// ms; benchmarks/NOTES.md, session 28); 2, the dispatch after, over the merge's parameter words
// (source_offset: each output element's lanes' states, REDUCE_FROM_STATES), proves each result
// and computes again with the triples what it cannot prove (lane_walk, by the first pass's words).
layout(constant_id = 7) const uint DOUBLE_PASS = 0u;
#endif

// Set on GPUs (dmlgpu/kernels/compiled_selection.py WIDE_LOADS): a lane keeps eight blocks' loads
// in flight (64-bit inputs: four), and a float sum's lane judges its terms' magnitudes once, at
// the end (no branch on the data inside the loop). CPU drivers take a block at a time (a float
// sum's checked as it comes).
layout(constant_id = 0) const bool WIDE_LOADS = false;

// The four elements from element offset e (a multiple of 4) of a contiguous walk, as raw values.
void load_four(uint e, out uvec2 v[4]) {
#if IN_BITS == 32
    uvec4 w = in_v[(sp.in_offset + e) / 4u];
    v[0] = lane_value(w.x); v[1] = lane_value(w.y); v[2] = lane_value(w.z); v[3] = lane_value(w.w);
#elif IN_BITS == 64
    uvec4 a = in_v[(sp.in_offset + 2u * e) / 4u], b = in_v[(sp.in_offset + 2u * e) / 4u + 1u];
    v[0] = a.xy; v[1] = a.zw; v[2] = b.xy; v[3] = b.zw;
#elif IN_BITS == 16
    uint w0 = in_w[sp.in_offset + e / 2u], w1 = in_w[sp.in_offset + e / 2u + 1u];
    v[0] = lane_value(w0 & 0xFFFFu); v[1] = lane_value(w0 >> 16); v[2] = lane_value(w1 & 0xFFFFu); v[3] = lane_value(w1 >> 16);
#else
    uint w = in_w[sp.in_offset + e / 4u];
    v[0] = lane_value(w & 0xFFu); v[1] = lane_value((w >> 8) & 0xFFu); v[2] = lane_value((w >> 16) & 0xFFu);
    v[3] = lane_value(w >> 24);
#endif
}

// Set where the device flushes float32 subnormals to zero (compiled_selection.flushes_subnormals:
// NVIDIA's drivers): a float sum's fast loops, which scale their terms by a float multiply,
// then also look for subnormal terms, and a lane that meets one adds its terms one by one
// (sums_add scales a subnormal from its bits).
layout(constant_id = 3) const bool FLUSHES = false;

#if IN_KIND == KIND_FLOAT && IN_BITS != 64
// One block's four terms added to the four components' triples (s, c1, c2), scaled as the first
// triple holds them (reduce_acc.glsl: sums_shift); their magnitudes.
vec4 sums_block(inout vec4 s, inout vec4 c1, inout vec4 c2, vec4 x) {
    vec4 m = ACC_FUNCTION == RED_L1 ? abs(x) : x;
    if (acc_squares()) {
        vec4 p, e;
        two_square4(m, p, e);
        triple_add4(s, c1, c2, p);
        triple_add4(s, c1, c2, e);
    } else {
        triple_add4(s, c1, c2, m * SUMS_SCALE);  // exact but where flushed
    }
    return abs(m);
}

// Where the fast loops look for subnormal terms (FLUSHES; squares are not scaled).
bool sums_look() { return FLUSHES && !acc_squares() && IN_BITS == 32; }  // (no half is a float32 subnormal)
// The least of a block's keys (2 |x|'s bits - 2, wrapping: zeros are the largest keys), and
// whether a key is a subnormal's (below 2^24 - 2, a normal float's least).
uint subnormal_key(vec4 x) {
    uvec4 k = (floatBitsToUint(x) << 1) - 2u;
    return min(min(k.x, k.y), min(k.z, k.w));
}
bool subnormal_in(uint least_key) { return least_key < 0x00FFFFFEu; }

// One block of a single-dimension walk, from walked element b: four terms (uint words of 32-bit
// floats). `vector`: the walk is contiguous and aligned (one 16-byte load at `at` + b / 4); else
// four loads `stride` elements apart from in_base (a strided walk: the lanes of a workgroup then
// take adjacent output elements, so their loads are adjacent).
// FLOAT16 elements are converted exactly (a contiguous block: two words; the float sums' triples
// then take them as they take FLOAT32 ones: no half is huge, and none is a float32 subnormal).
vec4 float_block(uint at, uint in_base, uint b, uint stride, bool vector) {
#if IN_BITS == 16
    if (vector) {
        uint w = sp.in_offset + (in_base + b) / 2u;
        return vec4(unpackHalf2x16(in_w[w]), unpackHalf2x16(in_w[w + 1u]));
    }
    uint e = in_base + b * stride;
    return vec4(acc_value(load_value(e)), acc_value(load_value(e + stride)), acc_value(load_value(e + 2u * stride)),
                acc_value(load_value(e + 3u * stride)));
#else
    if (vector) return uintBitsToFloat(in_v[at + b / 4u]);
    uint e = sp.in_offset + in_base + b * stride;
    return uintBitsToFloat(uvec4(in_w[e], in_w[e + stride], in_w[e + 2u * stride], in_w[e + 3u * stride]));
#endif
}

// lane_elements of a float sum (SUM, AVERAGE, L1, SUM_SQUARE, L2, LOG_SUM) over a walk of one
// dimension (`vector`: contiguous and aligned; else elements `stride` apart): the four
// components' first triples in vectors, a block at a time where all its terms are finite and
// small, else element by element: the generic path's operations, in its order. (Its two call
// sites pass `vector` as a constant: each inlined copy keeps one kind of load.)
Acc lane_float_sums(uint in_base, uint start, uint end, uint lane, uint lanes, uint stride, bool vector) {
    vec4 s = vec4(-0.0), c1 = vec4(-0.0), c2 = vec4(-0.0);
    float limit = sums_limit();
    uint b = start + 4u * lane, step = 4u * lanes, at = (sp.in_offset + in_base) / 4u;
    if (WIDE_LOADS) {
        // The largest term magnitude is kept as it goes and judged once; where a term is huge
        // or not finite (a NaN reaches s), the lane starts again with the loops below, so the
        // bits are the generic path's either way.
        vec4 largest = vec4(0.0);
        uint least = 0xFFFFFFFFu;  // (sums_look) the least subnormal_key
        // Software-pipelined: the next eight blocks' loads are issued before this eight's
        // arithmetic, so a lane's loads stay in flight while it adds (the order of additions is
        // unchanged).
        if (b + 7u * step + 4u <= end) {
            vec4 x[8];
            for (uint k = 0u; k < 8u; ++k) x[k] = float_block(at, in_base, b + k * step, stride, vector);
            while (true) {
                uint next = b + 8u * step;
                bool more = next + 7u * step + 4u <= end;
                vec4 y[8];
                if (more)
                    for (uint k = 0u; k < 8u; ++k) y[k] = float_block(at, in_base, next + k * step, stride, vector);
                for (uint k = 0u; k < 8u; ++k) {
                    largest = max(largest, sums_block(s, c1, c2, x[k]));
                    if (sums_look()) least = min(least, subnormal_key(x[k]));
                }
                b = next;
                if (!more) break;
                x = y;
            }
        }
        for (; b + 4u <= end; b += step) {
            vec4 x = float_block(at, in_base, b, stride, vector);
            largest = max(largest, sums_block(s, c1, c2, x));
            if (sums_look()) least = min(least, subnormal_key(x));
        }
        if (!all(lessThan(largest, vec4(limit))) || any(isnan(s)) || (sums_look() && subnormal_in(least))) {
            s = vec4(-0.0); c1 = vec4(-0.0); c2 = vec4(-0.0);
            b = start + 4u * lane;
        }
    }
    Acc big[4] = Acc[4](acc_empty(), acc_empty(), acc_empty(), acc_empty());  // (live from here on)
    for (; b + 4u <= end; b += step) {
        vec4 x = float_block(at, in_base, b, stride, vector);
        if (!all(lessThan(abs(x), vec4(limit))) || (sums_look() && subnormal_in(subnormal_key(x)))) break;  // (a NaN too): element by element below
        sums_block(s, c1, c2, x);
    }
    for (; b + 4u <= end; b += step) {  // from the first block with a huge or non-finite term
        vec4 x = float_block(at, in_base, b, stride, vector);
        if (ACC_FUNCTION == RED_L1) x = uintBitsToFloat(floatBitsToUint(x) & 0x7FFFFFFFu);  // (bits_abs: abs() may flush)
        for (uint q = 0u; q < 4u; ++q) {
            Acc a = sums_add(Acc(acc_words(vec3(s[q], c1[q], c2[q])), big[q].y), x[q]);
            s[q] = acc_f(a.x.x);
            c1[q] = acc_f(a.x.y);
            c2[q] = acc_f(a.x.z);
            big[q].y = a.y;
        }
    }
    Acc acc[4];
    for (uint q = 0u; q < 4u; ++q) {
        acc[q] = Acc(acc_words(vec3(s[q], c1[q], c2[q])), big[q].y);
        if (b + q < end) acc[q] = acc_add(acc[q], load_value(in_base + (b + q) * stride), 0u);  // the lane's last, partial block
    }
    return acc_merge(acc_merge(acc[0], acc[1]), acc_merge(acc[2], acc[3]));
}
#endif

#ifdef DOUBLES
// lane_float_sums in doubles (reduce_acc.glsl accd_*), one block at a time: a component's running
// sum s and m, the sum of |s| after each addition, for the error bound. Terms convert to doubles
// exactly, but where the device flushes float32 subnormals (FLUSHES), whose conversion may; a lane
// that met one adds its terms again from their bits. (Run on CPU drivers, which load a block at a
// time: compiled_selection.DOUBLE_ACCUMULATORS.)
// The contiguous loop of lane_double_sums for this invocation's first unit, run first thing in
// main() (hoist_double_sums): llvmpipe ran the same loop 1.75x slower nested in reduce_units' loops
// (64 MiB: 7.0-7.6 ms against 4.0-4.1; benchmarks/NOTES.md, session 25). lane_double_sums takes its
// s, m and stopping block when called for that chunk; the operations and their order are the same.
bool hoisted = false;
uint hoisted_start, hoisted_end, hoisted_base;
shared dvec4 hoisted_sums[2u * gl_WorkGroupSize.x];  // s, m of each invocation
shared uint hoisted_stops[gl_WorkGroupSize.x];  // the block where its loop stopped

// s and m of the blocks of [start, end) lane `lane` of `lanes` takes, from input element
// in_base (contiguous and aligned): first a run of adjacent blocks of its own (lane j the j-th of
// `lanes` equal runs: on llvmpipe 1.25x faster than lanes interleaved block by block, 64 MiB 3.3
// against 4.1 ms; NOTES session 28), then the blocks left over, interleaved; b: the block of the
// leftover where it stopped (a lane's last, partial block starts there). A double sum's bits do
// not depend on its order (accd_result), so the order is free.
void double_blocks(uint in_base, uint start, uint end, uint lane, uint lanes, out dvec4 s_out, out dvec4 m_out, out uint b_out) {
    precise dvec4 s = dvec4(-0.0lf), m = dvec4(0.0lf);
    uint at = (sp.in_offset + in_base + start) / 4u, blocks = end > start ? (end - start) / 4u : 0u, per = blocks / lanes;
    for (uint v = at + lane * per, last = v + per; v < last; ++v) {
        dvec4 d = dvec4(uintBitsToFloat(in_v[v]));
        s += ACC_FUNCTION == RED_L1 ? abs(d) : d;
        m += abs(s);
    }
    uint b = start + 4u * (lanes * per + lane), step = 4u * lanes;
    at = (sp.in_offset + in_base) / 4u;
    for (; b + 4u <= end; b += step) {
        dvec4 d = dvec4(uintBitsToFloat(in_v[at + b / 4u]));
        s += ACC_FUNCTION == RED_L1 ? abs(d) : d;
        m += abs(s);
    }
    s_out = s;
    m_out = m;
    b_out = b;
}

Acc lane_double_sums(uint in_base, uint start, uint end, uint lane, uint lanes, uint stride, bool vector) {
    precise dvec4 s = dvec4(-0.0lf), m = dvec4(0.0lf);  // (precise: added in this order, as the bound assumes)
    uint b = start + 4u * lane, step = 4u * lanes, at = (sp.in_offset + in_base) / 4u;
    uint least = 0xFFFFFFFFu;  // (FLUSHES) the least subnormal_key
    if (hoisted && vector && start == hoisted_start && end == hoisted_end && in_base == hoisted_base) {
        uint local = gl_LocalInvocationID.x;
        s = hoisted_sums[2u * local];
        m = hoisted_sums[2u * local + 1u];
        b = hoisted_stops[local];
    } else if (vector && !FLUSHES) {  // (the hoisted loop's own code: the same operations by construction)
        dvec4 ds, dm;
        double_blocks(in_base, start, end, lane, lanes, ds, dm, b);
        s = ds;
        m = dm;
    }
    hoisted = false;
    for (; b + 4u <= end; b += step) {
        vec4 x = float_block(at, in_base, b, stride, vector);
        dvec4 d = dvec4(x);
        s += ACC_FUNCTION == RED_L1 ? abs(d) : d;
        m += abs(s);
        if (FLUSHES) least = min(least, subnormal_key(x));
    }
    if (FLUSHES && subnormal_in(least)) {  // again, every term from its bits (accd_term)
        s = dvec4(-0.0lf);
        m = dvec4(0.0lf);
        for (b = start + 4u * lane; b + 4u <= end; b += step) {
            uvec4 w = floatBitsToUint(float_block(at, in_base, b, stride, vector));
            for (uint q = 0u; q < 4u; ++q) {
                s[q] += accd_term(w[q]);
                m[q] += abs(s[q]);
            }
        }
    }
    Acc acc[4];
    for (uint q = 0u; q < 4u; ++q) {
        acc[q] = accd_state(s[q], m[q]);
        if (b + q < end) acc[q] = acc_add(acc[q], load_value(in_base + (b + q) * stride), 0u);  // the lane's last, partial block
    }
    return acc_merge(acc_merge(acc[0], acc[1]), acc_merge(acc[2], acc[3]));
}
#endif

// Walked block b's four elements (b .. b + 3) of a one-dimension walk: one load where `vector`
// (contiguous and aligned), else four, `stride` elements apart.
void load_block(uint in_base, uint b, uint stride, bool vector, out uvec2 v[4]) {
    if (vector) {
        load_four(in_base + b, v);
    } else {
        for (uint q = 0u; q < 4u; ++q) v[q] = load_value(in_base + (b + q) * stride);
    }
}

// Blocks a lane keeps in flight with WIDE_LOADS: 128 bytes of a contiguous walk (8- and 16-bit
// inputs: as raw words, unpacked as they are added); a strided walk's, 8 (64-bit: 4).
#if IN_BITS == 64
#define WIDE_BLOCKS 4u
#else
#define WIDE_BLOCKS 8u
#endif
#if IN_BITS < 32
#define BLOCK_WORDS (uint(IN_BITS) / 8u)
#define WIDE_RAW_BLOCKS (32u / BLOCK_WORDS)
#endif

// The lane's whole blocks of a one-dimension walk from walked element b (see load_block) added to
// its components in order; with WIDE_LOADS, WIDE_BLOCKS blocks' loads in flight at a time. Returns
// where it stopped: the lane's last, partial block or the end. (Its two call sites pass `vector`
// as a constant: each inlined copy keeps one kind of load.)
uint lane_blocks(uint in_base, uint b, uint end, uint step, uint index_base, uint stride, bool vector,
                 inout Acc acc[4]) {
#if IN_BITS < 32
    if (WIDE_LOADS && vector) {  // (aligned: a block is BLOCK_WORDS whole words)
        for (; b + (WIDE_RAW_BLOCKS - 1u) * step + 4u <= end; b += WIDE_RAW_BLOCKS * step) {
            uint raw[WIDE_RAW_BLOCKS * BLOCK_WORDS];  // (unrolled: indexed by a loop counter it went to local memory)
            [[unroll]] for (uint k = 0u; k < WIDE_RAW_BLOCKS; ++k)
                [[unroll]] for (uint w = 0u; w < BLOCK_WORDS; ++w)
                    raw[k * BLOCK_WORDS + w] = in_w[sp.in_offset + (in_base + b + k * step) / (32u / uint(IN_BITS)) + w];
            [[unroll]] for (uint k = 0u; k < WIDE_RAW_BLOCKS; ++k)
                [[unroll]] for (uint q = 0u; q < 4u; ++q) {
                    uint e = in_base + b + k * step + q;
                    acc[q] = acc_add(acc[q], element_of(raw[k * BLOCK_WORDS + q / (32u / uint(IN_BITS))], e),
                                     index_base + b + k * step + q);
                }
        }
    }
#endif
    if (WIDE_LOADS && b + (WIDE_BLOCKS - 1u) * step + 4u <= end) {
        // Software-pipelined as lane_float_sums: the next blocks' loads before these blocks' adds.
        uvec2 v[4u * WIDE_BLOCKS];
        for (uint k = 0u; k < WIDE_BLOCKS; ++k) {
            uvec2 w[4];
            load_block(in_base, b + k * step, stride, vector, w);
            for (uint q = 0u; q < 4u; ++q) v[4u * k + q] = w[q];
        }
        while (true) {
            uint next = b + WIDE_BLOCKS * step;
            bool more = next + (WIDE_BLOCKS - 1u) * step + 4u <= end;
            uvec2 n[4u * WIDE_BLOCKS];
            if (more)
                for (uint k = 0u; k < WIDE_BLOCKS; ++k) {
                    uvec2 w[4];
                    load_block(in_base, next + k * step, stride, vector, w);
                    for (uint q = 0u; q < 4u; ++q) n[4u * k + q] = w[q];
                }
            for (uint k = 0u; k < WIDE_BLOCKS; ++k)
                for (uint q = 0u; q < 4u; ++q) acc[q] = acc_add(acc[q], v[4u * k + q], index_base + b + k * step + q);
            b = next;
            if (!more) break;
            v = n;
        }
    }
    for (; b + 4u <= end; b += step) {
        uvec2 v[4];
        load_block(in_base, b, stride, vector, v);
        for (uint q = 0u; q < 4u; ++q) acc[q] = acc_add(acc[q], v[q], index_base + b + q);
    }
    return b;
}

// Lane `lane` of `lanes`: its elements of chunk `chunk` of the walk from input element `in_base`.
Acc lane_elements(uint in_base, uint chunk, uint lane, uint lanes) {
    uint walked = param(SP_WALKED), length = param(SP_CHUNK), index_base = param(SP_INDEX_BASE);
    uint start = chunk * length, end = min(walked, start + length);
    Acc acc[4] = Acc[4](acc_empty(), acc_empty(), acc_empty(), acc_empty());
    // A contiguous walk whose blocks of four start on a word (32- and 64-bit: on 16 bytes).
#if IN_BITS == 64
    bool aligned = (sp.in_offset + 2u * in_base) % 4u == 0u;
#elif IN_BITS == 32
    bool aligned = (sp.in_offset + in_base) % 4u == 0u;
#else
    bool aligned = in_base % (32u / uint(IN_BITS)) == 0u;
#endif
    // One walked dimension: its elements `stride` apart (contiguous: 1, and aligned).
    bool single = param(SP_WALKED_DIMS) == 1u;
    uint stride = single ? param(SP_DIMS + 3u * param(SP_OUTER_DIMS) + 1u) : 0u;
    bool contiguous = aligned && single && stride == 1u;
#ifdef DOUBLES
    if (!acc_exact && contiguous) return lane_double_sums(in_base, start, end, lane, lanes, 1u, true);
    if (!acc_exact && single) return lane_double_sums(in_base, start, end, lane, lanes, stride, false);
#endif
#if IN_KIND == KIND_FLOAT && IN_BITS != 64
    if (acc_sums() && !acc_fixed() && contiguous) return lane_float_sums(in_base, start, end, lane, lanes, 1u, true);
    if (acc_sums() && !acc_fixed() && single) return lane_float_sums(in_base, start, end, lane, lanes, stride, false);
#endif
    uint b = start + 4u * lane;
    if (contiguous) b = lane_blocks(in_base, b, end, 4u * lanes, index_base, 1u, true, acc);
    else if (single) b = lane_blocks(in_base, b, end, 4u * lanes, index_base, stride, false, acc);
    for (; b < end; b += 4u * lanes) {  // a last, partial block, or a walk of several dimensions
        for (uint q = 0u; q < 4u && b + q < end; ++q)
            acc[q] = acc_add(acc[q], load_value(in_base + walked_offset(b + q)), index_base + b + q);
    }
    return acc_merge(acc_merge(acc[0], acc[1]), acc_merge(acc[2], acc[3]));
}

#ifdef DOUBLES
// Lane `lane` of `lanes`: its elements of item `item`'s whole walk, every chunk in order, by the
// first round's parameter words (also in REDUCE_MERGE_LAST's merge): the triples' pass where a
// double sum was not proved (acc_exact; the triples' result does not depend on the order).
Acc lane_walk(uint item, uint lane, uint lanes) {
    uint saved = params_base, in_base = 0u, out_at = 0u;
    params_base = 0u;
    outer_offsets(item, in_base, out_at);
    Acc acc = acc_empty();
    for (uint chunk = 0u; chunk < param(SP_CHUNKS); ++chunk) acc = acc_merge(acc, lane_elements(in_base, chunk, lane, lanes));
    params_base = saved;
    return acc;
}
#endif

// Lane `lane` of `lanes`: its states of item `item` (states j, j + lanes, ...).
Acc lane_states(uint item, uint lane, uint lanes) {
    uint count = param(SP_WALKED), first = sp.aux_offset / 8u + item * count;
    Acc acc = acc_empty();
    uint j = lane;
    for (; j + 3u * lanes < count; j += 4u * lanes) {  // four loads in flight, merged in order
        Acc s0 = states[first + j], s1 = states[first + j + lanes], s2 = states[first + j + 2u * lanes],
            s3 = states[first + j + 3u * lanes];
        acc = acc_merge(acc_merge(acc_merge(acc_merge(acc, s0), s1), s2), s3);
    }
    for (; j < count; j += lanes) acc = acc_merge(acc, states[first + j]);
    return acc;
}

#if IN_KIND == KIND_FLOAT && IN_BITS == 32 && OUT_BITS == 32 && (FUNCTION == RED_SUM || FUNCTION == RED_L1)
#define QUICK_SUMS 1
// A short walk's FLOAT32 SUM or L1, first by TwoSums (s the running sum, e the sum of its rounding
// errors t by TwoSum too, g the errors of those additions, f their plain sum and a that of |g|),
// the result then proved or given up (quick_result), the triples running only where the proof
// fails: the short-walk pipelines' float sums cost about 800 instructions an output element on
// the triples (benchmarks/NOTES.md, session 16). Terms are scaled by 2^32 as the triples' are
// (every value then a multiple of 2^-117: nothing a GPU could flush); a term that is not finite,
// 2^62 or more, or subnormal gives up.
struct Quick {
    float s;
    float e;
    float f;
    float a;
    bool ok;     // no term gave up
    bool zeros;  // every term -0.0 (SUM: the result -0.0)
};

Quick quick_empty() { return Quick(0.0, 0.0, 0.0, 0.0, true, true); }

// The state of one term (raw bits b) alone.
Quick quick_first(uint b) {
    if (FUNCTION == RED_L1) b &= 0x7FFFFFFFu;
    uint ex = (b >> 23) & 0xFFu;
    bool ok = ex < 189u && (ex != 0u || (b & 0x007FFFFFu) == 0u);  // (189: 2^62)
    precise float x = uintBitsToFloat(b) * SUMS_SCALE;
    return Quick(x, 0.0, 0.0, 0.0, ok, b == 0x80000000u);
}

Quick quick_add(Quick q, uint b) {
    Quick p = quick_first(b);
    vec2 t = two_sum(q.s, p.s);
    vec2 g = two_sum(q.e, t.y);
    precise float f = q.f + g.y;
    precise float a = q.a + abs(g.y);
    return Quick(t.x, g.x, f, a, q.ok && p.ok, q.zeros && p.zeros);
}

// The state of a walk's first two terms (one where n is 1): quick_add's from the empty state,
// without its steps that add zeros.
Quick quick_start(uint b0, uint b1, uint n) {
    Quick q = quick_first(b0);
    if (n < 2u) return q;
    Quick p = quick_first(b1);
    vec2 t = two_sum(q.s, p.s);
    return Quick(t.x, t.y, 0.0, 0.0, q.ok && p.ok, q.zeros && p.zeros);
}

// The output element's bits where they are proved (else false). The exact sum is s + e + G (G
// the sum of the g's), s + e = r + d exactly (TwoSum), r the float nearest s + e. Where no g was
// ever nonzero (a = 0: e holds the errors exactly, as it does for most data), the exact sum is
// s + e and r its correctly rounded value, ties included. Otherwise it is r + d + G, f being G
// within n 2^-24 a, and r is its correctly rounded value wherever |d + G| is less than half the
// gap to r's neighbours (a quarter of r's ulp below a power of two): checked with a factor of 4
// to spare for the check's own roundings. A zero r from an inexact e, a result that would be
// subnormal (r under 2^-94 scaled) and a value too close to a midpoint give up.
bool quick_result(Quick q, uint n, out uint bits) {
    bits = 0u;
    if (!q.ok || n == 0u) return false;
    vec2 rd = two_sum(q.s, q.e);
    if (rd.x == 0.0) {
        if (q.a != 0.0) return false;
        bits = q.zeros ? 0x80000000u : 0u;  // (an exact zero: -0.0 only from -0.0s)
        return true;
    }
    uint rb = floatBitsToUint(rd.x), ex = (rb >> 23) & 0xFFu;
    if (ex < 34u) return false;
    if (q.a != 0.0) {
        float h = uintBitsToFloat(((rb & 0x007FFFFFu) == 0u ? ex - 25u : ex - 24u) << 23);
        precise float w = abs(rd.y + q.f);
        precise float room = (h - w) * 4194304.0;  // 2^22
        precise float need = q.a * float(n) + w;
        if (!(room > need)) return false;
    }
    precise float r = rd.x * (1.0 / SUMS_SCALE);
    bits = floatBitsToUint(r);
    return true;
}
#endif

// A quick sum's two passes (QUICK_PASS, set with SHORT_WALK by dmlgpu/kernels/compiled_selection.py
// where short_walks.quick_sums): 1, the quick pass: each output element its proved result, or
// GAVE_UP (no result of REDUCE is that NaN: theirs is 0x7FC00000), and the state buffer's word 0
// set; 2, a pipeline of its own (the triples' registers would halve the quick pass's occupancy),
// after it: where word 0 is set, the triples for the GAVE_UP elements only, the last workgroup to
// finish setting words 0 and 1 (its count) back to 0. 0: neither (every other REDUCE).
layout(constant_id = 5) const uint QUICK_PASS = 0u;
#define GAVE_UP 0x7FBFFFFFu
// Whether this pass adds output element out_at (or the quad from it) by the accumulators.
bool exact_here(uint out_at) { return QUICK_PASS != 2u || out_w[sp.out_offset + out_at] == GAVE_UP; }
bool exact_quad(uint out_at) {
    return exact_here(out_at) || exact_here(out_at + 1u) || exact_here(out_at + 2u) || exact_here(out_at + 3u);
}
#ifdef QUICK_SUMS
// The quick pass's output element out_at: q's proved result, or GAVE_UP.
uint quick_bits(Quick q, uint n) {
    uint bits;
    if (quick_result(q, n, bits)) return bits;
    state_w[sp.aux_offset] = 1u;
    return GAVE_UP;
}
#endif

// Set on GPUs where the walk is one strided dimension that goes across, with one lane and one
// chunk an output element, of at most 4 elements (SHORT_WALK 4) or longer (SHORT_WALK 32, in
// rounds of 32 loads)
// (dmlgpu/kernels/short_walks.py short_walk): main then runs short_units only, in a
// pipeline of its own (the registers of reduce_units' loads in flight would halve its
// occupancy, and short_units' those of every other cut's).
layout(constant_id = 2) const uint SHORT_WALK = 0u;

// short_units' register loops: unrolled for the picking functions of integers other than 32-bit
// ones (session 18: a loop counter's index sent their states to local memory, INT32 MIN over
// 17-256 rows 160-269 us, while lane_value still branched on each value); the others run faster
// rolled (FLOAT32 MAX over 17 rows 108 -> 125 us unrolled, INT32 SUM 71 -> 89; and since the
// branch-free lane_value, INT32 MIN 88.7 -> 74.4 us over 17 rows and 105 -> 66 over 1,024, while
// INT16 MAX lost rolled, 187 -> 223 over 17 rows; NOTES, session 19).
#if IN_KIND != KIND_FLOAT && IN_BITS != 32 && (FUNCTION == RED_MIN || FUNCTION == RED_MAX || FUNCTION == RED_ARGMIN || FUNCTION == RED_ARGMAX)
#define UNITS_UNROLL [[unroll]]
#else
#define UNITS_UNROLL
#endif

// Every output element of a short walk (SHORT_WALK) that falls to workgroup `group` of
// `groups`: an invocation loads REDUCE_SHORT_LOADS elements (abi.glsl), the walks of
// REDUCE_SHORT_LOADS / SHORT_WALK output elements, first, then adds each in lane_elements' order
// with one lane (element r to component r % 4, the components merged as (0 + 1) + (2 + 3)), so
// one output element's latency is not waited for before the next one's loads start. With
// SHORT_WALK = REDUCE_SHORT_LOADS an invocation takes one output element, whose walk may be
// longer: in rounds of that many loads, added in the same order. (Many output elements of a few elements each: 4 x 16M FLOAT32 over
// axis 0 took 0.2x torch.sum's time, an output element at a time: benchmarks/NOTES.md.)
void short_units(uint group, uint groups) {
    const uint w = SHORT_WALK;
    uint items = param(SP_ITEMS), walked = param(SP_WALKED), index_base = param(SP_INDEX_BASE);
    uint count = param(SP_COUNT), stride = param(SP_DIMS + 3u * param(SP_OUTER_DIMS) + 1u);
    uint per = groups * gl_WorkGroupSize.x, units = REDUCE_SHORT_LOADS / max(w, 4u);
    for (uint first = group * gl_WorkGroupSize.x + gl_LocalInvocationID.x; first < items; first += units * per) {
        uvec2 v[REDUCE_SHORT_LOADS];
        uint out_at[REDUCE_SHORT_LOADS / 4u];
        if (w >= REDUCE_SHORT_LOADS) {  // one output element an invocation, its walk in rounds of w loads
            uint in_base = 0u;
            outer_offsets(first, in_base, out_at[0]);
#ifdef QUICK_SUMS
            if (QUICK_PASS == 1u) {
                Quick q = quick_empty();
                for (uint base = 0u; base < walked; base += w) {
                    UNITS_UNROLL for (uint r = 0u; r < w; ++r)
                        v[r] = base + r < walked ? load_value(in_base + (base + r) * stride) : uvec2(0u);
                    UNITS_UNROLL for (uint r = 0u; r < w; ++r)
                        if (base + r < walked) q = quick_add(q, v[r].x);
                }
                out_w[sp.out_offset + out_at[0]] = quick_bits(q, walked);
                continue;
            }
#endif
            if (!exact_here(out_at[0])) continue;
            Acc acc[4] = Acc[4](acc_empty(), acc_empty(), acc_empty(), acc_empty());
            for (uint base = 0u; base < walked; base += w) {
                UNITS_UNROLL for (uint r = 0u; r < w; ++r)
                    v[r] = base + r < walked ? load_value(in_base + (base + r) * stride) : uvec2(0u);
                UNITS_UNROLL for (uint r = 0u; r < w; ++r)
                    if (base + r < walked) acc[r % 4u] = acc_add(acc[r % 4u], v[r], index_base + base + r);
            }
            uvec2 result = acc_result(acc_merge(acc_merge(acc[0], acc[1]), acc_merge(acc[2], acc[3])), count);
            STORE_ELEMENT(out_w, sp.out_offset, OUT_BITS, out_at[0], result);
            continue;
        }
        UNITS_UNROLL for (uint k = 0u; k < units; ++k) {
            uint item = first + k * per, in_base = 0u;
            out_at[k] = 0u;
            if (item < items) outer_offsets(item, in_base, out_at[k]);
            bool live = item < items && exact_here(out_at[k]);
            UNITS_UNROLL for (uint r = 0u; r < w; ++r)
                v[k * w + r] = live && r < walked ? load_value(in_base + r * stride) : uvec2(0u);
        }
        UNITS_UNROLL for (uint k = 0u; k < units; ++k) {
            if (first + k * per >= items) break;
#ifdef QUICK_SUMS
            if (QUICK_PASS == 1u) {
                Quick q = quick_start(v[k * w].x, v[k * w + 1u].x, walked);
                UNITS_UNROLL for (uint r = 2u; r < w; ++r)
                    if (r < walked) q = quick_add(q, v[k * w + r].x);
                out_w[sp.out_offset + out_at[k]] = quick_bits(q, walked);
                continue;
            }
#endif
            if (!exact_here(out_at[k])) continue;
            Acc acc[4] = Acc[4](acc_empty(), acc_empty(), acc_empty(), acc_empty());
            UNITS_UNROLL for (uint r = 0u; r < w; ++r)
                if (r < walked) acc[r % 4u] = r < 4u ? acc_one(v[k * w + r], index_base + r) : acc_add(acc[r % 4u], v[k * w + r], index_base + r);
            uvec2 result = acc_result(acc_merge(acc_merge(acc[0], acc[1]), acc_merge(acc[2], acc[3])), count);
            STORE_ELEMENT(out_w, sp.out_offset, OUT_BITS, out_at[k], result);
        }
    }
}

// Set where a short walk's output elements come in groups (dmlgpu/kernels/short_walks.py): for
// 32-bit elements in quads (short_quads; the innermost kept dimension of more than one element
// has input and output stride 1 and a multiple of 4 elements): four adjacent output elements'
// walks are then four adjacent input elements at every walked row, read with one 16-byte load
// where aligned. Each output element keeps lane_elements' order (element r to component r % 4, the
// components merged as (0 + 1) + (2 + 3)). Not the float sums: their arithmetic, not their loads,
// bounds them there (benchmarks/NOTES.md, session 16). For 8- and 16-bit elements, a word's
// (short_words, short_walks.word_layout).
layout(constant_id = 4) const bool SHORT_QUADS = false;

#if IN_BITS < 32
// short_words: the output elements of one input word (32 / IN_BITS), adjacent in the innermost
// kept dimension, are taken by one invocation of short_units' loops: one word loaded a walked row
// where the row's elements start a word (else each element on its own), and the results stored
// as one word where they fill it (else by STORE_ELEMENT, atomics for 8/16-bit outputs). Before,
// one output element an invocation: a 16-bit element loaded alone, and each 8/16-bit result
// stored by two atomics (H200: INT16 MAX of 256 MiB over 5 rows 569 us against 105 over every
// element; benchmarks/NOTES.md, session 21).
#define WORD_ELEMENTS (32u / uint(IN_BITS))

// Walked row r's WORD_ELEMENTS raw elements from input element in_base, as one word (element j
// in lane j).
uint word_row(uint in_base, uint r, uint stride, bool aligned) {
    uint e = in_base + r * stride;
    if (aligned) return in_w[sp.in_offset + e / WORD_ELEMENTS];
    uint word = 0u;
    [[unroll]] for (uint j = 0u; j < WORD_ELEMENTS; ++j) {
        uint x = e + j;
        word |= ((in_w[sp.in_offset + x / WORD_ELEMENTS] >> ((x % WORD_ELEMENTS) * uint(IN_BITS)))
                 & lane_mask(uint(IN_BITS))) << (j * uint(IN_BITS));
    }
    return word;
}

// Output elements out_at .. out_at + WORD_ELEMENTS - 1's results.
void store_word(uint out_at, uvec2 result[WORD_ELEMENTS]) {
    if (OUT_BITS == IN_BITS && out_at % WORD_ELEMENTS == 0u) {
        uint word = 0u;
        [[unroll]] for (uint j = 0u; j < WORD_ELEMENTS; ++j)
            word |= (result[j].x & lane_mask(uint(IN_BITS))) << (j * uint(IN_BITS));
        out_w[sp.out_offset + out_at / WORD_ELEMENTS] = word;
        return;
    }
    [[unroll]] for (uint j = 0u; j < WORD_ELEMENTS; ++j) STORE_ELEMENT(out_w, sp.out_offset, OUT_BITS, out_at + j, result[j]);
}

// short_units with a word's output elements an invocation (SHORT_QUADS on 8/16-bit elements):
// SHORT_WALK 4 or 8 (short_walks.WORD_WALK: walks of at most that many), REDUCE_SHORT_LOADS /
// SHORT_WALK words an invocation, every load first; SHORT_WALK REDUCE_SHORT_LOADS, one word in
// rounds of that many rows (8-bit elements only: 16-bit ones ran slower so than one element an
// invocation, cause not found; short_walks.short_words). Each output element in short_units'
// order (element r to component r % 4, the components merged as (0 + 1) + (2 + 3)).
void short_words(uint group, uint groups) {
    const uint w = SHORT_WALK, g = WORD_ELEMENTS;
    uint words = param(SP_ITEMS) / g, walked = param(SP_WALKED), index_base = param(SP_INDEX_BASE);
    uint count = param(SP_COUNT), stride = param(SP_DIMS + 3u * param(SP_OUTER_DIMS) + 1u);
    uint per = groups * gl_WorkGroupSize.x, units = REDUCE_SHORT_LOADS / max(w, 4u);
    for (uint first = group * gl_WorkGroupSize.x + gl_LocalInvocationID.x; first < words; first += units * per) {
        uint v[REDUCE_SHORT_LOADS];
        uvec2 result[WORD_ELEMENTS];
        if (w >= REDUCE_SHORT_LOADS) {  // one word an invocation, its walk in rounds of w loads
            uint in_base = 0u, out_at = 0u;
            outer_offsets(g * first, in_base, out_at);
            bool aligned = in_base % g == 0u && stride % g == 0u;
            Acc acc[4u * WORD_ELEMENTS];  // output element j's component q: acc[4 j + q]
            [[unroll]] for (uint i = 0u; i < 4u * g; ++i) acc[i] = acc_empty();
            for (uint base = 0u; base < walked; base += w) {
                [[unroll]] for (uint r = 0u; r < w; ++r)
                    v[r] = base + r < walked ? word_row(in_base, base + r, stride, aligned) : 0u;
                [[unroll]] for (uint r = 0u; r < w; ++r)
                    if (base + r < walked)
                        [[unroll]] for (uint j = 0u; j < g; ++j)
                            acc[4u * j + r % 4u] = acc_add(acc[4u * j + r % 4u], element_of(v[r], j), index_base + base + r);
            }
            [[unroll]] for (uint j = 0u; j < g; ++j)
                result[j] = acc_result(acc_merge(acc_merge(acc[4u * j], acc[4u * j + 1u]),
                                                 acc_merge(acc[4u * j + 2u], acc[4u * j + 3u])), count);
            store_word(out_at, result);
            continue;
        }
        uint out_at[REDUCE_SHORT_LOADS / 4u];
        [[unroll]] for (uint k = 0u; k < units; ++k) {
            uint unit = first + k * per, in_base = 0u;
            out_at[k] = 0u;
            if (unit < words) outer_offsets(g * unit, in_base, out_at[k]);
            bool live = unit < words, aligned = in_base % g == 0u && stride % g == 0u;
            [[unroll]] for (uint r = 0u; r < w; ++r)
                v[k * w + r] = live && r < walked ? word_row(in_base, r, stride, aligned) : 0u;
        }
        [[unroll]] for (uint k = 0u; k < units; ++k) {
            if (first + k * per >= words) break;
            [[unroll]] for (uint j = 0u; j < g; ++j) {
                Acc acc[4] = Acc[4](acc_empty(), acc_empty(), acc_empty(), acc_empty());
                [[unroll]] for (uint r = 0u; r < w; ++r)
                    if (r < walked) acc[r % 4u] = r < 4u ? acc_one(element_of(v[k * w + r], j), index_base + r)
                                                         : acc_add(acc[r % 4u], element_of(v[k * w + r], j), index_base + r);
                result[j] = acc_result(acc_merge(acc_merge(acc[0], acc[1]), acc_merge(acc[2], acc[3])), count);
            }
            store_word(out_at[k], result);
        }
    }
}
#endif

#if IN_BITS == 32
layout(std430, binding = 1) buffer OutVecs { uvec4 out_v[]; };

// Walked row r's four elements of the quad from input element in_base.
uvec4 quad_row(uint in_base, uint r, uint stride, bool aligned) {
    uint e = sp.in_offset + in_base + r * stride;
    if (aligned) return in_v[e / 4u];
    return uvec4(in_w[e], in_w[e + 1u], in_w[e + 2u], in_w[e + 3u]);
}

// Output elements out_at .. out_at + 3's results.
void store_quad(uint out_at, uvec2 result[4]) {
    if (OUT_BITS == 32 && (sp.out_offset + out_at) % 4u == 0u) {
        out_v[(sp.out_offset + out_at) / 4u] = uvec4(result[0].x, result[1].x, result[2].x, result[3].x);
        return;
    }
    for (uint j = 0u; j < 4u; ++j) STORE_ELEMENT(out_w, sp.out_offset, OUT_BITS, out_at + j, result[j]);
}

// short_quads with SHORT_WALK REDUCE_SHORT_LOADS: a quad an invocation, in rounds of
// REDUCE_SHORT_LOADS / 4 rows' loads (the quick sums past QUAD_WALK / 2 rows, and the triples of
// the output elements their first pass gave up on: short_walks.short_quads).
// The register loops are unrolled: a state or a load indexed by a loop counter goes to local
// memory (the picking functions' rounds ran 15x slower so, benchmarks/NOTES.md session 18).
void short_quad_rounds(uint group, uint groups) {
    const uint rows = REDUCE_SHORT_LOADS / 4u;
    uint quads = param(SP_ITEMS) / 4u, walked = param(SP_WALKED), index_base = param(SP_INDEX_BASE);
    uint count = param(SP_COUNT), stride = param(SP_DIMS + 3u * param(SP_OUTER_DIMS) + 1u);
    uint per = groups * gl_WorkGroupSize.x;
    for (uint quad = group * gl_WorkGroupSize.x + gl_LocalInvocationID.x; quad < quads; quad += per) {
        uint in_base = 0u, out_at = 0u;
        outer_offsets(4u * quad, in_base, out_at);
        bool aligned = (sp.in_offset + in_base) % 4u == 0u && stride % 4u == 0u;
#ifdef QUICK_SUMS
        if (QUICK_PASS == 1u) {
            Quick q[4] = Quick[4](quick_empty(), quick_empty(), quick_empty(), quick_empty());
            for (uint base = 0u; base < walked; base += rows) {
                uvec4 v[rows];
                [[unroll]] for (uint r = 0u; r < rows; ++r) v[r] = base + r < walked ? quad_row(in_base, base + r, stride, aligned) : uvec4(0u);
                [[unroll]] for (uint r = 0u; r < rows; ++r)
                    if (base + r < walked)
                        [[unroll]] for (uint j = 0u; j < 4u; ++j) q[j] = quick_add(q[j], v[r][j]);
            }
            uvec2 result[4];
            [[unroll]] for (uint j = 0u; j < 4u; ++j) result[j] = uvec2(quick_bits(q[j], walked), 0u);
            store_quad(out_at, result);
            continue;
        }
#endif
        if (!exact_quad(out_at)) continue;
        Acc acc[16];  // output element j's component q: acc[4 j + q]
        [[unroll]] for (uint i = 0u; i < 16u; ++i) acc[i] = acc_empty();
        for (uint base = 0u; base < walked; base += rows) {
            uvec4 v[rows];
            [[unroll]] for (uint r = 0u; r < rows; ++r) v[r] = base + r < walked ? quad_row(in_base, base + r, stride, aligned) : uvec4(0u);
            [[unroll]] for (uint r = 0u; r < rows; ++r)
                if (base + r < walked)
                    [[unroll]] for (uint j = 0u; j < 4u; ++j)
                        acc[4u * j + r % 4u] = acc_add(acc[4u * j + r % 4u], lane_value(v[r][j]), index_base + base + r);
        }
        uvec2 result[4];
        [[unroll]] for (uint j = 0u; j < 4u; ++j)
            result[j] = acc_result(acc_merge(acc_merge(acc[4u * j], acc[4u * j + 1u]), acc_merge(acc[4u * j + 2u], acc[4u * j + 3u])), count);
        store_quad(out_at, result);
    }
}

// Rows of 16-byte loads an invocation of short_quads holds at most (two quads' 4, or one quad's 16).
#define QUAD_LOADS 16u

// Every quad of output elements that falls to workgroup `group` of `groups` (SHORT_QUADS): with
// SHORT_WALK 4, 8 or 16 (walks of at most that many), REDUCE_SHORT_LOADS / (4 SHORT_WALK) quads an
// invocation (at least one), every load first, then each output element added in lane_elements' order; with
// REDUCE_SHORT_LOADS, one quad an invocation, its walk of any length in rounds
// (short_quad_rounds).
void short_quads(uint group, uint groups) {
    if (SHORT_WALK >= REDUCE_SHORT_LOADS) {
        short_quad_rounds(group, groups);
        return;
    }
    // (4, 2), or (8 or 16, 1)
    const uint rows = SHORT_WALK, per_quads = max(1u, REDUCE_SHORT_LOADS / (4u * SHORT_WALK));
    uint quads = param(SP_ITEMS) / 4u, walked = param(SP_WALKED), index_base = param(SP_INDEX_BASE);
    uint count = param(SP_COUNT), stride = param(SP_DIMS + 3u * param(SP_OUTER_DIMS) + 1u);
    uint per = groups * gl_WorkGroupSize.x;
    for (uint first = group * gl_WorkGroupSize.x + gl_LocalInvocationID.x; first < quads; first += per_quads * per) {
        uint in_base[REDUCE_SHORT_LOADS / 16u], out_at[REDUCE_SHORT_LOADS / 16u];
        [[unroll]] for (uint k = 0u; k < per_quads; ++k) {
            in_base[k] = 0u;
            out_at[k] = 0u;
            if (first + k * per < quads) outer_offsets(4u * (first + k * per), in_base[k], out_at[k]);
        }
        uvec4 v[QUAD_LOADS];
        [[unroll]] for (uint k = 0u; k < per_quads; ++k) {
            bool aligned = (sp.in_offset + in_base[k]) % 4u == 0u && stride % 4u == 0u;
            bool live = first + k * per < quads && exact_quad(out_at[k]);
            [[unroll]] for (uint r = 0u; r < rows; ++r)
                v[rows * k + r] = live && r < walked ? quad_row(in_base[k], r, stride, aligned) : uvec4(0u);
        }
        [[unroll]] for (uint k = 0u; k < per_quads; ++k) {
            if (first + k * per >= quads) break;
            uvec2 result[4];
#ifdef QUICK_SUMS
            if (QUICK_PASS == 1u) {
                [[unroll]] for (uint j = 0u; j < 4u; ++j) {
                    Quick q = quick_start(v[rows * k][j], v[rows * k + 1u][j], walked);
                    [[unroll]] for (uint r = 2u; r < rows; ++r)
                        if (r < walked) q = quick_add(q, v[rows * k + r][j]);
                    result[j] = uvec2(quick_bits(q, walked), 0u);
                }
                store_quad(out_at[k], result);
                continue;
            }
#endif
            if (!exact_quad(out_at[k])) continue;
            [[unroll]] for (uint j = 0u; j < 4u; ++j) {
                Acc acc[4] = Acc[4](acc_empty(), acc_empty(), acc_empty(), acc_empty());
                [[unroll]] for (uint r = 0u; r < rows; ++r)
                    if (r < walked)
                        acc[r % 4u] = r < 4u ? acc_one(lane_value(v[rows * k + r][j]), index_base + r)
                                             : acc_add(acc[r % 4u], lane_value(v[rows * k + r][j]), index_base + r);
                result[j] = acc_result(acc_merge(acc_merge(acc[0], acc[1]), acc_merge(acc[2], acc[3])), count);
            }
            store_quad(out_at[k], result);
        }
    }
}
#endif

#ifdef DOUBLES
// hoisted's loop for the unit reduce_units' first round gives this invocation first, where its
// walk is contiguous and aligned. No branch encloses the loop (an invocation it does not serve
// walks no block): llvmpipe runs a loop under a branch it cannot prove uniform masked, as nested.
void hoist_double_sums(uint group) {
    bool ok = !FLUSHES && (param(SP_MODE) & REDUCE_FROM_STATES) == 0u && param(SP_WALKED_DIMS) == 1u
              && param(SP_DIMS + 3u * param(SP_OUTER_DIMS) + 1u) == 1u;
    uint lanes = max(param(SP_LANES), 1u), items = max(param(SP_ITEMS), 1u), units = items * param(SP_CHUNKS);
    uint local = gl_LocalInvocationID.x, unit = group * (gl_WorkGroupSize.x / lanes) + local / lanes;
    uint in_base = 0u, out_at = 0u;
    outer_offsets(unit % items, in_base, out_at);
    ok = ok && unit < units && (sp.in_offset + in_base) % 4u == 0u;
    uint start = (unit / items) * param(SP_CHUNK), end = min(param(SP_WALKED), start + param(SP_CHUNK)), b;
    dvec4 s, m;
    double_blocks(in_base, start, ok ? end : 0u, local % lanes, lanes, s, m, b);
    hoisted_sums[2u * local] = s;
    hoisted_sums[2u * local + 1u] = m;
    hoisted_stops[local] = b;
    hoisted_start = start;
    hoisted_end = end;
    hoisted_base = in_base;
    hoisted = ok;
}
#endif

#ifdef DOUBLES
// DOUBLE_PASS 1: each lane's state of every unit that falls to workgroup `group` of `groups`,
// stored as the merge reads them (output element i's chunk c's lane j: state (i chunks + c) lanes
// + j); no barrier.
void double_lane_states(uint group, uint groups) {
    uint items = param(SP_ITEMS), lanes = param(SP_LANES), chunks = param(SP_CHUNKS), units = items * chunks;
    uint local = gl_LocalInvocationID.x, lane = local % lanes, per_group = gl_WorkGroupSize.x / lanes;
    for (uint first = group * per_group; first < units; first += groups * per_group) {
        uint unit = first + local / lanes, item = unit % items, chunk = unit / items, in_base = 0u, out_at = 0u;
        if (unit >= units) break;
        outer_offsets(item, in_base, out_at);
        states[sp.aux_offset / 8u + (item * chunks + chunk) * lanes + lane] = lane_elements(in_base, chunk, lane, lanes);
    }
}
#endif

// Every unit of the parameter words' that falls to workgroup `group` of `groups`.
void reduce_units(uint group, uint groups) {
    uint items = param(SP_ITEMS), lanes = param(SP_LANES), chunks = param(SP_CHUNKS), mode = param(SP_MODE);
    uint local = gl_LocalInvocationID.x, lane = local % lanes;
    uint per_group = gl_WorkGroupSize.x / lanes, units = items * chunks;
#ifdef DOUBLES
    uint parity = 0u;
#endif
    for (uint first = group * per_group; first < units; first += groups * per_group) {  // uniform per group
#ifdef DOUBLES
      // Pass 1, only where a unit's result was not proved in pass 0: the triples (acc_exact), for
      // every unit of the round (the proved ones write the same bits again).
      for (uint pass = 0u; pass < 2u; ++pass) {
        acc_exact = pass == 1u;
        uint slot = parity;
        parity ^= 1u;
        if (local == 0u) gave_up[slot] = false;  // (set after the barrier below, read after the last)
#endif
        uint unit = first + local / lanes, item = unit % items, chunk = unit / items;
        bool live = unit < units;
        uint in_base = 0u, out_at = 0u;
        Acc acc = acc_empty();
        if (live) {
            outer_offsets(item, in_base, out_at);
#ifdef DOUBLES
            if (acc_exact) acc = lane_walk(item, lane, lanes);
            else
#endif
            acc = (mode & REDUCE_FROM_STATES) != 0u ? lane_states(item, lane, lanes)
                                                     : lane_elements(in_base, chunk, lane, lanes);
        }
        tree[local] = acc;
        barrier();
#ifdef DOUBLES
        if (!acc_exact) {  // (the proved bits do not depend on the order: lane 0 merges the others in turn)
            if (lane == 0u)
                for (uint j = 1u; j < lanes; ++j) acc = acc_merge(acc, tree[local + j]);
        } else
#endif
        for (uint s = lanes / 2u; s > 0u; s /= 2u) {
            if (lane < s) {
                acc = acc_merge(acc, tree[local + s]);
                tree[local] = acc;
            }
            barrier();
        }
        if (live && lane == 0u) {
            if ((mode & REDUCE_TO_STATES) != 0u) {
                states[sp.aux_offset / 8u + item * chunks + chunk] = acc;
            } else {
#ifdef DOUBLES
                uint bits;
                if (!acc_exact && !accd_result(acc, bits)) gave_up[slot] = true;
                else STORE_ELEMENT(out_w, sp.out_offset, OUT_BITS, out_at, acc_exact ? acc_result(acc, param(SP_COUNT)) : uvec2(bits, 0u));
#else
                uvec2 result = acc_result(acc, param(SP_COUNT));
                STORE_ELEMENT(out_w, sp.out_offset, OUT_BITS, out_at, result);
#endif
            }
        }
        barrier();
#ifdef DOUBLES
        if (!gave_up[slot] || acc_exact) break;
      }
      acc_exact = false;
#endif
    }
}

void main() {
    uint group = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint groups = gl_NumWorkGroups.x * gl_NumWorkGroups.y, dispatched = groups, count_at = 0u;
    if (SHORT_WALK != 0u) {
        if (QUICK_PASS == 2u && state_w[sp.aux_offset] == 0u) return;  // nothing gave up (uniform)
#if IN_BITS == 32
        if (SHORT_QUADS) short_quads(group, groups);
        else
#elif IN_BITS < 32
        if (SHORT_QUADS) short_words(group, groups);
        else
#endif
            short_units(group, groups);
        if (QUICK_PASS == 2u) {  // the last workgroup to finish clears the word for the next run
            memoryBarrierBuffer();
            barrier();
            if (gl_LocalInvocationID.x == 0u && atomicAdd(state_w[sp.aux_offset + 1u], 1u) == dispatched - 1u) {
                state_w[sp.aux_offset] = 0u;
                state_w[sp.aux_offset + 1u] = 0u;
            }
        }
        return;
    }
#ifdef DOUBLES
    if (DOUBLE_PASS == 2u) {  // the merge's words, every workgroup of the merge's grid
        params_base = sp.source_offset - sp.params_offset;
        reduce_units(group, groups);
        return;
    }
    hoist_double_sums(group);
    if (DOUBLE_PASS == 1u) {
        double_lane_states(group, groups);
        return;
    }
#endif
    bool merged = false;
    // The units' code once, run twice at most (a pipeline half the size to build): this
    // workgroup's units, then, with REDUCE_MERGE_LAST in the last workgroup to finish, the merge.
    for (uint round = 0u; round < 2u; ++round) {  // (every branch below: uniform per workgroup)
        reduce_units(group, groups);
        if (round == 1u || (param(SP_MODE) & REDUCE_MERGE_LAST) == 0u) break;
        count_at = sp.aux_offset + 8u * param(SP_ITEMS) * param(SP_CHUNKS);  // after the states
        memoryBarrierBuffer();  // this workgroup's states, before it counts itself
        barrier();
        if (gl_LocalInvocationID.x == 0u)
            merges = atomicAdd(state_w[count_at], 1u) == dispatched - 1u;
        barrier();
        if (!merges) return;
        memoryBarrierBuffer();
        params_base = sp.source_offset - sp.params_offset;  // the merge's parameter words: one workgroup's
        group = 0u;
        groups = 1u;
        merged = true;
    }
    if (merged && gl_LocalInvocationID.x == 0u) state_w[count_at] = 0u;
}
