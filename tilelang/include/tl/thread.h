// tl/thread.h -- thread-level helpers the shared C/CUDA expression printer emits for
// T.shfl_* / T.any_sync ..., T.dp4a, T.atomic_load / T.atomic_store and T.rng_*.
//
// The names match the CPU header (cpu/tl_cpu.h) where both targets give the call a meaning,
// so one printer serves both.  Shuffles move any 2-, 4- or 8-byte value through its bits.
#pragma once

#include "common.h"

// ------------------------------------------------------------- warp shuffles
namespace tl {
namespace detail {
// Byte copy between objects of any type (NVRTC has no memcpy declaration without host headers).
TL_DEVICE void copy_bytes(void* dst, const void* src, int n) {
  auto* d = reinterpret_cast<unsigned char*>(dst);
  auto* s = reinterpret_cast<const unsigned char*>(src);
  for (int i = 0; i < n; ++i) d[i] = s[i];
}
template <int Bytes>
struct shfl_word { using type = unsigned; };
template <>
struct shfl_word<8> { using type = unsigned long long; };
template <class T>
struct shfl_bits {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "T.shfl_*: only 2-, 4- and 8-byte values can be shuffled");
  using type = typename shfl_word<sizeof(T)>::type;
};
template <class T, class F>
TL_DEVICE T shfl_through_bits(T v, F f) {
  using U = typename shfl_bits<T>::type;
  U u = 0;
  tl::detail::copy_bytes(&u, &v, sizeof(T));
  u = f(u);
  T out;
  tl::detail::copy_bytes(&out, &u, sizeof(T));
  return out;
}
}  // namespace detail
}  // namespace tl

template <class T>
TL_DEVICE T tl_shfl_xor(unsigned mask, T v, int delta, int width) {
  return tl::detail::shfl_through_bits(v, [&](auto u) { return __shfl_xor_sync(mask, u, delta, width); });
}
template <class T>
TL_DEVICE T tl_shfl_down(unsigned mask, T v, int delta, int width) {
  return tl::detail::shfl_through_bits(v, [&](auto u) { return __shfl_down_sync(mask, u, delta, width); });
}
template <class T>
TL_DEVICE T tl_shfl_up(unsigned mask, T v, int delta, int width) {
  return tl::detail::shfl_through_bits(v, [&](auto u) { return __shfl_up_sync(mask, u, delta, width); });
}
template <class T>
TL_DEVICE T tl_shfl_idx(unsigned mask, T v, int lane, int width) {
  return tl::detail::shfl_through_bits(v, [&](auto u) { return __shfl_sync(mask, u, lane, width); });
}
TL_DEVICE int tl_any_sync(unsigned mask, int p) { return __any_sync(mask, p); }
TL_DEVICE int tl_all_sync(unsigned mask, int p) { return __all_sync(mask, p); }
TL_DEVICE uint64_t tl_ballot(unsigned mask, int p) { return (uint64_t)__ballot_sync(mask, p); }
TL_DEVICE uint64_t tl_activemask() { return (uint64_t)__activemask(); }
TL_DEVICE void tl_sync_warp(unsigned mask) { __syncwarp(mask); }

// ------------------------------------------------------------- block votes, matches, warp reduces
TL_DEVICE int tl_syncthreads_count(int p) { return __syncthreads_count(p); }
TL_DEVICE int tl_syncthreads_and(int p) { return __syncthreads_and(p); }
TL_DEVICE int tl_syncthreads_or(int p) { return __syncthreads_or(p); }

namespace tl {
namespace detail {
template <int Bytes>
struct match_word { using type = unsigned; };
template <>
struct match_word<8> { using type = unsigned long long; };
// the bits of a 1-, 2-, 4- or 8-byte value, widened to the word __match_*_sync compares
template <class T>
TL_DEVICE typename match_word<sizeof(T)>::type match_bits(T v) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "T.match_*_sync: only 1-, 2-, 4- and 8-byte values can be matched");
  typename match_word<sizeof(T)>::type u = 0;
  tl::detail::copy_bytes(&u, &v, sizeof(T));
  return u;
}
}  // namespace detail
}  // namespace tl

template <class T>
TL_DEVICE unsigned tl_match_any(unsigned mask, T v) { return __match_any_sync(mask, tl::detail::match_bits(v)); }
template <class T>
TL_DEVICE unsigned tl_match_all(unsigned mask, T v) {
  int pred;
  return __match_all_sync(mask, tl::detail::match_bits(v), &pred);
}

