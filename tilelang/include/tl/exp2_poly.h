// tl/exp2_poly.h -- 2^x on the FMA pipe, for softmax exponents that would otherwise all queue on
// MUFU.EX2 (16 a clock per SM on sm_90, as slow as the tensor cores at attention head dim 64).
//
// x = n + f with n = rint(x) and f in [-1/2, 1/2]; 2^f = p(f), a degree-3 polynomial (Horner, 3
// FFMA) with p(0) = 1, minimax in relative error; 2^n by adding n << 23 to p's bits (one LEA).
// rint comes from the 1.5 * 2^23 trick: x + 1.5 * 2^23 keeps rint(x) in the low mantissa bits
// (no F2I / FRND, which issue at MUFU's rate), and bits(t) << 23 is n << 23 modulo 2^32.
//
// Accuracy: relative error <= 1.02e-4 (2^-13.2) for x in [-126, 0] (tests/math/test_exp2_poly.py),
// under fp16's half ulp (2^-11); degree 2 would give 2^-9.  Range: x <= 127.  x is first
// clamped to >= -127: -inf, NaN and x <= -127 give +0 exactly (p(0) = 1 makes n = -127 the
// all-zero bit pattern); for x in (-127, -126) the result is a subnormal pattern within 2^-126 of
// 2^x, which flush-to-zero arithmetic (fast math) reads as 0, as ex2.approx.ftz would return.
// Coefficients: scripts/exp2_poly_fit.py (c1..c3 of p(f) = 1 + c1 f + c2 f^2 + c3 f^3).
#pragma once

#include "common.h"

#define TL_EXP2_POLY_C1 0x1.62f5fap-1f  // 0.693282902
#define TL_EXP2_POLY_C2 0x1.f00c4ep-3f  // 0.242210969
#define TL_EXP2_POLY_C3 0x1.c2a25cp-5f  // 0.0550090596

TL_DEVICE float tl_exp2_poly(float x) {
  const float shift = 12582912.0f;  // 1.5 * 2^23
  x = fmaxf(x, -127.0f);
  const float t = x + shift;
  const float f = x - (t - shift);
  float p = fmaf(TL_EXP2_POLY_C3, f, TL_EXP2_POLY_C2);
  p = fmaf(p, f, TL_EXP2_POLY_C1);
  p = fmaf(p, f, 1.0f);
  return __uint_as_float(__float_as_uint(p) + (__float_as_uint(t) << 23));
}
