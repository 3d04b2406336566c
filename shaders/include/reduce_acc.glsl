// DML_REDUCE_FUNCTION's accumulators, shared by shaders/reduce.comp and the reducing fused-graph
// kernel (shaders/graph.comp). A state is an `Acc` of two uvec4 (so that workgroups combine states
// in shared memory and dispatches pass them on in a buffer):
//   acc_empty()            the state of no element;
//   acc_add(a, v, r)       a with element r (its raw bits v; integers sign-extended to 64 bits);
//   acc_merge(a, b)        the state of a's elements and b's (a fixed order: the caller's);
//   acc_result(a, count)   the output element's raw bits, `count` the elements reduced.
// The includer defines ACC_FUNCTION (a RED_* value), ACC_BITS and ACC_KIND (the input's width and
// KIND_* code) and ACC_OUT_BITS (the output's width): #defines or specialization constants.
//
// States per function (words):
//   integers: the 64-bit (lo, hi) sum or product, wrapping (x);
//   ARGMIN/ARGMAX/MIN/MAX: the kept element's value (lo, hi) and index, 0xFFFFFFFF for none; an
//     element replaces it when its order key is better, or equal with a lower index;
//   floats SUM, AVERAGE, L1, SUM_SQUARE, L2, LOG_SUM: the sum of the terms (x, |x|, x^2) as a
//     float triple (compensated.glsl; squares exact by Dekker's product), and a second triple
//     for the terms of magnitude 2^62 (squares of 2^48) and more, scaled by 2^-64 (2^-160), so
//     that no partial sum overflows; an infinite or NaN term is added to the second's first float
//     plainly and makes it non-finite, the result then being that float (IEEE's rules: NaN, or
//     inf - inf = NaN). The first triple holds x and |x| scaled by 2^32 (SUMS_SCALE), taken
//     from their bits where x is subnormal: every term, partial sum and rounding error is then a
//     multiple of 2^-117, a normal float, so a GPU that flushes float32 subnormals to zero
//     (NVIDIA's, which offer no DenormPreserve for 32 bits) adds them exactly too, and the
//     scaling changes no bit where subnormals are kept (a power of two; nothing crosses the
//     subnormal range either way); a result in the subnormal range is rounded from its bits
//     (acc_out_pair). Terms under 2^62 times 2^32, fewer than 2^32 of them, stay under 2^126;
//   LOG_SUM_EXP: the largest finite element m, the sum of exp(x - m) as a pair, flags (NaN, +inf);
//   float MULTIPLY: the product's mantissa as a pair in [0.5, 1), its exponent, flags (the sign,
//     a zero, an infinity, a NaN): no partial product overflows or underflows.
//   FLOAT16 SUM, AVERAGE, L1, LOG_SUM where the includer sets ACC_FIXED: the exact sum as a 96-bit
//     fixed-point integer of 2^-24 units and flags (acc_fixed, below);
// Floats are rounded once, at acc_result (FLOAT16 inputs accumulate in float32 too); a NaN result
// is the quiet NaN 0x7FC00000 (FLOAT16 0x7E00), whatever NaN the input held.
#ifndef DMLGPU_REDUCE_ACC_GLSL
#define DMLGPU_REDUCE_ACC_GLSL

#include "compensated.glsl"
#include "arith64.glsl"

#define ACC_NONE 0xFFFFFFFFu
#define ACC_FLAG_SIGN 1u
#define ACC_FLAG_ZERO 2u
#define ACC_FLAG_INF 4u
#define ACC_FLAG_NAN 8u
#define TWO_POW_64 1.8446744e19
#define ACC_INF uintBitsToFloat(0x7F800000u)
#define ACC_NAN uintBitsToFloat(0x7FC00000u)
#define TWO_POW_48 2.8147498e14
#define TWO_POW_62 4.6116860e18
// The first triple's scale for x and |x| (2^sums_shift()).
#define SUMS_SCALE 4294967296.0

bool acc_selects() {
    return ACC_FUNCTION == RED_ARGMAX || ACC_FUNCTION == RED_ARGMIN || ACC_FUNCTION == RED_MAX
        || ACC_FUNCTION == RED_MIN;
}
bool acc_largest() { return ACC_FUNCTION == RED_ARGMAX || ACC_FUNCTION == RED_MAX; }
// ARGMIN/ARGMAX keep the element's index (x.z; ACC_NONE: no element yet); MIN and MAX keep none.
bool acc_indexes() { return ACC_FUNCTION == RED_ARGMAX || ACC_FUNCTION == RED_ARGMIN; }
bool acc_floats() { return ACC_KIND == KIND_FLOAT && !acc_selects(); }
bool acc_squares() { return ACC_FUNCTION == RED_SUM_SQUARE || ACC_FUNCTION == RED_L2; }
// The float pair sums (not LOG_SUM_EXP, not MULTIPLY).
bool acc_sums() { return acc_floats() && ACC_FUNCTION != RED_LOG_SUM_EXP && ACC_FUNCTION != RED_MULTIPLY; }

