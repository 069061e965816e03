/* tl_cpu.h: the one header every generated CPU kernel includes (`#include "cpu/tl_cpu.h"`,
 * compiled with -I tilelang/include).
 *
 * Why it exists: the CPU backend is the numerical reference for every kernel, so low-precision
 * conversions here must agree bit for bit with torch's own CPU conversions, and integer
 * helpers must follow Python semantics (the DSL's `//` and `%`). Kernels are compiled without
 * -ffast-math, so NaN, inf, signed zero and denormals behave as IEEE says.
 *
 * Types:
 *   tl_half     _Float16 (gcc >= 12 / clang on x86-64 and aarch64); arithmetic is native C.
 *   tl_bf16     struct { uint16_t bits; }: a struct so that accidental integer arithmetic on
 *               a bf16 is a compile error; convert with tl_bf16_to_f32 / tl_f32_to_bf16.
 *               Same size and alignment as torch.bfloat16 storage.
 *   tl_fp8e4m3  uint8_t bits of torch.float8_e4m3fn (bias 7, no inf, NaN = S.1111.111).
 *   tl_fp8e5m2  uint8_t bits of torch.float8_e5m2 (bias 15, IEEE-like inf/NaN).
 *   tl_fp8e8m0  uint8_t bits of torch.float8_e8m0fnu (2^(e - 127), 0xFF NaN; tl_fp8e8m0.h).
 *
 * What torch (checked against 2.13, CPU) and CUDA do, and so what we do:
 *   f32 -> bf16/f16/fp8   round to nearest, ties to even.
 *   f32 -> e4m3fn         |x| > 448, including +-inf, SATURATES to +-448 (0x7E | sign);
 *                         NaN -> 0x7F | sign (torch and CUDA alike).
 *   f32 -> e5m2           |x| > 57344, including +-inf, SATURATES to +-57344 (0x7B | sign), as
 *                         CUDA's conversions (.satfinite) and so the public TileLang on a GPU;
 *                         torch's cast overflows to +-inf from 61440 instead, which T.cast(...,
 *                         sat=False) gives (tl_math.h). NaN -> 0x7F | sign.
 *   f32 -> bf16 NaN       torch's vectorised path gives 0xFFFF; we return a quiet NaN that
 *                         keeps the sign and top payload bits (any NaN is accepted as equal).
 *   f64 -> bf16/f16/fp8   torch rounds TWICE, f64 -> f32 -> target (not directly), and so do
 *                         the tl_f64_to_* helpers; a plain C cast (_Float16)d would round once
 *                         and differ on near-ties, hence tl_f64_to_f16.
 *   f16 -> bf16/fp8       through f32, which is exact, so one rounding.
 */
#ifndef TL_CPU_H_
#define TL_CPU_H_

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef _Float16 tl_half;
typedef struct { uint16_t bits; } tl_bf16;
typedef uint8_t tl_fp8e4m3;
typedef uint8_t tl_fp8e5m2;

_Static_assert(sizeof(tl_half) == 2, "tl_half must be 2 bytes to alias torch.float16 storage");
_Static_assert(sizeof(tl_bf16) == 2, "tl_bf16 must be 2 bytes to alias torch.bfloat16 storage");

#define TL_INLINE static inline __attribute__((always_inline))

/* ---- bit casts (memcpy: the only aliasing-safe pun in C; compiles to a register move) ---- */
TL_INLINE uint32_t tl_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
TL_INLINE float tl_f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
/* T.reinterpret / tirx.reinterpret: the bits of X (a FROM) read as a TO of the same size. */
#define TL_BITCAST(FROM, TO, X) (((union { FROM a; TO b; }){ .a = (X) }).b)
TL_INLINE uint16_t tl_f16_bits(tl_half h) { uint16_t u; memcpy(&u, &h, 2); return u; }
TL_INLINE tl_half tl_f16_from_bits(uint16_t u) { tl_half h; memcpy(&h, &u, 2); return h; }
TL_INLINE tl_bf16 tl_bf16_from_bits(uint16_t u) { tl_bf16 b = {u}; return b; }

