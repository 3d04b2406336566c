// Float pairs: the real number hi + lo held in two floats (|lo| at most about half an ulp of
// hi), and the error-free transformations that make them (Knuth's TwoSum; Dekker's product with
// Veltkamp's split). The float reductions (reduce_acc.glsl) accumulate in them and round once.
//
// Every operation is `precise` (SPIR-V NoContraction): the compiler may neither reassociate nor
// contract a * b + c into an FMA, on which each transformation's exactness depends. Products use
// the split, not fma(): lavapipe's fma is not fused.
#ifndef DMLGPU_COMPENSATED_GLSL
#define DMLGPU_COMPENSATED_GLSL

// ln 2 in three floats (16 + 24 + 24 bits: k * LN2_HI is exact for |k| < 256) and 1/3, 1/6 in two.
#define LN2_HI uintBitsToFloat(0x3F317200u)
#define LN2_MID uintBitsToFloat(0x35BFBE8Eu)
#define LN2_LO uintBitsToFloat(0x29779ABDu)
#define THIRD vec2(uintBitsToFloat(0x3EAAAAABu), uintBitsToFloat(0xB22AAAABu))
#define SIXTH vec2(uintBitsToFloat(0x3E2AAAABu), uintBitsToFloat(0xB1AAAAABu))
// 1/5 and 1/7 (pair_log) in two floats each.
#define FIFTH vec2(uintBitsToFloat(0x3E4CCCCDu), uintBitsToFloat(0xB14CCCCDu))
#define SEVENTH vec2(uintBitsToFloat(0x3E124925u), uintBitsToFloat(0xB1DB6DB7u))

// a + b = s + e exactly (any order of magnitudes).
vec2 two_sum(float a, float b) {
    precise float s = a + b;
    precise float v = s - a;
    precise float e = (a - (s - v)) + (b - v);
    return vec2(s, e);
}

// a = hi + lo, each half of a's bits (|a| < 2^115).
vec2 split(float a) {
    precise float t = 4097.0 * a;
    precise float hi = t - (t - a);
    precise float lo = a - hi;
    return vec2(hi, lo);
}

// a * b = p + e exactly (barring underflow of e).
vec2 two_prod(float a, float b) {
    precise float p = a * b;
    vec2 x = split(a), y = split(b);
    precise float e = ((x.x * y.x - p) + x.x * y.y + x.y * y.x) + x.y * y.y;
    return vec2(p, e);
}

// x * x = p + e exactly: one split.
vec2 two_square(float a) {
    precise float p = a * a;
    vec2 x = split(a);
    precise float e = ((x.x * x.x - p) + 2.0 * (x.x * x.y)) + x.y * x.y;
    return vec2(p, e);
}

// Float triples (s, c1, c2): the real s + c1 + c2, c1 collecting the rounding errors of the
// additions to s exactly and c2 those of c1's, so that a sum whose partial sums cancel keeps what
// they absorbed (the float sums' accumulators: reduce_acc.glsl).
vec3 triple_add(vec3 a, float x) {
    vec2 s = two_sum(a.x, x);
    vec2 c = two_sum(a.y, s.y);
    precise float c2 = a.z + c.y;
    return vec3(s.x, c.x, c2);
}

// triple_add on four triples at once (s, c1, c2 hold each one's floats): the same operations.
void triple_add4(inout vec4 s, inout vec4 c1, inout vec4 c2, vec4 x) {
    precise vec4 t = s + x;
    precise vec4 v = t - s;
    precise vec4 e = (s - (t - v)) + (x - v);
    precise vec4 u = c1 + e;
    precise vec4 w = u - c1;
    precise vec4 f = (c1 - (u - w)) + (e - w);
    precise vec4 z = c2 + f;
    s = t;
    c1 = u;
    c2 = z;
}

// two_square on four floats: x * x = p + e.
void two_square4(vec4 x, out vec4 p, out vec4 e) {
    precise vec4 t = 4097.0 * x;
    precise vec4 hi = t - (t - x);
    precise vec4 lo = x - hi;
    precise vec4 pp = x * x;
    precise vec4 ee = ((hi * hi - pp) + 2.0 * (hi * lo)) + lo * lo;
    p = pp;
    e = ee;
}

