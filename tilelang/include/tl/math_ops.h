// tl/math_ops.h -- the elementwise math of T.* that CUDA has no single spelling for; the CPU
// backend's include/cpu/tl_math.h defines the same names with the same results.
//
//   tl_popc32/64, tl_clz32/64   T.popcount / T.clz (clz(0) is the width)
//   tl_ffs32/64, tl_fns         T.__ffs / T.__fns (CUDA's __ffs, __ffsll, __fns)
//   tl_clamp_f32/f64            T.clamp on floats: a NaN operand gives NaN
//   tl_f32_to_fp8*_nosat        T.cast(x, fp8, sat=False): e4m3fn overflows to NaN, e5m2 to inf
//   tl_f32_to_fp8_dir           T.cast(x, fp8, round="rz" / "rp" / "rm") as the float8 value
//   tl_fast_rcp                 T.fast_rcp: rcp.approx.ftz.f32 (about 1 ulp; subnormals flush)
// T.ieee_* print CUDA's own __fadd_rz ... __dsqrt_rd directly.
#pragma once

#include "common.h"

TL_DEVICE int32_t tl_popc32(uint32_t x) { return __popc(x); }
TL_DEVICE int32_t tl_popc64(uint64_t x) { return __popcll((unsigned long long)x); }
TL_DEVICE int32_t tl_clz32(uint32_t x) { return __clz((int)x); }
TL_DEVICE int32_t tl_clz64(uint64_t x) { return __clzll((long long)x); }
TL_DEVICE int32_t tl_ffs32(uint32_t x) { return __ffs((int)x); }
TL_DEVICE int32_t tl_ffs64(uint64_t x) { return __ffsll((long long)x); }
TL_DEVICE uint32_t tl_fns(uint32_t mask, uint32_t base, int32_t offset) { return __fns(mask, base, offset); }

TL_DEVICE float tl_clamp_f32(float x, float lo, float hi) {
  if (x != x) return x;
  if (lo != lo) return lo;
  if (hi != hi) return hi;
  return fminf(fmaxf(x, lo), hi);
}
TL_DEVICE double tl_clamp_f64(double x, double lo, double hi) {
  if (x != x) return x;
  if (lo != lo) return lo;
  if (hi != hi) return hi;
  return fmin(fmax(x, lo), hi);
}

TL_DEVICE tl::float8_e4m3_t tl_f32_to_fp8e4m3_nosat(float x) {
  tl::float8_e4m3_t r;
  r.__x = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3);
  return r;
}
TL_DEVICE tl::float8_e5m2_t tl_f32_to_fp8e5m2_nosat(float x) {
  tl::float8_e5m2_t r;
  r.__x = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
  return r;
}

TL_DEVICE float tl_fast_rcp(float x) {
#ifdef __CUDA_ARCH__
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return 1.0f / x;
#endif
}

#define TL_FP8_DIR_FN TL_DEVICE
#include "fp8_dir.h"  // T.cast(x, fp8, round="rz" / "rp" / "rm"), shared with the CPU backend
