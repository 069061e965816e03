/* tl/fp8_dir.h: T.cast(x, fp8, round="rz" / "rp" / "rm") (mode 1 / 2 / 3), as the float8 value (exact
 * in float), one copy for both backends: the CPU backend's C (cpu/tl_math.h defines TL_FP8_DIR_FN as
 * TL_INLINE first) and the CUDA headers (tl/math_ops.h defines it as TL_DEVICE first). Plain C that is
 * also valid CUDA C++.
 * x in units of the format's last place at |x| (m mantissa bits, smallest normal exponent emin),
 * floored or ceiled (exact: scaling by powers of two), signed zero kept. A rounding away from zero
 * past maxv, or an infinite x, gives `over` with x's sign (maxv under sat, else inf / NaN); a
 * rounding toward zero stops at maxv. */
#ifndef TL_FP8_DIR_H_
#define TL_FP8_DIR_H_

#ifndef TL_FP8_DIR_FN
#define TL_FP8_DIR_FN static inline
#endif

TL_FP8_DIR_FN float tl_f32_to_fp8_dir(float x, int mode, int m, int emin, float maxv, float over) {
    if (x != x) return x;
    if (isinf(x)) return copysignf(over, x);
    if (x == 0.0f) return x;
    int e;
    frexpf(fabsf(x), &e);  /* |x| in [2^(e-1), 2^e) */
    const float ulp = ldexpf(1.0f, (e - 1 > emin ? e - 1 : emin) - m);
    const float lo = floorf(x / ulp) * ulp, hi = ceilf(x / ulp) * ulp;
    float r = mode == 1 ? (x > 0.0f ? lo : hi) : mode == 2 ? hi : lo;
    if (fabsf(r) > maxv) r = copysignf(fabsf(r) >= fabsf(x) ? over : maxv, x);
    return r == 0.0f ? copysignf(0.0f, x) : r;
}

#endif /* TL_FP8_DIR_H_ */