// Every lane of the warp gets op over the warp's 32 values (an xor butterfly).
#define TL_WARP_REDUCE(NAME, EXPR)                                        \
  template <class T>                                                      \
  TL_DEVICE T NAME(T a) {                                                 \
    for (int off = 16; off > 0; off >>= 1) {                              \
      T b = tl_shfl_xor(0xffffffffu, a, off, 32);                         \
      a = (EXPR);                                                         \
    }                                                                     \
    return a;                                                             \
  }
TL_WARP_REDUCE(tl_warp_reduce_sum, a + b)
TL_WARP_REDUCE(tl_warp_reduce_max, b > a ? b : a)
TL_WARP_REDUCE(tl_warp_reduce_min, b < a ? b : a)
TL_WARP_REDUCE(tl_warp_reduce_bitand, a & b)
TL_WARP_REDUCE(tl_warp_reduce_bitor, a | b)
#undef TL_WARP_REDUCE

// ------------------------------------------------------------- dp4a
// c[0] += a[0]*b[0] + ... + a[3]*b[3] (int8 x int8 -> int32); a, b need no alignment.
TL_DEVICE int tl_pack4(const int8_t* a) {
  return (int)((uint32_t)(uint8_t)a[0] | (uint32_t)(uint8_t)a[1] << 8 | (uint32_t)(uint8_t)a[2] << 16 |
               (uint32_t)(uint8_t)a[3] << 24);
}
TL_DEVICE void tl_dp4a(const int8_t* a, const int8_t* b, int32_t* c) {
  c[0] = __dp4a(tl_pack4(a), tl_pack4(b), c[0]);
}

// ------------------------------------------------------------- ordered loads / stores
// order: 0 relaxed, 1 consume, 2 acquire, 3 release, 4 acq_rel, 5 seq_cst (T.atomic_load's).
template <class T>
TL_DEVICE T tl_atomic_load(const T* p, int order) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "T.atomic_load: only 4- and 8-byte values");
  if (order == 5) asm volatile("fence.sc.gpu;" ::: "memory");
  T out;
  if constexpr (sizeof(T) == 4) {
    uint32_t v;
    if (order == 0) asm volatile("ld.relaxed.gpu.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    else asm volatile("ld.acquire.gpu.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    tl::detail::copy_bytes(&out, &v, 4);
  } else {
    uint64_t v;
    if (order == 0) asm volatile("ld.relaxed.gpu.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    else asm volatile("ld.acquire.gpu.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    tl::detail::copy_bytes(&out, &v, 8);
  }
  return out;
}
template <class T>
TL_DEVICE void tl_atomic_store(T* p, T value, int order) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "T.atomic_store: only 4- and 8-byte values");
  if (order == 5) asm volatile("fence.sc.gpu;" ::: "memory");
  if constexpr (sizeof(T) == 4) {
    uint32_t v;
    tl::detail::copy_bytes(&v, &value, 4);
    if (order == 0) asm volatile("st.relaxed.gpu.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
    else asm volatile("st.release.gpu.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  } else {
    uint64_t v;
    tl::detail::copy_bytes(&v, &value, 8);
    if (order == 0) asm volatile("st.relaxed.gpu.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
    else asm volatile("st.release.gpu.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
}

// ------------------------------------------------------------- Philox4x32-10 (curand's numbering)
struct tl_philox {
  uint32_t ctr[4], key[2], out[4];
  int idx;
  int has_normal, has_normal_d;  // the second value of the last Box-Muller pair is waiting
  float normal;
  double normal_d;
};
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
TL_DEVICE float tl_rng_next_float(tl_philox* s) { return (float)tl_rng_next(s) * 2.3283064e-10f + 1.1641532e-10f; }
// Two words, 53 bits: (x ^ y << 21) * 2^-53 + 2^-54 (curand_uniform_double's mapping).
TL_DEVICE double tl_rng_next_double(tl_philox* s) {
  uint64_t x = tl_rng_next(s), y = tl_rng_next(s);
  return (double)(x ^ (y << 21)) * 1.1102230246251565e-16 + 5.551115123125783e-17;
}
// Box-Muller on two words: sqrt(-2 ln u) * (sin, cos)(2 pi v); the cos value waits for the next call.
TL_DEVICE float tl_rng_next_normal(tl_philox* s) {
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
TL_DEVICE double tl_rng_next_normal_double(tl_philox* s) {
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