/* ---- bfloat16 ---- */
TL_INLINE float tl_bf16_to_f32(tl_bf16 x) { return tl_f32_from_bits((uint32_t)x.bits << 16); }
TL_INLINE double tl_bf16_to_f64(tl_bf16 x) { return (double)tl_bf16_to_f32(x); }

TL_INLINE tl_bf16 tl_f32_to_bf16(float f) {
    uint32_t u = tl_f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)          /* NaN: keep sign + payload, force quiet */
        return tl_bf16_from_bits((uint16_t)((u >> 16) | 0x0040u));
    u += 0x7FFFu + ((u >> 16) & 1u);               /* round to nearest, ties to even */
    return tl_bf16_from_bits((uint16_t)(u >> 16));
}
TL_INLINE tl_bf16 tl_f64_to_bf16(double d) { return tl_f32_to_bf16((float)d); }
TL_INLINE tl_bf16 tl_f16_to_bf16(tl_half h) { return tl_f32_to_bf16((float)h); }
TL_INLINE tl_half tl_bf16_to_f16(tl_bf16 x) { return (tl_half)tl_bf16_to_f32(x); }

/* ---- float16: the C cast is correct from f32; from f64 torch goes through f32 ---- */
TL_INLINE tl_half tl_f32_to_f16(float f) { return (tl_half)f; }
TL_INLINE tl_half tl_f64_to_f16(double d) { return (tl_half)(float)d; }
TL_INLINE float tl_f16_to_f32(tl_half h) { return (float)h; }

/* ---- fp8: one generic encoder, specialised by constant arguments ----
 * man: mantissa bits, bias: exponent bias, sat: bits of the largest finite value (used for
 * e4m3fn saturation), of: bits returned on overflow, nan: bits of NaN, over: the f32 bit
 * pattern above which |x| overflows (already accounting for rounding). */
TL_INLINE uint8_t tl__f32_to_fp8(float f, int man, int bias, uint32_t over, uint8_t of,
                                 uint8_t nan) {
    uint32_t u = tl_f32_bits(f);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint8_t)(sign | nan);
    if (a > over) return (uint8_t)(sign | of);
    int shift = 23 - man;
    uint32_t min_normal = (uint32_t)(127 - bias + 1) << 23;
    if (a >= min_normal) {                          /* normal: rebias, round mantissa RNE */
        a -= (uint32_t)(127 - bias) << 23;
        a += ((1u << (shift - 1)) - 1u) + ((a >> shift) & 1u);
        return (uint8_t)(sign | (a >> shift));
    }
    /* subnormal (or zero): result = round(|x| * 2^(bias - 1 + man)) in [0, 2^man] */
    int e = (int)(a >> 23);
    if (e == 0) return sign;                        /* f32 zero/denormal: far below fp8 */
    uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    int rshift = (127 + 23) - (bias - 1 + man) - e;  /* >= shift + 1 here */
    if (rshift >= 32) return sign;
    uint32_t q = m >> rshift, rem = m & ((1u << rshift) - 1u), half = 1u << (rshift - 1);
    q += (rem > half) || (rem == half && (q & 1u));
    return (uint8_t)(sign | q);                     /* q == 2^man carries into exponent 1 */
}

TL_INLINE float tl__fp8_to_f32(uint8_t v, int man, int bias) {
    uint32_t sign = (uint32_t)(v & 0x80u) << 24;
    uint32_t exp = (uint32_t)(v & 0x7Fu) >> man, mant = v & ((1u << man) - 1u);
    if (exp == 0) {                                 /* subnormal: mant * 2^(1 - bias - man) */
        float r = (float)mant * tl_f32_from_bits((uint32_t)(127 + 1 - bias - man) << 23);
        return sign ? -r : r;
    }
    return tl_f32_from_bits(sign | ((exp + 127u - (uint32_t)bias) << 23) | (mant << (23 - man)));
}

