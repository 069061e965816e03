/* tl_fp4.h: float4_e2m1fn (FP4 E2M1) for CPU kernels; included by tl_cpu.h.
 *
 * Storage: two values per byte, element k in byte k >> 1, the even element in the LOW
 * nibble (bits 3:0), as torch.float4_e2m1fn_x2 and CUDA's __nv_fp4x2 pack them.
 * Codes: bit 3 sign, bits 2:1 exponent (bias 1), bit 0 mantissa; magnitudes
 *   0 0.5 1 1.5 2 3 4 6 for codes 0..7 (code 1 is the only subnormal); no inf, no NaN.
 * f32 -> e2m1 (as CUDA's __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest), which
 * the public TileLang uses): round to nearest, ties to even; |x| > 6 and +-inf saturate
 * to +-6; NaN -> +6 (code 7); the sign survives rounding to zero (-0.1 -> -0, code 8).
 * torch has no conversion to or from this type (it only stores the bytes).
 */
#ifndef TL_FP4_H_
#define TL_FP4_H_

TL_INLINE uint8_t tl_f32_to_fp4e2m1(float f) {
    uint8_t sign = (uint8_t)((tl_f32_bits(f) >> 28) & 8u);
    float m = fabsf(f);
    if (m != m) return 7u;
    /* each midpoint rounds to the even code: `>` where the lower code is even, `>=` where odd */
    uint8_t c = (uint8_t)((m > 0.25f) + (m >= 0.75f) + (m > 1.25f) + (m >= 1.75f) + (m > 2.5f)
                          + (m >= 3.5f) + (m > 5.0f));
    return (uint8_t)(sign | c);
}
TL_INLINE float tl_fp4e2m1_to_f32(uint8_t c) {
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float m = mag[c & 7u];
    return (c & 8u) ? -m : m;
}
TL_INLINE uint8_t tl_f64_to_fp4e2m1(double d) { return tl_f32_to_fp4e2m1((float)d); }

/* ---- packed access: element k of a byte array ---- */
/* int4: a nibble (or any integer's low 4 bits) sign-extended; uint4 values are the nibble */
TL_INLINE int8_t tl_s4(int x) { return (int8_t)(((x & 0xF) ^ 8) - 8); }

TL_INLINE uint8_t tl_nibble_get(const uint8_t *p, int64_t k) {
    return (uint8_t)((p[k >> 1] >> ((k & 1) << 2)) & 0xFu);
}
/* The caller is the only writer of the byte (a block's own tile). */
TL_INLINE void tl_nibble_set(uint8_t *p, int64_t k, uint8_t c) {
    int sh = (int)((k & 1) << 2);
    p[k >> 1] = (uint8_t)((p[k >> 1] & ~(0xFu << sh)) | ((c & 0xFu) << sh));
}
/* Another thread may write the other nibble at the same time (blocks on OpenMP threads):
 * only this thread writes these 4 bits, so one atomic xor of (old ^ new) sets them. */
TL_INLINE void tl_nibble_set_atomic(uint8_t *p, int64_t k, uint8_t c) {
    int sh = (int)((k & 1) << 2);
    uint8_t old = __atomic_load_n(&p[k >> 1], __ATOMIC_RELAXED);
    uint8_t flip = (uint8_t)((((old >> sh) ^ c) & 0xFu) << sh);
    if (flip) __atomic_fetch_xor(&p[k >> 1], flip, __ATOMIC_RELAXED);
}

#endif /* TL_FP4_H_ */
