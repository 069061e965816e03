// tl/thread.h -- thread-level helpers the shared C/CUDA expression printer emits for
// T.shfl_* / T.any_sync ..., T.dp4a, T.atomic_load / T.atomic_store (T.rng_* in random.h).
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