/* e4m3fn: 448 = 0x43E00000; above it torch saturates to 0x7E, NaN is 0x7F. */
TL_INLINE tl_fp8e4m3 tl_f32_to_fp8e4m3(float f) {
    return tl__f32_to_fp8(f, 3, 7, 0x43E00000u, 0x7E, 0x7F);
}
TL_INLINE float tl_fp8e4m3_to_f32(tl_fp8e4m3 v) {
    if ((v & 0x7Fu) == 0x7Fu) return tl_f32_from_bits(((uint32_t)(v & 0x80u) << 24) | 0x7FC00000u);
    return tl__fp8_to_f32(v, 3, 7);
}
/* e5m2: past the largest finite value 57344 = 0x47600000 (inf included) -> +-57344. */
TL_INLINE tl_fp8e5m2 tl_f32_to_fp8e5m2(float f) {
    return tl__f32_to_fp8(f, 2, 15, 0x47600000u, 0x7B, 0x7F);
}
TL_INLINE float tl_fp8e5m2_to_f32(tl_fp8e5m2 v) {
    if ((v & 0x7Cu) == 0x7Cu) {                     /* exponent all ones: inf or NaN */
        uint32_t s = (uint32_t)(v & 0x80u) << 24;
        return tl_f32_from_bits(s | ((v & 3u) ? 0x7FC00000u : 0x7F800000u));
    }
    return tl__fp8_to_f32(v, 2, 15);
}
TL_INLINE tl_fp8e4m3 tl_f64_to_fp8e4m3(double d) { return tl_f32_to_fp8e4m3((float)d); }
TL_INLINE tl_fp8e5m2 tl_f64_to_fp8e5m2(double d) { return tl_f32_to_fp8e5m2((float)d); }
TL_INLINE tl_fp8e4m3 tl_f16_to_fp8e4m3(tl_half h) { return tl_f32_to_fp8e4m3((float)h); }
TL_INLINE tl_fp8e5m2 tl_f16_to_fp8e5m2(tl_half h) { return tl_f32_to_fp8e5m2((float)h); }
TL_INLINE double tl_fp8e4m3_to_f64(tl_fp8e4m3 v) { return (double)tl_fp8e4m3_to_f32(v); }
TL_INLINE double tl_fp8e5m2_to_f64(tl_fp8e5m2 v) { return (double)tl_fp8e5m2_to_f32(v); }

#include "tl_fp4.h"  /* float4_e2m1fn: conversions and packed nibble access */
#include "tl_fp8e8m0.h"  /* float8_e8m0fnu: power-of-two scales, rounded up as CUDA does */
#include "tl_math.h"  /* T.popcount / T.clz / T.clamp / T.ieee_* / fp8 casts with sat=False */
/* Every fp8 value is exact in f16, so these round once. */
TL_INLINE tl_half tl_fp8e4m3_to_f16(tl_fp8e4m3 v) { return (tl_half)tl_fp8e4m3_to_f32(v); }
TL_INLINE tl_half tl_fp8e5m2_to_f16(tl_fp8e5m2 v) { return (tl_half)tl_fp8e5m2_to_f32(v); }

/* ---- tfloat32: float32 storage whose low 13 mantissa bits are zero ----
 * f32 -> tf32 rounds to nearest, ties away from zero, as CUDA's cvt.rna.tf32.f32: add half a
 * tf32 ulp to the magnitude bits and truncate (the carry may reach the exponent, and past the
 * largest tf32 gives inf). inf passes through; NaN stays a (quiet) NaN. */
TL_INLINE float tl_f32_to_tf32(float f) {
    uint32_t u = tl_f32_bits(f);
    if ((u & 0x7F800000u) == 0x7F800000u)
        return tl_f32_from_bits((u & 0x007FFFFFu) ? ((u | 0x00400000u) & 0xFFFFE000u) : u);
    return tl_f32_from_bits((u + 0x1000u) & 0xFFFFE000u);
}
/* Loads round too: a raw copy (or the caller's float32 tensor) may hold any float bits. */
TL_INLINE float tl_tf32_to_f32(float x) { return tl_f32_to_tf32(x); }

/* ---- math ----
 * tl_max/tl_min on floats follow fmax/fmin (a NaN operand is ignored), as CUDA's max()/min()
 * do, so CPU and GPU kernels agree; integer versions are plain comparisons. */
