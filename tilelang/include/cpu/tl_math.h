/* tl_math.h: the elementwise math of T.* that C has no single spelling for (part of tl_cpu.h).
 *
 *   tl_popc32/64, tl_clz32/64   T.popcount / T.clz; clz(0) is the width (as CUDA's __clz).
 *   tl_ffs32/64, tl_fns         T.__ffs (one-based, 0 for 0) / T.__fns (PTX fns.b32: the offset-th set bit
 *                               from base, up for offset > 0, down for < 0; 0xFFFFFFFF for none).
 *   tl_clamp_f32/f64            T.clamp on floats: a NaN operand gives NaN (fmin/fmax would drop it).
 *   tl_f32_to_fp8*_nosat        T.cast(x, fp8, sat=False): past the largest finite value e4m3fn
 *                               gives NaN and e5m2 gives +-inf (CUDA's __NV_NOSAT), where the
 *                               default conversion (tl_cpu.h) saturates e4m3fn.
 *   tl_ieee_*_f32/f64           T.ieee_add ... T.ieee_fdiv in a rounding direction rm (0 rn, 1 rz,
 *                               2 ru, 3 rd), run by the FPU in that mode, as CUDA's __fadd_ru ...
 *   tl_f32_to_f16_dir, tl_f32_to_bf16_dir, tl_f64_to_f32_dir
 *                               T.cast(x, d, round="rz" / "rp" / "rm") (mode 1 / 2 / 3), as CUDA's
 *                               __float2half_rz ... __double2float_rd, by bit arithmetic.
 *   tl_f32_to_fp8_dir           the same for float8_e4m3fn / float8_e5m2 (tl/fp8_dir.h, shared with the CUDA headers).
 */
#ifndef TL_MATH_H_
#define TL_MATH_H_

#include <fenv.h>

TL_INLINE int32_t tl_popc32(uint32_t x) { return __builtin_popcount(x); }
TL_INLINE int32_t tl_popc64(uint64_t x) { return __builtin_popcountll(x); }
TL_INLINE int32_t tl_clz32(uint32_t x) { return x ? __builtin_clz(x) : 32; }
TL_INLINE int32_t tl_clz64(uint64_t x) { return x ? __builtin_clzll(x) : 64; }
TL_INLINE int32_t tl_ffs32(uint32_t x) { return __builtin_ffs((int)x); }
TL_INLINE int32_t tl_ffs64(uint64_t x) { return __builtin_ffsll((long long)x); }
TL_INLINE uint32_t tl_fns(uint32_t mask, uint32_t base, int32_t offset) {
    if (base > 31) return 0xFFFFFFFFu;
    if (offset == 0) return ((mask >> base) & 1u) ? base : 0xFFFFFFFFu;
    int32_t step = offset > 0 ? 1 : -1;
    int32_t left = (offset > 0 ? offset : -offset) - 1;
    for (int32_t pos = (int32_t)base; pos >= 0 && pos < 32; pos += step) {
        if ((mask >> pos) & 1u) {
            if (left == 0) return (uint32_t)pos;
            --left;
        }
    }
    return 0xFFFFFFFFu;
}

TL_INLINE float tl_clamp_f32(float x, float lo, float hi) {
    if (x != x) return x;
    if (lo != lo) return lo;
    if (hi != hi) return hi;
    return fminf(fmaxf(x, lo), hi);
}
TL_INLINE double tl_clamp_f64(double x, double lo, double hi) {
    if (x != x) return x;
    if (lo != lo) return lo;
    if (hi != hi) return hi;
    return fmin(fmax(x, lo), hi);
}

/* e4m3fn: up to 464 (448 + half an ulp, the tie rounds to even 448) rounds to a finite value;
 * above it, inf included, the result is NaN. e5m2: 61440 = 0x47700000, the tie above 57344,
 * rounds (to even) to inf, and so does everything past it (torch's cast). */
TL_INLINE tl_fp8e4m3 tl_f32_to_fp8e4m3_nosat(float f) {
    return tl__f32_to_fp8(f, 3, 7, 0x43E80000u, 0x7F, 0x7F);
}
TL_INLINE tl_fp8e5m2 tl_f32_to_fp8e5m2_nosat(float f) {
    return tl__f32_to_fp8(f, 2, 15, 0x476FFFFFu, 0x7C, 0x7F);
}

/* C compilers assume round-to-nearest (no -frounding-math): the empty asm with a memory clobber
 * keeps the operation between the two fesetround calls, where the operands are reloaded. */
#define TL__FENCE(v) __asm__ volatile("" : "+m"(v) : : "memory")
static const int tl__fe_mode[4] = {FE_TONEAREST, FE_TOWARDZERO, FE_UPWARD, FE_DOWNWARD};

