// tl/random.h -- T.rng_init / T.rng_rand / T.rng_rand_float on CUDA. The state types, recurrences and
// seeding are rng_core.h (shared with the CPU backend's cpu/tl_random.h, so both give the same uint32
// words); here the overloaded calls the printer emits and curand's mappings of the word stream (the
// same formulas as the CPU's; sin/cos/log may differ in the last ulp).
#pragma once

#include "common.h"

#define TL_RNG_FN TL_DEVICE
#include "rng_core.h"

// one overloaded name per call for every state type, so the printer names none
#define TL__RNG_OVERLOADS(T)                                                                      \
  TL_DEVICE void tl_rng_init_state(T* s, uint64_t seed, uint64_t seq, uint64_t off) {             \
    T##_init(s, seed, seq, off);                                                                  \
  }                                                                                               \
  TL_DEVICE uint32_t tl_rng_next(T* s) { return T##_next(s); }
TL__RNG_OVERLOADS(tl_philox)
TL__RNG_OVERLOADS(tl_xorwow)
TL__RNG_OVERLOADS(tl_mrg32k3a)
#undef TL__RNG_OVERLOADS

// ------------------------------------------------------------- curand's mappings of the word stream
template <class S>
TL_DEVICE float tl_rng_next_float(S* s) { return (float)tl_rng_next(s) * 2.3283064e-10f + 1.1641532e-10f; }
// Two words, 53 bits: (x ^ y << 21) * 2^-53 + 2^-54 (curand_uniform_double's mapping).
template <class S>
TL_DEVICE double tl_rng_next_double(S* s) {
  uint64_t x = tl_rng_next(s), y = tl_rng_next(s);
  return (double)(x ^ (y << 21)) * 1.1102230246251565e-16 + 5.551115123125783e-17;
}
// Box-Muller on two words: sqrt(-2 ln u) * (sin, cos)(2 pi v); the cos value waits for the next call.
template <class S>
TL_DEVICE float tl_rng_next_normal(S* s) {
  if (s->has_normal) {
    s->has_normal = 0;
    return s->normal;
  }
  float u = (float)tl_rng_next(s) * 2.3283064e-10f + 1.1641532e-10f;
  float v = (float)tl_rng_next(s) * 1.4629180792671596e-09f + 7.314590396335798e-10f;
  float r = sqrtf(-2.0f * logf(u)), sn, cs;
  sincosf(v, &sn, &cs);
  s->normal = r * cs;
  s->has_normal = 1;
  return r * sn;
}
// Four words: u and v with 53 bits each, sqrt(-2 ln u) * (sin, cos)(pi v).
template <class S>
TL_DEVICE double tl_rng_next_normal_double(S* s) {
  if (s->has_normal_d) {
    s->has_normal_d = 0;
    return s->normal_d;
  }
  uint64_t x0 = tl_rng_next(s), x1 = tl_rng_next(s), y0 = tl_rng_next(s), y1 = tl_rng_next(s);
  double u = (double)(x0 ^ (x1 << 21)) * 1.1102230246251565e-16 + 5.551115123125783e-17;
  double v = (double)(y0 ^ (y1 << 21)) * 2.220446049250313e-16 + 1.1102230246251565e-16;
  double r = sqrt(-2.0 * log(u)), sn, cs;
  sincospi(v, &sn, &cs);
  s->normal_d = r * cs;
  s->has_normal_d = 1;
  return r * sn;
}