float acc_f(uint w) { return uintBitsToFloat(w); }
uint acc_u(float f) { return floatBitsToUint(f); }

// The element as a float32 (FLOAT16 exactly converted).
float acc_value(uvec2 v) { return ACC_BITS == 16u ? unpackHalf2x16(v.x).x : uintBitsToFloat(v.x); }

// Order key (dmlgpu's reference order_key): unsigned comparison of keys orders the values; for
// floats the total order of encodings (-NaN < -inf < -0.0 < +0.0 < +inf < +NaN). Integers of
// 32 bits or fewer (sign-extended to 64) order by their low word alone: a key's high word 0 is a
// constant the compiler drops (their 64-bit compares made INT32 MIN 1.5-2x slower than FLOAT32 MAX).
uvec2 acc_key(uvec2 v) {
    if (ACC_KIND == KIND_UINT) return ACC_BITS <= 32u ? uvec2(v.x, 0u) : v;
    if (ACC_KIND == KIND_INT) return ACC_BITS <= 32u ? uvec2(v.x ^ 0x80000000u, 0u) : uvec2(v.x, v.y ^ 0x80000000u);
    if (ACC_BITS == 64u) return (v.y & 0x80000000u) != 0u ? ~v : uvec2(v.x, v.y | 0x80000000u);
    uint top = 1u << (ACC_BITS - 1u);
    return uvec2((v.x & top) != 0u ? (~v.x & lane_mask(ACC_BITS)) : (v.x | top), 0u);
}

bool acc_key_less(uvec2 a, uvec2 b) { return a.y < b.y || (a.y == b.y && a.x < b.x); }

// MIN's and MAX's empty state: the value whose key comes last in their order (MIN: the largest
// key, MAX: the least), which every element replaces or equals bit for bit (keys are one to one),
// so a state needs no "no element yet" mark and its add is one compare (UINT8 MIN of 256 MiB on an
// H200: NOTES, session 18).
uvec2 acc_identity() {
    bool largest_key = !acc_largest();
    if (ACC_KIND == KIND_UINT)
        return largest_key ? (ACC_BITS == 64u ? uvec2(~0u) : uvec2(lane_mask(ACC_BITS), 0u)) : uvec2(0u);
    if (ACC_KIND == KIND_INT) {
        if (ACC_BITS == 64u) return largest_key ? uvec2(~0u, 0x7FFFFFFFu) : uvec2(0u, 0x80000000u);
        uint top = 1u << (ACC_BITS - 1u);
        return largest_key ? uvec2(top - 1u, 0u) : uvec2(~(top - 1u), ~0u);  // (the least, sign-extended)
    }
    if (ACC_BITS == 64u) return largest_key ? uvec2(~0u, 0x7FFFFFFFu) : uvec2(~0u);  // (+NaN / -NaN of every bit)
    return largest_key ? uvec2(lane_mask(ACC_BITS) >> 1u, 0u) : uvec2(lane_mask(ACC_BITS), 0u);
}

// A state: x, and for the float sums y (see above).
struct Acc {
    uvec4 x;
    uvec4 y;
};

// The float sums' empty state: both triples -0.0 (a sum of no terms, or of -0.0s, is -0.0).
Acc acc_empty_sums() {
    return Acc(uvec4(0x80000000u, 0x80000000u, 0x80000000u, 0u), uvec4(0x80000000u, 0x80000000u, 0x80000000u, 0u));
}

bool acc_fixed();

