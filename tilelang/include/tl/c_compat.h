// tl/c_compat.h -- the scalar helpers the shared C/CUDA expression printer emits
// (tl_half, tl_bf16_to_f32, tl_floordiv_i32, tl_atomic_add_f32 ...), for device code.
// bf16 and fp8 values are computed in float and rounded on every store/cast, as on CPU.
#pragma once

#include "common.h"
#include "atomic.h"
#include "fp4.h"
#include "fp8_e8m0.h"
#include "exp2_poly.h"
#include "math_ops.h"

// Short unsigned names that hand-written device code (T.import_source) uses, as nvcc builds
// get them from the host's <sys/types.h>; NVRTC has no host headers.
typedef unsigned int uint;
typedef unsigned char uchar;
typedef unsigned short ushort;

typedef tl::half_t tl_half;
typedef tl::bfloat16_t tl_bf16;
typedef tl::float8_e4m3_t tl_fp8e4m3;
typedef tl::float8_e5m2_t tl_fp8e5m2;

#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif

// T.reinterpret / tirx.reinterpret: the bits of x (a From) read as a To of the same size.
template <class From, class To>
TL_DEVICE To tl_bitcast(From x) {
  static_assert(sizeof(From) == sizeof(To), "tl_bitcast: reinterpret needs two types of one size");
  To r;
  memcpy(&r, &x, sizeof(To));
  return r;
}
#define TL_BITCAST(FROM, TO, X) (tl_bitcast<FROM, TO>(X))

// bf16 -> float as one byte permute (PRMT RZ, sel, x) into the high half: from a register that
// holds two bf16 (a 32-bit shared / global load), __bfloat162float costs the high one a PRMT and
// a shift. Codegen defines TL_BF16_PACK_CVT 0 under the pass_config `tl.disable_bf16_pack_convert`.
#ifndef TL_BF16_PACK_CVT
#define TL_BF16_PACK_CVT 1
#endif
TL_DEVICE float tl_bf16_to_f32(tl_bf16 x) {
#if TL_ARCH_SM80 && TL_BF16_PACK_CVT
  float f;
  asm("mov.b32 %0, {%1, %2};" : "=f"(f) : "h"((unsigned short)0), "h"(__bfloat16_as_ushort(x)));
  return f;
#else
  return __bfloat162float(x);
#endif
}
TL_DEVICE tl_bf16 tl_f32_to_bf16(float x) { return __float2bfloat16_rn(x); }
TL_DEVICE float tl_fp8e4m3_to_f32(tl_fp8e4m3 x) { return float(x); }
TL_DEVICE tl_fp8e4m3 tl_f32_to_fp8e4m3(float x) { return tl_fp8e4m3(x); }
TL_DEVICE float tl_fp8e5m2_to_f32(tl_fp8e5m2 x) { return float(x); }
TL_DEVICE tl_fp8e5m2 tl_f32_to_fp8e5m2(float x) { return tl_fp8e5m2(x); }

// tfloat32: float32 storage, low 13 mantissa bits zero; rounding as cvt.rna.tf32.f32 (nearest,
// ties away from zero), whose low bits are cleared so stored values are exact tf32 values.
TL_DEVICE float tl_f32_to_tf32(float x) {
#if TL_ARCH_SM80
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r & 0xFFFFE000u);
#else
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7F800000u) == 0x7F800000u) return __uint_as_float((u & 0x007FFFFFu) ? (u | 0x00400000u) & 0xFFFFE000u : u);
  return __uint_as_float((u + 0x1000u) & 0xFFFFE000u);
#endif
}
// Loads round too: raw copies (cp.async, TMA) or the caller's float32 tensor may hold any float bits.
TL_DEVICE float tl_tf32_to_f32(float x) { return tl_f32_to_tf32(x); }