vec3 triple_merge(vec3 a, vec3 b) {
    vec2 s = two_sum(a.x, b.x);
    vec2 c = two_sum(a.y, b.y);
    vec2 d = two_sum(c.x, s.y);
    precise float c2 = (a.z + b.z) + (c.y + d.y);
    return vec3(s.x, d.x, c2);
}

// The float nearest a.x + a.y on the side of it whose last bit is odd where the sum is not a
// float (rounding to odd), else the sum: it keeps, in its last bit, that something lay below.
float sum_to_odd(float a, float b) {
    vec2 u = two_sum(a, b);
    uint bits = floatBitsToUint(u.x);
    if (u.y == 0.0 || (bits & 1u) != 0u) return u.x;
    // (the neighbour towards u.y: a larger magnitude where the signs agree; never a zero, as
    // |u.y| is at most half an ulp of u.x)
    return uintBitsToFloat((u.y > 0.0) == (u.x > 0.0) ? bits + 1u : bits - 1u);
}

// A triple as a pair whose hi is the float nearest to the triple's value (ties to even), and lo
// the rest rounded to odd (a zero keeps its sign). Rounding the rest to nearest could make a tie
// of a value just beside one: 1 + 2^-24 + 2^-60 gave 1, not 1 + 2^-23; rounded to odd, the rest
// is never a tie point of hi's precision (those have even last bits so far below), so the sum's
// one rounding to nearest falls on the side the exact value does.
vec2 triple_pair(vec3 a) {
    if (a.y == 0.0 && a.z == 0.0) return vec2(a.x, 0.0);
    vec2 t = two_sum(a.x, a.y);
    return two_sum(t.x, sum_to_odd(t.y, a.z));
}

vec2 pair_add(vec2 a, vec2 b) {
    vec2 s = two_sum(a.x, b.x);
    precise float lo = s.y + (a.y + b.y);
    return two_sum(s.x, lo);
}

vec2 pair_mul(vec2 a, vec2 b) {
    vec2 p = two_prod(a.x, b.x);
    precise float lo = p.y + (a.x * b.y + a.y * b.x);
    return two_sum(p.x, lo);
}

// a / b: a first quotient, corrected by the exact remainder's quotient (b.x != 0).
vec2 pair_div(vec2 a, vec2 b) {
    precise float q = a.x / b.x;
    vec2 p = two_prod(q, b.x);
    precise float r = (((a.x - p.x) - p.y) + a.y) - q * b.y;
    precise float q2 = r / b.x;
    return two_sum(q, q2);
}

// sqrt(a) for a > 0: a first root, corrected by Newton's step on the exact residual.
vec2 pair_sqrt(vec2 a) {
    precise float r = sqrt(a.x);
    vec2 p = two_square(r);
    precise float e = ((a.x - p.x) - p.y) + a.y;
    precise float r2 = e / (2.0 * r);
    return two_sum(r, r2);
}

// 2^k as a float, for k in [-126, 127].
float pow2(int k) { return uintBitsToFloat(uint(k + 127) << 23); }

// a * 2^k, exact where the results stay normal; k in [-252, 254].
vec2 pair_scale(vec2 a, int k) {
    int k1 = clamp(k, -126, 127), k2 = k - k1;
    return a * pow2(k1) * pow2(k2);
}