#ifdef ACC_DOUBLES
// FLOAT32 SUM and L1 in doubles (the includer defines ACC_DOUBLES: a variant of its own, run where
// the device has 64-bit floats). A state holds s, the running sum, and m, the sum of |s| after
// each addition (a term's or a merge's), as two doubles in x (unpackDouble2x32). Every float32
// term and every partial sum of fewer than 2^32 of them is a normal double, so an addition's
// rounding error is at most 2^-53 of its result's magnitude and the sum's at most 2^-53 m.
// accd_result gives the float32 nearest s where s, with that bound (and room for the check's own
// roundings), lies strictly between the midpoints to that float's neighbours: then it is the
// correctly rounded sum, the triples' bits. Where it cannot prove that (a sum cancelling to near
// a midpoint or to zero, a result under 2^-125, an exact tie) the includer computes the output
// element again with the triples (acc_exact). NaN and infinities follow IEEE in doubles as in the
// triples: a NaN term or inf - inf gives NaN, an infinite term that infinity.
bool acc_exact = false;  // the triples (the generic functions below), not the doubles
Acc accd_state(double s, double m) { return Acc(uvec4(unpackDouble2x32(s), unpackDouble2x32(m)), uvec4(0u)); }
double accd_s(Acc a) { return packDouble2x32(a.x.xy); }
double accd_m(Acc a) { return packDouble2x32(a.x.zw); }
double accd_pow2(int e) { return packDouble2x32(uvec2(0u, uint(1023 + e) << 20)); }  // 2^e, -1022 <= e <= 1023
// A float32 term (L1: its magnitude) from its bits, exactly: a subnormal too, where a GPU's
// conversion would flush it.
double accd_term(uint w) {
    uint bits = w & 0x7FFFFFFFu;
    precise double d = bits < 0x00800000u ? double(bits) * accd_pow2(-149) : double(uintBitsToFloat(bits));
    return ACC_FUNCTION == RED_L1 || (w & 0x80000000u) == 0u ? d : -d;
}
Acc accd_add(Acc a, uint w) {
    precise double s = accd_s(a) + accd_term(w);
    precise double m = accd_m(a) + abs(s);
    return accd_state(s, m);
}
Acc accd_merge(Acc a, Acc b) {
    precise double s = accd_s(a) + accd_s(b);
    precise double m = (accd_m(a) + accd_m(b)) + abs(s);
    return accd_state(s, m);
}
// The double of float32 bits w (normal or infinite, positive), from the bits alone: no conversion a
// compiler could fold away with the one it undoes.
double accd_float(uint w) { return packDouble2x32(uvec2(w << 29, (((w >> 23) + 896u) << 20) | ((w & 0x007FFFFFu) >> 3))); }
// The output element's bits where they are proved (else false): s's magnitude lies between two
// adjacent float32s t (s's bits cut to 23 mantissa bits) and t + 1 ulp, and more than the error
// bound away from their midpoint; the sign is s's.
bool accd_result(Acc a, out uint bits) {
    double s = accd_s(a);
    precise double magnitude = abs(s);
    uvec2 words = unpackDouble2x32(s);
    uint sign = words.y & 0x80000000u;
    bits = 0x7FC00000u;
    if (isnan(s)) return true;
    bits = sign | 0x7F800000u;
    if (isinf(s)) return true;
    // 2^-53 m, with 2^-16 to spare for m's own roundings (fewer than 2^34 additions), doubled for
    // the roundings of the differences below (each within 2^-53 of its value).
    precise double twice_bound = accd_m(a) * (accd_pow2(-52) * (1.0lf + accd_pow2(-16)));
    bits = sign;
    if (magnitude == 0.0lf) return twice_bound == 0.0lf;
    int exponent = int((words.y >> 20) & 0x7FFu) - 1023;  // of 2^exponent <= magnitude < 2^(exponent + 1)
    if (exponent < -125) return false;  // (near or under float32's subnormals)
    precise double overflow = accd_pow2(128) - accd_pow2(103);  // FLT_MAX's midpoint to 2^128: rounds to inf
    bits = sign | 0x7F800000u;
    if (exponent >= 128) return magnitude - overflow > twice_bound;
    uint t = (uint(exponent + 127) << 23) | ((words.y & 0x000FFFFFu) << 3) | (words.x >> 29);
    precise double midpoint = 0.5lf * (accd_float(t) + accd_float(t + 1u));  // (exact: 25 bits)
    bits = sign | t;
    if (midpoint - magnitude > twice_bound) return true;
    bits = sign | (t + 1u);  // (0x7F800000 past FLT_MAX: inf)
    return magnitude - midpoint > twice_bound;
}
#endif

Acc acc_empty() {
#ifdef ACC_DOUBLES
    if (!acc_exact) return accd_state(-0.0lf, 0.0lf);
#endif
    if (acc_selects()) return acc_indexes() ? Acc(uvec4(0u, 0u, ACC_NONE, 0u), uvec4(0u)) : Acc(uvec4(acc_identity(), 0u, 0u), uvec4(0u));
    if (!acc_floats()) return Acc(uvec4(ACC_FUNCTION == RED_MULTIPLY ? 1u : 0u, 0u, 0u, 0u), uvec4(0u));
    if (ACC_FUNCTION == RED_MULTIPLY) return Acc(uvec4(acc_u(0.5), 0u, 1u, 0u), uvec4(0u));  // 1 = 0.5 * 2^1
    if (ACC_FUNCTION == RED_LOG_SUM_EXP) return Acc(uvec4(acc_u(-ACC_INF), 0u, 0u, 0u), uvec4(0u));
    if (acc_fixed()) return Acc(uvec4(0u), uvec4(0u));
    return acc_empty_sums();
}

