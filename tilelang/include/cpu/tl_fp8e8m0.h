/* tl_fp8e8m0.h: float8_e8m0fnu (the OCP MX scale format) for CPU kernels; included by tl_cpu.h.
 *
 * A byte e is the power of two 2^(e - 127): no sign, no mantissa, no zero, no inf; 0xFF is
 * NaN. Codes 0..254 are 2^-127 .. 2^127 (code 0, 2^-127, is a float32 denormal: exact).
 * Stores convert as CUDA's __nv_cvt_{float,double}_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf),
 * the public TileLang's conversion (tl_templates/cuda/cuda_fp8.h), so CPU and GPU agree:
 *   the sign is dropped (|x| is converted);
 *   rounding is UP to the next power of two: 2^k -> k + 127, (2^k, 2^(k+1)] -> k + 128;
 *   0 and every |x| <= 2^-127 -> code 0 (2^-127);
 *   |x| > 2^127 and +-inf SATURATE to 254 (2^127); NaN -> 255.
 * f64 sources round once, from the double (CUDA folds the bits below float's mantissa into a
 * sticky bit), so 1 + 2^-40 as a double gives 2, where a float would first round it to 1.
 * torch's own cast differs: it rounds to the nearest power (1.4 -> 1), and turns inf and
 * values past 2^127 into NaN; its e8m0 -> float/bf16/f64 conversions are the same as ours. */
#ifndef TL_FP8E8M0_H_
#define TL_FP8E8M0_H_

typedef uint8_t tl_fp8e8m0;

TL_INLINE tl_fp8e8m0 tl_f32_to_fp8e8m0(float f) {
    uint32_t a = tl_f32_bits(f) & 0x7FFFFFFFu;
    if (a >= 0x7F800000u) return a == 0x7F800000u ? 0xFEu : 0xFFu;   /* inf saturates, NaN */
    uint32_t e = a >> 23, m = a & 0x7FFFFFu;
    if (e == 0) return m > 0x400000u ? 1u : 0u;                       /* denormal: 2^-127 is m = 2^22 */
    e += m != 0;                                                      /* round up */
    return (tl_fp8e8m0)(e > 0xFEu ? 0xFEu : e);
}

TL_INLINE tl_fp8e8m0 tl_f64_to_fp8e8m0(double d) {
    uint64_t a;
    memcpy(&a, &d, 8);
    a &= 0x7FFFFFFFFFFFFFFFull;
    if (a >= 0x7FF0000000000000ull) return a == 0x7FF0000000000000ull ? 0xFEu : 0xFFu;
    int64_t e = (int64_t)(a >> 52);
    if (e == 0) return 0u;                                            /* f64 denormal or zero: < 2^-1022 */
    e = e - 1023 + 127 + ((a & 0xFFFFFFFFFFFFFull) != 0);             /* ceil(log2 |d|) + 127 */
    return (tl_fp8e8m0)(e < 0 ? 0 : e > 0xFE ? 0xFE : e);
}

TL_INLINE float tl_fp8e8m0_to_f32(tl_fp8e8m0 v) {
    if (v == 0xFFu) return tl_f32_from_bits(0x7FC00000u);
    return tl_f32_from_bits(v ? (uint32_t)v << 23 : 0x00400000u);
}
TL_INLINE double tl_fp8e8m0_to_f64(tl_fp8e8m0 v) { return (double)tl_fp8e8m0_to_f32(v); }

#endif  /* TL_FP8E8M0_H_ */