// ln 2 / 32 in three floats (9 + 24 + 24 bits: k * LN2_32_HI is exact for |k| < 2^15), and
// 2^(j/32), j = 0 .. 31, as pairs (the float nearest, then the float nearest the rest).
#define LN2_32_HI uintBitsToFloat(0x3CB18000u)
#define LN2_32_MID uintBitsToFloat(0xB6DE8083u)
#define LN2_32_LO uintBitsToFloat(0x2967BCD6u)
const uvec2 EXP2_THIRTYSECONDS[32] = uvec2[32](
    uvec2(0x3F800000u, 0x00000000u), uvec2(0x3F82CD87u, 0xB34EA7A9u), uvec2(0x3F85AAC3u, 0x334F9891u), uvec2(0x3F88980Fu, 0xB37EDA4Bu),
    uvec2(0x3F8B95C2u, 0xB260ABA1u), uvec2(0x3F8EA43Au, 0xB3697465u), uvec2(0x3F91C3D3u, 0x33675624u), uvec2(0x3F94F4F0u, 0xB32E0212u),
    uvec2(0x3F9837F0u, 0x33231B71u), uvec2(0x3F9B8D3Au, 0xB30C5563u), uvec2(0x3F9EF532u, 0x33412342u), uvec2(0x3FA27043u, 0x30C3125Au),
    uvec2(0x3FA5FED7u, 0xB32C9D5Eu), uvec2(0x3FA9A15Bu, 0xB3162B08u), uvec2(0x3FAD583Fu, 0xB22DEAF6u), uvec2(0x3FB123F6u, 0xB37C5AA8u),
    uvec2(0x3FB504F3u, 0x32CFE77Au), uvec2(0x3FB8FBAFu, 0x330EC5F7u), uvec2(0x3FBD08A4u, 0xB3414FE8u), uvec2(0x3FC12C4Du, 0xB2D6663Eu),
    uvec2(0x3FC5672Au, 0x320AA837u), uvec2(0x3FC9B9BEu, 0xB37323A2u), uvec2(0x3FCE248Cu, 0x3228FC24u), uvec2(0x3FD2A81Eu, 0xB35C1DAAu),
    uvec2(0x3FD744FDu, 0xB2D4A58Au), uvec2(0x3FDBFBB8u, 0xB3504A1Cu), uvec2(0x3FE0CCDFu, 0xB21EAB59u), uvec2(0x3FE5B907u, 0xB2441BE6u),
    uvec2(0x3FEAC0C7u, 0xB24116DEu), uvec2(0x3FEFE4BAu, 0xB348464Au), uvec2(0x3FF5257Du, 0x32292436u), uvec2(0x3FFA83B3u, 0xB2923758u));

// exp(d) for d = d.x + d.y <= 0 (0 below -104, where it is under the smallest float):
// d = (32 m + j) ln 2 / 32 + r (|r| <= ln2 / 64, r a pair), exp(d) = 2^m 2^(j/32) exp(r) with
// exp(r) = 1 + r (1 + r (1/2 + r T(r))) by Horner's rule in pairs and T (from 1/6) in floats:
// T's rounding reaches the result times r^3 (at most about 2^-46 of it), so the terms of a
// LOG_SUM_EXP hold about 2^-46 of their values, as its result needs where it cancels its
// largest element.
// (With r up to ln2 / 2 and floats from r^4 / 24, about 2^-35: LOG_SUM_EXP of [-0.586, -4.17,
// -0.849], -3.6e-5, came out 3 units in the last place off.)
vec2 pair_exp(vec2 d) {
    if (d.x < -104.0) return vec2(0.0);
    precise float k = roundEven(d.x * 46.1662407);  // 32 / ln 2
    precise float r1 = d.x - k * LN2_32_HI;  // exact: both within a factor 2 of each other (or k = 0)
    vec2 m = two_prod(k, LN2_32_MID);
    vec2 r = two_sum(r1, -m.x);
    precise float r_lo = r.y + ((d.y - m.y) - k * LN2_32_LO);
    r = two_sum(r.x, r_lo);
    float x = r.x;
    precise float t = 1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0 + x * (1.0 / 720.0)));
    vec2 s = pair_add(vec2(0.5, 0.0), pair_mul(r, vec2(t, 0.0)));
    s = pair_add(vec2(1.0, 0.0), pair_mul(r, s));
    s = pair_add(vec2(1.0, 0.0), pair_mul(r, s));
    int n = int(k), j = n & 31;
    s = pair_mul(s, uintBitsToFloat(EXP2_THIRTYSECONDS[j]));
    return pair_scale(s, (n - j) / 32);
}

// k ln 2 as a pair.
vec2 ln2_times(float k) {
    vec2 mid = two_prod(k, LN2_MID);
    vec2 s = two_sum(k * LN2_HI, mid.x);
    precise float lo = s.y + (mid.y + k * LN2_LO);
    return two_sum(s.x, lo);
}