// -- the float sums ---------------------------------------------------------------------------
// x: the triple of the terms under 2^62, scaled by 2^SUMS_SHIFT (squares: of elements under 2^48,
// not scaled); y: of the others, scaled by 2^-64 (squares: elements scaled by 2^-80), or the
// plain sum of the non-finite terms.
float sums_term(float x) { return acc_squares() ? x * x : ACC_FUNCTION == RED_L1 ? abs(x) : x; }
// |x| from its bits (abs() may flush a subnormal to zero first).
float bits_abs(float x) { return uintBitsToFloat(floatBitsToUint(x) & 0x7FFFFFFFu); }
// The first triple's scale, as a power of two (see the states above).
int sums_shift() { return acc_squares() ? 0 : 32; }
// The magnitude from which a term goes to the second triple.
float sums_limit() { return acc_squares() ? TWO_POW_48 : TWO_POW_62; }
// A term of the first triple (|x| < 2^62) times 2^sums_shift(), exactly: a subnormal from its
// bits (a float multiply would see zero where the GPU flushes subnormals).
float sums_scaled(float x) {
    if (acc_squares()) return x;
    uint b = floatBitsToUint(x);
    if ((b & 0x7F800000u) != 0u) return x * SUMS_SCALE;
    precise float m = float(b & 0x007FFFFFu) * pow2(-117);  // (a zero keeps its sign below)
    return uintBitsToFloat(floatBitsToUint(m) | (b & 0x80000000u));
}

Acc sums_add_big(Acc a, float x) {
    float bs = acc_f(a.y.x);
    if (isnan(x) || isinf(x)) {
        precise float special = bs + sums_term(x);
        return Acc(a.x, uvec4(acc_u(special), 0u, 0u, 0u));
    }
    if (isnan(bs) || isinf(bs)) return a;  // a non-finite term came first: finite ones change nothing
    vec3 big = vec3(bs, acc_f(a.y.y), acc_f(a.y.z));
    if (acc_squares()) {
        vec2 p = two_square(x * pow2(-80));
        big = triple_add(triple_add(big, p.x), p.y);
    } else {
        big = triple_add(big, (ACC_FUNCTION == RED_L1 ? abs(x) : x) * pow2(-64));
    }
    return Acc(a.x, uvec4(acc_u(big.x), acc_u(big.y), acc_u(big.z), 0u));
}

Acc sums_add(Acc a, float x) {
    vec3 small = vec3(acc_f(a.x.x), acc_f(a.x.y), acc_f(a.x.z));
    if (acc_squares()) {
        if (abs(x) < TWO_POW_48) {
            vec2 p = two_square(x);
            small = triple_add(triple_add(small, p.x), p.y);
            return Acc(uvec4(acc_u(small.x), acc_u(small.y), acc_u(small.z), 0u), a.y);
        }
    } else {
        float term = ACC_FUNCTION == RED_L1 ? bits_abs(x) : x;
        if (abs(term) < TWO_POW_62) {  // (false for NaN; true for a flushed subnormal)
            small = triple_add(small, sums_scaled(term));
            return Acc(uvec4(acc_u(small.x), acc_u(small.y), acc_u(small.z), 0u), a.y);
        }
    }
    return sums_add_big(a, x);
}

vec3 acc_triple(uvec4 w) { return vec3(acc_f(w.x), acc_f(w.y), acc_f(w.z)); }
uvec4 acc_words(vec3 t) { return uvec4(acc_u(t.x), acc_u(t.y), acc_u(t.z), 0u); }

Acc sums_merge(Acc a, Acc b) {
    uvec4 small = acc_words(triple_merge(acc_triple(a.x), acc_triple(b.x)));
    float abs_ = acc_f(a.y.x), bbs = acc_f(b.y.x);
    if (isnan(abs_) || isinf(abs_) || isnan(bbs) || isinf(bbs)) {
        precise float special = abs_ + bbs;
        return Acc(small, uvec4(acc_u(special), 0u, 0u, 0u));
    }
    return Acc(small, acc_words(triple_merge(acc_triple(a.y), acc_triple(b.y))));
}

