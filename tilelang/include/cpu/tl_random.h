/* tl_random.h: T.rng_init / T.rng_rand / T.rng_rand_float on the CPU backend. The state types,
 * recurrences and seeding are tl/rng_core.h (shared with the CUDA headers); here curand's mappings of
 * the word stream, and tl_rng_init_state / tl_rng_next / tl_rng_next_* dispatching on the state type
 * (_Generic), so generated code reads the same for every generator. */
#ifndef TL_RANDOM_H_
#define TL_RANDOM_H_

#include "tl/rng_core.h"

/* ---- curand's mappings of the uint32 stream, one set per generator: uniform float
 * u * 2^-32 + 2^-33, uniform double from two words (x ^ y << 21) * 2^-53 + 2^-54, normal by
 * Box-Muller from two (float) or four (double) words, the pair's second value kept. */
#define TL__RNG_MAPPINGS(T, P)                                                                  \
TL_INLINE float P##_float(T *s) { return (float)P##_next(s) * 2.3283064e-10f + 1.1641532e-10f; } \
TL_INLINE double P##_double(T *s) {                                                            \
    uint64_t x = P##_next(s), y = P##_next(s);                                                 \
    return (double)(x ^ (y << 21)) * 1.1102230246251565e-16 + 5.551115123125783e-17;           \
}                                                                                              \
TL_INLINE float P##_normal(T *s) {                                                             \
    if (s->has_normal) { s->has_normal = 0; return s->normal; }                                \
    float u = (float)P##_next(s) * 2.3283064e-10f + 1.1641532e-10f;                            \
    float v = (float)P##_next(s) * 1.4629180792671596e-09f + 7.314590396335798e-10f;           \
    float r = sqrtf(-2.0f * logf(u));                                                          \
    s->normal = r * cosf(v);                                                                   \
    s->has_normal = 1;                                                                         \
    return r * sinf(v);                                                                        \
}                                                                                              \
TL_INLINE double P##_normal_double(T *s) {                                                     \
    if (s->has_normal_d) { s->has_normal_d = 0; return s->normal_d; }                          \
    uint64_t x0 = P##_next(s), x1 = P##_next(s), y0 = P##_next(s), y1 = P##_next(s);           \
    double u = (double)(x0 ^ (x1 << 21)) * 1.1102230246251565e-16 + 5.551115123125783e-17;     \
    double v = (double)(y0 ^ (y1 << 21)) * 2.220446049250313e-16 + 1.1102230246251565e-16;     \
    double r = sqrt(-2.0 * log(u));                                                            \
    s->normal_d = r * cos(3.141592653589793 * v);                                              \
    s->has_normal_d = 1;                                                                       \
    return r * sin(3.141592653589793 * v);                                                     \
}

TL__RNG_MAPPINGS(tl_philox, tl_philox)
TL__RNG_MAPPINGS(tl_xorwow, tl_xorwow)
TL__RNG_MAPPINGS(tl_mrg32k3a, tl_mrg32k3a)

#define TL__RNG_DISPATCH(s, what) \
    _Generic((s), tl_philox *: tl_philox##what, tl_xorwow *: tl_xorwow##what, tl_mrg32k3a *: tl_mrg32k3a##what)
#define tl_rng_init_state(s, seed, seq, off) TL__RNG_DISPATCH(s, _init)(s, seed, seq, off)
#define tl_rng_next(s) TL__RNG_DISPATCH(s, _next)(s)
#define tl_rng_next_float(s) TL__RNG_DISPATCH(s, _float)(s)
#define tl_rng_next_double(s) TL__RNG_DISPATCH(s, _double)(s)
#define tl_rng_next_normal(s) TL__RNG_DISPATCH(s, _normal)(s)
#define tl_rng_next_normal_double(s) TL__RNG_DISPATCH(s, _normal_double)(s)

#endif /* TL_RANDOM_H_ */
