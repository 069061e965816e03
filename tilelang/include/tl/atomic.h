// tl/atomic.h -- atomics the tile ops lower to (T.atomic_add, split-K, ...).
//
// One overloaded spelling per operation so the codegen does not pick
// intrinsics per dtype.  Vector forms cut the number of memory transactions
// for contiguous fragments (half2 / bfloat162 everywhere from sm_80, float2 /
// float4 natively on sm_90, split into scalars before).  All return the old
// value except the vector float forms.
#pragma once

#include "common.h"

namespace tl {

// ------------------------------------------------------------- add
TL_DEVICE float atomic_add(float* addr, float v) { return atomicAdd(addr, v); }
TL_DEVICE double atomic_add(double* addr, double v) { return atomicAdd(addr, v); }
TL_DEVICE int32_t atomic_add(int32_t* addr, int32_t v) { return atomicAdd(addr, v); }
TL_DEVICE uint32_t atomic_add(uint32_t* addr, uint32_t v) { return atomicAdd(addr, v); }
TL_DEVICE half_t atomic_add(half_t* addr, half_t v) { return atomicAdd(addr, v); }
TL_DEVICE bfloat16_t atomic_add(bfloat16_t* addr, bfloat16_t v) { return atomicAdd(addr, v); }
TL_DEVICE __half2 atomic_add(__half2* addr, __half2 v) { return atomicAdd(addr, v); }
TL_DEVICE __nv_bfloat162 atomic_add(__nv_bfloat162* addr, __nv_bfloat162 v) {
  return atomicAdd(addr, v);
}

// Two adjacent halves / bfloat16s (addr must be 4-byte aligned).
TL_DEVICE void atomic_add_x2(half_t* addr, half_t lo, half_t hi) {
  atomicAdd(reinterpret_cast<__half2*>(addr), __halves2half2(lo, hi));
}
TL_DEVICE void atomic_add_x2(bfloat16_t* addr, bfloat16_t lo, bfloat16_t hi) {
  atomicAdd(reinterpret_cast<__nv_bfloat162*>(addr), __halves2bfloat162(lo, hi));
}
// Two / four adjacent floats (addr 8- / 16-byte aligned).
TL_DEVICE void atomic_add_x2(float* addr, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(addr), make_float2(a, b));
#else
  atomicAdd(addr, a);
  atomicAdd(addr + 1, b);
#endif
}
TL_DEVICE void atomic_add_x4(float* addr, float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float4*>(addr), make_float4(a, b, c, d));
#else
  atomicAdd(addr, a);
  atomicAdd(addr + 1, b);
  atomicAdd(addr + 2, c);
  atomicAdd(addr + 3, d);
#endif
}

// ------------------------------------------------------------- max / min
TL_DEVICE int32_t atomic_max(int32_t* addr, int32_t v) { return atomicMax(addr, v); }
TL_DEVICE int32_t atomic_min(int32_t* addr, int32_t v) { return atomicMin(addr, v); }
TL_DEVICE uint32_t atomic_max(uint32_t* addr, uint32_t v) { return atomicMax(addr, v); }
TL_DEVICE uint32_t atomic_min(uint32_t* addr, uint32_t v) { return atomicMin(addr, v); }

// IEEE floats order like sign-magnitude integers: for v >= 0 a signed integer
// max is a float max; for v < 0 (sign bit set) a larger magnitude is a smaller
// float, so the float max is an *unsigned* integer min.  NaN inputs are not
// propagated; -0.0 and +0.0 compare as different (+0.0 wins a max).
TL_DEVICE float atomic_max(float* addr, float v) {
  if (!signbit(v)) {
    return __int_as_float(atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v)));
  }
  return __uint_as_float(atomicMin(reinterpret_cast<unsigned int*>(addr), __float_as_uint(v)));
}
TL_DEVICE float atomic_min(float* addr, float v) {
  if (!signbit(v)) {
    return __int_as_float(atomicMin(reinterpret_cast<int*>(addr), __float_as_int(v)));
  }
  return __uint_as_float(atomicMax(reinterpret_cast<unsigned int*>(addr), __float_as_uint(v)));
}

namespace detail {
template <int Bytes>
struct AtomicWord;
template <>
struct AtomicWord<4> {
  using type = unsigned int;
};
template <>
struct AtomicWord<8> {
  using type = unsigned long long;
};
}  // namespace detail

// Any read-modify-write `op(old, v)` on a 4- or 8-byte T through a
// compare-and-swap loop (e.g. double max); slower than the native forms.
template <class T, class Op>
TL_DEVICE T atomic_cas_update(T* addr, T v, Op op) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8,
                "tl::atomic_cas_update: T must be 4 or 8 bytes (use the 16-bit overloads)");
  using W = typename detail::AtomicWord<sizeof(T)>::type;
  W* waddr = reinterpret_cast<W*>(addr);
  W old = *waddr, assumed;
  do {
    assumed = old;
    T cur = *reinterpret_cast<T*>(&assumed);
    T nxt = op(cur, v);
    old = atomicCAS(waddr, assumed, *reinterpret_cast<W*>(&nxt));
  } while (old != assumed);
  return *reinterpret_cast<T*>(&old);
}

// ------------------------------------------------------------- exchange
TL_DEVICE float atomic_exch(float* addr, float v) { return atomicExch(addr, v); }
TL_DEVICE int32_t atomic_exch(int32_t* addr, int32_t v) { return atomicExch(addr, v); }

}  // namespace tl