// The output bits of the real number a * 2^scale, rounded once (a normalised pair: |a.y| at
// most half an ulp of a.x; scale in [-252, 254]). A FLOAT32 result under 2^-126 is rounded to
// a multiple of 2^-149 from a's bits (ties to even; a.y decides where a.x lies on a tie), with
// no float subnormal made, so a GPU that flushes them rounds it as IEEE says too.
uvec2 acc_out_pair(vec2 a, int scale) {
    if (ACC_OUT_BITS == 16u) {
        if (scale > 0 && a.x != 0.0) return uvec2((acc_u(a.x) >> 16) & 0x8000u | 0x7C00u, 0u);
        if (scale < 0) a = pair_scale(a, scale);  // (exact, or far under FLOAT16's least subnormal)
        return uvec2(pair_to_half(a), 0u);
    }
    // (Squares never come with a negative scale: their code, which every lane's registers pay
    // for, keeps none of this.)
    uint bits = acc_u(a.x), magnitude = bits & 0x7FFFFFFFu;
    if (!acc_squares() && scale < 0 && magnitude != 0u && magnitude < 0x7F800000u && int(magnitude >> 23) - 127 < -126 - scale) {
        vec2 q = pair_scale(a, 149 + scale);  // in units of 2^-149: under 2^23, exactly
        precise float r = roundEven(q.x);
        precise float t = q.x - r;
        if (t == 0.5 && q.y > 0.0) r += 1.0;
        else if (t == -0.5 && q.y < 0.0) r -= 1.0;
        return uvec2((bits & 0x80000000u) | uint(abs(r)), 0u);  // (2^23 units: the least normal float)
    }
    float r = pair_round(a);
    if (scale > 0) r = r * pow2(min(scale, 127)) * pow2(max(scale - 127, 0));
    if (!acc_squares() && scale < 0) r = r * pow2(max(scale, -126)) * pow2(min(scale + 126, 0));
    return uvec2(acc_u(r), 0u);
}

uvec2 acc_out_float(float f) {
    return ACC_OUT_BITS == 16u ? uvec2(isnan(f) ? 0x7E00u : packHalf2x16(vec2(f, 0.0)), 0u) : uvec2(acc_u(f), 0u);
}

// count as a pair (exact up to 2^32 - 1).
vec2 acc_count(uint count) {
    float hi = float(count);
    return vec2(hi, float(int(count - uint(hi))));
}

uvec2 sums_result(Acc a, uint count) {
    float bs = acc_f(a.y.x);
    if (isnan(bs) || isinf(bs)) {  // IEEE: NaN, or an infinity (log(-inf) is NaN)
        bool nan_result = isnan(bs) || (ACC_FUNCTION == RED_LOG_SUM && bs < 0.0);
        return acc_out_float(nan_result ? ACC_NAN : bs);
    }
    vec2 small = triple_pair(acc_triple(a.x)), big = triple_pair(acc_triple(a.y));
    int shift = sums_shift(), scale = -shift;  // the result is w * 2^scale
    vec2 w = small;
    if (big.x != 0.0) {
        int big_scale = acc_squares() ? 160 : 64;
        // Beyond this the total passes the float range: it is kept scaled.
        if (abs(big.x) >= (acc_squares() ? pow2(-32) : TWO_POW_64)) {
            w = pair_add(big, pair_scale(small, -big_scale - shift));
            scale = big_scale;
        } else if (shift > 0 && abs(big.x) >= pow2(30)) {  // (in the first triple's units past 2^126)
            w = pair_add(pair_scale(big, big_scale), pair_scale(small, -shift));
            scale = 0;
        } else {
            w = pair_add(pair_scale(big, big_scale + shift), small);
        }
    }
    if (w.y != 0.0) w = two_sum(w.x, w.y);
    if (ACC_FUNCTION == RED_LOG_SUM) {
        if (w.x < 0.0) return acc_out_float(ACC_NAN);
        if (w.x == 0.0) return acc_out_float(-ACC_INF);
        return acc_out_pair(pair_log(w, scale), 0);
    }
    if (w.x == 0.0) return acc_out_pair(w, 0);  // a zero keeps its sign (the sum of -0.0s is -0.0)
    if (ACC_FUNCTION == RED_AVERAGE) {
        if (scale <= 0 && abs(w.x) >= pow2(100)) {  // (the quotient's split must not overflow)
            w = pair_scale(w, -64);
            scale += 64;
        } else if (abs(w.x) < 1.0) {  // (nor its rounding errors go under 2^-126: at least 2^-117 * 2^96)
            w = pair_scale(w, 96);
            scale -= 96;
        }
        return acc_out_pair(pair_div(w, acc_count(count)), scale);
    }
    if (ACC_FUNCTION == RED_L2) return acc_out_pair(pair_sqrt(w), scale / 2);
    return acc_out_pair(w, scale);
}

// -- FLOAT16 SUM, AVERAGE, L1 and LOG_SUM, in fixed point, where the includer sets ACC_FIXED ----
// Every finite float16 is an integer multiple k of 2^-24 with |k| < 2^40, so the state x holds the
// sum of the terms' k as a 96-bit two's-complement integer (x.x the low word, x.z the high one),
// exact in any order (fewer than 2^32 terms stay under 2^72), and in x.w its flags: a NaN, +inf or
// -inf term met (FIXED_*), a term other than -0.0 met (a sum of -0.0s alone is -0.0); y is unused.
// The result is that exact sum as a float triple scaled as the triples' (sums_result), rounded once
// there: the correctly rounded value, in every case. (An add is a few integer operations where a
// triple's is about thirteen float ones.)
#define FIXED_NAN 1u
#define FIXED_POS_INF 2u
#define FIXED_NEG_INF 4u
#define FIXED_NONZERO 8u
#ifndef ACC_FIXED
#define ACC_FIXED false
#endif
bool acc_fixed() {
    return ACC_FIXED && ACC_KIND == KIND_FLOAT && ACC_BITS == 16u && (ACC_FUNCTION == RED_SUM || ACC_FUNCTION == RED_AVERAGE
        || ACC_FUNCTION == RED_L1 || ACC_FUNCTION == RED_LOG_SUM);
}