// log(a) + k ln 2 for a pair a > 0 (finite): a = 2^e f with f in [sqrt(1/2), sqrt(2)),
// log f = 2 atanh(z), z = (f - 1) / (f + 1) (|z| <= 0.172): 2z (1 + w (1/3 + w (1/5 + w (1/7 +
// w Q(w))))) with w = z^2, the leading terms in pairs, Q (from 1/9) in floats: its rounding
// reaches the result times w^4 (under 2^-47 of it; with Q from 1/5, about 2^-36).
vec2 pair_log(vec2 a, int k) {
    if ((floatBitsToUint(a.x) >> 23) == 0u) {  // subnormal: scale into the normal range
        a *= pow2(64);
        k -= 64;
    }
    int e = int(floatBitsToUint(a.x) >> 23) - 127;
    vec2 f = pair_scale(a, -e);
    if (f.x > 1.41421354) {
        f *= 0.5;
        e += 1;
    }
    precise float f1 = f.x - 1.0;  // exact (f.x in [0.7, 1.42])
    vec2 num = two_sum(f1, f.y);
    vec2 den = two_sum(f.x, 1.0);
    precise float den_lo = den.y + f.y;
    den = two_sum(den.x, den_lo);
    vec2 z = pair_div(num, den);
    vec2 w = pair_mul(z, z);
    float x = w.x;
    precise float q = 1.0 / 9.0 + x * (1.0 / 11.0 + x * (1.0 / 13.0 + x * (1.0 / 15.0 + x * (1.0 / 17.0
        + x * (1.0 / 19.0 + x * (1.0 / 21.0))))));
    vec2 p = pair_add(SEVENTH, vec2(x * q, 0.0));
    p = pair_add(FIFTH, pair_mul(w, p));
    p = pair_add(THIRD, pair_mul(w, p));
    vec2 s = pair_add(vec2(1.0, 0.0), pair_mul(w, p));
    vec2 l = pair_mul(z * 2.0, s);
    return pair_add(ln2_times(float(e + k)), l);
}

// The float32 nearest to a pair (one rounding: hi + lo).
float pair_round(vec2 a) {
    precise float r = a.x + a.y;
    return a.y == 0.0 ? a.x : r;  // keeps the sign of a zero hi
}

// FLOAT16 bits of the half nearest to a >= 0 (not NaN), ties to even; inf from 65520.
uint half_bits_rne(float a) {
    uint b = floatBitsToUint(a);
    if (b >= 0x477FF000u) return 0x7C00u;
    if (b < 0x38800000u) return uint(roundEven(a * 16777216.0));  // subnormal: a multiple of 2^-24
    return ((b + 0xFFFu + ((b >> 13) & 1u)) - 0x38000000u) >> 13;
}

float half_bits_value(uint h) { return unpackHalf2x16(h).x; }

// FLOAT16 bits of the half nearest to the pair a (one rounding). Rounding hi alone is right
// unless hi is exactly halfway between two halves (a float can be; |lo| is under an ulp of
// hi, so it moves a only off such a point): then lo's sign decides.
uint pair_to_half(vec2 a) {
    if (isnan(a.x)) return 0x7E00u | ((floatBitsToUint(a.x) >> 16) & 0x8000u);
    uint sign = (floatBitsToUint(a.x) >> 16) & 0x8000u;
    float m = abs(a.x), lo = sign != 0u ? -a.y : a.y;
    uint h = half_bits_rne(m);
    if (isinf(m) || lo == 0.0) return sign | h;
    if (h == 0x7C00u) return sign | (m == 65520.0 && lo < 0.0 ? 0x7BFFu : h);
    float value = half_bits_value(h);
    precise float d = m - value;  // exact
    if (d > 0.0 && lo > 0.0 && d == 0.5 * (half_bits_value(h + 1u) - value)) h += 1u;
    else if (d < 0.0 && lo < 0.0 && -d == 0.5 * (value - half_bits_value(h - 1u))) h -= 1u;
    return sign | h;
}

#endif
