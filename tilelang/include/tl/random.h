// tl/random.h -- the per-thread generators behind T.rng_init / T.rng_rand / T.rng_rand_float.
//
// language/random.py documents the streams; cpu/tl_random.h is the CPU twin and gives the same
// uint32 words (the float mappings use the same formulas; sin/cos/log may differ in the last ulp).
//   tl_philox    Philox4x32-10 with curand's numbering (key = seed, counter e / 4 + s * 2^64).
//   tl_xorwow    Marsaglia's xorwow: five xorshift words and a Weyl counter d (+= 362437).
//   tl_mrg32k3a  L'Ecuyer's MRG32k3a: two order-3 recurrences mod m1 = 2^32 - 209 and
//                m2 = 2^32 - 22853; output z = (p1 - p2) mod m1 in [1, m1].
// XORWOW and MRG32k3a take (seed, subsequence) through a splitmix64 hash (not curand's streams);
// the offset steps the recurrence (xorwow, linear in the offset) or jumps by matrix powers
// (mrg32k3a).  Every state type has the same overloaded calls, so the printer names none.
#pragma once

#include "common.h"

struct tl_rng_normals {  // the second value of the last Box-Muller pair is waiting
  int has_normal, has_normal_d;
  float normal;
  double normal_d;
};
struct tl_philox : tl_rng_normals {
  uint32_t ctr[4], key[2], out[4];
  int idx;
};
struct tl_xorwow : tl_rng_normals {
  uint32_t x[5], d;
};
struct tl_mrg32k3a : tl_rng_normals {
  long long s1[3], s2[3];
};

// ------------------------------------------------------------- Philox4x32-10
TL_DEVICE void tl_philox_block(tl_philox* s) {
  uint32_t c0 = s->ctr[0], c1 = s->ctr[1], c2 = s->ctr[2], c3 = s->ctr[3], k0 = s->key[0], k1 = s->key[1];
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    uint32_t h0 = __umulhi(0xD2511F53u, c0), l0 = 0xD2511F53u * c0;
    uint32_t h1 = __umulhi(0xCD9E8D57u, c2), l1 = 0xCD9E8D57u * c2;
    c0 = h1 ^ c1 ^ k0; c1 = l1; c2 = h0 ^ c3 ^ k1; c3 = l0;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  s->out[0] = c0; s->out[1] = c1; s->out[2] = c2; s->out[3] = c3;
}
TL_DEVICE void tl_rng_init_state(tl_philox* s, uint64_t seed, uint64_t seq, uint64_t off) {
  s->key[0] = (uint32_t)seed; s->key[1] = (uint32_t)(seed >> 32);
  s->ctr[0] = (uint32_t)(off / 4); s->ctr[1] = (uint32_t)((off / 4) >> 32);
  s->ctr[2] = (uint32_t)seq; s->ctr[3] = (uint32_t)(seq >> 32);
  s->idx = (int)(off % 4);
  s->has_normal = s->has_normal_d = 0;
  tl_philox_block(s);
}
TL_DEVICE uint32_t tl_rng_next(tl_philox* s) {
  uint32_t v = s->out[s->idx++];
  if (s->idx == 4) {
    uint64_t lo = ((uint64_t)s->ctr[1] << 32 | s->ctr[0]) + 1;
    s->ctr[0] = (uint32_t)lo; s->ctr[1] = (uint32_t)(lo >> 32);
    if (lo == 0 && ++s->ctr[2] == 0) ++s->ctr[3];
    tl_philox_block(s);
    s->idx = 0;
  }
  return v;
}

// ------------------------------------------------------------- seeding hash (xorwow, mrg32k3a)
// Word i of (seed, seq) is splitmix64's i-th output from t = mix(mix(seed) ^ seq).
TL_DEVICE uint64_t tl_rng_mix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
TL_DEVICE uint64_t tl_rng_seed_word(uint64_t seed, uint64_t seq, int i) {
  return tl_rng_mix64(tl_rng_mix64(tl_rng_mix64(seed) ^ seq) + (uint64_t)i * 0x9E3779B97F4A7C15ull);
}