TL_DEVICE int32_t tl_floordiv_i32(int32_t a, int32_t b) {
  int32_t q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
TL_DEVICE int64_t tl_floordiv_i64(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
TL_DEVICE int32_t tl_floormod_i32(int32_t a, int32_t b) { return a - tl_floordiv_i32(a, b) * b; }
TL_DEVICE int64_t tl_floormod_i64(int64_t a, int64_t b) { return a - tl_floordiv_i64(a, b) * b; }

// An 8/16-bit `<<` promoted to int, as C computes it; a shift by 32 or more is 0 (PTX shl.b32
// clamps the amount: one SHF, where a guarded C shift costs a compare and a select more).
TL_DEVICE int32_t tl_shl_i32(uint32_t a, uint32_t b) {
#if TL_ARCH_SM80
  uint32_t r;
  asm("shl.b32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return (int32_t)r;
#else
  return b < 32u ? (int32_t)(a << b) : 0;
#endif
}

// All return the element's previous value (T.atomic_add(..., return_prev=True)).
TL_DEVICE float tl_atomic_add_f32(float* p, float v) { return atomicAdd(p, v); }
TL_DEVICE double tl_atomic_add_f64(double* p, double v) { return atomicAdd(p, v); }
TL_DEVICE int32_t tl_atomic_add_i32(int32_t* p, int32_t v) { return atomicAdd(p, v); }
TL_DEVICE uint32_t tl_atomic_add_u32(uint32_t* p, uint32_t v) { return atomicAdd(p, v); }
TL_DEVICE int64_t tl_atomic_add_i64(int64_t* p, int64_t v) {
  return static_cast<int64_t>(
      atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v)));
}
TL_DEVICE tl_half tl_atomic_add_f16(tl_half* p, tl_half v) { return atomicAdd(p, v); }
TL_DEVICE tl_bf16 tl_atomic_add_bf16(tl_bf16* p, float v) { return atomicAdd(p, __float2bfloat16_rn(v)); }
// p[0] += a and p[1] += b, each atomically (p 8-byte aligned, global); no previous values. sm_90 has
// one vector reduction for both (half the L2 atomic requests of two atomicAdds).
TL_DEVICE void tl_atomic_add_v2_f32(float* p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
#endif
}
// p[0..3] += a..d, each atomically (p 16-byte aligned, global); sm_90: one vector reduction.
TL_DEVICE void tl_atomic_add_v4_f32(float* p, float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
#else
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
  atomicAdd(p + 2, c);
  atomicAdd(p + 3, d);
#endif
}
// p[0..1] += s[0..1] / p[0..3] += s[0..3], each atomically, the values read as one vector (s 8- / 16-byte
// aligned, shared or global; p as aligned, global): one LDS.64 / LDS.128 and one vector reduction.
TL_DEVICE void tl_atomic_add_v2_f32_from(float* p, const float* s) {
  const float2 v = *reinterpret_cast<const float2*>(s);
  tl_atomic_add_v2_f32(p, v.x, v.y);
}
TL_DEVICE void tl_atomic_add_v4_f32_from(float* p, const float* s) {
  const float4 v = *reinterpret_cast<const float4*>(s);
  tl_atomic_add_v4_f32(p, v.x, v.y, v.z, v.w);
}
TL_DEVICE float tl_atomic_max_f32(float* p, float v) { return tl::atomic_max(p, v); }
TL_DEVICE float tl_atomic_min_f32(float* p, float v) { return tl::atomic_min(p, v); }
TL_DEVICE int32_t tl_atomic_max_i32(int32_t* p, int32_t v) { return atomicMax(p, v); }
TL_DEVICE int32_t tl_atomic_min_i32(int32_t* p, int32_t v) { return atomicMin(p, v); }
TL_DEVICE uint32_t tl_atomic_max_u32(uint32_t* p, uint32_t v) { return atomicMax(p, v); }
TL_DEVICE int32_t tl_atomic_or_i32(int32_t* p, int32_t v) { return atomicOr(p, v); }
TL_DEVICE uint32_t tl_atomic_or_u32(uint32_t* p, uint32_t v) { return atomicOr(p, v); }
TL_DEVICE uint64_t tl_atomic_or_u64(uint64_t* p, uint64_t v) {
  return (uint64_t)atomicOr(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v);
}
TL_DEVICE int64_t tl_atomic_or_i64(int64_t* p, int64_t v) {
  return (int64_t)atomicOr(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v);
}
TL_DEVICE uint32_t tl_atomic_min_u32(uint32_t* p, uint32_t v) { return atomicMin(p, v); }

// 16-byte copy between global/shared addresses; zero-fills when !pred.
TL_DEVICE void tl_copy_vec16_impl(void* dst, const void* src, bool pred) {
  uint4 v = make_uint4(0, 0, 0, 0);
  if (pred) v = *reinterpret_cast<const uint4*>(src);
  *reinterpret_cast<uint4*>(dst) = v;
}
namespace tl {
TL_DEVICE void copy_vec16(void* dst, const void* src, bool pred) { tl_copy_vec16_impl(dst, src, pred); }
// 8- and 4-byte copies, for rows that are not multiples of 16 bytes.
TL_DEVICE void copy_vec8(void* dst, const void* src, bool pred) {
  uint2 v = make_uint2(0, 0);
  if (pred) v = *reinterpret_cast<const uint2*>(src);
  *reinterpret_cast<uint2*>(dst) = v;
}
TL_DEVICE void copy_vec4(void* dst, const void* src, bool pred) {
  uint32_t v = 0;
  if (pred) v = *reinterpret_cast<const uint32_t*>(src);
  *reinterpret_cast<uint32_t*>(dst) = v;
}
}  // namespace tl

namespace tl {
// A barrier over every thread of the block (warp-specialized kernels spell consumer-only
// barriers as named barriers; this one is the real __syncthreads).
TL_DEVICE void sync_all_threads() { __syncthreads(); }
}  // namespace tl

// The thread index as a value ptxas cannot move: a tile-level copy loop computes its addresses
// from it where it runs, not hoisted out of a persistent tile loop to live across the k-loop
// (transform/cuda/fresh_index.py).
TL_DEVICE int tl_fresh_index(int v) {
  asm volatile("" : "+r"(v));
  return v;
}

// Two adjacent elements in one store (accumulator pairs in the epilogue).
template <class T>
TL_DEVICE void tl_store2(T* p, T a, T b) {
  if constexpr (sizeof(T) == 2) {
    // half / bf16 are class types: a struct of two of them is stored member by member (two 16-bit
    // STG/STS, each sector written twice); their bits packed into one word store once.
    const unsigned short x = *reinterpret_cast<const unsigned short*>(&a);
    const unsigned short y = *reinterpret_cast<const unsigned short*>(&b);
    *reinterpret_cast<unsigned int*>(p) = (unsigned int)x | ((unsigned int)y << 16);
  } else {
    struct alignas(2 * sizeof(T)) Pair { T x, y; };
    *reinterpret_cast<Pair*>(p) = Pair{a, b};
  }
}

// Row reductions over an mma/wgmma accumulator: the 4 lanes of a quad hold one row.
TL_DEVICE float tl_quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
TL_DEVICE float tl_quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
TL_DEVICE float tl_quad_min(float v) {
  v = fminf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fminf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
