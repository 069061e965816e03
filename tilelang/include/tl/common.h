// tl/common.h -- types, macros and scalar helpers shared by every tl header.
//
// Compiles under NVRTC with no host headers: NVRTC has no <stdint.h>, so the
// fixed-width integer names are plain typedefs there (LP64: int64_t is `long`,
// matching glibc, so a later <cstdint> under nvcc declares the same types).
#pragma once

#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
typedef unsigned long uintptr_t;
#else
#include <cstdint>
#endif

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#define TL_DEVICE __device__ __forceinline__
// A fact the codegen states for the optimizer (the thread index's range): nvcc keeps no sign fix-ups
// for divisions and remainders it then knows are of nonnegative values.
#ifndef TL_ASSUME
#define TL_ASSUME(cond) __builtin_assume(cond)
#endif
#define TL_HOST_DEVICE __host__ __device__ __forceinline__

// Feature switches.  They are true on the host pass (nvcc) so that the host
// compiler never trips the arch static_asserts of device-only templates.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define TL_ARCH_SM80 1
#else
#define TL_ARCH_SM80 0
#endif
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
#define TL_ARCH_SM89 1
#else
#define TL_ARCH_SM89 0
#endif
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define TL_ARCH_SM90 1
#else
#define TL_ARCH_SM90 0
#endif
// wgmma and setmaxnreg exist only in the arch-specific sm_90a target.
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TL_ARCH_SM90A 1
#else
#define TL_ARCH_SM90A 0
#endif