// a + b, 96 bits (x, y, z), wrapping; w: the flags, or'ed.
uvec4 fixed_merge(uvec4 a, uvec4 b) {
    uint c0, c1, c2;
    uint lo = uaddCarry(a.x, b.x, c0);
    uint mid = uaddCarry(a.y, b.y, c1);
    uint mid2 = uaddCarry(mid, c0, c2);
    return uvec4(lo, mid2, a.z + b.z + c1 + c2, a.w | b.w);
}

// a with the float16 term of bits h (|h| for L1) added.
uvec4 fixed_add(uvec4 a, uint h) {
    if (ACC_FUNCTION == RED_L1) h &= 0x7FFFu;
    // No branch on the term (selects only): a branch on each loaded value holds the next loads
    // back (benchmarks/NOTES.md, session 19).
    uint e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    bool special = e == 31u;  // an infinity or a NaN: a flag, and 0 added
    uint flags = (special ? (m != 0u ? FIXED_NAN : h > 0x8000u ? FIXED_NEG_INF : FIXED_POS_INF) : 0u)
                 | (h != 0x8000u ? FIXED_NONZERO : 0u);
    // k = m (subnormal) or (1024 + m) 2^(e - 1), as (lo, hi); then two's complement where negative
    uint significand = special ? 0u : e == 0u ? m : m | 0x400u, shift = min(max(e, 1u) - 1u, 29u);
    uint lo = significand << shift, hi = (significand >> 1) >> (31u - shift);
    uint negative = h >> 15, mask = 0u - negative;
    uint c0, c1;
    uint low = uaddCarry(lo ^ mask, negative, c0);  // (-k = ~k + 1, carried through the three words)
    uint high = uaddCarry(hi ^ mask, c0, c1);
    return fixed_merge(a, uvec4(low, high, mask + c1, flags));
}

// The 24-bit piece `bits` of a magnitude times 2^scale, as a float (exactly).
float fixed_piece(uint bits, int scale) { return float(bits) * pow2(scale); }

// The sums' state (sums_result's) of the same value: the triple of the exact sum in the first
// triple's units (2^-32: k 2^-24 is k 2^8 of them), normalised by TwoSums (each float at most half
// an ulp of the one before), and y empty, or holding the NaN or infinity that IEEE gives.
Acc fixed_sums(uvec4 a) {
    Acc r = acc_empty_sums();
    bool pos = (a.w & FIXED_POS_INF) != 0u, neg = (a.w & FIXED_NEG_INF) != 0u;
    if ((a.w & FIXED_NAN) != 0u || (pos && neg)) r.y.x = acc_u(ACC_NAN);
    else if (pos || neg) r.y.x = acc_u(pos ? ACC_INF : -ACC_INF);
    bool negative = (a.z & 0x80000000u) != 0u;
    uvec3 k = a.xyz;
    if (negative) {  // the magnitude (under 2^72)
        uint c0, c1;
        k.x = uaddCarry(~k.x, 1u, c0);
        k.y = uaddCarry(~k.y, c0, c1);
        k.z = ~k.z + c1;
    }
    // 24-bit pieces: k = p2 2^48 + p1 2^24 + p0, each a float exactly
    uint p0 = k.x & 0xFFFFFFu, p1 = (k.x >> 24) | ((k.y & 0xFFFFu) << 8), p2 = (k.y >> 16) | ((k.z & 0xFFu) << 16);
    float sign = negative ? -1.0 : 1.0;
    vec2 b = two_sum(sign * fixed_piece(p1, 32), sign * fixed_piece(p0, 8));
    vec2 t = two_sum(sign * fixed_piece(p2, 56), b.x);
    r.x = acc_words(vec3(t.x, t.y, b.y));
    if (k == uvec3(0u) && (a.w & FIXED_NONZERO) == 0u) r.x = acc_empty_sums().x;  // -0.0s alone: -0.0
    return r;
}