#define TL__IEEE2(NAME, T, EXPR) \
    TL_INLINE T NAME(T a, T b, int rm) { \
        int old = fegetround(); fesetround(tl__fe_mode[rm]); \
        TL__FENCE(a); TL__FENCE(b); \
        T r = (EXPR); TL__FENCE(r); \
        fesetround(old); return r; }
TL__IEEE2(tl_ieee_add_f32, float, a + b)
TL__IEEE2(tl_ieee_sub_f32, float, a - b)
TL__IEEE2(tl_ieee_mul_f32, float, a * b)
TL__IEEE2(tl_ieee_div_f32, float, a / b)
TL__IEEE2(tl_ieee_add_f64, double, a + b)
TL__IEEE2(tl_ieee_sub_f64, double, a - b)
TL__IEEE2(tl_ieee_mul_f64, double, a * b)
TL__IEEE2(tl_ieee_div_f64, double, a / b)
/* one-operand forms: b is unused */
TL__IEEE2(tl__ieee_rcp_f32, float, 1.0f / a)
TL__IEEE2(tl__ieee_sqrt_f32, float, sqrtf(a))
TL__IEEE2(tl__ieee_rcp_f64, double, 1.0 / a)
TL__IEEE2(tl__ieee_sqrt_f64, double, sqrt(a))
#undef TL__IEEE2
TL_INLINE float tl_ieee_rcp_f32(float a, int rm) { return tl__ieee_rcp_f32(a, 0.0f, rm); }
TL_INLINE float tl_ieee_sqrt_f32(float a, int rm) { return tl__ieee_sqrt_f32(a, 0.0f, rm); }
TL_INLINE double tl_ieee_rcp_f64(double a, int rm) { return tl__ieee_rcp_f64(a, 0.0, rm); }
TL_INLINE double tl_ieee_sqrt_f64(double a, int rm) { return tl__ieee_sqrt_f64(a, 0.0, rm); }

#define TL__IEEE_FMA(NAME, T, FN) \
    TL_INLINE T NAME(T a, T b, T c, int rm) { \
        int old = fegetround(); fesetround(tl__fe_mode[rm]); \
        TL__FENCE(a); TL__FENCE(b); TL__FENCE(c); \
        T r = FN(a, b, c); TL__FENCE(r); \
        fesetround(old); return r; }
TL__IEEE_FMA(tl_ieee_fma_f32, float, fmaf)
TL__IEEE_FMA(tl_ieee_fma_f64, double, fma)
#undef TL__IEEE_FMA

/* 1/sqrt(x) rounded once from double: within an ulp of CUDA's correctly rounded __frsqrt_rn,
 * equal but for inputs whose result lies within 2^-29 ulp of a tie. */
TL_INLINE float tl_ieee_rsqrt_f32(float a) { return (float)(1.0 / sqrt((double)a)); }

/* Directed rounding of a narrowing conversion. The nearest value r (the exact conversion the
 * C cast or tl_f32_to_bf16 makes) is the answer unless it lies past x on the side the mode
 * forbids; then the answer is r's neighbour one unit in the last place toward x. Both share
 * x's sign, so that neighbour is r's bit pattern with its magnitude one smaller (toward zero)
 * or one larger (away from zero): 65504 <-> inf, the smallest subnormal <-> 0 follow. A NaN
 * stays the nearest conversion's NaN. `back` is r's value, exact in x's type. */
TL_INLINE int tl__dir_step(double x, double back, int mode) {
    if (x != x || back == x) return 0;
    int up = back < x;          /* r is below x: the mode may want the next value up */
    if (mode == 1) return x > 0 ? (up ? 0 : -1) : (up ? -1 : 0);      /* toward zero */
    if (mode == 2) return up ? (x > 0 ? 1 : -1) : 0;                  /* toward +inf */
    if (mode == 3) return up ? 0 : (x > 0 ? -1 : 1);                  /* toward -inf */
    return 0;
}
TL_INLINE tl_half tl_f32_to_f16_dir(float x, int mode) {
    tl_half r = (tl_half)x;
    return tl_f16_from_bits((uint16_t)(tl_f16_bits(r) + tl__dir_step(x, (double)(float)r, mode)));
}
TL_INLINE tl_bf16 tl_f32_to_bf16_dir(float x, int mode) {
    tl_bf16 r = tl_f32_to_bf16(x);
    return tl_bf16_from_bits((uint16_t)(r.bits + tl__dir_step(x, (double)tl_bf16_to_f32(r), mode)));
}
TL_INLINE float tl_f64_to_f32_dir(double x, int mode) {
    float r = (float)x;
    return tl_f32_from_bits(tl_f32_bits(r) + (uint32_t)tl__dir_step(x, (double)r, mode));
}

#define TL_FP8_DIR_FN TL_INLINE
#include "tl/fp8_dir.h"  /* T.cast(x, fp8, round="rz" / "rp" / "rm"), shared with the CUDA headers */

#endif /* TL_MATH_H_ */