namespace tl {

using half_t = __half;
using bfloat16_t = __nv_bfloat16;
using float8_e4m3_t = __nv_fp8_e4m3;
using float8_e5m2_t = __nv_fp8_e5m2;
using fp8_e4_t = float8_e4m3_t;
using fp8_e5_t = float8_e5m2_t;

namespace detail {
// A false that depends on T: a static_assert on it fires only when the
// template is instantiated, i.e. when the user really calls the function.
template <class... T>
struct always_false {
  static constexpr bool value = false;
};
template <int N>
struct always_false_int {
  static constexpr bool value = false;
};
template <class A, class B>
struct is_same {
  static constexpr bool value = false;
};
template <class A>
struct is_same<A, A> {
  static constexpr bool value = true;
};
}  // namespace detail

template <class T>
TL_HOST_DEVICE constexpr T ceildiv(T a, T b) {
  return (a + b - 1) / b;
}

// 32-bit shared-memory address of a generic pointer into shared memory: the
// operand form every PTX instruction on .shared wants.
TL_DEVICE uint32_t smem_addr(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// ---------------------------------------------------------------- max / min
template <class T>
TL_DEVICE T max(T a, T b) {
  return a > b ? a : b;
}
template <class T>
TL_DEVICE T min(T a, T b) {
  return a < b ? a : b;
}
TL_DEVICE float max(float a, float b) { return fmaxf(a, b); }
TL_DEVICE float min(float a, float b) { return fminf(a, b); }
TL_DEVICE double max(double a, double b) { return fmax(a, b); }
TL_DEVICE double min(double a, double b) { return fmin(a, b); }
TL_DEVICE half_t max(half_t a, half_t b) { return __hmax(a, b); }
TL_DEVICE half_t min(half_t a, half_t b) { return __hmin(a, b); }
TL_DEVICE bfloat16_t max(bfloat16_t a, bfloat16_t b) { return __hmax(a, b); }
TL_DEVICE bfloat16_t min(bfloat16_t a, bfloat16_t b) { return __hmin(a, b); }

// ---------------------------------------------------------------- infinity
template <class T>
TL_DEVICE T infinity() {
  static_assert(detail::always_false<T>::value,
                "tl::infinity<T>: T must be float, double, half_t or bfloat16_t");
  return T();
}
template <>
TL_DEVICE float infinity<float>() { return __int_as_float(0x7f800000); }
template <>
TL_DEVICE double infinity<double>() { return __longlong_as_double(0x7ff0000000000000LL); }
template <>
TL_DEVICE half_t infinity<half_t>() { return __ushort_as_half((unsigned short)0x7c00U); }
template <>
TL_DEVICE bfloat16_t infinity<bfloat16_t>() { return __ushort_as_bfloat16((unsigned short)0x7f80U); }

template <class T>
TL_DEVICE T neg_infinity() {
  return -infinity<T>();
}

// ---------------------------------------------------------------- casts
namespace detail {
// Generic conversion goes through static_cast; the 16/8-bit float types go
// through float so that e.g. half -> bfloat16 or fp8 -> half always compiles.
template <class To, class From>
struct Cast {
  static TL_DEVICE To run(From x) { return static_cast<To>(x); }
};
template <class From>
struct Cast<half_t, From> {
  static TL_DEVICE half_t run(From x) { return __float2half_rn(static_cast<float>(x)); }
};
template <class From>
struct Cast<bfloat16_t, From> {
  static TL_DEVICE bfloat16_t run(From x) { return __float2bfloat16_rn(static_cast<float>(x)); }
};
template <class From>
struct Cast<float8_e4m3_t, From> {
  static TL_DEVICE float8_e4m3_t run(From x) { return float8_e4m3_t(static_cast<float>(x)); }
};
template <class From>
struct Cast<float8_e5m2_t, From> {
  static TL_DEVICE float8_e5m2_t run(From x) { return float8_e5m2_t(static_cast<float>(x)); }
};
template <>
struct Cast<half_t, half_t> {
  static TL_DEVICE half_t run(half_t x) { return x; }
};
template <>
struct Cast<bfloat16_t, bfloat16_t> {
  static TL_DEVICE bfloat16_t run(bfloat16_t x) { return x; }
};
template <>
struct Cast<float8_e4m3_t, float8_e4m3_t> {
  static TL_DEVICE float8_e4m3_t run(float8_e4m3_t x) { return x; }
};
template <>
struct Cast<float8_e5m2_t, float8_e5m2_t> {
  static TL_DEVICE float8_e5m2_t run(float8_e5m2_t x) { return x; }
};
template <>
struct Cast<half_t, bfloat16_t> {
  static TL_DEVICE half_t run(bfloat16_t x) { return __float2half_rn(__bfloat162float(x)); }
};
template <>
struct Cast<bfloat16_t, half_t> {
  static TL_DEVICE bfloat16_t run(half_t x) { return __float2bfloat16_rn(__half2float(x)); }
};
}  // namespace detail

// tl::cast<To>(x): one spelling for every scalar conversion the codegen emits.
template <class To, class From>
TL_DEVICE To cast(From x) {
  return detail::Cast<To, From>::run(x);
}

// ---------------------------------------------------------------- math
// exp2 with IEEE-ish accuracy (libdevice); the attention softmax uses this.
TL_DEVICE float exp2f(float x) { return ::exp2f(x); }
// One MUFU.EX2 without range fix-up: flushes denormal results to zero, which
// is what online softmax wants (it is also what --use_fast_math would give).
TL_DEVICE float fast_exp2f(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
TL_DEVICE float fast_log2f(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
TL_DEVICE float fast_rcpf(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// A 16-bit register array kept as pairs in 32-bit words (the codegen's packed fragments):
// element i is half (i & 1) of word i >> 1, so two values take one register.
template <class T>
TL_DEVICE T half_at(uint32_t w, int hi) {
  const uint16_t b = static_cast<uint16_t>(hi ? (w >> 16) : (w & 0xffffu));
  return *reinterpret_cast<const T*>(&b);
}
template <class T>
TL_DEVICE void set_half(uint32_t& w, int hi, T v) {
  const uint32_t b = *reinterpret_cast<const uint16_t*>(&v);
  w = hi ? ((w & 0xffffu) | (b << 16)) : ((w & 0xffff0000u) | b);
}

// Pack two 16-bit floats into the 32-bit register the tensor-core ops read.
TL_DEVICE uint32_t pack_half2(half_t lo, half_t hi) {
  return static_cast<uint32_t>(__half_as_ushort(lo)) |
         (static_cast<uint32_t>(__half_as_ushort(hi)) << 16);
}
TL_DEVICE uint32_t pack_bfloat162(bfloat16_t lo, bfloat16_t hi) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(lo)) |
         (static_cast<uint32_t>(__bfloat16_as_ushort(hi)) << 16);
}

// ---------------------------------------------------------------- vectors
// tl::load_vec<N>(regs, src, pred) / tl::store_vec<N>(dst, regs): N consecutive elements
// of global or shared memory moved as 4-, 8- or 16-byte words (several 16-byte words when
// N elements are wider).  `regs` is a per-thread array with no alignment promise, so the
// words go through memcpy, which the compiler turns into register moves; the memory side
// must be aligned to min(16, N * sizeof(T)) bytes.  !pred loads zeros (a masked lane group).
namespace detail {
template <int Bytes>
struct VecWord {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16,
                "tl::load_vec/store_vec: a vector is 4, 8 or a multiple of 16 bytes");
  using type = uint4;
};
template <>
struct VecWord<4> {
  using type = uint32_t;
};
template <>
struct VecWord<8> {
  using type = uint2;
};
}  // namespace detail

template <int N, class T>
TL_DEVICE void load_vec(T* regs, const T* src, bool pred = true) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  static_assert(kBytes == 4 || kBytes == 8 || kBytes % 16 == 0,
                "tl::load_vec<N>: N * sizeof(T) must be 4, 8 or a multiple of 16 bytes");
  constexpr int kWord = kBytes < 16 ? kBytes : 16;
  using W = typename detail::VecWord<kWord>::type;
#pragma unroll
  for (int w = 0; w < kBytes / kWord; ++w) {
    W v;
    memset(&v, 0, sizeof(W));
    if (pred) v = reinterpret_cast<const W*>(src)[w];
    memcpy(reinterpret_cast<char*>(regs) + w * kWord, &v, kWord);
  }
}

template <int N, class T>
TL_DEVICE void store_vec(T* dst, const T* regs) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  static_assert(kBytes == 4 || kBytes == 8 || kBytes % 16 == 0,
                "tl::store_vec<N>: N * sizeof(T) must be 4, 8 or a multiple of 16 bytes");
  constexpr int kWord = kBytes < 16 ? kBytes : 16;
  using W = typename detail::VecWord<kWord>::type;
#pragma unroll
  for (int w = 0; w < kBytes / kWord; ++w) {
    W v;
    memcpy(&v, reinterpret_cast<const char*>(regs) + w * kWord, kWord);
    reinterpret_cast<W*>(dst)[w] = v;
  }
}

}  // namespace tl