// -- LOG_SUM_EXP ---------------------------------------------------------------------------
uvec4 lse_add(uvec4 a, float x) {
    if (isnan(x)) return uvec4(a.xyz, a.w | ACC_FLAG_NAN);
    if (isinf(x)) return x > 0.0 ? uvec4(a.xyz, a.w | ACC_FLAG_INF) : a;
    float top = acc_f(a.x);
    vec2 s = vec2(acc_f(a.y), acc_f(a.z));
    if (x > top) {  // a new largest: the sum so far scaled by exp(top - x), then exp(0) = 1
        if (!isinf(top)) s = pair_mul(s, pair_exp(two_sum(top, -x)));
        s = pair_add(s, vec2(1.0, 0.0));
        top = x;
    } else {
        s = pair_add(s, pair_exp(two_sum(x, -top)));
    }
    return uvec4(acc_u(top), acc_u(s.x), acc_u(s.y), a.w);
}

uvec4 lse_merge(uvec4 a, uvec4 b) {
    uint flags = a.w | b.w;
    float ta = acc_f(a.x), tb = acc_f(b.x);
    if (isinf(tb)) return uvec4(a.xyz, flags);  // b has no finite element
    if (isinf(ta)) return uvec4(b.xyz, flags);
    vec2 sa = vec2(acc_f(a.y), acc_f(a.z)), sb = vec2(acc_f(b.y), acc_f(b.z));
    float top = max(ta, tb);
    if (ta < top) sa = pair_mul(sa, pair_exp(two_sum(ta, -top)));
    if (tb < top) sb = pair_mul(sb, pair_exp(two_sum(tb, -top)));
    vec2 s = pair_add(sa, sb);
    return uvec4(acc_u(top), acc_u(s.x), acc_u(s.y), flags);
}

uvec2 lse_result(uvec4 a) {
    if ((a.w & ACC_FLAG_NAN) != 0u) return acc_out_float(ACC_NAN);
    if ((a.w & ACC_FLAG_INF) != 0u) return acc_out_float(ACC_INF);
    float top = acc_f(a.x);
    if (isinf(top)) return acc_out_float(top);  // every element -inf
    return acc_out_pair(pair_add(vec2(top, 0.0), pair_log(vec2(acc_f(a.y), acc_f(a.z)), 0)), 0);
}

// -- float MULTIPLY ------------------------------------------------------------------------
// (mantissa pair, exponent) of a * b, the mantissa put back in [0.5, 1).
uvec4 product_mul(vec2 ma, int ea, vec2 mb, int eb, uint flags) {
    vec2 m = pair_mul(ma, mb);
    int e = ea + eb;
    if (m.x < 0.5) {
        m *= 2.0;
        e -= 1;
    }
    return uvec4(acc_u(m.x), acc_u(m.y), uint(e), flags);
}

uvec4 product_add(uvec4 a, float x) {
    uint bits = acc_u(x), flags = a.w ^ (bits >> 31), magnitude = bits & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) return uvec4(a.xyz, flags | ACC_FLAG_NAN);
    if (magnitude == 0x7F800000u) return uvec4(a.xyz, flags | ACC_FLAG_INF);
    if (magnitude == 0u) return uvec4(a.xyz, flags | ACC_FLAG_ZERO);
    int e = int(magnitude >> 23) - 126;
    if (e == -126) {  // subnormal: its significand as an integer, then * 2^-149 (no float subnormals)
        uint normal = acc_u(float(magnitude));
        e = int(normal >> 23) - 126 - 149;
        magnitude = normal;
    }
    float m = uintBitsToFloat((magnitude & 0x007FFFFFu) | 0x3F000000u);
    return product_mul(vec2(acc_f(a.x), acc_f(a.y)), int(a.z), vec2(m, 0.0), e, flags);
}

uvec4 product_merge(uvec4 a, uvec4 b) {
    uint flags = ((a.w ^ b.w) & ACC_FLAG_SIGN) | ((a.w | b.w) & ~ACC_FLAG_SIGN);
    return product_mul(vec2(acc_f(a.x), acc_f(a.y)), int(a.z), vec2(acc_f(b.x), acc_f(b.y)), int(b.z), flags);
}

uvec2 product_result(uvec4 a) {
    uint flags = a.w;
    float sign = (flags & ACC_FLAG_SIGN) != 0u ? -1.0 : 1.0;
    float zero = uintBitsToFloat((flags & ACC_FLAG_SIGN) << 31);  // (not sign * 0.0: compilers may drop -0.0)
    if ((flags & ACC_FLAG_NAN) != 0u || (flags & (ACC_FLAG_INF | ACC_FLAG_ZERO)) == (ACC_FLAG_INF | ACC_FLAG_ZERO))
        return acc_out_float(ACC_NAN);
    if ((flags & ACC_FLAG_INF) != 0u) return acc_out_float(sign * ACC_INF);
    vec2 m = vec2(acc_f(a.x), acc_f(a.y)) * sign;
    int e = int(a.z);
    if ((flags & ACC_FLAG_ZERO) != 0u || e < -160) return acc_out_float(zero);
    if (e > 130) return acc_out_float(sign * ACC_INF);
    if (ACC_OUT_BITS == 16u) {
        if (e < -30) return acc_out_float(zero);
        if (e > 17) return acc_out_float(sign * ACC_INF);
        return uvec2(pair_to_half(pair_scale(m, e)), 0u);
    }
    if (m.y != 0.0) m = two_sum(m.x, m.y);
    return acc_out_pair(m, e);  // (a subnormal product rounded from its bits)
}