// ------------------------------------------------------------- XORWOW
TL_DEVICE uint32_t tl_rng_next(tl_xorwow* s) {
  uint32_t t = s->x[0] ^ (s->x[0] >> 2);
  s->x[0] = s->x[1]; s->x[1] = s->x[2]; s->x[2] = s->x[3]; s->x[3] = s->x[4];
  s->x[4] = (s->x[4] ^ (s->x[4] << 4)) ^ (t ^ (t << 1));
  s->d += 362437u;
  return s->x[4] + s->d;
}
TL_DEVICE void tl_rng_init_state(tl_xorwow* s, uint64_t seed, uint64_t seq, uint64_t off) {
  uint64_t w0 = tl_rng_seed_word(seed, seq, 0), w1 = tl_rng_seed_word(seed, seq, 1), w2 = tl_rng_seed_word(seed, seq, 2);
  s->x[0] = (uint32_t)w0; s->x[1] = (uint32_t)(w0 >> 32);
  s->x[2] = (uint32_t)w1; s->x[3] = (uint32_t)(w1 >> 32);
  s->x[4] = (uint32_t)w2; s->d = (uint32_t)(w2 >> 32);
  if ((s->x[0] | s->x[1] | s->x[2] | s->x[3] | s->x[4]) == 0) s->x[0] = 1;  // xorshift's one fixed point
  s->has_normal = s->has_normal_d = 0;
  for (uint64_t i = 0; i < off; ++i) tl_rng_next(s);  // NOTE: linear in the offset
}

// ------------------------------------------------------------- MRG32k3a
TL_DEVICE uint32_t tl_rng_next(tl_mrg32k3a* s) {
  const long long m1 = 4294967087ll, m2 = 4294944443ll;
  long long p1 = (1403580ll * s->s1[1] - 810728ll * s->s1[0]) % m1;
  long long p2 = (527612ll * s->s2[2] - 1370589ll * s->s2[0]) % m2;
  if (p1 < 0) p1 += m1;
  if (p2 < 0) p2 += m2;
  s->s1[0] = s->s1[1]; s->s1[1] = s->s1[2]; s->s1[2] = p1;
  s->s2[0] = s->s2[1]; s->s2[1] = s->s2[2]; s->s2[2] = p2;
  return (uint32_t)(p1 > p2 ? p1 - p2 : p1 - p2 + m1);
}
// v = A^n v (mod m) for one component's step matrix (rows (0 1 0), (0 0 1), (a0 a1 a2)), by squaring.
TL_DEVICE void tl_mrg32k3a_jump(long long* v, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t m, uint64_t n) {
  uint64_t p[3][3] = {{0, 1, 0}, {0, 0, 1}, {a0, a1, a2}};
  while (n) {
    if (n & 1) {
      uint64_t w[3];
      for (int i = 0; i < 3; ++i) {
        uint64_t acc = 0;
        for (int k = 0; k < 3; ++k) acc = (acc + p[i][k] * (uint64_t)v[k] % m) % m;
        w[i] = acc;
      }
      for (int i = 0; i < 3; ++i) v[i] = (long long)w[i];
    }
    uint64_t q[3][3];
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        uint64_t acc = 0;
        for (int k = 0; k < 3; ++k) acc = (acc + p[i][k] * p[k][j] % m) % m;
        q[i][j] = acc;
      }
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) p[i][j] = q[i][j];
    n >>= 1;
  }
}
TL_DEVICE void tl_rng_init_state(tl_mrg32k3a* s, uint64_t seed, uint64_t seq, uint64_t off) {
  const uint64_t m1 = 4294967087ull, m2 = 4294944443ull;
  for (int i = 0; i < 3; ++i) {
    s->s1[i] = (long long)(tl_rng_seed_word(seed, seq, i) % m1);
    s->s2[i] = (long long)(tl_rng_seed_word(seed, seq, 3 + i) % m2);
  }
  if ((s->s1[0] | s->s1[1] | s->s1[2]) == 0) s->s1[0] = 1;  // the all-zero state is a fixed point
  if ((s->s2[0] | s->s2[1] | s->s2[2]) == 0) s->s2[0] = 1;
  s->has_normal = s->has_normal_d = 0;
  tl_mrg32k3a_jump(s->s1, m1 - 810728, 1403580, 0, m1, off);
  tl_mrg32k3a_jump(s->s2, m2 - 1370589, 0, 527612, m2, off);
}

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
