// tl/fp8_e8m0.h -- float8_e8m0fnu (the OCP MX scale format) for device code, in plain integer
// code: sm_90 and below have no cvt for ue8m0, and the same code runs on every arch.
//
// A byte e is 2^(e - 127): no sign, no mantissa, no zero, no inf; 0xFF is NaN; code 0 (2^-127)
// is a float denormal. Stores give what __nv_cvt_{float,double}_to_e8m0(x, __NV_SATFINITE,
// cudaRoundPosInf) gives (the public TileLang's conversion): |x| rounded UP to a power of two;
// |x| <= 2^-127 (zero included) -> 0; |x| > 2^127 and +-inf -> 254 (2^127); NaN -> 255. A double
// rounds once, from its own bits. Loads are exact (cuda_fp8.h: e8m0 -> bf16 -> float).
#pragma once

#include "common.h"

typedef uint8_t tl_fp8e8m0;

TL_DEVICE tl_fp8e8m0 tl_f32_to_fp8e8m0(float f) {
  uint32_t a = __float_as_uint(f) & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return a == 0x7F800000u ? 0xFEu : 0xFFu;  // inf saturates; NaN
  uint32_t e = a >> 23, m = a & 0x7FFFFFu;
  if (e == 0) return m > 0x400000u ? 1u : 0u;  // denormal: 2^-127 is m = 2^22
  e += m != 0;                                 // round up
  return (tl_fp8e8m0)(e > 0xFEu ? 0xFEu : e);
}

TL_DEVICE tl_fp8e8m0 tl_f64_to_fp8e8m0(double d) {
  uint64_t a = (uint64_t)__double_as_longlong(d) & 0x7FFFFFFFFFFFFFFFull;
  if (a >= 0x7FF0000000000000ull) return a == 0x7FF0000000000000ull ? 0xFEu : 0xFFu;
  int64_t e = (int64_t)(a >> 52);
  if (e == 0) return 0u;  // f64 denormal or zero: below 2^-1022
  e = e - 1023 + 127 + ((a & 0xFFFFFFFFFFFFFull) != 0);  // ceil(log2 |d|) + 127
  return (tl_fp8e8m0)(e < 0 ? 0 : e > 0xFE ? 0xFE : e);
}

TL_DEVICE float tl_fp8e8m0_to_f32(tl_fp8e8m0 v) {
  if (v == 0xFFu) return __uint_as_float(0x7FC00000u);
  return __uint_as_float(v ? (uint32_t)v << 23 : 0x00400000u);
}
TL_DEVICE double tl_fp8e8m0_to_f64(tl_fp8e8m0 v) { return (double)tl_fp8e8m0_to_f32(v); }