TL_INLINE float tl_max_f32(float a, float b) { return fmaxf(a, b); }
TL_INLINE float tl_min_f32(float a, float b) { return fminf(a, b); }
TL_INLINE double tl_max_f64(double a, double b) { return fmax(a, b); }
TL_INLINE double tl_min_f64(double a, double b) { return fmin(a, b); }
TL_INLINE tl_half tl_max_f16(tl_half a, tl_half b) { return (tl_half)fmaxf((float)a, (float)b); }
TL_INLINE tl_half tl_min_f16(tl_half a, tl_half b) { return (tl_half)fminf((float)a, (float)b); }
#define TL__INT_MINMAX(T, S) \
    TL_INLINE T tl_max_##S(T a, T b) { return a > b ? a : b; } \
    TL_INLINE T tl_min_##S(T a, T b) { return a < b ? a : b; }
TL__INT_MINMAX(int32_t, i32)
TL__INT_MINMAX(int64_t, i64)
TL__INT_MINMAX(uint32_t, u32)
TL__INT_MINMAX(uint64_t, u64)
TL__INT_MINMAX(long long, ll)
TL__INT_MINMAX(unsigned long long, ull)

/* Type-generic forms for generated code; dispatch on the usual-arithmetic-converted type.
 * (int8/int16 promote to int; int64_t is `long` on LP64, `long long` listed separately.) */
#define TL__GENERIC2(NAME, a, b) _Generic((a) + (b), \
    float: NAME##_f32, double: NAME##_f64, _Float16: NAME##_f16, \
    int: NAME##_i32, unsigned int: NAME##_u32, long: NAME##_i64, unsigned long: NAME##_u64, \
    long long: NAME##_ll, unsigned long long: NAME##_ull)(a, b)
#define tl_max(a, b) TL__GENERIC2(tl_max, a, b)
#define tl_min(a, b) TL__GENERIC2(tl_min, a, b)

TL_INLINE float tl_exp2f(float x) { return exp2f(x); }
TL_INLINE double tl_exp2(double x) { return exp2(x); }
TL_INLINE float tl_rsqrtf(float x) { return 1.0f / sqrtf(x); }
TL_INLINE double tl_rsqrt(double x) { return 1.0 / sqrt(x); }
/* Sigmoid without overflow: exp is only taken of -|x|, so large |x| gives 0 or 1 (never
 * inf/inf = NaN) and tiny results keep their relative accuracy instead of flushing to 0. */
TL_INLINE float tl_sigmoidf(float x) {
    float e = expf(-fabsf(x));
    return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}
TL_INLINE double tl_sigmoid(double x) {
    double e = exp(-fabs(x));
    return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

/* ---- integer division with Python semantics (quotient rounds toward -inf, remainder
 * takes the divisor's sign). b == 0 and MIN / -1 are undefined, as for C's `/`. ---- */
#define TL__FLOORDIV(T, S) \
    TL_INLINE T tl_floordiv_##S(T a, T b) { \
        T q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; } \
    TL_INLINE T tl_floormod_##S(T a, T b) { \
        T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; } \
    TL_INLINE T tl_ceildiv_##S(T a, T b) { \
        T q = a / b; return (a % b != 0 && ((a < 0) == (b < 0))) ? q + 1 : q; }
TL__FLOORDIV(int32_t, i32)
TL__FLOORDIV(int64_t, i64)
/* an 8/16-bit `<<` promoted to int, as C computes it; a shift by 32 or more is 0 (as on CUDA) */
TL_INLINE int32_t tl_shl_i32(uint32_t a, uint32_t b) { return b < 32u ? (int32_t)(a << b) : 0; }
#define tl_ceildiv(a, b) _Generic((a) + (b), int: tl_ceildiv_i32, default: tl_ceildiv_i64)(a, b)
#define tl_floordiv(a, b) _Generic((a) + (b), int: tl_floordiv_i32, default: tl_floordiv_i64)(a, b)
#define tl_floormod(a, b) _Generic((a) + (b), int: tl_floormod_i32, default: tl_floormod_i64)(a, b)