// -- every function --------------------------------------------------------------------------
// A picking function's state holding element v (index r).
Acc acc_picked(uvec2 v, uint r) { return Acc(uvec4(v, acc_indexes() ? r : 0u, 0u), uvec4(0u)); }

Acc acc_add(Acc a, uvec2 v, uint r) {
#ifdef ACC_DOUBLES
    if (!acc_exact) return accd_add(a, v.x);
#endif
    if (acc_selects()) {
        bool better = (acc_indexes() && a.x.z == ACC_NONE)
                      || (acc_largest() ? acc_key_less(acc_key(a.x.xy), acc_key(v)) : acc_key_less(acc_key(v), acc_key(a.x.xy)));
        return better ? acc_picked(v, r) : a;  // strict: of equal keys, the earlier element stays
    }
    if (acc_fixed()) return Acc(fixed_add(a.x, v.x & 0xFFFFu), a.y);
    if (acc_floats()) {
        float x = acc_value(v);
        if (ACC_FUNCTION == RED_MULTIPLY) return Acc(product_add(a.x, x), a.y);
        if (ACC_FUNCTION == RED_LOG_SUM_EXP) return Acc(lse_add(a.x, x), a.y);
        return sums_add(a, x);
    }
    uvec2 acc = a.x.xy;
    if (ACC_FUNCTION == RED_MULTIPLY) acc = mul64(acc, v);
    else if (ACC_FUNCTION == RED_SUM_SQUARE) acc = add64(acc, mul64(v, v));
    else if (ACC_FUNCTION == RED_L1 && ACC_KIND == KIND_INT)  // (the sign: of the low word up to 32 bits, sign-extended)
        acc = add64(acc, ((ACC_BITS <= 32u ? v.x : v.y) & 0x80000000u) != 0u ? negate64(v) : v);
    else acc = add64(acc, v);
    return Acc(uvec4(acc, 0u, 0u), a.y);
}

// acc_add of element v (index r) to an empty state: for the picking functions the element itself,
// no compare with MIN's or MAX's empty state (a short walk's first elements: FLOAT32 MAX over 2
// rows took 14% longer with the compare, NOTES session 18).
Acc acc_one(uvec2 v, uint r) {
    return acc_selects() ? acc_picked(v, r) : acc_add(acc_empty(), v, r);
}

Acc acc_merge(Acc a, Acc b) {
#ifdef ACC_DOUBLES
    if (!acc_exact) return accd_merge(a, b);
#endif
    if (acc_selects()) {
        if (acc_indexes() && b.x.z == ACC_NONE) return a;
        if (acc_indexes() && a.x.z == ACC_NONE) return b;
        uvec2 ka = acc_key(a.x.xy), kb = acc_key(b.x.xy);
        bool take_b = acc_largest() ? acc_key_less(ka, kb) : acc_key_less(kb, ka);
        return take_b || (acc_indexes() && ka == kb && b.x.z < a.x.z) ? b : a;
    }
    if (acc_fixed()) return Acc(fixed_merge(a.x, b.x), a.y);
    if (acc_floats()) {
        if (ACC_FUNCTION == RED_MULTIPLY) return Acc(product_merge(a.x, b.x), a.y);
        if (ACC_FUNCTION == RED_LOG_SUM_EXP) return Acc(lse_merge(a.x, b.x), a.y);
        return sums_merge(a, b);
    }
    return Acc(uvec4(ACC_FUNCTION == RED_MULTIPLY ? mul64(a.x.xy, b.x.xy) : add64(a.x.xy, b.x.xy), 0u, 0u), a.y);
}

uvec2 acc_result(Acc a, uint count) {
    if (acc_selects()) return ACC_FUNCTION == RED_ARGMAX || ACC_FUNCTION == RED_ARGMIN ? uvec2(a.x.z, 0u) : a.x.xy;
    if (acc_floats()) {
        if (ACC_FUNCTION == RED_MULTIPLY) return product_result(a.x);
        if (ACC_FUNCTION == RED_LOG_SUM_EXP) return lse_result(a.x);
        if (acc_fixed()) return sums_result(fixed_sums(a.x), count);
        return sums_result(a, count);
    }
    return a.x.xy;
}

#endif