/* ---- atomics for OpenMP-parallel blocks ----
 * Relaxed order, like CUDA's atomicAdd: they make concurrent read-modify-writes of one
 * element safe, they do not order other memory (barriers do that). All return the old value.
 * Floating point uses compare-and-swap on the value's own type (gcc's generic __atomic
 * builtins compare bytes, so NaN and -0.0 cannot make the loop spin forever). */
#define TL__ATOMIC_INT(T, S) \
    TL_INLINE T tl_atomic_add_##S(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); } \
    TL_INLINE T tl_atomic_or_##S(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
TL__ATOMIC_INT(int32_t, i32)
TL__ATOMIC_INT(int64_t, i64)
TL__ATOMIC_INT(uint32_t, u32)
TL__ATOMIC_INT(uint64_t, u64)

/* CAS loop: old is re-read by a failed exchange; `nv` computed from it by expression OP. */
#define TL__ATOMIC_CAS(T, NAME, OP) \
    TL_INLINE T NAME(T *p, T v) { \
        T old, nv; \
        __atomic_load(p, &old, __ATOMIC_RELAXED); \
        do { nv = (OP); if (memcmp(&nv, &old, sizeof(T)) == 0) break; } \
        while (!__atomic_compare_exchange(p, &old, &nv, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)); \
        return old; }
TL__ATOMIC_CAS(float, tl_atomic_add_f32, old + v)
TL__ATOMIC_CAS(double, tl_atomic_add_f64, old + v)
TL__ATOMIC_CAS(tl_half, tl_atomic_add_f16, (tl_half)((float)old + (float)v))
TL__ATOMIC_CAS(tl_bf16, tl_atomic_add_bf16, tl_f32_to_bf16(tl_bf16_to_f32(old) + tl_bf16_to_f32(v)))
TL__ATOMIC_CAS(float, tl_atomic_max_f32, fmaxf(old, v))
TL__ATOMIC_CAS(float, tl_atomic_min_f32, fminf(old, v))
TL__ATOMIC_CAS(double, tl_atomic_max_f64, fmax(old, v))
TL__ATOMIC_CAS(double, tl_atomic_min_f64, fmin(old, v))
TL__ATOMIC_CAS(tl_half, tl_atomic_max_f16, tl_max_f16(old, v))
TL__ATOMIC_CAS(tl_half, tl_atomic_min_f16, tl_min_f16(old, v))
TL__ATOMIC_CAS(tl_bf16, tl_atomic_max_bf16,
               tl_f32_to_bf16(fmaxf(tl_bf16_to_f32(old), tl_bf16_to_f32(v))))
TL__ATOMIC_CAS(tl_bf16, tl_atomic_min_bf16,
               tl_f32_to_bf16(fminf(tl_bf16_to_f32(old), tl_bf16_to_f32(v))))
TL__ATOMIC_CAS(int32_t, tl_atomic_max_i32, old > v ? old : v)
TL__ATOMIC_CAS(int32_t, tl_atomic_min_i32, old < v ? old : v)
TL__ATOMIC_CAS(int64_t, tl_atomic_max_i64, old > v ? old : v)
TL__ATOMIC_CAS(int64_t, tl_atomic_min_i64, old < v ? old : v)


/* ---- thread-level helpers: T.dp4a here, T.rng_* in tl_random.h ----
 * tl_dp4a: c[0] += a[0]*b[0] + ... + a[3]*b[3] on int8 values, int32 accumulation. */
TL_INLINE void tl_dp4a(const int8_t *a, const int8_t *b, int32_t *c) {
    int32_t acc = c[0];
    for (int i = 0; i < 4; ++i) acc += (int32_t)a[i] * (int32_t)b[i];
    c[0] = acc;
}

#include "tl_random.h"  /* T.rng_*: Philox4x32-10, XORWOW and MRG32k3a states */

#include "tl_hopper.h"  /* the raw Hopper names: T.tma_load, wgmma descriptors, T.ptx_wgmma_* */

#endif /* TL_CPU_H_ */
